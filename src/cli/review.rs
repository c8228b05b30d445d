//! `nivis diff` and `nivis why`: reviewing a change with no provider and no credentials.
//!
//! Owns: reading the state once, evaluating each side against that same ledger (with the
//! plan's `lib.moved` renames made first, as `apply` would), and printing what `review`
//! computes, as text or JSON. Not: the comparison or the provenance (`review`), exporting
//! revisions (`review::revision`), evaluating Nix (`engine`).

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::{json, Value as Json};

use super::args::{DiffArgs, InstallArgs, ProjectArgs, RunSpec};
use super::{exit, fail, options};
use crate::engine::{Collect, Engine, Options};
use crate::ir::{Ir, PathStep};
use crate::render::{self, outln};
use crate::review::diff::{self, AttrChange, ChangeKind, Diff, Shown};
use crate::review::revision::{self, Side};
use crate::secrets::Redactor;
use crate::state::StateFile;

mod test;
mod why;
pub(super) use self::test::test;
pub(super) use self::why::why;

/// What a review cannot know, said with every diff.
const CANNOT_KNOW: &str = "Not known without the providers: what they would plan (replacements, \
    computed and default values) and drift of the real objects since the state was recorded. \
    Run `nivis plan` for those.";

/// Runs `nivis diff`.
pub(super) fn diff(args: &DiffArgs, redactor: &Redactor) -> i32 {
    match run_diff(args, redactor) {
        Ok(code) => code,
        Err(e) => fail(redactor, &e),
    }
}

/// The options and the state a review evaluates with: the state read once, so every
/// evaluation sees the same recorded outputs.
fn review_setup(
    project: &ProjectArgs,
    verb: &str,
    redactor: &Redactor,
) -> Result<(Options, StateFile), String> {
    let install = InstallArgs::none();
    let spec = RunSpec::for_project(project, &install);
    let opts = options(&spec, verb, redactor, None)?;
    let recorded = opts.backend.read_only().map_err(|e| e.to_string())?;
    Ok((opts, recorded))
}

fn run_diff(args: &DiffArgs, redactor: &Redactor) -> Result<i32, String> {
    let (opts, state) = review_setup(&args.project, "diff", redactor)?;
    let root = revision::repository_root(&opts.source).map_err(|e| e.to_string())?;
    let from = revision::resolve(&root, args.from.as_deref().unwrap_or("HEAD"))
        .map_err(|e| e.to_string())?;
    let to = match &args.to {
        Some(rev) => revision::resolve(&root, rev).map_err(|e| e.to_string())?,
        None => Side::WorkTree,
    };
    // The exports live in the run's private directory, removed when it is dropped.
    let dir = crate::rundir::RunDir::create().map_err(|e| e.to_string())?;
    let before = evaluate_side(&opts, &state, &root, &from, &dir.path().join("from"))?;
    let after = evaluate_side(&opts, &state, &root, &to, &dir.path().join("to"))?;
    drop(dir);
    let diff = diff::compare(&before, &after);
    if args.json {
        let mut doc = diff.to_json();
        doc["from"] = side_json(&from);
        doc["to"] = side_json(&to);
        doc["ledger"] = json!({"recorded": state.len()});
        doc["notKnown"] = json!(CANNOT_KNOW);
        outln!("{}", render::json_text(redactor, &doc, true));
    } else {
        print_diff(&diff, &from, &to, state.len(), redactor);
    }
    Ok(if args.detailed_exitcode && !diff.is_empty() {
        exit::CHANGES
    } else {
        exit::OK
    })
}

fn side_json(side: &Side) -> Json {
    match side {
        Side::Commit { rev, commit } => json!({"revision": rev, "commit": commit}),
        Side::WorkTree => json!({"revision": null, "commit": null}),
    }
}

/// The IR of `side`: exported into `into` when it is a commit, evaluated against `state`
/// with the plan's moves made (as `apply` makes them before it plans).
fn evaluate_side(
    opts: &Options,
    state: &StateFile,
    root: &Path,
    side: &Side,
    into: &Path,
) -> Result<Ir, String> {
    let mut opts = opts.clone();
    if let Side::Commit { commit, .. } = side {
        opts.source =
            revision::export(&opts.source, root, commit, into).map_err(|e| e.to_string())?;
    }
    let label = side.label();
    let ir = evaluate(&opts, state).map_err(|e| format!("{label}: {e}"))?;
    let pairs: Vec<(String, String)> = (ir.moved.iter())
        .map(|m| (m.from.clone(), m.to.clone()))
        .collect();
    let recorded: BTreeSet<String> = state.ids().map(str::to_string).collect();
    let renames = crate::plan::resolve_moves(&pairs, &recorded).map_err(|errors| {
        let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!("{label}: moved: {}", lines.join("\n  "))
    })?;
    if renames.is_empty() {
        return Ok(ir);
    }
    let mut moved = state.clone();
    for r in &renames {
        for change in moved.rename(&r.from, &r.to) {
            moved.apply(&change);
        }
    }
    evaluate(&opts, &moved).map_err(|e| format!("{label}: {e}"))
}

/// One evaluation of the plan against `state`'s outputs; no provider is started.
pub(super) fn evaluate(opts: &Options, state: &StateFile) -> Result<Ir, String> {
    let mut sink = Collect::default();
    let ir = Engine::new(opts.clone(), &mut sink)
        .declarations_from(state)
        .map_err(|e| e.to_string());
    super::say_warnings(&sink.0, &opts.redactor);
    ir
}

fn print_diff(diff: &Diff, from: &Side, to: &Side, recorded: usize, redactor: &Redactor) {
    outln!(
        "Comparing {} with {}, both evaluated against the outputs of the {recorded} object(s) \
         recorded in the state. No provider was started.",
        render::escape(redactor, &from.label()),
        render::escape(redactor, &to.label())
    );
    outln!("");
    if diff.is_empty() {
        outln!("No differences in the plan's resources and data sources.");
    }
    for node in &diff.nodes {
        let address = render::escape(redactor, &node.address);
        let head = match &node.kind {
            ChangeKind::Added => format!("+ {address} added"),
            ChangeKind::Removed => format!("- {address} removed"),
            ChangeKind::Moved { from } => {
                format!("-> {} moved to {address}", render::escape(redactor, from))
            }
            ChangeKind::Changed => format!("~ {address} changed"),
        };
        outln!("{head}");
        for a in &node.attributes {
            outln!("    {}", attr_line(a, redactor));
        }
        for e in &node.edges_added {
            outln!(
                "    + reads {} (at {})",
                render::escape(redactor, &e.from),
                render::escape(redactor, &e.via)
            );
        }
        for e in &node.edges_removed {
            outln!(
                "    - no longer reads {} (at {})",
                render::escape(redactor, &e.from),
                render::escape(redactor, &e.via)
            );
        }
    }
    if !diff.may_change_later.is_empty() {
        outln!("");
        outln!("May change in a later phase (they read outputs of a changed resource):");
        for d in &diff.may_change_later {
            outln!(
                "  ? {} (after {})",
                render::escape(redactor, &d.address),
                render::escape(redactor, &d.because_of.join(", "))
            );
        }
    }
    outln!("");
    outln!("{}", summary_line(diff));
    outln!("{CANNOT_KNOW}");
}

fn summary_line(diff: &Diff) -> String {
    let count = |name: &str| diff.nodes.iter().filter(|n| n.kind.name() == name).count();
    format!(
        "Diff: {} added, {} removed, {} moved, {} changed; {} may change in a later phase.",
        count("added"),
        count("removed"),
        count("moved"),
        count("changed"),
        diff.may_change_later.len()
    )
}

fn attr_line(a: &AttrChange, redactor: &Redactor) -> String {
    let path = render::escape(redactor, &a.path);
    match (&a.before, &a.after) {
        (Shown::Absent, after) => format!("{path} = {}", shown(after, redactor)),
        (before, Shown::Absent) => format!("{path} was {}", shown(before, redactor)),
        (before, after) => format!(
            "{path}: {} -> {}",
            shown(before, redactor),
            shown(after, redactor)
        ),
    }
}

fn shown(s: &Shown, redactor: &Redactor) -> String {
    match s {
        Shown::Absent => "(absent)".into(),
        Shown::Sensitive => "(sensitive value)".into(),
        Shown::Value(v) => show_ir_value(v, redactor),
    }
}

/// An IR value for reading: markers as what they stand for.
pub(super) fn show_ir_value(v: &Json, redactor: &Redactor) -> String {
    let marker = |key: &str| {
        v.as_object()
            .filter(|m| m.len() == 1)
            .and_then(|m| m.get(key))
    };
    if let Some(r) = marker("__ref") {
        return format!("(output {})", ref_text(r, redactor));
    }
    if let Some(r) = marker("__sensitiveRef") {
        return format!("(sensitive output {})", ref_text(r, redactor));
    }
    if let Some(d) = marker("__derived") {
        let inputs: Vec<&str> = (d["inputs"].as_array().into_iter().flatten())
            .filter_map(Json::as_str)
            .collect();
        return render::escape(
            redactor,
            &format!("(computed by Nix once {} known)", inputs.join(", ")),
        );
    }
    if let Some(b) = marker("__build") {
        return render::escape(
            redactor,
            &format!("(build output {})", b["path"].as_str().unwrap_or("?")),
        );
    }
    match v {
        Json::String(s) => render::quote(redactor, s),
        Json::Array(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|v| show_ir_value(v, redactor))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Json::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!(
                    "{} = {}",
                    render::escape(redactor, k),
                    show_ir_value(v, redactor)
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => render::escape(redactor, &other.to_string()),
    }
}

/// `{resource, path}` as `alpha.alpha_token.A.value`.
fn ref_text(r: &Json, redactor: &Redactor) -> String {
    let steps: Vec<PathStep> = (r["path"].as_array().into_iter().flatten())
        .map(|s| match s.as_u64() {
            Some(i) => PathStep::Index(i),
            None => PathStep::Key(s.as_str().unwrap_or_default().to_string()),
        })
        .collect();
    render::escape(
        redactor,
        &format!(
            "{}.{}",
            r["resource"].as_str().unwrap_or("?"),
            crate::ir::render_path(&steps)
        ),
    )
}
