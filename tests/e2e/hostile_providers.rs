//! Providers that behave like adversaries: endless output lines, oversized handshakes, wrapper
//! scripts that fork the real binary or exit while a child holds their stdout.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use nivis::plugin::{GrpcProvider, LaunchSpec};

use crate::util::*;

fn many(n: usize) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
         resources = lib.count {n} (i: lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = \"e${{toString i}}\"; }}); \
         inherit ledger; }}"
    )
}

/// Resident memory of `pid` in KiB, if it is still running.
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Runs an apply while sampling its memory; kills it (failing the test) if it passes 1 GiB,
/// so a regression cannot take the machine down. Returns (output, peak RSS in MiB).
fn apply_watching_memory(p: &Project) -> (std::process::Output, u64) {
    let mut cmd = Command::new(nivis_bin());
    cmd.args(["apply", "--auto-approve", "--parallelism", "2", "--file"])
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .current_dir(p.dir.path())
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn nivis");
    let pid = child.id();
    let sampler = std::thread::spawn(move || {
        let mut peak = 0;
        while let Some(kib) = rss_kib(pid) {
            peak = peak.max(kib);
            if kib > 1024 * 1024 {
                // SAFETY: kill has no memory-safety preconditions.
                unsafe { libc::kill(pid as i32, libc::SIGKILL) };
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak / 1024
    });
    let out = child.wait_with_output().expect("wait for nivis");
    (out, sampler.join().unwrap())
}

#[test]
fn a_provider_writing_one_endless_line_cannot_exhaust_memory() {
    for stream in ["stderr", "stdout"] {
        // 30 slow applies keep the run going for seconds while the provider streams.
        let p = Project::new(&many(30))
            .env("NIVIS_FAKE_ENDLESS", stream)
            .env("NIVIS_FAKE_SLOW_MS", "100")
            .with_object_log();
        let (out, peak_mib) = apply_watching_memory(&p);
        assert_success(&out);
        assert!(
            peak_mib < 256,
            "{stream}: nivis grew to {peak_mib} MiB reading one endless line"
        );
        p.assert_remote_matches_state(&[]);
        p.assert_no_leftover_processes();
    }
}

fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn spec(name: &str, path: &Path, marker: &str) -> LaunchSpec {
    let mut spec = LaunchSpec::new(name, path);
    spec.env.push(("NIVIS_TEST_MARKER".into(), marker.into()));
    spec.env.push((
        "REAL".into(),
        bin_dir().join("provider-alpha").display().to_string(),
    ));
    spec
}

fn assert_gone(marker: &str) {
    let mut left = processes_with_marker(marker);
    for _ in 0..50 {
        if left.is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
        left = processes_with_marker(marker);
    }
    panic!("processes left behind: {left:?}");
}

#[test]
fn a_wrapper_script_and_everything_it_started_die_with_the_provider() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("wrapper-{}", std::process::id());
    // The wrapper runs the real provider and a helper as its children and waits for both: the
    // provider exits on Shutdown, the helper never does.
    let wrapper = script(dir.path(), "wrapper.sh", "\"$REAL\" &\nsleep 600 &\nwait");
    let provider =
        GrpcProvider::start(&spec("wrapped", &wrapper, &marker)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !nivis::provider::Provider::schema(&provider)
            .resources
            .is_empty(),
        "the wrapped provider answers"
    );
    drop(provider);
    assert_gone(&marker);
}

#[test]
fn a_wrapper_that_exits_while_its_child_holds_stdout_is_reported_as_exited() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("exits-{}", std::process::id());
    let wrapper = script(dir.path(), "exits.sh", "sleep 600 &\nexit 3");
    let mut spec = spec("quitter", &wrapper, &marker);
    spec.start_timeout = Duration::from_secs(10);
    let err = GrpcProvider::start(&spec)
        .err()
        .expect("no handshake")
        .to_string();
    assert!(
        err.contains("exited before completing the plugin handshake") && err.contains("3"),
        "{err}"
    );
    assert_gone(&marker);
}

#[test]
fn an_oversized_handshake_line_is_refused_with_a_clear_error() {
    let mut spec = LaunchSpec::new("junk", &bin_dir().join("provider-alpha"));
    spec.env
        .push(("NIVIS_FAKE_HANDSHAKE_JUNK".into(), (1 << 20).to_string()));
    let err = GrpcProvider::start(&spec)
        .err()
        .expect("refused")
        .to_string();
    assert!(err.contains("64 KiB"), "{err}");
    assert!(
        err.len() < 4096,
        "the error quotes the line, not all of it: {} bytes",
        err.len()
    );
}
