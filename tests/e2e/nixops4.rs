//! NixOps4 resource providers in one graph with Terraform providers: the real
//! `nixops4-resources-local` mixed with the real null provider and the tfplugin6 fakes, and the
//! fault cases against `provider-nixops4-fake`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::util::*;

/// The inputs of the mixed plan that the tests change.
struct Mixed<'a> {
    label: &'a str,
    word: &'a str,
    with_file: bool,
}

/// real null → NixOps4 memo and exec → fake tfplugin6 beta → NixOps4 file, whose contents embed
/// values from both protocols (through Nix).
fn mixed(dir: &std::path::Path, m: &Mixed<'_>) -> String {
    let null = real_provider("null");
    let local = real_provider("nixops4");
    format!(
        r#"ledger: let
          n = lib.mkResource {{ provider = "null"; type = "null_resource"; name = "n"; config.triggers.seed = "s1"; }};
          m = lib.mkResource {{ provider = "local"; type = "memo"; name = "m";
                config.initialize_with = {{ null_id = n.refAttr "id"; label = "{label}"; }}; }};
          e = lib.mkResource {{ provider = "local"; type = "exec"; name = "e";
                config = {{ executable = "/bin/echo"; args = [ "-n" "{word}" (n.refAttr "id") ]; }}; }};
          b = lib.mkResource {{ provider = "beta"; type = "beta_record"; name = "b"; config.from = m.ref [ "value" "null_id" ]; }};
          f = lib.mkResource {{ provider = "local"; type = "file"; name = "f";
                config = {{ name = "{dir}/out.txt";
                           contents = lib.str [ "memo=" (m.ref [ "value" "label" ]) " exec=" (e.refAttr "stdout") " beta=" (b.refAttr "endpoint") "\n" ]; }}; }};
        in lib.toIR {{
          providers = {{
            null = lib.mkProvider {{ source = "{null}"; }};
            beta = lib.mkProvider {{ source = "provider-beta"; }};
            local = lib.mkProvider {{ source = "{local}"; kind = "nixops4"; statelessTypes = [ "file" ]; }};
          }};
          resources = [ n m e b ] ++ (if {with_file} then [ f ] else [ ]);
          inherit ledger;
        }}"#,
        label = m.label,
        word = m.word,
        with_file = m.with_file,
        dir = dir.display(),
        null = null.display(),
        local = local.display(),
    )
}

/// The changes an apply or destroy carried out: (id, action), no-ops left out.
fn finished(out: &std::process::Output) -> Vec<(String, String)> {
    actions(out, "finished")
        .into_iter()
        .filter(|(_, action)| action != "no-op")
        .map(|(id, action)| (id, action.as_str().unwrap_or("?").to_string()))
        .collect()
}

#[test]
fn a_mixed_graph_applies_updates_recreates_and_forgets() {
    let p = Project::new("ledger: {}");
    let dir = p.dir.path().to_path_buf();
    let file = dir.join("out.txt");
    let plan = |label, word, with_file| {
        p.set_plan(&mixed(
            &dir,
            &Mixed {
                label,
                word,
                with_file,
            },
        ))
    };
    plan("first", "hello", true);
    assert_success(&p.run(&["validate"], &[]));

    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let fixpoint = events(&out)
        .into_iter()
        .find(|e| e["type"] == "fixpoint")
        .unwrap();
    assert_eq!(
        fixpoint["applyPhases"], 2,
        "the file's contents are computed by Nix from outputs of phase 1"
    );
    let o = p.outputs();
    let nid = o["null.null_resource.n"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(o["local.memo.m"]["value"]["null_id"], nid.as_str());
    assert_eq!(o["local.exec.e"]["stdout"], format!("hello {nid}"));
    assert_eq!(o["beta.beta_record.b"]["endpoint"], format!("beta://{nid}"));
    assert_eq!(o["local.file.f"], serde_json::json!({}));
    let expected =
        |label: &str, word: &str| format!("memo={label} exec={word} {nid} beta=beta://{nid}\n");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        expected("first", "hello")
    );

    // A second plan is a no-op.
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));

    // memo is stateful: a new input is an update, and memo keeps its first value, so nothing
    // downstream changes. The plan cannot know that (no plan request): b, which reads memo's
    // value directly, is planned with it unknown, and the file, which Nix computes from it, is
    // decided later. Apply then finds nothing else to do.
    plan("second", "hello", true);
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    assert_eq!(
        actions(&out, "planned"),
        [
            ("local.memo.m".to_string(), Json::from("update")),
            ("beta.beta_record.b".to_string(), Json::from("update"))
        ]
    );
    let b = events(&out)
        .into_iter()
        .find(|e| e["type"] == "planned" && e["id"] == "beta.beta_record.b")
        .unwrap();
    let from = b["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "from")
        .unwrap_or_else(|| panic!("{b}"));
    assert_eq!(from["after"], serde_json::json!({"unknown": true}), "{b}");
    assert!(
        events(&out)
            .iter()
            .any(|e| e["type"] == "deferred" && e["id"] == "local.file.f"),
        "{}",
        stdout(&out)
    );
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        finished(&out),
        [("local.memo.m".to_string(), "update".to_string())]
    );
    assert_eq!(p.outputs()["local.memo.m"]["value"]["label"], "first");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        expected("first", "hello")
    );

    // exec is stateful too: updated (run again); its new stdout reaches the file through Nix,
    // and the file, a stateless type, is re-created once, with the new value.
    plan("second", "bonjour", true);
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("~ local.exec.e (exec)"), "{text}");
    assert!(text.contains("~? local.file.f (file)"), "{text}");
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        finished(&out),
        [
            ("local.exec.e".to_string(), "update".to_string()),
            ("local.file.f".to_string(), "recreate".to_string())
        ]
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        expected("first", "bonjour")
    );
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));

    // Removing the file forgets it: the plan says so, human and JSON, and the file stays.
    plan("second", "bonjour", false);
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains(". local.file.f (file)"), "{text}");
    assert!(
        text.contains("forget: removed from state and left as it is"),
        "{text}"
    );
    assert!(text.contains("1 to forget"), "{text}");
    let out = p.run(&["plan"], &["--json"]);
    assert_eq!(
        actions(&out, "planned"),
        [("local.file.f".to_string(), Json::from("forget"))]
    );
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        finished(&out),
        [("local.file.f".to_string(), "forget".to_string())]
    );
    assert!(file.exists(), "a forgotten object is left as it is");
    let listed = stdout(&p.state_cmd(&["state", "list"]));
    assert!(!listed.contains("local.file.f"), "{listed}");

    // destroy deletes what can be deleted and forgets the rest.
    let out = p.run(&["destroy"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let mut removed = finished(&out);
    removed.sort();
    assert_eq!(
        removed,
        [
            ("beta.beta_record.b".to_string(), "delete".to_string()),
            ("local.exec.e".to_string(), "forget".to_string()),
            ("local.memo.m".to_string(), "forget".to_string()),
            ("null.null_resource.n".to_string(), "delete".to_string()),
        ]
    );
    assert_eq!(stdout(&p.state_cmd(&["state", "list"])).trim(), "");
    p.assert_no_leftover_processes();
}

/// A plan with `good` (no fault) and `bad` (the fault), `bad` after `good`.
fn faulty(fault: &str) -> String {
    format!(
        r#"ledger: let
          good = lib.mkResource {{ provider = "fake"; type = "thing"; name = "good"; config.value = "g"; }};
          bad = lib.mkResource {{ provider = "fake"; type = "thing"; name = "bad";
                  config = {{ value = "b"; fault = "{fault}"; }}; dependsOn = [ good ]; }};
        in lib.toIR {{
          providers.fake = lib.mkProvider {{ source = "provider-nixops4-fake"; kind = "nixops4"; }};
          resources = [ good bad ]; inherit ledger;
        }}"#
    )
}

#[test]
fn each_protocol_fault_gives_a_clear_error_and_leaves_state_consistent() {
    let cases = [
        (
            "garbage",
            vec![
                "provider fake: answered createResourceRequest (type \"thing\") with a line that is not JSON",
                "The line: this is not JSON",
            ],
        ),
        (
            "unknown",
            vec!["answered createResourceRequest (type \"thing\") with a response of unknown type \"surpriseResponse\""],
        ),
        (
            "exit",
            vec![
                "provider fake: exited before answering createResourceRequest (type \"thing\")",
                "exit status: 3",
                "fake: exiting without an answer",
            ],
        ),
        (
            "slow",
            vec![
                "provider fake: did not answer createResourceRequest (type \"thing\") within 1s",
                "NIVIS_NIXOPS4_TIMEOUT_SECS",
            ],
        ),
        (
            "error",
            vec![
                "provider fake: injected failure on create",
                "3 more line(s); run with -v",
            ],
        ),
    ];
    for (fault, expect) in cases {
        let p = Project::new(&faulty(fault))
            .env("NIVIS_NIXOPS4_TIMEOUT_SECS", "1")
            .env("NIVIS_FAKE_N4_SLOW_MS", "20000");
        let out = p.run(&["apply"], &["--auto-approve"]);
        assert!(!out.status.success(), "{fault}: the apply must fail");
        let err = stderr(&out);
        assert!(err.contains("[fake.thing.bad]"), "{fault}: {err}");
        for want in expect {
            assert!(err.contains(want), "{fault}: {want:?} missing from:\n{err}");
        }
        // The good resource is recorded, the faulty one is not.
        let listed = stdout(&p.state_cmd(&["state", "list"]));
        assert_eq!(listed.trim(), "fake.thing.good", "{fault}: {listed}");
        p.assert_no_leftover_processes();
    }
}

#[test]
fn error_detail_at_v_a_failed_update_keeps_the_record_and_a_rerun_completes() {
    let p = Project::new(&faulty("none"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(p.outputs()["fake.thing.bad"]["by"], "create");

    // An update that fails leaves the recorded object as it was.
    p.set_plan(&faulty("error"));
    let out = p.run(&["apply"], &["--auto-approve", "-v"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("provider fake: injected failure on update")
            && err.contains("Caused by: the fake was asked to fail"),
        "at -v the rest of the message is the detail: {err}"
    );
    let o = p.outputs();
    assert_eq!(o["fake.thing.bad"]["by"], "create");
    assert_eq!(o["fake.thing.bad"]["value"], "b");

    // Back to a good input: the update goes through.
    p.set_plan(&faulty("none").replace("value = \"b\"", "value = \"b2\""));
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(
        finished(&out),
        [("fake.thing.bad".to_string(), "update".to_string())]
    );
    let o = p.outputs();
    assert_eq!(o["fake.thing.bad"]["by"], "update");
    assert_eq!(o["fake.thing.bad"]["value"], "b2");
    p.assert_no_leftover_processes();
}

#[test]
fn requests_carry_is_stateful_and_the_recorded_inputs_and_outputs() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let body = |v: &str| {
        format!(
            r#"ledger: lib.toIR {{
              providers.fake = lib.mkProvider {{ source = "provider-nixops4-fake"; kind = "nixops4"; statelessTypes = [ "other" ]; }};
              resources = [ (lib.mkResource {{ provider = "fake"; type = "thing"; name = "t"; config.value = "{v}"; }}) ];
              inherit ledger; }}"#
        )
    };
    let p = Project::new(&body("one")).env("NIVIS_FAKE_N4_LOG", log.path().to_str().unwrap());
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    p.set_plan(&body("two"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let sent: Vec<Json> = std::fs::read_to_string(log.path())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        sent,
        [
            serde_json::json!({"createResourceRequest": {"type": "thing", "inputProperties": {"value": "one"}, "isStateful": true}}),
            serde_json::json!({"updateResourceRequest": {
                "resource": {"type": "thing", "inputProperties": {"value": "one"}, "outputProperties": {"value": "one", "by": "create"}},
                "inputProperties": {"value": "two"}}}),
        ]
    );
}

#[test]
fn ctrl_c_lets_the_request_in_flight_finish_and_sends_nothing_new() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let body = r#"ledger: let
          slow = lib.mkResource { provider = "fake"; type = "thing"; name = "slow"; config = { value = "s"; fault = "slow"; }; };
          next = lib.mkResource { provider = "fake"; type = "thing"; name = "next"; config.value = slow.refAttr "value"; };
        in lib.toIR {
          providers.fake = lib.mkProvider { source = "provider-nixops4-fake"; kind = "nixops4"; };
          resources = [ slow next ]; inherit ledger;
        }"#;
    let p = Project::new(body);
    let child = Command::new(nivis_bin())
        .args(["apply", "--auto-approve", "--file"])
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .env("NIVIS_TEST_MARKER", p.marker())
        .env("NIVIS_FAKE_N4_SLOW_MS", "1500")
        .env("NIVIS_FAKE_N4_LOG", log.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::fs::metadata(log.path()).map(|m| m.len()).unwrap_or(0) == 0
        && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    p.assert_no_leftover_processes();
    assert_eq!(
        stdout(&p.state_cmd(&["state", "list"])).trim(),
        "fake.thing.slow",
        "the request in flight was answered and recorded; nothing new was sent"
    );
    assert_eq!(
        std::fs::read_to_string(log.path()).unwrap().lines().count(),
        1
    );
    // A rerun completes the rest.
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    assert_eq!(p.outputs()["fake.thing.next"]["value"], "s");
}

#[test]
fn a_registry_address_or_a_directory_is_not_a_nixops4_source() {
    let body = |source: &str| {
        format!(
            r#"ledger: lib.toIR {{
              providers.x = lib.mkProvider {{ source = "{source}"; kind = "nixops4"; }};
              resources = [ (lib.mkResource {{ provider = "x"; type = "thing"; name = "t"; }}) ];
              inherit ledger; }}"#
        )
    };
    let p = Project::new(&body("hashicorp/null"));
    let out = p.run(&["plan"], &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out)
            .contains("a NixOps4 provider is a path or a binary name, never a registry address"),
        "{}",
        stderr(&out)
    );
    p.set_plan(&body(&p.dir.path().display().to_string()));
    let out = p.run(&["plan"], &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is a directory; give the NixOps4 provider binary itself"),
        "{}",
        stderr(&out)
    );
}

/// A secret passed to a NixOps4 resource: hidden in errors that quote the request (the real
/// provider does), in its log lines at -v, in plans, and in the ledger, since a provider may
/// copy any input into any output. One redaction ([`nivis::secrets`]) covers all of them.
#[test]
fn secrets_given_to_a_nixops4_resource_stay_hidden() {
    let body = |fault: &str| {
        format!(
            r#"ledger: let
              a = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "a"; }};
              t = lib.mkResource {{ provider = "fake"; type = "thing"; name = "t";
                    config = {{ value = a.refAttr "secret"; fault = "{fault}"; }}; }};
            in lib.toIR {{
              providers = {{
                alpha = lib.mkProvider {{ source = "provider-alpha"; }};
                fake = lib.mkProvider {{ source = "provider-nixops4-fake"; kind = "nixops4"; }};
              }};
              resources = [ a t ]; inherit ledger;
            }}"#
        )
    };
    // Built at run time so the literal never appears in a source file.
    let n = 700_000 + std::process::id() % 100_000;
    let secret = format!("secret-{n}");
    let p = Project::new(&body("echo")).env("NIVIS_FAKE_COUNTER", &n.to_string());
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("provider fake: cannot handle") && err.contains("(sensitive value)"),
        "{err}"
    );
    assert!(
        !err.contains(&secret) && !stdout(&out).contains(&secret),
        "{err}"
    );
    let out = p.run(&["apply"], &["--auto-approve", "--json", "-v"]);
    assert!(!out.status.success());
    assert!(stdout(&out).contains("(sensitive)"), "{}", stdout(&out));
    assert!(!stdout(&out).contains(&secret), "{}", stdout(&out));
    assert!(!stderr(&out).contains(&secret), "{}", stderr(&out));
    let out = p.run(&["plan"], &[]);
    assert!(
        stdout(&out).contains("fault = \"echo\""),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains(&secret), "{}", stdout(&out));

    // The provider logs the request it is given (stderr, shown at -v).
    p.set_plan(&body("log"));
    let out = p.run(&["apply"], &["--auto-approve", "-v"]);
    assert_success(&out);
    assert!(stderr(&out).contains("fake: request"), "{}", stderr(&out));
    assert!(!stderr(&out).contains(&secret), "{}", stderr(&out));
    p.set_plan(&body("none"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert!(
        std::fs::read_to_string(&p.state).unwrap().contains(&secret),
        "the executor substituted the secret"
    );
    let outputs = p.outputs();
    assert!(!outputs.to_string().contains(&secret), "{outputs}");
    assert!(outputs["fake.thing.t"]["value"]["__sensitiveRef"].is_object());
}
