//! `provider-nixops4-fake`: a NixOps4 resource provider (protocol v0, JSON lines) for fault
//! injection in tests. The real provider (`nixops4-resources-local`) covers the good paths.
//!
//! Resource type `thing`: any inputs; outputs `{"value": <inputs.value>, "by": "create"|"update"}`.
//! The input `fault` injects a fault on create and update:
//! - `"garbage"`: answers with a line that is not JSON;
//! - `"unknown"`: answers with a response type the protocol does not have;
//! - `"error"`: answers `errorResponse` with a four-line message;
//! - `"echo"`: answers `errorResponse` quoting the whole request, as real providers may;
//! - `"log"`: logs the whole request on stderr, then answers normally;
//! - `"exit"`: exits (status 3) without answering;
//! - `"slow"`: answers after `NIVIS_FAKE_N4_SLOW_MS` milliseconds (default 60000).
//!
//! Every request line is appended to the file `NIVIS_FAKE_N4_LOG` names, if set, so tests can
//! check what Nivis sent. Logs go to stderr, as the protocol asks.

use std::io::{BufRead, Write};
use std::time::Duration;

use serde_json::{json, Value};

fn main() {
    let stdin = std::io::stdin();
    let mut stdout = std::io::stdout();
    eprintln!("fake nixops4 provider ready");
    for line in stdin.lock().lines() {
        let Ok(line) = line else { return };
        if let Ok(path) = std::env::var("NIVIS_FAKE_N4_LOG") {
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "{line}");
            }
        }
        let answer = answer(&line);
        let _ = writeln!(stdout, "{answer}");
        let _ = stdout.flush();
    }
    eprintln!("fake nixops4 provider: stdin closed, exiting");
}

fn error(message: &str) -> String {
    json!({"errorResponse": {"message": message}}).to_string()
}

fn answer(line: &str) -> String {
    let Ok(request) = serde_json::from_str::<Value>(line) else {
        return error(&format!("could not parse request: {line}"));
    };
    let (kind, inputs, type_name) = if let Some(r) = request.get("createResourceRequest") {
        ("create", &r["inputProperties"], r["type"].as_str())
    } else if let Some(r) = request.get("updateResourceRequest") {
        (
            "update",
            &r["inputProperties"],
            r["resource"]["type"].as_str(),
        )
    } else {
        return error("unsupported request");
    };
    eprintln!("fake: {kind} {}", type_name.unwrap_or("?"));
    if type_name != Some("thing") {
        return error(&format!(
            "unknown resource type: {}\nStack backtrace:\n   0: fake::answer",
            type_name.unwrap_or("?")
        ));
    }
    match inputs.get("fault").and_then(Value::as_str) {
        Some("garbage") => return "this is not JSON".into(),
        Some("unknown") => return json!({"surpriseResponse": {}}).to_string(),
        Some("echo") => return error(&format!("cannot handle {line}\nthe request was: {line}")),
        Some("log") => eprintln!("fake: request {line}"),
        Some("error") => {
            return error(&format!(
                "injected failure on {kind}\nCaused by: the fake was asked to fail\nStack backtrace:\n   0: fake::answer"
            ))
        }
        Some("exit") => {
            eprintln!("fake: exiting without an answer");
            std::process::exit(3);
        }
        Some("slow") => {
            let ms = std::env::var("NIVIS_FAKE_N4_SLOW_MS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(60_000);
            std::thread::sleep(Duration::from_millis(ms));
        }
        _ => {}
    }
    let outputs = json!({"value": inputs.get("value").cloned().unwrap_or(Value::Null), "by": kind});
    let key = if kind == "create" {
        "createResourceResponse"
    } else {
        "updateResourceResponse"
    };
    json!({ key: { "outputProperties": outputs } }).to_string()
}
