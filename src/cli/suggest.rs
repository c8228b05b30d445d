//! Parsing the command line, with a better answer for Terraform habits.
//!
//! Owns: turning argv into [`Cli`], and the hint for a long option typed with one dash
//! (`-auto-approve`, `-var x=1`, Terraform's spelling), which clap would otherwise read as a
//! bundle of short flags. Not: the definitions themselves (`args`).

use std::ffi::OsString;

use clap::{CommandFactory, Parser};

use super::args::Cli;

/// Parses argv; on a usage error prints clap's message, or our hint when a single-dash long
/// option explains it, and exits with status 1: every error is 1, as in Terraform, because
/// 2 means "changes present" under `--detailed-exitcode` (clap's default is 2).
pub fn parse() -> Cli {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    // `nivis --version` (`-V`) prints what `nivis version` does: platform and Nix too.
    if args.len() == 2 && (args[1] == "--version" || args[1] == "-V") {
        args[1] = "version".into();
    }
    match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            if e.use_stderr() {
                if let Some(hint) = single_dash_hint(&args).or_else(|| terraform_verb_hint(&args)) {
                    // Before the run: nothing is known to be secret yet, so a redactor of
                    // its own, empty (the hint is escaped all the same).
                    let nothing_known = crate::secrets::Redactor::new();
                    eprintln!(
                        "error: {}\n\nFor more information, try '--help'.",
                        crate::render::escape(&nothing_known, &hint)
                    );
                    std::process::exit(super::exit::ERROR);
                }
            }
            // Help and version go to stdout and are not errors.
            let _ = e.print();
            std::process::exit(if e.use_stderr() {
                super::exit::ERROR
            } else {
                super::exit::OK
            })
        }
    }
}

/// For a Terraform verb Nivis spells another way (`taint`, `untaint`, `init`, `workspace`),
/// what to type instead.
pub(super) fn terraform_verb_hint(args: &[OsString]) -> Option<String> {
    let verb = args.get(1)?.to_str()?;
    let instead = match verb {
        "taint" => "replace an object with `nivis apply --replace ID` (or plan it with `nivis plan --replace ID`)",
        "untaint" => "nothing to undo: `--replace` applies to one run only",
        "init" => "there is nothing to initialise: `nivis plan` installs the plan's providers on first use and reads the state backend from the flake's `nivis.backend`; `nivis providers lock` records provider versions and hashes, `nivis state migrate` moves a local state to the backend",
        "workspace" => "Nivis calls workspaces environments: `--env NAME` (or NIVIS_ENV=NAME) selects one, whose state is created on its first apply; `nivis env list` lists those with a state",
        _ => return None,
    };
    Some(format!("'{verb}' is not a Nivis command: {instead}"))
}

/// `'-auto-approve' is not an option; did you mean '--auto-approve'?` when an argument
/// before `--` is a long option of the chosen command spelled with one dash.
pub(super) fn single_dash_hint(args: &[OsString]) -> Option<String> {
    let root = Cli::command();
    let mut cmd = &root;
    for arg in args.iter().skip(1) {
        let arg = arg.to_string_lossy();
        if arg == "--" {
            break;
        }
        if let Some(sub) = cmd.find_subcommand(arg.as_ref()) {
            cmd = sub;
            continue;
        }
        let Some(rest) = arg.strip_prefix('-') else {
            continue;
        };
        if rest.starts_with('-')
            || rest.len() < 2
            || !rest.starts_with(|c: char| c.is_ascii_alphabetic())
        {
            continue;
        }
        let name = rest.split_once('=').map_or(rest, |(n, _)| n);
        let known = |c: &clap::Command| c.get_arguments().any(|a| a.get_long() == Some(name));
        if known(cmd) || known(&root) {
            // The option's name only: a value typed with it may be a secret (`-var=pw=…`).
            return Some(format!(
                "'-{name}' is not an option; did you mean '--{name}'? (Nivis spells long options with two dashes)"
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hint(words: &[&str]) -> Option<String> {
        let args: Vec<OsString> = std::iter::once("nivis")
            .chain(words.iter().copied())
            .map(OsString::from)
            .collect();
        single_dash_hint(&args)
    }

    #[test]
    fn terraform_spellings_get_the_two_dash_form() {
        assert!(hint(&["apply", "-auto-approve"])
            .unwrap()
            .contains("did you mean '--auto-approve'?"));
        assert!(hint(&["plan", "-var", "x=1"])
            .unwrap()
            .contains("did you mean '--var'?"));
        let typed = hint(&["plan", "-var=pw=hunter22"]).unwrap();
        assert!(typed.contains("did you mean '--var'?"), "{typed}");
        assert!(
            !typed.contains("hunter22"),
            "the value is not repeated: {typed}"
        );
        assert!(hint(&["state", "show", "-state", "s.json", "x"])
            .unwrap()
            .contains("'--state'"));
    }

    #[test]
    fn terraform_verbs_get_what_nivis_does_instead() {
        let hint = |verb: &str| terraform_verb_hint(&["nivis".into(), verb.into()]);
        assert!(hint("init").unwrap().contains("`nivis providers lock`"));
        assert!(hint("workspace").unwrap().contains("--env NAME"));
        assert!(hint("taint").unwrap().contains("--replace ID"));
        assert_eq!(hint("plan"), None);
    }

    #[test]
    fn no_hint_for_what_is_not_an_option_of_that_command() {
        // plan takes no --auto-approve: nothing to suggest, clap's own error stands.
        assert_eq!(hint(&["plan", "-auto-approve"]), None);
        assert_eq!(hint(&["plan", "-vv"]), None);
        assert_eq!(hint(&["apply", "--", "-auto-approve"]), None);
        assert_eq!(hint(&["apply", "-x"]), None);
    }
}
