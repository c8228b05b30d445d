//! `provider-alpha`: the fake `alpha` provider (see `kit/alpha.rs`) as a plugin binary, serving
//! tfplugin6, or tfplugin5 with `--protocol 5` or `NIVIS_FAKE_PROTOCOL=5`. Knobs: see
//! `kit/knobs.rs` (`NIVIS_FAKE_*`) and `kit/serve.rs` (handshake junk, endless lines, noise).

#[path = "kit/mod.rs"]
mod kit;

fn main() {
    kit::main("alpha")
}
