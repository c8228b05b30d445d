//! Issue 27: secrets under a local adversary. Another local user (or a member of a group the
//! victim shares) cannot read, swap or plant any file that holds or drives the victim's
//! secrets: variable files, the run directory and its channel to Nix, the state's journal,
//! lock and rescue file, saved plans. Each test fails on the code before the issue.
//!
//! The attacker is a real second user and group, created for the test (CI runs as root);
//! without root the tests cannot build the attack: they fail under `CI=true` and say so loudly
//! elsewhere.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use super::sandbox::*;
use crate::util::*;

/// A second local user and its group, removed when dropped.
pub(super) struct Adversary {
    name: String,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

impl Adversary {
    /// Creates the user (or `None` outside CI when not root: the test then says it did not run).
    pub(super) fn create() -> Option<Adversary> {
        let root = std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
        if !root {
            not_run("the local-adversary tests need root to create a second user");
            return None;
        }
        let name = format!("nvadv{:08x}", rand::random::<u32>());
        let run = |cmd: &mut Command| {
            let out = cmd.output().expect("useradd/groupadd must be installed");
            assert!(out.status.success(), "{cmd:?}: {}", stderr(&out));
        };
        run(Command::new("groupadd").arg(&name));
        run(Command::new("useradd")
            .args(["-M", "-N", "-s", "/usr/sbin/nologin", "-g"])
            .arg(&name)
            .arg(&name));
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").arg(flag).arg(&name).output().unwrap();
            stdout(&out).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        Some(Adversary { name, uid, gid })
    }

    /// Gives `path` to the attacker.
    pub(super) fn own(&self, path: &Path) {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).unwrap();
    }

    /// Puts `path` in the attacker's group (the victim shares it) with `mode`.
    pub(super) fn share(&self, path: &Path, mode: u32) {
        std::os::unix::fs::chown(path, None, Some(self.gid)).unwrap();
        chmod(path, mode);
    }
}

impl Drop for Adversary {
    fn drop(&mut self) {
        let _ = Command::new("userdel").arg(&self.name).output();
        let _ = Command::new("groupdel").arg(&self.name).output();
    }
}

pub(super) fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

const TOKEN_A: &str =
    "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = \"a\"; })";

/// A flake in the sandbox's project whose resource B reads the sensitive variable `token`.
fn flake_with_sensitive_variable(s: &Sandbox) {
    let b = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; config.from = lib.str [ \"user:\" vars.token ]; })";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ token = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; a = {TOKEN_A}; b = {b};"
        ),
        "a b",
        "variables = decls;",
    );
    Sandbox::write_flake(&s.proj, &plan);
}

// --- case 1: --var-file in a tree Nix copies ------------------------------------------------

#[test]
fn a_var_file_nix_would_copy_into_the_store_is_refused_before_any_evaluation() {
    let s = Sandbox::new();
    flake_with_sensitive_variable(&s);
    let value = unique_token("nvvarfile");
    let file = s.proj.join("secrets.json");
    std::fs::write(&file, format!("{{\"token\": \"{value}\"}}")).unwrap();
    chmod(&file, 0o600);
    // The book's example, beside a plain-directory flake and as a path: flake.
    let path_flake = format!("path:{}", s.proj.display());
    for extra in [&[][..], &["--flake", &path_flake]] {
        let mut args = vec!["plan", "--var-file", "secrets.json"];
        args.extend_from_slice(extra);
        let err = refused(&s.nivis(&args));
        assert!(
            err.contains("refusing --var-file secrets.json") && err.contains("/nix/store"),
            "{err}"
        );
        assert!(err.contains("Move the file outside"), "the fix: {err}");
    }
    // In a git flake after `git add -A`: refused until git ignores it, then accepted.
    s.git(&s.proj, &["init", "-q"]);
    s.git(&s.proj, &["add", "-A"]);
    let err = refused(&s.nivis(&["plan", "--var-file", "secrets.json"]));
    assert!(err.contains("git does not ignore it"), "{err}");
    s.git(&s.proj, &["rm", "-q", "--cached", "secrets.json"]);
    std::fs::write(s.proj.join(".gitignore"), "secrets.json\n").unwrap();
    s.git(&s.proj, &["add", ".gitignore"]);
    succeeded(&s.nivis(&["plan", "--var-file", "secrets.json"]));
    // Outside the project: accepted.
    let outside = s.path("home/secrets.json");
    std::fs::rename(&file, &outside).unwrap();
    succeeded(&s.nivis(&["plan", "--var-file", outside.to_str().unwrap()]));
    s.hunt_for(&value, &[outside]);
}

// --- case 3: one rule for every file that drives secrets ------------------------------------

#[test]
fn a_var_file_another_user_owns_or_can_change_is_refused() {
    let Some(adv) = Adversary::create() else {
        return;
    };
    let s = Sandbox::new();
    flake_with_sensitive_variable(&s);
    let dir = s.path("home/vars");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("v.json");
    std::fs::write(&file, "{\"token\": \"attacker-chosen\"}").unwrap();
    let arg = file.to_str().unwrap();
    let plan = |s: &Sandbox| s.nivis(&["plan", "--var-file", arg]);
    // Owned by the attacker (planted, or handed over).
    adv.own(&file);
    let err = refused(&plan(&s));
    assert!(err.contains(arg) && err.contains("not by you"), "{err}");
    // Ours, but writable by the group the attacker is in.
    std::os::unix::fs::chown(&file, Some(0), Some(0)).unwrap();
    adv.share(&file, 0o660);
    let err = refused(&plan(&s));
    assert!(
        err.contains("written by other users") && err.contains("chmod go-w"),
        "{err}"
    );
    // Ours and 0600, in a directory the group can write (it could be swapped).
    chmod(&file, 0o600);
    adv.share(&dir, 0o770);
    let err = refused(&plan(&s));
    assert!(
        err.contains(dir.to_str().unwrap()) && err.contains("not sticky"),
        "{err}"
    );
    // A link at its name is never followed.
    chmod(&dir, 0o700);
    let link = s.path("home/link.json");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    let err = refused(&s.nivis(&["plan", "--var-file", link.to_str().unwrap()]));
    assert!(err.contains("symbolic link"), "{err}");
    succeeded(&plan(&s));
}

// --- case 2: the run directory and the channel to Nix ---------------------------------------

#[test]
fn a_temporary_directory_others_could_swap_the_run_directory_in_is_refused() {
    let Some(adv) = Adversary::create() else {
        return;
    };
    let mut s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    s.set_env("XDG_RUNTIME_DIR", None);
    let team = s.path("team-scratch");
    std::fs::create_dir_all(&team).unwrap();
    s.set_env("TMPDIR", Some(team.to_str().unwrap()));
    // A team scratch directory (0770, the attacker's group): refused.
    adv.share(&team, 0o770);
    let err = refused(&s.nivis(&["plan"]));
    assert!(
        err.contains(team.to_str().unwrap()) && err.contains("set TMPDIR"),
        "{err}"
    );
    // Owned by the attacker, however private it looks.
    adv.own(&team);
    chmod(&team, 0o700);
    let err = refused(&s.nivis(&["plan"]));
    assert!(err.contains("not by you"), "{err}");
    // A runtime directory of ours inside the attacker's directory (they can rename it away).
    let theirs = s.path("theirs");
    let run = theirs.join("run");
    std::fs::create_dir_all(&run).unwrap();
    chmod(&run, 0o700);
    adv.own(&theirs);
    s.set_env("TMPDIR", Some(s.path("tmp").to_str().unwrap()));
    s.set_env("XDG_RUNTIME_DIR", Some(run.to_str().unwrap()));
    let err = refused(&s.nivis(&["plan"]));
    assert!(
        err.contains("XDG_RUNTIME_DIR") && err.contains(theirs.to_str().unwrap()),
        "{err}"
    );
    assert_eq!(
        std::fs::read_dir(&run).unwrap().count(),
        0,
        "nothing written"
    );
    // A shared but sticky directory (/tmp's mode) is fine: nobody can rename what we make.
    chmod(&team, 0o1777);
    std::os::unix::fs::chown(&team, Some(0), Some(0)).unwrap();
    s.set_env("XDG_RUNTIME_DIR", None);
    s.set_env("TMPDIR", Some(team.to_str().unwrap()));
    succeeded(&s.nivis(&["plan"]));
    s.hunt(&[]);
}

// --- case 4: --state in a shared directory --------------------------------------------------

#[test]
fn a_journal_lock_or_rescue_file_planted_beside_a_shared_state_is_refused() {
    let Some(adv) = Adversary::create() else {
        return;
    };
    let s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    let shared = s.path("shared");
    std::fs::create_dir_all(&shared).unwrap();
    chmod(&shared, 0o1777);
    let state = shared.join("s.json");
    let state_arg = state.to_str().unwrap();
    let apply = |s: &Sandbox| s.nivis(&["apply", "--auto-approve", "--state", state_arg]);
    // A journal the attacker created (and can read): the generated secrets never go there.
    let journal = shared.join("s.json.journal");
    std::fs::write(&journal, "").unwrap();
    adv.own(&journal);
    chmod(&journal, 0o666);
    let err = refused(&apply(&s));
    assert!(err.contains(journal.to_str().unwrap()), "{err}");
    assert_eq!(
        std::fs::read(&journal).unwrap(),
        b"",
        "nothing written to it"
    );
    std::fs::remove_file(&journal).unwrap();
    // A lock that is a link to one of the victim's files: never followed, never truncated.
    let victim = s.path("home/precious.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    let lock = shared.join("s.json.lock");
    let _ = std::fs::remove_file(&lock);
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let err = refused(&apply(&s));
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    std::fs::remove_file(&lock).unwrap();
    // A rescue file the attacker planted (its changes would be recorded as the victim's).
    let rescue = shared.join("s.json.rescue");
    std::fs::write(&rescue, "").unwrap();
    adv.own(&rescue);
    let err = refused(&apply(&s));
    assert!(err.contains(rescue.to_str().unwrap()), "{err}");
    std::fs::remove_file(&rescue).unwrap();
    succeeded(&apply(&s));
    s.hunt(&[state.clone(), journal]);
}

// --- case 5: saved plans --------------------------------------------------------------------

#[test]
fn a_saved_plan_holds_no_guessable_digest_of_a_sensitive_variable() {
    let mut s = Sandbox::new();
    flake_with_sensitive_variable(&s);
    s.set_env("NIVIS_VAR_token", Some("Winter2024!"));
    // The state holds generated secrets: the key the digest is made with.
    succeeded(&s.nivis(&["apply", "--auto-approve"]));
    let out = s.path("home/p.plan");
    s.set_env("NIVIS_VAR_token", Some("Summer2025!"));
    succeeded(&s.nivis(&["plan", "--out", out.to_str().unwrap()]));
    let text = std::fs::read_to_string(&out).unwrap();
    use sha2::Digest;
    for guess in ["\"Summer2025!\"", "Summer2025!"] {
        let unsalted = hex::encode(sha2::Sha256::digest(guess.as_bytes()));
        assert!(!text.contains(&unsalted), "a guessable digest: {text}");
    }
    assert!(text.contains("hmac-sha256-statekey:"), "{text}");
    // The same value applies; another is refused.
    s.set_env("NIVIS_VAR_token", Some("Winter2024!"));
    let err = refused(&s.nivis(&["apply", "--auto-approve", out.to_str().unwrap()]));
    assert!(err.contains("variable token"), "{err}");
    s.set_env("NIVIS_VAR_token", Some("Summer2025!"));
    succeeded(&s.nivis(&["apply", "--auto-approve", out.to_str().unwrap()]));
}

// --- case 9: signals and leftovers ----------------------------------------------------------

#[test]
fn a_hang_up_during_evaluation_and_a_dead_run_leave_no_secrets_file() {
    let mut s = Sandbox::new();
    flake_with_sensitive_variable(&s);
    s.set_env("NIVIS_VAR_token", Some(&unique_token("nvhup")));
    succeeded(&s.nivis(&["apply", "--auto-approve"]));
    // What a run killed with SIGKILL left: a run directory of ours whose process is gone.
    let run = s.path("run");
    let dead = run.join("nivis-2147483600-0123456789abcdef");
    std::fs::create_dir(&dead).unwrap();
    chmod(&dead, 0o700);
    std::fs::write(dead.join("secrets.json"), "{}").unwrap();
    // A Nix that takes its time, so the signal arrives while it evaluates.
    let slow = s.path("slow-nix");
    std::fs::write(&slow, "#!/bin/sh\nsleep 3\nexec nix \"$@\"\n").unwrap();
    chmod(&slow, 0o755);
    s.set_env("NIVIS_NIX", Some(slow.to_str().unwrap()));
    let mut cmd = Command::new(nivis_bin());
    cmd.args(["plan"]).current_dir(&s.proj);
    cmd.env_remove("NIVIS_LOG");
    for (k, v) in s.env_pairs() {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let ours = format!("nivis-{}-", child.id());
    // Our directories in `run`: the run directory, and (`nivis-PID-p…`) the private directory
    // of a provider started while Nix evaluates (DESIGN §80).
    let provider_dir = format!("{ours}p");
    let ours_where = |provider: bool| {
        std::fs::read_dir(&run)
            .unwrap()
            .flatten()
            .find(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with(&ours) && name.starts_with(&provider_dir) == provider
            })
            .map(|e| e.path())
    };
    let channel = || ours_where(false);
    while channel().is_none_or(|d| !d.join("secrets.json").exists()) {
        assert!(
            started.elapsed().as_secs() < 30,
            "the run never wrote its channel"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(
        !dead.exists(),
        "a dead run's directory is removed by the next run"
    );
    // SAFETY: signalling the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    child.wait().unwrap();
    assert!(
        channel().is_none(),
        "the run directory survived a hang-up: {:?}",
        channel()
    );
    assert!(
        ours_where(true).is_none(),
        "a provider's directory survived a hang-up: {:?}",
        ours_where(true)
    );
}

// --- case 8: masking touches values, never Nivis's own words --------------------------------

#[test]
fn a_secret_equal_to_an_action_name_leaves_actions_and_saved_plans_intact() {
    let mut s = Sandbox::new();
    flake_with_sensitive_variable(&s);
    s.set_env("NIVIS_VAR_token", Some("create"));
    let plan = succeeded(&s.nivis(&["plan"]));
    assert!(plan.contains("Plan: 2 to create"), "{plan}");
    let json = s.nivis(&["plan", "--json"]);
    let planned = actions(&json, "planned");
    assert_eq!(planned.len(), 2, "{}", stdout(&json));
    for (id, action) in &planned {
        assert_eq!(action, "create", "{id}: {}", stdout(&json));
    }
    let out = s.path("home/p.plan");
    succeeded(&s.nivis(&["plan", "--out", out.to_str().unwrap()]));
    let shown = succeeded(&s.nivis(&["show", out.to_str().unwrap()]));
    assert!(shown.contains("Plan: 2 to create"), "{shown}");
}

// --- case 7: Nix errors quoting a value derived from a secret -------------------------------

#[test]
fn a_nix_error_quoting_part_of_a_secret_is_shown_without_that_line() {
    let mut s = Sandbox::new();
    let value = unique_token("nvderived");
    let prefix = &value[..14];
    let b = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; \
             config.from = lib.compute vars.token (t: builtins.throw (\"bad token \" + builtins.substring 0 14 t)); })";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ token = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; b = {b};"
        ),
        "b",
        "variables = decls;",
    );
    Sandbox::write_flake(&s.proj, &plan);
    s.set_env("NIVIS_VAR_token", Some(&value));
    for args in [&["plan"][..], &["plan", "--json"]] {
        let out = s.nivis(args);
        let err = refused(&out);
        let all = format!("{}{err}", stdout(&out));
        assert!(!all.contains(prefix), "a prefix of the secret: {all}");
        assert!(all.contains("derived from a secret"), "{all}");
        assert!(all.contains("with -v"), "{all}");
    }
    // At -v Nix's full error is kept, in a private file only.
    let out = s.nivis(&["plan", "-v"]);
    let err = refused(&out);
    assert!(!err.contains(prefix), "{err}");
    let kept = s.path("state/nivis/eval-errors");
    let files: Vec<_> = std::fs::read_dir(&kept).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "{err}");
    let meta = files[0].metadata().unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let raw = std::fs::read_to_string(files[0].path()).unwrap();
    assert!(raw.contains(prefix), "{raw}");
    assert!(err.contains(files[0].path().to_str().unwrap()), "{err}");
    s.hunt_for(&value, &[]);
}

// --- case 3: files Nivis writes secrets (or a plan) into ------------------------------------

#[test]
fn a_state_copy_or_saved_plan_into_a_directory_others_can_change_is_refused() {
    let Some(adv) = Adversary::create() else {
        return;
    };
    let s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    succeeded(&s.nivis(&["apply", "--auto-approve"]));
    let team = s.path("team");
    std::fs::create_dir_all(&team).unwrap();
    adv.share(&team, 0o770);
    let copy = team.join("state.json");
    let err = refused(&s.nivis(&["state", "pull", "--out", copy.to_str().unwrap()]));
    assert!(err.contains(team.to_str().unwrap()), "{err}");
    let plan = team.join("p.plan");
    let err = refused(&s.nivis(&["plan", "--out", plan.to_str().unwrap()]));
    assert!(err.contains(team.to_str().unwrap()), "{err}");
    assert_eq!(
        std::fs::read_dir(&team).unwrap().count(),
        0,
        "nothing written"
    );
    // A saved plan the attacker wrote (or can rewrite) is not applied.
    let mine = s.path("home/p.plan");
    succeeded(&s.nivis(&["plan", "--out", mine.to_str().unwrap()]));
    adv.own(&mine);
    let err = refused(&s.nivis(&["apply", "--auto-approve", mine.to_str().unwrap()]));
    assert!(err.contains("not by you"), "{err}");
    s.hunt(&[]);
}

// --- case 11: provider sockets --------------------------------------------------------------

/// The unix sockets process `pid` listens on (from /proc/net/unix and its descriptors).
fn listening_sockets(pid: u32) -> Vec<std::path::PathBuf> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|fd| std::fs::read_link(fd.path()).ok())
                .filter_map(|link| {
                    let link = link.to_string_lossy().into_owned();
                    Some(
                        link.strip_prefix("socket:[")?
                            .strip_suffix(']')?
                            .to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let table = std::fs::read_to_string("/proc/net/unix").unwrap();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            // Flags 00010000: accepting connections.
            (f.len() >= 8 && f[3] == "00010000" && inodes.iter().any(|i| i == f[6]))
                .then(|| std::path::PathBuf::from(f[7]))
        })
        .collect()
}

/// The providers (executable name, listening socket) started for `p` that are running now;
/// waits up to 30 s for `count` of them.
fn running_providers(p: &Project, count: usize) -> Vec<(String, std::path::PathBuf)> {
    let started = std::time::Instant::now();
    loop {
        let found: Vec<(String, std::path::PathBuf)> = processes_with_marker(&p.marker())
            .into_iter()
            .filter_map(|pid| {
                let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
                let exe = exe.file_name()?.to_string_lossy().into_owned();
                if !exe.contains("provider") {
                    return None;
                }
                Some((exe, listening_sockets(pid).into_iter().next()?))
            })
            .collect();
        if found.len() >= count || started.elapsed() > std::time::Duration::from_secs(30) {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Runs python3 as the attacker: connects to `socket`, or lists `dir`; returns its output.
fn as_attacker(adv: &Adversary, code: &str, arg: &Path) -> Output {
    use std::os::unix::process::CommandExt;
    Command::new("python3")
        .args(["-c", code])
        .arg(arg)
        .uid(adv.uid)
        .gid(adv.gid)
        .current_dir("/")
        .output()
        .expect("python3 must be installed")
}

/// `openssl s_client` to a provider's socket with a certificate the provider was not given.
fn tls_probe(socket: &Path, dir: &Path) -> String {
    let (key, cert) = (dir.join("wrong.key"), dir.join("wrong.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl must be installed");
    assert!(made.status.success(), "{}", stderr(&made));
    let out = Command::new("openssl")
        .args([
            "s_client",
            "-alpn",
            "h2",
            "-servername",
            "localhost",
            "-unix",
        ])
        .arg(socket)
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    format!("{}\n{}", stdout(&out), stderr(&out))
}

/// A project with one fake (plaintext: `NIVIS_FAKE_PLAINTEXT`, as a provider that predates
/// AutoMTLS) and one real null (mutual TLS) provider, a resource each.
fn fake_and_real_null_project() -> Project {
    let null = real_provider("null");
    let p = Project::new(&format!(
        "ledger: let \
           a = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; }}; \
           n = lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"n\"; config.triggers = {{ x = \"1\"; }}; }}; \
         in lib.toIR {{ providers = {{ alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
                                      null = lib.mkProvider {{ source = \"{}\"; }}; }}; \
                       resources = [ a n ]; inherit ledger; }}",
        null.display()
    ));
    p.env("NIVIS_FAKE_PLAINTEXT", "1")
}

#[test]
fn another_user_cannot_reach_a_running_provider_and_a_wrong_certificate_is_refused() {
    let Some(adv) = Adversary::create() else {
        return;
    };
    let p = fake_and_real_null_project().env("NIVIS_FAKE_SLOW_MS", "20000");
    // Under umask 000 go-plugin's socket is 0777: only the directory can keep others out.
    let mut run = Command::new("sh")
        .args(["-c", "umask 000; exec \"$0\" \"$@\""])
        .arg(nivis_bin())
        .args(["apply", "--auto-approve", "--file"])
        .arg(&p.plan)
        .arg("--state")
        .arg(&p.state)
        .current_dir(p.dir.path())
        .envs(p.env.iter().map(|(k, v)| (k, v)))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // alpha sleeps in its apply; null has applied and waits for the phase to end.
    let providers = running_providers(&p, 2);
    let connect = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\nprint('connected')";
    let list = "import os,sys\nprint(os.listdir(sys.argv[1]))";
    let mut checked = Vec::new();
    for (exe, socket) in &providers {
        let out = as_attacker(&adv, connect, socket);
        assert!(
            !out.status.success() && stderr(&out).contains("PermissionError"),
            "{exe}: another user connected to {}: {}{}",
            socket.display(),
            stdout(&out),
            stderr(&out)
        );
        let out = as_attacker(&adv, list, socket.parent().unwrap());
        assert!(
            stderr(&out).contains("PermissionError"),
            "{exe}: another user listed {}: {}",
            socket.parent().unwrap().display(),
            stdout(&out)
        );
        if exe.contains("null") {
            // The provider speaks TLS (it shows its go-plugin certificate) and refuses a
            // client certificate other than the one Nivis gave it.
            let probe = tls_probe(socket, p.dir.path());
            assert!(probe.contains("HashiCorp"), "no TLS server: {probe}");
            assert!(
                probe.contains("alert"),
                "a wrong certificate was accepted: {probe}"
            );
        }
        checked.push(exe.clone());
    }
    // SAFETY: kill(2) on the child we started; no memory is involved.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let _ = run.wait();
    p.assert_no_leftover_processes();
    assert_eq!(
        checked.len(),
        2,
        "both providers found running: {providers:?}"
    );
}

#[test]
fn a_real_provider_is_spoken_to_over_mutual_tls_in_a_private_directory_removed_afterwards() {
    let p = fake_and_real_null_project();
    let tmp = p.dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    chmod(&tmp, 0o700);
    let p = p
        .env("TMPDIR", tmp.to_str().unwrap())
        .env("XDG_RUNTIME_DIR", "");
    let out = p.run(&["apply"], &["--auto-approve", "-vv"]);
    assert_success(&out);
    let log = stderr(&out);
    // The real provider got our certificate, answered with its own, and every call of the
    // apply went through the TLS session; the fake (no certificate) stays on plaintext.
    assert!(log.contains("null: mutual TLS"), "{log}");
    assert!(log.contains("alpha: plaintext"), "{log}");
    assert!(!log.contains("outside its private directory"), "{log}");
    assert!(p.outputs()["null.null_resource.n"]["id"].is_string());
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
