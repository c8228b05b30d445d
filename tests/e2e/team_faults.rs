//! What teams do to a shared S3 state, against a real SeaweedFS server and the fakes' object
//! log: a writer paused while another machine forces its lock and applies, a lock kept for
//! results rescued on another machine, a rescue file whose lock was forced open since. Each
//! "machine" has its own project and rescue directory; the object log is shared, so orphans and
//! duplicates are counted across machines.

use std::time::Duration;

use serde_json::Value as Json;

use super::remote::{tokens, wait_for, Machine};
use super::weed::Weed;
use crate::util::*;

/// The lock object's record.
fn lock_record(weed: &Weed, key: &str) -> Json {
    let obj = weed.client().get(key).unwrap().expect("a lock object");
    serde_json::from_slice(&obj.body).unwrap()
}

/// The provider ids an error lists as `ADDRESS (id ID)`.
fn listed_ids(err: &str) -> Vec<String> {
    err.split("(id ")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_string)
        .collect()
}

#[test]
fn a_paused_writer_whose_lock_was_forced_open_stops_and_creates_nothing_more() {
    let weed = Weed::start();
    let mut m1 = Machine::new(&weed, "team/paused.state", &tokens(300, "p"));
    m1.project = m1.project.with_object_log();
    let log = m1.project.objects_path();
    let m1 = m1.env("NIVIS_FAKE_SLOW_MS", "40");
    let m2 = Machine::new(&weed, "team/paused.state", &tokens(300, "p"))
        .env("NIVIS_FAKE_OBJECT_LOG", &log)
        .env("NIVIS_FAKE_COUNTER", "100000");
    let err_path = m1.project.dir.path().join("m1.stderr");
    let err_file = std::fs::File::create(&err_path).unwrap();
    let mut run = m1.spawn_apply_with(&[], err_file.into());
    let client = weed.client();
    wait_for("results recorded remotely", Duration::from_secs(60), || {
        client
            .list("team/paused.state.journal/")
            .map(|k| k.len() >= 3)
            .unwrap_or(false)
    });
    // The laptop lid closes: m1 is frozen mid-apply.
    unsafe { libc::kill(run.id() as i32, libc::SIGSTOP) };
    let lock_id = lock_record(&weed, "team/paused.state.lock")["id"]
        .as_str()
        .unwrap()
        .to_string();
    // m2 is told to force the lock (the holder runs on this test's host, so --force).
    assert_success(&m2.cmd(&["force-unlock", &lock_id, "--force"]));
    // m1 noted each create before sending it (DESIGN §97): m2 names those in flight, plans
    // no create over them, and so changes nothing until they are resolved (below, once m1
    // has stopped: a create it was about to send may still leave). Before §97 m2 applied all
    // 300 at once and duplicated m1's in-flight objects; the test allowed that, now it cannot.
    let planned = m2.run(&["plan"], &["--json"]);
    assert!(!planned.status.success(), "{}", stderr(&planned));
    assert!(
        stdout(&planned).contains("was in flight when run"),
        "{}",
        stdout(&planned)
    );
    let before_resume = m1.project.objects().created();

    // The lid opens.
    unsafe { libc::kill(run.id() as i32, libc::SIGCONT) };
    let status = run.wait().unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(!status.success(), "the paused writer must fail: {err}");
    assert!(
        err.contains(&format!("lock {lock_id}")) && err.contains("was taken away"),
        "{err}"
    );
    assert!(!err.contains("run again"), "{err}");
    assert!(err.contains("nivis import"), "{err}");
    // Nothing was started after the pause: only the creates in flight at SIGSTOP ended.
    let after = m1.project.objects().created();
    assert!(
        after - before_resume <= 10,
        "m1 created {} objects after it resumed: {err}",
        after - before_resume
    );
    // What m2 recorded is alive; the only unrecorded objects are those in flight at the pause,
    // named by m1's error; their resources are the only ones with two objects. In flight means
    // up to `--parallelism` (10) creates at the provider plus the batch of results whose journal
    // write the pause interrupted: the scheduler dispatches the jobs that were ready before a
    // batch while that batch is written (DESIGN §85), so the bound is twice the parallelism.
    let listed = listed_ids(&err);
    let diff = m2.project.remote_vs(&recorded_in(&m2.pulled_from_bucket()));
    assert!(diff.phantoms.is_empty(), "{diff:?}");
    assert!(diff.orphans.len() <= 20, "{diff:?}");
    for (id, _) in &diff.orphans {
        assert!(listed.contains(id), "orphan {id} not named by m1: {err}");
    }
    assert!(
        diff.duplicated.is_empty(),
        "nothing was created twice: {diff:?}"
    );
    // Resolved as a user does (each orphan imported, the rest confirmed absent), m2's apply
    // completes with every object recorded once. The user looks again first: a journal segment
    // m1 was writing when it froze may have landed when it resumed (it is in the journal's
    // sequence, so m2 reads it), settling some of the operations the first plan named.
    let replanned = m2.run(&["plan"], &["--json"]);
    let (pending, imported) = resolve_pending(
        &replanned,
        &diff.orphans,
        |a| format!("p{}", a.trim_start_matches("alpha.alpha_token.t__")),
        |a, id| m2.run(&["import", a, id], &[]),
        |a| m2.cmd(&["state", "resolve", a, "--absent"]),
    );
    assert_eq!(
        imported,
        diff.orphans.len(),
        "every orphan was pending: {pending:?}"
    );
    assert_success(&m2.run(&["apply"], &["--auto-approve"]));
    assert_eq!(m2.ids().len(), 300);
    let after = m2.project.remote_vs(&recorded_in(&m2.pulled_from_bucket()));
    assert!(
        after.orphans.is_empty() && after.phantoms.is_empty() && after.duplicated.is_empty(),
        "{after:?}"
    );
    // m2's state is whole and its lock free: the next plan changes nothing.
    let plan = m2.run(&["plan"], &[]);
    assert_success(&plan);
    assert!(stdout(&plan).contains("No changes"), "{}", stdout(&plan));
    assert!(client.get("team/paused.state.lock").unwrap().is_none());
}

/// A lock record as another machine ("m1-laptop") leaves it: its holder cannot be checked from
/// here.
fn foreign_lock(id: &str, kept: Option<Json>) -> Vec<u8> {
    let mut record = serde_json::json!({
        "id": id, "pid": 4242, "host": "m1-laptop", "user": "alice",
        "command": "nivis apply", "since": 1_700_000_000u64, "version": "0.1.0",
    });
    if let Some(kept) = kept {
        record["kept"] = kept;
    }
    serde_json::to_vec(&record).unwrap()
}

#[test]
fn a_lock_kept_for_results_rescued_on_another_machine_says_so_and_is_not_forced_by_accident() {
    let weed = Weed::start();
    let m2 = Machine::new(&weed, "team/kept.state", &tokens(3, "k"));
    let client = weed.client();
    let key = "team/kept.state.lock";
    let file = "/home/alice/.local/state/nivis/rescue/nivis-e2e_team_kept.state-0123.rescue";
    let kept = serde_json::json!({ "host": "m1-laptop", "results": 7, "file": file });
    client
        .put(
            key,
            &foreign_lock("lock-m1", Some(kept)),
            nivis::state::s3::Condition::Always,
        )
        .unwrap();

    // m2 is told where the results are and what to do, not to force the lock.
    let refused = m2.run(&["apply"], &["--auto-approve"]);
    assert!(!refused.status.success());
    let err = stderr(&refused);
    for needle in [
        "kept for 7 rescued result(s) on host m1-laptop",
        file,
        "run the command again on m1-laptop",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from: {err}");
    }
    assert!(!err.contains("if that process is gone"), "{err}");

    // force-unlock refuses without --force, with no terminal too, naming the host.
    let forced = m2.cmd(&["force-unlock", "lock-m1"]);
    assert!(!forced.status.success(), "{}", stdout(&forced));
    assert!(
        stderr(&forced).contains("m1-laptop") && stderr(&forced).contains("--force"),
        "{}",
        stderr(&forced)
    );
    assert!(client.get(key).unwrap().is_some(), "the lock stays");

    // A plain lock of another host: the locked message says to check that host first, and
    // force-unlock without a terminal needs --force.
    client
        .put(
            key,
            &foreign_lock("lock-m1b", None),
            nivis::state::s3::Condition::Always,
        )
        .unwrap();
    let locked = m2.run(&["apply"], &["--auto-approve"]);
    assert!(
        stderr(&locked).contains("after checking host m1-laptop"),
        "{}",
        stderr(&locked)
    );
    let refused = m2.cmd(&["force-unlock", "lock-m1b"]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("on another host"),
        "{}",
        stderr(&refused)
    );
    assert!(client.get(key).unwrap().is_some(), "the lock stays");
    assert_success(&m2.cmd(&["force-unlock", "lock-m1b", "--force"]));
    assert!(client.get(key).unwrap().is_none());
    assert_success(&m2.run(&["apply"], &["--auto-approve"]));
}

#[test]
fn a_local_state_directory_moved_mid_apply_stops_the_run_and_names_what_is_unrecorded() {
    // The records the run held are saved in the spare place (DESIGN §94): a private one.
    let rescue = tempfile::tempdir().unwrap();
    let mut p = Project::new(&tokens(300, "l"))
        .env("NIVIS_FAKE_SLOW_MS", "40")
        .env("NIVIS_RESCUE_DIR", &rescue.path().display().to_string());
    p = p.with_object_log();
    let dir = p.dir.path().join("st");
    std::fs::create_dir(&dir).unwrap();
    let state = dir.join("nivis.state.json");
    let err_path = p.dir.path().join("apply.stderr");
    let mut run = std::process::Command::new(nivis_bin())
        .args(["apply", "--auto-approve", "--file"])
        .arg(&p.plan)
        .arg("--state")
        .arg(&state)
        .current_dir(p.dir.path())
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let journal = dir.join("nivis.state.json.journal");
    wait_for("results recorded", Duration::from_secs(60), || {
        std::fs::read_to_string(&journal).is_ok_and(|j| j.lines().count() >= 3)
    });
    let moved = p.dir.path().join("st.moved");
    std::fs::rename(&dir, &moved).unwrap();
    let status = run.wait().unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(
        !status.success(),
        "a run whose state moved away must fail: {err}"
    );
    assert!(err.contains("removed or moved"), "{err}");
    assert!(!err.contains("run again"), "{err}");
    // What the moved state records plus what the error lists is everything alive, once.
    let recorded =
        recorded_in(&nivis::state::Store::read_only(moved.join("nivis.state.json")).unwrap());
    p.assert_remote_matches(&recorded, &listed_ids(&err));
    assert!(p.objects().created() < 300, "dispatch stopped");
}

#[test]
fn state_objects_vanishing_mid_apply_stop_the_run_and_name_what_is_unrecorded() {
    let weed = Weed::start();
    let key = "team/vanish.state";
    let mut m = Machine::new(&weed, key, &tokens(1, "v"));
    m.project = m.project.with_object_log();
    assert_success(&m.run(&["apply"], &["--auto-approve"]));
    m.project.set_plan(&tokens(300, "v"));
    // Each run's fake numbers its objects from its own seed, so ids never repeat across runs.
    let m = m
        .env("NIVIS_FAKE_SLOW_MS", "40")
        .env("NIVIS_FAKE_COUNTER", "1000");
    let err_path = m.project.dir.path().join("apply.stderr");
    let mut run = m.spawn_apply_with(&[], std::fs::File::create(&err_path).unwrap().into());
    let client = weed.client();
    let journal = format!("{key}.journal/");
    // Segments this run wrote: the first apply's stay behind its snapshot, and since each
    // create is noted before it is sent (DESIGN §97) they alone can reach 3, which must not
    // let the deletion below come before this run has even read the state.
    let earlier = client.list(&journal).unwrap().len();
    wait_for("results recorded remotely", Duration::from_secs(60), || {
        (client.list(&journal)).is_ok_and(|k| k.len() >= earlier + 3)
    });
    // A lifecycle rule or a mistaken `aws s3 rm`: snapshot and journal go, the lock stays.
    let lock = format!("{key}.lock");
    for name in client.list(key).unwrap() {
        if name != lock {
            client
                .delete(&name, nivis::state::s3::Condition::Always)
                .unwrap();
        }
    }
    let status = run.wait().unwrap();
    let err = std::fs::read_to_string(&err_path).unwrap();
    assert!(
        !status.success(),
        "a run whose state vanished must fail: {err}"
    );
    assert!(err.contains("vanished"), "{err}");
    assert!(!err.contains("run again"), "{err}");
    assert!(err.contains("wrote its whole state"), "{err}");
    // Found mid-apply (within a few commits), not at the close: dispatch stopped.
    assert!(
        m.project.objects().created() < 300,
        "{} created: {err}",
        m.project.objects().created()
    );
    // Written back: the next run finds everything, creates nothing twice.
    let m = m.env("NIVIS_FAKE_COUNTER", "100000");
    let again = m.run(&["apply"], &["--auto-approve"]);
    assert_success(&again);
    let diff = m.project.remote_vs(&recorded_in(&m.pulled_from_bucket()));
    assert!(
        diff.orphans.is_empty() && diff.phantoms.is_empty(),
        "{diff:?}"
    );
    assert!(diff.duplicated.is_empty(), "{diff:?}");
    assert_eq!(m.ids().len(), 300);
}

/// Stops (or resumes) every process of the SeaweedFS server: a hung server, not a dead one.
fn freeze_server(weed: &Weed, signal: libc::c_int) {
    let pid = weed.info["pid"].as_i64().expect("the server's pid") as i32;
    // The harness starts the server as a process group of its own.
    assert_eq!(unsafe { libc::killpg(pid, signal) }, 0, "signal the server");
}

#[test]
fn a_hung_s3_server_yields_to_the_first_ctrl_c_and_the_waiting_results_are_rescued() {
    let weed = Weed::start();
    let key = "team/hung.state";
    let mut m = Machine::new(&weed, key, &tokens(300, "h"));
    m.project = m.project.with_object_log();
    let m = m
        .env("NIVIS_FAKE_SLOW_MS", "40")
        .env("NIVIS_PROGRESS_INTERVAL", "0.5");
    let out_path = m.project.dir.path().join("apply.stdout");
    let err_path = m.project.dir.path().join("apply.stderr");
    let mut cmd = std::process::Command::new(nivis_bin());
    cmd.args(["apply", "--auto-approve", "--file"])
        .arg(&m.project.plan)
        .args(weed.flags(key))
        .current_dir(m.project.dir.path())
        .env("NO_COLOR", "1")
        .envs(m.project.env.iter().map(|(k, v)| (k, v)))
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap());
    let mut run = cmd.spawn().unwrap();
    let client = weed.client();
    wait_for("results recorded remotely", Duration::from_secs(60), || {
        client
            .list(&format!("{key}.journal/"))
            .map(|k| k.len() >= 3)
            .unwrap_or(false)
    });
    freeze_server(&weed, libc::SIGSTOP);
    // The state write hangs; the progress lines say so rather than blame the provider.
    std::thread::sleep(Duration::from_secs(3));
    let interrupted = std::time::Instant::now();
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    let status = loop {
        if let Some(status) = run.try_wait().unwrap() {
            break status;
        }
        if interrupted.elapsed() > Duration::from_secs(30) {
            let _ = run.kill();
            freeze_server(&weed, libc::SIGCONT);
            panic!("the run was still waiting 30 s after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let took = interrupted.elapsed();
    freeze_server(&weed, libc::SIGCONT);
    let err = std::fs::read_to_string(&err_path).unwrap();
    let out = std::fs::read_to_string(&out_path).unwrap();
    assert!(
        took < Duration::from_secs(8),
        "took {took:?} after Ctrl-C: {err}"
    );
    assert_eq!(status.code(), Some(130), "{err}");
    let rescue = m.rescue_files();
    assert_eq!(rescue.len(), 1, "{rescue:?}: {err}");
    assert!(err.contains(&rescue[0].display().to_string()), "{err}");
    assert!(!err.contains("then run again"), "{err}");
    assert!(
        out.lines().any(
            |l| l.contains("recording alpha.alpha_token.t__") && l.contains(" in the state… (")
        ),
        "{out}"
    );

    // The server answers again: the next run records the rescued results first; one object
    // per resource, nothing orphaned.
    let m = m
        .env("NIVIS_FAKE_COUNTER", "100000")
        .env("NIVIS_FAKE_SLOW_MS", "0");
    let again = m.run(&["apply"], &["--auto-approve"]);
    assert_success(&again);
    assert!(m.rescue_files().is_empty(), "{}", stderr(&again));
    let pulled = m.pulled_from_bucket();
    assert_eq!(pulled.len(), 300);
    m.project.assert_remote_matches(&recorded_in(&pulled), &[]);
    assert_eq!(m.project.objects().live().len(), 300);
}

#[test]
fn state_repair_salvages_a_journal_missing_a_middle_segment() {
    let weed = Weed::start();
    let key = "team/repair.state";
    let m = Machine::new(&weed, key, &tokens(300, "g")).env("NIVIS_FAKE_SLOW_MS", "40");
    let mut run = m.spawn_apply_with(&[], std::process::Stdio::null());
    let client = weed.client();
    let journal = format!("{key}.journal/");
    wait_for("segments written", Duration::from_secs(60), || {
        client.list(&journal).map(|k| k.len() >= 6).unwrap_or(false)
    });
    // The writer dies before it folds its journal into a snapshot; then a middle segment goes.
    run.kill().unwrap();
    run.wait().unwrap();
    let names = client.list(&journal).unwrap();
    let namespace = names
        .last()
        .unwrap()
        .rsplit_once('/')
        .unwrap()
        .0
        .to_string();
    let segments: Vec<&String> = names.iter().filter(|n| n.starts_with(&namespace)).collect();
    assert!(segments.len() >= 4, "{segments:?}");
    let missing = segments[2].clone();
    client
        .delete(&missing, nivis::state::s3::Condition::Always)
        .unwrap();
    let lock_id = lock_record(&weed, &format!("{key}.lock"))["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_success(&m.cmd(&["force-unlock", &lock_id, "--force"]));
    let broken = m.run(&["plan"], &[]);
    assert!(!broken.status.success(), "{}", stdout(&broken));

    // The dry run names the gap and what is lost after it, and changes nothing.
    let dry = m.cmd(&["state", "repair", "--dry-run"]);
    assert_success(&dry);
    let text = stdout(&dry);
    assert!(
        text.contains("Would repair")
            && text.contains(&missing)
            && text.contains("Nothing was changed"),
        "{text}"
    );
    assert_eq!(client.list(&journal).unwrap().len(), names.len() - 1);

    let done = m.cmd(&["state", "repair"]);
    assert_success(&done);
    let text = stdout(&done);
    assert!(
        text.contains("Repaired") && text.contains(&missing),
        "{text}"
    );
    assert!(
        text.contains("alpha.alpha_token.t__"),
        "lost addresses named: {text}"
    );
    // The broken journal is kept aside; the state reads again, with the records before the gap.
    let aside = client.list(&format!("{key}.repair/")).unwrap();
    assert_eq!(aside.len(), segments.len() - 1, "{aside:?}");
    let kept = m.ids().len();
    assert!(kept > 0 && kept < 300, "{kept} kept");
    // The state reads again. The creates noted before the gap (DESIGN §97) whose results were
    // in the lost segments or never came are pending: the plan names each and plans no create
    // over it (before §97 it planned them as new, duplicating what the lost records held).
    let plan = m.run(&["plan"], &[]);
    let err = stderr(&plan);
    let refused: Vec<&str> = err.lines().filter(|l| l.starts_with("Error [")).collect();
    assert!(
        refused.iter().all(|l| l.contains("was in flight when run")),
        "only pending operations stop the plan: {err}"
    );
    assert_eq!(plan.status.success(), refused.is_empty(), "{err}");
    assert!(client.get(&format!("{key}.lock")).unwrap().is_none());
}
