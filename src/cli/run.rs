//! The engine verbs (plan, apply, destroy, refresh, validate): engine options from the flags,
//! the output (human or JSON lines), the confirmation, and the exit status.
//!
//! Not: what is printed (`render`: events, summaries, the JSON envelope) or what the engine
//! does.

use std::io::IsTerminal;
use std::path::Path;
use std::time::{Duration, Instant};

use super::args::RunSpec;
use super::audit::AuditRecord;
use super::{exit, fail, options};
use crate::engine::plan_file::{self, SavedPlan, VariableRecord};
use crate::engine::{Engine, EngineError, Event, Options, Report, Sink, Timing};
use crate::render::{self, Human, JsonLines, Style, Tally};
use crate::secrets::Redactor;
use serde_json::Value as Json;

/// A verb that runs the engine.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Verb {
    Plan,
    Apply,
    Destroy,
    Refresh,
    Validate,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Verb::Plan => "plan",
            Verb::Apply => "apply",
            Verb::Destroy => "destroy",
            Verb::Refresh => "refresh",
            Verb::Validate => "validate",
        }
    }

    /// Whether it changes things only once a person agrees (unless `--auto-approve`).
    fn asks(self) -> bool {
        matches!(self, Verb::Apply | Verb::Destroy | Verb::Refresh)
    }
}

/// Why a run verb stopped short, before or inside the engine.
enum Failure {
    /// Before the engine started: flags, files, no terminal to ask on.
    Setup(String),
    Engine(EngineError),
}

/// Runs `verb` with the flags of `spec`, noting what it changes in `audit`; returns the exit
/// status.
pub(super) fn run_engine(
    spec: &RunSpec<'_>,
    style: Style,
    redactor: &Redactor,
    verb: Verb,
    audit: &AuditRecord,
) -> i32 {
    let mut human = Human::new(style, redactor.clone());
    human.phase_headers = verb == Verb::Apply;
    let mut jsonl = JsonLines::new(redactor.clone());
    if spec.json {
        jsonl.start(verb.name());
    }
    let (status, summary) = {
        let inner: &mut dyn Sink = if spec.json { &mut jsonl } else { &mut human };
        let mut tally = Tally::new(inner);
        tally.drift_is_change = verb == Verb::Refresh || spec.refresh_only;
        let status = run_verb(spec, style, redactor, (verb, audit), &mut tally);
        (status, tally.summary_json())
    };
    if spec.json {
        jsonl.summary(verb.name(), summary, status);
    }
    status
}

/// Runs the verb, sending events, summary lines and the `error` event through `tally`;
/// returns the exit status.
fn run_verb(
    spec: &RunSpec<'_>,
    style: Style,
    redactor: &Redactor,
    (verb, audit): (Verb, &AuditRecord),
    tally: &mut Tally<'_>,
) -> i32 {
    let started = Instant::now();
    let calls_before = crate::plugin::call_times();
    let cpu_before = own_cpu_time();
    // What the run does is noted for its audit record, and what is in flight for the line a
    // second Ctrl-C prints.
    let mut recorder = audit.recorder(&mut *tally);
    let mut in_flight = InFlight {
        inner: &mut recorder,
    };
    let result = drive(spec, style, redactor, (verb, audit), &mut in_flight);
    match result {
        Ok(report) => {
            if let Some(r) = &report {
                let calls = crate::plugin::call_times().since(calls_before);
                let timing = Timing {
                    wall: started.elapsed(),
                    nix: r.nix_time,
                    providers: calls.busy,
                    provider_calls: calls.calls,
                    provider_call_time: calls.summed,
                    cpu: own_cpu_time().saturating_sub(cpu_before),
                };
                log::info!(
                    "{} took {:.2}s: {:.2}s in Nix evaluation, {:.2}s waiting on providers ({} calls), {:.2}s in Nivis itself",
                    verb.name(),
                    timing.wall.as_secs_f64(),
                    timing.nix.as_secs_f64(),
                    timing.providers.as_secs_f64(),
                    timing.provider_calls,
                    timing.own().as_secs_f64(),
                );
                tally.event(Event::Timing(timing));
            }
            if !spec.json {
                let command = match () {
                    _ if spec.refresh_only && verb == Verb::Plan => "refresh-only",
                    _ if spec.plan_destroy => "plan-destroy",
                    _ => verb.name(),
                };
                tally.source_flags = Some(source_flags(spec));
                render::print_summary(redactor, command, report.as_ref(), tally);
            }
            if spec.detailed_exitcode && tally.has_changes() {
                exit::CHANGES
            } else {
                exit::OK
            }
        }
        Err(failure) => {
            if spec.json {
                // CI reads stdout: the failure is its last line; stderr says it for humans.
                tally.event(command_failed(&failure));
            }
            report_failure(failure, style, redactor)
        }
    }
}

/// The flags that chose this run's plan source and state, for the command a summary says to
/// run next: a saved plan does not name its source (DESIGN §91), so `nivis apply FILE` needs
/// them again. `--backend-config` values are left out (they may hold credentials).
fn source_flags(spec: &RunSpec<'_>) -> Vec<String> {
    let mut flags = Vec::new();
    let mut flag = |name: &str, value: String| {
        flags.push(name.to_string());
        flags.push(value);
    };
    match &spec.source.file {
        Some(file) => flag("--file", file.display().to_string()),
        None if spec.source.flake != "." => flag("--flake", spec.source.flake.clone()),
        None => {}
    }
    if let Some(attr) = &spec.source.attr {
        flag("--attr", attr.clone());
    }
    if let Some(state) = spec.state {
        if let Some(path) = &state.state {
            flag("--state", path.display().to_string());
        }
        if state.env != "default" {
            flag("--env", state.env.clone());
        }
    }
    flags
}

/// Forwards every event and keeps `last_words` current with the operations sent to a provider
/// and not yet recorded: a second Ctrl-C names them.
struct InFlight<'a> {
    inner: &'a mut dyn Sink,
}

impl Sink for InFlight<'_> {
    fn event(&mut self, event: Event) {
        match &event {
            Event::Started { id, action, .. } => crate::last_words::started(action.class(), id),
            Event::Finished { id, .. }
            | Event::Unrecorded { id, .. }
            | Event::Failed { id, .. } => crate::last_words::ended(id),
            _ => {}
        }
        self.inner.event(event);
    }
}

/// Sets the engine up from the flags and runs the verb.
fn drive(
    spec: &RunSpec<'_>,
    style: Style,
    redactor: &Redactor,
    (verb, audit): (Verb, &AuditRecord),
    sink: &mut dyn Sink,
) -> Result<Option<Report>, Failure> {
    let mut opts = options(spec, verb.name(), redactor, Some(audit)).map_err(Failure::Setup)?;
    opts.save = spec.out.is_some();
    let plan_locks = verb == Verb::Plan && spec.read_lock;
    let _read_lock = plan_locks.then(|| lock_to_read(&opts)).transpose()?;
    let mut saved_destroy = false;
    if let Some(file) = spec.plan_file {
        saved_destroy = use_saved_plan(&mut opts, file, sink).map_err(Failure::Setup)?;
    }
    // A saved plan was the review: `apply FILE` applies it without asking (as Terraform).
    let needs_confirm = verb.asks() && !spec.auto_approve && spec.plan_file.is_none();
    let can_ask = !spec.json && std::io::stdin().is_terminal();
    // Refresh asks only when something drifted, so it can run unattended until then.
    if needs_confirm && !can_ask && verb != Verb::Refresh {
        return Err(Failure::Setup(format!(
            "{} needs confirmation, but there is no terminal to ask on: run with --auto-approve",
            verb.name()
        )));
    }
    let mut engine = Engine::new(opts, &mut *sink);
    let question = match verb {
        Verb::Apply => {
            "Apply these changes? Later phases will apply what Nix derives from the new outputs."
        }
        Verb::Destroy => "Destroy all the resources above?",
        _ => "Record what was read in the state?",
    };
    let mut ask = || can_ask && render::confirm_plan(question);
    let confirm: crate::engine::Confirm<'_> = if needs_confirm { Some(&mut ask) } else { None };
    let result = match verb {
        Verb::Plan if spec.refresh_only => engine.plan_refresh_only().map(Some),
        Verb::Plan if spec.plan_destroy => engine.plan_destroy().map(Some),
        Verb::Plan => engine.plan().map(Some),
        Verb::Refresh => engine.refresh(confirm).map(Some),
        // A saved destroy plan is carried out by the destroy run, checked against it.
        Verb::Apply if saved_destroy => engine.destroy(None).map(Some),
        Verb::Apply => engine.apply(confirm).map(Some),
        Verb::Destroy => engine.destroy(confirm).map(Some),
        Verb::Validate => match engine.validate() {
            Ok(diags) => {
                render::write_diagnostics(style, redactor, &diags.0);
                if diags.has_errors() {
                    Err(EngineError::Invalid)
                } else {
                    Ok(None)
                }
            }
            Err(e) => Err(e),
        },
    };
    drop(engine);
    if let (
        Some(out),
        Ok(Some(Report {
            saved: Some(saved), ..
        })),
    ) = (spec.out, &result)
    {
        let sha256 = write_saved_plan(out, saved, redactor).map_err(Failure::Setup)?;
        sink.event(Event::PlanFile {
            path: out.display().to_string(),
            sha256,
            applying: false,
        });
    }
    result.map_err(|e| match e {
        EngineError::Declined if !can_ask => Failure::Setup(
            "objects drifted (shown above) and there is no terminal to ask on: nothing was \
             recorded; run `nivis refresh --auto-approve` to record what was read"
                .into(),
        ),
        e => Failure::Engine(e),
    })
}

/// `plan`'s hold on the state lock, refused (naming the holder) while an apply holds it; held
/// until the plan is done, so no apply changes the state while it is read.
fn lock_to_read(opts: &Options) -> Result<crate::state::ReadLock, Failure> {
    let holder = crate::state::LockHolder::current(&opts.command);
    opts.backend
        .lock_to_read(holder, opts.lock_timeout)
        .map_err(|e| match e {
            e @ crate::state::StateError::Locked { .. } => Failure::Setup(format!(
                "{e}. To plan without waiting, `--lock=false` reads the state without the lock \
                 (what the holder is changing may then be half recorded)"
            )),
            e => Failure::Engine(EngineError::State(e)),
        })
}

/// `apply FILE`: the run applies the saved plan, with its `--target` and `--replace`. Returns
/// whether it is a destroy plan.
fn use_saved_plan(opts: &mut Options, file: &Path, sink: &mut dyn Sink) -> Result<bool, String> {
    let redactor = &opts.redactor;
    let (saved, sha256) = read_saved_plan(file, redactor)?;
    if !opts.targets.is_empty() || !opts.replace.is_empty() {
        return Err(
            "a saved plan carries its own --target and --replace: give neither with FILE".into(),
        );
    }
    opts.targets = saved.basis.targets.clone();
    opts.replace = saved.basis.replace.clone();
    // The plan's non-sensitive variables apply again unless given anew (then they must be
    // equal); a sensitive one is only a digest in the file, so it must be given again.
    for (name, record) in &saved.basis.variables {
        let given = opts.vars.contains_key(name) || opts.var_text.contains_key(name);
        match record {
            VariableRecord::Value(_) if given => {}
            VariableRecord::Value(Json::String(text)) => {
                opts.var_text.insert(name.clone(), text.clone());
            }
            VariableRecord::Value(value) => {
                opts.vars.insert(name.clone(), value.clone());
            }
            VariableRecord::Hmac(_) => {}
            VariableRecord::Unrecorded => {
                let _ = std::io::Write::write_fmt(
                    &mut std::io::stderr(),
                    format_args!("Note: the saved plan holds no digest of the sensitive variable {}: the state it was made against held no key to make one with yet (a state gets its key the first time a run writes it), so the value given now cannot be checked against the plan's.\n",
                    crate::render::escape_text(redactor, name)),
                );
            }
        }
    }
    let destroy = saved.destroy;
    opts.saved = Some(std::sync::Arc::new(saved));
    sink.event(Event::PlanFile {
        path: file.display().to_string(),
        sha256,
        applying: true,
    });
    Ok(destroy)
}

/// Reads and checks a saved plan; returns it with the content hash of its bytes.
fn read_saved_plan(file: &Path, redactor: &Redactor) -> Result<(SavedPlan, String), String> {
    let bytes = crate::privfile::open_read(file, "the saved plan")
        .map_err(|e| e.into_io())
        .and_then(|mut f| {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut f, &mut bytes).map(|_| bytes)
        })
        .map_err(|e| format!("cannot read the saved plan {}: {e}", file.display()))?;
    let saved = SavedPlan::parse(&bytes).map_err(|e| format!("{}: {e}", file.display()))?;
    if saved.to_canonical(redactor).as_bytes() != bytes.as_slice() {
        return Err(format!(
            "{}: not the canonical bytes `nivis plan --out` writes: it was edited; make the plan again",
            file.display()
        ));
    }
    Ok((saved, plan_file::sha256(&bytes)))
}

/// Writes the saved plan's canonical bytes to `out` (mode 0600, never through a link); returns
/// their content hash.
fn write_saved_plan(out: &Path, saved: &SavedPlan, redactor: &Redactor) -> Result<String, String> {
    let text = saved.to_canonical(redactor);
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty());
    crate::privfile::check_dirs(dir.unwrap_or(Path::new(".")), "the saved plan")
        .map_err(|e| e.to_string())?;
    crate::rundir::write_private_file(out, text.as_bytes())
        .map_err(|e| format!("cannot write the plan to {}: {e}", out.display()))?;
    Ok(plan_file::sha256(text.as_bytes()))
}

/// `nivis show FILE [--json]`: a saved plan, as `nivis plan` printed it, or its JSON.
pub(super) fn show(file: &Path, json: bool, style: Style, redactor: &Redactor) -> i32 {
    let (saved, sha256) = match read_saved_plan(file, redactor) {
        Ok(s) => s,
        Err(e) => return fail(redactor, &e),
    };
    if json {
        let value: serde_json::Value =
            serde_json::from_str(&saved.to_canonical(redactor)).expect("canonical JSON parses");
        render::print_json(redactor, &value);
        return exit::OK;
    }
    render::print_saved_plan_head(redactor, &file.display().to_string(), &sha256, &saved);
    let mut human = Human::new(style, redactor.clone());
    let events = match saved.events() {
        Ok(events) => events,
        Err(e) => return fail(redactor, &format!("{}: {e}", file.display())),
    };
    let mut tally = Tally::new(&mut human);
    for event in events {
        tally.event(event);
    }
    // The next step names the file; the flags it was planned with are not in it (DESIGN §91).
    tally.saved_to = Some(file.display().to_string());
    tally.source_flags = None;
    render::print_summary(redactor, "plan", None, &tally);
    exit::OK
}

/// The `error` event ending a failed command's JSON lines.
fn command_failed(failure: &Failure) -> Event {
    let (message, diagnostics) = match failure {
        Failure::Setup(message) => (message.clone(), Vec::new()),
        Failure::Engine(EngineError::Diagnostics(d)) => {
            (format!("{} error(s)", d.errors().count()), d.0.clone())
        }
        Failure::Engine(e) => (e.to_string(), Vec::new()),
    };
    Event::CommandFailed {
        message,
        diagnostics,
    }
}

/// Tells a person on stderr why the command failed; returns the exit status.
fn report_failure(failure: Failure, style: Style, redactor: &Redactor) -> i32 {
    match failure {
        Failure::Setup(message) => fail(redactor, &message),
        Failure::Engine(EngineError::Diagnostics(d)) => {
            render::write_diagnostics(style, redactor, &d.0);
            exit::ERROR
        }
        // Its diagnostics are printed already.
        Failure::Engine(EngineError::Invalid) => exit::ERROR,
        Failure::Engine(EngineError::Interrupted) => {
            let _ = fail(redactor, &EngineError::Interrupted);
            exit::INTERRUPTED
        }
        // Stopped by Ctrl-C, the results rescued: the error says where they are.
        Failure::Engine(e @ EngineError::StateWrite(_))
            if crate::engine::interrupt_flag().load(std::sync::atomic::Ordering::SeqCst) =>
        {
            let _ = fail(redactor, &e);
            exit::INTERRUPTED
        }
        Failure::Engine(EngineError::Declined) => {
            render::print_declined(redactor, &EngineError::Declined.to_string());
            exit::ERROR
        }
        Failure::Engine(e) => fail(redactor, &e),
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
