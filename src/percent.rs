//! Percent-encoding (RFC 3986): one rule for every URI Nivis writes, S3 request paths and
//! queries (`state::s3`, whose signatures need exactly this form) and the `git+file:` flake
//! references handed to Nix (`nixeval`).
//!
//! Ground floor: bytes in, text out. Not: decoding, nor which parts of a URI get encoded (the
//! callers' choice, through `encode_slash`).

/// Every byte but the unreserved `A-Z a-z 0-9 - _ . ~` as `%XX` (uppercase hex, as S3's
/// signature rules want); `/` is kept when `encode_slash` is false (paths, object keys).
pub(crate) fn percent_encode(s: &str, encode_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b'/' if !encode_slash => out.push('/'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::percent_encode;

    #[test]
    fn encodes_like_s3() {
        assert_eq!(percent_encode("a b/c~d", false), "a%20b/c~d");
        assert_eq!(percent_encode("env:/dev", true), "env%3A%2Fdev");
        assert_eq!(percent_encode("é", true), "%C3%A9");
    }
}
