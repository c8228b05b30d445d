//! The state belongs to the project (issue 26): a moved, renamed or cloned project keeps its
//! state, a path-keyed state of an older Nivis moves to the project's identity, and a directory
//! without `flake.nix` is refused before Nix copies anything into the store.
//!
//! Every command runs in the project's directory with the default `--flake .` and the default
//! state (under a private XDG_STATE_HOME), as a user types them; the fakes log every object
//! they create, so a duplicate would show.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::*;

/// A machine: a private state home, the fakes' object log, and a counter so that each command's
/// fakes give new objects new ids.
struct Machine {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    commands: std::cell::Cell<u64>,
}

impl Machine {
    fn new() -> Machine {
        let tmp = tempfile::tempdir().unwrap();
        Machine {
            root: std::fs::canonicalize(tmp.path()).unwrap(),
            _tmp: tmp,
            commands: std::cell::Cell::new(0),
        }
    }

    fn objects(&self) -> ObjectLog {
        ObjectLog::read(&self.root.join("objects.log"))
    }

    /// `nivis ARGS` run in `dir`.
    fn nivis(&self, dir: &Path, args: &[&str]) -> Output {
        self.commands.set(self.commands.get() + 1);
        Command::new(nivis_bin())
            .args(args)
            .current_dir(dir)
            .env("NO_COLOR", "1")
            .env_remove("NIVIS_LOG")
            .env_remove("NIVIS_STATE")
            .env("XDG_STATE_HOME", self.root.join("xdg"))
            .env("NIVIS_FAKE_OBJECT_LOG", self.root.join("objects.log"))
            .env(
                "NIVIS_FAKE_COUNTER",
                (self.commands.get() * 100).to_string(),
            )
            .output()
            .unwrap()
    }

    /// A project at `dir`: a flake with two tokens (the second reads the first's id), and
    /// `nivis.project = NAME` if `declared`.
    fn project(&self, dir: &str, declared: Option<&str>) -> PathBuf {
        let dir = self.root.join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let project = declared.map_or(String::new(), |n| format!("nivis.project = \"{n}\";"));
        let text = format!(
            r#"{{ outputs = {{ self }}: let lib = import {repo}/nix; in {{
  {project}
  nivis.plan = ledger:
    let
      a = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "a"; config.label = "a"; }};
      b = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "b"; config.keeper = a.refAttr "id"; }};
    in lib.toIR {{
      providers.alpha = lib.mkProvider {{ source = "provider-alpha"; }};
      resources = [ a b ];
      inherit ledger;
    }};
}}; }}"#,
            repo = repo().display(),
        );
        std::fs::write(dir.join("flake.nix"), text).unwrap();
        dir
    }
}

/// Makes `dir` a git repository with `flake` (a path in it) committed.
fn commit(dir: &Path, flake: &str) {
    git(dir, &["init", "-q"]);
    git(dir, &["add", flake]);
    git(dir, &["commit", "-q", "-m", "infra"]);
}

fn assert_no_change(m: &Machine, dir: &Path) {
    let created = m.objects().created();
    let out = m.nivis(dir, &["plan"]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("No changes."),
        "plan in {} is not a no-op:\n{}\n{}",
        dir.display(),
        stdout(&out),
        stderr(&out)
    );
    assert_success(&m.nivis(dir, &["apply", "--auto-approve"]));
    assert_eq!(
        m.objects().created(),
        created,
        "apply created objects again"
    );
}

fn apply(m: &Machine, dir: &Path) -> Output {
    let out = m.nivis(dir, &["apply", "--auto-approve"]);
    assert_success(&out);
    out
}

#[test]
fn a_moved_project_keeps_its_state() {
    let m = Machine::new();
    // Declared: a plain directory; from git history: a flake in a repository's subdirectory.
    let declared = m.project("infra", Some("acme-infra"));
    let in_git = m.project("repo/infra", None);
    commit(&m.root.join("repo"), "infra/flake.nix");
    for dir in [&declared, &in_git] {
        let out = apply(&m, dir);
        assert!(!stderr(&out).contains("Hint:"), "{}", stderr(&out));
    }
    assert_eq!(m.objects().created(), 4);
    std::fs::rename(&declared, m.root.join("infra-renamed")).unwrap();
    std::fs::rename(m.root.join("repo"), m.root.join("moved-repo")).unwrap();
    for dir in ["infra-renamed", "moved-repo/infra"] {
        let dir = m.root.join(dir);
        assert_no_change(&m, &dir);
        let out = m.nivis(&dir, &["state", "list"]);
        assert_success(&out);
        assert_eq!(stdout(&out), "alpha.alpha_token.a\nalpha.alpha_token.b\n");
        assert!(stderr(&out).starts_with("State: "), "{}", stderr(&out));
    }
    let out = m.nivis(&m.root.join("infra-renamed"), &["state", "list"]);
    assert!(
        stderr(&out).contains("(project acme-infra)"),
        "{}",
        stderr(&out)
    );
    assert_eq!(m.objects().live().len(), 4);
}

#[test]
fn a_project_keyed_by_its_path_says_so() {
    let m = Machine::new();
    let plain = m.project("plain", None);
    let out = apply(&m, &plain);
    assert!(
        stderr(&out).contains("Hint: this project's state is keyed by its path"),
        "{}",
        stderr(&out)
    );
    let out = m.nivis(&plain, &["state", "list"]);
    assert!(
        stderr(&out).contains("keyed by its path"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_clone_and_a_worktree_share_the_state() {
    let m = Machine::new();
    let origin = m.project("origin", None);
    commit(&origin, "flake.nix");
    apply(&m, &origin);
    assert_eq!(m.objects().created(), 2);
    git(&m.root, &["clone", "-q", "origin", "clone"]);
    assert_no_change(&m, &m.root.join("clone"));
    git(&origin, &["worktree", "add", "-q", "../worktree"]);
    assert_no_change(&m, &m.root.join("worktree"));
    // Never silent: back in the first checkout, Nivis says which other one used the state.
    let out = m.nivis(&origin, &["plan"]);
    assert!(
        stderr(&out).contains("shares this state with")
            && stderr(&out).contains(&m.root.join("worktree").display().to_string()),
        "{}",
        stderr(&out)
    );
    // From a subdirectory, the flake is found upward, as Nix finds it.
    let sub = origin.join("modules");
    std::fs::create_dir_all(&sub).unwrap();
    assert_no_change(&m, &sub);
    // A shallow clone's history is not the project's: warned, and keyed by its path.
    let url = format!("file://{}", origin.display());
    git(&m.root, &["clone", "-q", "--depth", "1", &url, "shallow"]);
    let out = m.nivis(&m.root.join("shallow"), &["plan"]);
    assert_success(&out);
    assert!(
        stderr(&out).contains("shallow git clone") && stderr(&out).contains("nivis.project"),
        "{}",
        stderr(&out)
    );
    assert_eq!(m.objects().created(), 2, "no duplicate");
}

#[test]
fn a_path_keyed_state_moves_to_the_project_with_a_message() {
    let m = Machine::new();
    let dir = m.project("infra", Some("acme"));
    // The state where the previous release kept it: keyed by the hash of the project's path.
    use sha2::Digest;
    let digest = hex::encode(&sha2::Sha256::digest(dir.display().to_string().as_bytes())[..8]);
    let old = m.root.join(format!(
        "xdg/nivis/projects/infra-{digest}/nivis.state.json"
    ));
    let old_text = old.display().to_string();
    assert_success(&m.nivis(&dir, &["apply", "--auto-approve", "--state", &old_text]));
    assert_success(&m.nivis(
        &dir,
        &[
            "apply",
            "--auto-approve",
            "--state",
            &old_text,
            "--env",
            "staging",
        ],
    ));
    assert_eq!(m.objects().created(), 4);

    let out = m.nivis(&dir, &["plan"]);
    assert_success(&out);
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "Moved the state from {old_text} (keyed by the project's path"
        )) && err.contains("acme"),
        "{err}"
    );
    assert!(stdout(&out).contains("No changes."), "{}", stdout(&out));
    assert!(
        !old.exists() && !old.parent().unwrap().exists(),
        "old place emptied"
    );
    // The environment followed.
    let out = m.nivis(&dir, &["plan", "--env", "staging"]);
    assert!(stdout(&out).contains("No changes."), "{}", stdout(&out));
    assert_no_change(&m, &dir);
    let projects = m.root.join("xdg/nivis/projects");
    let names: Vec<String> = std::fs::read_dir(&projects)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    let note = projects.join(&names[0]).join("project.json");
    let mode = std::fs::metadata(&note).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let note: serde_json::Value = serde_json::from_slice(&std::fs::read(note).unwrap()).unwrap();
    assert_eq!(note["kind"], "declared");
    assert_eq!(note["name"], "acme");
}

/// Every path in the store, by name.
fn store_paths() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/nix/store")
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_directory_without_flake_nix_is_never_handed_to_nix() {
    let m = Machine::new();
    let dir = m.root.join("home");
    std::fs::create_dir_all(&dir).unwrap();
    let marker = format!(
        "nivis-marker-{}-{}",
        std::process::id(),
        m.root.file_name().unwrap().to_string_lossy()
    );
    let key = dir.join("id_ed25519");
    std::fs::write(&key, &marker).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let before = store_paths();
    let path_ref = format!("path:{}", dir.display());
    let dir_text = dir.display().to_string();
    let cases: [&[&str]; 6] = [
        &["plan"],
        &["validate"],
        &["apply", "--auto-approve"],
        &["plan", "--flake", "."],
        &["plan", "--flake", &dir_text],
        &["plan", "--flake", &path_ref],
    ];
    for args in cases {
        let out = m.nivis(&dir, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("no flake.nix in")
                && err.contains("stopped before running Nix")
                && err.contains("nix flake init -t")
                && err.contains("--file plan.nix"),
            "{args:?}: {err}"
        );
    }
    let after = store_paths();
    for new in after.difference(&before) {
        let out = Command::new("grep")
            .args(["-rlF", &marker])
            .arg(Path::new("/nix/store").join(new))
            .output()
            .unwrap();
        assert!(
            out.stdout.is_empty(),
            "the marker was copied into /nix/store/{new}"
        );
    }
    // State commands that need no plan still work there: no state yet is said plainly (exit
    // 1), never a Nix error.
    let state = m.root.join("s/nivis.state.json").display().to_string();
    let out = m.nivis(&dir, &["state", "list", "--state", &state]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("No state found"), "{}", stderr(&out));
    assert!(!stderr(&out).contains("/nix/store"), "{}", stderr(&out));
}

#[test]
fn a_path_keyed_project_never_silently_starts_afresh_beside_its_state() {
    let m = Machine::new();
    let infra = m.project("infra", None);
    apply(&m, &infra);
    let created = m.objects().created();
    // Another checkout of the same name: refused, naming the state and the choices.
    let copy = m.project("other/infra", None);
    let out = m.nivis(&copy, &["apply", "--auto-approve"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&infra.display().to_string())
            && err.contains("another checkout")
            && err.contains("--state")
            && err.contains("nivis.project")
            && err.contains("--env"),
        "{err}"
    );
    // Moved and renamed: refused; the named state is the project's.
    std::fs::remove_dir_all(m.root.join("other")).unwrap();
    std::fs::rename(&infra, m.root.join("renamed")).unwrap();
    let renamed = m.root.join("renamed");
    let out = m.nivis(&renamed, &["plan"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("was this project moved"), "{err}");
    let state = err
        .split("pass --state ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .expect("the state is named")
        .to_string();
    let out = m.nivis(&renamed, &["plan", "--state", &state]);
    assert!(stdout(&out).contains("No changes."), "{}", stdout(&out));
    // Choosing to start afresh: a declared name.
    let fresh = m.project("elsewhere/renamed", Some("second"));
    assert_success(&m.nivis(&fresh, &["plan"]));
    assert_eq!(m.objects().created(), created, "nothing created twice");
}

#[test]
fn naming_a_git_project_keeps_its_state() {
    let m = Machine::new();
    let dir = m.project("infra", None);
    commit(&dir, "flake.nix");
    apply(&m, &dir);
    // The project now declares a name (uncommitted: Nix reads the work tree).
    m.project("infra", Some("acme"));
    let out = m.nivis(&dir, &["plan"]);
    assert_success(&out);
    assert!(
        stderr(&out).contains("keyed by the project's git history")
            && stderr(&out).contains("Moved the state"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).contains("No changes."), "{}", stdout(&out));
    assert_no_change(&m, &dir);
}

#[test]
fn a_large_tree_nix_would_copy_whole_is_warned_about_before_nix_runs() {
    let m = Machine::new();
    let dir = m.project("big", Some("big"));
    // Apparent size is what Nix copies (and what is counted): a sparse file costs no disk.
    let file = std::fs::File::create(dir.join("target.bin")).unwrap();
    file.set_len(101_000_000).unwrap();
    // Nix is never run here: `false` stands in for it, so nothing is copied.
    let plan = |dir: &Path, flake: &str| {
        Command::new(nivis_bin())
            .args(["validate", "--flake", flake])
            .current_dir(dir)
            .env("XDG_STATE_HOME", m.root.join("xdg"))
            .env("NIVIS_NIX", "false")
            .output()
            .unwrap()
    };
    let path_ref = format!("path:{}", dir.display());
    for flake in [".", path_ref.as_str()] {
        let err = stderr(&plan(&dir, flake));
        assert!(
            err.contains(&format!("Nix is about to copy {}", dir.display()))
                && err.contains("more than 100 MB")
                && err.contains(".gitignore")
                && err.contains("git+file://"),
            "{flake}: {err}"
        );
    }
    // A git repository's flake copies only tracked files: no warning.
    commit(&dir, "flake.nix");
    let err = stderr(&plan(&dir, "."));
    assert!(!err.contains("about to copy"), "{err}");
    let small = m.project("small", Some("small"));
    assert!(!stderr(&plan(&small, ".")).contains("about to copy"));
}
