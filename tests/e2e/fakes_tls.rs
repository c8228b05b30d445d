//! The fake providers speak go-plugin's automatic mutual TLS as a real provider does (DESIGN
//! §104): Terraform 1.0.3, which always asks for it, installs a fake from a filesystem mirror
//! (`terraform init`) and applies through it; Nivis reaches it over mutual TLS too, and over
//! plaintext when the fake is told to predate AutoMTLS (`NIVIS_FAKE_PLAINTEXT`).

use std::process::{Command, Output};

use serde_json::Value as Json;

use crate::util::*;

/// `terraform ARGS` in `dir`, with only the CLI configuration in `dir` (a filesystem mirror:
/// no network) and none of the caller's `TF_*` settings (`TF_DISABLE_PLUGIN_TLS` among them).
fn terraform(dir: &std::path::Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(real_provider("terraform"));
    cmd.args(args).current_dir(dir.join("work"));
    for (k, _) in std::env::vars() {
        if k.starts_with("TF_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("TF_CLI_CONFIG_FILE", dir.join("terraform.tfrc"))
        .env("CHECKPOINT_DISABLE", "1")
        .env("TF_IN_AUTOMATION", "1")
        .env("HOME", dir)
        .output()
        .expect("run terraform")
}

#[test]
fn terraform_installs_a_fake_from_a_mirror_and_applies_through_its_mutual_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let target = dir.join("mirror/registry.terraform.io/nivis/alpha/0.0.1/linux_amd64");
    std::fs::create_dir_all(&target).unwrap();
    std::fs::copy(
        bin_dir().join("provider-alpha"),
        target.join("terraform-provider-alpha_v0.0.1"),
    )
    .unwrap();
    std::fs::write(
        dir.join("terraform.tfrc"),
        format!(
            "provider_installation {{\n  filesystem_mirror {{\n    path = {:?}\n  }}\n}}\n",
            dir.join("mirror").display().to_string()
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.join("work")).unwrap();
    let config = serde_json::json!({
        "terraform": {"required_providers": {"alpha": {"source": "nivis/alpha", "version": "0.0.1"}}},
        "resource": {"alpha_token": {
            "a": {"label": "first"},
            "b": {"label": "after-${alpha_token.a.id}"},
        }},
    });
    std::fs::write(dir.join("work/main.tf.json"), config.to_string()).unwrap();
    let init = terraform(dir, &["init", "-input=false", "-no-color"]);
    assert_success(&init);
    let apply = terraform(
        dir,
        &["apply", "-auto-approve", "-input=false", "-no-color"],
    );
    assert_success(&apply);
    assert!(
        stdout(&apply).contains("Resources: 2 added"),
        "{}",
        stdout(&apply)
    );
    let state: Json =
        serde_json::from_slice(&std::fs::read(dir.join("work/terraform.tfstate")).unwrap())
            .unwrap();
    let attrs = |name: &str| {
        (state["resources"].as_array().unwrap().iter())
            .find(|r| r["name"] == name)
            .map(|r| r["instances"][0]["attributes"].clone())
            .unwrap_or_else(|| panic!("no {name}: {state}"))
    };
    let a_id = attrs("a")["id"].as_str().unwrap().to_string();
    assert_eq!(attrs("b")["label"], format!("after-{a_id}"), "{state}");
    // And back out through the same session setup.
    let destroy = terraform(
        dir,
        &["destroy", "-auto-approve", "-input=false", "-no-color"],
    );
    assert_success(&destroy);
}

const TWO_TOKENS: &str = r#"ledger:
  let
    a = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "a"; config.label = "first"; };
    b = lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "b";
      config.label = lib.str [ "after-" (a.refAttr "id") ]; };
  in
  lib.toIR { providers.alpha = lib.mkProvider { source = "provider-alpha"; }; resources = [ a b ]; inherit ledger; }"#;

#[test]
fn nivis_reaches_a_fake_over_mutual_tls_and_over_plaintext_when_it_predates_it() {
    let p = Project::new(TWO_TOKENS);
    let out = p.run(&["apply"], &["--auto-approve", "-vv"]);
    assert_success(&out);
    let log = stderr(&out);
    assert!(log.contains("alpha: mutual TLS"), "{log}");
    assert!(!log.contains("alpha: plaintext"), "{log}");
    let o = p.outputs();
    let a_id = o["alpha.alpha_token.a"]["id"].as_str().unwrap();
    assert_eq!(o["alpha.alpha_token.b"]["label"], format!("after-{a_id}"));
    p.assert_no_leftover_processes();

    let p = Project::new(TWO_TOKENS).env("NIVIS_FAKE_PLAINTEXT", "1");
    let out = p.run(&["apply"], &["--auto-approve", "-vv"]);
    assert_success(&out);
    let log = stderr(&out);
    assert!(log.contains("alpha: plaintext"), "{log}");
    assert!(!log.contains("alpha: mutual TLS"), "{log}");
}
