//! One Terraform module as one Nix file: a function of `{ lib, tf, ledger, var, prefix,
//! modules }` returning the module's `resources`, `data` and `outputs`.
//!
//! Owns: the layout of the written module (locals, resources and data sources by type and
//! name, module calls, outputs), count/for_each as `lib.count`/`lib.forEach` (and, for a module
//! call, `genList`/`mapAttrs` of its instances), meta-arguments
//! (provider, depends_on, lifecycle) and, without configuration, the state-only module of
//! literal attributes. Names follow `address` so the code's ids are the state's. Not:
//! expressions (`expr`), nor the flake around the modules (`flake`).

use std::collections::BTreeMap;

use hcl::expr::TraversalOperator;
use hcl::Expression;
use serde_json::Value;

use super::address::{instance_name, ProviderIds, MODULE_SEPARATOR};
use super::ast::{Body, Expansion, Kind, Module, Resource};
use super::expr::{value, whole, Scope, Shape};
use super::tfstate::{Mode, ProviderRef, TfState};
use crate::nixsyntax::{nix_attr, nix_string};

/// A module of the estate: its key among the written modules and its declarations.
pub(crate) struct Loaded {
    /// `root`, or a name derived from its directory.
    pub(crate) key: String,
    /// Its declarations.
    pub(crate) module: Module,
    /// Module call name -> the key of the called module (`None`: not a local module).
    pub(crate) calls: BTreeMap<String, Option<String>>,
}

/// How local provider names become provider configurations.
pub(crate) struct Providers<'a> {
    /// The ids of every configuration.
    pub(crate) ids: &'a ProviderIds,
    /// The state's provider sources (to give an unqualified source the state's host).
    pub(crate) state_sources: Vec<String>,
    /// The locked version of each source (from the lock file).
    pub(crate) versions: BTreeMap<String, String>,
}

impl Providers<'_> {
    /// The full source address for a `required_providers` source (or the implied
    /// `hashicorp/NAME`).
    pub(crate) fn full_source(&self, source: &str) -> String {
        if source.split('/').count() == 3 {
            return source.to_string();
        }
        let suffix = format!("/{}", source.to_ascii_lowercase());
        self.state_sources
            .iter()
            .find(|s| s.to_ascii_lowercase().ends_with(&suffix))
            .cloned()
            .unwrap_or_else(|| format!("registry.terraform.io/{source}"))
    }

    /// The configuration a resource of `module` uses.
    pub(crate) fn resource_ref(&self, module: &Module, r: &Resource) -> ProviderRef {
        let (local, alias) = r.provider.clone().unwrap_or_else(|| {
            let local = r.type_name.split('_').next().unwrap_or(&r.type_name);
            (local.to_string(), None)
        });
        self.named_ref(module, &local, alias)
    }

    /// The configuration for a local provider name and alias in `module`.
    pub(crate) fn named_ref(
        &self,
        module: &Module,
        local: &str,
        alias: Option<String>,
    ) -> ProviderRef {
        let source = module
            .required_providers
            .iter()
            .find(|rp| rp.name == local)
            .and_then(|rp| rp.source.clone())
            .unwrap_or_else(|| format!("hashicorp/{local}"));
        ProviderRef {
            source: self.full_source(&source),
            alias,
        }
    }
}

/// Writes one module's Nix file text; what cannot be translated is added to `problems`.
// Long because it writes the module file's sections in their order, one loop each.
pub(crate) fn module_file(
    loaded: &Loaded,
    all: &BTreeMap<String, &Loaded>,
    providers: &Providers<'_>,
    problems: &mut Vec<String>,
) -> String {
    let m = &loaded.module;
    let root = loaded.key == "root";
    let mut scope = Scope {
        all_vars_are_leaves: !root,
        ..Scope::default()
    };
    for v in m.variables.iter().filter(|v| v.sensitive) {
        scope.leaf_vars.insert(v.name.clone());
    }
    for r in &m.resources {
        scope.resources.insert(
            (r.kind, r.type_name.clone(), r.name.clone()),
            shape_of(&r.expansion),
        );
    }
    for call in &m.calls {
        scope
            .modules
            .insert(call.name.clone(), shape_of(&call.expansion));
    }
    let prefix_of = |at: &str| {
        if root {
            at.to_string()
        } else {
            format!("module {}: {at}", loaded.key)
        }
    };
    let mut out = String::new();
    out.push_str("# Written by `nivis convert terraform`; edit freely.\n");
    out.push_str("{ lib, tf, ledger, var, prefix, modules }:\nlet\n  local = {\n");
    for (name, e) in &m.locals {
        let code = whole(&scope, &prefix_of(&format!("local.{name}")), e, problems);
        out.push_str(&format!("    {} = {code};\n", nix_attr(name)));
    }
    out.push_str("  };\n");
    for (binding, kind) in [("managed", Kind::Managed), ("data", Kind::Data)] {
        out.push_str(&format!("  {binding} = {{\n"));
        let mut by_type: BTreeMap<&str, Vec<&Resource>> = BTreeMap::new();
        for r in m.resources.iter().filter(|r| r.kind == kind) {
            by_type.entry(&r.type_name).or_default().push(r);
        }
        for (ty, rs) in by_type {
            out.push_str(&format!("    {} = {{\n", nix_attr(ty)));
            for r in rs {
                let node = resource(&scope, m, r, providers, &prefix_of, problems);
                out.push_str(&format!("      {} = {node};\n", nix_attr(&r.name)));
            }
            out.push_str("    };\n");
        }
        out.push_str("  };\n");
    }
    out.push_str("  module = {\n");
    for call in &m.calls {
        let at = prefix_of(&format!("module.{}", call.name));
        let code = module_call(&scope, loaded, call, all, &at, problems);
        out.push_str(&format!("    {} = {code};\n", nix_attr(&call.name)));
    }
    out.push_str("  };\n  called =");
    let mut parts = Vec::new();
    for call in &m.calls {
        let it = format!("module.{}", nix_attr(&call.name));
        parts.push(match call.expansion {
            Expansion::Single => format!("[ {it} ]"),
            Expansion::Count(_) => it,
            Expansion::ForEach(_) => format!("builtins.attrValues {it}"),
        });
    }
    if parts.is_empty() {
        parts.push("[ ]".into());
    }
    out.push_str(&format!(" {};\nin\n{{\n", parts.join(" ++ ")));
    out.push_str("  resources = tf.nodes managed ++ builtins.concatMap (m: m.resources) called;\n");
    out.push_str("  data = tf.nodes data ++ builtins.concatMap (m: m.data) called;\n");
    out.push_str("  outputs = {\n");
    for o in &m.outputs {
        let code = whole(
            &scope,
            &prefix_of(&format!("output.{}", o.name)),
            &o.value,
            problems,
        );
        out.push_str(&format!("    {} = {code};\n", nix_attr(&o.name)));
    }
    out.push_str("  };\n");
    if root {
        let set = providers_set(Some((m, &scope)), providers, problems);
        out.push_str(&format!("  providers = {set};\n"));
    }
    out.push_str("}\n");
    out
}

/// What a reference to a block or module call expanded so must index.
fn shape_of(e: &Expansion) -> Shape {
    match e {
        Expansion::Single => Shape::Single,
        Expansion::Count(_) => Shape::Count,
        Expansion::ForEach(_) => Shape::ForEach,
    }
}

/// The `providers` of `toIR`: one `lib.mkProvider` per configuration, with the locked
/// version and the root module's `provider` block (translated in `root`'s scope).
pub(crate) fn providers_set(
    root: Option<(&Module, &Scope)>,
    providers: &Providers<'_>,
    problems: &mut Vec<String>,
) -> String {
    let mut out = String::from("{\n");
    for (r, id) in providers.ids.iter() {
        let mut fields = format!(" source = {};", nix_string(&r.source));
        if let Some(v) = providers.versions.get(&r.source) {
            fields.push_str(&format!(" version = {};", nix_string(v)));
        }
        if let Some((m, scope)) = root {
            let block = m
                .providers
                .iter()
                .find(|p| providers.named_ref(m, &p.name, p.alias.clone()) == *r);
            if let Some(p) = block {
                let at = match &p.alias {
                    Some(a) => format!("provider.{}.{a}", p.name),
                    None => format!("provider.{}", p.name),
                };
                let config = body(scope, &at, &p.config, problems);
                fields.push_str(&format!(" config = {config};"));
            }
        }
        out.push_str(&format!(
            "    {} = lib.mkProvider {{{fields} }};\n",
            nix_attr(id)
        ));
    }
    out.push_str("  }");
    out
}

fn module_call(
    scope: &Scope,
    loaded: &Loaded,
    call: &super::ast::ModuleCall,
    all: &BTreeMap<String, &Loaded>,
    at: &str,
    problems: &mut Vec<String>,
) -> String {
    let mut refuse = |what: String| {
        problems.push(format!("{at}: {what}"));
        format!(
            "throw {}",
            nix_string(&format!(
                "convert: {at}: {what} is not translated; write it in Nix"
            ))
        )
    };
    let Some(Some(key)) = loaded.calls.get(&call.name) else {
        return refuse(format!(
            "the module source {:?} (not a local path)",
            call.source
        ));
    };
    let Some(callee) = all.get(key) else {
        return refuse(format!("the module source {:?}", call.source));
    };
    // An instance's arguments see count.index / each.key / each.value, its name the flat
    // prefix the state's `module.NAME[KEY]` maps to (`address::module_prefix`).
    let mut inner = scope.clone();
    let sep = MODULE_SEPARATOR;
    let (open, instance, close) = match &call.expansion {
        Expansion::Single => (String::new(), String::new(), String::new()),
        Expansion::Count(e) => {
            inner.count = true;
            let n = whole(scope, &format!("{at}.count"), e, problems);
            (
                "builtins.genList (countIndex: ".to_string(),
                "__${toString countIndex}".to_string(),
                format!(") ({n})"),
            )
        }
        Expansion::ForEach(e) => {
            inner.each = true;
            let xs = whole(scope, &format!("{at}.for_each"), e, problems);
            (
                "builtins.mapAttrs (eachKey: eachValue: ".to_string(),
                "__${eachKey}".to_string(),
                format!(") (tf.eachOf ({xs}))"),
            )
        }
    };
    let mut vars = String::new();
    for v in &callee.module.variables {
        let code = match call.args.iter().find(|(k, _)| *k == v.name) {
            Some((_, e)) => whole(&inner, &format!("{at}.{}", v.name), e, problems),
            None => match &v.default {
                Some(d) => whole(&Scope::default(), &format!("{at}.{}", v.name), d, problems),
                None => format!(
                    "throw {}",
                    nix_string(&format!("{at}: the variable {} has no value", v.name))
                ),
            },
        };
        vars.push_str(&format!(" {} = {code};", nix_attr(&v.name)));
    }
    // The instance's `${...}` is Nix interpolation, so it is not passed through `nix_string`.
    format!(
        "{open}modules.{} {{ inherit lib tf ledger modules; prefix = prefix + {} + \"{instance}{sep}\"; var = {{{vars} }}; }}{close}",
        nix_attr(key),
        nix_string(&call.name),
    )
}

fn resource(
    scope: &Scope,
    m: &Module,
    r: &Resource,
    providers: &Providers<'_>,
    prefix_of: &dyn Fn(&str) -> String,
    problems: &mut Vec<String>,
) -> String {
    let address = prefix_of(&format!(
        "{}{}.{}",
        if r.kind == Kind::Data { "data." } else { "" },
        r.type_name,
        r.name
    ));
    let provider_ref = providers.resource_ref(m, r);
    let provider = providers.ids.id(&provider_ref).unwrap_or("unknown");
    let mut inner = scope.clone();
    let (wrap_open, wrap_close) = match &r.expansion {
        Expansion::Single => (String::new(), String::new()),
        Expansion::Count(e) => {
            inner.count = true;
            let n = whole(scope, &format!("{address}.count"), e, problems);
            (format!("lib.count ({n}) (countIndex: "), ")".to_string())
        }
        Expansion::ForEach(e) => {
            inner.each = true;
            let xs = whole(scope, &format!("{address}.for_each"), e, problems);
            (
                format!("lib.forEach ({xs}) (eachKey: eachValue: "),
                ")".to_string(),
            )
        }
    };
    let constructor = if r.kind == Kind::Managed {
        "lib.mkResource"
    } else {
        "lib.mkData"
    };
    let mut node = format!(
        "{wrap_open}{constructor} {{\n        provider = {};\n        type = {};\n        name = prefix + {};\n",
        nix_string(provider),
        nix_string(&r.type_name),
        nix_string(&r.name)
    );
    node.push_str(&format!(
        "        config = {};\n",
        body(&inner, &address, &r.config, problems)
    ));
    if !r.depends_on.is_empty() {
        let deps: Vec<String> = r
            .depends_on
            .iter()
            .map(|d| depends_on(scope, &address, d, problems))
            .collect();
        node.push_str(&format!(
            "        dependsOn = tf.dependsOn [ {} ];\n",
            deps.join(" ")
        ));
    }
    if r.kind == Kind::Managed {
        let lc = lifecycle(&inner, &address, r, problems);
        if !lc.is_empty() {
            node.push_str(&format!("        lifecycle = {{{lc} }};\n"));
        }
    }
    node.push_str(&format!("      }}{wrap_close}"));
    node
}

fn body(scope: &Scope, at: &str, b: &Body, problems: &mut Vec<String>) -> String {
    let mut out = String::from("{");
    for (k, e) in &b.attrs {
        let code = value(scope, &format!("{at}.{k}"), e, problems);
        out.push_str(&format!(" {} = {code};", nix_attr(k)));
    }
    let mut blocks: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (k, inner) in &b.blocks {
        let code = body(scope, &format!("{at}.{k}"), inner, problems);
        blocks.entry(k).or_default().push(format!("({code})"));
    }
    for (k, list) in blocks {
        out.push_str(&format!(" {} = [ {} ];", nix_attr(k), list.join(" ")));
    }
    out.push_str(" }");
    out
}

fn depends_on(scope: &Scope, at: &str, e: &Expression, problems: &mut Vec<String>) -> String {
    let mut refuse = |what: String| {
        problems.push(format!("{at}: {what}"));
        format!(
            "(throw {})",
            nix_string(&format!(
                "convert: {at}: {what} is not translated; write it in Nix"
            ))
        )
    };
    let Expression::Traversal(t) = e else {
        return refuse(format!("depends_on entry `{e}`"));
    };
    let Expression::Variable(root) = &t.expr else {
        return refuse(format!("depends_on entry `{e}`"));
    };
    let names: Vec<&str> = t
        .operators
        .iter()
        .map_while(|o| match o {
            TraversalOperator::GetAttr(a) => Some(a.as_str()),
            _ => None,
        })
        .collect();
    match (root.as_str(), names.as_slice()) {
        ("module", [name, ..]) => {
            let it = format!("module.{}", nix_attr(name));
            match scope.modules.get(*name) {
                Some(Shape::Count) => format!("(builtins.concatMap (i: i.resources) {it})"),
                Some(Shape::ForEach) => {
                    format!("(builtins.concatMap (i: i.resources) (builtins.attrValues {it}))")
                }
                _ => format!("{it}.resources"),
            }
        }
        ("data", [ty, name, ..])
            if scope
                .resources
                .contains_key(&(Kind::Data, ty.to_string(), name.to_string())) =>
        {
            format!("data.{}.{}", nix_attr(ty), nix_attr(name))
        }
        (ty, [name, ..])
            if scope
                .resources
                .contains_key(&(Kind::Managed, ty.to_string(), name.to_string())) =>
        {
            format!("managed.{}.{}", nix_attr(ty), nix_attr(name))
        }
        _ => refuse(format!("depends_on entry `{e}`")),
    }
}

fn lifecycle(scope: &Scope, at: &str, r: &Resource, problems: &mut Vec<String>) -> String {
    let mut out = String::new();
    let lc = &r.lifecycle;
    if let Some(e) = &lc.create_before_destroy {
        let code = whole(
            scope,
            &format!("{at}.lifecycle.create_before_destroy"),
            e,
            problems,
        );
        out.push_str(&format!(" createBeforeDestroy = {code};"));
    }
    if let Some(e) = &lc.prevent_destroy {
        let code = whole(
            scope,
            &format!("{at}.lifecycle.prevent_destroy"),
            e,
            problems,
        );
        out.push_str(&format!(" preventDestroy = {code};"));
    }
    if let Some(e) = &lc.ignore_changes {
        let paths: Vec<String> = match e {
            Expression::Variable(v) if v.as_str() == "all" => vec![nix_string("*")],
            Expression::String(s) if s == "all" => vec![nix_string("*")],
            Expression::Array(items) => items
                .iter()
                .map(|p| match ignore_path(p) {
                    Some(path) => nix_string(&path),
                    None => {
                        let what = format!("ignore_changes entry `{p}`");
                        problems.push(format!("{at}: {what}"));
                        format!(
                            "(throw {})",
                            nix_string(&format!("convert: {at}: {what} is not translated"))
                        )
                    }
                })
                .collect(),
            other => {
                let what = format!("ignore_changes = {other}");
                problems.push(format!("{at}: {what}"));
                vec![format!(
                    "(throw {})",
                    nix_string(&format!("convert: {at}: {what} is not translated"))
                )]
            }
        };
        out.push_str(&format!(" ignoreChanges = [ {} ];", paths.join(" ")));
    }
    out
}

/// An `ignore_changes` entry as the attribute path Nivis takes: `tags["a.b"]`, `disk[0].size`.
fn ignore_path(e: &Expression) -> Option<String> {
    let ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    match e {
        Expression::Variable(v) => Some(v.as_str().to_string()),
        // Terraform 0.11's quoted spelling.
        Expression::String(s) => Some(s.clone()),
        Expression::Traversal(t) => {
            let Expression::Variable(root) = &t.expr else {
                return None;
            };
            let mut out = root.as_str().to_string();
            for op in &t.operators {
                match op {
                    TraversalOperator::GetAttr(a) if ident(a.as_str()) => {
                        out.push('.');
                        out.push_str(a.as_str());
                    }
                    TraversalOperator::GetAttr(a) => {
                        out.push_str(&format!("[{}]", Value::String(a.as_str().into())))
                    }
                    TraversalOperator::LegacyIndex(n) => out.push_str(&format!("[{n}]")),
                    TraversalOperator::Index(Expression::Number(n)) => {
                        out.push_str(&format!("[{}]", n.as_u64()?))
                    }
                    TraversalOperator::Index(Expression::String(s)) => {
                        out.push_str(&format!("[{}]", Value::String(s.clone())))
                    }
                    _ => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
}

/// The state-only module: each managed object as its own node whose configuration is its
/// recorded attributes, as literals, less the attributes `computed` names (those its provider
/// computes, which no configuration may set), asked by source, locked version and type.
pub(crate) fn state_only_file(
    tf: &TfState,
    providers: &Providers<'_>,
    computed: super::ComputedOnly<'_>,
    problems: &mut Vec<String>,
) -> String {
    let mut out = String::new();
    out.push_str("# Written by `nivis convert terraform` from the state alone: each object's\n");
    out.push_str("# recorded attributes, as literals. Replace literals by references as you go.\n");
    out.push_str("{ lib, tf, ledger, var, prefix, modules }:\nlet\n  managed = {\n");
    for r in tf.resources.iter().filter(|r| r.mode == Mode::Managed) {
        let provider = providers.ids.id(&r.provider).unwrap_or("unknown");
        let version = providers.versions.get(&r.provider.source);
        let rules = computed(
            &r.provider.source,
            version.map(String::as_str),
            &r.type_name,
        );
        for inst in r.instances.iter().filter(|i| i.deposed.is_none()) {
            let name = match instance_name(&r.module, &r.name, inst.key.as_ref()) {
                Ok(n) => n,
                Err(e) => {
                    problems.push(format!("{}: {e}", r.address()));
                    continue;
                }
            };
            let address = r.instance_address(inst.key.as_ref());
            let secret_paths: Vec<&str> = inst
                .sensitive_paths
                .iter()
                .filter_map(|p| p.get(0).and_then(Value::as_str))
                .collect();
            let mut config = String::from("{");
            if let Value::Object(attrs) = &inst.attributes {
                for (k, v) in attrs {
                    if v.is_null() || rules.computed_only.contains(k) {
                        continue;
                    }
                    let code = if rules.sensitive.contains(k) || secret_paths.contains(&k.as_str())
                    {
                        let what = format!(
                            "{address}: the sensitive attribute {k} (a secret is never written \
                             into Nix, which the store copies; pass it from a sensitive variable \
                             or a secret source)"
                        );
                        problems.push(what.clone());
                        format!("throw {}", nix_string(&format!("convert: {what}")))
                    } else {
                        nix_literal(v)
                    };
                    config.push_str(&format!(" {} = {code};", nix_attr(k)));
                }
            }
            config.push_str(" }");
            out.push_str(&format!(
                "    {} = lib.mkResource {{\n      provider = {};\n      type = {};\n      name = prefix + {};\n      config = {config};\n    }};\n",
                nix_string(&format!("{}.{}", r.type_name, name)),
                nix_string(provider),
                nix_string(&r.type_name),
                nix_string(&name),
            ));
        }
    }
    out.push_str("  };\nin\n{\n  resources = builtins.attrValues managed;\n  data = [ ];\n  outputs = { };\n");
    let set = providers_set(None, providers, problems);
    out.push_str(&format!("  providers = {set};\n}}\n"));
    out
}

/// A JSON value as a Nix literal (numbers as written; a number Nix cannot hold exactly is
/// read from its JSON text).
pub(crate) fn nix_literal(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => {
            let text = n.to_string();
            if n.as_i64().is_some() {
                text
            } else {
                format!("(builtins.fromJSON {})", nix_string(&text))
            }
        }
        Value::String(s) => nix_string(s),
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|x| format!("({})", nix_literal(x)))
                .collect();
            format!("[ {} ]", parts.join(" "))
        }
        Value::Object(o) => {
            let mut out = String::from("{");
            for (k, x) in o {
                out.push_str(&format!(" {} = {};", nix_attr(k), nix_literal(x)));
            }
            out.push_str(" }");
            out
        }
    }
}
