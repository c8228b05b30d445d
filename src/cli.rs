//! The command line: clap definitions, resolution into engine options, and dispatch.
//!
//! Owns: flags and their defaults, reading variables and environment, the confirmation prompt,
//! the Ctrl-C handler, exit codes, and the text of summaries. Not: provider or state internals
//! except through `engine` and `state`'s read API.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use serde_json::Value as Json;

use crate::engine::{
    self, interrupt_flag, Engine, EngineError, Event, Options, Report, Sink, Timing,
};
use crate::nixeval::PlanSource;
use crate::render::{self, out, outln, Human, JsonLines, Style, Tally};
use crate::state::{Change, LockHolder, DEFAULT_ENV};

mod backend;

/// Nivis: infrastructure as Nix code.
///
/// Evaluates a Nix plan to an IR, drives unmodified Terraform/OpenTofu providers to plan and
/// apply it, and feeds apply-time outputs back into Nix, phase after phase, to a fixpoint.
#[derive(Parser, Debug)]
#[command(name = "nivis", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// More logging (-v info, -vv debug, -vvv trace); NIVIS_LOG=LEVEL does the same.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Show what apply would do: this phase in full, later phases as what they wait on.
    Plan(RunArgs),
    /// Plan and apply, re-evaluating Nix with new outputs, phase after phase, to a fixpoint.
    Apply(ApplyArgs),
    /// Destroy every resource in state (or the targets and what depends on them).
    Destroy(ApplyArgs),
    /// Reconcile state with the real objects (UpgradeResourceState + ReadResource); report drift.
    Refresh(RunArgs),
    /// Check the IR and every configuration with its provider's own validation; change nothing.
    Validate(RunArgs),
    /// Inspect or edit the state.
    #[command(subcommand)]
    State(StateCommand),
    /// Print the outputs Nix sees (the ledger, secrets as placeholders).
    Output(StateArgs),
    /// Remove the state lock of a process that is gone (its lock id is in every "locked"
    /// message), locally or in the remote backend.
    ForceUnlock(ForceUnlockArgs),
    /// Environments (`--env`): each has its own state under the backend's environment prefix.
    #[command(subcommand)]
    Env(EnvCommand),
    /// Write typed Nix constructors and reference docs from a provider's schema.
    Gen(GenArgs),
    /// Provider installation: lock file, mirrors, what is used.
    #[command(subcommand)]
    Providers(ProvidersCommand),
}

#[derive(Subcommand, Debug)]
pub enum ProvidersCommand {
    /// Record versions and hashes of the plan's registry providers for these platforms.
    Lock {
        /// OS_ARCH, e.g. linux_amd64; repeatable (default: this machine's).
        #[arg(long = "platform")]
        platforms: Vec<String>,
        /// Choose versions afresh within the constraints, replacing locked selections.
        #[arg(long)]
        upgrade: bool,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Write a filesystem mirror (packed zips + network-mirror JSON) of the plan's providers.
    Mirror {
        /// The mirror directory.
        dir: PathBuf,
        /// OS_ARCH, e.g. linux_amd64; repeatable (default: this machine's).
        #[arg(long = "platform")]
        platforms: Vec<String>,
        #[command(flatten)]
        run: RunArgs,
    },
    /// Each provider of the plan: where it comes from, version, hashes.
    List(RunArgs),
}

#[derive(Args, Debug, Clone)]
pub struct GenArgs {
    /// The provider, as mkProvider's `source` accepts it (path, store path, or binary name).
    #[arg(long)]
    pub provider: String,
    /// The provider id users give it in `toIR`'s `providers` (default: from the binary name).
    #[arg(long)]
    pub name: Option<String>,
    /// Output directory; files go to OUT/NAME/.
    #[arg(long)]
    pub out: PathBuf,
    #[command(flatten)]
    pub install: InstallArgs,
}

#[derive(Subcommand, Debug)]
pub enum EnvCommand {
    /// List the environments that have a state (`*` marks the selected one).
    List(StateArgs),
}

#[derive(Subcommand, Debug)]
pub enum StateCommand {
    /// Write the whole state as JSON, secrets included, to a new private file (mode 0600) or,
    /// with `--out -`, to standard output.
    Pull {
        /// Where to write the state: a file (created mode 0600, replaced if it exists) or `-`
        /// for standard output. Required: the state holds secrets in plain text.
        #[arg(long, short = 'o', value_name = "FILE")]
        out: PathBuf,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Replace the state by a file's (as `state pull` prints it); refuses another lineage or an
    /// older serial unless --force.
    Push {
        /// The state file to push.
        file: PathBuf,
        /// Push even if the lineage differs or the serial is older.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Copy the local state file (--state) into the configured remote backend.
    Migrate {
        /// Replace what the backend already holds.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        state: StateArgs,
    },
    /// List resource ids in state.
    List(StateArgs),
    /// Show one resource's recorded attributes (sensitive values hidden).
    Show {
        /// Resource id.
        id: String,
        #[command(flatten)]
        state: StateArgs,
    },
    /// Forget resources without destroying them.
    Rm {
        /// Resource ids.
        #[arg(required = true)]
        ids: Vec<String>,
        #[command(flatten)]
        state: StateArgs,
    },
}

#[derive(Args, Debug, Clone)]
pub struct StateArgs {
    /// The flake (directory or reference) holding the plan.
    #[arg(long, default_value = ".", conflicts_with = "file")]
    pub flake: String,
    /// A plain Nix file evaluating to the plan function (instead of a flake).
    #[arg(long)]
    pub file: Option<PathBuf>,
    /// The state file (default: one per project, under $XDG_STATE_HOME/nivis/projects; never
    /// inside a directory Nix copies into the store).
    #[arg(long, env = "NIVIS_STATE")]
    pub state: Option<PathBuf>,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
    /// The environment: its state is the backend's key under the environment prefix (the
    /// plan sees the name as `ledger.env`).
    #[arg(long, env = "NIVIS_ENV", default_value = "default")]
    pub env: String,
    /// Set a field of the state backend (overriding the flake's `nivis.backend`):
    /// KEY=VALUE, repeatable, e.g. `--backend-config type=s3 --backend-config bucket=b`.
    #[arg(long = "backend-config", value_name = "KEY=VALUE")]
    pub backend_config: Vec<String>,
}

impl StateArgs {
    /// Where the plan lives (`attr`: the plan function's attribute, for flakes).
    fn source(&self, attr: Option<String>) -> Result<PlanSource, String> {
        Ok(match &self.file {
            Some(file) => {
                // Nix would read a device or a pipe without end.
                if std::fs::metadata(file).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
                    return Err(format!(
                        "--file {}: not a regular file or a directory",
                        file.display()
                    ));
                }
                PlanSource::File {
                    path: absolute(file),
                    attr,
                }
            }
            None => {
                let flake = if Path::new(&self.flake).is_dir() {
                    absolute(Path::new(&self.flake)).display().to_string()
                } else {
                    self.flake.clone()
                };
                PlanSource::Flake {
                    flake,
                    attr: attr.unwrap_or_else(|| "nivis.plan".into()),
                }
            }
        })
    }

    /// The local state path of the default environment: `--state` (refused inside a tree Nix
    /// copies into the store, the selected environment's file too), else the project's
    /// default, after moving a state older versions left in the working directory or in a
    /// flake directory Nix copies (the selected environment's too).
    fn state_path(&self, source: &PlanSource) -> Result<PathBuf, String> {
        use crate::project;
        use crate::state::env_state_path;
        if let Some(p) = &self.state {
            project::check_state_path(p, source)?;
            project::check_state_path(&env_state_path(p, &self.env)?, source)?;
            return Ok(absolute(p));
        }
        let target = project::default_state_path(source)?;
        project::create_state_dir(&target)?;
        let mut legacy = vec![absolute(Path::new(crate::state::DEFAULT_PATH))];
        if let project::Copied::Whole(dir) = project::copied_tree(source) {
            legacy.push(dir.join(crate::state::DEFAULT_PATH));
        }
        for old in legacy {
            let mut moves = vec![(old.clone(), target.clone())];
            if self.env != DEFAULT_ENV {
                moves.push((
                    env_state_path(&old, &self.env)?,
                    env_state_path(&target, &self.env)?,
                ));
            }
            for (from, to) in moves {
                if let Some(message) = project::move_legacy_state(&from, &to)? {
                    eprintln!("{}", render::escape_text(&message));
                }
            }
        }
        log::info!("state: {}", target.display());
        Ok(target)
    }

    /// The backend of a command that evaluates no plan (see [`backend::resolve`]).
    fn backend(&self) -> Result<crate::state::Backend, String> {
        backend::resolve(self, &self.source(None)?)
    }

    /// Reads the state without locking it; its secrets are remembered for redaction. Returns
    /// the backend too (for messages).
    fn read(&self) -> Result<(crate::state::Backend, crate::state::StateFile), String> {
        let backend = self.backend()?;
        let state = backend.read_only().map_err(|e| e.to_string())?;
        crate::secrets::remember_state(&state);
        Ok((backend, state))
    }
}

#[derive(Args, Debug, Clone)]
pub struct ForceUnlockArgs {
    /// The lock's id, as a "the state is locked" message shows it.
    pub lock_id: String,
    /// Remove the lock even if its holder still runs on this host, without asking.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub state: StateArgs,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// The attribute holding the plan function (`ledger: IR`).
    #[arg(long)]
    pub attr: Option<String>,
    #[command(flatten)]
    pub state: StateArgs,
    /// Set a variable: NAME=VALUE (VALUE is JSON if it parses as JSON, else a string).
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub vars: Vec<String>,
    /// A JSON file of variable values.
    #[arg(long = "var-file")]
    pub var_files: Vec<PathBuf>,
    /// Limit the run to these resources and what they depend on.
    #[arg(long = "target", value_name = "ID")]
    pub targets: Vec<String>,
    /// Provider operations in flight at once.
    #[arg(long, default_value_t = 10)]
    pub parallelism: usize,
    /// Refresh stored objects before planning.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub refresh: bool,
    /// Wait this long for the state lock (e.g. 30s, 2m); default: fail at once.
    #[arg(long, value_parser = parse_duration)]
    pub lock_timeout: Option<Duration>,
    #[command(flatten)]
    pub install: InstallArgs,
}

/// Where providers given by registry address come from.
#[derive(Args, Debug, Clone)]
pub struct InstallArgs {
    /// Never use the network: only filesystem mirrors and the cache (NIVIS_OFFLINE=1, true,
    /// yes or on).
    #[arg(long, env = "NIVIS_OFFLINE", value_parser = clap::builder::BoolishValueParser::new())]
    pub offline: bool,
    /// A filesystem mirror (packed or unpacked layout, as `tofu providers mirror` writes);
    /// repeatable, searched in order. Also NIVIS_PROVIDER_MIRRORS (colon-separated).
    #[arg(long = "mirror", value_name = "DIR")]
    pub mirrors: Vec<PathBuf>,
    /// A network mirror base URL (https); repeatable.
    #[arg(long = "network-mirror", value_name = "URL")]
    pub network_mirrors: Vec<String>,
    /// The provider lock file.
    #[arg(long, default_value = ".terraform.lock.hcl", env = "NIVIS_LOCK_FILE")]
    pub lock_file: PathBuf,
    /// The provider cache (default: $XDG_CACHE_HOME/nivis/providers).
    #[arg(long, env = "NIVIS_PROVIDER_CACHE_DIR")]
    pub provider_cache: Option<PathBuf>,
}

impl InstallArgs {
    fn options(&self) -> Result<crate::registry::InstallOptions, String> {
        let cache = match &self.provider_cache {
            Some(c) => absolute(c),
            None => crate::registry::default_cache_dir()
                .ok_or("cannot find a cache directory: set --provider-cache or XDG_CACHE_HOME")?,
        };
        let mut opts = crate::registry::InstallOptions::new(cache, absolute(&self.lock_file));
        opts.offline = self.offline;
        opts.fs_mirrors = self.mirrors.iter().map(|m| absolute(m)).collect();
        if let Some(extra) = std::env::var_os("NIVIS_PROVIDER_MIRRORS") {
            opts.fs_mirrors
                .extend(std::env::split_paths(&extra).filter(|p| !p.as_os_str().is_empty()));
        }
        opts.net_mirrors = self.network_mirrors.clone();
        Ok(opts)
    }
}

#[derive(Args, Debug, Clone)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub auto_approve: bool,
    /// Stop after N phases that changed something and report what is still pending.
    #[arg(long)]
    pub max_phases: Option<u32>,
    /// Realise `__build` outputs before apply (`--build=false` to skip).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub build: bool,
}

/// Parses `30s`, `2m`, `250ms`, `1.5h` (a bare number is seconds), up to a year.
fn parse_duration(s: &str) -> Result<Duration, String> {
    const MAX_SECS: f64 = 365.0 * 24.0 * 3600.0;
    let (num, unit) = s.split_at(
        s.find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(s.len()),
    );
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 30s or 2m"))?;
    let secs = match unit {
        "" | "s" => n,
        "ms" => n / 1000.0,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (use ms, s, m or h)")),
    };
    if !(0.0..=MAX_SECS).contains(&secs) {
        return Err(format!("{s:?} is longer than a year"));
    }
    Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))
}

/// Exit codes.
pub mod exit {
    /// Success.
    pub const OK: i32 = 0;
    /// Something failed.
    pub const ERROR: i32 = 1;
    /// Interrupted by Ctrl-C.
    pub const INTERRUPTED: i32 = 130;
}

/// Runs the parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    init_logging(cli.verbose);
    install_interrupt_handler();
    crate::state::s3::Credentials::remember_environment();
    let style = Style::detect();
    match cli.command {
        Command::Plan(args) => run_engine(&args, None, style, Verb::Plan),
        Command::Apply(args) => run_engine(&args.run, Some(&args), style, Verb::Apply),
        Command::Destroy(args) => run_engine(&args.run, Some(&args), style, Verb::Destroy),
        Command::Refresh(args) => run_engine(&args, None, style, Verb::Refresh),
        Command::Validate(args) => run_engine(&args, None, style, Verb::Validate),
        Command::State(cmd) => state_command(cmd),
        Command::Output(args) => output_command(&args),
        Command::Gen(args) => gen_command(&args),
        Command::Providers(cmd) => providers_command(cmd),
        Command::ForceUnlock(args) => backend::force_unlock(&args),
        Command::Env(EnvCommand::List(args)) => backend::env_list(&args),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Verb {
    Plan,
    Apply,
    Destroy,
    Refresh,
    Validate,
}

fn fail(e: &dyn std::fmt::Display) -> i32 {
    let _ = writeln!(
        std::io::stderr(),
        "Error: {}",
        render::escape_text(&e.to_string())
    );
    exit::ERROR
}

fn options(args: &RunArgs, apply: Option<&ApplyArgs>, verb: &str) -> Result<Options, String> {
    let source = args.state.source(args.attr.clone())?;
    let backend = backend::resolve(&args.state, &source)?;
    Ok(Options {
        source,
        backend,
        parallelism: args.parallelism.max(1),
        max_phases: apply.and_then(|a| a.max_phases),
        targets: args.targets.clone(),
        build: apply.map(|a| a.build).unwrap_or(true),
        refresh: args.refresh,
        vars: variables(args)?,
        lock_timeout: args.lock_timeout,
        command: format!("nivis {verb}"),
        install: args.install.options()?,
    })
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    }
}

/// Variables: `NIVIS_VAR_name` environment < `--var-file` files (in order) < `--var` flags.
fn variables(args: &RunArgs) -> Result<BTreeMap<String, Json>, String> {
    let mut vars = BTreeMap::new();
    // vars_os: std::env::vars panics on a variable that is not UTF-8 (anyone's, not just ours).
    for (k, v) in std::env::vars_os() {
        if let Some(name) = k.to_str().and_then(|k| k.strip_prefix("NIVIS_VAR_")) {
            let v = v
                .into_string()
                .map_err(|_| format!("NIVIS_VAR_{name}: the value is not UTF-8"))?;
            vars.insert(name.to_string(), parse_var_value(&v));
        }
    }
    for file in &args.var_files {
        let text = read_bounded(file, VAR_FILE_LIMIT)
            .map_err(|e| format!("--var-file {}: {e}", file.display()))?;
        let json: Json = serde_json::from_str(&text)
            .map_err(|e| format!("--var-file {}: not JSON: {e}", file.display()))?;
        let Json::Object(map) = json else {
            return Err(format!(
                "--var-file {}: must hold a JSON object of variable values",
                file.display()
            ));
        };
        vars.extend(map);
    }
    for var in &args.vars {
        let (name, value) = var
            .split_once('=')
            .ok_or_else(|| format!("--var {var:?}: expected NAME=VALUE"))?;
        if name.is_empty() {
            return Err(format!("--var {var:?}: the variable name is empty"));
        }
        vars.insert(name.to_string(), parse_var_value(value));
    }
    Ok(vars)
}

/// Largest `--var-file` read.
const VAR_FILE_LIMIT: u64 = 64 << 20;

/// Reads a text file of at most `limit` bytes (a device such as /dev/zero never ends).
fn read_bounded(path: &Path, limit: u64) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > limit {
        return Err(format!("larger than {} MiB", limit >> 20));
    }
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

fn parse_var_value(v: &str) -> Json {
    serde_json::from_str(v).unwrap_or_else(|_| Json::String(v.to_string()))
}

fn confirm_prompt(question: &str) -> bool {
    out!("{question} Only 'yes' will be accepted: ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    answer.trim() == "yes"
}

fn run_engine(args: &RunArgs, apply: Option<&ApplyArgs>, style: Style, verb: Verb) -> i32 {
    let name = match verb {
        Verb::Plan => "plan",
        Verb::Apply => "apply",
        Verb::Destroy => "destroy",
        Verb::Refresh => "refresh",
        Verb::Validate => "validate",
    };
    let opts = match options(args, apply, name) {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let json = args.state.json;
    let auto_approve = apply.is_some_and(|a| a.auto_approve);
    let needs_confirm = matches!(verb, Verb::Apply | Verb::Destroy) && !auto_approve;
    if needs_confirm && (json || !std::io::stdin().is_terminal()) {
        return fail(&format!("{name} needs confirmation, but there is no terminal to ask on: run with --auto-approve"));
    }
    let mut human = Human::new(style);
    let mut jsonl = JsonLines;
    let inner: &mut dyn Sink = if json { &mut jsonl } else { &mut human };
    let mut tally = Tally::new(inner);
    let started = std::time::Instant::now();
    let calls_before = crate::plugin::call_times();
    let cpu_before = own_cpu_time();
    let result: Result<Option<Report>, EngineError> = {
        let mut engine = Engine::new(opts, &mut tally);
        match verb {
            Verb::Plan => engine.plan().map(Some),
            Verb::Refresh => engine.refresh().map(Some),
            Verb::Validate => match engine.validate() {
                Ok(diags) => {
                    let mut err = std::io::stderr().lock();
                    for d in &diags.0 {
                        render::write_diagnostic(&mut err, style, d);
                    }
                    if diags.has_errors() {
                        Err(EngineError::Diagnostics(crate::diag::Diagnostics(
                            Vec::new(),
                        )))
                    } else {
                        Ok(None)
                    }
                }
                Err(e) => Err(e),
            },
            Verb::Apply => {
                let mut ask = || {
                    outln!();
                    confirm_prompt("Apply these changes? Later phases will apply what Nix derives from the new outputs.")
                };
                engine
                    .apply(if needs_confirm { Some(&mut ask) } else { None })
                    .map(Some)
            }
            Verb::Destroy => {
                let mut ask = || {
                    outln!();
                    confirm_prompt("Destroy all the resources above?")
                };
                engine
                    .destroy(if needs_confirm { Some(&mut ask) } else { None })
                    .map(Some)
            }
        }
    };
    let elapsed = started.elapsed();
    let calls = crate::plugin::call_times().since(calls_before);
    match result {
        Ok(report) => {
            if !json {
                summarise(verb, report.as_ref(), &tally);
            }
            if let Some(r) = &report {
                let timing = Timing {
                    wall: elapsed,
                    nix: r.nix_time,
                    providers: calls.busy,
                    provider_calls: calls.calls,
                    provider_call_time: calls.summed,
                    cpu: own_cpu_time().saturating_sub(cpu_before),
                };
                log::info!(
                    "{name} took {:.2}s: {:.2}s in Nix evaluation, {:.2}s waiting on providers ({} calls), {:.2}s in Nivis itself",
                    elapsed.as_secs_f64(),
                    timing.nix.as_secs_f64(),
                    timing.providers.as_secs_f64(),
                    timing.provider_calls,
                    timing.own().as_secs_f64(),
                );
                tally.event(Event::Timing(timing));
            }
            exit::OK
        }
        Err(EngineError::Diagnostics(d)) if d.is_empty() => exit::ERROR,
        Err(e) => {
            if json {
                // CI reads stdout: the failure is its last line; stderr says it for humans.
                let (message, diagnostics) = match &e {
                    EngineError::Diagnostics(d) => {
                        (format!("{} error(s)", d.errors().count()), d.0.clone())
                    }
                    e => (e.to_string(), Vec::new()),
                };
                tally.event(Event::CommandFailed {
                    message,
                    diagnostics,
                });
            }
            match e {
                EngineError::Diagnostics(d) => {
                    let mut err = std::io::stderr().lock();
                    for x in &d.0 {
                        render::write_diagnostic(&mut err, style, x);
                    }
                    exit::ERROR
                }
                EngineError::Interrupted => {
                    let _ = fail(&EngineError::Interrupted);
                    exit::INTERRUPTED
                }
                EngineError::Declined => {
                    outln!("{}", EngineError::Declined);
                    exit::ERROR
                }
                e => fail(&e),
            }
        }
    }
}

/// CPU time (user + system) used so far by this process's threads, not by its children.
fn own_cpu_time() -> Duration {
    // SAFETY: getrusage writes one rusage struct, which we own.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return Duration::ZERO;
        }
        usage
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn summarise(verb: Verb, report: Option<&Report>, tally: &Tally<'_>) {
    match verb {
        Verb::Plan => {
            outln!();
            outln!(
                "{}",
                render::plan_summary(&tally.planned, tally.deferred.len())
            );
            if !tally.planned.is_empty() || !tally.deferred.is_empty() {
                outln!("Run `nivis apply` to carry it out.");
            }
        }
        Verb::Apply => {
            let Some(r) = report else { return };
            outln!();
            if !r.pending.is_empty() {
                outln!(
                    "Applied {} resource change(s) across {} phase(s); still pending:",
                    r.changed.len(),
                    r.apply_phases
                );
                for (id, waits) in &r.pending {
                    if waits.is_empty() {
                        outln!("  … {} (ready for the next phase)", render::escape(id));
                    } else {
                        outln!(
                            "  … {} waits on {}",
                            render::escape(id),
                            render::escape(&engine::describe_waits(waits))
                        );
                    }
                }
                outln!("Run `nivis apply` again (without --max-phases) to continue.");
                return;
            }
            if r.changed.is_empty() {
                outln!(
                    "No changes. Fixpoint reached after {} evaluation(s).",
                    r.evaluations
                );
                return;
            }
            outln!(
                "Applied {} resource(s) across {} phase(s):",
                r.changed.len(),
                r.apply_phases
            );
            for (id, action) in &r.changed {
                outln!(
                    "  ✓ {} ({})",
                    render::escape(id),
                    render::done_verb(*action)
                );
            }
            outln!("Fixpoint reached after {} evaluation(s).", r.evaluations);
        }
        Verb::Destroy => {
            let Some(r) = report else { return };
            outln!();
            if r.changed.is_empty() {
                outln!("Nothing to destroy.");
                return;
            }
            outln!("Destroyed {} resource(s):", r.changed.len());
            for (id, action) in &r.changed {
                match action {
                    engine::Action::Forget => {
                        outln!("  . {} (forgotten: left as it is)", render::escape(id))
                    }
                    _ => outln!("  - {}", render::escape(id)),
                }
            }
        }
        Verb::Refresh => outln!("Refresh complete."),
        Verb::Validate => outln!("The plan is valid."),
    }
}

fn state_command(cmd: StateCommand) -> i32 {
    match cmd {
        StateCommand::Pull { out, state } => backend::pull(&state, &out),
        StateCommand::Push { file, force, state } => backend::push(&state, &file, force),
        StateCommand::Migrate { force, state } => backend::migrate(&state, force),
        StateCommand::List(args) => match args.read() {
            Ok((_, state)) => {
                if args.json {
                    let ids = Json::Array(state.ids().map(|id| Json::String(id.into())).collect());
                    outln!("{}", render::json_text(&ids, false));
                } else {
                    for id in state.ids() {
                        outln!("{}", render::escape(id));
                    }
                }
                exit::OK
            }
            Err(e) => fail(&e),
        },
        StateCommand::Show { id, state: args } => match args.read() {
            Ok((backend, state)) => match state.get(&id) {
                Some(r) => {
                    show_resource(r, args.json);
                    exit::OK
                }
                None => fail(&format!(
                    "{id} is not in {}; `nivis state list` shows what is",
                    backend.describe()
                )),
            },
            Err(e) => fail(&e),
        },
        StateCommand::Rm { ids, state: args } => {
            let opened = args.backend().and_then(|b| {
                b.open(LockHolder::current("nivis state rm"), None)
                    .map_err(|e| e.to_string())
            });
            let mut store = match opened {
                Ok(s) => s,
                Err(e) => return fail(&e),
            };
            for id in &ids {
                if !store.state().contains(id) {
                    return fail(&format!("{id} is not in state; nothing was removed"));
                }
            }
            let changes: Vec<Change> = ids.iter().map(|id| Change::Remove(id.clone())).collect();
            if let Err(e) = store.commit(&changes) {
                return fail(&e);
            }
            if let Err(e) = store.close() {
                return fail(&e);
            }
            for id in &ids {
                outln!(
                    "Removed {} from state (the real object was not destroyed).",
                    render::escape(id)
                );
            }
            exit::OK
        }
    }
}

/// `state show`: the recorded attributes, every sensitive path masked.
fn show_resource(r: &crate::state::ResourceState, json: bool) {
    use crate::secrets::{mask_paths, JSON_MASK, MASK};
    if json {
        let attrs = mask_paths(&r.attributes, &r.sensitive_paths, JSON_MASK);
        let doc = serde_json::json!({"id": r.id, "type": r.type_name, "provider": r.provider, "attributes": attrs});
        outln!("{}", render::json_text(&doc, false));
        return;
    }
    outln!(
        "{} ({})",
        render::escape(&r.id),
        render::escape(&r.type_name)
    );
    if let Json::Object(m) = mask_paths(&r.attributes, &r.sensitive_paths, MASK) {
        for (k, v) in &m {
            let shown = match v {
                Json::String(s) => render::escape(s),
                other => render::json_text(other, false),
            };
            outln!("  {} = {shown}", render::escape(k));
        }
    }
}

fn providers_command(cmd: ProvidersCommand) -> i32 {
    let (run, platforms, upgrade) = match &cmd {
        ProvidersCommand::Lock {
            run,
            platforms,
            upgrade,
        } => (run, platforms.clone(), *upgrade),
        ProvidersCommand::Mirror { run, platforms, .. } => (run, platforms.clone(), false),
        ProvidersCommand::List(run) => (run, Vec::new(), false),
    };
    let mut opts = match options(run, None, "providers") {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    opts.install.update_lock = upgrade;
    let mut platforms_parsed = Vec::new();
    for p in &platforms {
        match p.parse::<crate::registry::Platform>() {
            Ok(p) => platforms_parsed.push(p),
            Err(e) => return fail(&format!("--platform {p}: {e}")),
        }
    }
    if platforms_parsed.is_empty() {
        platforms_parsed.push(crate::registry::Platform::current());
    }
    let install = opts.install.clone();
    let base = opts.source.base_dir();
    let mut sink = engine::Collect::default();
    let ir = match Engine::new(opts, &mut sink).declarations() {
        Ok(ir) => ir,
        Err(e) => return fail(&e),
    };
    let registry: Vec<(String, Option<String>)> = ir
        .providers
        .values()
        .filter(|d| {
            // NixOps4 providers are never installed from a registry.
            d.kind == crate::ir::ProviderKind::Tfplugin
                && crate::registry::is_registry_address(&d.source)
                && !d.source.starts_with('/')
                && !d.source.starts_with('.')
        })
        .map(|d| (d.source.clone(), d.version.clone()))
        .collect();
    let result = match &cmd {
        ProvidersCommand::Lock { .. } => {
            crate::registry::lock(&registry, &platforms_parsed, &install).map(|()| {
                outln!(
                    "Locked {} provider(s) for {} platform(s) in {}.",
                    registry.len(),
                    platforms_parsed.len(),
                    render::escape(&install.lock_file.display().to_string())
                );
            })
        }
        ProvidersCommand::Mirror { dir, .. } => {
            crate::registry::mirror(&registry, &platforms_parsed, &absolute(dir), &install).map(
                |()| {
                    outln!(
                        "Mirrored {} provider(s) for {} platform(s) into {}.",
                        registry.len(),
                        platforms_parsed.len(),
                        render::escape(&dir.display().to_string())
                    );
                },
            )
        }
        ProvidersCommand::List(_) => {
            for (id, decl) in &ir.providers {
                if registry.iter().any(|(s, _)| s == &decl.source) {
                    match crate::registry::install(&decl.source, decl.version.as_deref(), &install)
                    {
                        Ok(i) => {
                            let mut text = format!(
                                "{id}: {} {} from {:?}\n    {}",
                                i.address,
                                i.version,
                                i.from,
                                i.executable.display()
                            );
                            for h in &i.hashes {
                                text.push_str(&format!("\n    {h}"));
                            }
                            outln!("{}", render::escape_text(&text));
                        }
                        Err(e) => return fail(&format!("provider {id}: {e}")),
                    }
                } else {
                    let line = match engine::resolve_source(&decl.source, &base) {
                        Ok(p) => format!("{id}: {} (path, {})", p.display(), decl.kind.name()),
                        Err(e) => format!("{id}: not found: {e}"),
                    };
                    outln!("{}", render::escape(&line));
                }
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => exit::OK,
        Err(e) => fail(&e),
    }
}

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

fn gen_command(args: &GenArgs) -> i32 {
    let cwd = std::env::current_dir().unwrap_or_default();
    let install = match args.install.options() {
        Ok(o) => o,
        Err(e) => return fail(&e),
    };
    let path = match engine::locate(&args.provider, None, &cwd, &install) {
        Ok(p) => p,
        Err(e) => return fail(&format!("--provider: {e}")),
    };
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| provider_short_name(&path));
    let started = std::time::Instant::now();
    let provider =
        match crate::plugin::GrpcProvider::start(&crate::plugin::LaunchSpec::new(&name, &path)) {
            Ok(p) => p,
            Err(e) => return fail(&e),
        };
    let files = crate::codegen::generate(&name, crate::provider::Provider::schema(&provider));
    drop(provider);
    let root = args.out.join(&name);
    if root.exists() {
        if let Err(e) = std::fs::remove_dir_all(&root) {
            return fail(&format!("cannot clear {}: {e}", root.display()));
        }
    }
    for file in &files {
        let target = args.out.join(&file.path);
        if let Some(parent) = target.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                return fail(&format!("cannot create {}: {e}", parent.display()));
            }
        }
        if let Err(e) = std::fs::write(&target, &file.contents) {
            return fail(&format!("cannot write {}: {e}", target.display()));
        }
    }
    let done = format!(
        "Wrote {} file(s) for provider {name} to {} in {:.2}s. Use them with `import {}/{name} lib`.",
        files.len(),
        root.display(),
        started.elapsed().as_secs_f64(),
        args.out.display()
    );
    outln!("{}", render::escape(&done));
    exit::OK
}

fn output_command(args: &StateArgs) -> i32 {
    match args.read() {
        Ok((_, state)) => {
            let mut ledger = crate::ledger::Ledger::default();
            for r in state.iter() {
                ledger.set(&r.id, &r.attributes, &r.sensitive_paths);
            }
            outln!("{}", render::json_text(&ledger.to_json()["outputs"], true));
            exit::OK
        }
        Err(e) => fail(&e),
    }
}

extern "C" fn on_interrupt(_sig: libc::c_int) {
    if interrupt_flag().swap(true, Ordering::SeqCst) {
        // Second Ctrl-C: leave now. Providers die with us (parent-death signal).
        unsafe { libc::_exit(exit::INTERRUPTED) };
    }
    let msg = b"\nInterrupt received: finishing in-flight operations and recording them; press Ctrl-C again to quit at once.\n";
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

fn install_interrupt_handler() {
    // SAFETY: the handler only touches an atomic and calls async-signal-safe functions.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGTERM,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }
}

struct StderrLogger {
    level: log::LevelFilter,
}

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= self.level
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            // Provider log lines and Nix output pass through here: escaped and redacted.
            let _ = writeln!(
                std::io::stderr().lock(),
                "[{}] {}",
                record.level(),
                render::escape_text(&record.args().to_string())
            );
        }
    }

    fn flush(&self) {}
}

fn init_logging(verbose: u8) {
    let from_env = std::env::var("NIVIS_LOG")
        .ok()
        .and_then(|v| v.parse::<log::LevelFilter>().ok());
    let level = from_env.unwrap_or(match verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        2 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    });
    let logger = Box::leak(Box::new(StderrLogger { level }));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
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

    #[test]
    fn durations_and_vars() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("3 weeks").is_err());
        for hostile in [
            "99999999999999999999s",
            "5000000000000000h",
            "1e400s",
            "NaN",
            "-1s",
        ] {
            assert!(parse_duration(hostile).is_err(), "{hostile}");
        }
        assert_eq!(parse_var_value("3"), Json::from(3));
        assert_eq!(parse_var_value("eu-west"), Json::String("eu-west".into()));
        assert_eq!(parse_var_value("[1,2]"), serde_json::json!([1, 2]));
    }
}
