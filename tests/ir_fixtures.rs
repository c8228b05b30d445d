//! The Rust IR validator (`nivis::ir`) against the conformance suite in
//! tests/ir-conformance: it must accept every valid fixture, reject every
//! invalid one with the fixture's `//expect` texts, agree with check.py (the
//! reference checker) on the fixtures and on seeded random mutations of them,
//! and never panic on arbitrary input.
//!
//! Needs python3 with the `jsonschema` package, like check.py itself.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use nivis::ir;
use serde_json::{json, Map, Value};

const EXPECT_KEY: &str = "//expect";

fn conformance_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("ir-conformance")
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = conformance_dir().join("fixtures").join(kind);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

fn read_json(path: &Path) -> Value {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A directory under the system temp dir, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("nivis-ir-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, doc: &Value) -> PathBuf {
        let path = self.0.join(name);
        fs::write(&path, serde_json::to_vec_pretty(doc).unwrap()).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// `check.py validate` over many files in one run: per file, None when it
/// printed "ok", else its error lines.
fn check_py(files: &[PathBuf]) -> Vec<Option<Vec<String>>> {
    let script = conformance_dir().join("check.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg("validate")
        .args(files)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 {}: {e}", script.display()));
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "check.py failed to run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    files
        .iter()
        .map(|file| {
            let lines: Vec<String> = if files.len() == 1 {
                stdout.lines().map(str::to_string).collect()
            } else {
                let prefix = format!("{}: ", file.display());
                stdout
                    .lines()
                    .filter_map(|l| l.strip_prefix(&prefix))
                    .map(str::to_string)
                    .collect()
            };
            assert!(
                !lines.is_empty(),
                "check.py printed nothing for {}",
                file.display()
            );
            (lines != ["ok"]).then_some(lines)
        })
        .collect()
}

fn rust_errors(doc: &Value) -> Option<Vec<String>> {
    let bytes = serde_json::to_vec(doc).unwrap();
    ir::parse(&bytes)
        .err()
        .map(|errs| errs.iter().map(ToString::to_string).collect())
}

#[test]
fn fixtures_agree_with_check_py() {
    let scratch = Scratch::new("fixtures");
    let mut files = Vec::new();
    let mut expected_accept = Vec::new();
    let mut problems = Vec::new();

    for path in fixtures("valid") {
        let name = format!("valid/{}", path.file_name().unwrap().to_string_lossy());
        let doc = read_json(&path);
        if let Some(errors) = rust_errors(&doc) {
            problems.push(format!(
                "{name}: rejected by nivis::ir:\n    {}",
                errors.join("\n    ")
            ));
        }
        files.push(path);
        expected_accept.push((name, true));
    }

    for path in fixtures("invalid") {
        let name = format!("invalid/{}", path.file_name().unwrap().to_string_lossy());
        let mut doc = read_json(&path);
        let expect: Vec<String> = doc
            .as_object_mut()
            .and_then(|m| m.remove(EXPECT_KEY))
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default();
        if expect.is_empty() {
            problems.push(format!("{name}: lists no {EXPECT_KEY:?} texts"));
        }
        match rust_errors(&doc) {
            None => problems.push(format!("{name}: accepted by nivis::ir")),
            Some(errors) => {
                let text = errors.join("\n");
                for want in &expect {
                    if !text.contains(want.as_str()) {
                        problems.push(format!(
                            "{name}: nivis::ir errors lack {want:?}; got:\n    {}",
                            errors.join("\n    ")
                        ));
                    }
                }
                if errors.iter().any(|e| !e.contains(": ")) {
                    problems.push(format!("{name}: an error without a location: {errors:?}"));
                }
            }
        }
        files.push(scratch.write(path.file_name().unwrap().to_str().unwrap(), &doc));
        expected_accept.push((name, false));
    }

    for ((name, accept), verdict) in expected_accept.iter().zip(check_py(&files)) {
        if verdict.is_none() != *accept {
            problems.push(format!(
                "{name}: check.py {} it",
                if *accept { "rejects" } else { "accepts" }
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{} problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

// --- seeded randomness (no extra crates) ------------------------------------------------

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Words that make random documents land near the interesting rules.
const WORDS: &[&str] = &[
    "schemaVersion",
    "providers",
    "resources",
    "data",
    "edges",
    "nixConsumers",
    "variables",
    "moved",
    "from",
    "importId",
    "id",
    "provider",
    "type",
    "name",
    "config",
    "meta",
    "dependsOn",
    "lifecycle",
    "preventDestroy",
    "createBeforeDestroy",
    "ignoreChanges",
    "count",
    "for_each",
    "forEach",
    "from",
    "to",
    "via",
    "value",
    "source",
    "version",
    "kind",
    "tfplugin",
    "nixops4",
    "statelessTypes",
    "default",
    "description",
    "sensitive",
    "__ref",
    "__sensitiveRef",
    "__derived",
    "__build",
    "__sensitive",
    "__x",
    "resource",
    "path",
    "inputs",
    "drvPath",
    "alpha",
    "alpha.alpha_token.A",
    "alpha.alpha_token.B",
    "data.alpha.t.n",
    "alpha.alpha_token.A.value",
    "tags[\"a.b\"]",
    "disk[0].size",
    "*",
    "/nix/store/x.drv",
    "",
    "a b",
    "a..b",
    "string",
    "number",
    "bool",
    "list",
    "map",
    "any",
    "\u{e9}t\u{e9}",
    "q\"uote",
    "line\nbreak",
    "//expect",
];

fn random_value(rng: &mut Rng, depth: u32) -> Value {
    let choice = if depth >= 4 {
        rng.below(6)
    } else {
        rng.below(9)
    };
    match choice {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => json!(*rng.pick(&[
            0i64,
            1,
            2,
            -1,
            7,
            9_007_199_254_740_991,
            9_007_199_254_740_992,
            i64::MIN
        ])),
        3 => json!(*rng.pick(&[1.0f64, 1.5, -0.0, 1e300, -2.5])),
        4 | 5 => Value::String(rng.pick(WORDS).to_string()),
        6 | 7 => {
            let mut map = Map::new();
            for _ in 0..rng.below(4) {
                map.insert(rng.pick(WORDS).to_string(), random_value(rng, depth + 1));
            }
            Value::Object(map)
        }
        _ => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
    }
}

/// JSON pointers of every value in a document.
fn pointers(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                pointers(
                    x,
                    format!("{at}/{}", k.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, x) in items.iter().enumerate() {
                pointers(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// One small, random, structure-aware change to a document.
fn mutate(doc: &mut Value, rng: &mut Rng) {
    let mut all = Vec::new();
    pointers(doc, String::new(), &mut all);
    let target = rng.pick(&all).clone();
    let replacement = random_value(rng, 2);
    let word = rng.pick(WORDS).to_string();
    let op = rng.below(7);
    let Some(node) = doc.pointer_mut(&target) else {
        return;
    };
    match (op, node) {
        (0, Value::Object(map)) => {
            map.insert(word, replacement);
        }
        (1, Value::Object(map)) if !map.is_empty() => {
            let k = map.keys().nth(rng.below(map.len())).unwrap().clone();
            map.remove(&k);
        }
        (2, Value::Array(items)) if !items.is_empty() => {
            let i = rng.below(items.len());
            let copy = items[i].clone();
            items.push(copy);
        }
        (3, Value::Array(items)) if !items.is_empty() => {
            items.remove(rng.below(items.len()));
        }
        (4, Value::String(s)) => {
            let edits = [
                format!("{s}.x"),
                format!("__{s}"),
                s.replacen('.', "", 1),
                String::new(),
                format!("{s} "),
            ];
            *s = rng.pick(&edits).clone();
        }
        (5, node) => *node = Value::String(word),
        (_, node) => *node = replacement,
    }
}

#[test]
fn parse_never_panics_on_random_input() {
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let seeds: Vec<Value> = fixtures("valid").iter().map(|p| read_json(p)).collect();
    let mut accepted = 0;
    for round in 0..6000 {
        let doc = match round % 3 {
            0 => random_value(&mut rng, 0),
            1 => {
                let mut doc = rng.pick(&seeds).clone();
                for _ in 0..=rng.below(3) {
                    mutate(&mut doc, &mut rng);
                }
                doc
            }
            _ => {
                // Raw bytes: truncated or corrupted JSON text.
                let mut bytes = serde_json::to_vec(rng.pick(&seeds)).unwrap();
                let cut = rng.below(bytes.len());
                if rng.below(2) == 0 {
                    bytes.truncate(cut);
                } else {
                    bytes[cut] = *rng.pick(b"{}[]\",:0-.e\\\x00\xff");
                }
                let _ = ir::parse(&bytes);
                continue;
            }
        };
        if let Ok(parsed) = ir::parse_value(&doc) {
            accepted += 1;
            // Whatever parses must survive a round trip through its own JSON.
            let again = ir::parse_value(&parsed.to_json()).unwrap_or_else(|e| {
                panic!("round trip of an accepted document failed: {e:?}\n{doc}")
            });
            assert_eq!(again, parsed, "round trip changed the document {doc}");
        }
    }
    // Some mutations leave the document valid; make sure that path is exercised.
    assert!(accepted > 0, "no random document was accepted");
}

#[test]
fn random_mutations_agree_with_check_py() {
    let scratch = Scratch::new("mutations");
    let mut rng = Rng(0x0dd_ba11_c0ff_ee00);
    let seeds: Vec<Value> = fixtures("valid").iter().map(|p| read_json(p)).collect();
    let mut docs = Vec::new();
    let mut files = Vec::new();
    for i in 0..400 {
        let mut doc = rng.pick(&seeds).clone();
        for _ in 0..=rng.below(2) {
            mutate(&mut doc, &mut rng);
        }
        files.push(scratch.write(&format!("mutant-{i:03}.json"), &doc));
        docs.push(doc);
    }
    let verdicts = check_py(&files);
    let mut disagreements = Vec::new();
    let mut rejected = 0;
    for ((doc, file), python) in docs.iter().zip(&files).zip(verdicts) {
        let rust = rust_errors(doc);
        rejected += usize::from(rust.is_some());
        if rust.is_some() != python.is_some() {
            disagreements.push(format!(
                "{}:\n  nivis::ir: {:?}\n  check.py:  {:?}\n  document:  {doc}",
                file.display(),
                rust,
                python
            ));
        }
    }
    assert!(
        rejected > 100 && rejected < docs.len(),
        "mutations should mostly, not always, break documents ({rejected})"
    );
    assert!(
        disagreements.is_empty(),
        "{} disagreement(s):\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

/// `ir::parse` reads a document from its bytes section by section (no JSON tree of the whole
/// document, DESIGN §84); it must answer exactly as `ir::parse_value` on the whole tree does:
/// the same IR, or the same errors in the same order, for every fixture and for seeded random
/// mutations of them (keys in any order, sections of the wrong shape, repeated ids, ...).
#[test]
fn parsing_bytes_agrees_with_parsing_the_whole_tree() {
    let mut rng = Rng(0x5ec7_10a5_b17e_0003);
    let mut docs: Vec<Value> = Vec::new();
    for kind in ["valid", "invalid"] {
        for path in fixtures(kind) {
            let mut doc = read_json(&path);
            if let Some(map) = doc.as_object_mut() {
                map.remove(EXPECT_KEY);
            }
            docs.push(doc);
        }
    }
    let seeds = docs.clone();
    for round in 0..4000 {
        let mut doc = rng.pick(&seeds).clone();
        if round % 4 == 0 {
            // The document with its top-level keys in reverse order.
            if let Value::Object(map) = &doc {
                doc = Value::Object(map.clone().into_iter().rev().collect());
            }
        } else {
            for _ in 0..=rng.below(3) {
                mutate(&mut doc, &mut rng);
            }
        }
        docs.push(doc);
    }
    let (mut accepted, mut rejected) = (0, 0);
    for doc in &docs {
        let from_bytes = ir::parse(&serde_json::to_vec(doc).unwrap());
        let from_tree = ir::parse_value(doc);
        assert_eq!(from_bytes, from_tree, "the two readers differ on {doc}");
        match from_tree {
            Ok(_) => accepted += 1,
            Err(_) => rejected += 1,
        }
    }
    assert!(
        accepted > 100 && rejected > 100,
        "both verdicts must be exercised ({accepted} accepted, {rejected} rejected)"
    );
}
