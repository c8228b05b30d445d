//! `lifecycle.replaceTriggeredBy` (DESIGN §103): whether a resource's triggers fire at its
//! turn, and the digests of its output triggers to record with its object.
//!
//! Owns the rule. A whole-resource trigger fires when the trigger was planned (in a plan) or
//! applied (in an apply) with a create, update or replacement earlier in the same phase. An
//! output trigger fires when the digest of its value differs from the one recorded with the
//! object at its last write; in a plan, a value not known until apply fires it too ("known
//! after apply"). Nothing fires for an object not recorded yet (it is created anyway), nor for
//! a trigger without a recorded digest (a state written before it: the value is recorded then).
//! Not: looking values up (the phase owner's), the replacement itself (`node`), printing.

use std::collections::{BTreeMap, HashMap};

use super::events::Action;
use super::resolve::{output_at, Lookup};
use crate::ir::ReplaceTrigger;
use crate::state::ResourceState;
use crate::value::{json::to_plain_json, Value};

/// A resource's triggers as its turn finds them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Triggers {
    /// The triggers that fired, as plans name them (`alpha.alpha_token.a.value`; a value a
    /// plan does not know is followed by ` (known after apply)`).
    pub(crate) fired: Vec<String>,
    /// The output triggers' digests, recorded with the object when it is written.
    pub(crate) digests: BTreeMap<String, String>,
}

/// The triggers of a resource recorded as `prior`, in a plan (`plan`) or an apply. `acted`: the
/// actions of the resources that had their turn in the phase; `lookup`: a trigger's object
/// as the phase sees it.
pub(super) fn check<'a>(
    triggers: &[ReplaceTrigger],
    prior: Option<&ResourceState>,
    plan: bool,
    acted: &HashMap<String, Action>,
    lookup: &dyn Fn(&str) -> Lookup<'a>,
) -> Triggers {
    let mut out = Triggers::default();
    for trigger in triggers {
        let name = trigger.to_string();
        match trigger {
            ReplaceTrigger::Resource(id) => {
                if prior.is_some() && acted.get(id).is_some_and(|a| changes_object(*a)) {
                    out.fired.push(name);
                }
            }
            ReplaceTrigger::Attribute(r) => {
                let recorded = prior.and_then(|p| p.replace_triggers.get(&name));
                match digest(&output_at(lookup(&r.resource), &r.path)) {
                    Some(now) => {
                        if recorded.is_some_and(|then| *then != now) {
                            out.fired.push(name.clone());
                        }
                        out.digests.insert(name, now);
                    }
                    // A plan: the trigger's new value comes with its apply. An apply (the
                    // trigger did not run): the recorded digest stays.
                    None if plan && prior.is_some() => {
                        out.fired.push(format!("{name} (known after apply)"))
                    }
                    None => {
                        if let Some(then) = recorded {
                            out.digests.insert(name, then.clone());
                        }
                    }
                }
            }
        }
    }
    out
}

/// Whether `action` gives the resource a new or changed object.
fn changes_object(action: Action) -> bool {
    matches!(
        action,
        Action::Create | Action::Update | Action::Replace { .. } | Action::Recreate
    )
}

/// The SHA-256 of a wholly known value's canonical JSON; `None` while any part is unknown.
fn digest(value: &Value) -> Option<String> {
    let json = to_plain_json(value).ok()?;
    let text = super::plan_file::canonical(&json);
    Some(super::plan_file::sha256(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{PathStep, Ref};
    use crate::state::ResourceKind;
    use serde_json::json;

    fn record(triggers: &[(&str, &str)]) -> ResourceState {
        let mut r = ResourceState::new("a.t.b", ResourceKind::Managed, "a", "a", "t", json!({}));
        for (k, v) in triggers {
            r.replace_triggers.insert(k.to_string(), v.to_string());
        }
        r
    }

    fn value_of(resource: &str) -> ReplaceTrigger {
        ReplaceTrigger::Attribute(Ref {
            resource: resource.into(),
            path: vec![PathStep::Key("value".into())],
        })
    }

    #[test]
    fn an_output_fires_when_its_digest_differs_from_the_recorded_one() {
        let attrs = json!({"value": "v1"});
        let settled = |_: &str| Lookup::Settled(&attrs, &[]);
        let acted = HashMap::new();
        let first = check(&[value_of("a.t.a")], None, false, &acted, &settled);
        assert!(first.fired.is_empty(), "a create has nothing to replace");
        let d1 = first.digests["a.t.a.value"].clone();

        let same = record(&[("a.t.a.value", &d1)]);
        let again = check(&[value_of("a.t.a")], Some(&same), true, &acted, &settled);
        assert_eq!(again, first, "the same value: nothing fires");

        let other = json!({"value": "v2"});
        let changed = |_: &str| Lookup::Settled(&other, &[]);
        let t = check(&[value_of("a.t.a")], Some(&same), false, &acted, &changed);
        assert_eq!(t.fired, vec!["a.t.a.value".to_string()]);
        assert_ne!(t.digests["a.t.a.value"], d1, "the new value is recorded");

        // Recorded without the trigger (an older state): recorded now, nothing fires.
        let t = check(
            &[value_of("a.t.a")],
            Some(&record(&[])),
            false,
            &acted,
            &changed,
        );
        assert!(t.fired.is_empty());
        assert_eq!(t.digests.len(), 1);
    }

    #[test]
    fn an_unknown_output_fires_in_a_plan_and_keeps_its_digest_in_an_apply() {
        let planned = Value::Map([("value".to_string(), Value::Unknown)].into());
        let lookup = |_: &str| Lookup::Planned(&planned, &[]);
        let prior = record(&[("a.t.a.value", "d")]);
        let acted = HashMap::new();
        let t = check(&[value_of("a.t.a")], Some(&prior), true, &acted, &lookup);
        assert_eq!(t.fired, vec!["a.t.a.value (known after apply)".to_string()]);
        let pending = |_: &str| Lookup::Pending;
        let t = check(&[value_of("a.t.a")], Some(&prior), false, &acted, &pending);
        assert!(t.fired.is_empty());
        assert_eq!(t.digests["a.t.a.value"], "d");
    }

    #[test]
    fn a_whole_resource_fires_when_it_changes_in_the_phase() {
        let whole = [ReplaceTrigger::Resource("a.t.a".into())];
        let none = |_: &str| Lookup::Pending;
        let prior = record(&[]);
        for (action, fires) in [
            (Action::NoOp, false),
            (Action::Update, true),
            (Action::Create, true),
            (
                Action::Replace {
                    create_before_destroy: false,
                },
                true,
            ),
        ] {
            let acted = HashMap::from([("a.t.a".to_string(), action)]);
            let t = check(&whole, Some(&prior), true, &acted, &none);
            assert_eq!(!t.fired.is_empty(), fires, "{action:?}");
            assert!(check(&whole, None, true, &acted, &none).fired.is_empty());
        }
    }
}
