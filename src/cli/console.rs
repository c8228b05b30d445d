//! `nivis console`: a Nix REPL with the plan loaded, to try expressions against real outputs.
//!
//! Owns: the REPL's file — the plan function, the ledger built from the state, the plan's IR
//! (`plan ledger`, evaluated lazily) and the flake's Nivis library — written into a private run
//! directory, and running `nix repl` on it. Secrets stay out: sensitive outputs are the
//! ledger's placeholders and no channel of secrets is written (a plan needing a sensitive
//! variable cannot evaluate `plan` here). Not: evaluating anything itself.

use std::io::{IsTerminal, Read, Write};
use std::process::{Command, Stdio};

use super::args::{ConsoleArgs, InstallArgs, RunSpec, VarArgs};
use super::{exit, fail, options};
use crate::ledger::Ledger;
use crate::nixsyntax::nix_string;
use crate::render::{outln, Style};
use crate::secrets::Redactor;

/// Runs `nivis console`; returns `nix repl`'s exit status.
pub(super) fn run(args: &ConsoleArgs, style: Style, redactor: &Redactor) -> i32 {
    match start(args, style, redactor) {
        Ok(code) => code,
        Err(e) => fail(redactor, &e),
    }
}

fn start(args: &ConsoleArgs, style: Style, redactor: &Redactor) -> Result<i32, String> {
    let (install, vars) = (InstallArgs::none(), VarArgs::default());
    let spec = RunSpec {
        state: Some(&args.state),
        ..RunSpec::new(&args.source, &vars, &install)
    };
    let opts = options(&spec, "console", redactor, None)?;
    let state = opts.backend.read_only().map_err(|e| e.to_string())?;
    let mut ledger = Ledger::default();
    ledger.env = Some(opts.backend.env().to_string());
    ledger.remote_states = opts.remote_states.clone();
    for r in state.iter() {
        ledger.set(&r.id, &r.attributes, &r.sensitive_paths);
    }
    let dir = crate::rundir::RunDir::create().map_err(|e| e.to_string())?;
    let ledger_path = dir
        .write("ledger.json", ledger.to_json().to_string().as_bytes())
        .map_err(|e| format!("cannot write the ledger: {e}"))?;
    let (plan, lib) = crate::nixeval::console_exprs(&opts.source);
    let text = format!(
        "# nivis console: the plan {}\nlet\n  ledger = builtins.fromJSON (builtins.readFile {});\n  \
         planFunction = {plan};\nin {{\n  inherit ledger planFunction;\n  outputs = ledger.outputs;\n  \
         plan = planFunction ledger;\n  lib = {lib};\n}}\n",
        opts.source,
        nix_string(&ledger_path.display().to_string()),
    );
    let file = dir
        .write("console.nix", text.as_bytes())
        .map_err(|e| format!("cannot write the console's file: {e}"))?;
    outln!("Loaded: outputs, ledger, plan (the IR), planFunction, lib. Sensitive outputs are placeholders. :q quits.");
    // `child::nix`: the experimental features, and no NIVIS_VAR_* in the repl's environment.
    let mut cmd = crate::child::nix();
    // The file's path is under the run directory's descriptor (`/proc/self/fd/N/…`).
    crate::nixeval::keep_open_in_child(&mut cmd, dir.inherit_fd());
    cmd.args(["repl", "--impure"]).arg(&file);
    let status = if style.color {
        cmd.status()
    } else {
        without_colours(&mut cmd)
    }
    .map_err(|e| format!("cannot run nix repl: {e}; is Nix installed and on PATH?"))?;
    drop(dir);
    Ok(status.code().unwrap_or(exit::ERROR))
}

/// Runs the REPL without colours (`--no-color`, NO_COLOR, TERM=dumb, or output that is not a
/// terminal): NO_COLOR for a Nix that honours it, and, unless both ends are a terminal (where
/// line editing needs Nix's own stdout), its output with the colour sequences taken out, since
/// older Nix (2.8) colours REPL values whatever the environment says.
fn without_colours(cmd: &mut Command) -> std::io::Result<std::process::ExitStatus> {
    cmd.env("NO_COLOR", "1");
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        return cmd.status();
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn()?;
    let mut from_nix = child.stdout.take().expect("piped");
    let mut strip = AnsiStrip::default();
    let mut out = std::io::stdout();
    let mut buf = [0u8; 8192];
    loop {
        match from_nix.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                let kept = strip.feed(&buf[..n]);
                // A reader that went away (`| head`) ends the copy; the REPL ends with its input.
                if out.write_all(&kept).and_then(|()| out.flush()).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    drop(from_nix);
    child.wait()
}

/// Removes ANSI control sequences (`ESC [ … final`) from a byte stream fed in pieces.
#[derive(Default)]
struct AnsiStrip {
    /// 0: text; 1: after ESC; 2: inside `ESC [`.
    state: u8,
}

impl AnsiStrip {
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut kept = Vec::with_capacity(bytes.len());
        for &b in bytes {
            match (self.state, b) {
                (0, 0x1b) => self.state = 1,
                (0, _) => kept.push(b),
                (1, b'[') => self.state = 2,
                // Another escape (ESC c, ESC 7): its one byte goes with it.
                (1, _) => self.state = 0,
                (2, 0x40..=0x7e) => self.state = 0,
                (2, _) => {}
                _ => self.state = 0,
            }
        }
        kept
    }
}

#[cfg(test)]
mod tests {
    use super::AnsiStrip;

    #[test]
    fn colour_sequences_go_even_split_across_reads() {
        let mut s = AnsiStrip::default();
        let mut out = s.feed(b"{ a = \x1b[35;1m\"x\"\x1b");
        out.extend(s.feed(b"[0m; b = \x1b[36;1m1\x1b[0m; }\n"));
        assert_eq!(String::from_utf8(out).unwrap(), "{ a = \"x\"; b = 1; }\n");
    }
}
