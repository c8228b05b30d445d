//! The process's interrupt flag: set by the first Ctrl-C (`cli`'s signal handler), read by
//! whoever must stop starting work (the scheduler's dispatch, the phase loop, the S3 client's
//! waits).
//!
//! On the ground floor, importing nothing of the crate, so every floor reads the one flag
//! directly instead of having it handed down or registered. Owns only the flag; what an
//! interrupt means (finish what runs, record it, exit 130) is each reader's.

use std::sync::atomic::{AtomicBool, Ordering};

static FLAG: AtomicBool = AtomicBool::new(false);

/// The flag itself, for the scheduler (which watches it while it waits) and the handler that
/// sets it.
pub(crate) fn flag() -> &'static AtomicBool {
    &FLAG
}

/// Whether the run was interrupted.
pub(crate) fn interrupted() -> bool {
    FLAG.load(Ordering::SeqCst)
}
