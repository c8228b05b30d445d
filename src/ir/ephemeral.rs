//! The `ephemeral` section: ephemeral resources, parsed (structure) and checked (references).
//!
//! Owns: the shape of an ephemeral node (`id`, `provider`, `type`, `name`, `config`; no `meta`),
//! its id rule (`ephemeral.<provider>.<type>.<name>`), and its referential rules: the id matches
//! its parts, is unique among all node ids, and names a declared `tfplugin` provider. Not: the
//! `__ephemeral` marker (a leaf like the others, in `parse`), where an ephemeral value may be
//! used (that needs the provider's schema: the engine checks it), opening anything.

use std::collections::HashMap;

use serde_json::Value;

use super::parse::{element_label, Parser};
use super::path::key;
use super::references::located;
use super::rules::{is_ident, is_node_id, is_provider_id, IDENT_PATTERN, PROVIDER_PATTERN};
use super::{EphemeralNode, Ir, IrError, ProviderKind, Tree};

/// The pattern of an ephemeral node's id.
pub(super) const EPHEMERAL_ID_PATTERN: &str =
    r"^ephemeral\.[A-Za-z0-9][A-Za-z0-9_./-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*$";

/// Whether `s` is an ephemeral node id.
pub(super) fn is_ephemeral_id(s: &str) -> bool {
    s.strip_prefix("ephemeral.").is_some_and(is_node_id)
}

impl Parser {
    /// `ephemeral[]`.
    pub(super) fn ephemeral(&mut self, v: &Value) -> Vec<EphemeralNode> {
        let Some(items) = self.array("ephemeral", &[], v) else {
            return Vec::new();
        };
        let nodes = items.iter().enumerate();
        nodes
            .filter_map(|(i, item)| self.ephemeral_node(i, item))
            .collect()
    }

    /// `ephemeral[i]`.
    pub(super) fn ephemeral_node(&mut self, i: usize, item: &Value) -> Option<EphemeralNode> {
        let el = element_label("ephemeral", i, item);
        let obj = self.object(&el, &[], item)?;
        let fields = ["id", "provider", "type", "name", "config"];
        self.object_keys(&el, &[], obj, &fields, &fields);
        let mut text = |field: &str, ok: fn(&str) -> bool, pattern: &str| {
            obj.get(field)
                .map(|x| self.pattern(&el, &[key(field)], x, ok, pattern))
                .unwrap_or_default()
        };
        let id = text("id", is_ephemeral_id, EPHEMERAL_ID_PATTERN);
        let provider = text("provider", is_provider_id, PROVIDER_PATTERN);
        let type_name = text("type", is_ident, IDENT_PATTERN);
        let name = text("name", is_ident, IDENT_PATTERN);
        let config = obj
            .get("config")
            .map(|c| self.plain_object(&el, &[key("config")], c))
            .unwrap_or(Tree::Null);
        Some(EphemeralNode {
            id,
            provider,
            type_name,
            name,
            config,
        })
    }
}

/// The label of `ephemeral[i]` in errors.
pub(super) fn ephemeral_label(node: &EphemeralNode, index: usize) -> String {
    format!("ephemeral[{index}] ({})", node.id)
}

/// Ids match their parts, are unique (with `first_seen`, which holds the other nodes' ids),
/// and name a declared tfplugin provider.
pub(super) fn check_ephemeral_nodes(
    ir: &Ir,
    first_seen: &mut HashMap<String, String>,
    errors: &mut Vec<IrError>,
) {
    for (i, node) in ir.ephemeral.iter().enumerate() {
        let label = ephemeral_label(node, i);
        let expected = format!(
            "ephemeral.{}.{}.{}",
            node.provider, node.type_name, node.name
        );
        if node.id != expected {
            let message = format!(
                "'{}' does not match its parts (expected '{expected}')",
                node.id
            );
            errors.push(located(&label, &[key("id")], message));
        }
        match first_seen.get(&node.id) {
            Some(first) => errors.push(located(
                &label,
                &[key("id")],
                format!("duplicate id '{}' (first declared at {first})", node.id),
            )),
            None => {
                first_seen.insert(node.id.clone(), format!("ephemeral[{i}]"));
            }
        }
        let problem = match ir.providers.get(&node.provider) {
            None => Some(format!(
                "provider '{}' is not declared in providers",
                node.provider
            )),
            Some(p) if p.kind != ProviderKind::Tfplugin => Some(format!(
                "provider '{}' is of kind {}, which has no ephemeral resources",
                node.provider,
                p.kind.name()
            )),
            Some(_) => None,
        };
        if let Some(message) = problem {
            errors.push(located(&label, &[key("provider")], message));
        }
    }
}
