//! The Markdown reference (`README.md`): usage, contents, and per type a table of its
//! arguments (the short descriptions of attributes and types come from `words`).
//!
//! Owns Markdown escaping (table cells, inline code, anchors) and how nested arguments are
//! named in a table (`x[]`, `x.<key>`). Not: the constructor files (`constructors`, `body`),
//! nor which bodies are the same (`body::Shared`, which this only reads).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::body::{Body, Shared};
use super::words::{attr_type_doc, block_doc, block_needed, deprecation, mode};
use super::{file_stem, Kind};
use crate::nixsyntax::nix_attr;
use crate::schema::{
    AttrType, Attribute, Block, BlockNesting, NestedBlock, NestedObject, ObjectNesting,
    ProviderSchema, Schema,
};

// ---------------------------------------------------------------------------------------------
// The README

/// Text for one Markdown table cell: pipes escaped, line breaks as `<br>`.
fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut lines = s
        .trim()
        .split(['\n', '\r'])
        .filter(|l| !l.trim().is_empty());
    if let Some(first) = lines.next() {
        out.push_str(first.trim_end());
    }
    for line in lines {
        out.push_str("<br>");
        out.push_str(line.trim_end());
    }
    if out.contains(['|', '\0']) {
        out.replace('|', "\\|").replace('\0', "")
    } else {
        out
    }
}

/// Inline code for a name or path, safe inside a table cell.
fn code(s: &str) -> String {
    let fence = if s.contains('`') { "``" } else { "`" };
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{}{pad}{fence}", s.replace('|', "\\|"))
}

fn anchor(kind: Kind, name: &str) -> String {
    let prefix = match kind {
        Kind::Provider => "provider",
        Kind::Resource => "resource",
        Kind::Data => "data",
    };
    format!("{prefix}-{}", file_stem(name).replace('+', "_"))
}

/// The segment that continues a path into the objects of a collection.
fn member_path(path: &str, single: bool, map: bool) -> String {
    if single {
        path.to_owned()
    } else if map {
        format!("{path}.<key>")
    } else {
        format!("{path}[]")
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}.{name}")
    }
}

/// Rows for the arguments of `body`, below `prefix`. A nested body of more than three
/// arguments already documented in this type (`seen`: distinct body to its first path) is
/// referred to instead of repeated.
fn table_rows(
    out: &mut String,
    prefix: &str,
    body: Body,
    shared: &Shared,
    seen: &mut HashMap<usize, String>,
) {
    for (name, a) in body.attrs {
        let path = join(prefix, name);
        attr_row(out, &path, a);
        if let AttrType::Nested(obj) = &a.ty {
            let inner = member_path(
                &path,
                obj.nesting == ObjectNesting::Single,
                obj.nesting == ObjectNesting::Map,
            );
            let addr = obj as *const NestedObject as usize;
            nested_rows(out, &inner, addr, Body::of_object(obj), shared, seen);
        }
    }
    for (name, nb) in body.blocks.into_iter().flatten() {
        let path = join(prefix, name);
        block_row(out, &path, nb);
        let inner = member_path(
            &path,
            matches!(nb.nesting, BlockNesting::Single | BlockNesting::Group),
            nb.nesting == BlockNesting::Map,
        );
        let addr = &nb.block as *const Block as usize;
        nested_rows(out, &inner, addr, Body::of_block(&nb.block), shared, seen);
    }
}

/// The rows of a nested body at `path` (occurrence `addr`), or one row pointing to where the
/// same body is documented already, when it is large enough for that to save space.
fn nested_rows(
    out: &mut String,
    path: &str,
    addr: usize,
    body: Body,
    shared: &Shared,
    seen: &mut HashMap<usize, String>,
) {
    let id = shared.id(addr);
    let small = body.attrs.len() + body.blocks.map_or(0, BTreeMap::len) <= 3;
    if let Some(first) = seen.get(&id).filter(|_| !small) {
        let _ = writeln!(
            out,
            "| {} |  |  |  | The same arguments as {}. |",
            code(&format!("{path}.*")),
            code(first)
        );
    } else {
        seen.insert(id, path.to_owned());
        table_rows(out, path, body, shared, seen);
    }
}

/// The row of attribute `a` at `path`.
fn attr_row(out: &mut String, path: &str, a: &Attribute) {
    let mut desc = String::new();
    if let Some(msg) = deprecation(a) {
        desc.push_str("**Deprecated**");
        if !msg.trim().is_empty() {
            let _ = write!(desc, ": {}", cell(msg));
        }
        if !desc.ends_with(['.', '!', '?']) {
            desc.push('.');
        }
        desc.push(' ');
    }
    if a.write_only {
        desc.push_str("Write-only (never stored in state). ");
    }
    desc.push_str(&cell(&a.description));
    let _ = writeln!(
        out,
        "| {} | {} | {} | {} | {} |",
        code(path),
        code(&attr_type_doc(a)),
        mode(a),
        if a.sensitive { "yes" } else { "" },
        desc.trim_end()
    );
}

/// The row of block `nb` at `path` (its arguments are rows of their own).
fn block_row(out: &mut String, path: &str, nb: &NestedBlock) {
    let mut desc = String::new();
    if nb.block.deprecated {
        desc.push_str("**Deprecated**. ");
    }
    desc.push_str(&cell(&nb.block.description));
    let _ = writeln!(
        out,
        "| {} | {} | {} |  | {} |",
        code(path),
        block_doc(nb),
        if block_needed(nb) {
            "required"
        } else {
            "optional"
        },
        desc.trim_end()
    );
}

pub(super) fn type_section(out: &mut String, kind: Kind, name: &str, s: &Schema, shared: &Shared) {
    let _ = writeln!(out, "<a id=\"{}\"></a>", anchor(kind, name));
    let _ = writeln!(out, "### {}\n", code(name));
    if s.block.deprecated {
        out.push_str("**Deprecated.**\n\n");
    }
    if !s.block.description.trim().is_empty() {
        let _ = writeln!(out, "{}\n", s.block.description.trim().replace('\r', ""));
    }
    if kind != Kind::Provider {
        let _ = writeln!(out, "Schema version {}.\n", s.version);
    }
    if s.block.attributes.is_empty() && s.block.block_types.is_empty() {
        out.push_str("No arguments.\n\n");
        return;
    }
    out.push_str("| Argument | Type | Use | Sensitive | Description |\n");
    out.push_str("| --- | --- | --- | --- | --- |\n");
    let mut seen = HashMap::new();
    table_rows(out, "", Body::of_block(&s.block), shared, &mut seen);
    out.push('\n');
}

/// The README up to the sections of the types: usage and contents.
pub(super) fn readme_head(provider: &str, schema: &ProviderSchema) -> String {
    let mut out = String::with_capacity(4096);
    let dir = file_stem(provider);
    let _ = writeln!(out, "# Provider {}: Nix constructors\n", code(provider));
    out.push_str(
        "Generated by `nivis gen` from the provider's schema. Do not edit: regenerate it.\n\n",
    );
    out.push_str("```nix\n");
    let _ = writeln!(out, "p = import ./{dir} lib;   # lib: the Nivis library");
    if let Some(t) = schema.resources.keys().next() {
        let _ = writeln!(
            out,
            "p.resources.{} {{ name = \"a\"; config = {{ ... }}; }}   # lib.mkResource",
            nix_attr(t)
        );
    }
    if let Some(t) = schema.data_sources.keys().next() {
        let _ = writeln!(
            out,
            "p.data.{} {{ name = \"b\"; config = {{ ... }}; }}   # lib.mkData",
            nix_attr(t)
        );
    }
    out.push_str("p.provider { source = \"...\"; config = { ... }; }   # lib.mkProvider\n```\n\n");
    let _ = writeln!(
        out,
        "A constructor takes `name`, the arguments below in `config`, and optionally \
         `provider` (default `{}`), `dependsOn`, `lifecycle` (resources only) and `overrides` \
         (a function from the `mkResource`/`mkData` argument set to the one used). The config \
         is checked when Nix evaluates it: missing required arguments, outputs given as inputs, \
         unknown names and mistyped values throw an error naming the type and the argument \
         (the provider's own required arguments excepted: providers often read them from \
         environment variables, so the provider itself reports them missing). References (`refAttr`, `ref`), `lib.str`, `lib.compute` and `lib.drv` values are \
         accepted wherever a value goes; `null` leaves an argument unset.\n",
        provider.replace('`', "")
    );
    out.push_str(
        "Use: *required* arguments must be set; *optional* ones may be; *computed* ones are \
         outputs the provider decides (read them with `refAttr`); *optional, computed* ones \
         are decided by the provider when not set. In paths, `x[]` is each element of a \
         list or set and `x.<key>` each entry of a map.\n\n",
    );
    for (title, kind, types) in [
        ("Resources", Kind::Resource, &schema.resources),
        ("Data sources", Kind::Data, &schema.data_sources),
    ] {
        let _ = write!(out, "{title}:");
        if types.is_empty() {
            out.push_str(" none.");
        }
        for (i, name) in types.keys().enumerate() {
            let _ = write!(
                out,
                "{} [{}](#{})",
                if i == 0 { "" } else { "," },
                code(name),
                anchor(kind, name)
            );
        }
        out.push_str("\n\n");
    }
    out
}
