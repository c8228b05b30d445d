//! A NixOps4 provider process: started once, requests written to its stdin as lines, response
//! lines read from its stdout, its stderr drained and logged, its process group killed on drop.
//!
//! Owns: the request/response line discipline over the child's pipes (a response line is
//! whole, up to [`MAX_RESPONSE_LINE`], or reported as too long; a stderr line is logged and
//! kept up to [`child::MAX_LINE`] bytes, the rest of a longer one dropped), closing stdin, the stderr
//! tail's size. The process itself (its group, bounded reads, killing and reaping) is
//! [`crate::child`]'s. Not: message formats (`wire`) nor their meaning (`adapter`).

use std::io::Write;
use std::path::Path;
use std::process::{ChildStdin, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};

use crate::child::{self, Child, End, Line, LineReader, Stdin, Tail, Whole};

/// Longest response line accepted: a whole JSON message, whose outputs may be large (an `exec`
/// resource returns the program's stdout).
pub(super) const MAX_RESPONSE_LINE: usize = 16 << 20;

/// How many stderr lines to keep for error messages.
const STDERR_TAIL_LINES: usize = 40;

/// What the provider's stdout gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reply {
    /// One line, without its newline.
    Line(String),
    /// A line longer than [`MAX_RESPONSE_LINE`]: its length in bytes (it was discarded).
    TooLong(usize),
    /// A line that is not UTF-8.
    NotUtf8,
    /// Stdout closed: the provider exited or closed it.
    Closed,
    /// Nothing within the time given.
    TimedOut,
}

/// Why a NixOps4 provider process cannot be started.
#[derive(Debug)]
pub enum SpawnError {
    /// The binary does not exist.
    NotFound {
        /// The provider's name in the plan.
        name: String,
        /// The binary.
        path: std::path::PathBuf,
    },
    /// The binary exists but cannot be executed.
    NotExecutable {
        /// The provider's name in the plan.
        name: String,
        /// The binary.
        path: std::path::PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The thread that reads the provider's replies cannot be started.
    ReaderThread {
        /// The provider's name in the plan.
        name: String,
        /// What the system said.
        source: std::io::Error,
    },
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpawnError::NotFound { name, path } => write!(
                f,
                "provider {name}: binary {} does not exist; check the provider's `source`",
                path.display()
            ),
            SpawnError::NotExecutable { name, path, source } => write!(
                f,
                "provider {name}: cannot execute {}: {source}; is it a NixOps4 resource provider \
                 for this platform with the executable bit set?",
                path.display()
            ),
            SpawnError::ReaderThread { name, source } => write!(
                f,
                "provider {name}: cannot start its reader thread: {source}"
            ),
        }
    }
}

impl std::error::Error for SpawnError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SpawnError::NotFound { .. } => None,
            SpawnError::NotExecutable { source, .. } | SpawnError::ReaderThread { source, .. } => {
                Some(source)
            }
        }
    }
}

/// A running provider process. Dropping it closes stdin, gives the provider two seconds to
/// exit, then kills its process group and reaps it.
pub(super) struct ProviderProcess {
    name: String,
    child: Mutex<Child>,
    stdin: Mutex<Option<ChildStdin>>,
    replies: Receiver<Reply>,
    tail: Arc<Mutex<Tail>>,
    /// Disconnected once the stderr drain has read everything (the child closed stderr).
    stderr_closed: Receiver<()>,
}

impl ProviderProcess {
    /// Starts `path` for provider `name`. Must run on the thread that owns the run: the
    /// parent-death signal is tied to the thread that starts the child.
    pub(super) fn spawn(name: &str, path: &Path) -> Result<ProviderProcess, SpawnError> {
        let spawned = Child::spawn(crate::child::command(path), Stdin::Piped);
        let (child, pipes) = spawned.map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => SpawnError::NotFound {
                name: name.into(),
                path: path.to_path_buf(),
            },
            _ => SpawnError::NotExecutable {
                name: name.into(),
                path: path.to_path_buf(),
                source,
            },
        })?;
        let tail = Arc::new(Mutex::new(Tail::new(STDERR_TAIL_LINES)));
        let stderr_closed = spawn_stderr_drain(name, pipes.stderr, Arc::clone(&tail));
        let stdout = pipes.stdout;
        let (tx, replies) = bounded::<Reply>(1);
        std::thread::Builder::new()
            .name(format!("{name}-stdout"))
            .spawn(move || {
                let mut reader = LineReader::new(stdout);
                let mut buf = Vec::new();
                loop {
                    let reply = match reader.next_whole(&mut buf, MAX_RESPONSE_LINE) {
                        Ok(Whole::Line) => match String::from_utf8(std::mem::take(&mut buf)) {
                            Ok(line) => Reply::Line(line),
                            Err(_) => Reply::NotUtf8,
                        },
                        Ok(Whole::TooLong(n)) => Reply::TooLong(n),
                        Ok(Whole::Eof) | Err(_) => {
                            let _ = tx.send(Reply::Closed);
                            return;
                        }
                    };
                    if tx.send(reply).is_err() {
                        return;
                    }
                }
            })
            .map_err(|source| SpawnError::ReaderThread {
                name: name.into(),
                source,
            })?;
        log::debug!(target: "provider", "{name} started: pid {} (nixops4)", child.pid());
        Ok(ProviderProcess {
            name: name.to_string(),
            child: Mutex::new(child),
            stdin: Mutex::new(pipes.stdin),
            replies,
            tail,
            stderr_closed,
        })
    }

    /// Writes one line (a newline is added) and flushes it.
    pub(super) fn send(&self, line: &str) -> std::io::Result<()> {
        let mut stdin = lock(&self.stdin);
        let Some(pipe) = stdin.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::BrokenPipe,
                "its stdin is closed",
            ));
        };
        pipe.write_all(line.as_bytes())?;
        pipe.write_all(b"\n")?;
        pipe.flush()
    }

    /// The next line from stdout, waiting up to `timeout`.
    pub(super) fn receive(&self, timeout: Duration) -> Reply {
        match self.replies.recv_timeout(timeout) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => Reply::TimedOut,
            Err(RecvTimeoutError::Disconnected) => Reply::Closed,
        }
    }

    /// Closes stdin: the protocol's way to tell the provider that no request follows. A request
    /// in flight still gets its answer.
    pub(super) fn close_stdin(&self) {
        lock(&self.stdin).take();
    }

    /// Waits up to `grace` for the child to exit on its own; if it did, kills whatever else
    /// is left in its process group and returns its status.
    pub(super) fn wait_exit(&self, grace: Duration) -> Option<ExitStatus> {
        lock(&self.child).wait_exit(grace)
    }

    /// Kills (SIGKILL) the child's process group and reaps it. Idempotent.
    pub(super) fn kill(&self) {
        let mut child = lock(&self.child);
        if !child.has_exited() {
            log::debug!(target: "provider", "{} stopped", self.name);
        }
        child.kill();
    }

    /// Waits up to `wait` for the drain to read stderr to its end, so that the last words of
    /// a provider that exited (or was killed) are in the tail.
    pub(super) fn wait_stderr_closed(&self, wait: Duration) {
        let _ = self.stderr_closed.recv_timeout(wait);
    }

    /// The last lines the provider wrote to stderr.
    pub(super) fn stderr_tail(&self) -> String {
        lock(&self.tail).text()
    }
}

impl Drop for ProviderProcess {
    fn drop(&mut self) {
        self.close_stdin();
        if self.wait_exit(Duration::from_secs(2)).is_none() {
            self.kill();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Drains stderr for the child's whole life: each line is logged under the provider's name
/// and kept in the tail; of a line longer than [`child::MAX_LINE`] only its first piece, marked.
/// The receiver returned disconnects when it is done.
fn spawn_stderr_drain(
    name: &str,
    stderr: std::process::ChildStderr,
    tail: Arc<Mutex<Tail>>,
) -> Receiver<()> {
    let name = name.to_string();
    // Inside a long line: its remaining pieces are dropped.
    let mut skipping = false;
    child::drain_lines(format!("{name}-stderr"), stderr, move |piece: Line| {
        let was_skipping = std::mem::replace(&mut skipping, piece.end == End::Cut);
        if was_skipping {
            return;
        }
        let mut line = piece.text().trim_end().to_string();
        if piece.end == End::Cut {
            line.push_str(" [line truncated]");
        }
        if line.is_empty() {
            return;
        }
        log::info!(target: "provider", "{name}: {line}");
        lock(&tail).push(line);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A NixOps4 provider gets its own process group: what it starts dies with it.
    #[test]
    fn what_the_provider_started_dies_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("provider.sh");
        std::fs::write(&script, "#!/bin/sh\nsleep 600 &\necho $!\nwait\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let process = ProviderProcess::spawn("script", &script).unwrap();
        let Reply::Line(pid) = process.receive(Duration::from_secs(10)) else {
            panic!("no pid line");
        };
        let grandchild: i32 = pid.trim().parse().unwrap();
        drop(process);
        let alive = || {
            std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .is_ok_and(|s| !s.contains(") Z "))
        };
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(), "grandchild {grandchild} survived its provider");
    }
}
