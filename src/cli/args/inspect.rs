//! The flags of the verbs that look without changing anything or starting a provider:
//! `show`, `version`, `graph`, `console`, `policy test`, `log` and `fmt`. (A part of `cli::args`, kept apart so each file stays readable.)

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueHint};

use super::{ProjectArgs, SourceArgs, StateArgs, StateTarget};

#[derive(Args, Debug, Clone)]
pub struct ShowArgs {
    /// The saved plan; without it, the state: every resource's recorded attributes.
    #[arg(id = "plan_file", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub file: Option<PathBuf>,
    /// The saved plan's canonical JSON, pretty-printed; or the state's resources as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub state: StateTarget,
}

#[derive(Args, Debug, Clone)]
pub struct VersionArgs {
    /// One JSON object: version, platform, Nix version, locked providers.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// The provider lock file whose providers to list (if it exists).
    #[arg(long, value_name = "FILE", default_value = ".terraform.lock.hcl", env = "NIVIS_LOCK_FILE", value_hint = ValueHint::FilePath)]
    pub lock_file: PathBuf,
}

#[derive(Args, Debug, Clone)]
pub struct FmtArgs {
    /// Nix files, or directories to format the `*.nix` files under (hidden directories and
    /// links skipped); `-` formats standard input to standard output [default: .].
    #[arg(value_name = "FILE", value_hint = ValueHint::AnyPath)]
    pub files: Vec<PathBuf>,
    /// Change nothing: list the files that are not formatted, and exit 1 if there are any.
    #[arg(long)]
    pub check: bool,
}

#[derive(Args, Debug, Clone)]
pub struct GraphArgs {
    /// The graph as one JSON object (nodes and edges) instead of DOT.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    #[command(flatten)]
    pub project: ProjectArgs,
}

#[derive(Args, Debug, Clone)]
pub struct ConsoleArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

/// The project's policies (`nivis.policies`).
#[derive(Subcommand, Debug, Clone)]
pub enum PolicyCommand {
    /// Run the policies on fixture plans and compare their violations with the expected ones.
    #[command(
        after_help = "Examples:\n  nivis policy test policy-tests/*.json\n\nA fixture is a JSON file: {\"kind\": \"plan\", \"changes\": [{\"address\", \"type\", \"action\", \"before\", \"after\"}],\n\"expect\": [{\"rule\", \"address\"}]} for plan and phase rules, or {\"kind\": \"static\",\n\"resources\": [{\"id\", \"type\", \"config\"}], \"expect\": [...]} for static rules."
    )]
    Test(PolicyTestArgs),
}

#[derive(Args, Debug, Clone)]
pub struct PolicyTestArgs {
    /// The fixture files.
    #[arg(required = true, value_name = "FIXTURE", value_hint = ValueHint::FilePath)]
    pub fixtures: Vec<PathBuf>,
    #[command(flatten)]
    pub source: SourceArgs,
}

#[derive(Args, Debug, Clone)]
pub struct LogArgs {
    /// Only records of runs that changed this address.
    #[arg(long, value_name = "ADDRESS", help_heading = "Filter")]
    pub address: Option<String>,
    /// Only records since this time: RFC 3339 (2026-11-25T10:00:00Z), a date (2026-11-25) or
    /// an age (2h, 3d).
    #[arg(long, value_name = "WHEN", help_heading = "Filter")]
    pub since: Option<String>,
    /// Only records of this user.
    #[arg(long, value_name = "USER", help_heading = "Filter")]
    pub user: Option<String>,
    /// One JSON object per line: the records as stored.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    /// Check the hash chain instead of listing: exit 1 naming the first record deleted,
    /// edited or reordered.
    #[arg(long, conflicts_with_all = ["address", "since", "user", "json"])]
    pub verify: bool,
    #[command(flatten)]
    pub target: StateTarget,
}
