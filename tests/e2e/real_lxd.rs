//! Real infrastructure: running busybox containers and what surrounds them, through the real
//! terraform-provider-lxd 1.5.0 (tfplugin5, SDKv2) and a real LXD 5.0 daemon that
//! tests/lxd.py starts offline in network and mount namespaces of its own (issue 45).
//!
//! One scenario (tests/lxd/scenario.nix) of ten objects — a storage pool, three volumes, a
//! bridge network, two profiles, two running containers, a snapshot — with references Nivis
//! resolves and a profile whose config Nix computes from a container's `status` and the
//! snapshot's `created_at` (a second phase). Then: no false drift right after the apply, an in-place
//! update, a forced replacement, drift made with `lxc` (a profile's config changed, a volume
//! deleted) that the plan sees and the apply puts back, the import of an `lxc`-made profile,
//! a rename with `lib.moved`, a kill -9 of Nivis mid-create and the convergence after it, and
//! a destroy that leaves nothing. Every step is checked in what LXD says (`lxc … --format
//! json`), not only in what Nivis says.
//!
//! The daemon is started by the test itself, as the SeaweedFS tests start theirs: a machine
//! without `lxd`, `lxc` or busybox-static fails here saying what to install, never skips.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::util::*;

/// A daemon of its own, stopped (containers and all) on drop.
pub(super) struct Lxd {
    dir: tempfile::TempDir,
    /// What `tests/lxd.py start` printed: `socket`, `lxdDir`, `image`, ...
    pub info: Json,
}

impl Lxd {
    pub(super) fn start() -> Lxd {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = Lxd::harness(&["start", "--dir", &dir.path().display().to_string()]);
        assert!(
            out.status.success(),
            "tests/lxd.py could not start LXD ({}): {}\nThe real-LXD tests need Debian's lxd, \
             lxd-client and busybox-static: run `bash scripts/install.sh` (or `apt-get install \
             lxd lxd-client busybox-static`).",
            out.status,
            stderr(&out)
        );
        let info = serde_json::from_slice(&out.stdout).expect("tests/lxd.py printed JSON");
        Lxd { dir, info }
    }

    fn harness(args: &[&str]) -> Output {
        Command::new("python3")
            .arg(repo().join("tests/lxd.py"))
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("run tests/lxd.py")
    }

    /// The daemon's unix socket, for the provider's `lxd_remote`.
    pub(super) fn socket(&self) -> String {
        self.info["socket"].as_str().unwrap().to_string()
    }

    /// An empty directory the test may hand to LXD (a `dir` storage pool's source, which must
    /// exist).
    pub(super) fn scratch(&self, name: &str) -> String {
        let dir = self.dir.path().join(name);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir.display().to_string()
    }

    /// Runs `lxc ARGS` against this daemon.
    pub(super) fn lxc(&self, args: &[&str]) -> Output {
        Command::new("lxc")
            .args(args)
            .env("LXD_DIR", self.info["lxdDir"].as_str().unwrap())
            .stdin(Stdio::null())
            .output()
            .expect("run lxc (apt-get install lxd-client)")
    }

    /// `lxc ARGS --format json`, parsed.
    pub(super) fn json(&self, args: &[&str]) -> Json {
        let mut all = args.to_vec();
        all.extend(["--format", "json"]);
        let out = self.lxc(&all);
        assert_success(&out);
        serde_json::from_slice(&out.stdout).expect("lxc printed JSON")
    }

    /// `lxc query PATH`: the REST object itself.
    pub(super) fn query(&self, path: &str) -> Json {
        let out = self.lxc(&["query", path]);
        assert_success(&out);
        serde_json::from_slice(&out.stdout).expect("lxc query printed JSON")
    }

    /// The names in a `lxc … list --format json` answer.
    pub(super) fn names(&self, args: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = self
            .json(args)
            .as_array()
            .expect("a list")
            .iter()
            .map(|o| o["name"].as_str().unwrap_or_default().to_string())
            .collect();
        names.sort();
        names
    }

    /// Names of the custom volumes of `pool`.
    pub(super) fn volumes(&self, pool: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .json(&["storage", "volume", "list", pool])
            .as_array()
            .expect("a list")
            .iter()
            .filter(|v| v["type"] == "custom")
            .map(|v| v["name"].as_str().unwrap_or_default().to_string())
            .collect();
        names.sort();
        names
    }

    /// Instance name -> status (`Running`, `Stopped`).
    pub(super) fn instances(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = self
            .json(&["list"])
            .as_array()
            .expect("a list")
            .iter()
            .map(|i| {
                (
                    i["name"].as_str().unwrap_or_default().to_string(),
                    i["status"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect();
        out.sort();
        out
    }
}

impl Drop for Lxd {
    fn drop(&mut self) {
        let out = Lxd::harness(&["stop", "--dir", &self.dir.path().display().to_string()]);
        if !out.status.success() {
            eprintln!("tests/lxd.py stop failed: {}", stderr(&out));
        }
    }
}

/// What changes between the scenario's steps.
#[derive(Clone)]
struct Step {
    /// The `base` profile's `user.role` (changed in place).
    role: &'static str,
    /// The LXD name of the `cache` volume (a new name forces replacement).
    cache: &'static str,
    /// Whether the `logs` volume is declared as `journal`, moved there with `lib.moved`.
    renamed: bool,
    /// Whether the lxc-made `imported` profile is declared.
    imported: bool,
    /// Whether the `late` container is declared.
    late: bool,
}

const FIRST: Step = Step {
    role: "web",
    cache: "cache",
    renamed: false,
    imported: false,
    late: false,
};

/// The scenario's plan (tests/lxd/scenario.nix) for `step`, talking to the daemon at `socket`
/// with the provider binary at `provider`.
fn scenario(provider: &str, socket: &str, pool_dir: &str, step: &Step) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap().replace("${", "\\${");
    format!(
        "import {} {{ inherit lib; provider = {}; socket = {}; poolDir = {}; \
         step = {{ role = {}; cache = {}; renamed = {}; imported = {}; late = {}; }}; }}",
        repo().join("tests/lxd/scenario.nix").display(),
        q(provider),
        q(socket),
        q(pool_dir),
        q(step.role),
        q(step.cache),
        step.renamed,
        step.imported,
        step.late
    )
}

/// The scenario's project, with a step-setter.
struct Scenario {
    project: Project,
    provider: String,
    socket: String,
    pool_dir: String,
}

impl Scenario {
    fn set(&self, step: &Step) {
        self.project.set_plan(&scenario(
            &self.provider,
            &self.socket,
            &self.pool_dir,
            step,
        ));
    }

    fn run(&self, verb: &[&str], extra: &[&str]) -> Output {
        self.project.run(verb, extra)
    }

    /// `plan --detailed-exitcode`'s status, with its output for failures.
    fn plan_exit(&self) -> (i32, String) {
        let out = self.run(&["plan"], &["--detailed-exitcode"]);
        (
            out.status.code().unwrap_or(-1),
            format!("{}{}", stdout(&out), stderr(&out)),
        )
    }

    fn apply(&self) -> Output {
        let out = self.run(&["apply"], &["--auto-approve"]);
        assert_success(&out);
        out
    }
}

#[test]
fn real_lxd_containers_round_trip() {
    let lxd = Lxd::start();
    let provider = real_provider("lxd").display().to_string();
    let pool_dir = lxd.scratch("pool-extra");
    let s = Scenario {
        project: Project::new(&scenario(&provider, &lxd.socket(), &pool_dir, &FIRST)),
        provider,
        socket: lxd.socket(),
        pool_dir,
    };

    // 1. Create: ten objects across two phases.
    let out = s.apply();
    assert!(
        stdout(&out).contains("Applied 10 resource(s) across 2 phase(s)"),
        "{}",
        stdout(&out)
    );
    let running = |n: &str| (n.to_string(), "Running".to_string());
    assert_eq!(lxd.instances(), vec![running("web"), running("worker")]);
    assert_eq!(lxd.volumes("extra"), ["data", "logs"]);
    assert_eq!(lxd.volumes("default"), ["cache"]);
    assert!(lxd
        .names(&["network", "list"])
        .contains(&"nivisbr0".to_string()));
    let web = lxd.query("/1.0/instances/web");
    assert_eq!(web["devices"]["data"]["source"], "data");
    assert_eq!(web["profiles"], serde_json::json!(["default", "base"]));
    // The Nix round trip: what LXD says of the container and its snapshot, through Nix, into
    // another object's config.
    let snapshot = lxd.query("/1.0/instances/web/snapshots/first");
    let observed = lxd.query("/1.0/profiles/observed");
    assert_eq!(observed["config"]["user.web-status"], "Running");
    let outputs = s.project.outputs();
    let taken = outputs["lxd.lxd_snapshot.first"]["created_at"]
        .as_str()
        .expect("created_at")
        .to_string();
    assert_eq!(observed["config"]["user.snapshot-taken"], taken.as_str());
    assert_eq!(
        snapshot["created_at"],
        go_time_as_rfc3339(&taken).as_str(),
        "the snapshot's time, as LXD and as the provider say it"
    );

    // 2. No false drift right after a clean apply (issue 45 defect 1).
    let (code, text) = s.plan_exit();
    assert_eq!(code, 0, "{text}");

    // 3. An in-place update and a forced replacement.
    let second = Step {
        role: "db",
        cache: "cache2",
        ..FIRST
    };
    s.set(&second);
    let out = s.run(&["plan"], &[]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("~ lxd.lxd_profile.base"), "{text}");
    assert!(text.contains("-/+ lxd.lxd_volume.cache"), "{text}");
    s.apply();
    assert_eq!(lxd.query("/1.0/profiles/base")["config"]["user.role"], "db");
    assert_eq!(lxd.volumes("default"), ["cache2"]);
    let (code, text) = s.plan_exit();
    assert_eq!(code, 0, "{text}");

    // 4. Drift made with lxc: a profile's config changed (planned back: exit 2) and a volume
    // deleted. terraform-provider-lxd 1.5.0 recognises "not found" only in LXD 3's words: with
    // LXD 5.0 its read of a deleted object fails ("Storage pool volume not found") instead of
    // reporting it gone, with Nivis as with Terraform. The plan names the resource and changes
    // nothing; what a user does then is forget the record, and the apply creates it again.
    assert_success(&lxd.lxc(&["profile", "set", "base", "user.role", "changed-by-hand"]));
    let (code, text) = s.plan_exit();
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("lxd.lxd_profile.base changed outside Nivis"),
        "{text}"
    );
    assert_success(&lxd.lxc(&["storage", "volume", "delete", "default", "cache2"]));
    let (code, text) = s.plan_exit();
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("lxd.lxd_volume.cache") && text.contains("not found"),
        "{text}"
    );
    assert_success(
        &s.project
            .state_cmd(&["state", "rm", "lxd.lxd_volume.cache"]),
    );
    let (code, text) = s.plan_exit();
    assert_eq!(code, 2, "{text}");
    s.apply();
    assert_eq!(lxd.query("/1.0/profiles/base")["config"]["user.role"], "db");
    assert_eq!(lxd.volumes("default"), ["cache2"]);
    let (code, text) = s.plan_exit();
    assert_eq!(code, 0, "{text}");

    // 5. Import of a profile made with lxc.
    assert_success(&lxd.lxc(&["profile", "create", "imported"]));
    assert_success(&lxd.lxc(&["profile", "set", "imported", "user.origin", "lxc"]));
    let third = Step {
        imported: true,
        ..second.clone()
    };
    s.set(&third);
    assert_success(&s.run(&["import"], &["lxd.lxd_profile.imported", "imported"]));
    let (code, text) = s.plan_exit();
    assert_eq!(
        code, 0,
        "the imported profile matches its declaration: {text}"
    );

    // 6. A rename with lib.moved: state only, the LXD volume is the same one.
    let before = lxd.query("/1.0/storage-pools/extra/volumes/custom/logs");
    let fourth = Step {
        renamed: true,
        ..third.clone()
    };
    s.set(&fourth);
    let out = s.run(&["plan"], &["--detailed-exitcode"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("Plan: 1 to move"),
        "only a move: {}",
        stdout(&out)
    );
    s.apply();
    let listed = stdout(&s.project.state_cmd(&["state", "list"]));
    assert!(listed.contains("lxd.lxd_volume.journal"), "{listed}");
    assert!(!listed.contains("lxd.lxd_volume.logs"), "{listed}");
    let after = lxd.query("/1.0/storage-pools/extra/volumes/custom/logs");
    assert_eq!(before["used_by"], after["used_by"]);
    let (code, text) = s.plan_exit();
    assert_eq!(code, 0, "{text}");

    // 7. kill -9 of Nivis while it creates a container, then convergence.
    let fifth = Step {
        late: true,
        ..fourth.clone()
    };
    s.set(&fifth);
    kill_mid_create(&s, &lxd);
    converge_after_kill(&s, &lxd);

    // 8. Destroy leaves nothing.
    let out = s.run(&["destroy"], &["--auto-approve"]);
    assert_success(&out);
    assert_eq!(lxd.instances(), Vec::<(String, String)>::new());
    assert_eq!(lxd.names(&["profile", "list"]), ["default"]);
    assert_eq!(lxd.volumes("default"), Vec::<String>::new());
    assert!(!lxd
        .names(&["storage", "list"])
        .contains(&"extra".to_string()));
    assert!(!lxd
        .names(&["network", "list"])
        .contains(&"nivisbr0".to_string()));
    assert_eq!(stdout(&s.project.state_cmd(&["state", "list"])).trim(), "");
    s.project.assert_no_leftover_processes();
}

/// Starts an apply that creates `late` and kills Nivis with SIGKILL once LXD has the
/// container; waits for the provider it started to go too.
fn kill_mid_create(s: &Scenario, lxd: &Lxd) {
    let mut child = s.project.spawn_apply(&[]);
    let started = Instant::now();
    while !lxd.instances().iter().any(|(name, _)| name == "late") {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the apply never created late"
        );
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the apply ended ({status}) before LXD had late");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The provider outlives its parent for as long as its call takes; then it is gone.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !processes_with_marker(&s.project.marker()).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// After a kill -9 mid-create LXD has a container the state does not know (stopped, when the
/// provider died between creating and starting it). The create was noted as pending before it
/// was sent (DESIGN §97): the next plan names it first and plans no plain create over it (the
/// apply used to fail with LXD's "already exists", as Terraform's does). The user imports it
/// (the provider then sees nothing to change, since `status` is computed and it never starts
/// an existing container) and replaces it to get the container the plan declares, running.
fn converge_after_kill(s: &Scenario, lxd: &Lxd) {
    let plan = s.run(&["plan"], &[]);
    let text = format!("{}{}", stdout(&plan), stderr(&plan));
    assert!(!plan.status.success(), "{text}");
    assert!(
        text.contains("a create of lxd.lxd_container.late was in flight when run "),
        "{text}"
    );
    assert!(
        !text.contains("already exists"),
        "no create was sent: {text}"
    );
    // The provider's import id for a container is NAME/IMAGE (LXD does not say which image a
    // container came from).
    assert_success(&s.run(&["import"], &["lxd.lxd_container.late", "late/busybox"]));
    let late = || lxd.instances().into_iter().find(|(n, _)| n == "late");
    if late().is_some_and(|(_, status)| status != "Running") {
        let out = s.run(
            &["apply"],
            &["--auto-approve", "--replace", "lxd.lxd_container.late"],
        );
        assert_success(&out);
    } else {
        // Killed after the start: the import records the running container without the
        // configuration-only arguments (`start_container`, ...), which one apply sets.
        assert_success(&s.run(&["apply"], &["--auto-approve"]));
    }
    assert_eq!(late(), Some(("late".to_string(), "Running".to_string())));
    let (code, text) = s.plan_exit();
    assert_eq!(code, 0, "{text}");
}

/// A time as the provider prints it (Go's `time.String`: `2026-11-28 16:14:54.084444588 +0000
/// UTC`) in RFC 3339, as LXD prints it (`2026-11-28T16:14:54.084444588Z`); both trim trailing
/// zeros of the fraction the same way.
fn go_time_as_rfc3339(go: &str) -> String {
    let utc = go.strip_suffix(" +0000 UTC").unwrap_or(go);
    format!("{}Z", utc.replacen(' ', "T", 1))
}
