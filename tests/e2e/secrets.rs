//! Issue 12: a secret lives only in the 0600 state and in memory — never in the Nix store,
//! plan output, logs, the ledger or shared temporary directories. Each test hunts for a token
//! unique to its run (see `sandbox`).

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::Value as Json;

use super::sandbox::*;
use crate::util::*;

const TOKEN_A: &str =
    "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = \"a\"; })";

fn ok(out: &std::process::Output) -> String {
    assert_success(out);
    stdout(out)
}

fn failed(out: &std::process::Output) -> String {
    assert!(
        !out.status.success(),
        "expected a failure:\nstdout:\n{}\nstderr:\n{}",
        stdout(out),
        stderr(out)
    );
    stderr(out)
}

/// apply, plan, state list/show and output in `cwd` with `args` (how the plan is found).
fn book_flow(s: &Sandbox, cwd: &Path, args: &[&str]) {
    let with = |verb: &[&str]| -> Vec<String> {
        verb.iter()
            .chain(args)
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
    };
    let run = |verb: &[&str]| {
        let v = with(verb);
        s.nivis_in(cwd, &v.iter().map(String::as_str).collect::<Vec<_>>())
    };
    ok(&run(&["apply", "--auto-approve"]));
    let plan = ok(&run(&["plan"]));
    assert!(plan.contains("No changes"), "{plan}");
    let list = ok(&run(&["state", "list"]));
    assert!(list.contains("alpha.alpha_token.A"), "{list}");
    ok(&run(&["state", "show", "alpha.alpha_token.A"]));
    ok(&run(&["output"]));
}

// --- case 1: the state never reaches the store ---------------------------------------------

#[test]
fn plain_directory_flake_keeps_state_out_of_the_store() {
    let s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    book_flow(&s, &s.proj, &[]);
    s.hunt(&[]);
    assert!(
        !s.proj.join("nivis.state.json").exists(),
        "no state beside a plain flake"
    );
}

#[test]
fn path_flake_keeps_state_out_of_the_store() {
    let s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    let flake = format!("path:{}", s.proj.display());
    book_flow(&s, &s.proj, &["--flake", &flake]);
    s.hunt(&[]);
}

#[test]
fn git_flakes_at_the_root_and_in_a_subdirectory_keep_state_out_of_the_store() {
    let s = Sandbox::new();
    // A flake at the root of a git repository, and one in a subdirectory of it.
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    Sandbox::write_flake(&s.proj.join("infra"), &Sandbox::plan_fn(TOKEN_A, ""));
    s.git(&s.proj, &["init", "-q"]);
    s.git(&s.proj, &["add", "flake.nix", "infra/flake.nix"]);
    book_flow(&s, &s.proj, &[]);
    book_flow(&s, &s.proj.join("infra"), &[]);
    // `git add -A` afterwards finds nothing of Nivis's to track.
    s.git(&s.proj, &["add", "-A"]);
    let sub = s.proj.join("infra");
    let out = s.nivis_in(&sub, &["plan"]);
    assert!(ok(&out).contains("No changes"));
    s.hunt(&[]);
}

#[test]
fn plan_file_flow_keeps_state_out_of_the_store() {
    let s = Sandbox::new();
    let plan = Sandbox::write_plan_file(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    book_flow(&s, &s.proj, &["--file", plan.to_str().unwrap()]);
    s.hunt(&[]);
}

#[test]
fn an_existing_state_beside_a_plain_flake_is_moved_out_not_lost() {
    let s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    // Apply with a state kept elsewhere, then put it where older Nivis versions kept it.
    let elsewhere = s.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let old = elsewhere.join("nivis.state.json");
    let flake = s.proj.display().to_string();
    ok(&s.nivis_in(
        &elsewhere,
        &[
            "apply",
            "--auto-approve",
            "--flake",
            &flake,
            "--state",
            old.to_str().unwrap(),
        ],
    ));
    std::fs::rename(&old, s.proj.join("nivis.state.json")).unwrap();
    for f in ["nivis.state.json.journal", "nivis.state.json.lock"] {
        if elsewhere.join(f).exists() {
            std::fs::rename(elsewhere.join(f), s.proj.join(f)).unwrap();
        }
    }
    // The next command moves it out of the flake before Nix sees it, and says so.
    let out = s.nivis(&["plan"]);
    let text = ok(&out);
    assert!(
        text.contains("No changes"),
        "the state was not lost: {text}"
    );
    assert!(stderr(&out).contains("Moved the state"), "{}", stderr(&out));
    for f in [
        "nivis.state.json",
        "nivis.state.json.journal",
        "nivis.state.json.lock",
    ] {
        assert!(!s.proj.join(f).exists(), "{f} left in the flake");
    }
    let list = ok(&s.nivis(&["state", "list"]));
    assert!(list.contains("alpha.alpha_token.A"), "{list}");
    s.hunt(&[]);
}

#[test]
fn a_state_path_inside_a_copied_directory_is_refused_with_the_fix() {
    let s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    // Plain directory: Nix copies all of it.
    let err = failed(&s.nivis(&["apply", "--auto-approve", "--state", "nivis.state.json"]));
    assert!(err.contains("copies"), "{err}");
    assert!(err.contains("--state"), "{err}");
    assert!(!s.proj.join("nivis.state.json").exists());

    // Git flake: only a git-ignored state file is safe inside the work tree.
    s.git(&s.proj, &["init", "-q"]);
    s.git(&s.proj, &["add", "flake.nix"]);
    let err = failed(&s.nivis(&["apply", "--auto-approve", "--state", "nivis.state.json"]));
    assert!(err.contains(".gitignore"), "{err}");
    std::fs::write(s.proj.join(".gitignore"), "nivis.state.json*\n").unwrap();
    s.git(&s.proj, &["add", ".gitignore"]);
    let state = s.proj.join("nivis.state.json");
    ok(&s.nivis(&["apply", "--auto-approve", "--state", "nivis.state.json"]));
    ok(&s.nivis(&["plan", "--state", "nivis.state.json"]));
    s.hunt(&[state, s.proj.join("nivis.state.json.journal")]);
}

// --- case 2: no spurious diff, no old secret in a plan -------------------------------------

#[test]
fn plan_after_apply_shows_no_spurious_diff_and_no_secret() {
    let mut s = Sandbox::new();
    // B's endpoint echoes the secret: it must not reach a ledger unmarked either.
    s.spy_on_nix();
    let plan = Sandbox::plan_let(
        &format!(
            "a = {TOKEN_A}; b = lib.mkResource {{ provider = \"beta\"; type = \"beta_record\"; \
             name = \"B\"; config.from = a.refAttr \"secret\"; }};"
        ),
        "a b",
        "",
    );
    Sandbox::write_flake(&s.proj, &plan);
    ok(&s.nivis(&["apply", "--auto-approve"]));
    for args in [&["plan"][..], &["plan", "--json"], &["plan", "-v"]] {
        let out = ok(&s.nivis(args));
        assert!(
            !out.contains("beta.beta_record.B"),
            "spurious change of B after apply: {out}"
        );
    }
    let out = ok(&s.nivis(&["apply", "--auto-approve"]));
    assert!(out.contains("No changes"), "{out}");
    ok(&s.nivis(&["state", "show", "beta.beta_record.B"]));
    ok(&s.nivis(&["state", "show", "beta.beta_record.B", "--json"]));
    ok(&s.nivis(&["output"]));
    s.hunt(&[]);
}

// --- case 3: sensitive variables -----------------------------------------------------------

#[test]
fn sensitive_variables_are_masked_everywhere_and_never_written() {
    let mut s = Sandbox::new();
    let value = unique_token("nvvar");
    let a = "(lib.mkResource { provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = vars.token; })";
    let b = "(lib.mkResource { provider = \"beta\"; type = \"beta_record\"; name = \"B\"; config.from = lib.str [ \"user:\" vars.token ]; })";
    let plan = Sandbox::plan_let(
        &format!(
            "decls = {{ token = {{ type = \"string\"; sensitive = true; }}; }}; \
             vars = lib.vars ledger decls; a = {a}; b = {b};"
        ),
        "a b",
        "variables = decls;",
    );
    Sandbox::write_flake(&s.proj, &plan);
    s.spy_on_nix();
    // Through the environment: arguments are visible to every local user.
    s.set_env("NIVIS_VAR_token", Some(&value));
    for args in [&["plan"][..], &["plan", "--json"], &["plan", "-vv"]] {
        let out = ok(&s.nivis(args));
        assert!(out.contains("alpha.alpha_token.A"), "{out}");
    }
    ok(&s.nivis(&["apply", "--auto-approve", "-v"]));
    ok(&s.nivis(&["apply", "--auto-approve", "--json"]));
    for id in ["alpha.alpha_token.A", "beta.beta_record.B"] {
        let shown = ok(&s.nivis(&["state", "show", id]));
        assert!(shown.contains("(sensitive value)"), "{shown}");
        ok(&s.nivis(&["state", "show", id, "--json"]));
    }
    ok(&s.nivis(&["output"]));
    ok(&s.nivis(&["plan"]));
    // An error message naming the value masks it too.
    let bad = plan.replace("type = \"string\";", "type = \"number\";");
    Sandbox::write_flake(&s.proj, &bad);
    failed(&s.nivis(&["plan"]));
    s.hunt_for(&value, &[]);
}

// --- case 4: the private run directory -----------------------------------------------------

#[test]
fn the_run_directory_is_private_and_cannot_be_hijacked() {
    let mut s = Sandbox::new();
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(TOKEN_A, ""));
    s.spy_on_nix();
    s.set_env("XDG_RUNTIME_DIR", None);
    let state = s.path("state/explicit.state.json");
    let state_arg = state.to_str().unwrap().to_string();

    // Another user prepared the directory older versions used ($TMPDIR/nivis-UID/<hash>),
    // world-writable, with the ledger's temp file as a link to one of the victim's files.
    let uid = unsafe_getuid();
    let hash: String = {
        use sha2::Digest;
        sha2::Sha256::digest(state_arg.as_bytes())
            .iter()
            .take(8)
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    let trap = s.path(&format!("tmp/nivis-{uid}/{hash}"));
    std::fs::create_dir_all(&trap).unwrap();
    let victim = s.path("home/victim.txt");
    std::fs::write(&victim, "precious\n").unwrap();
    std::os::unix::fs::symlink(&victim, trap.join("ledger.tmp")).unwrap();
    for d in [trap.parent().unwrap(), &trap] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::chown(d, Some(65534), Some(65534)).unwrap();
    }

    ok(&s.nivis(&["apply", "--auto-approve", "--state", &state_arg]));
    ok(&s.nivis(&["plan", "--state", &state_arg]));
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "precious\n",
        "a link planted by another user redirected a write"
    );
    let log = std::fs::read_to_string(s.path("spy.log")).unwrap();
    assert!(!log.is_empty());
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert!(!f[0].starts_with(trap.to_str().unwrap()), "{line}");
        assert_eq!(f[1], "600", "file mode: {line}");
        assert_eq!(f[2], "700", "directory mode: {line}");
        assert_eq!(f[3], uid.to_string(), "directory owner: {line}");
    }
    // Nothing of Nivis's is left behind in the shared temp directory after a run (providers'
    // plugin sockets are theirs).
    let left: Vec<_> = std::fs::read_dir(s.path("tmp"))
        .unwrap()
        .flatten()
        .filter(|e| {
            use std::os::unix::fs::FileTypeExt;
            !e.file_type().unwrap().is_socket()
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != &format!("nivis-{uid}"))
        .collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");

    // A runtime directory others can write to, or owned by someone else, is refused.
    let shared = s.path("shared-run");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    s.set_env("XDG_RUNTIME_DIR", Some(shared.to_str().unwrap()));
    let err = failed(&s.nivis(&["plan", "--state", &state_arg]));
    assert!(err.contains("XDG_RUNTIME_DIR"), "{err}");
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::os::unix::fs::chown(&shared, Some(65534), Some(65534)).unwrap();
    let err = failed(&s.nivis(&["plan", "--state", &state_arg]));
    assert!(err.contains("XDG_RUNTIME_DIR"), "{err}");
    assert!(std::fs::read_dir(&shared).unwrap().next().is_none());
    s.hunt(&[state.clone(), s.path("state/explicit.state.json.journal")]);
}

fn unsafe_getuid() -> u32 {
    // The test runs as some user; /proc tells which without libc.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|u| u.parse().ok())
        .unwrap()
}

// --- case 5: terminal injection ------------------------------------------------------------

#[test]
fn control_characters_and_bidi_overrides_are_escaped_in_every_printout() {
    let s = Sandbox::new();
    // ESC [31m, a newline and U+202E (right-to-left override) in a label and a map key.
    let nasty = "builtins.fromJSON ''\"x\\u001b[31mred\\nfake line\\u202eevil\\u0007\"''";
    let a = format!(
        "(lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"A\"; config.label = ({nasty}); }})"
    );
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(&a, ""));
    let mut outs = vec![
        s.nivis(&["plan"]),
        s.nivis(&["plan", "--json"]),
        s.nivis(&["apply", "--auto-approve", "-vv"]),
        s.nivis(&["state", "show", "alpha.alpha_token.A"]),
        s.nivis(&["state", "show", "alpha.alpha_token.A", "--json"]),
        s.nivis(&["output"]),
    ];
    // A change of the value in a plan, and a Nix error that quotes it.
    let changed = a.replace("evil", "evil2");
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(&changed, ""));
    outs.push(s.nivis(&["plan"]));
    let throwing = a.replace("config.label = ", "config.label = throw ");
    Sandbox::write_flake(&s.proj, &Sandbox::plan_fn(&throwing, ""));
    let thrown = s.nivis(&["plan"]);
    failed(&thrown);
    for (i, out) in outs.iter().chain([&thrown]).enumerate() {
        if i < outs.len() {
            assert_success(out);
        }
        for (stream, bytes) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
            let text = String::from_utf8_lossy(bytes);
            assert!(!text.contains('\u{1b}'), "raw ESC on {stream}: {text:?}");
            assert!(!text.contains('\u{7}'), "raw BEL on {stream}: {text:?}");
            assert!(
                !text.contains('\u{202e}'),
                "raw U+202E on {stream}: {text:?}"
            );
            assert!(
                !text.lines().any(|l| l.starts_with("fake line")),
                "a value's newline started a line on {stream}: {text:?}"
            );
        }
    }
    let shown = stdout(&outs[3]);
    assert!(shown.contains("red\\nfake line"), "{shown}");
    // JSON stays JSON with the same value.
    let json: Json = serde_json::from_slice(&outs[4].stdout).unwrap();
    assert_eq!(
        json["attributes"]["label"],
        "x\u{1b}[31mred\nfake line\u{202e}evil\u{7}"
    );
}

// --- the private channel -------------------------------------------------------------------

#[test]
fn a_connection_string_built_from_a_generated_password_stays_secret() {
    let mut s = Sandbox::new();
    s.spy_on_nix();
    let plan = format!(
        "ledger: let a = {TOKEN_A}; \
         b = lib.mkResource {{ provider = \"beta\"; type = \"beta_record\"; name = \"B\"; \
               config.from = lib.str [ \"postgres://app:\" (a.refAttr \"secret\") \"@db/app\" ]; }}; \
         c = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"C\"; \
               config.label = lib.compute {{ e = b.refAttr \"endpoint\"; }} ({{ e }}: \"seen:\" + e); }}; \
         in lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
              providers.beta = lib.mkProvider {{ source = \"provider-beta\"; }}; \
              resources = [ a b c ]; consumers.conn = b.refAttr \"from\"; inherit ledger; }}"
    );
    Sandbox::write_flake(&s.proj, &plan);
    ok(&s.nivis(&["plan"]));
    let out = ok(&s.nivis(&["apply", "--auto-approve", "--json"]));
    let phases: Vec<u64> = events_of(&out)
        .iter()
        .filter(|e| e["type"] == "finished")
        .map(|e| e["phase"].as_u64().unwrap())
        .collect();
    assert_eq!(phases, vec![1, 2, 3], "{out}");
    let after = ok(&s.nivis(&["plan"]));
    assert!(after.contains("No changes"), "{after}");
    for id in ["beta.beta_record.B", "alpha.alpha_token.C"] {
        let shown = ok(&s.nivis(&["state", "show", id]));
        assert!(shown.contains("(sensitive value)"), "{shown}");
    }
    // Every form of `output` but an explicit --raw masks it (the flake is evaluated for the
    // consumer `conn`, through the channel).
    let outputs = ok(&s.nivis(&["output"]));
    assert!(outputs.contains("conn = <sensitive>;"), "{outputs}");
    let json: Json = serde_json::from_str(&ok(&s.nivis(&["output", "--json"]))).unwrap();
    assert!(
        json["resources"]["alpha.alpha_token.A"]["secret"]["__sensitiveRef"].is_object(),
        "{json}"
    );
    let conn = &json["consumers"]["conn"];
    assert!(
        conn["__sensitiveRef"].is_object() || *conn == serde_json::json!({"__sensitive": {}}),
        "{conn}"
    );
    ok(&s.nivis(&["output", "conn"]));
    ok(&s.nivis(&["output", "conn", "--json"]));
    ok(&s.nivis(&["output", "beta.beta_record.B", "--json"]));
    s.hunt(&[]);
    // Asked for by name with --raw, the value is printed as it is (Terraform's `output -raw`).
    let raw = ok(&s.nivis(&["output", "--raw", "conn"]));
    assert!(
        raw.starts_with("postgres://app:") && raw.ends_with("@db/app") && raw.len() > 22,
        "{raw}"
    );
}

#[test]
fn a_secret_baked_into_a_derivation_is_refused_before_it_reaches_the_store() {
    let s = Sandbox::new();
    let plan = format!(
        "ledger: let a = {TOKEN_A}; \
         c = lib.mkResource {{ provider = \"alpha\"; type = \"alpha_token\"; name = \"C\"; \
               config.label = lib.compute (a.refAttr \"secret\") (pw: derivation {{ name = \"leak\"; builder = \"/bin/sh\"; \
                 args = [ \"-c\" \"echo > $out\" ]; system = builtins.currentSystem; PW = pw; }}); }}; \
         in lib.toIR {{ providers.alpha = lib.mkProvider {{ source = \"provider-alpha\"; }}; \
              resources = [ a c ]; inherit ledger; }}"
    );
    Sandbox::write_flake(&s.proj, &plan);
    let out = s.nivis(&["apply", "--auto-approve"]);
    let err = failed(&out);
    assert!(err.contains("derivation"), "{err}");
    assert!(err.contains("alpha.alpha_token.C"), "{err}");
    s.hunt(&[]);
}

fn events_of(text: &str) -> Vec<Json> {
    text.lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
