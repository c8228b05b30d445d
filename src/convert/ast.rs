//! The small typed model of one Terraform module (a directory of `.tf` and `.tf.json` files)
//! that the converter translates: what `parse_hcl` and `parse_json` both produce.
//!
//! Owns: the blocks convert understands and their meta-arguments, each expression kept as
//! `hcl::Expression` (both syntaxes parse to it). Not: parsing (`parse_hcl`, `parse_json`) or
//! translation (`code`, `expr`).

use hcl::Expression;

/// One module's declarations, in file order.
#[derive(Debug, Clone, Default)]
pub(crate) struct Module {
    /// `variable` blocks.
    pub variables: Vec<Variable>,
    /// `locals` entries.
    pub locals: Vec<(String, Expression)>,
    /// `provider` blocks.
    pub providers: Vec<ProviderBlock>,
    /// `terraform { required_providers { NAME = { source, version } } }`.
    pub required_providers: Vec<RequiredProvider>,
    /// `resource` and `data` blocks.
    pub resources: Vec<Resource>,
    /// `output` blocks.
    pub outputs: Vec<Output>,
    /// `module` blocks.
    pub calls: Vec<ModuleCall>,
    /// Blocks and arguments convert does not translate: (where, what).
    pub unsupported: Vec<(String, String)>,
    /// `terraform { backend "TYPE" { ... } }`.
    pub backend: Option<TfBackend>,
}

/// A `terraform { backend "TYPE" { ... } }` block.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TfBackend {
    /// Its type: `s3`, `local`, `gcs`, ...
    pub kind: String,
    /// Its arguments, as written.
    pub settings: Vec<(String, Expression)>,
}

/// A `variable` block.
#[derive(Debug, Clone)]
pub(crate) struct Variable {
    /// Its name.
    pub name: String,
    /// `type`, as an expression (`string`, `list(string)`, ...).
    pub type_expr: Option<Expression>,
    /// `default`.
    pub default: Option<Expression>,
    /// `description`.
    pub description: Option<String>,
    /// `sensitive = true`.
    pub sensitive: bool,
}

/// A `provider` block.
#[derive(Debug, Clone)]
pub(crate) struct ProviderBlock {
    /// The provider's local name.
    pub name: String,
    /// `alias`.
    pub alias: Option<String>,
    /// Its configuration arguments.
    pub config: Body,
}

/// One `required_providers` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequiredProvider {
    /// The local name.
    pub name: String,
    /// `source`, e.g. `hashicorp/null`.
    pub source: Option<String>,
    /// `version` constraint.
    pub version: Option<String>,
}

/// Managed resource or data source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// `resource`.
    Managed,
    /// `data`.
    Data,
}

/// How a resource block is expanded into instances.
#[derive(Debug, Clone)]
pub(crate) enum Expansion {
    /// One instance.
    Single,
    /// `count = EXPR`.
    Count(Expression),
    /// `for_each = EXPR`.
    ForEach(Expression),
}

/// A `resource` or `data` block.
#[derive(Debug, Clone)]
pub(crate) struct Resource {
    /// Managed or data.
    pub kind: Kind,
    /// The resource type.
    pub type_name: String,
    /// The block name.
    pub name: String,
    /// count / for_each.
    pub expansion: Expansion,
    /// `provider = NAME` or `NAME.ALIAS`: (local name, alias).
    pub provider: Option<(String, Option<String>)>,
    /// `depends_on` entries (traversals).
    pub depends_on: Vec<Expression>,
    /// `lifecycle`.
    pub lifecycle: Lifecycle,
    /// The configuration arguments and nested blocks.
    pub config: Body,
}

/// A `lifecycle` block.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lifecycle {
    /// `create_before_destroy`.
    pub create_before_destroy: Option<Expression>,
    /// `prevent_destroy`.
    pub prevent_destroy: Option<Expression>,
    /// `ignore_changes`: a list of attribute traversals, or `all`.
    pub ignore_changes: Option<Expression>,
}

/// An `output` block.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    /// Its name.
    pub name: String,
    /// `value`.
    pub value: Expression,
}

/// A `module` block.
#[derive(Debug, Clone)]
pub(crate) struct ModuleCall {
    /// Its name.
    pub name: String,
    /// `source`.
    pub source: String,
    /// The arguments (the called module's variables).
    pub args: Vec<(String, Expression)>,
    /// `count` / `for_each`: instances, each named with the flat prefix `NAME__KEY--`.
    pub expansion: Expansion,
}

/// A configuration body: arguments, then nested blocks (each a list entry in Nivis, the
/// shape of list and set blocks).
#[derive(Debug, Clone, Default)]
pub(crate) struct Body {
    /// `name = expr`.
    pub attrs: Vec<(String, Expression)>,
    /// `name { ... }`, repeated blocks in order.
    pub blocks: Vec<(String, Body)>,
}
