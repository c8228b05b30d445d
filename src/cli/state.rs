//! `nivis state list|show|rm|mv` and dispatch of the other state verbs (`pull`, `push`,
//! `migrate`: `cli::backend`; `replace-provider`: `cli::state_provider`).
//!
//! Owns: what these commands print (every value escaped, every sensitive path masked) and the
//! removal and renaming of records. Not: where the state is (`cli::backend`), nor the state's format.

use std::time::Duration;

use serde_json::Value as Json;

use super::args::{StateCommand, StateTarget};
use super::audit::AuditRecord;
use super::{backend, exit, fail};
use crate::render::{self, outln};
use crate::secrets::Redactor;
use crate::state::s3::Conversion;
use crate::state::{Change, Mutation, ResourceState};

// Long because it dispatches one arm per state verb.
pub(super) fn run(cmd: StateCommand, redactor: &Redactor, audit: &AuditRecord) -> i32 {
    match cmd {
        StateCommand::Pull { out, state } => backend::pull(&state, &out, redactor),
        StateCommand::Push {
            file,
            force,
            drop_records,
            state,
            lock,
        } => backend::push(
            &state,
            &file,
            backend::PushForce {
                force,
                drop_records,
            },
            lock.lock_timeout,
            redactor,
            audit,
        ),
        StateCommand::Restore {
            drop_records,
            state,
            lock,
        } => backend::restore(&state, drop_records, lock.lock_timeout, redactor, audit),
        StateCommand::Migrate {
            force,
            encrypt,
            decrypt,
            state,
            lock,
        } => match (encrypt, decrypt) {
            (true, _) => backend::convert(
                &state,
                Conversion::Encrypt,
                lock.lock_timeout,
                redactor,
                audit,
            ),
            (_, true) => backend::convert(
                &state,
                Conversion::Decrypt,
                lock.lock_timeout,
                redactor,
                audit,
            ),
            _ => backend::migrate(&state, force, lock.lock_timeout, redactor, audit),
        },
        StateCommand::List {
            addresses,
            state,
            json,
        } => match backend::read_project(&state.source, &state.state, redactor) {
            Ok((backend, identity, state)) => {
                // On stderr: scripts read the list from stdout.
                eprintln!(
                    "{}",
                    render::escape_text(
                        redactor,
                        &backend::state_header(&backend, identity.as_ref())
                    )
                );
                // Never written (an emptied state has a serial above 0): Terraform's "No state
                // file was found!", so a script listing the wrong place does not read "nothing".
                if state.serial == 0 && state.is_empty() {
                    return fail(
                        redactor,
                        &format!(
                        "No state found at {}: nothing was applied with it yet; choose the state \
                         with --state, --env or NIVIS_STATE",
                        backend.describe()
                    ),
                    );
                }
                let ids: Vec<&str> = state.ids().filter(|id| matches(id, &addresses)).collect();
                if json {
                    let ids =
                        Json::Array(ids.iter().map(|id| Json::String(id.to_string())).collect());
                    outln!("{}", render::json_text(redactor, &ids, false));
                } else {
                    for id in ids {
                        outln!("{}", render::escape(redactor, id));
                    }
                }
                exit::OK
            }
            Err(e) => fail(redactor, &e),
        },
        StateCommand::Show { id, state, json } => {
            match backend::read(&state.source, &state.state, redactor) {
                Ok((backend, state)) => match state.get(&id) {
                    Some(r) => {
                        show_resource(r, json, redactor);
                        exit::OK
                    }
                    None => fail(
                        redactor,
                        &format!(
                            "{id} is not in {}; `nivis state list` shows what is",
                            backend.describe()
                        ),
                    ),
                },
                Err(e) => fail(redactor, &e),
            }
        }
        StateCommand::Rm { ids, state, lock } => {
            remove(&ids, &state, lock.lock_timeout, redactor, audit)
        }
        StateCommand::Resolve {
            address,
            absent: _,
            state,
            lock,
        } => resolve_absent(&address, &state, lock.lock_timeout, redactor, audit),
        StateCommand::Mv {
            from,
            to,
            state,
            lock,
        } => rename(&from, &to, &state, lock.lock_timeout, redactor, audit),
        StateCommand::Repair {
            dry_run,
            state,
            lock,
        } => super::state_repair::run(&state, dry_run, lock.lock_timeout, redactor, audit),
        StateCommand::ReplaceProvider {
            from,
            to,
            auto_approve,
            state,
            lock,
        } => {
            let ask = super::state_provider::Replacement {
                from: &from,
                to: &to,
                auto_approve,
                wait: lock.lock_timeout,
                audit,
            };
            super::state_provider::run(&ask, &state, redactor)
        }
    }
}

/// Whether `id` is one of `addresses` or starts with one up to a `.` or `[` (every id when
/// none is given); an address ending in `.` matches what starts with it.
fn matches(id: &str, addresses: &[String]) -> bool {
    addresses.is_empty()
        || addresses.iter().any(|a| {
            id.strip_prefix(a.as_str()).is_some_and(|rest| {
                rest.is_empty() || a.ends_with('.') || rest.starts_with(['.', '['])
            })
        })
}

/// Bare `nivis show` (Terraform's `show` without a plan file): every resource in the state with
/// its recorded attributes, every sensitive path masked; `--json`: `{"resources": [...]}`, each
/// as `state show --json` prints one.
pub(super) fn show_all(target: &StateTarget, json: bool, redactor: &Redactor) -> i32 {
    let (backend, state) = match backend::read(&target.source, &target.state, redactor) {
        Ok(read) => read,
        Err(e) => return fail(redactor, &e),
    };
    if json {
        let resources: Vec<Json> = state.iter().map(resource_json).collect();
        let doc = serde_json::json!({ "resources": resources });
        outln!("{}", render::json_text(redactor, &doc, false));
        return exit::OK;
    }
    if state.is_empty() {
        outln!(
            "No state: nothing is recorded in {}.",
            render::escape(redactor, &backend.describe())
        );
        return exit::OK;
    }
    for (i, r) in state.iter().enumerate() {
        if i > 0 {
            outln!();
        }
        show_resource(r, false, redactor);
    }
    exit::OK
}

/// A record as `state show --json` prints it: sensitive paths masked.
fn resource_json(r: &ResourceState) -> Json {
    use crate::secrets::{mask_paths, JSON_MASK};
    let attrs = mask_paths(&r.attributes, &r.sensitive_paths, JSON_MASK);
    serde_json::json!({"id": r.id, "type": r.type_name, "provider": r.provider, "attributes": attrs})
}

/// `state show`: the recorded attributes, every sensitive path masked.
fn show_resource(r: &ResourceState, json: bool, redactor: &Redactor) {
    use crate::secrets::{mask_paths, MASK};
    if json {
        outln!("{}", render::json_text(redactor, &resource_json(r), false));
        return;
    }
    outln!(
        "{} ({})",
        render::escape(redactor, &r.id),
        render::escape(redactor, &r.type_name)
    );
    if let Json::Object(m) = mask_paths(&r.attributes, &r.sensitive_paths, MASK) {
        for (k, v) in &m {
            let shown = match v {
                Json::String(s) => render::escape(redactor, s),
                other => render::json_text(redactor, other, false),
            };
            outln!("  {} = {shown}", render::escape(redactor, k));
        }
    }
}

/// `state mv`: renames a record (and the dependencies naming it) in one journaled commit;
/// the real object is not touched.
fn rename(
    from: &str,
    to: &str,
    target: &StateTarget,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let kind = |id: &str| {
        id.rsplit_once('.')
            .map(|(k, n)| (k.to_string(), n.to_string()))
    };
    match (kind(from), kind(to)) {
        (Some((a, _)), Some((b, name))) if a == b && crate::value::is_identifier(&name) => {}
        _ => {
            return fail(
                redactor,
                &format!(
                    "cannot move {from} to {to}: the new address must keep the provider and type \
                 (<provider>.<type>.) and change only the name, an identifier"
                ),
            )
        }
    }
    let mut store = match backend::open_locked(target, "nivis state mv", wait, redactor, audit) {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    if !store.state().contains(from) {
        return fail(redactor, &format!(
            "cannot move {from} to {to}: {from} is not in state (`nivis state list` shows what is); nothing was changed"
        ));
    }
    if store.state().contains(to) {
        return fail(
            redactor,
            &format!("cannot move {from} to {to}: {to} is already in state; nothing was changed"),
        );
    }
    let changes = store.state().rename(from, to);
    if let Err(e) = store.commit(&changes, Mutation::for_state_verb("state mv")) {
        return fail(redactor, &e);
    }
    audit.change(to, &format!("move from {from}"));
    if let Err(e) = store.close() {
        return fail(redactor, &e);
    }
    outln!(
        "Moved {} to {} in state (the real object was not touched).",
        render::escape(redactor, from),
        render::escape(redactor, to)
    );
    exit::OK
}

/// `state resolve ADDRESS --absent`: settles the operation pending on `address`, whose object
/// the user says does not exist (DESIGN §97).
fn resolve_absent(
    address: &str,
    target: &StateTarget,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let mut store = match backend::open_locked(target, "nivis state resolve", wait, redactor, audit)
    {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    let Some(pending) = store.state().pending.get(address) else {
        let known: Vec<&str> = store.state().pending.keys().map(String::as_str).collect();
        let listed = match known.is_empty() {
            true => "the state notes no pending operation".to_string(),
            false => format!(
                "the state notes pending operations on: {}",
                known.join(", ")
            ),
        };
        return fail(
            redactor,
            &format!("no operation is pending on {address}; {listed}; nothing was changed"),
        );
    };
    let word = pending.action.word();
    let change = Change::Settle(address.to_string());
    if let Err(e) = store.commit(&[change], Mutation::for_state_verb("state resolve")) {
        return fail(redactor, &e);
    }
    audit.change(address, &format!("resolve pending {word} (absent)"));
    if let Err(e) = store.close() {
        return fail(redactor, &e);
    }
    outln!(
        "The pending {word} of {} is settled as absent: the next apply creates it.",
        render::escape(redactor, address)
    );
    exit::OK
}

/// `state rm`: forgets the records, leaving the real objects alone.
fn remove(
    ids: &[String],
    target: &StateTarget,
    wait: Option<Duration>,
    redactor: &Redactor,
    audit: &AuditRecord,
) -> i32 {
    let mut store = match backend::open_locked(target, "nivis state rm", wait, redactor, audit) {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    for id in ids {
        if !store.state().contains(id) {
            return fail(
                redactor,
                &format!("{id} is not in state; nothing was removed"),
            );
        }
    }
    let changes: Vec<Change> = ids.iter().map(|id| Change::Remove(id.clone())).collect();
    if let Err(e) = store.commit(&changes, Mutation::for_state_verb("state rm")) {
        return fail(redactor, &e);
    }
    for id in ids {
        audit.change(id, "forget");
    }
    if let Err(e) = store.close() {
        return fail(redactor, &e);
    }
    for id in ids {
        outln!(
            "Removed {} from state (the real object was not destroyed).",
            render::escape(redactor, id)
        );
    }
    exit::OK
}
