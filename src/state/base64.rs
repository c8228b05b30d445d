//! Standard base64 (RFC 4648 §4: `A–Z a–z 0–9 + /`, `=` padding), used only for the provider's
//! private bytes in the state file.
//!
//! Written here rather than taken from a crate because it is ~60 lines and the state format needs
//! nothing else. The decoder is strict: it rejects characters outside the alphabet, missing or
//! misplaced padding, whitespace and non-zero leftover bits, so every byte string has exactly one
//! accepted spelling.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Encodes `bytes` as padded standard base64.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes padded standard base64; the error says what is wrong and where.
pub(crate) fn decode(text: &str) -> Result<Vec<u8>, String> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return Err(format!(
            "base64 length {} is not a multiple of 4",
            bytes.len()
        ));
    }
    let groups = bytes.len() / 4;
    let mut out = Vec::with_capacity(groups * 3);
    for (g, chunk) in bytes.chunks(4).enumerate() {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 || (pad > 0 && g + 1 != groups) {
            return Err(format!("misplaced base64 padding at offset {}", g * 4));
        }
        let mut n = 0u32;
        for (i, &c) in chunk[..4 - pad].iter().enumerate() {
            let v = sextet(c)
                .ok_or_else(|| format!("invalid base64 character at offset {}", g * 4 + i))?;
            n = (n << 6) | v;
        }
        n <<= 6 * pad as u32;
        if n & ((1u32 << (8 * pad)) - 1) != 0 {
            return Err(format!("non-canonical base64 ending at offset {}", g * 4));
        }
        out.extend_from_slice(&[(n >> 16) as u8, (n >> 8) as u8, n as u8][..3 - pad]);
    }
    Ok(out)
}

fn sextet(c: u8) -> Option<u32> {
    let v = match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    };
    Some(u32::from(v))
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn rfc4648_vectors() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, coded) in cases {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).unwrap(), plain.as_bytes());
        }
    }

    #[test]
    fn round_trips_every_byte_and_length() {
        let all: Vec<u8> = (0..=255u8).collect();
        for len in 0..all.len() {
            let text = encode(&all[..len]);
            assert_eq!(decode(&text).unwrap(), &all[..len], "length {len}");
        }
        assert_eq!(encode(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn rejects_malformed_input() {
        for bad in [
            "Zg=", "Z===", "Zg==Zg==", "Zm9v\n", "Zm-v", "Zh==", "Zm9=", "====",
        ] {
            assert!(decode(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
