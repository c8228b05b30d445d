//! Terraform's JSON syntax (`.tf.json`: what terranix and CDKTF generate) into the same blocks
//! the native syntax gives, so one reader (`parse_hcl::add_block`) takes both.
//!
//! Owns: the JSON syntax's rules: a string is a template (`"${var.n}"` alone is the value
//! itself, `$${` an escaped `${`), `depends_on`, `ignore_changes`, a variable's `type` and a
//! resource's `provider` hold expression text, and each block level may be an object or a
//! list of objects. Not: what the blocks mean (`parse_hcl`).

use std::str::FromStr;

use hcl::template::Element;
use hcl::{Block, Expression, ObjectKey, Template};
use serde_json::{Map, Value};

use super::ast::Module;
use super::parse_hcl::add_block;

/// Adds the declarations of one `.tf.json` file's text to `module`; `file` names it in errors.
pub(crate) fn add_file(module: &mut Module, file: &str, text: &str) -> Result<(), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    let Value::Object(top) = doc else {
        return Err(format!("{file}: the top level is not a JSON object"));
    };
    for (kind, value) in &top {
        let at = |e: String| format!("{file}: {kind}: {e}");
        // How many labels each block type takes.
        let depth = match kind.as_str() {
            "//" => continue,
            "terraform" | "locals" => 0,
            "variable" | "provider" | "output" | "module" => 1,
            "resource" | "data" => 2,
            other => {
                module
                    .unsupported
                    .push((file.to_string(), format!("a `{other}` block")));
                continue;
            }
        };
        for block in blocks(kind, value, depth, &mut Vec::new()).map_err(at)? {
            add_block(module, file, block)?;
        }
    }
    Ok(())
}

/// The blocks of type `kind` under `value`, `depth` labels deep.
fn blocks(
    kind: &str,
    value: &Value,
    depth: usize,
    labels: &mut Vec<String>,
) -> Result<Vec<Block>, String> {
    let objects: Vec<&Map<String, Value>> = match value {
        Value::Object(o) => vec![o],
        Value::Array(items) => items
            .iter()
            .map(|v| v.as_object().ok_or("a list entry is not an object"))
            .collect::<Result<_, _>>()?,
        _ => return Err("not an object".into()),
    };
    let mut out = Vec::new();
    for object in objects {
        if depth == labels.len() {
            out.push(block_of(kind, labels, object)?);
            continue;
        }
        for (label, inner) in object {
            if label == "//" {
                continue;
            }
            labels.push(label.clone());
            out.extend(blocks(kind, inner, depth, labels)?);
            labels.pop();
        }
    }
    Ok(out)
}

fn block_of(kind: &str, labels: &[String], body: &Map<String, Value>) -> Result<Block, String> {
    let mut b = Block::builder(kind).add_labels(labels.iter().cloned());
    for (key, value) in body {
        let nested_block = matches!(
            (kind, key.as_str()),
            ("terraform", "required_providers" | "backend")
                | (
                    "resource" | "data",
                    "lifecycle" | "provisioner" | "connection" | "dynamic"
                )
        );
        if key == "//" {
            continue;
        }
        if nested_block {
            // A backend block has one label, its type.
            let depth = usize::from(key == "backend");
            for inner in blocks(key, value, depth, &mut Vec::new())? {
                b = b.add_block(inner);
            }
            continue;
        }
        let expr = match (kind, key.as_str()) {
            ("resource" | "data" | "module", "depends_on") => expression_list(value, key)?,
            ("variable", "type") => expression_text(value, key)?,
            ("lifecycle", "ignore_changes") => match value {
                Value::String(s) if s == "all" => Expression::String(s.clone()),
                v => expression_list(v, key)?,
            },
            _ => expression(value)?,
        };
        b = b.add_attribute((key.as_str(), expr));
    }
    Ok(b.build())
}

fn expression_text(value: &Value, key: &str) -> Result<Expression, String> {
    let text = value
        .as_str()
        .ok_or_else(|| format!("`{key}` is not expression text"))?;
    Expression::from_str(text).map_err(|e| format!("`{key}` = {text:?}: {e}"))
}

fn expression_list(value: &Value, key: &str) -> Result<Expression, String> {
    let items = value
        .as_array()
        .ok_or_else(|| format!("`{key}` is not a list"))?;
    Ok(Expression::Array(
        items
            .iter()
            .map(|v| expression_text(v, key))
            .collect::<Result<_, _>>()?,
    ))
}

/// A JSON value as the expression Terraform reads it as.
pub(crate) fn expression(value: &Value) -> Result<Expression, String> {
    Ok(match value {
        Value::Null => Expression::Null,
        Value::Bool(b) => Expression::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Expression::Number(hcl::Number::from(i)),
            None => n
                .as_f64()
                .and_then(hcl::Number::from_f64)
                .map(Expression::Number)
                .ok_or_else(|| format!("the number {n} is out of range"))?,
        },
        Value::String(s) => template(s)?,
        Value::Array(items) => {
            Expression::Array(items.iter().map(expression).collect::<Result<_, _>>()?)
        }
        Value::Object(o) => {
            let mut object = hcl::Object::new();
            for (k, v) in o {
                object.insert(
                    ObjectKey::Expression(Expression::String(k.clone())),
                    expression(v)?,
                );
            }
            Expression::Object(object)
        }
    })
}

/// A JSON string: a literal, the value of its one interpolation, or a template.
fn template(s: &str) -> Result<Expression, String> {
    let t = Template::from_str(s).map_err(|e| format!("the template {s:?}: {e}"))?;
    Ok(match t.elements() {
        [] => Expression::String(String::new()),
        [Element::Literal(text)] => Expression::String(text.clone()),
        [Element::Interpolation(i)] if !i.strip.strip_start() && !i.strip.strip_end() => {
            i.expr.clone()
        }
        _ => Expression::TemplateExpr(Box::new(hcl::expr::TemplateExpr::QuotedString(
            s.to_string(),
        ))),
    })
}

#[cfg(test)]
mod tests {
    use super::super::ast::{Expansion, Kind};
    use super::*;

    #[test]
    fn reads_what_terranix_writes() {
        let mut m = Module::default();
        add_file(
            &mut m,
            "config.tf.json",
            r#"{
  "terraform": {"required_providers": {"null": {"source": "hashicorp/null"}}},
  "variable": {"n": {"type": "number", "default": 2}, "m": {"type": "map(string)"}},
  "locals": {"tag": "x-${var.n}", "plain": "a $${b}"},
  "resource": {"null_resource": {
     "node": {"count": "${var.n}", "triggers": {"i": "${count.index}"},
              "depends_on": ["null_resource.a"], "lifecycle": {"ignore_changes": ["triggers"]}},
     "a": [{"provider": "null.two"}]}},
  "data": {"null_data_source": {"d": {"inputs": {}}}},
  "output": {"o": {"value": "${null_resource.a.id}"}}
}"#,
        )
        .unwrap();
        assert_eq!(
            m.required_providers[0].source.as_deref(),
            Some("hashicorp/null")
        );
        assert!(matches!(
            m.variables[1].type_expr,
            Some(Expression::FuncCall(_))
        ));
        assert!(matches!(m.locals[0].1, Expression::TemplateExpr(_)));
        assert_eq!(m.locals[1].1, Expression::String("a ${b}".into()));
        let node = &m.resources[0];
        assert!(matches!(
            node.expansion,
            Expansion::Count(Expression::Traversal(_))
        ));
        assert!(matches!(node.depends_on[0], Expression::Traversal(_)));
        assert!(node.lifecycle.ignore_changes.is_some());
        assert_eq!(
            m.resources[1].provider,
            Some(("null".into(), Some("two".into())))
        );
        assert_eq!(m.resources[2].kind, Kind::Data);
        assert!(matches!(m.outputs[0].value, Expression::Traversal(_)));
    }
}
