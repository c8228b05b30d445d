//! The state backend on the command line: which backend a command uses (the flake's
//! `nivis.backend`, then `--backend-config` overrides, for `--env`), and the commands that
//! concern only the backend: `env list`, `state pull|push|migrate`, `force-unlock`.
//!
//! Also where the local state file is: `--state`, else the project's own file under
//! `$XDG_STATE_HOME` (`project`), after moving a state older versions kept in the working or
//! flake directory.
//!
//! Not: what a backend does (see `state::Backend`), nor running plans.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value as Json;

use super::args::{SourceArgs, StateTarget};
use super::audit::AuditRecord;
use super::{absolute, exit, fail, plan_source, ForceUnlockArgs, StateArgs};
use crate::nixeval::{self, PlanSource};
use crate::project::{Identity, Placement};
use crate::render::{self, out, outln};
use crate::secrets::Redactor;
use crate::state::s3::Conversion;
use crate::state::{
    env_state_path, parse_snapshot, Backend, ForceUnlock, IfLost, Liveness, LockHolder,
    LockedStore, Mutation, StateFile, Store, DEFAULT_ENV,
};

/// The backend for `args` and the plan `source`: the flake's `nivis.backend` (the plan
/// attribute's sibling `backend`; a plain Nix file or a directory without `flake.nix` has
/// none), then `--backend-config` overrides, for `--env`.
pub(super) fn resolve(
    args: &StateArgs,
    source: &PlanSource,
    redactor: &Redactor,
) -> Result<Backend, String> {
    resolve_project(args, source, redactor).map(|(backend, _, _)| backend)
}

/// [`resolve`], and the project's identity when its default state is used (not `--state`).
///
/// The order matters: a state older versions left in a flake directory Nix copies is moved to
/// the path-keyed place before anything evaluates the flake; the flake's settings (backend and
/// `nivis.project`) are read in one evaluation; then the project's states under earlier keys
/// move to its identity's place.
/// The flake's other settings (`secretSources`, `remoteStates`) come along: they are read in
/// the same evaluation.
pub(super) fn resolve_project(
    args: &StateArgs,
    source: &PlanSource,
    redactor: &Redactor,
) -> Result<(Backend, Option<Placement>, nixeval::ProjectSettings), String> {
    let location = state_path(args, source, redactor)?;
    let settings = match source {
        PlanSource::Flake { flake, attr } => {
            let dir = Path::new(flake);
            if dir.is_dir() && !dir.join("flake.nix").exists() {
                nixeval::ProjectSettings::default()
            } else {
                print_note(crate::project::large_copy_warning(source), redactor);
                nixeval::project_settings(flake, attr).map_err(|e| e.to_string())?
            }
        }
        PlanSource::File { .. } => nixeval::ProjectSettings::default(),
    };
    let (local, placement) = if args.state.is_some() {
        (location, None)
    } else {
        let placement =
            crate::project::place(source, settings.project.as_ref()).map_err(|e| e.to_string())?;
        for note in placement.adopt().map_err(|e| e.to_string())? {
            print_note(Some(note), redactor);
        }
        log::info!("state: {}", placement.state.display());
        (placement.state.clone(), Some(placement))
    };
    let backend = Backend::configure(
        settings.backend.as_ref(),
        &args.backend_config,
        &args.env,
        &local,
        redactor,
    )
    .map_err(|e| format!("state backend: {e}"))?;
    if args.accept_lost_state {
        start_over(&backend, redactor)?;
    }
    Ok((backend, placement, settings))
}

/// `--accept-lost-state`: records an empty state in place of a lost one (see
/// `Backend::start_over`) and says what was given up; a state that is not lost is left alone.
fn start_over(backend: &Backend, redactor: &Redactor) -> Result<(), String> {
    let holder = LockHolder::current("nivis --accept-lost-state");
    let message = match backend.start_over(holder, None).map_err(|e| e.to_string())? {
        Some(lost) => format!(
            "Started over with an empty state at {} (serial {}) in place of the lost one ({}).              Objects it recorded and that still exist are unknown to Nivis: adopt one with              `nivis import ADDRESS ID`.",
            lost.state,
            lost.serial + 1,
            lost.found.join("; ")
        ),
        None => format!(
            "--accept-lost-state: the state at {} is not lost; nothing was changed.",
            backend.describe()
        ),
    };
    eprintln!("{}", render::escape_text(redactor, &message));
    Ok(())
}

/// The local state path of the default environment: `--state` (refused inside a tree Nix
/// copies into the store, the selected environment's file too), else the project's
/// path-keyed default, after moving a state older versions left in the working directory or
/// in a flake directory Nix copies (the selected environment's too).
fn state_path(
    args: &StateArgs,
    source: &PlanSource,
    redactor: &Redactor,
) -> Result<PathBuf, String> {
    use crate::project;
    if let Some(p) = &args.state {
        project::check_state_path(p, source).map_err(|e| e.to_string())?;
        project::check_state_path(
            &env_state_path(p, &args.env).map_err(|e| e.to_string())?,
            source,
        )
        .map_err(|e| e.to_string())?;
        return Ok(absolute(p));
    }
    let target = project::default_state_path(source).map_err(|e| e.to_string())?;
    let mut legacy = vec![absolute(Path::new(crate::state::DEFAULT_PATH))];
    if let project::Copied::Whole(dir) = project::copied_tree(source) {
        legacy.push(dir.join(crate::state::DEFAULT_PATH));
    }
    for old in legacy {
        let mut moves = vec![(old.clone(), target.clone())];
        if args.env != DEFAULT_ENV {
            moves.push((
                env_state_path(&old, &args.env).map_err(|e| e.to_string())?,
                env_state_path(&target, &args.env).map_err(|e| e.to_string())?,
            ));
        }
        for (from, to) in moves {
            if let Some(message) =
                project::move_legacy_state(&from, &to).map_err(|e| e.to_string())?
            {
                eprintln!("{}", render::escape_text(redactor, &message));
            }
        }
    }
    Ok(target)
}

/// The backend of a command that evaluates no plan, for the plan `source` names.
pub(super) fn of(
    source: &SourceArgs,
    state: &StateArgs,
    redactor: &Redactor,
) -> Result<Backend, String> {
    resolve(state, &plan_source(source)?, redactor)
}

/// Reads the state without locking it; its secrets are remembered for redaction. Returns the
/// backend too (for messages).
pub(super) fn read(
    source: &SourceArgs,
    state: &StateArgs,
    redactor: &Redactor,
) -> Result<(Backend, StateFile), String> {
    read_project(source, state, redactor).map(|(backend, _, read)| (backend, read))
}

/// [`read`], with the project's identity when its default state is used.
pub(super) fn read_project(
    source: &SourceArgs,
    state: &StateArgs,
    redactor: &Redactor,
) -> Result<(Backend, Option<Identity>, StateFile), String> {
    let (backend, placement, _) = resolve_project(state, &plan_source(source)?, redactor)?;
    let read = backend.read_only().map_err(|e| e.to_string())?;
    read.teach_secrets(redactor);
    Ok((backend, placement.map(|p| p.identity), read))
}

/// The line saying which state a command uses: `State: <file or URL> (<project>)`.
pub(super) fn state_header(backend: &Backend, identity: Option<&Identity>) -> String {
    let env = match backend.env() {
        DEFAULT_ENV => String::new(),
        env => format!(", environment {env}"),
    };
    match identity {
        Some(i) => format!("State: {} ({}{env})", backend.describe(), i.describe()),
        None => format!("State: {} (given with --state{env})", backend.describe()),
    }
}

/// `nivis env list`.
pub(super) fn env_list(t: &StateTarget, json: bool, redactor: &Redactor) -> i32 {
    let backend = match of(&t.source, &t.state, redactor) {
        Ok(b) => b,
        Err(e) => return fail(redactor, &e),
    };
    match backend.envs() {
        Ok(envs) => {
            if json {
                outln!("{}", render::json_text(redactor, &Json::from(envs), false));
            } else {
                for env in envs {
                    let mark = if env == backend.env() { "*" } else { " " };
                    outln!("{mark} {}", render::escape(redactor, &env));
                }
            }
            exit::OK
        }
        Err(e) => fail(redactor, &e),
    }
}

/// `nivis state pull --out FILE|-`: the whole state as JSON, secrets included (what the user
/// asked for), to a new private file (mode 0600, never through a link, never where Nix copies
/// the plan's tree) or to standard output (terminal-unsafe characters escaped, the JSON
/// unchanged).
pub(super) fn pull(t: &StateTarget, out: &Path, redactor: &Redactor) -> i32 {
    if out != Path::new("-") {
        let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
        let checked = plan_source(&t.source)
            .and_then(|source| {
                crate::project::check_private_file(out, &source).map_err(|e| e.to_string())
            })
            .and_then(|()| {
                let dir = dir.unwrap_or(Path::new("."));
                crate::privfile::check_dirs(dir, "the state copy (--out)")
                    .map(drop)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = checked {
            return fail(redactor, &e);
        }
    }
    let state = match read(&t.source, &t.state, redactor) {
        Ok((_, state)) => state,
        Err(e) => return fail(redactor, &e),
    };
    let value = serde_json::to_value(&state).expect("state serialises");
    if out == Path::new("-") {
        outln!("{}", render::json_text_unredacted(&value, true));
        return exit::OK;
    }
    let mut text = serde_json::to_string_pretty(&value).expect("JSON values serialise");
    text.push('\n');
    match crate::rundir::write_private_file(out, text.as_bytes()) {
        Ok(()) => {
            outln!(
                "Wrote the state ({} resource(s), secrets included) to {} (mode 0600).",
                state.len(),
                render::escape(redactor, &out.display().to_string())
            );
            exit::OK
        }
        Err(e) => fail(
            redactor,
            &format!(
                "cannot write {}: {e} (--out - prints the state instead)",
                out.display()
            ),
        ),
    }
}

/// `nivis state push FILE`: replaces the state by FILE's, refusing another lineage or an older
/// serial unless `force`.
/// How far `state push` may override its checks.
#[derive(Debug, Clone, Copy)]
pub(super) struct PushForce {
    /// `--force`: another lineage or an older serial.
    pub(super) force: bool,
    /// `--drop-records N`: a forced push may drop exactly N records.
    pub(super) drop_records: Option<usize>,
}

/// Whether a push that overrides a check (`--force`) may drop `dropped` records: only if
/// `--drop-records` names their count, or a person at the terminal types it. `Err` says why
/// not (nothing is written).
fn confirm_drops(
    dropped: &[&str],
    drop_records: Option<usize>,
    what: &str,
    redactor: &Redactor,
) -> Result<(), String> {
    let n = dropped.len();
    if n == 0 || drop_records == Some(n) {
        return Ok(());
    }
    let list = dropped.join(", ");
    if drop_records.is_none() && std::io::stdin().is_terminal() {
        outln!(
            "{}",
            render::escape(
                redactor,
                &format!(
                    "This forced push ({what}) drops {n} record(s) the state has; their objects \
                 stay, unrecorded: {list}."
                )
            )
        );
        out!("To go on, type the number of records it drops: ");
        let mut answer = String::new();
        let typed =
            std::io::stdin().read_line(&mut answer).is_ok() && answer.trim() == n.to_string();
        if typed {
            return Ok(());
        }
        return Err(format!("the count was not confirmed. Nothing was changed; the push would drop {n} record(s): {list}"));
    }
    let given = match drop_records {
        Some(m) => format!("--drop-records {m} was given, but "),
        None => String::new(),
    };
    Err(format!(
        "{given}this forced push ({what}) drops {n} record(s) the state has (their objects \
         still exist and would be recorded nowhere): {list}. Nothing was changed; pass \
         --drop-records {n} with --force to confirm, or pull again and redo the edit"
    ))
}

pub(super) fn push(
    t: &StateTarget,
    file: &Path,
    how: PushForce,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let force = how.force;
    let pushed = match read_state_file(file) {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    let backend = match of(&t.source, &t.state, redactor) {
        Ok(b) => b,
        Err(e) => return fail(redactor, &e),
    };
    audit.begin(&backend, "nivis state push");
    // A push replaces the whole state: one that was lost is what it restores.
    let holder = LockHolder::current("nivis state push");
    let store = match backend.open_as(holder, wait, IfLost::Replace) {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    let current = store.state();
    let fresh = current.is_empty() && current.serial == 0;
    // What the push would drop, named whatever else is said: records are objects that exist.
    let dropped: Vec<&str> = current.ids().filter(|id| !pushed.contains(id)).collect();
    let drops = match dropped.len() {
        0 => String::new(),
        n => format!(
            " It would drop {n} record(s) the state has: {}.",
            dropped.join(", ")
        ),
    };
    if let Some(refusal) = (!force)
        .then(|| unforced_refusal(file, &pushed, current, &backend, &drops))
        .flatten()
    {
        return fail(redactor, &refusal);
    }
    let other_lineage = !fresh && current.lineage != pushed.lineage;
    let overridden = match (other_lineage, pushed.serial < current.serial) {
        (true, _) => Some("another lineage"),
        (false, true) => Some("an older serial"),
        (false, false) => None,
    };
    if let Some(what) = overridden {
        if let Err(e) = confirm_drops(&dropped, how.drop_records, what, redactor) {
            return fail(redactor, &e);
        }
    }
    let mut done = format!(
        "Pushed {} to {}: {} resource(s).",
        file.display(),
        backend.describe(),
        pushed.len()
    );
    if !dropped.is_empty() {
        done.push_str(&format!(
            " Dropped {} record(s) the state had (their objects still exist; `nivis import` \
             adopts one again): {}.",
            dropped.len(),
            dropped.join(", ")
        ));
    }
    let dropped: Vec<String> = dropped.iter().map(|d| d.to_string()).collect();
    let mutation = Mutation::for_state_verb("state push");
    let code = replace_and_close(store, pushed, &done, mutation, redactor);
    // The audit record names what the push dropped: records of objects that still exist.
    if code == exit::OK {
        dropped
            .iter()
            .for_each(|id| audit.change(id, "drop (state push)"));
    }
    code
}

/// `nivis state restore`: replaces the state by its backup (any backend), refusing while it
/// would leave records unrecorded unless `--drop-records` names their count.
pub(super) fn restore(
    t: &StateTarget,
    drop_records: Option<usize>,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let backend = match of(&t.source, &t.state, redactor) {
        Ok(b) => b,
        Err(e) => return fail(redactor, &e),
    };
    let (backup, place) = match backend.read_backup() {
        Ok(Some(found)) => found,
        Ok(None) => {
            return fail(
                redactor,
                &format!(
                    "{} has no backup to restore (one is kept once a run has replaced a \
                     snapshot); nothing was changed",
                    backend.describe()
                ),
            )
        }
        Err(e) => return fail(redactor, &e),
    };
    audit.begin(&backend, "nivis state restore");
    // A lost state is what a backup is restored for: opened empty, replaced whole.
    let holder = LockHolder::current("nivis state restore");
    let store = match backend.open_as(holder, wait, IfLost::Replace) {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    let dropped: Vec<String> = (store.state().ids())
        .filter(|id| !backup.contains(id))
        .map(str::to_string)
        .collect();
    let n = dropped.len();
    if n > 0 && drop_records != Some(n) {
        return fail(redactor, &restore_refusal(&place, &dropped, drop_records));
    }
    let mut done = format!(
        "Restored the backup {place} (serial {}, {} resource(s)) to {}; the state it replaced \
         is the backup now.",
        backup.serial,
        backup.len(),
        backend.describe()
    );
    match n {
        0 => done.push_str(" Every record the state had is in it."),
        _ => done.push_str(&format!(
            " It left {n} record(s) unrecorded (their objects still exist; `nivis import` adopts \
             one): {}.",
            dropped.join(", ")
        )),
    }
    let code = replace_and_close(
        store,
        backup,
        &done,
        Mutation::for_state_verb("state restore"),
        redactor,
    );
    if code == exit::OK {
        for id in &dropped {
            audit.change(id, "drop (state restore)");
        }
    }
    code
}

/// Why `state restore` of the backup at `place` is refused: it would leave `dropped`
/// unrecorded and `--drop-records` does not name their count.
fn restore_refusal(place: &str, dropped: &[String], drop_records: Option<usize>) -> String {
    let n = dropped.len();
    let given = match drop_records {
        Some(m) => format!("--drop-records {m} was given, but "),
        None => String::new(),
    };
    format!(
        "{given}restoring {place} leaves {n} record(s) the state has unrecorded (their objects \
         still exist and would be recorded nowhere): {}. Nothing was changed; pass \
         --drop-records {n} to confirm, then adopt each object that exists with `nivis import \
         ADDRESS ID`",
        dropped.join(", ")
    )
}

/// Why a push without `--force` is refused (the file is another state, or older than the
/// state), if it is; `drops` names the records it would drop.
fn unforced_refusal(
    file: &Path,
    pushed: &StateFile,
    current: &StateFile,
    backend: &Backend,
    drops: &str,
) -> Option<String> {
    let fresh = current.is_empty() && current.serial == 0;
    if !fresh && current.lineage != pushed.lineage {
        return Some(format!(
            "{} belongs to state lineage {}, but {} has lineage {}: it is another state. \
             Nothing was changed; pass --force to replace it anyway.{drops}",
            file.display(),
            pushed.lineage,
            backend.describe(),
            current.lineage
        ));
    }
    if pushed.serial < current.serial {
        return Some(format!(
            "{} has serial {}, older than the serial {} of {}: the state was written since it \
             was pulled. Nothing was changed; pull again and redo the edit, or pass --force.\
             {drops}",
            file.display(),
            pushed.serial,
            current.serial,
            backend.describe()
        ));
    }
    None
}

/// Replaces the whole state in `store` by `next` (as the state verb `mutation` was granted
/// for), closes it, and says `done`.
fn replace_and_close(
    mut store: Box<dyn LockedStore>,
    next: StateFile,
    done: &str,
    mutation: Mutation,
    redactor: &Redactor,
) -> i32 {
    if let Err(e) = store.replace(next, mutation).and_then(|()| store.close()) {
        return fail(redactor, &e);
    }
    outln!("{}", render::escape(redactor, done));
    exit::OK
}

/// The grant of `state migrate`, which copies the state or rewrites it encrypted or not.
const MIGRATE: Mutation = Mutation::for_state_verb("state migrate");

/// `nivis state migrate`: copies the local state file into the configured (remote) backend.
pub(super) fn migrate(
    t: &StateTarget,
    force: bool,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let backend = match of(&t.source, &t.state, redactor) {
        Ok(b) => b,
        Err(e) => return fail(redactor, &e),
    };
    audit.begin(&backend, "nivis state migrate");
    let local = backend.local_path().to_path_buf();
    if !local.exists() {
        return fail(
            redactor,
            &format!(
                "there is no local state at {} to migrate (use --state to name it)",
                local.display()
            ),
        );
    }
    let state = match Store::read_only(&local) {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    let target = match backend.open_for_migration(LockHolder::current("nivis state migrate"), wait)
    {
        Ok(t) => t,
        Err(e) => return fail(redactor, &e),
    };
    let existing = target.state();
    if !existing.is_empty() && !force {
        let same = existing.lineage == state.lineage && existing.ids().eq(state.ids());
        let msg = if same {
            format!(
                "{} already holds this state (same lineage and resources); nothing to do",
                backend.describe()
            )
        } else {
            format!(
                "{} already holds {} resource(s); nothing was changed. Pass --force to replace \
                 them with the {} resource(s) of {}",
                backend.describe(),
                existing.len(),
                state.len(),
                local.display()
            )
        };
        drop(target);
        return if same {
            outln!("{}", render::escape(redactor, &msg));
            exit::OK
        } else {
            fail(redactor, &msg)
        };
    }
    let done = format!(
        "Migrated {} resource(s) from {} to {}. The local file was left as it was: move it \
         aside (e.g. `mv {1} {1}.migrated`) so that nothing reads it by mistake.",
        state.len(),
        local.display(),
        backend.describe()
    );
    replace_and_close(target, state, &done, MIGRATE, redactor)
}

/// `nivis state migrate --encrypt|--decrypt`: the remote state rewritten in place, sealed with
/// the configured key or in plain text.
pub(super) fn convert(
    t: &StateTarget,
    conversion: Conversion,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let backend = match of(&t.source, &t.state, redactor) {
        Ok(b) => b,
        Err(e) => return fail(redactor, &e),
    };
    let command = match conversion {
        Conversion::Encrypt => "nivis state migrate --encrypt",
        Conversion::Decrypt => "nivis state migrate --decrypt",
    };
    audit.begin(&backend, command);
    let holder = LockHolder::current("nivis state migrate");
    let (resources, deleted) = match backend.convert(holder, wait, conversion, MIGRATE) {
        Ok(done) => done,
        Err(e) => return fail(redactor, &e),
    };
    let url = backend.describe();
    let done = match conversion {
        Conversion::Encrypt => format!(
            "Encrypted {url}: {resources} resource(s) rewritten sealed with the configured key; \
             {deleted} older object(s) deleted. If the bucket keeps object versions, its \
             earlier versions still hold the state unencrypted: delete them."
        ),
        Conversion::Decrypt => format!(
            "Decrypted {url}: {resources} resource(s) rewritten unencrypted; {deleted} older \
             object(s) deleted. Remove the key from nivis.backend now: with it configured, \
             the state is refused as not encrypted."
        ),
    };
    outln!("{}", render::escape(redactor, &done));
    exit::OK
}

/// `nivis force-unlock LOCK_ID`, for whichever backend holds the state: the id must name the
/// lock; a holder alive on this host keeps it unless `--force`; on a terminal the user confirms
/// (unless `--force`).
pub(super) fn force_unlock(
    args: &ForceUnlockArgs,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let backend = match force_unlock_backend(&args.state, redactor) {
        Ok(b) => b,
        Err(e) => return fail(redactor, &e),
    };
    audit.begin(&backend, "nivis force-unlock");
    let terminal = std::io::stdin().is_terminal();
    let ask = !args.force && terminal;
    // Without a terminal nobody can be asked: a holder on another host, whose end (and any
    // results it rescued there) cannot be checked from here, needs --force.
    let mut refused = None;
    let mut confirm = |holder: Option<&LockHolder>| {
        if let Some(h) =
            holder.filter(|h| !args.force && !terminal && h.liveness() == Liveness::Unknown)
        {
            refused = Some(format!(
                "the state lock of {} is held by {h}, on another host: whether it still runs, \
                 or ended keeping results in a rescue file there (its error named the file), \
                 cannot be checked from here. Nothing was changed. If it ended with rescued \
                 results, run the command again on {} to record them; otherwise pass --force",
                backend.describe(),
                h.host
            ));
            return false;
        }
        if !ask {
            return true;
        }
        let text = match holder {
            Some(h) => format!("The state lock of {} is held by {h}.", backend.describe()),
            None => format!("The state lock of {} names no holder.", backend.describe()),
        };
        outln!("{}", render::escape(redactor, &text));
        render::confirm(
            "Remove it? If that process still runs, two commands can then write the state at once.",
        )
    };
    let result = backend.force_unlock(&args.lock_id, args.force, &mut confirm);
    if let Some(refused) = refused {
        return fail(redactor, &refused);
    }
    match result {
        Ok(result) => {
            outln!("{}", render::escape(redactor, &result.to_string()));
            match result {
                ForceUnlock::Declined => exit::ERROR,
                _ => exit::OK,
            }
        }
        Err(e) => fail(redactor, &e),
    }
}

/// The backend whose lock `force-unlock` breaks. A `--state` the other commands refuse (inside
/// a tree Nix copies) is taken as given, without evaluating the flake (which would copy it into
/// the store): a state must stay unlockable so that it can be moved.
fn force_unlock_backend(t: &StateTarget, redactor: &Redactor) -> Result<Backend, String> {
    let (source, args) = (plan_source(&t.source)?, &t.state);
    match &args.state {
        Some(p) if crate::project::check_state_path(p, &source).is_err() => Backend::configure(
            None,
            &args.backend_config,
            &args.env,
            &absolute(p),
            redactor,
        )
        .map_err(|e| format!("state backend: {e}")),
        _ => resolve(args, &source, redactor),
    }
}

/// Reads a state file to push (as `nivis state pull` prints it), with the snapshot's own
/// checks (format version, shape).
fn read_state_file(file: &Path) -> Result<StateFile, String> {
    // A device or a pipe (/dev/zero) would be read forever.
    match std::fs::metadata(file) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(format!("{}: not a regular file", file.display())),
        Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
    }
    let bytes = std::fs::read(file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    parse_snapshot(file, &bytes).map_err(|e| e.to_string())
}

/// Prints a note the project code returned, masked and escaped (project prints nothing).
pub(super) fn print_note(note: Option<String>, redactor: &Redactor) {
    if let Some(note) = note {
        eprintln!("{}", crate::render::escape_text(redactor, &note));
    }
}

/// The state, locked for a change by `command`.
pub(super) fn open_locked(
    target: &StateTarget,
    command: &str,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> Result<Box<dyn LockedStore>, String> {
    of(&target.source, &target.state, redactor).and_then(|b| {
        audit.begin(&b, command);
        b.open(LockHolder::current(command), wait)
            .map_err(|e| e.to_string())
    })
}
