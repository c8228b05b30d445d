//! The secrets property: for random plans mixing sensitive outputs (passed on directly, and
//! computed with in Nix), sensitive variables (direct and computed with), provider outputs that
//! echo a secret, plain values, build outputs, and NixOps4 resources given secrets (kept in
//! their private bytes; the provider may log its request), every command of the book — plan,
//! --json, apply, -v, state show, output — leaves the secrets nowhere but in the 0600 state (as
//! themselves, base64 or hex), and a plan after apply has nothing to do.
//! NIVIS_SECRETS_SEED=N replays one run; the seed is printed.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::sandbox::*;
use crate::util::*;

/// One generated plan: the Nix `let` bindings, the resource names, the consumers.
struct Generated {
    lets: Vec<String>,
    names: Vec<String>,
    consumers: Vec<String>,
    ids: Vec<String>,
    /// A derivation is built from a secret: evaluation must refuse the plan.
    refused: bool,
    /// The plan uses the NixOps4 fake (declared as provider `n4`).
    nixops4: bool,
}

/// `nixops4`: the plan gives secrets to a NixOps4 resource.
fn generate(rng: &mut StdRng, tag: &str, nixops4: bool) -> Generated {
    let mut g = Generated {
        lets: Vec::new(),
        names: Vec::new(),
        consumers: Vec::new(),
        ids: Vec::new(),
        refused: false,
        nixops4: false,
    };
    let tokens = rng.gen_range(1..=3);
    for i in 0..tokens {
        let name = format!("a{i}");
        let label = match rng.gen_range(0..3) {
            0 => format!("\"plain-{i}\""),
            1 => "vars.token".to_string(),
            _ => "lib.str [ \"user-\" vars.token ]".to_string(),
        };
        let keeper = if rng.gen_bool(0.3) {
            format!(
                "config.keeper = lib.drv (derivation {{ name = \"nivis-prop-{tag}-{i}\"; builder = \"/bin/sh\"; \
                 args = [ \"-c\" \"echo built > $out\" ]; system = builtins.currentSystem; }});"
            )
        } else {
            String::new()
        };
        g.lets.push(format!(
            "{name} = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{name}\"; \
             config.label = {label}; {keeper} }};"
        ));
        g.names.push(name.clone());
        g.ids.push(format!("alpha.alpha_token.{name}"));
    }
    let pick = |rng: &mut StdRng| format!("a{}", rng.gen_range(0..tokens));
    for j in 0..rng.gen_range(1..=3) {
        let a = pick(rng);
        let from = match rng.gen_range(0..6) {
            0 => format!("{a}.refAttr \"secret\""),
            1 => format!("lib.str [ \"postgres://app:\" ({a}.refAttr \"secret\") \"@\" ({a}.refAttr \"id\") ]"),
            2 => format!(
                "lib.compute {{ s = {a}.refAttr \"secret\"; v = {a}.refAttr \"value\"; }} ({{ s, v }}: \"k=\" + s + \";\" + v)"
            ),
            3 => "lib.str [ \"tok:\" vars.token ]".to_string(),
            4 => format!("{a}.refAttr \"value\""),
            _ => format!("\"fixed-{j}\""),
        };
        let name = format!("b{j}");
        g.lets.push(format!(
            "{name} = lib.mkResource {{ provider = \"beta\"; type = \"beta_record\"; name = \"{name}\"; config.from = {from}; }};"
        ));
        g.names.push(name.clone());
        g.ids.push(format!("beta.beta_record.{name}"));
        // A Nix hop over B's endpoint (which echoes `from`, secret or not).
        if rng.gen_bool(0.5) {
            let c = format!("c{j}");
            g.lets.push(format!(
                "{c} = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{c}\"; \
                 config.label = lib.str [ \"seen:\" ({name}.refAttr \"endpoint\") ]; }};"
            ));
            g.names.push(c.clone());
            g.ids.push(format!("alpha.alpha_token.{c}"));
        }
        if rng.gen_bool(0.4) {
            g.consumers.push(format!(
                "consumers.k{j} = {{ e = {name}.refAttr \"endpoint\"; f = lib.str [ \"x\" ({name}.refAttr \"from\") ]; }};"
            ));
        }
    }
    if nixops4 {
        // A secret input stays in the record's private bytes only (`pw` is not an output).
        let a = pick(rng);
        let pw = match rng.gen_range(0..3) {
            0 => format!("{a}.refAttr \"secret\""),
            1 => format!("lib.str [ \"pw:\" ({a}.refAttr \"secret\") ]"),
            _ => "vars.token".to_string(),
        };
        let value = match rng.gen_range(0..2) {
            0 => "\"plain-n\"".to_string(),
            _ => format!("{a}.refAttr \"value\""),
        };
        let fault = if rng.gen_bool(0.5) { "log" } else { "none" };
        g.lets.push(format!(
            "n = lib.mkResource {{ provider = \"n4\"; type = \"thing\"; name = \"n\"; \
             config = {{ pw = {pw}; value = {value}; fault = \"{fault}\"; }}; }};"
        ));
        g.names.push("n".into());
        g.ids.push("n4.thing.n".into());
        g.nixops4 = true;
    }
    if rng.gen_bool(0.2) {
        let a = pick(rng);
        g.lets.push(format!(
            "bad = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"bad\"; \
             config.label = lib.compute ({a}.refAttr \"secret\") (pw: derivation {{ name = \"nivis-leak-{tag}\"; \
             builder = \"/bin/sh\"; args = [ \"-c\" \"echo > $out\" ]; system = builtins.currentSystem; PW = pw; }}); }};"
        ));
        g.names.push("bad".into());
        g.refused = true;
    }
    g
}

fn plan_text(g: &Generated) -> String {
    let n4 = if g.nixops4 {
        "providers.n4 = lib.mkProvider { source = \"provider-nixops4-fake\"; kind = \"nixops4\"; };"
    } else {
        ""
    };
    format!(
        "ledger: let decls = {{ token = {{ type = \"string\"; sensitive = true; }}; region = {{ type = \"string\"; default = \"eu\"; }}; }}; \
         vars = lib.vars ledger decls; {} in {}",
        g.lets.join(" "),
        Sandbox::to_ir(
            &g.names.join(" "),
            &format!("variables = decls; {n4} {}", g.consumers.join(" "))
        )
    )
}

#[test]
fn random_plans_leave_secrets_only_in_the_state() {
    let seed: u64 = std::env::var("NIVIS_SECRETS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("NIVIS_SECRETS_SEED={seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..4 {
        let mut s = Sandbox::new();
        // Every ledger Nix is given is kept for the hunt: a secret never enters one, not even a
        // copy a provider echoed into another attribute.
        s.spy_on_nix();
        let var_value = unique_token("nvvar");
        s.set_env("NIVIS_VAR_token", Some(&var_value));
        // Every other round at least has a NixOps4 resource.
        let nixops4 = round % 2 == 1 || rng.gen_bool(0.5);
        let g = generate(&mut rng, &format!("{seed}-{round}"), nixops4);
        let plan = plan_text(&g);
        Sandbox::write_flake(&s.proj, &plan);
        let context = format!("seed {seed}, round {round}, plan:\n{plan}");
        let out = s.nivis(&["plan"]);
        if g.refused {
            // Refused once the secret is known (the evaluation after the token's apply).
            let out = s.nivis(&["apply", "--auto-approve"]);
            assert!(!out.status.success(), "{context}");
            assert!(
                stderr(&out).contains("derivation"),
                "{context}\n{}",
                stderr(&out)
            );
            s.hunt(&[]);
            s.hunt_for(&var_value, &[]);
            continue;
        }
        assert!(out.status.success(), "{context}\n{}", stderr(&out));
        for args in [&["plan", "--json"][..], &["apply", "--auto-approve", "-v"]] {
            let out = s.nivis(args);
            assert!(out.status.success(), "{context}\n{}", stderr(&out));
        }
        for args in [&["plan"][..], &["apply", "--auto-approve", "--json"]] {
            let out = s.nivis(args);
            assert!(out.status.success(), "{context}\n{}", stderr(&out));
            let text = stdout(&out);
            let settled = text.contains("No changes")
                || events(&out)
                    .iter()
                    .filter(|e| e["type"] == "finished")
                    .all(|e| e["action"] == "no-op");
            assert!(
                settled,
                "a run after apply still has changes ({context}):\n{text}"
            );
        }
        for id in &g.ids {
            assert_success(&s.nivis(&["state", "show", id]));
            assert_success(&s.nivis(&["state", "show", id, "--json"]));
        }
        assert_success(&s.nivis(&["output"]));
        assert_success(&s.nivis(&["refresh"]));
        s.hunt(&[]);
        s.hunt_for(&var_value, &[]);
    }
}
