//! The `nivis` binary: parse the command line, run it, exit with its code.

use clap::Parser;

fn main() {
    let cli = nivis::cli::Cli::parse();
    std::process::exit(nivis::cli::run(cli));
}
