//! Issue 33, the audit trail: every mutating run appends a hash-chained record to a log kept
//! with the state; `nivis log` lists it (filters, `--json`), `nivis log --verify` names the
//! first record deleted or edited, and no secret enters a record.

use std::os::unix::fs::PermissionsExt;

use nivis::state::s3::Condition;
use serde_json::Value as Json;

use super::remote_secrets::{backend_attrs, ok};
use super::sandbox::*;
use super::weed::Weed;
use crate::util::*;

const LOG_PREFIX: &str = "audit/nivis.state.audit/";

/// A plan of alpha tokens: `A` labelled with the sensitive variable `token`, plus `more`.
fn plan(more: &str) -> String {
    let a = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = vars.token; })";
    Sandbox::plan_let(
        "decls = { token = { type = \"string\"; sensitive = true; }; }; vars = lib.vars ledger decls;",
        &format!("{a} {more}"),
        "variables = decls;",
    )
}

/// One "machine": a sandbox of its own (HOME, XDG directories, TMPDIR) run by `user`.
fn machine(weed: &Weed, user: &str, token: &str, more: &str) -> Sandbox {
    let mut s = Sandbox::new();
    for (k, v) in weed.credentials() {
        s.set_env(&k, Some(&v));
    }
    s.set_env("USER", Some(user));
    s.set_env("NIVIS_VAR_token", Some(token));
    for var in ["CI_JOB_ID", "GITHUB_RUN_ID", "BUILDKITE_JOB_ID", "BUILD_ID"] {
        s.set_env(var, None);
    }
    let attrs = backend_attrs(weed, "audit/nivis.state", false);
    Sandbox::write_flake_with(&s.proj, &plan(more), &attrs);
    s
}

fn records(s: &Sandbox, filters: &[&str]) -> Vec<Json> {
    let mut args = vec!["log", "--json"];
    args.extend(filters);
    ok(&s.nivis(&args))
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record per line"))
        .collect()
}

fn verify_fails(s: &Sandbox) -> String {
    let out = s.nivis(&["log", "--verify"]);
    assert!(!out.status.success(), "verify passed: {}", stdout(&out));
    stderr(&out)
}

#[test]
fn two_machines_share_one_s3_audit_log_that_names_both_and_finds_tampering() {
    let weed = Weed::start();
    let token = unique_token("nvaudit");
    let a = machine(&weed, "alice", &token, "");
    let mut b = machine(
        &weed,
        "bob",
        &token,
        "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"C\"; config.label = \"c\"; })",
    );
    b.set_env("CI_JOB_ID", Some("4242"));

    ok(&a.nivis(&["apply", "--auto-approve"]));
    // Plans record nothing.
    ok(&b.nivis(&["plan"]));
    ok(&b.nivis(&["apply", "--auto-approve"]));

    for s in [&a, &b] {
        let listed = ok(&s.nivis(&["log"]));
        for needle in [
            "#1 ",
            "alice@",
            "nivis apply [default]: ok, serial ",
            "create alpha.alpha_token.A",
            "#2 ",
            "bob@",
            "(CI_JOB_ID=4242)",
            "create alpha.alpha_token.C",
        ] {
            assert!(
                listed.contains(needle),
                "{needle:?} missing from:\n{listed}"
            );
        }
        assert!(ok(&s.nivis(&["log", "--verify"])).contains("2 record(s); the chain is intact"));
    }
    let all = records(&b, &[]);
    assert_eq!(all.len(), 2, "{all:?}");
    let (first, second) = (&all[0], &all[1]);
    assert_eq!(first["seq"], 1);
    assert_eq!(first["user"], "alice");
    assert!(first["host"].as_str().is_some_and(|h| !h.is_empty()));
    assert_eq!(first["ciJob"], Json::Null);
    assert_eq!(first["command"], "nivis apply");
    assert_eq!(first["result"], "ok");
    assert!(first["planDigest"].as_str().is_some_and(|d| d.len() == 64));
    assert_eq!(second["prev"], first["hash"], "records are chained");
    assert_eq!(second["ciJob"], "CI_JOB_ID=4242");
    assert_eq!(
        second["changes"],
        serde_json::json!([{"address": "alpha.alpha_token.C", "action": "create"}])
    );
    assert!(second["serialAfter"].as_u64() > second["serialBefore"].as_u64());
    // Filters.
    let only = |filters: &[&str]| -> Vec<u64> {
        records(&a, filters)
            .iter()
            .map(|r| r["seq"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(only(&["--address", "alpha.alpha_token.C"]), [2]);
    assert_eq!(only(&["--user", "alice"]), [1]);
    assert_eq!(only(&["--since", "1h"]), [1, 2]);
    assert!(only(&["--since", "2099-01-01"]).is_empty());

    // A third run (state rm) so that a record in the middle can go.
    ok(&b.nivis(&["state", "rm", "alpha.alpha_token.C"]));
    let third = records(&a, &["--address", "alpha.alpha_token.C"]);
    assert_eq!(third.len(), 2);
    assert_eq!(third[1]["command"], "nivis state rm");
    assert_eq!(third[1]["changes"][0]["action"], "forget");

    // The hunt: no form of the sensitive variable or of a generated secret in any record.
    let client = weed.client();
    let names = client.list(LOG_PREFIX).unwrap();
    assert_eq!(names.len(), 3, "{names:?}");
    let mut forms = leak_forms(&token);
    forms.extend(leak_forms(&a.secret));
    forms.extend(leak_forms(&b.secret));
    for name in &names {
        let body = client.get(name).unwrap().unwrap().body;
        for form in &forms {
            assert!(
                !body.windows(form.len()).any(|w| w == form.as_slice()),
                "a secret in {name}: {}",
                String::from_utf8_lossy(&body)
            );
        }
    }

    // Edited: record 1 says mallory ran it.
    let original = client.get(&names[0]).unwrap().unwrap().body;
    let forged = String::from_utf8(original.clone())
        .unwrap()
        .replace("\"alice\"", "\"mallory\"");
    client
        .put(&names[0], forged.as_bytes(), Condition::Always)
        .unwrap();
    let err = verify_fails(&a);
    assert!(
        err.contains(&format!("record 1 ({}) was edited", names[0])),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    client.put(&names[0], &original, Condition::Always).unwrap();
    ok(&a.nivis(&["log", "--verify"]));

    // Deleted: record 2 is gone.
    client.delete(&names[1], Condition::Always).unwrap();
    let err = verify_fails(&b);
    assert!(
        err.contains("record 2 is missing (deleted or moved)"),
        "{err}"
    );

    a.hunt_all(&[&token, &a.secret], &[]);
    b.hunt_all(&[&token, &b.secret], &[]);
}

#[test]
fn a_local_state_keeps_its_log_beside_it_private_and_chained() {
    let mut s = Sandbox::new();
    let token = unique_token("nvaudit");
    s.set_env("NIVIS_VAR_token", Some(&token));
    s.set_env("USER", Some("carol"));
    Sandbox::write_flake(&s.proj, &plan(""));
    ok(&s.nivis(&["apply", "--auto-approve"]));
    // A failed run is recorded too, with its result.
    s.set_env("NIVIS_FAKE_FAIL_ON", Some("b"));
    Sandbox::write_flake(
        &s.proj,
        &plan("(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"B\"; config.label = \"b\"; })"),
    );
    assert!(!s.nivis(&["apply", "--auto-approve"]).status.success());
    s.set_env("NIVIS_FAKE_FAIL_ON", None);
    // The state verbs are recorded too; plans and reads are not.
    ok(&s.nivis(&["state", "mv", "alpha.alpha_token.A", "alpha.alpha_token.A2"]));
    ok(&s.nivis(&["force-unlock", "no-such-lock"]));
    ok(&s.nivis(&["plan"]));
    ok(&s.nivis(&["state", "list"]));
    // A saved plan applied is named by its sha256.
    let saved = s.path("reviewed.plan");
    ok(&s.nivis(&["plan", "--out", saved.to_str().unwrap()]));
    ok(&s.nivis(&["apply", saved.to_str().unwrap()]));
    let saved_sha256 = nivis::engine::plan_file::sha256(&std::fs::read(&saved).unwrap());
    ok(&s.nivis(&["destroy", "--auto-approve"]));

    let all = records(&s, &[]);
    let summary: Vec<(String, String)> = all
        .iter()
        .map(|r| {
            (
                r["command"].as_str().unwrap().to_string(),
                r["result"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("nivis apply".to_string(), "ok".to_string()),
            ("nivis apply".into(), "failed".into()),
            ("nivis state mv".into(), "ok".into()),
            ("nivis force-unlock".into(), "ok".into()),
            ("nivis apply".into(), "ok".into()),
            ("nivis destroy".into(), "ok".into()),
        ]
    );
    assert_eq!(
        all[2]["changes"],
        serde_json::json!([{"address": "alpha.alpha_token.A2", "action": "move from alpha.alpha_token.A"}])
    );
    assert_eq!(all[4]["savedPlanSha256"], Json::String(saved_sha256));
    // The plan declares A (not A2) and B, which failed before: the saved plan creates both and
    // deletes A2.
    let actions = |i: usize| -> Vec<String> {
        let mut rows: Vec<String> = all[i]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                format!(
                    "{} {}",
                    c["action"].as_str().unwrap(),
                    c["address"].as_str().unwrap()
                )
            })
            .collect();
        rows.sort();
        rows
    };
    assert_eq!(
        actions(4),
        [
            "create alpha.alpha_token.A",
            "create alpha.alpha_token.B",
            "delete alpha.alpha_token.A2"
        ]
    );
    assert_eq!(
        actions(5),
        ["delete alpha.alpha_token.A", "delete alpha.alpha_token.B"]
    );

    // The log lies beside the state, 0600.
    let mut files = Vec::new();
    walk(s.root.path(), &mut files);
    let log = files
        .iter()
        .find(|f| f.to_string_lossy().ends_with("nivis.state.json.audit"))
        .expect("the audit log beside the state");
    assert_eq!(
        std::fs::metadata(log).unwrap().permissions().mode() & 0o777,
        0o600
    );
    ok(&s.nivis(&["log", "--verify"]));
    let text = std::fs::read_to_string(log).unwrap();
    std::fs::write(log, text.replacen("\"carol\"", "\"dave\"", 2)).unwrap();
    let err = verify_fails(&s);
    assert!(
        err.contains("record 1 (") && err.contains("line 1) was edited"),
        "{err}"
    );
    // The hunt excuses files named like the state: look into the log itself.
    let bytes = std::fs::read(log).unwrap();
    for form in leak_forms(&token).iter().chain(&leak_forms(&s.secret)) {
        assert!(!bytes.windows(form.len()).any(|w| w == form.as_slice()));
    }
    s.hunt_for(&token, &[]);
}
