//! NormalizeObjectFromLegacySDK: what null and unknown nested blocks from an SDKv2 provider mean.

use std::collections::BTreeMap;

use super::shape::NULL;
use crate::schema::{Block, BlockNesting};
use crate::value::Value;

/// Replaces null (and unknown) nested-block collections in an object from a legacy SDK
/// provider with what they mean (NormalizeObjectFromLegacySDK, applied to ReadResource
/// results): a null LIST or SET block is empty, a null GROUP block is its empty block, an
/// unknown LIST/SET block is one block of unknown attributes. Blocks with dynamic attributes
/// and MAP blocks are left as they are.
pub fn normalize_object_from_legacy_sdk(schema: &Block, value: &Value) -> Value {
    let map = match value.unwrap_dynamic() {
        Value::Map(map) => map,
        _ => return value.clone(),
    };
    let mut out = BTreeMap::new();
    for name in schema.attributes.keys() {
        out.insert(name.clone(), map.get(name).cloned().unwrap_or(Value::Null));
    }
    for (name, nb) in &schema.block_types {
        let lv = map.get(name).unwrap_or(&NULL);
        let v = if nb.block.implied_type().has_dynamic() {
            lv.clone()
        } else {
            match (nb.nesting, lv.unwrap_dynamic()) {
                (BlockNesting::Single | BlockNesting::Group, Value::Unknown) => {
                    unknown_block_stub(&nb.block)
                }
                (BlockNesting::Group, Value::Null) => nb.empty_value(),
                (BlockNesting::Single | BlockNesting::Group, v) => {
                    normalize_object_from_legacy_sdk(&nb.block, v)
                }
                (BlockNesting::List | BlockNesting::Set, Value::Unknown) => {
                    Value::List(vec![unknown_block_stub(&nb.block)])
                }
                (BlockNesting::List | BlockNesting::Set, Value::List(items)) => Value::List(
                    items
                        .iter()
                        .map(|v| normalize_object_from_legacy_sdk(&nb.block, v))
                        .collect(),
                ),
                (BlockNesting::List | BlockNesting::Set, _) => Value::List(Vec::new()),
                (BlockNesting::Map, _) => lv.clone(),
            }
        };
        out.insert(name.clone(), v);
    }
    Value::Map(out)
}

/// A known block object whose leaf attributes are all unknown.
fn unknown_block_stub(block: &Block) -> Value {
    let mut out: BTreeMap<String, Value> = block
        .attributes
        .keys()
        .map(|k| (k.clone(), Value::Unknown))
        .collect();
    for (name, nb) in &block.block_types {
        let v = match nb.nesting {
            BlockNesting::Single | BlockNesting::Group => unknown_block_stub(&nb.block),
            BlockNesting::List | BlockNesting::Set => {
                Value::List(vec![unknown_block_stub(&nb.block)])
            }
            BlockNesting::Map => Value::Map(BTreeMap::new()),
        };
        out.insert(name.clone(), v);
    }
    Value::Map(out)
}
