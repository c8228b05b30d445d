//! A sealed place to run Nivis and then hunt for a secret: every directory a command may write
//! to (HOME, XDG state/cache/runtime dirs, TMPDIR, the project) lies under one temporary root,
//! and the fake provider's generated secrets start with a token unique to this test run, so an
//! older leak on the machine can neither make a test pass nor fail.
//!
//! [`Sandbox::hunt`] then looks for the token (as itself, base64 or hex: [`leak_forms`]) in the
//! stdout and stderr of every command run, in every file under the root, and in every file of
//! the `/nix/store` paths added since the sandbox was made; only the state files (mode 0600,
//! outside the project) may hold it.
//!
//! Only the added store paths: a store path never changes once it is valid, and its name
//! carries the hash of what made it, so a secret that reaches the store lands in a path that
//! was not there before. The hunt lists the store's top-level entries when the sandbox is
//! made and walks every entry that is new at hunt time (what other tests add meanwhile too):
//! it cannot miss a new path, and a large store costs a listing, not a walk.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

use crate::util::*;

/// One command's output: (label, stdout, stderr).
type Seen = (String, Vec<u8>, Vec<u8>);

pub(super) struct Sandbox {
    pub root: tempfile::TempDir,
    /// The project directory (the flake, or where plan.nix lives); commands run here.
    pub proj: PathBuf,
    /// The token every generated secret of this run starts with.
    pub secret: String,
    env: Vec<(String, String)>,
    /// Every command's (label, stdout, stderr).
    seen: Mutex<Vec<Seen>>,
    /// The top-level entries of `/nix/store` when the sandbox was made.
    store_before: BTreeSet<OsString>,
}

/// Where Nix keeps its store.
const STORE: &str = "/nix/store";

/// The names of the store's top-level entries (store paths, and Nix's own `.links` and locks).
fn store_entries() -> BTreeSet<OsString> {
    std::fs::read_dir(STORE)
        .expect("list /nix/store")
        .map(|e| e.expect("read a /nix/store entry").file_name())
        .collect()
}

/// Every regular file of the store paths added since `before`.
fn store_files_added_since(before: &BTreeSet<OsString>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for name in store_entries().difference(before) {
        let path = Path::new(STORE).join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => walk(&path, &mut files),
            Ok(m) if m.is_file() => files.push(path),
            _ => {} // a symbolic link (its target is a path of its own) or gone again
        }
    }
    files
}

/// A token no earlier run can have produced.
pub(super) fn unique_token(prefix: &str) -> String {
    format!(
        "{prefix}{:016x}{:08x}",
        rand::random::<u64>(),
        rand::random::<u32>()
    )
}

impl Sandbox {
    pub(super) fn new() -> Sandbox {
        let root = tempfile::tempdir().expect("temp dir");
        let r = root.path().to_path_buf();
        for d in ["home", "state", "cache", "run", "tmp", "proj"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        std::fs::set_permissions(r.join("run"), std::fs::Permissions::from_mode(0o700)).unwrap();
        let secret = unique_token("nvsecret");
        let marker = r.file_name().unwrap().to_string_lossy().into_owned();
        let s = |p: &str| r.join(p).display().to_string();
        let env = vec![
            ("NIVIS_TEST_MARKER".to_string(), marker),
            ("HOME".into(), s("home")),
            ("XDG_STATE_HOME".into(), s("state")),
            ("XDG_CACHE_HOME".into(), s("cache")),
            ("XDG_RUNTIME_DIR".into(), s("run")),
            ("TMPDIR".into(), s("tmp")),
            ("NIVIS_FAKE_SECRET".into(), secret.clone()),
            ("NO_COLOR".into(), "1".into()),
        ];
        Sandbox {
            proj: r.join("proj"),
            root,
            secret,
            env,
            seen: Mutex::new(Vec::new()),
            store_before: store_entries(),
        }
    }

    /// Sets (or with `None` removes) an environment variable for every later command.
    pub(super) fn set_env(&mut self, k: &str, v: Option<&str>) {
        self.env.retain(|(key, _)| key != k);
        if let Some(v) = v {
            self.env.push((k.into(), v.into()));
        }
    }

    /// The environment every command gets (for a command started in the background).
    pub(super) fn env_pairs(&self) -> Vec<(String, String)> {
        self.env.clone()
    }

    pub(super) fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The Nix expression of a plan function over `resources`, with `lib` in scope.
    pub(super) fn plan_fn(resources: &str, extra: &str) -> String {
        format!("ledger: {}", Sandbox::to_ir(resources, extra))
    }

    /// `ledger: let LETS in lib.toIR { ... }`.
    pub(super) fn plan_let(lets: &str, resources: &str, extra: &str) -> String {
        format!("ledger: let {lets} in {}", Sandbox::to_ir(resources, extra))
    }

    /// `lib.toIR` over both fake providers, `resources` and `extra` (more toIR arguments).
    pub(super) fn to_ir(resources: &str, extra: &str) -> String {
        format!(
            "lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
             providers.beta = lib.mkProvider {{ source = \"provider-beta\"; }}; \
             resources = [ {resources} ]; {extra} inherit ledger; }}"
        )
    }

    /// Writes `dir/flake.nix` whose `nivis.plan` is `plan` (an expression with `lib` in scope).
    pub(super) fn write_flake(dir: &Path, plan: &str) {
        Sandbox::write_flake_with(dir, plan, "");
    }

    /// [`write_flake`](Self::write_flake) with more attributes of `nivis` (e.g. `backend = {...};`).
    pub(super) fn write_flake_with(dir: &Path, plan: &str, more: &str) {
        std::fs::create_dir_all(dir).unwrap();
        let text = format!(
            "{{\n  outputs = {{ self }}: let lib = import {}/nix; in {{\n    nivis = {{ plan = {plan}; {more} }};\n  }};\n}}\n",
            repo().display()
        );
        std::fs::write(dir.join("flake.nix"), text).unwrap();
    }

    /// Writes `dir/plan.nix` evaluating to `plan`.
    pub(super) fn write_plan_file(dir: &Path, plan: &str) -> PathBuf {
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join("plan.nix");
        std::fs::write(
            &path,
            format!("let lib = import {}/nix; in\n{plan}\n", repo().display()),
        )
        .unwrap();
        path
    }

    /// Runs `nivis ARGS` in the project directory.
    pub(super) fn nivis(&self, args: &[&str]) -> Output {
        self.nivis_in(&self.proj, args)
    }

    /// Runs `nivis ARGS` in `cwd`; the output is kept for [`hunt`](Self::hunt).
    pub(super) fn nivis_in(&self, cwd: &Path, args: &[&str]) -> Output {
        let mut cmd = Command::new(nivis_bin());
        cmd.args(args).current_dir(cwd);
        self.run(cmd, &format!("nivis {}", args.join(" ")))
    }

    /// Runs any command with the sandbox's environment; the output is kept.
    pub(super) fn run(&self, mut cmd: Command, label: &str) -> Output {
        cmd.env_remove("NIVIS_LOG")
            .env_remove("NIVIS_STATE")
            .env_remove("NIVIS_RESCUE_DIR")
            .env_remove("XDG_CONFIG_HOME");
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("AWS_") {
                cmd.env_remove(k);
            }
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run command");
        self.seen
            .lock()
            .unwrap()
            .push((label.to_string(), out.stdout.clone(), out.stderr.clone()));
        out
    }

    /// Puts a `nix` wrapper in front of Nix for every later command. For every file path in
    /// its arguments (the ledger) it appends to `spy.log` the path, the modes of the file and
    /// its directory, the directory's and the file's owners, and the directory's entries; and it
    /// keeps a copy of each ledger under `spy/`, so that [`hunt`](Self::hunt) searches every
    /// ledger Nix was given.
    pub(super) fn spy_on_nix(&mut self) {
        let script = self.path("spy-nix");
        let copies = self.path("spy");
        std::fs::create_dir_all(&copies).unwrap();
        std::fs::write(
            &script,
            format!(
                "#!/usr/bin/env python3\nimport os, re, shutil, sys\n\
                 with open({log:?}, 'a') as log:\n\
                 \x20   for a in sys.argv[1:]:\n\
                 \x20       for p in filter(os.path.isfile, re.findall(r'\"(/[^\"]+)\"', a)):\n\
                 \x20           d = os.path.dirname(p)  # /proc/self/fd/N: followed to the directory\n\
                 \x20           st, dt = os.lstat(p), os.stat(d)\n\
                 \x20           log.write('%s %o %o %d %d %s\\n' % (p, st.st_mode & 0o7777, dt.st_mode & 0o7777, dt.st_uid, st.st_uid, ','.join(sorted(os.listdir(d)))))\n\
                 \x20           shutil.copy(p, os.path.join({copies:?}, 'ledger-%d-%d.json' % (os.getpid(), len(os.listdir({copies:?})))))\n\
                 os.execvp('nix', ['nix'] + sys.argv[1:])\n",
                log = self.path("spy.log").display().to_string(),
                copies = copies.display().to_string(),
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        self.set_env("NIVIS_NIX", Some(script.to_str().unwrap()));
    }

    /// Runs `git ARGS` in `dir` (identity set, no global configuration).
    pub(super) fn git(&self, dir: &Path, args: &[&str]) {
        let mut cmd = Command::new("git");
        cmd.args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir);
        assert_success(&self.run(cmd, &format!("git {}", args.join(" "))));
    }

    /// Asserts the secret token appears nowhere but in the state files: not in any command's
    /// output, not in any other file under the sandbox, not in a store path added since the
    /// sandbox was made. State files (names
    /// starting with `nivis.state.json`, or listed in `state_files`) must be mode 0600 and lie
    /// outside the project directory unless listed.
    pub(super) fn hunt(&self, state_files: &[PathBuf]) {
        self.hunt_for(&self.secret.clone(), state_files);
    }

    /// [`hunt`](Self::hunt) for another value (e.g. a sensitive variable's), in every form
    /// [`leak_forms`] lists.
    pub(super) fn hunt_for(&self, needle: &str, state_files: &[PathBuf]) {
        self.hunt_all(&[needle], state_files);
    }

    /// [`hunt_for`](Self::hunt_for) several values at once (one walk of the added store paths).
    pub(super) fn hunt_all(&self, needles: &[&str], state_files: &[PathBuf]) {
        let forms: Vec<Vec<u8>> = needles.iter().flat_map(|n| leak_forms(n)).collect();
        let needle = needles.join(", ");
        let found = |bytes: &[u8]| forms.iter().any(|f| contains(bytes, f));
        let mut problems = Vec::new();
        for (label, out, err) in self.seen.lock().unwrap().iter() {
            for (stream, bytes) in [("stdout", out), ("stderr", err)] {
                if found(bytes) {
                    problems.push(format!(
                        "{stream} of `{label}`:\n{}",
                        String::from_utf8_lossy(bytes)
                    ));
                }
            }
        }
        let mut files = Vec::new();
        walk(self.root.path(), &mut files);
        for f in files {
            let Ok(bytes) = std::fs::read(&f) else {
                continue;
            };
            if !found(&bytes) {
                continue;
            }
            let eval_store = self.path("cache/nivis/eval-store");
            if f.starts_with(&eval_store) {
                // Nivis's private eval store: what a plan wrote with builtins.toFile lands there,
                // allowed only while the store is a directory nobody else can enter.
                let meta = std::fs::symlink_metadata(&eval_store).unwrap();
                if !meta.is_dir() || meta.permissions().mode() & 0o077 != 0 {
                    problems.push(format!(
                        "file {} in a private eval store of mode {:o}",
                        f.display(),
                        meta.permissions().mode() & 0o7777
                    ));
                }
                continue;
            }
            let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let is_state = state_files.contains(&f)
                || (name.starts_with("nivis.state.json") && !f.starts_with(&self.proj));
            if !is_state {
                problems.push(format!("file {}", f.display()));
            } else if mode != 0o600 {
                problems.push(format!("state file {} has mode {mode:o}", f.display()));
            }
        }
        for f in store_files_added_since(&self.store_before) {
            if std::fs::read(&f).is_ok_and(|b| found(&b)) {
                problems.push(format!("store file {}", f.display()));
            }
        }
        assert!(
            problems.is_empty(),
            "the secret {needle} leaked:\n{}",
            problems.join("\n")
        );
    }
}

/// The forms a secret takes where Nivis might print or write bytes it holds: as itself, in
/// standard base64 at each of the three alignments (private bytes are base64 in the state, and
/// a NixOps4 resource's inputs, secret ones included, are its private bytes), and in hex. Each
/// base64 form leaves out the characters its neighbours would change.
pub(super) fn leak_forms(needle: &str) -> Vec<Vec<u8>> {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    let mut forms = vec![needle.as_bytes().to_vec(), hex::encode(needle).into_bytes()];
    for offset in 0..3 {
        let mut bytes = vec![0u8; offset];
        bytes.extend_from_slice(needle.as_bytes());
        let text = STANDARD.encode(&bytes);
        let start = if offset == 0 { 0 } else { 4 };
        if let Some(stable) = text.get(start..text.len().saturating_sub(4)) {
            assert!(stable.len() >= 8, "needle too short to hunt in base64");
            forms.push(stable.as_bytes().to_vec());
        }
    }
    forms
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Every regular file under `dir` (symbolic links are not followed).
pub(super) fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(ty) = e.file_type() else { continue };
        if ty.is_dir() {
            walk(&e.path(), out);
        } else if ty.is_file() {
            out.push(e.path());
        }
    }
}

#[test]
fn the_hunt_finds_a_secret_in_a_store_path_added_after_the_sandbox_was_made() {
    let sandbox = Sandbox::new();
    let file = sandbox.path("tmp").join("leak.txt");
    std::fs::write(&file, format!("a leak: {}\n", sandbox.secret)).unwrap();
    let out = Command::new("nix-store").arg("--add").arg(&file).output();
    let out = out.expect("run nix-store --add");
    assert_success(&out);
    let added = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let hunt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sandbox.hunt(&[])));
    // Removed again before judging, whatever the hunt said.
    let _ = Command::new("nix-store")
        .args(["--delete", &added])
        .output();
    let message = match hunt {
        Ok(()) => panic!("the hunt missed {added}, added after the sandbox was made"),
        Err(e) => e.downcast_ref::<String>().cloned().unwrap_or_default(),
    };
    assert!(
        message.contains(&format!("store file {added}")),
        "{message}"
    );
}

#[test]
fn the_hunt_finds_a_secret_in_base64_at_any_offset_and_in_hex() {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    let secret = unique_token("nvsecret");
    let forms = leak_forms(&secret);
    let found = |bytes: &[u8]| forms.iter().any(|f| contains(bytes, f));
    for before in 0..6 {
        let mut private = b"{\"pw\":\"".repeat(before + 1);
        private.extend_from_slice(secret.as_bytes());
        private.extend_from_slice(b"\"}");
        assert!(
            found(STANDARD.encode(&private).as_bytes()),
            "offset {before}"
        );
    }
    assert!(found(format!("x{}y", hex::encode(&secret)).as_bytes()));
    assert!(!found(STANDARD.encode(unique_token("nvsecret")).as_bytes()));
}
