//! How long the process spent waiting on providers: the union, over time, of every in-flight
//! provider RPC, start-up and shutdown, across all providers and threads.
//!
//! Owns: one process-wide clock. The union (not the sum) is what a user's wall time is made
//! of: ten calls in flight for one second cost one second. Benchmarks and `-v` use it to split
//! wall time into Nix, providers and Nivis's own work; the sum of RPC durations is kept too, to
//! tell how busy the workers kept the providers. Not: per-resource timings (the engine's
//! `started`/`finished` events carry those).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Totals since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CallTimes {
    /// Wall time during which at least one provider RPC, start-up or shutdown was in flight.
    pub(crate) busy: Duration,
    /// RPCs made.
    pub(crate) calls: u64,
    /// The RPCs' durations added up (start-up and shutdown excluded).
    pub(crate) summed: Duration,
}

impl CallTimes {
    /// What happened between `earlier` and `self`.
    pub(crate) fn since(self, earlier: CallTimes) -> CallTimes {
        CallTimes {
            busy: self.busy.saturating_sub(earlier.busy),
            calls: self.calls.saturating_sub(earlier.calls),
            summed: self.summed.saturating_sub(earlier.summed),
        }
    }
}

/// A union-of-intervals clock; the process has one ([`call_times`]), tests make their own.
struct Clock {
    state: Mutex<ClockState>,
}

struct ClockState {
    in_flight: u32,
    since: Option<Instant>,
    totals: CallTimes,
}

/// What is in flight: an RPC counts in every total, a provider's start-up or shutdown only in
/// the union (its duration is not a call the workers could overlap).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Rpc,
    Lifecycle,
}

impl Clock {
    const fn new() -> Clock {
        Clock {
            state: Mutex::new(ClockState {
                in_flight: 0,
                since: None,
                totals: CallTimes {
                    busy: Duration::ZERO,
                    calls: 0,
                    summed: Duration::ZERO,
                },
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self, now: Instant) -> CallTimes {
        let state = self.lock();
        let mut totals = state.totals;
        if let Some(since) = state.since {
            totals.busy += now.saturating_duration_since(since);
        }
        totals
    }

    fn enter(&self, now: Instant, kind: Kind) {
        let mut state = self.lock();
        if state.in_flight == 0 {
            state.since = Some(now);
        }
        state.in_flight += 1;
        if kind == Kind::Rpc {
            state.totals.calls += 1;
        }
    }

    /// An interaction off the clock: an RPC's start (`None`) counts a call, its end adds its
    /// duration to the sum; the union is untouched.
    fn count(&self, kind: Kind, took: Option<Duration>) {
        if kind != Kind::Rpc {
            return;
        }
        let mut state = self.lock();
        match took {
            None => state.totals.calls += 1,
            Some(took) => state.totals.summed += took,
        }
    }

    fn exit(&self, now: Instant, kind: Kind, started: Instant) {
        let mut state = self.lock();
        if kind == Kind::Rpc {
            state.totals.summed += now.saturating_duration_since(started);
        }
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0 {
            if let Some(since) = state.since.take() {
                state.totals.busy += now.saturating_duration_since(since);
            }
        }
    }
}

static PROCESS_CLOCK: Clock = Clock::new();

/// The process's totals so far (a call still in flight counts up to now).
pub(crate) fn call_times() -> CallTimes {
    PROCESS_CLOCK.read(Instant::now())
}

thread_local! {
    /// Set while this thread starts a provider the run does not wait on (see [`off_the_clock`]).
    static OFF_THE_CLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's provider interactions kept out of the busy union: a provider
/// started while Nix evaluates is not waited on, so its start is not time spent waiting on
/// providers (its RPCs still count as calls, and the wait for its end, if any, is clocked by
/// the waiter).
pub(crate) fn off_the_clock<T>(f: impl FnOnce() -> T) -> T {
    OFF_THE_CLOCK.with(|off| off.set(true));
    let result = f();
    OFF_THE_CLOCK.with(|off| off.set(false));
    result
}

/// One provider interaction in flight on the process clock, until dropped.
pub(crate) struct InFlight {
    kind: Kind,
    started: Instant,
    /// Off the clock: an RPC counts as a call, nothing counts in the union.
    background: bool,
}

impl InFlight {
    /// An RPC.
    pub(crate) fn rpc() -> InFlight {
        InFlight::enter(Kind::Rpc)
    }

    /// Starting or stopping a provider process.
    pub(crate) fn lifecycle() -> InFlight {
        InFlight::enter(Kind::Lifecycle)
    }

    fn enter(kind: Kind) -> InFlight {
        let started = Instant::now();
        let background = OFF_THE_CLOCK.with(std::cell::Cell::get);
        if background {
            PROCESS_CLOCK.count(kind, None);
        } else {
            PROCESS_CLOCK.enter(started, kind);
        }
        InFlight {
            kind,
            started,
            background,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let now = Instant::now();
        if self.background {
            PROCESS_CLOCK.count(self.kind, Some(now.saturating_duration_since(self.started)));
        } else {
            PROCESS_CLOCK.exit(now, self.kind, self.started);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_the_clock_an_rpc_counts_as_a_call_and_nothing_counts_in_the_union() {
        let clock = Clock::new();
        clock.count(Kind::Lifecycle, None);
        clock.count(Kind::Rpc, None);
        clock.count(Kind::Rpc, Some(Duration::from_millis(20)));
        clock.count(Kind::Lifecycle, Some(Duration::from_millis(300)));
        let total = clock.read(Instant::now() + Duration::from_secs(1));
        assert_eq!(total.busy, Duration::ZERO);
        assert_eq!(total.calls, 1);
        assert_eq!(total.summed, Duration::from_millis(20));
    }

    #[test]
    fn overlapping_calls_count_once_in_the_union_and_idle_time_not_at_all() {
        let clock = Clock::new();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        clock.enter(at(0), Kind::Rpc); // a
        clock.enter(at(30), Kind::Rpc); // b, overlapping a
        clock.exit(at(60), Kind::Rpc, at(0)); // a ends
        clock.exit(at(90), Kind::Rpc, at(30)); // b ends: 90 ms in flight, not 60 + 60
        assert_eq!(clock.read(at(90)).busy, Duration::from_millis(90));
        assert_eq!(clock.read(at(90)).summed, Duration::from_millis(120));
        assert_eq!(
            clock.read(at(150)).busy,
            Duration::from_millis(90),
            "idle is not counted"
        );
        clock.enter(at(150), Kind::Lifecycle); // c: a start-up
        assert_eq!(
            clock.read(at(160)).busy,
            Duration::from_millis(100),
            "open call counts to now"
        );
        clock.exit(at(170), Kind::Lifecycle, at(150));
        let total = clock.read(at(500));
        assert_eq!(total.busy, Duration::from_millis(110));
        assert_eq!(total.calls, 2, "start-up is not an RPC");
        assert_eq!(total.summed, Duration::from_millis(120));
        let earlier = CallTimes {
            busy: Duration::from_millis(10),
            calls: 1,
            summed: Duration::from_millis(20),
        };
        assert_eq!(
            total.since(earlier),
            CallTimes {
                busy: Duration::from_millis(100),
                calls: 1,
                summed: Duration::from_millis(100),
            }
        );
    }
}
