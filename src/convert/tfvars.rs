//! The values Terraform gives the root module's variables from files: `terraform.tfvars`,
//! `terraform.tfvars.json`, then `*.auto.tfvars` and `*.auto.tfvars.json` in lexical order of
//! their names, then each `--tf-var-file` in the order given (Terraform's `-var-file`); a later
//! file wins, as in Terraform.
//!
//! Owns: finding and reading those files into expressions (HCL attributes; a `.json` file's
//! values literally, as Terraform reads them: no templates). Not: where the values go (`flake`
//! writes them as the declarations' defaults; a sensitive one is kept out of the Nix by the
//! caller).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hcl::Expression;

/// One variable's value and the file that gave it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Assigned {
    /// The value, as written.
    pub(crate) value: Expression,
    /// The file's name, for comments and notes.
    pub(crate) from: String,
}

/// The files Terraform reads by itself in `dir`, in its order.
fn automatic(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for name in ["terraform.tfvars", "terraform.tfvars.json"] {
        let p = dir.join(name);
        if p.is_file() {
            files.push(p);
        }
    }
    files.extend(super::files_ending(
        dir,
        &[".auto.tfvars", ".auto.tfvars.json"],
    )?);
    Ok(files)
}

/// The values of `dir`'s variable files and then of `extra`, later files winning.
pub(crate) fn read(dir: &Path, extra: &[PathBuf]) -> Result<BTreeMap<String, Assigned>, String> {
    let mut files = automatic(dir)?;
    files.extend(extra.iter().cloned());
    let mut out = BTreeMap::new();
    for f in files {
        let text =
            std::fs::read_to_string(&f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        let from = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for (name, value) in parse(&f.display().to_string(), &text)? {
            out.insert(
                name,
                Assigned {
                    value,
                    from: from.clone(),
                },
            );
        }
    }
    Ok(out)
}

/// One file's assignments; `file` names it (and says by its ending whether it is JSON).
pub(crate) fn parse(file: &str, text: &str) -> Result<Vec<(String, Expression)>, String> {
    if file.ends_with(".json") {
        let doc: serde_json::Value =
            serde_json::from_str(text).map_err(|e| format!("{file}: {e}"))?;
        let serde_json::Value::Object(top) = doc else {
            return Err(format!("{file}: the top level is not a JSON object"));
        };
        return top
            .into_iter()
            .map(|(k, v)| {
                let e = hcl::to_expression(&v).map_err(|e| format!("{file}: {k}: {e}"))?;
                Ok((k, e))
            })
            .collect();
    }
    let body: hcl::Body = hcl::from_str(text).map_err(|e| format!("{file}: {e}"))?;
    if body.blocks().next().is_some() {
        return Err(format!(
            "{file}: a variable file holds only `NAME = VALUE` lines, not blocks"
        ));
    }
    Ok(body
        .attributes()
        .map(|a| (a.key.as_str().to_string(), a.expr.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[test]
    fn hcl_and_json_files_parse_to_expressions() {
        let got = parse(
            "x.tfvars",
            "a = \"s\"\nn = 2\nl = [1, 2]\nm = { k = \"v\" }\n",
        )
        .unwrap();
        let names: Vec<&str> = got.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["a", "n", "l", "m"]);
        assert_eq!(got[0].1, Expression::String("s".into()));
        assert_eq!(got[2].1, Expression::from_str("[1, 2]").unwrap());
        // JSON values are literal: `${` is not interpolation there.
        let got = parse("x.tfvars.json", r#"{"a": "${x}", "b": true}"#).unwrap();
        assert_eq!(got[0].1, Expression::String("${x}".into()));
        assert_eq!(got[1].1, Expression::Bool(true));
        assert!(parse("x.tfvars", "block { }")
            .unwrap_err()
            .contains("not blocks"));
        assert!(parse("x.tfvars.json", "[1]").is_err());
    }

    #[test]
    fn later_files_win_in_terraforms_order() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).unwrap();
        write(
            "terraform.tfvars",
            "a = \"tfvars\"\nb = \"tfvars\"\nc = \"tfvars\"\nd = \"tfvars\"\n",
        );
        write("terraform.tfvars.json", r#"{"b": "json"}"#);
        write("b.auto.tfvars", "c = \"b-auto\"\n");
        write("a.auto.tfvars.json", r#"{"c": "a-auto", "d": "a-auto"}"#);
        write("ignored.tfvars", "a = \"ignored\"\n");
        let extra = dir.path().join("extra.tfvars");
        write("extra.tfvars", "d = \"extra\"\n");
        let got = read(dir.path(), &[extra]).unwrap();
        let value = |k: &str| match &got[k].value {
            Expression::String(s) => s.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(value("a"), "tfvars");
        assert_eq!(value("b"), "json");
        assert_eq!(value("c"), "b-auto");
        assert_eq!(value("d"), "extra");
        assert_eq!(got["c"].from, "b.auto.tfvars");
    }
}
