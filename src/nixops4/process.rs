//! A NixOps4 provider process: started once, requests written to its stdin as lines, response
//! lines read from its stdout, its stderr drained and logged, killed and reaped on drop.
//!
//! Owns: spawning (with the parent-death signal, as for plugins), one reader thread per output
//! stream, bounding every line read (a response line to [`MAX_RESPONSE_LINE`], a log line to
//! [`MAX_LOG_LINE`]), the tail of stderr for error messages, closing stdin, exit status, kill.
//! Not: message formats (`wire`) nor their meaning (`adapter`).
//!
//! Kept in one file and apart from `plugin::launch` on purpose: both are meant to move onto one
//! shared child-process helper; nothing else in Nivis depends on this file's insides.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError};

/// Longest response line accepted: a whole JSON message, whose outputs may be large (an `exec`
/// resource returns the program's stdout).
pub const MAX_RESPONSE_LINE: usize = 16 << 20;

/// Longest stderr line kept whole; the rest of a longer line is dropped.
pub const MAX_LOG_LINE: usize = 64 << 10;

/// How many stderr lines to keep for error messages.
const STDERR_TAIL_LINES: usize = 40;

/// What the provider's stdout gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
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

/// Outcome of [`read_line_bounded`].
#[derive(Debug, PartialEq, Eq)]
pub enum Bounded {
    /// A line is in the buffer.
    Line,
    /// The line had this many bytes; the buffer holds its first `max`.
    TooLong(usize),
    /// End of input, nothing read.
    Eof,
}

/// Reads one line (without its `\n`) into `buf`, keeping at most `max` bytes of it; a longer
/// line is consumed to its end all the same, so the next read starts at the next line.
pub fn read_line_bounded(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Bounded> {
    buf.clear();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match (any, total > max) {
                (false, _) => Bounded::Eof,
                (true, false) => Bounded::Line,
                (true, true) => Bounded::TooLong(total),
            });
        }
        any = true;
        let newline = available.iter().position(|&b| b == b'\n');
        let chunk = &available[..newline.unwrap_or(available.len())];
        let room = max.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        total += chunk.len();
        let used = newline.map_or(available.len(), |i| i + 1);
        reader.consume(used);
        if newline.is_some() {
            return Ok(if total > max {
                Bounded::TooLong(total)
            } else {
                Bounded::Line
            });
        }
    }
}

/// A running provider process. Dropping it closes stdin, gives the provider two seconds to
/// exit, then kills and reaps it.
pub struct ProviderProcess {
    name: String,
    child: Mutex<Option<Child>>,
    stdin: Mutex<Option<ChildStdin>>,
    replies: Receiver<Reply>,
    tail: Arc<Mutex<VecDeque<String>>>,
    /// Disconnected once the stderr drain has read everything (the child closed stderr).
    stderr_closed: Receiver<()>,
}

impl ProviderProcess {
    /// Starts `path` for provider `name`. Must run on the thread that owns the run: the
    /// parent-death signal is tied to the thread that starts the child.
    pub fn spawn(name: &str, path: &Path) -> Result<ProviderProcess, String> {
        let mut command = Command::new(path);
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: prctl is async-signal-safe and the closure allocates nothing. The kernel kills
        // the provider if the thread that started it dies, even by SIGKILL.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = command.spawn().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "provider {name}: binary {} does not exist; check the provider's `source`",
                path.display()
            ),
            _ => format!(
                "provider {name}: cannot execute {}: {e}; is it a NixOps4 resource provider \
                 for this platform with the executable bit set?",
                path.display()
            ),
        })?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let stderr_closed = spawn_stderr_drain(name, stderr, Arc::clone(&tail));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, replies) = bounded::<Reply>(1);
        std::thread::Builder::new()
            .name(format!("{name}-stdout"))
            .spawn(move || {
                let mut reader = BufReader::new(stdout);
                let mut buf = Vec::new();
                loop {
                    let reply = match read_line_bounded(&mut reader, &mut buf, MAX_RESPONSE_LINE) {
                        Ok(Bounded::Line) => match String::from_utf8(std::mem::take(&mut buf)) {
                            Ok(line) => Reply::Line(line),
                            Err(_) => Reply::NotUtf8,
                        },
                        Ok(Bounded::TooLong(n)) => Reply::TooLong(n),
                        Ok(Bounded::Eof) | Err(_) => {
                            let _ = tx.send(Reply::Closed);
                            return;
                        }
                    };
                    if tx.send(reply).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| format!("provider {name}: cannot start its reader thread: {e}"))?;
        let stdin = child.stdin.take();
        log::debug!(target: "provider", "{name} started: pid {} (nixops4)", child.id());
        Ok(ProviderProcess {
            name: name.to_string(),
            child: Mutex::new(Some(child)),
            stdin: Mutex::new(stdin),
            replies,
            tail,
            stderr_closed,
        })
    }

    /// Writes one line (a newline is added) and flushes it.
    pub fn send(&self, line: &str) -> std::io::Result<()> {
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
    pub fn receive(&self, timeout: Duration) -> Reply {
        match self.replies.recv_timeout(timeout) {
            Ok(reply) => reply,
            Err(RecvTimeoutError::Timeout) => Reply::TimedOut,
            Err(RecvTimeoutError::Disconnected) => Reply::Closed,
        }
    }

    /// Closes stdin: the protocol's way to tell the provider that no request follows. A request
    /// in flight still gets its answer.
    pub fn close_stdin(&self) {
        lock(&self.stdin).take();
    }

    /// Waits up to `grace` for the child to exit on its own; its status if it did.
    pub fn wait_exit(&self, grace: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + grace;
        loop {
            {
                let mut child = lock(&self.child);
                let status = child.as_mut()?.try_wait();
                if let Ok(Some(status)) = status {
                    // Reaped: nothing is left to kill.
                    child.take();
                    return Some(status);
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Kills (SIGKILL) and reaps the child. Idempotent.
    pub fn kill(&self) {
        if let Some(mut child) = lock(&self.child).take() {
            let _ = child.kill();
            let _ = child.wait();
            log::debug!(target: "provider", "{} stopped", self.name);
        }
    }

    /// Waits up to `wait` for the drain to read stderr to its end, so that the last words of
    /// a provider that exited (or was killed) are in the tail.
    pub fn wait_stderr_closed(&self, wait: Duration) {
        let _ = self.stderr_closed.recv_timeout(wait);
    }

    /// The last lines the provider wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        lock(&self.tail)
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
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

/// Drains stderr for the child's whole life: each line (bounded) is logged under the
/// provider's name and kept in the tail. The receiver returned disconnects when it is done.
fn spawn_stderr_drain(
    name: &str,
    stderr: impl Read + Send + 'static,
    tail: Arc<Mutex<VecDeque<String>>>,
) -> Receiver<()> {
    let name = name.to_string();
    let (done, closed) = bounded::<()>(0);
    let _ = std::thread::Builder::new()
        .name(format!("{name}-stderr"))
        .spawn(move || {
            let _done = done;
            let mut reader = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                let mut line = match read_line_bounded(&mut reader, &mut buf, MAX_LOG_LINE) {
                    Ok(Bounded::Eof) | Err(_) => return,
                    Ok(_) => String::from_utf8_lossy(&buf).trim_end().to_string(),
                };
                if line.len() == MAX_LOG_LINE {
                    line.push_str(" [line truncated]");
                }
                if line.is_empty() {
                    continue;
                }
                log::info!(target: "provider", "{name}: {line}");
                let mut t = lock(&tail);
                if t.len() == STDERR_TAIL_LINES {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
    closed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<(Bounded, Vec<u8>)> {
        // A tiny buffer so lines straddle refills.
        let mut reader = BufReader::with_capacity(3, input);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            let r = read_line_bounded(&mut reader, &mut buf, max).unwrap();
            if r == Bounded::Eof {
                return out;
            }
            out.push((r, buf.clone()));
        }
    }

    #[test]
    fn lines_are_bounded_and_reading_resumes_after_a_long_one() {
        let got = lines(b"short\nthis line is long\n\nlast", 8);
        assert_eq!(
            got,
            vec![
                (Bounded::Line, b"short".to_vec()),
                (Bounded::TooLong(17), b"this lin".to_vec()),
                (Bounded::Line, Vec::new()),
                (Bounded::Line, b"last".to_vec()),
            ]
        );
        assert_eq!(
            lines(b"0123456789", 4),
            vec![(Bounded::TooLong(10), b"0123".to_vec())]
        );
        assert_eq!(lines(b"", 4), vec![]);
        assert_eq!(lines(b"1234\n", 4), vec![(Bounded::Line, b"1234".to_vec())]);
    }
}
