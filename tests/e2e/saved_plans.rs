//! Saved plans through the CLI: `plan --out` in one checkout, `apply FILE` from another
//! checkout of the same flake on another path with the same state; and each way a plan goes
//! stale (state advanced, a variable changed, the configuration changed, the provider binary
//! swapped, the file edited) refused by name with nothing applied.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::util::*;

/// A flake whose plan has a variable `v` (alpha's label), a token reading it, a token reading
/// the first's id (TF→TF) and a record computed by Nix from it; `alpha` is the provider source.
fn flake(dir: &Path, alpha: &str, extra_label: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let text = format!(
        r#"{{ outputs = {{ self }}: let lib = import {repo}/nix; in {{
  nivis.plan = ledger:
    let
      variables.v = {{ type = "string"; default = "one"; }};
      vars = lib.vars ledger variables;
      a = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "a"; config.keeper = vars.v; config.label = "a{extra_label}"; }};
      c = lib.mkResource {{ provider = "alpha"; type = "alpha_token"; name = "c"; config.keeper = a.refAttr "id"; }};
      b = lib.mkResource {{ provider = "beta"; type = "beta_record"; name = "b"; config.from = lib.str [ "rec-" (a.refAttr "id") ]; }};
    in lib.toIR {{
      providers.alpha = lib.mkProvider {{ source = "{alpha}"; }};
      providers.beta = lib.mkProvider {{ source = "provider-beta"; }};
      resources = [ a c b ];
      inherit variables ledger;
    }};
}}; }}"#,
        repo = repo().display(),
    );
    std::fs::write(dir.join("flake.nix"), text).unwrap();
}

struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    state: PathBuf,
    /// Each command starts the fakes afresh: a new counter seed per command gives new
    /// objects new ids.
    commands: std::cell::Cell<u64>,
}

impl Setup {
    fn new(alpha: &str) -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        flake(&root.join("review"), alpha, "");
        Setup {
            state: root.join("shared/nivis.state.json"),
            root,
            _tmp: tmp,
            commands: std::cell::Cell::new(0),
        }
    }

    fn nivis(&self, checkout: &str, args: &[&str]) -> Output {
        let dir = self.root.join(checkout);
        let mut with = args.to_vec();
        let (dir, state) = (dir.display().to_string(), self.state.display().to_string());
        with.extend(["--flake", &dir, "--state", &state]);
        self.bare(&with)
    }

    /// `nivis ARGS` with no plan source or state added.
    fn bare(&self, args: &[&str]) -> Output {
        self.commands.set(self.commands.get() + 1);
        Command::new(nivis_bin())
            .env(
                "NIVIS_FAKE_COUNTER",
                (self.commands.get() * 100).to_string(),
            )
            .args(args)
            .current_dir(&self.root)
            .env("NO_COLOR", "1")
            .env("XDG_STATE_HOME", self.root.join("xdg"))
            .output()
            .unwrap()
    }

    /// A fresh clone of the review checkout (a git repository), on another path.
    fn clone_to(&self, checkout: &str) {
        let review = self.root.join("review");
        git(&review, &["init", "-q"]);
        git(&review, &["add", "flake.nix"]);
        git(&review, &["commit", "-q", "-m", "reviewed"]);
        git(&self.root, &["clone", "-q", "review", checkout]);
    }

    fn state_text(&self) -> String {
        std::fs::read_to_string(&self.state).unwrap()
    }

    fn plan_file(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }
}

fn refused(out: &Output, why: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", stdout(out));
    let err = stderr(out);
    assert!(
        err.contains("the saved plan cannot be applied") || err.contains(why),
        "{err}"
    );
    assert!(err.contains(why), "expected {why:?} in: {err}");
}

#[test]
fn a_reviewed_plan_applies_from_another_checkout_and_stale_ones_are_refused() {
    let s = Setup::new("provider-alpha");
    assert_success(&s.nivis("review", &["apply", "--auto-approve", "--var", "v=one"]));

    // Reviewed: v changes, so a is replaced, c (reads a.id) replaced with it, b decided later.
    let reviewed = s.plan_file("reviewed.plan");
    let out = s.nivis("review", &["plan", "--var", "v=two", "--out", &reviewed]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(text.contains("Saved the plan to"), "{text}");
    assert!(
        text.contains("-/+ alpha.alpha_token.c") || text.contains("alpha.alpha_token.c"),
        "{text}"
    );
    // alpha's tokens hold generated secrets (`secret-N`) in state: none reaches the file.
    let saved_text = std::fs::read_to_string(&reviewed).unwrap();
    let state = s.state_text();
    assert!(
        state.contains("\"secret-"),
        "the fakes' secrets are in state"
    );
    assert!(!saved_text.contains("secret-"), "{saved_text}");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&reviewed).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let shown = s.bare(&["show", &reviewed]);
    assert_success(&shown);
    assert!(
        stdout(&shown).contains("alpha.alpha_token.c"),
        "{}",
        stdout(&shown)
    );
    assert!(
        stdout(&shown).contains("variable v = \"two\""),
        "{}",
        stdout(&shown)
    );
    let json = s.bare(&["show", &reviewed, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(doc["meta"]["schemaVersion"], 1);
    assert_eq!(doc["changes"].as_array().unwrap().len(), 2, "{doc}");
    assert_eq!(doc["deferred"][0]["id"], "beta.beta_record.b", "{doc}");

    // An edited file is refused: bytes that are not canonical at once, a changed action by
    // the re-plan of phase 1.
    let text = std::fs::read_to_string(&reviewed).unwrap();
    let edited = s.plan_file("edited.plan");
    std::fs::write(&edited, format!("{text}\n")).unwrap();
    refused(
        &s.nivis(
            "review",
            &["apply", &edited, "--auto-approve", "--var", "v=two"],
        ),
        "it was edited",
    );
    // (A valid action: an unknown one, or one of the wrong shape, is not a saved plan at all.)
    let replace = ["false", "true"]
        .map(|cbd| format!("{{\"replace\":{{\"createBeforeDestroy\":{cbd}}}}}"))
        .into_iter()
        .find(|r| text.contains(r.as_str()))
        .expect("a replace in the plan");
    std::fs::write(&edited, text.replacen(&replace, "\"update\"", 1)).unwrap();
    refused(
        &s.nivis(
            "review",
            &["apply", &edited, "--auto-approve", "--var", "v=two"],
        ),
        "was planned to update and would now replace",
    );

    // A variable that differs is named.
    let before = s.state_text();
    refused(
        &s.nivis(
            "review",
            &["apply", &reviewed, "--auto-approve", "--var", "v=three"],
        ),
        "variable v is not what it was",
    );
    assert_eq!(s.state_text(), before, "nothing applied");

    // From a fresh checkout elsewhere, with the same state: applied as reviewed (the plan's
    // non-sensitive variables come with it).
    s.clone_to("ci");
    let out = s.nivis("ci", &["apply", &reviewed, "--auto-approve", "--json"]);
    assert_success(&out);
    let started: Vec<serde_json::Value> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "started" && e["id"] == "beta.beta_record.b")
        .collect();
    assert_eq!(started.len(), 1, "b is updated once");
    assert_eq!(started[0]["phase"], 2);
    assert!(
        started[0]["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["path"] == "from"),
        "the log carries phase 2's attribute changes: {}",
        started[0]
    );
    let done: Vec<(String, String)> = events(&out)
        .into_iter()
        .filter(|e| e["type"] == "finished" && e["action"] != "no-op")
        .map(|e| {
            (
                e["id"].as_str().unwrap().to_string(),
                action_class(&e["action"]),
            )
        })
        .collect();
    assert_eq!(
        done,
        [
            ("alpha.alpha_token.a".to_string(), "replace".to_string()),
            ("alpha.alpha_token.c".to_string(), "replace".to_string()),
            ("beta.beta_record.b".to_string(), "update".to_string()),
        ]
    );

    // Once applied, the same plan is stale: the state moved on.
    let before = s.state_text();
    refused(
        &s.nivis(
            "ci",
            &["apply", &reviewed, "--auto-approve", "--var", "v=two"],
        ),
        "the state changed since it was made",
    );
    assert_eq!(s.state_text(), before);

    // The configuration changed after review.
    let second = s.plan_file("second.plan");
    assert_success(&s.nivis("review", &["plan", "--var", "v=three", "--out", &second]));
    flake(&s.root.join("ci"), "provider-alpha", "-edited");
    refused(
        &s.nivis(
            "ci",
            &["apply", &second, "--auto-approve", "--var", "v=three"],
        ),
        "the plan's configuration (its IR) changed",
    );
    assert_eq!(s.state_text(), before);
}

#[test]
fn a_swapped_provider_binary_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let alpha = tmp.path().join("provider-alpha");
    let built = nivis_bin().with_file_name("provider-alpha");
    std::fs::copy(&built, &alpha).unwrap();
    let s = Setup::new(&alpha.display().to_string());
    assert_success(&s.nivis("review", &["apply", "--auto-approve"]));
    let reviewed = s.plan_file("reviewed.plan");
    assert_success(&s.nivis("review", &["plan", "--var", "v=two", "--out", &reviewed]));
    // Still a working provider, but not the binary that was reviewed.
    let mut bytes = std::fs::read(&alpha).unwrap();
    bytes.extend_from_slice(b"\0swapped");
    std::fs::write(&alpha, bytes).unwrap();
    let before = s.state_text();
    refused(
        &s.nivis(
            "review",
            &["apply", &reviewed, "--auto-approve", "--var", "v=two"],
        ),
        "provider alpha: the saved plan was made with",
    );
    assert_eq!(s.state_text(), before, "nothing applied");
}

fn action_class(action: &serde_json::Value) -> String {
    match action {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Object(m) => m.keys().next().unwrap().clone(),
        _ => String::new(),
    }
}

/// A plan with a move, an import and a create, saved: `nivis show` prints its rows as `nivis
/// plan` printed them, type names included (a move used to show `()`).
#[test]
fn show_prints_moves_and_imports_as_plan_printed_them() {
    let token = |name: &str, extra: &str| {
        format!(
            "(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"{name}\"; config.label = \"l\"; {extra} }})"
        )
    };
    let plan_of = |resources: &[String], moved: &str| {
        format!(
            "ledger: lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; resources = [ {} ]; moved = [ {moved} ]; inherit ledger; }}",
            resources.join(" ")
        )
    };
    let p = Project::new(&plan_of(&[token("old", ""), token("a", "")], "")).with_object_log();
    assert_success(&p.run(&["apply"], &["--auto-approve"]));
    let id = p.outputs()["alpha.alpha_token.a"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_success(&p.state_cmd(&["state", "rm", "alpha.alpha_token.a"]));
    p.set_plan(&plan_of(
        &[
            token("new", ""),
            token("a", &format!("importId = \"{id}\";")),
            token("fresh", ""),
        ],
        "(lib.moved { from = \"alpha.alpha_token.old\"; to = \"alpha.alpha_token.new\"; })",
    ));
    let file = p.dir.path().join("moves.plan").display().to_string();
    let planned = p.run(&["plan"], &["--out", &file]);
    assert_success(&planned);
    let shown = Command::new(nivis_bin())
        .args(["show", &file])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_success(&shown);
    let (planned, shown) = (stdout(&planned), stdout(&shown));
    for row in [
        "-> alpha.alpha_token.old moved to alpha.alpha_token.new (alpha_token)".to_string(),
        format!("<= alpha.alpha_token.a to import from id \"{id}\" (alpha_token)"),
        "+ alpha.alpha_token.fresh (alpha_token)".to_string(),
    ] {
        assert!(planned.contains(&row), "plan: {row:?} in {planned}");
        assert!(shown.contains(&row), "show: {row:?} in {shown}");
    }
    // Every row plan printed, in its order, and the same summary line.
    let rows = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("->"))
            .take_while(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert_eq!(
        rows(&shown),
        rows(&planned),
        "plan:\n{planned}\nshow:\n{shown}"
    );
    let summary = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("Plan:"))
            .map(str::to_string)
    };
    assert_eq!(summary(&shown), summary(&planned));
}
