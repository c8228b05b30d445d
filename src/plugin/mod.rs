//! Talking to unmodified provider plugin binaries (go-plugin + tfplugin5/6 over gRPC).
//!
//! `launch` owns the go-plugin start-up (the process itself is
//! [`crate::child`]'s; `handshake` parses the line it prints), `socket_dir` the private directory each provider listens in, `tls` and
//! `bridge` the mutual TLS session gRPC reaches the provider through, `client` the gRPC channel and the call sequence, `protocol` the few
//! differences between protocol 5 and 6, `wire` the generated messages. The rest of
//! Nivis sees only [`crate::provider::Provider`], implemented here by [`GrpcProvider`].

mod bridge;
mod call_clock;
mod client;
mod handshake;
mod launch;
mod protocol;
mod schema_cache;
mod socket_dir;
mod tls;
mod validation_cache;
pub mod wire;

pub(crate) use call_clock::call_times;
pub(crate) use call_clock::{off_the_clock, InFlight};
pub use {
    client::{GrpcProvider, StartError},
    handshake::HandshakeError,
    launch::{LaunchError, LaunchSpec},
    tls::provider_end::AutoMtlsServer,
};
