//! Starting a provider plugin process and owning it until it is gone.
//!
//! Owns: the go-plugin environment (magic cookie, offered protocol versions, our client
//! certificate in `PLUGIN_CLIENT_CERT`, `TMPDIR` and `PLUGIN_UNIX_SOCKET_DIR` set to the
//! provider's private directory), the handshake line (at most 64 KiB, as go-plugin reads it),
//! choosing the transport (mutual TLS through a bridge when the handshake carries the
//! provider's certificate, else plaintext, in both cases on a socket only we can reach), telling a provider that exited apart from one that never answers,
//! draining the child's stdout and stderr for its whole life, re-logging provider log lines, and
//! keeping the tail of stderr (a panic trace included) for error messages. The process itself
//! (its group, bounded reads, killing and reaping) is `crate::child`'s. Not: gRPC calls (see `client`),
//! message conversion, schemas.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, RecvTimeoutError};

use super::bridge::Bridge;
use super::handshake::{parse_handshake, Handshake, HandshakeError};
use super::socket_dir::SocketDir;
use super::tls::{self, PluginCert, TlsClient, TlsError};
use crate::child::{self, Child, End, Line, LineReader, Stdin, Tail, MAX_LINE};

/// The cookie go-plugin servers expect; without it a provider refuses to start.
const MAGIC_COOKIE_KEY: &str = "TF_PLUGIN_MAGIC_COOKIE";
const MAGIC_COOKIE_VALUE: &str = "d602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2";

/// Plugin protocol majors Nivis speaks.
pub(super) const OFFERED_PROTOCOLS: [u32; 2] = [5, 6];

/// How many stderr lines to keep for error messages.
const STDERR_TAIL_LINES: usize = 60;

/// How much of each kept stderr line (and of a bad handshake line) error messages show.
const SHOWN_LINE_BYTES: usize = 2048;

/// What to start.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// The provider binary.
    pub(crate) path: PathBuf,
    /// A name for messages and logs (the provider id in the IR).
    pub(crate) name: String,
    /// Extra environment on top of ours (the child inherits the full environment).
    pub env: Vec<(String, String)>,
    /// How long the child may take to print its handshake.
    pub start_timeout: Duration,
    /// Whose remembered validation verdicts to use: a hex digest naming the plan (one file per
    /// plan and binary, so a run reads only its own plan's verdicts); `None`: the binary's file
    /// shared by every user of it (`nivis gen`, tests).
    pub(crate) validation_scope: Option<String>,
    /// How long an ApplyResourceChange call may go unanswered before it fails (`None`: no
    /// limit; `apply --operation-timeout`).
    pub(crate) operation_timeout: Option<Duration>,
}

impl LaunchSpec {
    /// A spec with the default start timeout (60 s, as go-plugin).
    pub fn new(name: &str, path: &Path) -> Self {
        LaunchSpec {
            path: path.to_path_buf(),
            name: name.to_string(),
            env: Vec::new(),
            start_timeout: Duration::from_secs(60),
            validation_scope: None,
            operation_timeout: None,
        }
    }
}

/// Why a provider could not be started.
#[derive(Debug)]
pub enum LaunchError {
    /// The binary does not exist.
    NotFound {
        /// The provider's name in the plan.
        name: String,
        /// The binary.
        path: PathBuf,
    },
    /// The binary exists but cannot be executed.
    NotExecutable {
        /// The provider's name in the plan.
        name: String,
        /// The binary.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The child exited before printing its handshake.
    ExitedEarly {
        /// The provider's name in the plan.
        name: String,
        /// How it exited, when it was reaped in time.
        status: Option<ExitStatus>,
        /// The last lines of its stderr.
        stderr: String,
    },
    /// The child printed something that is not a go-plugin handshake.
    BadHandshake {
        /// The provider's name in the plan.
        name: String,
        /// The line it printed, shortened.
        line: String,
        /// What is wrong with the line.
        reason: HandshakeError,
        /// The last lines of its stderr.
        stderr: String,
    },
    /// The child speaks a protocol Nivis does not.
    UnsupportedProtocol {
        /// The provider's name in the plan.
        name: String,
        /// Which protocol it offered, in words.
        detail: String,
    },
    /// The provider's private directory or our client certificate could not be made.
    Private {
        /// The provider's name in the plan.
        name: String,
        /// What failed.
        detail: String,
    },
    /// The provider offered mutual TLS and the session could not be set up.
    Tls {
        /// The provider's name in the plan.
        name: String,
        /// Why the session failed.
        error: TlsError,
        /// The last lines of its stderr.
        stderr: String,
    },
    /// No handshake within the start timeout.
    Timeout {
        /// The provider's name in the plan.
        name: String,
        /// How long Nivis waited.
        after: Duration,
        /// The last lines of its stderr.
        stderr: String,
    },
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LaunchError::NotFound { name, path } => write!(
                f,
                "provider {name}: binary {} does not exist; check the provider's `source`",
                path.display()
            ),
            LaunchError::NotExecutable { name, path, source } => write!(
                f,
                "provider {name}: cannot execute {}: {source}; is it a provider binary for this \
                 platform with the executable bit set?",
                path.display()
            ),
            LaunchError::ExitedEarly {
                name,
                status,
                stderr,
            } => {
                write!(
                    f,
                    "provider {name} exited before completing the plugin handshake"
                )?;
                if let Some(status) = status {
                    write!(f, " ({status})")?;
                }
                write_tail(f, stderr)
            }
            LaunchError::BadHandshake {
                name,
                line,
                reason,
                stderr,
            } => {
                write!(
                    f,
                    "provider {name} printed an unrecognised plugin handshake {line:?}: {reason}. \
                     Is this a Terraform/OpenTofu provider? A wrapper script must not print to stdout."
                )?;
                write_tail(f, stderr)
            }
            LaunchError::UnsupportedProtocol { name, detail } => {
                write!(
                    f,
                    "provider {name} speaks an unsupported plugin protocol: {detail}"
                )
            }
            LaunchError::Private { name, detail } => {
                write!(f, "provider {name} cannot be started: {detail}")
            }
            LaunchError::Tls {
                name,
                error,
                stderr,
            } => {
                write!(
                    f,
                    "provider {name}: {error}. The provider offered mutual TLS (go-plugin AutoMTLS) \
                     and Nivis talks to it only that way; if a wrapper or a modified provider is in \
                     the way, run the provider binary directly"
                )?;
                write_tail(f, stderr)
            }
            LaunchError::Timeout {
                name,
                after,
                stderr,
            } => {
                write!(
                    f,
                    "provider {name} did not complete the plugin handshake within {}",
                    humantime_secs(*after)
                )?;
                write_tail(f, stderr)
            }
        }
    }
}

impl std::error::Error for LaunchError {}

fn write_tail(f: &mut fmt::Formatter<'_>, stderr: &str) -> fmt::Result {
    if stderr.trim().is_empty() {
        return Ok(());
    }
    write!(f, "\nprovider stderr (last lines):")?;
    for line in stderr.lines() {
        write!(f, "\n  | {line}")?;
    }
    Ok(())
}

/// What we keep of a provider's stderr: its last lines, and a Go panic trace whole.
struct StderrTail {
    lines: Tail,
    panic: Vec<String>,
}

impl StderrTail {
    fn text(&self) -> String {
        if self.panic.is_empty() {
            self.lines.text()
        } else {
            self.panic.join("\n")
        }
    }
}

/// A running provider process. Dropping it kills its process group and reaps it.
pub(crate) struct PluginProcess {
    name: String,
    child: Child,
    handshake: Handshake,
    tail: Arc<Mutex<StderrTail>>,
    /// Disconnects once the stderr drain has read everything (see [`PluginProcess::wait_exit`]).
    stderr_drained: crossbeam_channel::Receiver<()>,
    /// The TLS bridge gRPC connects to, when the provider serves mutual TLS.
    bridge: Option<Bridge>,
    /// The provider's private directory (dropped after `child`: the process is gone first).
    socket_dir: SocketDir,
}

/// What the stdout reader found first.
enum First {
    /// A whole line (the handshake, if all is well).
    Line(String),
    /// A first line longer than [`MAX_LINE`]: its beginning.
    TooLong(String),
    /// The stream ended before any line.
    Closed,
}

/// A provider process spawned whose handshake is not read yet: [`PluginProcess::spawn`] makes
/// it on the thread that owns the run (the parent-death signal is tied to that thread), and
/// [`SpawnedPlugin::finish`] may then run on any thread, e.g. while Nix evaluates.
pub(crate) struct SpawnedPlugin {
    process: PluginProcess,
    first: crossbeam_channel::Receiver<First>,
    client_cert: PluginCert,
    start_timeout: Duration,
}

impl PluginProcess {
    /// Starts the binary (its private directory, our certificate, the process) without waiting
    /// for its handshake. Call it from the thread that owns the run.
    pub(crate) fn spawn(spec: &LaunchSpec) -> Result<SpawnedPlugin, LaunchError> {
        let name = spec.name.clone();
        if !spec.path.exists() {
            return Err(LaunchError::NotFound {
                name,
                path: spec.path.clone(),
            });
        }
        let private = |detail: String| LaunchError::Private {
            name: name.clone(),
            detail,
        };
        let socket_dir = SocketDir::create().map_err(|e| private(e.to_string()))?;
        let client_cert = PluginCert::generate().map_err(|e| private(e.to_string()))?;
        let command = plugin_command(spec, &socket_dir, &client_cert);
        let (child, pipes) =
            Child::spawn(command, Stdin::Null).map_err(|source| match source.kind() {
                std::io::ErrorKind::NotFound => LaunchError::NotFound {
                    name: name.clone(),
                    path: spec.path.clone(),
                },
                _ => LaunchError::NotExecutable {
                    name: name.clone(),
                    path: spec.path.clone(),
                    source,
                },
            })?;

        let tail = Arc::new(Mutex::new(StderrTail {
            lines: Tail::new(STDERR_TAIL_LINES),
            panic: Vec::new(),
        }));
        let stderr_drained = spawn_stderr_drain(&name, pipes.stderr, Arc::clone(&tail));
        let first = spawn_stdout_drain(&name, pipes.stdout);

        let process = PluginProcess {
            name,
            child,
            handshake: Handshake {
                protocol: 0,
                target: String::new(),
                server_cert: None,
            },
            tail,
            stderr_drained,
            bridge: None,
            socket_dir,
        };
        Ok(SpawnedPlugin {
            process,
            first,
            client_cert,
            start_timeout: spec.start_timeout,
        })
    }

    /// Starts the TLS bridge when the provider printed a certificate; says which transport is
    /// used (at debug level, `-vv`).
    fn secure(&mut self, handshake: &Handshake, ours: &PluginCert) -> Result<(), TlsError> {
        let socket = handshake.target.strip_prefix("unix:").map(Path::new);
        if socket.is_some_and(|s| !s.starts_with(self.socket_dir.path())) {
            log::warn!(target: "provider", "{}: listens at {} outside its private directory {}; other local users may be able to connect to it", self.name, handshake.target, self.socket_dir.path().display());
        }
        let Some(cert) = &handshake.server_cert else {
            log::debug!(target: "provider", "{}: plaintext (the provider offered no TLS certificate)", self.name);
            return Ok(());
        };
        let Some(socket) = socket else {
            return Err(TlsError::Config(format!(
                "mutual TLS over {} is not supported, only over a unix socket",
                handshake.target
            )));
        };
        let client = TlsClient::new(ours, tls::decode_server_cert(cert)?)?;
        self.bridge = Some(Bridge::start(
            &self.name,
            self.socket_dir.path(),
            socket,
            client,
        )?);
        log::debug!(target: "provider", "{}: mutual TLS", self.name);
        Ok(())
    }

    /// The gRPC target to connect to: the TLS bridge, or the provider's own socket.
    pub(crate) fn target(&self) -> String {
        match &self.bridge {
            Some(bridge) => bridge.target(),
            None => self.handshake.target.clone(),
        }
    }

    /// Waits for the first stdout line. The direct child exiting ends the wait at once, even
    /// if something it started still holds stdout open (a wrapper script's background child).
    fn await_first_line(
        &mut self,
        first: crossbeam_channel::Receiver<First>,
        timeout: Duration,
    ) -> Result<String, LaunchError> {
        let started = Instant::now();
        let exited = |process: &mut PluginProcess| LaunchError::ExitedEarly {
            name: process.name.clone(),
            status: process.wait_exit(Duration::from_secs(2)),
            stderr: process.stderr_tail(),
        };
        loop {
            match first.recv_timeout(Duration::from_millis(50)) {
                Ok(First::Line(line)) => return Ok(line),
                Ok(First::TooLong(start)) => {
                    self.kill();
                    return Err(LaunchError::BadHandshake {
                        name: self.name.clone(),
                        line: shorten(&start),
                        reason: HandshakeError::LineTooLong {
                            limit_kib: MAX_LINE / 1024,
                        },
                        stderr: self.stderr_tail(),
                    });
                }
                Ok(First::Closed) | Err(RecvTimeoutError::Disconnected) => {
                    return Err(exited(self))
                }
                Err(RecvTimeoutError::Timeout) if self.child.has_exited() => {
                    // A line printed just before exiting may still be in the pipe.
                    return match first.recv_timeout(Duration::from_millis(200)) {
                        Ok(First::Line(line)) => Ok(line),
                        _ => Err(exited(self)),
                    };
                }
                Err(RecvTimeoutError::Timeout) if started.elapsed() >= timeout => {
                    self.kill();
                    return Err(LaunchError::Timeout {
                        name: self.name.clone(),
                        // The limit the user set, not the instant we noticed ("60s", not
                        // "60.045661165s").
                        after: timeout,
                        stderr: self.stderr_tail(),
                    });
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    /// The handshake the provider printed.
    pub(crate) fn handshake(&self) -> &Handshake {
        &self.handshake
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.pid()
    }

    /// The last lines of the provider's stderr, or its panic trace if it panicked.
    pub(crate) fn stderr_tail(&self) -> String {
        self.tail.lock().map(|t| t.text()).unwrap_or_default()
    }

    /// True if the provider's stderr shows a Go panic.
    pub(crate) fn panicked(&self) -> bool {
        self.tail
            .lock()
            .map(|t| !t.panic.is_empty())
            .unwrap_or(false)
    }

    /// Whether the provider's process has exited (without waiting or reaping).
    pub(crate) fn has_exited(&self) -> bool {
        self.child.has_exited()
    }

    /// Waits up to `grace` for the child to exit on its own; if it did, kills what is left of
    /// its process group, waits (up to a second) until its last stderr lines are in the tail,
    /// and returns its status.
    pub(crate) fn wait_exit(&mut self, grace: Duration) -> Option<ExitStatus> {
        let status = self.child.wait_exit(grace)?;
        // The drain thread may not have read the lines written just before the exit yet (a
        // loaded machine delays it); the group is dead, so stderr closes at once.
        let _ = self.stderr_drained.recv_timeout(Duration::from_secs(1));
        Some(status)
    }

    /// Kills (SIGKILL) the provider's process group and reaps the child. Idempotent.
    pub(crate) fn kill(&mut self) {
        self.child.kill();
    }
}

impl SpawnedPlugin {
    /// Waits for the handshake and sets up the transport (mutual TLS when offered).
    pub(crate) fn finish(self) -> Result<PluginProcess, LaunchError> {
        let SpawnedPlugin {
            mut process,
            first,
            client_cert,
            start_timeout,
        } = self;
        let name = process.name.clone();
        let line = process.await_first_line(first, start_timeout)?;
        let handshake = match parse_handshake(&line) {
            Ok(h) => h,
            Err(reason) => {
                process.kill();
                return Err(LaunchError::BadHandshake {
                    name,
                    line: shorten(line.trim_end()),
                    reason,
                    stderr: process.stderr_tail(),
                });
            }
        };
        if !OFFERED_PROTOCOLS.contains(&handshake.protocol) {
            process.kill();
            return Err(unsupported(name, handshake.protocol));
        }
        log::debug!(target: "provider", "{} started: pid {} protocol {} at {}", process.name, process.pid(), handshake.protocol, handshake.target);
        if let Err(error) = process.secure(&handshake, &client_cert) {
            process.kill();
            return Err(LaunchError::Tls {
                name,
                error,
                stderr: process.stderr_tail(),
            });
        }
        process.handshake = handshake;
        Ok(process)
    }
}

/// The error for a provider that chose a protocol Nivis did not offer.
fn unsupported(name: String, protocol: u32) -> LaunchError {
    LaunchError::UnsupportedProtocol {
        name,
        detail: format!(
            "it chose protocol version {protocol}, Nivis offers {OFFERED_PROTOCOLS:?}; use a \
             provider release built for Terraform 0.12 or later"
        ),
    }
}

/// The provider's command line and its go-plugin environment, on top of ours.
fn plugin_command(spec: &LaunchSpec, socket_dir: &SocketDir, client_cert: &PluginCert) -> Command {
    let mut command = crate::child::command(&spec.path);
    command
        .env(MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE)
        .env("PLUGIN_PROTOCOL_VERSIONS", "5,6")
        .env_remove("PLUGIN_MULTIPLEX_GRPC")
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        // Last, so nothing overrides them: the socket goes where only we can reach it, and
        // the provider answers only to our certificate.
        .env("PLUGIN_CLIENT_CERT", client_cert.pem())
        .env("PLUGIN_UNIX_SOCKET_DIR", socket_dir.path())
        .env("TMPDIR", socket_dir.path());
    command
}

/// At most [`SHOWN_LINE_BYTES`] of `line`, marked when cut.
fn shorten(line: &str) -> String {
    if line.len() <= SHOWN_LINE_BYTES {
        return line.to_string();
    }
    let mut end = SHOWN_LINE_BYTES;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &line[..end], line.len())
}

/// Reads stdout for the child's whole life: the first line goes to the returned channel; the
/// rest is logged (go-plugin discards it), so the child never blocks on a full pipe.
fn spawn_stdout_drain(
    name: &str,
    stdout: std::process::ChildStdout,
) -> crossbeam_channel::Receiver<First> {
    let (tx, rx) = bounded::<First>(1);
    let name = name.to_string();
    std::thread::Builder::new()
        .name(format!("{name}-stdout"))
        .spawn(move || {
            let mut lines = LineReader::new(stdout);
            let first = match lines.next_piece() {
                Ok(Some(line)) if line.end == End::Newline => First::Line(line.text()),
                Ok(Some(line)) => First::TooLong(line.text()),
                _ => First::Closed,
            };
            let closed = matches!(first, First::Closed);
            let _ = tx.send(first);
            if closed {
                return;
            }
            while let Ok(Some(line)) = lines.next_piece() {
                log::debug!(target: "provider", "{name} stdout: {}", shorten(&line.text()));
            }
        })
        .expect("spawn stdout thread");
    rx
}

/// Drains stderr for the child's whole life into `tail`; the receiver disconnects at its end.
fn spawn_stderr_drain(
    name: &str,
    stderr: std::process::ChildStderr,
    tail: Arc<Mutex<StderrTail>>,
) -> crossbeam_channel::Receiver<()> {
    let name = name.to_string();
    let mut panicking = false;
    child::drain_lines(format!("{name}-stderr"), stderr, move |line: Line| {
        let line = line.text();
        let line = line.trim_end();
        if line.is_empty() {
            return;
        }
        panicking |= line.starts_with("panic: ") || line.starts_with("fatal error: ");
        relog(&name, line, panicking);
        let kept = shorten(line);
        if let Ok(mut t) = tail.lock() {
            if panicking {
                if t.panic.len() < 400 {
                    t.panic.push(kept);
                }
            } else {
                t.lines.push(kept);
            }
        }
    })
}

/// Re-logs one provider stderr line at its own level: JSON lines from hclog carry `@level`,
/// plain lines may carry a `[LEVEL]` tag; a panic trace is logged as errors.
fn relog(name: &str, line: &str, panicking: bool) {
    if panicking {
        log::error!(target: "provider", "{name}: {line}");
        return;
    }
    if line.starts_with('{') {
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(line)
        {
            let level = map
                .get("@level")
                .and_then(|v| v.as_str())
                .unwrap_or("debug");
            let message = map.get("@message").and_then(|v| v.as_str()).unwrap_or(line);
            log::log!(target: "provider", level_from_name(level), "{name}: {message}");
            return;
        }
    }
    let level = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
        .iter()
        .find(|tag| line.contains(&format!("[{tag}]")))
        .map(|tag| level_from_name(tag))
        .unwrap_or(log::Level::Debug);
    log::log!(target: "provider", level, "{name}: {line}");
}

fn level_from_name(name: &str) -> log::Level {
    match name.to_ascii_lowercase().as_str() {
        "trace" => log::Level::Trace,
        "info" => log::Level::Info,
        "warn" | "warning" => log::Level::Warn,
        "error" => log::Level::Error,
        _ => log::Level::Debug,
    }
}

/// `d` as whole seconds ("60s"), or milliseconds below a second ("500ms").
fn humantime_secs(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_timeout_reads_as_the_limit() {
        let e = LaunchError::Timeout {
            name: "alpha".into(),
            after: Duration::from_secs(60),
            stderr: String::new(),
        };
        assert!(e.to_string().contains("handshake within 60s"), "{e}");
        assert_eq!(humantime_secs(Duration::from_millis(500)), "500ms");
    }
}
