//! `nivis version` (and `nivis --version`): what a bug report needs.
//!
//! Owns: Nivis's version, the platform, the Nix version (`nix --version`) and the providers
//! the project's lock file selects, as text or one JSON object. Not: evaluating the plan or
//! starting a provider (a version must print even when the plan is broken).

use std::path::Path;
use std::process::Stdio;

use serde_json::{json, Map, Value as Json};

use super::args::VersionArgs;
use super::{exit, fail};
use crate::registry::{LockFile, Platform};
use crate::render::{self, outln};
use crate::secrets::Redactor;

/// Runs `nivis version`.
pub(super) fn run(args: &VersionArgs, redactor: &Redactor) -> i32 {
    let providers = match locked_providers(&args.lock_file) {
        Ok(p) => p,
        Err(e) => return fail(redactor, &e),
    };
    let nix = nix_version();
    if args.json {
        let doc = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "platform": Platform::current().to_string(),
            "nix": nix,
            "lockFile": args.lock_file.exists().then(|| args.lock_file.display().to_string()),
            "providers": Json::Object(providers),
        });
        outln!("{}", render::json_text(redactor, &doc, false));
        return exit::OK;
    }
    outln!("nivis {}", env!("CARGO_PKG_VERSION"));
    outln!("platform: {}", Platform::current());
    match &nix {
        Some(v) => outln!("nix: {}", render::escape(redactor, v)),
        None => outln!("nix: not found (is Nix installed and on PATH?)"),
    }
    if !providers.is_empty() {
        outln!(
            "providers (from {}):",
            render::escape(redactor, &args.lock_file.display().to_string())
        );
        for (address, version) in &providers {
            let version = version.as_str().unwrap_or_default();
            outln!(
                "  {} {}",
                render::escape(redactor, address),
                render::escape(redactor, version)
            );
        }
    }
    exit::OK
}

/// The lock file's providers and their selected versions; none when there is no lock file.
fn locked_providers(path: &Path) -> Result<Map<String, Json>, String> {
    let lock = LockFile::read(path).map_err(|e| e.to_string())?;
    Ok(lock
        .providers
        .iter()
        .map(|(addr, locked)| (addr.to_string(), Json::String(locked.version.to_string())))
        .collect())
}

/// `nix --version`'s version number (`2.8.0`), or None when Nix cannot be run.
fn nix_version() -> Option<String> {
    let out = crate::child::nix()
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "nix (Nix) 2.8.0": the last word.
    text.split_whitespace().last().map(str::to_string)
}
