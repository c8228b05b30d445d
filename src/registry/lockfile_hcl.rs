//! Reading and writing the `.terraform.lock.hcl` syntax.
//!
//! Reads the subset of HCL that OpenTofu and Terraform write into lock files (comments,
//! `provider "ADDR" { … }` blocks with the `version`, `constraints` and `hashes` arguments,
//! `module` blocks that are ignored with a warning) and writes it back exactly as
//! `tofu providers lock` formats it: header comment, blank line between blocks, `=` aligned
//! across consecutive one-line arguments, one hash per line with a trailing comma. Owns only
//! the syntax; the model and its rules are in `lockfile`.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::address::{NotationError, ProviderAddr, Version};
use super::hash::Hash;
use super::lockfile::{LockFile, LockedProvider, NIVIS_HEADER_TOOL};

const HEADER_PREFIX: &str = "# This file is maintained automatically by \"";
const HEADER_SUFFIX: &str = "\".";
const HEADER_SECOND: &str = "# Manual edits may be lost in future updates.";

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    LBrace,
    RBrace,
    LBrack,
    RBrack,
    Eq,
    Comma,
    Newline,
}

type Error = (usize, String);

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, Error> {
    let mut out = Vec::new();
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                out.push((Tok::Newline, line));
                line += 1;
            }
            ' ' | '\t' | '\r' => {}
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'/') => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let start = line;
                let mut prev = ' ';
                loop {
                    match chars.next() {
                        Some('/') if prev == '*' => break,
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            prev = c;
                        }
                        None => return Err((start, "unterminated /* comment".into())),
                    }
                }
            }
            '{' => out.push((Tok::LBrace, line)),
            '}' => out.push((Tok::RBrace, line)),
            '[' => out.push((Tok::LBrack, line)),
            ']' => out.push((Tok::RBrack, line)),
            '=' => out.push((Tok::Eq, line)),
            ',' => out.push((Tok::Comma, line)),
            '"' => out.push((Tok::Str(lex_string(&mut chars, line)?), line)),
            c if c.is_alphanumeric() || c == '_' => {
                // Identifiers, and numbers (only ever skipped, inside module blocks).
                let mut id = c.to_string();
                while let Some(&n) = chars.peek() {
                    if n.is_alphanumeric() || n == '_' || n == '-' || n == '.' {
                        id.push(n);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push((Tok::Ident(id), line));
            }
            other => {
                return Err((
                    line,
                    format!("unexpected {other:?}: only strings and lists of strings are allowed in a lock file"),
                ))
            }
        }
    }
    Ok(out)
}

fn lex_string(
    chars: &mut std::iter::Peekable<std::str::Chars>,
    line: usize,
) -> Result<String, Error> {
    let mut s = String::new();
    loop {
        let c = chars
            .next()
            .ok_or((line, "unterminated string".to_string()))?;
        match c {
            '"' => return Ok(s),
            '\n' => return Err((line, "unterminated string".into())),
            '\\' => {
                let e = chars
                    .next()
                    .ok_or((line, "unterminated string".to_string()))?;
                match e {
                    'n' => s.push('\n'),
                    'r' => s.push('\r'),
                    't' => s.push('\t'),
                    '"' => s.push('"'),
                    '\\' => s.push('\\'),
                    'u' | 'U' => {
                        let n = if e == 'u' { 4 } else { 8 };
                        let hex: String = (0..n).filter_map(|_| chars.next()).collect();
                        let ch = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or((line, format!("invalid escape \\{e}{hex}")))?;
                        s.push(ch);
                    }
                    other => return Err((line, format!("invalid escape \\{other}"))),
                }
            }
            '$' | '%' if chars.peek() == Some(&c) => {
                // `$${` and `%%{` are literal `${` and `%{`.
                chars.next();
                s.push(c);
                if chars.peek() != Some(&'{') {
                    s.push(c);
                }
            }
            '$' | '%' if chars.peek() == Some(&'{') => {
                return Err((
                    line,
                    "template sequences are not allowed in a lock file".into(),
                ))
            }
            c => s.push(c),
        }
    }
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }
    fn line(&self) -> usize {
        self.toks
            .get(self.pos)
            .or(self.toks.last())
            .map_or(1, |t| t.1)
    }
    fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t
    }
    fn skip_newlines(&mut self) {
        while self.peek() == Some(&Tok::Newline) {
            self.pos += 1;
        }
    }
    fn expect(&mut self, want: Tok, what: &str) -> Result<(), Error> {
        let line = self.line();
        match self.next() {
            Some(t) if t == want => Ok(()),
            Some(t) => Err((line, format!("expected {what}, found {}", describe(&t)))),
            None => Err((line, format!("expected {what}, found the end of the file"))),
        }
    }
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Ident(i) => format!("{i:?}"),
        Tok::Str(s) => format!("string {s:?}"),
        Tok::LBrace => "'{'".into(),
        Tok::RBrace => "'}'".into(),
        Tok::LBrack => "'['".into(),
        Tok::RBrack => "']'".into(),
        Tok::Eq => "'='".into(),
        Tok::Comma => "','".into(),
        Tok::Newline => "a new line".into(),
    }
}

enum Value {
    Str(String),
    List(Vec<String>),
}

/// Parses lock file text; errors carry a 1-based line.
pub(crate) fn parse(text: &str) -> Result<LockFile, Error> {
    let mut lock = LockFile {
        header_tool: header_tool(text),
        ..LockFile::default()
    };
    let mut p = Parser {
        toks: lex(text)?,
        pos: 0,
    };
    loop {
        p.skip_newlines();
        let line = p.line();
        let kind = match p.next() {
            None => break,
            Some(Tok::Ident(k)) => k,
            Some(t) => return Err((line, format!("expected a block, found {}", describe(&t)))),
        };
        let mut labels = Vec::new();
        while let Some(Tok::Str(_)) = p.peek() {
            if let Some(Tok::Str(s)) = p.next() {
                labels.push(s);
            }
        }
        p.expect(Tok::LBrace, "'{'")?;
        match kind.as_str() {
            "provider" => {
                let [label] = labels.as_slice() else {
                    return Err((
                        line,
                        "a provider block takes exactly one label, the provider address".into(),
                    ));
                };
                let addr = provider_label(label).map_err(|e| (line, e.to_string()))?;
                let entry = provider_body(&mut p, line)?;
                if lock.providers.insert(addr.clone(), entry).is_some() {
                    return Err((line, format!("duplicate provider block for {addr}")));
                }
            }
            "module" => {
                lock.warnings.push(format!(
                    "line {line}: module blocks in the lock file are ignored"
                ));
                skip_block(&mut p, line)?;
            }
            other => {
                return Err((
                    line,
                    format!("unsupported block type {other:?}: a lock file holds provider blocks"),
                ))
            }
        }
    }
    Ok(lock)
}

fn header_tool(text: &str) -> Option<String> {
    let mut lines = text.lines();
    let first = lines.next()?;
    let tool = first
        .strip_prefix(HEADER_PREFIX)?
        .strip_suffix(HEADER_SUFFIX)?;
    (lines.next() == Some(HEADER_SECOND) && !tool.contains('"')).then(|| tool.to_string())
}

fn provider_label(label: &str) -> Result<ProviderAddr, LabelError> {
    let addr = ProviderAddr::parse(label).map_err(|cause| LabelError::Invalid {
        label: label.into(),
        cause,
    })?;
    if addr.to_string() != label {
        return Err(LabelError::NotNormal {
            label: label.into(),
            normal: addr.to_string(),
        });
    }
    if addr.host == "terraform.io" && addr.namespace == "builtin" {
        return Err(LabelError::BuiltIn {
            label: label.into(),
        });
    }
    Ok(addr)
}

/// Why a `provider "…"` block label is not an address the lock file may hold.
#[derive(Debug)]
enum LabelError {
    /// The label does not parse as a provider address.
    Invalid { label: String, cause: NotationError },
    /// The label parses but is not written in normalized form.
    NotNormal { label: String, normal: String },
    /// The label names a built-in provider, which is never locked.
    BuiltIn { label: String },
}

impl std::fmt::Display for LabelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabelError::Invalid { label, cause } => {
                write!(f, "invalid provider address {label:?}: {cause}")
            }
            LabelError::NotNormal { label, normal } => write!(
                f,
                "the provider address {label:?} must be written in its normalized form {normal:?}"
            ),
            LabelError::BuiltIn { label } => {
                write!(f, "the built-in provider {label} cannot be locked")
            }
        }
    }
}

// Long because it is one parser loop over the body's statements, one arm per statement kind.
fn provider_body(p: &mut Parser, block_line: usize) -> Result<LockedProvider, Error> {
    let (mut version, mut constraints, mut hashes) = (None, None, None);
    loop {
        p.skip_newlines();
        let line = p.line();
        let name = match p.next() {
            Some(Tok::RBrace) => break,
            Some(Tok::Ident(n)) => n,
            Some(t) => {
                return Err((
                    line,
                    format!("expected an argument, found {}", describe(&t)),
                ))
            }
            None => return Err((block_line, "unclosed provider block".into())),
        };
        if p.peek() != Some(&Tok::Eq) {
            return Err((
                line,
                format!("unsupported nested block {name:?} in a provider block"),
            ));
        }
        p.pos += 1;
        let value = value(p)?;
        match p.peek() {
            Some(Tok::Newline) | Some(Tok::RBrace) => {}
            Some(t) => {
                return Err((
                    p.line(),
                    format!(
                        "expected a new line after argument {name:?}, found {}",
                        describe(t)
                    ),
                ))
            }
            None => {}
        }
        let dup = || (line, format!("argument {name:?} is given twice"));
        match (name.as_str(), value) {
            ("version", Value::Str(s)) => {
                let v = Version::parse(&s).map_err(|e| {
                    (
                        line,
                        format!("invalid version: {e}; the lock file records exact versions"),
                    )
                })?;
                if version.replace(v).is_some() {
                    return Err(dup());
                }
            }
            ("constraints", Value::Str(s)) => {
                super::address::Constraint::parse(&s).map_err(|e| (line, e.to_string()))?;
                if constraints.replace(s).is_some() {
                    return Err(dup());
                }
            }
            ("hashes", Value::List(items)) => {
                let mut set = BTreeSet::new();
                for h in items {
                    set.insert(Hash::parse(&h).map_err(|e| (line, e.to_string()))?);
                }
                if hashes.replace(set).is_some() {
                    return Err(dup());
                }
            }
            ("version" | "constraints", Value::List(_)) => {
                return Err((line, format!("argument {name:?} must be a string")))
            }
            ("hashes", Value::Str(_)) => {
                return Err((line, "argument \"hashes\" must be a list of strings".into()))
            }
            (other, _) => {
                return Err((
                    line,
                    format!("unsupported argument {other:?} in a provider block"),
                ))
            }
        }
    }
    Ok(LockedProvider {
        version: version.ok_or((
            block_line,
            "the provider block has no version argument".to_string(),
        ))?,
        constraints,
        hashes: hashes.unwrap_or_default(),
    })
}

fn value(p: &mut Parser) -> Result<Value, Error> {
    let line = p.line();
    match p.next() {
        Some(Tok::Str(s)) => Ok(Value::Str(s)),
        Some(Tok::LBrack) => {
            let mut items = Vec::new();
            loop {
                p.skip_newlines();
                let line = p.line();
                match p.next() {
                    Some(Tok::RBrack) => break,
                    Some(Tok::Str(s)) => items.push(s),
                    Some(t) => {
                        return Err((
                            line,
                            format!("expected a string in the list, found {}", describe(&t)),
                        ))
                    }
                    None => return Err((line, "unclosed list".into())),
                }
                p.skip_newlines();
                match p.peek() {
                    Some(Tok::Comma) => p.pos += 1,
                    Some(Tok::RBrack) => {}
                    Some(t) => {
                        return Err((
                            p.line(),
                            format!("expected ',' or ']', found {}", describe(t)),
                        ))
                    }
                    None => return Err((line, "unclosed list".into())),
                }
            }
            Ok(Value::List(items))
        }
        Some(t) => Err((
            line,
            format!(
                "expected a string or a list of strings, found {}",
                describe(&t)
            ),
        )),
        None => Err((line, "expected a value, found the end of the file".into())),
    }
}

fn skip_block(p: &mut Parser, line: usize) -> Result<(), Error> {
    let mut depth = 1;
    while depth > 0 {
        match p.next() {
            Some(Tok::LBrace) => depth += 1,
            Some(Tok::RBrace) => depth -= 1,
            Some(_) => {}
            None => return Err((line, "unclosed block".into())),
        }
    }
    Ok(())
}

/// HCL quoted-string literal.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The canonical text of `lock`.
pub(crate) fn write(lock: &LockFile) -> String {
    let tool = lock.header_tool.as_deref().unwrap_or(NIVIS_HEADER_TOOL);
    let mut out = format!("{HEADER_PREFIX}{tool}{HEADER_SUFFIX}\n{HEADER_SECOND}\n");
    for (addr, entry) in &lock.providers {
        out.push('\n');
        let _ = writeln!(out, "provider {} {{", quote(&addr.to_string()));
        // hclwrite aligns `=` across consecutive single-line arguments.
        let mut singles = vec![("version", quote(&entry.version.to_string()))];
        if let Some(c) = &entry.constraints {
            singles.push(("constraints", quote(c)));
        }
        let width = singles.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
        for (name, value) in &singles {
            let _ = writeln!(out, "  {name:width$} = {value}");
        }
        if !entry.hashes.is_empty() {
            out.push_str("  hashes = [\n");
            for h in &entry.hashes {
                let _ = writeln!(out, "    {},", quote(h.as_str()));
            }
            out.push_str("  ]\n");
        }
        out.push_str("}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_round_trip() {
        for s in ["plain", "a\"b\\c", "tab\tnl\n", "${x} %{y} $z"] {
            let q = quote(s);
            let toks = lex(&q).unwrap();
            assert_eq!(toks, vec![(Tok::Str(s.to_string()), 1)], "{q}");
        }
    }

    #[test]
    fn errors_carry_lines() {
        let e = parse("\n\nprovider \"registry.opentofu.org/a/b\" {\n  versoin = \"1.0.0\"\n}\n")
            .unwrap_err();
        assert_eq!(e.0, 4, "{e:?}");
        assert!(e.1.contains("unsupported argument"), "{e:?}");
        let e = parse("provider \"A/b\" {\n version = \"1.0.0\"\n}\n").unwrap_err();
        assert!(e.1.contains("normalized form"), "{e:?}");
        let e = parse("provider \"registry.opentofu.org/a/b\" {\n}\n").unwrap_err();
        assert!(e.1.contains("no version"), "{e:?}");
        let e = parse("terraform {\n}\n").unwrap_err();
        assert!(e.1.contains("unsupported block type"), "{e:?}");
    }

    #[test]
    fn module_blocks_are_ignored_with_a_warning() {
        let l = parse("module \"x\" {\n  a = { b = 1 }\n}\n").unwrap_or_else(|e| panic!("{e:?}"));
        assert!(l.providers.is_empty());
        assert_eq!(l.warnings.len(), 1);
    }
}
