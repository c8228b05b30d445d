//! Attribute paths as the IR writes them (edge `via`, `ignoreChanges`, error locations):
//! parsing and rendering `disk[0].size`, `tags["a.b"]`.

use std::fmt;

use super::rules::is_ident;

/// One step of an attribute path: an attribute/map key or a list index.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PathStep {
    /// An attribute name or map key.
    Key(String),
    /// A list index.
    Index(u64),
}

impl fmt::Display for PathStep {
    /// A step as it renders at the start of a path: `name`, `["a.b"]` or `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&render_path(std::slice::from_ref(self)))
    }
}

/// The step naming the attribute or map key `k`.
pub(super) fn key(k: &str) -> PathStep {
    PathStep::Key(k.to_string())
}

/// The same path in the value model's steps (the first step names an attribute), for
/// diagnostics.
pub(crate) fn value_path(steps: &[PathStep]) -> Vec<crate::value::PathStep> {
    use crate::value::PathStep as V;
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| match s {
            PathStep::Key(k) if i == 0 => V::Attr(k.clone()),
            PathStep::Key(k) => V::Key(k.clone()),
            PathStep::Index(n) => V::Index(*n),
        })
        .collect()
}

/// Render path steps the way the IR writes attribute paths (edge `via`,
/// `ignoreChanges`, error locations): `disk[0].size`, `tags["a.b"]`.
/// Keys that are not identifiers are quoted as Nix's `builtins.toJSON` would.
pub(crate) fn render_path(steps: &[PathStep]) -> String {
    let mut out = String::new();
    for (i, step) in steps.iter().enumerate() {
        match step {
            PathStep::Index(n) => out.push_str(&format!("[{n}]")),
            PathStep::Key(k) if is_ident(k) => {
                if i > 0 {
                    out.push('.');
                }
                out.push_str(k);
            }
            PathStep::Key(k) => {
                out.push('[');
                quote_into(&mut out, k);
                out.push(']');
            }
        }
    }
    out
}

pub(super) fn quote_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Parse a rendered attribute path (`tags.env`, `disk[0].size`, `tags["a.b"]`).
/// `None` when the text is not a path; `"*"` is not a path (see [`IgnorePath`]).
pub(crate) fn parse_path(text: &str) -> Option<Vec<PathStep>> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut steps = Vec::new();
    while i < b.len() || steps.is_empty() {
        let first = steps.is_empty();
        match b.get(i) {
            Some(b'[') if b.get(i + 1) == Some(&b'"') => {
                let (key, next) = parse_quoted(text, i + 1)?;
                if b.get(next) != Some(&b']') {
                    return None;
                }
                steps.push(PathStep::Key(key));
                i = next + 1;
            }
            Some(b'[') if !first => {
                let start = i + 1;
                let mut end = start;
                while end < b.len() && b[end].is_ascii_digit() {
                    end += 1;
                }
                let digits = &text[start..end];
                if digits.is_empty()
                    || (digits.len() > 1 && digits.starts_with('0'))
                    || b.get(end) != Some(&b']')
                {
                    return None;
                }
                steps.push(PathStep::Index(digits.parse().ok()?));
                i = end + 1;
            }
            Some(b'.') if !first => {
                let (key, next) = take_ident(text, i + 1)?;
                steps.push(PathStep::Key(key.to_string()));
                i = next;
            }
            Some(_) if first => {
                let (key, next) = take_ident(text, i)?;
                steps.push(PathStep::Key(key.to_string()));
                i = next;
            }
            _ => return None,
        }
    }
    Some(steps)
}

pub(super) fn take_ident(text: &str, start: usize) -> Option<(&str, usize)> {
    let b = text.as_bytes();
    let mut end = start;
    while end < b.len() && (b[end].is_ascii_alphanumeric() || b[end] == b'_' || b[end] == b'-') {
        end += 1;
    }
    let ident = &text[start..end];
    is_ident(ident).then_some((ident, end))
}

/// A JSON string literal starting at the quote at `start`; returns the text and
/// the index after the closing quote.
pub(super) fn parse_quoted(text: &str, start: usize) -> Option<(String, usize)> {
    let mut out = String::new();
    let mut chars = text[start + 1..].char_indices();
    while let Some((offset, c)) = chars.next() {
        match c {
            '"' => return Some((out, start + 1 + offset + 1)),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    '"' | '\\' | '/' => out.push(e),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'u' => {
                        let mut code = 0u32;
                        for _ in 0..4 {
                            let (_, h) = chars.next()?;
                            code = code * 16 + h.to_digit(16)?;
                        }
                        // A lone surrogate is well-formed path syntax; keep the
                        // step readable rather than rejecting it.
                        out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
                    }
                    _ => return None,
                }
            }
            c if (c as u32) < 0x20 => return None,
            c => out.push(c),
        }
    }
    None
}
