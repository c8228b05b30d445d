//! `nivis-fmt`: the formatter `nivis fmt` runs, a process of its own. It reads Nix text on
//! standard input and writes it in alejandra's style on standard output (exit 0); text that is
//! not Nix gets the parser's message on standard error (exit 1). Its one argument is the name
//! the message gives the text.
//!
//! Why a process of its own (DESIGN §96): the `alejandra` crate makes mimalloc the global
//! allocator of any binary it is linked into, and nivis's own memory handling (releasing freed
//! pages after each IR, large buffers as mappings of their own: DESIGN §84) is glibc's. Nothing
//! here reads or writes a file.

use std::io::{Read, Write};

fn main() {
    let name = std::env::args().nth(1).unwrap_or_else(|| "<stdin>".into());
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        eprintln!("cannot read the text: {e}");
        std::process::exit(1);
    }
    match alejandra::format::in_memory(name, text) {
        (alejandra::format::Status::Changed(_), after) => {
            let mut out = std::io::stdout().lock();
            if out
                .write_all(after.as_bytes())
                .and_then(|()| out.flush())
                .is_err()
            {
                std::process::exit(1);
            }
        }
        (alejandra::format::Status::Error(e), _) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
