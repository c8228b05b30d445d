//! Failures: provider errors, provider crashes, nivis killed mid-apply, concurrent runs, and
//! secrets that must never leak.

use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

fn many(n: usize, label_prefix: &str) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
         resources = lib.count {n} (i: lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = \"{label_prefix}${{toString i}}\"; }}); \
         inherit ledger; }}"
    )
}

#[test]
fn a_provider_error_stops_dependents_only_and_a_rerun_finishes() {
    // t__0..t__9 independent; dep depends on t__3, whose apply fails.
    let body = "ledger: let ts = lib.count 10 (i: lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = \"l${toString i}\"; }); \
        dep = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"dep\"; config.label = (builtins.elemAt ts 3).refAttr \"id\"; }; \
        in lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; resources = ts ++ [ dep ]; inherit ledger; }";
    let p = Project::new(body)
        .env("NIVIS_FAKE_FAIL_ON", "l3")
        .env("NIVIS_FAKE_PARTIAL_ON", "l5");
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("alpha.alpha_token.t__3") && err.contains("injected failure"),
        "{err}"
    );
    assert!(err.contains("alpha.alpha_token.dep not attempted"), "{err}");
    let listed = stdout(&p.state_cmd(&["state", "list"]));
    assert_eq!(
        listed.lines().count(),
        9,
        "eight good ones plus t__5 recorded as tainted: {listed}"
    );
    assert!(
        !listed.contains("dep") && !listed.contains("t__3"),
        "{listed}"
    );
    let state = p.state_json();
    assert_eq!(
        state["resources"]["alpha.alpha_token.t__5"]["status"],
        "tainted"
    );
    assert_eq!(
        state["resources"]["alpha.alpha_token.t__4"]["status"],
        "ready"
    );

    // Without the faults the rerun creates t__3, replaces the tainted t__5 and creates dep;
    // nothing else changes.
    let p2 = Project {
        env: vec![p.env[0].clone()],
        ..p
    };
    let out = p2.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let changed: Vec<String> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "finished" && e["action"] != "no-op")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    let mut changed = changed;
    changed.sort();
    assert_eq!(
        changed,
        [
            "alpha.alpha_token.dep",
            "alpha.alpha_token.t__3",
            "alpha.alpha_token.t__5"
        ]
    );
    assert_eq!(
        stdout(&p2.state_cmd(&["state", "list"])).lines().count(),
        11
    );
}

#[test]
fn a_provider_crash_is_reported_with_its_trace_and_nothing_is_left_running() {
    let p = Project::new(&many(5, "c")).env("NIVIS_FAKE_CRASH_ON", "c2");
    let out = p.run(&["apply"], &["--auto-approve", "--parallelism", "1"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("crashed"), "{err}");
    assert!(
        err.contains("panic: injected crash"),
        "the provider's panic trace is shown: {err}"
    );
    p.assert_no_leftover_processes();
    // What completed before the crash is recorded.
    let listed = stdout(&p.state_cmd(&["state", "list"]));
    assert!(
        listed.contains("alpha.alpha_token.t__0") && listed.contains("alpha.alpha_token.t__1"),
        "{listed}"
    );
}

#[test]
fn one_provider_crash_is_one_error_naming_what_was_in_flight_and_what_never_started() {
    // 40 resources, 10 at a time, each create taking a while: the crash on c12 fails the
    // creates in flight beside it and every one started after it.
    let p = Project::new(&many(40, "c"))
        .env("NIVIS_FAKE_SLOW_MS", "300")
        .env("NIVIS_FAKE_CRASH_ON", "c12");
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    // Printed whole once, with the trace; before, one block per resource it failed.
    assert_eq!(err.matches("crashed during").count(), 1, "{err}");
    assert_eq!(err.matches("Provider crash output:").count(), 1, "{err}");
    let block = err
        .split_once("provider alpha's crash (above) also failed ")
        .map(|(_, b)| b)
        .unwrap_or_else(|| panic!("no death block: {err}"));
    let more: usize = block.split(' ').next().unwrap().parse().unwrap();
    let recorded = stdout(&p.state_cmd(&["state", "list"])).lines().count();
    // Every resource is recorded, printed whole, or named by the block.
    assert_eq!(recorded + 1 + more, 40, "{recorded} recorded: {err}");
    assert!(
        block.contains("in flight when it died, the object may exist"),
        "{err}"
    );
    p.assert_no_leftover_processes();
}

#[test]
fn killed_mid_apply_then_rerun_creates_each_resource_exactly_once() {
    let p = Project::new(&many(200, "k"))
        .env("NIVIS_FAKE_SLOW_MS", "20")
        .with_object_log();
    let mut child = p.spawn_apply(&[]);
    // Wait until some resources are recorded, then kill -9.
    let started = Instant::now();
    loop {
        let journal = p.state.with_extension("json.journal");
        // Records, not only the notes of the creates in flight (DESIGN §97).
        let records =
            std::fs::read_to_string(&journal).map_or(0, |j| j.matches("{\"put\":").count());
        if records >= 5 || started.elapsed() > Duration::from_secs(60) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    p.assert_no_leftover_processes();
    let before = stdout(&p.state_cmd(&["state", "list"])).lines().count();
    assert!(
        before > 0 && before < 200,
        "killed mid-way: {before} recorded"
    );
    // Everything recorded exists. A create whose answer was in flight when Nivis died cannot
    // be recorded by anyone (Terraform has the same window): at most two per worker.
    let killed = p.remote_vs_state();
    killed.assert_killed_mid_apply(10);

    let p = p.env("NIVIS_FAKE_COUNTER", "100000");
    // The creates in flight were noted as pending (DESIGN §97): the rerun creates none of
    // them until each is resolved, the orphans imported, the others confirmed absent.
    let refused = p.run(&["apply"], &["--auto-approve", "--json"]);
    let (pending, imported) = resolve_pending(
        &refused,
        &killed.orphans,
        |a| format!("k{}", a.trim_start_matches("alpha.alpha_token.t__")),
        |a, id| p.run(&["import", a, id], &[]),
        |a| p.state_cmd(&["state", "resolve", a, "--absent"]),
    );
    assert!(
        killed.orphans.len() <= pending.len(),
        "every orphan is pending: {killed:?} {pending:?}"
    );
    assert_eq!(imported, killed.orphans.len(), "every orphan was pending");
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let created = events(&out)
        .iter()
        .filter(|e| e["type"] == "finished" && e["action"] == "create")
        .count();
    let recorded = stdout(&p.state_cmd(&["state", "list"])).lines().count();
    assert_eq!(recorded, 200);
    assert_eq!(
        created,
        200 - before - imported,
        "only the missing ones are created"
    );
    let o = p.outputs();
    assert_eq!(o.as_object().unwrap().len(), 200);
    let mut ids: Vec<&str> = o
        .as_object()
        .unwrap()
        .values()
        .map(|v| v["id"].as_str().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 200, "every resource exists once with its own id");
    // Remotely: every object alive is recorded, once.
    let after = p.remote_vs_state();
    assert!(
        after.orphans.is_empty() && after.duplicated.is_empty(),
        "{after:?}"
    );
    assert!(after.phantoms.is_empty(), "{after:?}");
}

#[test]
fn a_second_concurrent_apply_is_refused_naming_the_holder() {
    let p = Project::new(&many(3, "s")).env("NIVIS_FAKE_SLOW_MS", "1500");
    let mut first = p.spawn_apply(&[]);
    p.wait_for_lock();
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");
    assert!(err.contains("nivis apply"), "{err}");
    assert!(first.wait().unwrap().success());
}

#[test]
fn secrets_never_reach_the_ir_the_ledger_the_store_or_a_world_readable_file() {
    // C's label references A's sensitive `secret`: the IR carries a __sensitiveRef and the
    // executor substitutes the value.
    let body = "ledger: let a = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; }; \
        c = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"c\"; config.keeper = a.refAttr \"secret\"; }; \
        in lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; resources = [ a c ]; inherit ledger; }";
    // Built at run time so the literal never appears in a source file (the repository itself
    // may be in the store).
    let n = 700_000 + std::process::id() % 100_000;
    let p = Project::new(body).env("NIVIS_FAKE_COUNTER", &n.to_string());
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let secret = format!("secret-{n}");
    let secret = secret.as_str();
    // The executor did substitute it.
    let state = std::fs::read_to_string(&p.state).unwrap();
    assert!(state.contains(secret));
    assert_eq!(
        std::fs::metadata(&p.state).unwrap().permissions().mode() & 0o077,
        0,
        "state is private"
    );

    let ir = p.eval_ir().to_string();
    assert!(!ir.contains(secret), "IR leaks the secret: {ir}");
    assert!(ir.contains("__sensitiveRef"));
    let outputs = p.outputs().to_string();
    assert!(!outputs.contains(secret));

    // No world-readable file in the project, the run directory or the Nix store holds it.
    let grep = Command::new("grep")
        .args(["-rl", secret, "/nix/store", p.dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    for file in stdout(&grep).lines() {
        let mode = std::fs::metadata(file).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o004,
            0,
            "{file} is world-readable and holds the secret"
        );
        assert!(
            !file.starts_with("/nix/store"),
            "{file} in the store holds the secret"
        );
    }
    let run_dirs = Command::new("grep")
        .args(["-rl", secret, "/tmp", "/run/user"])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    for file in stdout(&run_dirs).lines() {
        let mode = std::fs::metadata(file)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        assert_eq!(
            mode & 0o004,
            0,
            "{file} is world-readable and holds the secret"
        );
    }
}

#[test]
fn ctrl_c_finishes_in_flight_work_records_it_and_starts_nothing_new() {
    let p = Project::new(&many(40, "i"));
    let child = Command::new(nivis_bin())
        .args(["apply", "--auto-approve", "--parallelism", "2", "--file"])
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .env("NIVIS_TEST_MARKER", p.marker())
        .env("NIVIS_FAKE_SLOW_MS", "300")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let journal = p.state.with_extension("json.journal");
    let started = Instant::now();
    while !std::fs::metadata(&journal)
        .map(|m| m.len() > 0)
        .unwrap_or(false)
        && started.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", stderr(&out));
    assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
    p.assert_no_leftover_processes();
    let recorded = stdout(&p.state_cmd(&["state", "list"])).lines().count();
    assert!(
        recorded > 0 && recorded < 40,
        "in-flight work recorded, nothing new started: {recorded}"
    );
    // A rerun completes the rest.
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(stdout(&p.state_cmd(&["state", "list"])).lines().count(), 40);
}

/// A reference to an output the target's type does not have can never resolve: plan and apply
/// refuse it before anything runs, naming the referring resource, where the reference sits and
/// the likely intended name, instead of waiting until the fixpoint.
#[test]
fn reference_to_a_missing_attribute_is_refused_up_front() {
    let p = Project::new(
        r#"ledger: let
          a = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "A"; };
          b = lib.mkResource { provider = "beta"; type = "beta_record"; name = "B";
                               config.from = lib.str [ "x-" (a.refAttr "valu") ]; };
          c = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "C";
                               config.label = a.refAttr "secrett"; };
        in lib.toIR {
          providers.alpha = lib.mkProvider { source = "provider-alpha"; };
          providers.beta = lib.mkProvider { source = "provider-beta"; };
          resources = [ a b c ];
          inherit ledger;
        }"#,
    );
    for verb in [&["plan"][..], &["apply", "--auto-approve"][..]] {
        let out = p.run(verb, &[]);
        assert_eq!(out.status.code(), Some(1), "{verb:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("[beta.beta_record.B] at from")
                && err.contains(r#"reference to alpha.alpha_token.A.valu: alpha_token has no attribute "valu"; did you mean "value"?"#),
            "{verb:?}: {err}"
        );
        assert!(
            err.contains("[alpha.alpha_token.C] at label")
                && err.contains(r#"has no attribute "secrett"; did you mean "secret"?"#),
            "{verb:?}: {err}"
        );
    }
    let listed = p.state_cmd(&["state", "list"]);
    assert!(
        stdout(&listed).trim().is_empty(),
        "nothing was created: {}",
        stdout(&listed)
    );
}
