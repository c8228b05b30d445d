//! `nivis state list|show|rm` and dispatch of the other state verbs (`pull`, `push`,
//! `migrate`: `cli::backend`).
//!
//! Owns: what these commands print (every value escaped, every sensitive path masked) and the
//! removal of records. Not: where the state is (`cli::backend`), nor the state's format.

use serde_json::Value as Json;

use super::args::{StateCommand, StateTarget};
use super::{backend, exit, fail};
use crate::render::{self, outln};
use crate::state::{Change, LockHolder, ResourceState};

pub fn run(cmd: StateCommand) -> i32 {
    match cmd {
        StateCommand::Pull { out, state } => backend::pull(&state, &out),
        StateCommand::Push { file, force, state } => backend::push(&state, &file, force),
        StateCommand::Migrate { force, state } => backend::migrate(&state, force),
        StateCommand::List { state, json } => match backend::read(&state.source, &state.state) {
            Ok((_, state)) => {
                if json {
                    let ids = Json::Array(state.ids().map(|id| Json::String(id.into())).collect());
                    outln!("{}", render::json_text(&ids, false));
                } else {
                    for id in state.ids() {
                        outln!("{}", render::escape(id));
                    }
                }
                exit::OK
            }
            Err(e) => fail(&e),
        },
        StateCommand::Show { id, state, json } => {
            match backend::read(&state.source, &state.state) {
                Ok((backend, state)) => match state.get(&id) {
                    Some(r) => {
                        show_resource(r, json);
                        exit::OK
                    }
                    None => fail(&format!(
                        "{id} is not in {}; `nivis state list` shows what is",
                        backend.describe()
                    )),
                },
                Err(e) => fail(&e),
            }
        }
        StateCommand::Rm { ids, state } => remove(&ids, &state),
    }
}

/// `state show`: the recorded attributes, every sensitive path masked.
fn show_resource(r: &ResourceState, json: bool) {
    use crate::secrets::{mask_paths, JSON_MASK, MASK};
    if json {
        let attrs = mask_paths(&r.attributes, &r.sensitive_paths, JSON_MASK);
        let doc = serde_json::json!({"id": r.id, "type": r.type_name, "provider": r.provider, "attributes": attrs});
        outln!("{}", render::json_text(&doc, false));
        return;
    }
    outln!(
        "{} ({})",
        render::escape(&r.id),
        render::escape(&r.type_name)
    );
    if let Json::Object(m) = mask_paths(&r.attributes, &r.sensitive_paths, MASK) {
        for (k, v) in &m {
            let shown = match v {
                Json::String(s) => render::escape(s),
                other => render::json_text(other, false),
            };
            outln!("  {} = {shown}", render::escape(k));
        }
    }
}

/// `state rm`: forgets the records, leaving the real objects alone.
fn remove(ids: &[String], target: &StateTarget) -> i32 {
    let opened = backend::of(&target.source, &target.state).and_then(|b| {
        b.open(LockHolder::current("nivis state rm"), None)
            .map_err(|e| e.to_string())
    });
    let mut store = match opened {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    for id in ids {
        if !store.state().contains(id) {
            return fail(&format!("{id} is not in state; nothing was removed"));
        }
    }
    let changes: Vec<Change> = ids.iter().map(|id| Change::Remove(id.clone())).collect();
    if let Err(e) = store.commit(&changes) {
        return fail(&e);
    }
    if let Err(e) = store.close() {
        return fail(&e);
    }
    for id in ids {
        outln!(
            "Removed {} from state (the real object was not destroyed).",
            render::escape(id)
        );
    }
    exit::OK
}
