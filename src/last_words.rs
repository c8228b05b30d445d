//! The line a second Ctrl-C prints before the process leaves at once (exit 130): which
//! operations were in flight (their objects may exist without a record) and which state lock
//! stays held, with its id.
//!
//! Owns: that line, kept pre-formatted so a signal handler can write it with one `write(2)`
//! and no allocation or lock. Ordinary code tells it what changed ([`started`], [`ended`],
//! [`lock_held`]); each change formats the whole line anew into the buffer the handler is not
//! reading, then makes it the one to read. Not: the signal handler itself (`cli`), nor deciding
//! what an operation or a lock is (the CLI's event sink and the S3 store report them).
//!
//! On the ground floor: it imports nothing of the crate, so the state store and the CLI can
//! both report to it.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

/// The longest line kept (a long list of operations is cut, saying how many more there were).
const CAPACITY: usize = 4096;

/// One of the two buffers: written by ordinary code only while it is not the active one.
struct Buffer(UnsafeCell<[u8; CAPACITY]>);

// SAFETY: a buffer is written only under `FACTS`' mutex and only while it is not `ACTIVE`; the
// signal handler only reads the active one. A handler running across two flips could read a
// buffer being rewritten: the line may then be garbled, never out of bounds.
unsafe impl Sync for Buffer {}

static BUFFERS: [Buffer; 2] = [
    Buffer(UnsafeCell::new([0; CAPACITY])),
    Buffer(UnsafeCell::new([0; CAPACITY])),
];
static LENGTHS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// What the line says.
struct Facts {
    /// Operations started and not ended, `action address`, in start order.
    in_flight: Vec<String>,
    /// The state lock this process holds and that outlives it (`where`, `lock id`).
    lock: Option<(String, String)>,
}

static FACTS: Mutex<Facts> = Mutex::new(Facts {
    in_flight: Vec::new(),
    lock: None,
});

/// An operation `action` (`create`, `delete`, ...) on `address` was sent to its provider.
pub(crate) fn started(action: &str, address: &str) {
    update(|f| f.in_flight.push(format!("{action} {address}")));
}

/// The operation on `address` ended (finished, failed or unrecorded).
pub(crate) fn ended(address: &str) {
    update(|f| {
        if let Some(at) = f
            .in_flight
            .iter()
            .position(|op| op.split_once(' ').is_some_and(|(_, a)| a == address))
        {
            f.in_flight.remove(at);
        }
    });
}

/// This process holds the lock `id` of the state at `place`, which stays held if it quits at
/// once (a remote lock; the kernel frees a local one); `None`: it holds none now.
pub(crate) fn lock_held(lock: Option<(&str, &str)>) {
    update(|f| f.lock = lock.map(|(place, id)| (place.to_string(), id.to_string())));
}

/// Writes the line to stderr: async-signal-safe (one `write(2)` of a buffer already made).
pub(crate) fn write_out() {
    let active = ACTIVE.load(Ordering::Acquire) & 1;
    let len = LENGTHS[active].load(Ordering::Acquire).min(CAPACITY);
    // SAFETY: the active buffer is not written while it is active; `len` is within it.
    let bytes = unsafe { &(&*BUFFERS[active].0.get())[..len] };
    // SAFETY: write(2) on stderr with a valid buffer; its result is of no use here.
    unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
}

fn update(change: impl FnOnce(&mut Facts)) {
    let mut facts = FACTS.lock().unwrap_or_else(PoisonError::into_inner);
    change(&mut facts);
    let line = render(&facts);
    let next = (ACTIVE.load(Ordering::Acquire) + 1) & 1;
    let bytes = cut(line.as_bytes());
    // SAFETY: `next` is not active, and writers are serialised by `FACTS`.
    unsafe { (&mut *BUFFERS[next].0.get())[..bytes.len()].copy_from_slice(bytes) };
    LENGTHS[next].store(bytes.len(), Ordering::Release);
    ACTIVE.store(next, Ordering::Release);
}

/// `bytes`, cut to [`CAPACITY`] at a character boundary.
fn cut(bytes: &[u8]) -> &[u8] {
    if bytes.len() <= CAPACITY {
        return bytes;
    }
    let mut end = CAPACITY;
    while end > 0 && (bytes[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    &bytes[..end]
}

/// The line for `facts`, newline included.
fn render(facts: &Facts) -> String {
    let mut line = String::from("\nQuit at once: ");
    match facts.in_flight.len() {
        0 => line.push_str("no operation was in flight"),
        n => {
            line.push_str(&format!(
                "{n} operation(s) were in flight and their objects may exist without a record \
                 (check each; adopt one with `nivis import ADDRESS ID`): "
            ));
            let mut shown = 0;
            for op in &facts.in_flight {
                if line.len() + op.len() > CAPACITY - 400 {
                    break;
                }
                if shown > 0 {
                    line.push_str(", ");
                }
                line.push_str(op);
                shown += 1;
            }
            if shown < n {
                line.push_str(&format!(" and {} more", n - shown));
            }
        }
    }
    match &facts.lock {
        Some((place, id)) => line.push_str(&format!(
            "; the state lock of {place} stays held (lock id {id}): once this process is gone, \
             `nivis force-unlock {id}` frees it.\n"
        )),
        None => line.push_str(".\n"),
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_what_was_in_flight_and_the_lock_that_stays() {
        let mut facts = Facts {
            in_flight: vec!["create lxd.lxd_container.c3".into(), "delete null.x".into()],
            lock: Some(("s3://b/k".into(), "abc-123".into())),
        };
        let line = render(&facts);
        assert!(line.contains("2 operation(s) were in flight"), "{line}");
        assert!(
            line.contains("create lxd.lxd_container.c3, delete null.x"),
            "{line}"
        );
        assert!(line.contains("lock id abc-123"), "{line}");
        assert!(line.contains("`nivis force-unlock abc-123`"), "{line}");
        facts.in_flight = (0..1000).map(|i| format!("create a.b.c{i}")).collect();
        facts.lock = None;
        let line = render(&facts);
        assert!(line.len() <= CAPACITY, "{}", line.len());
        assert!(line.contains("more"), "{line}");
        assert!(line.ends_with(".\n"));
    }

    #[test]
    fn updates_flip_the_buffer_the_handler_reads() {
        started("create", "t.one");
        started("update", "t.two");
        ended("t.one");
        let active = ACTIVE.load(Ordering::Acquire);
        let len = LENGTHS[active].load(Ordering::Acquire);
        let text = String::from_utf8_lossy(unsafe { &(&*BUFFERS[active].0.get())[..len] });
        assert!(text.contains("update t.two"), "{text}");
        assert!(!text.contains("t.one"), "{text}");
        ended("t.two");
    }
}
