//! Issue 35: the providers the last run of a plan started are started again before its first
//! evaluation, so their start runs while Nix evaluates (DESIGN §80); one the evaluation does
//! not declare is stopped, leaving no process and no private directory behind.
//!
//! How the overlap is seen without timing: each provider is a wrapper script that leaves a
//! marker file the moment it starts, and the plan's Nix evaluation polls for alpha's marker
//! (`builtins.pathExists`, about a million times) and puts what it saw in a resource's label.
//! A provider started only after the evaluation cannot be seen by it.

use std::path::Path;

use crate::util::*;

/// A wrapper for the fake `name` that leaves `NAME.started` (holding its pid) in `dir`.
fn write_wrapper(dir: &Path, name: &str) {
    write_wrapper_after(dir, name, "");
}

/// [`write_wrapper`], with the shell lines `prelude` run first.
fn write_wrapper_after(dir: &Path, name: &str, prelude: &str) {
    let script = format!(
        "#!/bin/sh\n{prelude}echo $$ >> '{dir}/{name}.started'\nexec '{bin}' \"$@\"\n",
        dir = dir.display(),
        bin = bin_dir().join(format!("provider-{name}")).display()
    );
    let path = dir.join(format!("{name}.sh"));
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
}

/// The plan: with `poll`, alpha's token is labelled with whether the evaluation saw alpha
/// started; with `beta`, a beta record too.
fn plan(dir: &Path, beta: bool, poll: bool) -> String {
    let marker = dir.join("alpha.started");
    let seen = if poll {
        "builtins.pathExists"
    } else {
        "(_: false)"
    };
    let beta_decl = if beta {
        "beta = lib.mkProvider { source = \"./beta.sh\"; };"
    } else {
        ""
    };
    let beta_record = if beta {
        "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"r\"; config.from = \"x\"; })"
    } else {
        ""
    };
    format!(
        "let
  seen = builtins.foldl' (acc: _: acc || builtins.foldl' (inner: _: inner || {seen} \"{marker}\") false (builtins.genList (j: j) 1500)) false (builtins.genList (i: i) 1000);
in ledger: lib.toIR {{
  providers = {{ alpha = lib.mkProvider {{ source = \"./alpha.sh\"; }}; {beta_decl} }};
  resources = [
    (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = if seen then \"overlapped\" else \"sequential\"; }})
    {beta_record}
  ];
  inherit ledger;
}}",
        marker = marker.display()
    )
}

/// Removes the start markers; says which providers had left one.
fn take_markers(dir: &Path) -> Vec<String> {
    let mut started = Vec::new();
    for name in ["alpha", "beta"] {
        let path = dir.join(format!("{name}.started"));
        if std::fs::remove_file(&path).is_ok() {
            started.push(name.to_string());
        }
    }
    started
}

/// The private directories of providers (`nivis-PID-p…`) left in `dir`.
fn provider_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.starts_with("nivis-") && n.split('-').nth(2).is_some_and(|s| s.starts_with('p'))
        })
        .collect()
}

#[test]
fn providers_the_last_run_started_start_while_nix_evaluates_and_an_unused_one_is_stopped() {
    let p = Project::new("ledger: throw \"replaced below\"");
    let dir = p.dir.path().to_path_buf();
    let runtime = dir.join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let p = p
        .env("XDG_CACHE_HOME", dir.join("cache").to_str().unwrap())
        .env("XDG_RUNTIME_DIR", runtime.to_str().unwrap())
        .env("TMPDIR", runtime.to_str().unwrap());
    write_wrapper(&dir, "alpha");
    write_wrapper(&dir, "beta");
    p.set_plan(&plan(&dir, true, true));

    // The first run knows nothing yet: the providers start after the evaluation, which
    // therefore cannot see alpha's marker (the poll can say no).
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    assert!(stdout(&out).contains("sequential"), "{}", stdout(&out));
    assert_eq!(take_markers(&dir), ["alpha", "beta"]);

    // The second run starts both before evaluating: the evaluation sees alpha started.
    let out = p.run(&["plan"], &["--json", "-vv"]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("overlapped"),
        "{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("provider alpha started before the evaluation"),
        "{}",
        stderr(&out)
    );
    assert_eq!(take_markers(&dir), ["alpha", "beta"]);
    assert_eq!(provider_dirs(&runtime), Vec::<String>::new());

    // beta is no longer declared: started from the record, then stopped once the evaluation
    // says so; nothing of it is left.
    p.set_plan(&plan(&dir, false, true));
    let out = p.run(&["plan"], &["--json", "-v"]);
    assert_success(&out);
    assert!(stdout(&out).contains("overlapped"), "{}", stdout(&out));
    assert!(
        stderr(&out)
            .contains("provider beta was started before the evaluation but is not used: stopped"),
        "{}",
        stderr(&out)
    );
    assert_eq!(take_markers(&dir), ["alpha", "beta"], "beta was prestarted");
    assert_eq!(provider_dirs(&runtime), Vec::<String>::new());
    p.assert_no_leftover_processes();

    // The record now names alpha only: beta is not started again.
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    assert_eq!(take_markers(&dir), ["alpha"]);

    // NIVIS_PRESTART=off: started after the evaluation again.
    let p = p.env("NIVIS_PRESTART", "off");
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    assert!(stdout(&out).contains("sequential"), "{}", stdout(&out));
}

#[test]
fn an_apply_adopts_a_prestarted_provider_and_configures_it_after_the_evaluation() {
    let p = Project::new("ledger: throw \"replaced below\"");
    let dir = p.dir.path().to_path_buf();
    let p = p.env("XDG_CACHE_HOME", dir.join("cache").to_str().unwrap());
    write_wrapper(&dir, "alpha");
    write_wrapper(&dir, "beta");
    p.set_plan(&plan(&dir, true, false));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    take_markers(&dir);
    // Prestarted for the destroy, configured and used: every object goes.
    let out = p.run(&["destroy"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert_eq!(take_markers(&dir), ["alpha", "beta"]);
    let state = p.state_json();
    assert!(
        state["resources"].as_object().is_none_or(|r| r.is_empty()),
        "{state}"
    );
    p.assert_no_leftover_processes();
}

/// A wrapper for the fake `name` that exits 1 without starting while `NAME.fail-once` exists,
/// removing it: the one start that meets the file fails, the next succeeds.
fn write_failing_once_wrapper(dir: &Path, name: &str) {
    let flag = dir.join(format!("{name}.fail-once"));
    let prelude = format!(
        "if [ -e '{flag}' ]; then rm -f '{flag}'; echo 'failing once' >&2; exit 1; fi\n",
        flag = flag.display()
    );
    write_wrapper_after(dir, name, &prelude);
}

#[test]
fn a_provider_whose_start_before_the_evaluation_failed_is_started_again_when_needed() {
    let p = Project::new("ledger: throw \"replaced below\"");
    let dir = p.dir.path().to_path_buf();
    let p = p.env("XDG_CACHE_HOME", dir.join("cache").to_str().unwrap());
    write_failing_once_wrapper(&dir, "alpha");
    p.set_plan(&plan(&dir, false, false));
    assert_success(&p.run(&["plan"], &[]));
    assert_eq!(take_markers(&dir), ["alpha"]);
    // The next run starts alpha before its evaluation, and that start fails (a provider that
    // crashed, a binary replaced mid-way): the run starts it again when it needs it.
    std::fs::write(dir.join("alpha.fail-once"), "").unwrap();
    let out = p.run(&["apply"], &["--auto-approve", "-v"]);
    assert_success(&out);
    assert!(
        !dir.join("alpha.fail-once").exists(),
        "the prestart met the file"
    );
    assert_eq!(
        take_markers(&dir),
        ["alpha"],
        "started again after the failed prestart"
    );
    assert!(
        stderr(&out).contains("the start before the evaluation failed"),
        "{}",
        stderr(&out)
    );
    assert!(p.state_json()["resources"]
        .as_object()
        .is_some_and(|r| r.len() == 1));
    p.assert_no_leftover_processes();
}
