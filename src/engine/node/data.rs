//! A data source's turn: read it now when its configuration is known, else plan the read.

use serde_json::Value as Json;

use super::record::{display_changes, marked_sensitive, record, schema_sensitive_paths};
use super::{conform, err, EarlierRead, NodeInput, NodeOutput, NodeProgress, PlannedObject};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::events::Action;
use crate::plan;
use crate::schema::Block;
use crate::state::{Change, ResourceKind, ResourceState};
use crate::value::{self, Value};

// Long because it is the data-source sequence (conform, validate, plan or read, check, record);
// each step returns on failure.
pub(super) fn run_data(input: &NodeInput, report: &dyn Fn(NodeProgress)) -> NodeOutput {
    let schema = input.provider.schema();
    let Some(s) = schema.data_sources.get(&input.type_name) else {
        return NodeOutput::failed(
            err(format!(
                "provider {} has no data source {:?}",
                input.provider_id, input.type_name
            )),
            None,
        );
    };
    let config = match conform(&s.block, &input.config) {
        Ok(c) => c,
        Err(d) => return NodeOutput::failed(d, None),
    };
    let mut diags = match input
        .provider
        .validate_data_config(&input.type_name, &config)
    {
        Ok(d) => d,
        Err(d) => return NodeOutput::failed(d, None),
    };
    if diags.has_errors() {
        return NodeOutput::failed(diags, None);
    }
    if !config.is_known() {
        // Read later, once the configuration is known.
        let planned = plan::planned_unknown_for_data(&s.block, &config);
        let changes = display_changes(
            &s.block,
            &Value::Null,
            &planned,
            &[],
            &marked_sensitive(input),
        );
        return NodeOutput {
            action: Some(Action::Read),
            changes,
            commit: None,
            drift: None,
            diagnostics: diags,
            ok: true,
            elapsed: Default::default(),
            deposed: Vec::new(),
            planned_object: Some(PlannedObject {
                sensitive: schema_sensitive_paths(&s.block, &planned),
                value: planned,
                changes_outputs: true,
                read_with: None,
            }),
            plan_made: None,
            in_doubt: false,
        };
    }
    let earlier = match earlier_result(input, &s.block, &config) {
        Ok(earlier) => earlier,
        Err(d) => return NodeOutput::failed(d, Some(Action::Read)),
    };
    if input.mode.applies() && earlier.is_none() {
        report(NodeProgress::Applying(Action::Read, Vec::new()));
    }
    let (state, read_diags) = match earlier {
        Some(result) => (result, Diagnostics::new()),
        None => match input.provider.read_data_source(&input.type_name, &config) {
            Ok(r) => r,
            Err(d) => return NodeOutput::failed(d, Some(Action::Read)),
        },
    };
    diags.extend(read_diags);
    if diags.has_errors() {
        return NodeOutput::failed(diags, Some(Action::Read));
    }
    if state.is_null() {
        diags.push(Diagnostic::error(
            "provider returned no object for the data source",
        ));
        return NodeOutput::failed(diags, Some(Action::Read));
    }
    if !state.is_known() {
        diags.push(Diagnostic::error(
            "provider returned unknown values for the data source",
        ));
        return NodeOutput::failed(diags, Some(Action::Read));
    }
    let ty = s.block.implied_type();
    let record = match record(
        input,
        &s.block,
        &ty,
        &state,
        &[],
        s.version,
        ResourceKind::Data,
    ) {
        Ok(r) => r,
        Err(d) => return NodeOutput::failed(d, Some(Action::Read)),
    };
    if let Err(d) = check_saved_digest(input, &record) {
        return NodeOutput::failed(d, Some(Action::Read));
    }
    // A read with a known configuration happens now, during plan too; only reads deferred to
    // apply (unknown configuration) are shown as planned actions.
    let action = if !input.mode.applies() {
        Action::NoOp
    } else {
        Action::Read
    };
    let planned_object = PlannedObject {
        changes_outputs: input
            .prior
            .as_ref()
            .is_none_or(|p| p.attributes != record.attributes),
        sensitive: record.sensitive_paths.clone(),
        value: state,
        read_with: Some(config),
    };
    NodeOutput {
        action: Some(action),
        changes: Vec::new(),
        commit: Some(Change::Put(record)),
        drift: None,
        diagnostics: diags,
        ok: true,
        elapsed: Default::default(),
        deposed: Vec::new(),
        planned_object: Some(planned_object),
        plan_made: None,
        in_doubt: false,
    }
}

/// The result of a read made earlier for this phase, if it was made with this configuration:
/// this run's plan's (`Here`), or the saved plan's when it holds the result itself. A saved
/// read made with another configuration refuses: the plan showed values nobody can apply.
fn earlier_result(
    input: &NodeInput,
    block: &Block,
    config: &Value,
) -> Result<Option<Value>, Diagnostics> {
    match &input.earlier_read {
        None => Ok(None),
        Some(EarlierRead::Here(read)) => {
            Ok(plan::values_equal(&read.config, config).then(|| read.result.clone()))
        }
        Some(EarlierRead::Saved(saved)) => {
            if config_digest(config) != saved.config_sha256 {
                return Err(Diagnostic::error(format!(
                    "data source {} is configured differently than when the saved plan read it; nothing was changed",
                    input.id
                ))
                .with_detail("Run `nivis plan --out FILE` again, review it, and apply that.")
                .into());
            }
            let Some(result) = &saved.result else {
                return Ok(None);
            };
            value::json::from_state_json(result, &block.implied_type())
                .map(Some)
                .map_err(|e| {
                    err(format!(
                        "the saved plan's result of {} does not fit its schema: {e}",
                        input.id
                    ))
                })
        }
    }
}

/// The digest of a data source's configuration, as saved plans record it.
fn config_digest(config: &Value) -> String {
    let plain = value::json::to_plain_json(config).unwrap_or(Json::Null);
    crate::engine::plan_file::sha256(crate::engine::plan_file::canonical(&plain).as_bytes())
}

/// A data source the saved plan holds only as a digest (its result is secret) was read
/// again: the answer must be the one the plan was made with.
fn check_saved_digest(input: &NodeInput, record: &ResourceState) -> Result<(), Diagnostics> {
    let Some(EarlierRead::Saved(saved)) = &input.earlier_read else {
        return Ok(());
    };
    let Some(digest) = &saved.result_sha256 else {
        return Ok(());
    };
    if crate::engine::plan_file::result_digest(&record.attributes) == *digest {
        return Ok(());
    }
    Err(Diagnostic::error(format!(
        "data source {} reads differently now than when the saved plan was made (its result holds a secret, so the plan kept only its digest); nothing was changed",
        input.id
    ))
    .with_detail(
        "Applying a saved plan uses the values it showed. Run `nivis plan --out FILE` again, \
         review it, and apply that.",
    )
    .into())
}
