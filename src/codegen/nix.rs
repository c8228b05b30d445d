//! Nix syntax of the generated files: lists of strings and `#` comments (string literals and
//! attribute names are `crate::nixsyntax`'s, shared with `nixeval` and `cli`).
//!
//! Owns escaping comments, so that no description from a schema can end a comment early. Not:
//! what the generated files say or how they are laid out (`body`, `constructors`); nothing here
//! knows the schema types.

use crate::nixsyntax::nix_string;

/// A Nix list of string literals: `[ "a" "b" ]`, or `[ ]` when empty.
pub(super) fn nix_list(items: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let mut out = String::from("[");
    for item in items {
        out.push(' ');
        out.push_str(&nix_string(item.as_ref()));
    }
    out.push_str(" ]");
    out
}

/// Writes `text` as `#` comment lines at `ind` spaces, the first line after `first`, the
/// others after `rest`. No line of `text` can end the comment early: Nix comments run to
/// `\n` or `\r`, and both split lines here.
pub(super) fn comment(out: &mut String, ind: usize, first: &str, rest: &str, text: &str) {
    let text = if text.contains('\r') {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let mut lines: Vec<&str> = text.split(['\n', '\r']).map(str::trim_end).collect();
    while lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let start = lines
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(lines.len());
    let mut blank = false;
    for (i, line) in lines[start..].iter().enumerate() {
        // Runs of blank lines become one.
        if line.is_empty() {
            blank = true;
            continue;
        }
        if blank {
            for _ in 0..ind {
                out.push(' ');
            }
            out.push_str("#\n");
            blank = false;
        }
        for _ in 0..ind {
            out.push(' ');
        }
        out.push_str("# ");
        out.push_str(if i == 0 { first } else { rest });
        if line.contains('\0') {
            out.push_str(&line.replace('\0', ""));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
}
