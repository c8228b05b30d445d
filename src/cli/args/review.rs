//! The flags of the review verbs, which compare and explain plans without starting a provider:
//! `diff` and `why`. (A part of `cli::args`, kept apart so each file stays readable.)

use clap::Args;

use super::{ProjectArgs, SourceArgs, VarArgs};

#[derive(Args, Debug, Clone)]
pub(crate) struct DiffArgs {
    /// The git revision to compare from [default: HEAD].
    #[arg(value_name = "REV_A")]
    pub(crate) from: Option<String>,
    /// The git revision to compare to [default: the work tree].
    #[arg(value_name = "REV_B")]
    pub(crate) to: Option<String>,
    /// One JSON object (docs/diff-schema.json) instead of text.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
    /// Exit 0 when nothing differs, 2 when something does, 1 on error.
    #[arg(long)]
    pub(crate) detailed_exitcode: bool,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct WhyArgs {
    /// A resource or data source address, optionally with an attribute path:
    /// `beta.beta_record.B` or `alpha.alpha_token.C.label`.
    #[arg(value_name = "ADDR[.ATTR]")]
    pub(crate) address: String,
    /// One JSON object instead of text.
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct TestArgs {
    /// The expectations, a JSON file: `{"phases": N, "outputs": {"ADDR": {"ATTR": VALUE}}}`
    /// (both optional; outputs are compared attribute by attribute) [default: the flake's
    /// attribute `test` beside the plan, e.g. `nivis.test`].
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
    pub(crate) expect: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
}
