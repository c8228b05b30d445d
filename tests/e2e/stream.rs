//! The streaming fixpoint (DESIGN §89) through the CLI: a value Nix computes from an output
//! starts its resource when that output is recorded, while unrelated slow resources still run
//! (an evaluation wave joins the running phase); a wave a mandatory policy refuses starts
//! nothing while the work in flight completes and is recorded; nivis killed between a commit
//! and the evaluation it triggered converges on the rerun with no orphan; a chain of more Nix
//! hops than a phase once had room for runs in waves while one operation is in flight.
//!
//! Order is asserted through the `--json` event stream, never wall-clock time: the latency
//! benchmark (bench/latency.py) measures the time.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use serde_json::Value as Json;

use crate::util::*;

/// `s1` (slow: the fake sleeps on labels `slow*`), `f1` (fast), and `s2`, whose label Nix
/// computes from `f1`'s id, so `s2` waits on `f1` through Nix and on nothing else.
fn barrier(policies: &str) -> String {
    format!(
        r#"{{
  plan = ledger:
    let
      s1 = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "s1"; config.label = "slow-1"; }};
      f1 = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "f1"; config.label = "fast"; }};
      s2 = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "s2";
        config.label = lib.str [ "after-" (f1.refAttr "id") ]; }};
    in
    lib.toIR {{ providers.alpha = lib.mkProvider {{ source = "provider-alpha"; }}; resources = [ s1 f1 s2 ]; inherit ledger; }};
  policies = [ {policies} ];
}}"#
    )
}

const S1: &str = "alpha.alpha_token.s1";
const F1: &str = "alpha.alpha_token.f1";
const S2: &str = "alpha.alpha_token.s2";

/// A project of [`barrier`] whose `s1` takes `slow_ms` to create.
fn project(policies: &str, slow_ms: u64) -> Project {
    Project::new(&barrier(policies))
        .env("NIVIS_FAKE_LATENCY_MS", &format!("slow*={slow_ms}"))
        .with_object_log()
}

/// The position of the first event of `kind` about `id`.
fn position(events: &[Json], kind: &str, id: &str) -> Option<usize> {
    events
        .iter()
        .position(|e| e["type"] == kind && e["id"] == id)
}

#[test]
fn a_resource_nix_computes_from_a_fast_output_starts_before_an_unrelated_slow_one_ends() {
    let p = project("", 5000);
    let out = p.run(&["apply"], &["--attr", "plan", "--auto-approve", "--json"]);
    assert_success(&out);
    let events = events(&out);
    let at = |kind, id| {
        position(&events, kind, id).unwrap_or_else(|| panic!("no {kind} {id}: {events:#?}"))
    };
    // f1 is recorded, Nix evaluates with it, and s2 starts while s1 still runs.
    assert!(at("finished", F1) < at("started", S2), "{events:#?}");
    assert!(at("started", S2) < at("finished", S1), "{events:#?}");
    let wave = (events.iter())
        .find(|e| e["type"] == "wave")
        .unwrap_or_else(|| panic!("no wave: {events:#?}"));
    assert_eq!(wave["phase"], 2, "{wave}");
    assert_eq!(wave["trigger"], serde_json::json!([F1]), "{wave}");
    assert_eq!(wave["ready"], serde_json::json!([S2]), "{wave}");
    let started_s2 = &events[at("started", S2)];
    assert_eq!(started_s2["phase"], 2, "s2's events carry its wave");
    assert_eq!(events[at("finished", S1)]["phase"], 1, "s1's carry its own");

    let o = p.outputs();
    let f1_id = o[F1]["id"].as_str().unwrap();
    assert_eq!(o[S2]["label"], format!("after-{f1_id}"), "{o}");
    p.assert_remote_matches_state(&[]);

    // The human stream names the wave that joined while s1 ran.
    let p = project("", 3000);
    let out = p.run(&["apply"], &["--attr", "plan", "--auto-approve"]);
    let text = succeeded(&out);
    assert!(
        text.contains(&format!(
            "Phase 2 (Nix re-evaluated with {F1}'s outputs while other operations run)"
        )),
        "{text}"
    );
    assert!(
        text.contains("(phase 1)"),
        "s1 ends after phase 2 began: {text}"
    );

    // A second apply is a no-op: nothing starts, nothing evaluates in waves.
    let again = p.run(&["apply"], &["--attr", "plan", "--auto-approve", "--json"]);
    assert_success(&again);
    let again = crate::util::events(&again);
    assert!(
        again
            .iter()
            .all(|e| e["type"] != "started" && e["type"] != "wave"),
        "{again:#?}"
    );
}

/// "No alpha_token labelled after-…", mandatory: refuses s2 once Nix computed its label.
const REFUSE_S2: &str = r#"(lib.policy.plan {
      name = "no-after-tokens";
      level = "mandatory";
      check = change: !(change.type == "alpha_token" && builtins.substring 0 6 (change.after.label or "") == "after-");
      message = change: "${change.address} is labelled after-";
    })"#;

#[test]
fn a_wave_a_mandatory_policy_refuses_starts_nothing_while_work_in_flight_completes() {
    let p = project(REFUSE_S2, 4000);
    let out = p.run(&["apply"], &["--attr", "plan", "--auto-approve", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let events = events(&out);
    let violation = (events.iter())
        .position(|e| e["type"] == "policy-violation")
        .unwrap_or_else(|| panic!("no violation: {events:#?}"));
    assert_eq!(events[violation]["address"], S2);
    assert_eq!(events[violation]["phase"], 2, "checked for the wave");
    // Refused while s1 was still running; s1 then completed and was recorded.
    let finished_s1 = position(&events, "finished", S1).expect("s1 finished");
    assert!(violation < finished_s1, "{events:#?}");
    assert!(position(&events, "started", S2).is_none(), "{events:#?}");
    let o = p.outputs();
    assert!(o.get(S1).is_some() && o.get(F1).is_some(), "{o}");
    assert!(o.get(S2).is_none(), "{o}");
    p.assert_remote_matches_state(&[]);
    assert!(
        stderr(&out).contains("no-after-tokens"),
        "the error names the rule: {}",
        stderr(&out)
    );
}

/// `f1` (fast), `f2` (`slow-f2`: 100 ms), `s2`, whose label Nix computes from `f1`'s id, and a
/// plan whose every evaluation burns half a second or more of Nix's time first.
const SLOW_NIX: &str = r#"{
  plan = ledger:
    let
      burn = builtins.foldl' (a: b: a + b) 0 (builtins.genList (x: x) 1000000);
      f1 = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "f1"; config.label = "fast"; };
      f2 = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "f2"; config.label = "slow-f2"; };
      s2 = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "s2";
        config.label = lib.str [ "after-" (f1.refAttr "id") ]; };
    in
    builtins.seq burn (lib.toIR { providers.alpha = lib.mkProvider { source = "provider-alpha"; }; resources = [ f1 f2 s2 ]; inherit ledger; });
}"#;

#[test]
fn a_result_that_arrives_while_a_wave_evaluates_is_recorded_at_once() {
    let p = Project::new(SLOW_NIX)
        .env("NIVIS_FAKE_LATENCY_MS", "slow*=100")
        .with_object_log();
    let out = p.run(&["apply"], &["--attr", "plan", "--auto-approve", "--json"]);
    assert_success(&out);
    let events = events(&out);
    let at = |kind, id| {
        position(&events, kind, id).unwrap_or_else(|| panic!("no {kind} {id}: {events:#?}"))
    };
    let wave = (events.iter())
        .position(|e| e["type"] == "wave")
        .unwrap_or_else(|| panic!("no wave: {events:#?}"));
    let f2 = "alpha.alpha_token.f2";
    // f1's commit started the wave's evaluation (half a second of Nix or more); f2 ended 100 ms in and was
    // recorded then, not once Nix returned (DESIGN §101).
    assert!(at("finished", F1) < wave, "{events:#?}");
    assert!(at("finished", f2) < wave, "{events:#?}");
    assert!(wave < at("started", S2), "{events:#?}");
    let o = p.outputs();
    let f1_id = o[F1]["id"].as_str().unwrap();
    assert_eq!(o[S2]["label"], format!("after-{f1_id}"), "{o}");
    p.assert_remote_matches_state(&[]);
}

#[test]
fn killed_between_a_commit_and_the_evaluation_it_triggered_the_rerun_converges() {
    let p = project("", 8000);
    let mut child = spawn_json_apply(&p);
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = Vec::new();
    for line in stdout.lines() {
        let line = line.expect("read the event stream");
        let event: Json = serde_json::from_str(&line).unwrap_or(Json::Null);
        let f1_recorded = event["type"] == "finished" && event["id"] == F1;
        seen.push(event);
        if f1_recorded {
            // f1 is durable; the evaluation it triggered is running now.
            unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
            break;
        }
    }
    let _ = child.wait();
    assert!(
        seen.iter().all(|e| e["type"] != "wave"),
        "killed before the wave joined: {seen:#?}"
    );
    p.assert_no_leftover_processes();
    let listed = stdout_of(&p.state_cmd(&["state", "list"]));
    assert!(listed.contains(F1) && !listed.contains(S2), "{listed}");
    let killed = p.remote_vs_state();
    assert!(killed.orphans.is_empty(), "{killed:?}");
    assert!(killed.phantoms.is_empty(), "{killed:?}");

    // A fresh fake process counts ids from 0 again: start the rerun's elsewhere.
    let p = p
        .env("NIVIS_FAKE_LATENCY_MS", "")
        .env("NIVIS_FAKE_COUNTER", "100000");
    // The creates in flight at the kill were noted (DESIGN §97) and made no object (the
    // orphans are none): confirmed absent, as a user would.
    let plan = p.run(&["plan"], &["--attr", "plan", "--json"]);
    resolve_pending(
        &plan,
        &killed.orphans,
        |a| a.to_string(),
        |a, id| p.run(&["import", a, id], &["--attr", "plan"]),
        |a| p.state_cmd(&["state", "resolve", a, "--absent"]),
    );
    let out = p.run(&["apply"], &["--attr", "plan", "--auto-approve", "--json"]);
    assert_success(&out);
    let created: Vec<String> = (crate::util::events(&out).iter())
        .filter(|e| e["type"] == "finished" && e["action"] == "create")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert!(!created.contains(&F1.to_string()), "{created:?}");
    let o = p.outputs();
    let f1_id = o[F1]["id"].as_str().unwrap();
    assert_eq!(o[S2]["label"], format!("after-{f1_id}"), "{o}");
    let rerun = p.remote_vs_state();
    assert!(rerun.orphans.is_empty(), "{rerun:?}");
    assert!(
        rerun.phantoms.is_empty() && rerun.duplicated.is_empty(),
        "{rerun:?}"
    );
}

/// `nivis apply --auto-approve --json` of `p`'s plan, its event stream piped.
fn spawn_json_apply(p: &Project) -> Child {
    Command::new(nivis_bin())
        .args([
            "apply",
            "--auto-approve",
            "--json",
            "--attr",
            "plan",
            "--file",
        ])
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .current_dir(p.dir.path())
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn nivis")
}

/// More Nix hops than the 32 waves a phase once had room for (DESIGN §104).
const HOPS: usize = 40;

/// `held` (label `hold-1`: its create waits until the test releases it) beside a chain of
/// [`HOPS`] resources, each labelled by Nix from the id of the one before.
const HOP_CHAIN: &str = r#"{
  plan = ledger:
    let
      hop = k: lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "h${toString k}";
        config.label = if k == 0 then "hop" else lib.str [ "hop-" ((hop (k - 1)).refAttr "id") ]; };
      held = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "held"; config.label = "hold-1"; };
    in
    # 40 hops: HOPS.
    lib.toIR { providers.alpha = lib.mkProvider { source = "provider-alpha"; }; resources = [ held ] ++ builtins.genList hop 40; inherit ledger; };
}"#;

#[test]
fn a_chain_of_more_hops_than_the_old_wave_limit_runs_in_waves_while_one_operation_is_in_flight() {
    let p = Project::new(HOP_CHAIN).with_object_log();
    let release = p.dir.path().join("release-held");
    let hold = format!("hold*={}", release.display());
    let p = p.env("NIVIS_FAKE_HOLD_UNTIL", &hold);
    let last_hop = format!("alpha.alpha_token.h{}", HOPS - 1);
    let mut child = spawn_json_apply(&p);
    // Should the hops stop short of the last (waiting for the phase to end), `held` is
    // released anyway after a while, so the test fails instead of hanging.
    let watchdog = release.clone();
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(240));
        let _ = std::fs::write(watchdog, "");
    });
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut events = Vec::new();
    for line in stdout.lines() {
        let event: Json =
            serde_json::from_str(&line.expect("read the event stream")).unwrap_or(Json::Null);
        if event["type"] == "finished" && event["id"] == last_hop.as_str() {
            std::fs::write(&release, "").expect("release held");
        }
        events.push(event);
    }
    assert!(child.wait().expect("nivis ends").success(), "{events:#?}");
    let held_finished = position(&events, "finished", "alpha.alpha_token.held")
        .unwrap_or_else(|| panic!("held never finished: {events:#?}"));
    for k in 0..HOPS {
        let hop = format!("alpha.alpha_token.h{k}");
        let finished = position(&events, "finished", &hop);
        assert!(
            finished.is_some_and(|f| f < held_finished),
            "{hop} waited for the phase to end: {events:#?}"
        );
    }
    let waves = events.iter().filter(|e| e["type"] == "wave").count();
    assert_eq!(waves, HOPS - 1, "one wave per Nix hop: {events:#?}");
    let o = p.outputs();
    let before = o["alpha.alpha_token.h38"]["id"].as_str().unwrap();
    assert_eq!(
        o[last_hop.as_str()]["label"],
        format!("hop-{before}"),
        "{o}"
    );
    p.assert_no_leftover_processes();
}

fn stdout_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
