//! The provider schema model, and what a schema says about values.
//!
//! Owns: [`ProviderSchema`] and the block/attribute model beneath it (serde-serializable, so the
//! schema of a provider binary can be cached on disk as JSON); the implied type of a block
//! (section 3.1 of the protocol notes: the type every config and state value is encoded with);
//! the empty value of a block; turning user configuration into the exact value a provider
//! expects ([`Block::conform_config`], with every problem reported at its path); and finding
//! sensitive and write-only attributes in a value.
//!
//! Not: protobuf messages (the `plugin` adapter converts GetSchema answers into this model),
//! fetching or caching schemas, the plan rules (`crate::plan`), or encoding
//! (`crate::value`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::value::convert::{dedup_set, unsupported_message};
use crate::value::{self, describe, quote, PathStep, Type, Value, ValueError};

/// Everything a provider binary declares about itself.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderSchema {
    /// The provider configuration block.
    pub provider: Schema,
    /// The `provider_meta` block, if the provider declares one.
    pub provider_meta: Option<Schema>,
    /// Managed resource types by name.
    pub resources: BTreeMap<String, Schema>,
    /// Data source types by name.
    pub data_sources: BTreeMap<String, Schema>,
    /// Ephemeral resource types by name (opened for one run, never stored).
    pub ephemeral_resources: BTreeMap<String, Schema>,
    /// The provider wants PlanResourceChange for destroys (server capability).
    pub plan_destroy: bool,
    /// The provider needs no GetProviderSchema call per process (server capability).
    pub get_provider_schema_optional: bool,
}

impl ProviderSchema {
    /// The schema of a managed resource type.
    pub(crate) fn resource(&self, type_name: &str) -> Option<&Schema> {
        self.resources.get(type_name)
    }

    /// The schema of an ephemeral resource type.
    pub(crate) fn ephemeral_resource(&self, type_name: &str) -> Option<&Schema> {
        self.ephemeral_resources.get(type_name)
    }
}

/// A versioned block schema (resource `version` = its state schema version).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Schema {
    /// Schema version (for resources: the state schema version).
    pub version: i64,
    /// The top-level block.
    pub block: Block,
}

/// A block: attributes plus nested block types.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Block {
    /// Attributes by name.
    pub attributes: BTreeMap<String, Attribute>,
    /// Nested block types by type name.
    pub block_types: BTreeMap<String, NestedBlock>,
    /// Documentation.
    pub description: String,
    /// The whole block is deprecated.
    pub deprecated: bool,
}

/// One attribute of a block or nested object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attribute {
    /// Its type, or (protocol 6) a nested object type.
    pub ty: AttrType,
    /// Must be set in configuration.
    #[serde(default)]
    pub required: bool,
    /// May be set in configuration.
    #[serde(default)]
    pub optional: bool,
    /// The provider may decide the value.
    #[serde(default)]
    pub computed: bool,
    /// Never displayed.
    #[serde(default)]
    pub sensitive: bool,
    /// Sent in configuration but never stored in state.
    #[serde(default)]
    pub write_only: bool,
    /// Documentation.
    #[serde(default)]
    pub description: String,
    /// Deprecated.
    #[serde(default)]
    pub deprecated: bool,
    /// Why it is deprecated.
    #[serde(default)]
    pub deprecation_message: String,
}

/// The type of an attribute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttrType {
    /// A cty type (from the JSON type constraint).
    Type(Type),
    /// A nested attribute object (protocol 6 `nested_type`).
    Nested(NestedObject),
}

/// A protocol 6 nested attribute type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NestedObject {
    /// The object's attributes.
    pub attributes: BTreeMap<String, Attribute>,
    /// How many objects the attribute holds.
    pub nesting: ObjectNesting,
}

/// Nesting of a nested attribute object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectNesting {
    /// One object (nullable).
    Single,
    /// A list of objects.
    List,
    /// A set of objects.
    Set,
    /// A map of objects.
    Map,
}

/// A nested block type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NestedBlock {
    /// The block's own schema.
    pub block: Block,
    /// How the blocks are collected.
    pub nesting: BlockNesting,
    /// Minimum number of blocks (0: no minimum).
    #[serde(default)]
    pub min_items: i64,
    /// Maximum number of blocks (0: no maximum).
    #[serde(default)]
    pub max_items: i64,
}

/// Nesting of a nested block type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockNesting {
    /// At most one block; null when absent.
    Single,
    /// Exactly one block; all-null attributes when absent.
    Group,
    /// An ordered list of blocks.
    List,
    /// A set of blocks.
    Set,
    /// Blocks keyed by a label.
    Map,
}

impl Attribute {
    #[cfg(test)] // used by the unit tests only
    fn with(ty: Type, required: bool, optional: bool, computed: bool) -> Attribute {
        Attribute {
            ty: AttrType::Type(ty),
            required,
            optional,
            computed,
            sensitive: false,
            write_only: false,
            description: String::new(),
            deprecated: false,
            deprecation_message: String::new(),
        }
    }

    /// A required attribute of type `ty`.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn required(ty: Type) -> Attribute {
        Attribute::with(ty, true, false, false)
    }

    /// An optional attribute of type `ty`.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn optional(ty: Type) -> Attribute {
        Attribute::with(ty, false, true, false)
    }

    /// A computed-only attribute of type `ty`.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn computed(ty: Type) -> Attribute {
        Attribute::with(ty, false, false, true)
    }

    /// An optional and computed attribute of type `ty`.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn optional_computed(ty: Type) -> Attribute {
        Attribute::with(ty, false, true, true)
    }

    /// Decided by the provider alone: computed, and neither required nor optional.
    pub(crate) fn is_computed_only(&self) -> bool {
        self.computed && !self.optional && !self.required
    }

    /// The type this attribute has on the wire.
    pub fn implied_type(&self) -> Type {
        match &self.ty {
            AttrType::Type(t) => t.clone(),
            AttrType::Nested(obj) => obj.implied_type(),
        }
    }
}

impl NestedObject {
    /// The type of one object (no optional markers: this is the wire type).
    pub(crate) fn object_type(&self) -> Type {
        Type::object(
            self.attributes
                .iter()
                .map(|(k, a)| (k.clone(), a.implied_type()))
                .collect(),
        )
    }

    /// The attribute's type: the object, or a list, set or map of it (never the dynamic
    /// fallback blocks use).
    pub(crate) fn implied_type(&self) -> Type {
        let obj = self.object_type();
        match self.nesting {
            ObjectNesting::Single => obj,
            ObjectNesting::List => Type::List(Box::new(obj)),
            ObjectNesting::Set => Type::Set(Box::new(obj)),
            ObjectNesting::Map => Type::Map(Box::new(obj)),
        }
    }
}

impl NestedBlock {
    /// The type of this block type's value in its parent object. LIST and MAP blocks whose
    /// block contains `dynamic` are `dynamic` themselves (their values are tuples and objects).
    pub(crate) fn implied_type(&self) -> Type {
        let obj = self.block.implied_type();
        match self.nesting {
            BlockNesting::Single | BlockNesting::Group => obj,
            BlockNesting::List if obj.has_dynamic() => Type::Dynamic,
            BlockNesting::List => Type::List(Box::new(obj)),
            BlockNesting::Set => Type::Set(Box::new(obj)),
            BlockNesting::Map if obj.has_dynamic() => Type::Dynamic,
            BlockNesting::Map => Type::Map(Box::new(obj)),
        }
    }

    /// The value when configuration has no such block: null (SINGLE), an empty block (GROUP),
    /// or an empty collection.
    pub(crate) fn empty_value(&self) -> Value {
        match self.nesting {
            BlockNesting::Single => Value::Null,
            BlockNesting::Group => self.block.empty_value(),
            BlockNesting::List | BlockNesting::Set => self.wrap_dynamic(Value::List(Vec::new())),
            BlockNesting::Map => self.wrap_dynamic(Value::Map(BTreeMap::new())),
        }
    }

    /// For a LIST or MAP block whose implied type is `dynamic`, wraps a list (tuple) or map
    /// (object) of block objects with the concrete type cty gives it: each element's declared
    /// attribute types, with only its `dynamic` attributes typed from their values. Other
    /// values are returned as they are.
    pub(crate) fn wrap_dynamic(&self, value: Value) -> Value {
        if !matches!(self.nesting, BlockNesting::List | BlockNesting::Map) {
            return value;
        }
        let elem = self.block.implied_type();
        if !elem.has_dynamic() {
            return value;
        }
        let ty = match &value {
            Value::List(items) => {
                Type::Tuple(items.iter().map(|v| v.concrete_type(&elem)).collect())
            }
            Value::Map(map) => Type::object(
                map.iter()
                    .map(|(k, v)| (k.clone(), v.concrete_type(&elem)))
                    .collect(),
            ),
            _ => return value,
        };
        Value::Dynamic {
            ty,
            value: Box::new(value),
        }
    }
}

impl Block {
    /// The object type of this block's values: one attribute per schema attribute and per
    /// nested block type, all always present.
    pub fn implied_type(&self) -> Type {
        let mut attrs: BTreeMap<String, Type> = self
            .attributes
            .iter()
            .map(|(k, a)| (k.clone(), a.implied_type()))
            .collect();
        for (k, nb) in &self.block_types {
            attrs.insert(k.clone(), nb.implied_type());
        }
        Type::object(attrs)
    }

    /// The value of an empty block body: every attribute null, nested blocks per nesting.
    pub(crate) fn empty_value(&self) -> Value {
        let mut map: BTreeMap<String, Value> = self
            .attributes
            .keys()
            .map(|k| (k.clone(), Value::Null))
            .collect();
        for (k, nb) in &self.block_types {
            map.insert(k.clone(), nb.empty_value());
        }
        Value::Map(map)
    }

    /// Turns user configuration (an object from the IR, unknown leaves already
    /// [`Value::Unknown`]) into the exact implied-type value a provider expects: every
    /// attribute present (unset ones null), absent blocks per nesting, attribute values
    /// converted to their types. Collects every problem, each at its path: unknown names (with
    /// the nearest valid name), computed-only attributes that were set, missing required
    /// attributes (an unknown value satisfies them), block shape and count errors.
    pub fn conform_config(&self, config: &Value) -> Result<Value, Vec<ValueError>> {
        let mut errors = Vec::new();
        let value = conform_body(
            &self.attributes,
            Some(&self.block_types),
            config,
            &mut errors,
        );
        if errors.is_empty() {
            Ok(value)
        } else {
            Err(errors)
        }
    }

    /// Paths of the sensitive attributes present and non-null in `value`, looking into
    /// nested blocks and nested attribute objects (set elements by their position).
    pub(crate) fn sensitive_paths(&self, value: &Value) -> Vec<Vec<PathStep>> {
        let mut out = Vec::new();
        collect_paths(
            &self.attributes,
            Some(&self.block_types),
            value,
            &mut Vec::new(),
            &mut out,
            &|a| a.sensitive,
        );
        out
    }

    /// Paths of the write-only attributes present and non-null in `value` (which must be
    /// nulled before an object is stored).
    pub fn write_only_paths(&self, value: &Value) -> Vec<Vec<PathStep>> {
        let mut out = Vec::new();
        collect_paths(
            &self.attributes,
            Some(&self.block_types),
            value,
            &mut Vec::new(),
            &mut out,
            &|a| a.write_only,
        );
        out
    }

    /// Sets every write-only attribute in `value` to null: what a provider must do to its
    /// planned and new objects, and what Nivis does again before anything is stored.
    pub fn null_write_only(&self, value: &mut Value) {
        for path in self.write_only_paths(value) {
            if let Some(slot) = value.get_path_mut(&path) {
                *slot = Value::Null;
            }
        }
    }
}

static NO_ENTRIES: BTreeMap<String, Value> = BTreeMap::new();

/// Prepends `step` to the paths of `errors[start..]`.
fn prefix(errors: &mut [ValueError], start: usize, step: &PathStep) {
    for e in &mut errors[start..] {
        e.path.insert(0, step.clone());
    }
}

/// Conforms one object body (a block's, when `blocks` is given, or a nested attribute
/// object's). Errors are pushed with paths relative to the body.
fn conform_body(
    attrs: &BTreeMap<String, Attribute>,
    blocks: Option<&BTreeMap<String, NestedBlock>>,
    config: &Value,
    errors: &mut Vec<ValueError>,
) -> Value {
    let map = match config.unwrap_dynamic() {
        Value::Map(map) => map,
        Value::Null => &NO_ENTRIES,
        Value::Unknown => return Value::Unknown,
        other => {
            errors.push(ValueError::new(format!(
                "expected an object, got {}",
                describe(other)
            )));
            return Value::Null;
        }
    };
    for name in map.keys() {
        if !attrs.contains_key(name) && !blocks.is_some_and(|b| b.contains_key(name)) {
            let valid = attrs
                .keys()
                .chain(blocks.into_iter().flat_map(|b| b.keys()))
                .map(String::as_str);
            errors.push(ValueError::at(
                vec![PathStep::Attr(name.clone())],
                unsupported_message(name, valid),
            ));
        }
    }
    let mut out = BTreeMap::new();
    for (name, attr) in attrs {
        let start = errors.len();
        let v = conform_attribute(name, attr, map.get(name).unwrap_or(&Value::Null), errors);
        prefix(errors, start, &PathStep::Attr(name.clone()));
        out.insert(name.clone(), v);
    }
    for (name, nb) in blocks.into_iter().flatten() {
        let start = errors.len();
        let v = conform_block(name, nb, map.get(name).unwrap_or(&Value::Null), errors);
        prefix(errors, start, &PathStep::Attr(name.clone()));
        out.insert(name.clone(), v);
    }
    Value::Map(out)
}

fn conform_attribute(
    name: &str,
    attr: &Attribute,
    given: &Value,
    errors: &mut Vec<ValueError>,
) -> Value {
    if attr.is_computed_only() {
        if !given.is_null() {
            errors.push(ValueError::new(format!(
                "{} is computed by the provider and cannot be set",
                quote(name)
            )));
        }
        return Value::Null;
    }
    if given.is_null() {
        if attr.required {
            errors.push(ValueError::new(format!(
                "missing required attribute {}",
                quote(name)
            )));
        }
        return Value::Null;
    }
    if given.is_unknown() {
        return Value::Unknown;
    }
    match &attr.ty {
        AttrType::Type(ty) => value::conform(given, ty).unwrap_or_else(|e| {
            errors.push(e);
            Value::Null
        }),
        AttrType::Nested(obj) => conform_nested_object(obj, given.unwrap_dynamic(), errors),
    }
}

fn conform_nested_object(obj: &NestedObject, given: &Value, errors: &mut Vec<ValueError>) -> Value {
    let element = |v: &Value, errors: &mut Vec<ValueError>| match v.unwrap_dynamic() {
        Value::Null => Value::Null,
        v @ (Value::Map(_) | Value::Unknown) => conform_body(&obj.attributes, None, v, errors),
        other => {
            errors.push(ValueError::new(format!(
                "expected an object, got {}",
                describe(other)
            )));
            Value::Null
        }
    };
    match (obj.nesting, given) {
        (ObjectNesting::Single, v) => element(v, errors),
        (ObjectNesting::List | ObjectNesting::Set, Value::List(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let start = errors.len();
                out.push(element(item, errors));
                prefix(errors, start, &PathStep::Index(i as u64));
            }
            if obj.nesting == ObjectNesting::Set {
                dedup_set(&mut out);
            }
            Value::List(out)
        }
        (ObjectNesting::Map, Value::Map(map)) => {
            let mut out = BTreeMap::new();
            for (k, item) in map {
                let start = errors.len();
                out.insert(k.clone(), element(item, errors));
                prefix(errors, start, &PathStep::Key(k.clone()));
            }
            Value::Map(out)
        }
        (nesting, other) => {
            let want = match nesting {
                ObjectNesting::List => "a list of objects",
                ObjectNesting::Set => "a set of objects",
                _ => "a map of objects",
            };
            errors.push(ValueError::new(format!(
                "expected {want}, got {}",
                describe(other)
            )));
            Value::Null
        }
    }
}

// Long because it has one arm per nesting mode, each with its own count and shape checks.
fn conform_block(
    name: &str,
    nb: &NestedBlock,
    given: &Value,
    errors: &mut Vec<ValueError>,
) -> Value {
    let given = given.unwrap_dynamic();
    let quoted = quote(name);
    match given {
        Value::Null => {
            match nb.nesting {
                BlockNesting::Single if nb.min_items >= 1 => {
                    errors.push(ValueError::new(format!("missing required block {quoted}")));
                }
                BlockNesting::List | BlockNesting::Set if nb.min_items >= 1 => {
                    errors.push(ValueError::new(count_message(name, nb.min_items, 0, true)));
                }
                _ => {}
            }
            return nb.empty_value();
        }
        Value::Unknown => return Value::Unknown,
        _ => {}
    }
    let body = |v: &Value, errors: &mut Vec<ValueError>| match v.unwrap_dynamic() {
        v @ (Value::Map(_) | Value::Unknown) => {
            conform_body(&nb.block.attributes, Some(&nb.block.block_types), v, errors)
        }
        other => {
            errors.push(ValueError::new(format!(
                "expected a {quoted} block (an object), got {}",
                describe(other)
            )));
            Value::Null
        }
    };
    match (nb.nesting, given) {
        (BlockNesting::Single | BlockNesting::Group, Value::Map(_)) => body(given, errors),
        (BlockNesting::Single | BlockNesting::Group, Value::List(_)) => {
            errors.push(ValueError::new(format!(
                "{quoted} is a single block: give one object, not a list"
            )));
            nb.empty_value()
        }
        (BlockNesting::List | BlockNesting::Set, Value::List(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let start = errors.len();
                out.push(body(item, errors));
                prefix(errors, start, &PathStep::Index(i as u64));
            }
            let is_set = nb.nesting == BlockNesting::Set;
            if is_set {
                dedup_set(&mut out);
            }
            // A set's size is only certain once its elements are; a list's is already.
            if !is_set || out.iter().all(Value::is_known) {
                let n = out.len() as i64;
                if nb.min_items > 0 && n < nb.min_items {
                    errors.push(ValueError::new(count_message(name, nb.min_items, n, true)));
                }
                if nb.max_items > 0 && n > nb.max_items {
                    errors.push(ValueError::new(count_message(name, nb.max_items, n, false)));
                }
            }
            nb.wrap_dynamic(Value::List(out))
        }
        (BlockNesting::List | BlockNesting::Set, Value::Map(_)) => {
            errors.push(ValueError::new(format!(
                "{quoted} takes a list of blocks: wrap the object in a list, e.g. {name} = [ {{ ... }} ]"
            )));
            nb.empty_value()
        }
        (BlockNesting::Map, Value::Map(map)) => {
            let mut out = BTreeMap::new();
            for (k, item) in map {
                let start = errors.len();
                out.insert(k.clone(), body(item, errors));
                prefix(errors, start, &PathStep::Key(k.clone()));
            }
            nb.wrap_dynamic(Value::Map(out))
        }
        (nesting, other) => {
            let want = match nesting {
                BlockNesting::Single | BlockNesting::Group => {
                    format!("a {quoted} block (an object)")
                }
                BlockNesting::List | BlockNesting::Set => format!("a list of {quoted} blocks"),
                BlockNesting::Map => format!("{quoted} blocks as an object keyed by label"),
            };
            errors.push(ValueError::new(format!(
                "expected {want}, got {}",
                describe(other)
            )));
            nb.empty_value()
        }
    }
}

fn count_message(name: &str, limit: i64, got: i64, minimum: bool) -> String {
    let plural = if limit == 1 { "block" } else { "blocks" };
    if minimum {
        format!(
            "at least {limit} {} {plural} required, got {got}",
            quote(name)
        )
    } else {
        format!(
            "at most {limit} {} {plural} allowed, got {got}",
            quote(name)
        )
    }
}

fn collect_paths(
    attrs: &BTreeMap<String, Attribute>,
    blocks: Option<&BTreeMap<String, NestedBlock>>,
    value: &Value,
    path: &mut Vec<PathStep>,
    out: &mut Vec<Vec<PathStep>>,
    pred: &dyn Fn(&Attribute) -> bool,
) {
    let Some(map) = value.as_map() else { return };
    for (name, attr) in attrs {
        let Some(v) = map.get(name).filter(|v| !v.is_null()) else {
            continue;
        };
        path.push(PathStep::Attr(name.clone()));
        if pred(attr) {
            out.push(path.clone());
        } else if let AttrType::Nested(obj) = &attr.ty {
            let single = obj.nesting == ObjectNesting::Single;
            each_element(v, single, path, &mut |elem, path| {
                collect_paths(&obj.attributes, None, elem, path, out, pred)
            });
        }
        path.pop();
    }
    for (name, nb) in blocks.into_iter().flatten() {
        let Some(v) = map.get(name).filter(|v| !v.is_null()) else {
            continue;
        };
        path.push(PathStep::Attr(name.clone()));
        let single = matches!(nb.nesting, BlockNesting::Single | BlockNesting::Group);
        each_element(v, single, path, &mut |elem, path| {
            collect_paths(
                &nb.block.attributes,
                Some(&nb.block.block_types),
                elem,
                path,
                out,
                pred,
            )
        });
        path.pop();
    }
}

/// Calls `f` with each object of a nested value: the value itself when `single`, else each
/// list element (by index) or map entry (by key).
fn each_element(
    value: &Value,
    single: bool,
    path: &mut Vec<PathStep>,
    f: &mut dyn FnMut(&Value, &mut Vec<PathStep>),
) {
    if single {
        return f(value, path);
    }
    match value.unwrap_dynamic() {
        Value::List(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(PathStep::Index(i as u64));
                f(item, path);
                path.pop();
            }
        }
        Value::Map(map) => {
            for (k, item) in map {
                path.push(PathStep::Key(k.clone()));
                f(item, path);
                path.pop();
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
