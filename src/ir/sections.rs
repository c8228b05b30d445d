//! The structural layer for the top-level sections `edges`, `nixConsumers`, `variables`,
//! `moved` and `conditions` (docs/ir-schema.json), split from [`super::parse`] to keep each file
//! reviewable.

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::{
    Condition, ConditionKind, ConditionStatus, Consumer, Edge, Moved, Removed, RemovedAction, Tree,
    VariableDecl,
};
use super::parse::{child, element_label, Parser};
use super::path::render_path;
use super::path::{key, parse_path, PathStep};
use super::rules::{
    is_consumer_id, is_ident, is_node_id, no_match, py_repr, py_str, CONSUMER_ID_PATTERN,
    IDENT_PATTERN, NODE_ID_PATTERN, PATH_BODY, VARIABLE_TYPES,
};

impl Parser {
    pub(super) fn edges(&mut self, v: &Value) -> Vec<Edge> {
        let Some(items) = self.array("edges", &[], v) else {
            return Vec::new();
        };
        let edges = items.iter().enumerate();
        edges.filter_map(|(i, item)| self.edge(i, item)).collect()
    }

    /// `edges[i]`.
    pub(super) fn edge(&mut self, i: usize, item: &Value) -> Option<Edge> {
        let el = element_label("edges", i, item);
        let obj = self.object(&el, &[], item)?;
        self.object_keys(
            &el,
            &[],
            obj,
            &["from", "to", "via"],
            &["from", "to", "via", "ref", "reads"],
        );
        let from = obj
            .get("from")
            .map(|x| self.pattern(&el, &[key("from")], x, is_node_id, NODE_ID_PATTERN));
        let to = obj
            .get("to")
            .map(|x| self.pattern(&el, &[key("to")], x, is_node_id, NODE_ID_PATTERN));
        let via = obj
            .get("via")
            .and_then(|x| self.string(&el, &[key("via")], x));
        if let Some(via) = &via {
            if via != "dependsOn" && parse_path(via).is_none() {
                self.error(
                    &el,
                    &[key("via")],
                    no_match(via, &format!("^(?:dependsOn|{PATH_BODY})$")),
                );
            }
        }
        let reference = obj.get("ref").map(|p| self.ref_path(&el, &[key("ref")], p));
        let reads = obj.get("reads").map(|list| {
            let at = [key("reads")];
            let items = self.array(&el, &at, list).cloned().unwrap_or_default();
            items
                .iter()
                .enumerate()
                .map(|(i, p)| self.ref_path(&el, &child(&at, PathStep::Index(i as u64)), p))
                .collect()
        });
        Some(Edge {
            from: from.unwrap_or_default(),
            to: to.unwrap_or_default(),
            via: via.unwrap_or_default(),
            reference,
            reads,
        })
    }

    pub(super) fn consumers(&mut self, v: &Value) -> Vec<Consumer> {
        let Some(items) = self.array("nixConsumers", &[], v) else {
            return Vec::new();
        };
        let consumers = items.iter().enumerate();
        consumers
            .filter_map(|(i, item)| self.consumer(i, item))
            .collect()
    }

    /// `nixConsumers[i]`.
    pub(super) fn consumer(&mut self, i: usize, item: &Value) -> Option<Consumer> {
        let el = element_label("nixConsumers", i, item);
        let obj = self.object(&el, &[], item)?;
        self.object_keys(&el, &[], obj, &["id", "value"], &["id", "value"]);
        let id = obj
            .get("id")
            .map(|x| self.pattern(&el, &[key("id")], x, is_consumer_id, CONSUMER_ID_PATTERN));
        let value = obj
            .get("value")
            .map(|x| self.tree(&el, &[key("value")], x))
            .unwrap_or(Tree::Null);
        Some(Consumer {
            id: id.unwrap_or_default(),
            value,
        })
    }

    pub(super) fn variables(&mut self, v: &Value) -> BTreeMap<String, VariableDecl> {
        let mut out = BTreeMap::new();
        let Some(map) = self.object("variables", &[], v) else {
            return out;
        };
        for (name, decl) in map {
            if !is_ident(name) {
                self.error("variables", &[], no_match(name, IDENT_PATTERN));
            }
            let el = render_path(&[key("variables"), key(name)]);
            let Some(obj) = self.object(&el, &[], decl) else {
                continue;
            };
            self.object_keys(
                &el,
                &[],
                obj,
                &[],
                &["type", "default", "description", "sensitive"],
            );
            let ty = match obj.get("type") {
                Some(Value::String(t)) if VARIABLE_TYPES.contains(&t.as_str()) => Some(t.clone()),
                Some(other) => {
                    let options = VARIABLE_TYPES
                        .iter()
                        .map(|t| py_str(t))
                        .collect::<Vec<_>>()
                        .join(", ");
                    self.error(
                        &el,
                        &[key("type")],
                        format!("{} is not one of [{options}]", py_repr(other)),
                    );
                    None
                }
                None => None,
            };
            let description = obj
                .get("description")
                .and_then(|d| self.string(&el, &[key("description")], d));
            let sensitive = obj
                .get("sensitive")
                .is_some_and(|s| self.boolean(&el, &[key("sensitive")], s));
            out.insert(
                name.clone(),
                VariableDecl {
                    ty,
                    default: obj.get("default").cloned(),
                    description,
                    sensitive,
                },
            );
        }
        out
    }

    // --- trees ---------------------------------------------------------------------

    pub(super) fn moved(&mut self, v: &Value) -> Vec<Moved> {
        let Some(items) = self.array("moved", &[], v) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let el = element_label("moved", i, item);
            let Some(obj) = self.object(&el, &[], item) else {
                continue;
            };
            self.object_keys(&el, &[], obj, &["from", "to"], &["from", "to"]);
            let mut end = |name: &str| {
                obj.get(name)
                    .map(|x| self.pattern(&el, &[key(name)], x, is_node_id, NODE_ID_PATTERN))
                    .unwrap_or_default()
            };
            let from = end("from");
            let to = end("to");
            out.push(Moved { from, to });
        }
        out
    }

    pub(super) fn removed(&mut self, v: &Value) -> Vec<Removed> {
        let Some(items) = self.array("removed", &[], v) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let el = element_label("removed", i, item);
            let Some(obj) = self.object(&el, &[], item) else {
                continue;
            };
            self.object_keys(&el, &[], obj, &["from", "destroy"], &["from", "destroy"]);
            let from = obj
                .get("from")
                .map(|x| self.pattern(&el, &[key("from")], x, is_node_id, NODE_ID_PATTERN));
            let destroy = obj
                .get("destroy")
                .map(|x| self.boolean(&el, &[key("destroy")], x));
            let action = match destroy {
                Some(true) => RemovedAction::Destroy,
                _ => RemovedAction::Forget,
            };
            out.push(Removed {
                from: from.unwrap_or_default(),
                action,
            });
        }
        out
    }

    pub(super) fn conditions(&mut self, v: &Value) -> Vec<Condition> {
        let Some(items) = self.array("conditions", &[], v) else {
            return Vec::new();
        };
        let items = items.iter().enumerate();
        items
            .filter_map(|(i, item)| self.condition(i, item))
            .collect()
    }

    /// `conditions[i]`.
    fn condition(&mut self, i: usize, item: &Value) -> Option<Condition> {
        let el = format!("conditions[{i}]");
        let obj = self.object(&el, &[], item)?;
        self.object_keys(
            &el,
            &[],
            obj,
            &["kind", "name", "message", "status"],
            &["kind", "name", "resource", "message", "status"],
        );
        let mut text = |name: &str| {
            obj.get(name)
                .and_then(|x| self.string(&el, &[key(name)], x))
        };
        let name = text("name");
        let message = text("message");
        let resource = obj
            .get("resource")
            .map(|x| self.pattern(&el, &[key("resource")], x, is_node_id, NODE_ID_PATTERN));
        if name.as_deref() == Some("") {
            self.error(&el, &[key("name")], "'' should be non-empty".into());
        }
        let kind = match obj.get("kind") {
            Some(Value::String(k)) if k == "check" => {
                if resource.is_some() {
                    let msg = "a check is of no resource".to_string();
                    self.error(&el, &[key("resource")], msg);
                }
                Some(ConditionKind::Check)
            }
            Some(Value::String(k)) if k == "postcondition" => {
                if resource.is_none() {
                    let msg = "'resource' is a required property".to_string();
                    self.error(&el, &[], msg);
                }
                Some(ConditionKind::Postcondition {
                    resource: resource.clone().unwrap_or_default(),
                })
            }
            Some(other) => {
                let msg = format!(
                    "{} is not one of ['check', 'postcondition']",
                    py_repr(other)
                );
                self.error(&el, &[key("kind")], msg);
                None
            }
            None => None,
        };
        let status = match obj.get("status") {
            Some(Value::String(s)) if s == "pass" => Some(ConditionStatus::Pass),
            Some(Value::String(s)) if s == "fail" => Some(ConditionStatus::Fail),
            Some(Value::String(s)) if s == "unknown" => Some(ConditionStatus::Unknown),
            Some(other) => {
                let msg = format!(
                    "{} is not one of ['pass', 'fail', 'unknown']",
                    py_repr(other)
                );
                self.error(&el, &[key("status")], msg);
                None
            }
            None => None,
        };
        Some(Condition {
            kind: kind?,
            name: name?,
            message: message?,
            status: status?,
        })
    }
}
