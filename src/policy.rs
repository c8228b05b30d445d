//! Policy as code: the rules a project lists beside its plan (`nivis.policies`), checked on
//! each evaluation's resources (static rules) and on each phase's planned changes (plan and
//! phase rules).
//!
//! Owns: what the policies see (resources and changes as JSON, every sensitive value masked and
//! every value known only later marked, so no secret reaches Nix this way), running them in Nix
//! (the runner is `run` of nix/lib/policy.nix, inlined, so an older locked Nivis library in
//! the project's flake still gets today's runner), and the verdict with the overrides applied.
//! Not: when checks run or what a refusal stops (see `engine::policy_check`), nor how
//! violations look (see `render`).

use std::fmt;
use std::time::Duration;

use serde_json::{json, Map, Value as Json};

use crate::ir::{Ir, NodeKind, Tree};
use crate::nixeval::{self, EvalError, PlanSource};
use crate::plan::{Action, AttrChange, ChangeRecord};
use crate::rundir::RunDir;

/// The runner: nix/lib/policy.nix, whose `run` takes the policies and the input.
const RUNNER: &str = include_str!("../nix/lib/policy.nix");

/// The name of the input file in the run's private directory.
const INPUT_FILE: &str = "policy-input.json";

/// What breaking a rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Level {
    /// A warning; the run goes on.
    Advisory,
    /// A refusal, unless overridden with a reason.
    Mandatory,
}

impl Level {
    /// The level as policies spell it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Level::Advisory => "advisory",
            Level::Mandatory => "mandatory",
        }
    }
}

/// One rule broken by one resource or change (or, `address` `None`, by a whole phase).
#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// The rule's name.
    pub(crate) rule: String,
    /// Whether it refuses the run or only advises.
    pub(crate) level: Level,
    /// The resource or change it is about; `None` for the whole phase.
    pub(crate) address: Option<String>,
    /// What the rule says is wrong.
    pub(crate) message: String,
    /// `--override RULE --reason TEXT`: the reason this mandatory violation does not refuse.
    pub(crate) overridden: Option<String>,
}

impl Violation {
    /// Whether this violation stops the run: mandatory and not overridden.
    pub(crate) fn refuses(&self) -> bool {
        self.level == Level::Mandatory && self.overridden.is_none()
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.address.as_deref().unwrap_or("the phase's changes");
        write!(
            f,
            "policy {} ({}) on {at}: {}",
            self.rule,
            self.level.name(),
            self.message
        )
    }
}

/// What one check found.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verdict {
    /// How many static rules the project has.
    pub(crate) static_rules: usize,
    /// How many plan and phase rules the project has.
    pub(crate) plan_rules: usize,
    /// The names of all the project's rules.
    pub(crate) names: Vec<String>,
    /// The rules broken, in the order the runner reported them.
    pub(crate) violations: Vec<Violation>,
}

/// The mandatory rules a run may break, and why (`--override RULE --reason TEXT`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// The mandatory rules named with `--override`.
    pub(crate) rules: Vec<String>,
    /// The `--reason` given for them.
    pub(crate) reason: Option<String>,
}

impl Overrides {
    /// The overridden rules `verdict` does not name: a misspelt `--override` overrides nothing.
    pub(crate) fn unknown<'a>(&'a self, verdict: &Verdict) -> Vec<&'a str> {
        (self.rules.iter())
            .filter(|r| !verdict.names.contains(r))
            .map(String::as_str)
            .collect()
    }

    /// Marks the mandatory violations of overridden rules with the reason.
    pub(crate) fn apply(&self, verdict: &mut Verdict) {
        for v in &mut verdict.violations {
            if v.level == Level::Mandatory && self.rules.contains(&v.rule) {
                v.overridden = Some(self.reason.clone().unwrap_or_default());
            }
        }
    }
}

/// Runs the project's policies in Nix, the input handed over in a private run directory
/// (created at the first check, removed when the runner goes).
pub(crate) struct PolicyRunner {
    source: PlanSource,
    run_dir: Option<RunDir>,
}

impl PolicyRunner {
    /// The policies beside the plan at `source`.
    pub(crate) fn new(source: PlanSource) -> PolicyRunner {
        PolicyRunner {
            source,
            run_dir: None,
        }
    }

    /// Whether the plan has a place for policies beside it (a flake, or a file read with an
    /// attribute path): without one, [`PolicyRunner::check`] has nothing to run.
    pub(crate) fn has_place(&self) -> bool {
        nixeval::has_policies_place(&self.source)
    }

    /// Checks `input` ([`static_input`] or [`plan_input`]); `None` when the plan has no place
    /// for policies beside it. Returns the verdict and the time Nix took.
    pub(crate) fn check(&mut self, input: &Json) -> Result<Option<(Verdict, Duration)>, EvalError> {
        let what = format!("the policies beside {}", self.source);
        let failed = |message: String| EvalError {
            what: what.clone(),
            message,
        };
        if self.run_dir.is_none() {
            self.run_dir = Some(RunDir::create().map_err(|e| failed(e.to_string()))?);
        }
        let dir = self.run_dir.as_ref().expect("created above");
        let bytes = serde_json::to_vec(input).expect("JSON values serialise");
        let path = dir
            .write(INPUT_FILE, &bytes)
            .map_err(|e| failed(format!("cannot write {INPUT_FILE}: {e}")))?;
        let runner = format!("({RUNNER}).run");
        let result =
            nixeval::evaluate_policies(&self.source, &runner, &path, Some(dir.inherit_fd()));
        dir.remove(INPUT_FILE);
        let Some((out, took)) = result? else {
            return Ok(None);
        };
        let verdict =
            parse_verdict(&out).map_err(|e| failed(format!("the policy runner's result: {e}")))?;
        Ok(Some((verdict, took)))
    }
}

/// The runner's JSON result as a [`Verdict`]; only JSON that does not parse is refused (the
/// runner's shape is ours, missing fields count as none).
fn parse_verdict(bytes: &[u8]) -> Result<Verdict, serde_json::Error> {
    let json: Json = serde_json::from_slice(bytes)?;
    let count = |k: &str| json[k].as_u64().unwrap_or(0) as usize;
    let mut violations = Vec::new();
    for v in json["violations"].as_array().into_iter().flatten() {
        let text = |k: &str| v[k].as_str().map(str::to_string);
        let level = match v["level"].as_str() {
            Some("advisory") => Level::Advisory,
            _ => Level::Mandatory,
        };
        violations.push(Violation {
            rule: text("rule").unwrap_or_default(),
            level,
            address: text("address"),
            message: match &v["message"] {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            },
            overridden: None,
        });
    }
    let names = (json["names"].as_array().into_iter().flatten())
        .filter_map(|n| n.as_str().map(str::to_string))
        .collect();
    Ok(Verdict {
        names,
        static_rules: count("staticRules"),
        plan_rules: count("planRules"),
        violations,
    })
}

/// The input of the static rules: every resource and data source of `ir`, its configuration
/// masked (see [`masked`]).
pub(crate) fn static_input(ir: &Ir) -> Json {
    let resources: Vec<Json> = ir
        .nodes()
        .map(|n| {
            let kind = match n.kind {
                NodeKind::Managed => "resource",
                _ => "data",
            };
            json!({
                "id": n.id,
                "kind": kind,
                "type": n.type_name,
                "name": n.name,
                "provider": n.provider,
                "config": masked(&n.config),
            })
        })
        .collect();
    json!({"kind": "static", "resources": resources, "changes": []})
}

/// One planned change, as the plan rules see it.
pub(crate) struct PlannedChange<'a> {
    /// The resource's address.
    pub(crate) address: &'a str,
    /// The resource type.
    pub(crate) type_name: &'a str,
    /// What the plan does to it.
    pub(crate) action: Action,
    /// Its attribute changes.
    pub(crate) changes: &'a [AttrChange],
}

/// The input of the plan and phase rules: the changes phase `phase` plans (no-ops left out),
/// each attribute's values as the `--json` stream shows them (a sensitive one `"(sensitive)"`).
pub(crate) fn plan_input(phase: u32, planned: &[PlannedChange<'_>]) -> Json {
    let changes: Vec<Json> = planned
        .iter()
        .filter(|c| c.action != Action::NoOp)
        .map(|c| {
            let attributes: Vec<Json> = (c.changes.iter())
                .map(|a| serde_json::to_value(ChangeRecord::from(a)).unwrap_or(Json::Null))
                .collect();
            let side = |key: &str| -> Map<String, Json> {
                (attributes.iter())
                    .filter_map(|a| Some((a["path"].as_str()?.to_string(), a[key].clone())))
                    .collect()
            };
            json!({
                "address": c.address,
                "type": c.type_name,
                "action": c.action.class(),
                "phase": phase,
                "before": side("before"),
                "after": side("after"),
                "attributes": attributes,
            })
        })
        .collect();
    json!({"kind": "plan", "resources": [], "changes": changes})
}

/// A configuration as policies see it: plain values as they are, a sensitive one
/// `"(sensitive)"`, one known only after an apply or a later evaluation `{"unknown": true}`, a
/// build output its store path.
pub(crate) fn masked(tree: &Tree) -> Json {
    match tree {
        Tree::Null => Json::Null,
        Tree::Bool(b) => Json::Bool(*b),
        Tree::Number(n) => Json::Number(n.clone()),
        Tree::String(s) => Json::String(s.clone()),
        Tree::List(items) => Json::Array(items.iter().map(masked).collect()),
        Tree::Object(fields) => {
            Json::Object(fields.iter().map(|(k, v)| (k.clone(), masked(v))).collect())
        }
        Tree::Sensitive(_) | Tree::SensitiveRef(_) | Tree::Ephemeral(_) => json!("(sensitive)"),
        Tree::Ref(_) | Tree::Derived(_) => json!({"unknown": true}),
        Tree::Build(b) => Json::String(b.path.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensitive_values_are_masked_and_later_ones_marked() {
        let tree = Tree::Object(
            [
                ("plain".to_string(), Tree::String("x".into())),
                (
                    "secret".to_string(),
                    Tree::Sensitive(Box::new(Tree::String("hunter2".into()))),
                ),
                (
                    "later".to_string(),
                    Tree::Ref(crate::ir::Ref {
                        resource: "a.b.c".into(),
                        path: Vec::new(),
                    }),
                ),
            ]
            .into_iter()
            .collect(),
        );
        let json = masked(&tree);
        assert_eq!(
            json,
            json!({"plain": "x", "secret": "(sensitive)", "later": {"unknown": true}})
        );
        assert!(!json.to_string().contains("hunter2"));
    }

    #[test]
    fn overrides_mark_only_mandatory_violations_of_their_rules() {
        let v = |rule: &str, level| Violation {
            rule: rule.into(),
            level,
            address: Some("a".into()),
            message: "m".into(),
            overridden: None,
        };
        let mut verdict = Verdict {
            violations: vec![
                v("r1", Level::Mandatory),
                v("r2", Level::Mandatory),
                v("r1", Level::Advisory),
            ],
            ..Verdict::default()
        };
        let overrides = Overrides {
            rules: vec!["r1".into()],
            reason: Some("ticket 7".into()),
        };
        overrides.apply(&mut verdict);
        let refusing: Vec<bool> = verdict.violations.iter().map(Violation::refuses).collect();
        assert_eq!(refusing, [false, true, false]);
        assert_eq!(
            verdict.violations[0].overridden.as_deref(),
            Some("ticket 7")
        );
        assert_eq!(verdict.violations[2].overridden, None);
    }

    #[test]
    fn the_runner_result_parses() {
        let out = br#"{"names":["r"],"staticRules":1,"planRules":2,"violations":[{"rule":"r","level":"advisory","address":null,"message":"too many"}]}"#;
        let verdict = parse_verdict(out).unwrap();
        assert_eq!(verdict.static_rules, 1);
        assert_eq!(verdict.plan_rules, 2);
        assert_eq!(verdict.violations[0].level, Level::Advisory);
        assert_eq!(verdict.violations[0].address, None);
        let overrides = Overrides {
            rules: vec!["r".into(), "typo".into()],
            reason: Some("why".into()),
        };
        assert_eq!(overrides.unknown(&verdict), ["typo"]);
    }
}
