//! Nivis: infrastructure as Nix code.
//!
//! The pipeline, one module per step (docs/DESIGN.md has the module map):
//!
//! 1. [`nixeval`] evaluates the user's Nix plan with the outputs [`ledger`] and returns the IR
//!    (behind `engine::Evaluator`).
//! 2. [`ir`] parses and validates it (the one frozen contract between Nix and the executor).
//! 3. [`graph`] orders resources by their references and finds cycles.
//! 4. [`plan`] holds the rules OpenTofu applies around a provider's answers, as pure functions:
//!    ProposedNew, plan validity, compatibility, ignoreChanges, the action choice.
//! 5. [`provider`] is the interface to providers; [`plugin`] implements it for unmodified
//!    tfplugin5/6 binaries (handshake, gRPC) and [`nixops4`] for NixOps4 resource providers
//!    (JSON lines), both over [`child`], the one owner of child processes; [`value`] and
//!    [`schema`] encode values the way providers expect.
//! 6. [`sched`] runs ready resources on worker threads, one owner thread recording results.
//! 7. [`state`] records every completed operation durably (behind `engine::StateAccess`); the
//!    [`ledger`] hands new outputs to the next Nix evaluation.
//! 8. [`engine`] composes all of it into the phase loop that runs to a fixpoint, one file per
//!    job; [`render`] and [`cli`] are the user interface.
//!
//! Keeping secrets where they belong: [`project`] keeps the state out of every directory Nix
//! copies into the store, [`rundir`] is the run's private directory (ledger, channel of
//! secrets), [`privfile`] is the one rule every file that holds or drives secrets must pass
//! (ours, not writable by others, in directories nobody else can change, never through a link),
//! [`secrets`] redacts every known secret from what is printed, [`secret_sources`] reads
//! variables from secret stores (sops, age, a command) straight into memory.
//!
//! Policy as code: [`policy`] runs the rules a project lists beside its plan on the IR and on
//! each phase's planned changes (the engine checks them before a phase changes anything).
//!
//! Providers given by registry address are found, verified and cached by [`registry`].
//!
//! Reviewing a change without credentials ([`review`]: `nivis diff`, `nivis why`) compares and
//! explains IRs evaluated against the recorded outputs, starting no provider.
//!
//! Moving in from Terraform or OpenTofu, [`convert`] writes an estate's configuration as a
//! flake and its state as a Nivis state (`nivis convert terraform`).
//!
//! Beside the pipeline, [`codegen`] turns a provider schema into typed Nix constructors and
//! reference docs (`nivis gen`).
//!
//! On the ground floor, importing nothing of the crate: [`xdg`] (the per-user state and cache
//! directories), [`nixsyntax`] (Nix string literals and attribute names), [`percent`]
//! (percent-encoding), [`interrupt`] (the flag the first Ctrl-C sets) and [`last_words`] (the
//! line a second Ctrl-C prints), for the floors above that need them.

// The engine's stage tests (`engine::stage_tests`) run the fakes of `fakes/kit`, which name
// this crate `nivis::` as the test binaries that also include them do; so the stages stay
// private to the engine instead of becoming a public surface for tests (DESIGN §76).
#[cfg(test)]
extern crate self as nivis;

mod child;
mod cli;
mod codegen;
mod convert;
pub mod diag;
pub mod engine;
mod graph;
mod guard;
mod interrupt;
pub mod ir;
mod last_words;
pub mod ledger;
pub mod nixeval;
pub mod nixops4;
mod nixsyntax;
mod percent;
pub mod plan;
pub mod plugin;
mod policy;
mod privfile;
mod project;
pub mod provider;
pub mod registry;
pub mod render;
mod review;
mod rundir;
mod sched;
pub mod schema;
mod secret_sources;
pub mod secrets;
pub mod state;
pub mod value;
mod xdg;

// What the binaries (`src/main.rs`) need of the private modules.
pub use {
    cli::{complete::answer_if_asked as answer_completion_request, run, suggest::parse},
    guard::protect_process,
};
