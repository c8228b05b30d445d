//! Issue 36: secrets that are never stored. A fake ephemeral token (opened per run, never
//! recorded) feeds a write-only password through a string Nix builds; the token is hunted in
//! every file, output and the Nix store, and the fakes' object log (the remote world, kept
//! outside the sandbox) shows every open closed, after success, an error and Ctrl-C.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::sandbox::*;
use crate::util::*;

/// A token A, an ephemeral ticket whose scope is A's id (so it opens in phase 2), and an
/// account whose write-only password Nix builds from the ticket's token.
fn plan(version: u32, label_from_ticket: bool) -> String {
    let label = if label_from_ticket {
        "config.label = lib.str [ \"x-\" (t.refAttr \"token\") ];"
    } else {
        "config.label = \"a\";"
    };
    Sandbox::plan_let(
        &format!(
            "a = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; {label} }}; \
             t = lib.mkEphemeral {{ provider = \"alpha\"; type = \"alpha_ticket\"; name = \"T\"; \
                   config.scope = a.refAttr \"id\"; }}; \
             b = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_account\"; name = \"B\"; \
                   config = {{ name = \"app\"; password_wo = lib.str [ \"pw-\" (t.refAttr \"token\") ]; \
                               password_wo_version = {version}; }}; }};"
        ),
        "a b",
        "ephemeral = [ t ];",
    )
}

struct World {
    s: Sandbox,
    /// The object log, outside the sandbox: it is the remote side, which holds the tokens.
    _remote: tempfile::TempDir,
    log: PathBuf,
}

fn world(version: u32) -> World {
    let mut s = Sandbox::new();
    let remote = tempfile::tempdir().unwrap();
    let log = remote.path().join("objects.log");
    s.set_env("NIVIS_FAKE_OBJECT_LOG", Some(log.to_str().unwrap()));
    Sandbox::write_flake(&s.proj, &plan(version, false));
    World {
        s,
        _remote: remote,
        log,
    }
}

fn entries(log: &Path) -> Vec<Json> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of(log: &Path, op: &str) -> Vec<Json> {
    entries(log).into_iter().filter(|e| e["op"] == op).collect()
}

/// Every ticket opened was closed, once.
fn assert_every_open_closed(log: &Path) {
    let ids = |op| -> Vec<String> {
        let mut v: Vec<String> = of(log, op)
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect();
        v.sort();
        v
    };
    assert_eq!(ids("open"), ids("close"), "{:#?}", entries(log));
}

fn tokens(log: &Path) -> Vec<String> {
    of(log, "open")
        .iter()
        .map(|e| e["token"].as_str().unwrap().to_string())
        .collect()
}

/// No form of any token in any file under the sandbox (the state included), in any output,
/// nor in the Nix store.
fn hunt(w: &World) {
    let tokens = tokens(&w.log);
    assert!(!tokens.is_empty());
    let needles: Vec<&str> = tokens.iter().map(String::as_str).collect();
    w.s.hunt_all(&needles, &[]);
    let mut files = Vec::new();
    walk(w.s.root.path(), &mut files);
    for f in files {
        let bytes = std::fs::read(&f).unwrap_or_default();
        for form in needles.iter().flat_map(|n| leak_forms(n)) {
            assert!(
                !bytes.windows(form.len()).any(|x| x == form),
                "an ephemeral token is in {}",
                f.display()
            );
        }
    }
}

fn ok(out: &std::process::Output) -> String {
    assert_success(out);
    stdout(out)
}

#[test]
fn an_ephemeral_token_feeds_a_write_only_password_and_is_stored_nowhere() {
    let mut w = world(1);
    w.s.set_env("NIVIS_LOG", Some("debug"));
    // Renewals: the ticket asks to be renewed every 100 ms; the account's apply takes 400.
    w.s.set_env("NIVIS_FAKE_RENEW_MS", Some("100"));
    w.s.set_env("NIVIS_FAKE_SLOW_MS", Some("400"));
    let out = ok(&w.s.nivis(&["apply", "--auto-approve", "--json"]));
    let finished: Vec<u64> = (out.lines())
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .filter(|e| e["type"] == "finished")
        .map(|e| e["phase"].as_u64().unwrap())
        .collect();
    assert_eq!(
        finished,
        vec![1, 2],
        "A in phase 1, the ticket and B in 2:\n{out}"
    );
    let written = of(&w.log, "write-only");
    assert_eq!(written.len(), 1, "{:#?}", entries(&w.log));
    let token = tokens(&w.log)[0].clone();
    assert_eq!(written[0]["value"], format!("pw-{token}"));
    assert_eq!(written[0]["attr"], "password_wo");
    assert!(!of(&w.log, "renew").is_empty(), "{:#?}", entries(&w.log));
    assert_every_open_closed(&w.log);
    let shown = ok(&w.s.nivis(&["state", "show", "alpha.alpha_account.B"]));
    assert!(shown.contains("password_wo"), "{shown}");

    // A re-plan opens a new ticket (a new token) and changes nothing.
    w.s.set_env("NIVIS_FAKE_SLOW_MS", None);
    let again = ok(&w.s.nivis(&["plan"]));
    assert!(again.contains("No changes"), "{again}");
    assert_eq!(of(&w.log, "open").len(), 2);
    assert_every_open_closed(&w.log);

    // The version changes: an update, reviewed as a saved plan and applied from it, sends the
    // password made from that run's token.
    Sandbox::write_flake(&w.s.proj, &plan(2, false));
    let planned = ok(&w.s.nivis(&["plan", "--out", "review.plan"]));
    assert!(planned.contains("alpha.alpha_account.B"), "{planned}");
    assert!(planned.contains("update"), "{planned}");
    // The password goes with the update: the plan says so, with no value.
    assert!(
        planned.contains("password_wo = (write-only attribute)"),
        "{planned}"
    );
    let shown = ok(&w.s.nivis(&["show", "review.plan", "--json"]));
    let document: Json = serde_json::from_str(&shown).expect("show --json prints JSON");
    let change = (document["changes"].as_array().into_iter().flatten())
        .filter(|row| row["id"] == "alpha.alpha_account.B")
        .flat_map(|row| row["changes"].as_array().cloned().unwrap_or_default())
        .find(|c| c["path"] == "password_wo")
        .unwrap_or_else(|| panic!("no password_wo change in:\n{shown}"));
    assert_eq!(
        change,
        serde_json::json!({"path": "password_wo", "before": null, "after": null,
                           "sensitive": false, "forcesReplacement": false, "writeOnly": true})
    );
    ok(&w.s.nivis(&["apply", "review.plan", "--json"]));
    let written = of(&w.log, "write-only");
    assert_eq!(written.len(), 2, "{:#?}", entries(&w.log));
    let last = tokens(&w.log).last().unwrap().clone();
    assert_eq!(written[1]["value"], format!("pw-{last}"));
    ok(&w.s.nivis(&["output", "--json"]));
    ok(&w.s.nivis(&["state", "pull", "--out", "-"]));
    assert_every_open_closed(&w.log);
    hunt(&w);
}

#[test]
fn an_ephemeral_value_in_a_normal_attribute_is_refused_with_its_path() {
    let w = world(1);
    Sandbox::write_flake(&w.s.proj, &plan(1, true));
    let out = w.s.nivis(&["apply", "--auto-approve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("alpha.alpha_token.A: config.label")
            && err.contains("ephemeral.alpha.alpha_ticket.T")
            && err.contains("write-only"),
        "{err}"
    );
    assert!(of(&w.log, "create").is_empty(), "nothing applied");
    assert!(
        of(&w.log, "open").is_empty(),
        "refused before the ticket opened"
    );
    let listed = w.s.nivis(&["state", "list"]);
    assert!(
        stderr(&listed).contains("No state found"),
        "nothing recorded"
    );
}

#[test]
fn every_open_is_closed_after_an_error_over_protocol_5() {
    let mut w = world(1);
    w.s.set_env("NIVIS_FAKE_PROTOCOL", Some("5"));
    w.s.set_env("NIVIS_FAKE_FAIL_ON", Some("app"));
    let out = w.s.nivis(&["apply", "--auto-approve"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("injected failure"),
        "{}",
        stderr(&out)
    );
    assert_eq!(of(&w.log, "open").len(), 1, "{:#?}", entries(&w.log));
    assert_every_open_closed(&w.log);
    hunt(&w);
}

#[test]
fn every_open_is_closed_after_ctrl_c() {
    let mut w = world(1);
    w.s.set_env("NIVIS_FAKE_SLOW_MS", Some("3000"));
    let mut cmd = Command::new(nivis_bin());
    cmd.args(["apply", "--auto-approve"])
        .current_dir(&w.s.proj)
        .env_remove("NIVIS_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in w.s.env_pairs() {
        cmd.env(k, v);
    }
    let child = cmd.spawn().unwrap();
    let started = Instant::now();
    // The ticket opens in phase 2, once A (slow) is applied; B's apply is then under way.
    while of(&w.log, "open").is_empty() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert_eq!(of(&w.log, "open").len(), 1, "{:#?}", entries(&w.log));
    assert_every_open_closed(&w.log);
}
