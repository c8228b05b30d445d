//! The IR: the JSON document the Nix library evaluates to and the executor
//! consumes, schemaVersion 1 (docs/IR-CONTRACT.md, docs/ir-schema.json).
//!
//! This module owns turning those bytes into typed values and deciding whether
//! they conform to the contract. [`parse`] runs two layers, in the same order
//! as the reference checker `tests/ir-conformance/check.py`:
//!
//! 1. structure: the rules of docs/ir-schema.json (shapes, id patterns, one
//!    subschema per leaf marker, no `count`/`for_each` in the IR);
//! 2. references, only once the structure is sound: ids match their parts and
//!    are unique, providers are declared, every referenced id exists, every
//!    reference in a node's config has an edge, consumer ids are unique,
//!    variable defaults match their type.
//!
//! [`parse`] reads the bytes section by section and element by element (`stream`), never as
//! one JSON tree of the whole document; [`parse_value`] judges such a tree with the same rules.
//!
//! Every [`IrError`] names the element (`resources[1] (alpha.alpha_token.B)`)
//! and the attribute path inside it (`config.label.__ref`), and [`parse`]
//! reports all of them rather than the first. It never panics, whatever the
//! input.
//!
//! Not here: spawning providers, running Nix, resolving references against
//! state or ordering the graph. Those consume an [`Ir`]; the helpers on
//! [`Tree`] ([`Tree::dependencies`], [`Tree::is_known`], [`Tree::to_json`])
//! are what they need from it.

mod ephemeral;
mod fields;
mod instances;
mod lifecycle;
mod model;
mod parse;
mod path;
mod queries;
mod references;
mod restore;
mod rules;
mod sections;
mod stream;
#[cfg(test)]
mod tests;

pub(crate) use self::fields::Fields;
pub(crate) use self::path::{parse_path, render_path, value_path, PathStep};
pub use self::{
    model::*,
    parse::{parse, parse_value},
};

/// The IR version this module reads and the Nix library writes.
pub(crate) const SCHEMA_VERSION: u64 = 1;
