//! Issue 47: secrets and trust, fourth pass. Where a secret changes form (a saved plan's
//! digest) or someone else's code runs (a checkout another user owns or can write), each
//! finding of the audit is rebuilt here as the attack, and must fail. Each test failed on the
//! code before the issue.

use nivis::engine::plan_file::canonical;
use serde_json::Value as Json;

use super::local_adversary::{chmod, Adversary};
use super::sandbox::*;
use crate::util::*;

fn hmac_hex(key: &[u8], message: &[u8]) -> String {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
    mac.update(message);
    hex::encode(mac.finalize().into_bytes())
}

/// Every string in `value` equal to `from` replaced by `to`.
fn replace_strings(value: &mut Json, from: &str, to: &str) {
    match value {
        Json::String(s) if s == from => *s = to.to_string(),
        Json::Array(a) => a.iter_mut().for_each(|v| replace_strings(v, from, to)),
        Json::Object(m) => m.values_mut().for_each(|v| replace_strings(v, from, to)),
        _ => {}
    }
}

/// A flake whose only resource records the sensitive variable `pw` as it is: the state's only
/// secret is the password (the audit's case).
fn flake_with_password(s: &Sandbox) {
    let b = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; config.from = vars.pw; })";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ pw = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; b = {b};"
        ),
        "b",
        "variables = decls;",
    );
    Sandbox::write_flake(&s.proj, &plan);
}

// --- finding 1: the saved plan's key ----------------------------------------------------------

#[test]
fn a_saved_plans_digest_cannot_be_checked_against_guesses_from_a_rebuilt_state() {
    let mut s = Sandbox::new();
    flake_with_password(&s);
    let state = s.path("home/s.json");
    let state_arg = state.to_str().unwrap();
    s.set_env("NIVIS_VAR_pw", Some("winter2026"));
    succeeded(&s.nivis(&["apply", "--auto-approve", "--state", state_arg]));
    let plan = s.path("home/p.plan");
    let plan_arg = plan.to_str().unwrap();
    succeeded(&s.nivis(&["plan", "--out", plan_arg, "--state", state_arg]));
    let text = std::fs::read_to_string(&plan).unwrap();
    let saved: Json = serde_json::from_str(&text).unwrap();
    let digest = saved["basis"]["variables"]["pw"]["hmac"]
        .as_str()
        .unwrap_or_else(|| panic!("a digest of pw: {text}"))
        .to_string();
    let (_, mac) = digest.rsplit_once(':').unwrap();

    // The attacker: the plan file, and a state rebuilt from everything but the password (here
    // the victim's own, minus what only the state's readers have: its keys), trying guesses
    // the way the earlier key derivation allowed.
    let victim: Json = serde_json::from_slice(&std::fs::read(&state).unwrap()).unwrap();
    let mut rebuilt = victim.clone();
    rebuilt.as_object_mut().unwrap().remove("keys");
    use sha2::Digest;
    for guess in ["summer2025", "hunter2", "winter2026"] {
        let mut theirs = rebuilt.clone();
        replace_strings(&mut theirs, "winter2026", guess);
        let mut key = sha2::Sha256::new();
        key.update(b"nivis saved-plan variable key v1\0");
        key.update(canonical(&theirs).as_bytes());
        let tried = hmac_hex(&key.finalize(), canonical(&Json::from(guess)).as_bytes());
        assert_ne!(
            tried, mac,
            "the password {guess:?} confirmed from the plan file"
        );
    }

    // The key is 256 random bits kept in the 0600 state, and nowhere in the plan.
    let key = victim["keys"]["savedPlan"]
        .as_str()
        .unwrap_or_else(|| panic!("a saved-plan key in the state: {victim}"));
    assert_eq!(key.len(), 64, "{key}");
    assert!(!text.contains(key), "the key in the plan file");
    assert_eq!(
        hmac_hex(&hex::decode(key).unwrap(), b"\"winter2026\""),
        mac,
        "the digest is keyed with the state's key"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&state).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "the state is private: {mode:o}");
    // Another state gets another key.
    let other = s.path("home/other.json");
    succeeded(&s.nivis(&[
        "apply",
        "--auto-approve",
        "--state",
        other.to_str().unwrap(),
    ]));
    let other: Json = serde_json::from_slice(&std::fs::read(&other).unwrap()).unwrap();
    assert_ne!(other["keys"]["savedPlan"].as_str(), Some(key));

    // A plan made by an earlier release (the derived key's digest) is refused, by name.
    let old = s.path("home/old.plan");
    std::fs::write(&old, text.replace(&digest, &format!("hmac-sha256:{mac}"))).unwrap();
    let err = refused(&s.nivis(&[
        "apply",
        "--auto-approve",
        "--state",
        state_arg,
        old.to_str().unwrap(),
    ]));
    assert!(
        err.contains("earlier Nivis") && err.contains("plan --out"),
        "{err}"
    );
    // The plan made now applies; another password is refused.
    s.set_env("NIVIS_VAR_pw", Some("winter2027"));
    let err = refused(&s.nivis(&["apply", "--auto-approve", "--state", state_arg, plan_arg]));
    assert!(err.contains("variable pw"), "{err}");
    s.set_env("NIVIS_VAR_pw", Some("winter2026"));
    succeeded(&s.nivis(&["apply", "--auto-approve", "--state", state_arg, plan_arg]));
}

// --- findings 2 and 3: who can change the code --------------------------------------------

/// A flake in `s.proj` whose provider `alpha` is a script in the project that leaves a mark
/// (`ran`, with its environment in `ran.env` and its core-file limit in `ran.limits`) and
/// then runs the fake: whoever can change the project chooses what it runs. The plan declares
/// the sensitive variable `pw` (A's label).
fn flake_with_wrapped_provider(s: &Sandbox) -> std::path::PathBuf {
    let wrapper = s.proj.join("provider-alpha");
    let mark = s.path("home/ran");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nid -u >> {m}\nenv > {m}.env\ngrep 'core file' /proc/self/limits > {m}.limits\nexec {p} \"$@\"\n",
            m = mark.display(),
            p = bin_dir().join("provider-alpha").display()
        ),
    )
    .unwrap();
    chmod(&wrapper, 0o755);
    let plan = format!(
        "ledger: let decls = {{ pw = {{ type = \"string\"; sensitive = true; default = \"none\"; }}; }}; \
         vars = lib.vars ledger decls; in \
         lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"{}\"; }}; variables = decls; \
         resources = [ (lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = vars.pw; }}) ]; inherit ledger; }}",
        wrapper.display()
    );
    Sandbox::write_flake(&s.proj, &plan);
    mark
}

/// Gives every file and directory of `dir` to `uid`:`gid`.
fn chown_tree(dir: &std::path::Path, uid: u32, gid: u32) {
    let out = std::process::Command::new("chown")
        .args(["-R", "-h", &format!("{uid}:{gid}")])
        .arg(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn root_refuses_a_checkout_another_user_owns_or_a_group_can_change() {
    let Some(adv) = Adversary::create() else {
        return;
    };
    let s = Sandbox::new();
    let mark = flake_with_wrapped_provider(&s);
    let proj = s.proj.to_str().unwrap().to_string();
    // Ours (root's), private: the plan runs, and so does the provider.
    succeeded(&s.nivis(&["plan"]));
    assert!(mark.exists(), "the provider ran");
    std::fs::remove_file(&mark).unwrap();

    // A plain-directory flake another user owns: refused before anything runs, opt-in or not.
    chown_tree(&s.proj, adv.uid, adv.gid);
    for extra in [&[][..], &["--trust-group"]] {
        let mut args = vec!["plan"];
        args.extend_from_slice(extra);
        let err = refused(&s.nivis(&args));
        assert!(
            err.contains("as root") && err.contains(&proj) && err.contains("not by you"),
            "{err}"
        );
        assert!(
            !mark.exists(),
            "the provider another user chose ran as root"
        );
    }
    chown_tree(&s.proj, 0, 0);

    // Ours, but flake.nix can be written by a group the attacker is in.
    let flake = s.proj.join("flake.nix");
    adv.share(&flake, 0o664);
    for extra in [&[][..], &["--trust-group"]] {
        let mut args = vec!["apply", "--auto-approve"];
        args.extend_from_slice(extra);
        let err = refused(&s.nivis(&args));
        assert!(
            err.contains(flake.to_str().unwrap()) && err.contains("its group"),
            "{err}"
        );
        assert!(!mark.exists(), "the provider ran");
    }
    chmod(&flake, 0o644);
    // The project directory itself (a new file there would be read by Nix).
    adv.share(&s.proj, 0o775);
    let err = refused(&s.nivis(&["plan"]));
    assert!(err.contains(&proj) && err.contains("its group"), "{err}");
    // The provider script.
    chmod(&s.proj, 0o755);
    adv.share(&s.proj.join("provider-alpha"), 0o775);
    let err = refused(&s.nivis(&["plan"]));
    assert!(err.contains("provider-alpha"), "{err}");
    chmod(&s.proj.join("provider-alpha"), 0o755);
    assert!(!mark.exists(), "the provider ran");
    succeeded(&s.nivis(&["plan"]));
    assert!(mark.exists());
}

#[test]
fn an_encrypted_secret_file_others_can_replace_is_refused() {
    let Some(adv) = Adversary::create() else {
        return;
    };
    let mut s = Sandbox::new();
    let dir = s.path("home/secrets");
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("key.txt");
    let keygen = std::process::Command::new("age-keygen")
        .arg("-o")
        .arg(&key)
        .output()
        .expect("age-keygen (scripts/install.sh installs age)");
    assert!(keygen.status.success());
    let recipient = stdout(
        &std::process::Command::new("age-keygen")
            .arg("-y")
            .arg(&key)
            .output()
            .unwrap(),
    )
    .trim()
    .to_string();
    let file = dir.join("api.age");
    let mut age = std::process::Command::new("age")
        .args(["-r", &recipient, "-o"])
        .arg(&file)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    age.stdin
        .take()
        .unwrap()
        .write_all(unique_token("nvapi").as_bytes())
        .unwrap();
    assert!(age.wait().unwrap().success());
    let b = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; config.from = vars.api; })";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ api = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; b = {b};"
        ),
        "b",
        "variables = decls;",
    );
    Sandbox::write_flake_with(
        &s.proj,
        &plan,
        &format!(
            "secretSources = {{ api = {{ age = \"{}\"; identity = \"{}\"; }}; }};",
            file.display(),
            key.display()
        ),
    );
    s.set_env("NIVIS_AGE_IDENTITY", None);
    succeeded(&s.nivis(&["plan"]));
    // The attacker's group can replace it (age does not say who encrypted a file).
    adv.share(&file, 0o664);
    let err = refused(&s.nivis(&["plan"]));
    assert!(
        err.contains(file.to_str().unwrap()) && err.contains("api"),
        "{err}"
    );
    chmod(&file, 0o644);
    adv.share(&dir, 0o775);
    let err = refused(&s.nivis(&["plan"]));
    assert!(err.contains(dir.to_str().unwrap()), "{err}");
    chmod(&dir, 0o755);
    succeeded(&s.nivis(&["plan"]));
}

// --- finding 6 of the audit: a secret as an address -----------------------------------------

#[test]
fn a_sensitive_value_as_a_resource_key_is_refused_at_evaluation_naming_its_source() {
    let mut s = Sandbox::new();
    let value = unique_token("nvkey");
    let b = "(lib.forEach [ vars.pw.value ] (k: v: lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; config.from = \"x\"; }))";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ pw = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; b = {b};"
        ),
        "b",
        "variables = decls;",
    )
    .replace("resources = [ b ]", "resources = b");
    Sandbox::write_flake(&s.proj, &plan);
    s.set_env("NIVIS_VAR_pw", Some(&value));
    for args in [
        &["plan"][..],
        &["plan", "--json"],
        &["apply", "--auto-approve"],
    ] {
        let out = s.nivis(args);
        let err = refused(&out);
        let all = format!("{}{err}", stdout(&out));
        assert!(
            all.contains("sensitive variable pw") && all.contains("beta.beta_record.B__"),
            "{all}"
        );
        assert!(!all.contains(&value), "the secret printed: {all}");
    }
    // Nothing was recorded: no address holds it anywhere (state, audit log, output).
    let listed = s.nivis(&["state", "list"]);
    assert!(!stdout(&listed).contains(&value));
    // From a secret source, the source is named.
    Sandbox::write_flake_with(
        &s.proj,
        &plan,
        "secretSources = { pw = { env = \"NV_TEST_PW\"; }; };",
    );
    s.set_env("NIVIS_VAR_pw", None);
    s.set_env("NV_TEST_PW", Some(&value));
    let err = refused(&s.nivis(&["plan"]));
    assert!(err.contains("secretSources.pw"), "{err}");
    assert!(!err.contains(&value), "{err}");
    s.hunt_for(&value, &[]);
}

// --- finding 8: what providers inherit, arguments, core files -------------------------------

#[test]
fn providers_get_no_variables_and_no_core_files_and_a_secret_in_argv_is_warned_about() {
    let mut s = Sandbox::new();
    let mark = flake_with_wrapped_provider(&s);
    let value = unique_token("nvenvpw");
    s.set_env("NIVIS_VAR_pw", Some(&value));
    let out = s.nivis(&["plan"]);
    succeeded(&out);
    assert!(
        !stderr(&out).contains("--var pw"),
        "no warning without --var: {}",
        stderr(&out)
    );
    let env = std::fs::read_to_string(format!("{}.env", mark.display())).unwrap();
    assert!(
        !env.contains("NIVIS_VAR_") && !env.contains(&value),
        "the provider inherited a variable: {env}"
    );
    let limits = std::fs::read_to_string(format!("{}.limits", mark.display())).unwrap();
    let fields: Vec<&str> = limits.split_whitespace().collect();
    assert_eq!(
        fields.get(4..6),
        Some(&["0", "0"][..]),
        "no core file for a process that holds secrets: {limits}"
    );
    // On the command line: planned, with a warning that says how else to pass it.
    s.set_env("NIVIS_VAR_pw", None);
    let arg = format!("pw={value}");
    let out = s.nivis(&["plan", "--var", &arg]);
    succeeded(&out);
    let err = stderr(&out);
    assert!(
        err.contains("--var pw") && err.contains("NIVIS_VAR_pw") && err.contains("--var-file"),
        "{err}"
    );
    assert!(!err.contains(&value), "{err}");
}

// --- finding 7: the audit log ---------------------------------------------------------------

/// The audit log's records, as JSON objects in their stored order.
fn audit_records(log: &std::path::Path) -> Vec<Json> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `records` written as the log, each hash recomputed (what anyone who can write the log
/// can do), `mac` kept as it is in each.
fn write_rehashed(log: &std::path::Path, records: &mut [Json]) {
    let mut prev: Option<String> = None;
    let mut text = String::new();
    for r in records.iter_mut() {
        let object = r.as_object_mut().unwrap();
        object.insert("prev".into(), prev.clone().map_or(Json::Null, Json::String));
        let hash = nivis::state::audit::hash_of(&Json::Object(object.clone())).unwrap();
        object.insert("hash".into(), Json::String(hash.clone()));
        if let Some(mac) = object.shift_remove("mac") {
            object.insert("mac".into(), mac);
        }
        prev = Some(hash);
        text.push_str(&serde_json::to_string(r).unwrap());
        text.push('\n');
    }
    std::fs::write(log, text).unwrap();
}

#[test]
fn the_audit_log_is_signed_with_the_states_key_and_anchored_to_its_serial() {
    let mut s = Sandbox::new();
    flake_with_password(&s);
    let state = s.path("home/s.json");
    let state_arg = state.to_str().unwrap();
    let log = s.path("home/s.json.audit");
    s.set_env("NIVIS_VAR_pw", Some("winter2026"));
    succeeded(&s.nivis(&["apply", "--auto-approve", "--state", state_arg]));
    s.set_env("NIVIS_VAR_pw", Some("winter2027"));
    succeeded(&s.nivis(&["apply", "--auto-approve", "--state", state_arg]));
    let verify = |s: &Sandbox| s.nivis(&["log", "--verify", "--state", state_arg]);
    let intact = succeeded(&verify(&s));
    assert!(
        intact.contains("2 record(s); the chain is intact"),
        "{intact}"
    );
    let original = std::fs::read(&log).unwrap();
    let records = audit_records(&log);
    assert!(
        records
            .iter()
            .all(|r| r["mac"].as_str().is_some_and(|m| m.len() == 64)),
        "each record is MAC'd: {records:?}"
    );

    // `nivis log` prints each record on lines of its own.
    let listed = succeeded(&s.nivis(&["log", "--state", state_arg]));
    assert!(!listed.contains("\\n"), "an escaped line break: {listed}");
    assert!(
        listed
            .lines()
            .any(|l| l.trim() == "create beta.beta_record.B"),
        "{listed}"
    );

    // Tail deletion: the state is ahead of the log.
    let first_line = String::from_utf8(original.clone()).unwrap();
    let first_line = first_line.lines().next().unwrap().to_string() + "\n";
    std::fs::write(&log, &first_line).unwrap();
    let err = refused(&verify(&s));
    assert!(err.contains("were deleted"), "{err}");
    // Whole deletion.
    std::fs::remove_file(&log).unwrap();
    let err = refused(&verify(&s));
    assert!(err.contains("it was deleted"), "{err}");
    // Rewritten with recomputed hashes, MACs kept: they no longer match.
    let mut rewritten = records.clone();
    rewritten[0]["user"] = Json::from("mallory");
    write_rehashed(&log, &mut rewritten);
    let err = refused(&verify(&s));
    assert!(
        err.contains("not signed with this state's audit key"),
        "{err}"
    );
    // Rewritten with recomputed hashes and no MACs at all.
    for r in rewritten.iter_mut() {
        r.as_object_mut().unwrap().shift_remove("mac");
    }
    write_rehashed(&log, &mut rewritten);
    let err = refused(&verify(&s));
    assert!(err.contains("no record is signed"), "{err}");
    // A forged `destroy` appended, chained and hashed.
    let mut forged = records.clone();
    let mut extra = records[1].clone();
    extra["seq"] = Json::from(3);
    extra["changes"] = serde_json::json!([{"address": "beta.beta_record.B", "action": "delete"}]);
    extra.as_object_mut().unwrap().shift_remove("mac");
    forged.push(extra);
    write_rehashed(&log, &mut forged);
    let err = refused(&verify(&s));
    assert!(
        err.contains("record 3") && err.contains("not signed"),
        "{err}"
    );
    // Restored: intact again.
    std::fs::write(&log, &original).unwrap();
    succeeded(&verify(&s));
}

// --- finding 9: reviews and reads need no secret ----------------------------------------------

#[test]
fn reviews_and_reads_run_no_secret_source_and_need_no_sensitive_variable() {
    let mut s = Sandbox::new();
    let mark = s.path("home/source-ran");
    let b = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; config.from = lib.str [ vars.api \":\" vars.pw ]; })";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ api = {{ type = \"string\"; sensitive = true; }}; \
             pw = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; b = {b};"
        ),
        "b",
        "variables = decls;",
    );
    // The vault: a command that leaves a mark, and (second flake) one that is not there.
    let proj = s.proj.clone();
    let vault = |command: &str| {
        Sandbox::write_flake_with(
            &proj,
            &plan,
            &format!("secretSources = {{ api = {{ command = [ {command} ]; }}; }};"),
        )
    };
    vault(&format!(
        "\"sh\" \"-c\" \"echo ran >> {}; echo nvapivalue\"",
        mark.display()
    ));
    let state = s.path("home/s.json");
    let state_arg = state.to_str().unwrap().to_string();
    s.set_env("NIVIS_VAR_pw", Some("pw-value-1"));
    succeeded(&s.nivis(&["apply", "--auto-approve", "--state", &state_arg]));
    assert!(mark.exists(), "apply reads the secret source");
    std::fs::remove_file(&mark).unwrap();
    s.git(&s.proj, &["init", "-q"]);
    s.git(&s.proj, &["add", "-A"]);
    s.git(&s.proj, &["commit", "-qm", "one"]);

    // No credential at all: the variable unset, the vault's command gone.
    s.set_env("NIVIS_VAR_pw", None);
    vault("\"/nonexistent/vault-cli\" \"read\"");
    let with_state = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--state", &state_arg]);
        s.nivis(&all)
    };
    for args in [
        &["diff"][..],
        &["why", "beta.beta_record.B"],
        &["graph"],
        &["validate"],
    ] {
        // `validate` reads no state, so it takes no --state.
        let out = match args {
            ["validate"] => s.nivis(args),
            _ => with_state(args),
        };
        let err = stderr(&out);
        assert!(out.status.success(), "{args:?}: {err}");
        assert!(err.contains("placeholders"), "{args:?} says so: {err}");
        assert!(!err.contains("vault-cli"), "{args:?} ran the source: {err}");
    }
    // Reads: nothing of the source runs.
    vault(&format!(
        "\"sh\" \"-c\" \"echo ran >> {}; echo nvapivalue\"",
        mark.display()
    ));
    for args in [&["output"][..], &["state", "list"], &["log"], &["graph"]] {
        succeeded(&with_state(args));
        assert!(!mark.exists(), "{args:?} ran the secret source");
    }
    // A plan needs the values: it runs the source (and asks for pw).
    let err = refused(&with_state(&["plan"]));
    assert!(mark.exists(), "plan reads the secret source");
    assert!(err.contains("pw"), "{err}");
}

// --- finding 4: a secret in a store path's name -----------------------------------------------

#[test]
fn a_secret_in_a_to_file_name_stays_out_of_the_shared_store() {
    let mut s = Sandbox::new();
    let value = unique_token("nvname");
    let b = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; \
             config.from = lib.compute vars.pw (p: \"${builtins.toFile \"n-${p}\" \"public\"}\"); })";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ pw = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; b = {b};"
        ),
        "b",
        "variables = decls;",
    );
    Sandbox::write_flake(&s.proj, &plan);
    s.set_env("NIVIS_VAR_pw", Some(&value));
    let out = s.nivis(&["plan"]);
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!all.contains(&value), "{all}");
    let shared: Vec<String> = std::fs::read_dir("/nix/store")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(&value))
        .collect();
    assert!(
        shared.is_empty(),
        "named after the secret in /nix/store: {shared:?}"
    );
}

// --- finding 5: a secret a derivation hides (escaped, split) and its build joins ---------------

/// A plan whose resource `alpha.alpha_token.img` takes the output of a derivation named `tag`
/// built by `script` (a Nix string expression; `pw` is the sensitive variable's value, and the
/// derivation has the attributes `a` and `b`, its first 6 characters and the rest), beside a
/// resource recording `pw` (so the run holds the secret either way).
fn flake_with_build(s: &Sandbox, tag: &str, script: &str) {
    let lets = r#"decls = { pw = { type = "string"; sensitive = true; }; };
        vars = lib.vars ledger decls; pw = vars.pw.value;
        img = derivation { name = "TAG"; builder = "/bin/sh"; system = builtins.currentSystem;
          a = builtins.substring 0 6 pw; b = builtins.substring 6 100 pw;
          args = [ "-c" (SCRIPT) ]; };
        rec_ = lib.mkResource { provider = "beta"; type = "beta_record"; name = "B"; config.from = vars.pw; };
        img_ = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "img"; config.label = lib.drv img; };"#
        .replace("TAG", tag)
        .replace("SCRIPT", script);
    let plan = Sandbox::plan_let(&lets, "rec_ img_", "variables = decls;");
    Sandbox::write_flake(&s.proj, &plan);
}

/// Names of `/nix/store` entries containing `tag`.
fn shared_store_entries(tag: &str) -> Vec<String> {
    std::fs::read_dir("/nix/store")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(tag))
        .collect()
}

/// Applies a flake whose derivation carries the secret hidden (`script` joins it in the
/// output): refused, naming the resource, and neither the `.drv` nor the output reaches
/// `/nix/store`; the secret is printed nowhere.
fn a_hidden_secret_is_refused(secret: &str, script: &str) {
    let mut s = Sandbox::new();
    let tag = unique_token("nvhidden");
    flake_with_build(&s, &tag, script);
    s.set_env("NIVIS_VAR_pw", Some(secret));
    let out = s.nivis(&["apply", "--auto-approve"]);
    let all = format!("{}{}", stdout(&out), stderr(&out));
    assert!(!out.status.success(), "{all}");
    assert!(all.contains("alpha.alpha_token.img"), "{all}");
    assert!(all.contains("holds a secret"), "{all}");
    assert!(!all.contains(secret), "{all}");
    assert_eq!(shared_store_entries(&tag), Vec::<String>::new(), "{all}");
    let listed = succeeded(&s.nivis(&["state", "list"]));
    assert!(!listed.contains("alpha.alpha_token.img"), "{listed}");
}

#[test]
fn a_build_output_joining_a_secret_split_in_two_variables_stays_out_of_the_shared_store() {
    let secret = unique_token("nvsplit");
    a_hidden_secret_is_refused(&secret, r#""echo \"$a$b\" > $out""#);
}

#[test]
fn a_build_output_of_a_shell_escaped_secret_stays_out_of_the_shared_store() {
    // A quote in the secret: the shell-escaped form `'nv'\''…'` is not the secret's text.
    let secret = format!("nv'{}", unique_token("esc"));
    a_hidden_secret_is_refused(
        &secret,
        r#""printf %s '" + builtins.replaceStrings [ "'" ] [ "'\\''" ] pw + "' > $out""#,
    );
}

#[test]
fn a_build_without_the_secret_is_realised_while_the_run_holds_one() {
    let mut s = Sandbox::new();
    let tag = unique_token("nvclean");
    flake_with_build(&s, &tag, &format!(r#""echo {tag} > $out""#));
    s.set_env("NIVIS_VAR_pw", Some(&unique_token("nvpw")));
    succeeded(&s.nivis(&["apply", "--auto-approve"]));
    let entries = shared_store_entries(&tag);
    assert!(
        entries.iter().any(|e| !e.ends_with(".drv")),
        "the output is in /nix/store: {entries:?}"
    );
}
