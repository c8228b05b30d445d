//! The book's chapters that users type along with are run, command for command: every ```sh
//! block of docs/book/src/getting-started.md, tutorial-null.md, tutorial-lxd.md,
//! modules-and-policies.md, reviewing-changes.md, coming-from-terraform.md and
//! remote-state.md, in order, in one bash, offline.
//!
//! The only change to the text: the public flake reference `github:wearetechnative/nivis`
//! becomes `git+file://` of a git clone of this repository's flake (what the chapters advise
//! for a local copy). The machine is a reader's: a `~/.gitconfig` naming the user, and a
//! filesystem mirror in `~/nivis-mirror` holding the real terraform-provider-null binary
//! (tests/fetch-providers.py), which the getting-started and tutorial chapters name themselves
//! (NIVIS_PROVIDER_MIRRORS, NIVIS_OFFLINE); no other environment is set behind their back
//! (the remote-state chapter, which says nothing about providers, gets the mirror in its
//! setup).
//! The remote-state chapter runs against a local SeaweedFS server: its example endpoint,
//! bucket and credentials become the server's, and its `nivis.backend` block is added to
//! `flake.nix` where the chapter says to add it.

use std::path::Path;
use std::process::Command;

use crate::e2e::flake::{copy_flake_source, sealed};
use crate::util::*;

const PUBLIC_FLAKE: &str = "github:wearetechnative/nivis";

/// The ```sh blocks of a chapter, in order.
fn shell_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim_end() == "```sh" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim_end() == "```" => blocks.extend(current.take()),
            Some(block) => {
                block.push_str(line);
                block.push('\n');
            }
        }
    }
    assert!(current.is_none(), "unterminated ```sh block");
    blocks
}

/// `~/nivis-mirror`: hashicorp/null 2.1.2 for this platform, as `nivis providers mirror`
/// lays it out.
fn write_mirror(home: &Path) {
    let null = real_provider("null");
    let binary = std::fs::read(&null).unwrap();
    let platform = nivis::registry::Platform::current();
    let dir = home.join("nivis-mirror/registry.opentofu.org/hashicorp/null");
    std::fs::create_dir_all(&dir).unwrap();
    let name = null.file_name().unwrap().to_str().unwrap();
    let zip = crate::registry::make_zip(&[(name, &binary, 0o755)]);
    std::fs::write(
        dir.join(format!("terraform-provider-null_2.1.2_{platform}.zip")),
        zip,
    )
    .unwrap();
}

/// How a chapter's text meets the test machine.
#[derive(Default)]
struct Setup {
    /// (example text, what it becomes), applied to the whole chapter.
    replace: Vec<(String, String)>,
    /// Bash run after the ```sh block of this index (0-based), with the chapter's text.
    after_block: Option<(usize, String)>,
    env: Vec<(String, String)>,
}

/// Runs a chapter's commands; returns stdout.
fn run_chapter(chapter: &str) -> String {
    run_chapter_with(chapter, |_, _| Setup::default())
}

/// Runs a chapter's commands with `setup(chapter text, temp dir)`; returns stdout.
fn run_chapter_with(chapter: &str, setup: impl FnOnce(&str, &Path) -> Setup) -> String {
    stdout(&run_chapter_output(chapter, setup))
}

/// Runs a chapter's commands with `setup(chapter text, temp dir)`, asserting they succeed;
/// returns what they printed.
fn run_chapter_output(
    chapter: &str,
    setup: impl FnOnce(&str, &Path) -> Setup,
) -> std::process::Output {
    let mut text = std::fs::read_to_string(repo().join("docs/book/src").join(chapter)).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let setup = setup(&text, tmp.path());
    for (from, to) in &setup.replace {
        assert!(
            text.contains(from.as_str()),
            "{chapter} no longer says {from:?}"
        );
        text = text.replace(from.as_str(), to);
    }
    let mut blocks = shell_blocks(&text);
    if let Some((index, extra)) = &setup.after_block {
        blocks.insert(index + 1, extra.clone());
    }
    assert!(
        blocks.len() >= 5,
        "{chapter}: only {} sh blocks",
        blocks.len()
    );
    let (home, work, src) = (
        tmp.path().join("home"),
        tmp.path().join("work"),
        tmp.path().join("nivis-src"),
    );
    std::fs::create_dir_all(&work).unwrap();
    copy_flake_source(&src);
    commit_all(&src);
    write_mirror(&home);
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = Reader\n\temail = reader@example.invalid\n",
    )
    .unwrap();
    let script = blocks
        .join("\n")
        .replace(PUBLIC_FLAKE, &format!("git+file://{}", src.display()));
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-x", "-c", &script])
        .current_dir(&work)
        .env("HOME", &home)
        .env("PATH", path)
        .env_remove("NIVIS_PROVIDER_MIRRORS")
        .env_remove("NIVIS_OFFLINE")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_STATE_HOME")
        .env_remove("NIVIS_STATE")
        .env_remove("NIVIS_LOG")
        .envs(setup.env.iter().map(|(k, v)| (k, v)));
    for (k, _) in std::env::vars() {
        if k.starts_with("NIVIS_VAR_") {
            cmd.env_remove(k);
        }
    }
    sealed(&mut cmd, tmp.path());
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{chapter}: a command failed ({}).\n--- stdout\n{}\n--- stderr (bash -x trace)\n{}",
        out.status,
        stdout(&out),
        stderr(&out)
    );
    out
}

/// Makes `dir` a git repository with everything in it committed.
fn commit_all(dir: &Path) {
    for args in [
        &["init", "-q"][..],
        &["add", "-A"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.invalid",
            "commit",
            "-q",
            "-m",
            "src",
        ],
    ] {
        let out = Command::new("git")
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert_success(&out);
    }
}

#[test]
fn getting_started_runs_as_written() {
    let out = run_chapter("getting-started.md");
    for want in [
        "Applied 2 resource(s) across 2 phase(s)",
        "summary = \"hello from ",
        "first is ",
        "No changes. The infrastructure matches the plan.",
        "Destroyed 2 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn the_null_tutorial_runs_as_written() {
    let run = run_chapter_output("tutorial-null.md", |_, _| Setup::default());
    // The project is in git: its state is keyed by its first commit, not by its path.
    let err = stderr(&run);
    assert!(!err.contains("keyed by its path"), "{err}");
    let out = stdout(&run);
    for want in [
        "Applied 5 resource(s) across 2 phase(s)",
        "The plan is valid.",
        "Destroyed 4 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

/// The LXD tutorial against a daemon of its own (tests/lxd.py): the chapter's socket becomes
/// the daemon's, `lxc` finds it through `LXD_DIR`, and the mirror holds the real
/// terraform-provider-lxd 1.5.0 as `nivis providers mirror` lays it out.
#[test]
fn the_lxd_tutorial_runs_as_written() {
    let lxd = crate::e2e::real_lxd::Lxd::start();
    let out = run_chapter_with("tutorial-lxd.md", |_, tmp| {
        let provider = real_provider("lxd");
        let dir = tmp.join("home/nivis-mirror/registry.opentofu.org/terraform-lxd/lxd");
        std::fs::create_dir_all(&dir).unwrap();
        let platform = nivis::registry::Platform::current();
        let name = provider.file_name().unwrap().to_str().unwrap();
        let zip = crate::registry::make_zip(&[(name, &std::fs::read(&provider).unwrap(), 0o755)]);
        std::fs::write(
            dir.join(format!("terraform-provider-lxd_1.5.0_{platform}.zip")),
            zip,
        )
        .unwrap();
        Setup {
            replace: vec![("/var/lib/lxd/unix.socket".into(), lxd.socket())],
            after_block: None,
            env: vec![(
                "LXD_DIR".into(),
                lxd.info["lxdDir"].as_str().unwrap().to_string(),
            )],
        }
    });
    for want in [
        "Applied 4 resource(s) across 2 phase(s)",
        "web is Running",
        "plan exit 2",
        "Destroyed 4 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // What LXD says: the role was put back before the destroy, and nothing is left.
    assert!(
        out.contains("\nweb\n"),
        "the role profile was not restored:\n{out}"
    );
    assert_eq!(lxd.instances(), Vec::<(String, String)>::new());
    assert_eq!(lxd.names(&["profile", "list"]), ["default"]);
    assert_eq!(lxd.volumes("default"), Vec::<String>::new());
}

#[test]
fn the_modules_and_policies_chapter_runs_as_written() {
    let out = run_chapter("modules-and-policies.md");
    for want in [
        "Applied 4 resource(s) across 2 phase(s)",
        "2 fixture(s): 2 passed, 0 failed",
        "plan failed: exit 1",
        "apply refused: exit 1",
        "Applied 3 resource(s) across 1 phase(s)",
        "Destroyed 4 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn the_reviewing_chapter_runs_as_written() {
    let out = run_chapter("reviewing-changes.md");
    for want in [
        "~ null.null_resource.first changed\n    config.triggers.greeting: \"hello\" -> \"hi\"",
        "? null.null_resource.second (after null.null_resource.first)",
        "No provider was started.",
        "No differences",
        "null.null_resource.first.id = \"",
        "(computed by Nix at triggers.after) defined at ./flake.nix:",
        "differs from the snapshot nivis-ir.json at: null.null_resource.first",
        "Destroyed 2 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn the_remote_state_chapter_runs_as_written() {
    let weed = crate::e2e::weed::Weed::start();
    let out = run_chapter_with("remote-state.md", |text, tmp| {
        let mut replace = vec![
            (
                "https://s3.example.internal:9000".to_string(),
                weed.endpoint(),
            ),
            (
                "bucket = \"team-state\"".to_string(),
                format!("bucket = \"{}\"", crate::e2e::weed::BUCKET),
            ),
        ];
        let [(_, access), (_, secret)] = weed.credentials();
        replace.push(("AKIAIOSFODNN7EXAMPLE".into(), access));
        replace.push(("wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY".into(), secret));
        // The chapter's `nivis.backend = { … };` block goes into flake.nix beside nivis.plan,
        // right after the first commands (which apply with a local state).
        let backend = nix_block_starting(text, "nivis.backend =");
        let snippet = tmp.join("backend.snippet");
        let setup = Setup {
            replace,
            after_block: Some((
                0,
                format!(
                    "awk -v f={} '/^ *nivis.plan =/ && !done {{ while ((getline l < f) > 0) \
                     print l; done = 1 }} {{ print }}' flake.nix > flake.nix.new\n\
                     mv flake.nix.new flake.nix\n",
                    snippet.display()
                ),
            )),
            env: vec![
                (
                    "NIVIS_PROVIDER_MIRRORS".into(),
                    tmp.join("home/nivis-mirror").display().to_string(),
                ),
                ("NIVIS_OFFLINE".into(), "1".into()),
                (
                    "NIVIS_RESCUE_DIR".into(),
                    tmp.join("rescue").display().to_string(),
                ),
                ("NO_PROXY".into(), "127.0.0.1,localhost".into()),
                ("no_proxy".into(), "127.0.0.1,localhost".into()),
            ],
        };
        let mut backend = backend;
        for (from, to) in &setup.replace {
            backend = backend.replace(from.as_str(), to);
        }
        std::fs::write(&snippet, backend).unwrap();
        setup
    });
    for want in [
        "Migrated 2 resource(s)",
        "No changes. The infrastructure matches the plan.",
        "* default\n  staging\n",
        "Pushed ../team-infra-backup.json",
        "record(s); the chain is intact.",
        "Destroyed 2 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    // The state is in the bucket, not in the project.
    let keys = weed_keys(&weed);
    assert!(
        keys.iter().any(|k| k == "team-infra/nivis.state"),
        "no state object in the bucket: {keys:?}"
    );
    assert!(
        keys.iter()
            .any(|k| k == "env:/staging/team-infra/nivis.state"),
        "no staging state in the bucket: {keys:?}"
    );
}

/// Every object key in the test bucket.
fn weed_keys(weed: &crate::e2e::weed::Weed) -> Vec<String> {
    weed.client().list("").expect("list the bucket")
}

/// The first ```nix block of `markdown` whose first line starts with `start`.
fn nix_block_starting(markdown: &str, start: &str) -> String {
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        if line.trim_end() == "```nix" {
            let block: Vec<&str> = lines
                .by_ref()
                .take_while(|l| l.trim_end() != "```")
                .collect();
            if block.first().is_some_and(|l| l.starts_with(start)) {
                return block.join("\n") + "\n";
            }
        }
    }
    panic!("no ```nix block starting with {start:?}");
}

#[test]
fn sh_blocks_are_found() {
    let md = "text\n```sh\na\nb\n```\n```text\nnot run\n```\n```sh\nc\n```\n";
    assert_eq!(shell_blocks(md), ["a\nb\n", "c\n"]);
}

/// The chapter for teams leaving Terraform: the real Terraform 1.0.3 applies an estate from a
/// filesystem mirror in `~/tf-mirror` (the unpacked layout both tools read), convert adopts it
/// with no changes, Nivis changes it, and the Terraform state is retired.
#[test]
fn the_coming_from_terraform_chapter_runs_as_written() {
    let out = run_chapter_with("coming-from-terraform.md", |_, tmp| {
        let home = tmp.join("home");
        let null = real_provider("null");
        let target = home.join("tf-mirror/registry.terraform.io/hashicorp/null/2.1.2/linux_amd64");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::copy(&null, target.join(null.file_name().unwrap())).unwrap();
        let tools = tmp.join("tools");
        std::fs::create_dir_all(&tools).unwrap();
        std::os::unix::fs::symlink(real_provider("terraform"), tools.join("terraform")).unwrap();
        let path = format!(
            "{}:{}:{}",
            bin_dir().display(),
            tools.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        Setup {
            env: vec![
                ("PATH".into(), path),
                (
                    "TF_CLI_CONFIG_FILE".into(),
                    home.join(".terraformrc").display().to_string(),
                ),
                ("CHECKPOINT_DISABLE".into(), "1".into()),
                ("TF_IN_AUTOMATION".into(), "1".into()),
            ],
            ..Setup::default()
        }
    });
    for want in [
        "null_resource.svc[\"api\"]",
        "  null_resource.node[1] -> null.null_resource.node__1",
        "  null_resource.svc[\"api\"] -> null.null_resource.svc__api",
        "Adopted exactly: the plan shows no changes.",
        "lib.forEach",
        "No changes.",
        "Applied 4 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
    assert!(
        out.trim_end().ends_with('0'),
        "the Terraform state is empty:\n{out}"
    );
}
