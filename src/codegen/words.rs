//! The short descriptions of attributes and types that the constructor comments and the
//! README share: `list(string)`, `optional, computed`, `block, list, 1 to 3 items`.
//!
//! Owns the wording only. Not: where it is printed (`body` for the constructor comments,
//! `docs` for the README tables).

use std::fmt::Write as _;

use crate::schema::{AttrType, Attribute, BlockNesting, NestedBlock, ObjectNesting};
use crate::value::Type;

/// `required`, `optional`, `computed` or `optional, computed`.
pub(super) fn mode(a: &Attribute) -> &'static str {
    if a.required {
        "required"
    } else if a.is_computed_only() {
        "computed"
    } else if a.computed {
        "optional, computed"
    } else {
        "optional"
    }
}

/// An HCL-style type name: `string`, `list(string)`, `object({ a = number })`, `any`.
fn type_doc(t: &Type) -> String {
    match t {
        Type::String => "string".into(),
        Type::Number => "number".into(),
        Type::Bool => "bool".into(),
        Type::Dynamic => "any".into(),
        Type::List(e) => format!("list({})", type_doc(e)),
        Type::Set(e) => format!("set({})", type_doc(e)),
        Type::Map(e) => format!("map({})", type_doc(e)),
        Type::Tuple(ts) => format!(
            "tuple([{}])",
            ts.iter().map(type_doc).collect::<Vec<_>>().join(", ")
        ),
        Type::Object { attrs, optional } => {
            if attrs.is_empty() {
                return "object({})".into();
            }
            let fields: Vec<String> = attrs
                .iter()
                .map(|(k, v)| {
                    let ty = type_doc(v);
                    if optional.contains(k) {
                        format!("{k} = optional({ty})")
                    } else {
                        format!("{k} = {ty}")
                    }
                })
                .collect();
            format!("object({{ {} }})", fields.join(", "))
        }
    }
}

/// An attribute's type as [`type_doc`] names it; a nested attribute as `object`,
/// `list(object)` and the like.
pub(super) fn attr_type_doc(a: &Attribute) -> String {
    match &a.ty {
        AttrType::Type(t) => type_doc(t),
        AttrType::Nested(obj) => match obj.nesting {
            ObjectNesting::Single => "object".into(),
            ObjectNesting::List => "list(object)".into(),
            ObjectNesting::Set => "set(object)".into(),
            ObjectNesting::Map => "map(object)".into(),
        },
    }
}

/// A block's nesting mode as `lib.typecheck` and the README spell it.
pub(super) fn block_nesting(n: BlockNesting) -> &'static str {
    match n {
        BlockNesting::Single => "single",
        BlockNesting::Group => "group",
        BlockNesting::List => "list",
        BlockNesting::Set => "set",
        BlockNesting::Map => "map",
    }
}

/// A nested attribute's nesting mode as the spec's `nested` field spells it.
pub(super) fn object_nesting(n: ObjectNesting) -> &'static str {
    match n {
        ObjectNesting::Single => "single",
        ObjectNesting::List => "list",
        ObjectNesting::Set => "set",
        ObjectNesting::Map => "map",
    }
}

/// `block, list, 1 to 3 items` and the like.
pub(super) fn block_doc(nb: &NestedBlock) -> String {
    let mut s = format!("block, {}", block_nesting(nb.nesting));
    match (nb.min_items > 0, nb.max_items > 0) {
        (true, true) if nb.min_items == nb.max_items => {
            let _ = write!(s, ", exactly {}", nb.min_items);
        }
        (true, true) => {
            let _ = write!(s, ", {} to {} items", nb.min_items, nb.max_items);
        }
        (true, false) => {
            let _ = write!(s, ", at least {}", nb.min_items);
        }
        (false, true) => {
            let _ = write!(s, ", at most {}", nb.max_items);
        }
        (false, false) => {}
    }
    s
}

/// Whether a block must be given: SINGLE with min 1, or LIST/SET with a minimum.
pub(super) fn block_needed(nb: &NestedBlock) -> bool {
    nb.min_items > 0
        && matches!(
            nb.nesting,
            BlockNesting::Single | BlockNesting::List | BlockNesting::Set
        )
}

/// The deprecation message of a deprecated attribute (possibly empty); `None` otherwise.
pub(super) fn deprecation(a: &Attribute) -> Option<&str> {
    a.deprecated.then_some(a.deprecation_message.as_str())
}
