//! The command line: dispatch, resolution of flags into engine options, and what commands print.
//!
//! Owns: running each verb, the confirmation prompt, the Ctrl-C handler, exit codes, logging and
//! the text of summaries. The flag definitions live in `cli::args`, variable precedence in
//! `cli::vars`, `nivis output` in `cli::output`, `state list|show|rm` in `cli::state`, the
//! state backend and its own verbs in `cli::backend`, completion in `cli::complete` and
//! generated documentation in `cli::docs`. Everything printed goes through `render`'s escaping
//! and redaction. [`run`] makes the run's `secrets::Redactor` and hands it to every verb, the
//! logger, the engine (`Options`) and the backend. Not: provider or state internals except
//! through `engine` and `state`'s read API.

mod args;
mod audit;
mod audit_log;
mod backend;
pub(crate) mod complete;
mod console;
mod convert;
mod docs;
mod fmt;
mod gen;
mod graph;
mod import;
mod output;
mod policy;
mod remote_state;
mod review;
mod run;
mod state;
mod state_provider;
mod state_repair;
pub(crate) mod suggest;
mod vars;
mod version;

pub(crate) use self::args::Cli;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::engine::{self, interrupt_flag, Engine, Options};
use crate::nixeval::PlanSource;
use crate::render::{self, outln, Style};
use crate::secrets::Redactor;
use crate::state::{Backend, DEFAULT_ENV};

use self::args::{
    Command, EnvCommand, ForceUnlockArgs, InstallArgs, ManArgs, PolicyCommand, ProvidersCommand,
    RunSpec, StateArgs,
};

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

/// Parses a duration the way every flag and `nivis log --since` read one: humantime's grammar
/// (`30s`, `2m`, `250ms`, `1h 30m`, `1d`), or a bare number of seconds (`30`, `1.5`), up to a
/// year. One grammar for the whole command line (DESIGN §55).
pub(crate) fn parse_duration(s: &str) -> Result<Duration, String> {
    const MAX: Duration = Duration::from_secs(365 * 24 * 3600);
    let text = s.trim();
    let parsed = match text.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs >= 0.0 => {
            Duration::try_from_secs_f64(secs).map_err(|e| format!("{s:?}: {e}"))?
        }
        Ok(_) => return Err(format!("{s:?} is not a duration like 30s, 2m or 1d")),
        Err(_) => humantime::parse_duration(text)
            .map_err(|e| format!("{s:?} is not a duration like 30s, 2m or 1d ({e})"))?,
    };
    if parsed > MAX {
        return Err(format!("{s:?} is longer than a year"));
    }
    Ok(parsed)
}

/// Exit codes.
pub(crate) mod exit {
    /// Success.
    pub(crate) const OK: i32 = 0;
    /// Something failed.
    pub(crate) const ERROR: i32 = 1;
    /// `--detailed-exitcode`: the run succeeded and there are changes (drift alone only for
    /// `refresh` and `--refresh-only`, DESIGN §90).
    pub(crate) const CHANGES: i32 = 2;
    /// Interrupted by Ctrl-C.
    pub(crate) const INTERRUPTED: i32 = 130;
}

/// Runs the parsed command line; returns the exit code.
pub fn run(cli: Cli) -> i32 {
    // What this command invocation knows to be secret: every part of the run that learns a
    // secret (state, backend, secret sources, the engine) teaches this one, and everything
    // that prints (the logger, the renderers, error messages) redacts with it (DESIGN §75).
    let redactor = Redactor::new();
    init_logging(cli.verbose, &redactor);
    install_interrupt_handler();
    crate::nixeval::show_trace(cli.show_trace);
    let style = Style::detect(cli.no_color);
    let record = audit::AuditRecord::default();
    let status = dispatch(cli.command, style, &redactor, &record);
    // A mutating verb's record goes to the state's audit log with its outcome.
    audit::finish(record, status, &redactor);
    status
}

/// Runs `command`; a verb that changes state begins `a`, the command's audit record.
// Long because it has one arm per verb.
fn dispatch(command: Command, style: Style, r: &Redactor, a: &audit::AuditRecord) -> i32 {
    match command {
        Command::Plan(args) => run::run_engine(&args.spec(), style, r, run::Verb::Plan, a),
        // Terraform's spelling of `refresh`: the same run, asking before it records drift.
        Command::Apply(args) if args.refresh_only => {
            run::run_engine(&args.spec(), style, r, run::Verb::Refresh, a)
        }
        Command::Apply(args) => run::run_engine(&args.spec(), style, r, run::Verb::Apply, a),
        Command::Destroy(args) => run::run_engine(&args.spec(), style, r, run::Verb::Destroy, a),
        Command::Refresh(args) => run::run_engine(&args.spec(), style, r, run::Verb::Refresh, a),
        Command::Import(args) => import::run(&args, style, r, a),
        Command::Validate(args) => run::run_engine(&args.spec(), style, r, run::Verb::Validate, a),
        Command::Show(args) => match &args.file {
            Some(file) => run::show(file, args.json, style, r),
            None => state::show_all(&args.state, args.json, r),
        },
        Command::State(cmd) => state::run(cmd, r, a),
        Command::Output(args) => output::run(&args, r),
        Command::Gen(args) => gen::run(&args, r),
        Command::Providers(cmd) => providers_command(cmd, r),
        Command::ForceUnlock(args) => backend::force_unlock(&args, r, a),
        Command::Env(EnvCommand::List { state, json }) => backend::env_list(&state, json, r),
        Command::Completion(args) => {
            let mut out = render::stdout();
            match complete::write_script(args.shell, &mut out).and_then(|()| out.flush()) {
                Ok(()) => exit::OK,
                Err(e) => fail(r, &format!("cannot write the completion script: {e}")),
            }
        }
        Command::Man(args) => man_command(&args, r),
        Command::Version(args) => version::run(&args, r),
        Command::Graph(args) => graph::run(&args, r),
        Command::Console(args) => console::run(&args, style, r),
        Command::Policy(PolicyCommand::Test(args)) => policy::test(&args, r),
        Command::Diff(args) => review::diff(&args, r),
        Command::Why(args) => review::why(&args, r),
        Command::Test(args) => review::test(&args, r),
        Command::Log(args) => audit_log::run(&args, r),
        Command::Convert(args::ConvertCommand::Terraform(args)) => {
            convert::terraform(&args, style, r, a)
        }
        Command::Fmt(args) => fmt::run(&args, r),
    }
}

fn man_command(args: &ManArgs, redactor: &Redactor) -> i32 {
    let result = if let Some(dir) = &args.dir {
        docs::write_man_pages(dir)
            .map_err(|e| format!("cannot write man pages to {}: {e}", dir.display()))
    } else {
        let mut out = render::stdout();
        let written = if args.markdown {
            out.write_all(docs::markdown_reference().as_bytes())
        } else {
            docs::write_man(&mut out)
        };
        written
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot write the manual: {e}"))
    };
    match result {
        Ok(()) => exit::OK,
        Err(e) => fail(redactor, &e),
    }
}

fn fail(redactor: &Redactor, e: &dyn std::fmt::Display) -> i32 {
    let _ = writeln!(
        std::io::stderr(),
        "Error: {}",
        render::escape_text(redactor, &e.to_string())
    );
    exit::ERROR
}

/// Where the plan is: `--file` (with `--attr`), or `--flake REF[#ATTR]` (or `--attr`).
fn plan_source(source: &args::SourceArgs) -> Result<PlanSource, String> {
    if let Some(file) = &source.file {
        // Nix would read a device or a pipe without end.
        if std::fs::metadata(file).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
            return Err(format!(
                "--file {}: not a regular file or a directory",
                file.display()
            ));
        }
        return Ok(PlanSource::File {
            path: absolute(file),
            attr: source.attr.clone(),
        });
    }
    let (flake, attr) = match source.flake.split_once('#') {
        Some((flake, attr)) => {
            if let Some(other) = &source.attr {
                return Err(format!(
                    "--flake {} names the attribute {attr:?} and --attr names {other:?}: give it once",
                    source.flake
                ));
            }
            if attr.is_empty() {
                return Err(format!("--flake {}: nothing after '#'", source.flake));
            }
            (
                if flake.is_empty() { "." } else { flake },
                Some(attr.to_string()),
            )
        }
        None => (source.flake.as_str(), source.attr.clone()),
    };
    // Nix resolves a relative directory against its own working directory, and refuses a
    // relative `path:` in `builtins.getFlake`: hand it absolute paths. A directory is searched
    // upward for flake.nix, as Nix does; without one it stays as given (state commands work
    // there; `options` refuses to evaluate it).
    let flake = if Path::new(flake).is_dir() {
        let dir = absolute(Path::new(flake));
        crate::project::search_upward(&dir)
            .unwrap_or(dir)
            .display()
            .to_string()
    } else if let Some(rel) = flake.strip_prefix("path:").filter(|p| !p.starts_with('/')) {
        format!("path:{}", absolute(Path::new(rel)).display())
    } else {
        flake.to_string()
    };
    Ok(PlanSource::Flake {
        flake,
        attr: attr.unwrap_or_else(|| "nivis.plan".into()),
    })
}

/// Prints the warnings among the events a review collected (its placeholders, say), which a
/// collecting sink would otherwise keep to itself.
pub(super) fn say_warnings(events: &[crate::engine::Event], redactor: &Redactor) {
    for event in events {
        if let crate::engine::Event::Warning(d) = event {
            let _ = writeln!(
                std::io::stderr(),
                "Warning: {}",
                render::escape_text(redactor, &d.summary)
            );
        }
    }
}

/// Refuses (or with `--trust-group` warns about) a plan whose files someone else can change:
/// they would choose what runs as us. Judged before anything evaluates them (DESIGN §93).
fn check_code(source: &PlanSource, trust_group: bool, redactor: &Redactor) -> Result<(), String> {
    if let Some(warning) =
        crate::project::check_code(source, trust_group).map_err(|e| e.to_string())?
    {
        let _ = writeln!(
            std::io::stderr(),
            "Warning: {}",
            render::escape_text(redactor, &warning)
        );
    }
    Ok(())
}

/// The variables read from the plan's secret `sources`, before any evaluation or provider
/// call; a review or a read runs none (`REVIEW_VERBS`, DESIGN §93).
fn secrets_for(
    verb: &str,
    spec: &RunSpec<'_>,
    vars: &mut vars::VarValues,
    sources: &Option<serde_json::Value>,
    source: &PlanSource,
    redactor: &Redactor,
) -> Result<Vec<String>, String> {
    if REVIEW_VERBS.contains(&verb) {
        return Ok(Vec::new());
    }
    let (base, trust_group) = (source.base_dir(), spec.source.trust_group);
    vars::add_secret_sources(vars, sources.as_ref(), &base, redactor, trust_group)
}

/// The verbs that review or read a plan and change nothing: they run no secret source, and
/// sensitive variables nobody gave are placeholders.
const REVIEW_VERBS: &[&str] = &["diff", "why", "graph", "validate", "output", "console"];

/// The run's variables: `--var-file`s, `--var`s, the values a verb holds in memory (convert's
/// proof) and `NIVIS_VAR_*`, with the notes `vars::collect` made printed.
fn collect_vars(spec: &RunSpec<'_>, redactor: &Redactor) -> Result<vars::VarValues, String> {
    let in_memory = (spec.vars.in_memory.0.iter())
        .map(|(name, value)| (format!("{}{name}", vars::ENV_PREFIX), value.clone()));
    let vars = vars::collect(
        &spec.vars.var_files,
        &spec.vars.vars,
        in_memory.chain(vars::from_env()?),
    )?;
    for note in &vars.notes {
        let _ = writeln!(
            std::io::stderr(),
            "Note: {}",
            render::escape_text(redactor, note)
        );
    }
    Ok(vars)
}

/// The engine's options for `verb`; a verb that changes state begins `audit`, its record, once
/// it knows the state.
fn options(
    spec: &RunSpec<'_>,
    verb: &str,
    redactor: &Redactor,
    audit: Option<&audit::AuditRecord>,
) -> Result<Options, String> {
    let source = plan_source(spec.source)?;
    crate::project::require_flake(&source).map_err(|e| e.to_string())?;
    check_code(&source, spec.source.trust_group, redactor)?;
    // Before anything evaluates the flake (and copies its tree into the store).
    for file in &spec.vars.var_files {
        crate::project::check_var_file(file, &source).map_err(|e| e.to_string())?;
    }
    let mut vars = collect_vars(spec, redactor)?;
    backend::print_note(crate::project::large_copy_warning(&source), redactor);
    let (backend, settings) = match spec.state {
        Some(state) => {
            let (backend, placement, settings) =
                backend::resolve_project(state, &source, redactor)?;
            let local = matches!(backend, Backend::Local { .. }) && backend.env() == DEFAULT_ENV;
            let relative = placement.as_ref().and_then(|p| p.unclaimed_relative());
            if let Some(refusal) = relative.filter(|_| local && matches!(verb, "plan" | "apply")) {
                return Err(refusal);
            }
            if verb == "apply" && matches!(backend, Backend::Local { .. }) {
                hint_path_keyed(placement.as_ref().map(|p| &p.identity), &source);
            }
            (backend, settings)
        }
        // A verb that reads no state (validate): a local backend that is never opened.
        None => (
            Backend::configure(None, &[], DEFAULT_ENV, Path::new("/dev/null"), redactor)
                .map_err(|e| e.to_string())?,
            settings_of(&source)?,
        ),
    };
    let sources = settings.secret_sources;
    // Read once, before anything evaluates the plan: every evaluation's ledger holds them.
    let remote_states = remote_state::read_all(settings.remote_states.as_ref(), redactor)
        .map_err(|e| e.to_string())?;
    // The commands that change things (a plan of any kind changes nothing) are audited.
    if let Some(record) =
        audit.filter(|_| matches!(verb, "apply" | "destroy" | "refresh" | "import"))
    {
        record.begin(&backend, &format!("nivis {verb}"));
    }
    let secret_vars = secrets_for(verb, spec, &mut vars, &sources, &source, redactor)?;
    Ok(Options {
        source,
        backend,
        parallelism: spec.parallelism.max(1),
        operation_timeout: spec.operation_timeout,
        max_phases: spec.max_phases,
        targets: spec.targets.to_vec(),
        replace: spec.replace.to_vec(),
        saved: None,
        save: false,
        build: spec.build,
        refresh: spec.refresh,
        vars: vars.values,
        var_text: vars.text,
        flag_vars: spec
            .vars
            .vars
            .iter()
            .filter_map(|v| v.split_once('=').map(|(name, _)| name.to_string()))
            .collect(),
        secret_vars,
        placeholder_variables: REVIEW_VERBS.contains(&verb),
        lock_timeout: spec.lock_timeout,
        command: format!("nivis {verb}"),
        install: spec.install.options()?,
        overrides: crate::policy::Overrides {
            rules: spec.overrides.to_vec(),
            reason: spec.override_reason.map(str::to_string),
        },
        remote_states: std::sync::Arc::new(remote_states),
        redactor: redactor.clone(),
    })
}

/// The flake's settings (`secretSources`, `remoteStates`), for a verb that reads no state (the
/// others read them with the backend, in one evaluation).
fn settings_of(source: &PlanSource) -> Result<crate::nixeval::ProjectSettings, String> {
    match source {
        PlanSource::Flake { flake, attr }
            if !Path::new(flake).is_dir() || Path::new(flake).join("flake.nix").exists() =>
        {
            crate::nixeval::project_settings(flake, attr).map_err(|e| e.to_string())
        }
        _ => Ok(Default::default()),
    }
}

/// Says, on `apply` with a local state, that a local project's state is keyed by its path (it
/// has neither a declared name nor git history): moving the directory would leave it behind.
fn hint_path_keyed(identity: Option<&crate::project::Identity>, source: &PlanSource) {
    let local = matches!(source, PlanSource::File { .. })
        || !matches!(
            crate::project::copied_tree(source),
            crate::project::Copied::Nothing
        );
    if identity.is_some_and(|i| i.kind == crate::project::IdentityKind::Location) && local {
        let _ = writeln!(
            std::io::stderr(),
            "Hint: this project's state is keyed by its path; declare `nivis.project = \"NAME\";` \
             beside nivis.plan (or commit it to git) to keep the state when the directory moves."
        );
    }
}

/// `p` made absolute against the working directory, without `.` components (`nivis plan
/// --flake .` names the directory itself, in messages and to Nix).
fn absolute(p: &Path) -> PathBuf {
    let joined = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    joined
        .components()
        .filter(|c| *c != std::path::Component::CurDir)
        .collect()
}

/// `--platform` values (this machine's when none is given).
fn parse_platforms(given: &[String]) -> Result<Vec<crate::registry::Platform>, String> {
    let mut parsed = Vec::new();
    for p in given {
        parsed.push(
            p.parse::<crate::registry::Platform>()
                .map_err(|e| format!("--platform {p}: {e}"))?,
        );
    }
    if parsed.is_empty() {
        parsed.push(crate::registry::Platform::current());
    }
    Ok(parsed)
}

/// `nivis providers list`: where each provider comes from, its version and hashes.
fn list_providers(
    redactor: &Redactor,
    ir: &crate::ir::Ir,
    registry: &[(String, Option<String>)],
    install: &crate::registry::InstallOptions,
    base: &Path,
) -> Result<(), String> {
    for (id, decl) in &ir.providers {
        if registry.iter().any(|(s, _)| s == &decl.source) {
            let i = crate::registry::install(&decl.source, decl.version.as_deref(), install)
                .map_err(|e| format!("provider {id}: {e}"))?;
            let mut text = format!(
                "{id}: {} {} from {}\n    {}",
                i.address,
                i.version,
                i.from,
                i.executable.display()
            );
            for h in &i.hashes {
                text.push_str(&format!("\n    {h}"));
            }
            outln!("{}", render::escape_text(redactor, &text));
        } else {
            let line = match engine::resolve_source(&decl.source, base) {
                Ok(p) => format!("{id}: {} (path, {})", p.display(), decl.kind.name()),
                Err(e) => format!("{id}: not found: {e}"),
            };
            outln!("{}", render::escape(redactor, &line));
        }
    }
    Ok(())
}

fn providers_command(cmd: ProvidersCommand, redactor: &Redactor) -> i32 {
    let (plan, platforms, upgrade) = match &cmd {
        ProvidersCommand::Lock {
            plan,
            platforms,
            upgrade,
        } => (plan, platforms.clone(), *upgrade),
        ProvidersCommand::Mirror {
            plan, platforms, ..
        } => (plan, platforms.clone(), false),
        ProvidersCommand::List(plan) => (plan, Vec::new(), false),
    };
    let mut opts = match options(&plan.spec(), "providers", redactor, None) {
        Ok(o) => o,
        Err(e) => return fail(redactor, &e),
    };
    opts.install.update_lock = upgrade;
    let platforms_parsed = match parse_platforms(&platforms) {
        Ok(p) => p,
        Err(e) => return fail(redactor, &e),
    };
    let install = opts.install.clone();
    let base = opts.source.base_dir();
    let mut sink = engine::Collect::default();
    let ir = match Engine::new(opts, &mut sink).declarations() {
        Ok(ir) => ir,
        Err(e) => return fail(redactor, &e),
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
                    render::escape(redactor, &install.lock_file.display().to_string())
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
                        render::escape(redactor, &dir.display().to_string())
                    );
                },
            )
        }
        ProvidersCommand::List(_) => {
            return match list_providers(redactor, &ir, &registry, &install, &base) {
                Ok(()) => exit::OK,
                Err(e) => fail(redactor, &e),
            }
        }
    };
    match result {
        Ok(()) => exit::OK,
        Err(e) => fail(redactor, &e),
    }
}

extern "C" fn on_interrupt(_sig: libc::c_int) {
    if interrupt_flag().swap(true, Ordering::SeqCst) {
        // Second Ctrl-C: leave now. Providers die with us (parent-death signal); the channel
        // of secrets for Nix goes first.
        crate::rundir::remove_live_files();
        crate::last_words::write_out();
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
        // A closed terminal or a dropped ssh session: end as cleanly as on Ctrl-C (by default
        // the process would die with the run directory and its secrets left behind).
        libc::signal(
            libc::SIGHUP,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }
}

struct StderrLogger {
    level: log::LevelFilter,
    /// The run's secrets (the process runs one command, so one run).
    redactor: Redactor,
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
                render::escape_text(&self.redactor, &record.args().to_string())
            );
        }
    }

    fn flush(&self) {}
}

fn init_logging(verbose: u8, redactor: &Redactor) {
    let from_env = std::env::var("NIVIS_LOG")
        .ok()
        .and_then(|v| v.parse::<log::LevelFilter>().ok());
    let level = from_env.unwrap_or(match verbose {
        0 => log::LevelFilter::Warn,
        1 => log::LevelFilter::Info,
        2 => log::LevelFilter::Debug,
        _ => log::LevelFilter::Trace,
    });
    let logger = Box::leak(Box::new(StderrLogger {
        level,
        redactor: redactor.clone(),
    }));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86400));
        assert_eq!(parse_duration("1h 30m").unwrap(), Duration::from_secs(5400));
        assert!(parse_duration("3 fortnights").is_err());
        assert!(parse_duration("2y").is_err(), "over a year");
        for hostile in [
            "99999999999999999999s",
            "5000000000000000h",
            "1e400s",
            "NaN",
            "-1s",
        ] {
            assert!(parse_duration(hostile).is_err(), "{hostile}");
        }
    }
}
