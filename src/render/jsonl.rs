//! The JSON-lines stream (`--json`, docs/JSON-EVENTS.md): a `version` line first, one object
//! per event with a timestamp, a `summary` line last (after the `error` line of a failed
//! command). Secrets are redacted and terminal controls escaped by [`json_text`].
//!
//! Not: human text, or deciding what happened.

use std::io::Write;
use std::time::SystemTime;

use serde_json::json;

#[allow(unused_imports)] // named in the docs
use super::summary::Tally;
use super::{json_text, stdout};
use crate::diag::Diagnostic;
use crate::engine::{AttrChange, Event, Sink, Wait};
use crate::value::render_path;

/// The version of the event stream's format: a field is only ever added within one version.
pub const EVENTS_VERSION: u32 = 1;

/// The JSON-lines printer: one object per event on stdout.
#[derive(Default)]
pub struct JsonLines {
    started: bool,
}

impl JsonLines {
    /// Writes the stream's first line: which Nivis, which format, which command.
    pub fn start(&mut self, command: &str) {
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
    /// `summary` is [`Tally::summary_json`]'s.
    pub fn summary(&mut self, command: &str, mut summary: serde_json::Value, exit_status: i32) {
        summary["type"] = json!("summary");
        summary["command"] = json!(command);
        summary["exitStatus"] = json!(exit_status);
        self.line(summary);
    }

    fn line(&mut self, mut object: serde_json::Value) {
        object["timestamp"] = json!(timestamp(SystemTime::now()));
        let mut out = stdout();
        let _ = writeln!(out, "{}", json_text(&object, false));
        let _ = out.flush();
    }
}

impl Sink for JsonLines {
    fn event(&mut self, event: Event) {
        self.line(event_json(&event));
    }
}

/// RFC 3339, UTC, milliseconds: `2026-11-25T16:20:01.123Z`.
fn timestamp(at: SystemTime) -> String {
    humantime::format_rfc3339_millis(at).to_string()
}

fn wait_json(w: &Wait) -> serde_json::Value {
    w.to_json()
}

pub(super) fn change_json(c: &AttrChange) -> serde_json::Value {
    c.to_json()
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

/// Converts an event to its JSON-lines form.
// Long because it is one arm per event type, each the object docs/JSON-EVENTS.md describes.
pub fn event_json(event: &Event) -> serde_json::Value {
    match event {
        Event::Evaluated {
            phase,
            duration,
            resources,
            data,
        } => {
            json!({"type": "evaluated", "phase": phase, "seconds": duration.as_secs_f64(), "resources": resources, "data": data})
        }
        Event::Planned {
            phase,
            id,
            type_name,
            action,
            changes,
            deposed,
            drifted,
        } => {
            let mut ev = json!({"type": "planned", "phase": phase, "id": id, "resourceType": type_name, "action": action, "changes": changes.iter().map(change_json).collect::<Vec<_>>()});
            if let Some(key) = deposed {
                ev["deposed"] = json!(key);
            }
            if !drifted.is_empty() {
                ev["drifted"] = json!(drifted);
            }
            ev
        }
        Event::Moved {
            phase,
            from,
            to,
            type_name,
            recorded,
        } => {
            json!({"type": "moved", "phase": phase, "from": from, "to": to, "resourceType": type_name, "recorded": recorded})
        }
        Event::Imported {
            phase,
            id,
            type_name,
            import_id,
            recorded,
        } => {
            json!({"type": "imported", "phase": phase, "id": id, "resourceType": type_name, "importId": import_id, "recorded": recorded})
        }
        Event::Deferred {
            phase,
            id,
            type_name,
            in_state,
            waits,
        } => {
            json!({"type": "deferred", "phase": phase, "id": id, "resourceType": type_name, "inState": in_state, "waitsOn": waits.iter().map(wait_json).collect::<Vec<_>>()})
        }
        Event::ConsumerPending { id, waits } => {
            json!({"type": "consumer-pending", "id": id, "waitsOn": waits.iter().map(wait_json).collect::<Vec<_>>()})
        }
        Event::Started {
            phase,
            id,
            action,
            changes,
        } => {
            json!({"type": "started", "phase": phase, "id": id, "action": action, "changes": changes.iter().map(change_json).collect::<Vec<_>>()})
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
            json!({"type": "drift", "id": id, "gone": gone, "changes": changes.iter().map(change_json).collect::<Vec<_>>()})
        }
        Event::Warning(d) => json!({"type": "warning", "diagnostic": diag_json(d)}),
        Event::PolicyViolation {
            phase,
            violation: v,
        } => {
            json!({"type": "policy-violation", "phase": phase, "rule": v.rule, "level": v.level.name(), "address": v.address, "message": v.message, "overridden": v.overridden.is_some(), "reason": v.overridden})
        }
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
