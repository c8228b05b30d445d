//! The state's filesystem fills up mid-apply: Nivis starts nothing new, records what was in
//! flight, and never leaves an object that exists remotely without a record or a mention.
//!
//! The full disk is real: a small tmpfs mounted by the test. That needs root; elsewhere the
//! tests say they did not run, and under `CI=true` that is a failure (`not_run`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

/// A tmpfs of a given size, mounted for the test's lifetime.
struct SmallFs {
    dir: tempfile::TempDir,
}

impl SmallFs {
    /// Mounts a tmpfs of `size` (e.g. `512k`), or says why it cannot and returns `None` (a
    /// failure under `CI=true`).
    fn mount(size: &str) -> Option<SmallFs> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            not_run("the disk-full tests mount a small tmpfs to fill up, which needs root");
            return None;
        }
        let dir = tempfile::tempdir().expect("mount point");
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir.path())
            .output()
            .expect("run mount");
        assert_success(&out);
        Some(SmallFs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Grows the filesystem (the operator frees space).
    fn grow(&self, size: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.path())
            .output()
            .expect("run mount");
        assert_success(&out);
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// `n` alpha tokens whose labels are `size` bytes long (bigger records fill the disk sooner).
fn tokens(n: usize, size: usize) -> String {
    format!(
        "ledger: let pad = builtins.concatStringsSep \"\" (builtins.genList (_: \"x\") {size}); in \
         lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
         resources = lib.count {n} (i: lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; \
         config.label = \"t${{toString i}}-${{pad}}\"; }}); inherit ledger; }}"
    )
}

/// The project, with its state on `fs`.
fn project_on(fs: &SmallFs, body: &str) -> Project {
    let p = Project::new(body).with_object_log();
    Project {
        state: fs.path().join("nivis.state.json"),
        ..p
    }
}

/// Provider ids the run reported as existing but unrecorded (`unrecorded` events).
fn unrecorded(out: &std::process::Output) -> Vec<String> {
    events(out)
        .iter()
        .filter(|e| e["type"] == "unrecorded")
        .map(|e| e["objectId"].as_str().expect("objectId").to_string())
        .collect()
}

/// Every `finished` event names a resource whose record is durable.
fn assert_finished_means_recorded(p: &Project, out: &std::process::Output) {
    let recorded: Vec<String> = p.recorded_objects().into_values().collect();
    for e in events(out).iter().filter(|e| e["type"] == "finished") {
        if e["action"] == "create" {
            let id = e["id"].as_str().unwrap();
            assert!(
                recorded.iter().any(|r| r == id),
                "{id} was reported finished but is not recorded"
            );
        }
    }
}

fn failure_message(out: &std::process::Output) -> String {
    events(out)
        .iter()
        .rev()
        .find(|e| e["type"] == "error")
        .map(|e| e["message"].as_str().unwrap_or_default().to_string())
        .unwrap_or_else(|| stderr(out))
}

#[test]
fn a_full_state_disk_stops_the_apply_and_forgets_no_object() {
    let Some(fs) = SmallFs::mount("512k") else {
        return;
    };
    let p = project_on(&fs, &tokens(300, 1000));
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert!(
        !out.status.success(),
        "the disk is too small for 300 records"
    );
    assert_ne!(out.status.code(), Some(101), "{}", stderr(&out));
    let message = failure_message(&out);
    assert!(
        message.contains("No space left on device") && message.contains("not started"),
        "{message}"
    );
    let listed = unrecorded(&out);
    p.assert_remote_matches_state(&listed);
    assert_finished_means_recorded(&p, &out);
    let created = p.objects().created();
    assert!(
        created > 0 && created < 300,
        "stopped mid-way, not at once: {created}"
    );
    assert!(
        listed.is_empty(),
        "with the disk full, everything in flight still fits in what the state keeps free: {listed:?}"
    );

    // Still full: the rerun starts nothing.
    let again = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert!(!again.status.success());
    assert_eq!(p.objects().created(), created, "{}", stderr(&again));

    // Space freed: the rerun creates exactly what is missing (its ids counted from elsewhere).
    fs.grow("64m");
    let p = p.env("NIVIS_FAKE_COUNTER", "100000");
    let done = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&done);
    p.assert_remote_matches_state(&[]);
    assert_eq!(p.objects().created(), 300, "nothing was created twice");
}

#[test]
fn records_too_big_for_the_free_space_are_rescued_or_listed_never_lost() {
    let Some(fs) = SmallFs::mount("1m") else {
        return;
    };
    // Ten 120 KiB labels in flight at once: their records do not fit in what is left. This
    // machine's spare place for rescue files is on the full filesystem too.
    let spare = fs.path().join("xdg-state");
    let p = project_on(&fs, &tokens(40, 120 * 1024))
        .env("NIVIS_FAKE_SLOW_MS", "300")
        .env("XDG_STATE_HOME", spare.to_str().unwrap());
    let out = p.run(
        &["apply"],
        &["--auto-approve", "--json", "--parallelism", "10"],
    );
    assert!(!out.status.success());
    assert_ne!(out.status.code(), Some(101), "{}", stderr(&out));
    let listed = unrecorded(&out);
    p.assert_remote_matches_state(&listed);
    assert_finished_means_recorded(&p, &out);
    let message = failure_message(&out);
    for id in &listed {
        assert!(
            message.contains(id.as_str()),
            "{id} not named in: {message}"
        );
    }

    fs.grow("64m");
    let p = p.env("NIVIS_FAKE_COUNTER", "100000");
    // The creates in flight were noted (DESIGN §97): the objects the run could not record
    // are imported, the other notes confirmed absent, as a user would.
    let plan = p.run(&["plan"], &["--json"]);
    let orphans = p.remote_vs_state().orphans;
    let pad = "x".repeat(120 * 1024);
    let (_, imported) = resolve_pending(
        &plan,
        &orphans,
        |a| format!("t{}-{pad}", a.trim_start_matches("alpha.alpha_token.t__")),
        |a, id| p.run(&["import", a, id], &[]),
        |a| p.state_cmd(&["state", "resolve", a, "--absent"]),
    );
    assert_eq!(
        imported,
        orphans.len(),
        "every unrecorded object was pending"
    );
    let done = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&done);
    // Nothing exists twice, nothing is left unrecorded.
    assert!(p.remote_vs_state().orphans.is_empty());
    let diff = p.remote_vs_state();
    assert!(diff.phantoms.is_empty(), "{diff:?}");
    let orphan_ids: Vec<&String> = diff.orphans.iter().map(|(id, _)| id).collect();
    assert!(
        orphan_ids.iter().all(|id| listed.contains(id)),
        "{diff:?} vs {listed:?}"
    );
    assert!(
        !rescue_file(&p.state).exists(),
        "the rescue file was folded in"
    );
}

fn rescue_file(state: &Path) -> PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".rescue");
    PathBuf::from(name)
}

#[test]
fn results_the_full_state_disk_cannot_take_go_to_this_machines_spare_place() {
    let Some(fs) = SmallFs::mount("1m") else {
        return;
    };
    // As above, but this machine's state directory is on another filesystem.
    let home = tempfile::tempdir().unwrap();
    let p = project_on(&fs, &tokens(40, 120 * 1024))
        .env("NIVIS_FAKE_SLOW_MS", "300")
        .env("XDG_STATE_HOME", home.path().to_str().unwrap());
    let out = p.run(
        &["apply"],
        &["--auto-approve", "--json", "--parallelism", "10"],
    );
    assert!(!out.status.success());
    assert_ne!(out.status.code(), Some(101), "{}", stderr(&out));
    assert!(
        unrecorded(&out).is_empty(),
        "nothing is left unrecorded when the spare place takes it: {}",
        stderr(&out)
    );
    let spare_dir = home.path().join("nivis/rescue");
    let spares: Vec<PathBuf> = std::fs::read_dir(&spare_dir)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert_eq!(
        spares.len(),
        1,
        "one rescue file in {}",
        spare_dir.display()
    );
    let message = failure_message(&out);
    assert!(message.contains(spares[0].to_str().unwrap()), "{message}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&spares[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    fs.grow("64m");
    let p = p.env("NIVIS_FAKE_COUNTER", "100000");
    let done = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&done);
    p.assert_remote_matches_state(&[]);
    assert_eq!(p.objects().created(), 40, "nothing was created twice");
    assert!(!spares[0].exists(), "the spare rescue file was folded in");
}
