//! `provider-beta`: the fake `beta` provider (see `kit/beta.rs`) as a plugin binary, serving
//! tfplugin6, or tfplugin5 with `--protocol 5` or `NIVIS_FAKE_PROTOCOL=5`.

#[path = "kit/mod.rs"]
mod kit;

fn main() {
    kit::main("beta")
}
