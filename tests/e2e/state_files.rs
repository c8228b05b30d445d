//! The state's files against surprises: a symlinked state path, a file written by a newer
//! Nivis, and `force-unlock` aimed at a holder that is still running.

use serde_json::Value as Json;

use crate::util::*;

/// Alpha tokens named and labelled by `labels`.
pub(super) fn tokens(labels: &[&str]) -> String {
    let resources: Vec<String> = labels
        .iter()
        .map(|l| {
            format!(
                "(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{l}\"; config.label = \"{l}\"; }})"
            )
        })
        .collect();
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; resources = [ {} ]; inherit ledger; }}",
        resources.join(" ")
    )
}

#[test]
fn a_symlinked_state_path_is_followed_never_replaced() {
    let p = Project::new(&tokens(&["a", "b"])).with_object_log();
    let real_dir = p.dir.path().join("real");
    std::fs::create_dir(&real_dir).unwrap();
    // A link to a state that exists, and a dangling one to a state not yet written.
    let link = p.dir.path().join("link.json");
    std::os::unix::fs::symlink("real/state.json", &link).unwrap();
    let p = Project { state: link, ..p };
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let target = real_dir.join("state.json");
    assert!(
        std::fs::symlink_metadata(&p.state)
            .unwrap()
            .file_type()
            .is_symlink(),
        "the state path is still a symlink"
    );
    let on_disk: Json = serde_json::from_slice(&std::fs::read(&target).unwrap()).unwrap();
    assert!(
        on_disk["resources"]["alpha.alpha_token.a"].is_object(),
        "the target holds the state: {on_disk}"
    );
    p.assert_remote_matches_state(&[]);

    // A second run reads the state through the link: nothing to do.
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    assert!(
        !events(&out)
            .iter()
            .any(|e| e["type"] == "finished" && e["action"] == "create"),
        "{}",
        stdout(&out)
    );
    assert_eq!(p.objects().created(), 2);
}

#[test]
fn state_written_by_a_newer_nivis_keeps_its_fields_or_is_refused_by_version() {
    let p = Project::new(&tokens(&["keep", "change"]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let mut state = p.state_json();
    assert!(
        state["schemaVersion"].is_u64(),
        "the format version is the camelCase schemaVersion: {state}"
    );
    // A newer release of the same major version added fields at every level.
    state["futureTop"] = serde_json::json!({"added": 1});
    state["resources"]["alpha.alpha_token.keep"]["futureField"] = Json::from("keep me");
    state["resources"]["alpha.alpha_token.change"]["futureField"] = Json::from("me too");
    std::fs::write(&p.state, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    p.set_plan(
        &tokens(&["keep", "change"])
            .replace("config.label = \"change\"", "config.label = \"changed\""),
    );
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let after = p.state_json();
    assert_eq!(
        after["resources"]["alpha.alpha_token.change"]["attributes"]["label"],
        "changed"
    );
    assert_eq!(
        after["futureTop"],
        serde_json::json!({"added": 1}),
        "{after}"
    );
    assert_eq!(
        after["resources"]["alpha.alpha_token.keep"]["futureField"],
        "keep me"
    );
    assert_eq!(
        after["resources"]["alpha.alpha_token.change"]["futureField"],
        "me too"
    );

    // A newer major version is refused, naming it; the file is left alone.
    let mut newer = after.clone();
    newer["schemaVersion"] = Json::from(4);
    let text = serde_json::to_vec_pretty(&newer).unwrap();
    std::fs::write(&p.state, &text).unwrap();
    for verb in [&["plan"][..], &["apply", "--auto-approve"][..]] {
        let out = p.run(verb, &[]);
        assert_eq!(out.status.code(), Some(1), "{verb:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("version 4"),
            "{verb:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read(&p.state).unwrap(), text, "left untouched");
}

#[test]
fn state_from_the_previous_release_keeps_loading() {
    let p = Project::new(&tokens(&["old"]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    // The previous release wrote `schema_version: 1` (snake_case) and journal lines without a
    // version.
    let mut state = p.state_json();
    let resources = state["resources"].clone();
    let legacy = serde_json::json!({
        "schema_version": 1,
        "serial": state["serial"],
        "lineage": state["lineage"],
        "resources": resources,
    });
    state = legacy;
    std::fs::write(&p.state, serde_json::to_vec_pretty(&state).unwrap()).unwrap();
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));
    p.set_plan(&tokens(&["old", "new"]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let after = p.state_json();
    assert_eq!(after["resources"].as_object().unwrap().len(), 2);
    assert!(after.get("schema_version").is_none(), "{after}");
}

/// Extracts the lock id from a "locked" message (`lock id ID`).
fn lock_id(message: &str) -> String {
    let rest = message
        .split("lock id ")
        .nth(1)
        .unwrap_or_else(|| panic!("no lock id in: {message}"));
    rest.chars()
        .take_while(|c| c.is_ascii_hexdigit() || *c == '-')
        .collect()
}

#[test]
fn force_unlock_needs_the_lock_id_and_refuses_a_live_holder() {
    let p = Project::new(&tokens(&["s0", "s1", "s2"]))
        .env("NIVIS_FAKE_SLOW_MS", "1500")
        .with_object_log();
    let mut first = p.spawn_apply(&[]);
    p.wait_for_lock();
    let lock = p.state.with_extension("json.lock");
    let refused = p.run(&["apply"], &["--auto-approve"]);
    assert!(!refused.status.success());
    let id = lock_id(&stderr(&refused));
    assert!(
        stderr(&refused).contains(&format!("nivis force-unlock {id}")),
        "{}",
        stderr(&refused)
    );

    // The holder is alive on this host: refused, the lock stays.
    let out = p.state_cmd(&["force-unlock", &id]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("still running")
            && stderr(&out).contains(&format!("pid {}", first.id())),
        "{}",
        stderr(&out)
    );
    assert!(lock.exists());
    // A wrong id is refused too, naming the right one.
    let out = p.state_cmd(&["force-unlock", "0000-not-the-id"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(&id), "{}", stderr(&out));
    // No id at all is a usage error.
    assert_eq!(p.state_cmd(&["force-unlock"]).status.code(), Some(1));

    assert!(first.wait().unwrap().success());
    let out = p.state_cmd(&["force-unlock", &id]);
    assert_success(&out);
    assert!(stdout(&out).contains("not locked"), "{}", stdout(&out));
    assert!(!stdout(&out).contains("NotLocked"), "{}", stdout(&out));
    p.assert_remote_matches_state(&[]);
    assert_eq!(p.objects().created(), 3, "no second apply ran alongside");
}

#[test]
fn state_pull_and_push_work_on_the_local_file_as_on_s3() {
    let p = Project::new(&tokens(&["a"]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let pulled = p.state_cmd(&["state", "pull", "--out", "-"]);
    assert_success(&pulled);
    // To a file: the same state, private whatever the umask.
    let path = p.dir.path().join("pulled.json");
    let file = path.display().to_string();
    assert_success(&p.state_cmd(&["state", "pull", "--out", &file]));
    assert_eq!(std::fs::read(&path).unwrap(), pulled.stdout);
    let perms = std::fs::metadata(&path).unwrap().permissions();
    let mode = std::os::unix::fs::PermissionsExt::mode(&perms) & 0o777;
    assert_eq!(mode, 0o600);
    let ids = || stdout(&p.state_cmd(&["state", "list"]));

    // The state moves on: the pulled copy is older, and pushing it is refused.
    p.set_plan(&tokens(&["a", "b"]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let stale = p.state_cmd(&["state", "push", &file]);
    assert_eq!(stale.status.code(), Some(1), "{}", stderr(&stale));
    assert!(stderr(&stale).contains("older"), "{}", stderr(&stale));
    assert_eq!(ids().lines().count(), 2, "nothing changed");

    // Forced, it would drop `b`'s record: --force alone is refused, naming the record and the
    // count to confirm; a wrong count too; nothing is written.
    let unconfirmed = p.state_cmd(&["state", "push", &file, "--force"]);
    assert_eq!(
        unconfirmed.status.code(),
        Some(1),
        "{}",
        stdout(&unconfirmed)
    );
    let err = stderr(&unconfirmed);
    assert!(
        err.contains("drops 1 record(s)")
            && err.contains("alpha.alpha_token.b")
            && err.contains("--drop-records 1")
            && err.contains("Nothing was changed"),
        "{err}"
    );
    let miscounted = p.state_cmd(&["state", "push", &file, "--force", "--drop-records", "2"]);
    assert_eq!(miscounted.status.code(), Some(1), "{}", stdout(&miscounted));
    assert!(
        stderr(&miscounted).contains("--drop-records 2 was given"),
        "{}",
        stderr(&miscounted)
    );
    assert_eq!(ids().lines().count(), 2, "nothing changed");
    // Confirmed, it replaces the state, and the next plan sees `b` as missing.
    assert_success(&p.state_cmd(&["state", "push", &file, "--force", "--drop-records", "1"]));
    assert_eq!(ids(), "alpha.alpha_token.a\n");
    let after: Json =
        serde_json::from_slice(&p.state_cmd(&["state", "pull", "--out", "-"]).stdout).unwrap();
    let before: Json = serde_json::from_slice(&pulled.stdout).unwrap();
    assert_eq!(after["lineage"], before["lineage"]);
    assert!(
        after["serial"].as_u64() > before["serial"].as_u64(),
        "{after}"
    );
}

/// The resource keys schemaVersion 2 spelled in snake_case, with their names since version 3.
const RENAMED_IN_3: [(&str, &str); 5] = [
    ("providerSource", "provider_source"),
    ("typeName", "type_name"),
    ("schemaVersion", "schema_version"),
    ("sensitivePaths", "sensitive_paths"),
    ("createBeforeDestroy", "create_before_destroy"),
];

/// `state` (a version 3 snapshot) as schemaVersion 2 wrote it: snake_case resource keys.
fn as_version_2(state: &Json) -> Json {
    let mut old = state.clone();
    old["schemaVersion"] = Json::from(2);
    for resource in old["resources"].as_object_mut().unwrap().values_mut() {
        let resource = resource.as_object_mut().unwrap();
        for (new, snake) in RENAMED_IN_3 {
            let value = resource.remove(new).expect(new);
            resource.insert(snake.into(), value);
        }
        for deposed in resource["deposed"].as_array_mut().unwrap() {
            let deposed = deposed.as_object_mut().unwrap();
            let value = deposed.remove("schemaVersion").unwrap();
            deposed.insert("schema_version".into(), value);
        }
    }
    old
}

fn token_plan(resources: &[&str]) -> String {
    format!(
        "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; resources = [ {} ]; inherit ledger; }}",
        resources.join(" ")
    )
}

const OLD: &str = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"old\"; config.label = \"old\"; })";
const USER: &str = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"user\"; config.label = \"u\"; dependsOn = [ \"alpha.alpha_token.old\" ]; })";
const NEW: &str = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"new\"; config.label = \"new\"; })";

#[test]
fn a_version_2_state_is_read_and_written_back_as_version_3() {
    let p = Project::new(&token_plan(&[OLD, USER]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let v3 = p.state_json();
    assert_eq!(v3["schemaVersion"], 3, "{v3}");
    let user = &v3["resources"]["alpha.alpha_token.user"];
    for key in [
        "providerSource",
        "typeName",
        "sensitivePaths",
        "createBeforeDestroy",
    ] {
        assert!(user.get(key).is_some(), "{key} in {user}");
    }
    assert_eq!(
        user["dependencies"],
        serde_json::json!(["alpha.alpha_token.old"])
    );
    assert_eq!(
        user["sensitivePaths"],
        serde_json::json!([["secret"]]),
        "{user}"
    );
    assert!(user["private"].is_string(), "{user}");

    // The same state as version 2 wrote it, with fields a later version-2 release might add.
    let mut v2 = as_version_2(&v3);
    v2["addedIn2"] = serde_json::json!({"n": 12345678901234567890123u128});
    v2["resources"]["alpha.alpha_token.old"]["added_in_2"] = "kept as spelled".into();
    let v2_text = serde_json::to_vec_pretty(&v2).unwrap();
    std::fs::write(&p.state, &v2_text).unwrap();
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));
    // The provider checks it is handed the private bytes the state recorded (the fake refuses
    // a refresh without them): the renamed records reached it whole.
    let mut expected = v3["resources"].clone();
    expected["alpha.alpha_token.old"]["added_in_2"] = "kept as spelled".into();
    let pulled = p.state_cmd(&["state", "pull", "--out", "-"]);
    assert_success(&pulled);
    let pulled: Json = serde_json::from_slice(&pulled.stdout).unwrap();
    assert_eq!(pulled["schemaVersion"], 3, "state pull prints version 3");
    assert_eq!(pulled["resources"], expected);
    assert_eq!(pulled["addedIn2"], v2["addedIn2"]);

    // The next run that writes migrates the file: version 3, camelCase, every record intact.
    p.set_plan(&token_plan(&[OLD, USER, NEW]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let after = p.state_json();
    assert_eq!(after["schemaVersion"], 3, "{after}");
    assert_eq!(
        after["addedIn2"], v2["addedIn2"],
        "unknown top field carried"
    );
    assert_eq!(after["lineage"], v3["lineage"]);
    for id in ["alpha.alpha_token.old", "alpha.alpha_token.user"] {
        assert_eq!(after["resources"][id], expected[id], "{id}");
    }
    assert!(after["resources"].get("alpha.alpha_token.new").is_some());
    let text = std::fs::read_to_string(&p.state).unwrap();
    for snake in [
        "provider_source",
        "type_name",
        "schema_version",
        "sensitive_paths",
    ] {
        assert!(!text.contains(snake), "{snake} left in {text}");
    }

    // `state push` of a version 2 file: accepted, stored as version 3.
    let file = p.dir.path().join("pushed-v2.json");
    std::fs::write(&file, serde_json::to_vec(&as_version_2(&after)).unwrap()).unwrap();
    assert_success(&p.state_cmd(&["state", "push", file.to_str().unwrap()]));
    let pushed = p.state_json();
    assert_eq!(pushed["schemaVersion"], 3, "{pushed}");
    assert_eq!(pushed["resources"], after["resources"]);
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));
}
