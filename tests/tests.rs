//! The one integration test binary: end-to-end tests through the CLI, the provider client
//! against the real binaries and the fakes, and the IR fixtures.

mod e2e;
mod engine;
mod fakes;
mod ir_fixtures;
mod providers;
mod registry;
mod util;
