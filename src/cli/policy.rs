//! `nivis policy test`: the project's policies run on fixture plans, their violations compared
//! with the ones each fixture expects.
//!
//! Owns: reading fixtures (the input the runner sees, with defaults filled in, and the expected
//! violations), the comparison and its report. Not: running the rules (see `policy`).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value as Json};

use super::args::PolicyTestArgs;
use super::{exit, fail, plan_source};
use crate::policy::PolicyRunner;
use crate::render::{escape_text, outln};
use crate::secrets::Redactor;

/// A violation as a fixture names it: the rule and the address (`None`: a whole phase).
type Expected = BTreeSet<(String, Option<String>)>;

/// Runs every fixture of `args`; exit 0 when each found exactly the violations it expects.
pub(super) fn test(args: &PolicyTestArgs, redactor: &Redactor) -> i32 {
    let source = match plan_source(&args.source) {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    let mut runner = PolicyRunner::new(source.clone());
    let mut failed = 0;
    for path in &args.fixtures {
        let (input, expected) = match read_fixture(path) {
            Ok(f) => f,
            Err(e) => return fail(redactor, &format!("{}: {e}", path.display())),
        };
        let verdict = match runner.check(&input) {
            Ok(Some((verdict, _))) => verdict,
            Ok(None) => {
                return fail(
                    redactor,
                    &format!(
                        "the plan {source} has no place for policies beside it; give --attr (the \
                     policies are read beside it) or use a flake"
                    ),
                )
            }
            Err(e) => return fail(redactor, &e),
        };
        let found: Expected = (verdict.violations.iter())
            .map(|v| (v.rule.clone(), v.address.clone()))
            .collect();
        if found == expected {
            outln!(
                "ok   {}",
                escape_text(redactor, &path.display().to_string())
            );
            continue;
        }
        failed += 1;
        outln!(
            "FAIL {}",
            escape_text(redactor, &path.display().to_string())
        );
        for (label, set) in [("expected", &expected), ("found", &found)] {
            let listed: Vec<String> = set.iter().map(describe).collect();
            let listed = match listed.is_empty() {
                true => "no violation".to_string(),
                false => listed.join(", "),
            };
            outln!("       {label}: {}", escape_text(redactor, &listed));
        }
    }
    let total = args.fixtures.len();
    outln!(
        "{total} fixture(s): {} passed, {failed} failed",
        total - failed
    );
    if failed > 0 {
        exit::ERROR
    } else {
        exit::OK
    }
}

fn describe((rule, address): &(String, Option<String>)) -> String {
    match address {
        Some(a) => format!("{rule} on {a}"),
        None => format!("{rule} on the phase"),
    }
}

/// A fixture's runner input (defaults filled in) and its expected violations.
fn read_fixture(path: &Path) -> Result<(Json, Expected), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let fixture: Json = serde_json::from_str(&text).map_err(|e| format!("not JSON: {e}"))?;
    let kind = fixture["kind"].as_str().unwrap_or("plan");
    if !matches!(kind, "plan" | "static") {
        return Err(format!("\"kind\" is {kind:?}: \"plan\" or \"static\""));
    }
    let list = |key: &str| fixture[key].as_array().cloned().unwrap_or_default();
    let changes: Vec<Json> = list("changes").into_iter().map(change_defaults).collect();
    let resources: Vec<Json> = list("resources")
        .into_iter()
        .map(resource_defaults)
        .collect();
    let mut expected = Expected::new();
    for v in list("expect") {
        let rule = v["rule"]
            .as_str()
            .ok_or_else(|| format!("an \"expect\" entry has no \"rule\": {v}"))?;
        expected.insert((rule.to_string(), v["address"].as_str().map(str::to_string)));
    }
    let input = json!({"kind": kind, "changes": changes, "resources": resources});
    Ok((input, expected))
}

/// A change as the runner gives it, with what the fixture leaves out filled in.
fn change_defaults(mut c: Json) -> Json {
    for (key, default) in [
        ("type", json!("")),
        ("phase", json!(1)),
        ("before", json!({})),
        ("after", json!({})),
        ("attributes", json!([])),
    ] {
        if c.get(key).is_none() {
            c[key] = default;
        }
    }
    c
}

/// A resource as the runner gives it, with what the fixture leaves out filled in.
fn resource_defaults(mut r: Json) -> Json {
    for (key, default) in [
        ("kind", json!("resource")),
        ("type", json!("")),
        ("name", json!("")),
        ("provider", json!("")),
        ("config", json!({})),
    ] {
        if r.get(key).is_none() {
            r[key] = default;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixtures_get_defaults_and_expectations() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.json");
        std::fs::write(
            &path,
            r#"{"kind": "plan", "changes": [{"address": "a.b.c", "action": "replace"}],
                "expect": [{"rule": "r", "address": "a.b.c"}, {"rule": "p"}]}"#,
        )
        .unwrap();
        let (input, expected) = read_fixture(&path).unwrap();
        assert_eq!(input["changes"][0]["after"], json!({}));
        assert_eq!(input["changes"][0]["phase"], 1);
        assert_eq!(input["resources"], json!([]));
        let want: Expected = [("r".into(), Some("a.b.c".into())), ("p".into(), None)].into();
        assert_eq!(expected, want);
        std::fs::write(&path, r#"{"kind": "apply"}"#).unwrap();
        assert!(read_fixture(&path)
            .unwrap_err()
            .contains("\"plan\" or \"static\""));
    }
}
