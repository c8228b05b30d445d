//! The flake convert writes in OUT: `flake.nix` (Nivis as an input, the variables, the
//! providers and the plan), `tf.nix` (Terraform's functions in Nix), `main.nix` (the root
//! module) and `modules/KEY.nix` (each local module).
//!
//! Owns: the flake's text and the variable declarations (Terraform's types as the Nivis
//! library's: string, number, bool, list, map, any). Not: the modules' text (`code`).

use std::collections::BTreeMap;

use hcl::expr::TraversalOperator;
use hcl::Expression;

use super::ast::Variable;
use super::expr::{whole, Scope};
use super::tfvars::Assigned;
use crate::nixsyntax::{nix_attr, nix_string};

/// Terraform's functions and operators as Nix (the written `tf.nix`).
pub(crate) const TF_NIX: &str = include_str!("tf.nix");

/// Terraform's type constraint as the Nivis library's variable type.
pub(crate) fn variable_type(e: Option<&Expression>) -> &'static str {
    let name = match e {
        None => return "any",
        Some(Expression::Variable(v)) => v.as_str().to_string(),
        Some(Expression::FuncCall(f)) => f.name.name.as_str().to_string(),
        Some(Expression::String(s)) => s.split('(').next().unwrap_or("").to_string(),
        Some(Expression::Traversal(t)) => match (&t.expr, t.operators.first()) {
            (Expression::Variable(v), Some(TraversalOperator::GetAttr(_))) => {
                v.as_str().to_string()
            }
            _ => String::new(),
        },
        Some(_) => String::new(),
    };
    match name.as_str() {
        "string" => "string",
        "number" => "number",
        "bool" => "bool",
        "list" | "set" | "tuple" => "list",
        "map" | "object" => "map",
        _ => "any",
    }
}

/// The `variables` declarations of the root module; a value from a variable file (`tfvars`)
/// becomes the default, except a sensitive variable's, which never goes into the Nix.
pub(crate) fn variables(
    vars: &[Variable],
    assigned: &BTreeMap<String, Assigned>,
    problems: &mut Vec<String>,
) -> String {
    let mut out = String::from("{\n");
    for v in vars {
        let mut fields = format!(
            " type = {};",
            nix_string(variable_type(v.type_expr.as_ref()))
        );
        let from_file = assigned.get(&v.name).filter(|_| !v.sensitive);
        if let Some(a) = from_file {
            let code = whole(
                &Scope::default(),
                &format!("{}: variable {}", a.from, v.name),
                &a.value,
                problems,
            );
            fields.push_str(&format!(" default = {code};"));
        } else if let Some(d) = &v.default {
            let code = whole(
                &Scope::default(),
                &format!("variable.{}.default", v.name),
                d,
                problems,
            );
            fields.push_str(&format!(" default = {code};"));
        }
        if let Some(d) = &v.description {
            fields.push_str(&format!(" description = {};", nix_string(d)));
        }
        if v.sensitive {
            fields.push_str(" sensitive = true;");
        }
        let comment = match from_file {
            Some(a) => format!(" # the value of {}", a.from),
            None => String::new(),
        };
        out.push_str(&format!(
            "            {} = {{{fields} }};{comment}\n",
            nix_attr(&v.name)
        ));
    }
    out.push_str("          }");
    out
}

/// `flake.nix`: `nivis_src` is the flake reference of Nivis; `modules` the keys of the
/// called modules (files `modules/KEY.nix`).
pub(crate) fn flake_nix(
    nivis_src: &str,
    variables: &str,
    modules: &[String],
    backend_comment: &[String],
) -> String {
    let mut backend = String::new();
    for line in backend_comment {
        backend.push_str(&format!("      {line}\n"));
    }
    let mut imports = String::new();
    for key in modules {
        imports.push_str(&format!(
            "            {} = import ./modules/{key}.nix;\n",
            nix_attr(key)
        ));
    }
    format!(
        r#"{{
  description = "Infrastructure converted from Terraform/OpenTofu by nivis convert terraform";

  # Nivis's Nix library (nivis.lib). For a local clone or mirror of Nivis, use
  # git+file:///srv/nivis here (or `nix flake lock --override-input nivis ...`).
  inputs.nivis.url = {src};

  outputs =
    {{ self, nivis }}:
    let
      lib = nivis.lib;
    in
    {{
{backend}      nivis.plan =
        ledger:
        let
          # Terraform's functions and operators, as Nix (builtins only).
          tf = import ./tf.nix;
          variables = {variables};
          var = lib.vars ledger variables;
          modules = {{
{imports}          }};
          root = import ./main.nix {{
            inherit lib tf ledger var modules;
            prefix = "";
          }};
        in
        lib.toIR {{
          inherit (root) providers resources data;
          consumers = root.outputs;
          inherit variables ledger;
        }};
    }};
}}
"#,
        src = nix_string(nivis_src)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn terraform_types_map_to_nivis_types() {
        for (text, want) in [
            ("string", "string"),
            ("number", "number"),
            ("bool", "bool"),
            ("list(string)", "list"),
            ("set(number)", "list"),
            ("map(string)", "map"),
            ("object({a = string})", "map"),
            ("any", "any"),
        ] {
            let e = Expression::from_str(text).unwrap();
            assert_eq!(variable_type(Some(&e)), want, "{text}");
        }
        assert_eq!(variable_type(None), "any");
    }
}
