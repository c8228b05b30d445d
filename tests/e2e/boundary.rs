//! Nothing lost at the boundary of what Nivis writes down (issue 46): a state that vanished
//! between runs is refused, never planned against as a new project, on the local backend and on
//! S3 (a real SeaweedFS); the fakes' object log counts what would have been duplicated.

use std::path::Path;

use super::remote::{tokens, Machine};
use super::weed::Weed;
use crate::util::*;

/// The words every refusal of a lost state starts with.
const LOST: &str = "has no state, but a state existed there";

#[test]
fn a_local_state_removed_between_runs_is_refused_and_nothing_is_created() {
    let mut p = Project::new(&tokens(3, "l")).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    // Each run's fake numbers its objects from its own seed: apart, so ids never repeat.
    p.env.push(("NIVIS_FAKE_COUNTER".into(), "100000".into()));
    assert_success(&p.run(&["apply"], &["--auto-approve", "--var", "n=5"]));
    assert_eq!(p.objects().created(), 5);
    let kept = p.dir.path().join("kept.json");
    std::fs::copy(&p.state, &kept).unwrap();
    let backup = format!("{}.backup", p.state.display());
    assert!(Path::new(&backup).exists(), "the second run kept a backup");
    // A wrong `rm`: the snapshot and its journal go, the backup and the audit log stay.
    std::fs::remove_file(&p.state).unwrap();
    let _ = std::fs::remove_file(format!("{}.journal", p.state.display()));

    let planned = refused(&p.run(&["plan"], &["--var", "n=5"]));
    let applied = refused(&p.run(&["apply"], &["--auto-approve", "--var", "n=5"]));
    let listed = refused(&p.state_cmd(&["state", "list"]));
    for err in [&planned, &applied, &listed] {
        assert!(err.contains(LOST), "{err}");
        assert!(err.contains(&format!("the backup {backup}")), "{err}");
        assert!(err.contains("audit record(s)"), "{err}");
        assert!(err.contains("nivis state push FILE"), "{err}");
        assert!(err.contains("--accept-lost-state"), "{err}");
    }
    assert_eq!(p.objects().created(), 5, "nothing was created");
    assert!(!p.state.exists(), "a refusal writes no state");

    // The ways on: push the copy the user kept, and the next apply has nothing to create.
    assert_success(&p.state_cmd(&["state", "push", &kept.display().to_string()]));
    assert_success(&p.run(&["apply"], &["--auto-approve", "--var", "n=5"]));
    assert_eq!(p.objects().created(), 5, "no duplicate after the push");
    p.assert_remote_matches_state(&[]);
}

#[test]
fn starting_over_a_lost_local_state_is_explicit_and_keeps_the_serial_going() {
    let p = Project::new(&tokens(2, "o")).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_success(&p.run(&["apply"], &["--auto-approve", "--var", "n=3"]));
    let serial = p.state_json()["serial"].as_u64().unwrap();
    std::fs::remove_file(&p.state).unwrap();

    let out = p.run(&["apply"], &["--auto-approve", "--accept-lost-state"]);
    let err = stderr(&out);
    assert_success(&out);
    assert!(err.contains("Started over with an empty state"), "{err}");
    assert!(err.contains("nivis import"), "{err}");
    assert!(
        p.state_json()["serial"].as_u64().unwrap() > serial,
        "the serial never goes back: {}",
        p.state_json()
    );
    // The user chose it: the objects the lost state recorded are created again.
    assert_eq!(p.objects().created(), 3 + 2);
    // Once started over, the state is there: the flag is not needed again, and says so.
    let again = p.run(&["plan"], &["--accept-lost-state"]);
    assert_success(&again);
    assert!(stderr(&again).contains("is not lost; nothing was changed"));
    assert_success(&p.run(&["plan"], &[]));
}

#[test]
fn an_s3_state_removed_between_runs_is_refused_and_nothing_is_created() {
    let weed = Weed::start();
    let key = "lost/nivis.state";
    let mut m = Machine::new(&weed, key, &tokens(3, "r"));
    m.project = m.project.with_object_log();
    assert_success(&m.run(&["apply"], &["--auto-approve"]));
    assert_success(&m.run(&["apply"], &["--auto-approve", "--var", "n=5"]));
    assert_eq!(m.project.objects().created(), 5);
    let client = weed.client();
    assert!(client.get(&format!("{key}.backup")).unwrap().is_some());
    // A lifecycle rule takes the snapshot and the journal; backup and audit records stay.
    let gone: Vec<String> = client
        .list(key)
        .unwrap()
        .into_iter()
        .filter(|n| n == key || n.starts_with(&format!("{key}.journal/")))
        .collect();
    assert!(gone.iter().any(|n| n == key), "{gone:?}");
    for name in &gone {
        client
            .delete(name, nivis::state::s3::Condition::Always)
            .unwrap();
    }

    let planned = refused(&m.run(&["plan"], &["--var", "n=5"]));
    let applied = refused(&m.run(&["apply"], &["--auto-approve", "--var", "n=5"]));
    let listed = refused(&m.cmd(&["state", "list"]));
    for err in [&planned, &applied, &listed] {
        assert!(err.contains(LOST), "{err}");
        assert!(err.contains(&format!("{key}.backup (serial")), "{err}");
        assert!(err.contains("audit record(s)"), "{err}");
        assert!(err.contains("aws s3 cp"), "{err}");
    }
    assert_eq!(m.project.objects().created(), 5, "nothing was created");
    assert!(
        client.get(key).unwrap().is_none(),
        "a refusal writes no state"
    );

    let out = m.run(
        &["apply"],
        &["--auto-approve", "--accept-lost-state", "--var", "n=1"],
    );
    let err = stderr(&out);
    assert_success(&out);
    assert!(err.contains("Started over with an empty state"), "{err}");
    assert_eq!(m.ids().len(), 1);
    assert_eq!(m.project.objects().created(), 6);
}

#[test]
fn a_local_state_directory_removed_mid_apply_saves_every_record_it_held() {
    let rescue = tempfile::tempdir().unwrap();
    let p = Project::new(&tokens(300, "d"))
        .env("NIVIS_FAKE_SLOW_MS", "40")
        .env("NIVIS_RESCUE_DIR", &rescue.path().display().to_string())
        .with_object_log();
    let dir = p.dir.path().join("st");
    std::fs::create_dir(&dir).unwrap();
    let p = Project {
        state: dir.join("nivis.state.json"),
        ..p
    };
    let err_path = p.dir.path().join("apply.stderr");
    let mut run = std::process::Command::new(nivis_bin())
        .args(["apply", "--auto-approve", "--file"])
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .current_dir(p.dir.path())
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let journal = dir.join("nivis.state.json.journal");
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&journal).is_ok_and(|j| j.lines().count() >= 3) {
        assert!(started.elapsed().as_secs() < 60, "no results recorded");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let status = run.wait().unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(!status.success(), "a run whose state went must fail: {err}");
    assert!(err.contains("removed or moved"), "{err}");
    assert!(
        err.contains("record(s) this run held were saved to the rescue file"),
        "{err}"
    );
    let created = p.objects().created();
    assert!(created < 300, "dispatch stopped");
    // Every object that exists is counted among what was saved: the records the run held and
    // the results of what was running.
    let held: usize = err
        .split("all ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of saved records: {err}"));
    assert_eq!(held, p.objects().live().len(), "{err}");
    let rescued = std::fs::read_dir(rescue.path()).unwrap().count();
    assert_eq!(rescued, 1, "one rescue file in the spare place");

    // The next run recreates the directory and records the whole rescue file first: nothing
    // that exists is created again.
    let mut p = p;
    p.env.push(("NIVIS_FAKE_COUNTER".into(), "100000".into()));
    p.env.push(("NIVIS_FAKE_SLOW_MS".into(), "0".into()));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let recorded = recorded_in(&nivis::state::Store::read_only(&p.state).unwrap());
    p.assert_remote_matches(&recorded, &[]);
    assert_eq!(p.objects().created(), 300, "no duplicate");
    assert_eq!(std::fs::read_dir(rescue.path()).unwrap().count(), 0);
}

#[test]
fn a_full_eval_store_disk_is_named_with_what_to_do() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        not_run("filling the eval store's disk mounts a small tmpfs, which needs root");
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs"])
        .arg(cache.path())
        .output()
        .unwrap();
    assert_success(&mounted);
    let p = Project::new(&tokens(2, "e"))
        .env("XDG_CACHE_HOME", &cache.path().display().to_string())
        .with_object_log();
    let out = p.run(&["apply"], &["--auto-approve"]);
    let _ = std::process::Command::new("umount")
        .arg("-l")
        .arg(cache.path())
        .status();
    let err = refused(&out);
    assert!(err.contains("private Nix eval store"), "{err}");
    assert!(err.contains("is most likely full"), "{err}");
    assert!(err.contains("nix store gc --store"), "{err}");
    assert_eq!(p.objects().created(), 0);
}

#[test]
fn a_frozen_store_is_given_up_within_its_deadline_and_the_results_are_rescued() {
    let weed = Weed::start();
    let key = "frozen/nivis.state";
    let mut m = Machine::new(&weed, key, &tokens(300, "f"));
    m.project = m.project.with_object_log();
    let m = m
        .env("NIVIS_FAKE_SLOW_MS", "40")
        .env("NIVIS_STORE_DEADLINE", "10");
    let err_path = m.project.dir.path().join("apply.stderr");
    let mut run = m.spawn_apply_with(&[], std::fs::File::create(&err_path).unwrap().into());
    let client = weed.client();
    super::remote::wait_for(
        "results recorded remotely",
        std::time::Duration::from_secs(60),
        || {
            client
                .list(&format!("{key}.journal/"))
                .map(|k| k.len() >= 3)
                .unwrap_or(false)
        },
    );
    // A hung server, not a dead one: it accepts connections and never answers.
    let server = weed.info["pid"].as_i64().expect("the server's pid") as i32;
    assert_eq!(unsafe { libc::killpg(server, libc::SIGSTOP) }, 0);
    let frozen = std::time::Instant::now();
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if frozen.elapsed() > std::time::Duration::from_secs(90) {
            let _ = run.kill();
            unsafe { libc::killpg(server, libc::SIGCONT) };
            panic!("the run still waited 90 s after the store froze");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let took = frozen.elapsed();
    unsafe { libc::killpg(server, libc::SIGCONT) };
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(!status.success(), "{err}");
    assert!(
        took <= std::time::Duration::from_secs(10 + 10),
        "took {took:?} to give up a store frozen past its 10 s deadline: {err}"
    );
    assert!(err.contains("waiting for the state store"), "{err}");
    assert!(err.contains("callDeadline"), "{err}");
    let rescue = m.rescue_files();
    assert_eq!(rescue.len(), 1, "{rescue:?}: {err}");

    // The server answers again: the rescued results are recorded first, nothing duplicated.
    let m = m
        .env("NIVIS_FAKE_COUNTER", "100000")
        .env("NIVIS_FAKE_SLOW_MS", "0");
    let again = m.run(&["apply"], &["--auto-approve"]);
    assert_success(&again);
    assert!(m.rescue_files().is_empty(), "{}", stderr(&again));
    let pulled = m.pulled_from_bucket();
    assert_eq!(pulled.len(), 300);
    m.project.assert_remote_matches(&recorded_in(&pulled), &[]);
}

#[test]
fn a_deleted_lock_object_is_named_and_the_rescue_file_of_an_unmoved_state_is_replayed() {
    let weed = Weed::start();
    let key = "lock/deleted.state";
    let mut m = Machine::new(&weed, key, &tokens(300, "k"));
    m.project = m.project.with_object_log();
    let m = m.env("NIVIS_FAKE_SLOW_MS", "40");
    let err_path = m.project.dir.path().join("apply.stderr");
    let mut run = m.spawn_apply_with(&[], std::fs::File::create(&err_path).unwrap().into());
    let client = weed.client();
    super::remote::wait_for(
        "results recorded remotely",
        std::time::Duration::from_secs(60),
        || {
            client
                .list(&format!("{key}.journal/"))
                .map(|k| k.len() >= 3)
                .unwrap_or(false)
        },
    );
    // Paused, so that the delete lands between two of its checks; then only the lock goes.
    unsafe { libc::kill(run.id() as i32, libc::SIGSTOP) };
    client
        .delete(&format!("{key}.lock"), nivis::state::s3::Condition::Always)
        .unwrap();
    unsafe { libc::kill(run.id() as i32, libc::SIGCONT) };
    let status = run.wait().unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(!status.success(), "{err}");
    assert!(err.contains(&format!("{key}.lock was deleted")), "{err}");
    assert!(!err.contains("was forced open"), "{err}");

    // Nobody wrote since: the next run replays what the rescue file holds, no duplicate.
    let m = m
        .env("NIVIS_FAKE_COUNTER", "100000")
        .env("NIVIS_FAKE_SLOW_MS", "0");
    let again = m.run(&["apply"], &["--auto-approve"]);
    assert_success(&again);
    let pulled = m.pulled_from_bucket();
    assert_eq!(pulled.len(), 300, "{}", stderr(&again));
    m.project.assert_remote_matches(&recorded_in(&pulled), &[]);
    assert!(m.rescue_files().is_empty(), "{:?}", m.rescue_files());
}

#[test]
fn a_forced_push_that_drops_records_names_them_in_the_audit_log() {
    let p = Project::new(&tokens(2, "a")).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let kept = p.dir.path().join("older.json");
    std::fs::copy(&p.state, &kept).unwrap();
    assert_success(&p.run(&["apply"], &["--auto-approve", "--var", "n=3"]));
    let file = kept.display().to_string();
    let forced = ["state", "push", &file, "--force", "--drop-records", "1"];
    assert_success(&p.state_cmd(&forced));
    let log = succeeded(&p.state_cmd(&["log"]));
    let last = log.split("nivis state push").last().unwrap_or_default();
    assert!(last.contains("drop (state push)"), "{log}");
    assert!(!last.contains("(no changes)"), "{log}");
}

#[test]
fn a_second_ctrl_c_names_what_was_in_flight_and_the_lock_that_stays() {
    let weed = Weed::start();
    let key = "quit/nivis.state";
    let m = Machine::new(&weed, key, &tokens(4, "q"))
        .env("NIVIS_FAKE_SLOW_MS", "60000")
        .env("NIVIS_PROGRESS_INTERVAL", "0.2");
    let err_path = m.project.dir.path().join("apply.stderr");
    let mut run = m.spawn_apply_with(&[], std::fs::File::create(&err_path).unwrap().into());
    // Every create hangs in its provider: wait until all four are sent.
    super::remote::wait_for(
        "the creates sent",
        std::time::Duration::from_secs(60),
        || {
            std::fs::read_to_string(&err_path)
                .is_ok_and(|e| e.contains("still creating") || e.contains("Creating"))
                || weed
                    .client()
                    .get(&format!("{key}.lock"))
                    .is_ok_and(|l| l.is_some())
        },
    );
    std::thread::sleep(std::time::Duration::from_secs(4));
    let lock: serde_json::Value = serde_json::from_slice(
        &weed
            .client()
            .get(&format!("{key}.lock"))
            .unwrap()
            .expect("the lock is held")
            .body,
    )
    .unwrap();
    let lock_id = lock["id"].as_str().unwrap().to_string();
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    std::thread::sleep(std::time::Duration::from_millis(500));
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    let status = run.wait().unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("Quit at once: 4 operation(s) were in flight"),
        "{err}"
    );
    assert_eq!(
        last.matches("create alpha.alpha_token.t__").count(),
        4,
        "{last}"
    );
    assert!(last.contains(&format!("lock id {lock_id}")), "{last}");
    assert!(
        last.contains(&format!("nivis force-unlock {lock_id}")),
        "{last}"
    );
}

/// `state restore` on any backend: `state` runs a state verb, `apply` an apply with extra flags.
fn restore_behaves_the_same(
    state: &dyn Fn(&[&str]) -> std::process::Output,
    apply: &dyn Fn(&[&str]) -> std::process::Output,
) {
    assert_success(&apply(&["--auto-approve"]));
    assert_success(&apply(&["--auto-approve", "--var", "n=5"]));
    // The backup is the state before the second run: 3 records; restoring it leaves 2 out.
    let refused_restore = refused(&state(&["state", "restore"]));
    assert!(
        refused_restore.contains("leaves 2 record(s)"),
        "{refused_restore}"
    );
    assert!(
        refused_restore.contains("alpha.alpha_token.t__4"),
        "{refused_restore}"
    );
    let restored = succeeded(&state(&["state", "restore", "--drop-records", "2"]));
    assert!(restored.contains("3 resource(s)"), "{restored}");
    assert!(
        restored.contains("left 2 record(s) unrecorded"),
        "{restored}"
    );
    let listed = succeeded(&state(&["state", "list"]));
    assert_eq!(listed.lines().count(), 3, "{listed}");
    // The state it replaced is the backup now: restoring again undoes the restore.
    let undone = succeeded(&state(&["state", "restore"]));
    assert!(undone.contains("5 resource(s)"), "{undone}");
    assert!(
        undone.contains("Every record the state had is in it"),
        "{undone}"
    );
    let log = succeeded(&state(&["log"]));
    assert!(log.contains("drop (state restore)"), "{log}");
}

#[test]
fn state_restore_behaves_the_same_on_a_local_state() {
    let p = Project::new(&tokens(3, "s")).with_object_log();
    restore_behaves_the_same(&|args| p.state_cmd(args), &|extra| p.run(&["apply"], extra));
    // A lost state is restored without ado.
    std::fs::remove_file(&p.state).unwrap();
    assert!(refused(&p.state_cmd(&["state", "list"])).contains(LOST));
    assert_success(&p.state_cmd(&["state", "restore"]));
    assert_eq!(
        succeeded(&p.state_cmd(&["state", "list"])).lines().count(),
        3
    );
}

#[test]
fn state_restore_behaves_the_same_on_an_s3_state() {
    let weed = Weed::start();
    let m = Machine::new(&weed, "restore/nivis.state", &tokens(3, "s"));
    restore_behaves_the_same(&|args| m.cmd(args), &|extra| m.run(&["apply"], extra));
}
