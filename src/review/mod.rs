//! Reviewing a change without credentials: what a change to the Nix code does to the plan,
//! computed from the IR and the recorded outputs alone.
//!
//! Owns: exporting a git revision of the project into a private directory ([`revision`]),
//! comparing two IRs evaluated against the same ledger ([`diff`]) and tracing where a value
//! comes from ([`why`]). Not: evaluating Nix (`nixeval`, through `engine`), reading the state
//! (`state`), printing (`cli::review`). Nothing here starts a provider or opens a network
//! connection: a review knows what Nix says, never what a provider would plan or what drifted.

pub(crate) mod diff;
pub(crate) mod revision;
pub(crate) mod why;
