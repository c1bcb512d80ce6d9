//! Number parsing and formatting without allocation.

/// Longest textual `long long` Redis accepts, plus one (`LONG_STR_SIZE`).
const LONG_STR_SIZE: usize = 21;

/// Port of Redis's `string2ll`: the strict grammar Redis applies to `*` and
/// `$` lengths. No sign other than a leading `-`, no leading zeros, no
/// whitespace, no `-0`, nothing out of `i64` range.
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() >= LONG_STR_SIZE {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        if v > i64::MAX as u64 + 1 {
            None
        } else {
            Some(0u64.wrapping_sub(v) as i64)
        }
    } else {
        i64::try_from(v).ok()
    }
}

/// Appends the decimal form of `v` using a stack buffer.
#[inline]
pub fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

#[inline]
pub(crate) fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

/// Fixed-capacity `fmt::Write` sink so float formatting needs no heap.
struct StackBuf {
    buf: [u8; 40],
    len: usize,
}

impl core::fmt::Write for StackBuf {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(core::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// A formatted double on the stack; see [`crate::format_double`].
#[derive(Clone, Copy)]
pub struct DoubleBuf {
    buf: [u8; 32],
    len: usize,
}

impl DoubleBuf {
    /// The formatted bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// The formatted text (always ASCII).
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(self.as_bytes()).unwrap_or_default()
    }

    fn push(&mut self, b: u8) {
        self.buf[self.len] = b;
        self.len += 1;
    }

    fn extend(&mut self, s: &[u8]) {
        self.buf[self.len..self.len + s.len()].copy_from_slice(s);
        self.len += s.len();
    }

    fn zeros(&mut self, n: usize) {
        self.buf[self.len..self.len + n].fill(b'0');
        self.len += n;
    }
}

impl core::ops::Deref for DoubleBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl core::fmt::Debug for DoubleBuf {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Formats `d` the way Redis 7.2 formats doubles (`fpconv_dtoa`): the
/// shortest digits that round-trip, laid out as a plain integer, a plain
/// decimal, or `d.ddde±x` by the same thresholds as fpconv's `emit_digits`.
/// Infinities are `inf`/`-inf`, any NaN is `nan`, and negative zero is `-0`.
pub(crate) fn format_double(d: f64) -> DoubleBuf {
    use core::fmt::Write;

    let mut out = DoubleBuf { buf: [0; 32], len: 0 };
    if d.is_nan() {
        out.extend(b"nan");
        return out;
    }
    if d.is_sign_negative() {
        out.push(b'-');
    }
    let a = d.abs();
    if a.is_infinite() {
        out.extend(b"inf");
        return out;
    }
    if a == 0.0 {
        out.push(b'0');
        return out;
    }
    // `{:e}` gives Rust's shortest round-trip digits, e.g. `1.2345e-7`; only
    // the layout has to be redone.
    let mut sb = StackBuf { buf: [0; 40], len: 0 };
    write!(sb, "{a:e}").expect("a finite f64 in exponent form fits in 40 bytes");
    let s = &sb.buf[..sb.len];
    let e_at = s.iter().position(|&b| b == b'e').unwrap_or(s.len());
    let mut digits = [0u8; 24];
    let mut nd = 0;
    for &b in &s[..e_at] {
        if b != b'.' {
            digits[nd] = b;
            nd += 1;
        }
    }
    let digits = &digits[..nd];
    let exp10: i32 = core::str::from_utf8(&s[e_at + 1..]).ok().and_then(|t| t.parse().ok()).unwrap_or(0);
    let nd = nd as i32;
    // fpconv's K: the value is digits * 10^k.
    let k = exp10 - (nd - 1);
    let exp = exp10.abs();

    if k >= 0 && exp < nd + 7 {
        out.extend(digits);
        out.zeros(k as usize);
    } else if k < 0 && (k > -7 || exp < 4) {
        let offset = nd + k;
        if offset <= 0 {
            out.extend(b"0.");
            out.zeros((-offset) as usize);
            out.extend(digits);
        } else {
            let (int_part, frac) = digits.split_at(offset as usize);
            out.extend(int_part);
            out.push(b'.');
            out.extend(frac);
        }
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exp10 < 0 { b'-' } else { b'+' });
        let mut e = [0u8; 3];
        let mut i = e.len();
        let mut x = exp;
        loop {
            i -= 1;
            e[i] = b'0' + (x % 10) as u8;
            x /= 10;
            if x == 0 {
                break;
            }
        }
        out.extend(&e[i..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string2ll_grammar() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"123"), Some(123));
        assert_eq!(string2ll(b"-5"), Some(-5));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"01",
            b"+1",
            b" 1",
            b"1 ",
            b"1x",
            b"9223372036854775808",
            b"-9223372036854775809",
            b"99999999999999999999",
            b"000000000000000000001",
        ] {
            assert_eq!(string2ll(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    fn int(v: i64) -> String {
        let mut out = Vec::new();
        push_i64(&mut out, v);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers() {
        for v in [0, 1, -1, 9, 10, -10, 1234567890, i64::MAX, i64::MIN] {
            assert_eq!(int(v), v.to_string());
        }
    }

    fn dbl(d: f64) -> String {
        format_double(d).as_str().to_owned()
    }

    #[test]
    fn doubles_like_fpconv() {
        let cases: &[(f64, &str)] = &[
            (0.0, "0"),
            (-0.0, "-0"),
            (1.0, "1"),
            (-1.5, "-1.5"),
            (0.1, "0.1"),
            (2.75, "2.75"),
            (100.0, "100"),
            (1e7, "10000000"),
            (1e8, "1e+8"),
            (123456789.0, "123456789"),
            (12345678901234567000.0, "12345678901234567000"),
            (1e21, "1e+21"),
            (1.5e300, "1.5e+300"),
            (0.001, "0.001"),
            (0.000001, "0.000001"),
            (1e-7, "1e-7"),
            (1.25e-7, "1.25e-7"),
            (0.0001234, "1.234e-4"),
            (0.001234, "0.001234"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
        ];
        for (d, s) in cases {
            assert_eq!(dbl(*d), *s, "{d:e}");
        }
    }

    #[test]
    fn doubles_round_trip() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let d = f64::from_bits(x);
            if d.is_nan() {
                continue;
            }
            let s = dbl(d);
            assert_eq!(s.parse::<f64>().unwrap().to_bits(), d.to_bits(), "{s}");
        }
    }
}
