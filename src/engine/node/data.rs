//! A data source's turn: read it now when its configuration is known, else plan the read.

#[allow(unused_imports)]
use super::*;

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
            }),
        };
    }
    if input.mode.applies() {
        report(NodeProgress::Applying(Action::Read, Vec::new()));
    }
    let (state, read_diags) = match input.provider.read_data_source(&input.type_name, &config) {
        Ok(r) => r,
        Err(d) => return NodeOutput::failed(d, Some(Action::Read)),
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
    // A read with a known configuration happens now, during plan too; only reads deferred to
    // apply (unknown configuration) are shown as planned actions.
    let action = if input.mode == Mode::Plan {
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
    }
}
