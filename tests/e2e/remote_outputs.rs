//! Reading another project's outputs (issue 48, DESIGN §98): `nivis.remoteStates` beside the
//! plan and `lib.remoteState ledger NAME` in it, from a local state (found by the other
//! project's declared name) and from an encrypted S3 state on a real SeaweedFS. The other
//! state is read without its lock, its lineage and serial are shown, a changed output there is a
//! planned change here, and its secrets stay secret.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use super::remote_secrets::{backend_attrs, ok};
use super::sandbox::*;
use super::weed::Weed;
use crate::util::*;

/// The other project: one token whose label is the variable `label`.
fn network_plan() -> String {
    Sandbox::plan_let(
        "decls = { label = { type = \"string\"; default = \"one\"; }; }; v = lib.vars ledger decls;",
        "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"a\"; config.label = v.label; })",
        "variables = decls;",
    )
}

/// The reader: `b` labelled with the other project's `value`, `c` with a string built from its
/// sensitive `secret`, and the remote serial as a consumer.
fn app_plan() -> String {
    Sandbox::plan_let(
        "net = lib.remoteState ledger \"network\"; a = net.outputs.\"alpha.alpha_token.a\";",
        "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"b\"; config.label = a.value; }) \
         (lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"c\"; config.label = lib.str [ \"from-\" a.secret ]; })",
        "consumers.networkSerial = net.serial;",
    )
}

/// The default state of the project declaring `nivis.project = NAME` in the sandbox.
fn declared_state(s: &Sandbox, name: &str) -> PathBuf {
    let projects = s.path("state/nivis/projects");
    let dir = std::fs::read_dir(&projects)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{name}-"))
        })
        .unwrap_or_else(|| panic!("no state directory of {name} in {}", projects.display()));
    dir.join("nivis.state.json")
}

fn state_of(path: &Path) -> Json {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The `remote-state` events and the planned rows (id -> action) of a `--json` plan.
fn remote_and_planned(out: &std::process::Output) -> (Vec<Json>, Vec<(String, String)>) {
    let all = events(out);
    let remote = all
        .iter()
        .filter(|e| e["type"] == "remote-state")
        .cloned()
        .collect();
    let planned = all
        .iter()
        .filter(|e| e["type"] == "planned")
        .map(|e| {
            (
                e["id"].as_str().unwrap_or_default().to_string(),
                e["action"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (remote, planned)
}

#[test]
fn a_plan_reads_another_projects_local_outputs_without_its_lock_and_plans_their_changes() {
    let s = Sandbox::new();
    let network = s.path("network");
    Sandbox::write_flake_with(&network, &network_plan(), "project = \"network\";");
    ok(&s.nivis_in(&network, &["apply", "--auto-approve"]));
    let net_state = declared_state(&s, "network");
    let before = state_of(&net_state);
    let value = before["resources"]["alpha.alpha_token.a"]["attributes"]["value"]
        .as_str()
        .unwrap()
        .to_string();

    Sandbox::write_flake_with(
        &s.proj,
        &app_plan(),
        "project = \"app\"; remoteStates.network.backend = { type = \"local\"; project = \"network\"; };",
    );
    // The other project's lock held throughout (as by an apply running there): a read takes
    // none, so it neither waits nor fails.
    let lock_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(net_state.with_file_name("nivis.state.json.lock"))
        .expect("the other project's lock file exists after its apply");
    fs2::FileExt::try_lock_exclusive(&lock_file).expect("take the other project's lock");
    let out = ok(&s.nivis(&["plan"]));
    let header = format!(
        "Reading remote state network: {} (lineage {}, serial {})",
        net_state.display(),
        before["lineage"].as_str().unwrap(),
        before["serial"]
    );
    assert!(out.contains(&header), "{out}");
    assert!(out.contains("alpha.alpha_token.b"), "{out}");
    assert!(
        out.contains(&value),
        "the remote value is known in the plan: {out}"
    );
    ok(&s.nivis(&["apply", "--auto-approve"]));
    fs2::FileExt::unlock(&lock_file).unwrap();

    let app = state_of(&declared_state(&s, "app"));
    let b = &app["resources"]["alpha.alpha_token.b"];
    assert_eq!(b["attributes"]["label"], value.as_str());
    // Built from the other project's sensitive output: sensitive here too.
    let c = &app["resources"]["alpha.alpha_token.c"];
    assert!(
        c["sensitivePaths"].to_string().contains("label"),
        "{}",
        c["sensitivePaths"]
    );
    assert!(c["attributes"]["label"]
        .as_str()
        .unwrap()
        .starts_with(&format!("from-{}", s.secret)));
    let shown = ok(&s.nivis(&["output", "networkSerial"]));
    assert_eq!(shown.trim(), before["serial"].to_string());

    // The other project changes its output: the reader's plan changes b, and shows the new serial.
    ok(&s.nivis_in(&network, &["apply", "--auto-approve", "--var", "label=two"]));
    let after = state_of(&net_state);
    assert_ne!(after["serial"], before["serial"]);
    let out = s.nivis(&["plan", "--json"]);
    assert_success(&out);
    let (remote, planned) = remote_and_planned(&out);
    assert_eq!(remote.len(), 1, "{remote:?}");
    assert_eq!(remote[0]["name"], "network");
    assert_eq!(remote[0]["lineage"], before["lineage"]);
    assert_eq!(remote[0]["serial"], after["serial"]);
    assert!(
        planned.contains(&("alpha.alpha_token.b".to_string(), "update".to_string())),
        "{planned:?}"
    );
    // Nothing printed holds a secret of either project.
    s.hunt(&[]);
}

#[test]
fn a_plan_reads_another_projects_outputs_from_an_encrypted_s3_state() {
    let weed = Weed::start();
    let mut s = Sandbox::new();
    for (k, v) in weed.credentials() {
        s.set_env(&k, Some(&v));
    }
    use base64::Engine as _;
    let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>());
    s.set_env("NIVIS_TEST_STATE_KEY", Some(&key));
    let network = s.path("network");
    let backend = backend_attrs(&weed, "network/nivis.state", true);
    Sandbox::write_flake_with(&network, &network_plan(), &backend);
    ok(&s.nivis_in(&network, &["apply", "--auto-approve"]));

    // The reader declares the same backend fields as the other project's `nivis.backend`.
    let remote = backend.replacen("backend = ", "remoteStates.network.backend = ", 1);
    Sandbox::write_flake_with(
        &s.proj,
        &app_plan(),
        &format!("project = \"app\"; {remote}"),
    );
    let out = ok(&s.nivis(&["apply", "--auto-approve"]));
    assert!(
        out.contains(&format!(
            "Reading remote state network: s3://{}/network/nivis.state",
            super::weed::BUCKET
        )),
        "{out}"
    );
    let app = state_of(&declared_state(&s, "app"));
    assert!(
        app["resources"]["alpha.alpha_token.b"]["attributes"]["label"]
            .as_str()
            .unwrap()
            .starts_with("alpha:one:")
    );

    // The other project's output changes: an update of b is planned here.
    ok(&s.nivis_in(&network, &["apply", "--auto-approve", "--var", "label=two"]));
    let out = s.nivis(&["plan", "--json"]);
    assert_success(&out);
    let (_, planned) = remote_and_planned(&out);
    assert!(
        planned.contains(&("alpha.alpha_token.b".to_string(), "update".to_string())),
        "{planned:?}"
    );

    // Without the other state's key, the read fails naming the remote state.
    s.set_env("NIVIS_TEST_STATE_KEY", None);
    let out = s.nivis(&["plan"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("remote state network (s3://")
            && err.contains("NIVIS_TEST_STATE_KEY is not set"),
        "{err}"
    );
    s.hunt(&[]);
}

#[test]
fn a_remote_state_never_applied_or_undeclared_is_refused_with_what_to_do() {
    let s = Sandbox::new();
    Sandbox::write_flake_with(
        &s.proj,
        &app_plan(),
        "remoteStates.network.backend = { type = \"local\"; project = \"network\"; };",
    );
    let out = s.nivis(&["plan"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("remote state network"), "{err}");
    assert!(err.contains("holds no state"), "{err}");
    assert!(err.contains("Apply that project first"), "{err}");

    Sandbox::write_flake(&s.proj, &app_plan());
    let out = s.nivis(&["plan"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("no remote state 'network' in the ledger")
            && err.contains("nivis.remoteStates.network"),
        "{err}"
    );
}
