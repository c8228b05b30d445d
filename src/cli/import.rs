//! `nivis import ADDR ID`: adopt one existing object at a declared resource address.
//!
//! Owns: the command's output (the engine's events, then one line saying what to do next).
//! Not: the import itself (`engine::imports`).

use super::args::ImportArgs;
use super::audit::AuditRecord;
use super::{exit, fail, options};
use crate::engine::{Engine, EngineError, Event, Sink};
use crate::render::{self, outln, Human, JsonLines, Style, Tally};
use crate::secrets::Redactor;

/// Runs `nivis import`, noting what it records in `audit`; returns the exit status.
pub(super) fn run(
    args: &ImportArgs,
    style: Style,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let json = args.output.json;
    let mut human = Human::new(style, redactor.clone());
    let mut jsonl = JsonLines::new(redactor.clone());
    if json {
        jsonl.start("import");
    }
    let (status, summary) = {
        let inner: &mut dyn Sink = if json { &mut jsonl } else { &mut human };
        let mut tally = Tally::new(inner);
        let status = import(args, (style, redactor), audit, &mut tally);
        (status, tally.summary_json())
    };
    if json {
        jsonl.summary("import", summary, status);
    }
    status
}

fn import(
    args: &ImportArgs,
    (style, redactor): (Style, &Redactor),
    audit: &AuditRecord,
    sink: &mut dyn Sink,
) -> i32 {
    let json = args.output.json;
    let result = options(&args.spec(), "import", redactor, Some(audit));
    let result = result.map_err(|e| (e, Vec::new()));
    let mut recorder = audit.recorder(sink);
    let result = result.and_then(|opts| {
        Engine::new(opts, &mut recorder)
            .import(&args.address, &args.id)
            .map_err(|e| match e {
                EngineError::Diagnostics(d) => (format!("{} error(s)", d.errors().count()), d.0),
                e => (e.to_string(), Vec::new()),
            })
    });
    match result {
        Ok(_) => {
            if !json {
                outln!(
                    "Run `nivis plan` to see how {} differs from its configuration.",
                    render::escape(redactor, &args.address)
                );
            }
            exit::OK
        }
        Err((message, diagnostics)) => {
            if json {
                sink.event(Event::CommandFailed {
                    message: message.clone(),
                    diagnostics: diagnostics.clone(),
                });
            }
            if diagnostics.is_empty() {
                fail(redactor, &message)
            } else {
                render::write_diagnostics(style, redactor, &diagnostics);
                exit::ERROR
            }
        }
    }
}
