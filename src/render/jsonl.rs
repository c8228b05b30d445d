//! The JSON-lines stream (`--json`, docs/JSON-EVENTS.md): a `version` line first, one object
//! per event with a timestamp, a `summary` line last (after the `error` line of a failed
//! command). Secrets are redacted and terminal controls escaped by [`json_text`].
//!
//! Not: human text, or deciding what happened.

use std::io::Write;
use std::time::SystemTime;

use serde::Serialize;
use serde_json::{json, Value as Json};

use super::{json_text, stdout};
use crate::diag::Diagnostic;
use crate::engine::wire::{change_records, object, PlanRow};
use crate::engine::{Event, Sink};
use crate::secrets::Redactor;
use crate::value::render_path;

/// The version of the event stream's format: a field is only ever added within one version.
pub(super) const EVENTS_VERSION: u32 = 1;

/// The JSON-lines printer: one object per event on stdout.
pub(crate) struct JsonLines {
    started: bool,
    /// The run's secrets, redacted from every line.
    redactor: Redactor,
}

impl JsonLines {
    /// A printer redacting what `redactor` knows (the run's).
    pub(crate) fn new(redactor: Redactor) -> Self {
        JsonLines {
            started: false,
            redactor,
        }
    }

    /// Writes the stream's first line: which Nivis, which format, which command.
    pub(crate) fn start(&mut self, command: &str) {
        self.started = true;
        self.line(json!({
            "type": "version",
            "nivis": env!("CARGO_PKG_VERSION"),
            "eventsVersion": EVENTS_VERSION,
            "command": command,
        }));
    }

    /// Writes the stream's last line: what the command planned, did and found, and its exit
    /// status.
    /// `summary` is [`super::summary::Tally::summary_json`]'s.
    pub(crate) fn summary(
        &mut self,
        command: &str,
        mut summary: serde_json::Value,
        exit_status: i32,
    ) {
        summary["type"] = json!("summary");
        summary["command"] = json!(command);
        summary["exitStatus"] = json!(exit_status);
        self.line(summary);
    }

    fn line(&mut self, mut object: serde_json::Value) {
        object["timestamp"] = json!(timestamp(SystemTime::now()));
        // One write per line: `writeln!` wrote a long line and its newline apart (two system
        // calls per event, 4000 for a 1000-resource apply at `-v`).
        let mut text = json_text(&self.redactor, &object, false);
        text.push('\n');
        let mut out = stdout();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

impl Sink for JsonLines {
    fn event(&mut self, event: Event) {
        // Progress for people; `finished` says the same once the result is recorded.
        if matches!(event, Event::Recording { .. }) {
            return;
        }
        self.line(event_json(&event));
    }
}

/// RFC 3339, UTC, milliseconds: `2026-11-25T16:20:01.123Z`.
fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

/// An event line: `type`, then `phase` when it has one, then `record`'s fields, then `extra`.
fn line_of(
    kind: &str,
    phase: Option<u32>,
    record: &impl Serialize,
    extra: &[(&str, Json)],
) -> Json {
    let mut line = serde_json::Map::new();
    line.insert("type".into(), json!(kind));
    if let Some(phase) = phase {
        line.insert("phase".into(), json!(phase));
    }
    line.extend(object(record));
    line.extend(extra.iter().map(|(k, v)| (k.to_string(), v.clone())));
    Json::Object(line)
}

/// A plan row's line (`planned`, `deferred`, `moved`, `imported`): the wire record.
fn row_json(phase: u32, row: &PlanRow) -> Json {
    match row {
        PlanRow::Planned(c) => line_of("planned", Some(phase), c, &[]),
        PlanRow::Deferred(d) => line_of("deferred", Some(phase), d, &[]),
        PlanRow::Moved(m, recorded) => {
            line_of("moved", Some(phase), m, &[("recorded", json!(recorded))])
        }
        PlanRow::Imported(i, recorded) => {
            line_of("imported", Some(phase), i, &[("recorded", json!(recorded))])
        }
    }
}

fn diag_json(d: &Diagnostic) -> serde_json::Value {
    json!({
        "severity": d.severity,
        "summary": d.summary,
        "detail": d.detail,
        "resource": d.resource,
        "path": d.path.as_deref().map(render_path),
    })
}

/// A `condition` event: a check or postcondition with its status, and whether a failure is an
/// error (a postcondition after an apply) or a warning.
fn condition_json(c: &crate::ir::Condition, fatal: bool) -> serde_json::Value {
    let (kind, resource) = match &c.kind {
        crate::ir::ConditionKind::Check => ("check", None),
        crate::ir::ConditionKind::Postcondition { resource } => ("postcondition", Some(resource)),
    };
    let severity = if fatal { "error" } else { "warning" };
    json!({"type": "condition", "kind": kind, "name": c.name, "resource": resource,
        "status": c.status.name(), "message": c.message, "severity": severity})
}

/// Converts an event to its JSON-lines form.
// Long because it is one arm per event type, each the object docs/JSON-EVENTS.md describes.
pub(crate) fn event_json(event: &Event) -> serde_json::Value {
    match event {
        Event::RemoteState {
            name,
            location,
            lineage,
            serial,
        } => {
            json!({"type": "remote-state", "name": name, "location": location, "lineage": lineage, "serial": serial})
        }
        Event::Evaluated {
            phase,
            duration,
            resources,
            data,
        } => {
            json!({"type": "evaluated", "phase": phase, "seconds": duration.as_secs_f64(), "resources": resources, "data": data})
        }
        Event::Planned { phase, .. }
        | Event::Deferred { phase, .. }
        | Event::Moved { phase, .. }
        | Event::Imported { phase, .. } => {
            let row = PlanRow::of(event).expect("a plan event is a plan row");
            row_json(*phase, &row)
        }
        Event::ConsumerPending { id, waits } => {
            json!({"type": "consumer-pending", "id": id, "waitsOn": waits})
        }
        Event::Started {
            phase,
            id,
            action,
            changes,
        } => {
            json!({"type": "started", "phase": phase, "id": id, "action": action, "changes": change_records(changes)})
        }
        Event::Finished {
            phase,
            id,
            action,
            duration,
            deposed,
        } => {
            let mut ev = json!({"type": "finished", "phase": phase, "id": id, "action": action, "seconds": duration.as_secs_f64()});
            if let Some(key) = deposed {
                ev["deposed"] = json!(key);
            }
            ev
        }
        Event::Failed {
            phase,
            id,
            diagnostics,
        } => {
            json!({"type": "failed", "phase": phase, "id": id, "diagnostics": diagnostics.iter().map(diag_json).collect::<Vec<_>>()})
        }
        Event::Recording { phase, id } => {
            json!({"type": "recording", "phase": phase, "id": id})
        }
        Event::Unrecorded {
            phase,
            id,
            object_id,
            deleted,
        } => {
            json!({"type": "unrecorded", "phase": phase, "id": id, "objectId": object_id, "deleted": deleted})
        }
        Event::Skipped { phase, id, because } => {
            json!({"type": "skipped", "phase": phase, "id": id, "because": because})
        }
        Event::Drift { id, changes, gone } => {
            json!({"type": "drift", "id": id, "gone": gone, "changes": change_records(changes)})
        }
        Event::Warning(d) => json!({"type": "warning", "diagnostic": diag_json(d)}),
        Event::PendingOperation(op) => json!({
            "type": "pending-operation",
            "id": op.address,
            "action": op.action,
            "provider": op.provider,
            "typeName": op.type_name,
            "digest": op.digest,
            "run": op.run,
            "message": op.summary(),
        }),
        Event::Condition { condition, fatal } => condition_json(condition, *fatal),
        Event::PolicyViolation {
            phase,
            violation: v,
        } => {
            json!({"type": "policy-violation", "phase": phase, "rule": v.rule, "level": v.level.name(), "address": v.address, "message": v.message, "overridden": v.overridden.is_some(), "reason": v.overridden})
        }
        Event::Wave {
            phase,
            trigger,
            ready,
        } => json!({"type": "wave", "phase": phase, "trigger": trigger, "ready": ready}),
        Event::PhaseDone { phase, changed } => {
            json!({"type": "phase-done", "phase": phase, "changed": changed})
        }
        Event::Fixpoint {
            evaluations,
            apply_phases,
        } => json!({"type": "fixpoint", "evaluations": evaluations, "applyPhases": apply_phases}),
        Event::PhaseLimit { apply_phases } => {
            json!({"type": "phase-limit", "applyPhases": apply_phases})
        }
        Event::Timing(t) => json!({
            "type": "timing",
            "seconds": t.wall.as_secs_f64(),
            "nixSeconds": t.nix.as_secs_f64(),
            "providerSeconds": t.providers.as_secs_f64(),
            "providerCalls": t.provider_calls,
            "providerCallSecondsSummed": t.provider_call_time.as_secs_f64(),
            "ownSeconds": t.own().as_secs_f64(),
            "cpuSeconds": t.cpu.as_secs_f64(),
        }),
        Event::PlanFile {
            path,
            sha256,
            applying,
        } => {
            json!({"type": if *applying { "applying-plan" } else { "plan-saved" }, "path": path, "sha256": sha256})
        }
        Event::CommandFailed {
            message,
            diagnostics,
        } => json!({
            "type": "error",
            "message": message,
            "diagnostics": diagnostics.iter().map(diag_json).collect::<Vec<_>>(),
        }),
    }
}
