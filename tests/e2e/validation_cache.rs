//! The validation cache (DESIGN §59): a provider binary's clean verdict on a wholly known
//! configuration is remembered and the call spared; a configuration with unknowns, a verdict
//! with diagnostics, and another binary are always asked.

use std::collections::BTreeMap;

use serde_json::Value as Json;

use crate::util::*;

/// A project whose schema and validation caches live in its own directory, whose fakes log
/// every validation call, and whose alpha provider is the binary at `alpha`.
fn project(alpha: &str, labels: &[&str]) -> Project {
    let p = Project::new(&plan(alpha, labels));
    let cache = p.dir.path().join("cache");
    let log = p.dir.path().join("validations.log");
    p.env("XDG_CACHE_HOME", cache.to_str().unwrap())
        .env("NIVIS_FAKE_VALIDATE_LOG", log.to_str().unwrap())
}

/// Tokens with the given labels, and `follower`, whose label is built from the first token's
/// output (unknown until that token exists).
fn plan(alpha: &str, labels: &[&str]) -> String {
    let tokens: Vec<String> = labels
        .iter()
        .map(|l| format!("(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{l}\"; config.label = \"{l}\"; }})"))
        .collect();
    format!(
        "ledger: let first = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"first\"; config.label = \"first\"; }}; in \
         lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"{alpha}\"; }}; \
         resources = [ first (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"follower\"; config.label = lib.str [ \"after-\" (first.refAttr \"value\") ]; }}) {} ]; inherit ledger; }}",
        tokens.join(" ")
    )
}

/// How many validation calls the fakes answered for each label since the log was last taken.
fn take_validations(p: &Project) -> BTreeMap<String, usize> {
    let path = p.dir.path().join("validations.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let _ = std::fs::remove_file(&path);
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        let entry: Json = serde_json::from_str(line).expect("validation log line is JSON");
        let label = entry["label"].as_str().unwrap_or("(none)").to_string();
        *counts.entry(label).or_insert(0) += 1;
    }
    counts
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn clean_known_configs_are_validated_once_per_binary_and_unknown_ones_always() {
    let alpha = bin_dir().join("provider-alpha");
    let p = project(alpha.to_str().unwrap(), &["one"]);

    // Cold: every configuration is asked; `validate` sees the follower's label as unknown.
    assert_success(&p.run(&["validate"], &[]));
    assert_eq!(
        take_validations(&p),
        counts(&[("first", 1), ("one", 1), ("(unknown)", 1)])
    );

    // Warm: the clean, wholly known configurations are spared; the unknown one is asked.
    assert_success(&p.run(&["validate"], &[]));
    assert_eq!(take_validations(&p), counts(&[("(unknown)", 1)]));
    // A plan shares the verdicts (the follower waits for a later phase).
    assert_success(&p.run(&["plan"], &[]));
    assert_eq!(take_validations(&p), counts(&[]));

    // A changed configuration is a new request; the unchanged ones stay spared.
    p.set_plan(&plan(alpha.to_str().unwrap(), &["two"]));
    assert_success(&p.run(&["validate"], &[]));
    assert_eq!(
        take_validations(&p),
        counts(&[("two", 1), ("(unknown)", 1)])
    );

    // Another binary (the same fake with bytes appended: another sha256) is asked afresh.
    let copy = p.dir.path().join("provider-alpha-patched");
    let mut bytes = std::fs::read(&alpha).unwrap();
    bytes.extend_from_slice(b"\0nivis-test-patch\0");
    std::fs::write(&copy, &bytes).unwrap();
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    p.set_plan(&plan(copy.to_str().unwrap(), &["two"]));
    assert_success(&p.run(&["validate"], &[]));
    assert_eq!(
        take_validations(&p),
        counts(&[("first", 1), ("two", 1), ("(unknown)", 1)])
    );

    // After apply the follower's label is known: asked once, then spared like the others.
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let applied = take_validations(&p);
    assert_eq!(applied.len(), 1, "only the follower is new: {applied:?}");
    assert!(
        applied.keys().all(|l| l.starts_with("after-")),
        "{applied:?}"
    );
    assert_success(&p.run(&["plan"], &[]));
    assert_eq!(take_validations(&p), counts(&[]));
}

#[test]
fn a_verdict_with_an_error_is_never_remembered() {
    let alpha = bin_dir().join("provider-alpha");
    let p = project(alpha.to_str().unwrap(), &["invalid-one"]);
    for _ in 0..2 {
        let out = p.run(&["plan"], &[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("must not contain the word \"invalid\""),
            "{}",
            stderr(&out)
        );
        assert_eq!(take_validations(&p).get("invalid-one"), Some(&1));
    }
}

#[test]
fn the_cache_can_be_turned_off() {
    let alpha = bin_dir().join("provider-alpha");
    let p = project(alpha.to_str().unwrap(), &["one"]).env("NIVIS_VALIDATION_CACHE", "off");
    assert_success(&p.run(&["validate"], &[]));
    take_validations(&p);
    assert_success(&p.run(&["validate"], &[]));
    assert_eq!(
        take_validations(&p),
        counts(&[("first", 1), ("one", 1), ("(unknown)", 1)])
    );
}

/// A destroy validates nothing, so it never reads the verdicts (at 100k remembered verdicts the
/// read was a third of a small destroy's own CPU, DESIGN §81): with the file removed after the
/// apply, the destroy does not start a new one; the next plan does.
#[test]
fn a_destroy_neither_reads_nor_starts_the_verdicts_file() {
    let alpha = bin_dir().join("provider-alpha");
    let p = project(alpha.to_str().unwrap(), &["one"]);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let validated = p.dir.path().join("cache/nivis/schemas/validated");
    let files = |dir: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .map(|entries| entries.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    };
    let written = files(&validated);
    assert_eq!(
        written.len(),
        1,
        "one verdicts file after apply: {written:?}"
    );
    std::fs::remove_file(&written[0]).unwrap();
    take_validations(&p);

    assert_success(&p.run(&["destroy"], &["--auto-approve"]));
    assert_eq!(take_validations(&p), counts(&[]));
    assert_eq!(files(&validated), Vec::<std::path::PathBuf>::new());

    assert_success(&p.run(&["plan"], &[]));
    assert_eq!(files(&validated).len(), 1, "the plan validates again");
}
