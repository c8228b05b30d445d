//! The command line as a user meets it: flags per verb, Terraform habits, `--flake REF#ATTR`,
//! variables, `nivis output`, progress lines, completion, man pages and the book's reference.

use std::process::Command;

use crate::e2e::flake::copy_flake_source;
use crate::util::*;

fn nivis(args: &[&str]) -> std::process::Output {
    Command::new(nivis_bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run nivis")
}

#[test]
fn flags_a_verb_does_not_take_are_refused() {
    for args in [
        &["plan", "--auto-approve"][..],
        &["validate", "--target", "x"],
        &["validate", "--state", "s.json"],
        &["refresh", "--parallelism", "3"],
        &["destroy", "--max-phases", "1"],
        &["state", "rm", "x", "--json"],
        &["force-unlock", "--json"],
    ] {
        let out = nivis(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("unexpected argument"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn terraform_spellings_get_a_hint() {
    let out = nivis(&["apply", "-auto-approve"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("did you mean '--auto-approve'?"),
        "{}",
        stderr(&out)
    );
    let out = nivis(&["plan", "-var", "x=1"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("did you mean '--var'?"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn flake_installables_name_the_attribute() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    copy_flake_source(&src);
    let state = tmp.path().join("s.json");
    let run = |flake: String, extra: &[&str]| {
        Command::new(nivis_bin())
            .args(["plan", "--flake", &flake, "--state"])
            .arg(&state)
            .args(extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    // `#nivis.cycle` picks the cyclic example: the attribute was honoured.
    let out = run(format!("{}#nivis.cycle", src.display()), &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("dependency cycle"),
        "{}",
        stderr(&out)
    );
    let out = run(format!("{}#nivis.plan", src.display()), &[]);
    assert_success(&out);
    let out = run(
        format!("{}#nivis.plan", src.display()),
        &["--attr", "nivis.cycle"],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("give it once"), "{}", stderr(&out));
}

const VARS_PLAN: &str = r#"ledger: let
    variables = {
      t = { type = "string"; };
      n = { type = "number"; default = 1; };
      src = { type = "string"; default = "default"; };
    };
    v = lib.vars ledger variables;
  in lib.toIR {
    providers = { };
    resources = [ ];
    consumers.vals = { inherit (v) t n src; };
    inherit variables ledger;
  }"#;

#[test]
fn variables_take_their_declared_type_and_the_environment_wins() {
    let p = Project::new(VARS_PLAN);
    let file = p.dir.path().join("vars.json");
    std::fs::write(&file, r#"{"src": "file", "n": 5}"#).unwrap();
    let file = file.display().to_string();
    let out = p.run(
        &["output", "vals", "--json"],
        &["--var", "t=2", "--var", "n=2.50"],
    );
    assert_success(&out);
    let vals: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(vals["t"], "2", "a string variable keeps the text");
    assert_eq!(vals["n"], 2.5);
    assert_eq!(vals["src"], "default");

    let out = p.run(
        &["output", "vals", "--json"],
        &["--var", "t=x", "--var-file", &file],
    );
    assert_success(&out);
    let vals: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (vals["src"].as_str(), vals["n"].as_i64()),
        (Some("file"), Some(5))
    );

    // defaults < file < flag < environment
    let p = p.env("NIVIS_VAR_src", "env");
    let out = p.run(
        &["output", "vals", "--json"],
        &["--var", "t=x", "--var-file", &file, "--var", "src=flag"],
    );
    assert_success(&out);
    let vals: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(vals["src"], "env");
    assert!(
        stderr(&out).contains("NIVIS_VAR_src overrides --var src"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn output_shows_resources_and_consumers_as_nix_json_and_raw() {
    let p = Project::two_providers(false);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));

    let out = p.run(&["output", "--json"], &[]);
    assert_success(&out);
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all["resources"]["alpha.alpha_token.A"]["value"], "alpha::0");
    assert_eq!(
        all["consumers"]["systemConfig"]["combined"],
        "beta://rec-alpha::0::alpha::0"
    );
    assert!(
        all["resources"]["alpha.alpha_token.A"]["secret"]["__sensitiveRef"].is_object(),
        "secrets stay placeholders: {}",
        all["resources"]["alpha.alpha_token.A"]
    );

    let out = p.run(&["output", "--raw", "alpha.alpha_token.A.value"], &[]);
    assert_success(&out);
    assert_eq!(stdout(&out), "alpha::0", "bare, no newline");

    // A sensitive value: masked in every form but an explicit `--raw NAME`, which prints it
    // (Terraform's `output -raw`: how a script reads a generated password).
    let secret = p.state_json()["resources"]["alpha.alpha_token.A"]["attributes"]["secret"]
        .as_str()
        .expect("the fake's secret")
        .to_string();
    for args in [
        &["output"][..],
        &["output", "--json"],
        &["output", "alpha.alpha_token.A"],
        &["output", "alpha.alpha_token.A", "--json"],
        &["output", "alpha.alpha_token.A.secret"],
    ] {
        let out = p.run(args, &[]);
        assert_success(&out);
        assert!(
            !stdout(&out).contains(&secret),
            "{args:?}: {}",
            stdout(&out)
        );
    }
    let out = p.run(&["output", "--raw", "alpha.alpha_token.A.secret"], &[]);
    assert_success(&out);
    assert_eq!(stdout(&out), secret);

    let out = p.run(&["output", "systemConfig"], &[]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("combined = \"beta://rec-alpha::0::alpha::0\";"),
        "{}",
        stdout(&out)
    );

    let out = p.run(&["output", "nope"], &[]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("there are: "), "{}", stderr(&out));
}

#[test]
fn long_operations_report_progress_in_human_output_only() {
    let p = Project::two_providers(false)
        .env("NIVIS_FAKE_SLOW_MS", "600")
        .env("NIVIS_PROGRESS_INTERVAL", "0.2");
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    let text = stdout(&out);
    for want in [
        "Phase 1\n",
        "  + alpha.alpha_token.A: creating…",
        "  + alpha.alpha_token.A: still creating… (",
        "  + alpha.alpha_token.A: created in ",
        "Phase 2 (Nix re-evaluated with phase 1's outputs)",
        "  + beta.beta_record.B: still creating… (",
    ] {
        assert!(text.contains(want), "missing {want:?} in:\n{text}");
    }
    let out = p.run(&["destroy"], &["--auto-approve", "--json"]);
    assert_success(&out);
    for line in stdout(&out).lines() {
        assert!(line.starts_with('{'), "not a JSON event: {line:?}");
    }
}

#[test]
fn bash_completion_loads_and_completes_state_ids() {
    let p = Project::two_providers(false);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .arg(repo().join("tests/completion/check-bash.sh"))
        .arg(&p.state)
        .arg("beta.beta_record.B")
        .env("PATH", path)
        .output()
        .unwrap();
    assert_success(&out);
    assert!(
        stdout(&out).contains("-> beta.beta_record.B"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn man_pages_render() {
    let dir = tempfile::tempdir().unwrap();
    assert_success(&nivis(&["man", "--dir", dir.path().to_str().unwrap()]));
    for page in [
        "nivis.1",
        "nivis-plan.1",
        "nivis-state-show.1",
        "nivis-completion.1",
    ] {
        let path = dir.path().join(page);
        let out = Command::new("groff")
            .args(["-man", "-Tutf8", "-ww"])
            .arg(&path)
            .output()
            .expect("groff (install groff or man-db)");
        assert_success(&out);
        assert!(stderr(&out).is_empty(), "{page}: {}", stderr(&out));
        if page == "nivis-plan.1" {
            assert!(stdout(&out).contains("--target"), "{}", stdout(&out));
        }
    }
}

/// docs/book/src/reference/cli.md is `nivis man --markdown`; regenerate it when this fails.
#[test]
fn the_books_cli_reference_is_current() {
    let out = nivis(&["man", "--markdown"]);
    assert_success(&out);
    let path = repo().join("docs/book/src/reference/cli.md");
    if std::env::var_os("NIVIS_UPDATE_BOOK").is_some() {
        std::fs::write(&path, &out.stdout).unwrap();
    }
    let book = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        book == stdout(&out),
        "{} is stale: run `nivis man --markdown > docs/book/src/reference/cli.md` \
         (or this test with NIVIS_UPDATE_BOOK=1)",
        path.display()
    );
}
