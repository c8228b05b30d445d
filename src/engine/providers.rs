//! The provider processes of one run: finding each binary, starting it once, configuring it
//! once, and stopping them all.
//!
//! Providers are started from the thread that owns the run (never from workers): the kernel's
//! parent-death signal that reaps providers if Nivis dies is tied to the starting thread. A
//! provider started before the evaluation (`prestart`) is spawned there too; only the rest of
//! its start (handshake, TLS, schema) runs on a thread of its own while Nix evaluates.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::prestart::{Memory, Remembered};
use crate::diag::{Diagnostic, Diagnostics};
use crate::engine::plan_file::ProviderIdentity;
use crate::ir::{ProviderDecl, ProviderKind};
use crate::nixops4::Nixops4Provider;
use crate::plugin::{GrpcProvider, LaunchSpec};
use crate::provider::Provider;
use crate::secrets::Redactor;
use crate::value::Value;

struct Running {
    provider: Arc<dyn Provider>,
    configured: Option<Value>,
    /// Which binary it is, when a saved plan is written or checked (hashing costs a read).
    identity: Option<ProviderIdentity>,
    /// What the next run may start before its evaluation (`None`: not a gRPC provider).
    remembered: Option<Remembered>,
}

/// A started provider and how its start went, or why it failed.
type Started = Result<(Arc<dyn Provider>, StartInfo), Diagnostics>;

/// The rest of a provider's start, run on a thread of its own (see [`Launcher::prestart`]).
pub(crate) type PendingStart =
    Box<dyn FnOnce() -> Result<(Arc<dyn Provider>, StartInfo), Diagnostics> + Send>;

/// A provider started before the evaluation that declares it.
struct Prestarted {
    /// The declaration it was started with.
    remembered: Remembered,
    /// Finishes its start; joined when the evaluation declares it, or when it is dropped.
    thread: std::thread::JoinHandle<Started>,
}

impl Prestarted {
    /// Waits for the start to finish (on the process clock: the run waits on a provider).
    fn join(self) -> Started {
        let _waiting = crate::plugin::InFlight::lifecycle();
        self.thread.join().unwrap_or_else(|_| {
            Err(Diagnostic::error(format!(
                "provider {}: its start failed unexpectedly (a thread of Nivis panicked)",
                self.remembered.id
            ))
            .into())
        })
    }

    /// Stops a provider the evaluation did not declare as started: its process is ended and
    /// its private directory removed before this returns.
    fn discard(self) {
        let id = self.remembered.id.clone();
        match self.join() {
            Ok((provider, _)) => {
                drop(provider);
                log::info!(
                    "provider {id} was started before the evaluation but is not used: stopped"
                );
            }
            Err(e) => log::debug!("provider {id} started before the evaluation failed: {e}"),
        }
    }
}

/// Starts a provider: the seam between the engine and provider processes. The engine's unit
/// tests supply in-process providers instead.
pub trait Launcher {
    /// Starts provider `id` as `decl` declares it; says how, for `providers list`.
    fn launch(
        &mut self,
        id: &str,
        decl: &ProviderDecl,
    ) -> Result<(Arc<dyn Provider>, StartInfo), Diagnostics>;

    /// Spawns provider `id`'s process (on this thread, which owns the run) before the
    /// evaluation that declares it, and returns the rest of its start, which sends nothing of
    /// a configuration. `None` when it cannot be started that way (then it starts as usual).
    fn prestart(&mut self, _id: &str, _decl: &ProviderDecl) -> Option<PendingStart> {
        None
    }
}

/// The production launcher: finds the binary (registry, cache, path) and starts it as a
/// plugin or NixOps4 process.
pub(crate) struct ProcessLauncher {
    base_dir: PathBuf,
    install: crate::registry::InstallOptions,
    /// The plan's remembered validation verdicts (see `LaunchSpec::validation_scope`).
    validation_scope: Option<String>,
    /// See `LaunchSpec::operation_timeout`.
    operation_timeout: Option<std::time::Duration>,
}

impl ProcessLauncher {
    /// Relative `./` sources resolve against `base_dir` (the flake's directory).
    pub(crate) fn new(base_dir: &Path, install: crate::registry::InstallOptions) -> Self {
        ProcessLauncher {
            base_dir: base_dir.to_path_buf(),
            install,
            validation_scope: None,
            operation_timeout: None,
        }
    }

    /// Providers give up on an apply call unanswered after `timeout` (`--operation-timeout`).
    pub(crate) fn with_operation_timeout(mut self, timeout: Option<std::time::Duration>) -> Self {
        self.operation_timeout = timeout;
        self
    }

    /// Providers use the validation verdicts remembered for the plan at `source` only.
    pub(crate) fn for_plan(mut self, source: &crate::nixeval::PlanSource) -> Self {
        self.validation_scope = Some(super::prestart::plan_key(source));
        self
    }

    fn spec(&self, id: &str, path: &Path) -> LaunchSpec {
        let mut spec = LaunchSpec::new(id, path);
        spec.validation_scope = self.validation_scope.clone();
        spec.operation_timeout = self.operation_timeout;
        spec
    }
}

impl Launcher for ProcessLauncher {
    fn launch(
        &mut self,
        id: &str,
        decl: &ProviderDecl,
    ) -> Result<(Arc<dyn Provider>, StartInfo), Diagnostics> {
        let failed = |e: String| Diagnostics::from(Diagnostic::error(e));
        let started = Instant::now();
        if let Some(drv) = &decl.drv_path {
            // `source = lib.drv pkg`: built (or substituted) now, as a resource's build output
            // is before its apply. Nothing secret builds a provider: no secret to redact.
            crate::nixeval::realise(&decl.source, Some(drv), &Redactor::new())
                .map_err(|e| failed(format!("provider {id}: building its source: {e}")))?;
        }
        let (provider, path, protocol): (Arc<dyn Provider>, _, _) = match &decl.kind {
            ProviderKind::Tfplugin => {
                let path = locate(
                    &decl.source,
                    decl.version.as_deref(),
                    &self.base_dir,
                    &self.install,
                )
                .map_err(|e| failed(format!("provider {id}: {e}")))?;
                let provider = GrpcProvider::start(&self.spec(id, &path))
                    .map_err(|e| failed(e.to_string()))?;
                return Ok(grpc_started(provider, path, started));
            }
            ProviderKind::Nixops4 { stateless_types } => {
                let path = locate_nixops4(&decl.source, &self.base_dir)
                    .map_err(|e| failed(format!("provider {id}: {e}")))?;
                let timeout = crate::nixops4::request_timeout();
                let provider = Nixops4Provider::start(id, &path, stateless_types, timeout)
                    .map_err(|e| failed(e.to_string()))?;
                (Arc::new(provider), path, "nixops4 v0".to_string())
            }
        };
        let info = StartInfo {
            path,
            protocol,
            startup: started.elapsed(),
        };
        Ok((provider, info))
    }

    /// Only gRPC providers given by path or binary name: a registry address may need an
    /// install checked against the lock file, which stays after the evaluation.
    fn prestart(&mut self, id: &str, decl: &ProviderDecl) -> Option<PendingStart> {
        let by_registry = crate::registry::is_registry_address(&decl.source)
            && !decl.source.starts_with(['/', '.']);
        if decl.kind != ProviderKind::Tfplugin || by_registry {
            return None;
        }
        let path = resolve_source(&decl.source, &self.base_dir).ok()?;
        let started = Instant::now();
        let spawned = GrpcProvider::spawn(&self.spec(id, &path)).ok()?;
        Some(Box::new(move || {
            let provider = crate::plugin::off_the_clock(|| spawned.finish())
                .map_err(|e| Diagnostics::from(Diagnostic::error(e.to_string())))?;
            Ok(grpc_started(provider, path, started))
        }))
    }
}

/// A gRPC provider just started from `path`, with how its start went (`started`: when it began).
fn grpc_started(
    provider: GrpcProvider,
    path: PathBuf,
    started: Instant,
) -> (Arc<dyn Provider>, StartInfo) {
    let info = StartInfo {
        path,
        protocol: format!("tfplugin{}", provider.protocol()),
        startup: started.elapsed(),
    };
    (Arc::new(provider), info)
}

/// The providers of one run, by IR provider id.
pub(super) struct ProviderSet {
    launcher: Box<dyn Launcher>,
    running: BTreeMap<String, Running>,
    /// `apply FILE`: the binaries the saved plan was made with; another one is refused.
    expected: Option<BTreeMap<String, ProviderIdentity>>,
    /// `plan --out`: note which binary each provider is.
    pub(super) identify: bool,
    /// Providers started before the evaluation, not yet adopted or stopped.
    prestarted: BTreeMap<String, Prestarted>,
    /// Which providers the last run of this plan started; updated when this set goes.
    memory: Option<Memory>,
}

/// How a provider was found and started, for `providers list` and benchmarks.
#[derive(Debug, Clone)]
pub struct StartInfo {
    /// The binary.
    pub path: PathBuf,
    /// The protocol it speaks: `tfplugin5`, `tfplugin6` or `nixops4 v0`.
    pub protocol: String,
    /// Start + handshake + schema time.
    pub startup: std::time::Duration,
}

impl ProviderSet {
    /// Providers started by `launcher`; with `expected`, each must be the binary named there.
    pub(super) fn new(
        launcher: Box<dyn Launcher>,
        expected: Option<BTreeMap<String, ProviderIdentity>>,
    ) -> Self {
        ProviderSet {
            launcher,
            running: BTreeMap::new(),
            identify: expected.is_some(),
            expected,
            prestarted: BTreeMap::new(),
            memory: None,
        }
    }

    /// Starts the providers the last run of this plan started (as `memory` says), each spawned
    /// here and finished on a thread of its own while the caller evaluates. Once per run.
    pub(super) fn prestart(&mut self, memory: Memory) {
        for remembered in memory.remembered() {
            let Some(rest) = self.launcher.prestart(&remembered.id, &remembered.decl()) else {
                continue;
            };
            let thread = std::thread::Builder::new()
                .name(format!("{}-prestart", remembered.id))
                .spawn(rest);
            match thread {
                Ok(thread) => {
                    log::debug!("provider {} started before the evaluation", remembered.id);
                    let prestarted = Prestarted {
                        remembered: remembered.clone(),
                        thread,
                    };
                    self.prestarted.insert(remembered.id.clone(), prestarted);
                }
                Err(e) => log::debug!("provider {}: no thread to start it: {e}", remembered.id),
            }
        }
        self.memory = Some(memory);
    }

    /// Stops the providers started before the evaluation that `declared` (the evaluated
    /// providers) does not declare as started.
    pub(super) fn settle_prestarted(&mut self, declared: &BTreeMap<String, ProviderDecl>) {
        let unused: Vec<String> = (self.prestarted.iter())
            .filter(|(id, p)| !declared.get(*id).is_some_and(|d| p.remembered.matches(d)))
            .map(|(id, _)| id.clone())
            .collect();
        for id in unused {
            if let Some(p) = self.prestarted.remove(&id) {
                p.discard();
            }
        }
    }

    /// The provider started before the evaluation as `decl` declares it, if there is one.
    fn adopt(&mut self, id: &str, decl: &ProviderDecl) -> Option<Started> {
        let prestarted = self.prestarted.remove(id)?;
        if !prestarted.remembered.matches(decl) {
            prestarted.discard();
            return None;
        }
        Some(prestarted.join())
    }

    /// Which binary each running provider is, for a saved plan.
    pub(super) fn identities(&self) -> BTreeMap<String, ProviderIdentity> {
        self.running
            .iter()
            .filter_map(|(id, r)| Some((id.clone(), r.identity.clone()?)))
            .collect()
    }

    /// The running provider `id`, starting it if needed.
    pub(super) fn get(
        &mut self,
        id: &str,
        decl: &ProviderDecl,
    ) -> Result<Arc<dyn Provider>, Diagnostics> {
        self.start(id, decl).map(|(p, _)| p)
    }

    /// Starts provider `id` if it is not running; returns it and, when it was just started,
    /// how that went.
    pub(super) fn start(
        &mut self,
        id: &str,
        decl: &ProviderDecl,
    ) -> Result<(Arc<dyn Provider>, Option<StartInfo>), Diagnostics> {
        if let Some(r) = self.running.get(id) {
            return Ok((Arc::clone(&r.provider), None));
        }
        let (provider, info) = match self.adopt(id, decl) {
            Some(Ok(started)) => started,
            // A start before the evaluation is a guess from the last run; when it failed (a
            // provider that crashed, a binary replaced since) the run starts it as if it had
            // not been remembered, and a provider that cannot start fails with that start's
            // own error.
            Some(Err(failed)) => {
                log::info!(
                    "provider {id}: the start before the evaluation failed ({}); starting it again",
                    failed
                        .errors()
                        .next()
                        .and_then(|e| e.summary.lines().next())
                        .unwrap_or("no reason given")
                );
                self.launcher.launch(id, decl)?
            }
            None => self.launcher.launch(id, decl)?,
        };
        let identity = self.identify.then(|| ProviderIdentity {
            source: decl.source.clone(),
            version: decl.version.clone(),
            // A binary that cannot be read (an in-process provider) is named by its path.
            sha256: std::fs::read(&info.path)
                .map(|bytes| crate::engine::plan_file::sha256(&bytes))
                .unwrap_or_else(|_| format!("unreadable {}", info.path.display())),
            protocol: info.protocol.clone(),
        });
        if let (Some(saved), Some(identity)) = (
            self.expected.as_ref().and_then(|e| e.get(id)),
            identity.as_ref(),
        ) {
            if saved != identity {
                return Err(Diagnostic::error(format!(
                    "provider {id}: the saved plan was made with {} ({}, {}), but this run starts {} ({}, {}): the saved plan cannot be applied; nothing was changed",
                    saved.source, saved.protocol, saved.sha256,
                    info.path.display(), identity.protocol, identity.sha256
                ))
                .into());
            }
        }
        log::info!(
            "provider {id} started from {} (protocol {}) in {:?}",
            info.path.display(),
            info.protocol,
            info.startup
        );
        self.running.insert(
            id.to_string(),
            Running {
                provider: Arc::clone(&provider),
                configured: None,
                identity,
                remembered: Remembered::of(id, decl),
            },
        );
        Ok((provider, Some(info)))
    }

    /// Validates and configures provider `id` with `config` (conforming to its schema), once.
    /// A later call with a different configuration is an error: a provider process can only be
    /// configured once.
    pub(super) fn configure(&mut self, id: &str, config: &Value) -> Result<(), Diagnostics> {
        let running = self.running.get_mut(id).expect("configure after start");
        if let Some(previous) = &running.configured {
            if previous == config {
                return Ok(());
            }
            return Err(Diagnostic::error(format!(
                "provider {id}: its configuration changed during the run; run nivis again to use the new configuration"
            ))
            .into());
        }
        let mut diags = running.provider.validate_provider_config(config)?;
        if !diags.has_errors() {
            diags.extend(running.provider.configure(config)?);
        }
        let diags = Diagnostics(diags.0.into_iter().map(|d| prefix(d, id)).collect());
        if diags.has_errors() {
            return Err(diags);
        }
        for w in diags.warnings() {
            log::warn!("{w}");
        }
        running.configured = Some(config.clone());
        Ok(())
    }

    /// The schema of provider `id`, if it is running.
    pub(super) fn schema(&self, id: &str) -> Option<&crate::schema::ProviderSchema> {
        self.running.get(id).map(|r| r.provider.schema())
    }

    /// True once `id` has been configured.
    pub(super) fn is_configured(&self, id: &str) -> bool {
        self.running.get(id).is_some_and(|r| r.configured.is_some())
    }
}

impl Drop for ProviderSet {
    /// Stops what was started before the evaluation and never used, and remembers what this
    /// run started for the next one.
    fn drop(&mut self) {
        for (_, p) in std::mem::take(&mut self.prestarted) {
            p.discard();
        }
        if let Some(memory) = &self.memory {
            let started = self.running.values();
            memory.remember(started.filter_map(|r| r.remembered.clone()).collect());
        }
    }
}

fn prefix(mut d: Diagnostic, id: &str) -> Diagnostic {
    d.summary = format!("provider {id}: {}", d.summary);
    d
}

/// Why a provider's `source` names no binary: the source as given and what was looked for.
#[derive(Debug)]
pub(crate) enum LocateError {
    /// A registry address whose provider could not be installed.
    Install(crate::registry::InstallError),
    /// A path to a package directory without a `terraform-provider-*` binary in it.
    EmptyPackage(PathBuf),
    /// A path (`source`, resolved to `path`) that does not exist.
    Missing {
        /// The source as the plan gives it.
        source: String,
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A bare binary name found neither next to the `nivis` binary nor on `PATH`.
    NotOnPath(String),
    /// Neither a path, a binary name, nor a registry address.
    NotAnAddress(String),
    /// A NixOps4 provider given as a directory instead of its binary.
    Nixops4Directory(String),
    /// A NixOps4 provider given as a registry address (they are not published there).
    Nixops4RegistryAddress(String),
}

impl std::fmt::Display for LocateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocateError::Install(e) => write!(f, "{e}"),
            LocateError::EmptyPackage(dir) => {
                write!(f, "{} holds no terraform-provider-* binary", dir.display())
            }
            LocateError::Missing { source, path } if path.starts_with("/nix/store") => write!(
                f,
                "source {source:?}: {} does not exist: a Nix store path that was never built on \
                 this machine, or was garbage-collected. Build it first (`nix build` of the \
                 package, or `nix-store --realise` of its .drv), or give the package itself: \
                 `source = lib.drv pkg` builds it before the provider starts",
                path.display()
            ),
            LocateError::Missing { source, path } => {
                write!(f, "source {source:?}: {} does not exist", path.display())
            }
            LocateError::NotOnPath(source) => write!(
                f,
                "source {source:?} was not found next to the nivis binary or on PATH; give an \
                 absolute or ./relative path"
            ),
            LocateError::NotAnAddress(source) => write!(
                f,
                "source {source:?} is not a path or binary name; registry addresses look like \
                 NAMESPACE/TYPE or HOST/NAMESPACE/TYPE"
            ),
            LocateError::Nixops4Directory(source) => write!(
                f,
                "source {source:?} is a directory; give the NixOps4 provider binary itself \
                 (for a Nix package, its bin/<name>)"
            ),
            LocateError::Nixops4RegistryAddress(source) => write!(
                f,
                "source {source:?}: a NixOps4 provider is a path or a binary name, never a \
                 registry address"
            ),
        }
    }
}

impl std::error::Error for LocateError {}

/// Finds the binary for `source`: a registry address is installed (mirrors, cache, registry,
/// verified against the lock file); anything else is resolved as a path by [`resolve_source`].
pub(crate) fn locate(
    source: &str,
    version: Option<&str>,
    base_dir: &Path,
    install: &crate::registry::InstallOptions,
) -> Result<PathBuf, LocateError> {
    if crate::registry::is_registry_address(source)
        && !source.starts_with('/')
        && !source.starts_with('.')
    {
        let installed =
            crate::registry::install(source, version, install).map_err(LocateError::Install)?;
        for w in &installed.warnings {
            log::warn!("{source}: {w}");
        }
        log::info!("{source} {} from {:?}", installed.version, installed.from);
        return Ok(installed.executable);
    }
    resolve_source(source, base_dir)
}

/// Finds a NixOps4 provider binary: a path or a bare binary name as for [`resolve_source`], but
/// never a registry address (NixOps4 providers are not published there) nor a package
/// directory (there is no naming convention to find the binary in it).
fn locate_nixops4(source: &str, base_dir: &Path) -> Result<PathBuf, LocateError> {
    let dir = if source.starts_with('/') {
        Some(PathBuf::from(source))
    } else if source.starts_with("./") || source.starts_with("../") {
        Some(base_dir.join(source))
    } else {
        None
    };
    if dir.is_some_and(|d| d.is_dir()) {
        return Err(LocateError::Nixops4Directory(source.to_string()));
    }
    resolve_source(source, base_dir).map_err(|e| {
        if source.contains('/') && !source.starts_with(['/', '.']) {
            LocateError::Nixops4RegistryAddress(source.to_string())
        } else {
            e
        }
    })
}

/// Finds the provider binary named by an IR `source`.
///
/// Accepted forms: an absolute path to a binary; `./` or `../` paths relative to the flake;
/// a Nix store directory holding a packaged provider (nixpkgs layout
/// `libexec/terraform-providers/HOST/NS/TYPE/VERSION/OS_ARCH/terraform-provider-*`, or
/// `bin/terraform-provider-*`); a bare file name, looked up next to the `nivis` binary and then
/// on `PATH`.
pub(crate) fn resolve_source(source: &str, base_dir: &Path) -> Result<PathBuf, LocateError> {
    let candidate = if source.starts_with("./") || source.starts_with("../") {
        Some(base_dir.join(source))
    } else if source.starts_with('/') {
        Some(PathBuf::from(source))
    } else {
        None
    };
    if let Some(path) = candidate {
        if path.is_dir() {
            return find_in_package_dir(&path).ok_or(LocateError::EmptyPackage(path));
        }
        if path.exists() {
            return Ok(path);
        }
        return Err(LocateError::Missing {
            source: source.to_string(),
            path,
        });
    }
    if !source.contains('/') {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf))
        {
            dirs.push(dir);
        }
        if let Some(path) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&path));
        }
        for dir in dirs {
            let p = dir.join(source);
            if p.is_file() {
                return Ok(p);
            }
        }
        return Err(LocateError::NotOnPath(source.to_string()));
    }
    Err(LocateError::NotAnAddress(source.to_string()))
}

/// The provider executable inside a package directory (first match in lexical order).
fn find_in_package_dir(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    let mut todo = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() && depth < 8 {
                todo.push((p, depth + 1));
            } else if p.is_file()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("terraform-provider-"))
            {
                found.push(p);
            }
        }
    }
    found.sort();
    found.into_iter().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_resolve() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join(
            "libexec/terraform-providers/registry.opentofu.org/hashicorp/null/2.1.2/linux_amd64",
        );
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(pkg.join("terraform-provider-null_v2.1.2_x4"), b"x").unwrap();
        assert_eq!(
            resolve_source(dir.path().to_str().unwrap(), Path::new("/")).unwrap(),
            pkg.join("terraform-provider-null_v2.1.2_x4")
        );
        std::fs::write(dir.path().join("p"), b"x").unwrap();
        assert_eq!(
            resolve_source("./p", dir.path()).unwrap(),
            dir.path().join("./p")
        );
        assert!(resolve_source("./missing", dir.path())
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
        assert!(resolve_source("hashicorp/null", dir.path())
            .unwrap_err()
            .to_string()
            .contains("registry"));
        assert!(resolve_source("no-such-provider-binary", dir.path())
            .unwrap_err()
            .to_string()
            .contains("PATH"));
    }
}
