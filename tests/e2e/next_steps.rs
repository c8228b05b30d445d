//! What a plan says to run next (issue 45, defects 1 and 3; issue 48, F13): nothing after
//! "No changes.", and a command that works as printed, with the plan source and state it was
//! made with, through the CLI with real Nix and the fake providers.

use std::process::{Command, Output};

use crate::util::*;

/// One alpha token labelled `label`.
fn one_token(label: &str) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }};
  resources = [ (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = \"{label}\"; }}) ];
  inherit ledger; }}"
    )
}

/// The command between backquotes on the line of `text` that starts `Run ` and ends with
/// `ending`.
fn next_step(text: &str, ending: &str) -> Option<String> {
    let line = text
        .lines()
        .find(|l| l.starts_with("Run `") && l.ends_with(ending))?;
    Some(line.split('`').nth(1)?.to_string())
}

/// Runs `command` (plain words: the test's paths have no spaces) in the project's directory.
fn run_printed(p: &Project, command: &str) -> Output {
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[0], "nivis", "{command}");
    bare(p, &words[1..])
}

/// `nivis ARGS` in the project's directory, with no plan source or state added.
fn bare(p: &Project, args: &[&str]) -> Output {
    Command::new(nivis_bin())
        .args(args)
        .current_dir(p.dir.path())
        .env("NO_COLOR", "1")
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap()
}

/// Defect 1: drift that changes nothing the plan acts on ends in "No changes." with no
/// command to run after it: not from `plan`, `plan --out`, `show` of that file, nor
/// `plan --refresh-only`.
#[test]
fn no_changes_has_no_next_step() {
    let p = Project::new(&one_token("drifty"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let p = p.env("NIVIS_FAKE_DRIFT_ON", "drifty");
    let plan = p.run(&["plan"], &[]);
    assert_success(&plan);
    let text = stdout(&plan);
    assert!(text.contains("changed outside Nivis"), "{text}");
    assert!(text.contains("No changes."), "{text}");
    let saved = p.run(&["plan"], &["--out", "same.plan"]);
    assert_success(&saved);
    let shown = bare(&p, &["show", "same.plan"]);
    let refresh_only = p.run(&["plan"], &["--refresh-only"]);
    for out in [&plan, &saved, &shown, &refresh_only] {
        let text = stdout(out);
        assert!(!text.contains("Run `nivis apply"), "{text}");
    }
    assert!(stdout(&saved).contains("No changes."), "{}", stdout(&saved));
}

/// Defect 3 and F13: the command `plan --out` prints applies the saved plan as printed
/// (before, `nivis apply p.plan` looked for a flake.nix that a `--file` project has not);
/// `show FILE` names the file and says the source flags are needed again; a plain plan's
/// hint carries the flags too.
#[test]
fn the_printed_next_step_applies_the_saved_plan() {
    let p = Project::new(&one_token("first"));
    let plan = p.run(&["plan"], &[]);
    assert_success(&plan);
    let hint = next_step(&stdout(&plan), "to carry it out.").expect("a next step");
    assert!(hint.starts_with("nivis apply --file "), "{hint}");
    assert!(hint.contains(" --state "), "{hint}");

    let saved = p.run(&["plan"], &["--out", "p.plan"]);
    assert_success(&saved);
    let text = stdout(&saved);
    let command = next_step(&text, "to carry out exactly this plan.").expect("a next step");
    assert!(command.ends_with(" p.plan"), "{command}");

    let shown = bare(&p, &["show", "p.plan"]);
    assert_success(&shown);
    let shown_text = stdout(&shown);
    assert!(
        !shown_text.contains("Run `nivis apply` to carry it out."),
        "{shown_text}"
    );
    assert!(
        shown_text.contains("Run `nivis apply p.plan`, with the plan source and state flags"),
        "{shown_text}"
    );

    let applied = run_printed(&p, &command);
    assert_success(&applied);
    assert_eq!(p.outputs()["alpha.alpha_token.t"]["label"], "first");
}
