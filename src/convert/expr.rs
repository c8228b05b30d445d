//! Terraform expressions as Nix expressions over the Nivis library.
//!
//! The rule (DESIGN §92): Nix computes every function and operator itself (builtins, and the
//! helpers of the written `tf.nix`); what only exists at apply time (a resource's attribute, a
//! data source's, a local or module output built from them, a sensitive variable) is a *leaf*.
//! An expression with leaves becomes `lib.compute { in0 = LEAF; ... } ({ in0, ... }: EXPR)`,
//! which Nivis evaluates as soon as the leaves are known (and which is a plain value when they
//! already are); a leaf alone is the reference itself (`x.refAttr "id"`); a template is
//! `lib.str [ ... ]`; object and tuple constructors stay structural, so each attribute of a
//! configuration waits only for what it uses. What cannot be translated becomes
//! `throw "convert: ..."` at that place and is reported to the caller.
//!
//! Owns: expressions, references, templates, operators, conditionals and `for` expressions.
//! Not: the functions (`functions`), nor blocks and files (`code`).

use std::collections::{BTreeMap, BTreeSet};

use hcl::expr::{BinaryOperator, TemplateExpr, Traversal, TraversalOperator, UnaryOperator};
use hcl::template::{Element, Template};
use hcl::{Expression, ObjectKey};

use super::ast::Kind;
use crate::nixsyntax::{nix_attr, nix_string};

mod module_ref;

/// How a resource block is expanded (what a reference to it must index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// One node.
    Single,
    /// A list of nodes (`lib.count`).
    Count,
    /// A list of nodes with keys (`lib.forEach`).
    ForEach,
}

/// What names mean where an expression is translated.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scope {
    /// The module's resource and data blocks.
    pub(crate) resources: BTreeMap<(Kind, String, String), Shape>,
    /// The module's calls of other modules, by name (absent: one instance).
    pub(crate) modules: BTreeMap<String, Shape>,
    /// Variables whose values are leaves (sensitive ones; every one in a called module, whose
    /// arguments may be apply-time values).
    pub(crate) leaf_vars: BTreeSet<String>,
    /// Whether every variable is a leaf.
    pub(crate) all_vars_are_leaves: bool,
    /// Inside a counted block: `count.index` is `countIndex`.
    pub(crate) count: bool,
    /// Inside a for_each block: `each.key`/`each.value` are `eachKey`/`eachValue`.
    pub(crate) each: bool,
}

/// One translation: its leaves, the for-expression variables in scope, and what could not be
/// translated.
pub(crate) struct Translator<'a> {
    scope: &'a Scope,
    at: &'a str,
    leaves: Vec<String>,
    bound: Vec<(String, String)>,
    used_bound: bool,
    splats: usize,
    problems: &'a mut Vec<String>,
}

/// `e` as a Nix value where each attribute and element waits only for its own leaves (for
/// configuration arguments).
pub(crate) fn value(scope: &Scope, at: &str, e: &Expression, problems: &mut Vec<String>) -> String {
    match e {
        Expression::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|x| format!("({})", value(scope, at, x, problems)))
                .collect();
            format!("[ {} ]", parts.join(" "))
        }
        Expression::Object(o) if o.keys().all(|k| static_key(k).is_some()) => {
            let mut out = String::from("{");
            for (k, v) in o {
                let key = static_key(k).unwrap_or_default();
                let at = format!("{at}.{key}");
                out.push_str(&format!(
                    " {} = {};",
                    nix_attr(&key),
                    value(scope, &at, v, problems)
                ));
            }
            out.push_str(" }");
            out
        }
        Expression::Parenthesis(inner) => value(scope, at, inner, problems),
        Expression::TemplateExpr(t) => match Template::from_expr(t) {
            Ok(template)
                if template
                    .elements()
                    .iter()
                    .all(|el| !matches!(el, Element::Directive(_))) =>
            {
                let mut parts = Vec::new();
                for el in template.elements() {
                    match el {
                        Element::Literal(s) => parts.push(nix_string(s)),
                        Element::Interpolation(i) => {
                            parts.push(format!("({})", whole(scope, at, &i.expr, problems)))
                        }
                        Element::Directive(_) => {}
                    }
                }
                format!("lib.str [ {} ]", parts.join(" "))
            }
            _ => whole(scope, at, e, problems),
        },
        _ => whole(scope, at, e, problems),
    }
}

/// `e` as one Nix value: plain when it has no leaves, else one `lib.compute` over them.
pub(crate) fn whole(scope: &Scope, at: &str, e: &Expression, problems: &mut Vec<String>) -> String {
    let mut t = Translator {
        scope,
        at,
        leaves: Vec::new(),
        bound: Vec::new(),
        used_bound: false,
        splats: 0,
        problems,
    };
    let code = t.expr(e);
    wrap(&t.leaves, &code)
}

fn wrap(leaves: &[String], code: &str) -> String {
    match leaves {
        [] => code.to_string(),
        [only] if code == "in0" => only.clone(),
        _ => {
            let names: Vec<String> = (0..leaves.len()).map(|i| format!("in{i}")).collect();
            let inputs: Vec<String> = leaves
                .iter()
                .zip(&names)
                .map(|(leaf, name)| format!("{name} = {leaf};"))
                .collect();
            format!(
                "lib.compute {{ {} }} ({{ {} }}: {code})",
                inputs.join(" "),
                names.join(", ")
            )
        }
    }
}

/// An object key known without evaluation.
fn static_key(k: &ObjectKey) -> Option<String> {
    match k {
        ObjectKey::Identifier(id) => Some(id.as_str().to_string()),
        ObjectKey::Expression(Expression::String(s)) => Some(s.clone()),
        ObjectKey::Expression(Expression::Variable(v)) => Some(v.as_str().to_string()),
        _ => None,
    }
}

/// A Nix number literal for an HCL number.
pub(crate) fn number(n: &hcl::Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    let f = n.as_f64().unwrap_or(0.0);
    let text = format!("{f:?}");
    if text.contains('e') || text.contains("inf") || text.contains("NaN") {
        format!("(builtins.fromJSON {})", nix_string(&format!("{f}")))
    } else {
        text
    }
}

impl Translator<'_> {
    /// Records what cannot be translated; returns the marked throw for its place.
    pub(crate) fn unsupported(&mut self, what: &str) -> String {
        let message = format!("{}: {what}", self.at);
        self.problems.push(message.clone());
        format!(
            "(throw {})",
            nix_string(&format!(
                "convert: {message} is not translated; write it in Nix"
            ))
        )
    }

    /// A leaf's name inside the expression (one name per distinct leaf).
    fn leaf(&mut self, code: String) -> String {
        let i = match self.leaves.iter().position(|l| *l == code) {
            Some(i) => i,
            None => {
                self.leaves.push(code);
                self.leaves.len() - 1
            }
        };
        format!("in{i}")
    }

    /// `e` in plain Nix, its leaves replaced by their names.
    pub(crate) fn expr(&mut self, e: &Expression) -> String {
        match e {
            Expression::Null => "null".into(),
            Expression::Bool(b) => b.to_string(),
            Expression::Number(n) => number(n),
            Expression::String(s) => nix_string(s),
            Expression::Array(items) => {
                let parts: Vec<String> = items.iter().map(|x| self.expr(x)).collect();
                format!("[ {} ]", parts.join(" "))
            }
            Expression::Object(o) => {
                let mut out = String::from("{");
                for (k, v) in o {
                    let key = match static_key(k) {
                        Some(k) => nix_attr(&k),
                        None => {
                            let ObjectKey::Expression(ke) = k else {
                                continue;
                            };
                            format!("${{tf.tostring {}}}", self.expr(ke))
                        }
                    };
                    out.push_str(&format!(" {key} = {};", self.expr(v)));
                }
                out.push_str(" }");
                out
            }
            Expression::TemplateExpr(t) => self.template(t),
            Expression::Variable(v) => match self.bound_name(v.as_str()) {
                Some(name) => name,
                None => self.unsupported(&format!("the bare name `{}`", v.as_str())),
            },
            Expression::Traversal(t) => self.traversal(t),
            Expression::FuncCall(f) => super::functions::call(self, f),
            Expression::Parenthesis(inner) => self.expr(inner),
            Expression::Conditional(c) => format!(
                "(if {} then {} else {})",
                self.expr(&c.cond_expr),
                self.expr(&c.true_expr),
                self.expr(&c.false_expr)
            ),
            Expression::Operation(op) => self.operation(op),
            Expression::ForExpr(f) => self.for_expr(f),
            other => self.unsupported(&format!("the expression `{other}`")),
        }
    }

    fn bound_name(&mut self, tf: &str) -> Option<String> {
        let found = self
            .bound
            .iter()
            .rev()
            .find(|(name, _)| name == tf)
            .map(|(_, nix)| nix.clone());
        if found.is_some() {
            self.used_bound = true;
        }
        found
    }

    fn template(&mut self, t: &TemplateExpr) -> String {
        let template = match Template::from_expr(t) {
            Ok(t) => t,
            Err(e) => return self.unsupported(&format!("the template ({e})")),
        };
        let mut parts = Vec::new();
        for el in template.elements() {
            match el {
                Element::Literal(s) => parts.push(nix_string(s)),
                Element::Interpolation(i) => {
                    parts.push(format!("(tf.tostring {})", self.expr(&i.expr)))
                }
                Element::Directive(_) => {
                    parts.push(self.unsupported("a template directive (%{ if } / %{ for })"))
                }
            }
        }
        if parts.is_empty() {
            return "\"\"".into();
        }
        format!("({})", parts.join(" + "))
    }

    fn operation(&mut self, op: &hcl::expr::Operation) -> String {
        match op {
            hcl::expr::Operation::Unary(u) => {
                let x = self.expr(&u.expr);
                match u.operator {
                    UnaryOperator::Neg => format!("(-({x}))"),
                    UnaryOperator::Not => format!("(!({x}))"),
                }
            }
            hcl::expr::Operation::Binary(b) => {
                let (l, r) = (self.expr(&b.lhs_expr), self.expr(&b.rhs_expr));
                let infix = match b.operator {
                    BinaryOperator::Div => return format!("(tf.div {l} {r})"),
                    BinaryOperator::Mod => return format!("(tf.mod {l} {r})"),
                    other => other.as_str(),
                };
                format!("({l} {infix} {r})")
            }
        }
    }

    fn for_expr(&mut self, f: &hcl::expr::ForExpr) -> String {
        if f.grouping {
            return self.unsupported("a grouping `for` expression (`...`)");
        }
        let collection = self.expr(&f.collection_expr);
        let key_name = f
            .key_var
            .as_ref()
            .map(|k| k.as_str().to_string())
            .unwrap_or_else(|| "_".into());
        let value_name = f.value_var.as_str().to_string();
        let key_nix = format!("for_{key_name}");
        let value_nix = format!("for_{value_name}");
        let depth = self.bound.len();
        self.bound.push((key_name, key_nix.clone()));
        self.bound.push((value_name, value_nix.clone()));
        let lambda = |body: String| format!("({key_nix}: {value_nix}: {body})");
        let cond = match &f.cond_expr {
            Some(c) => lambda(self.expr(c)),
            None => "(_: _: true)".into(),
        };
        let out = match &f.key_expr {
            None => {
                let v = lambda(self.expr(&f.value_expr));
                format!("(tf.forList {collection} {v} {cond})")
            }
            Some(k) => {
                let k = lambda(self.expr(k));
                let v = lambda(self.expr(&f.value_expr));
                format!("(tf.forObject {collection} {k} {v} {cond})")
            }
        };
        self.bound.truncate(depth);
        out
    }

    fn traversal(&mut self, t: &Traversal) -> String {
        let ops = t.operators.as_slice();
        let Expression::Variable(root) = &t.expr else {
            let base = self.expr(&t.expr);
            return self.apply(base, ops);
        };
        let root = root.as_str();
        if let Some(name) = self.bound_name(root) {
            return self.apply(name, ops);
        }
        let attr = |i: usize| match ops.get(i) {
            Some(TraversalOperator::GetAttr(a)) => Some(a.as_str().to_string()),
            _ => None,
        };
        match (root, attr(0)) {
            ("var", Some(name)) => {
                let base = format!("var.{}", nix_attr(&name));
                let base = if self.scope.all_vars_are_leaves || self.scope.leaf_vars.contains(&name)
                {
                    self.leaf(base)
                } else {
                    base
                };
                self.apply(base, &ops[1..])
            }
            ("local", Some(name)) => {
                let leaf = self.leaf(format!("local.{}", nix_attr(&name)));
                self.apply(leaf, &ops[1..])
            }
            ("count", Some(a)) if a == "index" && self.scope.count => {
                self.apply("countIndex".into(), &ops[1..])
            }
            ("each", Some(a)) if self.scope.each && (a == "key" || a == "value") => {
                let name = if a == "key" { "eachKey" } else { "eachValue" };
                self.apply(name.into(), &ops[1..])
            }
            ("terraform", Some(a)) if a == "workspace" => {
                self.apply("(ledger.env or \"default\")".into(), &ops[1..])
            }
            ("module", Some(m)) => self.module_ref(&m, &ops[1..]),
            ("data", Some(ty)) => match attr(1) {
                Some(name) => self.resource_ref(Kind::Data, &ty, &name, &ops[2..]),
                None => self.unsupported(&format!("the reference data.{ty}")),
            },
            ("count" | "each" | "path" | "self" | "terraform" | "var" | "local", _) => {
                self.unsupported(&format!("the reference `{}`", Expression::from(t.clone())))
            }
            (ty, Some(name)) => self.resource_ref(Kind::Managed, ty, &name, &ops[1..]),
            (other, None) => self.unsupported(&format!("the reference `{other}`")),
        }
    }

    /// The operators after a value in plain Nix.
    fn apply(&mut self, base: String, ops: &[TraversalOperator]) -> String {
        let mut code = base;
        for (i, op) in ops.iter().enumerate() {
            code = match op {
                TraversalOperator::GetAttr(a) => format!("({code}).{}", nix_attr(a.as_str())),
                TraversalOperator::LegacyIndex(n) => format!("(builtins.elemAt {code} {n})"),
                TraversalOperator::Index(e) => {
                    let k = self.expr(e);
                    format!("(tf.index {code} {k})")
                }
                TraversalOperator::AttrSplat | TraversalOperator::FullSplat => {
                    let var = format!("splat{}", self.splats);
                    self.splats += 1;
                    let rest = &ops[i + 1..];
                    let (each, after) = match op {
                        TraversalOperator::AttrSplat => {
                            let n = rest
                                .iter()
                                .take_while(|o| matches!(o, TraversalOperator::GetAttr(_)))
                                .count();
                            rest.split_at(n)
                        }
                        _ => (rest, &[][..]),
                    };
                    let inner = self.apply(var.clone(), each);
                    let mapped = format!("(map ({var}: {inner}) (tf.splat {code}))");
                    return self.apply(mapped, after);
                }
            };
        }
        code
    }

    /// A reference into a resource or data source: a leaf (a `refAttr`/`ref` of one node,
    /// or, indexed by a for-expression variable or splat, of all its nodes).
    fn resource_ref(
        &mut self,
        kind: Kind,
        ty: &str,
        name: &str,
        ops: &[TraversalOperator],
    ) -> String {
        let prefix = if kind == Kind::Data { "data." } else { "" };
        let Some(shape) = self
            .scope
            .resources
            .get(&(kind, ty.to_string(), name.to_string()))
            .copied()
        else {
            return self.unsupported(&format!(
                "a reference to {prefix}{ty}.{name}, which this module does not declare"
            ));
        };
        let base = format!(
            "{}.{}.{}",
            if kind == Kind::Data {
                "data"
            } else {
                "managed"
            },
            nix_attr(ty),
            nix_attr(name)
        );
        if shape == Shape::Single {
            return self.node_path(&base, ops, &format!("{prefix}{ty}.{name}"));
        }
        let what = format!("{prefix}{ty}.{name}");
        match ops.first() {
            Some(TraversalOperator::Index(_) | TraversalOperator::LegacyIndex(_)) => {
                let index = match &ops[0] {
                    TraversalOperator::LegacyIndex(n) => n.to_string(),
                    TraversalOperator::Index(e) => match self.plain(e) {
                        Some(code) => code,
                        None => {
                            return self.collection_ref(&base, shape, &ops[1..], Some(e), &what)
                        }
                    },
                    _ => unreachable!(),
                };
                let node = match shape {
                    Shape::Count => format!("(builtins.elemAt {base} ({index}))"),
                    _ => format!("((lib.byKey {base}).${{{index}}})"),
                };
                self.node_path(&node, &ops[1..], &what)
            }
            Some(TraversalOperator::AttrSplat | TraversalOperator::FullSplat) if shape == Shape::Count => {
                self.collection_ref(&base, shape, &ops[1..], None, &what)
            }
            _ => self.unsupported(&format!(
                "a reference to all instances of {what} (index one, or use a splat on a counted one)"
            )),
        }
    }

    /// `e` in plain Nix when it needs no leaf and no for-expression variable (so it can be part
    /// of a leaf, which is computed outside any for expression).
    fn plain(&mut self, e: &Expression) -> Option<String> {
        let mut probe_problems = Vec::new();
        let mut probe = Translator {
            scope: self.scope,
            at: self.at,
            leaves: Vec::new(),
            bound: self.bound.clone(),
            used_bound: false,
            splats: 0,
            problems: &mut probe_problems,
        };
        let code = probe.expr(e);
        let plain = probe.leaves.is_empty() && !probe.used_bound && probe_problems.is_empty();
        plain.then_some(code)
    }

    /// The longest prefix of `ops` that is a static attribute path, as Nix list elements.
    fn static_path(ops: &[TraversalOperator]) -> (Vec<String>, usize) {
        let mut path = Vec::new();
        for op in ops {
            match op {
                TraversalOperator::GetAttr(a) => path.push(nix_string(a.as_str())),
                TraversalOperator::LegacyIndex(n) => path.push(n.to_string()),
                TraversalOperator::Index(Expression::Number(n)) if n.as_u64().is_some() => {
                    path.push(number(n))
                }
                TraversalOperator::Index(Expression::String(s)) => path.push(nix_string(s)),
                _ => break,
            }
        }
        let n = path.len();
        (path, n)
    }

    fn ref_call(node: &str, path: &[String]) -> String {
        if path.len() == 1 && path[0].starts_with('"') {
            format!("({node}.refAttr {})", path[0])
        } else {
            format!("({node}.ref [ {} ])", path.join(" "))
        }
    }

    /// One node's attribute, the rest of the operators applied in plain Nix.
    fn node_path(&mut self, node: &str, ops: &[TraversalOperator], what: &str) -> String {
        let (path, n) = Self::static_path(ops);
        if path.is_empty() || !path[0].starts_with('"') {
            return self.unsupported(&format!(
                "a reference to the whole of {what} (name one of its attributes)"
            ));
        }
        let leaf = self.leaf(Self::ref_call(node, &path));
        self.apply(leaf, &ops[n..])
    }

    /// All nodes' attribute as one leaf (a list for count, a set by key for for_each), then
    /// indexed by `index` (translated here, where for-expression variables are bound).
    fn collection_ref(
        &mut self,
        base: &str,
        shape: Shape,
        ops: &[TraversalOperator],
        index: Option<&Expression>,
        what: &str,
    ) -> String {
        let (path, n) = Self::static_path(ops);
        if path.is_empty() || !path[0].starts_with('"') {
            return self.unsupported(&format!(
                "a reference to the whole of {what} (name one of its attributes)"
            ));
        }
        let each = Self::ref_call("node", &path);
        let collection = match shape {
            Shape::Count => format!("(lib.compute (map (node: {each}) {base}) (values: values))"),
            _ => format!(
                "(lib.compute (builtins.mapAttrs (_: node: {each}) (lib.byKey {base})) (values: values))"
            ),
        };
        let leaf = self.leaf(collection);
        let indexed = match index {
            None => leaf,
            Some(e) => {
                let k = self.expr(e);
                format!("(tf.index {leaf} {k})")
            }
        };
        self.apply(indexed, &ops[n..])
    }

    /// Function arguments in plain Nix (for `functions`).
    pub(crate) fn args(&mut self, args: &[Expression]) -> Vec<String> {
        args.iter().map(|a| self.expr(a)).collect()
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::str::FromStr;

    pub(crate) fn scope() -> Scope {
        let mut s = Scope::default();
        for (kind, ty, name, shape) in [
            (Kind::Managed, "null_resource", "a", Shape::Single),
            (Kind::Managed, "null_resource", "node", Shape::Count),
            (Kind::Managed, "null_resource", "svc", Shape::ForEach),
            (Kind::Data, "null_data_source", "d", Shape::Single),
        ] {
            s.resources.insert((kind, ty.into(), name.into()), shape);
        }
        s.leaf_vars.insert("secret".into());
        s.modules.insert("nodes".into(), Shape::Count);
        s.modules.insert("svcs".into(), Shape::ForEach);
        s
    }

    pub(crate) fn nix_of(s: &Scope, text: &str) -> (String, Vec<String>) {
        let e = Expression::from_str(text).unwrap();
        let mut problems = Vec::new();
        let code = value(s, "null_resource.x: triggers", &e, &mut problems);
        (code, problems)
    }

    pub(crate) fn ok(text: &str) -> String {
        let (code, problems) = nix_of(&scope(), text);
        assert!(problems.is_empty(), "{text}: {problems:?}");
        code
    }

    #[test]
    fn references_become_ref_attr() {
        assert_eq!(
            ok("null_resource.a.id"),
            "(managed.null_resource.a.refAttr \"id\")"
        );
        assert_eq!(
            ok("null_resource.a.triggers[\"k\"]"),
            "(managed.null_resource.a.ref [ \"triggers\" \"k\" ])"
        );
        assert_eq!(
            ok("null_resource.node[1].id"),
            "((builtins.elemAt managed.null_resource.node (1)).refAttr \"id\")"
        );
        assert_eq!(
            ok("null_resource.svc[\"web\"].id"),
            "(((lib.byKey managed.null_resource.svc).${\"web\"}).refAttr \"id\")"
        );
        assert_eq!(
            ok("data.null_data_source.d.outputs.x"),
            "(data.null_data_source.d.ref [ \"outputs\" \"x\" ])"
        );
        assert_eq!(ok("var.n"), "var.n");
        assert_eq!(ok("local.tag"), "local.tag");
        assert_eq!(ok("module.app.ip"), "module.app.outputs.ip");
    }

    #[test]
    fn expressions_with_apply_time_values_are_computed() {
        assert_eq!(
            ok("\"id-${null_resource.a.id}\""),
            "lib.str [ \"id-\" ((managed.null_resource.a.refAttr \"id\")) ]"
        );
        assert_eq!(
            ok("var.n + length(null_resource.a.triggers)"),
            "lib.compute { in0 = (managed.null_resource.a.refAttr \"triggers\"); } ({ in0 }: (var.n + (tf.length in0)))"
        );
        assert_eq!(
            ok("var.secret == \"x\" ? 1 : 2"),
            "lib.compute { in0 = var.secret; } ({ in0 }: (if (in0 == \"x\") then 1 else 2))"
        );
        assert_eq!(
            ok("{ a = null_resource.a.id, b = [var.n] }"),
            "{ a = (managed.null_resource.a.refAttr \"id\"); b = [ (var.n) ]; }"
        );
    }

    #[test]
    fn splats_and_for_variables_take_all_instances() {
        assert_eq!(
            ok("null_resource.node[*].id"),
            "(lib.compute (map (node: (node.refAttr \"id\")) managed.null_resource.node) (values: values))"
        );
        let code = ok("[for k, v in var.m : null_resource.svc[k].id]");
        assert!(
            code.starts_with("lib.compute { in0 = (lib.compute (builtins.mapAttrs"),
            "{code}"
        );
        assert!(
            code.contains("(tf.forList var.m (for_k: for_v: (tf.index in0 for_k)) (_: _: true))"),
            "{code}"
        );
        assert_eq!(
            ok("{for k, v in var.m : upper(k) => v if v != \"\"}"),
            "(tf.forObject var.m (for_k: for_v: (tf.upper for_k)) (for_k: for_v: for_v) (for_k: for_v: (for_v != \"\")))"
        );
    }

    #[test]
    fn operators_and_conditionals() {
        assert_eq!(ok("!(1 < 2) || true"), "((!((1 < 2))) || true)");
        assert_eq!(ok("7 / 2"), "(tf.div 7 2)");
        assert_eq!(ok("7 % 2"), "(tf.mod 7 2)");
        assert_eq!(ok("-var.n"), "(-(var.n))");
        assert_eq!(ok("1.5"), "1.5");
        assert_eq!(ok("terraform.workspace"), "(ledger.env or \"default\")");
        assert_eq!(ok("var.list[0]"), "(tf.index var.list 0)");
        assert_eq!(
            ok("var.objs[*].name"),
            "(map (splat0: (splat0).name) (tf.splat var.objs))"
        );
    }

    #[test]
    fn what_cannot_be_translated_is_a_marked_throw() {
        for text in [
            "path.module",
            "null_resource.nope.id",
            "null_resource.a",
            "\"%{ if true }x%{ endif }\"",
            "{for k, v in var.m : k => v...}",
            "count.index",
        ] {
            let (code, problems) = nix_of(&scope(), text);
            assert!(
                code.contains("throw \"convert: null_resource.x: triggers: "),
                "{text}: {code}"
            );
            assert_eq!(problems.len(), 1, "{text}: {problems:?}");
        }
    }
}
