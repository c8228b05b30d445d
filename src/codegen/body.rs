//! The schema specs of the constructor files (the data `lib.typecheck` reads, see
//! `nix/lib/typecheck.nix`), and the interning of a type's nested bodies that lets each
//! distinct body be written once.
//!
//! Owns the layout of a body spec (`attrs`, `blocks`, `names`, `required`, `needed`), the
//! spelling of value types in it, and the comments that describe each argument. Not: what
//! surrounds the spec in a file (`constructors`), nor the README (`docs`, which only reads
//! [`Shared`] to document a repeated body once).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use super::nix::{comment, nix_list};
use super::words::{
    attr_type_doc, block_doc, block_needed, block_nesting, deprecation, mode, object_nesting,
};
use crate::nixsyntax::{nix_attr, nix_string};
use crate::schema::{AttrType, Attribute, Block, NestedBlock, NestedObject};
use crate::value::Type;

/// What a spec describes: a block's body, or the objects of a nested attribute (no blocks).
#[derive(Clone, Copy)]
pub(super) struct Body<'a> {
    pub(super) attrs: &'a BTreeMap<String, Attribute>,
    pub(super) blocks: Option<&'a BTreeMap<String, NestedBlock>>,
}

impl<'a> Body<'a> {
    pub(super) fn of_block(b: &'a Block) -> Body<'a> {
        Body {
            attrs: &b.attributes,
            blocks: Some(&b.block_types),
        }
    }

    pub(super) fn of_object(o: &'a NestedObject) -> Body<'a> {
        Body {
            attrs: &o.attributes,
            blocks: None,
        }
    }

    /// The nested bodies directly below this one, with the address that identifies each
    /// occurrence.
    fn children(self) -> impl Iterator<Item = (usize, Body<'a>)> {
        let objects = self.attrs.values().filter_map(|a| match &a.ty {
            AttrType::Nested(o) => Some((o as *const NestedObject as usize, Body::of_object(o))),
            AttrType::Type(_) => None,
        });
        let blocks = self.blocks.into_iter().flatten().map(|(_, nb)| {
            (
                &nb.block as *const Block as usize,
                Body::of_block(&nb.block),
            )
        });
        objects.chain(blocks)
    }
}

/// The nested bodies of one type, deduplicated by content. Large providers repeat whole
/// subtrees (a statement block nested in itself a dozen levels deep): each distinct body is
/// written once, and one used in more than one place becomes a `let` binding of the file.
pub(super) struct Shared<'a> {
    /// Occurrence (address of its Block or NestedObject) to distinct body.
    by_addr: HashMap<usize, usize>,
    by_key: HashMap<String, usize>,
    /// One occurrence of each distinct body.
    pub(super) bodies: Vec<Body<'a>>,
    /// Distinct body to its binding number, when it is bound in the `let`.
    pub(super) bound: Vec<Option<usize>>,
}

impl<'a> Shared<'a> {
    pub(super) fn new(top: Body<'a>) -> Shared<'a> {
        let mut s = Shared {
            by_addr: HashMap::new(),
            by_key: HashMap::new(),
            bodies: Vec::new(),
            bound: Vec::new(),
        };
        // Each distinct body is written exactly once (inline or bound), so the places that
        // refer to it are its occurrences in the top body and in the distinct bodies.
        let mut refs = Vec::new();
        for (addr, child) in top.children() {
            let id = s.intern(addr, child, &mut refs);
            refs[id] += 1;
        }
        let mut n = 0;
        s.bound = refs
            .iter()
            .map(|&r| {
                (r > 1).then(|| {
                    n += 1;
                    n
                })
            })
            .collect();
        s
    }

    fn intern(&mut self, addr: usize, body: Body<'a>, refs: &mut Vec<usize>) -> usize {
        let mut children = Vec::new();
        for (child_addr, child) in body.children() {
            children.push(self.intern(child_addr, child, refs));
        }
        let mut key = String::new();
        body_spec(&mut key, 0, body, None, false, Emit::Key(self));
        let id = match self.by_key.get(&key) {
            Some(&id) => id,
            None => {
                let id = self.bodies.len();
                self.bodies.push(body);
                self.by_key.insert(key, id);
                refs.push(0);
                for c in children {
                    refs[c] += 1;
                }
                id
            }
        };
        self.by_addr.insert(addr, id);
        id
    }

    pub(super) fn id(&self, addr: usize) -> usize {
        self.by_addr[&addr]
    }
}

/// How `body_spec` writes a nested body.
#[derive(Clone, Copy)]
pub(super) enum Emit<'s, 'a> {
    /// As a placeholder naming its distinct body (NUL never occurs in generated text): for
    /// the keys that find equal bodies.
    Key(&'s Shared<'a>),
    /// As the name of its binding, or inline.
    Text(&'s Shared<'a>),
}

/// Writes the nested body at occurrence `addr` the way `emit` says.
fn child_spec(out: &mut String, ind: usize, addr: usize, body: Body, emit: Emit) {
    match emit {
        Emit::Key(shared) => {
            let _ = write!(out, "\0{}\0", shared.id(addr));
        }
        Emit::Text(shared) => match shared.bound[shared.id(addr)] {
            Some(n) => {
                let _ = write!(out, "body{n}");
            }
            None => body_spec(out, ind, body, None, false, emit),
        },
    }
}

/// Writes value type `t` as the spec's `t` field spells it: `"string"`, `{ list = ...; }`.
fn type_spec(t: &Type, out: &mut String) {
    let tagged = |out: &mut String, tag: &str, inner: &Type| {
        let _ = write!(out, "{{ {tag} = ");
        type_spec(inner, out);
        out.push_str("; }");
    };
    match t {
        Type::String => out.push_str("\"string\""),
        Type::Number => out.push_str("\"number\""),
        Type::Bool => out.push_str("\"bool\""),
        Type::Dynamic => out.push_str("\"dynamic\""),
        Type::List(e) => tagged(out, "list", e),
        Type::Set(e) => tagged(out, "set", e),
        Type::Map(e) => tagged(out, "map", e),
        Type::Tuple(ts) => {
            out.push_str("{ tuple = [");
            for t in ts {
                out.push(' ');
                type_spec(t, out);
            }
            out.push_str(" ]; }");
        }
        Type::Object { attrs, optional } => {
            out.push_str("{ object = {");
            for (k, v) in attrs {
                let _ = write!(out, " {} = ", nix_attr(k));
                type_spec(v, out);
                out.push(';');
            }
            out.push_str(" };");
            if !optional.is_empty() {
                let _ = write!(out, " opt = {};", nix_list(optional));
            }
            out.push_str(" }");
        }
    }
}

/// Writes a body spec (see nix/lib/typecheck.nix) opened on the current line and closed at
/// `ind` spaces, without a trailing `;`. With `env_required`, required attributes are not
/// enforced: a provider's own configuration, where SDKv2 providers call an argument required
/// only because the environment variable that supplies it was unset when `nivis gen` ran.
pub(super) fn body_spec(
    out: &mut String,
    ind: usize,
    body: Body,
    dep: Option<&str>,
    env_required: bool,
    emit: Emit,
) {
    let i1 = ind + 2;
    out.push_str("{\n");
    if let Some(msg) = dep {
        let _ = writeln!(out, "{:i1$}dep = {};", "", nix_string(msg));
    }
    attrs_spec(out, i1, body.attrs, emit);
    let empty = BTreeMap::new();
    let blocks = body.blocks.unwrap_or(&empty);
    blocks_spec(out, i1, blocks, emit);
    name_lists(out, i1, body.attrs, blocks, env_required);
    let _ = write!(out, "{:ind$}}}", "");
}

/// Writes the `attrs = { ... };` line(s) of a body spec at `ind` spaces.
fn attrs_spec(out: &mut String, ind: usize, attrs: &BTreeMap<String, Attribute>, emit: Emit) {
    if attrs.is_empty() {
        let _ = writeln!(out, "{:ind$}attrs = {{ }};", "");
        return;
    }
    let _ = writeln!(out, "{:ind$}attrs = {{", "");
    for (name, a) in attrs {
        attr_comment(out, ind + 2, name, a);
        attr_spec(out, ind + 2, name, a, emit);
    }
    let _ = writeln!(out, "{:ind$}}};", "");
}

/// The comment above an attribute's spec: its type and use, deprecation, description.
fn attr_comment(out: &mut String, ind: usize, name: &str, a: &Attribute) {
    let mut head = format!("{name}: {}, {}", attr_type_doc(a), mode(a));
    if a.sensitive {
        head.push_str(", sensitive");
    }
    if a.write_only {
        head.push_str(", write-only");
    }
    head.push('.');
    comment(out, ind, "", "  ", &head);
    if let Some(msg) = deprecation(a) {
        let note = if msg.is_empty() {
            "(no reason given)"
        } else {
            msg
        };
        comment(out, ind, "DEPRECATED: ", "  ", note);
    }
    comment(out, ind, "  ", "  ", &a.description);
}

/// Writes `name = { t = ...; };` for one attribute at `ind` spaces; a nested attribute's
/// objects as a body of their own.
fn attr_spec(out: &mut String, ind: usize, name: &str, a: &Attribute, emit: Emit) {
    let mut extra = String::new();
    if a.is_computed_only() {
        extra.push_str(" out = true;");
    }
    if let Some(msg) = deprecation(a) {
        let _ = write!(extra, " dep = {};", nix_string(msg));
    }
    match &a.ty {
        AttrType::Type(t) => {
            let _ = write!(out, "{:ind$}{} = {{ t = ", "", nix_attr(name));
            type_spec(t, out);
            let _ = writeln!(out, ";{extra} }};");
        }
        AttrType::Nested(obj) => {
            let i1 = ind + 2;
            let i2 = ind + 4;
            let _ = writeln!(out, "{:ind$}{} = {{", "", nix_attr(name));
            if !extra.is_empty() {
                let _ = writeln!(out, "{:i1$}{}", "", extra.trim());
            }
            let _ = writeln!(out, "{:i1$}t = {{", "");
            let _ = writeln!(
                out,
                "{:i2$}nested = \"{}\";",
                "",
                object_nesting(obj.nesting)
            );
            let _ = write!(out, "{:i2$}body = ", "");
            let addr = obj as *const NestedObject as usize;
            child_spec(out, i2, addr, Body::of_object(obj), emit);
            let _ = writeln!(out, ";\n{:i1$}}};\n{:ind$}}};", "", "");
        }
    }
}

/// Writes the `blocks = { ... };` lines of a body spec at `ind` spaces, none when there are no
/// blocks.
fn blocks_spec(out: &mut String, ind: usize, blocks: &BTreeMap<String, NestedBlock>, emit: Emit) {
    if blocks.is_empty() {
        return;
    }
    let _ = writeln!(out, "{:ind$}blocks = {{", "");
    for (name, nb) in blocks {
        block_spec(out, ind + 2, name, nb, emit);
    }
    let _ = writeln!(out, "{:ind$}}};", "");
}

/// Writes one block type's comment and `name = { nest = ...; body = ...; };` at `ind` spaces.
fn block_spec(out: &mut String, ind: usize, name: &str, nb: &NestedBlock, emit: Emit) {
    let i1 = ind + 2;
    let head = format!("{name}: {}.", block_doc(nb));
    comment(out, ind, "", "  ", &head);
    if nb.block.deprecated {
        comment(out, ind, "", "", "DEPRECATED.");
    }
    comment(out, ind, "  ", "  ", &nb.block.description);
    let _ = writeln!(out, "{:ind$}{} = {{", "", nix_attr(name));
    let _ = writeln!(out, "{:i1$}nest = \"{}\";", "", block_nesting(nb.nesting));
    if nb.min_items > 0 {
        let _ = writeln!(out, "{:i1$}min = {};", "", nb.min_items);
    }
    if nb.max_items > 0 {
        let _ = writeln!(out, "{:i1$}max = {};", "", nb.max_items);
    }
    if nb.block.deprecated {
        let _ = writeln!(out, "{:i1$}dep = \"\";", "");
    }
    let _ = write!(out, "{:i1$}body = ", "");
    let addr = &nb.block as *const Block as usize;
    child_spec(out, i1, addr, Body::of_block(&nb.block), emit);
    let _ = writeln!(out, ";\n{:ind$}}};", "");
}

/// Writes the name lists of a body spec at `ind` spaces: `names` (what may be set), and
/// `required` and `needed` (attributes and blocks that must be) when there are any. With
/// `env_required`, the required names go in a comment instead (see [`body_spec`]).
fn name_lists(
    out: &mut String,
    ind: usize,
    attrs: &BTreeMap<String, Attribute>,
    blocks: &BTreeMap<String, NestedBlock>,
    env_required: bool,
) {
    let mut settable: Vec<&str> = attrs
        .iter()
        .filter(|(_, a)| !a.is_computed_only())
        .map(|(k, _)| k.as_str())
        .chain(blocks.keys().map(String::as_str))
        .collect();
    settable.sort_unstable();
    let _ = writeln!(out, "{:ind$}names = {};", "", nix_list(&settable));
    let required: Vec<&str> = attrs
        .iter()
        .filter(|(_, a)| a.required)
        .map(|(k, _)| k.as_str())
        .collect();
    if !required.is_empty() && env_required {
        let _ = writeln!(
            out,
            "{:ind$}# Required by the schema, but the provider may read them from its environment: {}.",
            "",
            required.join(", ")
        );
    } else if !required.is_empty() {
        let _ = writeln!(out, "{:ind$}required = {};", "", nix_list(&required));
    }
    let needed: Vec<&str> = blocks
        .iter()
        .filter(|(_, nb)| block_needed(nb))
        .map(|(k, _)| k.as_str())
        .collect();
    if !needed.is_empty() {
        let _ = writeln!(out, "{:ind$}needed = {};", "", nix_list(&needed));
    }
}
