//! Nix syntax shared by everything that writes Nix text: string literals and attribute names.
//!
//! Ground floor: plain text in, text out. Owns escaping, so that no name, path or value can end
//! a string early or interpolate (`${`) wherever Nivis writes Nix: the generated constructors
//! (`codegen`), the expressions handed to `nix eval` (`nixeval`), and what the CLI prints or
//! passes to `nix repl` (`cli`). Not: layout, comments or lists of the generated files
//! (`codegen`), nor evaluating anything.

/// A Nix string literal for `s` (`"`, `\` and `$` escaped, so `${` never interpolates; NUL,
/// which Nix strings cannot hold, dropped).
pub(crate) fn nix_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '$' => out.push_str("\\$"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `name` as a Nix attribute name: bare when it is an identifier, else a string literal.
pub(crate) fn nix_attr(name: &str) -> String {
    const KEYWORDS: [&str; 9] = [
        "if", "then", "else", "assert", "with", "let", "in", "rec", "inherit",
    ];
    let mut chars = name.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '\''))
        && !KEYWORDS.contains(&name)
        && name != "or";
    if ident {
        name.to_owned()
    } else {
        nix_string(name)
    }
}

#[cfg(test)]
mod tests {
    use super::nix_string;

    #[test]
    fn a_string_literal_never_interpolates() {
        assert_eq!(
            nix_string("/tmp/a \"b\" ${x}"),
            "\"/tmp/a \\\"b\\\" \\${x}\""
        );
    }
}
