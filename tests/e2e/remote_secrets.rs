//! Issues 12 and 16 together: a remote state keeps the secrets rule. The state's secrets, the S3
//! secret key and the state encryption key appear in no printout, no file Nivis writes outside
//! the 0600 state (or a `state pull --out` file), not in `/nix/store`, and the bucket holds the
//! state encrypted; every local file of a backend (environments, the rescue file) stays out of
//! the project directory. Each secret is unique to the test run (see `sandbox`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::sandbox::*;
use super::weed::{Weed, BUCKET};
use crate::util::*;

const TOKEN_A: &str =
    "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = \"a\"; })";

/// `nivis.backend` for state `key` on `weed`, encrypted with `$NIVIS_TEST_STATE_KEY` or not.
pub(super) fn backend_attrs(weed: &Weed, key: &str, encrypted: bool) -> String {
    format!(
        "backend = {{ type = \"s3\"; bucket = \"{BUCKET}\"; key = \"{key}\"; endpoint = \"{}\"; \
         usePathStyle = true; maxAttempts = 2; {} }};",
        weed.endpoint(),
        if encrypted {
            "encryptionKeyEnv = \"NIVIS_TEST_STATE_KEY\";"
        } else {
            ""
        }
    )
}

pub(super) fn ok(out: &std::process::Output) -> String {
    assert_success(out);
    stdout(out)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn a_remote_state_run_leaks_no_secret_credential_or_key() {
    let weed = Weed::start();
    let mut s = Sandbox::new();
    let [_, (_, secret_key)] = weed.credentials();
    for (k, v) in weed.credentials() {
        s.set_env(&k, Some(&v));
    }
    let state_key = STANDARD.encode(rand::random::<[u8; 32]>());
    s.set_env("NIVIS_TEST_STATE_KEY", Some(&state_key));
    let attrs = backend_attrs(&weed, "leak/nivis.state", true);
    Sandbox::write_flake_with(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""), &attrs);

    // The book's flow on a plain-directory flake, with request logs on.
    ok(&s.nivis(&["apply", "--auto-approve", "-vv"]));
    let plan = ok(&s.nivis(&["plan", "-vv"]));
    assert!(plan.contains("No changes"), "{plan}");
    ok(&s.nivis(&["plan", "--json"]));
    assert!(ok(&s.nivis(&["state", "list"])).contains("alpha.alpha_token.A"));
    ok(&s.nivis(&["state", "show", "alpha.alpha_token.A"]));
    ok(&s.nivis(&["state", "show", "alpha.alpha_token.A", "--json"]));
    ok(&s.nivis(&["output"]));
    ok(&s.nivis(&["env", "list"]));
    let unlock = s.nivis(&["force-unlock", "no-such-lock"]);
    assert!(
        stdout(&unlock).contains("not locked"),
        "{}",
        stdout(&unlock)
    );

    // The raw state only where asked: a 0600 file, even over a planted link.
    let pulled = s.path("pulled.json");
    let victim = s.path("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, &pulled).unwrap();
    ok(&s.nivis(&["state", "pull", "--out", pulled.to_str().unwrap()]));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    assert_eq!(mode(&pulled), 0o600);
    let text = std::fs::read_to_string(&pulled).unwrap();
    assert!(text.contains(&s.secret), "the pulled state is the real one");
    let inside = s.nivis(&["state", "pull", "--out", "pulled.json"]);
    assert!(
        !inside.status.success() && stderr(&inside).contains("Nix copies"),
        "the flake directory is copied into the store: {}",
        stderr(&inside)
    );
    let no_out = s.nivis(&["state", "pull"]);
    assert!(
        !no_out.status.success() && stderr(&no_out).contains("--out"),
        "{}",
        stderr(&no_out)
    );

    // A plan whose error quotes the credentials and the key (Nix reads the environment): the
    // line quoting them is left out, with a note (DESIGN: Nix errors and secrets).
    let bad = s.path("bad");
    Sandbox::write_flake_with(
        &bad,
        "ledger: throw \"creds ${builtins.getEnv \"AWS_SECRET_ACCESS_KEY\"} key ${builtins.getEnv \"NIVIS_TEST_STATE_KEY\"}\"",
        &attrs,
    );
    let quoted = s.nivis_in(&bad, &["plan"]);
    assert!(
        !stderr(&quoted).contains("creds ")
            && stderr(&quoted).contains("quoted a value derived from a secret"),
        "{}",
        stderr(&quoted)
    );

    // Nothing of Nivis's in the project, and the bucket holds no plaintext.
    let left: Vec<String> = std::fs::read_dir(&s.proj)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "flake.nix" && n != "flake.lock")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    let client = weed.client();
    let names = client.list("leak/").unwrap();
    assert!(names.iter().any(|n| n == "leak/nivis.state"), "{names:?}");
    let forms: Vec<Vec<u8>> = [&s.secret, &secret_key, &state_key]
        .iter()
        .flat_map(|n| leak_forms(n))
        .collect();
    for name in &names {
        let Some(object) = client.get(name).unwrap() else {
            continue;
        };
        for form in &forms {
            assert!(
                !object.body.windows(form.len()).any(|w| w == &form[..]),
                "{name} holds a secret in plain text"
            );
        }
    }
    s.hunt(&[pulled]);
    s.hunt_all(&[&secret_key, &state_key], &[]);
}

#[test]
fn an_unencrypted_remote_state_holding_secrets_says_so() {
    let weed = Weed::start();
    let mut s = Sandbox::new();
    for (k, v) in weed.credentials() {
        s.set_env(&k, Some(&v));
    }
    let attrs = backend_attrs(&weed, "plain/nivis.state", false);
    Sandbox::write_flake_with(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""), &attrs);
    ok(&s.nivis(&["apply", "--auto-approve"]));
    // The first open found nothing sensitive yet; the next one does.
    let again = s.nivis(&["apply", "--auto-approve"]);
    assert_success(&again);
    let err = stderr(&again);
    assert!(
        err.contains("s3://nivis-e2e/plain/nivis.state holds sensitive values unencrypted")
            && err.contains("encryptionKeyEnv"),
        "{err}"
    );
}

#[test]
fn local_environments_live_in_the_project_state_directory_and_legacy_ones_move_there() {
    let s = Sandbox::new();
    // An environment's state as the S3 branch left it: beside the flake.
    let elsewhere = s.path("elsewhere");
    let plan_file = Sandbox::write_plan_file(&elsewhere, &Sandbox::plan_fn(TOKEN_A, ""));
    let old_state = elsewhere.join("nivis.state.json");
    let (plan_arg, state_arg) = (plan_file.to_str().unwrap(), old_state.to_str().unwrap());
    ok(&s.nivis(&[
        "apply",
        "--auto-approve",
        "--file",
        plan_arg,
        "--state",
        state_arg,
        "--env",
        "dev",
    ]));
    let legacy = s.proj.join("nivis.env.d/dev/nivis.state.json");
    std::fs::create_dir_all(legacy.parent().unwrap()).unwrap();
    std::fs::copy(elsewhere.join("nivis.env.d/dev/nivis.state.json"), &legacy).unwrap();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));

    // The next command moves it out before Nix copies the flake directory.
    let listed = s.nivis(&["state", "list", "--env", "dev"]);
    assert!(ok(&listed).contains("alpha.alpha_token.A"));
    assert!(
        stderr(&listed).contains("Moved the state"),
        "{}",
        stderr(&listed)
    );
    assert!(!legacy.exists());
    let projects = s.path("state/nivis/projects");
    let project = std::fs::read_dir(&projects)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let moved = project.join("nivis.env.d/dev/nivis.state.json");
    assert!(moved.exists(), "{}", moved.display());

    // A new environment is made private too.
    ok(&s.nivis(&["apply", "--auto-approve", "--env", "staging"]));
    for dir in ["nivis.env.d", "nivis.env.d/dev", "nivis.env.d/staging"] {
        assert_eq!(mode(&project.join(dir)), 0o700, "{dir}");
    }
    assert_eq!(
        ok(&s.nivis(&["env", "list", "--env", "staging"])),
        "  dev\n* staging\n"
    );
    assert!(!s.proj.join("nivis.env.d/staging").exists());
    s.hunt(&[]);
}

#[test]
fn without_a_home_the_rescue_file_never_falls_back_to_a_shared_temp_dir() {
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let plan = dir.path().join("plan.nix");
    std::fs::write(
        &plan,
        format!(
            "let lib = import {}/nix; in ledger: lib.toIR {{ inherit ledger; }}",
            repo().display()
        ),
    )
    .unwrap();
    let out = std::process::Command::new(nivis_bin())
        .args(["state", "rm", "x", "--file"])
        .arg(&plan)
        .arg("--state")
        .arg(dir.path().join("s.json"))
        .args([
            "--backend-config",
            "type=s3",
            "--backend-config",
            "bucket=abc",
        ])
        .args(["--backend-config", "key=k", "--backend-config"])
        .args([
            "endpoint=http://127.0.0.1:9",
            "--backend-config",
            "maxAttempts=1",
        ])
        .env_remove("HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("NIVIS_RESCUE_DIR")
        .env("TMPDIR", &tmp)
        .env("AWS_ACCESS_KEY_ID", "a")
        .env("AWS_SECRET_ACCESS_KEY", "bbbbbbbb")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("XDG_STATE_HOME") && err.contains("NIVIS_RESCUE_DIR"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}
