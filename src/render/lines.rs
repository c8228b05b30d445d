//! The human lines of each event the printer writes without keeping anything: one function per
//! event, as ripgrep's printer has one per kind of line.
//!
//! Owns: the words and layout of those lines. Not: which event comes when, what the printer
//! remembers between events (the ticker, phase headers, plans shown: `Human`), or escaping
//! (every name and value goes through `escape`/`Style::name`).

use std::io::Write;

use super::{escape, object_new, show_change, write_diagnostic, Style};
use crate::diag::Diagnostic;
use crate::engine::{describe_waits, Action, AttrChange, Event, Wait};
use crate::secrets::Redactor;

/// A plan row (`Event::Planned`): the action, the address and type, each attribute's change,
/// and the notes that explain it.
pub(super) fn planned(out: &mut dyn Write, s: Style, r: &Redactor, event: &Event) {
    let Event::Planned {
        id,
        type_name,
        action,
        changes,
        deposed,
        drifted,
        triggered_by,
        ..
    } = event
    else {
        return;
    };
    let _ = writeln!(
        out,
        "{} {}{} ({})",
        s.action(*action),
        s.name(r, id),
        deposed_note(r, deposed),
        escape(r, type_name)
    );
    for c in changes {
        let _ = writeln!(out, "      {}", show_change(r, c, object_new(*action)));
    }
    for cause in drifted {
        let note = format!("(because {} changed outside Nivis)", escape(r, cause));
        let _ = writeln!(out, "      {}", s.dim(&note));
    }
    for cause in triggered_by {
        let note = format!("(replace triggered by {})", escape(r, cause));
        let _ = writeln!(out, "      {}", s.dim(&note));
    }
    if let Some(note) = forget_note(*action) {
        let _ = writeln!(out, "      {}", s.dim(note));
    }
}

/// A deferred row (`Event::Deferred`): what may happen in a later phase, and what it waits on.
pub(super) fn deferred(out: &mut dyn Write, s: Style, r: &Redactor, event: &Event) {
    let Event::Deferred {
        id,
        type_name,
        in_state,
        waits,
        ..
    } = event
    else {
        return;
    };
    // A data source is read, never created (issue 48, F18); ids of data sources start `data.`
    // (as `Tally` tells them apart).
    let (sym, may) = match (id.starts_with("data."), in_state) {
        (true, _) => (s.paint("36", "<=?"), "will be read"),
        (false, true) => (s.paint("33", "~?"), "may be updated or replaced"),
        (false, false) => (s.paint("32", "+?"), "will be created"),
    };
    let _ = writeln!(out, "{sym} {} ({})", s.name(r, id), escape(r, type_name));
    let waits = escape(r, &describe_waits(waits));
    let note = format!("{may} in a later phase: waits on {waits}");
    let _ = writeln!(out, "      {}", s.dim(&note));
}

/// A Nix value the plan cannot resolve yet (`Event::ConsumerPending`).
pub(super) fn consumer_pending(
    out: &mut dyn Write,
    s: Style,
    r: &Redactor,
    id: &str,
    waits: &[Wait],
) {
    let note = format!(
        "Nix value {} resolves in a later phase (waits on {})",
        escape(r, id),
        escape(r, &describe_waits(waits))
    );
    let _ = writeln!(out, "{} {}", s.dim("…"), s.dim(&note));
}

/// A failed operation's diagnostics, on stderr, each naming the resource (`Event::Failed`).
pub(super) fn failed(s: Style, r: &Redactor, id: &str, diagnostics: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    if diagnostics.is_empty() {
        let d = Diagnostic::error("operation failed").for_resource(id);
        write_diagnostic(&mut err, s, r, &d);
    }
    for d in diagnostics {
        write_diagnostic(&mut err, s, r, &d.clone().for_resource(id));
    }
}

/// A resource not attempted because one it depends on failed (`Event::Skipped`), on stderr.
pub(super) fn skipped(s: Style, r: &Redactor, id: &str, because: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "{} {} not attempted: it depends on {} which failed",
        s.paint("31", "!"),
        s.name(r, id),
        s.name(r, because)
    );
}

/// A move (`Event::Moved`): planned, or recorded in state.
pub(super) fn moved(out: &mut dyn Write, s: Style, r: &Redactor, event: &Event) {
    let Event::Moved {
        from,
        to,
        type_name,
        recorded,
        ..
    } = event
    else {
        return;
    };
    let (sym, from, to) = (s.paint("36", "->"), s.name(r, from), s.name(r, to));
    if *recorded {
        let _ = writeln!(
            out,
            "{sym} {from} moved to {to}: recorded in state (no provider call)"
        );
        return;
    }
    let _ = writeln!(out, "{sym} {from} moved to {to} ({})", escape(r, type_name));
    let note = "the same object under a new address: only the state changes";
    let _ = writeln!(out, "      {}", s.dim(note));
}

/// An import (`Event::Imported`): planned, or recorded in state.
pub(super) fn imported(out: &mut dyn Write, s: Style, r: &Redactor, event: &Event) {
    let Event::Imported {
        id,
        type_name,
        import_id,
        recorded,
        ..
    } = event
    else {
        return;
    };
    let what = if *recorded {
        "imported: recorded in state"
    } else {
        "to import"
    };
    let _ = writeln!(
        out,
        "{} {} {what} from id {} ({})",
        s.paint("36", "<="),
        s.name(r, id),
        escape(r, &format!("{import_id:?}")),
        escape(r, type_name)
    );
}

/// What a refresh found changed outside Nivis (`Event::Drift`), or gone.
pub(super) fn drift(
    out: &mut dyn Write,
    s: Style,
    r: &Redactor,
    id: &str,
    (changes, gone): (&[AttrChange], bool),
) {
    if gone {
        let _ = writeln!(
            out,
            "{} {} no longer exists (removed outside Nivis)",
            s.paint("31", "!"),
            s.name(r, id)
        );
        return;
    }
    let _ = writeln!(
        out,
        "{} {} changed outside Nivis:",
        s.paint("33", "!"),
        s.name(r, id)
    );
    for c in changes {
        let _ = writeln!(out, "      {}", show_change(r, c, false));
    }
}

/// The run stopped at `--max-phases` (`Event::PhaseLimit`).
pub(super) fn phase_limit(out: &mut dyn Write, s: Style, apply_phases: u32) {
    let text =
        format!("Stopped after {apply_phases} phase(s) (--max-phases); not at a fixpoint yet.");
    let _ = writeln!(out, "{}", s.ember(&text));
}

/// A saved plan written, or being applied (`Event::PlanFile`).
pub(super) fn plan_file(
    out: &mut dyn Write,
    r: &Redactor,
    path: &str,
    sha256: &str,
    applying: bool,
) {
    let (path, sha256) = (escape(r, path), escape(r, sha256));
    if applying {
        let _ = writeln!(out, "Applying the saved plan {path} ({sha256}).");
    } else {
        let _ = writeln!(
            out,
            "\nSaved the plan to {path} ({sha256}); `nivis show {path}` prints it."
        );
    }
}

/// What a plan line for an action that forgets an object must say.
fn forget_note(action: Action) -> Option<&'static str> {
    match action {
        Action::Forget => Some(
            "forget: removed from state and left as it is (lib.removed with destroy = false, \
             or a provider that cannot delete objects)",
        ),
        Action::Recreate => Some(
            "re-create: a new object replaces it in state; the old one is forgotten, not deleted \
             (its provider can neither update nor delete this type)",
        ),
        _ => None,
    }
}

/// ` (deposed object deposed-0)` after a resource id, or nothing.
pub(super) fn deposed_note(r: &Redactor, deposed: &Option<String>) -> String {
    deposed
        .as_ref()
        .map(|key| format!(" (deposed object {})", escape(r, key)))
        .unwrap_or_default()
}
