//! Issue 27, case 12: client-side encryption turned on (and off) for a remote state that
//! already exists, with `nivis state migrate --encrypt` / `--decrypt`, and the first write of a
//! secret to an unencrypted state warned about once.

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;

use super::remote_secrets::{backend_attrs, ok};
use super::sandbox::*;
use super::weed::Weed;
use crate::util::*;

const TOKEN_A: &str =
    "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = \"a\"; })";
const TOKEN_B: &str =
    "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"B\"; config.label = \"b\"; })";

const SEALED: &[u8] = b"nivis-aes256gcm-v1\n";

/// Every object of the state under `prefix`: (name, body).
fn objects(weed: &Weed, prefix: &str) -> Vec<(String, Vec<u8>)> {
    let client = weed.client();
    let names = client.list(prefix).unwrap();
    assert!(!names.is_empty(), "no objects under {prefix}");
    names
        .into_iter()
        .filter_map(|n| client.get(&n).unwrap().map(|o| (n, o.body)))
        .collect()
}

fn holds(body: &[u8], forms: &[Vec<u8>]) -> bool {
    forms
        .iter()
        .any(|f| body.windows(f.len()).any(|w| w == &f[..]))
}

#[test]
fn an_unencrypted_remote_state_is_encrypted_in_place_and_back() {
    let weed = Weed::start();
    let mut s = Sandbox::new();
    for (k, v) in weed.credentials() {
        s.set_env(&k, Some(&v));
    }
    let state_key = STANDARD.encode(rand::random::<[u8; 32]>());
    s.set_env("NIVIS_TEST_STATE_KEY", Some(&state_key));
    let prefix = "enc/nivis.state";
    let plain = backend_attrs(&weed, prefix, false);
    let sealed = backend_attrs(&weed, prefix, true);
    // Two applies: the bucket then holds a snapshot, journal segments and an older namespace.
    Sandbox::write_flake_with(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""), &plain);
    ok(&s.nivis(&["apply", "--auto-approve"]));
    Sandbox::write_flake_with(
        &s.proj,
        &Sandbox::plan_fn(&format!("{TOKEN_A} {TOKEN_B}"), ""),
        &plain,
    );
    ok(&s.nivis(&["apply", "--auto-approve"]));
    let forms = leak_forms(&s.secret);
    assert!(
        objects(&weed, prefix).iter().any(|(_, b)| holds(b, &forms)),
        "the unencrypted state holds the secret"
    );

    // With the key configured, an ordinary command says how to encrypt the existing state.
    Sandbox::write_flake_with(
        &s.proj,
        &Sandbox::plan_fn(&format!("{TOKEN_A} {TOKEN_B}"), ""),
        &sealed,
    );
    let refused = s.nivis(&["plan"]);
    assert!(
        !refused.status.success() && stderr(&refused).contains("nivis state migrate --encrypt"),
        "{}",
        stderr(&refused)
    );
    let done = ok(&s.nivis(&["state", "migrate", "--encrypt"]));
    assert!(done.contains("Encrypted"), "{done}");
    for (name, body) in objects(&weed, prefix) {
        assert!(
            !holds(&body, &forms),
            "{name} still holds the secret in plain text"
        );
        if name == prefix {
            assert!(body.starts_with(SEALED), "{name} is not sealed");
        }
    }
    let plan = ok(&s.nivis(&["plan"]));
    assert!(plan.contains("No changes"), "{plan}");
    // Once more is harmless.
    ok(&s.nivis(&["state", "migrate", "--encrypt"]));
    assert!(ok(&s.nivis(&["state", "list"])).contains("alpha.alpha_token.B"));

    // And back: decrypted with the key still configured, then the key is dropped.
    let back = ok(&s.nivis(&["state", "migrate", "--decrypt"]));
    assert!(back.contains("Decrypted"), "{back}");
    for (name, body) in objects(&weed, prefix) {
        assert!(!body.starts_with(SEALED), "{name} is still sealed");
    }
    Sandbox::write_flake_with(
        &s.proj,
        &Sandbox::plan_fn(&format!("{TOKEN_A} {TOKEN_B}"), ""),
        &plain,
    );
    let plan = ok(&s.nivis(&["plan"]));
    assert!(plan.contains("No changes"), "{plan}");

    // Without a key there is nothing to encrypt with: said, nothing changed.
    let keyless = s.nivis(&["state", "migrate", "--encrypt"]);
    assert!(
        !keyless.status.success() && stderr(&keyless).contains("encryptionKeyEnv"),
        "{}",
        stderr(&keyless)
    );
    s.hunt_all(&[&state_key], &[]);
}

#[test]
fn the_first_unencrypted_write_of_a_secret_warns_once() {
    let weed = Weed::start();
    let mut s = Sandbox::new();
    for (k, v) in weed.credentials() {
        s.set_env(&k, Some(&v));
    }
    let attrs = backend_attrs(&weed, "first/nivis.state", false);
    Sandbox::write_flake_with(
        &s.proj,
        &Sandbox::plan_fn(&format!("{TOKEN_A} {TOKEN_B}"), ""),
        &attrs,
    );
    let first = s.nivis(&["apply", "--auto-approve", "--parallelism", "1"]);
    assert_success(&first);
    let err = stderr(&first);
    let warning = "s3://nivis-e2e/first/nivis.state holds sensitive values unencrypted";
    assert_eq!(err.matches(warning).count(), 1, "{err}");
    assert!(err.contains("nivis state migrate --encrypt"), "{err}");
}
