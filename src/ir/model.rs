//! The typed IR: what [`parse`](super::parse) returns and the engine consumes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Number, Value};

use super::fields::Fields;
use super::path::{render_path, PathStep};
use super::rules::is_ident;

/// A whole IR document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ir {
    /// Provider declarations by provider id (`providers.<id>`).
    pub(crate) providers: BTreeMap<String, ProviderDecl>,
    /// `resources[]`: the managed resources, in IR order.
    pub(crate) resources: Vec<Node>,
    /// `data[]`: the data sources, in IR order.
    pub(crate) data: Vec<Node>,
    /// `edges[]`: which node must be applied before which, and through which attribute.
    pub(crate) edges: Vec<Edge>,
    /// `nixConsumers[]`: values Nix computes from outputs for itself.
    pub(crate) consumers: Vec<Consumer>,
    /// `variables.<name>`: the plan's declared input variables.
    pub(crate) variables: BTreeMap<String, VariableDecl>,
    /// `moved[]`: addresses whose recorded objects now belong to another address.
    pub(crate) moved: Vec<Moved>,
    /// `ephemeral[]`: ephemeral resources, opened for one run and never recorded.
    pub(crate) ephemeral: Vec<EphemeralNode>,
    /// `conditions[]`: postconditions and checks, as Nix judged them against its ledger.
    pub(crate) conditions: Vec<Condition>,
    /// `removed[]`: records of resources no longer declared, forgotten or destroyed.
    pub(crate) removed: Vec<Removed>,
    /// `withoutLedger`: the library's `toIR` was called without the outputs ledger (a
    /// forgotten `inherit ledger;`), so Nix never sees what providers produce.
    pub(crate) without_ledger: bool,
}

/// `ephemeral[i]`: an ephemeral resource (id `ephemeral.<provider>.<type>.<name>`). Its result
/// is never stored: the executor opens it for the run, hands the result to Nix through the
/// private channel, and closes it at the end. It is not a graph node: nothing waits on it
/// through an edge, a configuration computed from its result waits for Nix (`__derived`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EphemeralNode {
    /// The id, `ephemeral.<provider>.<type>.<name>`.
    pub(crate) id: String,
    /// The id of the provider that opens it.
    pub(crate) provider: String,
    /// The provider's ephemeral resource type, e.g. `random_password`.
    pub(crate) type_name: String,
    /// The name given in the plan.
    pub(crate) name: String,
    /// Always a [`Tree::Object`]; may hold references to resources and data sources.
    pub(crate) config: Tree,
}

/// `removed[i]`: the object recorded at `from`, a resource the plan no longer declares, leaves
/// the state: forgotten (no provider call; the object is left as it is) or destroyed (what
/// happens to any record the plan no longer declares, written down).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Removed {
    /// The address the object is recorded at.
    pub(crate) from: String,
    /// Whether it is forgotten or destroyed (`destroy`).
    pub(crate) action: RemovedAction,
}

/// `removed[i].destroy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RemovedAction {
    /// `destroy = false`: the record goes, the object stays.
    Forget,
    /// `destroy = true`: the object is destroyed.
    Destroy,
}

/// `conditions[i]`: a postcondition of a resource or a check of the plan, with what Nix found
/// when it evaluated the plan against the ledger it was given. A precondition is never here: a
/// false one fails the evaluation, one not known yet holds its resource back
/// ([`Lifecycle::precondition_pending`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    /// What kind of condition, with the resource a postcondition is of.
    pub(crate) kind: ConditionKind,
    /// A check's name, or `<resource id>.postcondition[<i>]`.
    pub(crate) name: String,
    /// The author's message, shown when the condition fails.
    pub(crate) message: String,
    /// What Nix found.
    pub(crate) status: ConditionStatus,
}

/// `conditions[i].kind` (and, for a postcondition, `resource`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ConditionKind {
    /// `lib.check`: a failing one is a warning after the fixpoint.
    Check,
    /// `lifecycle.postcondition` of this resource: a failing one fails an apply.
    Postcondition {
        /// The resource's id.
        resource: String,
    },
}

/// `conditions[i].status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConditionStatus {
    /// The condition holds.
    Pass,
    /// The condition is false.
    Fail,
    /// An output it reads is not in the ledger yet.
    Unknown,
}

impl ConditionStatus {
    /// The IR spelling.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ConditionStatus::Pass => "pass",
            ConditionStatus::Fail => "fail",
            ConditionStatus::Unknown => "unknown",
        }
    }
}

/// `moved[i]`: the object recorded at `from` is now the object of `to` (a rename, or a move
/// into or out of a `count`/`forEach` expansion). The executor renames the state record; no
/// provider is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Moved {
    /// The address the object was recorded at.
    pub(crate) from: String,
    /// The address it belongs to now.
    pub(crate) to: String,
}

/// `providers.<id>`: which binary to run, the protocol it speaks and how to configure it.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderDecl {
    /// Where the binary comes from: a registry address (`hashicorp/null`) or a path.
    pub source: String,
    /// The version constraint for a registry address; `None` takes the newest.
    pub(crate) version: Option<String>,
    /// Always a [`Tree::Object`]; may hold references (always empty for NixOps4 providers).
    pub(crate) config: Tree,
    /// The protocol the binary speaks.
    pub(crate) kind: ProviderKind,
    /// `drvPath`: the derivation that builds `source`, a store path (`source = lib.drv pkg`),
    /// realised before the provider starts.
    pub(crate) drv_path: Option<String>,
}

/// `providers.<id>.kind`: the protocol the provider binary speaks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum ProviderKind {
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
    pub(crate) fn name(&self) -> &'static str {
        match self {
            ProviderKind::Tfplugin => "tfplugin",
            ProviderKind::Nixops4 { .. } => "nixops4",
        }
    }
}

/// Whether a node is a managed resource or a data source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum NodeKind {
    /// A managed resource, created, updated and destroyed by its provider.
    Managed,
    /// A data source, read by its provider and never changed.
    Data,
}

/// A managed resource (`resources[]`, id `<provider>.<type>.<name>`) or a data
/// source (`data[]`, id `data.<provider>.<type>.<name>`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    /// Managed resource or data source.
    pub(crate) kind: NodeKind,
    /// The id: `<provider>.<type>.<name>`, or `data.<provider>.<type>.<name>`.
    pub(crate) id: String,
    /// The id of the provider that manages or reads it.
    pub(crate) provider: String,
    /// The provider's resource or data source type, e.g. `null_resource`.
    pub(crate) type_name: String,
    /// The name given in the plan.
    pub(crate) name: String,
    /// `module`: the address prefix of the module instance that declares it
    /// (`module.db__eu`), part of the id.
    pub(crate) module: Option<String>,
    /// Always a [`Tree::Object`].
    pub(crate) config: Tree,
    /// Ids of nodes that must be applied first although nothing of theirs is read (`dependsOn`).
    pub(crate) depends_on: Vec<String>,
    /// All defaults for data sources, which cannot have a lifecycle.
    pub(crate) lifecycle: Lifecycle,
    /// `meta.importId` (managed resources): the provider's id of an existing object to adopt
    /// when nothing is recorded at this address yet.
    pub(crate) import_id: Option<String>,
    /// `key`: the instance key when `lib.count` (an index) or `lib.forEach` (a key) made the
    /// node; its name is then `<block>__<key>`, and the instances of one call form one block.
    pub(crate) key: Option<String>,
}

/// `meta.lifecycle` of a managed resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lifecycle {
    /// `preventDestroy`: a plan that would destroy the object is refused.
    pub(crate) prevent_destroy: bool,
    /// `createBeforeDestroy`: a replacement creates the new object before destroying the old.
    pub(crate) create_before_destroy: bool,
    /// `ignoreChanges`: attributes whose changes in the plan do not cause an update.
    pub(crate) ignore_changes: Vec<IgnorePath>,
    /// `preconditionPending`: the outputs its preconditions read that Nix did not have yet;
    /// the resource waits for the evaluation that has them (empty: every precondition held).
    pub(crate) precondition_pending: Vec<DerivedInput>,
    /// `replaceTriggeredBy`: what replaces the object when it changes (Terraform's
    /// `replace_triggered_by`); each trigger has an edge to the resource (DESIGN §103).
    pub(crate) replace_triggered_by: Vec<ReplaceTrigger>,
}

/// One `lifecycle.replaceTriggeredBy` entry (DESIGN §103).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ReplaceTrigger {
    /// A whole managed resource: the object is replaced when the trigger is planned to be
    /// created, updated or replaced in the same phase.
    Resource(String),
    /// One output of a managed resource: the object is replaced when the output's value
    /// differs from the one recorded at the object's last apply.
    Attribute(Ref),
}

impl ReplaceTrigger {
    /// The id of the trigger resource.
    pub(crate) fn resource(&self) -> &str {
        match self {
            ReplaceTrigger::Resource(id) => id,
            ReplaceTrigger::Attribute(r) => &r.resource,
        }
    }
}

impl std::fmt::Display for ReplaceTrigger {
    /// `alpha.alpha_thing.a` or `alpha.alpha_thing.a.id`: how plans name the cause.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplaceTrigger::Resource(id) => f.write_str(id),
            ReplaceTrigger::Attribute(r) => {
                write!(f, "{}.{}", r.resource, super::path::render_path(&r.path))
            }
        }
    }
}

/// One `ignoreChanges` entry: `"*"` or an attribute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IgnorePath {
    /// `"*"`: every attribute.
    All,
    /// One attribute path.
    Path(Vec<PathStep>),
}

/// A config, provider config or consumer value. Objects are either plain
/// (`Object`) or one of the six leaf markers.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Tree {
    /// JSON `null`.
    Null,
    /// A boolean.
    Bool(bool),
    /// A number, as JSON keeps it.
    Number(Number),
    /// A string.
    String(String),
    /// A list (or tuple, or set) of trees.
    List(Vec<Tree>),
    /// A plain object: attributes by name, none of them a marker.
    Object(Fields),
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
    /// `__ephemeral`: a value Nix computed from an ephemeral resource's result: secret, for
    /// this run only, allowed only where nothing is stored (write-only attributes, provider
    /// and ephemeral configurations).
    Ephemeral(Box<Tree>),
}

/// The body of a `__ref` / `__sensitiveRef` marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ref {
    /// The id of the node whose output is read.
    pub(crate) resource: String,
    /// The output's attribute path in that node.
    pub(crate) path: Vec<PathStep>,
}

/// One `__derived` input, `<id>.<attr>`, split at the longest declared id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DerivedInput {
    /// The id of the node whose output Nix reads.
    pub(crate) resource: String,
    /// The attribute after the id, as written.
    pub(crate) attr: String,
}

/// The body of a `__build` marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Build {
    /// The store path of the build output (or a file inside it).
    pub(crate) path: String,
    /// The derivation that builds it, when Nix gave one.
    pub(crate) drv_path: Option<String>,
}

/// `from` must be applied before `to`; `via` is the config path in `to` (or `dependsOn`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edge {
    /// The node applied first.
    pub(crate) from: String,
    /// The node that waits for it.
    pub(crate) to: String,
    /// The configuration path in `to` that reads `from` (or `dependsOn`).
    pub(crate) via: String,
    /// For an edge made by a plain reference (`__ref`, `__sensitiveRef`, or the value Nix
    /// resolved it to): the output path of `from` it reads, so the executor can resolve the
    /// leaf at `via` itself when `from` changes in the same phase. `None` for `dependsOn`
    /// and for values Nix computed (`__derived` and what it became).
    pub(crate) reference: Option<Vec<PathStep>>,
    /// For an edge of a value Nix computed (`lib.str`, `compute`): the output paths of `from`
    /// the computation read. `None` when the IR does not say (then any output counts).
    pub(crate) reads: Option<Vec<Vec<PathStep>>>,
}

/// A value Nix computes for itself from outputs (`nixConsumers[]`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Consumer {
    /// The consumer's id.
    pub(crate) id: String,
    /// The value, with markers for the outputs it needs.
    pub(crate) value: Tree,
}

/// `variables.<name>`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct VariableDecl {
    /// The declared type, as written (`string`, `number`, …); `None` accepts any value.
    pub(crate) ty: Option<String>,
    /// `Some(Value::Null)` is an explicit null default, `None` no default.
    pub(crate) default: Option<Value>,
    /// What the variable is for, shown in `nivis vars`.
    pub(crate) description: Option<String>,
    /// Whether the value is a secret (masked in output, marked sensitive in Nix).
    pub(crate) sensitive: bool,
}

/// What a tree leaf needs from another node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DependencyKind {
    /// A plain reference (`__ref`).
    Ref,
    /// A reference to a sensitive output (`__sensitiveRef`).
    SensitiveRef,
    /// A value Nix computes from the output (`__derived`).
    Derived,
}

/// One use of another node's output inside a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dependency<'a> {
    /// Path of the leaf inside the tree.
    pub(crate) at: Vec<PathStep>,
    /// The node whose output is needed.
    pub(crate) resource: &'a str,
    /// How the output is needed.
    pub(crate) kind: DependencyKind,
}

/// A conformance error: where (`resources[1] (alpha.alpha_token.B): config.label.__ref`) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IrError {
    /// Where in the IR document, e.g. `resources[1] (alpha.alpha_token.B): config.label.__ref`.
    pub(crate) location: String,
    /// What is wrong there.
    pub(crate) message: String,
}

impl fmt::Display for IrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.location, self.message)
    }
}

impl std::error::Error for IrError {}

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
