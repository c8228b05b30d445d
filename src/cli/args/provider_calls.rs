//! The flags that bound a run's provider calls: how many run at once, and how long an apply
//! call may go unanswered. (A part of `cli::args`, kept apart so each file stays readable.)

use std::time::Duration;

use clap::Args;

use super::super::parse_duration;

/// How many provider operations run at once.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Run")]
pub(crate) struct ParallelismArg {
    /// Provider operations in flight at once.
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub(crate) parallelism: usize,
}

/// How long one provider operation may take (`apply` only: it is what changes objects).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Run")]
pub(crate) struct OperationTimeoutArg {
    /// Give up on a provider operation (a create, update or delete) that has not answered
    /// after this long (e.g. 10m, 1h): the resource fails and a create is left pending, since
    /// the provider may still make the object. Default: no limit, as Terraform.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) operation_timeout: Option<Duration>,
}
