//! Instances of a block: the `key` a node made by `lib.count` (an index) or `lib.forEach` (a
//! key) carries in the IR, checked against the node's name, and the block it names.
//!
//! Owns: reading and checking `key` (its name must end in `__<key>`), and [`Node::block`]. Not
//! here: what a block means to a plan (the engine's create-before-destroy propagation,
//! DESIGN §100).

use serde_json::Value;

use super::model::Node;
use super::parse::Parser;
use super::path::key;
use super::rules::{is_attr_name, INSTANCE_KEY_PATTERN};

impl Parser {
    /// A node's `key`: `lib.count`'s index (an integer) or `lib.forEach`'s key (a string), which
    /// must end the node's name as `__<key>` (the block is what comes before).
    pub(super) fn instance_key(&mut self, el: &str, v: &Value, name: &str) -> Option<String> {
        let path = [key("key")];
        let text = match v.as_u64() {
            Some(index) => index.to_string(),
            None => self.pattern(el, &path, v, is_attr_name, INSTANCE_KEY_PATTERN),
        };
        if text.is_empty() {
            return None;
        }
        if block_name(name, &text).is_none() {
            let message = format!(
                "'{text}' does not end the name '{name}' (an instance is named <block>__<key>)"
            );
            self.error(el, &path, message);
            return None;
        }
        Some(text)
    }
}

/// What comes before `__<key>` in `name`, if that is how it ends (and something comes before).
fn block_name<'a>(name: &'a str, key: &str) -> Option<&'a str> {
    let block = name.strip_suffix(key)?.strip_suffix("__")?;
    (!block.is_empty()).then_some(block)
}

impl Node {
    /// The block of an instance made by `lib.count` / `lib.forEach`: its id without `__<key>`
    /// (the instances of one call share it); `None` for a node made alone.
    pub(crate) fn block(&self) -> Option<&str> {
        let key = self.key.as_deref()?;
        self.id.strip_suffix(key)?.strip_suffix("__")
    }
}

#[cfg(test)]
mod tests {
    /// The IR's `key` must end the node's name as `__<key>`; one that does names the block.
    #[test]
    fn an_instance_key_must_end_the_name() {
        let doc = |name: &str, key: serde_json::Value| {
            serde_json::json!({"schemaVersion": 1,
                "providers": {"alpha": {"source": "provider-alpha", "config": {}}},
                "resources": [{"id": format!("alpha.alpha_token.{name}"), "provider": "alpha",
                    "type": "alpha_token", "name": name, "key": key, "config": {}}],
                "edges": [], "nixConsumers": []})
        };
        for (name, key) in [
            ("c__1", serde_json::json!(2)),
            ("__1", serde_json::json!(1)),
        ] {
            let errors = crate::ir::parse_value(&doc(name, key)).expect_err("refused");
            let text = format!("{errors:?}");
            assert!(text.contains("does not end the name"), "{text}");
        }
        let ir = crate::ir::parse_value(&doc("f__ka", serde_json::json!("ka"))).expect("valid");
        assert_eq!(ir.resources[0].block(), Some("alpha.alpha_token.f"));
        let ir = crate::ir::parse_value(&doc("c__10", serde_json::json!(10))).expect("valid");
        assert_eq!(ir.resources[0].block(), Some("alpha.alpha_token.c"));
    }
}
