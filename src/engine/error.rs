//! Why a run did not complete: [`EngineError`], one variant per reason, the facts in fields.

use std::fmt;

use super::describe_waits;
use super::events::Wait;
use super::record::WriteFailure;
use crate::diag::Diagnostics;
use crate::state::StateError;
use crate::{ir, nixeval};

/// Why a run did not complete.
#[derive(Debug)]
pub enum EngineError {
    /// Nix evaluation failed.
    Eval(nixeval::EvalError),
    /// The IR is malformed.
    Ir(Vec<ir::IrError>),
    /// State could not be read, locked or written.
    State(StateError),
    /// A state write failed (or the state's filesystem filled up) while operations ran: nothing
    /// new was started; what ran is recorded, rescued, or listed.
    StateWrite(Box<WriteFailure>),
    /// A dependency cycle, each as the ids on it.
    Cycle(Vec<Vec<String>>),
    /// At the fixpoint some resources or consumers still wait.
    Unresolved(Vec<(String, Vec<Wait>)>),
    /// A target names no resource.
    UnknownTarget(String),
    /// `--replace` names something that is not a managed resource of the plan.
    UnknownReplace(String),
    /// Problems with providers or configurations, before anything was changed.
    Diagnostics(Diagnostics),
    /// `validate` found errors in the plan and has already reported them (as diagnostics).
    Invalid,
    /// Some resources could not be planned (reported as events); nothing was changed.
    PlanFailed(usize),
    /// Some operations failed (reported as events); the rest completed.
    OperationsFailed(usize),
    /// The user did not confirm.
    Declined,
    /// `apply FILE`: what was reviewed is not what would be applied (the reason says what
    /// differs); nothing was changed.
    StalePlan(String),
    /// Ctrl-C: in-flight work finished and was recorded, nothing new started.
    Interrupted,
    /// Refused before changing anything (e.g. preventDestroy).
    Refused(String),
    /// The private run directory could not be written.
    Io(String),
    /// After an apply, postconditions (`lifecycle.postcondition`) are false against the objects
    /// recorded; the objects stay recorded.
    Postconditions(Vec<ir::Condition>),
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EngineError::Eval(e) => write!(f, "{e}"),
            EngineError::Ir(errors) => {
                writeln!(f, "the plan's IR is invalid ({} problem(s)):", errors.len())?;
                for e in errors {
                    writeln!(f, "  {e}")?;
                }
                Ok(())
            }
            EngineError::State(e) => write!(f, "{e}"),
            EngineError::StateWrite(w) => write!(f, "{w}"),
            EngineError::Cycle(cycles) => {
                writeln!(f, "dependency cycle: these resources wait on each other (directly or through Nix-derived values) and can never resolve:")?;
                for c in cycles {
                    writeln!(f, "  {}", c.join(" <-> "))?;
                }
                write!(f, "Break the cycle by removing one of the references between them.")
            }
            EngineError::Unresolved(items) => {
                writeln!(f, "fixpoint reached with unresolved values: no further phase can resolve them:")?;
                for (id, waits) in items {
                    writeln!(f, "  {id} waits on {}", describe_waits(waits))?;
                }
                Ok(())
            }
            EngineError::UnknownTarget(t) => write!(f, "--target {t}: no such resource in the plan or state"),
            EngineError::StalePlan(why) => write!(f, "the saved plan cannot be applied: {why}. Run `nivis plan --out FILE` again and review it"),
            EngineError::UnknownReplace(r) => write!(f, "--replace {r}: no such managed resource in the plan (data sources are read, not replaced)"),
            EngineError::Diagnostics(d) => write!(f, "{d}"),
            EngineError::PlanFailed(n) => write!(f, "{n} resource(s) could not be planned; nothing was changed. Fix the errors above and run again."),
            EngineError::OperationsFailed(n) => write!(f, "{n} operation(s) failed; everything else completed and is recorded in state. Fix the errors above and run again."),
            EngineError::Invalid => write!(f, "the plan is not valid"),
            EngineError::Declined => write!(f, "cancelled: nothing was changed"),
            EngineError::Interrupted => write!(f, "interrupted: in-flight operations finished and were recorded; nothing new was started"),
            EngineError::Refused(msg) => write!(f, "{msg}"),
            EngineError::Io(msg) => write!(f, "{msg}"),
            EngineError::Postconditions(failed) => {
                writeln!(f, "{} postcondition(s) failed against the applied objects (they stay recorded in state):", failed.len())?;
                for c in failed {
                    let of = match &c.kind {
                        ir::ConditionKind::Postcondition { resource } => resource.as_str(),
                        ir::ConditionKind::Check => c.name.as_str(),
                    };
                    writeln!(f, "  {of}: {}", c.message)?;
                }
                write!(f, "Fix the resource's configuration (or the condition) and run `nivis apply` again.")
            }
        }
    }
}

impl std::error::Error for EngineError {}

impl From<StateError> for EngineError {
    fn from(e: StateError) -> Self {
        EngineError::State(e)
    }
}
