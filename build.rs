//! Generates the Rust message types for the provider wire protocol from `proto/`.
//!
//! The pure-Rust protobuf parser is used, so neither developers nor users need `protoc`.
fn main() {
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
