//! The flags of the verbs that look without changing anything or starting a provider:
//! `show`, `version`, `graph`, `console`, `policy test`, `log` and `fmt`. (A part of `cli::args`, kept apart so each file stays readable.)

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueHint};

use super::{ProjectArgs, SourceArgs, StateArgs, StateTarget};

#[derive(Args, Debug, Clone)]
pub(crate) struct ShowArgs {
    /// The saved plan; without it, the state: every resource's recorded attributes.
    #[arg(id = "plan_file", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub(crate) file: Option<PathBuf>,
    /// The saved plan's canonical JSON, pretty-printed; or the state's resources as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) state: StateTarget,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct VersionArgs {
    /// One JSON object: version, platform, Nix version, locked providers.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
    /// The provider lock file whose providers to list (if it exists).
    #[arg(long, value_name = "FILE", default_value = ".terraform.lock.hcl", env = "NIVIS_LOCK_FILE", value_hint = ValueHint::FilePath)]
    pub(crate) lock_file: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct FmtArgs {
    /// Nix files, or directories to format the `*.nix` files under (hidden directories and
    /// links skipped); `-` formats standard input to standard output [default: .].
    #[arg(value_name = "FILE", value_hint = ValueHint::AnyPath)]
    pub(crate) files: Vec<PathBuf>,
    /// Change nothing: list the files that are not formatted, and exit 1 if there are any.
    #[arg(long)]
    pub(crate) check: bool,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct GraphArgs {
    /// The graph as one JSON object (nodes and edges) instead of DOT.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ConsoleArgs {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// The project's policies (`nivis.policies`).
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum PolicyCommand {
    /// Run the policies on fixture plans and compare their violations with the expected ones.
    #[command(
        after_help = "Examples:\n  nivis policy test policy-tests/*.json\n\nA fixture is a JSON file: {\"kind\": \"plan\", \"changes\": [{\"address\", \"type\", \"action\", \"before\", \"after\"}],\n\"expect\": [{\"rule\", \"address\"}]} for plan and phase rules, or {\"kind\": \"static\",\n\"resources\": [{\"id\", \"type\", \"config\"}], \"expect\": [...]} for static rules."
    )]
    Test(PolicyTestArgs),
}

#[derive(Args, Debug, Clone)]
pub(crate) struct PolicyTestArgs {
    /// The fixture files.
    #[arg(required = true, value_name = "FIXTURE", value_hint = ValueHint::FilePath)]
    pub(crate) fixtures: Vec<PathBuf>,
    #[command(flatten)]
    pub(crate) source: SourceArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct LogArgs {
    /// Only records of runs that changed this address.
    #[arg(long, value_name = "ADDRESS", help_heading = "Filter")]
    pub(crate) address: Option<String>,
    /// Only records since this time: RFC 3339 (2026-11-25T10:00:00Z), a date (2026-11-25) or
    /// an age (2h, 3d).
    #[arg(long, value_name = "WHEN", help_heading = "Filter")]
    pub(crate) since: Option<String>,
    /// Only records of this user.
    #[arg(long, value_name = "USER", help_heading = "Filter")]
    pub(crate) user: Option<String>,
    /// One JSON object per line: the records as stored.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
    /// Check the hash chain instead of listing: exit 1 naming the first record deleted,
    /// edited or reordered.
    #[arg(long, conflicts_with_all = ["address", "since", "user", "json"])]
    pub(crate) verify: bool,
    #[command(flatten)]
    pub(crate) target: StateTarget,
}
