//! What a person reads at the end of a command and at its prompt: the summary of what the
//! plan, apply, destroy or refresh did, the confirmation question, diagnostics on stderr; and,
//! before the plan, which other project's state it read (lineage and serial, DESIGN §98).
//!
//! Not: the per-event lines (`Human`), JSON (`jsonl`), or deciding anything.

use super::summary::Tally;
use super::{done_verb, escape, json_text, out, outln, plan_summary, write_diagnostic, Style};
use crate::diag::Diagnostic;
use crate::engine::plan_file::{SavedPlan, VariableRecord};
use crate::engine::{describe_waits, Action, Report};
use crate::secrets::Redactor;

/// Writes "Reading remote state NAME: LOCATION (lineage L, serial N)" for an
/// [`Event::RemoteState`](crate::engine::Event::RemoteState); any other event writes nothing.
pub(super) fn write_remote_state(
    out: &mut dyn std::io::Write,
    r: &Redactor,
    event: &crate::engine::Event,
) {
    if let crate::engine::Event::RemoteState {
        name,
        location,
        lineage,
        serial,
    } = event
    {
        let _ = writeln!(
            out,
            "Reading remote state {}: {} (lineage {}, serial {serial})",
            escape(r, name),
            escape(r, location),
            escape(r, lineage)
        );
    }
}

/// Asks `question` below the plan just printed, set off by a blank line; only `yes` agrees.
pub(crate) fn confirm_plan(question: &str) -> bool {
    outln!();
    confirm(question)
}

/// Asks `question` on the terminal; only `yes` agrees.
pub(crate) fn confirm(question: &str) -> bool {
    out!("{question} Only 'yes' will be accepted: ");
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    answer.trim() == "yes"
}

/// The answer to a declined confirmation.
pub(crate) fn print_declined(redactor: &Redactor, message: &str) {
    outln!("{}", escape(redactor, message));
}

/// The warning a plan or apply opens with for an operation a stopped run left pending: the
/// object may exist (DESIGN §97).
pub(super) fn write_pending(
    style: Style,
    redactor: &Redactor,
    op: &crate::state::PendingOperation,
) {
    let d = Diagnostic::warning(op.summary()).with_detail(op.remedy());
    write_diagnostics(style, redactor, &[d]);
}

/// Diagnostics on stderr.
pub(crate) fn write_diagnostics(style: Style, redactor: &Redactor, diagnostics: &[Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diagnostics {
        write_diagnostic(&mut err, style, redactor, d);
    }
}

/// A JSON document, pretty, on stdout (secrets redacted, terminal controls escaped).
pub(crate) fn print_json(redactor: &Redactor, value: &serde_json::Value) {
    outln!("{}", json_text(redactor, value, true));
}

/// What a saved plan was made from, before its changes (`nivis show`).
pub(crate) fn print_saved_plan_head(
    redactor: &Redactor,
    path: &str,
    sha256: &str,
    plan: &SavedPlan,
) {
    let b = &plan.basis;
    outln!(
        "Saved plan {} ({})",
        escape(redactor, path),
        escape(redactor, sha256)
    );
    outln!(
        "  made by Nivis {} against state {} serial {} (environment {})",
        escape(redactor, &plan.meta.nivis),
        escape(redactor, &b.state.lineage),
        b.state.serial,
        escape(redactor, &b.state.env)
    );
    outln!("  IR {}", escape(redactor, &b.ir_digest));
    for (id, p) in &b.providers {
        outln!(
            "  provider {}: {} ({}, {})",
            escape(redactor, id),
            escape(redactor, &p.source),
            escape(redactor, &p.protocol),
            escape(redactor, &p.sha256)
        );
    }
    for (name, v) in &b.variables {
        let shown = match v {
            VariableRecord::Value(v) => json_text(redactor, v, false),
            VariableRecord::Hmac(d) => format!("(sensitive, {})", escape(redactor, d)),
            VariableRecord::Unrecorded => "(sensitive, not recorded)".to_string(),
        };
        outln!("  variable {} = {shown}", escape(redactor, name));
    }
    for (flag, ids) in [("--target", &b.targets), ("--replace", &b.replace)] {
        for id in ids {
            outln!("  {flag} {}", escape(redactor, id));
        }
    }
    outln!();
}

/// The closing lines of a successful `command` (`refresh-only` for `plan --refresh-only`).
pub(crate) fn print_summary(
    redactor: &Redactor,
    command: &str,
    report: Option<&Report>,
    tally: &Tally<'_>,
) {
    match (command, report) {
        ("plan", _) => print_plan(redactor, tally, "nivis apply"),
        ("plan-destroy", _) => print_plan(redactor, tally, "nivis destroy"),
        ("refresh-only", _) => {
            print_drift("Refresh-only plan", tally, "`nivis refresh` records it")
        }
        ("apply", Some(r)) => print_apply(redactor, r),
        ("destroy", Some(r)) => print_destroy(redactor, r),
        ("refresh", _) => print_drift("Refresh complete", tally, "recorded in state"),
        ("validate", _) => outln!("The plan is valid."),
        _ => {}
    }
}

/// The plan's counts and what to run next (`verb`: `nivis apply` or `nivis destroy`), with
/// the flags that chose the plan source and state: a plan with nothing to do has no next step.
fn print_plan(redactor: &Redactor, tally: &Tally<'_>, verb: &str) {
    outln!();
    outln!(
        "{}",
        plan_summary(
            &tally.planned,
            tally.deferred.len(),
            tally.moves.len(),
            tally.imports.len()
        )
    );
    if !tally.plans_work() {
        return;
    }
    let flags: String = (tally.source_flags.iter().flatten())
        .map(|flag| format!(" {}", shell_word(flag)))
        .collect();
    let flags = escape(redactor, &flags);
    match &tally.saved_to {
        Some(path) => {
            let path = escape(redactor, &shell_word(path));
            match tally.source_flags {
                Some(_) => {
                    outln!("Run `nivis apply{flags} {path}` to carry out exactly this plan.")
                }
                None => outln!(
                    "Run `nivis apply {path}`, with the plan source and state flags it was \
                     made with (--flake or --file, --attr, --state, --env), to carry out \
                     exactly this plan."
                ),
            }
        }
        None => outln!("Run `{verb}{flags}` to carry it out."),
    }
}

/// `word` as one shell word: bare when it is plain, else single-quoted.
fn shell_word(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./:@+=%,".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn print_drift(head: &str, tally: &Tally<'_>, recorded: &str) {
    outln!();
    match tally.drifted.len() {
        0 => outln!("{head}: no drift, the state matches the real objects."),
        n => outln!("{head}: {n} object(s) differ from the state; {recorded}."),
    }
}

fn print_apply(redactor: &Redactor, r: &Report) {
    outln!();
    if !r.pending.is_empty() {
        outln!(
            "Applied {} resource change(s) across {} phase(s); still pending:",
            r.changed.len(),
            r.apply_phases
        );
        for (id, waits) in &r.pending {
            if waits.is_empty() {
                outln!("  … {} (ready for the next phase)", escape(redactor, id));
            } else {
                outln!(
                    "  … {} waits on {}",
                    escape(redactor, id),
                    escape(redactor, &describe_waits(waits))
                );
            }
        }
        outln!("Run `nivis apply` again (without --max-phases) to continue.");
        return;
    }
    if r.changed.is_empty() {
        outln!(
            "No changes. Fixpoint reached after {} evaluation(s).",
            r.evaluations
        );
        return;
    }
    outln!(
        "Applied {} resource(s) across {} phase(s):",
        r.changed.len(),
        r.apply_phases
    );
    for (id, action) in &r.changed {
        outln!("  ✓ {} ({})", escape(redactor, id), done_verb(*action));
    }
    outln!("Fixpoint reached after {} evaluation(s).", r.evaluations);
}

fn print_destroy(redactor: &Redactor, r: &Report) {
    outln!();
    if r.changed.is_empty() {
        outln!("Nothing to destroy.");
        return;
    }
    outln!("Destroyed {} resource(s):", r.changed.len());
    for (id, action) in &r.changed {
        match action {
            Action::Forget => outln!("  . {} (forgotten: left as it is)", escape(redactor, id)),
            _ => outln!("  - {}", escape(redactor, id)),
        }
    }
}
