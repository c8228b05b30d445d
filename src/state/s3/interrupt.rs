//! Storage calls that yield to Ctrl-C: a request to a hung S3 server must not keep a run
//! waiting once the user asked it to stop.
//!
//! Owns: the grace a request still gets after an interrupt (the flag is the ground floor's,
//! `crate::interrupt`), and running one attempt on its own thread so that waiting for it can
//! be given up. Not: what is retried or why
//! (`client`), nor what the run does after a request was given up (the engine rescues).
//!
//! After the first Ctrl-C a run still records what its running operations did, so a request
//! is not cut at once: it gets [`GRACE`] to answer, and no further attempts. One that does not
//! answer by then is abandoned (its thread is left to end at its own timeout), and from then on
//! every request of that client fails at once: the server is taken as hung, and the run goes on
//! to its rescue file instead of waiting on it again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a request may still take once the run was interrupted.
pub(crate) const GRACE: Duration = Duration::from_secs(3);

/// How often a waiting request looks at the interrupt flag.
const POLL: Duration = Duration::from_millis(50);

/// A request was given up after an interrupt: every later request of this process (the state's,
/// the audit log's: one server) fails at once.
static HUNG: AtomicBool = AtomicBool::new(false);

pub(crate) use crate::interrupt::interrupted;

/// A request was given up because the run was interrupted and the server did not answer
/// within [`GRACE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Abandoned;

/// After an interrupt, an attempt failed without an answer (a timeout, a refused connection):
/// the server is taken as hung from now on.
pub(crate) fn give_up() {
    if interrupted() {
        HUNG.store(true, Ordering::SeqCst);
    }
}

/// Runs `attempt` on its own thread and waits for it, unless the run is interrupted and it has
/// not answered [`GRACE`] after that (or an earlier request was already given up: then it is
/// not started at all). Giving up marks the server hung for every later request.
pub(crate) fn wait_for<T: Send + 'static>(
    attempt: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Abandoned> {
    let hung = &HUNG;
    if hung.load(Ordering::SeqCst) {
        return Err(Abandoned);
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        let _ = tx.send(attempt());
    });
    let mut since: Option<Instant> = None;
    loop {
        match rx.recv_timeout(POLL) {
            Ok(value) => return Ok(value),
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                // The attempt panicked: nothing to wait for.
                hung.store(true, Ordering::SeqCst);
                return Err(Abandoned);
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
        if interrupted() {
            let since = *since.get_or_insert_with(Instant::now);
            if since.elapsed() >= GRACE {
                hung.store(true, Ordering::SeqCst);
                return Err(Abandoned);
            }
        }
    }
}

/// Sleeps `pause` between attempts; returns early, `true`, if the run is interrupted.
pub(crate) fn pause(pause: Duration) -> bool {
    let until = Instant::now() + pause;
    while Instant::now() < until {
        if interrupted() {
            return true;
        }
        std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
    }
    interrupted()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_waited_for_and_nothing_is_given_up_without_an_interrupt() {
        assert_eq!(wait_for(|| 7), Ok(7));
        give_up();
        assert_eq!(
            wait_for(|| 8),
            Ok(8),
            "no interrupt: the server is not given up"
        );
        assert!(!pause(Duration::from_millis(1)));
    }
}
