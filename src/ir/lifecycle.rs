//! A managed resource's `meta.lifecycle`: its flags, `ignoreChanges`, `preconditionPending`
//! and `replaceTriggeredBy`, with the schema's rules and words (docs/ir-schema.json).

use serde_json::Value;

use super::model::{IgnorePath, Lifecycle, Ref, ReplaceTrigger, Tree};
use super::parse::{child, Parser};
use super::path::{key, parse_path, PathStep};
use super::rules::{is_node_id, no_match, not_of_type, NODE_ID_PATTERN, PATH_BODY};

impl Parser {
    pub(super) fn lifecycle(&mut self, el: &str, path: &[PathStep], v: &Value) -> Lifecycle {
        let mut out = Lifecycle::default();
        let Some(obj) = self.object(el, path, v) else {
            return out;
        };
        self.object_keys(
            el,
            path,
            obj,
            &[],
            &[
                "preventDestroy",
                "createBeforeDestroy",
                "ignoreChanges",
                "preconditionPending",
                "replaceTriggeredBy",
            ],
        );
        if let Some(b) = obj.get("preventDestroy") {
            out.prevent_destroy = self.boolean(el, &child(path, key("preventDestroy")), b);
        }
        if let Some(b) = obj.get("createBeforeDestroy") {
            out.create_before_destroy =
                self.boolean(el, &child(path, key("createBeforeDestroy")), b);
        }
        if let Some(list) = obj.get("ignoreChanges") {
            let ipath = child(path, key("ignoreChanges"));
            if let Some(items) = self.array(el, &ipath, list) {
                for (i, item) in items.iter().enumerate() {
                    let p = child(&ipath, PathStep::Index(i as u64));
                    let Some(s) = self.string(el, &p, item) else {
                        continue;
                    };
                    if s == "*" {
                        out.ignore_changes.push(IgnorePath::All);
                    } else if let Some(steps) = parse_path(&s) {
                        out.ignore_changes.push(IgnorePath::Path(steps));
                    } else {
                        self.error(el, &p, no_match(&s, &format!(r"^(?:\*|{PATH_BODY})$")));
                    }
                }
            }
        }
        if let Some(pending) = obj.get("preconditionPending") {
            let ppath = child(path, key("preconditionPending"));
            // The schema's derivedMarker: an object holding `__derived`.
            if !pending.is_object() {
                self.error(el, &ppath, not_of_type(pending, "'object'"));
            } else if pending.get("__derived").is_none() {
                let msg = "'__derived' is a required property".to_string();
                self.error(el, &ppath, msg);
            } else if let Tree::Derived(inputs) = self.tree(el, &ppath, pending) {
                out.precondition_pending = inputs;
            }
        }
        if let Some(list) = obj.get("replaceTriggeredBy") {
            let tpath = child(path, key("replaceTriggeredBy"));
            if let Some(items) = self.array(el, &tpath, list) {
                for (i, item) in items.iter().enumerate() {
                    let p = child(&tpath, PathStep::Index(i as u64));
                    if let Some(t) = self.replace_trigger(el, &p, item) {
                        out.replace_triggered_by.push(t);
                    }
                }
            }
        }
        out
    }

    /// One `replaceTriggeredBy` entry: `{ resource }` (the whole resource) or
    /// `{ resource, path }` (one output of it).
    fn replace_trigger(
        &mut self,
        el: &str,
        path: &[PathStep],
        v: &Value,
    ) -> Option<ReplaceTrigger> {
        let obj = self.object(el, path, v)?;
        self.object_keys(el, path, obj, &["resource"], &["resource", "path"]);
        let resource = obj.get("resource").map(|r| {
            let at = child(path, key("resource"));
            self.pattern(el, &at, r, is_node_id, NODE_ID_PATTERN)
        })?;
        Some(match obj.get("path") {
            None => ReplaceTrigger::Resource(resource),
            Some(p) => ReplaceTrigger::Attribute(Ref {
                resource,
                path: self.ref_path(el, &child(path, key("path")), p),
            }),
        })
    }
}
