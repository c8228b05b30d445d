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
    pub(crate) variables: Vec<Variable>,
    /// `locals` entries.
    pub(crate) locals: Vec<(String, Expression)>,
    /// `provider` blocks.
    pub(crate) providers: Vec<ProviderBlock>,
    /// `terraform { required_providers { NAME = { source, version } } }`.
    pub(crate) required_providers: Vec<RequiredProvider>,
    /// `resource` and `data` blocks.
    pub(crate) resources: Vec<Resource>,
    /// `output` blocks.
    pub(crate) outputs: Vec<Output>,
    /// `module` blocks.
    pub(crate) calls: Vec<ModuleCall>,
    /// Blocks and arguments convert does not translate: (where, what).
    pub(crate) unsupported: Vec<(String, String)>,
    /// `terraform { backend "TYPE" { ... } }`.
    pub(crate) backend: Option<TfBackend>,
}

/// A `terraform { backend "TYPE" { ... } }` block.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TfBackend {
    /// Its type: `s3`, `local`, `gcs`, ...
    pub(crate) kind: String,
    /// Its arguments, as written.
    pub(crate) settings: Vec<(String, Expression)>,
}

/// A `variable` block.
#[derive(Debug, Clone)]
pub(crate) struct Variable {
    /// Its name.
    pub(crate) name: String,
    /// `type`, as an expression (`string`, `list(string)`, ...).
    pub(crate) type_expr: Option<Expression>,
    /// `default`.
    pub(crate) default: Option<Expression>,
    /// `description`.
    pub(crate) description: Option<String>,
    /// `sensitive = true`.
    pub(crate) sensitive: bool,
}

/// A `provider` block.
#[derive(Debug, Clone)]
pub(crate) struct ProviderBlock {
    /// The provider's local name.
    pub(crate) name: String,
    /// `alias`.
    pub(crate) alias: Option<String>,
    /// Its configuration arguments.
    pub(crate) config: Body,
}

/// One `required_providers` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RequiredProvider {
    /// The local name.
    pub(crate) name: String,
    /// `source`, e.g. `hashicorp/null`.
    pub(crate) source: Option<String>,
    /// `version` constraint.
    pub(crate) version: Option<String>,
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
    pub(crate) kind: Kind,
    /// The resource type.
    pub(crate) type_name: String,
    /// The block name.
    pub(crate) name: String,
    /// count / for_each.
    pub(crate) expansion: Expansion,
    /// `provider = NAME` or `NAME.ALIAS`: (local name, alias).
    pub(crate) provider: Option<(String, Option<String>)>,
    /// `depends_on` entries (traversals).
    pub(crate) depends_on: Vec<Expression>,
    /// `lifecycle`.
    pub(crate) lifecycle: Lifecycle,
    /// The configuration arguments and nested blocks.
    pub(crate) config: Body,
}

/// A `lifecycle` block.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lifecycle {
    /// `create_before_destroy`.
    pub(crate) create_before_destroy: Option<Expression>,
    /// `prevent_destroy`.
    pub(crate) prevent_destroy: Option<Expression>,
    /// `ignore_changes`: a list of attribute traversals, or `all`.
    pub(crate) ignore_changes: Option<Expression>,
}

/// An `output` block.
#[derive(Debug, Clone)]
pub(crate) struct Output {
    /// Its name.
    pub(crate) name: String,
    /// `value`.
    pub(crate) value: Expression,
}

/// A `module` block.
#[derive(Debug, Clone)]
pub(crate) struct ModuleCall {
    /// Its name.
    pub(crate) name: String,
    /// `source`.
    pub(crate) source: String,
    /// The arguments (the called module's variables).
    pub(crate) args: Vec<(String, Expression)>,
    /// `count` / `for_each`: instances, each named with the flat prefix `NAME__KEY--`.
    pub(crate) expansion: Expansion,
}

/// A configuration body: arguments, then nested blocks (each a list entry in Nivis, the
/// shape of list and set blocks).
#[derive(Debug, Clone, Default)]
pub(crate) struct Body {
    /// `name = expr`.
    pub(crate) attrs: Vec<(String, Expression)>,
    /// `name { ... }`, repeated blocks in order.
    pub(crate) blocks: Vec<(String, Body)>,
}
