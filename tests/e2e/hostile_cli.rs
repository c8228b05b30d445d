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
    let run_flags = [
        "--flake",
        "--file",
        "--attr",
        "--state",
        "--var",
        "--var-file",
        "--target",
        "--parallelism",
        "--refresh",
        "--lock-timeout",
        "--mirror",
        "--network-mirror",
        "--lock-file",
        "--provider-cache",
    ];
    let mut cases: Vec<Vec<OsString>> = Vec::new();
    let os = |s: &str| OsString::from(s);
    for flag in run_flags {
        for value in &values {
            // Every run also names the plan and state, unless the flag under test replaces it.
            let mut args = vec![os("plan")];
            if flag != "--file" && flag != "--flake" {
                args.extend([os("--file"), plan.clone()]);
            }
            if flag != "--state" {
                args.extend([os("--state"), state.clone()]);
            }
            args.extend([os(flag), value.clone()]);
            cases.push(args);
        }
    }
    for value in &values {
        for (verb, flag) in [
            ("apply", "--max-phases"),
            ("apply", "--build"),
            ("destroy", "--max-phases"),
        ] {
            cases.push(vec![
                os(verb),
                os("--auto-approve"),
                os("--file"),
                plan.clone(),
                os("--state"),
                state.clone(),
                os(flag),
                value.clone(),
            ]);
        }
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
        cases.push(vec![os("output"), os("--state"), value.clone()]);
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
    for args in &cases {
        let mut cmd = Command::new(nivis_bin());
        cmd.args(args)
            .current_dir(p.dir.path())
            .env("NO_COLOR", "1")
            .env("NIVIS_OFFLINE", "1")
            .env("NIVIS_PROVIDER_CACHE_DIR", p.dir.path().join("cache"))
            .stdin(Stdio::null());
        let out = cmd.output().expect("run nivis");
        assert_no_panic(args, &out);
    }
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
