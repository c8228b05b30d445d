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
            let takes_plan = !verb.starts_with("state") && !verb.starts_with("env");
            if takes_plan && flag != "--file" && flag != "--flake" {
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
        cases.push(vec![os("state"), os("pull"), os("--env"), value.clone()]);
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
        // Completion requests too: the same words, answered as a shell would ask.
        let mut asked = Command::new(nivis_bin());
        asked
            .arg("--")
            .arg("nivis")
            .args(args)
            .env("NIVIS_COMPLETE", "bash")
            .env("_CLAP_COMPLETE_INDEX", args.len().to_string())
            .current_dir(p.dir.path())
            .stdin(Stdio::null());
        assert_no_panic(args, &asked.output().expect("run nivis"));
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
