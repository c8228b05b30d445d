//! The `nivis` binary: answer a shell's completion request, or parse the command line, run it,
//! and exit with its code.

fn main() {
    nivis::cli::answer_completion_request();
    let cli = nivis::cli::parse();
    std::process::exit(nivis::cli::run(cli));
}
