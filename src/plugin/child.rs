//! A child process Nivis owns, whatever protocol it speaks: started in a process group of its
//! own, its output read in lines of bounded length, and the whole group killed when it goes.
//!
//! Owns: spawning (own process group; the kernel kills the direct child if the starting thread
//! dies), noticing that the direct child exited without reaping it (so its group id stays
//! reserved until the group is killed), killing the group and reaping, and reading a pipe as
//! lines of at most [`MAX_LINE`] bytes so no child can make Nivis buffer without bound.
//! Not: what the child says (the go-plugin handshake and log lines are `launch`'s business).

use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{ChildStderr, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Longest line read from a child: longer ones arrive in pieces of this size (go-plugin cuts
/// provider output at the same 64 KiB).
pub const MAX_LINE: usize = 64 * 1024;

/// A running child and its process group. Dropping it kills the group and reaps the child.
pub struct Child {
    inner: std::process::Child,
    reaped: Option<ExitStatus>,
}

/// The child's output pipes, for the caller's reader threads.
pub struct Pipes {
    pub stdout: ChildStdout,
    pub stderr: ChildStderr,
}

impl Child {
    /// Starts `command` with stdin closed and stdout/stderr piped, as the leader of a new process
    /// group, so that everything it starts (a wrapper script's real binary, helpers) can be
    /// killed with it.
    pub fn spawn(mut command: Command) -> io::Result<(Child, Pipes)> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        // SAFETY: prctl is async-signal-safe; the closure allocates nothing. It makes the kernel
        // kill the child if the thread that started it dies (even by SIGKILL), so a crashed
        // Nivis never leaves the child behind. (Only the direct child: its own children outlive
        // a kill -9 of Nivis, a kernel limit.)
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut inner = command.spawn()?;
        let pipes = Pipes {
            stdout: inner.stdout.take().expect("stdout is piped"),
            stderr: inner.stderr.take().expect("stderr is piped"),
        };
        Ok((
            Child {
                inner,
                reaped: None,
            },
            pipes,
        ))
    }

    /// The direct child's process id (also its process group id).
    pub fn pid(&self) -> u32 {
        self.inner.id()
    }

    /// Whether the direct child has exited. Does not reap it: until it is reaped its pid, the
    /// group's id, cannot be reused, so killing the group stays safe.
    pub fn has_exited(&self) -> bool {
        if self.reaped.is_some() {
            return true;
        }
        // SAFETY: waitid writes one siginfo_t, which we own; WNOWAIT leaves the child waitable.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                self.inner.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            rc == 0 && info.si_pid() != 0
        }
    }

    /// Waits up to `grace` for the direct child to exit on its own; if it did, kills whatever
    /// else is left in its group, reaps it and returns its status.
    pub fn wait_exit(&mut self, grace: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + grace;
        while !self.has_exited() {
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Some(self.kill())
    }

    /// Kills (SIGKILL) the whole process group and reaps the direct child; returns its status.
    /// Idempotent.
    pub fn kill(&mut self) -> ExitStatus {
        if let Some(status) = self.reaped {
            return status;
        }
        // SAFETY: kill has no memory-safety preconditions. The group id is the unreaped
        // child's pid, so it still names this group.
        unsafe { libc::kill(-(self.inner.id() as libc::pid_t), libc::SIGKILL) };
        let status = self.inner.wait().unwrap_or_else(|_| {
            // Only if someone else reaped it; report it as killed.
            std::os::unix::process::ExitStatusExt::from_raw(libc::SIGKILL)
        });
        self.reaped = Some(status);
        status
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One line read by [`Lines`], without its newline.
pub struct Line {
    pub bytes: Vec<u8>,
    /// False for a piece of a line longer than [`MAX_LINE`] (or a last line without newline).
    pub complete: bool,
}

impl Line {
    /// The line as text (invalid UTF-8 replaced), trailing `\r` dropped.
    pub fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        text.strip_suffix('\r').unwrap_or(&text).to_string()
    }
}

/// Reads a pipe as lines of at most [`MAX_LINE`] bytes: memory stays bounded however the child
/// writes.
pub struct Lines<R> {
    reader: BufReader<R>,
}

impl<R: Read> Lines<R> {
    pub fn new(reader: R) -> Lines<R> {
        Lines {
            reader: BufReader::with_capacity(MAX_LINE, reader),
        }
    }

    /// The next line or piece of one; `None` at the end of the stream.
    pub fn next_line(&mut self) -> io::Result<Option<Line>> {
        let mut bytes = Vec::new();
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(buf) => buf,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok((!bytes.is_empty()).then_some(Line {
                    bytes,
                    complete: false,
                }));
            }
            let room = MAX_LINE - bytes.len();
            let window = &buf[..buf.len().min(room)];
            if let Some(newline) = window.iter().position(|&b| b == b'\n') {
                bytes.extend_from_slice(&window[..newline]);
                self.reader.consume(newline + 1);
                return Ok(Some(Line {
                    bytes,
                    complete: true,
                }));
            }
            let taken = window.len();
            bytes.extend_from_slice(window);
            self.reader.consume(taken);
            if bytes.len() == MAX_LINE {
                return Ok(Some(Line {
                    bytes,
                    complete: false,
                }));
            }
        }
    }
}

/// Reads `reader` line by line on a thread named `name` until it ends, handing each line (or
/// piece of an overlong one) to `on_line`. The receiver returned disconnects once the reader has
/// ended and every line was handed over: a child's last words arrive after its exit is seen.
pub fn drain_lines<R: Read + Send + 'static>(
    name: String,
    reader: R,
    mut on_line: impl FnMut(Line) + Send + 'static,
) -> crossbeam_channel::Receiver<()> {
    let (done, drained) = crossbeam_channel::bounded::<()>(0);
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let _done = done;
            let mut lines = Lines::new(reader);
            while let Ok(Some(line)) = lines.next_line() {
                on_line(line);
            }
        })
        .expect("spawn a reader thread");
    drained
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cut_at_the_limit() {
        let mut input = b"short\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', MAX_LINE * 2 + 10));
        input.extend_from_slice(b"\nlast");
        let mut lines = Lines::new(&input[..]);
        let first = lines.next_line().unwrap().unwrap();
        assert_eq!((first.text().as_str(), first.complete), ("short", true));
        let sizes: Vec<(usize, bool)> = std::iter::from_fn(|| lines.next_line().unwrap())
            .map(|l| (l.bytes.len(), l.complete))
            .collect();
        assert_eq!(
            sizes,
            [(MAX_LINE, false), (MAX_LINE, false), (10, true), (4, false)]
        );
    }

    #[test]
    fn the_whole_group_dies_with_the_child() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 600 & echo $!; wait"]);
        let (mut child, pipes) = Child::spawn(cmd).unwrap();
        let mut lines = Lines::new(pipes.stdout);
        let grandchild: i32 = lines.next_line().unwrap().unwrap().text().parse().unwrap();
        assert!(!child.has_exited());
        child.kill();
        assert!(child.has_exited());
        // The grandchild was killed with the group (it is reaped by init, so poll).
        let alive = || {
            std::path::Path::new(&format!("/proc/{grandchild}")).exists()
                && !std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                    .is_ok_and(|s| s.contains(") Z "))
        };
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(!alive(), "grandchild {grandchild} survived");
    }
}
