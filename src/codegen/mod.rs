//! `nivis gen`: typed Nix constructors and reference docs from a provider's schema.
//!
//! Owns turning a [`ProviderSchema`] into text: per provider, an index (`default.nix`), a
//! provider constructor (`provider.nix`), one constructor file per resource type
//! (`resources/<type>.nix`) and per data source type (`data/<type>.nix`), and a Markdown
//! reference (`README.md`). Each constructor carries its type's schema as Nix data, with the
//! descriptions and deprecation notes as comments, and hands it to `lib.typecheck`
//! (`nix/lib/typecheck.nix`), which checks a call's `config` at evaluation time: required and
//! computed-only arguments, unknown names (with the nearest valid one), value types, nested
//! attributes and blocks with their nesting mode and item counts. Nested bodies that occur
//! more than once in a type (large providers repeat whole subtrees) are written once, as
//! `let` bindings of its file, and documented once in the README. Output is deterministic:
//! the same schema gives byte-identical files, in path order.
//!
//! Not: fetching schemas (the plugin client), writing files or choosing where (the CLI), or
//! the checks themselves (`nix/lib/typecheck.nix`). Nothing here does I/O.
//!
//! Shape of a generated constructor: `lib: { name, config ? { }, provider ? "<provider>",
//! dependsOn ? [ ], lifecycle ? { }, overrides ? (args: args), ... }@args: lib.mkResource ...`
//! (no `lifecycle` for data sources). Arguments go in `config` rather than flat, because
//! provider attributes named `name`, `provider`, `lifecycle` or `count` are common; this also
//! mirrors `mkResource` exactly. `overrides` maps the checked `mkResource` argument set to the
//! one actually used: the seam for adjusting generated output or working around a stale schema.
//!
//! The parts: this file walks the schema and names the files ([`generate`]); `nix` writes Nix
//! syntax (string literals, attribute names, comments); `body` finds a type's repeated bodies
//! and writes the schema specs `lib.typecheck` reads; `constructors` lays out the constructor
//! files and the index around those specs; `docs` writes the README, and the short
//! descriptions of attributes and types that the constructor comments share with it.

mod body;
mod constructors;
mod docs;
mod nix;
#[cfg(test)]
mod tests;
mod words;

use std::fmt::Write as _;

use crate::schema::ProviderSchema;

use body::{Body, Shared};
use constructors::{constructor_file, index_file};
use docs::{readme_head, type_section};

/// One generated file: its path relative to the output directory, and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GeneratedFile {
    /// Relative path, `/`-separated, e.g. `null/resources/null_resource.nix`.
    pub(crate) path: String,
    /// The file's contents.
    pub(crate) contents: String,
}

/// Generates the constructors and reference docs of provider `provider_name` (the provider id
/// the constructors default to, as declared in `toIR`'s `providers`; it also names the
/// directory). The files come sorted by path.
pub(crate) fn generate(provider_name: &str, schema: &ProviderSchema) -> Vec<GeneratedFile> {
    let dir = file_stem(provider_name);
    let mut files = Vec::with_capacity(3 + schema.resources.len() + schema.data_sources.len());
    let mut readme = readme_head(provider_name, schema);
    readme.push_str("## Provider configuration\n\n");
    let shared = Shared::new(Body::of_block(&schema.provider.block));
    type_section(
        &mut readme,
        Kind::Provider,
        provider_name,
        &schema.provider,
        &shared,
    );
    files.push(GeneratedFile {
        path: format!("{dir}/provider.nix"),
        contents: constructor_file(
            provider_name,
            Kind::Provider,
            provider_name,
            &schema.provider,
            &shared,
        ),
    });
    for (title, kind, types) in [
        ("Resources", Kind::Resource, &schema.resources),
        ("Data sources", Kind::Data, &schema.data_sources),
    ] {
        let _ = writeln!(readme, "## {title}\n");
        for (type_name, s) in types {
            let shared = Shared::new(Body::of_block(&s.block));
            type_section(&mut readme, kind, type_name, s, &shared);
            files.push(GeneratedFile {
                path: format!("{dir}/{}/{}.nix", kind.dir(), file_stem(type_name)),
                contents: constructor_file(provider_name, kind, type_name, s, &shared),
            });
        }
    }
    while readme.ends_with("\n\n") {
        readme.pop();
    }
    files.push(GeneratedFile {
        path: format!("{dir}/README.md"),
        contents: readme,
    });
    files.push(GeneratedFile {
        path: format!("{dir}/default.nix"),
        contents: index_file(provider_name, schema),
    });
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Provider,
    Resource,
    Data,
}

impl Kind {
    fn dir(self) -> &'static str {
        match self {
            Kind::Provider => "",
            Kind::Resource => "resources",
            Kind::Data => "data",
        }
    }
}

/// A file or directory name for `name`: letters, digits, `_`, `-` and (not first) `.` as they
/// are, every other byte as `+XX`. Injective, and always a valid Nix path segment.
fn file_stem(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || (b == b'.' && i > 0) {
            out.push(b as char);
        } else {
            let _ = write!(out, "+{b:02X}");
        }
    }
    if out.is_empty() {
        out.push('+');
    }
    out
}
