//! The audit record of the mutating command this process runs: an [`AuditRecord`] value that
//! `cli::run` makes for every command and hands to the verbs that change state, begun where a
//! verb knows its state (`begin`), filled from the engine's events (`Recorder`) or by the
//! verb (`change`), and appended to the state's audit log once the command's exit status is
//! known (`finish`).
//!
//! Verbs that never call `begin` (plan, output, ...) append nothing. Not: the record's format,
//! the chain or where the log lives (`state::audit`).

use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::exit;
use crate::engine::{Event, Sink};
use crate::state::audit::{Change, Entry, Log, PolicyOverride};
use crate::state::Backend;

/// The standard variables naming a CI job, first set wins.
const CI_JOB_VARIABLES: &[&str] = &[
    "CI_JOB_ID",
    "GITHUB_RUN_ID",
    "BUILDKITE_JOB_ID",
    "CIRCLE_WORKFLOW_JOB_ID",
    "BUILD_ID",
    "BUILD_NUMBER",
];

/// The record being made.
struct Pending {
    backend: Backend,
    command: String,
    serial_before: Option<u64>,
    saved_plan_sha256: Option<String>,
    /// Planned rows `phase\taddress\taction`, for the plan digest.
    planned: Vec<String>,
    /// The same rows of the operations started (a run that showed no plan first).
    started: Vec<String>,
    changes: Vec<Change>,
    /// Mandatory policy violations let through by `--override`, with the reason given.
    overrides: Vec<PolicyOverride>,
}

/// The audit record of this command, once a verb has begun it. Shared by reference between the
/// verb and the sink that notes the engine's events (a `Mutex`: the engine's sink may be used
/// from its owner thread).
#[derive(Default)]
pub(super) struct AuditRecord(Mutex<Option<Pending>>);

impl AuditRecord {
    fn with_pending(&self, f: impl FnOnce(&mut Pending)) {
        if let Some(p) = self.0.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            f(p);
        }
    }

    /// This command is `command`, which may change the state of `backend`: its record is
    /// appended when the command ends.
    pub(super) fn begin(&self, backend: &Backend, command: &str) {
        let serial_before = backend.serial().ok();
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Pending {
            backend: backend.clone(),
            command: command.to_string(),
            serial_before,
            saved_plan_sha256: None,
            planned: Vec::new(),
            started: Vec::new(),
            changes: Vec::new(),
            overrides: Vec::new(),
        });
    }

    /// `address` changed by `action` (for verbs that change the state without the engine).
    pub(super) fn change(&self, address: &str, action: &str) {
        self.with_pending(|p| {
            p.changes.push(Change {
                address: address.to_string(),
                action: action.to_string(),
            })
        });
    }

    /// A sink that notes the engine's events in this record and forwards them to `inner`.
    pub(super) fn recorder<'a>(&'a self, inner: &'a mut dyn Sink) -> Recorder<'a> {
        Recorder {
            inner,
            record: self,
        }
    }
}

/// Forwards every event to `inner` and notes what the record needs: changes carried out and
/// recorded, the plan's rows, the saved plan applied.
pub(super) struct Recorder<'a> {
    inner: &'a mut dyn Sink,
    record: &'a AuditRecord,
}

impl Sink for Recorder<'_> {
    fn event(&mut self, event: Event) {
        let record = self.record;
        let change = |address: &str, action: &str| record.change(address, action);
        match &event {
            Event::Finished {
                id,
                action,
                deposed,
                ..
            } if action.class() != "no-op" && action.class() != "read" => {
                let address = match deposed {
                    Some(key) => format!("{id} (deposed {key})"),
                    None => id.clone(),
                };
                change(&address, action.class());
            }
            Event::Moved {
                from,
                to,
                recorded: true,
                ..
            } => change(to, &format!("move from {from}")),
            Event::Imported {
                id, recorded: true, ..
            } => change(id, "import"),
            Event::PendingOperation(op) => change(
                &op.address,
                &format!("{} in flight when {} stopped", op.action.word(), op.run),
            ),
            Event::Drift { id, gone, .. } => {
                change(id, if *gone { "refresh (gone)" } else { "refresh" })
            }
            Event::Planned {
                phase, id, action, ..
            } if action.class() != "no-op" => record
                .with_pending(|p| p.planned.push(format!("{phase}\t{id}\t{}", action.class()))),
            Event::Started {
                phase, id, action, ..
            } => record
                .with_pending(|p| p.started.push(format!("{phase}\t{id}\t{}", action.class()))),
            Event::PlanFile {
                sha256,
                applying: true,
                ..
            } => record.with_pending(|p| p.saved_plan_sha256 = Some(sha256.clone())),
            Event::PolicyViolation { violation, .. } => {
                if let Some(reason) = &violation.overridden {
                    let this = PolicyOverride {
                        rule: violation.rule.clone(),
                        reason: reason.clone(),
                    };
                    record.with_pending(|p| {
                        if !p.overrides.contains(&this) {
                            p.overrides.push(this)
                        }
                    })
                }
            }
            _ => {}
        }
        self.inner.event(event);
    }
}

/// Appends `record`, if a verb began it, with the command's exit `status`; a log that cannot
/// be written is a warning (the command's own outcome stands).
pub(super) fn finish(record: AuditRecord, status: i32, redactor: &crate::secrets::Redactor) {
    let pending = record.0.into_inner().unwrap_or_else(|e| e.into_inner());
    let Some(pending) = pending else {
        return;
    };
    // A run that failed having changed nothing (its state could not even be opened, say):
    // its error already told what went wrong, and the log is usually unreachable for the same
    // reason; a warning would only repeat it.
    let quiet = status != exit::OK && status != exit::CHANGES && pending.changes.is_empty();
    let entry = entry(&pending, status);
    let appended = Log::of(&pending.backend)
        .map_err(|e| e.to_string())
        .and_then(|log| {
            let key = crate::state::audit::key_of(&pending.backend);
            log.append(entry, key.as_ref())
                .map_err(|e| format!("{e} (audit log {})", log.describe()))
        });
    if let Err(e) = appended {
        if quiet {
            log::info!("the audit record of this failed run was not written: {e}");
            return;
        }
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!(
                "Warning: the audit record of this run was not written: {}\n",
                crate::render::escape_text(redactor, &e)
            ),
        );
    }
}

fn entry(p: &Pending, status: i32) -> Entry {
    // The plan shown before the run went ahead; without one (--auto-approve), what it started.
    let rows = if p.planned.is_empty() {
        &p.started
    } else {
        &p.planned
    };
    let plan_digest = (!rows.is_empty()).then(|| {
        let mut hasher = Sha256::new();
        for row in rows {
            hasher.update(row.as_bytes());
            hasher.update(b"\n");
        }
        hex::encode(hasher.finalize())
    });
    Entry {
        time: crate::state::format_utc(crate::state::unix_now()),
        user: crate::state::user_name(),
        uid: crate::privfile::euid(),
        host: crate::state::host_name(),
        ci_job: ci_job(),
        command: p.command.clone(),
        env: p.backend.env().to_string(),
        saved_plan_sha256: p.saved_plan_sha256.clone(),
        plan_digest,
        serial_before: p.serial_before,
        serial_after: p.backend.serial().ok(),
        changes: p.changes.clone(),
        policy_overrides: p.overrides.clone(),
        result: match status {
            exit::OK | exit::CHANGES => "ok",
            exit::INTERRUPTED => "interrupted",
            _ => "failed",
        }
        .to_string(),
    }
}

fn ci_job() -> Option<String> {
    CI_JOB_VARIABLES.iter().find_map(|var| {
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .map(|v| format!("{var}={v}"))
    })
}
