//! Starting and configuring the providers a phase needs, and stopping them on Ctrl-C.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::error::EngineError;
use super::events::{Event, Sink};
use super::resolve::{resolve, Lookup};
use super::{interrupt_flag, node, Engine};
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::Ir;
use crate::provider::Provider;
use crate::state::StateFile;

impl Engine<'_> {
    /// Starts and configures the providers the given nodes use.
    pub(super) fn prepare_providers(
        &mut self,
        ir: &Ir,
        state: &StateFile,
        ids: &[String],
        configure: bool,
    ) -> Result<(), EngineError> {
        let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let needed: BTreeSet<&str> = ir
            .resources
            .iter()
            .chain(ir.data.iter())
            .filter(|n| wanted.contains(n.id.as_str()))
            .map(|n| n.provider.as_str())
            .chain(
                (ir.ephemeral.iter())
                    .filter(|e| wanted.contains(e.id.as_str()))
                    .map(|e| e.provider.as_str()),
            )
            .chain(
                ids.iter()
                    .filter_map(|id| state.get(id).map(|r| r.provider.as_str())),
            )
            .collect();
        let mut diags = Diagnostics::new();
        for pid in needed {
            let Some(decl) = ir.providers.get(pid) else {
                diags.push(Diagnostic::error(format!(
                    "provider {pid} is no longer declared, but resources in state use it; declare it again or remove them with `nivis state rm`"
                )));
                continue;
            };
            match self.providers.start(pid, decl) {
                Ok((p, info)) => {
                    if info.is_some() {
                        self.live.lock().expect("live providers").push(p);
                    }
                }
                Err(d) => {
                    diags.extend(d);
                    continue;
                }
            }
            if !configure || self.providers.is_configured(pid) {
                continue;
            }
            let lookup = |id: &str| match state.get(id) {
                Some(rs) => Lookup::Settled(&rs.attributes, &rs.sensitive_paths),
                None => Lookup::Pending,
            };
            let resolved = resolve(&decl.config, &lookup, &self.opts.redactor);
            let provider = self
                .providers
                .get(pid, decl)
                .map_err(EngineError::Diagnostics)?;
            let block = provider.schema().provider.block.clone();
            match node::conform_config(&block, &resolved.value, &format!("provider {pid}: ")) {
                Ok(config) => {
                    if let Err(d) = self.providers.configure(pid, &config) {
                        diags.extend(d);
                    }
                }
                Err(d) => diags.extend(d),
            }
        }
        if diags.has_errors() {
            return Err(EngineError::Diagnostics(diags));
        }
        for w in diags.warnings() {
            self.sink.event(Event::Warning(w.clone()));
        }
        Ok(())
    }

    /// The running providers `pids` (IR provider ids, repeats allowed), started if needed, by
    /// id: what a stage gets instead of the engine's provider set. Configuring them is
    /// [`Engine::prepare_providers`]'s.
    pub(super) fn running<'p>(
        &mut self,
        ir: &Ir,
        pids: impl IntoIterator<Item = &'p str>,
    ) -> Result<HashMap<String, Arc<dyn Provider>>, EngineError> {
        let mut running = HashMap::new();
        for pid in pids {
            if running.contains_key(pid) {
                continue;
            }
            let Some(decl) = ir.providers.get(pid) else {
                return Err(EngineError::Diagnostics(Diagnostic::error(format!(
                    "provider {pid} is no longer declared, but resources in state use it; declare it again or remove them with `nivis state rm`"
                )).into()));
            };
            let provider = (self.providers.get(pid, decl)).map_err(EngineError::Diagnostics)?;
            running.insert(pid.to_string(), provider);
        }
        Ok(running)
    }

    /// Starts a thread that calls StopProvider on every live provider when Ctrl-C is pressed.
    pub(super) fn watch_interrupts(&self) -> Arc<AtomicBool> {
        let done = Arc::new(AtomicBool::new(false));
        let live = Arc::clone(&self.live);
        let done2 = Arc::clone(&done);
        std::thread::spawn(move || {
            while !done2.load(Ordering::SeqCst) {
                if interrupt_flag().load(Ordering::SeqCst) {
                    for p in live.lock().map(|l| l.clone()).unwrap_or_default() {
                        let _ = p.stop();
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        done
    }
}
