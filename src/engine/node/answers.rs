//! What a managed resource's provider answers while the resource is planned, asked in
//! OpenTofu's order: validate, the current object (upgraded, refreshed), `ignoreChanges`,
//! ProposedNew, the plan and the checks on it.
//!
//! Owns: the questions and the shape of their answers, and the configuration the plan is asked
//! with (conforming, `ignoreChanges` applied), which follows from the inputs and the current
//! object alone, so a kept answer (`previewed`) need not store it. Not: the action chosen from
//! the answers or anything applied (`managed`), or keeping answers for the apply (`previewed`).

use super::refresh::{current_object, Drift};
use super::NodeInput;
use crate::diag::{Diagnostic, Diagnostics};
use crate::ir::IgnorePath;
use crate::plan;
use crate::provider::{PlanRequest, PlanResponse};
use crate::schema::Block;
use crate::value::{PathStep, Value};

/// What the provider answered while a managed resource was planned: the validation's,
/// upgrade's, read's and plan's diagnostics (warnings only), the current object, and the plan.
/// The same inputs get the same answers, so the apply of a phase uses its preview's
/// (`previewed`) instead of asking again.
#[derive(Debug)]
pub(super) struct Answers {
    pub(super) diags: Diagnostics,
    /// The current object (upgraded, refreshed), its private data, and its drift.
    pub(super) prior: Value,
    pub(super) prior_private: Vec<u8>,
    pub(super) drift: Option<Drift>,
    /// Whether it is planned as a new object (tainted, `--replace`, a fired trigger).
    pub(super) tainted: bool,
    /// The configuration the plan was asked with (see [`PlanConfig`]).
    pub(super) shaped: PlanConfig,
    pub(super) plan: PlanResponse,
}

/// The configuration a plan is asked with, and what it is asked from.
#[derive(Debug)]
pub(super) struct PlanConfig {
    /// The configuration, conforming, with `ignoreChanges` applied.
    pub(super) config: Value,
    /// The configuration as written, when `ignoreChanges` changed it: what a replacement's new
    /// object is created from (OpenTofu plans a replacement from it; `ignoreChanges` shapes
    /// updates only).
    pub(super) written: Option<Value>,
    /// What the plan was asked from: the current object, or null for a new one.
    pub(super) plan_prior: Value,
}

impl PlanConfig {
    /// The plan's configuration for `input`, conforming `config`, given the current object
    /// `prior` and whether it is planned as a new object. A new object (tainted, forced) is
    /// planned from the configuration as written.
    pub(super) fn of(
        input: &NodeInput,
        block: &Block,
        config: Value,
        prior: &Value,
        tainted: bool,
    ) -> PlanConfig {
        let plan_prior = if tainted { Value::Null } else { prior.clone() };
        let ignore = &input.lifecycle.ignore_changes;
        if plan_prior.is_null() || ignore.is_empty() {
            return PlanConfig {
                config,
                written: None,
                plan_prior,
            };
        }
        let paths = ignore_paths(block, ignore);
        PlanConfig {
            config: plan::apply_ignore_changes(&config, prior, &paths),
            written: Some(config),
            plan_prior,
        }
    }

    /// The configuration a new object of this resource is created from (a replacement's): the
    /// configuration as written.
    pub(super) fn new_object_config(&self) -> &Value {
        self.written.as_ref().unwrap_or(&self.config)
    }
}

/// The provider's answers for a managed resource whose conforming configuration is `config`,
/// each step returning on failure.
pub(super) fn ask_provider(
    input: &NodeInput,
    block: &Block,
    config: Value,
) -> Result<Answers, Diagnostics> {
    let mut diags = input
        .provider
        .validate_resource_config(&input.type_name, &config)?;
    if diags.has_errors() {
        return Err(diags);
    }
    let (prior, prior_private, drift, tainted) = match &input.prior {
        Some(p) => {
            let (v, private, drift) = match current_object(input, block, p, &mut diags) {
                Ok(current) => current,
                Err(d) => {
                    diags.extend(d);
                    return Err(diags);
                }
            };
            // `--replace` plans the object as a tainted one is planned: a new object.
            // So does a fired `replaceTriggeredBy` trigger (DESIGN §103).
            let forced = input.force_replace || !input.triggers.fired.is_empty();
            (v, private, drift, p.is_tainted() || forced)
        }
        None => (Value::Null, Vec::new(), None, false),
    };
    let shaped = PlanConfig::of(input, block, config, &prior, tainted);
    let proposed = plan::proposed_new(block, &shaped.plan_prior, &shaped.config);
    let plan = match input.provider.plan_resource_change(PlanRequest {
        type_name: &input.type_name,
        prior_state: &shaped.plan_prior,
        proposed_new_state: &proposed,
        config: &shaped.config,
        prior_private: &prior_private,
    }) {
        Ok(p) => p,
        Err(d) => {
            diags.extend(d);
            return Err(diags);
        }
    };
    diags.extend(plan.diagnostics.clone());
    if diags.has_errors() {
        return Err(diags);
    }
    let legacy = plan.legacy_type_system;
    let (plan_prior, config) = (&shaped.plan_prior, &shaped.config);
    if let Err(d) = check_plan(block, plan_prior, config, &plan.planned_state, legacy) {
        diags.extend(d);
        return Err(diags);
    }
    Ok(Answers {
        diags,
        prior,
        prior_private,
        drift,
        tainted,
        shaped,
        plan,
    })
}

/// Checks a plan the way OpenTofu does; with the legacy SDK type system problems are warnings.
fn check_plan(
    block: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
    legacy: bool,
) -> Result<(), Diagnostics> {
    let problems = plan::assert_plan_valid(block, prior, config, planned);
    if problems.is_empty() {
        return Ok(());
    }
    if legacy {
        for p in problems {
            log::debug!("provider produced an invalid plan (tolerated for the legacy SDK): {p}");
        }
        return Ok(());
    }
    Err(Diagnostics(
        problems
            .into_iter()
            .map(|p| {
                Diagnostic::error("provider produced an invalid plan").with_detail(format!(
                    "{p}\nThis is a bug in the provider; please report it to its authors."
                ))
            })
            .collect(),
    ))
}

/// The attribute paths `ignoreChanges` names, `all` spelt out as every configurable attribute
/// and block of `block`.
pub(super) fn ignore_paths(block: &Block, ignore: &[IgnorePath]) -> Vec<Vec<PathStep>> {
    let mut out = Vec::new();
    for p in ignore {
        match p {
            IgnorePath::All => {
                for (name, attr) in &block.attributes {
                    if attr.optional || attr.required {
                        out.push(vec![PathStep::Attr(name.clone())]);
                    }
                }
                for name in block.block_types.keys() {
                    out.push(vec![PathStep::Attr(name.clone())]);
                }
            }
            IgnorePath::Path(steps) => out.push(crate::ir::value_path(steps)),
        }
    }
    out
}
