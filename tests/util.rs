//! Shared helpers for the integration tests: temporary projects, running the built binaries,
//! fetching the real providers.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value as Json;

/// The repository root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The built `nivis` binary.
pub fn nivis_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_nivis"))
}

/// A temporary project: a Nix plan file and a state file.
pub struct Project {
    pub dir: tempfile::TempDir,
    pub plan: PathBuf,
    pub state: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Project {
    /// A project whose plan file has `lib` (the Nivis library) in scope; `body` must evaluate
    /// to a function `ledger: IR`.
    pub fn new(body: &str) -> Project {
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
    pub fn two_providers(cycle: bool) -> Project {
        Project::new(&format!(
            "import {}/nix/examples/two-providers.nix {{ inherit lib; cycle = {cycle}; }}",
            repo().display()
        ))
    }

    /// The marker every process started for this project carries in its environment.
    pub fn marker(&self) -> String {
        self.env[0].1.clone()
    }

    /// Asserts no process started for this project is still alive.
    pub fn assert_no_leftover_processes(&self) {
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
    pub fn set_plan(&self, body: &str) {
        let text = format!("let lib = import {}/nix; in\n{body}\n", repo().display());
        std::fs::write(&self.plan, text).expect("write plan");
    }

    /// Adds an environment variable for every later command.
    pub fn env(mut self, k: &str, v: &str) -> Project {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Runs `nivis VERB --file plan.nix --state STATE EXTRA...` (validate, which reads no
    /// state and refuses --state, without it).
    pub fn run(&self, verb: &[&str], extra: &[&str]) -> Output {
        let mut cmd = Command::new(nivis_bin());
        cmd.args(verb).arg("--file").arg(&self.plan);
        if verb != ["validate"] {
            cmd.arg("--state").arg(&self.state);
        }
        cmd.args(extra);
        self.finish(cmd)
    }

    /// Runs a state subcommand (`state list`, `output`, ...) against this project's state.
    pub fn state_cmd(&self, args: &[&str]) -> Output {
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
    pub fn state_json(&self) -> Json {
        serde_json::from_slice(&std::fs::read(&self.state).expect("state file"))
            .expect("state JSON")
    }

    /// The ledger's outputs per resource, as `nivis output --json` prints them.
    pub fn outputs(&self) -> Json {
        let out = self.state_cmd(&["output", "--json"]);
        assert_success(&out);
        let all: Json = serde_json::from_slice(&out.stdout).expect("output is JSON");
        all["resources"].clone()
    }

    /// Evaluates the plan with the ledger built from current state; returns the IR.
    pub fn eval_ir(&self) -> Json {
        let ledger = serde_json::json!({"phase": 99, "outputs": self.outputs(), "vars": {}});
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
pub fn assert_success(out: &Output) {
    assert!(
        out.status.success(),
        "command failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The JSON events of a `--json` run.
pub fn events(out: &Output) -> Vec<Json> {
    stdout(out)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad event line {l:?}: {e}")))
        .collect()
}

/// The path of a real provider binary (`null`, `workato`, `terraform`), fetched and verified
/// by tests/fetch-providers.py if the environment does not name it. Never skips: a missing
/// binary fails the test.
pub fn real_provider(name: &str) -> PathBuf {
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
pub fn processes_with_marker(marker: &str) -> Vec<u32> {
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
pub fn bin_dir() -> PathBuf {
    nivis_bin().parent().unwrap().to_path_buf()
}
