//! The command line's shape: every verb, the flags it takes, help headings and examples.
//!
//! Owns: the clap definitions, and turning a run verb's flags into a [`RunSpec`]. Each verb
//! has its own struct built from small flag groups, so a verb takes exactly the flags it uses
//! (clap rejects the rest) and a new verb or flag is one struct or one field. Not: what the
//! flags do (see `cli`), reading files or the environment.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum, ValueHint};
use clap_complete::engine::ArgValueCandidates;

use super::complete::state_ids;
use super::parse_duration;

mod convert;
mod inspect;
mod provider_calls;
mod review;
mod state;
pub(super) use self::convert::{ConvertCommand, ConvertTerraformArgs};
pub(super) use self::inspect::{
    ConsoleArgs, FmtArgs, GraphArgs, LogArgs, PolicyCommand, PolicyTestArgs, ShowArgs, VersionArgs,
};
use self::provider_calls::{OperationTimeoutArg, ParallelismArg};
pub(super) use self::review::{DiffArgs, TestArgs, WhyArgs};
pub(super) use self::state::{EnvCommand, ForceUnlockArgs, PlanLockArgs, StateCommand};

const TOP_EXAMPLES: &str = "\
Examples:
  nivis plan                         plan the flake in this directory (attribute nivis.plan)
  nivis apply --auto-approve --json  apply without asking, one JSON event per line (CI)
  nivis plan --flake .#nivis.prod    another plan attribute of the same flake
  nivis output --raw null.null_resource.web.id   one value, bare, for scripts
  nivis state show null.null_resource.first
  source <(nivis completion bash)    completion for this shell session

Exit status: 0 success, 1 failure (usage errors too), 2 changes present (only with
--detailed-exitcode), 130 interrupted.
Environment: NIVIS_STATE, NIVIS_ENV, NIVIS_VAR_<name>, NIVIS_OFFLINE, NIVIS_PROVIDER_MIRRORS,
NIVIS_LOG, NO_COLOR (see the book's CLI reference).";

/// Nivis: infrastructure as Nix code.
///
/// Evaluates a Nix plan to an IR, drives unmodified Terraform/OpenTofu providers to plan and
/// apply it, and feeds apply-time outputs back into Nix, phase after phase, to a fixpoint.
#[derive(Parser, Debug)]
#[command(
    name = "nivis",
    version,
    about,
    propagate_version = true,
    after_help = TOP_EXAMPLES,
    max_term_width = 100
)]
pub struct Cli {
    /// More logging (-v info, -vv debug, -vvv trace); NIVIS_LOG=LEVEL does the same.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// No colours (also NO_COLOR=1 or TERM=dumb; colours are only used on a terminal).
    #[arg(long, global = true)]
    pub(crate) no_color: bool,
    /// Nix prints the full trace of an evaluation error (its `--show-trace`).
    #[arg(long, global = true)]
    pub(crate) show_trace: bool,
    /// The verb to run.
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Show what apply would do: this phase in full, later phases as what they wait on.
    #[command(
        after_help = "Examples:\n  nivis plan\n  nivis plan --var region=eu-west-1 --target null.null_resource.first\n  nivis plan --file plan.nix --json\n  nivis plan --destroy              what `nivis destroy` would remove\n  nivis plan --destroy --out d.plan  save it: `nivis apply d.plan` destroys exactly that"
    )]
    Plan(PlanArgs),
    /// Plan and apply, re-evaluating Nix with new outputs, phase after phase, to a fixpoint;
    /// or apply a saved plan exactly (`nivis apply FILE`).
    #[command(
        after_help = "Examples:\n  nivis apply                       asks before changing anything\n  nivis apply --auto-approve --json\n  nivis apply --max-phases 1        one phase, then report what waits\n  nivis apply reviewed.plan         exactly what `nivis plan --out reviewed.plan` showed,\n                                    without asking (the saved plan was the review)"
    )]
    Apply(ApplyArgs),
    /// Print a saved plan (`nivis plan --out FILE`) as `nivis plan` printed it; without FILE,
    /// every resource in the state with its attributes (sensitive values hidden).
    #[command(
        after_help = "Examples:\n  nivis show reviewed.plan\n  nivis show reviewed.plan --json\n  nivis show                        the state\n  nivis show --json"
    )]
    Show(ShowArgs),
    /// Destroy every resource in state (or the targets and what depends on them).
    #[command(
        after_help = "Examples:\n  nivis destroy\n  nivis destroy --target null.null_resource.first --auto-approve"
    )]
    Destroy(DestroyArgs),
    /// Reconcile state with the real objects (UpgradeResourceState + ReadResource); report drift.
    #[command(
        after_help = "Examples:\n  nivis refresh                     asks before recording drift\n  nivis refresh --auto-approve --detailed-exitcode"
    )]
    Refresh(RefreshArgs),
    /// Adopt an existing object at a resource address (ImportResourceState + ReadResource).
    #[command(
        after_help = "Examples:\n  nivis import null.null_resource.first 4427513034128331524\n\nThe plan must declare the resource and the state must not hold it yet. Run `nivis plan`\nafterwards: it shows how the object differs from its configuration."
    )]
    Import(ImportArgs),
    /// Check the IR and every configuration with its provider's own validation; change nothing.
    #[command(after_help = "Examples:\n  nivis validate\n  nivis validate --file plan.nix --json")]
    Validate(ValidateArgs),
    /// Print outputs: every resource's recorded outputs and the plan's Nix consumer values.
    #[command(
        after_help = "Examples:\n  nivis output                          everything, as Nix values\n  nivis output summary                  one consumer value (or one resource's outputs)\n  nivis output --raw null.null_resource.first.id\n  nivis output --json"
    )]
    Output(OutputArgs),
    /// Inspect or edit the state.
    #[command(subcommand)]
    State(StateCommand),
    /// Remove the state lock of a process that is gone (its lock id is in every "locked"
    /// message), locally or in the remote backend.
    #[command(after_help = "Example:\n  nivis force-unlock 2f0c61a4-4a1e-4c39-9d7e-1f0f9c1e8b11")]
    ForceUnlock(ForceUnlockArgs),
    /// The project's policies: run them on fixture plans (`nivis policy test`).
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Environments (`--env`): each has its own state under the backend's environment prefix.
    #[command(subcommand)]
    Env(EnvCommand),
    /// Write typed Nix constructors and reference docs from a provider's schema.
    #[command(after_help = "Example:\n  nivis gen --provider hashicorp/null --out nix/providers")]
    Gen(GenArgs),
    /// Provider installation: lock file, mirrors, what is used.
    #[command(subcommand)]
    Providers(ProvidersCommand),
    /// Print a shell completion script (state addresses are completed from the state file).
    #[command(
        after_help = "Load it for this session, or add the line to your shell's startup file:\n  source <(nivis completion bash)\n  source <(nivis completion zsh)\n  nivis completion fish | source"
    )]
    Completion(CompletionArgs),
    /// Print the manual page, write one per command, or print the Markdown CLI reference.
    #[command(
        after_help = "Examples:\n  nivis man | man -l -\n  nivis man --dir /usr/local/share/man/man1\n  nivis man --markdown > cli.md"
    )]
    Man(ManArgs),
    /// Print Nivis's version, the platform, the Nix version and the locked providers.
    #[command(after_help = "Examples:\n  nivis version\n  nivis version --json")]
    Version(VersionArgs),
    /// Print the plan's dependency graph as DOT (or JSON): resources, data sources and
    /// consumers; edges by kind (provider reference, Nix re-evaluation, dependsOn); phases.
    #[command(
        after_help = "Examples:\n  nivis graph | dot -Tsvg > graph.svg\n  nivis graph --json"
    )]
    Graph(GraphArgs),
    /// A Nix REPL (`nix repl`) with the plan function, the ledger of the state's outputs
    /// (sensitive ones as placeholders), the plan's IR and the flake's Nivis library loaded.
    #[command(
        after_help = "Examples:\n  nivis console                     then: outputs, plan.resources, lib, :q\n  echo 'builtins.attrNames outputs' | nivis console"
    )]
    Console(ConsoleArgs),
    /// Compare the plan of two git revisions (default: HEAD and the work tree), both evaluated
    /// against the outputs recorded in the state; no provider is started.
    #[command(
        after_help = "Examples:\n  nivis diff                        HEAD against the work tree\n  nivis diff main HEAD --json       what a branch changes, for a bot\n  nivis diff HEAD~1 HEAD --detailed-exitcode\n\nIt compares what Nix produces. What the providers would plan (replacements, computed\nvalues) and drift of the real objects are not known without them: run `nivis plan`."
    )]
    Diff(DiffArgs),
    /// Where a resource or attribute comes from: its Nix file and line, the outputs it was
    /// computed from, and what reads it; no provider is started.
    #[command(
        after_help = "Examples:\n  nivis why alpha.alpha_token.C.label\n  nivis why beta.beta_record.B --json"
    )]
    Why(WhyArgs),
    /// Apply the plan against a throwaway state with local provider binaries (the fakes), to
    /// its fixpoint, and check the phases and outputs against expectations.
    #[command(
        after_help = "Example:\n  nivis test --expect tests/round-trip.json\n\nIt starts the plan's providers for real: it refuses providers from a registry, and\ndestroys what it created when done."
    )]
    Test(TestArgs),
    /// The audit trail kept with the state: who ran which mutating command, when, and what
    /// it changed; `--verify` checks the records' hash chain.
    #[command(
        after_help = "Examples:\n  nivis log\n  nivis log --address null.null_resource.first --since 2d --user alice\n  nivis log --json\n  nivis log --verify                exit 1 naming the first deleted, edited or reordered record"
    )]
    Log(LogArgs),
    /// Move an estate from another tool to Nivis (`convert terraform`).
    #[command(subcommand)]
    Convert(ConvertCommand),
    /// Format Nix files in alejandra's style with Nivis's own formatter (no nixpkgs needed);
    /// `--check` lists the files that are not formatted and exits 1.
    #[command(
        after_help = "Examples:\n  nivis fmt                         every *.nix under this directory\n  nivis fmt --check                 in CI: exit 1 naming the unformatted files\n  nivis fmt flake.nix modules/\n  nivis fmt - < plan.nix            standard input to standard output"
    )]
    Fmt(FmtArgs),
}

/// Where the plan comes from.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Plan source")]
pub(crate) struct SourceArgs {
    /// The flake holding the plan: a directory or flake reference, optionally with #ATTR.
    #[arg(long, value_name = "REF", default_value = ".", conflicts_with = "file", value_hint = ValueHint::AnyPath)]
    pub(crate) flake: String,
    /// A plain Nix file evaluating to the plan function (instead of a flake).
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub(crate) file: Option<PathBuf>,
    /// The attribute holding the plan function `ledger: IR` [default: nivis.plan].
    #[arg(long)]
    pub(crate) attr: Option<String>,
    /// Run a plan (or encrypted secret files) that other users can change: their owner when
    /// another user, or their group's members. Warns each run; never for root, never for
    /// files everyone can write.
    #[arg(long)]
    pub(crate) trust_group: bool,
}

/// Plan variables.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Variables")]
pub(crate) struct VarArgs {
    /// Set a variable (repeatable); VALUE is read as the variable's declared type.
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub(crate) vars: Vec<String>,
    /// A JSON file of variable values (repeatable; later files win).
    #[arg(long = "var-file", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub(crate) var_files: Vec<PathBuf>,
    /// Values a command gives its own run in memory (never a flag): read as
    /// `NIVIS_VAR_<name>` values are, below the real environment.
    #[arg(skip)]
    pub(crate) in_memory: super::vars::InMemoryVars,
}

/// Where the state is: the state backend (the flake's `nivis.backend`, else the local file),
/// field overrides, and the environment.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "State")]
pub(crate) struct StateArgs {
    /// The state file of the local backend (`state migrate` copies it to the remote one)
    /// [default: one per project, under $XDG_STATE_HOME/nivis/projects; never inside a
    /// directory Nix copies into the store].
    #[arg(long, value_name = "FILE", env = "NIVIS_STATE", value_hint = ValueHint::FilePath)]
    pub(crate) state: Option<PathBuf>,
    /// The environment: its state is the backend's key under the environment prefix (the
    /// plan sees the name as `ledger.env`).
    #[arg(
        long,
        value_name = "NAME",
        env = "NIVIS_ENV",
        default_value = "default"
    )]
    pub(crate) env: String,
    /// Set a field of the state backend (overriding the flake's `nivis.backend`), repeatable:
    /// `--backend-config type=s3 --backend-config bucket=b`.
    #[arg(long = "backend-config", value_name = "KEY=VALUE")]
    pub(crate) backend_config: Vec<String>,
    /// The state is gone but its backup or audit log shows it existed, and the objects it
    /// recorded are gone too: start over with an empty state (recorded at once, its serial
    /// after the lost one's). Without it such a state is refused, never planned against.
    #[arg(long)]
    pub(crate) accept_lost_state: bool,
}

/// What a command about the state alone needs: the plan's location (for the flake's
/// `nivis.backend` and the project's default state file) and the state flags.
#[derive(Args, Debug, Clone)]
pub(crate) struct StateTarget {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// The project a verb works on: where the plan is, its variables, and where the state is. Each
/// verb that evaluates the plan against the state flattens it (the flags are those of its
/// three parts, unchanged).
#[derive(Args, Debug, Clone)]
pub(crate) struct ProjectArgs {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
    #[command(flatten)]
    pub(crate) state: StateArgs,
}

/// Waiting for the state lock (verbs that write state; `plan` has it in [`PlanLockArgs`]).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "State")]
pub(crate) struct LockWaitArg {
    /// Wait this long for the state lock (e.g. 30s, 2m, 1h 30m); default: fail at once.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) lock_timeout: Option<Duration>,
}

/// Which resources a run touches.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Run")]
pub(crate) struct TargetArgs {
    /// Limit the run to this resource and what it depends on (destroy: what depends on it);
    /// repeatable.
    #[arg(long = "target", value_name = "ID", add = ArgValueCandidates::new(state_ids))]
    pub(crate) targets: Vec<String>,
}

/// Whether stored objects are read back before planning.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Run")]
pub(crate) struct RefreshArg {
    /// Refresh stored objects before planning (--refresh=false to skip).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) refresh: bool,
}

/// Resources to replace although nothing forces it.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Run")]
pub(crate) struct ReplaceArgs {
    /// Replace this managed resource (a new object, then the old one deleted, or the other way
    /// round as its lifecycle says) even if its configuration is unchanged; repeatable.
    #[arg(long = "replace", value_name = "ID", add = ArgValueCandidates::new(state_ids))]
    pub(crate) replace: Vec<String>,
}

/// Mandatory policy rules this run may break (`nivis.policies`), with the reason.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Policy")]
pub(crate) struct OverrideArgs {
    /// Let this mandatory policy rule's violations pass (repeatable); needs --reason.
    #[arg(long = "override", value_name = "RULE", requires = "reason")]
    pub(crate) overrides: Vec<String>,
    /// Why the overridden rules may be broken; reported with every violation it lets pass.
    #[arg(long, value_name = "TEXT", requires = "overrides")]
    pub(crate) reason: Option<String>,
}

/// CI's exit status convention.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Output")]
pub(crate) struct DetailedExitcodeArg {
    /// Exit 0 when there is nothing to change, 2 when there are changes (drift alone only for refresh and --refresh-only), 1 on error.
    #[arg(long)]
    pub(crate) detailed_exitcode: bool,
}

/// Machine-readable output.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Output")]
pub(crate) struct JsonArg {
    /// One JSON event per line on stdout (docs/JSON-EVENTS.md).
    #[arg(long)]
    pub(crate) json: bool,
}

/// Where providers given by registry address come from.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Provider installation")]
pub(crate) struct InstallArgs {
    /// Never use the network: only filesystem mirrors and the cache (NIVIS_OFFLINE=1 too).
    #[arg(long, env = "NIVIS_OFFLINE", value_parser = clap::builder::BoolishValueParser::new())]
    pub(crate) offline: bool,
    /// A filesystem mirror (packed or unpacked layout, as `tofu providers mirror` writes);
    /// repeatable, searched in order. Also NIVIS_PROVIDER_MIRRORS (colon-separated).
    #[arg(long = "mirror", value_name = "DIR", value_hint = ValueHint::DirPath)]
    pub(crate) mirrors: Vec<PathBuf>,
    /// A network mirror base URL (https); repeatable.
    #[arg(long = "network-mirror", value_name = "URL", value_hint = ValueHint::Url)]
    pub(crate) network_mirrors: Vec<String>,
    /// The provider lock file.
    #[arg(long, value_name = "FILE", default_value = ".terraform.lock.hcl", env = "NIVIS_LOCK_FILE", value_hint = ValueHint::FilePath)]
    pub(crate) lock_file: PathBuf,
    /// The provider cache [default: $XDG_CACHE_HOME/nivis/providers].
    #[arg(long, value_name = "DIR", env = "NIVIS_PROVIDER_CACHE_DIR", value_hint = ValueHint::DirPath)]
    pub(crate) provider_cache: Option<PathBuf>,
}

impl InstallArgs {
    /// The defaults, for commands that evaluate the plan but install nothing.
    pub(crate) fn none() -> Self {
        InstallArgs {
            offline: true,
            mirrors: Vec::new(),
            network_mirrors: Vec::new(),
            lock_file: PathBuf::from(".terraform.lock.hcl"),
            provider_cache: None,
        }
    }
}

#[derive(Args, Debug, Clone)]
pub(crate) struct PlanArgs {
    /// Only read the recorded objects and show how they drifted; plan no change.
    #[arg(long, conflicts_with_all = ["replace", "out"])]
    pub(crate) refresh_only: bool,
    /// Show what `nivis destroy` would remove (with the same --target); change nothing. With
    /// --out, save it for `nivis apply FILE` to destroy exactly that.
    #[arg(long, conflicts_with_all = ["replace", "refresh_only"])]
    pub(crate) destroy: bool,
    /// Also write the plan to FILE, for `nivis apply FILE` to apply exactly (no secret in it).
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub(crate) out: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) replace: ReplaceArgs,
    #[command(flatten)]
    pub(crate) policy: OverrideArgs,
    #[command(flatten)]
    pub(crate) exit: DetailedExitcodeArg,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) lock: PlanLockArgs,
    #[command(flatten)]
    pub(crate) targets: TargetArgs,
    #[command(flatten)]
    pub(crate) parallelism: ParallelismArg,
    #[command(flatten)]
    pub(crate) refresh: RefreshArg,
    #[command(flatten)]
    pub(crate) output: JsonArg,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ApplyArgs {
    /// A saved plan (`nivis plan --out FILE`) to apply exactly; refused if anything it was
    /// made from changed.
    #[arg(value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub(crate) plan_file: Option<PathBuf>,
    /// Do not ask for confirmation.
    #[arg(long)]
    pub(crate) auto_approve: bool,
    /// Stop after N phases that changed something and report what is still pending.
    #[arg(long, value_name = "N")]
    pub(crate) max_phases: Option<u32>,
    /// Only read the recorded objects and record how they drifted, as `nivis refresh` does
    /// (asking first, unless --auto-approve); plan and apply no change.
    #[arg(long, conflicts_with_all = ["plan_file", "replace", "max_phases"])]
    pub(crate) refresh_only: bool,
    /// Realise `__build` outputs before apply (--build=false to skip).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    pub(crate) build: bool,
    #[command(flatten)]
    pub(crate) replace: ReplaceArgs,
    #[command(flatten)]
    pub(crate) policy: OverrideArgs,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) lock: LockWaitArg,
    #[command(flatten)]
    pub(crate) targets: TargetArgs,
    #[command(flatten)]
    pub(crate) parallelism: ParallelismArg,
    #[command(flatten)]
    pub(crate) operation: OperationTimeoutArg,
    #[command(flatten)]
    pub(crate) refresh: RefreshArg,
    #[command(flatten)]
    pub(crate) output: JsonArg,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct DestroyArgs {
    /// Do not ask for confirmation.
    #[arg(long)]
    pub(crate) auto_approve: bool,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) lock: LockWaitArg,
    #[command(flatten)]
    pub(crate) targets: TargetArgs,
    #[command(flatten)]
    pub(crate) parallelism: ParallelismArg,
    #[command(flatten)]
    pub(crate) output: JsonArg,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ImportArgs {
    /// The resource address (as the plan declares it) to record the object at.
    pub(crate) address: String,
    /// The provider's id of the existing object.
    pub(crate) id: String,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) lock: LockWaitArg,
    #[command(flatten)]
    pub(crate) output: JsonArg,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

impl ImportArgs {
    pub(crate) fn spec(&self) -> RunSpec<'_> {
        RunSpec {
            lock_timeout: self.lock.lock_timeout,
            json: self.output.json,
            ..RunSpec::for_project(&self.project, &self.install)
        }
    }
}

#[derive(Args, Debug, Clone)]
pub(crate) struct RefreshArgs {
    /// Record what was read without asking (it asks only when something drifted).
    #[arg(long)]
    pub(crate) auto_approve: bool,
    #[command(flatten)]
    pub(crate) exit: DetailedExitcodeArg,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) lock: LockWaitArg,
    #[command(flatten)]
    pub(crate) targets: TargetArgs,
    #[command(flatten)]
    pub(crate) output: JsonArg,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ValidateArgs {
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    #[command(flatten)]
    pub(crate) vars: VarArgs,
    #[command(flatten)]
    pub(crate) output: JsonArg,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

/// The flags of a run verb (plan, apply, destroy, refresh, validate), whichever it took; a
/// flag the verb does not take has its neutral value.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunSpec<'a> {
    pub(crate) source: &'a SourceArgs,
    pub(crate) vars: &'a VarArgs,
    /// None: the verb does not read state (validate).
    pub(crate) state: Option<&'a StateArgs>,
    pub(crate) lock_timeout: Option<Duration>,
    pub(crate) targets: &'a [String],
    pub(crate) parallelism: usize,
    /// `apply --operation-timeout`.
    pub(crate) operation_timeout: Option<Duration>,
    pub(crate) refresh: bool,
    pub(crate) json: bool,
    pub(crate) auto_approve: bool,
    pub(crate) max_phases: Option<u32>,
    pub(crate) build: bool,
    pub(crate) install: &'a InstallArgs,
    /// `--replace`.
    pub(crate) replace: &'a [String],
    /// `--detailed-exitcode`.
    pub(crate) detailed_exitcode: bool,
    /// `plan --refresh-only`, `apply --refresh-only`.
    pub(crate) refresh_only: bool,
    /// `plan`: hold the state lock while reading (`--lock`, default on).
    pub(crate) read_lock: bool,
    /// `plan --destroy`.
    pub(crate) plan_destroy: bool,
    /// `plan --out FILE`.
    pub(crate) out: Option<&'a std::path::Path>,
    /// `apply FILE`.
    pub(crate) plan_file: Option<&'a std::path::Path>,
    /// `--override RULE`s, and their `--reason`.
    pub(crate) overrides: &'a [String],
    pub(crate) override_reason: Option<&'a str>,
}

impl<'a> RunSpec<'a> {
    /// The spec of a verb that works on a project (plan, variables, state) with the install
    /// flags `install`.
    pub(crate) fn for_project(project: &'a ProjectArgs, install: &'a InstallArgs) -> Self {
        RunSpec {
            state: Some(&project.state),
            ..RunSpec::new(&project.source, &project.vars, install)
        }
    }

    /// The spec of a verb that takes only a plan source, variables and install flags.
    pub(crate) fn new(source: &'a SourceArgs, vars: &'a VarArgs, install: &'a InstallArgs) -> Self {
        RunSpec {
            source,
            vars,
            state: None,
            lock_timeout: None,
            targets: &[],
            parallelism: 10,
            operation_timeout: None,
            refresh: true,
            json: false,
            auto_approve: false,
            max_phases: None,
            build: true,
            install,
            replace: &[],
            detailed_exitcode: false,
            refresh_only: false,
            read_lock: false,
            plan_destroy: false,
            out: None,
            plan_file: None,
            overrides: &[],
            override_reason: None,
        }
    }
}

impl PlanArgs {
    pub(crate) fn spec(&self) -> RunSpec<'_> {
        RunSpec {
            targets: &self.targets.targets,
            parallelism: self.parallelism.parallelism,
            refresh: self.refresh.refresh,
            json: self.output.json,
            replace: &self.replace.replace,
            detailed_exitcode: self.exit.detailed_exitcode,
            refresh_only: self.refresh_only,
            read_lock: self.lock.lock,
            lock_timeout: self.lock.wait.lock_timeout,
            plan_destroy: self.destroy,
            out: self.out.as_deref(),
            overrides: &self.policy.overrides,
            override_reason: self.policy.reason.as_deref(),
            ..RunSpec::for_project(&self.project, &self.install)
        }
    }
}

impl ApplyArgs {
    pub(crate) fn spec(&self) -> RunSpec<'_> {
        RunSpec {
            lock_timeout: self.lock.lock_timeout,
            targets: &self.targets.targets,
            parallelism: self.parallelism.parallelism,
            operation_timeout: self.operation.operation_timeout,
            refresh: self.refresh.refresh,
            json: self.output.json,
            auto_approve: self.auto_approve,
            max_phases: self.max_phases,
            build: self.build,
            replace: &self.replace.replace,
            plan_file: self.plan_file.as_deref(),
            refresh_only: self.refresh_only,
            overrides: &self.policy.overrides,
            override_reason: self.policy.reason.as_deref(),
            ..RunSpec::for_project(&self.project, &self.install)
        }
    }
}

impl DestroyArgs {
    pub(crate) fn spec(&self) -> RunSpec<'_> {
        RunSpec {
            lock_timeout: self.lock.lock_timeout,
            targets: &self.targets.targets,
            parallelism: self.parallelism.parallelism,
            json: self.output.json,
            auto_approve: self.auto_approve,
            ..RunSpec::for_project(&self.project, &self.install)
        }
    }
}

impl RefreshArgs {
    pub(crate) fn spec(&self) -> RunSpec<'_> {
        RunSpec {
            lock_timeout: self.lock.lock_timeout,
            targets: &self.targets.targets,
            json: self.output.json,
            auto_approve: self.auto_approve,
            detailed_exitcode: self.exit.detailed_exitcode,
            ..RunSpec::for_project(&self.project, &self.install)
        }
    }
}

impl ValidateArgs {
    pub(crate) fn spec(&self) -> RunSpec<'_> {
        RunSpec {
            json: self.output.json,
            ..RunSpec::new(&self.source, &self.vars, &self.install)
        }
    }
}

#[derive(Args, Debug, Clone)]
pub(crate) struct OutputArgs {
    /// A consumer id, a resource id, or a resource id followed by an attribute path
    /// (`null.null_resource.first.triggers.greeting`); default: everything.
    #[arg(add = ArgValueCandidates::new(state_ids))]
    pub(crate) name: Option<String>,
    /// The value as JSON (with NAME) or every output as one JSON object.
    #[arg(long, conflicts_with = "raw", help_heading = "Output")]
    pub(crate) json: bool,
    /// A string, number or bool printed bare, without quotes or newline (needs NAME).
    #[arg(long, requires = "name", help_heading = "Output")]
    pub(crate) raw: bool,
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct GenArgs {
    /// The provider, as mkProvider's `source` accepts it (path, store path, binary name or
    /// registry address).
    #[arg(long)]
    pub(crate) provider: String,
    /// The provider id users give it in `toIR`'s `providers` (default: from the binary name).
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Output directory; files go to OUT/NAME/.
    #[arg(long, value_hint = ValueHint::DirPath)]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

/// What `providers` subcommands read: the plan's provider declarations.
#[derive(Args, Debug, Clone)]
pub(crate) struct ProvidersPlanArgs {
    #[command(flatten)]
    pub(crate) project: ProjectArgs,
    #[command(flatten)]
    pub(crate) install: InstallArgs,
}

impl ProvidersPlanArgs {
    pub(crate) fn spec(&self) -> RunSpec<'_> {
        RunSpec::for_project(&self.project, &self.install)
    }
}

#[derive(Subcommand, Debug)]
pub(crate) enum ProvidersCommand {
    /// Record versions and hashes of the plan's registry providers for these platforms.
    #[command(
        after_help = "Examples:\n  nivis providers lock\n  nivis providers lock --platform linux_amd64 --platform darwin_arm64"
    )]
    Lock {
        /// OS_ARCH, e.g. linux_amd64; repeatable (default: this machine's).
        #[arg(long = "platform")]
        platforms: Vec<String>,
        /// Choose versions afresh within the constraints, replacing locked selections.
        #[arg(long)]
        upgrade: bool,
        #[command(flatten)]
        plan: ProvidersPlanArgs,
    },
    /// Write a filesystem mirror (packed zips + network-mirror JSON) of the plan's providers.
    #[command(
        after_help = "Example:\n  nivis providers mirror ./mirror --platform linux_amd64   then: --mirror ./mirror"
    )]
    Mirror {
        /// The mirror directory.
        #[arg(value_hint = ValueHint::DirPath)]
        dir: PathBuf,
        /// OS_ARCH, e.g. linux_amd64; repeatable (default: this machine's).
        #[arg(long = "platform")]
        platforms: Vec<String>,
        #[command(flatten)]
        plan: ProvidersPlanArgs,
    },
    /// Each provider of the plan: where it comes from, version, hashes.
    #[command(after_help = "Example:\n  nivis providers list")]
    List(ProvidersPlanArgs),
}

/// Shells `nivis completion` writes scripts for.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct CompletionArgs {
    /// The shell.
    pub(crate) shell: Shell,
}

#[derive(Args, Debug, Clone)]
pub(crate) struct ManArgs {
    /// Write nivis.1 and one page per command (nivis-plan.1, ...) into DIR.
    #[arg(long, value_hint = ValueHint::DirPath, conflicts_with = "markdown")]
    pub(crate) dir: Option<PathBuf>,
    /// Print the CLI reference as Markdown (the book's reference chapter).
    #[arg(long)]
    pub(crate) markdown: bool,
}
