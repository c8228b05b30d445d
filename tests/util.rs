//! Shared helpers for the integration tests: temporary projects, running the built binaries,
//! fetching the real providers.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value as Json;

/// The repository root.
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built `nivis` binary.
pub(crate) fn nivis_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nivis"))
}

/// A temporary project: a Nix plan file and a state file.
pub(crate) struct Project {
    pub dir: tempfile::TempDir,
    pub plan: PathBuf,
    pub state: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Project {
    /// A project whose plan file has `lib` (the Nivis library) in scope; `body` must evaluate
    /// to a function `ledger: IR`.
    pub(crate) fn new(body: &str) -> Project {
        let dir = tempfile::tempdir().expect("temp dir");
        let plan = dir.path().join("plan.nix");
        let text = format!("let lib = import {}/nix; in\n{body}\n", repo().display());
        std::fs::write(&plan, text).expect("write plan");
        let state = dir.path().join("nivis.state.json");
        let marker = dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        Project {
            dir,
            plan,
            state,
            env: vec![("NIVIS_TEST_MARKER".into(), marker)],
        }
    }

    /// The headline two-provider example.
    pub(crate) fn two_providers(cycle: bool) -> Project {
        Project::new(&format!(
            "import {}/nix/examples/two-providers.nix {{ inherit lib; cycle = {cycle}; }}",
            repo().display()
        ))
    }

    /// The marker every process started for this project carries in its environment.
    pub(crate) fn marker(&self) -> String {
        self.env[0].1.clone()
    }

    /// Asserts no process started for this project is still alive.
    pub(crate) fn assert_no_leftover_processes(&self) {
        let mut left = processes_with_marker(&self.marker());
        for _ in 0..50 {
            if left.is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
            left = processes_with_marker(&self.marker());
        }
        panic!("processes left behind: {left:?}");
    }

    /// Replaces the plan body.
    pub(crate) fn set_plan(&self, body: &str) {
        let text = format!("let lib = import {}/nix; in\n{body}\n", repo().display());
        std::fs::write(&self.plan, text).expect("write plan");
    }

    /// Adds an environment variable for every later command.
    pub(crate) fn env(mut self, k: &str, v: &str) -> Project {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Makes the fake providers log every object they create or delete (see
    /// [`Project::objects`]).
    pub(crate) fn with_object_log(self) -> Project {
        let log = self.dir.path().join("objects.log");
        let log = log.to_str().expect("UTF-8 temp path").to_string();
        self.env("NIVIS_FAKE_OBJECT_LOG", &log)
    }

    /// The fakes' object log file (needs [`Project::with_object_log`]).
    pub(crate) fn objects_path(&self) -> String {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == "NIVIS_FAKE_OBJECT_LOG")
            .map(|(_, v)| v.clone())
            .expect("the project was made with_object_log()")
    }

    /// What exists "remotely": the fakes' object log (needs [`Project::with_object_log`]).
    pub(crate) fn objects(&self) -> ObjectLog {
        ObjectLog::read(std::path::Path::new(&self.objects_path()))
    }

    /// The remote identities of every object the local state records (current and deposed),
    /// read through the store as the next command would (journal and rescue file included).
    pub(crate) fn recorded_objects(&self) -> BTreeMap<String, String> {
        let state = nivis::state::Store::read_only(&self.state).expect("state readable");
        recorded_in(&state)
    }

    /// Compares what exists remotely (the object log) with what the local state records.
    pub(crate) fn remote_vs_state(&self) -> RemoteDiff {
        self.remote_vs(&self.recorded_objects())
    }

    /// Compares what exists remotely (the object log) with `recorded` (see [`recorded_in`]).
    pub(crate) fn remote_vs(&self, recorded: &BTreeMap<String, String>) -> RemoteDiff {
        let live = self.objects().live();
        let orphans = live
            .iter()
            .filter(|(id, _)| !recorded.contains_key(*id))
            .map(|(id, label)| (id.clone(), label.clone()))
            .collect();
        let phantoms = recorded
            .keys()
            .filter(|id| !live.contains_key(*id))
            .cloned()
            .collect();
        let mut per_label: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, label) in &live {
            per_label.entry(label.clone()).or_default().push(id.clone());
        }
        per_label.retain(|_, ids| ids.len() > 1);
        RemoteDiff {
            orphans,
            phantoms,
            duplicated: per_label,
        }
    }

    /// The fault tests' assertion: every object alive remotely is recorded in state, except
    /// the ones `unrecorded` names (provider ids an error listed); every recorded object is
    /// alive; and no resource has two live objects (nothing was created twice).
    pub(crate) fn assert_remote_matches_state(&self, unrecorded: &[String]) {
        self.assert_remote_matches(&self.recorded_objects(), unrecorded)
    }

    /// [`Project::assert_remote_matches_state`] against `recorded` (see [`recorded_in`]), for a
    /// state kept elsewhere.
    pub(crate) fn assert_remote_matches(
        &self,
        recorded: &BTreeMap<String, String>,
        unrecorded: &[String],
    ) {
        let diff = self.remote_vs(recorded);
        let unlisted: Vec<&(String, String)> = diff
            .orphans
            .iter()
            .filter(|(id, _)| !unrecorded.contains(id))
            .collect();
        assert!(
            unlisted.is_empty() && diff.phantoms.is_empty() && diff.duplicated.is_empty(),
            "remote objects and state disagree:\n  alive but neither recorded nor listed \
             (id, label): {unlisted:?}\n  recorded but not alive: {:?}\n  resources with \
             more than one live object: {:?}",
            diff.phantoms,
            diff.duplicated
        );
    }

    /// Runs `nivis VERB --file plan.nix --state STATE EXTRA...` (validate, which reads no
    /// state and refuses --state, without it).
    pub(crate) fn run(&self, verb: &[&str], extra: &[&str]) -> Output {
        let mut cmd = Command::new(nivis_bin());
        cmd.args(verb).arg("--file").arg(&self.plan);
        if verb != ["validate"] {
            cmd.arg("--state").arg(&self.state);
        }
        cmd.args(extra);
        self.finish(cmd)
    }

    /// Starts `nivis apply --auto-approve EXTRA...` in the background with this project's
    /// environment, its output discarded.
    pub(crate) fn spawn_apply(&self, extra: &[&str]) -> std::process::Child {
        Command::new(nivis_bin())
            .args(["apply", "--auto-approve", "--file"])
            .arg(&self.plan)
            .arg("--state")
            .arg(&self.state)
            .args(extra)
            .current_dir(self.dir.path())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn nivis")
    }

    /// Waits (up to 30 s) until a process holds this project's state lock and has recorded
    /// itself in it.
    pub(crate) fn wait_for_lock(&self) {
        let lock = self.state.with_extension("json.lock");
        let started = std::time::Instant::now();
        while std::fs::read_to_string(&lock).map_or(true, |s| s.is_empty())
            && started.elapsed() < std::time::Duration::from_secs(30)
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Runs a state subcommand (`state list`, `output`, ...) against this project's state.
    pub(crate) fn state_cmd(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(nivis_bin());
        cmd.args(args).arg("--state").arg(&self.state);
        self.finish(cmd)
    }

    fn finish(&self, mut cmd: Command) -> Output {
        cmd.current_dir(self.dir.path())
            .env("NO_COLOR", "1")
            .env_remove("NIVIS_LOG");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd.output().expect("run nivis")
    }

    /// The state snapshot file (a command compacts its journal into it when it ends).
    pub(crate) fn state_json(&self) -> Json {
        serde_json::from_slice(&std::fs::read(&self.state).expect("state file"))
            .expect("state JSON")
    }

    /// The ledger's outputs per resource, as `nivis output --json` prints them.
    pub(crate) fn outputs(&self) -> Json {
        let out = self.state_cmd(&["output", "--json"]);
        assert_success(&out);
        let all: Json = serde_json::from_slice(&out.stdout).expect("output is JSON");
        all["resources"].clone()
    }

    /// Evaluates the plan with the ledger built from current state; returns the IR.
    pub(crate) fn eval_ir(&self) -> Json {
        self.eval_ir_with(&self.outputs())
    }

    /// Evaluates the plan with a ledger of `outputs`; returns the IR.
    pub(crate) fn eval_ir_with(&self, outputs: &Json) -> Json {
        let ledger = serde_json::json!({"phase": 99, "outputs": outputs, "vars": {}});
        let ledger_path = self.dir.path().join("test-ledger.json");
        std::fs::write(&ledger_path, ledger.to_string()).unwrap();
        let out = Command::new("nix")
            .args([
                "--extra-experimental-features",
                "nix-command flakes",
                "eval",
                "--json",
                "--impure",
                "--file",
            ])
            .arg(&self.plan)
            .arg("--apply")
            .arg(format!(
                "p: p (builtins.fromJSON (builtins.readFile {}))",
                ledger_path.display()
            ))
            .output()
            .expect("run nix");
        assert_success(&out);
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

/// Asserts a command succeeded, printing its output otherwise.
pub(crate) fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "command failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// stdout as text.
pub(crate) fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A test that cannot run here (`reason` says why): under `CI=true` a failure, since CI must
/// run every test; elsewhere a loud note on stderr, and the caller returns.
pub(crate) fn not_run(reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "NOT RUN, and CI=true: {reason}; CI must run this test"
    );
    eprintln!("NOT RUN: {reason}");
}

/// stderr as text.
pub(crate) fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A command's stdout, asserting it succeeded.
pub(crate) fn succeeded(out: &Output) -> String {
    assert_success(out);
    stdout(out)
}

/// A command's stderr, asserting it was refused (exited non-zero).
pub(crate) fn refused(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "expected a refusal:\nstdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
    stderr(out)
}

/// The JSON events of a `--json` run, between the stream's `version` and `summary` lines
/// (checked: first and last, and a timestamp on every line).
pub(crate) fn events(out: &Output) -> Vec<Json> {
    stream(out).1
}

/// A `--json` run's stream: its `version` line, its events, its `summary` line.
pub(crate) fn stream(out: &Output) -> (Json, Vec<Json>, Json) {
    let mut lines: Vec<Json> = stdout(out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l:?}: {e}")))
        .collect();
    assert!(lines.len() >= 2, "no version and summary lines: {lines:?}");
    for l in &lines {
        let ts = l["timestamp"]
            .as_str()
            .unwrap_or_else(|| panic!("no timestamp: {l}"));
        assert!(
            ts.ends_with('Z') && ts.len() == 24,
            "not RFC 3339 UTC with ms: {ts}"
        );
    }
    let summary = lines.pop().unwrap();
    assert_eq!(summary["type"], "summary", "the last line: {summary}");
    assert_eq!(
        summary["exitStatus"].as_i64(),
        out.status.code().map(i64::from),
        "{summary}"
    );
    let version = lines.remove(0);
    assert_eq!(version["type"], "version", "the first line: {version}");
    assert_eq!(version["eventsVersion"], 1, "{version}");
    (version, lines, summary)
}

/// `(id, action)` of the `--json` events of one type (`planned`, `finished`, ...), in order.
pub(crate) fn actions(out: &Output, event_type: &str) -> Vec<(String, Json)> {
    events(out)
        .into_iter()
        .filter(|e| e["type"] == event_type)
        .map(|e| (e["id"].as_str().unwrap().to_string(), e["action"].clone()))
        .collect()
}

/// The path of a real provider binary (`null`, `workato`, `terraform`, `nixops4`), fetched and verified
/// by tests/fetch-providers.py if the environment does not name it. Never skips: a missing
/// binary fails the test.
pub(crate) fn real_provider(name: &str) -> PathBuf {
    let var = format!("NIVIS_REAL_{}", name.to_uppercase());
    if let Some(p) = std::env::var_os(&var) {
        return PathBuf::from(p);
    }
    let out = Command::new("python3")
        .arg(repo().join("tests/fetch-providers.py"))
        .args(["--only", name])
        .output()
        .expect("run fetch-providers.py");
    assert_success(&out);
    let line = stdout(&out)
        .lines()
        .find(|l| l.starts_with(&format!("{name}=")))
        .map(str::to_string);
    PathBuf::from(
        line.expect("fetch-providers printed the path")
            .split_once('=')
            .unwrap()
            .1,
    )
}

/// Process ids of live processes whose environment holds `NIVIS_TEST_MARKER=marker` (every
/// process a project's commands start inherits it, providers included).
pub(crate) fn processes_with_marker(marker: &str) -> Vec<u32> {
    let needle = format!("NIVIS_TEST_MARKER={marker}");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else {
            continue;
        };
        let zombie =
            std::fs::read_to_string(e.path().join("stat")).is_ok_and(|s| s.contains(") Z "));
        if !zombie && env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// The directory holding the fake providers (next to nivis).
pub(crate) fn bin_dir() -> PathBuf {
    nivis_bin().parent().unwrap().to_path_buf()
}

/// The remote identities of every object `state` records (current and deposed): provider id
/// -> resource id.
pub(crate) fn recorded_in(state: &nivis::state::StateFile) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for r in state.iter().filter(|r| r.is_managed()) {
        let mut objects = vec![&r.attributes];
        objects.extend(r.deposed.iter().map(|d| &d.attributes));
        for attrs in objects {
            // alpha objects are named by `id`, beta objects by `endpoint` (fakes/*.rs).
            let id = attrs["id"].as_str().or(attrs["endpoint"].as_str());
            let id = id.unwrap_or_else(|| panic!("{}: no remote identity", r.id));
            out.insert(id.to_string(), r.id.clone());
        }
    }
    out
}

/// How the remote objects differ from state.
#[derive(Debug)]
pub(crate) struct RemoteDiff {
    /// Alive but not recorded: (provider id, label).
    pub orphans: Vec<(String, String)>,
    /// Recorded but not alive.
    pub phantoms: Vec<String>,
    /// Labels (resources) with more than one live object, and their ids.
    pub duplicated: BTreeMap<String, Vec<String>>,
}

impl RemoteDiff {
    /// After Nivis was killed -9 mid-apply: everything recorded is alive and nothing was created
    /// twice; only creates whose answer was in flight can be alive unrecorded (nobody can record
    /// them, as in Terraform), at most two per worker: one whose call was running and one whose
    /// answer waited for the state write in progress (DESIGN §85).
    pub(crate) fn assert_killed_mid_apply(&self, workers: usize) {
        assert!(self.phantoms.is_empty(), "{self:?}");
        assert!(self.duplicated.is_empty(), "{self:?}");
        assert!(
            self.orphans.len() <= 2 * workers,
            "more orphans than two per worker: {self:?}"
        );
    }
}

/// The fakes' object log (`NIVIS_FAKE_OBJECT_LOG`): one JSON line per remote object created or
/// deleted, in order.
pub(crate) struct ObjectLog {
    pub entries: Vec<Json>,
}

impl ObjectLog {
    /// Reads the log at `path` (no file: nothing was ever created).
    pub(crate) fn read(path: &std::path::Path) -> ObjectLog {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let entries = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("object log {l:?}: {e}")))
            .collect();
        ObjectLog { entries }
    }

    /// Objects alive now: provider id -> label.
    pub(crate) fn live(&self) -> BTreeMap<String, String> {
        let mut live = BTreeMap::new();
        for e in &self.entries {
            let id = e["id"].as_str().expect("id").to_string();
            match e["op"].as_str() {
                Some("create") => {
                    let label = e["label"].as_str().unwrap_or("").to_string();
                    assert!(
                        live.insert(id.clone(), label).is_none(),
                        "{id} created while alive"
                    );
                }
                Some("delete") => {
                    assert!(live.remove(&id).is_some(), "{id} deleted but never created");
                }
                other => panic!("unknown object log op {other:?}"),
            }
        }
        live
    }

    /// How many objects were created in all.
    pub(crate) fn created(&self) -> usize {
        self.entries.iter().filter(|e| e["op"] == "create").count()
    }
}

/// Runs `git ARGS` in `dir` with a fixed identity (tests make their own commits), asserting
/// success.
pub(crate) fn git(dir: &std::path::Path, args: &[&str]) {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap();
    assert_success(&out);
}

/// Settles every operation a `--json` run (`announcing`) named as pending (DESIGN §97) the way
/// a user does: an address whose object is alive unrecorded (`orphans`: provider id, label;
/// `label_of` gives an address's label) is imported with that id, any other confirmed absent.
/// Returns the addresses announced and how many were imported.
pub(crate) fn resolve_pending(
    announcing: &Output,
    orphans: &[(String, String)],
    label_of: impl Fn(&str) -> String,
    import: impl Fn(&str, &str) -> Output,
    absent: impl Fn(&str) -> Output,
) -> (Vec<String>, usize) {
    let pending: Vec<String> = events(announcing)
        .iter()
        .filter(|e| e["type"] == "pending-operation")
        .map(|e| e["id"].as_str().expect("id").to_string())
        .collect();
    let mut imported = 0;
    for address in &pending {
        let label = label_of(address);
        let out = match orphans.iter().find(|(_, l)| *l == label) {
            Some((id, _)) => {
                imported += 1;
                import(address, id)
            }
            None => absent(address),
        };
        assert_success(&out);
    }
    (pending, imported)
}
