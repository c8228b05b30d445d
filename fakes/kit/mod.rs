//! The fake provider kit: the behaviour of the fake providers and the plugin server that puts
//! them on the wire.
//!
//! Owns: the fakes' behaviours ([`alpha`], [`beta`]), the [`FakeProvider`] that turns a
//! behaviour into a `nivis::provider::Provider` (with the strictness a real provider has:
//! private bytes must come back, applies get known configs), the fault [`Knobs`], and
//! [`serve`], which serves any `Provider` as a go-plugin tfplugin5 or tfplugin6 binary.
//! Not: anything the client side does; the fakes only use Nivis's value and schema model.
//!
//! The same `FakeProvider` is used in process by the engine's unit tests (no child process, no
//! gRPC) and spawned as `provider-alpha` / `provider-beta` by the end-to-end tests, so both
//! exercise one behaviour.
#![allow(
    dead_code,
    unused_imports,
    reason = "each binary and test module that includes the kit uses a different part of it"
)]

pub(crate) mod alpha;
pub(crate) mod beta;
pub(crate) mod build;
pub(crate) mod knobs;
pub(crate) mod provider;
pub(crate) mod serve;

pub(crate) use knobs::Knobs;
pub(crate) use provider::{Behaviour, FakeProvider};

/// Serves the fake called `name` (`alpha` or `beta`) over the protocol chosen by the command
/// line (`--protocol 5|6`) or `NIVIS_FAKE_PROTOCOL`, tfplugin6 by default, with the knobs
/// read from the environment. Never returns.
pub(crate) fn main(name: &'static str) -> ! {
    let knobs = Knobs::from_env();
    let provider: std::sync::Arc<dyn nivis::provider::Provider> = match name {
        "alpha" => std::sync::Arc::new(FakeProvider::new(name, alpha::Alpha::new(&knobs), knobs)),
        _ => std::sync::Arc::new(FakeProvider::new(name, beta::Beta, knobs)),
    };
    serve::serve(provider, serve::protocol_from_args())
}
