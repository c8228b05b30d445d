//! `nivis output`: what a run produced, for people and scripts.
//!
//! Owns: collecting the outputs (every resource's recorded attributes, as the ledger shows them
//! to Nix, and the plan's Nix consumer values evaluated against that ledger), looking one up by
//! name, and printing it as Nix, JSON or a bare value. Not: evaluation or state internals.
//!
//! Secrets stay out of everything but an explicit `--raw NAME`: sensitive attributes are
//! `__sensitiveRef` placeholders here as in the ledger, values Nix computed from secrets are
//! `{"__sensitive": {}}` (their value left out), and all text goes through `render`'s escaping
//! and redaction. `--raw NAME` prints the one value asked for even when it is sensitive, as
//! Terraform's `output -raw` does: it is how a script gets a generated password; on a terminal
//! its control characters are escaped.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};

use serde_json::{json, Map, Value as Json};

use super::args::{InstallArgs, OutputArgs, RunSpec};
use super::{backend, fail, options};
use crate::engine::{Collect, Engine};
use crate::nixsyntax::{nix_attr, nix_string};
use crate::render;
use crate::secrets::Redactor;
use crate::state::StateFile;

/// What `nivis output` shows.
struct Outputs {
    /// Node id -> outputs, sensitive attributes as placeholders (the ledger's view).
    resources: Map<String, Json>,
    /// Consumer id -> value (IR JSON: pending parts keep their markers, sensitive ones are
    /// `{"__sensitive": {}}`); None when the plan was not evaluated (no flake here and no
    /// source given).
    consumers: Option<Map<String, Json>>,
}

/// The outputs twice: as shown, and with every secret in place (for `--raw` only).
struct Collected {
    shown: Outputs,
    revealed: Outputs,
}

pub(super) fn run(args: &OutputArgs, redactor: &Redactor) -> i32 {
    let Collected { shown, revealed } = match collect(args, redactor) {
        Ok(o) => o,
        Err(e) => return fail(redactor, &e),
    };
    let mut out = render::stdout();
    let result = match &args.name {
        None if args.json => {
            let all = json!({ "resources": shown.resources, "consumers": shown.consumers });
            writeln!(out, "{}", render::json_text(redactor, &all, true))
        }
        None => write!(out, "{}", render::escape_text(redactor, &nix_all(&shown))),
        Some(name) if args.raw => match lookup(&revealed, name).and_then(|v| raw(&v)) {
            Err(e) => return fail(redactor, &format!("--raw {name}: {e}")),
            // Computed from a placeholder: `output` runs no secret source (DESIGN §93).
            Ok(text) if text.contains(crate::engine::PLACEHOLDER) => {
                return fail(
                    redactor,
                    &format!(
                        "--raw {name}: it is computed from a sensitive variable that `nivis \
                         output` does not read (it runs no secret source); give the variable \
                         (NIVIS_VAR_NAME=VALUE or --var-file) to print it"
                    ),
                )
            }
            // Exactly the value for a pipe; escaped (not redacted) for a terminal.
            Ok(text) if std::io::stdout().is_terminal() => {
                write!(out, "{}", render::escape_unredacted(&text))
            }
            Ok(text) => out.write_all(text.as_bytes()),
        },
        Some(name) => match lookup(&shown, name) {
            Err(e) => return fail(redactor, &e),
            Ok(value) if args.json => {
                writeln!(out, "{}", render::json_text(redactor, &value, true))
            }
            Ok(value) => writeln!(
                out,
                "{}",
                render::escape_text(redactor, &nix_value(&value, 0))
            ),
        },
    };
    match result.and_then(|()| out.flush()) {
        Ok(()) => super::exit::OK,
        Err(e) => fail(redactor, &format!("cannot write the output: {e}")),
    }
}

fn collect(args: &OutputArgs, redactor: &Redactor) -> Result<Collected, String> {
    // `nivis output` in a directory without a flake (only a state file) shows what state
    // holds; any source given explicitly must evaluate.
    let implicit = args.project.source.file.is_none() && args.project.source.flake == ".";
    let here = std::env::current_dir().unwrap_or_default();
    if implicit && crate::project::search_upward(&here).is_err() {
        if !args.json && !args.raw {
            eprintln!(
                "(no flake.nix here: Nix consumer values are not shown; use --flake or --file)"
            );
        }
        let (_, state) = backend::read(&args.project.source, &args.project.state, redactor)?;
        return Ok(Collected::new(&state, None));
    }
    if let Some(name) = &args.name {
        // A resource's outputs are in the state: no evaluation, so no variables needed.
        let (_, state) = backend::read(&args.project.source, &args.project.state, redactor)?;
        let recorded = state
            .ids()
            .any(|id| name == id || name.strip_prefix(id).is_some_and(|r| r.starts_with('.')));
        if recorded {
            return Ok(Collected::new(&state, None));
        }
    }
    let install = InstallArgs::none();
    let spec = RunSpec::for_project(&args.project, &install);
    let opts = options(&spec, "output", redactor, None)?;
    let state = opts.backend.read_only().map_err(|e| e.to_string())?;
    state.teach_secrets(redactor);
    let mut sink = Collect::default();
    let ir = Engine::new(opts, &mut sink)
        .declarations()
        .map_err(|e| e.to_string())?;
    super::say_warnings(&sink.0, redactor);
    let consumers = ir
        .consumers
        .iter()
        .map(|c| (c.id.clone(), c.value.to_json()))
        .collect();
    Ok(Collected::new(&state, Some(consumers)))
}

impl Collected {
    /// From the state and the consumers' IR values.
    fn new(state: &StateFile, consumers: Option<Map<String, Json>>) -> Collected {
        let mut ledger = crate::ledger::Ledger::default();
        for r in state.iter() {
            ledger.set(&r.id, &r.attributes, &r.sensitive_paths);
        }
        let shown = Outputs {
            resources: ledger
                .outputs
                .into_iter()
                .map(|(id, o)| (id, Json::Object(o)))
                .collect(),
            consumers: consumers
                .as_ref()
                .map(|c| c.iter().map(|(k, v)| (k.clone(), hide(v))).collect()),
        };
        let revealed = Outputs {
            resources: state
                .iter()
                .map(|r| (r.id.clone(), r.attributes.clone()))
                .collect(),
            consumers: consumers.map(|c| {
                c.iter()
                    .map(|(k, v)| (k.clone(), reveal(v, state)))
                    .collect()
            }),
        };
        Collected { shown, revealed }
    }
}

/// An IR value with the value of every `__sensitive` marker left out.
fn hide(v: &Json) -> Json {
    match v {
        Json::Object(m) if m.len() == 1 && m.contains_key("__sensitive") => {
            json!({ "__sensitive": {} })
        }
        Json::Object(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), hide(v))).collect()),
        Json::Array(items) => Json::Array(items.iter().map(hide).collect()),
        other => other.clone(),
    }
}

/// An IR value with every secret in place: `__sensitive` unwrapped, `__sensitiveRef` read from
/// the state.
fn reveal(v: &Json, state: &StateFile) -> Json {
    let Json::Object(m) = v else {
        return match v {
            Json::Array(items) => Json::Array(items.iter().map(|i| reveal(i, state)).collect()),
            other => other.clone(),
        };
    };
    if m.len() == 1 {
        if let Some(inner) = m.get("__sensitive") {
            return reveal(&inner["value"], state);
        }
        if let Some(r) = m.get("__sensitiveRef") {
            let found = r["resource"]
                .as_str()
                .and_then(|id| state.get(id))
                .and_then(|rec| crate::secrets::at_path(&rec.attributes, &r["path"]));
            if let Some(value) = found {
                return value.clone();
            }
        }
    }
    Json::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), reveal(v, state)))
            .collect(),
    )
}

/// NAME is a consumer id, a node id, or a node id followed by `.`-separated attribute keys
/// and list indices. Consumers win over nodes of the same name.
fn lookup(outputs: &Outputs, name: &str) -> Result<Json, String> {
    if let Some(v) = outputs.consumers.as_ref().and_then(|c| c.get(name)) {
        return Ok(v.clone());
    }
    if let Some(v) = outputs.resources.get(name) {
        return Ok(v.clone());
    }
    // The longest node id that NAME continues with `.`.
    let owner = outputs
        .resources
        .keys()
        .filter(|id| name.len() > id.len() && name.starts_with(id.as_str()))
        .filter(|id| name.as_bytes()[id.len()] == b'.')
        .max_by_key(|id| id.len());
    if let Some(id) = owner {
        let mut value = &outputs.resources[id];
        for step in name[id.len() + 1..].split('.') {
            let next = match value {
                Json::Object(m) => m.get(step),
                Json::Array(items) => step.parse::<usize>().ok().and_then(|i| items.get(i)),
                _ => None,
            };
            value = next.ok_or_else(|| {
                format!("{name}: {id} has no output at {step:?} (`nivis output {id}` shows what it has)")
            })?;
        }
        return Ok(value.clone());
    }
    let mut known: Vec<&str> = outputs.resources.keys().map(String::as_str).collect();
    if let Some(c) = &outputs.consumers {
        known.extend(c.keys().map(String::as_str));
    }
    Err(if known.is_empty() {
        format!("no output {name:?}: nothing has been applied yet")
    } else {
        format!("no output {name:?}; there are: {}", known.join(", "))
    })
}

/// A placeholder's meaning, when `v` is one.
fn placeholder(v: &Json) -> Option<&'static str> {
    let Json::Object(m) = v else { return None };
    if m.len() != 1 {
        return None;
    }
    if m.contains_key("__sensitiveRef") || m.contains_key("__sensitive") {
        Some("sensitive")
    } else if m.contains_key("__ref") || m.contains_key("__derived") {
        Some("known after apply")
    } else {
        None
    }
}

fn raw(value: &Json) -> Result<String, String> {
    match value {
        Json::String(s) => Ok(s.clone()),
        Json::Number(n) => Ok(n.to_string()),
        Json::Bool(b) => Ok(b.to_string()),
        v => match placeholder(v) {
            Some(_) => Err("the value is not known yet: run `nivis apply`".into()),
            None => Err(format!(
                "only a string, number or bool prints raw; this is {} (use --json)",
                if v.is_array() {
                    "a list"
                } else if v.is_null() {
                    "null"
                } else {
                    "an attrset"
                }
            )),
        },
    }
}

/// Every output as Nix text (not yet escaped for the terminal).
fn nix_all(outputs: &Outputs) -> String {
    let mut text = String::new();
    if outputs.resources.is_empty() {
        text.push_str("# No resources in state.\n");
    } else {
        text.push_str("# Resource outputs\n");
        for (id, v) in &outputs.resources {
            text.push_str(&format!("{} = {};\n", nix_attr(id), nix_value(v, 0)));
        }
    }
    if let Some(consumers) = outputs.consumers.as_ref().filter(|c| !c.is_empty()) {
        text.push_str("\n# Nix consumer values\n");
        for (id, v) in consumers {
            text.push_str(&format!("{} = {};\n", nix_attr(id), nix_value(v, 0)));
        }
    }
    text
}

/// `v` as a Nix expression; placeholders as `<sensitive>` / `<known after apply>`. Small
/// values stay on one line.
fn nix_value(v: &Json, indent: usize) -> String {
    if let Some(p) = placeholder(v) {
        return format!("<{p}>");
    }
    match v {
        Json::Null => "null".into(),
        Json::Bool(b) => b.to_string(),
        Json::Number(n) => n.to_string(),
        Json::String(s) => nix_string(s),
        Json::Array(items) if items.is_empty() => "[ ]".into(),
        Json::Object(m) if m.is_empty() => "{ }".into(),
        Json::Array(items) => {
            let parts: Vec<String> = items.iter().map(|i| nix_value(i, indent + 2)).collect();
            layout("[", "]", &parts, indent)
        }
        Json::Object(m) => {
            let parts: BTreeMap<String, String> = m
                .iter()
                .map(|(k, v)| (nix_attr(k), nix_value(v, indent + 2)))
                .collect();
            let parts: Vec<String> = parts
                .into_iter()
                .map(|(k, v)| format!("{k} = {v};"))
                .collect();
            layout("{", "}", &parts, indent)
        }
    }
}

/// `open a b c close` on one line when it fits in 80 columns, else one part per line.
fn layout(open: &str, close: &str, parts: &[String], indent: usize) -> String {
    let one_line = format!("{open} {} {close}", parts.join(" "));
    if one_line.len() + indent <= 80 && !one_line.contains('\n') {
        return one_line;
    }
    let pad = " ".repeat(indent + 2);
    let mut s = format!("{open}\n");
    for p in parts {
        s.push_str(&pad);
        s.push_str(p);
        s.push('\n');
    }
    s.push_str(&" ".repeat(indent));
    s.push_str(close);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Outputs {
        let resources = json!({
            "null.null_resource.a": {"id": "42", "triggers": {"k": "v"}, "list": [1, 2],
                                     "secret": {"__sensitiveRef": {"resource": "null.null_resource.a", "path": ["secret"]}}},
            "null.null_resource.a.b": {"id": "7"}
        });
        let consumers = json!({"summary": "a=42", "later": {"__derived": {"inputs": ["x.y"]}}});
        Outputs {
            resources: resources.as_object().unwrap().clone(),
            consumers: Some(consumers.as_object().unwrap().clone()),
        }
    }

    #[test]
    fn names_reach_consumers_nodes_and_attributes() {
        let o = sample();
        assert_eq!(lookup(&o, "summary").unwrap(), json!("a=42"));
        assert_eq!(
            lookup(&o, "null.null_resource.a.triggers.k").unwrap(),
            json!("v")
        );
        assert_eq!(lookup(&o, "null.null_resource.a.list.1").unwrap(), json!(2));
        // The longest id wins: `a.b` is a node of its own.
        assert_eq!(lookup(&o, "null.null_resource.a.b.id").unwrap(), json!("7"));
        let e = lookup(&o, "null.null_resource.a.nope").unwrap_err();
        assert!(e.contains("has no output at \"nope\""), "{e}");
        let e = lookup(&o, "nothing").unwrap_err();
        assert!(e.contains("there are: null.null_resource.a"), "{e}");
    }

    #[test]
    fn raw_prints_scalars_and_refuses_pending_values() {
        let o = sample();
        assert_eq!(
            raw(&lookup(&o, "null.null_resource.a.id").unwrap()).unwrap(),
            "42"
        );
        assert_eq!(raw(&json!(1.5)).unwrap(), "1.5");
        let e = raw(&lookup(&o, "later").unwrap()).unwrap_err();
        assert!(e.contains("not known yet"), "{e}");
        assert!(raw(&json!({"a": 1})).unwrap_err().contains("an attrset"));
    }

    #[test]
    fn secrets_are_hidden_when_shown_and_in_place_when_revealed() {
        let state: StateFile = serde_json::from_value(json!({
            "schemaVersion": 2, "serial": 1, "lineage": "l",
            "resources": {"t.t.a": {"id": "t.t.a", "kind": "managed", "provider": "t",
                "provider_source": "t", "type_name": "t", "schema_version": 0,
                "attributes": {"pw": "hunter22", "id": "1"}, "private": null,
                "dependencies": [], "sensitive_paths": [["pw"]], "status": "ready",
                "create_before_destroy": false, "deposed": []}}
        }))
        .unwrap();
        let consumers = json!({
            "dsn": {"__sensitive": {"value": "db://u:hunter22@h"}},
            "nested": {"a": {"__sensitiveRef": {"resource": "t.t.a", "path": ["pw"]}}}
        });
        let c = Collected::new(&state, Some(consumers.as_object().unwrap().clone()));
        let shown = serde_json::to_string(&(&c.shown.resources, &c.shown.consumers)).unwrap();
        assert!(!shown.contains("hunter22"), "{shown}");
        assert_eq!(lookup(&c.shown, "dsn").unwrap(), json!({"__sensitive": {}}));
        assert_eq!(
            nix_value(&lookup(&c.shown, "dsn").unwrap(), 0),
            "<sensitive>"
        );
        assert_eq!(
            raw(&lookup(&c.revealed, "dsn").unwrap()).unwrap(),
            "db://u:hunter22@h"
        );
        assert_eq!(
            raw(&lookup(&c.revealed, "t.t.a.pw").unwrap()).unwrap(),
            "hunter22"
        );
        assert_eq!(
            lookup(&c.revealed, "nested").unwrap(),
            json!({"a": "hunter22"})
        );
    }

    #[test]
    fn values_print_as_nix() {
        let o = sample();
        let v = nix_value(&o.resources["null.null_resource.a"], 0);
        assert_eq!(
            v,
            "{ id = \"42\"; list = [ 1 2 ]; secret = <sensitive>; triggers = { k = \"v\"; }; }"
        );
        let long = json!({"a": "x".repeat(70), "b": {"c": "${not interpolated}"}});
        assert_eq!(
            nix_value(&long, 0),
            format!(
                "{{\n  a = \"{}\";\n  b = {{ c = \"\\${{not interpolated}}\"; }};\n}}",
                "x".repeat(70)
            )
        );
    }
}
