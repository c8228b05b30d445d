//! Nivis: infrastructure as Nix code.
//!
//! The pipeline, one module per step:
//!
//! 1. [`nixeval`] evaluates the user's Nix plan with the outputs [`ledger`] and returns the IR.
//! 2. [`ir`] parses and validates it (the one frozen contract between Nix and the executor).
//! 3. [`graph`] orders resources by their references and finds cycles.
//! 4. [`sched`] runs ready resources on worker threads, one owner thread recording results.
//! 5. [`provider`] is the interface to providers; [`plugin`] implements it for unmodified
//!    tfplugin5/6 binaries (process, handshake, gRPC) and [`nixops4`] for NixOps4 resource
//!    providers (JSON lines); [`value`] and [`schema`] encode values the way providers expect;
//!    [`objchange`] holds the plan rules OpenTofu applies.
//! 6. [`state`] records every completed operation durably; the [`ledger`] hands new outputs to
//!    the next Nix evaluation.
//! 7. [`engine`] composes all of it into the phase loop that runs to a fixpoint; [`render`] and
//!    [`cli`] are the user interface.
//!
//! Keeping secrets where they belong: [`project`] keeps the state out of every directory Nix
//! copies into the store, [`rundir`] is the run's private directory (ledger, channel of
//! secrets), [`secrets`] redacts every known secret from what is printed.
//!
//! Providers given by registry address are found, verified and cached by [`registry`].
//!
//! Beside the pipeline, [`codegen`] turns a provider schema into typed Nix constructors and
//! reference docs (`nivis gen`).

pub mod cli;
pub mod codegen;
pub mod diag;
pub mod engine;
pub mod graph;
pub mod ir;
pub mod ledger;
pub mod nixeval;
pub mod nixops4;
pub mod objchange;
pub mod plugin;
pub mod project;
pub mod provider;
pub mod registry;
pub mod render;
pub mod rundir;
pub mod sched;
pub mod schema;
pub mod secrets;
pub mod state;
pub mod value;
