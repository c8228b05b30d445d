//! "Still creating…" lines: a thread that, while provider operations are in flight, prints one
//! line per operation every interval (10 s; `NIVIS_PROGRESS_INTERVAL` seconds for tests), so
//! a long apply never looks hung. Human output only.
//!
//! Owns: the set of in-flight operations and the timer thread. Not: the words or colours of
//! the lines (the caller formats them), nor deciding what is in flight (engine events).

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

/// One operation in flight.
struct Flight {
    /// The line to print, given the time elapsed (as text: "12s", "0.4s").
    line: Box<dyn Fn(&str) -> String + Send>,
    started: Instant,
    /// Intervals already reported.
    reported: u32,
}

type Flights = Arc<Mutex<BTreeMap<String, Flight>>>;

/// The timer; stops and joins its thread when dropped (at once: dropping `stop` wakes it).
pub(super) struct Ticker {
    flights: Flights,
    interval: Duration,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// A ticker with the interval from `NIVIS_PROGRESS_INTERVAL` (seconds), else 10 s. The
    /// thread starts with the first operation.
    pub(super) fn new() -> Self {
        let interval = std::env::var("NIVIS_PROGRESS_INTERVAL")
            .ok()
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map(Duration::from_secs_f64)
            .unwrap_or(Duration::from_secs(10));
        Ticker {
            flights: Arc::default(),
            interval,
            stop: None,
            thread: None,
        }
    }

    /// `id` started; `line(elapsed)` is what to print for it at each interval.
    pub(super) fn start(&mut self, id: &str, line: impl Fn(&str) -> String + Send + 'static) {
        if let Ok(mut f) = self.flights.lock() {
            f.insert(
                id.to_string(),
                Flight {
                    line: Box::new(line),
                    started: Instant::now(),
                    reported: 0,
                },
            );
        }
        if self.thread.is_none() {
            let (stop, stopped) = crossbeam_channel::bounded(0);
            let (flights, interval) = (Arc::clone(&self.flights), self.interval);
            self.stop = Some(stop);
            self.thread = Some(std::thread::spawn(move || {
                tick(&flights, &stopped, interval)
            }));
        }
    }

    /// `id` is still in flight but doing something else now: print `line(elapsed)` instead,
    /// timed from now. Nothing if `id` is not in flight.
    pub(super) fn replace(&mut self, id: &str, line: impl Fn(&str) -> String + Send + 'static) {
        if let Ok(mut f) = self.flights.lock() {
            if let Some(flight) = f.get_mut(id) {
                *flight = Flight {
                    line: Box::new(line),
                    started: Instant::now(),
                    reported: 0,
                };
            }
        }
    }

    /// `id` finished (or failed).
    pub(super) fn finish(&mut self, id: &str) {
        if let Ok(mut f) = self.flights.lock() {
            f.remove(id);
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn tick(flights: &Mutex<BTreeMap<String, Flight>>, stopped: &Receiver<()>, interval: Duration) {
    // Wake often enough to be on time, rarely enough to cost nothing; the sender's drop wakes
    // it at once to stop.
    let nap = (interval / 10).clamp(Duration::from_millis(20), Duration::from_millis(500));
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(nap) {
        let Ok(mut flights) = flights.lock() else {
            return;
        };
        let mut due = Vec::new();
        for f in flights.values_mut() {
            let elapsed = f.started.elapsed();
            let intervals = (elapsed.as_secs_f64() / interval.as_secs_f64()) as u32;
            if intervals > f.reported {
                f.reported = intervals;
                due.push((f.line)(&seconds(elapsed)));
            }
        }
        drop(flights);
        if !due.is_empty() {
            // Through render's stdout: a closed pipe stops output, not the run.
            let mut out = super::stdout();
            for line in due {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        }
    }
}

/// "12s", or "0.4s" below ten seconds (test intervals are fractions of a second).
fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(10) {
        format!("{:.1}s", d.as_secs_f64())
    } else {
        format!("{}s", d.as_secs())
    }
}
