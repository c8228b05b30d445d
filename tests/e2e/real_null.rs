//! The round trip with the real terraform-provider-null 2.1.2 (tfplugin5, SDKv2) mixed with the
//! tfplugin6 fakes.

use crate::util::*;

fn plan(null: &std::path::Path, trigger: &str) -> String {
    format!(
        "ledger: let \
           a = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; }}; \
           n = lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"n\"; \
                 config.triggers = {{ direct = a.refAttr \"value\"; derived = lib.str [ \"via-nix-\" (a.refAttr \"id\") ]; fixed = \"{trigger}\"; }}; }}; \
           d = lib.mkData {{ provider = \"null\"; type = \"null_data_source\"; name = \"d\"; config.inputs = {{ from_null = n.refAttr \"id\"; }}; }}; \
           b = lib.mkResource {{ provider = \"beta\"; type = \"beta_record\"; name = \"b\"; config.from = d.ref [ \"outputs\" \"from_null\" ]; }}; \
         in lib.toIR {{ \
           providers = {{ alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; beta = lib.mkProvider {{ source = \"provider-beta\"; }}; \
                         null = lib.mkProvider {{ source = \"{}\"; }}; }}; \
           resources = [ a n b ]; data = [ d ]; inherit ledger; }}",
        null.display()
    )
}

#[test]
fn round_trip_with_the_real_null_provider() {
    let null = real_provider("null");
    let p = Project::new(&plan(&null, "one"));
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let o = p.outputs();
    let n = &o["null.null_resource.n"];
    assert_eq!(n["triggers"]["direct"], "alpha::0");
    assert_eq!(n["triggers"]["derived"], "via-nix-alpha-0");
    let null_id = n["id"].as_str().expect("null_resource id").to_string();
    assert!(!null_id.is_empty());
    assert_eq!(
        o["data.null.null_data_source.d"]["outputs"]["from_null"],
        null_id.as_str()
    );
    assert_eq!(
        o["beta.beta_record.b"]["endpoint"],
        format!("beta://{null_id}")
    );
    let phases = events(&out)
        .iter()
        .find(|e| e["type"] == "fixpoint")
        .unwrap()["applyPhases"]
        .clone();
    assert_eq!(phases, 2, "the Nix-derived trigger needs a second phase");

    // No changes on a second run (refresh reads every object back).
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));

    // Changing a trigger replaces the null_resource (ForceNew), and b follows its new id.
    p.set_plan(&plan(&null, "two"));
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("-/+ null.null_resource.n"),
        "{}",
        stdout(&out)
    );
    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let replaced = events(&out)
        .into_iter()
        .find(|e| e["type"] == "finished" && e["id"] == "null.null_resource.n")
        .expect("null_resource finished");
    assert_eq!(
        replaced["action"],
        serde_json::json!({"replace": {"createBeforeDestroy": false}})
    );
    // (null 2.1.2 draws ids from Go's unseeded math/rand, so a fresh process may hand out the
    // same id again; the trigger shows the new object.)
    let o = p.outputs();
    assert_eq!(o["null.null_resource.n"]["triggers"]["fixed"], "two");
    let new_id = o["null.null_resource.n"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        o["beta.beta_record.b"]["endpoint"],
        format!("beta://{new_id}")
    );
    let _ = null_id;

    // Nothing changed outside Nivis: refresh reports no drift, in either output (it used to
    // report "changed outside Nivis" with no change listed, for private data only).
    let out = p.run(&["refresh"], &[]);
    assert_success(&out);
    assert!(
        !stdout(&out).contains("changed outside"),
        "{}",
        stdout(&out)
    );
    let out = p.run(&["refresh"], &["--json"]);
    assert_success(&out);
    let drift: Vec<_> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "drift")
        .collect();
    assert!(drift.is_empty(), "{drift:?}");

    let out = p.run(&["destroy"], &["--auto-approve"]);
    assert_success(&out);
    assert_eq!(stdout(&p.state_cmd(&["state", "list"])).trim(), "");
    p.assert_no_leftover_processes();
}

#[test]
fn registry_addressed_provider_from_an_offline_mirror_verified_by_the_lock_file() {
    let null = real_provider("null");
    let mirror = tempfile::tempdir().unwrap();
    let pkg = mirror
        .path()
        .join("registry.opentofu.org/hashicorp/null/2.1.2/linux_amd64");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::copy(&null, pkg.join("terraform-provider-null_v2.1.2_x4")).unwrap();
    let body = "ledger: lib.toIR { providers.null = lib.mkProvider { source = \"hashicorp/null\"; version = \"~> 2.1\"; }; \
        resources = [ (lib.mkResource { provider = \"null\"; type = \"null_resource\"; name = \"m\"; config.triggers.a = \"1\"; }) ]; inherit ledger; }";
    let cache = tempfile::tempdir().unwrap();
    // Every network route is broken: nothing may be fetched.
    let p = Project::new(body)
        .env("HTTPS_PROXY", "http://127.0.0.1:9")
        .env("HTTP_PROXY", "http://127.0.0.1:9")
        .env("ALL_PROXY", "http://127.0.0.1:9")
        .env("NIVIS_PROVIDER_CACHE_DIR", cache.path().to_str().unwrap());
    let m = mirror.path().to_str().unwrap();
    let out = p.run(&["apply"], &["--auto-approve", "--offline", "--mirror", m]);
    assert_success(&out);
    let lock_path = p.dir.path().join(".terraform.lock.hcl");
    let lock = std::fs::read_to_string(&lock_path).expect("the lock file was written");
    assert!(
        lock.contains("provider \"registry.opentofu.org/hashicorp/null\"")
            && lock.contains("version     = \"2.1.2\"")
            && lock.contains("h1:"),
        "{lock}"
    );
    assert!(p.outputs()["null.null_resource.m"]["id"].is_string());

    // `providers list` says where it came from.
    let out = p.run(&["providers", "list"], &["--offline", "--mirror", m]);
    assert_success(&out);
    assert!(
        stdout(&out).contains("registry.opentofu.org/hashicorp/null 2.1.2 from filesystem mirror"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("FsMirror("), "{}", stdout(&out));

    // A lock hash that does not match the mirror's package is refused with both hashes.
    let tampered = lock
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("\"h1:") {
                "    \"h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\",".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&lock_path, tampered).unwrap();
    let fresh_cache = tempfile::tempdir().unwrap();
    let p = p.env(
        "NIVIS_PROVIDER_CACHE_DIR",
        fresh_cache.path().to_str().unwrap(),
    );
    let out = p.run(&["plan"], &["--offline", "--mirror", m]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("h1:AAAA") && err.contains("registry.opentofu.org/hashicorp/null"),
        "{err}"
    );

    // With an empty mirror and no cache, offline, the missing provider is named.
    let empty = tempfile::tempdir().unwrap();
    let nocache = tempfile::tempdir().unwrap();
    let out = p
        .env("NIVIS_PROVIDER_CACHE_DIR", nocache.path().to_str().unwrap())
        .run(
            &["plan"],
            &["--offline", "--mirror", empty.path().to_str().unwrap()],
        );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("hashicorp/null"), "{}", stderr(&out));
}

/// ImportResourceState over tfplugin5 with the real provider. null 2.1.2 (the one pinned
/// release) has no importer for null_resource: both `nivis import` and a declared `importId`
/// must report the provider's refusal with the address and id, and record nothing.
#[test]
fn importing_a_null_resource_reports_the_providers_refusal() {
    let null = real_provider("null");
    let plan = |import: &str| {
        format!(
            "ledger: lib.toIR {{ providers.null = lib.mkProvider {{ source = \"{}\"; }}; \
               resources = [ (lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"n\"; {import} }}) ]; \
               inherit ledger; }}",
            null.display()
        )
    };
    let p = Project::new(&plan(""));
    let refused = "cannot import \"4427513034128331524\" into null.null_resource.n: the provider refused: error: resource null_resource doesn't support import; nothing was recorded";
    let out = p.run(
        &["import", "null.null_resource.n", "4427513034128331524"],
        &[],
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains(refused), "{}", stderr(&out));
    p.set_plan(&plan("importId = \"4427513034128331524\";"));
    let out = p.run(&["apply"], &["--auto-approve"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains(refused), "{}", stderr(&out));
    let out = p.state_cmd(&["state", "list"]);
    assert_eq!(
        stdout(&out).trim(),
        "",
        "a refused import recorded something"
    );
}

/// Plan truth with the real provider (issue 15's reported cases): a replaced null_resource's
/// TF→TF readers (a null_resource and a data source, then what reads the data source) are
/// planned in phase 1 with "(known after apply)" and the replacement their ForceNew triggers
/// force; what Nix computes from its id is shown deferred. Apply then does exactly that, each
/// resource once, and its log shows the attribute changes of both phases.
#[test]
fn a_replacement_is_planned_through_its_readers_and_applied_once_each() {
    let null = real_provider("null");
    let plan = |seed: &str| {
        format!(
            "ledger: let \
               z = lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"z\"; }}; \
               a = lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"a\"; config.triggers.seed = \"{seed}\"; dependsOn = [ z ]; }}; \
               c = lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"c\"; config.triggers.a = a.refAttr \"id\"; }}; \
               d = lib.mkData {{ provider = \"null\"; type = \"null_data_source\"; name = \"d\"; config.inputs.a = a.refAttr \"id\"; }}; \
               r = lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"r\"; config.triggers.d = d.ref [ \"outputs\" \"a\" ]; }}; \
               b = lib.mkResource {{ provider = \"null\"; type = \"null_resource\"; name = \"b\"; config.triggers.a = lib.str [ \"via-nix-\" (a.refAttr \"id\") ]; }}; \
             in lib.toIR {{ providers.null = lib.mkProvider {{ source = \"{}\"; }}; \
               resources = [ z a c r b ]; data = [ d ]; inherit ledger; }}",
            null.display()
        )
    };
    // null 2.1.2 draws ids from Go's unseeded math/rand: a fresh provider process hands out the
    // same sequence. z takes the first id of the first run, so a's replacement (the first
    // create of the second run) gets an id a did not have.
    let p = Project::new(&plan("one"));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));

    p.set_plan(&plan("two"));
    let out = p.run(&["plan"], &["--json"]);
    assert_success(&out);
    let planned = actions(&out, "planned");
    let class = |a: &serde_json::Value| {
        a.as_str()
            .map(str::to_string)
            .unwrap_or_else(|| "replace".into())
    };
    let planned: Vec<(String, String)> = planned
        .iter()
        .map(|(id, a)| (id.clone(), class(a)))
        .collect();
    for id in [
        "null.null_resource.a",
        "null.null_resource.c",
        "null.null_resource.r",
    ] {
        assert!(
            planned.contains(&(id.to_string(), "replace".to_string())),
            "{id} not planned as a replacement: {planned:?}"
        );
    }
    let deferred: Vec<String> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "deferred")
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(deferred, ["null.null_resource.b"]);

    let out = p.run(&["apply"], &["--auto-approve"]);
    assert_success(&out);
    let log = stdout(&out);
    let applied: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains(": replaced in") || l.contains(": updated in") || l.contains(": created in")
        })
        .collect();
    assert_eq!(applied.len(), 4, "a, c, r and b once each:\n{log}");
    let phase2 = log
        .split("Phase 2")
        .nth(1)
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        phase2
            .lines()
            .any(|l| l.contains("triggers") && l.contains("via-nix-") && l.contains(" -> ")),
        "phase 2's attribute changes are in the log:\n{log}"
    );
    let out = p.run(&["plan"], &[]);
    assert!(stdout(&out).contains("No changes"), "{}", stdout(&out));
}
