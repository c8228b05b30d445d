//! What a phase's owner asks of the run it is part of (the engine, or a stage test's host):
//! where events go, the run's options, and the evaluation waves that join a phase.
//!
//! Not: how a phase runs (`phase_owner`), nor the waves' rules (`waves`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::engine::analysis::Analysis;
use crate::engine::error::EngineError;
use crate::engine::evaluate::Beside;
use crate::engine::events::Sink;
use crate::engine::node;
use crate::engine::Options;
use crate::ir::Ir;
use crate::provider::Provider;
use crate::sched;
use crate::state::{LockedStore, StateFile};

/// What a phase's owner needs from the run it is part of: where events go, the run's options,
/// and (apply mode) the evaluation waves that join the phase while it runs (DESIGN §89).
pub(in crate::engine) trait PhaseHost {
    /// Where the phase's events go.
    fn sink(&mut self) -> &mut dyn Sink;
    /// The run's options.
    fn opts(&self) -> &Options;
    /// Whether evaluation waves may join this phase (else it runs only its own nodes).
    fn streams(&self) -> bool {
        false
    }
    /// Starts Nix's evaluation for wave `wave` with a ledger built from `state` (committed
    /// records) beside the running phase; `waker` wakes the phase's loop when it ends.
    fn evaluate_wave(
        &mut self,
        _state: &StateFile,
        _wave: u32,
        _waker: sched::Waker,
    ) -> Result<Beside, EngineError> {
        Err(EngineError::Io("this phase does not evaluate".into()))
    }
    /// The IR of the evaluation `beside` for wave `wave` (`state`: the records now).
    fn wave_evaluated(
        &mut self,
        _beside: Beside,
        _state: &StateFile,
        _wave: u32,
    ) -> Result<Ir, EngineError> {
        Err(EngineError::Io("this phase does not evaluate".into()))
    }
    /// How long the latest evaluation took.
    fn evaluation_time(&self) -> Duration {
        Duration::ZERO
    }
    /// The analysis of a wave's IR, with what the run settled so far.
    fn analyse_wave<'i>(&self, ir: &'i Ir, state: &StateFile) -> Result<Analysis<'i>, EngineError>;
    /// Before a wave's nodes (`analysis.run`) change anything: its policies checked, its
    /// providers started and its references checked. Returns the wave's running providers
    /// and the data sources its policy preview read (the apply uses them).
    fn admit_wave(
        &mut self,
        _ir: &Ir,
        _analysis: &Analysis<'_>,
        _holder: &mut dyn LockedStore,
        _wave: u32,
    ) -> Result<Admitted, EngineError> {
        Err(EngineError::Io("this phase does not evaluate".into()))
    }
    /// `id` settled with configuration fingerprint `fingerprint`: later analyses need not run
    /// it again.
    fn settled(&mut self, _id: &str, _fingerprint: String) {}
}

/// What [`PhaseHost::admit_wave`] gives a wave.
pub(in crate::engine) type Admitted = (HashMap<String, Arc<dyn Provider>>, node::Previewed);
