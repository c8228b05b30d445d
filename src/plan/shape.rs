//! Shared vocabulary of the rules: an object-shaped schema ([`Shape`]) and reading one
//! attribute of an object value ([`child`]) the way cty does (null inside null, unknown
//! inside unknown).

use std::collections::BTreeMap;

use crate::schema::{Attribute, Block, NestedBlock, NestedObject};
use crate::value::Value;

pub(super) static NULL: Value = Value::Null;
pub(super) static UNKNOWN: Value = Value::Unknown;

/// An object-shaped schema: a block (attributes and nested blocks) or a nested attribute
/// object (attributes only).
#[derive(Clone, Copy)]
pub(super) enum Shape<'a> {
    Block(&'a Block),
    Object(&'a NestedObject),
}

impl<'a> Shape<'a> {
    pub(super) fn attributes(self) -> &'a BTreeMap<String, Attribute> {
        match self {
            Shape::Block(b) => &b.attributes,
            Shape::Object(o) => &o.attributes,
        }
    }

    pub(super) fn blocks(self) -> Option<&'a BTreeMap<String, NestedBlock>> {
        match self {
            Shape::Block(b) => Some(&b.block_types),
            Shape::Object(_) => None,
        }
    }
}

/// The attribute `name` of an object value: null inside null, unknown inside unknown.
pub(super) fn child<'a>(v: &'a Value, name: &str) -> &'a Value {
    match v.unwrap_dynamic() {
        Value::Map(map) => map.get(name).unwrap_or(&NULL),
        Value::Unknown => &UNKNOWN,
        _ => &NULL,
    }
}
