//! The flags of the verbs that look without changing anything or starting a provider:
//! `version`, `graph` and `console`. (A part of `cli::args`, kept apart so each file stays readable.)

use std::path::PathBuf;

use clap::{Args, ValueHint};

use super::{SourceArgs, StateArgs, VarArgs};

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
pub struct GraphArgs {
    /// The graph as one JSON object (nodes and edges) instead of DOT.
    #[arg(long, help_heading = "Output")]
    pub json: bool,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub state: StateArgs,
}

#[derive(Args, Debug, Clone)]
pub struct ConsoleArgs {
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub state: StateArgs,
}
