//! `nivis import ADDR ID`: adopt one existing object at a declared resource address.
//!
//! Owns: the command's output (the engine's events, then one line saying what to do next).
//! Not: the import itself (`engine::imports`).

use super::args::ImportArgs;
use super::{exit, fail, options};
use crate::engine::{Engine, EngineError, Event, Sink};
use crate::render::{self, outln, Human, JsonLines, Style};

pub fn run(args: &ImportArgs, style: Style) -> i32 {
    let opts = match options(&args.spec(), "import") {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let mut human = Human::new(style);
    let mut jsonl = JsonLines;
    let sink: &mut dyn Sink = if args.output.json {
        &mut jsonl
    } else {
        &mut human
    };
    let result = Engine::new(opts, sink).import(&args.address, &args.id);
    match result {
        Ok(_) => {
            if !args.output.json {
                outln!(
                    "Run `nivis plan` to see how {} differs from its configuration.",
                    render::escape(&args.address)
                );
            }
            exit::OK
        }
        Err(e) => {
            if args.output.json {
                jsonl.event(Event::CommandFailed {
                    message: e.to_string(),
                    diagnostics: match &e {
                        EngineError::Diagnostics(d) => d.0.clone(),
                        _ => Vec::new(),
                    },
                });
            }
            match e {
                EngineError::Diagnostics(d) => {
                    let mut err = std::io::stderr().lock();
                    for x in &d.0 {
                        render::write_diagnostic(&mut err, style, x);
                    }
                    exit::ERROR
                }
                e => fail(&e),
            }
        }
    }
}
