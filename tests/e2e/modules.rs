//! Infrastructure as modules through the CLI: a project split into three modules evaluates to
//! the same IR as its single-file form and applies with the fakes and the real null provider;
//! type errors and failed assertions name the option path and the file.

use std::path::Path;

use serde_json::Value as Json;

use crate::util::*;

/// network.nix, database.nix and app.nix in `dir`; the real null provider at `null`.
fn write_modules(dir: &Path, null: &Path, app_extra: &str) {
    let network = format!(
        r#"{{ lib, config, ... }}:
let t = lib.modules.types; in
{{
  options.network = {{
    name = lib.modules.mkOption {{ type = t.str; description = "the network's label"; }};
    zone = lib.modules.mkOption {{ type = t.enum [ "a" "b" ]; default = "a"; }};
    token = lib.modules.mkOption {{ type = t.any; description = "the network's token (read by other modules)"; }};
  }};
  config = {{
    network.name = lib.modules.mkDefault "net-default";
    network.token = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "net"; config.label = config.network.name; }};
    nivis.providers.alpha = lib.mkProvider {{ source = "provider-alpha"; }};
    nivis.providers.null = lib.mkProvider {{ source = "{}"; }};
    nivis.resources = [ config.network.token ];
  }};
}}"#,
        null.display()
    );
    let database = r#"{ lib, config, ... }:
{
  options.database.enable = lib.modules.mkOption { type = lib.modules.types.bool; default = true; };
  config = lib.modules.mkIf config.database.enable {
    nivis.resources = [
      (lib.mkResource { provider = "alpha"; type = "alpha_token"; name = "db";
        config = { label = "db"; keeper = lib.str [ "on-" (config.network.token.refAttr "value") ]; }; })
      (lib.mkResource { provider = "null"; type = "null_resource"; name = "db_ready";
        config.triggers.net = config.network.token.refAttr "id"; })
    ];
    assertions = [ { assertion = config.network.zone == "a"; message = "the database runs in zone a only"; } ];
  };
}"#;
    let app = format!(
        r#"{{ lib, ... }}:
{{
  imports = [ ./network.nix ./database.nix ];
  network.name = "prod-net";
  {app_extra}
}}"#
    );
    std::fs::write(dir.join("network.nix"), network).unwrap();
    std::fs::write(dir.join("database.nix"), database).unwrap();
    std::fs::write(dir.join("app.nix"), app).unwrap();
}

/// The same resources as one plain list.
fn single_file(null: &Path) -> String {
    format!(
        r#"ledger:
let
  net = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "net"; config.label = "prod-net"; }};
in
lib.toIR {{
  providers.alpha = lib.mkProvider {{ source = "provider-alpha"; }};
  providers.null = lib.mkProvider {{ source = "{}"; }};
  resources = [
    net
    (lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "db";
      config = {{ label = "db"; keeper = lib.str [ "on-" (net.refAttr "value") ]; }}; }})
    (lib.mkResource {{ provider = "null"; type = "null_resource"; name = "db_ready";
      config.triggers.net = net.refAttr "id"; }})
  ];
  inherit ledger;
}}"#,
        null.display()
    )
}

const MODULE_PLAN: &str = "ledger: lib.modules.toIR { modules = [ ./app.nix ]; inherit ledger; }";

#[test]
fn three_modules_evaluate_to_the_ir_of_their_single_file_form_and_apply() {
    let null = real_provider("null");
    let single = Project::new(&single_file(&null));
    let golden: Json = single.eval_ir();
    let p = Project::new(MODULE_PLAN);
    write_modules(p.dir.path(), &null, "");
    assert_eq!(p.eval_ir(), golden);

    let out = p.run(&["apply"], &["--auto-approve", "--json"]);
    assert_success(&out);
    let o = p.outputs();
    assert_eq!(o["alpha.alpha_token.net"]["label"], "prod-net");
    let keeper = format!(
        "on-{}",
        o["alpha.alpha_token.net"]["value"].as_str().unwrap()
    );
    assert_eq!(o["alpha.alpha_token.db"]["keeper"], keeper);
    assert_eq!(
        o["null.null_resource.db_ready"]["triggers"]["net"],
        o["alpha.alpha_token.net"]["id"]
    );
    // A module's warning is shown once, however many phases evaluate it.
    write_modules(
        p.dir.path(),
        &null,
        "warnings = [ \"the app runs without a load balancer\" ];",
    );
    let out = p.run(&["plan"], &[]);
    assert_success(&out);
    let err = stderr(&out);
    assert_eq!(
        err.matches("[WARN] the plan warns: the app runs without a load balancer")
            .count(),
        1,
        "{err}"
    );
    write_modules(p.dir.path(), &null, "");
    // Evaluated again with the outputs, still the single file's IR.
    assert_eq!(p.eval_ir(), single.eval_ir_with(&p.outputs()));
    p.assert_no_leftover_processes();
}

#[test]
fn a_type_error_names_the_option_and_the_file() {
    let null = real_provider("null");
    let p = Project::new(MODULE_PLAN);
    write_modules(p.dir.path(), &null, "network.zone = 3;");
    let out = p.run(&["plan"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let app = p.dir.path().join("app.nix");
    let expected = format!(
        "The option `network.zone' defined in {} is not one of [\"a\",\"b\"]: it is int 3",
        app.display()
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
}

#[test]
fn a_failed_assertion_and_an_undeclared_option_name_the_file() {
    let null = real_provider("null");
    let p = Project::new(MODULE_PLAN);
    write_modules(p.dir.path(), &null, "network.zone = \"b\";");
    let out = p.run(&["plan"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let expected = format!(
        "the database runs in zone a only (option assertions, defined in {})",
        p.dir.path().join("database.nix").display()
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));

    write_modules(p.dir.path(), &null, "network.zones = \"b\";");
    let out = p.run(&["plan"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let expected = format!(
        "No such option: `network.zones' (defined in {})",
        p.dir.path().join("app.nix").display()
    );
    assert!(stderr(&out).contains(&expected), "{}", stderr(&out));
}
