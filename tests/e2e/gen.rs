//! `nivis gen` end to end: generated constructors used in a plan, checked by Nix at evaluation
//! time and by the provider through `nivis validate`, then applied.

use std::process::Command;

use crate::util::*;

fn gen(provider: &str, out: &std::path::Path) {
    let o = Command::new(nivis_bin())
        .args(["gen", "--provider", provider, "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert_success(&o);
}

#[test]
fn generated_constructors_check_at_eval_time_and_validate_with_the_provider() {
    let gen_dir = tempfile::tempdir().unwrap();
    gen(
        bin_dir().join("provider-alpha").to_str().unwrap(),
        gen_dir.path(),
    );
    let alpha = gen_dir.path().join("alpha");
    assert!(alpha.join("resources/alpha_token.nix").exists());
    assert!(std::fs::read_to_string(alpha.join("README.md"))
        .unwrap()
        .contains("alpha_token"));

    let plan = |label: &str| {
        format!(
            "ledger: let g = import {} lib; t = g.resources.alpha_token {{ name = \"t\"; config = {{ label = \"{label}\"; rules = [ {{ port = 22; }} ]; }}; }}; \
             in lib.toIR {{ providers.alpha = g.provider {{ source = \"provider-alpha\"; }}; resources = [ t ]; inherit ledger; }}",
            alpha.display()
        )
    };
    // The provider's own validation runs through `nivis validate`.
    let p = Project::new(&plan("an invalid label"));
    let out = p.run(&["validate"], &[]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("must not contain"),
        "{}",
        stderr(&out)
    );
    p.set_plan(&plan("fine"));
    assert_success(&p.run(&["validate"], &[]));
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    assert_eq!(p.outputs()["alpha.alpha_token.t"]["rules"][0]["port"], 22);

    // Misuse is caught by Nix with the type and argument named.
    p.set_plan(&format!(
        "ledger: let g = import {} lib; in lib.toIR {{ providers.alpha = g.provider {{ source = \"provider-alpha\"; }}; \
         resources = [ (g.resources.alpha_token {{ name = \"t\"; config = {{ lable = \"x\"; }}; }}) ]; inherit ledger; }}",
        alpha.display()
    ));
    let out = p.run(&["plan"], &[]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("alpha_token")
            && err.contains("'lable'")
            && err.contains("did you mean 'label'"),
        "{err}"
    );
}

#[test]
fn generation_from_real_providers_is_deterministic() {
    for name in ["null", "workato"] {
        let bin = real_provider(name);
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        gen(bin.to_str().unwrap(), a.path());
        gen(bin.to_str().unwrap(), b.path());
        let diff = Command::new("diff")
            .arg("-r")
            .arg(a.path())
            .arg(b.path())
            .output()
            .unwrap();
        assert!(diff.status.success(), "{name}: {}", stdout(&diff));
        assert!(a.path().join(name).join("default.nix").exists());
    }
}
