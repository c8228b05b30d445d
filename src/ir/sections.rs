//! The structural layer for the optional top-level sections `variables` and `moved`
//! (docs/ir-schema.json), split from [`super::parse`] to keep each file reviewable.

use std::collections::BTreeMap;

use serde_json::Value;

use super::model::{Moved, VariableDecl};
use super::parse::{element_label, Parser};
use super::path::key;
use super::path::render_path;
use super::rules::{
    is_ident, is_node_id, no_match, py_repr, py_str, IDENT_PATTERN, NODE_ID_PATTERN, VARIABLE_TYPES,
};

impl Parser {
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
}
