//! Running Nix: evaluating the plan with the outputs ledger, and realising build outputs.
//!
//! Owns: the `nix` command lines, their environment and error reporting (stderr kept for the
//! message). Not: what the IR means (see `ir`), nor where the ledger comes from (see `ledger`).
//!
//! The ledger is handed to Nix as a file path read with `builtins.readFile`, never inlined into
//! arguments: arguments are visible to every user through the process list and are limited to
//! 128 KiB each. Reading an absolute path needs `--impure`; nothing read that way is copied to
//! the store. `--impure` also keeps Nix's evaluation cache off (it stores flake attribute values
//! under `~/.cache/nix/eval-cache-*` for pure evaluations only), so no evaluation result is kept.
//! The IR comes back through a pipe and is never written anywhere. Variables reach Nix through
//! the ledger's channel, never through the environment: `NIVIS_VAR_*` is removed from Nix's.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::codegen::nix_string;

/// Where the plan function lives.
#[derive(Debug, Clone)]
pub enum PlanSource {
    /// A flake (directory or flake reference) and the attribute holding `ledger: IR`.
    Flake { flake: String, attr: String },
    /// A plain Nix file evaluating to `ledger: IR` (or an attrset holding it at `attr`).
    File { path: PathBuf, attr: Option<String> },
}

impl PlanSource {
    /// The directory relative provider paths are resolved against.
    pub fn base_dir(&self) -> PathBuf {
        match self {
            PlanSource::Flake { flake, .. } => {
                let p = Path::new(flake.strip_prefix("path:").unwrap_or(flake));
                if p.is_dir() {
                    p.to_path_buf()
                } else {
                    std::env::current_dir().unwrap_or_default()
                }
            }
            PlanSource::File { path, .. } => {
                path.parent().map(Path::to_path_buf).unwrap_or_default()
            }
        }
    }
}

impl fmt::Display for PlanSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanSource::Flake { flake, attr } => write!(f, "{flake}#{attr}"),
            PlanSource::File {
                path,
                attr: Some(attr),
            } => write!(f, "{} (attribute {attr})", path.display()),
            PlanSource::File { path, attr: None } => write!(f, "{}", path.display()),
        }
    }
}

/// Why evaluation failed.
#[derive(Debug)]
pub struct EvalError {
    /// What was evaluated.
    pub what: String,
    /// The explanation, usually Nix's own error text.
    pub message: String,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "evaluating {} failed:\n{}",
            self.what,
            self.message.trim_end()
        )
    }
}

impl std::error::Error for EvalError {}

fn nix_command() -> Command {
    let mut cmd = Command::new(std::env::var_os("NIVIS_NIX").unwrap_or_else(|| "nix".into()));
    cmd.args(["--extra-experimental-features", "nix-command flakes"]);
    cmd
}

/// Evaluates the plan with the ledger at `ledger_path`; returns the IR JSON bytes and the time
/// Nix took.
pub fn evaluate(source: &PlanSource, ledger_path: &Path) -> Result<(Vec<u8>, Duration), EvalError> {
    let ledger = ledger_path.to_str().ok_or_else(|| EvalError {
        what: source.to_string(),
        message: format!("ledger path {} is not UTF-8", ledger_path.display()),
    })?;
    let apply = format!(
        "plan: plan (builtins.fromJSON (builtins.readFile {}))",
        nix_string(ledger)
    );
    let mut cmd = nix_command();
    cmd.args(["eval", "--json", "--impure"]);
    match source {
        PlanSource::Flake { flake, attr } => {
            cmd.arg(format!("{flake}#{attr}"));
        }
        PlanSource::File { path, attr } => {
            cmd.arg("--file").arg(path);
            if let Some(attr) = attr {
                cmd.arg(attr);
            }
        }
    }
    cmd.arg("--apply").arg(apply);
    // Nix grows its garbage-collected heap up front unless told where to start; a small start
    // lets the heap follow the plan's size (10000 resources: 137 MB → 93 MB peak, same time).
    // A value the user set wins.
    if std::env::var_os("GC_INITIAL_HEAP_SIZE").is_none() {
        cmd.env("GC_INITIAL_HEAP_SIZE", "8M");
    }
    // A plan reading a secret with builtins.getEnv would get it unmarked.
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("NIVIS_VAR_") {
            cmd.env_remove(k);
        }
    }
    let started = Instant::now();
    let output = cmd.stdin(Stdio::null()).output().map_err(|e| EvalError {
        what: source.to_string(),
        message: format!("cannot run nix: {e}; is Nix installed and on PATH?"),
    })?;
    if !output.status.success() {
        return Err(EvalError {
            what: source.to_string(),
            message: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok((output.stdout, started.elapsed()))
}

/// The state backend configured beside the plan: for plan attribute `a.b.plan`, the value of
/// `a.b.backend` in `flake` (`nivis.backend` by default), or `None` if there is none.
pub fn backend_config(
    flake: &str,
    plan_attr: &str,
) -> Result<Option<serde_json::Value>, EvalError> {
    let mut path: Vec<&str> = plan_attr.split('.').collect();
    path.pop();
    let parent = path.join(".");
    if parent.is_empty() {
        // A top-level plan attribute has no attribute set to hold a backend beside it.
        return Ok(None);
    }
    let what = format!("{flake}#{parent}.backend");
    // The same flake reference as the plan's evaluation (`FLAKE#ATTR`), so that Nix copies the
    // same tree: `builtins.getFlake "/dir"` copies a git flake's directory whole, ignored files
    // (a git-ignored state) included.
    let installable = format!("{flake}#{parent}");
    let apply = "parent: parent.backend or null";
    let output = nix_command()
        .args(["eval", "--json", "--impure", &installable, "--apply", apply])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| EvalError {
            what: what.clone(),
            message: format!("cannot run nix: {e}; is Nix installed and on PATH?"),
        })?;
    if !output.status.success() {
        return Err(EvalError {
            what,
            message: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    let value: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| EvalError {
            what: what.clone(),
            message: format!("not JSON: {e}"),
        })?;
    Ok((!value.is_null()).then_some(value))
}

/// Makes sure a build output exists in the store, building its derivation if needed.
pub fn realise(path: &str, drv_path: Option<&str>) -> Result<(), String> {
    let store_path = store_path_prefix(path);
    if Path::new(&store_path).exists() {
        return Ok(());
    }
    let target = drv_path.unwrap_or(&store_path);
    let output =
        Command::new(std::env::var_os("NIVIS_NIX_STORE").unwrap_or_else(|| "nix-store".into()))
            .args(["--realise", target])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run nix-store: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "building {target} failed:\n{}",
            String::from_utf8_lossy(&output.stderr).trim_end()
        ));
    }
    if !Path::new(&store_path).exists() {
        return Err(format!(
            "{target} was built but {store_path} does not exist"
        ));
    }
    Ok(())
}

/// `/nix/store/<hash>-<name>/sub/file` -> `/nix/store/<hash>-<name>`.
fn store_path_prefix(path: &str) -> String {
    let Some(rest) = path.strip_prefix("/nix/store/") else {
        return path.to_string();
    };
    match rest.find('/') {
        Some(i) => format!("/nix/store/{}", &rest[..i]),
        None => path.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_store_paths() {
        assert_eq!(
            nix_string("/tmp/a \"b\" ${x}"),
            "\"/tmp/a \\\"b\\\" \\${x}\""
        );
        assert_eq!(
            store_path_prefix("/nix/store/abc-img/disk.vhd"),
            "/nix/store/abc-img"
        );
        assert_eq!(
            store_path_prefix("/nix/store/abc-img"),
            "/nix/store/abc-img"
        );
        assert_eq!(store_path_prefix("/tmp/x"), "/tmp/x");
    }
}
