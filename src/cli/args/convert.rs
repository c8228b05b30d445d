//! The flags of `nivis convert`. (A part of `cli::args`, kept apart so each file stays
//! readable.)

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueHint};

use super::StateArgs;

#[derive(Subcommand, Debug)]
pub(crate) enum ConvertCommand {
    /// Move an OpenTofu/Terraform estate to Nivis: write its configuration as a flake in OUT,
    /// record every managed object in OUT's new Nivis state exactly as Terraform recorded it,
    /// and prove it with a plan that must show no changes. Creates, changes and deletes
    /// nothing; the Terraform directory and state are only read.
    #[command(
        after_help = "Examples:\n  nivis convert terraform ./infra --out ./infra-nivis\n  nivis convert terraform ./infra --out ./infra-nivis --tfstate pulled.tfstate\n\nExit 0: the estate was adopted exactly (the plan shows no changes). Exit 1: the plan\nshows differences (listed per address and attribute), or a construct could not be\ntranslated (a `throw \"convert: ...\"` marks its place in the Nix; each is listed)."
    )]
    Terraform(ConvertTerraformArgs),
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ConvertTerraformArgs {
    /// The Terraform/OpenTofu configuration directory (its .tf and .tf.json files; none: the
    /// state alone is converted, each object's attributes as literals).
    #[arg(value_name = "DIR", value_hint = ValueHint::DirPath)]
    pub(crate) dir: PathBuf,
    /// The directory of the new Nivis flake (created; must be empty if it exists).
    #[arg(long, value_name = "OUT", value_hint = ValueHint::DirPath)]
    pub(crate) out: PathBuf,
    /// The Terraform state (format version 4) [default: DIR/terraform.tfstate]; for a remote
    /// backend, `terraform state pull > FILE` writes one.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub(crate) tfstate: Option<PathBuf>,
    /// The Terraform lock file naming the provider versions and hashes
    /// [default: DIR/.terraform.lock.hcl]; copied to OUT/.terraform.lock.hcl.
    #[arg(long = "tf-lock-file", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub(crate) tf_lock_file: Option<PathBuf>,
    /// A Terraform variable file, as `terraform -var-file` takes it (repeatable; read after
    /// DIR's terraform.tfvars[.json] and *.auto.tfvars[.json], later files winning). Its values
    /// become the variables' defaults in the flake; a sensitive variable's is given only to the
    /// proof plan.
    #[arg(long = "tf-var-file", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub(crate) tf_var_files: Vec<PathBuf>,
    /// The flake reference the new flake takes Nivis from (`git+file:///srv/nivis` for a
    /// local clone or mirror).
    #[arg(
        long,
        value_name = "REF",
        default_value = "github:wearetechnative/nivis"
    )]
    pub(crate) nivis_src: String,
    /// Write the flake and the state but do not run the proof plan.
    #[arg(long)]
    pub(crate) no_plan: bool,
    #[command(flatten)]
    pub(crate) state: StateArgs,
    /// Never use the network: only filesystem mirrors and the cache (NIVIS_OFFLINE=1 too).
    #[arg(long, env = "NIVIS_OFFLINE", value_parser = clap::builder::BoolishValueParser::new(), help_heading = "Provider installation")]
    pub(crate) offline: bool,
    /// A filesystem mirror of providers; repeatable. Also NIVIS_PROVIDER_MIRRORS.
    #[arg(long = "mirror", value_name = "DIR", value_hint = ValueHint::DirPath, help_heading = "Provider installation")]
    pub(crate) mirrors: Vec<PathBuf>,
    /// The provider cache [default: $XDG_CACHE_HOME/nivis/providers].
    #[arg(long, value_name = "DIR", env = "NIVIS_PROVIDER_CACHE_DIR", value_hint = ValueHint::DirPath, help_heading = "Provider installation")]
    pub(crate) provider_cache: Option<PathBuf>,
}
