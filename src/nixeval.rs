//! Running Nix: evaluating the plan with the outputs ledger, and realising build outputs.
//!
//! Owns: the `nix` command lines, their environment and error reporting (stderr kept for the
//! message). Not: what the IR means (see `ir`), nor where the ledger comes from (see `ledger`).
//!
//! The ledger is handed to Nix as a file path read with `builtins.readFile`, never inlined into
//! arguments: arguments are visible to every user through the process list and are limited to
//! 128 KiB each. Reading an absolute path needs `--impure`; nothing read that way is copied to
//! the store. `--impure` also keeps Nix's evaluation cache off (it stores flake attribute values
//! under `~/.cache/nix/eval-cache-*` for pure evaluations only), so no evaluation result is kept.
//! The IR comes back through a pipe and is never written anywhere. Variables reach Nix through
//! the ledger's channel, never through the environment: `NIVIS_VAR_*` is removed from the
//! environment of every `nix` Nivis runs.
//!
//! A flake's plan is selected with `(builtins.getFlake REF).<attr>`, not the installable
//! `REF#<attr>`: for an installable, `nix eval` first looks in `packages.<system>.<attr>` and
//! `legacyPackages.<system>.<attr>`, which evaluates the flake's packages (nixpkgs, for most
//! flakes; for Nivis's own flake, `packages.<system>.nivis`) before the plan. `getFlake` does
//! not write a missing or outdated lock file, so when Nix says the lock needs changes, Nivis
//! runs `nix flake lock REF` (what `nix eval` would have done) and evaluates again.

use std::fmt;
use std::os::fd::RawFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::nixsyntax::nix_string;
use crate::percent::percent_encode;
use crate::secrets::Redactor;
use crate::xdg::state_home;

mod eval_store;
mod located;
mod positions;
mod probe;
mod realise;
mod variables;

pub(crate) use self::realise::realise;

pub(crate) use self::positions::positions;
pub(crate) use self::probe::{evaluate_probing, Probed};
pub(crate) use self::variables::sensitive_declarations;

/// Where the plan function lives.
#[derive(Debug, Clone)]
pub enum PlanSource {
    /// A flake (directory or flake reference) and the attribute holding `ledger: IR`.
    Flake {
        /// The flake reference, as given (`.`, `path:DIR`, `github:o/r`).
        flake: String,
        /// The attribute path of the plan inside the flake (`nivis.plan`).
        attr: String,
    },
    /// A plain Nix file evaluating to `ledger: IR` (or an attrset holding it at `attr`).
    File {
        /// The Nix file.
        path: PathBuf,
        /// The attribute path of the plan inside the file's value; `None`: the value itself.
        attr: Option<String>,
    },
}

impl PlanSource {
    /// The directory relative provider paths are resolved against.
    pub(crate) fn base_dir(&self) -> PathBuf {
        match self {
            PlanSource::Flake { flake, .. } => {
                let p = Path::new(flake.strip_prefix("path:").unwrap_or(flake));
                if p.is_dir() {
                    p.to_path_buf()
                } else {
                    std::env::current_dir().unwrap_or_default()
                }
            }
            PlanSource::File { path, .. } => {
                path.parent().map(Path::to_path_buf).unwrap_or_default()
            }
        }
    }
}

impl PlanSource {
    /// Nix's error `message` naming the project's own files instead of their store copies
    /// (a flake in a local directory, also one in a subdirectory of a git repository; a plain
    /// file is evaluated where it is).
    fn located(&self, message: &str) -> String {
        match self {
            PlanSource::Flake { flake, .. } => match local_flake_dir(flake) {
                Some(dir) => located::in_project(message, &dir),
                None => message.to_string(),
            },
            PlanSource::File { .. } => message.to_string(),
        }
    }
}

/// The directory of a flake reference that names a local directory.
fn local_flake_dir(flake: &str) -> Option<PathBuf> {
    let p = Path::new(flake.strip_prefix("path:").unwrap_or(flake));
    p.is_dir().then(|| p.to_path_buf())
}

impl fmt::Display for PlanSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanSource::Flake { flake, attr } => write!(f, "{flake}#{attr}"),
            PlanSource::File {
                path,
                attr: Some(attr),
            } => write!(f, "{} (attribute {attr})", path.display()),
            PlanSource::File { path, attr: None } => write!(f, "{}", path.display()),
        }
    }
}

/// Why evaluation failed.
#[derive(Debug)]
pub struct EvalError {
    /// What was evaluated.
    pub(crate) what: String,
    /// The explanation, usually Nix's own error text.
    pub(crate) message: String,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "evaluating {} failed:\n{}",
            self.what,
            located::without_dirty_tree_warnings(&self.message).trim_end()
        )
    }
}

/// Whether `nix` runs with `--show-trace` (the global flag of that name: Nix's errors say to
/// use it).
static SHOW_TRACE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Makes every `nix` this process runs from now on print its full trace on an error.
pub(crate) fn show_trace(on: bool) {
    SHOW_TRACE.store(on, std::sync::atomic::Ordering::Relaxed);
}

impl std::error::Error for EvalError {}

fn nix_command() -> Command {
    // `child::nix` leaves out NIVIS_VAR_*: a plan (or a backend configuration) reading a
    // secret with builtins.getEnv would get it unmarked.
    let mut cmd = crate::child::nix();
    if SHOW_TRACE.load(std::sync::atomic::Ordering::Relaxed) {
        cmd.arg("--show-trace");
    }
    cmd
}

/// `nix SUBCOMMAND --eval-store DIR`: a command that evaluates, writing its store objects
/// (`builtins.toFile`, `.drv` files, flake sources) into the private eval store (see
/// `eval_store`) instead of the world-readable `/nix/store`. `what` names the evaluation in
/// an error.
fn eval_command(subcommand: &[&str], what: &str) -> Result<Command, EvalError> {
    let store = eval_store::dir().map_err(|e| EvalError {
        what: what.to_string(),
        message: e.to_string(),
    })?;
    let mut cmd = nix_command();
    cmd.args(subcommand).arg("--eval-store").arg(store);
    // The private store starts empty: a flake input already in the shared store (fetched
    // earlier, maybe on a machine that is offline now) is copied from there instead of being
    // downloaded again, and no binary cache is asked (offline, each would cost retries).
    // Evaluation needs no substitutes beyond that; builds keep the user's (`realise`).
    cmd.args(["--option", "substituters", "auto"]);
    Ok(cmd)
}

/// Evaluates the plan with the ledger at `ledger_path`; returns the IR JSON bytes and the time
/// Nix took. `inherit`: a descriptor the `nix` process inherits (the run directory's, which
/// `ledger_path`, `/proc/self/fd/N/...`, goes through: see `rundir`).
/// `redactor`, the run's secrets: Nix's lines quoting them are left out of its error text and
/// warnings, and no store path holding one is copied out of the private store.
pub(crate) fn evaluate(
    source: &PlanSource,
    ledger_path: &Path,
    inherit: Option<RawFd>,
    redactor: &Redactor,
) -> Result<(Vec<u8>, Duration), EvalError> {
    let ledger = ledger_path.to_str().ok_or_else(|| EvalError {
        what: source.to_string(),
        message: format!("ledger path {} is not UTF-8", ledger_path.display()),
    })?;
    let apply = format!(
        "plan: plan (builtins.fromJSON (builtins.readFile {}))",
        nix_string(ledger)
    );
    evaluate_applied(source, &apply, inherit, redactor)
}

/// Evaluates the plan at `source` through `apply` (a function of the plan function).
fn evaluate_applied(
    source: &PlanSource,
    apply: &str,
    inherit: Option<RawFd>,
    redactor: &Redactor,
) -> Result<(Vec<u8>, Duration), EvalError> {
    let apply = apply.to_string();
    let started = Instant::now();
    let output = match source {
        PlanSource::Flake { flake, .. } => locking_if_needed(flake, &source.to_string(), || {
            run_eval(source, &apply, inherit)
        })?,
        PlanSource::File { .. } => run_eval(source, &apply, inherit)?,
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let mut message = source.located(&without_derived_lines(&stderr, redactor));
        if let Some(advice) = eval_store::full_disk_advice(&stderr) {
            message = format!("{}\n{advice}", message.trim_end());
        }
        return Err(EvalError {
            what: source.to_string(),
            message,
        });
    }
    log_plan_warnings(&output.stderr, redactor);
    copy_named_paths_out(&output.stdout, redactor);
    Ok((output.stdout, started.elapsed()))
}

/// Store paths the evaluated plan names (a path literal, `builtins.path`, a `toFile` of public
/// text) were made in the private eval store; providers and builds look in `/nix/store`, so
/// they are copied there, as evaluating against the shared store did. One that holds a secret
/// stays private, with a warning (§73).
fn copy_named_paths_out(ir: &[u8], redactor: &Redactor) {
    let paths = eval_store::store_paths_in(&String::from_utf8_lossy(ir));
    if paths.is_empty() {
        return;
    }
    let Ok(store) = eval_store::dir() else {
        return;
    };
    // Every evaluation of a run names the same paths: each problem is told once.
    static TOLD: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    for problem in eval_store::copy_paths_out(&store, &paths, nix_command, redactor) {
        let text = redactor.redact(&problem.to_string()).into_owned();
        if TOLD
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(text.clone())
        {
            log::warn!("{text}");
        }
    }
}

/// Where a `/nix/store/...` path the plan named is on disk: in the shared store, else in the
/// private eval store the evaluation wrote it to (an encrypted secret source file, say).
pub(crate) fn store_path_on_disk(path: &Path) -> PathBuf {
    match eval_store::dir() {
        Ok(store) => eval_store::on_disk(&store, path),
        Err(_) => path.to_path_buf(),
    }
}

/// Logs the plan's warnings (`warnings` of `lib.modules`, traced as `nivis warning: TEXT`),
/// each once per run (every phase evaluates them again); a line that quotes a value derived
/// from a secret is left out, as in errors.
fn log_plan_warnings(stderr: &[u8], redactor: &Redactor) {
    static SHOWN: std::sync::Mutex<std::collections::BTreeSet<String>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let (kept, _) = redactor.without_derived_lines(&String::from_utf8_lossy(stderr));
    for line in kept.lines() {
        if let Some(warning) = line.strip_prefix("trace: nivis warning: ") {
            let mut shown = SHOWN.lock().unwrap_or_else(|e| e.into_inner());
            if shown.insert(warning.to_string()) {
                log::warn!("the plan warns: {warning}");
            }
        }
    }
}

/// Nix's error `raw` without the lines quoting a value derived from a known secret (see
/// `Redactor::without_derived_lines`), with a note saying so; at `-v` the raw text is kept in a
/// private file (the file rule, mode 0600) whose path the note gives.
fn without_derived_lines(raw: &str, redactor: &Redactor) -> String {
    let (kept, left_out) = redactor.without_derived_lines(raw);
    if left_out == 0 {
        return kept;
    }
    let kept_at = if log::log_enabled!(log::Level::Info) {
        match keep_raw_error(raw) {
            Ok(path) => format!("Nix's full error is in {} (mode 0600).", path.display()),
            Err(e) => format!("Nix's full error could not be kept: {e}"),
        }
    } else {
        "Run again with -v to keep Nix's full error in a private file.".to_string()
    };
    format!(
        "{kept}\n({left_out} line(s) of Nix's error quoted a value derived from a secret and were left out. {kept_at})"
    )
}

/// Why Nix's full error cannot be kept in a private file.
#[derive(Debug)]
enum KeepError {
    /// There is no per-user state directory.
    NoStateHome(crate::xdg::NoStateHome),
    /// The directory cannot be created or the file written.
    Io {
        /// The directory or file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The directory breaks the private-file rule.
    Refused(crate::privfile::Refusal),
}

impl fmt::Display for KeepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeepError::NoStateHome(e) => e.fmt(f),
            KeepError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            KeepError::Refused(e) => e.fmt(f),
        }
    }
}

/// Writes `raw` to `$XDG_STATE_HOME/nivis/eval-errors/<pid>.txt` under the file rule.
fn keep_raw_error(raw: &str) -> Result<PathBuf, KeepError> {
    let dir = state_home()
        .map_err(KeepError::NoStateHome)?
        .join("nivis/eval-errors");
    let io_at = |path: &Path| {
        let path = path.to_path_buf();
        move |source| KeepError::Io { path, source }
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(io_at(&dir))?;
    let dir = crate::privfile::check_dirs(&dir, "Nix's full error").map_err(KeepError::Refused)?;
    let path = dir.join(format!("{}.txt", std::process::id()));
    crate::rundir::write_private_file(&path, raw.as_bytes()).map_err(io_at(&path))?;
    Ok(path)
}

/// A Nix expression for the plan function at `source`, and one for the Nivis library the
/// plan's flake uses (`lib` or `inputs.nivis.lib`; `null` for a plain file), for `nivis
/// console`.
pub(crate) fn console_exprs(source: &PlanSource) -> (String, String) {
    match source {
        PlanSource::Flake { flake, attr } => {
            let flake_expr = flake_attr(flake, &[]);
            (
                flake_attr(flake, &attr_path(attr)),
                format!("(let f = {flake_expr}; in f.lib or (f.inputs.nivis.lib or null))"),
            )
        }
        PlanSource::File { path, attr } => {
            let select: String = attr
                .as_deref()
                .map(attr_path)
                .unwrap_or_default()
                .iter()
                .map(|a| format!(".{}", nix_string(a)))
                .collect();
            let path = nix_string(&path.display().to_string());
            (format!("(import {path}){select}"), "null".to_string())
        }
    }
}

/// Runs `eval` (a `nix eval` of something in `flake`); when Nix says the flake's lock file needs
/// changes, locks it and runs `eval` again.
fn locking_if_needed(
    flake: &str,
    what: &str,
    eval: impl Fn() -> Result<std::process::Output, EvalError>,
) -> Result<std::process::Output, EvalError> {
    let output = eval()?;
    if !output.status.success()
        && String::from_utf8_lossy(&output.stderr).contains("requires lock file changes")
    {
        lock_flake(what, flake)?;
        return eval();
    }
    Ok(output)
}

/// `(builtins.getFlake "REF").name1.name2…`, each name quoted.
fn flake_attr(flake: &str, names: &[String]) -> String {
    let select: String = names
        .iter()
        .map(|a| format!(".{}", nix_string(a)))
        .collect();
    format!(
        "(builtins.getFlake {}){select}",
        nix_string(&flake_ref_for_nix(flake))
    )
}

/// The work tree root of the git repository holding `dir`, if any (as Nix finds it: the nearest
/// ancestor with a `.git` directory or file).
pub(crate) fn git_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// The reference to give Nix for `flake`. A local directory inside a git work tree becomes
/// `git+file://ROOT?dir=SUB`, which is what the command line (`nix eval DIR#attr`) makes of it:
/// `builtins.getFlake "/abs/dir"` takes any directory as a `path:` flake and copies all of it
/// into the store, `.git` and git-ignored files (a state file beside the flake) included. A
/// shallow clone gets `shallow=1`, without which Nix refuses it.
fn flake_ref_for_nix(flake: &str) -> String {
    let dir = Path::new(flake);
    if !dir.is_absolute() || !dir.is_dir() {
        return flake.to_string();
    }
    let Some(root) = git_root(dir) else {
        return flake.to_string();
    };
    let encode = |p: &Path| percent_encode(&p.to_string_lossy(), false);
    let mut query = Vec::new();
    match dir.strip_prefix(&root) {
        Ok(sub) if !sub.as_os_str().is_empty() => query.push(format!("dir={}", encode(sub))),
        _ => {}
    }
    // Nix refuses a shallow clone unless asked (`nix eval DIR#attr` too).
    if root.join(".git/shallow").is_file() {
        query.push("shallow=1".into());
    }
    let mut reference = format!("git+file://{}", encode(&root));
    if !query.is_empty() {
        reference.push('?');
        reference.push_str(&query.join("&"));
    }
    reference
}

fn run_eval(
    source: &PlanSource,
    apply: &str,
    inherit: Option<RawFd>,
) -> Result<std::process::Output, EvalError> {
    let mut cmd = eval_command(&["eval"], &source.to_string())?;
    if let Some(fd) = inherit {
        keep_open_in_child(&mut cmd, fd);
    }
    cmd.args(["--json", "--impure"]);
    match source {
        PlanSource::Flake { flake, attr } => {
            cmd.arg("--expr").arg(flake_attr(flake, &attr_path(attr)));
        }
        PlanSource::File { path, attr } => {
            cmd.arg("--file").arg(path);
            if let Some(attr) = attr {
                cmd.arg(attr);
            }
        }
    }
    cmd.arg("--apply").arg(apply);
    // Nix grows its garbage-collected heap up front unless told where to start; a small start
    // lets the heap follow the plan's size (10000 resources: 137 MB → 93 MB peak, same time).
    // A value the user set wins.
    if std::env::var_os("GC_INITIAL_HEAP_SIZE").is_none() {
        cmd.env("GC_INITIAL_HEAP_SIZE", "8M");
    }
    run_nix(&mut cmd, &source.to_string())
}

/// Makes `fd` (opened close-on-exec, as Rust opens everything) survive into `cmd`'s process
/// only: no other child (a provider) inherits it.
pub(crate) fn keep_open_in_child(cmd: &mut Command, fd: RawFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: fcntl is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Runs a `nix` command to completion, stdin closed; `what` names it in the error.
fn run_nix(cmd: &mut Command, what: &str) -> Result<std::process::Output, EvalError> {
    cmd.stdin(Stdio::null()).output().map_err(|e| EvalError {
        what: what.to_string(),
        message: format!("cannot run nix: {e}; is Nix installed and on PATH?"),
    })
}

/// Writes the flake's lock file, as `nix eval REF#attr` would have on first use.
fn lock_flake(what: &str, flake: &str) -> Result<(), EvalError> {
    let reference = flake_ref_for_nix(flake);
    let output = run_nix(
        eval_command(&["flake", "lock"], what)?.arg(&reference),
        what,
    )?;
    if output.status.success() {
        return Ok(());
    }
    Err(EvalError {
        what: what.to_string(),
        message: format!(
            "its flake.lock needs updating and `nix flake lock {flake}` failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        ),
    })
}

/// An attribute path as Nix reads one (`nivis.plan`, `nivis."prod.eu"`), split into names.
fn attr_path(attr: &str) -> Vec<String> {
    let mut names = vec![String::new()];
    let mut quoted = false;
    let mut chars = attr.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' if quoted => names.last_mut().unwrap().extend(chars.next()),
            '.' if !quoted => names.push(String::new()),
            c => names.last_mut().unwrap().push(c),
        }
    }
    names
}

/// What a flake declares beside its plan: for plan attribute `a.b.plan`, `a.b.backend` (the
/// state backend), `a.b.project` (the project's name), `a.b.secretSources` (variables read
/// from secret stores, `secret_sources`) and `a.b.remoteStates` (other projects' states the
/// plan reads, `remote_state`), `nivis.backend` ... by default.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ProjectSettings {
    /// The state backend's configuration, as JSON; `None` keeps the state in a local file.
    pub(crate) backend: Option<serde_json::Value>,
    /// The declared project name, as JSON (checked by `project::Identity::declared`).
    pub(crate) project: Option<serde_json::Value>,
    /// The secret sources' declarations, as JSON (parsed by `secret_sources::parse`).
    pub(crate) secret_sources: Option<serde_json::Value>,
    /// Other projects' states the plan reads, as JSON (parsed by `remote_state::parse`).
    pub(crate) remote_states: Option<serde_json::Value>,
}

/// Reads the [`ProjectSettings`] of `flake` in one evaluation (each costs a Nix start and the
/// flake's fetch).
pub(crate) fn project_settings(flake: &str, plan_attr: &str) -> Result<ProjectSettings, EvalError> {
    let mut path = attr_path(plan_attr);
    path.pop();
    if path.is_empty() {
        // A top-level plan attribute has no attribute set to hold settings beside it.
        return Ok(ProjectSettings::default());
    }
    // `getFlake` with the reference the plan's own evaluation uses (`flake_ref_for_nix`: a git
    // flake's tracked files, never its whole directory), not the installable `FLAKE#nivis`,
    // which Nix looks up in `packages.<system>.nivis` first. `or null` covers a missing
    // attribute anywhere on the path.
    let select = |name: &str| {
        let mut names = path.clone();
        names.push(name.into());
        let select: String = names
            .iter()
            .map(|a| format!(".{}", nix_string(a)))
            .collect();
        format!("{name} = flake{select} or null;")
    };
    let expr = format!(
        "let flake = builtins.getFlake {}; in {{ {} {} {} {} }}",
        nix_string(&flake_ref_for_nix(flake)),
        select("backend"),
        select("project"),
        select("secretSources"),
        select("remoteStates")
    );
    // The plan is what the user asked for: name it, and the settings beside it.
    let what = format!(
        "the plan {flake}#{plan_attr} (reading its settings {}.{{backend,project,secretSources,remoteStates}})",
        path.join(".")
    );
    let mut value = eval_flake_json(flake, &what, &expr)?;
    let mut take = |name: &str| Some(value[name].take()).filter(|v| !v.is_null());
    Ok(ProjectSettings {
        backend: take("backend"),
        project: take("project"),
        secret_sources: take("secretSources"),
        remote_states: take("remoteStates"),
    })
}

/// Whether the plan at `source` has a place for policies beside it: a plain file read without
/// an attribute path has none.
pub(crate) fn has_policies_place(source: &PlanSource) -> bool {
    policies_expr(source).is_some()
}

/// The Nix expression selecting the policies beside the plan at `source` (`a.b.policies` for
/// the plan `a.b.plan`, `[ ]` when there are none there); `None` when nothing can be beside
/// the plan (a plain file without `--attr` evaluates to the plan function itself).
fn policies_expr(source: &PlanSource) -> Option<String> {
    let beside = |attr: &str| {
        let mut path = attr_path(attr);
        path.pop();
        path.push("policies".into());
        path
    };
    match source {
        PlanSource::Flake { flake, attr } => {
            Some(format!("{} or [ ]", flake_attr(flake, &beside(attr))))
        }
        PlanSource::File {
            path,
            attr: Some(attr),
        } => {
            let select: String = (beside(attr).iter())
                .map(|a| format!(".{}", nix_string(a)))
                .collect();
            let file = nix_string(&path.display().to_string());
            Some(format!("(import {file}){select} or [ ]"))
        }
        PlanSource::File { attr: None, .. } => None,
    }
}

/// Evaluates `runner` (a Nix expression of a function `policies: input: result`) on the
/// policies beside the plan at `source` and the JSON file at `input_path`; returns the
/// result's JSON bytes and the time Nix took, or `None` when the plan has no place for
/// policies. `inherit` as for [`evaluate`].
pub(crate) fn evaluate_policies(
    source: &PlanSource,
    runner: &str,
    input_path: &Path,
    inherit: Option<RawFd>,
) -> Result<Option<(Vec<u8>, Duration)>, EvalError> {
    let what = format!("the policies beside {source}");
    let Some(policies) = policies_expr(source) else {
        return Ok(None);
    };
    let input = input_path.to_str().ok_or_else(|| EvalError {
        what: what.clone(),
        message: format!("{} is not UTF-8", input_path.display()),
    })?;
    let expr = format!(
        "({runner}) ({policies}) (builtins.fromJSON (builtins.readFile {}))",
        nix_string(input)
    );
    let eval = || {
        let mut cmd = eval_command(&["eval"], &what)?;
        if let Some(fd) = inherit {
            keep_open_in_child(&mut cmd, fd);
        }
        cmd.args(["--json", "--impure", "--expr", &expr]);
        run_nix(&mut cmd, &what)
    };
    let started = Instant::now();
    let output = match source {
        PlanSource::Flake { flake, .. } => locking_if_needed(flake, &what, eval)?,
        PlanSource::File { .. } => eval()?,
    };
    if !output.status.success() {
        return Err(EvalError {
            what,
            message: source.located(&String::from_utf8_lossy(&output.stderr)),
        });
    }
    Ok(Some((output.stdout, started.elapsed())))
}

/// `nix eval --json --impure --expr EXPR` of an expression reading the flake `flake`
/// (locking it first when needed), as JSON; an error names `what` and the project's own files.
fn eval_flake_json(flake: &str, what: &str, expr: &str) -> Result<serde_json::Value, EvalError> {
    let output = locking_if_needed(flake, what, || {
        run_nix(
            eval_command(&["eval"], what)?.args(["--json", "--impure", "--expr", expr]),
            what,
        )
    })?;
    if !output.status.success() {
        let message = String::from_utf8_lossy(&output.stderr);
        return Err(EvalError {
            what: what.to_string(),
            message: match local_flake_dir(flake) {
                Some(dir) => located::in_project(&message, &dir),
                None => message.into_owned(),
            },
        });
    }
    serde_json::from_slice(&output.stdout).map_err(|e| EvalError {
        what: what.to_string(),
        message: format!("not JSON: {e}"),
    })
}

/// The value (as JSON) of the attribute `name` beside the plan attribute of `flake` (for
/// `a.b.plan`, `a.b.NAME`: `nivis.test` for `nivis test`); `None` when it is missing.
pub(crate) fn plan_sibling(
    flake: &str,
    plan_attr: &str,
    name: &str,
) -> Result<Option<serde_json::Value>, EvalError> {
    let mut path = attr_path(plan_attr);
    path.pop();
    path.push(name.to_string());
    let what = format!("{flake}#{}", path.join("."));
    let expr = format!("{} or null", flake_attr(flake, &path));
    let value = eval_flake_json(flake, &what, &expr)?;
    Ok(Some(value).filter(|v| !v.is_null()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_evaluation_error_leaves_out_nix_s_dirty_tree_warnings() {
        let e = EvalError {
            what: "/p#nivis.plan".into(),
            message: "warning: Git tree '/p' is dirty\nerror: undefined variable 'x'\n       at /p/flake.nix:3:5".into(),
        };
        let shown = e.to_string();
        assert!(!shown.contains("is dirty"), "{shown}");
        assert!(
            shown.contains("undefined variable 'x'\n       at /p/flake.nix:3:5"),
            "{shown}"
        );
    }

    #[test]
    fn a_directory_in_a_git_work_tree_is_a_git_flake() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo with space");
        let sub = root.join("infra/prod");
        std::fs::create_dir_all(&sub).unwrap();
        let plain = tmp.path().join("plain");
        std::fs::create_dir_all(&plain).unwrap();
        let plain = plain.to_str().unwrap();
        // Not in a work tree: unchanged (a path: flake, as on the command line).
        assert_eq!(flake_ref_for_nix(plain), plain);
        std::fs::create_dir(root.join(".git")).unwrap();
        let encoded = root.to_str().unwrap().replace(' ', "%20");
        assert_eq!(
            flake_ref_for_nix(root.to_str().unwrap()),
            format!("git+file://{encoded}")
        );
        assert_eq!(
            flake_ref_for_nix(sub.to_str().unwrap()),
            format!("git+file://{encoded}?dir=infra/prod")
        );
        // Asked for as path:, or remote: as given.
        let path_ref = format!("path:{}", root.display());
        assert_eq!(flake_ref_for_nix(&path_ref), path_ref);
        assert_eq!(flake_ref_for_nix("github:o/r"), "github:o/r");
    }

    #[test]
    fn policies_are_read_beside_the_plan() {
        let flake = PlanSource::Flake {
            flake: "github:o/r".into(),
            attr: "nivis.\"prod.eu\".plan".into(),
        };
        assert_eq!(
            policies_expr(&flake).unwrap(),
            "(builtins.getFlake \"github:o/r\").\"nivis\".\"prod.eu\".\"policies\" or [ ]"
        );
        let file = |attr: Option<&str>| PlanSource::File {
            path: "/p/plan.nix".into(),
            attr: attr.map(str::to_string),
        };
        assert_eq!(
            policies_expr(&file(Some("plan"))).unwrap(),
            "(import \"/p/plan.nix\").\"policies\" or [ ]"
        );
        // A file evaluating to the plan function itself has nothing beside it.
        assert_eq!(policies_expr(&file(None)), None);
    }

    #[test]
    fn attribute_paths_split_like_nix() {
        assert_eq!(attr_path("nivis.plan"), ["nivis", "plan"]);
        assert_eq!(attr_path("nivis.\"prod.eu\".x"), ["nivis", "prod.eu", "x"]);
        assert_eq!(attr_path("a.\"q\\\"x\""), ["a", "q\"x"]);
        assert_eq!(attr_path("plan"), ["plan"]);
    }
}
