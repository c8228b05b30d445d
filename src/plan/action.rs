//! The action choice for a managed resource whose provider has schemas: from what planning
//! found (does the object exist, is it tainted, which paths force a replacement, does the plan
//! change anything) and the lifecycle rules, the one [`Action`] to take, or the refusal
//! `preventDestroy` demands.

use std::fmt;

use crate::value::{render_path, PathStep};

/// What happens (or would happen) to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case", rename_all_fields = "camelCase")]
pub enum Action {
    /// A new object.
    Create,
    /// An in-place change.
    Update,
    /// Delete then create (or create then delete).
    Replace {
        /// The new object is created before the old one is deleted.
        create_before_destroy: bool,
    },
    /// The object goes away.
    Delete,
    /// The object leaves state but stays where it is: its provider cannot delete it.
    Forget,
    /// A new object is created and the old one forgotten: the provider can neither update nor
    /// delete it.
    Recreate,
    /// Nothing changes.
    NoOp,
    /// A data source is read.
    Read,
}

impl Action {
    /// The kind of change, as saved plans and summaries count it: the action's JSON name,
    /// `replace` whichever order a replacement takes.
    pub fn class(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Replace { .. } => "replace",
            Action::Delete => "delete",
            Action::Forget => "forget",
            Action::Recreate => "recreate",
            Action::NoOp => "no-op",
            Action::Read => "read",
        }
    }

    /// Whether the provider writes an object with the configuration (a create, an update, the
    /// create half of a replacement): the calls that carry write-only values.
    pub(crate) fn writes_object(self) -> bool {
        match self {
            Action::Create | Action::Update | Action::Replace { .. } | Action::Recreate => true,
            Action::Delete | Action::Forget | Action::NoOp | Action::Read => false,
        }
    }
}

/// What planning found about one managed resource.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlanFacts<'a> {
    /// An object exists (in state, and still there after refresh).
    pub(crate) exists: bool,
    /// The object is tainted (a create that failed half-way): it must be replaced.
    pub(crate) tainted: bool,
    /// The paths whose change forces a replacement (already filtered, see
    /// [`filter_requires_replace`](super::filter_requires_replace)).
    pub(crate) replace_paths: &'a [Vec<PathStep>],
    /// The planned object equals the prior one (known and equal).
    pub(crate) unchanged: bool,
    /// `lifecycle.createBeforeDestroy`.
    pub(crate) create_before_destroy: bool,
    /// `lifecycle.preventDestroy`.
    pub(crate) prevent_destroy: bool,
}

/// A plan `preventDestroy` forbids: it would replace the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplacementRefused {
    /// The replacement that was refused.
    pub(crate) action: Action,
    /// The attributes forcing it (empty for a tainted object).
    pub(crate) forcing: Vec<Vec<PathStep>>,
}

impl fmt::Display for ReplacementRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("this change would replace the resource, but lifecycle.preventDestroy is set")
    }
}

impl ReplacementRefused {
    /// What the user can do, naming the attributes that force the replacement.
    pub(crate) fn advice(&self) -> String {
        format!(
            "Attributes forcing replacement: {}. Change the configuration back, or remove \
             preventDestroy if replacing is intended.",
            self.forcing
                .iter()
                .map(|p| render_path(p))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// The action for a managed resource: create what does not exist, replace what is tainted or
/// whose change forces it (unless `preventDestroy` forbids it), do nothing when the plan
/// changes nothing, else update in place.
pub(crate) fn choose_action(facts: PlanFacts<'_>) -> Result<Action, ReplacementRefused> {
    if !facts.exists {
        return Ok(Action::Create);
    }
    if facts.tainted || !facts.replace_paths.is_empty() {
        let action = Action::Replace {
            create_before_destroy: facts.create_before_destroy,
        };
        if facts.prevent_destroy {
            return Err(ReplacementRefused {
                action,
                forcing: facts.replace_paths.to_vec(),
            });
        }
        return Ok(action);
    }
    Ok(if facts.unchanged {
        Action::NoOp
    } else {
        Action::Update
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_is_the_json_name() {
        for action in [
            Action::Create,
            Action::Update,
            Action::Delete,
            Action::Forget,
            Action::Recreate,
            Action::NoOp,
            Action::Read,
        ] {
            assert_eq!(serde_json::to_value(action).unwrap(), action.class());
        }
        for create_before_destroy in [false, true] {
            let replace = Action::Replace {
                create_before_destroy,
            };
            let json = serde_json::to_value(replace).unwrap();
            assert_eq!(
                json.as_object().unwrap().keys().next().unwrap(),
                replace.class()
            );
        }
    }

    fn facts(
        exists: bool,
        tainted: bool,
        replace: &[Vec<PathStep>],
        unchanged: bool,
    ) -> PlanFacts<'_> {
        PlanFacts {
            exists,
            tainted,
            replace_paths: replace,
            unchanged,
            create_before_destroy: false,
            prevent_destroy: false,
        }
    }

    #[test]
    fn each_situation_has_its_action() {
        let keeper = vec![vec![PathStep::Attr("keeper".into())]];
        let replace = Action::Replace {
            create_before_destroy: false,
        };
        assert_eq!(
            choose_action(facts(false, false, &[], false)),
            Ok(Action::Create)
        );
        // A missing object is created even when the plan names replacement paths.
        assert_eq!(
            choose_action(facts(false, false, &keeper, false)),
            Ok(Action::Create)
        );
        assert_eq!(
            choose_action(facts(true, false, &[], true)),
            Ok(Action::NoOp)
        );
        assert_eq!(
            choose_action(facts(true, false, &[], false)),
            Ok(Action::Update)
        );
        assert_eq!(
            choose_action(facts(true, false, &keeper, false)),
            Ok(replace)
        );
        // Tainted: replaced even if nothing else changes.
        assert_eq!(choose_action(facts(true, true, &[], true)), Ok(replace));
        let cbd = PlanFacts {
            create_before_destroy: true,
            ..facts(true, false, &keeper, false)
        };
        assert_eq!(
            choose_action(cbd),
            Ok(Action::Replace {
                create_before_destroy: true
            })
        );
    }

    #[test]
    fn prevent_destroy_refuses_only_replacements() {
        let keeper = vec![vec![PathStep::Attr("keeper".into())]];
        fn guarded(f: PlanFacts<'_>) -> PlanFacts<'_> {
            PlanFacts {
                prevent_destroy: true,
                ..f
            }
        }
        let refused = choose_action(guarded(facts(true, false, &keeper, false))).unwrap_err();
        assert_eq!(refused.forcing, keeper);
        assert!(refused
            .advice()
            .starts_with("Attributes forcing replacement: keeper."));
        assert!(choose_action(guarded(facts(true, true, &[], true))).is_err());
        assert_eq!(
            choose_action(guarded(facts(true, false, &[], false))),
            Ok(Action::Update)
        );
        assert_eq!(
            choose_action(guarded(facts(false, false, &[], false))),
            Ok(Action::Create)
        );
    }
}
