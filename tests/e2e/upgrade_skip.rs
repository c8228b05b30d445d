//! The upgrade skip (DESIGN §79): a stored object recorded from this provider binary's own
//! answer, at the schema's current version, is decoded without `UpgradeResourceState`; a record
//! from another binary, another schema (version), or without a mark still gets the call.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::util::*;

/// A project whose schema cache lives in its own directory and whose fakes log every upgrade
/// call; its two tokens are served by the alpha binary at `alpha`.
fn project(alpha: &str) -> Project {
    let p = Project::new(&plan(alpha));
    let cache = p.dir.path().join("cache");
    let log = p.dir.path().join("upgrades.log");
    p.env("XDG_CACHE_HOME", cache.to_str().unwrap())
        .env("NIVIS_FAKE_UPGRADE_LOG", log.to_str().unwrap())
}

fn plan(alpha: &str) -> String {
    let token = |l: &str| {
        format!("(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{l}\"; config.label = \"{l}\"; }})")
    };
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"{alpha}\"; }}; \
         resources = [ {} {} ]; inherit ledger; }}",
        token("one"),
        token("two")
    )
}

/// How many upgrade calls the fakes answered per stored label since the log was last taken.
fn take_upgrades(p: &Project) -> BTreeMap<String, usize> {
    let path = p.dir.path().join("upgrades.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let entry: Json = serde_json::from_str(line).expect("upgrade log line is JSON");
        let label = entry["label"].as_str().unwrap_or("(none)").to_string();
        *counts.entry(label).or_insert(0) += 1;
    }
    counts
}

fn both() -> BTreeMap<String, usize> {
    [("one".to_string(), 1), ("two".to_string(), 1)].into()
}

fn marks(p: &Project) -> Vec<Json> {
    let state = p.state_json();
    ["one", "two"]
        .iter()
        .map(|l| state["resources"][format!("alpha.alpha_token.{l}")]["writtenBy"].clone())
        .collect()
}

fn assert_no_changes(p: &Project) {
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));
}

/// A copy of `alpha` with bytes appended: the same fake, another sha256.
fn patched_copy(p: &Project, alpha: &std::path::Path) -> std::path::PathBuf {
    let copy = p.dir.path().join("provider-alpha-patched");
    let mut bytes = std::fs::read(alpha).unwrap();
    bytes.extend_from_slice(b"\0nivis-test-patch\0");
    std::fs::write(&copy, &bytes).unwrap();
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    copy
}

#[test]
fn objects_written_by_the_same_binary_and_schema_version_are_not_upgraded_again() {
    let alpha = bin_dir().join("provider-alpha");
    let p = project(alpha.to_str().unwrap());
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let written = marks(&p);
    assert!(
        written
            .iter()
            .all(|m| m.as_str().is_some_and(|m| m.len() == 32)),
        "every record carries the binary's mark: {written:?}"
    );
    take_upgrades(&p);

    // Plan, refresh, a no-op apply: the records are this binary's answers, none is upgraded.
    assert_no_changes(&p);
    assert_success(&p.run(&["refresh"], &[]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(take_upgrades(&p), BTreeMap::new());
    assert_eq!(marks(&p), written);

    // Destroy decodes them too.
    assert_success(&p.run(&["destroy"], &["--auto-approve"]));
    assert_eq!(take_upgrades(&p), BTreeMap::new());
}

#[test]
fn objects_from_another_binary_schema_or_without_a_mark_are_upgraded_by_the_provider() {
    let alpha = bin_dir().join("provider-alpha");
    let p = project(alpha.to_str().unwrap());
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let written = marks(&p);
    take_upgrades(&p);

    // Another binary: asked, and a no-op apply records its mark; then spared again.
    let copy = patched_copy(&p, &alpha);
    p.set_plan(&plan(copy.to_str().unwrap()));
    assert_no_changes(&p);
    assert_eq!(take_upgrades(&p), both());
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    // Once each: phase 1 is previewed (refreshed and planned) before the apply changes
    // anything (DESIGN §91), and the apply uses what the preview read (§106).
    assert_eq!(take_upgrades(&p), both());
    let copied = marks(&p);
    assert!(copied.iter().all(Json::is_string), "{copied:?}");
    assert_ne!(copied, written);
    assert_no_changes(&p);
    assert_eq!(take_upgrades(&p), BTreeMap::new());

    // The same binary serving another schema version: asked at the recorded version.
    let p = p.env("NIVIS_FAKE_ALPHA_SCHEMA_VERSION", "1");
    assert_success(&p.run(&["plan"], &[]));
    assert_eq!(take_upgrades(&p), both());
    let p = p.env("NIVIS_FAKE_ALPHA_SCHEMA_VERSION", "0");

    // A record without a mark (imported, or written before marks existed): asked.
    let mut state = p.state_json();
    state["resources"]["alpha.alpha_token.one"]
        .as_object_mut()
        .unwrap()
        .remove("writtenBy");
    std::fs::write(&p.state, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    assert_no_changes(&p);
    assert_eq!(take_upgrades(&p), [("one".to_string(), 1)].into());

    // A marked record whose JSON is not what recording its value writes (an attribute the
    // schema lacks, as a hand edit or another writer might leave): asked.
    let mut state = p.state_json();
    state["resources"]["alpha.alpha_token.two"]["attributes"]["stray"] = Json::from(1);
    std::fs::write(&p.state, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let _ = p.run(&["plan"], &[]);
    assert_eq!(take_upgrades(&p), both());

    // No schema cache, no mark: every stored object is asked.
    let p = p.env("NIVIS_SCHEMA_CACHE", "off");
    let _ = p.run(&["plan"], &[]);
    assert_eq!(take_upgrades(&p).len(), 2);
}

/// The provider calls a run made, from its `timing` event.
fn provider_calls(out: &std::process::Output) -> u64 {
    stdout(out)
        .lines()
        .filter_map(|l| serde_json::from_str::<Json>(l).ok())
        .find(|e| e["type"] == "timing")
        .and_then(|e| e["providerCalls"].as_u64())
        .expect("a timing event with providerCalls")
}

#[test]
fn the_real_null_provider_plans_no_changes_from_decoded_records_with_one_call_fewer_each() {
    let null = real_provider("null");
    let resource = |i: u32| {
        format!("(lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"n{i}\"; config.triggers.i = \"{i}\"; }})")
    };
    let p = Project::new(&format!(
        "ledger: lib.toIR {{ providers.null = lib.mkProvider {{ source = \"{}\"; }}; \
         resources = [ {} {} {} ]; inherit ledger; }}",
        null.display(),
        resource(1),
        resource(2),
        resource(3)
    ));
    let cache = p.dir.path().join("cache");
    let p = p.env("XDG_CACHE_HOME", cache.to_str().unwrap());
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let decoded = p.run(&["plan"], &["--json"]);
    assert_success(&decoded);
    assert!(stdout(&p.run(&["plan"], &[])).contains("No changes"));

    // The same plan with the marks removed: each stored object is upgraded by the provider.
    let mut state = p.state_json();
    for r in state["resources"].as_object_mut().unwrap().values_mut() {
        assert!(r["writtenBy"].is_string(), "{r}");
        r.as_object_mut().unwrap().remove("writtenBy");
    }
    std::fs::write(&p.state, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let upgraded = p.run(&["plan"], &["--json"]);
    assert_success(&upgraded);
    assert_eq!(provider_calls(&upgraded), provider_calls(&decoded) + 3);
    assert!(stdout(&p.run(&["plan"], &[])).contains("No changes"));
}
