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

use sha2::{Digest, Sha256};

use super::answers::{Answers, PlanConfig};
use super::refresh::Drift;
use super::NodeInput;
use crate::diag::Diagnostics;
use crate::provider::PlanResponse;
use crate::schema::Block;
use crate::value::{msgpack, PathStep, Type, Value};

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

/// The digest of a managed resource turn's inputs: its conforming configuration, its record,
/// `--replace` and the fired triggers. A kept plan is used only by a turn with the same digest.
/// It is a digest (32 bytes) rather than the inputs themselves because the inputs would cost
/// more memory than the kept answers (DESIGN §106).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct InputsDigest([u8; 32]);

impl InputsDigest {
    /// The digest of `input`'s turn, whose conforming configuration is `config` of type `ty`;
    /// `None` when an input cannot be encoded (then nothing is kept or used).
    pub(super) fn of(input: &NodeInput, config: &Value, ty: &Type) -> Option<InputsDigest> {
        let mut h = Sha256::new();
        let config = msgpack::encode(config, ty).ok()?;
        h.update((config.len() as u64).to_le_bytes());
        h.update(&config);
        match &input.prior {
            None => h.update([0]),
            Some(record) => {
                h.update([1]);
                // The record's JSON: equal records, cloned from one state, write equal bytes.
                serde_json::to_writer(&mut h, record).ok()?;
            }
        }
        h.update([0, u8::from(input.force_replace)]);
        for trigger in &input.triggers.fired {
            h.update((trigger.len() as u64).to_le_bytes());
            h.update(trigger.as_bytes());
        }
        Some(InputsDigest(h.finalize().into()))
    }
}

/// A managed resource planned by this phase's plan: the digest of the inputs of the turn that
/// planned it, and what its provider answered. The provider's answers depend on nothing else,
/// so a turn with the same inputs uses them; one whose inputs changed (a value unknown in the
/// plan is known now, the record changed) asks again.
///
/// Kept small, since a preview keeps one per resource of its phase: the objects are packed as
/// msgpack by the resource's type (a map in a [`Value`] costs about 1 KB; packed, a few dozen
/// bytes), and the plan's configuration is not kept but shaped again from the turn's
/// configuration and the current object ([`PlanConfig::of`]).
#[derive(Debug)]
pub(in crate::engine) struct EarlierPlan {
    inputs: InputsDigest,
    diags: Diagnostics,
    /// The current object, packed.
    prior: Vec<u8>,
    prior_private: Vec<u8>,
    drift: Option<Drift>,
    tainted: bool,
    /// The plan's answer; its planned object packed.
    planned_state: Vec<u8>,
    requires_replace: Vec<Vec<PathStep>>,
    planned_private: Vec<u8>,
    legacy_type_system: bool,
    plan_diags: Diagnostics,
}

impl EarlierPlan {
    /// What to keep of `answers`, given by a turn with `inputs` for a resource of type `ty`;
    /// `None` when an object cannot be packed (then the apply asks again).
    pub(super) fn keep(inputs: InputsDigest, answers: &Answers, ty: &Type) -> Option<Self> {
        let plan = &answers.plan;
        Some(EarlierPlan {
            inputs,
            diags: answers.diags.clone(),
            prior: msgpack::encode(&answers.prior, ty).ok()?,
            prior_private: answers.prior_private.clone(),
            drift: answers.drift.clone(),
            tainted: answers.tainted,
            planned_state: msgpack::encode(&plan.planned_state, ty).ok()?,
            requires_replace: plan.requires_replace.clone(),
            planned_private: plan.planned_private.clone(),
            legacy_type_system: plan.legacy_type_system,
            plan_diags: plan.diagnostics.clone(),
        })
    }

    /// Whether a turn with `inputs` has the inputs this plan was made with.
    pub(super) fn made_with(&self, inputs: InputsDigest) -> bool {
        self.inputs == inputs
    }

    /// The current object and the planned object unpacked; `None` if either does not decode
    /// (then the apply asks again).
    pub(super) fn decoded(&self, ty: &Type) -> Option<(Value, Value)> {
        let prior = msgpack::decode(&self.prior, ty).ok()?;
        let planned = msgpack::decode(&self.planned_state, ty).ok()?;
        Some((prior, planned))
    }

    /// The answers again, for `input`'s turn (made with this plan's inputs) whose conforming
    /// configuration is `config`, from the objects [`EarlierPlan::decoded`] unpacked.
    pub(super) fn answers(
        &self,
        (prior, planned_state): (Value, Value),
        input: &NodeInput,
        block: &Block,
        config: Value,
    ) -> Answers {
        let shaped = PlanConfig::of(input, block, config, &prior, self.tainted);
        Answers {
            diags: self.diags.clone(),
            prior,
            prior_private: self.prior_private.clone(),
            drift: self.drift.clone(),
            tainted: self.tainted,
            shaped,
            plan: PlanResponse {
                planned_state,
                requires_replace: self.requires_replace.clone(),
                planned_private: self.planned_private.clone(),
                legacy_type_system: self.legacy_type_system,
                diagnostics: self.plan_diags.clone(),
            },
        }
    }
}
