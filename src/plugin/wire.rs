//! Message types generated from `proto/` at build time (see `build.rs`).
//!
//! Nothing but generated code lives here; conversions to Nivis's own types are in the sibling
//! adapter modules.
#![allow(
    clippy::all,
    missing_docs,
    unused_qualifications,
    non_camel_case_types,
    reason = "generated code from proto/, not ours to style"
)]

include!(concat!(env!("OUT_DIR"), "/wire/mod.rs"));
