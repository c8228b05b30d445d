//! The flake as users consume it: plans evaluate through `nivis.lib` with no nixpkgs at all
//! (offline, an empty flake registry, every download refused), while the flake still declares
//! nixpkgs for its package outputs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::*;

/// A Nix environment in which nothing can be downloaded: an empty flake registry, no binary
/// cache, and a proxy that refuses every connection (so the test means the same on a machine
/// with network access). Flakes are enabled, as the book asks users to.
pub(super) fn sealed(cmd: &mut Command, root: &Path) {
    let registry = root.join("empty-registry.json");
    std::fs::write(&registry, r#"{"flakes": [], "version": 2}"#).unwrap();
    cmd.env(
        "NIX_CONFIG",
        format!(
            "experimental-features = nix-command flakes\nflake-registry = {}\n\
             substituters =\ndownload-attempts = 1\nconnect-timeout = 1",
            registry.display()
        ),
    )
    .env("http_proxy", "http://127.0.0.1:9")
    .env("https_proxy", "http://127.0.0.1:9")
    .env("HTTPS_PROXY", "http://127.0.0.1:9")
    .env("ALL_PROXY", "http://127.0.0.1:9")
    .env("NO_COLOR", "1");
}

fn nix(root: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new("nix");
    cmd.args(["--extra-experimental-features", "nix-command flakes"])
        .args(args);
    sealed(&mut cmd, root);
    cmd.output().expect("run nix")
}

/// The files the flake's non-package outputs need, copied as a plain `path:` flake (what a
/// mirror or a vendored copy of Nivis looks like).
pub(super) fn copy_flake_source(to: &Path) {
    let repo = repo();
    for f in ["flake.nix", "flake.lock"] {
        std::fs::create_dir_all(to).unwrap();
        std::fs::copy(repo.join(f), to.join(f)).unwrap();
    }
    copy_dir(&repo.join("nix"), &to.join("nix"));
}

pub(super) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A user's flake with Nivis as an input; it also re-exports the Nivis package, the case in
/// which `nix eval FLAKE#nivis.plan` would look in `packages.<system>.nivis` first.
fn user_flake(dir: &Path, nivis_src: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("flake.nix"),
        format!(
            r#"{{
  inputs.nivis.url = "path:{}";
  outputs = {{ self, nivis }}: {{
    packages.x86_64-linux.nivis = nivis.packages.x86_64-linux.nivis;
    packages.aarch64-linux.nivis = nivis.packages.aarch64-linux.nivis;
    nivis.plan = import "${{nivis}}/nix/examples/two-providers.nix" {{ lib = nivis.lib; }};
  }};
}}
"#,
            nivis_src.display()
        ),
    )
    .unwrap();
}

#[test]
fn plans_evaluate_through_nivis_lib_without_nixpkgs() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let src = root.join("nivis-src");
    copy_flake_source(&src);
    let src_ref = format!("path:{}", src.display());

    // The library and the example plans evaluate with builtins alone.
    let out = nix(root, &["eval", &format!("{src_ref}#lib.schemaVersion")]);
    assert_success(&out);
    assert_eq!(stdout(&out).trim(), "1");

    // Control: the same environment cannot fetch nixpkgs, so the package outputs fail here.
    // Without this the rest of the test could pass by downloading it.
    let out = nix(
        root,
        &[
            "eval",
            "--raw",
            &format!("{src_ref}#packages.x86_64-linux.nivis.name"),
        ],
    );
    assert!(
        !out.status.success(),
        "nixpkgs was reachable: {}",
        stdout(&out)
    );

    // A user flake: nivis locks it (no flake.lock yet) and plans it offline, although its
    // packages need nixpkgs.
    let proj = root.join("proj");
    user_flake(&proj, &src);
    let mut cmd = Command::new(nivis_bin());
    cmd.args(["plan", "--offline", "--flake"])
        .arg(&proj)
        .arg("--state")
        .arg(root.join("nivis.state.json"))
        .current_dir(root);
    sealed(&mut cmd, root);
    let out = cmd.output().unwrap();
    assert_success(&out);
    assert!(
        stdout(&out).contains("+ alpha.alpha_token.A"),
        "{}",
        stdout(&out)
    );
    let lock: serde_json::Value = serde_json::from_slice(
        &std::fs::read(proj.join("flake.lock")).expect("flake.lock written"),
    )
    .unwrap();
    assert_eq!(
        lock["nodes"]["nixpkgs"]["locked"]["type"], "github",
        "nixpkgs is locked from Nivis's own lock file, not fetched"
    );
}

/// The repository's own example plan, as `scripts/demo.sh` runs it (`--flake .`), although the
/// same flake exposes `packages.<system>.nivis`.
#[test]
fn the_repository_flake_plans_offline() {
    let tmp = tempfile::tempdir().unwrap();
    let src: PathBuf = tmp.path().join("nivis-src");
    copy_flake_source(&src);
    let mut cmd = Command::new(nivis_bin());
    cmd.args(["plan", "--flake"])
        .arg(&src)
        .arg("--state")
        .arg(tmp.path().join("s.json"));
    sealed(&mut cmd, tmp.path());
    let out = cmd.output().unwrap();
    assert_success(&out);
}

/// Everything `nix flake show` should list, as paths into its `--json` output.
const OUTPUTS: &[&str] = &[
    "packages.x86_64-linux.default",
    "packages.x86_64-linux.nivis",
    "packages.aarch64-linux.nivis",
    "apps.x86_64-linux.default",
    "devShells.x86_64-linux.default",
    "checks.x86_64-linux.package",
    "checks.x86_64-linux.nix-library",
    "checks.x86_64-linux.ir-conformance",
    "checks.x86_64-linux.cli",
    "formatter.x86_64-linux",
    "overlays.default",
    "templates.default",
    "templates.modules",
    "lib",
    "nivis",
];

/// nixpkgs cannot be fetched here, so the outputs that use it are evaluated against a
/// stand-in (tests/nix/stub-nixpkgs) whose packages cannot be built: this proves their shape
/// and the arguments they pass, not that they build.
#[test]
fn flake_outputs_evaluate_against_a_nixpkgs_stand_in() {
    let tmp = tempfile::tempdir().unwrap();
    let flake = format!("path:{}", repo().display());
    let stub = format!("path:{}", repo().join("tests/nix/stub-nixpkgs").display());
    let with_stub = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--no-write-lock-file", "--override-input", "nixpkgs", &stub]);
        nix(tmp.path(), &all)
    };

    let out = with_stub(&["flake", "show", "--json", &flake]);
    assert_success(&out);
    let shown: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for path in OUTPUTS {
        let found = path.split('.').try_fold(&shown, |v, k| v.get(k));
        assert!(found.is_some(), "nix flake show lacks {path}: {shown}");
    }
    assert_success(&with_stub(&["flake", "check", "--no-build", &flake]));

    // The package is written as nixpkgs writes Rust packages.
    let out = with_stub(&[
        "eval",
        "--json",
        &format!("{flake}#packages.x86_64-linux.nivis.args"),
        "--apply",
        "a: { inherit (a) pname cargoBuildFlags cargoTestFlags dontUseCmakeConfigure postInstall; \
             lock = baseNameOf a.cargoLock.lockFile; tools = map (d: d.name) a.nativeBuildInputs; \
             program = a.meta.mainProgram; license = a.meta.license.spdxId; }",
    ]);
    assert_success(&out);
    let args: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(args["pname"], "nivis");
    assert_eq!(
        args["cargoBuildFlags"],
        // nivis-fmt: the formatter runs apart, with the allocator alejandra brings (DESIGN §96).
        serde_json::json!(["--bin", "nivis", "--bin", "nivis-fmt"])
    );
    assert_eq!(args["lock"], "Cargo.lock");
    assert_eq!(
        args["tools"],
        serde_json::json!(["cmake", "installShellFiles"])
    );
    assert_eq!(args["dontUseCmakeConfigure"], true);
    assert_eq!(
        (args["program"].as_str(), args["license"].as_str()),
        (Some("nivis"), Some("Apache-2.0"))
    );
    let post = args["postInstall"].as_str().unwrap();
    for want in [
        "completion bash",
        "completion zsh",
        "completion fish",
        "man --dir",
    ] {
        assert!(post.contains(want), "postInstall lacks {want:?}: {post}");
    }

    // Its source is what cargo reads, and nothing else.
    let out = with_stub(&[
        "eval",
        "--raw",
        &format!("{flake}#packages.x86_64-linux.nivis.src"),
    ]);
    assert_success(&out);
    let src = std::path::PathBuf::from(stdout(&out));
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "build.rs",
        "src/main.rs",
        "proto/tfplugin6.proto",
        "fakes/alpha.rs",
        "tests/tests.rs",
        "tests/nix/gen/golden/alpha.txt",
        "docs/ir-schema.json",
    ] {
        assert!(src.join(needed).exists(), "package source lacks {needed}");
    }
    for left_out in [
        "docs/book",
        "scripts",
        "bench",
        "nix",
        "tests/e2e",
        "README.md",
    ] {
        assert!(
            !src.join(left_out).exists(),
            "package source has {left_out}"
        );
    }
}

/// The template's `formatter` (for `nix fmt`) is Nivis's own, reached lazily through the
/// `nivis` input: evaluated against the nixpkgs stand-in here, never by a plan.
#[test]
fn the_templates_formatter_is_nivis_s() {
    let tmp = tempfile::tempdir().unwrap();
    let (src, project) = (tmp.path().join("nivis-src"), tmp.path().join("project"));
    copy_flake_source(&src);
    copy_dir(&repo().join("nix/template"), &project);
    let stub = format!("path:{}", repo().join("tests/nix/stub-nixpkgs").display());
    let out = nix(
        tmp.path(),
        &[
            "eval",
            "--raw",
            &format!("path:{}#formatter.x86_64-linux.name", project.display()),
            "--no-write-lock-file",
            "--override-input",
            "nivis",
            &format!("path:{}", src.display()),
            "--override-input",
            "nivis/nixpkgs",
            &stub,
        ],
    );
    assert_success(&out);
    assert!(stdout(&out).contains("nixfmt"), "{}", stdout(&out));
}
