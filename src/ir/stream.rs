//! Reading an IR document from its bytes without a JSON tree of the whole of it.
//!
//! Owns: walking the document's top level as serde reads it, handing each small section
//! (`schemaVersion`, `providers`, `variables`, `moved`, `withoutLedger`) to the structural layer
//! as one JSON value and each element of the list-valued ones (`resources`, `data`, `edges`,
//! `nixConsumers`, `ephemeral`) as one JSON value dropped before the next is read; reporting the
//! errors in the order of [`super::parse_value`] (top-level keys first, then section by section
//! in the schema's order, whatever order the document has); splitting the derived inputs once
//! every node id is known. The peak is then the typed IR, the bytes and one element, instead of
//! a tree of about ten times the bytes beside the IR (DESIGN §84).
//!
//! Not here: any rule of the IR. The same functions of the structural layer judge each section
//! and element as when the whole document is read, and the referential layer runs on the result.
//! Nor documents it does not take — invalid JSON, a top level that is no object, a repeated
//! top-level key, a list-valued section that is no list: it hands those back (`None`) and
//! [`super::parse`] reads them whole, so their errors are worded exactly as they always were.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer as _, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::model::{Ir, IrError, NodeKind, Tree};
use super::parse::{check_referentially, element_label, Parser, TOP_ALLOWED, TOP_REQUIRED};

/// The IR in `bytes`, parsed and validated section by section; `None` when [`super::parse`]
/// must read it whole (see the module doc). When it answers, it answers as `parse_value` would.
pub(super) fn parse_streaming(bytes: &[u8]) -> Option<Result<Ir, Vec<IrError>>> {
    let mut p = Parser::new();
    let mut top = TopLevel::default();
    let mut de = serde_json::Deserializer::from_slice(bytes);
    de.deserialize_map(TopVisitor {
        parser: &mut p,
        top: &mut top,
    })
    .ok()?;
    de.end().ok()?;
    Some(top.finish(p))
}

/// What the top level held: its keys in document order, each section's errors (indexed as
/// [`TOP_ALLOWED`]) and the typed IR as the sections are read.
#[derive(Default)]
struct TopLevel {
    keys: Vec<String>,
    errors: [Vec<IrError>; TOP_ALLOWED.len()],
    ir: Ir,
}

impl TopLevel {
    /// The errors in `parse_value`'s order, or the IR with its derived inputs split and the
    /// referential layer run.
    fn finish(self, mut p: Parser) -> Result<Ir, Vec<IrError>> {
        let keys = self.keys.iter().map(String::as_str);
        p.key_names("ir", &[], keys, TOP_REQUIRED, TOP_ALLOWED);
        let mut errors = std::mem::take(&mut p.errors);
        errors.extend(self.errors.into_iter().flatten());
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut ir = self.ir;
        if p.derived_seen {
            split_derived_again(&mut p, &mut ir);
        }
        check_referentially(ir)
    }
}

/// Splits the derived inputs at the longest declared id, now that every id is known (a
/// structurally sound document has a string id on every node: the ids the whole-document
/// reader collects before it reads anything).
fn split_derived_again(p: &mut Parser, ir: &mut Ir) {
    let ids = (ir.resources.iter().chain(&ir.data)).map(|n| n.id.clone());
    p.ids = ids
        .chain(ir.ephemeral.iter().map(|n| n.id.clone()))
        .collect();
    let p = &*p;
    for node in ir.resources.iter_mut().chain(&mut ir.data) {
        resplit(p, &mut node.config);
    }
    for decl in ir.providers.values_mut() {
        resplit(p, &mut decl.config);
    }
    for node in &mut ir.ephemeral {
        resplit(p, &mut node.config);
    }
    for consumer in &mut ir.consumers {
        resplit(p, &mut consumer.value);
    }
}

/// Splits every derived input in `tree` again, with the ids `p` now knows. A structurally sound
/// input has a dot where it was split, so joining the two parts gives back its text.
fn resplit(p: &Parser, tree: &mut Tree) {
    match tree {
        Tree::Derived(inputs) => {
            for input in inputs {
                *input = p.split_input(&format!("{}.{}", input.resource, input.attr));
            }
        }
        Tree::List(items) => items.iter_mut().for_each(|t| resplit(p, t)),
        Tree::Object(fields) => fields.values_mut().for_each(|t| resplit(p, t)),
        Tree::Sensitive(inner) | Tree::Ephemeral(inner) => resplit(p, inner),
        _ => {}
    }
}

/// Why a document goes back to the whole-document reader (never shown: that reader reports in
/// its own words).
fn decline<E: de::Error>(why: &str) -> E {
    E::custom(why)
}

struct TopVisitor<'a> {
    parser: &'a mut Parser,
    top: &'a mut TopLevel,
}

impl<'de> Visitor<'de> for TopVisitor<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an IR document")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let (p, top) = (self.parser, self.top);
        while let Some(key) = map.next_key::<String>()? {
            if top.keys.contains(&key) {
                return Err(decline("a repeated top-level key"));
            }
            let section = TOP_ALLOWED.iter().position(|k| *k == key);
            top.keys.push(key);
            let Some(section) = section else {
                // Reported by the key check; read as a value so that it is judged as JSON
                // exactly as the whole-document reader judges it.
                map.next_value::<Value>()?;
                continue;
            };
            read_section(p, &mut top.ir, TOP_ALLOWED[section], &mut map)?;
            top.errors[section] = std::mem::take(&mut p.errors);
        }
        Ok(())
    }
}

/// Reads the value of the top-level key `name` into `ir`, its errors left in `p`.
fn read_section<'de, A: MapAccess<'de>>(
    p: &mut Parser,
    ir: &mut Ir,
    name: &str,
    map: &mut A,
) -> Result<(), A::Error> {
    let mut elements = |each: &mut dyn FnMut(&mut Parser, usize, Value)| {
        map.next_value_seed(Elements { parser: p, each })
    };
    match name {
        "resources" => elements(&mut |p, i, item| {
            let el = element_label("resources", i, &item);
            ir.resources.extend(p.node(&el, &item, NodeKind::Managed))
        }),
        "data" => elements(&mut |p, i, item| {
            let el = element_label("data", i, &item);
            ir.data.extend(p.node(&el, &item, NodeKind::Data))
        }),
        "edges" => elements(&mut |p, i, item| ir.edges.extend(p.edge(i, &item))),
        "nixConsumers" => elements(&mut |p, i, item| ir.consumers.extend(p.consumer(i, &item))),
        "ephemeral" => elements(&mut |p, i, item| ir.ephemeral.extend(p.ephemeral_node(i, &item))),
        _ => {
            let value: Value = map.next_value()?;
            match name {
                "schemaVersion" => p.schema_version(&value),
                "providers" => ir.providers = p.providers(&value),
                "variables" => ir.variables = p.variables(&value),
                "moved" => ir.moved = p.moved(&value),
                "conditions" => ir.conditions = p.conditions(&value),
                "removed" => ir.removed = p.removed(&value),
                "withoutLedger" => ir.without_ledger = p.boolean(name, &[], &value),
                _ => unreachable!("TOP_ALLOWED names no other section"),
            }
            Ok(())
        }
    }
}

/// A list-valued section, each element handed to `each` as it is read.
struct Elements<'a, 'f> {
    parser: &'a mut Parser,
    each: &'f mut dyn FnMut(&mut Parser, usize, Value),
}

impl<'de> DeserializeSeed<'de> for Elements<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Elements<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list")
    }

    fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<(), S::Error> {
        let mut index = 0;
        while let Some(item) = seq.next_element::<Value>()? {
            (self.each)(self.parser, index, item);
            index += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ir::{parse_value, DerivedInput};

    fn bytes(doc: &Value) -> Vec<u8> {
        serde_json::to_vec(doc).unwrap()
    }

    fn node(id: &str, config: Value) -> Value {
        let parts: Vec<&str> = id.rsplitn(3, '.').collect();
        json!({"id": id, "provider": parts[2], "type": parts[1], "name": parts[0], "config": config})
    }

    #[test]
    fn a_sound_document_is_read_element_by_element_to_the_same_ir() {
        let doc = json!({
            "schemaVersion": 1,
            "providers": {"alpha": {"source": "provider-alpha", "config": {"k": [1, 2.5]}}},
            "resources": [
                node("alpha.alpha_token.A", json!({"n": 12345678901234567890u64})),
                node("alpha.alpha_token.B", json!({"label": {"__ref": {"resource": "alpha.alpha_token.A", "path": ["value"]}}}))
            ],
            "edges": [{"from": "alpha.alpha_token.A", "to": "alpha.alpha_token.B", "via": "label"}],
            "nixConsumers": [{"id": "c", "value": {"__sensitive": {"value": "s"}}}]
        });
        let streamed = parse_streaming(&bytes(&doc)).expect("read element by element");
        assert_eq!(streamed, parse_value(&doc));
        assert_eq!(streamed.unwrap().resources.len(), 2);
    }

    #[test]
    fn errors_come_in_the_whole_document_order_whatever_the_key_order() {
        // Keys in reverse schema order, an error in several sections and an unknown key.
        let doc = json!({
            "zzz": 1,
            "withoutLedger": "yes",
            "nixConsumers": [{"id": "bad id!", "value": null}],
            "edges": [{"from": "x", "to": "alpha.alpha_token.A", "via": "dependsOn"}],
            "resources": [node("alpha.alpha_token.A", json!({"__x": 1}))],
            "providers": {"alpha": {"source": ""}},
            "schemaVersion": 2
        });
        let streamed = parse_streaming(&bytes(&doc)).expect("read element by element");
        let whole = parse_value(&doc);
        assert_eq!(streamed, whole);
        let errors = streamed.unwrap_err();
        assert!(errors.len() >= 6, "{errors:#?}");
        assert!(
            errors[0].to_string().contains("'zzz' was unexpected"),
            "{errors:#?}"
        );
    }

    #[test]
    fn derived_inputs_are_split_at_ids_declared_later_in_the_document() {
        // `data` comes before `resources` in the document; the input names a resource whose id
        // is a prefix of a longer node-like id, so only the declared ids tell where to split.
        let doc = json!({
            "data": [{"id": "data.p.t.d", "provider": "p", "type": "t", "name": "d",
                      "config": {"v": {"__derived": {"inputs": ["p.t.n.sub.attr"]}}}}],
            "edges": [{"from": "p.t.n", "to": "data.p.t.d", "via": "v"}],
            "nixConsumers": [{"id": "c", "value": {"__derived": {"inputs": ["p.t.n.id"]}}}],
            "providers": {"p": {"source": "provider-p", "config": {}}},
            "resources": [node("p.t.n", json!({}))],
            "schemaVersion": 1
        });
        let streamed = parse_streaming(&bytes(&doc)).expect("read element by element");
        assert_eq!(streamed, parse_value(&doc));
        let ir = streamed.unwrap();
        let Tree::Object(config) = &ir.data[0].config else {
            panic!("not an object: {:?}", ir.data[0].config)
        };
        let Tree::Derived(inputs) = &config["v"] else {
            panic!("not derived: {config:?}")
        };
        let expected = DerivedInput {
            resource: "p.t.n".into(),
            attr: "sub.attr".into(),
        };
        assert_eq!(inputs, &vec![expected]);
    }

    #[test]
    fn what_it_does_not_take_is_left_to_the_whole_document_reader() {
        let declined = [
            b"[1, 2]".to_vec(),
            b"{\"schemaVersion\": 1, \"schemaVersion\": 1}".to_vec(),
            b"{\"resources\": {}}".to_vec(),
            b"{\"resources\": [] ".to_vec(),
            b"{\"resources\": []} x".to_vec(),
        ];
        for doc in declined {
            assert!(
                parse_streaming(&doc).is_none(),
                "{}",
                String::from_utf8_lossy(&doc)
            );
            assert!(crate::ir::parse(&doc).is_err());
        }
    }
}
