//! What the plan of a phase learnt that the apply of the same phase uses instead of asking the
//! providers again (DESIGN §106): the data sources it read and the managed resources it planned.
//!
//! An apply previews its first phase (to stop before anything changes when a node cannot be
//! planned, and to show the plan it asks about), so without this every resource of that phase
//! would be refreshed and planned twice. Owns: what is kept, and when it may be used (a plan
//! only by a turn with the inputs it was made with). Not: the provider calls (`managed`,
//! `data`), or carrying what is kept from the preview to the apply (the engine's phases).

use std::collections::HashMap;

use serde_json::Value as Json;

use super::managed::Answers;
use super::NodeInput;
use crate::state::ResourceState;
use crate::value::Value;

/// The most nodes a phase may have for its preview to keep the managed resources' answers:
/// they cost about 7 KB a resource (measured at 100 000: 1.27 GB against 0.56 GB without, DESIGN
/// §106). The apply of a larger phase asks the providers again, one plan more per resource.
pub(in crate::engine) const KEPT_PLANS_MAX_NODES: usize = 20_000;

/// What a phase's plan kept for the apply of the phase: reads and plans, by resource address.
#[derive(Default)]
pub(in crate::engine) struct Previewed {
    /// The data sources read.
    pub(in crate::engine) reads: HashMap<String, DataRead>,
    /// The managed resources planned.
    pub(in crate::engine) plans: HashMap<String, Box<EarlierPlan>>,
}

impl Previewed {
    /// Adds what another preview (an evaluation wave's) kept.
    pub(in crate::engine) fn extend(&mut self, other: Previewed) {
        self.reads.extend(other.reads);
        self.plans.extend(other.plans);
    }
}

/// A data source's result read in this phase's plan: the apply of the phase uses it, so the
/// values the plan showed are the values applied.
#[derive(Debug, Clone)]
pub(in crate::engine) struct DataRead {
    /// The configuration it was read with.
    pub config: Value,
    /// The provider's answer.
    pub result: Value,
    /// The answer as state records it, and whether any part of it is sensitive.
    pub attributes: Json,
    /// Whether any part of the answer is sensitive.
    pub sensitive: bool,
}

/// A managed resource planned by this phase's plan: the inputs of the turn that planned it, and
/// what its provider answered. The provider's answers depend on nothing else, so a turn with
/// the same inputs uses them; one whose inputs changed (a value unknown in the plan is known
/// now, the record changed) asks again.
#[derive(Debug)]
pub(in crate::engine) struct EarlierPlan {
    config: Value,
    prior: Option<ResourceState>,
    force_replace: bool,
    fired: Vec<String>,
    /// What the provider answered.
    pub(super) answers: Answers,
}

impl EarlierPlan {
    /// The plan `input`'s turn made, with the provider's `answers`.
    pub(super) fn new(input: &NodeInput, answers: Answers) -> Self {
        EarlierPlan {
            config: input.config.clone(),
            prior: input.prior.clone(),
            force_replace: input.force_replace,
            fired: input.triggers.fired.clone(),
            answers,
        }
    }

    /// Whether `input`'s turn has the inputs this plan was made with.
    pub(super) fn made_with(&self, input: &NodeInput) -> bool {
        self.force_replace == input.force_replace
            && self.fired == input.triggers.fired
            && self.prior == input.prior
            && self.config == input.config
    }
}
