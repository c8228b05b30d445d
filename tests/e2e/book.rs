//! The book's chapters that users type along with are run, command for command: every ```sh
//! block of docs/book/src/getting-started.md and docs/book/src/tutorial-null.md, in order, in
//! one bash, offline.
//!
//! The only changes to the text: the public flake reference `github:wearetechnative/nivis`
//! becomes a `path:` copy of this repository's flake, and `hashicorp/null` comes from a
//! filesystem mirror in `~/nivis-mirror` holding the real terraform-provider-null binary
//! (tests/fetch-providers.py), named by NIVIS_PROVIDER_MIRRORS as the tutorial does itself.

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

/// Runs a chapter's commands; returns stdout.
fn run_chapter(chapter: &str) -> String {
    let text = std::fs::read_to_string(repo().join("docs/book/src").join(chapter)).unwrap();
    let blocks = shell_blocks(&text);
    assert!(
        blocks.len() >= 5,
        "{chapter}: only {} sh blocks",
        blocks.len()
    );
    let tmp = tempfile::tempdir().unwrap();
    let (home, work, src) = (
        tmp.path().join("home"),
        tmp.path().join("work"),
        tmp.path().join("nivis-src"),
    );
    std::fs::create_dir_all(&work).unwrap();
    copy_flake_source(&src);
    write_mirror(&home);
    let script = blocks
        .join("\n")
        .replace(PUBLIC_FLAKE, &format!("path:{}", src.display()));
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
        .env("NIVIS_PROVIDER_MIRRORS", home.join("nivis-mirror"))
        .env("NIVIS_OFFLINE", "1")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("NIVIS_STATE")
        .env_remove("NIVIS_LOG");
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
    stdout(&out)
}

#[test]
fn getting_started_runs_as_written() {
    let out = run_chapter("getting-started.md");
    for want in [
        "Applied 2 resource(s) across 2 phase(s)",
        "summary = \"hello from ",
        "first is ",
        "Destroyed 2 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn the_null_tutorial_runs_as_written() {
    let out = run_chapter("tutorial-null.md");
    for want in [
        "Applied 5 resource(s) across 2 phase(s)",
        "The plan is valid.",
        "Destroyed 4 resource(s)",
    ] {
        assert!(out.contains(want), "missing {want:?} in:\n{out}");
    }
}

#[test]
fn sh_blocks_are_found() {
    let md = "text\n```sh\na\nb\n```\n```text\nnot run\n```\n```sh\nc\n```\n";
    assert_eq!(shell_blocks(md), ["a\nb\n", "c\n"]);
}
