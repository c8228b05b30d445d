//! The flags of the verbs about the state alone: `state …`, `force-unlock` and `env`, and
//! `plan`'s hold on the state lock. (A part of `cli::args`, kept apart so each file stays
//! readable.)

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueHint};
use clap_complete::engine::ArgValueCandidates;

use super::super::complete::state_ids;
use super::{LockWaitArg, StateTarget};

#[derive(Subcommand, Debug)]
pub(crate) enum StateCommand {
    /// Write the whole state as JSON, secrets included, to a new private file (mode 0600) or,
    /// with `--out -`, to standard output.
    #[command(after_help = "Example:\n  nivis state pull --out ~/nivis-backup.json")]
    Pull {
        /// Where to write the state: a file (created mode 0600, replaced if it exists) or `-`
        /// for standard output. Required: the state holds secrets in plain text.
        #[arg(long, short = 'o', value_name = "FILE", value_hint = ValueHint::FilePath)]
        out: PathBuf,
        #[command(flatten)]
        state: StateTarget,
    },
    /// Replace the state by a file's (as `state pull` prints it); refuses another lineage or
    /// an older serial unless --force.
    #[command(
        after_help = "Example:\n  nivis state pull --out s.json && $EDITOR s.json && nivis state push s.json"
    )]
    Push {
        /// The state file to push (its own argument id: `--file` names the plan).
        #[arg(id = "state_file", value_name = "FILE", value_hint = ValueHint::FilePath)]
        file: PathBuf,
        /// Push even if the lineage differs or the serial is older.
        #[arg(long)]
        force: bool,
        /// With --force: confirms that the push drops this many records the state has (their
        /// objects stay, unrecorded); needed when it drops any, unless typed at the prompt.
        #[arg(long, value_name = "N", requires = "force")]
        drop_records: Option<usize>,
        #[command(flatten)]
        state: StateTarget,
        #[command(flatten)]
        lock: LockWaitArg,
    },
    /// Put back the backup Nivis keeps beside the state (the snapshot before the last run that
    /// replaced it), the same way for a local and an S3 state, naming every record it leaves
    /// unrecorded; the state it replaces becomes the backup.
    #[command(
        after_help = "Example:\n  nivis state restore\n  nivis state restore --drop-records 3"
    )]
    Restore {
        /// Confirms that the restore leaves this many records the state has unrecorded (their
        /// objects stay); needed when it leaves any.
        #[arg(long, value_name = "N")]
        drop_records: Option<usize>,
        #[command(flatten)]
        state: StateTarget,
        #[command(flatten)]
        lock: LockWaitArg,
    },
    /// Copy the local state file (--state) into the configured remote backend; or, with
    /// --encrypt / --decrypt, turn the remote state's encryption on or off in place.
    #[command(
        after_help = "Examples:\n  nivis state migrate --state old/nivis.state.json\n  nivis state migrate --encrypt     after adding encryptionKeyEnv to nivis.backend"
    )]
    Migrate {
        /// Replace what the backend already holds.
        #[arg(long, conflicts_with_all = ["encrypt", "decrypt"])]
        force: bool,
        /// Rewrite the remote state encrypted with the key nivis.backend configures
        /// (encryptionKeyEnv or encryptionKeyFile), and delete its unencrypted objects.
        #[arg(long, conflicts_with = "decrypt")]
        encrypt: bool,
        /// Rewrite the remote state unencrypted (the configured key opens it); then remove
        /// the key from nivis.backend.
        #[arg(long)]
        decrypt: bool,
        #[command(flatten)]
        state: StateTarget,
        #[command(flatten)]
        lock: LockWaitArg,
    },
    /// List resource ids in state (only those matching an ADDRESS when any is given).
    #[command(
        after_help = "Examples:\n  nivis state list\n  nivis state list alpha.alpha_token     every alpha_token\n  nivis state list data.                 every data source"
    )]
    List {
        /// An id, or its start up to a `.` or `[` (a provider, a type, a count family).
        #[arg(value_name = "ADDRESS", add = ArgValueCandidates::new(state_ids))]
        addresses: Vec<String>,
        #[command(flatten)]
        state: StateTarget,
        /// A JSON array of ids.
        #[arg(long, help_heading = "Output")]
        json: bool,
    },
    /// Show one resource's recorded attributes (sensitive values hidden).
    #[command(
        after_help = "Examples:\n  nivis state show null.null_resource.first\n  nivis state show null.null_resource.first --json"
    )]
    Show {
        /// Resource id.
        #[arg(add = ArgValueCandidates::new(state_ids))]
        id: String,
        #[command(flatten)]
        state: StateTarget,
        /// The resource as one JSON object.
        #[arg(long, help_heading = "Output")]
        json: bool,
    },
    /// Forget resources without destroying them.
    #[command(
        after_help = "Example:\n  nivis state rm null.null_resource.first --lock-timeout 30s"
    )]
    Rm {
        /// Resource ids.
        #[arg(required = true, add = ArgValueCandidates::new(state_ids))]
        ids: Vec<String>,
        #[command(flatten)]
        state: StateTarget,
        #[command(flatten)]
        lock: LockWaitArg,
    },
    /// Settle an operation a stopped run left pending (a create that may have made an object
    /// the state does not record): `--absent` says the object does not exist. If it does,
    /// record it with `nivis import ADDRESS ID` instead.
    #[command(after_help = "Example:\n  nivis state resolve lxd.lxd_container.c3 --absent")]
    Resolve {
        /// The address the pending operation names (`nivis plan` lists them).
        address: String,
        /// Confirms that the operation left no object (you looked): the next apply creates it.
        #[arg(long, required = true)]
        absent: bool,
        #[command(flatten)]
        state: StateTarget,
        #[command(flatten)]
        lock: LockWaitArg,
    },
    /// Move a record to another address (a rename), leaving the real object alone.
    #[command(
        after_help = "Example:\n  nivis state mv null.null_resource.first null.null_resource.primary"
    )]
    Mv {
        /// The address the object is recorded at.
        #[arg(add = ArgValueCandidates::new(state_ids))]
        from: String,
        /// Its new address: the same provider and type, another name.
        to: String,
        #[command(flatten)]
        state: StateTarget,
        #[command(flatten)]
        lock: LockWaitArg,
    },
    /// Change the provider source address recorded with resources from FROM to TO (a provider
    /// that moved to another namespace, registry or fork); the real objects are not touched.
    #[command(
        after_help = "Example:\n  nivis state replace-provider registry.terraform.io/-/null registry.terraform.io/hashicorp/null\n\nFROM is the source as recorded: the error for a FROM nothing uses lists the recorded\nones. Then name TO in the plan's `providers` too."
    )]
    ReplaceProvider {
        /// The provider source address recorded now.
        from: String,
        /// The address to record instead.
        to: String,
        /// Do not ask for confirmation.
        #[arg(long)]
        auto_approve: bool,
        #[command(flatten)]
        state: StateTarget,
        #[command(flatten)]
        lock: LockWaitArg,
    },
    /// Salvage an S3 state whose journal lost a segment in its middle: keep the records before
    /// the gap, list what is lost after it, keep the broken journal aside and write a new
    /// snapshot, under the lock.
    #[command(after_help = "Example:
  nivis state repair --dry-run
  nivis state repair")]
    Repair {
        /// Show what the repair would keep and lose; change nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        state: StateTarget,
        #[command(flatten)]
        lock: LockWaitArg,
    },
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ForceUnlockArgs {
    /// The lock's id, as a "the state is locked" message shows it.
    pub(crate) lock_id: String,
    /// Remove the lock even if its holder still runs on this host, without asking.
    #[arg(long)]
    pub(crate) force: bool,
    #[command(flatten)]
    pub(crate) state: StateTarget,
}

#[derive(Subcommand, Debug)]
pub(crate) enum EnvCommand {
    /// List the environments that have a state (`*` marks the selected one).
    #[command(after_help = "Examples:\n  nivis env list\n  nivis env list --json")]
    List {
        #[command(flatten)]
        state: StateTarget,
        /// A JSON array of names.
        #[arg(long, help_heading = "Output")]
        json: bool,
    },
}

/// Whether `plan` holds the state lock while it reads, and how long it waits for it.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "State")]
pub(crate) struct PlanLockArgs {
    /// Hold the state lock while planning, refused while an apply holds it (--lock=false: plan
    /// without it, reading a state a running apply may be changing).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) lock: bool,
    #[command(flatten)]
    pub(crate) wait: LockWaitArg,
}
