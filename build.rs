//! Generates the Rust message types for the provider wire protocol from `proto/`.
//!
//! The pure-Rust protobuf parser is used, so neither developers nor users need `protoc`.
fn main() {
    // Only the protocol descriptions and this script decide the generated code: without these
    // lines cargo reruns the script, and so rebuilds the crate, after any file of the package
    // changes (a doc edit included).
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=proto");
    protobuf_codegen::Codegen::new()
        .pure()
        .includes(["proto"])
        .inputs([
            "proto/tfplugin5.proto",
            "proto/tfplugin6.proto",
            "proto/plugin.proto",
        ])
        .cargo_out_dir("wire")
        .run_from_script();
}
