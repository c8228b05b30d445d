//! Tests of `nivis gen`: the generated text of hand-made schemas against golden files, and
//! the properties the generator promises (determinism, layout, escaping, shared bodies, speed).
//! Not: whether Nix accepts the output and checks calls as intended (`tests/nix/gen/run.sh`,
//! which uses `write_for_nix_tests`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::{file_stem, generate, GeneratedFile};
use crate::nixsyntax::{nix_attr, nix_string};
use crate::schema::{
    AttrType, Attribute, Block, BlockNesting, NestedBlock, NestedObject, ObjectNesting,
    ProviderSchema, Schema,
};
use crate::value::Type;

fn attr(ty: Type, mode: &str, desc: &str) -> Attribute {
    let mut a = match mode {
        "required" => Attribute::required(ty),
        "optional" => Attribute::optional(ty),
        "computed" => Attribute::computed(ty),
        _ => Attribute::optional_computed(ty),
    };
    a.description = desc.into();
    a
}

fn nested(nesting: ObjectNesting, attrs: Vec<(&str, Attribute)>, mode: &str) -> Attribute {
    let mut a = attr(Type::String, mode, "");
    a.ty = AttrType::Nested(NestedObject {
        attributes: attrs.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        nesting,
    });
    a
}

fn block(attrs: Vec<(&str, Attribute)>, blocks: Vec<(&str, NestedBlock)>, desc: &str) -> Block {
    Block {
        attributes: attrs.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        block_types: blocks.into_iter().map(|(k, v)| (k.into(), v)).collect(),
        description: desc.into(),
        deprecated: false,
    }
}

fn nb(block: Block, nesting: BlockNesting, min_items: i64, max_items: i64) -> NestedBlock {
    NestedBlock {
        block,
        nesting,
        min_items,
        max_items,
    }
}

fn schema(version: i64, block: Block) -> Schema {
    Schema { version, block }
}

/// The fake provider alpha's schema (fakes/alpha.rs), by hand.
fn alpha() -> ProviderSchema {
    let mut secret = attr(Type::String, "computed", "A generated secret.");
    secret.sensitive = true;
    let mut rules = nested(
        ObjectNesting::List,
        vec![
            ("port", attr(Type::Number, "required", "Port.")),
            ("proto", attr(Type::String, "optional", "Protocol.")),
        ],
        "optional",
    );
    rules.description = "Firewall-style rules (a nested attribute type).".into();
    let token = block(
        vec![
            (
                "label",
                attr(
                    Type::String,
                    "optional",
                    "Free text; changes update in place.",
                ),
            ),
            (
                "keeper",
                attr(Type::String, "optional", "Changing it forces replacement."),
            ),
            ("id", attr(Type::String, "computed", "alpha-N")),
            ("value", attr(Type::String, "computed", "alpha:<label>:N")),
            ("secret", secret),
            ("rules", rules),
        ],
        vec![],
        "A token.",
    );
    let lookup = block(
        vec![
            ("key", attr(Type::String, "required", "What to look up.")),
            ("result", attr(Type::String, "computed", "lookup:<key>")),
        ],
        vec![],
        "Looks a key up.",
    );
    let mut s = ProviderSchema {
        provider: schema(0, block(vec![], vec![], "The alpha fake provider.")),
        ..ProviderSchema::default()
    };
    s.resources.insert("alpha_token".into(), schema(0, token));
    s.data_sources
        .insert("alpha_lookup".into(), schema(0, lookup));
    s
}

fn t(json: &str) -> Type {
    Type::from_json(json.as_bytes()).unwrap()
}

/// Every nesting mode, every type, deprecations, and names and descriptions that need
/// escaping.
fn kinds() -> ProviderSchema {
    let mut old_type = block(
        vec![("x", attr(Type::String, "optional", ""))],
        vec![],
        "Superseded.",
    );
    old_type.deprecated = true;
    let info = block(
        vec![("all", attr(Type::String, "computed", ""))],
        vec![],
        "",
    );
    let mut s = ProviderSchema {
        provider: schema(
            0,
            block(
                vec![("endpoint", attr(Type::String, "required", "Where."))],
                vec![],
                "",
            ),
        ),
        ..ProviderSchema::default()
    };
    s.resources
        .insert("kinds_thing".into(), schema(3, kinds_thing()));
    s.resources.insert("kinds_old".into(), schema(0, old_type));
    s.resources.insert(
        "kinds weird/name".into(),
        schema(0, block(vec![], vec![], "")),
    );
    s.data_sources.insert("kinds_info".into(), schema(0, info));
    s
}

/// The body of resource type `kinds_thing`: an argument of every kind (see [`kinds`]).
// Long because it is one table of cases: every kind of argument and block, side by side.
fn kinds_thing() -> Block {
    let mut old = attr(Type::String, "optional", "The old way.");
    old.deprecated = true;
    old.deprecation_message = "Use s instead.".into();
    let mut pw = attr(Type::String, "optional", "A password.");
    pw.sensitive = true;
    pw.write_only = true;
    let odd_desc = "Tricky: ${builtins.abort \"x\"} and '' and \\ and \"quotes\"\r\nsecond line # not a comment end\rthird ''${";
    let inner = block(
        vec![("v", attr(Type::String, "required", "Inner value."))],
        vec![],
        "",
    );
    let mut legacy = nb(
        block(
            vec![("x", attr(Type::String, "optional", ""))],
            vec![],
            "Old blocks.",
        ),
        BlockNesting::List,
        0,
        0,
    );
    legacy.block.deprecated = true;
    block(
        vec![
            ("s", attr(Type::String, "required", "A required string.")),
            ("n", attr(Type::Number, "optional", "A number.")),
            ("b", attr(Type::Bool, "optional", "A bool.")),
            ("dyn", attr(Type::Dynamic, "optional", "Anything.")),
            ("tags", attr(t(r#"["map","string"]"#), "optional", "Tags.")),
            ("ports", attr(t(r#"["list","number"]"#), "optional", "")),
            ("zones", attr(t(r#"["set","string"]"#), "optional", "")),
            (
                "pair",
                attr(t(r#"["tuple",["string","number"]]"#), "optional", ""),
            ),
            (
                "obj",
                attr(
                    t(r#"["object",{"a":"string","b":"number"},["b"]]"#),
                    "optional",
                    "",
                ),
            ),
            (
                "matrix",
                attr(t(r#"["list",["map",["list","bool"]]]"#), "optional", ""),
            ),
            ("old", old),
            ("password", pw),
            ("id", attr(Type::String, "computed", "")),
            (
                "size",
                attr(
                    Type::Number,
                    "optional_computed",
                    "Chosen by the provider unless set.",
                ),
            ),
            ("a b", attr(Type::String, "optional", odd_desc)),
            ("if", attr(Type::String, "optional", "A keyword as a name.")),
            (
                "one",
                nested(
                    ObjectNesting::Single,
                    vec![
                        ("x", attr(Type::String, "required", "")),
                        ("y", attr(Type::String, "computed", "")),
                    ],
                    "optional",
                ),
            ),
            (
                "nmap",
                nested(
                    ObjectNesting::Map,
                    vec![("v", attr(Type::Number, "optional", ""))],
                    "optional",
                ),
            ),
            (
                "nset",
                nested(
                    ObjectNesting::Set,
                    vec![("v", attr(Type::Number, "required", ""))],
                    "optional",
                ),
            ),
        ],
        vec![
            (
                "single",
                nb(
                    block(
                        vec![("name", attr(Type::String, "required", ""))],
                        vec![],
                        "One required block.",
                    ),
                    BlockNesting::Single,
                    1,
                    1,
                ),
            ),
            (
                "group",
                nb(
                    block(vec![("flag", attr(Type::Bool, "optional", ""))], vec![], ""),
                    BlockNesting::Group,
                    0,
                    0,
                ),
            ),
            (
                "list",
                nb(
                    block(
                        vec![("port", attr(Type::Number, "required", ""))],
                        vec![("inner", nb(inner, BlockNesting::Single, 0, 0))],
                        "Listeners.",
                    ),
                    BlockNesting::List,
                    1,
                    2,
                ),
            ),
            (
                "set",
                nb(
                    block(vec![("x", attr(Type::String, "optional", ""))], vec![], ""),
                    BlockNesting::Set,
                    0,
                    1,
                ),
            ),
            (
                "map",
                nb(
                    block(vec![("v", attr(Type::Number, "optional", ""))], vec![], ""),
                    BlockNesting::Map,
                    0,
                    0,
                ),
            ),
            (
                "dynlist",
                nb(
                    block(vec![("d", attr(Type::Dynamic, "optional", ""))], vec![], ""),
                    BlockNesting::List,
                    0,
                    0,
                ),
            ),
            ("legacy", legacy),
        ],
        "Exercises every kind of argument.",
    )
}

/// `resources` resource types of 40 attributes each (31 plain, a nested attribute and
/// two blocks of 4, one with a nested block of 3), plus `resources / 5` data sources.
fn large(resources: usize) -> ProviderSchema {
    let types = [
        r#""string""#,
        r#""number""#,
        r#""bool""#,
        r#"["list","string"]"#,
        r#"["map","string"]"#,
        r#"["set","number"]"#,
        r#"["object",{"a":"string","b":"number"}]"#,
    ];
    let modes = [
        "optional",
        "required",
        "computed",
        "optional_computed",
        "optional",
    ];
    let desc = "Some description of this argument, long enough to be realistic for a provider.";
    let mk = |i: usize| {
        let attrs: Vec<(String, Attribute)> = (0..31)
            .map(|j| {
                let mode = if j == 0 {
                    "required"
                } else {
                    modes[(i + j) % modes.len()]
                };
                (
                    format!("attribute_{j:02}"),
                    attr(t(types[(i + j) % types.len()]), mode, desc),
                )
            })
            .collect();
        let four = |prefix: &str| -> Vec<(String, Attribute)> {
            (0..4)
                .map(|j| (format!("{prefix}_{j}"), attr(t(types[j]), modes[j], desc)))
                .collect()
        };
        let mut b = Block {
            attributes: attrs.into_iter().collect(),
            description: desc.into(),
            ..Block::default()
        };
        let mut rules = attr(Type::String, "optional", desc);
        rules.ty = AttrType::Nested(NestedObject {
            attributes: four("field").into_iter().collect(),
            nesting: ObjectNesting::List,
        });
        b.attributes.insert("rules".into(), rules);
        let inner = Block {
            attributes: four("inner").into_iter().take(3).collect(),
            ..Block::default()
        };
        let mut disk = Block {
            attributes: four("disk").into_iter().collect(),
            description: desc.into(),
            ..Block::default()
        };
        disk.block_types
            .insert("options".into(), nb(inner, BlockNesting::Single, 0, 0));
        b.block_types
            .insert("disk".into(), nb(disk, BlockNesting::List, 1, 8));
        let net = Block {
            attributes: four("net").into_iter().collect(),
            ..Block::default()
        };
        b.block_types
            .insert("network".into(), nb(net, BlockNesting::Set, 0, 0));
        schema(i as i64 % 3, b)
    };
    let mut s = ProviderSchema::default();
    for i in 0..resources {
        s.resources.insert(format!("large_resource_{i:04}"), mk(i));
    }
    for i in 0..resources / 5 {
        s.data_sources.insert(format!("large_data_{i:04}"), mk(i));
    }
    s
}

fn concat(files: &[GeneratedFile]) -> String {
    let mut out = String::new();
    for f in files {
        let _ = write!(out, "==> {} <==\n{}\n", f.path, f.contents);
    }
    out
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(file!())
        .parent()
        .unwrap()
        .join("../../tests/nix/gen/golden")
        .join(name)
}

/// Compares with the golden file; NIVIS_UPDATE_GOLDEN=1 rewrites it instead.
fn golden(name: &str, want: &str, got: &str) {
    if std::env::var_os("NIVIS_UPDATE_GOLDEN").is_some() {
        std::fs::write(golden_path(name), got).unwrap();
        return;
    }
    if want != got {
        let line = want
            .lines()
            .zip(got.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(want.lines().count().min(got.lines().count()));
        panic!(
            "generated output differs from tests/nix/gen/golden/{name} at line {}:\n  want: {:?}\n  got:  {:?}\n(NIVIS_UPDATE_GOLDEN=1 rewrites it)",
            line + 1,
            want.lines().nth(line),
            got.lines().nth(line)
        );
    }
}

#[test]
fn golden_alpha() {
    golden(
        "alpha.txt",
        include_str!("../../tests/nix/gen/golden/alpha.txt"),
        &concat(&generate("alpha", &alpha())),
    );
}

#[test]
fn golden_kinds() {
    golden(
        "kinds.txt",
        include_str!("../../tests/nix/gen/golden/kinds.txt"),
        &concat(&generate("kinds", &kinds())),
    );
}

#[test]
fn deterministic() {
    let a = generate("kinds", &kinds());
    let b = generate("kinds", &kinds().clone());
    assert_eq!(a, b);
    let big1 = generate("large", &large(50));
    let big2 = generate("large", &large(50));
    assert_eq!(big1, big2);
    let paths: Vec<&str> = big1.iter().map(|f| f.path.as_str()).collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    assert_eq!(paths, sorted);
    // 50 resources, 10 data sources, the index, the provider and the README.
    assert_eq!(big1.len(), 63);
}

#[test]
fn layout() {
    let files = generate("alpha", &alpha());
    let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "alpha/README.md",
            "alpha/data/alpha_lookup.nix",
            "alpha/default.nix",
            "alpha/provider.nix",
            "alpha/resources/alpha_token.nix",
        ]
    );
    let index = &files[2].contents;
    assert!(index.contains("alpha_token = import ./resources/alpha_token.nix lib;"));
    assert!(index.contains("alpha_lookup = import ./data/alpha_lookup.nix lib;"));
}

#[test]
fn file_names_and_nix_names() {
    assert_eq!(file_stem("aws_instance"), "aws_instance");
    assert_eq!(file_stem("a/b c"), "a+2Fb+20c");
    assert_eq!(file_stem(".hidden"), "+2Ehidden");
    assert_eq!(file_stem("v1.2"), "v1.2");
    assert_eq!(file_stem("a+b"), "a+2Bb");
    assert_eq!(file_stem(""), "+");
    assert_eq!(file_stem("é"), "+C3+A9");
    assert_eq!(nix_attr("label"), "label");
    assert_eq!(nix_attr("x-y'"), "x-y'");
    assert_eq!(nix_attr("if"), "\"if\"");
    assert_eq!(nix_attr("or"), "\"or\"");
    assert_eq!(nix_attr("a b"), "\"a b\"");
    assert_eq!(nix_attr("1x"), "\"1x\"");
    assert_eq!(nix_attr("${x}"), "\"\\${x}\"");
    assert_eq!(nix_string("a\"b\\c${d}\n\0"), r#""a\"b\\c\${d}\n""#);
    let files = generate("kinds", &kinds());
    assert!(files
        .iter()
        .any(|f| f.path == "kinds/resources/kinds+20weird+2Fname.nix"));
    let index = files
        .iter()
        .find(|f| f.path == "kinds/default.nix")
        .unwrap();
    assert!(index
        .contents
        .contains("\"kinds weird/name\" = import ./resources/kinds+20weird+2Fname.nix lib;"));
}

#[test]
fn descriptions_cannot_escape_comments_or_strings() {
    let files = generate("kinds", &kinds());
    let thing = files
        .iter()
        .find(|f| f.path == "kinds/resources/kinds_thing.nix")
        .unwrap();
    // Every line of the tricky description is its own comment line.
    for piece in ["second line # not a comment end", "third ''${"] {
        let line = thing.contents.lines().find(|l| l.contains(piece)).unwrap();
        assert!(line.trim_start().starts_with('#'), "{line:?}");
    }
    // Outside comments, `${` only ever appears escaped.
    for line in thing.contents.lines() {
        let code = line.trim_start();
        if !code.starts_with('#') {
            assert!(!code.replace("\\${", "").contains("${"), "{line:?}");
        }
    }
    assert!(thing.contents.contains("\"a b\" = { t = \"string\"; };"));
    assert!(thing.contents.contains("\"if\" = { t = \"string\"; };"));
    let readme = files.iter().find(|f| f.path == "kinds/README.md").unwrap();
    let row = readme
        .contents
        .lines()
        .find(|l| l.starts_with("| `a b` |"))
        .unwrap();
    assert!(row.contains("<br>second line"), "{row}");
    assert_eq!(row.matches(" | ").count(), 4, "{row}");
}

#[test]
fn spec_contents() {
    let files = generate("kinds", &kinds());
    let thing = &files
        .iter()
        .find(|f| f.path == "kinds/resources/kinds_thing.nix")
        .unwrap()
        .contents;
    for want in [
        "id = { t = \"string\"; out = true; };",
        "old = { t = \"string\"; dep = \"Use s instead.\"; };",
        "obj = { t = { object = { a = \"string\"; b = \"number\"; }; opt = [ \"b\" ]; }; };",
        "pair = { t = { tuple = [ \"string\" \"number\" ]; }; };",
        "matrix = { t = { list = { map = { list = \"bool\"; }; }; }; };",
        "names = [ \"a b\" \"b\" \"dyn\" \"dynlist\" \"group\" \"if\" \"legacy\" \"list\" \"map\" \"matrix\" \"n\" \"nmap\" \"nset\" \"obj\" \"old\" \"one\" \"pair\" \"password\" \"ports\" \"s\" \"set\" \"single\" \"size\" \"tags\" \"zones\" ];",
        "required = [ \"s\" ];",
        "needed = [ \"list\" \"single\" ];",
        "nest = \"list\";\n        min = 1;\n        max = 2;",
    ] {
        assert!(thing.contains(want), "missing {want:?}");
    }
    let old = &files
        .iter()
        .find(|f| f.path == "kinds/resources/kinds_old.nix")
        .unwrap()
        .contents;
    assert!(old.contains("  spec = {\n    dep = \"\";"));
}

/// A statement block that nests itself `depth` times, twice at each level (like AWS's
/// WAF rules): 2^depth occurrences, `depth` distinct bodies.
fn statements(depth: usize) -> Block {
    let leaf = |i: usize| {
        (0..4)
            .map(|j| {
                (
                    format!("field_{i}_{j}"),
                    attr(Type::String, "optional", "A field."),
                )
            })
            .collect::<BTreeMap<_, _>>()
    };
    let mut body = Block {
        attributes: leaf(0),
        ..Block::default()
    };
    for level in 1..=depth {
        let inner = nb(body, BlockNesting::List, 0, 0);
        body = Block {
            attributes: leaf(level),
            block_types: [
                ("left".to_string(), inner.clone()),
                ("right".to_string(), inner),
            ]
            .into_iter()
            .collect(),
            ..Block::default()
        };
    }
    body
}

#[test]
fn repeated_bodies_are_written_once() {
    let mut s = ProviderSchema::default();
    s.resources.insert("deep".into(), schema(0, statements(12)));
    let files = generate("p", &s);
    let file = &files
        .iter()
        .find(|f| f.path == "p/resources/deep.nix")
        .unwrap()
        .contents;
    // 2^13 - 2 nested occurrences of 12 distinct bodies, each used twice: all bound,
    // each written once.
    assert!(file.len() < 20_000, "{} bytes", file.len());
    assert!(file.contains("  body12 = {"));
    assert!(!file.contains("body13"));
    assert_eq!(file.matches("field_0_0 = ").count(), 1);
    assert_eq!(file.matches("body = body1;").count(), 2);
    let readme = &files
        .iter()
        .find(|f| f.path == "p/README.md")
        .unwrap()
        .contents;
    assert!(readme.contains("| `right[].*` |  |  |  | The same arguments as `left[]`. |"));
    assert!(readme.len() < 20_000, "{} bytes", readme.len());
}

/// A large schema generates one file per type, each path once. (Its speed is a benchmark:
/// bench/gen.sh times the same schema through `write_for_nix_tests`; no test is timed.)
#[test]
fn a_large_schema_generates_each_file_once() {
    let schema = large(1500);
    let files = generate("large", &schema);
    let names: BTreeSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names.len(), files.len());
    assert!(
        files.len() > 1500,
        "{} files for 1500 resource types",
        files.len()
    );
}

/// Writes the generated files for alpha and kinds (and the large schema when
/// NIVIS_GEN_LARGE is set) under $NIVIS_GEN_OUT, for tests/nix/gen/run.sh. Does nothing
/// without NIVIS_GEN_OUT.
#[test]
fn write_for_nix_tests() {
    let Some(out) = std::env::var_os("NIVIS_GEN_OUT") else {
        return;
    };
    let out = PathBuf::from(out);
    let mut providers = vec![("alpha", alpha()), ("kinds", kinds())];
    if std::env::var_os("NIVIS_GEN_LARGE").is_some() {
        providers.push(("large", large(1500)));
    }
    for (name, schema) in providers {
        let start = Instant::now();
        let files = generate(name, &schema);
        let took = start.elapsed();
        for f in &files {
            let path = out.join(&f.path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, &f.contents).unwrap();
        }
        eprintln!("gen {name}: {} files in {took:?}", files.len());
    }
}
