//! Reviewing a change without providers: `nivis diff` between git revisions, `nivis why` on
//! an attribute, through the CLI, with real Nix and the fake providers (started only by the
//! `apply` that records the outputs; the review must start none).

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value as Json;

use crate::util::*;

/// A provider wrapper: logs each start to `starts.log`, then runs the fake.
fn write_wrapper(dir: &Path, name: &str) {
    let script = format!(
        "#!/bin/sh\necho {name} >> '{}'\nexec '{}' \"$@\"\n",
        dir.join("starts.log").display(),
        bin_dir().join(format!("provider-{name}")).display()
    );
    let path = dir.join(format!("{name}.sh"));
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn starts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("starts.log")).map_or(0, |s| s.lines().count())
}

const PROVIDERS: &str = "providers.alpha = lib.mkProvider { source = \"./alpha.sh\"; };\n  \
     providers.beta = lib.mkProvider { source = \"./beta.sh\"; };";

/// The first commit: a token, a configured token, a record whose `from` Nix builds from the
/// token's value, and a token labelled from the record's endpoint.
fn first_plan() -> String {
    format!(
        "ledger:
let
  old = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"old\"; config.label = \"db\"; }};
  conf = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"conf\"; config.label = \"v1\"; }};
  record = lib.mkResource {{ provider = \"beta\"; type = \"beta_record\"; name = \"record\"; config.from = lib.str [ \"rec-\" (old.refAttr \"value\") ]; }};
  after = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"after\"; config.label = lib.str [ \"at-\" (record.refAttr \"endpoint\") ]; }};
in lib.toIR {{
  {PROVIDERS}
  resources = [ old conf record after ];
  inherit ledger;
}}"
    )
}

/// The second commit: `old` renamed with lib.moved, `conf` relabelled, `extra` added, and
/// the string Nix builds for `record` changed (so `after` may change once it is applied).
fn second_plan() -> String {
    format!(
        "ledger:
let
  renamed = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"renamed\"; config.label = \"db\"; }};
  conf = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"conf\"; config.label = \"v2\"; }};
  extra = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"extra\"; config.label = \"new\"; }};
  record = lib.mkResource {{ provider = \"beta\"; type = \"beta_record\"; name = \"record\"; config.from = lib.str [ \"record-\" (renamed.refAttr \"value\") ]; }};
  after = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"after\"; config.label = lib.str [ \"at-\" (record.refAttr \"endpoint\") ]; }};
in lib.toIR {{
  {PROVIDERS}
  resources = [ renamed conf extra record after ];
  moved = [ (lib.moved {{ from = \"alpha.alpha_token.old\"; to = renamed; }}) ];
  inherit ledger;
}}"
    )
}

/// A project in git with the first plan applied and the second committed on top.
fn reviewed_project() -> Project {
    let p = Project::new(&first_plan());
    let dir = p.dir.path();
    write_wrapper(dir, "alpha");
    write_wrapper(dir, "beta");
    git(dir, &["init", "-q"]);
    git(dir, &["add", "plan.nix", "alpha.sh", "beta.sh"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert!(starts(dir) > 0, "the apply started no provider");
    p.set_plan(&second_plan());
    git(dir, &["commit", "-q", "-am", "second"]);
    p
}

/// `nivis ARGS --file plan.nix --state STATE` with the project's environment, inside a new
/// network namespace (no network at all) when `unshare -n` works here.
fn offline(p: &Project, args: &[&str]) -> Output {
    let isolated = Command::new("unshare")
        .args(["-n", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    let mut cmd = if isolated {
        let mut c = Command::new("unshare");
        c.arg("-n").arg(nivis_bin());
        c
    } else {
        Command::new(nivis_bin())
    };
    cmd.args(args)
        .arg("--file")
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .current_dir(p.dir.path())
        .env("NO_COLOR", "1")
        .env_remove("NIVIS_LOG");
    for (k, v) in &p.env {
        cmd.env(k, v);
    }
    cmd.output().expect("run nivis")
}

/// Validates `doc` against docs/`schema` with python3's jsonschema.
fn assert_valid(doc: &Json, schema: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("doc.json");
    std::fs::write(&file, doc.to_string()).unwrap();
    let out = Command::new("python3")
        .args([
            "-c",
            "import json,sys,jsonschema; jsonschema.validate(json.load(open(sys.argv[2])), json.load(open(sys.argv[1])), cls=jsonschema.Draft202012Validator)",
        ])
        .arg(repo().join("docs").join(schema))
        .arg(&file)
        .output()
        .expect("python3 with jsonschema");
    assert_success(&out);
}

#[test]
fn diff_between_commits_names_each_change_and_the_dependent_without_a_provider() {
    let p = reviewed_project();
    let dir = p.dir.path();
    let started = starts(dir);

    let out = offline(&p, &["diff", "HEAD~1", "HEAD", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stdout(&out);
    let value = p.outputs()["alpha.alpha_token.old"]["value"]
        .as_str()
        .unwrap()
        .to_string();
    for want in [
        "-> alpha.alpha_token.old moved to alpha.alpha_token.renamed".to_string(),
        "~ alpha.alpha_token.conf changed\n    config.label: \"v1\" -> \"v2\"".into(),
        "+ alpha.alpha_token.extra added\n    config.label = \"new\"".into(),
        format!(
            "~ beta.beta_record.record changed\n    config.from: \"rec-{value}\" -> \"record-{value}\""
        ),
        "? alpha.alpha_token.after (after beta.beta_record.record)".into(),
        "Diff: 1 added, 0 removed, 1 moved, 2 changed; 1 may change in a later phase.".into(),
        "No provider was started.".into(),
        "Not known without the providers".into(),
    ] {
        assert!(text.contains(&want), "missing {want:?} in:\n{text}");
    }

    let out = offline(&p, &["diff", "HEAD~1", "HEAD", "--json"]);
    assert_success(&out);
    let doc: Json = serde_json::from_slice(&out.stdout).expect("diff --json is JSON");
    assert_valid(&doc, "diff-schema.json");
    let listed: Vec<(&str, &str)> = (doc["resources"].as_array().unwrap().iter())
        .map(|r| {
            (
                r["address"].as_str().unwrap(),
                r["change"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            ("alpha.alpha_token.conf", "changed"),
            ("alpha.alpha_token.extra", "added"),
            ("alpha.alpha_token.renamed", "moved"),
            ("beta.beta_record.record", "changed"),
        ],
        "{doc:#}"
    );
    assert_eq!(doc["resources"][2]["movedFrom"], "alpha.alpha_token.old");
    assert_eq!(doc["resources"][2]["attributes"], serde_json::json!([]));
    assert_eq!(
        doc["mayChangeLater"],
        serde_json::json!([{"address": "alpha.alpha_token.after", "becauseOf": ["beta.beta_record.record"]}])
    );
    assert_eq!(doc["from"]["revision"], "HEAD~1");

    // HEAD against the work tree (the default): nothing differs.
    let out = offline(&p, &["diff", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("No differences"), "{}", stdout(&out));

    assert_eq!(starts(dir), started, "a review started a provider");
    p.assert_no_leftover_processes();
}

#[test]
fn diff_names_a_revision_it_cannot_find() {
    let p = reviewed_project();
    let out = offline(&p, &["diff", "no-such-branch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no-such-branch names no commit"),
        "{}",
        stderr(&out)
    );
}

/// A value Nix builds from two providers' outputs (`c.label`), read by `d`; line numbers
/// count the line `Project` puts first.
const WHY_PLAN: &str = "ledger:
let
  a = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; config.label = \"plain\"; };
  b = lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"b\"; config.from = lib.str [ \"rec-\" (a.refAttr \"value\") ]; };
  c = lib.mkResource {
    provider = \"alpha\"; type = \"alpha_token\"; name = \"c\";
    config.label = lib.str [ (b.refAttr \"endpoint\") \"::\" (a.refAttr \"value\") ];
  };
  d = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"d\"; config.label = c.refAttr \"value\"; };
in lib.toIR {
  PROVIDERS
  resources = [ a b c d ];
  inherit ledger;
}";

#[test]
fn why_names_both_origins_with_their_lines_and_the_reader() {
    let p = Project::new(&WHY_PLAN.replace("PROVIDERS", PROVIDERS));
    let dir = p.dir.path();
    write_wrapper(dir, "alpha");
    write_wrapper(dir, "beta");
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let started = starts(dir);
    let outputs = p.outputs();
    let a_value = outputs["alpha.alpha_token.a"]["value"]
        .as_str()
        .unwrap()
        .to_string();
    let b_endpoint = outputs["beta.beta_record.b"]["endpoint"]
        .as_str()
        .unwrap()
        .to_string();

    let out = offline(&p, &["why", "alpha.alpha_token.c.label"]);
    assert_success(&out);
    let text = stdout(&out);
    for want in [
        format!("alpha.alpha_token.c.label = \"{b_endpoint}::{a_value}\""),
        "defined at plan.nix:8 (the resource at plan.nix:7)".into(),
        format!("beta.beta_record.b.endpoint = \"{b_endpoint}\" (computed by Nix at label) defined at plan.nix:5"),
        format!("alpha.alpha_token.a.value = \"{a_value}\" (computed by Nix at from) defined at plan.nix:4"),
        format!("alpha.alpha_token.a.value = \"{a_value}\" (computed by Nix at label) defined at plan.nix:4"),
        "alpha.alpha_token.d (reference at label, reads value) defined at plan.nix:10".into(),
    ] {
        assert!(text.contains(&want), "missing {want:?} in:\n{text}");
    }

    let out = offline(&p, &["why", "alpha.alpha_token.c.label", "--json"]);
    assert_success(&out);
    let doc: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid(&doc, "why-schema.json");
    let origins: Vec<(&str, u64)> = (doc["origins"].as_array().unwrap().iter())
        .map(|o| {
            (
                o["address"].as_str().unwrap(),
                o["definedAt"]["line"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        origins,
        [("alpha.alpha_token.a", 4), ("beta.beta_record.b", 5)],
        "{doc:#}"
    );
    assert_eq!(doc["readers"][0]["address"], "alpha.alpha_token.d");
    assert_eq!(doc["readers"][0]["definedAt"]["line"], 10);
    assert_eq!(doc["definedAt"]["line"], 8);

    // A literal: its own line, nothing upstream.
    let out = offline(&p, &["why", "alpha.alpha_token.a.label"]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("alpha.alpha_token.a.label = \"plain\"\n  defined at plan.nix:4")
            && text.contains("computed from no other resource's outputs"),
        "{text}"
    );
    let out = offline(&p, &["why", "alpha.alpha_token.zz"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("declares no such resource"),
        "{}",
        stderr(&out)
    );
    assert_eq!(starts(dir), started, "a review started a provider");
}

/// `nix ARGS path:PROJECT#ATTR` on a project made from the template, offline (the sealed Nix
/// of the flake tests), with this checkout's library as the `nivis` input.
fn nix_on(root: &Path, project: &Path, args: &[&str], attr: &str) -> Output {
    let stub = format!("path:{}", repo().join("tests/nix/stub-nixpkgs").display());
    let src = format!("path:{}", root.join("nivis-src").display());
    let mut cmd = Command::new("nix");
    cmd.args(["--extra-experimental-features", "nix-command flakes"])
        .args(args)
        .arg(format!("path:{}{attr}", project.display()))
        .args(["--no-write-lock-file", "--override-input", "nivis", &src])
        .args(["--override-input", "nivis/nixpkgs", &stub]);
    super::flake::sealed(&mut cmd, root);
    cmd.output().expect("run nix")
}

#[test]
fn the_templates_flake_check_evaluates_the_plan_and_fails_when_it_breaks() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, project) = (tmp.path(), tmp.path().join("project"));
    super::flake::copy_flake_source(&root.join("nivis-src"));
    super::flake::copy_dir(&repo().join("nix/template"), &project);
    let check = || nix_on(root, &project, &["flake", "check"], "");
    assert_success(&check());

    // A recorded ledger and a pinned IR: the check evaluates with those outputs.
    std::fs::write(
        project.join("nivis-ledger.json"),
        r#"{"resources": {"null.null_resource.first": {"id": "4242", "triggers": {"greeting": "hello"}}}}"#,
    )
    .unwrap();
    let attr = "#checks.x86_64-linux.nivis-plan.ir";
    let out = nix_on(root, &project, &["eval", "--json"], attr);
    assert_success(&out);
    let ir: Json = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        ir["resources"][1]["config"]["triggers"]["after"], "after-4242",
        "the check did not evaluate with the recorded ledger: {ir:#}"
    );
    std::fs::write(project.join("nivis-ir.json"), &out.stdout).unwrap();
    assert_success(&check());

    // A change to the plan: the snapshot check names the resource that differs.
    let flake = project.join("flake.nix");
    let text = std::fs::read_to_string(&flake).unwrap();
    std::fs::write(
        &flake,
        text.replace("default = \"hello\";", "default = \"hi\";"),
    )
    .unwrap();
    let out = check();
    assert!(
        !out.status.success(),
        "a changed IR passed the snapshot check"
    );
    assert!(
        stderr(&out)
            .contains("differs from the snapshot nivis-ir.json at: null.null_resource.first"),
        "{}",
        stderr(&out)
    );

    // A broken plan (a provider typo) fails the plan check, snapshot or not.
    std::fs::remove_file(project.join("nivis-ir.json")).unwrap();
    let typo = "provider = \"nul\";\n            type = \"null_resource\";\n            name = \"second\";";
    let broken = text.replace(&typo.replace("nul\"", "null\""), typo);
    assert_ne!(broken, text, "the test did not break the plan");
    std::fs::write(&flake, broken).unwrap();
    let out = check();
    assert!(
        !out.status.success(),
        "a broken plan passed nix flake check"
    );
    assert!(
        stderr(&out).contains("provider 'nul' is not declared"),
        "{}",
        stderr(&out)
    );
}

/// `nivis test --flake REPO [--expect FILE]` from a directory of its own.
fn nivis_test(expect: Option<&Path>) -> Output {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(nivis_bin());
    cmd.args(["test", "--flake"]).arg(repo());
    if let Some(expect) = expect {
        cmd.arg("--expect").arg(expect);
    }
    cmd.current_dir(tmp.path())
        .env("NO_COLOR", "1")
        .env_remove("NIVIS_LOG")
        .output()
        .expect("run nivis")
}

#[test]
fn nivis_test_checks_the_bundled_round_trip_with_the_fakes() {
    // The expectations the repository's flake declares beside its plan (`nivis.test`).
    let out = nivis_test(None);
    assert_success(&out);
    assert!(
        stdout(&out).contains(
            "Test passed: 3 resource(s) applied in 3 phase(s); 4 expected output value(s) match."
        ),
        "{}",
        stdout(&out)
    );

    // Wrong expectations fail, each named.
    let tmp = tempfile::tempdir().unwrap();
    let wrong = tmp.path().join("wrong.json");
    std::fs::write(
        &wrong,
        r#"{"phases": 2, "outputs": {"alpha.alpha_token.A": {"value": "alpha::9", "secret": "guess"}, "alpha.alpha_token.Z": {"id": "x"}}}"#,
    )
    .unwrap();
    let out = nivis_test(Some(&wrong));
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    for want in [
        "phases: expected 2, applied in 3",
        "alpha.alpha_token.A.value: expected \"alpha::9\", got \"alpha::0\"",
        "alpha.alpha_token.A.secret: not the expected (sensitive) value",
        "alpha.alpha_token.Z: not created",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
}

#[test]
fn nivis_test_refuses_registry_providers() {
    let p = Project::new(
        "ledger: lib.toIR { providers.null = lib.mkProvider { source = \"hashicorp/null\"; }; resources = [ (lib.mkResource { provider = \"null\"; type = \"null_resource\"; name = \"x\"; }) ]; inherit ledger; }",
    );
    std::fs::write(p.dir.path().join("e.json"), "{}").unwrap();
    let out = Command::new(nivis_bin())
        .args(["test", "--expect", "e.json", "--file"])
        .arg(&p.plan)
        .current_dir(p.dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("provider null comes from a registry (hashicorp/null)"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn diff_and_why_never_print_a_secret() {
    let plan = |prefix: &str| {
        format!(
            "ledger:
let
  a = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; }};
  b = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"b\"; config.label = lib.str [ \"{prefix}\" (a.refAttr \"secret\") ]; }};
in lib.toIR {{
  {PROVIDERS}
  resources = [ a b ];
  inherit ledger;
}}"
        )
    };
    let p = Project::new(&plan("s-"));
    let dir = p.dir.path();
    write_wrapper(dir, "alpha");
    write_wrapper(dir, "beta");
    git(dir, &["init", "-q"]);
    git(dir, &["add", "plan.nix", "alpha.sh", "beta.sh"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let state = p.state_json();
    let secret = state["resources"]["alpha.alpha_token.a"]["attributes"]["secret"]
        .as_str()
        .unwrap_or_else(|| panic!("no secret recorded for a: {state}"))
        .to_string();
    assert!(secret.len() >= 6, "{secret:?}");
    p.set_plan(&plan("t-"));
    git(dir, &["commit", "-q", "-am", "second"]);

    let out = offline(&p, &["diff", "HEAD~1", "HEAD"]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("config.label: (sensitive value) -> (sensitive value)"),
        "{text}"
    );
    let json = offline(&p, &["diff", "HEAD~1", "HEAD", "--json"]);
    let why = offline(&p, &["why", "alpha.alpha_token.b.label", "--json"]);
    let why_text = offline(&p, &["why", "alpha.alpha_token.b.label"]);
    for out in [&out, &json, &why, &why_text] {
        assert_success(out);
        let all = format!("{}{}", stdout(out), stderr(out));
        assert!(!all.contains(&secret), "the secret was printed:\n{all}");
    }
    assert!(
        stdout(&why_text).contains("alpha.alpha_token.a.secret = (sensitive value)"),
        "{}",
        stdout(&why_text)
    );
}

/// Issue 45, defect 2: `why` names the user's line for a resource made by a `nivis gen`
/// constructor (the call's arguments, not the constructor file) and by a helper that merges
/// the caller's set into mkResource's argument (the caller); a helper that writes the set
/// itself is the resource's declaration (its line). Line 1 is the one `Project` adds.
#[test]
fn why_names_the_users_line_not_a_constructors() {
    let p = Project::new("ledger: lib.toIR { resources = [ ]; inherit ledger; }");
    let gen_dir = p.dir.path().join("gen");
    let out = Command::new(nivis_bin())
        .args(["gen", "--provider"])
        .arg(bin_dir().join("provider-alpha"))
        .arg("--out")
        .arg(&gen_dir)
        .output()
        .unwrap();
    assert_success(&out);
    p.set_plan(&format!(
        "ledger:
let
  g = import {} lib;
  merged = args: lib.mkResource (args // {{ provider = \"alpha\"; type = \"alpha_token\"; }});
  named = name: lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; inherit name; config.label = \"n\"; }};
  t = g.resources.alpha_token {{
    name = \"t\";
    config.label = \"from-gen\";
  }};
  many = lib.count 2 (i: g.resources.alpha_token {{ name = \"many\"; config.label = \"m\"; }});
  h = merged {{ name = \"h\"; config.label = \"from-helper\"; }};
  n = named \"n\";
in lib.toIR {{
  providers.alpha = g.provider {{ source = \"provider-alpha\"; }};
  resources = [ t h n ] ++ many;
  inherit ledger;
}}",
        gen_dir.join("alpha").display()
    ));
    for (address, want) in [
        ("alpha.alpha_token.t", "\n  defined at plan.nix:8\n"),
        (
            "alpha.alpha_token.t.label",
            "\n  defined at plan.nix:9 (the resource at plan.nix:8)\n",
        ),
        ("alpha.alpha_token.many__1", "\n  defined at plan.nix:11\n"),
        (
            "alpha.alpha_token.h.label",
            "\n  defined at plan.nix:12 (the resource at plan.nix:12)\n",
        ),
        ("alpha.alpha_token.n", "\n  defined at plan.nix:6\n"),
    ] {
        let out = offline(&p, &["why", address]);
        assert_success(&out);
        let text = stdout(&out);
        assert!(
            text.contains(want),
            "{address}: missing {want:?} in:\n{text}"
        );
        assert!(!text.contains("gen/alpha"), "{address}: {text}");
    }
}
