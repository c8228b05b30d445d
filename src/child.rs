//! A child process Nivis owns, whatever protocol it speaks (go-plugin providers, NixOps4
//! providers): started in a process group of its own, its output read in lines of bounded
//! length, its stderr's last lines kept, and the whole group killed when it goes.
//!
//! Owns: spawning (own process group; the kernel kills the direct child if the starting thread
//! dies; stdin closed or piped), noticing that the direct child exited without reaping it (so
//! its group id stays reserved until the group is killed), killing the group and reaping,
//! reading a pipe as bounded lines in two modes (pieces of at most [`MAX_LINE`] bytes for log
//! output; whole lines up to a limit, or a `TooLong` outcome, for protocol messages), drain
//! threads, and a [`Tail`] of the last lines. So no child can make Nivis buffer without bound.
//! Not: what the child says (the go-plugin handshake and log levels are `plugin::launch`'s
//! business, JSON messages `nixops4`'s).
//!
//! Every process Nivis starts is built here ([`command`], [`nix`], [`nix_store`], [`git`]), so
//! the environment rules (no `NIVIS_VAR_*` in a child's environment, one spelling of how Nix
//! is found) hold in one place; a command run to completion whose output is a value (a secret
//! source) goes through [`run_bounded`]: its output read up to a limit, its run up to a
//! deadline.

use std::collections::VecDeque;
use std::ffi::OsStr;
use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Longest piece of a line read from a child's log output: longer lines arrive in pieces of
/// this size (go-plugin cuts provider output at the same 64 KiB).
pub(crate) const MAX_LINE: usize = 64 * 1024;

/// A command for `program`, with no `NIVIS_VAR_*` variable in its environment (they are taken
/// out of Nivis's own at start, `guard`; removed here again for a child built before that, or
/// an embedding that skipped it).
pub(crate) fn command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("NIVIS_VAR_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// `nix` (or `$NIVIS_NIX`) with the experimental features Nivis uses.
pub(crate) fn nix() -> Command {
    let mut cmd = command(std::env::var_os("NIVIS_NIX").unwrap_or_else(|| "nix".into()));
    cmd.args(["--extra-experimental-features", "nix-command flakes"]);
    cmd
}

/// `nix-store` (or `$NIVIS_NIX_STORE`).
pub(crate) fn nix_store() -> Command {
    command(std::env::var_os("NIVIS_NIX_STORE").unwrap_or_else(|| "nix-store".into()))
}

/// `git`, reading no input.
pub(crate) fn git() -> Command {
    let mut cmd = command("git");
    cmd.stdin(Stdio::null());
    cmd
}

/// How a command run by [`run_bounded`] ended.
#[derive(Debug)]
pub(crate) struct Finished {
    /// Its exit status.
    pub(crate) status: ExitStatus,
    /// Its standard output, at most the limit asked.
    pub(crate) stdout: Vec<u8>,
    /// Whether it wrote more than the limit (the rest was not read).
    pub(crate) stdout_over_limit: bool,
    /// The first [`MAX_LINE`] bytes of its standard error.
    pub(crate) stderr: Vec<u8>,
}

/// Why [`run_bounded`] has no [`Finished`].
#[derive(Debug)]
pub(crate) enum RunError {
    /// The command could not be started.
    NotStarted(io::Error),
    /// It ran past the deadline; it and its process group were killed.
    TimedOut(Duration),
}

/// Runs `command` (stdin closed) to its end in a process group of its own: at most
/// `stdout_limit` bytes of its output are kept (memory stays bounded however much it writes),
/// and past `deadline` the group is killed.
pub(crate) fn run_bounded(
    command: Command,
    stdout_limit: usize,
    deadline: Duration,
) -> Result<Finished, RunError> {
    let (mut child, pipes) = Child::spawn(command, Stdin::Null).map_err(RunError::NotStarted)?;
    // One byte past the limit tells a value at the limit from a longer one.
    let (stdout, stderr) = (pipes.stdout, pipes.stderr);
    let out = std::thread::spawn(move || read_at_most(stdout, stdout_limit as u64 + 1));
    let err = std::thread::spawn(move || read_at_most(stderr, MAX_LINE as u64));
    let status = child.wait_exit(deadline);
    // Killed (or already gone): the pipes close and the readers end.
    let status = status.ok_or_else(|| {
        child.kill();
        RunError::TimedOut(deadline)
    });
    let (mut stdout, stderr) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    let status = status?;
    let stdout_over_limit = stdout.len() > stdout_limit;
    stdout.truncate(stdout_limit);
    Ok(Finished {
        status,
        stdout,
        stdout_over_limit,
        stderr,
    })
}

/// The first `limit` bytes `pipe` gives; the rest is drained unread, so the child never blocks
/// on a full pipe.
fn read_at_most(mut pipe: impl Read, limit: u64) -> Vec<u8> {
    let mut kept = Vec::new();
    let _ = (&mut pipe).take(limit).read_to_end(&mut kept);
    let _ = io::copy(&mut pipe, &mut io::sink());
    kept
}

/// What the child's stdin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stdin {
    /// Closed (`/dev/null`): go-plugin providers read nothing.
    Null,
    /// A pipe handed to the caller: requests are written to it.
    Piped,
}

/// A running child and its process group. Dropping it kills the group and reaps the child.
pub(crate) struct Child {
    inner: std::process::Child,
    reaped: Option<ExitStatus>,
}

/// The child's pipes, for the caller's writer and reader threads.
pub(crate) struct Pipes {
    /// Present when spawned with [`Stdin::Piped`].
    pub(crate) stdin: Option<ChildStdin>,
    /// The child's standard output.
    pub(crate) stdout: ChildStdout,
    /// The child's standard error.
    pub(crate) stderr: ChildStderr,
}

impl Child {
    /// Starts `command` with stdin as asked and stdout/stderr piped, as the leader of a new
    /// process group, so that everything it starts (a wrapper script's real binary, helpers)
    /// can be killed with it. Call it from the thread that owns the run: the parent-death
    /// signal is tied to the thread that starts the child.
    pub(crate) fn spawn(mut command: Command, stdin: Stdin) -> io::Result<(Child, Pipes)> {
        command
            .stdin(match stdin {
                Stdin::Null => Stdio::null(),
                Stdin::Piped => Stdio::piped(),
            })
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
            stdin: inner.stdin.take(),
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
    pub(crate) fn pid(&self) -> u32 {
        self.inner.id()
    }

    /// Whether the direct child has exited. Does not reap it: until it is reaped its pid, the
    /// group's id, cannot be reused, so killing the group stays safe.
    pub(crate) fn has_exited(&self) -> bool {
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
    pub(crate) fn wait_exit(&mut self, grace: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + grace;
        // Woken by the exit itself (a pidfd is readable once its process has exited): every
        // run ends by waiting for its providers, and a 10 ms poll cost each run ~5 ms at its
        // end. Without pidfds (Linux before 5.3), a short poll.
        let exit_notice = self.pidfd();
        while !self.has_exited() {
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            let left = deadline - now;
            match &exit_notice {
                Some(fd) => {
                    let mut poll = libc::pollfd {
                        fd: std::os::fd::AsRawFd::as_raw_fd(fd),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    let millis = left.as_millis().clamp(1, i32::MAX as u128) as i32;
                    // SAFETY: one pollfd we own, for the duration of the call.
                    let rc = unsafe { libc::poll(&mut poll, 1, millis) };
                    if rc < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                        // Never spin on a poll that keeps failing.
                        std::thread::sleep(left.min(Duration::from_millis(1)));
                    }
                }
                None => std::thread::sleep(left.min(Duration::from_millis(1))),
            }
        }
        Some(self.kill())
    }

    /// A descriptor that becomes readable when the direct child exits (`pidfd_open(2)`), if
    /// the kernel has them. The child is not reaped yet, so its pid still names it.
    fn pidfd(&self) -> Option<std::os::fd::OwnedFd> {
        if self.reaped.is_some() {
            return None;
        }
        // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, self.inner.id() as libc::pid_t, 0) };
        // SAFETY: a descriptor just returned to us, owned by nothing else.
        (fd >= 0).then(|| unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as i32) })
    }

    /// Kills (SIGKILL) the whole process group and reaps the direct child; returns its status.
    /// Idempotent.
    pub(crate) fn kill(&mut self) -> ExitStatus {
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

/// How a [`Line`] read in pieces ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// At a newline: the line is whole (or is the last piece of a long one).
    Newline,
    /// Cut at [`MAX_LINE`] bytes: more of the same line follows.
    Cut,
    /// At the end of the stream, without a newline.
    Eof,
}

/// One line, or piece of a line, read by [`LineReader::next_piece`], without its newline.
pub(crate) struct Line {
    /// The line's bytes, without the newline; at most the limit asked for.
    pub(crate) bytes: Vec<u8>,
    /// How the line ended.
    pub(crate) end: End,
}

impl Line {
    /// The line as text (invalid UTF-8 replaced), trailing `\r` dropped.
    pub(crate) fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        text.strip_suffix('\r').unwrap_or(&text).to_string()
    }
}

/// Outcome of [`LineReader::next_whole`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Whole {
    /// A line is in the buffer.
    Line,
    /// The line had this many bytes; the buffer holds its first `max`, the rest was consumed.
    TooLong(usize),
    /// End of input, nothing read.
    Eof,
}

/// Reads a pipe as bounded lines: memory stays bounded however the child writes.
pub(crate) struct LineReader<R> {
    reader: BufReader<R>,
}

impl<R: Read> LineReader<R> {
    /// A reader of lines from `reader`, buffered.
    pub(crate) fn new(reader: R) -> LineReader<R> {
        LineReader {
            reader: BufReader::with_capacity(MAX_LINE, reader),
        }
    }

    /// Log mode: the next line or piece of one, at most [`MAX_LINE`] bytes; `None` at the end
    /// of the stream.
    pub(crate) fn next_piece(&mut self) -> io::Result<Option<Line>> {
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
                    end: End::Eof,
                }));
            }
            let room = MAX_LINE - bytes.len();
            let window = &buf[..buf.len().min(room)];
            if let Some(newline) = window.iter().position(|&b| b == b'\n') {
                bytes.extend_from_slice(&window[..newline]);
                self.reader.consume(newline + 1);
                return Ok(Some(Line {
                    bytes,
                    end: End::Newline,
                }));
            }
            let taken = window.len();
            bytes.extend_from_slice(window);
            self.reader.consume(taken);
            if bytes.len() == MAX_LINE {
                return Ok(Some(Line {
                    bytes,
                    end: End::Cut,
                }));
            }
        }
    }

    /// Message mode: reads one whole line (without its `\n`) into `buf`, keeping at most
    /// `max` bytes of it; a longer line is consumed to its end all the same, so the next read
    /// starts at the next line.
    pub(crate) fn next_whole(&mut self, buf: &mut Vec<u8>, max: usize) -> io::Result<Whole> {
        buf.clear();
        let mut total = 0usize;
        let mut any = false;
        loop {
            let available = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if available.is_empty() {
                return Ok(match (any, total > max) {
                    (false, _) => Whole::Eof,
                    (true, false) => Whole::Line,
                    (true, true) => Whole::TooLong(total),
                });
            }
            any = true;
            let newline = available.iter().position(|&b| b == b'\n');
            let chunk = &available[..newline.unwrap_or(available.len())];
            let room = max.saturating_sub(buf.len());
            buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
            total += chunk.len();
            let used = newline.map_or(available.len(), |i| i + 1);
            self.reader.consume(used);
            if newline.is_some() {
                return Ok(if total > max {
                    Whole::TooLong(total)
                } else {
                    Whole::Line
                });
            }
        }
    }
}

/// The last lines of a stream (a child's stderr), for error messages.
#[derive(Debug)]
pub(crate) struct Tail {
    lines: VecDeque<String>,
    capacity: usize,
}

impl Tail {
    /// A tail keeping the last `capacity` lines.
    pub(crate) fn new(capacity: usize) -> Tail {
        Tail {
            lines: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Keeps `line`, forgetting the oldest line when full.
    pub(crate) fn push(&mut self, line: String) {
        if self.lines.len() == self.capacity {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The kept lines, joined by newlines.
    pub(crate) fn text(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

/// Reads `reader` line by line on a thread named `name` until it ends, handing each line (or
/// piece of an overlong one) to `on_line`. The receiver returned disconnects once the reader has
/// ended and every line was handed over: a child's last words arrive after its exit is seen.
pub(crate) fn drain_lines<R: Read + Send + 'static>(
    name: String,
    reader: R,
    mut on_line: impl FnMut(Line) + Send + 'static,
) -> crossbeam_channel::Receiver<()> {
    let (done, drained) = crossbeam_channel::bounded::<()>(0);
    std::thread::Builder::new()
        .name(name)
        .spawn(move || {
            let _done = done;
            let mut lines = LineReader::new(reader);
            while let Ok(Some(line)) = lines.next_piece() {
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
        let mut lines = LineReader::new(&input[..]);
        let first = lines.next_piece().unwrap().unwrap();
        assert_eq!((first.text().as_str(), first.end), ("short", End::Newline));
        let sizes: Vec<(usize, End)> = std::iter::from_fn(|| lines.next_piece().unwrap())
            .map(|l| (l.bytes.len(), l.end))
            .collect();
        assert_eq!(
            sizes,
            [
                (MAX_LINE, End::Cut),
                (MAX_LINE, End::Cut),
                (10, End::Newline),
                (4, End::Eof)
            ]
        );
    }

    #[test]
    fn waiting_for_an_exit_returns_its_status_and_gives_up_on_a_child_that_stays() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "read _; exit 3"]);
        let (mut child, mut pipes) = Child::spawn(cmd, Stdin::Piped).unwrap();
        // It waits for a line: the grace passes with the child still there.
        assert_eq!(child.wait_exit(Duration::from_millis(50)), None);
        assert!(!child.has_exited());
        std::io::Write::write_all(pipes.stdin.as_mut().unwrap(), b"go\n").unwrap();
        let status = child.wait_exit(Duration::from_secs(30)).expect("it exits");
        assert_eq!(status.code(), Some(3));
        // Reaped once: asking again gives the same status.
        assert_eq!(child.wait_exit(Duration::ZERO), Some(status));
    }

    #[test]
    fn the_whole_group_dies_with_the_child() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 600 & echo $!; wait"]);
        let (mut child, pipes) = Child::spawn(cmd, Stdin::Null).unwrap();
        let mut lines = LineReader::new(pipes.stdout);
        let grandchild: i32 = lines.next_piece().unwrap().unwrap().text().parse().unwrap();
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

    fn whole_lines(input: &[u8], max: usize) -> Vec<(Whole, Vec<u8>)> {
        // A tiny buffer so lines straddle refills.
        let mut reader = LineReader {
            reader: BufReader::with_capacity(3, input),
        };
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            let r = reader.next_whole(&mut buf, max).unwrap();
            if r == Whole::Eof {
                return out;
            }
            out.push((r, buf.clone()));
        }
    }

    #[test]
    fn whole_lines_are_bounded_and_reading_resumes_after_a_long_one() {
        let got = whole_lines(b"short\nthis line is long\n\nlast", 8);
        assert_eq!(
            got,
            vec![
                (Whole::Line, b"short".to_vec()),
                (Whole::TooLong(17), b"this lin".to_vec()),
                (Whole::Line, Vec::new()),
                (Whole::Line, b"last".to_vec()),
            ]
        );
        assert_eq!(
            whole_lines(b"0123456789", 4),
            vec![(Whole::TooLong(10), b"0123".to_vec())]
        );
        assert_eq!(whole_lines(b"", 4), vec![]);
        assert_eq!(
            whole_lines(b"1234\n", 4),
            vec![(Whole::Line, b"1234".to_vec())]
        );
    }

    #[test]
    fn a_tail_keeps_the_last_lines() {
        let mut tail = Tail::new(2);
        for line in ["one", "two", "three"] {
            tail.push(line.to_string());
        }
        assert_eq!(tail.text(), "two\nthree");
    }

    #[test]
    fn a_piped_stdin_reaches_the_child() {
        use std::io::Write;
        let (_child, mut pipes) = Child::spawn(Command::new("cat"), Stdin::Piped).unwrap();
        let mut stdin = pipes.stdin.take().expect("stdin is piped");
        stdin.write_all(b"ping\n").unwrap();
        drop(stdin);
        let mut lines = LineReader::new(pipes.stdout);
        let mut buf = Vec::new();
        assert_eq!(lines.next_whole(&mut buf, 16).unwrap(), Whole::Line);
        assert_eq!(buf, b"ping");
        assert_eq!(lines.next_whole(&mut buf, 16).unwrap(), Whole::Eof);
    }

    #[test]
    fn a_bounded_run_keeps_at_most_its_limit_and_stops_at_its_deadline() {
        let mut big = command("sh");
        big.args(["-c", "head -c 100000 /dev/zero; echo oops >&2; exit 3"]);
        let done = run_bounded(big, 1000, Duration::from_secs(30)).unwrap();
        assert_eq!(done.stdout.len(), 1000);
        assert!(done.stdout_over_limit);
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&done.stderr), "oops\n");

        let mut exact = command("printf");
        exact.arg("abc");
        let done = run_bounded(exact, 3, Duration::from_secs(30)).unwrap();
        assert_eq!(
            (done.stdout.as_slice(), done.stdout_over_limit),
            (&b"abc"[..], false)
        );

        let started = Instant::now();
        let mut hung = command("sh");
        hung.args(["-c", "sleep 30 & sleep 30"]);
        match run_bounded(hung, 10, Duration::from_millis(200)) {
            Err(RunError::TimedOut(after)) => assert_eq!(after, Duration::from_millis(200)),
            other => panic!("{other:?}"),
        }
        // The group (the background sleep too) was killed, so the readers did not wait 30 s.
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
