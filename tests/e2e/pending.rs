//! Pending operations (DESIGN §97): a create sent to a provider is noted in the state before it
//! leaves, so a run killed at any moment leaves no object the next run does not announce; the
//! fakes' object log is the provider's view of what exists.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use rand::{Rng, SeedableRng};

use crate::util::*;

const N: usize = 200;

fn many() -> String {
    tokens(N)
}

/// `n` alpha tokens labelled `k0`, `k1`, ...
fn tokens(n: usize) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
         resources = lib.count {n} (i: lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = \"k${{toString i}}\"; }}); \
         inherit ledger; }}"
    )
}

/// The address of the resource whose object carries `label` (`k7` -> `alpha.alpha_token.t__7`).
fn address_of(label: &str) -> String {
    format!("alpha.alpha_token.t__{}", label.trim_start_matches('k'))
}

/// The pending operations a `--json` run announced, by address, with their action.
fn announced(out: &std::process::Output) -> BTreeMap<String, String> {
    events(out)
        .iter()
        .filter(|e| e["type"] == "pending-operation")
        .map(|e| {
            let id = e["id"].as_str().expect("id").to_string();
            (id, e["action"].as_str().expect("action").to_string())
        })
        .collect()
}

#[test]
fn a_run_killed_at_random_moments_leaves_every_orphan_announced_and_resolving_converges() {
    let seed: u64 = std::env::var("NIVIS_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("kill moments seeded with NIVIS_TEST_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut p = Project::new(&many())
        .env("NIVIS_FAKE_LATENCY_MS", "k*=150")
        .with_object_log();
    let (mut imported, mut absent, mut pending_seen) = (0, 0, 0);
    for kill in 0..20u64 {
        // Each run's fake numbers its objects from its own seed: ids never repeat.
        p = p.env("NIVIS_FAKE_COUNTER", &(1_000_000 * (kill + 1)).to_string());
        if p.recorded_objects().len() >= N {
            // Everything exists: start again from nothing, so every kill hits creates.
            assert_success(&p.run(&["destroy"], &["--auto-approve"]));
        }
        let moment = Duration::from_millis(rng.gen_range(300..2500));
        let mut child = p.spawn_apply(&["--parallelism", "10"]);
        std::thread::sleep(moment);
        unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
        let _ = child.wait();
        p.assert_no_leftover_processes();

        let plan = p.run(&["plan"], &["--json"]);
        let pending = announced(&plan);
        pending_seen += pending.len();
        let diff = p.remote_vs_state();
        assert!(
            diff.phantoms.is_empty(),
            "kill {kill} at {moment:?}: {diff:?}"
        );
        assert!(
            diff.duplicated.is_empty(),
            "kill {kill} at {moment:?}: {diff:?}"
        );
        let orphans: BTreeMap<String, String> = (diff.orphans.iter())
            .map(|(id, label)| (address_of(label), id.clone()))
            .collect();
        for address in orphans.keys() {
            assert_eq!(
                pending.get(address).map(String::as_str),
                Some("create"),
                "kill {kill} at {moment:?} (seed {seed}): the orphan of {address} was not \
                 announced; announced: {pending:?}"
            );
        }
        if !pending.is_empty() {
            assert!(
                !plan.status.success(),
                "a plan with pending creates does not plan them as plain creates"
            );
            let text = String::from_utf8_lossy(&plan.stdout);
            assert!(text.contains("was in flight when run "), "{text}");
        }
        // The user's way on: import what exists, say what does not.
        let (_, now_imported) = resolve_pending(
            &plan,
            &diff.orphans,
            |a| format!("k{}", a.trim_start_matches("alpha.alpha_token.t__")),
            |a, id| p.run(&["import", a, id], &[]),
            |a| p.state_cmd(&["state", "resolve", a, "--absent"]),
        );
        imported += now_imported;
        absent += pending.len() - now_imported;
        let resolved = p.run(&["plan"], &["--json"]);
        assert!(announced(&resolved).is_empty(), "kill {kill}: all resolved");
    }
    eprintln!(
        "seed {seed}: {pending_seen} pending operations announced, {imported} imported, \
         {absent} resolved as absent"
    );
    assert!(pending_seen > 0, "the kills hit creates in flight");
    p = p.env("NIVIS_FAKE_COUNTER", "900000000");
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let diff = p.remote_vs_state();
    assert!(diff.orphans.is_empty(), "{diff:?}");
    assert!(diff.duplicated.is_empty(), "{diff:?}");
    assert!(diff.phantoms.is_empty(), "{diff:?}");
    let labels: BTreeSet<String> = p.objects().live().into_values().collect();
    assert_eq!(labels.len(), N, "every resource exists exactly once");
}

#[test]
fn resolve_refuses_an_address_with_nothing_pending_and_names_the_ones_that_are() {
    let p = Project::new(&many());
    let out = p.state_cmd(&["state", "resolve", "alpha.alpha_token.t__1", "--absent"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no operation is pending on alpha.alpha_token.t__1"),
        "{err}"
    );
}

#[test]
fn an_operation_past_its_timeout_fails_its_resource_and_stays_pending() {
    // The create of k1 hangs in its provider for a minute; the others answer at once.
    let p = Project::new(&tokens(3))
        .env("NIVIS_FAKE_LATENCY_MS", "k1=60000")
        .with_object_log();
    let started = std::time::Instant::now();
    let out = p.run(&["apply"], &["--auto-approve", "--operation-timeout", "2s"]);
    let waited = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "{err}");
    assert!(
        waited < Duration::from_secs(40),
        "given up after {waited:?}, not when the provider answered: {err}"
    );
    assert!(
        err.contains("alpha.alpha_token.t__1")
            && err.contains("within the operation timeout of 2s (--operation-timeout)"),
        "{err}"
    );
    // The others were created and recorded; the hung one is pending, not planned again.
    let plan = p.run(&["plan"], &["--json"]);
    let pending = announced(&plan);
    assert_eq!(
        pending.keys().collect::<Vec<_>>(),
        ["alpha.alpha_token.t__1"],
        "{pending:?}"
    );
    assert_eq!(p.recorded_objects().len(), 2);
    // The provider was stopped with the run, before it made the object: absent, then created.
    assert_success(&p.state_cmd(&["state", "resolve", "alpha.alpha_token.t__1", "--absent"]));
    let p = p
        .env("NIVIS_FAKE_LATENCY_MS", "")
        .env("NIVIS_FAKE_COUNTER", "100000");
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let diff = p.remote_vs_state();
    assert!(
        diff.orphans.is_empty() && diff.duplicated.is_empty() && diff.phantoms.is_empty(),
        "{diff:?}"
    );
    assert_eq!(p.recorded_objects().len(), 3);
}
