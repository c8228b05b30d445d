//! Who holds a state lock: the [`LockHolder`] record, whether that holder still runs, and the
//! rules `force-unlock` applies before breaking a lock.
//!
//! The record is plain data, serialised as JSON into whatever carries the lock (the local lock
//! file, `lock.rs`; the S3 lock object, `s3/lock.rs`), so every lock mechanism shares one notion
//! of a holder and of its id, the id `force-unlock` must name, and one set of checks
//! ([`check_force_unlock`]) and outcomes ([`ForceUnlock`]), and one way to wait for a busy lock
//! ([`LockWait`]). [`LockHolder::liveness`] answers from
//! this machine's process table alone and takes no lock: it is separate from the locking itself.
//! Not: taking, releasing or removing locks (the lock mechanisms).

use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::error::StateError;

/// Who holds (or asks for) a state lock; written into the lock while held.
///
/// Fields added after the first release default when absent, so older records still read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockHolder {
    /// Unique id of this holder's lock, shown in every "locked" message; `force-unlock` must
    /// name it. Empty in records written before ids existed.
    #[serde(default)]
    pub id: String,
    /// Process id.
    pub(crate) pid: u32,
    /// Host name of the machine the process runs on.
    pub(crate) host: String,
    /// User name (or `uid N` when the environment names none).
    pub(crate) user: String,
    /// What the process is doing, e.g. `nivis apply`.
    pub(crate) command: String,
    /// When the lock was taken, in seconds since the Unix epoch (UTC); set on acquisition.
    pub(crate) since: u64,
    /// The Nivis version of the holder.
    #[serde(default)]
    pub(crate) version: String,
    /// When the process started, as `BOOT_ID/TICKS` (the kernel's boot id, then the start time
    /// in clock ticks since boot): with the host and pid it names one process even after its
    /// pid is reused or the machine rebooted. `None` where it cannot be read.
    #[serde(default)]
    pub(crate) process_start: Option<String>,
    /// Set when the holder has ended but keeps the lock for results it could not record (see
    /// [`KeptFor`]): nobody else may work from a state that lacks them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) kept: Option<Box<KeptFor>>,
}

/// Why a lock outlives its holder: results rescued on one machine, waiting to be recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeptFor {
    /// The machine whose rescue file holds the results.
    pub(crate) host: String,
    /// How many results (changes) wait there.
    pub(crate) results: usize,
    /// The rescue file, on that machine.
    pub(crate) file: String,
}

impl fmt::Display for KeptFor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kept for {} rescued result(s) on host {} (rescue file {}): run the command again on \
             {} to record them; forcing the lock open leaves those objects unrecorded",
            self.results, self.host, self.file, self.host
        )
    }
}

/// Whether a lock's holder still runs, as far as this machine can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// On this host, a process with the holder's pid runs and (when recorded) started when the
    /// holder did.
    Alive,
    /// On this host, no such process runs (it exited, its pid was reused, or the machine
    /// rebooted since).
    Gone,
    /// Another host, or nothing to tell by: cannot be checked from here.
    Unknown,
}

impl LockHolder {
    /// A holder record for this process running `command`, with a fresh id.
    pub fn current(command: impl Into<String>) -> LockHolder {
        LockHolder {
            id: super::model::new_lineage(),
            pid: std::process::id(),
            host: host_name(),
            user: user_name(),
            command: command.into(),
            since: unix_now(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            process_start: process_start(std::process::id()),
            kept: None,
        }
    }

    /// Whether the holder still runs (see [`Liveness`]).
    pub(crate) fn liveness(&self) -> Liveness {
        if self.host != host_name() {
            return Liveness::Unknown;
        }
        if process_start(std::process::id()).is_none() {
            // No process table to read (not Linux, or /proc hidden).
            return Liveness::Unknown;
        }
        match (process_start(self.pid), &self.process_start) {
            (None, _) => Liveness::Gone,
            (Some(now), Some(recorded)) if &now == recorded => Liveness::Alive,
            (Some(_), Some(_)) => Liveness::Gone,
            // An old record without a start time: a process with that pid runs, and it may be
            // the holder; assume it is.
            (Some(_), None) => Liveness::Alive,
        }
    }
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pid {} on host {} (user {}), running `{}`",
            self.pid, self.host, self.user, self.command
        )?;
        if !self.version.is_empty() {
            write!(f, " (nivis {})", self.version)?;
        }
        write!(f, ", since {}", format_utc(self.since))?;
        let now = unix_now();
        match now.checked_sub(self.since) {
            Some(age) => write!(f, " ({} ago)", human_duration(age))?,
            None => write!(
                f,
                " ({} in the future: clock skew?)",
                human_duration(self.since - now)
            )?,
        }
        if let Some(kept) = &self.kept {
            write!(f, "; {kept}")?;
        }
        Ok(())
    }
}

/// `secs` in the largest units that keep it readable: `42 s`, `7 min`, `3 h 5 min`,
/// `30 days`.
pub(crate) fn human_duration(secs: u64) -> String {
    const MIN: u64 = 60;
    const HOUR: u64 = 60 * MIN;
    const DAY: u64 = 24 * HOUR;
    match secs {
        s if s < MIN => format!("{s} s"),
        s if s < HOUR => format!("{} min", s / MIN),
        s if s < DAY => match (s % HOUR) / MIN {
            0 => format!("{} h", s / HOUR),
            m => format!("{} h {m} min", s / HOUR),
        },
        s if s < 2 * DAY => format!("1 day {} h", (s - DAY) / HOUR),
        s => format!("{} days", s / DAY),
    }
}

/// What `force-unlock` did, whatever carries the lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForceUnlock {
    /// Nobody held the lock (or there was no lock); nothing was changed.
    NotLocked,
    /// The lock was held, so it was removed; the next opener takes a fresh one.
    Removed {
        /// The holder recorded in the removed lock, if readable.
        holder: Option<LockHolder>,
    },
    /// The confirmation was declined; nothing was changed.
    Declined,
}

impl fmt::Display for ForceUnlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForceUnlock::NotLocked => write!(f, "the state is not locked; nothing to do"),
            ForceUnlock::Removed { holder } => {
                write!(f, "removed the lock")?;
                if let Some(holder) = holder {
                    if !holder.id.is_empty() {
                        write!(f, " {}", holder.id)?;
                    }
                    write!(f, " held by {holder}")?;
                }
                write!(
                    f,
                    "; the next command takes a new one. If that holder is in fact still \
                     running, two commands can now write the state at once: stop it"
                )
            }
            ForceUnlock::Declined => write!(f, "cancelled: the lock was left in place"),
        }
    }
}

/// Whether `force-unlock ID` may break the lock `lock` (a file or a remote object) held by
/// `holder` (`None`: the lock records no readable holder). The id must name the lock (a record
/// without one can only be forced), and a holder alive on this host ([`Liveness::Alive`]: same
/// host, pid and start time) keeps it unless `force`. A holder on another host cannot be
/// checked from here, so only its id is.
pub(crate) fn check_force_unlock(
    lock: &Path,
    id: &str,
    force: bool,
    holder: Option<&LockHolder>,
) -> Result<(), StateError> {
    let mismatch = || StateError::LockIdMismatch {
        path: lock.to_path_buf(),
        given: id.to_string(),
        holder: holder.cloned().map(Box::new),
    };
    match holder {
        Some(h) if !h.id.is_empty() && h.id != id => Err(mismatch()),
        Some(h) if h.id.is_empty() && !force => Err(mismatch()),
        None if !force => Err(mismatch()),
        Some(h) if !force && h.kept.is_some() => Err(StateError::LockKeptForRescue {
            path: lock.to_path_buf(),
            holder: Box::new(h.clone()),
        }),
        Some(h) if !force && h.liveness() == Liveness::Alive => Err(StateError::LockHolderAlive {
            path: lock.to_path_buf(),
            holder: Box::new(h.clone()),
        }),
        _ => Ok(()),
    }
}

/// Waiting for a busy lock, whatever carries it: the caller tries, and on a busy lock asks
/// [`LockWait::pause`] whether to try again. Pauses double from `first` up to `longest`, and
/// the last one is cut to end at the deadline.
pub(crate) struct LockWait {
    start: Instant,
    deadline: Option<Instant>,
    pause: Duration,
    longest: Duration,
}

impl LockWait {
    /// Waits up to `wait` in all (`None`: do not wait).
    pub(crate) fn new(wait: Option<Duration>, first: Duration, longest: Duration) -> LockWait {
        let start = Instant::now();
        LockWait {
            start,
            deadline: wait.map(|w| start + w),
            pause: first,
            longest,
        }
    }

    /// Sleeps until the next try and returns `true`, or returns `false` once the wait is over.
    pub(crate) fn pause(&mut self) -> bool {
        let now = Instant::now();
        match self.deadline {
            Some(deadline) if now < deadline => {
                std::thread::sleep(self.pause.min(deadline - now));
                self.pause = (self.pause * 2).min(self.longest);
                true
            }
            _ => false,
        }
    }

    /// How long the caller has waited so far.
    pub(crate) fn waited(&self) -> Duration {
        self.start.elapsed()
    }
}

/// The start of process `pid` as `BOOT_ID/TICKS`, or `None` if no such process can be read.
fn process_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces or parentheses itself:
    // count fields from the last `)`. starttime is field 22, the 20th after the name.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let ticks = after_name.split_whitespace().nth(19)?;
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    Some(format!("{}/{ticks}", boot.trim()))
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the pointer and length describe `buf`, which outlives the call; gethostname writes
    // at most `len` bytes into it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match rc {
        0 if end > 0 => String::from_utf8_lossy(&buf[..end]).into_owned(),
        _ => "unknown".to_string(),
    }
}

pub(crate) fn user_name() -> String {
    for var in ["USER", "LOGNAME"] {
        if let Ok(name) = std::env::var(var) {
            if !name.is_empty() {
                return name;
            }
        }
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    format!("uid {}", unsafe { libc::getuid() })
}

/// Formats seconds since the Unix epoch as RFC 3339 UTC, e.g. `2023-11-14T22:13:20Z`.
pub(crate) fn format_utc(secs: u64) -> String {
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from a day count (H. Hinnant, "chrono-Compatible Low-Level Date Algorithms").
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3_600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_ages_read_in_human_units_and_a_future_one_suspects_the_clock() {
        assert_eq!(human_duration(42), "42 s");
        assert_eq!(human_duration(7 * 60 + 5), "7 min");
        assert_eq!(human_duration(3 * 3600), "3 h");
        assert_eq!(human_duration(3 * 3600 + 5 * 60), "3 h 5 min");
        assert_eq!(human_duration(86_400 + 7200), "1 day 2 h");
        assert_eq!(human_duration(2_592_001), "30 days");
        let mut old = LockHolder::current("nivis apply");
        old.since = unix_now() - 2_592_001;
        assert!(old.to_string().contains("(30 days ago)"), "{old}");
        let mut ahead = LockHolder::current("nivis apply");
        ahead.since = unix_now() + 7200;
        let text = ahead.to_string();
        assert!(text.contains("in the future: clock skew?"), "{text}");
    }

    #[test]
    fn formats_utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(format_utc(4_107_542_399), "2100-02-28T23:59:59Z");
    }

    #[test]
    fn current_holder_names_this_process() {
        let holder = LockHolder::current("nivis apply");
        assert_eq!(holder.pid, std::process::id());
        assert!(!holder.host.is_empty() && !holder.user.is_empty());
        assert_ne!(holder.id, LockHolder::current("other").id, "ids are unique");
        let text = holder.to_string();
        assert!(text.contains(&format!("pid {}", holder.pid)), "{text}");
        assert!(text.contains("`nivis apply`"), "{text}");
        // Older records (no id, version or start time) still read.
        let old = r#"{"pid":1,"host":"h","user":"u","command":"c","since":0}"#;
        let old: LockHolder = serde_json::from_str(old).unwrap();
        assert!(old.id.is_empty() && old.process_start.is_none());
    }

    #[test]
    fn liveness_checks_pid_start_time_and_host() {
        let me = LockHolder::current("test");
        assert!(me.process_start.is_some(), "Linux: /proc is readable");
        assert_eq!(me.liveness(), Liveness::Alive);

        // Same pid, another start: the pid was reused, or the machine rebooted.
        let reused = LockHolder {
            process_start: Some("another-boot/1".into()),
            ..me.clone()
        };
        assert_eq!(reused.liveness(), Liveness::Gone);

        // A process that has exited.
        let mut child = crate::child::command("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let exited = LockHolder { pid, ..me.clone() };
        assert_eq!(exited.liveness(), Liveness::Gone);

        // Another machine: nothing to tell by.
        let remote = LockHolder {
            host: format!("{}-elsewhere", me.host),
            ..me
        };
        assert_eq!(remote.liveness(), Liveness::Unknown);
    }
}
