//! Ephemeral resources in a run: opened when their configuration is known, renewed when the
//! provider asks, closed when the run ends, and the uses of their values checked.
//!
//! Owns: [`EphemeralSet`], the results held open for this run (handed to Nix through the
//! private channel, never to the ledger or the state), its renewal thread, and closing: the set
//! closes everything it holds when it is dropped, so the end of a run, every error path and
//! Ctrl-C (which ends the run) close what was opened. Also the rule of where an ephemeral value
//! may go: a managed resource's write-only attributes, provider configurations and other
//! ephemeral resources' configurations; anywhere else the run stops, naming the path, before
//! anything is planned. Not: the provider calls' encoding (`plugin`), evaluating Nix.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use serde_json::Value as Json;

use super::node::conform_config;
use super::resolve::{resolve, Lookup};
use super::{Engine, EngineError};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::{render_path, EphemeralNode, Ir, Node, NodeKind, PathStep, Tree};
use crate::provider::Provider;
use crate::schema::{Block, BlockNesting};
use crate::state::StateFile;
use crate::value;

/// One open ephemeral resource.
struct Opened {
    provider: Arc<dyn Provider>,
    type_name: String,
    /// The configuration it was opened with (a changed one closes it and opens anew).
    config: Json,
    /// Its result, for the channel.
    result: Json,
    private: Option<Vec<u8>>,
    renew_at: Option<SystemTime>,
}

type Held = Arc<Mutex<BTreeMap<String, Opened>>>;

/// The ephemeral resources open in this run. Dropping it stops the renewals and closes each.
#[derive(Default)]
pub(super) struct EphemeralSet {
    held: Held,
    renewer: Option<(Sender<()>, JoinHandle<()>)>,
}

impl EphemeralSet {
    /// The results held open, by id: the channel's `ephemeral` section.
    pub(super) fn results(&self) -> BTreeMap<String, Json> {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.iter()
            .map(|(id, o)| (id.clone(), o.result.clone()))
            .collect()
    }

    fn is_open_with(&self, id: &str, config: &Json) -> bool {
        let held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        held.get(id).is_some_and(|o| &o.config == config)
    }

    fn insert(&mut self, id: &str, opened: Opened) {
        let renews = opened.renew_at.is_some();
        let held = Arc::clone(&self.held);
        held.lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.to_string(), opened);
        if renews && self.renewer.is_none() {
            let (stop, stopped) = crossbeam_channel::bounded(0);
            let thread = std::thread::spawn(move || renew_until_stopped(&held, &stopped));
            self.renewer = Some((stop, thread));
        }
    }

    /// Closes `id` if it is open.
    fn close(&self, id: &str) {
        let opened = self
            .held
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id);
        if let Some(o) = opened {
            close_one(id, &o);
        }
    }
}

impl Drop for EphemeralSet {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.renewer.take() {
            drop(stop);
            let _ = thread.join();
        }
        let held = std::mem::take(&mut *self.held.lock().unwrap_or_else(|p| p.into_inner()));
        for (id, o) in &held {
            close_one(id, o);
        }
    }
}

fn close_one(id: &str, o: &Opened) {
    match o
        .provider
        .close_ephemeral(&o.type_name, o.private.as_deref())
    {
        Ok(d) if !d.has_errors() => log::debug!("closed ephemeral resource {id}"),
        Ok(d) | Err(d) => log::warn!("ephemeral resource {id}: closing failed:\n{d}"),
    }
}

/// The renewal thread: renews each open resource at the time it asked for, until `stopped`
/// is disconnected.
fn renew_until_stopped(held: &Held, stopped: &Receiver<()>) {
    loop {
        let next = (held.lock().unwrap_or_else(|p| p.into_inner()).values())
            .filter_map(|o| o.renew_at)
            .min();
        let wait = next.map_or(Duration::from_secs(3600), |at| {
            at.duration_since(SystemTime::now()).unwrap_or_default()
        });
        match stopped.recv_timeout(wait) {
            Err(RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
        let now = SystemTime::now();
        for (id, o) in held
            .iter_mut()
            .filter(|(_, o)| o.renew_at.is_some_and(|at| at <= now))
        {
            match o
                .provider
                .renew_ephemeral(&o.type_name, o.private.as_deref())
            {
                Ok(r) if !r.diagnostics.has_errors() => {
                    o.private = r.private;
                    o.renew_at = r.renew_at;
                }
                Ok(r) => {
                    log::warn!(
                        "ephemeral resource {id}: renewal failed:\n{}",
                        r.diagnostics
                    );
                    o.renew_at = None;
                }
                Err(d) => {
                    log::warn!("ephemeral resource {id}: renewal failed:\n{d}");
                    o.renew_at = None;
                }
            }
        }
    }
}

/// Whether `path` (in a configuration of `block`) lies in a write-only attribute.
fn write_only_at(block: &Block, path: &[PathStep]) -> bool {
    let Some((PathStep::Key(name), rest)) = path.split_first() else {
        return false;
    };
    if let Some(a) = block.attributes.get(name) {
        return a.write_only;
    }
    let Some(nested) = block.block_types.get(name) else {
        return false;
    };
    let rest = match nested.nesting {
        BlockNesting::Single | BlockNesting::Group => rest,
        _ => rest.get(1..).unwrap_or_default(),
    };
    write_only_at(&nested.block, rest)
}

/// The paths in `tree` that hold an ephemeral value or a value waiting for one, with the
/// ephemeral resource it comes from (`None`: an `__ephemeral` value, already computed).
fn ephemeral_uses(tree: &Tree, ir: &Ir) -> Vec<(Vec<PathStep>, Option<String>)> {
    let mut out: Vec<_> = (tree.ephemeral_paths().into_iter())
        .map(|p| (p, None))
        .collect();
    tree.walk_leaves(|at, leaf| {
        if let Tree::Derived(inputs) = leaf {
            for i in inputs {
                if ir.ephemeral.iter().any(|e| e.id == i.resource) {
                    out.push((at.to_vec(), Some(i.resource.clone())));
                }
            }
        }
    });
    out
}

fn refusal(node: &Node, path: &[PathStep], from: Option<&str>) -> Diagnostic {
    let what = if node.kind == NodeKind::Data {
        "data source"
    } else {
        "resource"
    };
    let source = from.unwrap_or("an ephemeral resource");
    Diagnostic::error(format!(
        "{what} {}: config.{} takes a value computed from {source}, which is never stored; \
         ephemeral values may go only into write-only attributes, provider configurations and \
         other ephemeral resources",
        node.id,
        render_path(path)
    ))
    .with_detail(
        "Nothing was applied. Use the resource's write-only argument for it (often named \
         `..._wo`, with a `..._wo_version` to change it), or a value that may be stored.",
    )
}

impl Engine<'_> {
    /// Evaluates, opens the ephemeral resources that became ready, and evaluates again while
    /// that gives Nix new results; checks where ephemeral values go before anything is planned.
    pub(super) fn evaluate_with_ephemerals(
        &mut self,
        state: &StateFile,
        phase: u32,
    ) -> Result<Ir, EngineError> {
        let ir = self.evaluate_once(state, phase)?;
        self.with_ephemerals_open(ir, state, phase)
    }

    /// `ir`, just evaluated, or (when it declares ephemeral resources ready to open) the IR of
    /// the evaluation after they are open, until no more become ready.
    pub(super) fn with_ephemerals_open(
        &mut self,
        mut ir: Ir,
        state: &StateFile,
        phase: u32,
    ) -> Result<Ir, EngineError> {
        if ir.ephemeral.is_empty() || !self.open_ephemerals {
            return Ok(ir);
        }
        for _ in 0..=ir.ephemeral.len() {
            self.check_ephemeral_uses(&ir, state)?;
            if !self.open_ready_ephemerals(&ir, state)? {
                break;
            }
            ir = self.evaluate_once(state, phase)?;
        }
        self.check_ephemeral_uses(&ir, state)?;
        Ok(ir)
    }

    /// Refuses an ephemeral value anywhere but a write-only attribute of a managed resource.
    fn check_ephemeral_uses(&mut self, ir: &Ir, state: &StateFile) -> Result<(), EngineError> {
        let mut diags = Diagnostics::new();
        let mut typed = Vec::new();
        for node in ir.resources.iter().chain(ir.data.iter()) {
            for (path, from) in ephemeral_uses(&node.config, ir) {
                if node.kind == NodeKind::Data {
                    diags.push(refusal(node, &path, from.as_deref()));
                } else {
                    typed.push((node, path, from));
                }
            }
        }
        let ids: Vec<String> = typed.iter().map(|(n, _, _)| n.id.clone()).collect();
        if !typed.is_empty() {
            self.prepare_providers(ir, state, &ids, false)?;
        }
        for (node, path, from) in typed {
            let schema = self.providers.schema(&node.provider);
            let block = schema
                .and_then(|s| s.resource(&node.type_name))
                .map(|s| &s.block);
            if !block.is_some_and(|b| write_only_at(b, &path)) {
                diags.push(refusal(node, &path, from.as_deref()));
            }
        }
        if diags.has_errors() {
            return Err(EngineError::Diagnostics(diags));
        }
        Ok(())
    }

    /// Opens every ephemeral resource whose configuration is known and that is not open with
    /// that configuration yet; returns whether it opened any.
    fn open_ready_ephemerals(&mut self, ir: &Ir, state: &StateFile) -> Result<bool, EngineError> {
        let mut opened_any = false;
        for node in &ir.ephemeral {
            if !node.config.is_known() {
                continue;
            }
            let resolved = resolve(&node.config, &|_| Lookup::Pending, &self.opts.redactor);
            let config_json = value::json::to_plain_json(&resolved.value).unwrap_or(Json::Null);
            if self.ephemerals.is_open_with(&node.id, &config_json) {
                continue;
            }
            self.ephemerals.close(&node.id);
            let opened = self.open_one(ir, state, node, &resolved.value, config_json)?;
            self.ephemerals.insert(&node.id, opened);
            opened_any = true;
        }
        Ok(opened_any)
    }

    fn open_one(
        &mut self,
        ir: &Ir,
        state: &StateFile,
        node: &EphemeralNode,
        config: &value::Value,
        config_json: Json,
    ) -> Result<Opened, EngineError> {
        let whose = format!("ephemeral resource {}: ", node.id);
        let failed = |d: Diagnostics| {
            EngineError::Diagnostics(Diagnostics(
                (d.0.into_iter())
                    .map(|mut x| {
                        x.summary = format!("{whose}{}", x.summary);
                        x
                    })
                    .collect(),
            ))
        };
        self.prepare_providers(ir, state, std::slice::from_ref(&node.id), true)?;
        let decl = &ir.providers[&node.provider];
        let provider = (self.providers.get(&node.provider, decl)).map_err(&failed)?;
        let Some(schema) = provider.schema().ephemeral_resource(&node.type_name) else {
            return Err(failed(
                Diagnostic::error(format!(
                    "provider {} has no ephemeral resource type {:?}",
                    node.provider, node.type_name
                ))
                .into(),
            ));
        };
        let config = conform_config(&schema.block, config, "").map_err(&failed)?;
        let checked = provider.validate_ephemeral_config(&node.type_name, &config);
        let checked = checked.map_err(&failed)?;
        if checked.has_errors() {
            return Err(failed(checked));
        }
        let opened = provider.open_ephemeral(&node.type_name, &config);
        let opened = opened.map_err(&failed)?;
        if opened.diagnostics.has_errors() {
            return Err(failed(opened.diagnostics));
        }
        self.opts.redactor.remember_value(&opened.result);
        let result = value::json::to_plain_json(&opened.result).unwrap_or(Json::Null);
        Ok(Opened {
            provider,
            type_name: node.type_name.clone(),
            config: config_json,
            result,
            private: opened.private,
            renew_at: opened.renew_at,
        })
    }
}
