//! Terraform's native syntax (`.tf`) into the converter's [`Module`], parsed by `hcl-rs`.
//!
//! Owns: which blocks and meta-arguments mean what (Terraform's language, as its docs define
//! it). Not: Terraform's JSON syntax (`parse_json`), nor any translation.

use hcl::expr::TraversalOperator;
use hcl::{Block, Expression, Structure};

use super::ast::{
    Body, Expansion, Kind, Lifecycle, Module, ModuleCall, Output, ProviderBlock, RequiredProvider,
    Resource, Variable,
};

/// Adds the declarations of one `.tf` file's text to `module`; `file` names it in errors.
pub(crate) fn add_file(module: &mut Module, file: &str, text: &str) -> Result<(), String> {
    let body = hcl::parse(text).map_err(|e| format!("{file}: {e}"))?;
    for structure in body.into_inner() {
        match structure {
            Structure::Block(block) => add_block(module, file, block)?,
            Structure::Attribute(a) => module.unsupported.push((
                file.to_string(),
                format!("a top-level argument `{}`", a.key.as_str()),
            )),
        }
    }
    Ok(())
}

fn labels(block: &Block, n: usize, file: &str) -> Result<Vec<String>, String> {
    let found: Vec<String> = block
        .labels
        .iter()
        .map(|l| l.as_str().to_string())
        .collect();
    if found.len() != n {
        return Err(format!(
            "{file}: a `{}` block takes {n} label(s), found {}",
            block.identifier.as_str(),
            found.len()
        ));
    }
    Ok(found)
}

// Long because it dispatches one arm per top-level block type.
pub(super) fn add_block(module: &mut Module, file: &str, block: Block) -> Result<(), String> {
    match block.identifier.as_str() {
        "terraform" => terraform_block(module, &block),
        "variable" => {
            let name = labels(&block, 1, file)?.remove(0);
            let mut v = Variable {
                name,
                type_expr: None,
                default: None,
                description: None,
                sensitive: false,
            };
            for attr in block.body.attributes() {
                match attr.key.as_str() {
                    "type" => v.type_expr = Some(attr.expr.clone()),
                    "default" => v.default = Some(attr.expr.clone()),
                    "description" => v.description = literal_string(&attr.expr),
                    "sensitive" => v.sensitive = matches!(attr.expr, Expression::Bool(true)),
                    _ => {}
                }
            }
            module.variables.push(v);
        }
        "locals" => {
            for attr in block.body.attributes() {
                module
                    .locals
                    .push((attr.key.as_str().to_string(), attr.expr.clone()));
            }
        }
        "provider" => {
            let name = labels(&block, 1, file)?.remove(0);
            let mut config = body(&block.body, &format!("provider {name}"), module);
            let alias = take_attr(&mut config, "alias").and_then(|e| literal_string(&e));
            take_attr(&mut config, "version");
            module.providers.push(ProviderBlock {
                name,
                alias,
                config,
            });
        }
        kind @ ("resource" | "data") => {
            let mut l = labels(&block, 2, file)?;
            let name = l.remove(1);
            let type_name = l.remove(0);
            let kind = if kind == "resource" {
                Kind::Managed
            } else {
                Kind::Data
            };
            let r = resource(kind, type_name, name, &block.body, module);
            module.resources.push(r);
        }
        "output" => {
            let name = labels(&block, 1, file)?.remove(0);
            let value = block
                .body
                .attributes()
                .find(|a| a.key.as_str() == "value")
                .map(|a| a.expr.clone())
                .ok_or_else(|| format!("{file}: output {name} has no value"))?;
            module.outputs.push(Output { name, value });
        }
        "module" => {
            let name = labels(&block, 1, file)?.remove(0);
            let mut call = ModuleCall {
                name: name.clone(),
                source: String::new(),
                args: Vec::new(),
                expansion: Expansion::Single,
            };
            for attr in block.body.attributes() {
                match attr.key.as_str() {
                    "source" => call.source = literal_string(&attr.expr).unwrap_or_default(),
                    "count" => call.expansion = Expansion::Count(attr.expr.clone()),
                    "for_each" => call.expansion = Expansion::ForEach(attr.expr.clone()),
                    "version" | "providers" | "depends_on" => {}
                    key => call.args.push((key.to_string(), attr.expr.clone())),
                }
            }
            module.calls.push(call);
        }
        other => module.unsupported.push((
            file.to_string(),
            format!("a `{other}` block ({})", block_name(&block)),
        )),
    }
    Ok(())
}

fn block_name(block: &Block) -> String {
    let mut s = block.identifier.as_str().to_string();
    for l in &block.labels {
        s.push(' ');
        s.push_str(l.as_str());
    }
    s
}

fn terraform_block(module: &mut Module, block: &Block) {
    for inner in block.body.blocks() {
        if inner.identifier.as_str() == "backend" {
            module.backend = Some(super::ast::TfBackend {
                kind: inner
                    .labels
                    .first()
                    .map(|l| l.as_str().to_string())
                    .unwrap_or_default(),
                settings: inner
                    .body
                    .attributes()
                    .map(|a| (a.key.as_str().to_string(), a.expr.clone()))
                    .collect(),
            });
            continue;
        }
        if inner.identifier.as_str() != "required_providers" {
            continue;
        }
        for attr in inner.body.attributes() {
            let mut rp = RequiredProvider {
                name: attr.key.as_str().to_string(),
                source: None,
                version: None,
            };
            match &attr.expr {
                Expression::Object(o) => {
                    for (k, v) in o {
                        match k.to_string().trim_matches('"') {
                            "source" => rp.source = literal_string(v),
                            "version" => rp.version = literal_string(v),
                            _ => {}
                        }
                    }
                }
                // Terraform 0.12's `null = "~> 2.1"`.
                e => rp.version = literal_string(e),
            }
            module.required_providers.push(rp);
        }
    }
}

/// The text of a string literal (a template without interpolations too).
pub(crate) fn literal_string(e: &Expression) -> Option<String> {
    match e {
        Expression::String(s) => Some(s.clone()),
        Expression::TemplateExpr(t) => {
            let template = hcl::Template::from_expr(t).ok()?;
            let mut out = String::new();
            for el in template.elements() {
                match el {
                    hcl::template::Element::Literal(s) => out.push_str(s),
                    _ => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
}

fn take_attr(body: &mut Body, key: &str) -> Option<Expression> {
    let i = body.attrs.iter().position(|(k, _)| k == key)?;
    Some(body.attrs.remove(i).1)
}

/// A configuration body; `dynamic` blocks and provisioners are noted as unsupported.
fn body(b: &hcl::Body, at: &str, module: &mut Module) -> Body {
    let mut out = Body::default();
    for s in b.iter() {
        match s {
            Structure::Attribute(a) => out.attrs.push((a.key.as_str().to_string(), a.expr.clone())),
            Structure::Block(inner) => {
                let name = inner.identifier.as_str().to_string();
                if matches!(name.as_str(), "dynamic" | "provisioner" | "connection") {
                    module
                        .unsupported
                        .push((at.to_string(), format!("a `{}` block", block_name(inner))));
                    continue;
                }
                let nested = body(&inner.body, &format!("{at}.{name}"), module);
                out.blocks.push((name, nested));
            }
        }
    }
    out
}

fn resource(
    kind: Kind,
    type_name: String,
    name: String,
    b: &hcl::Body,
    module: &mut Module,
) -> Resource {
    let at = format!(
        "{}{type_name}.{name}",
        if kind == Kind::Data { "data." } else { "" }
    );
    let mut config = body(b, &at, module);
    let mut r = Resource {
        kind,
        type_name,
        name,
        expansion: Expansion::Single,
        provider: None,
        depends_on: Vec::new(),
        lifecycle: Lifecycle::default(),
        config: Body::default(),
    };
    if let Some(e) = take_attr(&mut config, "count") {
        r.expansion = Expansion::Count(e);
    }
    if let Some(e) = take_attr(&mut config, "for_each") {
        r.expansion = Expansion::ForEach(e);
    }
    if let Some(e) = take_attr(&mut config, "provider") {
        r.provider = provider_ref(&e);
        if r.provider.is_none() {
            module
                .unsupported
                .push((at.clone(), format!("provider = {e}")));
        }
    }
    if let Some(e) = take_attr(&mut config, "depends_on") {
        match e {
            Expression::Array(list) => r.depends_on = list,
            other => module
                .unsupported
                .push((at.clone(), format!("depends_on = {other}"))),
        }
    }
    if let Some(i) = config.blocks.iter().position(|(k, _)| k == "lifecycle") {
        let (_, mut lc) = config.blocks.remove(i);
        r.lifecycle.create_before_destroy = take_attr(&mut lc, "create_before_destroy");
        r.lifecycle.prevent_destroy = take_attr(&mut lc, "prevent_destroy");
        r.lifecycle.ignore_changes = take_attr(&mut lc, "ignore_changes");
        for (k, _) in lc.attrs.iter() {
            module
                .unsupported
                .push((at.clone(), format!("lifecycle argument `{k}`")));
        }
        for (k, _) in lc.blocks.iter() {
            module
                .unsupported
                .push((at.clone(), format!("a lifecycle `{k}` block")));
        }
    }
    r.config = config;
    r
}

/// `null` or `null.two` as (local name, alias).
pub(crate) fn provider_ref(e: &Expression) -> Option<(String, Option<String>)> {
    // `null` is a keyword of the language: the provider hashicorp/null is named by it.
    let name = |e: &Expression| match e {
        Expression::Variable(v) => Some(v.as_str().to_string()),
        Expression::Null => Some("null".to_string()),
        _ => None,
    };
    match e {
        Expression::Variable(_) | Expression::Null => Some((name(e)?, None)),
        Expression::Traversal(t) => match t.operators.as_slice() {
            [TraversalOperator::GetAttr(alias)] => {
                Some((name(&t.expr)?, Some(alias.as_str().to_string())))
            }
            _ => None,
        },
        // The JSON syntax's "null.two".
        Expression::String(s) => match s.split_once('.') {
            Some((n, a)) => Some((n.to_string(), Some(a.to_string()))),
            None => Some((s.clone(), None)),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_blocks_and_meta_arguments() {
        let mut m = Module::default();
        add_file(
            &mut m,
            "main.tf",
            r#"
terraform {
  required_providers {
    null = { source = "hashicorp/null", version = "2.1.2" }
  }
}
variable "n" {
  type    = number
  default = 2
}
locals { tag = "x-${var.n}" }
provider "null" { alias = "two" }
resource "null_resource" "node" {
  count    = var.n
  provider = null.two
  triggers = { i = count.index }
  depends_on = [null_resource.other]
  lifecycle {
    ignore_changes = [triggers]
    create_before_destroy = true
  }
  provisioner "local-exec" { command = "true" }
}
data "null_data_source" "d" { inputs = { a = "b" } }
output "ids" { value = null_resource.node[*].id }
module "app" {
  source = "./app"
  name   = "web"
}
moved {
  from = null_resource.a
  to   = null_resource.b
}
"#,
        )
        .unwrap();
        assert_eq!(
            m.required_providers[0].source.as_deref(),
            Some("hashicorp/null")
        );
        assert_eq!(m.variables[0].name, "n");
        assert_eq!(m.locals[0].0, "tag");
        assert_eq!(m.providers[0].alias.as_deref(), Some("two"));
        let node = &m.resources[0];
        assert!(matches!(node.expansion, Expansion::Count(_)));
        assert_eq!(node.provider, Some(("null".into(), Some("two".into()))));
        assert_eq!(node.depends_on.len(), 1);
        assert!(node.lifecycle.ignore_changes.is_some());
        assert_eq!(node.config.attrs.len(), 1, "only triggers is configuration");
        assert_eq!(m.resources[1].kind, Kind::Data);
        assert_eq!(m.outputs[0].name, "ids");
        assert_eq!(m.calls[0].source, "./app");
        let unsupported: Vec<&str> = m.unsupported.iter().map(|(_, w)| w.as_str()).collect();
        assert!(
            unsupported.iter().any(|w| w.contains("provisioner")),
            "{unsupported:?}"
        );
        assert!(
            unsupported.iter().any(|w| w.contains("moved")),
            "{unsupported:?}"
        );
    }
}
