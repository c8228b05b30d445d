//! How engine events look: a human printer (colours on a TTY, none for NO_COLOR or a pipe) and
//! a JSON-lines printer for CI.
//!
//! Owns every character Nivis prints about a run, through the one escaping function everything
//! printed goes through (`render::escape`: [`escape`], with [`escape_text`] for multi-line
//! messages and [`json_text`] for JSON; the secrets the run's [`Redactor`] knows redacted on
//! the way: each printer holds the run's, each function is given it), and the progress ticker
//! (`render::ticker`). Not: decisions (the engine makes them), nor what is secret (`secrets`).

mod deaths;
mod escape;
mod jsonl;
mod lines;
mod report;
mod summary;
mod ticker;

pub(crate) use self::escape::{escape, escape_unredacted, json_text_unredacted, quote};
pub use self::escape::{escape_text, json_text};
pub(crate) use self::jsonl::JsonLines;
pub(crate) use self::report::{
    confirm, confirm_plan, print_declined, print_json, print_saved_plan_head, print_summary,
    write_diagnostics,
};
pub(crate) use self::summary::{plan_summary, Tally};

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::diag::{Diagnostic, Severity};
use crate::engine::{Action, AttrChange, Event, Sink};
use crate::secrets::Redactor;
use crate::value::{render_path, Value};

static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Standard output, for everything Nivis prints there. A write that fails (the reader went
/// away, as in `nivis apply | head -1`) marks stdout closed: from then on output is dropped
/// without another attempt, and the work goes on. The exit code still says how the work went.
pub(crate) struct Stdout(io::StdoutLock<'static>);

/// Locks standard output (see [`Stdout`]).
pub(crate) fn stdout() -> Stdout {
    Stdout(io::stdout().lock())
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if STDOUT_CLOSED.load(Ordering::Relaxed) {
            return Ok(buf.len());
        }
        match self.0.write(buf) {
            Err(e) if e.kind() != io::ErrorKind::Interrupted => {
                STDOUT_CLOSED.store(true, Ordering::Relaxed);
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if !STDOUT_CLOSED.load(Ordering::Relaxed) && self.0.flush().is_err() {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// `println!` through [`Stdout`]: never panics.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!($crate::render::stdout(), $($arg)*);
    }};
}
pub(crate) use outln;

/// `print!` through [`Stdout`], flushed (for prompts).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = $crate::render::stdout();
        let _ = write!(out, $($arg)*);
        let _ = out.flush();
    }};
}
pub(crate) use out;

/// Terminal styling.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    /// Emit ANSI colours.
    pub color: bool,
}

impl Style {
    /// Colours only on a terminal, unless `--no-color` (`no_color_flag`), NO_COLOR (set and
    /// not empty) or TERM=dumb says otherwise.
    pub(crate) fn detect(no_color_flag: bool) -> Self {
        use std::io::IsTerminal;
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let dumb = std::env::var_os("TERM").is_some_and(|t| t == "dumb");
        Style {
            color: !no_color_flag && !no_color && !dumb && std::io::stdout().is_terminal(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }

    fn action(&self, action: Action) -> String {
        let (code, sym) = match action {
            Action::Create => ("32", "+"),
            Action::Update => ("33", "~"),
            Action::Replace {
                create_before_destroy: false,
            } => ("35", "-/+"),
            Action::Replace {
                create_before_destroy: true,
            } => ("35", "+/-"),
            Action::Delete => ("31", "-"),
            Action::Forget => ("31", "."),
            Action::Recreate => ("35", "+/."),
            Action::NoOp => ("2", "="),
            Action::Read => ("36", "<="),
        };
        self.paint(code, sym)
    }

    /// Ice blue, for resource names (escaped: ids also come from the state file).
    fn name(&self, redactor: &Redactor, text: &str) -> String {
        self.paint("38;2;174;207;230", &escape(redactor, text))
    }

    /// Ember, for milestones.
    fn ember(&self, text: &str) -> String {
        self.paint("38;2;242;99;46", text)
    }

    fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }
}

/// A present-participle verb for an action in progress.
fn doing_verb(action: Action) -> &'static str {
    match action {
        Action::Create => "creating",
        Action::Update => "updating",
        Action::Replace { .. } => "replacing",
        Action::Delete => "destroying",
        Action::Forget => "forgetting",
        Action::Recreate => "re-creating",
        Action::NoOp => "checking",
        Action::Read => "reading",
    }
}

/// A past-tense verb for an action.
pub(crate) fn done_verb(action: Action) -> &'static str {
    match action {
        Action::Create => "created",
        Action::Update => "updated",
        Action::Replace { .. } => "replaced",
        Action::Delete => "destroyed",
        Action::Forget => "forgotten",
        Action::Recreate => "re-created",
        Action::NoOp => "unchanged",
        Action::Read => "read",
    }
}

/// Renders a value for display.
pub(crate) fn show(r: &Redactor, value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Unknown => "(known after apply)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quote(r, s),
        Value::List(items) => format!(
            "[{}]",
            items
                .iter()
                .map(|v| show(r, v))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{} = {}", escape(r, k), show(r, v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Dynamic { value, .. } => show(r, value),
    }
}

/// One changed attribute as a plan line. `object_new`: the whole object is new (a create, a
/// read), so every attribute is and none is marked; otherwise (an update, a replacement,
/// drift) an attribute set from null or absent is an addition (`+ path = value`) and one set
/// to null or removed a removal (`- path = value -> null`), as Terraform marks them.
fn show_change(r: &Redactor, c: &AttrChange, object_new: bool) -> String {
    let path = escape(r, &render_path(&c.path));
    if c.write_only {
        return format!("{path} = (write-only attribute)");
    }
    let side = |v: &Option<Value>| match v {
        None => "(absent)".to_string(),
        Some(_) if c.sensitive => "(sensitive value)".to_string(),
        Some(v) => show(r, v),
    };
    let unset = |v: &Option<Value>| matches!(v, None | Some(Value::Null));
    let mut line = match (unset(&c.before), unset(&c.after)) {
        (true, false) if object_new => format!("{path} = {}", side(&c.after)),
        (true, false) => format!("+ {path} = {}", side(&c.after)),
        (false, true) if !object_new => format!("- {path} = {} -> null", side(&c.before)),
        _ => format!("{path}: {} -> {}", side(&c.before), side(&c.after)),
    };
    if c.forces_replacement {
        line.push_str("  # forces replacement");
    }
    line
}

/// The warning a failing check or postcondition prints (`None` for one that holds or is not
/// known yet).
fn condition_warning(c: &crate::ir::Condition) -> Option<Diagnostic> {
    if c.status != crate::ir::ConditionStatus::Fail {
        return None;
    }
    let d = match &c.kind {
        crate::ir::ConditionKind::Check => {
            Diagnostic::warning(format!("check {} failed: {}", c.name, c.message))
        }
        crate::ir::ConditionKind::Postcondition { resource } => Diagnostic::warning(format!(
            "postcondition of {resource} fails against its recorded object: {}",
            c.message
        ))
        .with_detail("An apply fails unless the planned change makes it hold.".to_string()),
    };
    Some(d)
}

/// Whether `action` makes the whole object anew, so its attributes need no addition marks.
fn object_new(action: Action) -> bool {
    matches!(action, Action::Create | Action::Read)
}

/// Writes a diagnostic in the human format.
pub(crate) fn write_diagnostic(out: &mut dyn Write, style: Style, r: &Redactor, d: &Diagnostic) {
    let label = match d.severity {
        Severity::Error => style.paint("1;31", "Error"),
        Severity::Warning => style.paint("1;33", "Warning"),
    };
    let mut head = label;
    if let Some(resource) = &d.resource {
        head.push_str(&format!(" [{}]", style.name(r, resource)));
    }
    if let Some(p) = d.path.as_deref().filter(|p| !p.is_empty()) {
        head.push_str(&format!(" at {}", escape(r, &render_path(p))));
    }
    let _ = writeln!(out, "{head}: {}", escape_text(r, &d.summary));
    for line in escape_text(r, &d.detail).lines() {
        let _ = writeln!(out, "    {line}");
    }
}

/// Writes a policy violation in the human format: the rule, its level, where, the message, and
/// the override's reason when one lets it pass.
fn write_policy_violation(
    out: &mut dyn Write,
    style: Style,
    r: &Redactor,
    v: &crate::policy::Violation,
) {
    let label = match (v.level, &v.overridden) {
        (crate::policy::Level::Mandatory, None) => style.paint("1;31", "Policy violation"),
        _ => style.paint("1;33", "Policy warning"),
    };
    let at = match &v.address {
        Some(a) => style.name(r, a),
        None => "the phase's changes".to_string(),
    };
    let _ = writeln!(
        out,
        "{label} [{at}]: rule {} ({}): {}",
        escape(r, &v.rule),
        v.level.name(),
        escape_text(r, &v.message)
    );
    if let Some(reason) = &v.overridden {
        let _ = writeln!(out, "    overridden: {}", escape_text(r, reason));
    }
}

/// The human printer.
pub struct Human {
    style: Style,
    /// The run's secrets, redacted from every line.
    redactor: Redactor,
    /// Print per-operation progress lines (apply/destroy).
    pub(crate) progress: bool,
    /// Head each apply phase's operations with "Phase N" (apply, not destroy).
    pub(crate) phase_headers: bool,
    /// The last phase a header was printed for.
    headed: u32,
    /// The evaluation waves that joined a running phase (DESIGN §89), by number: the
    /// resources whose outputs Nix re-evaluated with.
    waves: std::collections::HashMap<u32, Vec<String>>,
    ticker: ticker::Ticker,
    /// Resources whose planned diff was printed (phase, id): their start does not repeat it.
    previewed: std::collections::HashSet<(u32, String)>,
    /// Provider deaths this phase: one block each (`deaths`).
    deaths: deaths::Deaths,
}

impl Human {
    /// A printer with the given style, redacting what `redactor` knows (the run's).
    pub fn new(style: Style, redactor: Redactor) -> Self {
        Human {
            style,
            redactor,
            progress: true,
            phase_headers: false,
            headed: 0,
            waves: std::collections::HashMap::new(),
            ticker: ticker::Ticker::new(),
            previewed: std::collections::HashSet::new(),
            deaths: deaths::Deaths::default(),
        }
    }

    /// "Phase N" before the first operation of a phase, once. Returns what a line of an
    /// earlier phase, printed after a later one's header (a wave joined it), adds to name it.
    fn header(&mut self, out: &mut dyn Write, phase: u32) -> String {
        if !self.phase_headers {
            return String::new();
        }
        if phase < self.headed {
            return self.style.dim(&format!(" (phase {phase})"));
        }
        if phase == self.headed {
            return String::new();
        }
        self.headed = phase;
        let why = match (phase, self.waves.get(&phase)) {
            (1, _) => String::new(),
            (_, Some(trigger)) => format!(
                " (Nix re-evaluated with {}'s outputs while other operations run)",
                escape(&self.redactor, &trigger.join(", "))
            ),
            _ => format!(" (Nix re-evaluated with phase {}'s outputs)", phase - 1),
        };
        let _ = writeln!(out, "{}", self.style.ember(&format!("Phase {phase}{why}")));
        String::new()
    }
}

impl Sink for Human {
    fn event(&mut self, event: Event) {
        match &event {
            // One more resource a provider's death failed: named in the death's block.
            Event::Failed {
                id, diagnostics, ..
            } if self.deaths.gather(id, diagnostics) => {
                self.ticker.finish(id);
                return;
            }
            Event::PhaseDone { .. }
            | Event::CommandFailed { .. }
            | Event::Fixpoint { .. }
            | Event::PhaseLimit { .. } => {
                (self.deaths).write(&mut std::io::stderr().lock(), self.style, &self.redactor)
            }
            _ => {}
        }
        self.write_event(&mut stdout(), event);
    }
}

impl Drop for Human {
    fn drop(&mut self) {
        (self.deaths).write(&mut std::io::stderr().lock(), self.style, &self.redactor);
    }
}

impl Human {
    /// Writes one event's lines to `out` (stdout, as a sink; a buffer, in tests); warnings and
    /// failures go to stderr. One arm per event: the lines of those the printer keeps nothing
    /// of are `lines`', the others' are the methods below.
    pub fn write_event(&mut self, out: &mut dyn Write, event: Event) {
        let s = self.style;
        let r = &self.redactor.clone();
        match event {
            e @ Event::RemoteState { .. } => report::write_remote_state(out, r, &e),
            Event::Evaluated {
                phase,
                duration,
                resources,
                data,
            } => {
                log::info!("phase {phase}: Nix evaluated {resources} resource(s) and {data} data source(s) in {duration:?}");
            }
            e @ Event::Planned { .. } => self.planned(out, &e),
            e @ Event::Deferred { .. } => lines::deferred(out, s, r, &e),
            Event::ConsumerPending { id, waits } => lines::consumer_pending(out, s, r, &id, &waits),
            Event::Started {
                phase,
                id,
                action,
                changes,
            } => self.started(out, phase, &id, (action, &changes)),
            // The provider is done; what is left is the state write.
            Event::Recording { id, .. } => self.recording(&id),
            // The command's error names every unrecorded object; its operation is over.
            Event::Unrecorded { id, .. } => self.ticker.finish(&id),
            e @ Event::Finished { .. } => self.finished(out, &e),
            Event::Failed {
                id, diagnostics, ..
            } => {
                self.ticker.finish(&id);
                lines::failed(s, r, &id, &diagnostics);
            }
            Event::Skipped { id, because, .. } => lines::skipped(s, r, &id, &because),
            e @ Event::Moved { .. } => lines::moved(out, s, r, &e),
            e @ Event::Imported { .. } => lines::imported(out, s, r, &e),
            Event::Drift { id, changes, gone } => lines::drift(out, s, r, &id, (&changes, gone)),
            Event::Warning(d) => write_diagnostic(&mut std::io::stderr().lock(), s, r, &d),
            Event::PendingOperation(op) => report::write_pending(s, r, &op),
            // A fatal one is the run's error, printed once, by whoever prints that.
            Event::Condition { condition, fatal } => {
                if let Some(d) = condition_warning(&condition).filter(|_| !fatal) {
                    write_diagnostic(&mut std::io::stderr().lock(), s, r, &d)
                }
            }
            Event::PolicyViolation { violation: v, .. } => {
                write_policy_violation(&mut std::io::stderr().lock(), s, r, &v)
            }
            Event::Wave { phase, trigger, .. } => {
                self.waves.insert(phase, trigger);
            }
            Event::Fixpoint {
                evaluations,
                apply_phases,
            } => {
                log::info!(
                    "fixpoint after {evaluations} evaluation(s), {apply_phases} apply phase(s)"
                );
            }
            Event::PhaseLimit { apply_phases } => lines::phase_limit(out, s, apply_phases),
            Event::PlanFile {
                path,
                sha256,
                applying,
            } => lines::plan_file(out, r, &path, &sha256, applying),
            // `PhaseDone` has no line; `-v` logs `Timing`, which the human summary has no
            // place for; the command prints a `CommandFailed` itself, on stderr.
            Event::PhaseDone { .. } | Event::Timing(_) | Event::CommandFailed { .. } => {}
        }
    }

    /// A plan row; a progress line later leaves out the diff this row showed.
    fn planned(&mut self, out: &mut dyn Write, event: &Event) {
        if let Event::Planned {
            phase,
            id,
            deposed: None,
            ..
        } = event
        {
            self.previewed.insert((*phase, id.clone()));
        }
        lines::planned(out, self.style, &self.redactor, event);
    }

    /// An operation started: its progress line, its diff unless the confirmed plan showed it,
    /// and a ticker until it finishes.
    fn started(
        &mut self,
        out: &mut dyn Write,
        phase: u32,
        id: &str,
        (action, changes): (Action, &[AttrChange]),
    ) {
        if !self.progress || action == Action::NoOp {
            return;
        }
        let (s, r) = (self.style, &self.redactor.clone());
        let tag = self.header(out, phase);
        let head = format!("  {} {}{tag}", s.action(action), s.name(r, id));
        let _ = writeln!(out, "{head}: {}…", doing_verb(action));
        // The diff as decided in this phase, unless the confirmed plan showed it.
        if !self.previewed.remove(&(phase, id.to_string())) {
            for c in changes {
                let _ = writeln!(out, "      {}", show_change(r, c, object_new(action)));
            }
        }
        let _ = out.flush();
        let verb = doing_verb(action);
        self.ticker.start(id, move |elapsed| {
            format!("{head}: still {verb}… ({elapsed} elapsed)")
        });
    }

    /// The provider is done with `id`; the ticker now says the state is being written.
    fn recording(&mut self, id: &str) {
        let name = self.style.name(&self.redactor, id);
        self.ticker.replace(id, move |elapsed| {
            format!("  recording {name} in the state… ({elapsed})")
        });
    }

    /// An operation finished: its ticker stops, and its line says how long it took.
    fn finished(&mut self, out: &mut dyn Write, event: &Event) {
        let Event::Finished {
            phase,
            id,
            action,
            duration,
            deposed,
        } = event
        else {
            return;
        };
        self.ticker.finish(id);
        if !self.progress || *action == Action::NoOp {
            return;
        }
        let (s, r) = (self.style, &self.redactor.clone());
        let tag = self.header(out, *phase);
        let took = format!("{} in {:.2}s", done_verb(*action), duration.as_secs_f64());
        let _ = writeln!(
            out,
            "  {} {}{}{tag}: {}",
            s.action(*action),
            s.name(r, id),
            lines::deposed_note(r, deposed),
            s.dim(&took)
        );
    }
}

#[cfg(test)]
mod plan_line_tests;

#[cfg(test)]
mod tests;
