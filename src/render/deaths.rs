//! One provider death, one report: the first failure a crashed provider causes is printed
//! whole (with its crash output); the other resources it failed are gathered and named in one
//! block when the phase ends, those whose operation was in flight (the object may exist) apart
//! from those that never reached it (DESIGN §97).
//!
//! Owns: gathering by provider and that block's text. Not: the first failure's lines (the
//! human printer's), nor the `--json` stream, which keeps one `failed` event per resource.

use std::collections::BTreeMap;
use std::io::Write;

use super::Style;
use crate::diag::Diagnostic;
use crate::secrets::Redactor;

/// How many of the resources that never reached the dead provider are named.
const NAMED_NOT_STARTED: usize = 10;

/// The deaths seen in this phase, by provider name.
#[derive(Default)]
pub(super) struct Deaths {
    by_provider: BTreeMap<String, Casualties>,
}

/// What one death failed after the failure printed whole.
#[derive(Default)]
struct Casualties {
    /// Operations sent before it died: their objects may exist.
    interrupted: Vec<String>,
    /// Calls that changed nothing (validation, planning, reading).
    not_started: Vec<String>,
}

impl Deaths {
    /// Whether the failure of `id` is one more of a death already printed: then it is
    /// gathered for [`Deaths::write`] instead of printed. The first failure of a death is not.
    pub(super) fn gather(&mut self, id: &str, diagnostics: &[Diagnostic]) -> bool {
        let Some(gone) = diagnostics.iter().find_map(|d| d.provider_gone.as_ref()) else {
            return false;
        };
        let Some(casualties) = self.by_provider.get_mut(&gone.provider) else {
            self.by_provider
                .insert(gone.provider.clone(), Casualties::default());
            return false;
        };
        match gone.operation {
            true => casualties.interrupted.push(id.to_string()),
            false => casualties.not_started.push(id.to_string()),
        }
        true
    }

    /// Writes one block per death that failed more than the resource printed whole, and
    /// forgets every death (a provider started again in a later phase may die again).
    pub(super) fn write(&mut self, err: &mut dyn Write, s: Style, r: &Redactor) {
        for (provider, c) in std::mem::take(&mut self.by_provider) {
            let more = c.interrupted.len() + c.not_started.len();
            if more == 0 {
                continue;
            }
            let _ = writeln!(
                err,
                "{} provider {}'s crash (above) also failed {more} more resource(s):",
                s.paint("31", "!"),
                s.name(r, &provider)
            );
            if !c.interrupted.is_empty() {
                let names: Vec<String> = c.interrupted.iter().map(|id| s.name(r, id)).collect();
                let _ = writeln!(
                    err,
                    "    in flight when it died, the object may exist ({}): {}",
                    names.len(),
                    names.join(", ")
                );
            }
            if !c.not_started.is_empty() {
                let named = c.not_started.iter().take(NAMED_NOT_STARTED);
                let names: Vec<String> = named.map(|id| s.name(r, id)).collect();
                let rest = c.not_started.len() - names.len();
                let rest = match rest {
                    0 => String::new(),
                    n => format!(" and {n} more"),
                };
                let _ = writeln!(
                    err,
                    "    not started, nothing changed ({}): {}{rest}",
                    c.not_started.len(),
                    names.join(", ")
                );
            }
        }
    }
}
