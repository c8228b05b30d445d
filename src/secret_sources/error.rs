//! The errors of secret sources: [`SpecError`] (a declaration that does not parse) and
//! [`ReadError`] (a value that cannot be read). Each carries the facts and never a value.

use std::fmt;
use std::path::PathBuf;

use serde_json::Value as Json;

/// Why `nivis.secretSources` does not parse.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SpecError {
    /// `nivis.secretSources` is not an attribute set.
    NotASet {
        /// What it is instead.
        got: Json,
    },
    /// One source is wrong.
    Source {
        /// The variable's name.
        name: String,
        /// What is wrong with its declaration.
        problem: SpecProblem,
    },
}

/// What is wrong with one source's declaration.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SpecProblem {
    /// The source is not an attribute set.
    NotASet,
    /// The source has a field no kind knows.
    UnknownField(String),
    /// The source names no kind or several.
    Kinds(Vec<String>),
    /// A field that must be a non-empty string is not.
    NotText {
        /// The field.
        field: String,
        /// What it is instead.
        got: Json,
    },
    /// The identity is a path in the world-readable Nix store.
    IdentityInStore(String),
    /// A sops source has no `key`.
    SopsWithoutKey,
    /// `command` is not a non-empty list of strings.
    BadCommand,
}

impl fmt::Display for SpecProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecProblem::NotASet => f.write_str(
                "a source is an attribute set: { sops = ./file; key = \"a/b\"; }, { age = ./file; }, \
                 { command = [ \"pass\" \"show\" \"x\" ]; } or { env = \"NAME\"; }",
            ),
            SpecProblem::UnknownField(field) => write!(
                f,
                "unknown field {field:?} (expected one of sops, age, command, env, with key and identity)"
            ),
            SpecProblem::Kinds(kinds) => write!(
                f,
                "give exactly one of sops, age, command, env (got {})",
                if kinds.is_empty() {
                    "none".to_string()
                } else {
                    kinds.join(", ")
                }
            ),
            SpecProblem::NotText { field, got } => {
                write!(f, "{field} must be a non-empty string, not {got}")
            }
            SpecProblem::IdentityInStore(p) => write!(
                f,
                "identity {p} is in the Nix store, readable by every user: a path literal \
                 (./key.txt) is copied there. Give the key file's path as a string (\"/home/me/.config/sops/age/keys.txt\")"
            ),
            SpecProblem::SopsWithoutKey => f.write_str(
                "a sops source needs `key`, the path of the value in the file (e.g. \"db/password\")",
            ),
            SpecProblem::BadCommand => f.write_str(
                "command must be a non-empty list of strings (the program, then its arguments)",
            ),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::NotASet { got } => write!(
                f,
                "nivis.secretSources must be an attribute set of sources, not {got}"
            ),
            SpecError::Source { name, problem } => {
                write!(f, "nivis.secretSources.{name}: {problem}")
            }
        }
    }
}

impl std::error::Error for SpecError {}

/// Why a variable's value cannot be read from its source. Resolving stops there: nothing was
/// planned or applied.
#[derive(Debug)]
pub(crate) struct ReadError {
    /// The variable's name.
    pub(crate) name: String,
    /// The source in words ([`super::Source::describe`]).
    pub(crate) source: String,
    /// What went wrong (boxed: a refused identity file carries a large refusal).
    pub(crate) problem: Box<ReadProblem>,
}

/// What went wrong reading one source.
#[derive(Debug)]
pub(crate) enum ReadProblem {
    /// The environment variable is not set, or not UTF-8.
    EnvUnset(String),
    /// An age source has no identity anywhere.
    NoAgeIdentity,
    /// The encrypted file is not a regular file.
    NotAFile(PathBuf),
    /// The encrypted file cannot be examined.
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The identity is a path in the Nix store.
    IdentityInStore(PathBuf),
    /// The identity file breaks the private-file rule, or cannot be opened.
    IdentityRefused {
        /// The file.
        path: PathBuf,
        /// What the rule or the system said.
        error: crate::privfile::OpenError,
    },
    /// The program cannot be started.
    NotRun {
        /// The program.
        program: String,
        /// What the system said.
        source: std::io::Error,
    },
    /// The program failed.
    Failed {
        /// The program.
        program: String,
        /// Its exit status.
        status: std::process::ExitStatus,
        /// The first line of its stderr.
        first_line: String,
    },
    /// The program printed more than a value may hold.
    TooLong {
        /// The program.
        program: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// The program ran past the deadline and was killed.
    TimedOut {
        /// The program.
        program: String,
        /// The deadline.
        after: std::time::Duration,
    },
    /// The program printed bytes that are not UTF-8.
    NotUtf8(String),
    /// The program printed nothing.
    Empty(String),
}

impl fmt::Display for ReadProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadProblem::EnvUnset(var) => write!(f, "{var} is not set (or not UTF-8)"),
            ReadProblem::NoAgeIdentity => f.write_str(
                "no age identity: set `identity` in the source, NIVIS_AGE_IDENTITY or SOPS_AGE_KEY_FILE",
            ),
            ReadProblem::NotAFile(p) => write!(f, "{} is not a file", p.display()),
            ReadProblem::Unreadable { path, source } => write!(f, "{}: {source}", path.display()),
            ReadProblem::IdentityInStore(p) => write!(
                f,
                "the identity {} is in the Nix store, readable by every user",
                p.display()
            ),
            ReadProblem::IdentityRefused { path, error } => f.write_str(&error.message(path)),
            ReadProblem::NotRun { program, source } => {
                write!(f, "cannot run {program}: {source}")
            }
            ReadProblem::Failed {
                program,
                status,
                first_line,
            } => write!(f, "{program} failed ({status}): {first_line}"),
            ReadProblem::TooLong { program, limit } => {
                write!(f, "{program} printed more than {limit} bytes")
            }
            ReadProblem::TimedOut { program, after } => write!(
                f,
                "{program} did not finish within {} s and was stopped (a prompt nobody can answer? Nivis closes its input; unlock the agent it asks, e.g. gpg-agent, before the run)",
                after.as_secs()
            ),
            ReadProblem::NotUtf8(program) => {
                write!(f, "{program} printed text that is not UTF-8")
            }
            ReadProblem::Empty(program) => write!(f, "{program} printed nothing"),
        }
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "variable {}: cannot read it from its {}: {}; nothing was planned or applied",
            self.name, self.source, self.problem
        )
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self.problem.as_ref() {
            ReadProblem::Unreadable { source, .. } | ReadProblem::NotRun { source, .. } => {
                Some(source)
            }
            _ => None,
        }
    }
}
