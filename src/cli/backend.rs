//! The state backend on the command line: which backend a command uses (the flake's
//! `nivis.backend`, then `--backend-config` overrides, for `--env`), and the commands that
//! concern only the backend: `env list`, `state pull|push|migrate`, `force-unlock`.
//!
//! Not: what a backend does (see `state::Backend`), nor running plans.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::{confirm_prompt, exit, fail, ForceUnlockArgs, StateArgs};
use crate::nixeval::{self, PlanSource};
use crate::render::outln;
use crate::state::{parse_snapshot, Backend, ForceUnlock, LockHolder, StateFile, Store};

/// The backend for `args`, reading `nivis.backend` (the plan attribute's sibling `backend`)
/// from `flake` when it is a flake (a directory without `flake.nix` is not).
pub fn resolve(args: &StateArgs, flake: Option<&str>, plan_attr: &str) -> Result<Backend, String> {
    let from_flake = match flake {
        Some(dir) if Path::new(dir).is_dir() && !Path::new(dir).join("flake.nix").exists() => None,
        Some(flake) => {
            let flake = if Path::new(flake).is_dir() {
                super::absolute(Path::new(flake)).display().to_string()
            } else {
                flake.to_string()
            };
            nixeval::backend_config(&flake, plan_attr).map_err(|e| e.to_string())?
        }
        None => None,
    };
    let local = super::absolute(&args.state);
    Backend::configure(from_flake.as_ref(), &args.backend_config, &args.env, &local)
        .map_err(|e| format!("state backend: {e}"))
}

/// The backend for a run verb: the plan's flake's `nivis.backend` (none for `--file`).
pub fn for_plan(args: &StateArgs, source: &PlanSource) -> Result<Backend, String> {
    match source {
        PlanSource::Flake { flake, attr } => resolve(args, Some(flake), attr),
        PlanSource::File { .. } => resolve(args, None, "nivis.plan"),
    }
}

/// The backend for a state command: the flake in the current directory, if there is one.
pub fn for_state_command(args: &StateArgs) -> Result<Backend, String> {
    resolve(args, Some("."), "nivis.plan")
}

/// Reads the state of a state command's backend.
pub fn read_state(args: &StateArgs) -> Result<StateFile, String> {
    for_state_command(args)?
        .read_only()
        .map_err(|e| e.to_string())
}

/// `nivis env list`.
pub fn env_list(args: &StateArgs, json: bool) -> i32 {
    let backend = match for_state_command(args) {
        Ok(b) => b,
        Err(e) => return fail(&e),
    };
    match backend.envs() {
        Ok(envs) => {
            if json {
                outln!("{}", Json::from(envs));
            } else {
                for env in envs {
                    let mark = if env == backend.env() { "*" } else { " " };
                    outln!("{mark} {env}");
                }
            }
            exit::OK
        }
        Err(e) => fail(&e),
    }
}

/// `nivis state pull`: the whole state as JSON on stdout.
pub fn pull(args: &StateArgs) -> i32 {
    match read_state(args) {
        Ok(state) => {
            outln!(
                "{}",
                serde_json::to_string_pretty(&state).expect("state serialises")
            );
            exit::OK
        }
        Err(e) => fail(&e),
    }
}

/// `nivis state push FILE`: replaces the state by FILE's, refusing another lineage or an older
/// serial unless `force`.
pub fn push(args: &StateArgs, file: &Path, force: bool) -> i32 {
    let pushed = match read_state_file(file) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let backend = match for_state_command(args) {
        Ok(b) => b,
        Err(e) => return fail(&e),
    };
    let mut store = match backend.open(LockHolder::current("nivis state push"), None) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let current = store.state();
    let fresh = current.is_empty() && current.serial == 0;
    if !force && !fresh && current.lineage != pushed.lineage {
        return fail(&format!(
            "{} belongs to state lineage {}, but {} has lineage {}: it is another state. \
             Nothing was changed; pass --force to replace it anyway",
            file.display(),
            pushed.lineage,
            backend.describe(),
            current.lineage
        ));
    }
    if !force && pushed.serial < current.serial {
        return fail(&format!(
            "{} has serial {}, older than the serial {} of {}: the state was written since it \
             was pulled. Nothing was changed; pull again and redo the edit, or pass --force",
            file.display(),
            pushed.serial,
            current.serial,
            backend.describe()
        ));
    }
    let count = pushed.len();
    if let Err(e) = store.replace(pushed).and_then(|()| store.close()) {
        return fail(&e);
    }
    outln!(
        "Pushed {} to {}: {count} resource(s).",
        file.display(),
        backend.describe()
    );
    exit::OK
}

/// `nivis state migrate`: copies the local state file into the configured (remote) backend.
pub fn migrate(args: &StateArgs, force: bool) -> i32 {
    let backend = match for_state_command(args) {
        Ok(b) => b,
        Err(e) => return fail(&e),
    };
    let local = match Backend::configure(None, &[], &args.env, &super::absolute(&args.state)) {
        Ok(Backend::Local { path, .. }) => path,
        Ok(other) => return fail(&format!("unexpected local backend {other:?}")),
        Err(e) => return fail(&e),
    };
    if !local.exists() {
        return fail(&format!(
            "there is no local state at {} to migrate (use --state to name it)",
            local.display()
        ));
    }
    let state = match Store::read_only(&local) {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let mut target =
        match backend.open_for_migration(LockHolder::current("nivis state migrate"), None) {
            Ok(t) => t,
            Err(e) => return fail(&e),
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
            outln!("{msg}");
            exit::OK
        } else {
            fail(&msg)
        };
    }
    let count = state.len();
    let url = backend.describe();
    if let Err(e) = target.replace(state).and_then(|()| target.close()) {
        return fail(&e);
    }
    outln!(
        "Migrated {count} resource(s) from {} to {url}. The local file was left as it was: move \
         it aside (e.g. `mv {0} {0}.migrated`) so that nothing reads it by mistake.",
        local.display()
    );
    exit::OK
}

/// `nivis force-unlock LOCK_ID`, for whichever backend holds the state: the id must name the
/// lock; a holder alive on this host keeps it unless `--force`; on a terminal the user confirms
/// (unless `--force`).
pub fn force_unlock(args: &ForceUnlockArgs) -> i32 {
    let backend = match for_state_command(&args.state) {
        Ok(b) => b,
        Err(e) => return fail(&e),
    };
    let ask = !args.force && std::io::stdin().is_terminal();
    let mut confirm = |holder: Option<&LockHolder>| {
        if !ask {
            return true;
        }
        match holder {
            Some(h) => outln!("The state lock of {} is held by {h}.", backend.describe()),
            None => outln!("The state lock of {} names no holder.", backend.describe()),
        }
        confirm_prompt(
            "Remove it? If that process still runs, two commands can then write the state at once.",
        )
    };
    match backend.force_unlock(&args.lock_id, args.force, &mut confirm) {
        Ok(result @ ForceUnlock::Declined) => {
            outln!("{result}");
            exit::ERROR
        }
        Ok(result) => {
            outln!("{result}");
            exit::OK
        }
        Err(e) => fail(&e),
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

/// Where the run directory of `backend` is keyed: its description.
pub fn identity(backend: &Backend) -> PathBuf {
    PathBuf::from(backend.describe())
}
