//! Shell completion: the scripts `nivis completion SHELL` prints, and the answers nivis gives
//! when such a script calls back into it while the user presses TAB.
//!
//! Owns: the completion environment variable, the registration scripts, and the dynamic
//! candidates (resource ids read from the state file the command line names). Not: the
//! command line's shape (`args`), nor reading state beyond listing ids.
//!
//! The scripts are clap_complete's environment-driven ones: the shell runs
//! `NIVIS_COMPLETE=<shell> nivis -- <words>` and nivis answers from the same clap definitions
//! it parses with, so completions cannot drift from the real flags.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::CommandFactory;
use clap_complete::engine::CompletionCandidate;
use clap_complete::env::{Bash, EnvCompleter, Fish, Zsh};
use clap_complete::CompleteEnv;

use super::args::{Cli, Shell, SourceArgs};

/// The variable that switches nivis into answering completion requests.
const COMPLETE_VAR: &str = "NIVIS_COMPLETE";

/// Answers a completion request and exits, if this process is one (the completion script
/// set NIVIS_COMPLETE); otherwise returns at once. Call before anything writes to stdout.
pub fn answer_if_asked() {
    CompleteEnv::with_factory(Cli::command)
        .var(COMPLETE_VAR)
        .complete();
}

/// Writes the completion script for `shell`. The script calls `nivis` through PATH.
pub(super) fn write_script(shell: Shell, out: &mut dyn Write) -> std::io::Result<()> {
    let completer: &dyn EnvCompleter = match shell {
        Shell::Bash => &Bash,
        Shell::Zsh => &Zsh,
        Shell::Fish => &Fish,
    };
    completer.write_registration(COMPLETE_VAR, "nivis", "nivis", "nivis", out)
}

/// Resource ids in the state file of the command line being completed (`--state`, then
/// NIVIS_STATE, then the default state of the project `--flake`/`--file` name). The local
/// file only: a remote state is not fetched at every TAB. Nothing when there is no readable
/// state: completion must never print errors into the user's prompt.
pub(super) fn state_ids() -> Vec<CompletionCandidate> {
    let Some(path) = state_path(
        std::env::args_os().collect(),
        std::env::var_os("NIVIS_STATE"),
    ) else {
        return Vec::new();
    };
    match crate::state::Store::read_only(&path) {
        Ok(state) => state
            .ids()
            .map(|id| CompletionCandidate::new(id.to_string()))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The state path the words being completed name. While completing, nivis runs as
/// `nivis -- nivis WORDS...`, so the words are its own arguments.
fn state_path(args: Vec<OsString>, from_env: Option<OsString>) -> Option<PathBuf> {
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|w| w.to_string_lossy().into_owned())
        .collect();
    // The last value given to `--flag VALUE` or `--flag=VALUE`.
    let value_of = |flag: &str| -> Option<String> {
        let mut found = None;
        let mut it = words.iter();
        while let Some(word) = it.next() {
            if word == flag {
                found = it.next().cloned();
            } else if let Some(v) = word.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
                found = Some(v.to_string());
            }
        }
        found
    };
    if let Some(p) = value_of("--state").or_else(|| from_env.map(|e| e.to_string_lossy().into())) {
        return Some(PathBuf::from(p));
    }
    let source = SourceArgs {
        flake: value_of("--flake").unwrap_or_else(|| ".".into()),
        file: value_of("--file").map(PathBuf::from),
        attr: value_of("--attr"),
        trust_group: false,
    };
    let source = super::plan_source(&source).ok()?;
    crate::project::known_state_path(&source).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_state_flag_of_the_line_being_completed_wins() {
        let env = Some(OsString::from("env.json"));
        let line = [
            "nivis", "--", "nivis", "state", "show", "--state", "a.json", "",
        ];
        let path = |line: &[&str], env: Option<OsString>| state_path(os(line), env).unwrap();
        assert_eq!(path(&line, env.clone()), PathBuf::from("a.json"));
        let line = [
            "nivis",
            "--",
            "nivis",
            "plan",
            "--state=b.json",
            "--target",
            "",
        ];
        assert_eq!(path(&line, env.clone()), PathBuf::from("b.json"));
        // A trailing `--state` without a value yet names nothing.
        let line = ["nivis", "--", "nivis", "state", "show", "--state"];
        assert_eq!(path(&line, env), PathBuf::from("env.json"));
        // Otherwise the project's own state, of the flake or file the line names.
        let dir = tempfile::tempdir().unwrap();
        let flake = dir.path().join("infra");
        std::fs::create_dir(&flake).unwrap();
        let flake = flake.display().to_string();
        let expected = crate::project::default_state_path(&crate::nixeval::PlanSource::Flake {
            flake: flake.clone(),
            attr: "nivis.plan".into(),
        })
        .unwrap();
        let line = [
            "nivis", "--", "nivis", "state", "show", "--flake", &flake, "",
        ];
        assert_eq!(path(&line, None), expected);
        let with_attr = format!("{flake}#nivis.prod");
        let line = ["nivis", "--", "nivis", "output", "--flake", &with_attr, ""];
        assert_eq!(path(&line, None), expected);
    }
}
