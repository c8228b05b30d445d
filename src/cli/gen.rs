//! `nivis gen`: start a provider, read its schema, write typed Nix constructors for it.
//!
//! Owns: locating the provider, naming it, and writing the files `codegen` produces. Not: what
//! the files say (`codegen`).

use std::path::Path;

use super::args::GenArgs;
use super::{exit, fail};
use crate::engine;
use crate::render::{self, outln};
use crate::secrets::Redactor;

/// `terraform-provider-null_v2.1.2_x4` -> `null`; `provider-alpha` -> `alpha`.
fn provider_short_name(path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let base = file
        .strip_prefix("terraform-provider-")
        .or_else(|| file.strip_prefix("provider-"))
        .unwrap_or(&file);
    base.split(['_', '.']).next().unwrap_or(base).to_string()
}

pub(super) fn run(args: &GenArgs, redactor: &Redactor) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_default();
    let install = match args.install.options() {
        Ok(o) => o,
        Err(e) => return fail(redactor, &e),
    };
    let path = match engine::locate(&args.provider, None, &cwd, &install) {
        Ok(p) => p,
        Err(e) => return fail(redactor, &format!("--provider: {e}")),
    };
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| provider_short_name(&path));
    let started = std::time::Instant::now();
    let provider =
        match crate::plugin::GrpcProvider::start(&crate::plugin::LaunchSpec::new(&name, &path)) {
            Ok(p) => p,
            Err(e) => return fail(redactor, &e),
        };
    let files = crate::codegen::generate(&name, crate::provider::Provider::schema(&provider));
    drop(provider);
    let root = args.out.join(&name);
    if root.exists() {
        if let Err(e) = std::fs::remove_dir_all(&root) {
            return fail(redactor, &format!("cannot clear {}: {e}", root.display()));
        }
    }
    for file in &files {
        let target = args.out.join(&file.path);
        if let Some(parent) = target.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                return fail(
                    redactor,
                    &format!("cannot create {}: {e}", parent.display()),
                );
            }
        }
        if let Err(e) = std::fs::write(&target, &file.contents) {
            return fail(redactor, &format!("cannot write {}: {e}", target.display()));
        }
    }
    let done = format!(
        "Wrote {} file(s) for provider {name} to {} in {:.2}s. Use them with `import {}/{name} lib`.",
        files.len(),
        root.display(),
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    outln!("{}", render::escape(redactor, &done));
    exit::OK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names_from_binaries() {
        assert_eq!(
            provider_short_name(Path::new("/x/terraform-provider-null_v2.1.2_x4")),
            "null"
        );
        assert_eq!(provider_short_name(Path::new("provider-alpha")), "alpha");
        assert_eq!(
            provider_short_name(Path::new("/x/terraform-provider-aws")),
            "aws"
        );
    }
}
