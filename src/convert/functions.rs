//! Terraform's built-in functions as Nix: the ones convert translates, each computed by Nix
//! itself (builtins, or a helper of the written `tf.nix` where Terraform's meaning needs a few
//! lines); `expr` wraps a call whose arguments are apply-time values in `lib.compute`, so the
//! same Nix runs then. Semantics follow OpenTofu's function reference (facts, not code):
//! `element` wraps its index, `coalesce` skips null and "", `merge` is shallow and later
//! arguments win, `lookup` without a default fails on a missing key, `keys`/`values` go in
//! lexical key order, `replace` with a `/regex/` pattern, `lower`/`upper`/`length` of
//! non-ASCII text and `format` verbs other than `%s %d %v %%` are refused, never approximated.
//!
//! Owns: the list of functions and their translation. Not: expressions (`expr`), nor the
//! helpers' Nix text (`flake`).

use hcl::expr::FuncCall;
use hcl::Expression;

use super::expr::Translator;
use crate::nixsyntax::nix_string;

/// A call in plain Nix.
pub(crate) fn call(t: &mut Translator<'_>, f: &FuncCall) -> String {
    let name = f.name.name.as_str();
    if !f.name.namespace.is_empty() {
        return t.unsupported(&format!("the provider function `{}`", f.name));
    }
    if f.expand_final {
        return t.unsupported(&format!("the argument expansion `...` in {name}()"));
    }
    if name == "format" {
        return format(t, &f.args);
    }
    let args = t.args(&f.args);
    let n = args.len();
    let arity = |ok: bool, t: &mut Translator<'_>| {
        if ok {
            None
        } else {
            Some(t.unsupported(&format!("{name}() with {n} argument(s)")))
        }
    };
    let checked = match name {
        "tostring" | "length" | "keys" | "values" | "lower" | "upper" | "toset" | "tolist"
        | "tomap" | "tonumber" | "tobool" => arity(n == 1, t),
        "element" => arity(n == 2, t),
        "lookup" => arity(n == 2 || n == 3, t),
        "replace" => arity(n == 3, t),
        "join" => arity(n >= 2, t),
        "merge" | "concat" | "coalesce" => arity(n >= 1, t),
        _ => None,
    };
    if let Some(throw) = checked {
        return throw;
    }
    match name {
        "tostring" | "length" | "lower" | "upper" | "toset" | "tonumber" | "tobool" => {
            format!("(tf.{name} {})", args[0])
        }
        "tolist" | "tomap" => args[0].clone(),
        "keys" => format!("(builtins.attrNames {})", args[0]),
        "values" => format!("(builtins.attrValues {})", args[0]),
        "element" => format!("(tf.element {} {})", args[0], args[1]),
        "lookup" if n == 2 => format!("(tf.lookup {} {})", args[0], args[1]),
        "lookup" => format!("(({}).${{{}}} or {})", args[0], args[1], args[2]),
        "replace" => format!("(tf.replace {} {} {})", args[0], args[1], args[2]),
        "join" => format!("(tf.join {} [ {} ])", args[0], args[1..].join(" ")),
        "merge" => format!("({})", args.join(" // ")),
        "concat" => format!("({})", args.join(" ++ ")),
        "coalesce" => format!("(tf.coalesce [ {} ])", args.join(" ")),
        _ => t.unsupported(&format!("the function {name}()")),
    }
}

/// `format` with a literal format string, compiled into a concatenation; the verbs `%s`,
/// `%d`, `%v` and `%%` only.
fn format(t: &mut Translator<'_>, args: &[Expression]) -> String {
    let Some(Expression::String(spec)) = args.first() else {
        return t.unsupported("format() with a format string that is not a literal");
    };
    let values = t.args(&args[1..]);
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut next = 0;
    let mut chars = spec.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            literal.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => literal.push('%'),
            Some('s' | 'd' | 'v') => {
                if !literal.is_empty() {
                    parts.push(nix_string(&std::mem::take(&mut literal)));
                }
                let Some(v) = values.get(next) else {
                    return t.unsupported(&format!("format({spec:?}) with too few arguments"));
                };
                next += 1;
                parts.push(format!("(tf.tostring {v})"));
            }
            other => {
                let verb = other.map(|c| format!("%{c}")).unwrap_or_else(|| "%".into());
                return t.unsupported(&format!("the format verb {verb:?} in format({spec:?})"));
            }
        }
    }
    if next != values.len() {
        return t.unsupported(&format!("format({spec:?}) with too many arguments"));
    }
    if !literal.is_empty() || parts.is_empty() {
        parts.push(nix_string(&literal));
    }
    format!("({})", parts.join(" + "))
}

#[cfg(test)]
mod tests {
    use super::super::expr::tests::{nix_of, scope};

    fn ok(text: &str) -> String {
        let (code, problems) = nix_of(&scope(), text);
        assert!(problems.is_empty(), "{text}: {problems:?}");
        code
    }

    #[test]
    fn each_listed_function_translates() {
        let cases = [
            ("tostring(var.n)", "(tf.tostring var.n)"),
            (
                "format(\"%s-%d%%\", var.a, var.n)",
                "((tf.tostring var.a) + \"-\" + (tf.tostring var.n) + \"%\")",
            ),
            ("join(\",\", var.l)", "(tf.join \",\" [ var.l ])"),
            (
                "join(\",\", var.l, [\"x\"])",
                "(tf.join \",\" [ var.l [ \"x\" ] ])",
            ),
            ("lookup(var.m, \"k\")", "(tf.lookup var.m \"k\")"),
            ("lookup(var.m, \"k\", \"d\")", "((var.m).${\"k\"} or \"d\")"),
            ("merge(var.a, var.b)", "(var.a // var.b)"),
            ("concat(var.a, [1])", "(var.a ++ [ 1 ])"),
            ("length(var.l)", "(tf.length var.l)"),
            ("element(var.l, 3)", "(tf.element var.l 3)"),
            ("keys(var.m)", "(builtins.attrNames var.m)"),
            ("values(var.m)", "(builtins.attrValues var.m)"),
            ("lower(var.s)", "(tf.lower var.s)"),
            ("upper(var.s)", "(tf.upper var.s)"),
            (
                "replace(var.s, \"a\", \"b\")",
                "(tf.replace var.s \"a\" \"b\")",
            ),
            ("coalesce(var.a, \"x\")", "(tf.coalesce [ var.a \"x\" ])"),
            ("toset(var.l)", "(tf.toset var.l)"),
            ("tolist(var.l)", "var.l"),
            ("tonumber(var.s)", "(tf.tonumber var.s)"),
        ];
        for (text, want) in cases {
            assert_eq!(ok(text), want, "{text}");
        }
    }

    #[test]
    fn untranslated_functions_and_forms_are_marked() {
        for text in [
            "cidrsubnet(var.a, 8, 1)",
            "format(var.f, 1)",
            "format(\"%5.2f\", 1)",
            "format(\"%s\")",
            "element(var.l)",
            "concat(var.ls...)",
            "provider::x::f(1)",
        ] {
            let (code, problems) = nix_of(&scope(), text);
            assert!(code.contains("throw \"convert: "), "{text}: {code}");
            assert_eq!(problems.len(), 1, "{text}: {problems:?}");
        }
    }
}
