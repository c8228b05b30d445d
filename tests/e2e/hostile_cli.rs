//! The command line against hostile input: every flag fed values meant to break it, and a
//! stdout that closes mid-run. Nivis may refuse; it never panics.

use std::ffi::{OsStr, OsString};
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Stdio};

use crate::util::*;

const EMPTY_PLAN: &str = "ledger: lib.toIR { inherit ledger; }";

/// Values no flag should choke on.
fn hostile_values(p: &Project) -> Vec<OsString> {
    let dir = p.dir.path().join("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    let mut v: Vec<OsString> = [
        "",
        "-",
        "=",
        "0",
        "-1",
        "18446744073709551616",
        "99999999999999999999s",
        "5000000000000000h",
        "1e400s",
        "NaNs",
        "inf",
        "-5m",
        "1.5.5s",
        "0.000000000001ms",
        "a\nb",
        "line\r\nbreak",
        "../../../../etc/passwd",
        "/dev/null",
        "/dev/zero",
        "/proc/self/status",
        "http://[::1",
        "https://",
        "file:///etc/passwd",
        "_",
        "a_b_c_d",
        "{\"json\": [1, 2",
        "name=",
        "=value",
        "${builtins.abort \"x\"}",
        "💥",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    v.push(OsStr::from_bytes(b"non-utf8-\xff\xfe").to_owned());
    v.push(OsString::from("x".repeat(5000)));
    v.push(dir.into_os_string());
    v
}

/// Asserts one invocation neither panicked nor died of a signal.
fn assert_no_panic(args: &[OsString], out: &std::process::Output) {
    let err = stderr(out);
    assert!(
        out.status.code().is_some() && out.status.code() != Some(101) && !err.contains("panicked"),
        "nivis {args:?} panicked ({}):\n{err}",
        out.status
    );
}

#[test]
fn no_flag_value_makes_nivis_panic() {
    let p = Project::new(EMPTY_PLAN);
    let plan = p.plan.clone().into_os_string();
    let state = p.state.clone().into_os_string();
    let values = hostile_values(&p);
    // (verb, flag): each verb takes only its own flags, so every flag is fed to one that takes it.
    let run_flags = [
        ("plan", "--flake"),
        ("plan", "--file"),
        ("plan", "--attr"),
        ("plan", "--state"),
        ("plan", "--var"),
        ("plan", "--var-file"),
        ("plan", "--target"),
        ("plan", "--parallelism"),
        ("plan", "--refresh"),
        ("refresh", "--lock-timeout"),
        ("plan", "--lock-timeout"),
        ("plan", "--lock"),
        ("plan", "--mirror"),
        ("plan", "--network-mirror"),
        ("plan", "--lock-file"),
        ("plan", "--provider-cache"),
        ("plan", "--env"),
        ("plan", "--backend-config"),
        ("apply", "--max-phases"),
        ("apply", "--build"),
        ("destroy", "--target"),
        ("validate", "--var"),
        ("output", "--var"),
        ("output", "--flake"),
        ("state list", "--env"),
        ("state show", "--backend-config"),
        ("state pull", "--state"),
        ("state migrate", "--env"),
        ("env list", "--state"),
    ];
    for (verb, flag) in run_flags {
        assert_takes(verb, flag);
    }
    let mut cases: Vec<Vec<OsString>> = Vec::new();
    let os = |s: &str| OsString::from(s);
    for (verb, flag) in run_flags {
        for value in &values {
            // Every run also names the plan and state, unless the flag under test replaces it
            // or the verb takes no such flag.
            let mut args: Vec<OsString> = verb.split(' ').map(os).collect();
            if matches!(verb, "apply" | "destroy") {
                args.push(os("--auto-approve"));
            }
            if verb == "state pull" {
                args.extend([os("--out"), os("-")]);
            }
            if flag != "--file" && flag != "--flake" {
                args.extend([os("--file"), plan.clone()]);
            }
            if verb != "validate" && flag != "--state" {
                args.extend([os("--state"), state.clone()]);
            }
            if verb == "state show" {
                args.push(os("some.id"));
            }
            args.extend([os(flag), value.clone()]);
            cases.push(args);
        }
    }
    for value in &values {
        cases.push(vec![os("output"), value.clone(), os("--raw")]);
        cases.push(vec![os("output"), value.clone(), os("--json")]);
        cases.push(vec![os("completion"), value.clone()]);
        cases.push(vec![os("man"), os("--dir"), value.clone()]);
        cases.push(vec![os("plan"), os("--flake"), {
            let mut v = os(".#");
            v.push(value);
            v
        }]);
        cases.push(vec![
            os("state"),
            os("show"),
            value.clone(),
            os("--state"),
            state.clone(),
        ]);
        cases.push(vec![
            os("state"),
            os("rm"),
            value.clone(),
            os("--state"),
            state.clone(),
        ]);
        cases.push(vec![os("state"), os("list"), os("--state"), value.clone()]);
        cases.push(vec![
            os("state"),
            os("push"),
            value.clone(),
            os("--state"),
            state.clone(),
        ]);
        cases.push(vec![
            os("state"),
            os("pull"),
            os("--out"),
            os("-"),
            os("--env"),
            value.clone(),
        ]);
        // Relative paths climbing out of the test's directory would write a real file there.
        if !value.as_bytes().starts_with(b"../") {
            cases.push(vec![
                os("state"),
                os("pull"),
                os("--out"),
                value.clone(),
                os("--state"),
                state.clone(),
            ]);
        }
        cases.push(vec![
            os("state"),
            os("migrate"),
            os("--backend-config"),
            value.clone(),
        ]);
        cases.push(vec![
            os("env"),
            os("list"),
            os("--backend-config"),
            value.clone(),
        ]);
        cases.push(vec![os("output"), os("--state"), value.clone()]);
        // Never `fmt` without --check: a hostile value naming a real file would rewrite it.
        cases.push(vec![os("fmt"), os("--check"), value.clone()]);
        cases.push(vec![
            os("state"),
            os("replace-provider"),
            value.clone(),
            value.clone(),
            os("--state"),
            state.clone(),
        ]);
        cases.push(vec![
            os("force-unlock"),
            value.clone(),
            os("--state"),
            state.clone(),
        ]);
        cases.push(vec![
            os("force-unlock"),
            os("some-id"),
            os("--state"),
            value.clone(),
        ]);
        cases.push(vec![
            os("gen"),
            os("--provider"),
            value.clone(),
            os("--out"),
            p.dir.path().join("gen").into_os_string(),
        ]);
        cases.push(vec![
            os("providers"),
            os("lock"),
            os("--file"),
            plan.clone(),
            os("--platform"),
            value.clone(),
        ]);
        cases.push(vec![
            os("providers"),
            os("mirror"),
            value.clone(),
            os("--file"),
            plan.clone(),
        ]);
    }
    // Without --state, the state path comes from the plan's place (every command takes
    // --flake/--file) and from the environment.
    for value in &values {
        for flag in ["--flake", "--file"] {
            for verb in [
                &["plan"][..],
                &["state", "list"],
                &["output"],
                &["state", "rm", "x"],
            ] {
                let mut args: Vec<OsString> = verb.iter().map(|v| os(v)).collect();
                args.extend([os(flag), value.clone()]);
                cases.push(args);
            }
            cases.push(vec![
                os("state"),
                os("show"),
                os("x"),
                os(flag),
                value.clone(),
            ]);
            cases.push(vec![os("force-unlock"), os("x"), os(flag), value.clone()]);
        }
    }
    let mut with_env: Vec<(Vec<OsString>, &str, OsString)> = Vec::new();
    for value in &values {
        for var in [
            "XDG_STATE_HOME",
            "XDG_RUNTIME_DIR",
            "TMPDIR",
            "HOME",
            "NIVIS_VAR_x",
        ] {
            with_env.push((
                vec![os("plan"), os("--file"), plan.clone()],
                var,
                value.clone(),
            ));
        }
    }
    // The S3 backend's environment, with a store nothing listens on (one attempt).
    let s3 = [
        "type=s3",
        "bucket=abc",
        "key=k",
        "endpoint=http://127.0.0.1:9",
        "maxAttempts=1",
    ];
    let mut s3_rm = vec![os("state"), os("rm"), os("x"), os("--file"), plan.clone()];
    s3_rm.extend([os("--state"), state.clone()]);
    s3_rm.extend(s3.iter().flat_map(|kv| [os("--backend-config"), os(kv)]));
    for value in &values {
        for var in [
            "NIVIS_RESCUE_DIR",
            "NIVIS_ENV",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
            "AWS_PROFILE",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_REGION",
        ] {
            with_env.push((s3_rm.clone(), var, value.clone()));
        }
    }
    let run_dir = p.dir.path().join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::set_permissions(
        &run_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    let baseline = vec![os("plan"), os("--file"), plan.clone()];
    let runs = std::iter::once((&baseline, None))
        .chain(cases.iter().map(|args| (args, None)))
        .chain(with_env.iter().map(|(args, k, v)| (args, Some((*k, v)))));
    for (args, env) in runs {
        let mut cmd = Command::new(nivis_bin());
        // Completion requests too: the same words, answered as a shell would ask.
        let mut asked = Command::new(nivis_bin());
        asked
            .arg("--")
            .arg("nivis")
            .args(args)
            .env("NIVIS_COMPLETE", "bash")
            .env("_CLAP_COMPLETE_INDEX", args.len().to_string())
            .env("HOME", p.dir.path().join("home"))
            .env("XDG_STATE_HOME", p.dir.path().join("xdg-state"))
            .env_remove("NIVIS_STATE")
            .current_dir(p.dir.path())
            .stdin(Stdio::null());
        assert_no_panic(args, &asked.output().expect("run nivis"));
        cmd.args(args)
            .current_dir(p.dir.path())
            .env("NO_COLOR", "1")
            .env("NIVIS_OFFLINE", "1")
            .env("NIVIS_PROVIDER_CACHE_DIR", p.dir.path().join("cache"))
            // Default state paths and run directories stay inside the test's directory.
            .env("HOME", p.dir.path().join("home"))
            .env("XDG_STATE_HOME", p.dir.path().join("xdg-state"))
            .env("XDG_RUNTIME_DIR", &run_dir)
            .env("TMPDIR", p.dir.path())
            .env_remove("NIVIS_STATE")
            .stdin(Stdio::null());
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run nivis");
        let mut shown = args.clone();
        if let Some((k, v)) = env {
            shown.insert(0, format!("{k}={}", v.to_string_lossy()).into());
        }
        assert_no_panic(&shown, &out);
        if std::ptr::eq(args, &baseline) {
            // The environment above is a working one: the hostile values are what fails.
            assert_success(&out);
        }
    }
}

/// Fails unless `nivis VERB --help` lists `flag` (a hostile value must reach the flag's own
/// parser, not a usage error for a flag the verb does not take).
fn assert_takes(verb: &str, flag: &str) {
    let out = Command::new(nivis_bin())
        .args(verb.split(' '))
        .arg("--help")
        .output()
        .expect("run nivis");
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains(&format!("{flag} ")) || help.contains(&format!("{flag}=")),
        "`nivis {verb}` does not take {flag}:\n{help}"
    );
}

fn many(n: usize) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
         resources = lib.count {n} (i: lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = \"p${{toString i}}\"; }}); \
         inherit ledger; }}"
    )
}

/// `nivis ARGS | head -1`: reads one line of stdout, then closes the pipe.
fn run_into_head(p: &Project, args: &[&str]) -> std::process::Output {
    let mut child = Command::new(nivis_bin())
        .args(args)
        .arg("--file")
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .current_dir(p.dir.path())
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn nivis");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here: the pipe is closed while Nivis still has much to say.
    child.wait_with_output().expect("wait")
}

#[test]
fn a_closed_stdout_never_aborts_the_work() {
    for json in [false, true] {
        let p = Project::new(&many(40)).with_object_log();
        let mut args = vec!["apply", "--auto-approve"];
        if json {
            args.push("--json");
        }
        let out = run_into_head(&p, &args);
        assert_no_panic(&[], &out);
        assert_eq!(out.status.code(), Some(0), "json={json}: {}", stderr(&out));
        p.assert_remote_matches_state(&[]);
        assert_eq!(p.objects().created(), 40);

        // A failing run still says so in its exit code.
        let failing = Project::new(&many(40)).env("NIVIS_FAKE_FAIL_ON", "p3");
        let out = run_into_head(&failing, &args);
        assert_no_panic(&[], &out);
        assert_eq!(out.status.code(), Some(1), "json={json}: {}", stderr(&out));
    }
}
