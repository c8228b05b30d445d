//! Exact decimal arithmetic for cty numbers, as far as the codecs need it.
//!
//! A [`serde_json::Number`] (built with `arbitrary_precision`) keeps the decimal text it was
//! written with. This module reads that text as an exact decimal and answers the questions cty
//! asks of a number: is it an exact int64, is it exactly a float64, what is its canonical text
//! (`big.Float.Text('f', -1)`: no exponent, no trailing zeros), and are two numbers equal.
//! Nothing here allocates on the common path (small integers).

use serde_json::Number;

/// An exact decimal `(-1)^neg * digits * 10^exp`, normalized: `digits` has no leading or
/// trailing zeros, and zero is `digits == ""`, `neg == false`, `exp == 0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Decimal {
    neg: bool,
    digits: String,
    exp: i64,
}

impl Decimal {
    /// Parses decimal number text: optional sign, digits with an optional fraction, optional
    /// exponent. Accepts JSON number syntax plus a leading `+` and leading zeros.
    pub(crate) fn parse(text: &str) -> Option<Decimal> {
        let bytes = text.as_bytes();
        let mut i = 0;
        let mut neg = false;
        if let Some(&c) = bytes.first() {
            if c == b'-' || c == b'+' {
                neg = c == b'-';
                i = 1;
            }
        }
        let mut digits = String::new();
        let mut frac_len: i64 = 0;
        let mut seen_digit = false;
        let mut seen_point = false;
        while i < bytes.len() {
            match bytes[i] {
                c @ b'0'..=b'9' => {
                    seen_digit = true;
                    if !(digits.is_empty() && c == b'0') {
                        digits.push(c as char);
                    }
                    if seen_point {
                        frac_len += 1;
                    }
                }
                b'.' if !seen_point => seen_point = true,
                b'e' | b'E' => break,
                _ => return None,
            }
            i += 1;
        }
        if !seen_digit {
            return None;
        }
        let mut exp: i64 = 0;
        if i < bytes.len() {
            // Exponent.
            i += 1;
            let mut eneg = false;
            if i < bytes.len() && (bytes[i] == b'-' || bytes[i] == b'+') {
                eneg = bytes[i] == b'-';
                i += 1;
            }
            if i == bytes.len() {
                return None;
            }
            for &c in &bytes[i..] {
                if !c.is_ascii_digit() {
                    return None;
                }
                exp = exp.checked_mul(10)?.checked_add(i64::from(c - b'0'))?;
            }
            if eneg {
                exp = -exp;
            }
        }
        let trailing = digits.len() - digits.trim_end_matches('0').len();
        digits.truncate(digits.len() - trailing);
        if digits.is_empty() {
            return Some(Decimal {
                neg: false,
                digits,
                exp: 0,
            });
        }
        let exp = exp.checked_sub(frac_len)?.checked_add(trailing as i64)?;
        Some(Decimal { neg, digits, exp })
    }

    /// The value as an `i64`, if it is an integer in range.
    pub(crate) fn to_i64(&self) -> Option<i64> {
        if self.digits.is_empty() {
            return Some(0);
        }
        if self.exp < 0 || self.digits.len() as i64 + self.exp > 19 {
            return None;
        }
        let mut v: i128 = 0;
        for c in self.digits.bytes() {
            v = v * 10 + i128::from(c - b'0');
        }
        for _ in 0..self.exp {
            v *= 10;
        }
        if self.neg {
            v = -v;
        }
        i64::try_from(v).ok()
    }

    /// The value as an `f64`, if that float represents it exactly (cty: `Float64()` is Exact).
    pub(crate) fn to_exact_f64(&self) -> Option<f64> {
        if self.digits.is_empty() {
            return Some(0.0);
        }
        // Cheap rejections: a non-integer dyadic fraction always ends in the digit 5, and no
        // finite float has more than 767 significant digits or a magnitude beyond 1e309.
        if self.exp < 0 && !self.digits.ends_with('5') {
            return None;
        }
        let magnitude = self.digits.len() as i64 + self.exp;
        if self.digits.len() > 800 || !(-330..=310).contains(&magnitude) {
            return None;
        }
        let x: f64 = self.canonical_text().parse().ok()?;
        if !x.is_finite() {
            return None;
        }
        let exact = exact_decimal_of_f64(x.abs());
        (exact.digits == self.digits && exact.exp == self.exp).then_some(x)
    }

    /// The canonical text: what cty's `big.Float.Text('f', -1)` prints for this value.
    pub(crate) fn canonical_text(&self) -> String {
        if self.digits.is_empty() {
            return "0".to_owned();
        }
        let mut out = String::with_capacity(self.digits.len() + 4);
        if self.neg {
            out.push('-');
        }
        if self.exp >= 0 {
            out.push_str(&self.digits);
            out.extend(std::iter::repeat_n('0', self.exp as usize));
        } else {
            let point = self.digits.len() as i64 + self.exp;
            if point > 0 {
                let (int, frac) = self.digits.split_at(point as usize);
                out.push_str(int);
                out.push('.');
                out.push_str(frac);
            } else {
                out.push_str("0.");
                out.extend(std::iter::repeat_n('0', (-point) as usize));
                out.push_str(&self.digits);
            }
        }
        out
    }
}

/// The exact decimal expansion of a finite, non-negative float.
fn exact_decimal_of_f64(x: f64) -> Decimal {
    if x == 0.0 {
        return Decimal {
            neg: false,
            digits: String::new(),
            exp: 0,
        };
    }
    let bits = x.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    let fraction = bits & ((1u64 << 52) - 1);
    let (mut mant, mut e2) = if biased == 0 {
        (fraction, -1074)
    } else {
        (fraction | (1u64 << 52), biased - 1075)
    };
    let tz = mant.trailing_zeros();
    mant >>= tz;
    e2 += i64::from(tz);
    let mut big = BigUint::from_u64(mant);
    let exp10 = if e2 >= 0 {
        let mut k = e2;
        while k > 0 {
            let step = k.min(31);
            big.mul_small(1u32 << step);
            k -= step;
        }
        0
    } else {
        // m * 2^e2 = m * 5^-e2 * 10^e2
        let mut k = -e2;
        while k > 0 {
            let step = k.min(13); // 5^13 < 2^32
            big.mul_small(5u32.pow(step as u32));
            k -= step;
        }
        e2
    };
    let mut digits = big.to_decimal();
    let trailing = digits.len() - digits.trim_end_matches('0').len();
    digits.truncate(digits.len() - trailing);
    Decimal {
        neg: false,
        digits,
        exp: exp10 + trailing as i64,
    }
}

/// Just enough of an unsigned big integer: base 1e9 limbs, least significant first.
struct BigUint(Vec<u32>);

impl BigUint {
    const BASE: u64 = 1_000_000_000;

    fn from_u64(mut v: u64) -> BigUint {
        let mut limbs = Vec::with_capacity(4);
        while v > 0 {
            limbs.push((v % Self::BASE) as u32);
            v /= Self::BASE;
        }
        BigUint(limbs)
    }

    fn mul_small(&mut self, m: u32) {
        let mut carry: u64 = 0;
        for limb in &mut self.0 {
            let v = u64::from(*limb) * u64::from(m) + carry;
            *limb = (v % Self::BASE) as u32;
            carry = v / Self::BASE;
        }
        while carry > 0 {
            self.0.push((carry % Self::BASE) as u32);
            carry /= Self::BASE;
        }
    }

    fn to_decimal(&self) -> String {
        let mut out = String::with_capacity(self.0.len() * 9);
        let mut limbs = self.0.iter().rev();
        if let Some(first) = limbs.next() {
            out.push_str(&first.to_string());
        }
        for limb in limbs {
            out.push_str(&format!("{limb:09}"));
        }
        out
    }
}

/// Whether `text` is already canonical (no exponent, sign, leading or trailing zeros): the
/// fast path that lets most numbers skip [`Decimal`] entirely.
fn looks_canonical(text: &str) -> bool {
    let body = text.strip_prefix('-').unwrap_or(text);
    if body.is_empty() || body.bytes().any(|c| !(c.is_ascii_digit() || c == b'.')) {
        return false;
    }
    if text.starts_with('-') && body.bytes().all(|c| c == b'0' || c == b'.') {
        return false; // "-0"
    }
    match body.split_once('.') {
        None => body == "0" || !body.starts_with('0'),
        Some((int, frac)) => {
            !int.is_empty()
                && (int == "0" || !int.starts_with('0'))
                && !frac.is_empty()
                && !frac.ends_with('0')
                && !frac.contains('.')
        }
    }
}

/// The canonical form of a number (cty's JSON/text form), or `None` when it already is.
pub(crate) fn canonicalize(n: &Number) -> Option<Number> {
    let text = n.as_str();
    if looks_canonical(text) {
        return None;
    }
    Some(Number::from_string_unchecked(
        Decimal::parse(text)?.canonical_text(),
    ))
}

/// Parses number text (as carried in a msgpack or JSON string) into a canonical number.
pub(crate) fn parse_number(text: &str) -> Option<Number> {
    let text = text.trim();
    if looks_canonical(text) {
        return Some(Number::from_string_unchecked(text.to_owned()));
    }
    Some(Number::from_string_unchecked(
        Decimal::parse(text)?.canonical_text(),
    ))
}

/// A number from a decoded float: integers become integers, others their shortest text.
pub(crate) fn number_from_f64(x: f64) -> Option<Number> {
    if !x.is_finite() {
        return None;
    }
    if x.fract() == 0.0 && x.abs() < 9.2e18 {
        return Some(Number::from(x as i64));
    }
    // Rust's Display for floats is the shortest round-trip text without an exponent, which is
    // exactly Go's Text('f', -1) for a float64.
    Some(Number::from_string_unchecked(format!("{x}")))
}

/// How a number goes on the msgpack wire.
pub(crate) enum WireNumber {
    Int(i64),
    Float(f64),
    Text(String),
}

/// cty/msgpack's choice: exact int64, else exact float64, else decimal text.
pub(crate) fn wire_number(n: &Number) -> WireNumber {
    if let Some(i) = n.as_i64() {
        return WireNumber::Int(i);
    }
    let text = n.as_str();
    match Decimal::parse(text) {
        Some(d) => {
            if let Some(i) = d.to_i64() {
                WireNumber::Int(i)
            } else if let Some(f) = d.to_exact_f64() {
                WireNumber::Float(f)
            } else {
                WireNumber::Text(d.canonical_text())
            }
        }
        None => WireNumber::Text(text.to_owned()),
    }
}

/// Numeric equality (`1`, `1.0` and `1e0` are equal; `-0` equals `0`).
pub(crate) fn numbers_equal(a: &Number, b: &Number) -> bool {
    let (ta, tb) = (a.as_str(), b.as_str());
    if ta == tb {
        return true;
    }
    match (Decimal::parse(ta), Decimal::parse(tb)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> Number {
        s.parse().unwrap()
    }

    #[test]
    fn parse_normalizes() {
        let d = Decimal::parse("001.2500e2").unwrap();
        assert_eq!(d.canonical_text(), "125");
        assert_eq!(Decimal::parse("-0.0").unwrap().canonical_text(), "0");
        assert_eq!(Decimal::parse("1e-3").unwrap().canonical_text(), "0.001");
        assert_eq!(Decimal::parse("12.5e-1").unwrap().canonical_text(), "1.25");
        assert_eq!(Decimal::parse("+7").unwrap().canonical_text(), "7");
        for bad in ["", "-", "1e", "1.2.3", "abc", "1e+"] {
            assert!(Decimal::parse(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn int64_range() {
        assert_eq!(
            Decimal::parse("9223372036854775807").unwrap().to_i64(),
            Some(i64::MAX)
        );
        assert_eq!(
            Decimal::parse("-9223372036854775808").unwrap().to_i64(),
            Some(i64::MIN)
        );
        assert_eq!(
            Decimal::parse("9223372036854775808").unwrap().to_i64(),
            None
        );
        assert_eq!(Decimal::parse("3.0").unwrap().to_i64(), Some(3));
        assert_eq!(Decimal::parse("3.5").unwrap().to_i64(), None);
    }

    #[test]
    fn exact_floats() {
        assert_eq!(Decimal::parse("1.5").unwrap().to_exact_f64(), Some(1.5));
        assert_eq!(
            Decimal::parse("-0.375").unwrap().to_exact_f64(),
            Some(-0.375)
        );
        assert_eq!(Decimal::parse("0.1").unwrap().to_exact_f64(), None);
        // 2^63 is exact as a float, 2^64-1 is not.
        assert_eq!(
            Decimal::parse("9223372036854775808")
                .unwrap()
                .to_exact_f64(),
            Some(2f64.powi(63))
        );
        assert_eq!(
            Decimal::parse("18446744073709551615")
                .unwrap()
                .to_exact_f64(),
            None
        );
        // The exact expansion of the float nearest 0.1 is exact.
        let x =
            Decimal::parse("0.1000000000000000055511151231257827021181583404541015625").unwrap();
        assert_eq!(x.to_exact_f64(), Some(0.1));
        assert_eq!(Decimal::parse("1e400").unwrap().to_exact_f64(), None);
        let tiny = exact_decimal_of_f64(5e-324);
        assert_eq!(tiny.exp, -1074);
    }

    #[test]
    fn canonical_and_equality() {
        assert!(canonicalize(&num("12")).is_none());
        assert!(canonicalize(&num("0.5")).is_none());
        assert_eq!(canonicalize(&num("1.50")).unwrap().to_string(), "1.5");
        assert_eq!(canonicalize(&num("1e3")).unwrap().to_string(), "1000");
        assert_eq!(canonicalize(&num("-0")).unwrap().to_string(), "0");
        assert!(numbers_equal(&num("1"), &num("1.0")));
        assert!(numbers_equal(&num("100"), &num("1e2")));
        assert!(!numbers_equal(&num("1"), &num("1.01")));
        assert_eq!(number_from_f64(2.0).unwrap().to_string(), "2");
        assert_eq!(number_from_f64(0.1).unwrap().to_string(), "0.1");
        assert_eq!(
            number_from_f64(1e21).unwrap().to_string(),
            "1000000000000000000000"
        );
        assert_eq!(number_from_f64(-0.0).unwrap().to_string(), "0");
        assert!(number_from_f64(f64::INFINITY).is_none());
        assert_eq!(parse_number(" 1.0e1 ").unwrap().to_string(), "10");
    }
}
