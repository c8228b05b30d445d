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
//! Every [`IrError`] names the element (`resources[1] (alpha.alpha_token.B)`)
//! and the attribute path inside it (`config.label.__ref`), and [`parse`]
//! reports all of them rather than the first. It never panics, whatever the
//! input.
//!
//! Not here: spawning providers, running Nix, resolving references against
//! state or ordering the graph. Those consume an [`Ir`]; the helpers on
//! [`Tree`] ([`Tree::dependencies`], [`Tree::is_known`], [`Tree::to_json`])
//! are what they need from it.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;

use serde_json::{Map, Number, Value};

/// The IR version this module reads and the Nix library writes.
pub const SCHEMA_VERSION: u64 = 1;

// Patterns as docs/ir-schema.json spells them; they appear in error messages
// (and a test checks that the schema still contains each one). The matchers
// below implement them by hand.
const PROVIDER_PATTERN: &str = "^[A-Za-z0-9][A-Za-z0-9_./-]*$";
const NODE_ID_PATTERN: &str =
    r"^[A-Za-z0-9][A-Za-z0-9_./-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*$";
const DATA_ID_PATTERN: &str =
    r"^data\.[A-Za-z0-9][A-Za-z0-9_./-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*$";
const IDENT_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_-]*$";
const DERIVED_INPUT_PATTERN: &str = r"^[A-Za-z0-9][A-Za-z0-9_./-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z_][A-Za-z0-9_-]*\.[A-Za-z0-9_-]+$";
const CONSUMER_ID_PATTERN: &str = "^[A-Za-z0-9_][A-Za-z0-9_.-]*$";
const BUILD_PATH_PATTERN: &str = "^/";
const DRV_PATH_PATTERN: &str = r"^/[^\n]*\.drv$";
const PATH_BODY: &str = r#"(?:[A-Za-z_][A-Za-z0-9_-]*|\["(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})*"\])(?:\.[A-Za-z_][A-Za-z0-9_-]*|\[(?:0|[1-9][0-9]*)\]|\["(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9A-Fa-f]{4})*"\])*"#;
/// Largest list index a path may hold (2^53 - 1, exact in every JSON reader).
pub const MAX_INDEX: u64 = 9_007_199_254_740_991;

const UNKNOWN_MARKER: &str = "unknown marker: keys starting with '__' are reserved for __ref, __sensitiveRef, __derived, __build and __sensitive";
const BUILD_IN_SENSITIVE: &str = "__build inside __sensitive: a build output computed from a secret would put the secret in the world-readable Nix store";
const SCHEMA_VERSION_MESSAGE: &str =
    "unsupported schemaVersion: this IR reader understands schemaVersion 1";
const LIFECYCLE_ON_DATA: &str = "lifecycle is not allowed on a data source";
const KIND_MESSAGE: &str = "kind must be \"tfplugin\" (the default: the Terraform plugin protocol) or \"nixops4\" (the NixOps4 resource provider protocol)";
const NIXOPS4_VERSION: &str =
    "a nixops4 provider has no version: its source is a path or a binary name";
const NIXOPS4_CONFIG: &str = "a nixops4 provider takes no configuration: protocol v0 has none";
const STATELESS_NOT_NIXOPS4: &str = "statelessTypes is only for providers of kind \"nixops4\"";
const VARIABLE_TYPES: [&str; 6] = ["string", "number", "bool", "list", "map", "any"];

fn expansion_message(key: &str) -> Option<&'static str> {
    match key {
        "count" => {
            Some("count is not part of the IR: expand instances in Nix (ids <base>__<index>)")
        }
        "for_each" => {
            Some("for_each is not part of the IR: expand instances in Nix (ids <base>__<key>)")
        }
        "forEach" => {
            Some("forEach is not part of the IR: expand instances in Nix (ids <base>__<key>)")
        }
        _ => None,
    }
}

// --- the typed IR -------------------------------------------------------------

/// A whole IR document.
#[derive(Debug, Clone, PartialEq)]
pub struct Ir {
    pub providers: BTreeMap<String, ProviderDecl>,
    pub resources: Vec<Node>,
    pub data: Vec<Node>,
    pub edges: Vec<Edge>,
    pub consumers: Vec<Consumer>,
    pub variables: BTreeMap<String, VariableDecl>,
}

/// `providers.<id>`: which binary to run, the protocol it speaks and how to configure it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderDecl {
    pub source: String,
    pub version: Option<String>,
    /// Always a [`Tree::Object`]; may hold references (always empty for NixOps4 providers).
    pub config: Tree,
    pub kind: ProviderKind,
}

/// `providers.<id>.kind`: the protocol the provider binary speaks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProviderKind {
    /// go-plugin + tfplugin5/6 (`"tfplugin"`, the default).
    #[default]
    Tfplugin,
    /// The NixOps4 resource provider protocol v0 (`"nixops4"`).
    Nixops4 {
        /// `statelessTypes`: types re-created, never updated, when their inputs change.
        stateless_types: BTreeSet<String>,
    },
}

impl ProviderKind {
    /// The IR spelling of the kind.
    pub fn name(&self) -> &'static str {
        match self {
            ProviderKind::Tfplugin => "tfplugin",
            ProviderKind::Nixops4 { .. } => "nixops4",
        }
    }
}

/// Whether a node is a managed resource or a data source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    Managed,
    Data,
}

/// A managed resource (`resources[]`, id `<provider>.<type>.<name>`) or a data
/// source (`data[]`, id `data.<provider>.<type>.<name>`).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub id: String,
    pub provider: String,
    pub type_name: String,
    pub name: String,
    /// Always a [`Tree::Object`].
    pub config: Tree,
    pub depends_on: Vec<String>,
    /// All defaults for data sources, which cannot have a lifecycle.
    pub lifecycle: Lifecycle,
}

/// `meta.lifecycle` of a managed resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lifecycle {
    pub prevent_destroy: bool,
    pub create_before_destroy: bool,
    pub ignore_changes: Vec<IgnorePath>,
}

/// One `ignoreChanges` entry: `"*"` or an attribute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IgnorePath {
    All,
    Path(Vec<PathStep>),
}

/// One step of an attribute path: an attribute/map key or a list index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathStep {
    Key(String),
    Index(u64),
}

/// A config, provider config or consumer value. Objects are either plain
/// (`Object`) or one of the five leaf markers.
#[derive(Debug, Clone, PartialEq)]
pub enum Tree {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    List(Vec<Tree>),
    Object(BTreeMap<String, Tree>),
    /// `__ref`: an output the executor can read once the target is applied (TF→TF).
    Ref(Ref),
    /// `__sensitiveRef`: a sensitive output; the executor substitutes the secret.
    SensitiveRef(Ref),
    /// `__derived`: Nix computes this value once the inputs are in the ledger (→Nix).
    Derived(Vec<DerivedInput>),
    /// `__build`: a build output the executor realises before apply.
    Build(Build),
    /// `__sensitive`: a value Nix computed from a secret (a sensitive output or variable); it
    /// and everything resolved from it are secret.
    Sensitive(Box<Tree>),
}

/// The body of a `__ref` / `__sensitiveRef` marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    pub resource: String,
    pub path: Vec<PathStep>,
}

/// One `__derived` input, `<id>.<attr>`, split at the longest declared id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DerivedInput {
    pub resource: String,
    pub attr: String,
}

/// The body of a `__build` marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Build {
    pub path: String,
    pub drv_path: Option<String>,
}

/// `from` must be applied before `to`; `via` is the config path in `to` (or `dependsOn`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub via: String,
}

/// A value Nix computes for itself from outputs (`nixConsumers[]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Consumer {
    pub id: String,
    pub value: Tree,
}

/// `variables.<name>`.
#[derive(Debug, Clone, PartialEq)]
pub struct VariableDecl {
    pub ty: Option<String>,
    /// `Some(Value::Null)` is an explicit null default, `None` no default.
    pub default: Option<Value>,
    pub description: Option<String>,
    pub sensitive: bool,
}

/// What a tree leaf needs from another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DependencyKind {
    Ref,
    SensitiveRef,
    Derived,
}

/// One use of another node's output inside a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependency<'a> {
    /// Path of the leaf inside the tree.
    pub at: Vec<PathStep>,
    /// The node whose output is needed.
    pub resource: &'a str,
    pub kind: DependencyKind,
}

/// A conformance error: where (`resources[1] (alpha.alpha_token.B): config.label.__ref`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrError {
    pub location: String,
    pub message: String,
}

impl fmt::Display for IrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

impl std::error::Error for IrError {}

impl fmt::Display for PathStep {
    /// A step as it renders at the start of a path: `name`, `["a.b"]` or `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&render_path(std::slice::from_ref(self)))
    }
}

impl fmt::Display for IgnorePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgnorePath::All => f.write_str("*"),
            IgnorePath::Path(steps) => f.write_str(&render_path(steps)),
        }
    }
}

impl fmt::Display for DerivedInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.resource, self.attr)
    }
}

impl fmt::Display for Ref {
    /// `alpha.alpha_token.A.net[0].ip`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.resource)?;
        if let Some(PathStep::Key(k)) = self.path.first() {
            if is_ident(k) {
                f.write_str(".")?;
            }
        }
        f.write_str(&render_path(&self.path))
    }
}

// --- attribute paths ------------------------------------------------------------

/// The same path in the value model's steps (the first step names an attribute), for
/// diagnostics.
pub fn value_path(steps: &[PathStep]) -> Vec<crate::value::PathStep> {
    use crate::value::PathStep as V;
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            PathStep::Key(k) if i == 0 => V::Attr(k.clone()),
            PathStep::Key(k) => V::Key(k.clone()),
            PathStep::Index(n) => V::Index(*n),
        })
        .collect()
}

/// Render path steps the way the IR writes attribute paths (edge `via`,
/// `ignoreChanges`, error locations): `disk[0].size`, `tags["a.b"]`.
/// Keys that are not identifiers are quoted as Nix's `builtins.toJSON` would.
pub fn render_path(steps: &[PathStep]) -> String {
    let mut out = String::new();
    for (i, step) in steps.iter().enumerate() {
        match step {
            PathStep::Index(n) => out.push_str(&format!("[{n}]")),
            PathStep::Key(k) if is_ident(k) => {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathStep::Key(k) => {
                out.push('[');
                quote_into(&mut out, k);
                out.push(']');
            }
        }
    }
    out
}

fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parse a rendered attribute path (`tags.env`, `disk[0].size`, `tags["a.b"]`).
/// `None` when the text is not a path; `"*"` is not a path (see [`IgnorePath`]).
pub fn parse_path(text: &str) -> Option<Vec<PathStep>> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut steps = Vec::new();
    while i < b.len() || steps.is_empty() {
        let first = steps.is_empty();
        match b.get(i) {
            Some(b'[') if b.get(i + 1) == Some(&b'"') => {
                let (key, next) = parse_quoted(text, i + 1)?;
                if b.get(next) != Some(&b']') {
                    return None;
                }
                steps.push(PathStep::Key(key));
                i = next + 1;
            }
            Some(b'[') if !first => {
                let start = i + 1;
                let mut end = start;
                while end < b.len() && b[end].is_ascii_digit() {
                    end += 1;
                }
                let digits = &text[start..end];
                if digits.is_empty()
                    || (digits.len() > 1 && digits.starts_with('0'))
                    || b.get(end) != Some(&b']')
                {
                    return None;
                }
                steps.push(PathStep::Index(digits.parse().ok()?));
                i = end + 1;
            }
            Some(b'.') if !first => {
                let (key, next) = take_ident(text, i + 1)?;
                steps.push(PathStep::Key(key.to_string()));
                i = next;
            }
            Some(_) if first => {
                let (key, next) = take_ident(text, i)?;
                steps.push(PathStep::Key(key.to_string()));
                i = next;
            }
            _ => return None,
        }
    }
    Some(steps)
}

fn take_ident(text: &str, start: usize) -> Option<(&str, usize)> {
    let b = text.as_bytes();
    let mut end = start;
    while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_' || b[end] == b'-') {
        end += 1;
    }
    let ident = &text[start..end];
    is_ident(ident).then_some((ident, end))
}

/// A JSON string literal starting at the quote at `start`; returns the text and
/// the index after the closing quote.
fn parse_quoted(text: &str, start: usize) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut chars = text[start + 1..].char_indices();
    while let Some((offset, c)) = chars.next() {
        match c {
            '"' => return Some((out, start + 1 + offset + 1)),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    '"' | '\\' | '/' => out.push(e),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'u' => {
                        let mut code = 0u32;
                        for _ in 0..4 {
                            let (_, h) = chars.next()?;
                            code = code * 16 + h.to_digit(16)?;
                        }
                        // A lone surrogate is well-formed path syntax; keep the
                        // step readable rather than rejecting it.
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    _ => return None,
                }
            }
            c if (c as u32) < 0x20 => return None,
            c => out.push(c),
        }
    }
    None
}

// --- pattern matchers (docs/ir-schema.json) ---------------------------------------

fn is_ident(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

fn is_provider_id(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphanumeric())
        && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'/' | b'-'))
}

/// `<provider>.<type>.<name>`; type and name hold no dots, the provider may.
fn is_node_id(s: &str) -> bool {
    let mut parts = s.rsplitn(3, '.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), Some(ty), Some(provider)) => {
            is_ident(name) && is_ident(ty) && is_provider_id(provider)
        }
        _ => false,
    }
}

fn is_data_id(s: &str) -> bool {
    s.strip_prefix("data.").is_some_and(is_node_id)
}

fn is_attr_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
}

fn is_derived_input(s: &str) -> bool {
    s.rsplit_once('.')
        .is_some_and(|(id, attr)| is_attr_name(attr) && is_node_id(id))
}

fn is_consumer_id(s: &str) -> bool {
    let mut b = s.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphanumeric() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

fn is_drv_path(s: &str) -> bool {
    s.len() >= 5 && s.starts_with('/') && s.ends_with(".drv") && !s.contains('\n')
}

// --- Python-compatible rendering of values in messages ----------------------------------

/// A value as Python's repr() shows it, so messages read like check.py's.
fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str(s),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(py_repr).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", py_str(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn py_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

fn not_of_type(v: &Value, types: &str) -> String {
    format!("{} is not of type {types}", py_repr(v))
}

fn no_match(s: &str, pattern: &str) -> String {
    format!("{} does not match {}", py_str(s), py_str(pattern))
}

/// JSON Schema "integer": a number with no fractional part (1.0 counts).
fn integer_value(n: &Number) -> Option<i128> {
    if let Some(i) = n.as_i64() {
        return Some(i.into());
    }
    if let Some(u) = n.as_u64() {
        return Some(u.into());
    }
    if let Ok(i) = n.to_string().parse::<i128>() {
        return Some(i);
    }
    let f = n.as_f64()?;
    // Saturating cast: huge integral floats stay beyond every bound we check.
    (f.is_finite() && f.fract() == 0.0).then_some(f as i128)
}

// --- parsing ------------------------------------------------------------------------

/// Parse and validate an IR document. On failure, every structural error, or
/// (for a structurally sound document) every referential error.
pub fn parse(bytes: &[u8]) -> Result<Ir, Vec<IrError>> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(value) => parse_value(&value),
        Err(e) => Err(vec![IrError {
            location: "ir".into(),
            message: format!("invalid JSON: {e}"),
        }]),
    }
}

/// [`parse`] for an already decoded JSON value.
pub fn parse_value(doc: &Value) -> Result<Ir, Vec<IrError>> {
    let mut p = Parser {
        errors: Vec::new(),
        ids: HashSet::new(),
    };
    let Some(top) = doc.as_object() else {
        p.error("ir", &[], not_of_type(doc, "'object'"));
        return Err(p.errors);
    };
    // Derived inputs are split at the longest declared id, so collect ids first.
    for section in ["resources", "data"] {
        if let Some(Value::Array(items)) = top.get(section) {
            for item in items {
                if let Some(Value::String(id)) = item.get("id") {
                    p.ids.insert(id.clone());
                }
            }
        }
    }

    p.object_keys(
        "ir",
        &[],
        top,
        &[
            "schemaVersion",
            "providers",
            "resources",
            "edges",
            "nixConsumers",
        ],
        &[
            "schemaVersion",
            "providers",
            "resources",
            "data",
            "edges",
            "nixConsumers",
            "variables",
        ],
    );
    if let Some(v) = top.get("schemaVersion") {
        if !matches!(v, Value::Number(n) if n.as_f64() == Some(1.0)) {
            p.error("schemaVersion", &[], SCHEMA_VERSION_MESSAGE.into());
        }
    }
    let providers = top
        .get("providers")
        .map(|v| p.providers(v))
        .unwrap_or_default();
    let resources = top
        .get("resources")
        .map(|v| p.nodes(v, NodeKind::Managed))
        .unwrap_or_default();
    let data = top
        .get("data")
        .map(|v| p.nodes(v, NodeKind::Data))
        .unwrap_or_default();
    let edges = top.get("edges").map(|v| p.edges(v)).unwrap_or_default();
    let consumers = top
        .get("nixConsumers")
        .map(|v| p.consumers(v))
        .unwrap_or_default();
    let variables = top
        .get("variables")
        .map(|v| p.variables(v))
        .unwrap_or_default();
    if !p.errors.is_empty() {
        return Err(p.errors);
    }
    let ir = Ir {
        providers,
        resources,
        data,
        edges,
        consumers,
        variables,
    };
    let errors = check_references(&ir);
    if errors.is_empty() {
        Ok(ir)
    } else {
        Err(errors)
    }
}

struct Parser {
    errors: Vec<IrError>,
    ids: HashSet<String>,
}

/// Builds a path by appending one step, without disturbing the parent.
fn child(path: &[PathStep], step: PathStep) -> Vec<PathStep> {
    let mut p = Vec::with_capacity(path.len() + 1);
    p.extend_from_slice(path);
    p.push(step);
    p
}

fn key(k: &str) -> PathStep {
    PathStep::Key(k.to_string())
}

fn element_label(section: &str, index: usize, item: &Value) -> String {
    let label = format!("{section}[{index}]");
    if section == "edges" {
        return match (item.get("from"), item.get("to")) {
            (Some(Value::String(f)), Some(Value::String(t))) => format!("{label} ({f} -> {t})"),
            _ => label,
        };
    }
    match item.get("id") {
        Some(Value::String(id)) => format!("{label} ({id})"),
        _ => label,
    }
}

impl Parser {
    fn error(&mut self, element: &str, path: &[PathStep], message: String) {
        self.errors.push(located(element, path, message));
    }

    /// `required` and `additionalProperties: false`.
    fn object_keys(
        &mut self,
        el: &str,
        path: &[PathStep],
        obj: &Map<String, Value>,
        required: &[&str],
        allowed: &[&str],
    ) {
        for k in required {
            if !obj.contains_key(*k) {
                self.error(el, path, format!("{} is a required property", py_str(k)));
            }
        }
        let mut extra: Vec<&String> = obj
            .keys()
            .filter(|k| !allowed.contains(&k.as_str()))
            .collect();
        if !extra.is_empty() {
            extra.sort();
            let verb = if extra.len() == 1 { "was" } else { "were" };
            let list = extra
                .iter()
                .map(|k| py_str(k))
                .collect::<Vec<_>>()
                .join(", ");
            self.error(
                el,
                path,
                format!("Additional properties are not allowed ({list} {verb} unexpected)"),
            );
        }
    }

    fn object<'v>(
        &mut self,
        el: &str,
        path: &[PathStep],
        v: &'v Value,
    ) -> Option<&'v Map<String, Value>> {
        let obj = v.as_object();
        if obj.is_none() {
            self.error(el, path, not_of_type(v, "'object'"));
        }
        obj
    }

    fn array<'v>(&mut self, el: &str, path: &[PathStep], v: &'v Value) -> Option<&'v Vec<Value>> {
        let arr = v.as_array();
        if arr.is_none() {
            self.error(el, path, not_of_type(v, "'array'"));
        }
        arr
    }

    fn string(&mut self, el: &str, path: &[PathStep], v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            _ => {
                self.error(el, path, not_of_type(v, "'string'"));
                None
            }
        }
    }

    fn boolean(&mut self, el: &str, path: &[PathStep], v: &Value) -> bool {
        match v {
            Value::Bool(b) => *b,
            _ => {
                self.error(el, path, not_of_type(v, "'boolean'"));
                false
            }
        }
    }

    /// A string matching `pattern` (checked by `ok`).
    fn pattern(
        &mut self,
        el: &str,
        path: &[PathStep],
        v: &Value,
        ok: fn(&str) -> bool,
        pattern: &str,
    ) -> String {
        match self.string(el, path, v) {
            Some(s) if ok(&s) => s,
            Some(s) => {
                self.error(el, path, no_match(&s, pattern));
                s
            }
            None => String::new(),
        }
    }

    fn providers(&mut self, v: &Value) -> BTreeMap<String, ProviderDecl> {
        let mut out = BTreeMap::new();
        let Some(map) = self.object("providers", &[], v) else {
            return out;
        };
        for (id, decl) in map {
            if !is_provider_id(id) {
                self.error("providers", &[], no_match(id, PROVIDER_PATTERN));
            }
            let el = render_path(&[key("providers"), key(id)]);
            let Some(obj) = self.object(&el, &[], decl) else {
                continue;
            };
            self.object_keys(
                &el,
                &[],
                obj,
                &["source", "config"],
                &["source", "version", "config", "kind", "statelessTypes"],
            );
            let source = match obj.get("source") {
                Some(s) => match self.string(&el, &[key("source")], s) {
                    Some(s) if s.is_empty() => {
                        self.error(&el, &[key("source")], "'' should be non-empty".into());
                        s
                    }
                    s => s.unwrap_or_default(),
                },
                None => String::new(),
            };
            let version = obj
                .get("version")
                .and_then(|s| self.string(&el, &[key("version")], s));
            let config = match obj.get("config") {
                Some(c) => self.plain_object(&el, &[key("config")], c),
                None => Tree::Object(BTreeMap::new()),
            };
            let kind = self.provider_kind(&el, obj);
            out.insert(
                id.clone(),
                ProviderDecl {
                    source,
                    version,
                    config,
                    kind,
                },
            );
        }
        out
    }

    /// `kind` and `statelessTypes`, with the rules that depend on the kind (the schema's
    /// `if`/`then`/`else`): a nixops4 provider has no version and no configuration; only a
    /// nixops4 provider has `statelessTypes`.
    fn provider_kind(&mut self, el: &str, obj: &Map<String, Value>) -> ProviderKind {
        let nixops4 = match obj.get("kind") {
            None => false,
            Some(Value::String(k)) if k == "tfplugin" => false,
            Some(Value::String(k)) if k == "nixops4" => true,
            Some(_) => {
                self.error(el, &[key("kind")], KIND_MESSAGE.into());
                false
            }
        };
        let mut stateless_types = BTreeSet::new();
        if let Some(v) = obj.get("statelessTypes") {
            let path = [key("statelessTypes")];
            if !nixops4 {
                self.error(el, &path, STATELESS_NOT_NIXOPS4.into());
            }
            if let Some(items) = self.array(el, &path, v) {
                for (i, item) in items.iter().enumerate() {
                    let p = child(&path, PathStep::Index(i as u64));
                    stateless_types.insert(self.pattern(el, &p, item, is_ident, IDENT_PATTERN));
                }
            }
        }
        if !nixops4 {
            return ProviderKind::Tfplugin;
        }
        if obj.contains_key("version") {
            self.error(el, &[key("version")], NIXOPS4_VERSION.into());
        }
        if obj
            .get("config")
            .and_then(Value::as_object)
            .is_some_and(|c| !c.is_empty())
        {
            self.error(el, &[key("config")], NIXOPS4_CONFIG.into());
        }
        ProviderKind::Nixops4 { stateless_types }
    }

    fn nodes(&mut self, v: &Value, kind: NodeKind) -> Vec<Node> {
        let section = if kind == NodeKind::Data {
            "data"
        } else {
            "resources"
        };
        let Some(items) = self.array(section, &[], v) else {
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| self.node(&element_label(section, i, item), item, kind))
            .collect()
    }

    fn node(&mut self, el: &str, v: &Value, kind: NodeKind) -> Option<Node> {
        let obj = self.object(el, &[], v)?;
        self.object_keys(
            el,
            &[],
            obj,
            &["id", "provider", "type", "name", "config"],
            &["id", "provider", "type", "name", "config", "meta"],
        );
        let (id_ok, id_pattern): (fn(&str) -> bool, _) = if kind == NodeKind::Data {
            (is_data_id, DATA_ID_PATTERN)
        } else {
            (is_node_id, NODE_ID_PATTERN)
        };
        let id = obj
            .get("id")
            .map(|x| self.pattern(el, &[key("id")], x, id_ok, id_pattern))
            .unwrap_or_default();
        let provider = obj
            .get("provider")
            .map(|x| self.pattern(el, &[key("provider")], x, is_provider_id, PROVIDER_PATTERN))
            .unwrap_or_default();
        let type_name = obj
            .get("type")
            .map(|x| self.pattern(el, &[key("type")], x, is_ident, IDENT_PATTERN))
            .unwrap_or_default();
        let name = obj
            .get("name")
            .map(|x| self.pattern(el, &[key("name")], x, is_ident, IDENT_PATTERN))
            .unwrap_or_default();
        let config = obj
            .get("config")
            .map(|c| self.plain_object(el, &[key("config")], c))
            .unwrap_or(Tree::Null);
        let mut depends_on = Vec::new();
        let mut lifecycle = Lifecycle::default();
        if let Some(meta) = obj.get("meta") {
            let mpath = [key("meta")];
            if let Some(m) = self.object(el, &mpath, meta) {
                self.object_keys(
                    el,
                    &mpath,
                    m,
                    &[],
                    &["dependsOn", "lifecycle", "count", "for_each", "forEach"],
                );
                for (k, _) in m.iter() {
                    if let Some(message) = expansion_message(k) {
                        self.error(el, &child(&mpath, key(k)), message.into());
                    }
                }
                if let Some(deps) = m.get("dependsOn") {
                    let dpath = child(&mpath, key("dependsOn"));
                    if let Some(list) = self.array(el, &dpath, deps) {
                        for (i, d) in list.iter().enumerate() {
                            let p = child(&dpath, PathStep::Index(i as u64));
                            depends_on.push(self.pattern(el, &p, d, is_node_id, NODE_ID_PATTERN));
                        }
                    }
                }
                if let Some(l) = m.get("lifecycle") {
                    let lpath = child(&mpath, key("lifecycle"));
                    if kind == NodeKind::Data {
                        self.error(el, &lpath, LIFECYCLE_ON_DATA.into());
                    } else {
                        lifecycle = self.lifecycle(el, &lpath, l);
                    }
                }
            }
        }
        Some(Node {
            kind,
            id,
            provider,
            type_name,
            name,
            config,
            depends_on,
            lifecycle,
        })
    }

    fn lifecycle(&mut self, el: &str, path: &[PathStep], v: &Value) -> Lifecycle {
        let mut out = Lifecycle::default();
        let Some(obj) = self.object(el, path, v) else {
            return out;
        };
        self.object_keys(
            el,
            path,
            obj,
            &[],
            &["preventDestroy", "createBeforeDestroy", "ignoreChanges"],
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
        out
    }

    fn edges(&mut self, v: &Value) -> Vec<Edge> {
        let Some(items) = self.array("edges", &[], v) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let el = element_label("edges", i, item);
            let Some(obj) = self.object(&el, &[], item) else {
                continue;
            };
            self.object_keys(
                &el,
                &[],
                obj,
                &["from", "to", "via"],
                &["from", "to", "via"],
            );
            let from = obj
                .get("from")
                .map(|x| self.pattern(&el, &[key("from")], x, is_node_id, NODE_ID_PATTERN));
            let to = obj
                .get("to")
                .map(|x| self.pattern(&el, &[key("to")], x, is_node_id, NODE_ID_PATTERN));
            let via = obj
                .get("via")
                .and_then(|x| self.string(&el, &[key("via")], x));
            if let Some(via) = &via {
                if via != "dependsOn" && parse_path(via).is_none() {
                    self.error(
                        &el,
                        &[key("via")],
                        no_match(via, &format!("^(?:dependsOn|{PATH_BODY})$")),
                    );
                }
            }
            out.push(Edge {
                from: from.unwrap_or_default(),
                to: to.unwrap_or_default(),
                via: via.unwrap_or_default(),
            });
        }
        out
    }

    fn consumers(&mut self, v: &Value) -> Vec<Consumer> {
        let Some(items) = self.array("nixConsumers", &[], v) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let el = element_label("nixConsumers", i, item);
            let Some(obj) = self.object(&el, &[], item) else {
                continue;
            };
            self.object_keys(&el, &[], obj, &["id", "value"], &["id", "value"]);
            let id = obj
                .get("id")
                .map(|x| self.pattern(&el, &[key("id")], x, is_consumer_id, CONSUMER_ID_PATTERN));
            let value = obj
                .get("value")
                .map(|x| self.tree(&el, &[key("value")], x))
                .unwrap_or(Tree::Null);
            out.push(Consumer {
                id: id.unwrap_or_default(),
                value,
            });
        }
        out
    }

    fn variables(&mut self, v: &Value) -> BTreeMap<String, VariableDecl> {
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

    fn tree(&mut self, el: &str, path: &[PathStep], v: &Value) -> Tree {
        match v {
            Value::Null => Tree::Null,
            Value::Bool(b) => Tree::Bool(*b),
            Value::Number(n) => Tree::Number(n.clone()),
            Value::String(s) => Tree::String(s.clone()),
            Value::Array(items) => Tree::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, x)| self.tree(el, &child(path, PathStep::Index(i as u64)), x))
                    .collect(),
            ),
            Value::Object(obj) => {
                for marker in [
                    "__ref",
                    "__sensitiveRef",
                    "__derived",
                    "__build",
                    "__sensitive",
                ] {
                    if let Some(body) = obj.get(marker) {
                        self.object_keys(el, path, obj, &[], &[marker]);
                        return self.marker(el, &child(path, key(marker)), marker, body);
                    }
                }
                self.plain_entries(el, path, obj)
            }
        }
    }

    /// A tree that must be a plain object (configs).
    fn plain_object(&mut self, el: &str, path: &[PathStep], v: &Value) -> Tree {
        match self.object(el, path, v) {
            Some(obj) => self.plain_entries(el, path, obj),
            None => Tree::Object(BTreeMap::new()),
        }
    }

    fn plain_entries(&mut self, el: &str, path: &[PathStep], obj: &Map<String, Value>) -> Tree {
        let mut out = BTreeMap::new();
        for (k, x) in obj {
            let p = child(path, key(k));
            if k.starts_with("__") {
                self.error(el, &p, UNKNOWN_MARKER.into());
                continue;
            }
            out.insert(k.clone(), self.tree(el, &p, x));
        }
        Tree::Object(out)
    }

    fn marker(&mut self, el: &str, path: &[PathStep], marker: &str, body: &Value) -> Tree {
        let Some(obj) = self.object(el, path, body) else {
            return Tree::Null;
        };
        match marker {
            "__ref" | "__sensitiveRef" => {
                self.object_keys(el, path, obj, &["resource", "path"], &["resource", "path"]);
                let resource = obj
                    .get("resource")
                    .map(|r| {
                        self.pattern(
                            el,
                            &child(path, key("resource")),
                            r,
                            is_node_id,
                            NODE_ID_PATTERN,
                        )
                    })
                    .unwrap_or_default();
                let steps = obj
                    .get("path")
                    .map(|p| self.ref_path(el, &child(path, key("path")), p))
                    .unwrap_or_default();
                let r = Ref {
                    resource,
                    path: steps,
                };
                if marker == "__ref" {
                    Tree::Ref(r)
                } else {
                    Tree::SensitiveRef(r)
                }
            }
            "__derived" => {
                self.object_keys(el, path, obj, &["inputs"], &["inputs"]);
                let mut inputs = Vec::new();
                if let Some(list) = obj.get("inputs") {
                    let ipath = child(path, key("inputs"));
                    if let Some(items) = self.array(el, &ipath, list) {
                        if items.is_empty() {
                            self.error(el, &ipath, "[] should be non-empty".into());
                        }
                        for (i, item) in items.iter().enumerate() {
                            let p = child(&ipath, PathStep::Index(i as u64));
                            let text =
                                self.pattern(el, &p, item, is_derived_input, DERIVED_INPUT_PATTERN);
                            inputs.push(self.split_input(&text));
                        }
                    }
                }
                Tree::Derived(inputs)
            }
            "__sensitive" => {
                self.object_keys(el, path, obj, &["value"], &["value"]);
                let value = obj
                    .get("value")
                    .map(|v| self.tree(el, &child(path, key("value")), v))
                    .unwrap_or(Tree::Null);
                Tree::Sensitive(Box::new(value))
            }
            _ => {
                self.object_keys(el, path, obj, &["path"], &["path", "drvPath"]);
                let bpath = obj
                    .get("path")
                    .map(|p| {
                        self.pattern(
                            el,
                            &child(path, key("path")),
                            p,
                            |s| s.starts_with('/'),
                            BUILD_PATH_PATTERN,
                        )
                    })
                    .unwrap_or_default();
                let drv_path = obj.get("drvPath").map(|p| {
                    self.pattern(
                        el,
                        &child(path, key("drvPath")),
                        p,
                        is_drv_path,
                        DRV_PATH_PATTERN,
                    )
                });
                Tree::Build(Build {
                    path: bpath,
                    drv_path,
                })
            }
        }
    }

    fn ref_path(&mut self, el: &str, path: &[PathStep], v: &Value) -> Vec<PathStep> {
        let Some(items) = self.array(el, path, v) else {
            return Vec::new();
        };
        if items.is_empty() {
            self.error(el, path, "[] should be non-empty".into());
        }
        let mut steps = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let p = child(path, PathStep::Index(i as u64));
            match item {
                Value::String(s) => steps.push(PathStep::Key(s.clone())),
                Value::Number(n) => match integer_value(n) {
                    Some(i) if i < 0 => {
                        self.error(el, &p, format!("{n} is less than the minimum of 0"))
                    }
                    Some(i) if i > MAX_INDEX as i128 => self.error(
                        el,
                        &p,
                        format!("{n} is greater than the maximum of {MAX_INDEX}"),
                    ),
                    Some(i) => steps.push(PathStep::Index(i as u64)),
                    None => self.error(el, &p, not_of_type(item, "'string', 'integer'")),
                },
                _ => self.error(el, &p, not_of_type(item, "'string', 'integer'")),
            }
        }
        steps
    }

    /// `<id>.<attr>` split at the longest declared id (else at the last dot).
    fn split_input(&self, text: &str) -> DerivedInput {
        let mut end = text.len();
        while let Some(dot) = text[..end].rfind('.') {
            if dot > 0 && dot + 1 < text.len() && self.ids.contains(&text[..dot]) {
                return DerivedInput {
                    resource: text[..dot].into(),
                    attr: text[dot + 1..].into(),
                };
            }
            end = dot;
        }
        match text.rsplit_once('.') {
            Some((id, attr)) => DerivedInput {
                resource: id.into(),
                attr: attr.into(),
            },
            None => DerivedInput {
                resource: text.into(),
                attr: String::new(),
            },
        }
    }
}

// --- referential rules -------------------------------------------------------------

fn node_label(node: &Node, index: usize) -> String {
    let section = if node.kind == NodeKind::Data {
        "data"
    } else {
        "resources"
    };
    format!("{section}[{index}] ({})", node.id)
}

fn type_matches(ty: Option<&str>, v: &Value) -> bool {
    matches!(
        (ty, v),
        (_, Value::Null)
            | (None, _)
            | (Some("any"), _)
            | (Some("string"), Value::String(_))
            | (Some("number"), Value::Number(_))
            | (Some("bool"), Value::Bool(_))
            | (Some("list"), Value::Array(_))
            | (Some("map"), Value::Object(_))
    )
}

/// An error at `path` inside `element`: `resources[1] (id): config.label`.
fn located(element: &str, path: &[PathStep], message: String) -> IrError {
    let location = if path.is_empty() {
        element.to_string()
    } else {
        format!("{element}: {}", render_path(path))
    };
    IrError { location, message }
}

fn missing(target: &str) -> String {
    format!("'{target}' is not a declared resource or data id")
}

fn check_references(ir: &Ir) -> Vec<IrError> {
    let mut errors = Vec::new();
    let mut first_seen: HashMap<&str, String> = HashMap::new();
    let labelled: Vec<(String, &Node)> = ir
        .resources
        .iter()
        .enumerate()
        .chain(ir.data.iter().enumerate())
        .map(|(i, n)| (node_label(n, i), n))
        .collect();

    for (label, node) in &labelled {
        let prefix = if node.kind == NodeKind::Data {
            "data."
        } else {
            ""
        };
        let expected = format!("{prefix}{}.{}.{}", node.provider, node.type_name, node.name);
        if node.id != expected {
            errors.push(located(
                label,
                &[key("id")],
                format!(
                    "'{}' does not match its parts (expected '{expected}')",
                    node.id
                ),
            ));
        }
        match first_seen.get(node.id.as_str()) {
            Some(first) => errors.push(located(
                label,
                &[key("id")],
                format!("duplicate id '{}' (first declared at {first})", node.id),
            )),
            None => {
                let short = label.split(' ').next().unwrap_or_default().to_string();
                first_seen.insert(&node.id, short);
            }
        }
        match ir.providers.get(&node.provider) {
            None => errors.push(located(
                label,
                &[key("provider")],
                format!("provider '{}' is not declared in providers", node.provider),
            )),
            Some(p) if node.kind == NodeKind::Data && p.kind != ProviderKind::Tfplugin => errors
                .push(located(
                    label,
                    &[key("provider")],
                    format!(
                        "provider '{}' is of kind {}, which has no data sources",
                        node.provider,
                        p.kind.name()
                    ),
                )),
            Some(_) => {}
        }
    }
    let ids: HashSet<&str> = first_seen.keys().copied().collect();

    let mut pairs: HashSet<(&str, &str)> = HashSet::new();
    for (i, edge) in ir.edges.iter().enumerate() {
        let label = format!("edges[{i}] ({} -> {})", edge.from, edge.to);
        for (end, id) in [("from", &edge.from), ("to", &edge.to)] {
            if !ids.contains(id.as_str()) {
                errors.push(located(&label, &[key(end)], missing(id)));
            }
        }
        pairs.insert((&edge.from, &edge.to));
    }

    // Reference targets in a tree; for node configs also the edge each one needs.
    let check_tree = |errors: &mut Vec<IrError>,
                      label: &str,
                      root: &str,
                      tree: &Tree,
                      node_id: Option<&str>| {
        tree.walk_sensitive_builds(&mut |at| {
            let p: Vec<PathStep> = std::iter::once(key(root))
                .chain(at.iter().cloned())
                .collect();
            errors.push(located(label, &p, BUILD_IN_SENSITIVE.into()));
        });
        tree.walk_leaves(|at, leaf| {
            let (marker, bodies): (&str, Vec<(&str, PathStep)>) = match leaf {
                Tree::Ref(r) => ("__ref", vec![(r.resource.as_str(), key("resource"))]),
                Tree::SensitiveRef(r) => ("__sensitiveRef", vec![(r.resource.as_str(), key("resource"))]),
                Tree::Derived(inputs) => (
                    "__derived",
                    inputs.iter().enumerate().map(|(k, input)| (input.resource.as_str(), PathStep::Index(k as u64))).collect(),
                ),
                _ => return,
            };
            let leaf_path: Vec<PathStep> = std::iter::once(key(root)).chain(at.iter().cloned()).collect();
            let mut targets: Vec<&str> = Vec::new();
            for (target, step) in bodies {
                if ids.contains(target) {
                    if !targets.contains(&target) {
                        targets.push(target);
                    }
                    continue;
                }
                let mut p = leaf_path.clone();
                p.push(key(marker));
                let message = match (leaf, &step) {
                    (Tree::Derived(inputs), PathStep::Index(k)) => {
                        p.extend([key("inputs"), step.clone()]);
                        format!(
                            "'{}' does not name a declared resource or data id followed by '.<attribute>'",
                            inputs[*k as usize]
                        )
                    }
                    _ => {
                        p.push(step);
                        missing(target)
                    }
                };
                errors.push(located(label, &p, message));
            }
            if let Some(to) = node_id {
                for target in targets {
                    if !pairs.contains(&(target, to)) {
                        errors.push(located(
                            label,
                            &leaf_path,
                            format!("refers to '{target}' but no edge goes from '{target}' to '{to}'"),
                        ));
                    }
                }
            }
        });
    };

    for (label, node) in &labelled {
        check_tree(&mut errors, label, "config", &node.config, Some(&node.id));
        for (k, target) in node.depends_on.iter().enumerate() {
            let at = [key("meta"), key("dependsOn"), PathStep::Index(k as u64)];
            if !ids.contains(target.as_str()) {
                errors.push(located(label, &at, missing(target)));
            } else if !pairs.contains(&(target.as_str(), node.id.as_str())) {
                errors.push(located(
                    label,
                    &at,
                    format!(
                        "depends on '{target}' but no edge goes from '{target}' to '{}'",
                        node.id
                    ),
                ));
            }
        }
    }
    for (id, provider) in &ir.providers {
        let label = render_path(&[key("providers"), key(id)]);
        check_tree(&mut errors, &label, "config", &provider.config, None);
    }
    let mut consumer_ids: HashMap<&str, usize> = HashMap::new();
    for (i, consumer) in ir.consumers.iter().enumerate() {
        let label = format!("nixConsumers[{i}] ({})", consumer.id);
        if let Some(first) = consumer_ids.get(consumer.id.as_str()) {
            errors.push(located(
                &label,
                &[key("id")],
                format!(
                    "duplicate consumer id '{}' (first declared at nixConsumers[{first}])",
                    consumer.id
                ),
            ));
        } else {
            consumer_ids.insert(&consumer.id, i);
        }
        check_tree(&mut errors, &label, "value", &consumer.value, None);
    }
    for (name, decl) in &ir.variables {
        if let Some(default) = &decl.default {
            if !type_matches(decl.ty.as_deref(), default) {
                let label = render_path(&[key("variables"), key(name)]);
                errors.push(located(
                    &label,
                    &[key("default")],
                    format!(
                        "default does not match type '{}'",
                        decl.ty.as_deref().unwrap_or("any")
                    ),
                ));
            }
        }
    }
    errors
}

// --- helpers for consumers of the IR ---------------------------------------------------

impl Ir {
    /// Managed resources, then data sources.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.resources.iter().chain(self.data.iter())
    }

    /// The node with this id.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.nodes().find(|n| n.id == id)
    }

    /// The IR back as JSON, in its canonical form (every optional field written).
    pub fn to_json(&self) -> Value {
        let providers: Map<String, Value> = self
            .providers
            .iter()
            .map(|(id, p)| {
                let mut m = Map::new();
                m.insert("source".into(), Value::String(p.source.clone()));
                if let Some(v) = &p.version {
                    m.insert("version".into(), Value::String(v.clone()));
                }
                m.insert("config".into(), p.config.to_json());
                m.insert("kind".into(), Value::String(p.kind.name().into()));
                if let ProviderKind::Nixops4 { stateless_types } = &p.kind {
                    m.insert("statelessTypes".into(), serde_json::json!(stateless_types));
                }
                (id.clone(), Value::Object(m))
            })
            .collect();
        let variables: Map<String, Value> = self
            .variables
            .iter()
            .map(|(name, d)| {
                let mut m = Map::new();
                if let Some(t) = &d.ty {
                    m.insert("type".into(), Value::String(t.clone()));
                }
                if let Some(v) = &d.default {
                    m.insert("default".into(), v.clone());
                }
                if let Some(s) = &d.description {
                    m.insert("description".into(), Value::String(s.clone()));
                }
                m.insert("sensitive".into(), Value::Bool(d.sensitive));
                (name.clone(), Value::Object(m))
            })
            .collect();
        serde_json::json!({
            "schemaVersion": SCHEMA_VERSION,
            "providers": providers,
            "resources": self.resources.iter().map(Node::to_json).collect::<Vec<_>>(),
            "data": self.data.iter().map(Node::to_json).collect::<Vec<_>>(),
            "edges": self.edges.iter().map(|e| serde_json::json!({"from": e.from, "to": e.to, "via": e.via})).collect::<Vec<_>>(),
            "nixConsumers": self.consumers.iter().map(|c| serde_json::json!({"id": c.id, "value": c.value.to_json()})).collect::<Vec<_>>(),
            "variables": variables,
        })
    }
}

impl Node {
    fn to_json(&self) -> Value {
        let mut meta = Map::new();
        meta.insert("dependsOn".into(), serde_json::json!(self.depends_on));
        if self.kind == NodeKind::Managed {
            meta.insert(
                "lifecycle".into(),
                serde_json::json!({
                    "preventDestroy": self.lifecycle.prevent_destroy,
                    "createBeforeDestroy": self.lifecycle.create_before_destroy,
                    "ignoreChanges": self.lifecycle.ignore_changes.iter().map(ToString::to_string).collect::<Vec<_>>(),
                }),
            );
        }
        serde_json::json!({
            "id": self.id,
            "provider": self.provider,
            "type": self.type_name,
            "name": self.name,
            "config": self.config.to_json(),
            "meta": meta,
        })
    }
}

fn path_json(path: &[PathStep]) -> Value {
    Value::Array(
        path.iter()
            .map(|s| match s {
                PathStep::Key(k) => Value::String(k.clone()),
                PathStep::Index(i) => Value::Number((*i).into()),
            })
            .collect(),
    )
}

impl Tree {
    /// Visit every leaf (scalars, empty containers and markers) with its path.
    pub fn walk_leaves<'a, F: FnMut(&[PathStep], &'a Tree)>(&'a self, mut f: F) {
        self.visit(&mut Vec::new(), &mut f);
    }

    fn visit<'a, F: FnMut(&[PathStep], &'a Tree)>(&'a self, path: &mut Vec<PathStep>, f: &mut F) {
        match self {
            // A sensitive value sits where the marker is; its inside is walked in place.
            Tree::Sensitive(inner) => inner.visit(path, f),
            Tree::List(items) if !items.is_empty() => {
                for (i, item) in items.iter().enumerate() {
                    path.push(PathStep::Index(i as u64));
                    item.visit(path, f);
                    path.pop();
                }
            }
            Tree::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    path.push(PathStep::Key(k.clone()));
                    v.visit(path, f);
                    path.pop();
                }
            }
            leaf => f(path, leaf),
        }
    }

    /// Every use of another node's output: one per `__ref` / `__sensitiveRef`
    /// leaf and one per `__derived` input.
    pub fn dependencies(&self) -> Vec<Dependency<'_>> {
        let mut out = Vec::new();
        self.walk_leaves(|at, leaf| {
            let uses: Vec<(&str, DependencyKind)> = match leaf {
                Tree::Ref(r) => vec![(&r.resource, DependencyKind::Ref)],
                Tree::SensitiveRef(r) => vec![(&r.resource, DependencyKind::SensitiveRef)],
                Tree::Derived(inputs) => inputs
                    .iter()
                    .map(|i| (i.resource.as_str(), DependencyKind::Derived))
                    .collect(),
                _ => return,
            };
            for (resource, kind) in uses {
                out.push(Dependency {
                    at: at.to_vec(),
                    resource,
                    kind,
                });
            }
        });
        out
    }

    /// Calls `f` with the path of every `__build` leaf inside a `__sensitive` value.
    pub fn walk_sensitive_builds(&self, f: &mut dyn FnMut(&[PathStep])) {
        fn go(t: &Tree, inside: bool, path: &mut Vec<PathStep>, f: &mut dyn FnMut(&[PathStep])) {
            match t {
                Tree::Build(_) if inside => f(path),
                Tree::Sensitive(inner) => go(inner, true, path, f),
                Tree::List(items) => {
                    for (i, item) in items.iter().enumerate() {
                        path.push(PathStep::Index(i as u64));
                        go(item, inside, path, f);
                        path.pop();
                    }
                }
                Tree::Object(map) => {
                    for (k, v) in map {
                        path.push(PathStep::Key(k.clone()));
                        go(v, inside, path, f);
                        path.pop();
                    }
                }
                _ => {}
            }
        }
        go(self, false, &mut Vec::new(), f);
    }

    /// The `__ref` and `__sensitiveRef` leaves with their paths.
    pub fn refs(&self) -> Vec<(Vec<PathStep>, &Ref)> {
        let mut out = Vec::new();
        self.walk_leaves(|at, leaf| {
            if let Tree::Ref(r) | Tree::SensitiveRef(r) = leaf {
                out.push((at.to_vec(), r));
            }
        });
        out
    }

    /// True when the tree holds no `__ref`, `__sensitiveRef` or `__derived`
    /// (a `__build` leaf is known: its path is fixed at evaluation).
    pub fn is_known(&self) -> bool {
        match self {
            Tree::Ref(_) | Tree::SensitiveRef(_) | Tree::Derived(_) => false,
            Tree::Sensitive(inner) => inner.is_known(),
            Tree::List(items) => items.iter().all(Tree::is_known),
            Tree::Object(map) => map.values().all(Tree::is_known),
            _ => true,
        }
    }

    /// True when some value here can only be produced by re-evaluating Nix.
    pub fn needs_nix(&self) -> bool {
        match self {
            Tree::Derived(_) => true,
            Tree::Sensitive(inner) => inner.needs_nix(),
            Tree::List(items) => items.iter().any(Tree::needs_nix),
            Tree::Object(map) => map.values().any(Tree::needs_nix),
            _ => false,
        }
    }

    /// The tree as IR JSON, markers included.
    pub fn to_json(&self) -> Value {
        match self {
            Tree::Null => Value::Null,
            Tree::Bool(b) => Value::Bool(*b),
            Tree::Number(n) => Value::Number(n.clone()),
            Tree::String(s) => Value::String(s.clone()),
            Tree::List(items) => Value::Array(items.iter().map(Tree::to_json).collect()),
            Tree::Object(map) => {
                Value::Object(map.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
            Tree::Ref(r) => {
                serde_json::json!({"__ref": {"resource": r.resource, "path": path_json(&r.path)}})
            }
            Tree::SensitiveRef(r) => {
                serde_json::json!({"__sensitiveRef": {"resource": r.resource, "path": path_json(&r.path)}})
            }
            Tree::Derived(inputs) => {
                serde_json::json!({"__derived": {"inputs": inputs.iter().map(ToString::to_string).collect::<Vec<_>>()}})
            }
            Tree::Build(b) => {
                let mut body = Map::new();
                body.insert("path".into(), Value::String(b.path.clone()));
                if let Some(d) = &b.drv_path {
                    body.insert("drvPath".into(), Value::String(d.clone()));
                }
                serde_json::json!({ "__build": body })
            }
            Tree::Sensitive(inner) => {
                serde_json::json!({"__sensitive": {"value": inner.to_json()}})
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn two_nodes() -> Value {
        json!({
            "schemaVersion": 1,
            "providers": {"alpha": {"source": "provider-alpha", "config": {}}},
            "resources": [
                {"id": "alpha.alpha_token.A", "provider": "alpha", "type": "alpha_token", "name": "A", "config": {}},
                {"id": "alpha.alpha_token.B", "provider": "alpha", "type": "alpha_token", "name": "B",
                 "config": {"label": {"__ref": {"resource": "alpha.alpha_token.A", "path": ["value"]}}}}
            ],
            "edges": [{"from": "alpha.alpha_token.A", "to": "alpha.alpha_token.B", "via": "label"}],
            "nixConsumers": []
        })
    }

    fn errors(doc: &Value) -> Vec<String> {
        match parse_value(doc) {
            Ok(_) => panic!("accepted: {doc}"),
            Err(errs) => errs.iter().map(ToString::to_string).collect(),
        }
    }

    fn assert_error(doc: &Value, expected: &str) {
        let errs = errors(doc);
        assert!(
            errs.iter().any(|e| e.contains(expected)),
            "expected {expected:?} in {errs:#?}"
        );
    }

    #[test]
    fn parses_a_small_document() {
        let ir = parse_value(&two_nodes()).unwrap();
        assert_eq!(ir.resources.len(), 2);
        assert!(ir.data.is_empty() && ir.variables.is_empty());
        let b = ir.node("alpha.alpha_token.B").unwrap();
        assert_eq!(b.kind, NodeKind::Managed);
        assert_eq!(b.lifecycle, Lifecycle::default());
        let Tree::Object(config) = &b.config else {
            panic!()
        };
        assert_eq!(
            config["label"],
            Tree::Ref(Ref {
                resource: "alpha.alpha_token.A".into(),
                path: vec![PathStep::Key("value".into())]
            })
        );
        assert!(!b.config.is_known());
        assert!(!b.config.needs_nix());
        assert!(ir.node("alpha.alpha_token.A").unwrap().config.is_known());
    }

    #[test]
    fn missing_ref_path_names_element_and_attribute() {
        let mut doc = two_nodes();
        doc["resources"][1]["config"]["label"] =
            json!({"__ref": {"resource": "alpha.alpha_token.A"}});
        assert_eq!(
            errors(&doc),
            ["resources[1] (alpha.alpha_token.B): config.label.__ref: 'path' is a required property"]
        );
    }

    #[test]
    fn reports_every_structural_error() {
        let mut doc = two_nodes();
        doc["resources"][0]["meta"] = json!({"count": 2, "lifecycle": {"preventDestroy": "yes"}});
        doc["resources"][1]["config"]["label"] = json!({"__x": 1});
        doc["extra"] = json!(true);
        let errs = errors(&doc);
        assert_eq!(errs.len(), 4, "{errs:#?}");
        assert!(errs.contains(
            &"ir: Additional properties are not allowed ('extra' was unexpected)".to_string()
        ));
        assert!(errs
            .iter()
            .any(|e| e
                .starts_with("resources[0] (alpha.alpha_token.A): meta.count: count is not part")));
        assert!(errs.contains(
            &"resources[0] (alpha.alpha_token.A): meta.lifecycle.preventDestroy: 'yes' is not of type 'boolean'".to_string()
        ));
        assert!(errs.iter().any(|e| e
            .starts_with("resources[1] (alpha.alpha_token.B): config.label.__x: unknown marker")));
    }

    #[test]
    fn referential_rules_run_after_structure() {
        let mut doc = two_nodes();
        doc["edges"] = json!([]);
        assert_error(
            &doc,
            "config.label: refers to 'alpha.alpha_token.A' but no edge goes from",
        );
        doc["resources"][0]["name"] = json!("Z");
        assert_error(
            &doc,
            "id: 'alpha.alpha_token.A' does not match its parts (expected 'alpha.alpha_token.Z')",
        );
        // A structural error hides the referential ones.
        doc["schemaVersion"] = json!(2);
        assert_eq!(
            errors(&doc),
            [format!("schemaVersion: {SCHEMA_VERSION_MESSAGE}")]
        );
    }

    #[test]
    fn derived_inputs_split_at_the_longest_declared_id() {
        let doc = json!({
            "schemaVersion": 1,
            "providers": {"a.b": {"source": "x", "config": {}}, "a": {"source": "x", "config": {}}},
            "resources": [
                {"id": "a.b.c.d", "provider": "a.b", "type": "c", "name": "d", "config": {}},
                {"id": "a.b.c", "provider": "a", "type": "b", "name": "c",
                 "config": {"x": {"__derived": {"inputs": ["a.b.c.d.value", "a.b.c.d"]}}}}
            ],
            "edges": [{"from": "a.b.c.d", "to": "a.b.c", "via": "x"}, {"from": "a.b.c", "to": "a.b.c", "via": "x"}],
            "nixConsumers": []
        });
        let ir = parse_value(&doc).unwrap();
        let Tree::Object(config) = &ir.resources[1].config else {
            panic!()
        };
        assert_eq!(
            config["x"],
            Tree::Derived(vec![
                DerivedInput {
                    resource: "a.b.c.d".into(),
                    attr: "value".into()
                },
                DerivedInput {
                    resource: "a.b.c".into(),
                    attr: "d".into()
                },
            ])
        );
        assert!(config["x"].needs_nix());
    }

    #[test]
    fn sensitive_refs_and_builds() {
        let mut doc = two_nodes();
        doc["resources"][1]["config"] = json!({
            "pw": {"__sensitiveRef": {"resource": "alpha.alpha_token.A", "path": ["secret", 0]}},
            "img": {"__build": {"path": "/nix/store/x-img", "drvPath": "/nix/store/x-img.drv"}}
        });
        doc["edges"][0]["via"] = json!("pw");
        let ir = parse_value(&doc).unwrap();
        let config = &ir.resources[1].config;
        let deps = config.dependencies();
        assert_eq!(deps.len(), 1);
        assert_eq!(deps[0].kind, DependencyKind::SensitiveRef);
        assert_eq!(render_path(&deps[0].at), "pw");
        assert_eq!(
            config.refs()[0].1.to_string(),
            "alpha.alpha_token.A.secret[0]"
        );
        let Tree::Object(map) = config else { panic!() };
        assert_eq!(
            map["img"],
            Tree::Build(Build {
                path: "/nix/store/x-img".into(),
                drv_path: Some("/nix/store/x-img.drv".into())
            })
        );
        assert!(map["img"].is_known());
    }

    #[test]
    fn sensitive_values_keep_their_inside_and_its_edges() {
        let mut doc = two_nodes();
        doc["resources"][1]["config"] = json!({
            "conn": {"__sensitive": {"value": {"url": "postgres://x", "pw": {"__ref": {"resource": "alpha.alpha_token.A", "path": ["value"]}}}}}
        });
        doc["edges"][0]["via"] = json!("conn");
        let ir = parse_value(&doc).unwrap();
        let config = &ir.resources[1].config;
        let Tree::Object(map) = config else { panic!() };
        assert!(
            matches!(&map["conn"], Tree::Sensitive(inner) if matches!(**inner, Tree::Object(_)))
        );
        let deps = config.dependencies();
        assert_eq!(deps.len(), 1);
        assert_eq!(
            render_path(&deps[0].at),
            "conn.pw",
            "inside, walked in place"
        );
        assert!(!config.is_known());
        assert_eq!(
            Tree::Sensitive(Box::new(config.clone())).to_json()["__sensitive"]["value"],
            config.to_json()
        );

        // A build output inside is refused; so is a marker with another key.
        doc["resources"][1]["config"] =
            json!({"conn": {"__sensitive": {"value": [{"__build": {"path": "/nix/store/x"}}]}}});
        let errors = parse_value(&doc).unwrap_err();
        assert!(
            errors.iter().any(|e| e
                .to_string()
                .contains("config.conn[0]: __build inside __sensitive")),
            "{errors:?}"
        );
        doc["resources"][1]["config"] = json!({"conn": {"__sensitive": {"value": 1, "why": 2}}});
        assert!(parse_value(&doc).is_err());
    }

    #[test]
    fn data_nodes_and_variables() {
        let mut doc = two_nodes();
        doc["data"] = json!([{"id": "data.alpha.zone.z", "provider": "alpha", "type": "zone", "name": "z", "config": {},
                               "meta": {"dependsOn": ["alpha.alpha_token.A"]}}]);
        doc["edges"].as_array_mut().unwrap().push(
            json!({"from": "alpha.alpha_token.A", "to": "data.alpha.zone.z", "via": "dependsOn"}),
        );
        doc["variables"] =
            json!({"region": {"type": "string", "default": "eu"}, "any": {"default": null}});
        let ir = parse_value(&doc).unwrap();
        assert_eq!(ir.data[0].kind, NodeKind::Data);
        assert_eq!(ir.data[0].depends_on, ["alpha.alpha_token.A"]);
        assert_eq!(ir.variables["region"].default, Some(json!("eu")));
        assert_eq!(ir.variables["any"].default, Some(Value::Null));
        assert_eq!(ir.nodes().count(), 3);

        doc["data"][0]["meta"]["lifecycle"] = json!({});
        assert_error(&doc, "data[0] (data.alpha.zone.z): meta.lifecycle: lifecycle is not allowed on a data source");
    }

    #[test]
    fn numbers_in_paths_follow_json_schema_integers() {
        let mut doc = two_nodes();
        doc["resources"][1]["config"]["label"] =
            json!({"__ref": {"resource": "alpha.alpha_token.A", "path": ["net", 1.0]}});
        let ir = parse_value(&doc).unwrap();
        assert_eq!(
            ir.resources[1].config.refs()[0].1.path[1],
            PathStep::Index(1)
        );
        for (bad, message) in [
            (json!(-1), "-1 is less than the minimum of 0"),
            (json!(1.5), "1.5 is not of type 'string', 'integer'"),
            (json!(true), "True is not of type 'string', 'integer'"),
            (
                json!(9_007_199_254_740_992u64),
                "9007199254740992 is greater than the maximum of 9007199254740991",
            ),
        ] {
            doc["resources"][1]["config"]["label"]["__ref"]["path"] = json!(["net", bad]);
            assert_error(&doc, &format!("config.label.__ref.path[1]: {message}"));
        }
        // arbitrary precision: larger than u64, still an integer
        let text = two_nodes().to_string().replace(
            r#""path":["value"]"#,
            r#""path":[123456789012345678901234567890]"#,
        );
        assert!(parse(text.as_bytes()).unwrap_err()[0]
            .message
            .contains("greater than the maximum"));
    }

    #[test]
    fn schema_version_accepts_only_one() {
        for (v, ok) in [
            (json!(1), true),
            (json!(1.0), true),
            (json!(true), false),
            (json!("1"), false),
            (json!(2), false),
        ] {
            let mut doc = two_nodes();
            doc["schemaVersion"] = v.clone();
            assert_eq!(parse_value(&doc).is_ok(), ok, "schemaVersion {v}");
        }
    }

    #[test]
    fn non_objects_and_bad_json() {
        assert_eq!(errors(&json!([])), ["ir: [] is not of type 'object'"]);
        let errs = parse(b"{\"schemaVersion\": 1,").unwrap_err();
        assert_eq!(errs.len(), 1);
        assert!(
            errs[0].to_string().starts_with("ir: invalid JSON: "),
            "{errs:?}"
        );
    }

    #[test]
    fn paths_render_and_parse() {
        let steps = vec![
            PathStep::Key("tags".into()),
            PathStep::Key("a.b".into()),
            PathStep::Index(0),
            PathStep::Key("size".into()),
            PathStep::Key("q\"\\\n\u{1}".into()),
        ];
        let text = render_path(&steps);
        assert_eq!(text, r#"tags["a.b"][0].size["q\"\\\n\u0001"]"#);
        assert_eq!(parse_path(&text), Some(steps));
        assert_eq!(
            render_path(&[PathStep::Key("0x".into()), PathStep::Index(3)]),
            r#"["0x"][3]"#
        );
        for good in [
            "a",
            "a.b",
            "a[0]",
            "a[10].b",
            r#"a["x"]"#,
            r#"["0"]"#,
            r#"a["\u00e9\/"]"#,
            "_x-y",
        ] {
            assert!(parse_path(good).is_some(), "{good}");
        }
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "[0]",
            "a[01]",
            "a[x]",
            r#"a["x]"#,
            "a b",
            "*",
            "0a",
            "a[-1]",
            "a\n",
            r#"a["\x"]"#,
        ] {
            assert_eq!(parse_path(bad), None, "{bad:?}");
        }
        assert_eq!(IgnorePath::All.to_string(), "*");
    }

    #[test]
    fn id_patterns() {
        assert!(is_node_id("alpha.alpha_token.A"));
        assert!(is_node_id("registry.opentofu.org/x/alpha.t.web__a"));
        assert!(is_node_id("data.alpha.t.n"));
        assert!(!is_node_id("alpha.t"));
        assert!(!is_node_id("alpha.t.a b"));
        assert!(!is_node_id(".t.n"));
        assert!(is_data_id("data.alpha.t.n") && !is_data_id("alpha.t.n"));
        assert!(is_derived_input("alpha.t.n.value") && !is_derived_input("alpha.t.n"));
        assert!(is_drv_path("/.drv") && !is_drv_path("/x.drv\n") && !is_drv_path("x.drv"));
    }

    #[test]
    fn round_trips_through_json() {
        let mut doc = two_nodes();
        doc["resources"][0]["meta"] =
            json!({"lifecycle": {"ignoreChanges": ["*", "tags[\"a.b\"]"], "preventDestroy": true}});
        let ir = parse_value(&doc).unwrap();
        let again = parse_value(&ir.to_json()).unwrap();
        assert_eq!(ir, again);
        assert_eq!(
            ir.resources[0].lifecycle.ignore_changes,
            [
                IgnorePath::All,
                IgnorePath::Path(vec![
                    PathStep::Key("tags".into()),
                    PathStep::Key("a.b".into())
                ])
            ]
        );
    }

    #[test]
    fn schema_file_contains_every_pattern() {
        let schema = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ir-schema.json"));
        let value: Value = serde_json::from_str(schema).unwrap();
        let mut patterns = Vec::new();
        fn collect(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(m) => {
                    for (k, x) in m {
                        match (k.as_str(), x) {
                            ("pattern", Value::String(s)) => out.push(s.clone()),
                            _ => collect(x, out),
                        }
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
                _ => {}
            }
        }
        collect(&value, &mut patterns);
        let ours = [
            PROVIDER_PATTERN.to_string(),
            NODE_ID_PATTERN.to_string(),
            DATA_ID_PATTERN.to_string(),
            IDENT_PATTERN.to_string(),
            DERIVED_INPUT_PATTERN.to_string(),
            CONSUMER_ID_PATTERN.to_string(),
            BUILD_PATH_PATTERN.to_string(),
            DRV_PATH_PATTERN.to_string(),
            format!("^{PATH_BODY}$"),
            format!(r"^(?:\*|{PATH_BODY})$"),
            format!("^(?:dependsOn|{PATH_BODY})$"),
        ];
        for p in &ours {
            assert!(
                patterns.contains(p),
                "docs/ir-schema.json lost the pattern {p}"
            );
        }
        assert!(
            schema.contains(UNKNOWN_MARKER)
                && schema.contains(SCHEMA_VERSION_MESSAGE)
                && schema.contains(LIFECYCLE_ON_DATA)
        );
        for k in ["count", "for_each", "forEach"] {
            assert!(schema.contains(expansion_message(k).unwrap()));
        }
        assert!(schema.contains(&MAX_INDEX.to_string()));
    }
}
