//! The `nivis` binary: answer a shell's completion request, or parse the command line, run it,
//! and exit with its code.

fn main() {
    // Before anything else runs (and while the process has one thread): see `guard`.
    nivis::protect_process();
    nivis::answer_completion_request();
    let cli = nivis::parse();
    std::process::exit(nivis::run(cli));
}
