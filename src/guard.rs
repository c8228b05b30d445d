//! What the `nivis` process does once, at its start, so that the secrets it will hold stay in
//! its memory (DESIGN §93): it becomes non-dumpable (`PR_SET_DUMPABLE` 0: no core file, no
//! `ptrace` or `/proc/PID/mem` by other processes of the same user), its core-file limit is
//! 0 (the providers it starts inherit that), and the `NIVIS_VAR_*` variables are taken out of
//! its environment, so that no process it starts (a provider, Nix, a secret source's command)
//! inherits a secret that way.
//!
//! Owns: those three steps and the variables taken ([`env_variables`]). Not: what the
//! variables mean (`cli::vars`), masking (`secrets`).

use std::ffi::OsString;
use std::sync::OnceLock;

/// The `NIVIS_VAR_*` prefix.
pub(crate) const ENV_PREFIX: &str = "NIVIS_VAR_";

static TAKEN: OnceLock<Vec<(OsString, OsString)>> = OnceLock::new();

/// Makes the process non-dumpable with no core files and takes the `NIVIS_VAR_*` variables
/// out of its environment. Call first thing in `main`, while the process has one thread
/// (changing the environment is not safe with others running).
pub fn protect_process() {
    // SAFETY: prctl and setrlimit with constant arguments have no memory-safety
    // preconditions; failures leave the process as it was (both are best effort: a kernel
    // without them cannot be helped).
    unsafe {
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
    }
    take_env_variables();
}

/// Takes the `NIVIS_VAR_*` variables out of the environment (once), keeping them for
/// [`env_variables`].
fn take_env_variables() -> &'static [(OsString, OsString)] {
    TAKEN.get_or_init(|| {
        let taken: Vec<(OsString, OsString)> = std::env::vars_os()
            .filter(|(k, _)| k.to_string_lossy().starts_with(ENV_PREFIX))
            .collect();
        for (k, _) in &taken {
            std::env::remove_var(k);
        }
        taken
    })
}

/// The `NIVIS_VAR_*` variables the process started with (taken out of the environment by
/// [`protect_process`]; a process that did not call it, such as a test, takes them now).
pub(crate) fn env_variables() -> &'static [(OsString, OsString)] {
    take_env_variables()
}
