//! The permission to change what a state records: [`Mutation`], a token every call that writes
//! records requires (a commit, its retry, the rescue file, a whole-state replacement, an S3
//! conversion or repair), on every store.
//!
//! Owns: the token and the few places allowed to make one (DESIGN §39). Not: what a store does
//! with the records (`file`, `s3`, `memory`), nor who decides to change them (the engine's
//! `mutating` frame, the `nivis state` verbs).

/// The permission to change what a state records (and, in the engine, the real objects).
///
/// A store's `commit`, `recommit`, `rescue` and `replace`, `Backend::convert` and
/// `s3::repair` (unless a dry run) take one, so code that holds none cannot write a record:
/// `plan`, `validate`, `show`, `diff`, `why` and the other reading commands never obtain one.
/// It is made in exactly these places (the test `grants_are_made_only_where_listed` reads
/// `src/` and fails on a new one):
/// - [`Mutation::for_engine_run`]: the engine's `mutating` frame (`apply`, `destroy`,
///   `refresh`, `import`), once the state is locked;
/// - [`Mutation::for_state_verb`]: a `nivis state` verb that changes the state (`state mv`,
///   `state rm`, `state push`, `state migrate`, `state repair`), and `convert terraform`,
///   which records a converted estate in a new state;
/// - [`Mutation::for_library_caller`]: a program using this crate as a library that writes a
///   state itself (the S3 store's tests in `tests/e2e/remote.rs`); never Nivis's own code.
///
/// Compacting (which rewrites what is recorded, unchanged), folding an earlier run's rescue
/// file in at open (results a run that held the token could not write) and the audit log
/// need none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mutation {
    /// Who was granted it: `"engine run"`, the state verb, or the library caller's name.
    grant: &'static str,
}

impl Mutation {
    /// The grant of the engine's `mutating` frame, the one frame of the commands that change
    /// real objects and the state.
    pub(crate) fn for_engine_run() -> Mutation {
        Mutation {
            grant: "engine run",
        }
    }

    /// The grant of the `nivis state` verb `verb` (e.g. `"state mv"`), which changes the
    /// records without touching a real object.
    pub(crate) const fn for_state_verb(verb: &'static str) -> Mutation {
        Mutation { grant: verb }
    }

    /// The grant of a program that uses this crate as a library and writes a state itself,
    /// named `who`. Nivis's own code never calls it (a test checks `src/`).
    pub const fn for_library_caller(who: &'static str) -> Mutation {
        Mutation { grant: who }
    }

    /// The grant of a unit test inside the crate; exists only in test builds.
    #[cfg(test)]
    pub(crate) const fn for_tests() -> Mutation {
        Mutation { grant: "unit test" }
    }

    /// Who was granted it, as the constructor was told.
    #[cfg(test)] // used by the unit tests only
    pub(crate) fn grant(&self) -> &'static str {
        self.grant
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    /// Every place in `src/` that makes a `Mutation`, outside this file and test code:
    /// (file, constructor and argument). A new grant is added here on purpose, or not at all.
    const GRANTS: &[(&str, &str)] = &[
        ("src/engine/mod.rs", "Mutation::for_engine_run()"),
        ("src/cli/state.rs", "Mutation::for_state_verb(\"state mv\")"),
        ("src/cli/state.rs", "Mutation::for_state_verb(\"state rm\")"),
        (
            "src/cli/state.rs",
            "Mutation::for_state_verb(\"state resolve\")",
        ),
        (
            "src/cli/backend.rs",
            "Mutation::for_state_verb(\"state push\")",
        ),
        (
            "src/cli/backend.rs",
            "Mutation::for_state_verb(\"state migrate\")",
        ),
        (
            "src/cli/state_repair.rs",
            "Mutation::for_state_verb(\"state repair\")",
        ),
        (
            "src/cli/convert.rs",
            "Mutation::for_state_verb(\"convert terraform\")",
        ),
        (
            "src/cli/state_provider.rs",
            "Mutation::for_state_verb(\"state replace-provider\")",
        ),
        (
            "src/cli/backend.rs",
            "Mutation::for_state_verb(\"state restore\")",
        ),
        (
            "src/state/s3/store/recovery.rs",
            "Mutation::for_state_verb(\"--accept-lost-state\")",
        ),
    ];

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    /// The constructor calls in `text` outside its `mod tests` (which comes last in a file;
    /// files of tests only are left out by name). `Mutation::for_tests` exists only in test
    /// builds, and a struct literal only compiles in this file.
    fn grants_in(text: &str) -> Vec<String> {
        let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or("");
        code.match_indices("Mutation::for_")
            .map(|(at, _)| {
                let rest = &code[at..];
                let end = rest.find(')').map_or(rest.len(), |e| e + 1);
                rest[..end].to_string()
            })
            .filter(|call| call != "Mutation::for_tests()")
            .collect()
    }

    #[test]
    fn grants_are_made_only_where_listed() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        let mut found = Vec::new();
        for file in files {
            let rel = file
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let name = file.file_name().unwrap().to_string_lossy();
            if rel == "src/state/mutation.rs" || name.ends_with("tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            found.extend(grants_in(&text).into_iter().map(|g| (rel.clone(), g)));
        }
        found.sort();
        let mut expected: Vec<(String, String)> = GRANTS
            .iter()
            .map(|(f, g)| (f.to_string(), g.to_string()))
            .collect();
        expected.sort();
        assert_eq!(
            found, expected,
            "a Mutation is made somewhere new (or no longer where listed): only the mutating \
             paths of DESIGN §39 may make one; update GRANTS and §39 if this one is meant"
        );
    }

    #[test]
    fn the_scan_sees_a_grant_and_not_test_code() {
        let text = "fn f() { let m = Mutation::for_state_verb(\"x\"); }\n\
                    #[cfg(test)]\nmod tests { fn g() { Mutation::for_tests(); } }";
        assert_eq!(grants_in(text), ["Mutation::for_state_verb(\"x\")"]);
        let elsewhere = "let m = Mutation::for_library_caller(\"me\");";
        assert_eq!(
            grants_in(elsewhere),
            ["Mutation::for_library_caller(\"me\")"]
        );
        assert_eq!(Mutation::for_state_verb("state mv").grant(), "state mv");
    }
}
