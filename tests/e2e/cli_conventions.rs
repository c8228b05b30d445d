//! The CLI conventions CI jobs and Terraform hands rely on: exit codes (usage 1, error 1,
//! changes 2 only with `--detailed-exitcode`, a targeted apply that leaves a consumer waiting
//! 0 with a warning), `apply FILE` applying without a prompt, no prompt when there is nothing
//! to do, and plan listings in one stable order.

use std::process::{Command, Output};

use crate::util::*;

/// Five tokens: `c` reads `a`'s id (a TF→TF reference); the others stand alone, declared out of
/// address order.
const TOKENS: &str = "ledger: let
  t = n: lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = n; config.label = n; };
  a = t \"a\";
  c = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"c\"; config.label = a.refAttr \"id\"; };
  variables.greeting = { type = \"string\"; default = \"hi\"; };
  v = lib.vars ledger variables;
  g = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"g\"; config.label = v.greeting; };
in lib.toIR {
  providers.alpha = lib.mkProvider { source = \"provider-alpha\"; };
  resources = [ (t \"z\") (t \"m\") c a g (t \"b\") ];
  inherit variables ledger;
}";

fn nivis(args: &[&str]) -> Output {
    Command::new(nivis_bin())
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .expect("run nivis")
}

/// Runs `command` on a pseudo-terminal (`script`) whose input ends at once: a prompt reads
/// end-of-file and declines.
fn on_a_terminal(p: &Project, command: &str) -> Output {
    let mut cmd = Command::new("script");
    cmd.args(["-qec", command, "/dev/null"])
        .current_dir(p.dir.path())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null());
    for (k, v) in &p.env {
        cmd.env(k, v);
    }
    cmd.output().expect("run script (util-linux)")
}

#[test]
fn a_usage_error_exits_1_not_the_changes_code() {
    for args in [
        &["plan", "--bogus"][..],
        &["no-such-verb"],
        &["apply", "--max-phases", "many"],
    ] {
        let out = nivis(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("error"), "{args:?}: {}", stderr(&out));
    }
    // Help and version are not errors.
    assert_eq!(nivis(&["--help"]).status.code(), Some(0));
    assert_eq!(nivis(&["plan", "--help"]).status.code(), Some(0));
    assert_eq!(nivis(&["--version"]).status.code(), Some(0));
}

#[test]
fn an_undeclared_var_is_an_error_naming_the_declared_ones() {
    let p = Project::new(TOKENS);
    let out = p.run(&["apply"], &["--auto-approve", "--var", "greting=hello"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("greting") && err.contains("greeting"), "{err}");
    assert!(!p.state.exists(), "nothing was applied");
    // A declared one is fine.
    assert_success(&p.run(&["plan"], &["--var", "greeting=hello"]));
}

#[test]
fn changes_exit_2_only_with_detailed_exitcode() {
    let p = Project::new(TOKENS);
    assert_eq!(p.run(&["plan"], &[]).status.code(), Some(0));
    assert_eq!(
        p.run(&["plan"], &["--detailed-exitcode"]).status.code(),
        Some(2)
    );
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(
        p.run(&["plan"], &["--detailed-exitcode"]).status.code(),
        Some(0)
    );
}

#[test]
fn state_list_without_a_state_says_so_and_fails() {
    let p = Project::new(TOKENS);
    let out = p.state_cmd(&["state", "list"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("No state found"), "{err}");
    assert!(
        err.contains(&p.state.display().to_string()),
        "names where it looked: {err}"
    );
    // After an apply it lists, and after a destroy an empty state lists nothing, exit 0.
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let out = p.state_cmd(&["state", "list"]);
    assert_success(&out);
    assert_eq!(stdout(&out).lines().count(), 6, "{}", stdout(&out));
    assert_success(&p.run(&["destroy"], &["--auto-approve"]));
    let out = p.state_cmd(&["state", "list"]);
    assert_success(&out);
    assert_eq!(stdout(&out), "");
}

#[test]
fn a_targeted_apply_leaving_a_consumer_waiting_warns_and_succeeds() {
    let p = Project::two_providers(false);
    let out = p.run(
        &["apply"],
        &["--auto-approve", "--target", "alpha.alpha_token.A"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(all.contains("changes may be incomplete"), "{all}");
    assert!(all.contains("systemConfig"), "names what waits: {all}");
    let ids: Vec<String> = p.state_json()["resources"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default();
    assert_eq!(ids, ["alpha.alpha_token.A"], "only the target was applied");
}

#[test]
fn a_saved_plan_applies_without_a_prompt_and_the_footer_names_it() {
    let p = Project::new(TOKENS);
    let out = p.run(&["plan"], &["--out", "p.plan"]);
    assert_success(&out);
    let text = stdout(&out);
    // The next step works as printed: with the plan source and state the plan used.
    let next = format!(
        "Run `nivis apply --file {} --state {} p.plan` to carry out exactly this plan.",
        p.plan.display(),
        p.state.display()
    );
    assert!(text.contains(&next), "{text}");
    assert!(
        !text.contains("Run `nivis apply` to"),
        "no footer for a plain apply: {text}"
    );
    // No terminal, no --auto-approve: the saved plan was the review.
    let out = p.run(&["apply", "p.plan"], &[]);
    assert_success(&out);
    assert_eq!(p.state_json()["resources"].as_object().unwrap().len(), 6);
    // Without a saved plan, still no applying unasked.
    let out = p.run(&["destroy"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("--auto-approve"), "{}", stderr(&out));
}

#[test]
fn an_apply_with_nothing_to_do_does_not_ask() {
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let command = format!(
        "{} apply --file {} --state {}",
        nivis_bin().display(),
        p.plan.display(),
        p.state.display()
    );
    let out = on_a_terminal(&p, &command);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains("Apply these changes?"), "{text}");
    // With something to do it asks (and the closed input declines).
    p.set_plan(&TOKENS.replace("config.label = n;", "config.label = n + \"!\";"));
    let out = on_a_terminal(&p, &command);
    assert!(
        stdout(&out).contains("Apply these changes?"),
        "{}",
        stdout(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

/// The lines naming a resource and its action, in the order printed.
fn listing(out: &Output) -> Vec<String> {
    stdout(out)
        .lines()
        .filter(|l| l.contains(" (alpha_token)"))
        .map(str::to_string)
        .collect()
}

#[test]
fn plan_and_destroy_listings_come_in_one_order() {
    let p = Project::new(TOKENS).env("NIVIS_FAKE_SLOW_MS", "5");
    let first = p.run(&["plan"], &["--parallelism", "6"]);
    assert_success(&first);
    let expected = [
        "+ alpha.alpha_token.a",
        "+ alpha.alpha_token.b",
        "+ alpha.alpha_token.g",
        "+ alpha.alpha_token.m",
        "+ alpha.alpha_token.z",
        "+ alpha.alpha_token.c",
    ];
    let order: Vec<String> = listing(&first)
        .iter()
        .map(|l| l.split(" (").next().unwrap().to_string())
        .collect();
    assert_eq!(order, expected, "dependency order, ties by address");
    for _ in 0..9 {
        let again = p.run(&["plan"], &["--parallelism", "6"]);
        assert_eq!(listing(&again), listing(&first));
    }
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let destroy: Vec<Vec<String>> = (0..3)
        .map(|_| {
            let out = on_a_terminal(
                &p,
                &format!(
                    "{} destroy --file {} --state {}",
                    nivis_bin().display(),
                    p.plan.display(),
                    p.state.display()
                ),
            );
            listing(&out)
        })
        .collect();
    assert_eq!(destroy[0].len(), 6, "{destroy:?}");
    assert!(destroy.iter().all(|d| d == &destroy[0]), "{destroy:?}");
}

/// `nivis plan` in `dir` (the flake `.`), with a state file beside it.
fn plan_in(dir: &std::path::Path) -> Output {
    Command::new(nivis_bin())
        .args(["plan", "--flake", ".", "--state", "../s.json"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("run nivis")
}

#[test]
fn a_nix_syntax_error_names_the_users_file_and_the_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("project");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("flake.nix"),
        "{ outputs = { self }: {\n  nivis.plan = ledger: {\n    x = 1\n  };\n}; }\n",
    )
    .unwrap();
    git(&dir, &["init", "-q", "."]);
    git(&dir, &["add", "flake.nix"]);
    let out = plan_in(&dir);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("./flake.nix:4:3"), "{err}");
    assert!(!err.contains("/nix/store/"), "{err}");
    assert!(
        err.contains("#nivis.plan"),
        "names the plan attribute: {err}"
    );
}

#[test]
fn an_untracked_flake_nix_gets_the_git_add_hint() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("project");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("README"), "x").unwrap();
    git(&dir, &["init", "-q", "."]);
    git(&dir, &["add", "README"]);
    std::fs::write(
        dir.join("flake.nix"),
        "{ outputs = { self }: { nivis.plan = ledger: { }; }; }\n",
    )
    .unwrap();
    let out = plan_in(&dir);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("git add flake.nix"), "{err}");
}

#[test]
fn version_names_nivis_the_platform_nix_and_the_locked_providers() {
    let p = Project::new(TOKENS);
    std::fs::write(
        p.dir.path().join(".terraform.lock.hcl"),
        "provider \"registry.opentofu.org/hashicorp/null\" {\n  version = \"3.2.1\"\n  hashes = [\n    \"h1:AAAA\",\n  ]\n}\n",
    )
    .unwrap();
    let out = p.state_cmd(&["version", "--json"]);
    // `--state` is not a flag of version: run it bare in the project.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let run = |args: &[&str]| {
        Command::new(nivis_bin())
            .args(args)
            .current_dir(p.dir.path())
            .output()
            .unwrap()
    };
    let out = run(&["version", "--json"]);
    assert_success(&out);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["version"], env!("CARGO_PKG_VERSION"));
    assert!(doc["platform"].as_str().unwrap().contains('_'), "{doc}");
    assert!(doc["nix"].as_str().unwrap().starts_with("2."), "{doc}");
    assert_eq!(
        doc["providers"]["registry.opentofu.org/hashicorp/null"],
        "3.2.1"
    );
    let text = stdout(&run(&["--version"]));
    assert!(
        text.starts_with(&format!("nivis {}", env!("CARGO_PKG_VERSION"))),
        "{text}"
    );
    assert!(
        text.contains("platform: ") && text.contains("nix: 2."),
        "{text}"
    );
    assert!(
        text.contains("registry.opentofu.org/hashicorp/null 3.2.1"),
        "{text}"
    );
}

#[test]
fn graph_is_dot_naming_every_resource_and_edge() {
    let p = Project::two_providers(false);
    let out = p.run(&["graph"], &[]);
    assert_success(&out);
    let dot = stdout(&out);
    for node in [
        "\"alpha.alpha_token.A\"",
        "\"beta.beta_record.B\"",
        "\"alpha.alpha_token.C\"",
        "\"systemConfig\" [shape=note]",
    ] {
        assert!(dot.contains(node), "{node}: {dot}");
    }
    for edge in [
        "\"beta.beta_record.B\" -> \"alpha.alpha_token.A\" [label=\"nix re-evaluation\"",
        "\"alpha.alpha_token.C\" -> \"beta.beta_record.B\" [label=\"nix re-evaluation\"",
        "\"systemConfig\" -> \"beta.beta_record.B\"",
    ] {
        assert!(dot.contains(edge), "{edge}: {dot}");
    }
    // The headline example takes three phases; each is a cluster.
    for phase in 1..=3 {
        assert!(dot.contains(&format!("label=\"phase {phase}\"")), "{dot}");
    }
    // Graphviz reads it (scripts/install.sh installs graphviz).
    let mut render = Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("graphviz's `dot` (scripts/install.sh installs it)");
    use std::io::Write;
    render
        .stdin
        .take()
        .unwrap()
        .write_all(dot.as_bytes())
        .unwrap();
    let svg = render.wait_with_output().unwrap();
    assert_success(&svg);
    let svg = String::from_utf8_lossy(&svg.stdout);
    assert!(
        svg.contains("<svg") && svg.contains("alpha.alpha_token.C"),
        "{svg}"
    );
    // A TF reference is labelled as one; the JSON form has the same nodes and edges.
    let p = Project::new(TOKENS);
    let out = p.run(&["graph"], &["--json"]);
    assert_success(&out);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["nodes"].as_array().unwrap().len(), 6, "{doc}");
    assert_eq!(
        doc["edges"],
        serde_json::json!([{"from": "alpha.alpha_token.c", "to": "alpha.alpha_token.a", "kind": "reference"}])
    );
}

/// A plan with a required variable `pw` (no default), and a token.
const NEEDS_A_VARIABLE: &str = "ledger: let
  variables.pw = { type = \"string\"; };
  v = lib.vars ledger variables;
in lib.toIR {
  providers.alpha = lib.mkProvider { source = \"provider-alpha\"; };
  resources = [ (lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = v.pw; }) ];
  consumers.label = v.pw;
  inherit variables ledger;
}";

#[test]
fn output_raw_of_a_resource_reads_the_state_without_variables() {
    let p = Project::new(NEEDS_A_VARIABLE);
    assert_success(&p.run(&["apply"], &["--auto-approve", "--var", "pw=abc"]));
    let out = p.state_cmd(&[
        "output",
        "--raw",
        "alpha.alpha_token.t.label",
        "--file",
        p.plan.to_str().unwrap(),
    ]);
    assert_success(&out);
    assert_eq!(stdout(&out), "abc");
    // A consumer value needs the evaluation, so the variable.
    let out = p.state_cmd(&["output", "label", "--file", p.plan.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("pw"), "{}", stderr(&out));
}

#[test]
fn state_verbs_take_their_flags() {
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    // Address filters.
    let out = p.state_cmd(&[
        "state",
        "list",
        "alpha.alpha_token.a",
        "alpha.alpha_token.m",
    ]);
    assert_success(&out);
    assert_eq!(stdout(&out), "alpha.alpha_token.a\nalpha.alpha_token.m\n");
    let out = p.state_cmd(&["state", "list", "alpha.alpha_token", "--json"]);
    assert_success(&out);
    let ids: Vec<String> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(ids.len(), 6);
    let out = p.state_cmd(&["state", "list", "alpha.alpha_tok"]);
    assert_success(&out);
    assert_eq!(stdout(&out), "", "a prefix stops at a . or [");
    // rm and mv wait for the lock like apply does; mv's error has no stray spaces.
    let out = p.state_cmd(&[
        "state",
        "mv",
        "alpha.alpha_token.a",
        "beta.beta_record.a",
        "--lock-timeout",
        "1s",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!stderr(&out).contains("  "), "{}", stderr(&out));
    let out = p.state_cmd(&["state", "rm", "alpha.alpha_token.z", "--lock-timeout", "1s"]);
    assert_success(&out);
    // push takes a plan source next to its FILE.
    let pulled = p.dir.path().join("pulled.json");
    let pulled = pulled.to_str().unwrap();
    assert_success(&p.state_cmd(&["state", "pull", "--out", pulled]));
    let out = p.state_cmd(&["state", "push", pulled, "--file", p.plan.to_str().unwrap()]);
    assert_success(&out);
}

#[test]
fn a_tfvars_file_gets_the_json_it_must_become_without_its_values() {
    let p = Project::new(TOKENS);
    let file = p.dir.path().join("prod.tfvars");
    std::fs::write(&file, "greeting = \"s3cr3t-value\"\nregion = \"eu\"\n").unwrap();
    let out = p.run(&["plan"], &["--var-file", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("{\"greeting\": …, \"region\": …}"), "{err}");
    assert!(err.contains("prod.tfvars.json"), "{err}");
    assert!(!err.contains("s3cr3t"), "no value is repeated: {err}");
}

#[test]
fn taint_points_at_replace() {
    let out = nivis(&["taint", "alpha.alpha_token.a"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("nivis apply --replace ID"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn no_color_and_term_dumb_turn_colours_off_on_a_terminal() {
    let p = Project::new(TOKENS);
    let plan = |extra: &str, env: &str| {
        let command = format!(
            "env {env} {} plan --file {} --state {} {extra}",
            nivis_bin().display(),
            p.plan.display(),
            p.state.display()
        );
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &command, "/dev/null"])
            .current_dir(p.dir.path())
            .env_remove("NO_COLOR")
            .env("TERM", "xterm")
            .stdin(std::process::Stdio::null());
        for (k, v) in &p.env {
            cmd.env(k, v);
        }
        stdout(&cmd.output().unwrap())
    };
    assert!(plan("", "").contains("\x1b["), "colours on a terminal");
    let off = plan("--no-color", "");
    assert!(
        off.contains("alpha.alpha_token.a") && !off.contains("\x1b["),
        "{off:?}"
    );
    let dumb = plan("", "TERM=dumb");
    assert!(
        dumb.contains("alpha.alpha_token.a") && !dumb.contains("\x1b["),
        "{dumb:?}"
    );
}

#[test]
fn plan_destroy_lists_what_destroy_would_remove_and_changes_nothing() {
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let before = p.state_json()["resources"].clone();
    let out = p.run(&["plan"], &["--destroy", "--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stdout(&out);
    let rows = listing(&out);
    assert_eq!(rows.len(), 6, "{text}");
    assert!(rows.iter().all(|r| r.starts_with("- ")), "{rows:?}");
    assert!(text.contains("6 to destroy"), "{text}");
    // The command as it works here: with the plan source and state this plan used.
    let next = format!(
        "Run `nivis destroy --file {} --state {}` to carry it out.",
        p.plan.display(),
        p.state.display()
    );
    assert!(text.contains(&next), "{text}");
    assert_eq!(p.state_json()["resources"], before, "nothing was removed");
}

#[test]
fn a_saved_destroy_plan_applies_exactly_and_refuses_a_changed_state() {
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let out = p.run(
        &["plan"],
        &[
            "--destroy",
            "--target",
            "alpha.alpha_token.a",
            "--out",
            "d.plan",
        ],
    );
    assert_success(&out);
    let text = stdout(&out);
    // The next step works as printed: with the plan source and state the plan used.
    let next = format!(
        "Run `nivis apply --file {} --state {} d.plan` to carry out exactly this plan.",
        p.plan.display(),
        p.state.display()
    );
    assert!(text.contains(&next), "{text}");
    assert!(
        text.contains("2 to destroy"),
        "a and c, which reads it: {text}"
    );
    assert_eq!(p.state_json()["resources"].as_object().unwrap().len(), 6);
    // `show` prints what it removes.
    let out = Command::new(nivis_bin())
        .args(["show", "d.plan"])
        .current_dir(p.dir.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let shown = stdout(&out);
    assert!(
        shown.contains("- alpha.alpha_token.c"),
        "{shown}{}",
        stderr(&out)
    );
    // No terminal, no --auto-approve: the saved plan was the review.
    let out = p.run(&["apply", "d.plan"], &[]);
    assert_success(&out);
    let left = p.state_json()["resources"].clone();
    let left: Vec<&String> = left.as_object().unwrap().keys().collect();
    assert_eq!(left.len(), 4, "a and c went, the rest stayed: {left:?}");
    assert!(!left
        .iter()
        .any(|id| id.ends_with(".a") || id.ends_with(".c")));

    // A destroy plan made before the state changed is refused, and removes nothing.
    let out = p.run(&["plan"], &["--destroy", "--out", "all.plan"]);
    assert_success(&out);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let out = p.run(&["apply", "all.plan"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let err = stderr(&out);
    assert!(err.contains("the state changed since it was made"), "{err}");
    assert_eq!(p.state_json()["resources"].as_object().unwrap().len(), 6);
}

#[test]
fn a_nix_error_in_a_flake_in_a_subdirectory_of_a_repository_names_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let repo_dir = tmp.path().join("repo");
    let dir = repo_dir.join("infra");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("flake.nix"),
        "{ outputs = { self }: {\n  nivis.plan = ledger: {\n    x = 1\n  };\n}; }\n",
    )
    .unwrap();
    git(&repo_dir, &["init", "-q", "."]);
    git(&repo_dir, &["add", "infra/flake.nix"]);
    // `plan_in` keeps its state beside the flake's directory: inside this repository.
    std::fs::write(repo_dir.join(".gitignore"), "s.json*\n").unwrap();
    let out = plan_in(&dir);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("./flake.nix:4:3"), "{err}");
    assert!(!err.contains("/nix/store/"), "{err}");
}

#[test]
fn console_loads_outputs_and_the_plan_without_secrets() {
    use std::io::Write;
    let p = Project::new(TOKENS);
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let secret = p.state_json()["resources"]["alpha.alpha_token.a"]["attributes"]["secret"]
        .as_str()
        .expect("the fake's generated secret")
        .to_string();
    let mut child = Command::new(nivis_bin())
        .args(["console", "--file", p.plan.to_str().unwrap(), "--state"])
        .arg(&p.state)
        .current_dir(p.dir.path())
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"builtins.attrNames outputs\nmap (r: r.id) plan.resources\noutputs.\"alpha.alpha_token.a\".secret\n",
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_success(&out);
    let text = format!("{}{}", stdout(&out), stderr(&out));
    assert!(text.contains("\"alpha.alpha_token.z\""), "{text}");
    assert!(text.contains("\"alpha.alpha_token.c\""), "{text}");
    assert!(text.contains("__sensitiveRef"), "a placeholder: {text}");
    assert!(!text.contains(&secret), "the secret stays out: {text}");
}

/// A plan whose own code rejects a region and a password, quoting each; `port` must be a
/// number; `pw` is sensitive.
const CHECKED_VARS: &str = "ledger: let
  variables = {
    region = { type = \"string\"; default = \"eu-west-1\"; };
    port = { type = \"number\"; default = 80; };
    pw = { type = \"string\"; sensitive = true; default = null; };
  };
  v = lib.vars ledger variables;
  region = if v.region == \"mars-north-1\" then throw \"no such region: ${v.region}\" else v.region;
  pw = if v.pw != null && builtins.stringLength v.pw.value < 20 then throw \"password too short: ${v.pw.value}\" else v.pw;
  a = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"a\";
    config.label = builtins.seq pw region; };
in lib.toIR {
  providers.alpha = lib.mkProvider { source = \"provider-alpha\"; };
  resources = [ a ];
  inherit variables ledger;
}";

/// Everything a failed run printed, for plan's human and `--json` output.
fn everything_printed(p: &Project, extra: &[&str]) -> Vec<(String, String)> {
    [&["plan"][..], &["plan", "--json"]]
        .iter()
        .map(|verb| {
            let out = p.run(verb, extra);
            assert_eq!(
                out.status.code(),
                Some(1),
                "{verb:?} {extra:?}: {}",
                stderr(&out)
            );
            (stdout(&out), stderr(&out))
        })
        .collect()
}

#[test]
fn an_error_quoting_a_harmless_variable_shows_it_and_a_sensitive_one_stays_masked() {
    let p = Project::new(CHECKED_VARS);
    // The library's own type error, and the plan's own error, on harmless variables.
    for (flag, shown) in [
        ("port=eighty-one", "eighty-one"),
        ("region=mars-north-1", "mars-north-1"),
    ] {
        for (out, err) in everything_printed(&p, &["--var", flag]) {
            let all = format!("{out}{err}");
            assert!(all.contains(shown), "{flag}: {all}");
            assert!(
                !all.contains("(sensitive"),
                "{flag}: nothing is masked: {all}"
            );
        }
    }
    // The plan's own error quoting a sensitive variable: Nix's line quoting it is left out
    // (with a note saying so), in every output.
    let p = p.env("NIVIS_VAR_pw", "hunter2-too-short");
    for (out, err) in everything_printed(&p, &[]) {
        let all = format!("{out}{err}");
        assert!(
            all.contains("derived from a secret and were left out"),
            "{all}"
        );
        assert!(!all.contains("hunter2"), "the value appears nowhere: {all}");
    }
    // Declared a number: the library's own type error hides the value.
    let body = CHECKED_VARS.replace(
        "type = \"string\"; sensitive",
        "type = \"number\"; sensitive",
    );
    p.set_plan(&body);
    for (out, err) in everything_printed(&p, &[]) {
        let all = format!("{out}{err}");
        assert!(all.contains("the variable is sensitive"), "{all}");
        assert!(!all.contains("hunter2"), "the value appears nowhere: {all}");
    }
    assert!(!p.state.exists(), "nothing was applied");
}

/// The template's plan with `inherit ledger;` forgotten: `second` is built by Nix from
/// `first`'s id, which the plan can never see.
const NO_LEDGER: &str = "ledger: let
  first = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"first\";
    config.label = \"hello\"; };
  second = lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"second\";
    config.label = lib.str [ \"after-\" (first.refAttr \"id\") ]; };
in lib.toIR {
  providers.alpha = lib.mkProvider { source = \"provider-alpha\"; };
  resources = [ first second ];
}";

#[test]
fn a_plan_that_forgot_inherit_ledger_is_refused_before_anything_is_applied() {
    let p = Project::new(NO_LEDGER).with_object_log();
    for verb in [&["plan"][..], &["apply", "--auto-approve"]] {
        let out = p.run(verb, &[]);
        assert_eq!(out.status.code(), Some(1), "{verb:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains("inherit ledger;"), "{verb:?}: {err}");
        assert!(err.contains("toIR"), "{verb:?}: {err}");
    }
    assert!(!p.state.exists(), "the state is untouched");
    assert_eq!(p.objects().created(), 0, "no provider created anything");
    // A plan that needs no re-evaluation still runs without the ledger.
    p.set_plan(&NO_LEDGER.replace("(first.refAttr \"id\")", "\"x\""));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
}
