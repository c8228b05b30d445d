//! AssertPlanValid: the checks core makes on a provider's planned object.

use super::shape::{child, NULL};
use std::collections::BTreeMap;

use super::{at, RuleViolation};
use crate::schema::{
    AttrType, Attribute, Block, BlockNesting, NestedBlock, NestedObject, ObjectNesting,
};
use crate::value::{PathStep, Value};

/// Checks a provider's planned object against the prior state and configuration (the main
/// rules of AssertPlanValid, section 4.4 item 2). Returns one violation per problem, each with
/// its attribute path; sensitive values are not shown. Callers turn these into
/// warnings when the provider reports `legacy_type_system`.
pub(crate) fn assert_plan_valid(
    schema: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
) -> Vec<RuleViolation> {
    let mut errs = Vec::new();
    plan_valid_block(schema, prior, config, planned, &mut Vec::new(), &mut errs);
    errs
}

fn plan_valid_block(
    block: &Block,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<RuleViolation>,
) {
    if planned.is_null() && !config.is_null() {
        errs.push(at(path, "planned for absence but config wants existence"));
        return;
    }
    if config.is_null() && !planned.is_null() {
        errs.push(at(path, "planned for existence but config wants absence"));
        return;
    }
    if planned.is_null() {
        return;
    }
    plan_valid_attrs(&block.attributes, prior, config, planned, path, errs);
    for (name, nb) in &block.block_types {
        let (pv, cv, plv) = (
            child(prior, name),
            child(config, name),
            child(planned, name),
        );
        path.push(PathStep::Attr(name.clone()));
        plan_valid_nested_block(nb, pv, cv, plv, path, errs);
        path.pop();
    }
}

// Long because it has one case per nesting mode, in the order of OpenTofu's
// assertPlannedObjectValid, so the two can be compared line by line.
fn plan_valid_nested_block(
    nb: &NestedBlock,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<RuleViolation>,
) {
    if planned == config {
        return;
    }
    if config.is_unknown() {
        errs.push(at(
            path,
            format!("planned value {planned} for unknown dynamic block"),
        ));
        return;
    }
    if planned.is_unknown() {
        errs.push(at(
            path,
            "attribute representing nested block must not be unknown itself; set nested attribute values to unknown instead",
        ));
        return;
    }
    const ELEMENT_UNKNOWN: &str = "element representing nested block must not be unknown itself; set nested attribute values to unknown instead";
    let kind = match nb.nesting {
        BlockNesting::Single | BlockNesting::Group => {
            return plan_valid_block(&nb.block, prior, config, planned, path, errs);
        }
        BlockNesting::List => "list",
        BlockNesting::Set => "set",
        BlockNesting::Map => "map",
    };
    if planned.is_null() {
        errs.push(at(
            path,
            format!("attribute representing a {kind} of nested blocks must be empty to indicate no blocks, not null"),
        ));
        return;
    }
    match nb.nesting {
        BlockNesting::List => {
            let planned_items = planned.as_list().unwrap_or(&[]);
            let config_items = config.as_list().unwrap_or(&[]);
            if planned_items.len() != config_items.len() {
                errs.push(at(
                    path,
                    format!(
                        "block count in plan ({}) disagrees with count in config ({})",
                        planned_items.len(),
                        config_items.len()
                    ),
                ));
                return;
            }
            let prior_items = prior.as_list().unwrap_or(&[]);
            for (i, (plv, cv)) in planned_items.iter().zip(config_items).enumerate() {
                path.push(PathStep::Index(i as u64));
                if plv.is_unknown() {
                    errs.push(at(path, ELEMENT_UNKNOWN));
                } else {
                    plan_valid_block(
                        &nb.block,
                        prior_items.get(i).unwrap_or(&NULL),
                        cv,
                        plv,
                        path,
                        errs,
                    );
                }
                path.pop();
            }
        }
        BlockNesting::Map => {
            let empty = BTreeMap::new();
            let planned_map = planned.as_map().unwrap_or(&empty);
            let config_map = config.as_map().unwrap_or(&empty);
            let prior_map = prior.as_map();
            for (k, plv) in planned_map {
                let Some(cv) = config_map.get(k) else {
                    errs.push(at(
                        path,
                        format!(
                            "block key {} from plan is not present in config",
                            crate::value::quote(k)
                        ),
                    ));
                    continue;
                };
                path.push(PathStep::Key(k.clone()));
                if plv.is_unknown() {
                    errs.push(at(path, ELEMENT_UNKNOWN));
                } else {
                    let pv = prior_map.and_then(|m| m.get(k)).unwrap_or(&NULL);
                    plan_valid_block(&nb.block, pv, cv, plv, path, errs);
                }
                path.pop();
            }
            for k in config_map.keys().filter(|k| !planned_map.contains_key(*k)) {
                errs.push(at(
                    path,
                    format!(
                        "block key {} from config is not present in plan",
                        crate::value::quote(k)
                    ),
                ));
            }
        }
        _ => {
            // Set elements have no identity to correlate; only require them to be known.
            for (i, plv) in planned.as_list().unwrap_or(&[]).iter().enumerate() {
                if plv.is_unknown() {
                    path.push(PathStep::Index(i as u64));
                    errs.push(at(path, ELEMENT_UNKNOWN));
                    path.pop();
                }
            }
        }
    }
}

fn plan_valid_attrs(
    attrs: &BTreeMap<String, Attribute>,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<RuleViolation>,
) {
    for (name, attr) in attrs {
        path.push(PathStep::Attr(name.clone()));
        plan_valid_value(
            attr,
            child(prior, name),
            child(config, name),
            child(planned, name),
            path,
            errs,
        );
        path.pop();
    }
}

fn plan_valid_value(
    attr: &Attribute,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<RuleViolation>,
) {
    if planned == config {
        return;
    }
    if planned == prior && !prior.is_null() && !config.is_null() {
        // The provider kept an equivalent prior value in favour of the configuration's.
        return;
    }
    if attr.is_computed_only() || (config.is_null() && attr.computed) {
        return;
    }
    if attr.write_only && planned.is_null() {
        return;
    }
    if config.is_null() && !planned.is_null() {
        errs.push(at(
            path,
            if attr.sensitive {
                "planned value for a non-computed attribute".to_owned()
            } else {
                format!("planned value {planned} for a non-computed attribute")
            },
        ));
        return;
    }
    if let AttrType::Nested(obj) = &attr.ty {
        return plan_valid_nested_object(obj, prior, config, planned, path, errs);
    }
    let msg = match (attr.sensitive, prior.is_null()) {
        (true, true) => "sensitive planned value does not match config value".to_owned(),
        (true, false) => {
            "sensitive planned value does not match config value nor prior value".to_owned()
        }
        (false, true) => format!("planned value {planned} does not match config value {config}"),
        (false, false) => {
            format!("planned value {planned} does not match config value {config} nor prior value {prior}")
        }
    };
    errs.push(at(path, msg));
}
// Long because it has one case per nesting mode, in the order of OpenTofu's
// assertPlannedObjectValid, so the two can be compared line by line.
fn plan_valid_nested_object(
    obj: &NestedObject,
    prior: &Value,
    config: &Value,
    planned: &Value,
    path: &mut Vec<PathStep>,
    errs: &mut Vec<RuleViolation>,
) {
    if planned.is_null() && !config.is_null() {
        errs.push(at(path, "planned for absence but config wants existence"));
        return;
    }
    if config.is_null() && !planned.is_null() {
        errs.push(at(path, "planned for existence but config wants absence"));
        return;
    }
    if planned.is_null() {
        return;
    }
    let count = |v: &Value| match v.unwrap_dynamic() {
        Value::List(l) => Some(l.len()),
        Value::Map(m) => Some(m.len()),
        _ => None,
    };
    if obj.nesting != ObjectNesting::Single {
        let (pc, cc) = (count(planned), count(config));
        if pc.is_none() && cc.is_none() {
            return;
        }
        if pc.is_none() || pc != cc {
            let show = |c: Option<usize>| c.map_or_else(|| "unknown".to_owned(), |n| n.to_string());
            errs.push(at(
                path,
                format!(
                    "count in plan ({}) disagrees with count in config ({})",
                    show(pc),
                    show(cc)
                ),
            ));
            return;
        }
    }
    match obj.nesting {
        ObjectNesting::Single => {
            plan_valid_attrs(&obj.attributes, prior, config, planned, path, errs)
        }
        ObjectNesting::List => {
            let prior_items = prior.as_list().unwrap_or(&[]);
            let config_items = config.as_list().unwrap_or(&[]);
            for (i, plv) in planned.as_list().unwrap_or(&[]).iter().enumerate() {
                let Some(cv) = config_items.get(i) else {
                    continue;
                };
                path.push(PathStep::Index(i as u64));
                plan_valid_attrs(
                    &obj.attributes,
                    prior_items.get(i).unwrap_or(&NULL),
                    cv,
                    plv,
                    path,
                    errs,
                );
                path.pop();
            }
        }
        ObjectNesting::Map => {
            let empty = BTreeMap::new();
            let planned_map = planned.as_map().unwrap_or(&empty);
            let config_map = config.as_map().unwrap_or(&empty);
            let prior_map = prior.as_map();
            for (k, plv) in planned_map {
                let Some(cv) = config_map.get(k) else {
                    errs.push(at(
                        path,
                        format!(
                            "map key {} from plan is not present in config",
                            crate::value::quote(k)
                        ),
                    ));
                    continue;
                };
                path.push(PathStep::Key(k.clone()));
                let pv = prior_map.and_then(|m| m.get(k)).unwrap_or(&NULL);
                plan_valid_attrs(&obj.attributes, pv, cv, plv, path, errs);
                path.pop();
            }
            for k in config_map.keys().filter(|k| !planned_map.contains_key(*k)) {
                errs.push(at(
                    path,
                    format!(
                        "map key {} from config is not present in plan",
                        crate::value::quote(k)
                    ),
                ));
            }
        }
        // Sets: the count check above is all that can be done.
        ObjectNesting::Set => {}
    }
}
