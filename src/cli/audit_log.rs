//! `nivis log`: the audit trail kept with the state, listed (filtered by address, time and
//! user; `--json`) or checked (`--verify`).
//!
//! Owns what the verb prints. Not: the records' format, the chain or where the log lives
//! (`state::audit`).

use std::time::{Duration, SystemTime};

use super::args::LogArgs;
use super::{backend, exit, fail, parse_duration};
use crate::render::{self, outln};
use crate::secrets::Redactor;
use crate::state::audit::{verify_with_state, Anchor, Log, Record};

pub(super) fn run(args: &LogArgs, redactor: &Redactor) -> i32 {
    match list(args, redactor) {
        Ok(status) => status,
        Err(e) => fail(redactor, &e),
    }
}

fn list(args: &LogArgs, redactor: &Redactor) -> Result<i32, String> {
    let backend = backend::of(&args.target.source, &args.target.state, redactor)?;
    let log = Log::of(&backend).map_err(|e| e.to_string())?;
    let stored = log.read().map_err(|e| e.to_string())?;
    if args.verify {
        // Both ways: the records against the state's key and serial (DESIGN §93).
        let state = backend.read_only().map_err(|e| e.to_string())?;
        let exists = state.serial > 0 || !state.is_empty();
        let anchor = Anchor::of(&state, exists);
        return Ok(match verify_with_state(&stored, &anchor) {
            None => {
                outln!(
                    "{}",
                    render::escape(
                        redactor,
                        &format!(
                            "The audit log {} holds {} record(s); the chain is intact. It \
                             matches the state{}.",
                            log.describe(),
                            stored.len(),
                            match anchor.serial {
                                Some(serial) => format!(" (serial {serial})"),
                                None => String::new(),
                            }
                        )
                    )
                );
                exit::OK
            }
            Some(problem) => fail(
                redactor,
                &format!(
                    "the audit log {} was changed: {problem}. Records before it are intact; \
                 compare the log with a copy you trust (or the bucket's object versions)",
                    log.describe()
                ),
            ),
        });
    }
    let since = args.since.as_deref().map(parse_since).transpose()?;
    if stored.is_empty() && !args.json {
        eprintln!(
            "{}",
            render::escape_text(
                redactor,
                &format!("No audit records in {}.", log.describe())
            )
        );
    }
    for s in &stored {
        let Some(record) = s.record() else {
            return Err(format!(
                "{} is not an audit record: run `nivis log --verify`",
                s.place
            ));
        };
        if !selected(&record, args, since) {
            continue;
        }
        if args.json {
            let value = serde_json::to_value(&record).expect("a record serializes");
            outln!("{}", render::json_text(redactor, &value, false));
        } else {
            // Each line escaped on its own (escaping the whole would print `\n`).
            for line in describe(&record).lines() {
                outln!("{}", render::escape(redactor, line));
            }
        }
    }
    Ok(exit::OK)
}

fn selected(record: &Record, args: &LogArgs, since: Option<SystemTime>) -> bool {
    let e = &record.entry;
    let address = args.address.as_deref().is_none_or(|a| {
        e.changes
            .iter()
            .any(|c| c.address == a || c.address.starts_with(&format!("{a} (")))
    });
    let user = args.user.as_deref().is_none_or(|u| e.user == u);
    let time =
        since.is_none_or(|since| humantime::parse_rfc3339_weak(&e.time).is_ok_and(|t| t >= since));
    address && user && time
}

/// `--since`: RFC 3339, a date (midnight UTC), or an age (`2h`, `3d`).
fn parse_since(text: &str) -> Result<SystemTime, String> {
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return Ok(t);
    }
    if let Ok(t) = humantime::parse_rfc3339_weak(&format!("{text}T00:00:00Z")) {
        return Ok(t);
    }
    let age: Duration = parse_duration(text).map_err(|_| {
        format!("--since {text:?}: give a time (2026-11-25T10:00:00Z), a date (2026-11-25) or an age (2h, 3d)")
    })?;
    SystemTime::now()
        .checked_sub(age)
        .ok_or_else(|| format!("--since {text:?} is before the epoch"))
}

/// One record, human-readable: the header line, then one line per change.
fn describe(r: &Record) -> String {
    let e = &r.entry;
    let mut text = format!("#{} {} {}@{}", r.seq, e.time, e.user, e.host);
    if let Some(job) = &e.ci_job {
        text.push_str(&format!(" ({job})"));
    }
    text.push_str(&format!(" {} [{}]: {}", e.command, e.env, e.result));
    match (e.serial_before, e.serial_after) {
        (Some(a), Some(b)) => text.push_str(&format!(", serial {a} -> {b}")),
        (None, Some(b)) => text.push_str(&format!(", serial {b}")),
        _ => {}
    }
    if let Some(sha) = &e.saved_plan_sha256 {
        text.push_str(&format!("\n    saved plan sha256 {sha}"));
    } else if let Some(digest) = &e.plan_digest {
        text.push_str(&format!("\n    plan digest {digest}"));
    }
    for c in &e.changes {
        text.push_str(&format!("\n    {} {}", c.action, c.address));
    }
    if e.changes.is_empty() {
        text.push_str("\n    (no changes)");
    }
    for o in &e.policy_overrides {
        text.push_str(&format!("\n    policy {} overridden: {}", o.rule, o.reason));
    }
    text
}
