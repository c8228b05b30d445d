//! Talking to unmodified NixOps4 resource providers (protocol v0: JSON lines on stdin/stdout).
//!
//! `process` owns the child process, `wire` the message shapes, `adapter` the translation to
//! and from [`crate::provider::Provider`], implemented here by [`Nixops4Provider`]. This is the
//! sibling of [`crate::plugin`] (the Terraform plugin protocol); the engine knows neither, only
//! the provider interface and the capabilities of each kind ([`crate::provider::Capabilities`]).

mod adapter;
mod process;
pub(crate) mod wire;

pub(crate) use adapter::request_timeout;
pub use adapter::Nixops4Provider;
