//! Number parsing with the acceptance rules of memcached's `safe_strto*`
//! helpers (util.c), which wrap libc `strtol`/`strtoull`:
//!
//! * leading C whitespace (`\t \n \v \f \r` and space) is skipped;
//! * an optional `+` or `-` sign;
//! * at least one decimal digit;
//! * the digits must be followed by the end of the token or by a
//!   whitespace byte, after which anything is ignored (`"5\tx"` is 5);
//! * overflow of the C `long` (64-bit) is an error (`ERANGE`);
//! * the unsigned variants accept a minus sign as libc does (negating
//!   modulo 2^64) but memcached then rejects results that look negative as
//!   signed values (`strchr(str, '-')` over the whole token), so `-1` fails
//!   while `-0` is 0 and `-18446744073709551615` is 1;
//! * `safe_strtoul` and `safe_strtol` (flags; exptimes, lengths and meta
//!   TTLs) parse into a 64-bit `long` and store the result into 32 bits, so
//!   a value in the 64-bit range but outside the 32-bit one is truncated, not
//!   refused: flags `4294967297` are 1, exptime `4294967396` is 100 and
//!   `2147483648` is `i32::MIN`, length `4294967298` is 2 (memcached 1.6.18
//!   answers all of these).

#[inline]
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Parses sign and magnitude. Returns `None` on "no digits", a bad
/// terminator, or a magnitude above `u64::MAX`.
#[inline]
fn parse_raw(tok: &[u8]) -> Option<(bool, u64)> {
    let mut i = 0;
    while i < tok.len() && is_c_space(tok[i]) {
        i += 1;
    }
    let mut neg = false;
    if i < tok.len() && (tok[i] == b'+' || tok[i] == b'-') {
        neg = tok[i] == b'-';
        i += 1;
    }
    let start = i;
    let mut v: u64 = 0;
    let mut overflow = false;
    while i < tok.len() && tok[i].is_ascii_digit() {
        let d = u64::from(tok[i] - b'0');
        match v.checked_mul(10).and_then(|x| x.checked_add(d)) {
            Some(x) => v = x,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start || overflow {
        return None;
    }
    if i < tok.len() && !is_c_space(tok[i]) {
        return None;
    }
    Some((neg, v))
}

/// `safe_strtoull`.
#[inline]
pub(crate) fn parse_u64(tok: &[u8]) -> Option<u64> {
    // Fast path: plain digits, the overwhelmingly common case.
    if !tok.is_empty() && tok.len() <= 19 && tok.iter().all(u8::is_ascii_digit) {
        return Some(tok.iter().fold(0u64, |a, &b| a * 10 + u64::from(b - b'0')));
    }
    let (neg, mag) = parse_raw(tok)?;
    let v = if neg { mag.wrapping_neg() } else { mag };
    if (v as i64) < 0 && tok.contains(&b'-') {
        return None;
    }
    Some(v)
}

/// `safe_strtoul`: `strtoul`'s 64-bit result truncated to the `uint32_t`
/// memcached stores it in (also what `stats cachedump` reads its class and
/// limit with).
///
/// ```
/// use larder_memcache::parse_u32;
/// assert_eq!(parse_u32(b"4294967297"), Some(1));
/// assert_eq!(parse_u32(b"-1"), None);
/// ```
#[inline]
pub fn parse_u32(tok: &[u8]) -> Option<u32> {
    Some(parse_u64(tok)? as u32)
}

/// `safe_strtol`: `strtol`'s 64-bit result (ERANGE beyond it) truncated to
/// the `int32_t` memcached stores it in.
#[inline]
pub(crate) fn parse_i32(tok: &[u8]) -> Option<i32> {
    if !tok.is_empty() && tok.len() <= 9 && tok.iter().all(u8::is_ascii_digit) {
        return Some(tok.iter().fold(0i32, |a, &b| a * 10 + i32::from(b - b'0')));
    }
    let (neg, mag) = parse_raw(tok)?;
    // strtol's own range is i64; anything beyond is ERANGE.
    let v: i64 = if neg {
        if mag > 1u64 << 63 {
            return None;
        }
        (mag as i64).wrapping_neg()
    } else {
        i64::try_from(mag).ok()?
    };
    Some(v as i32)
}

/// A counter as memcached's incr/decr reads an item's data (`do_add_delta`: `safe_strtoull`
/// on the data, which memcached stores followed by `\r\n`): leading C whitespace, an optional
/// sign, decimal digits, then the end of the value, whitespace or a NUL (the C string ends
/// there), after which anything goes: `" 5"`, `"+5\t"`, `"5 abc"`, `"5\0x"` and `"-0"` are
/// numbers. Not numbers: an empty value, no digits, a digit run over 2^64, anything else
/// right after the digits (`"12abc"`), and a result of 2^63 or more with a `-` anywhere in
/// the string, as `strchr` sees it, up to the first NUL (`"-5"`, `"18446744073709551615 -"`;
/// `"-18446744073709551615"` is 1, as libc's `strtoull` wraps it). memcached's `strchr` could
/// run on past the item's `\r\n` into memory we do not have; we take the string to end there.
///
/// ```
/// use larder_memcache::parse_counter;
/// assert_eq!(parse_counter(b"9 "), Some(9));
/// assert_eq!(parse_counter(b" 5 abc"), Some(5));
/// assert_eq!(parse_counter(b"12abc"), None);
/// ```
pub fn parse_counter(v: &[u8]) -> Option<u64> {
    // The same rules as a command's number, on the C string the data is.
    let s = match v.iter().position(|&b| b == 0) {
        Some(z) => &v[..z],
        None => v,
    };
    parse_u64(s)
}

/// The bytes memcached's incr/decr leaves in an item whose value was `old_len` bytes long
/// when the result is `new` (`do_add_delta`): written in place, padded with spaces to the old
/// length, when the number fits (`"10"` decremented to 9 becomes `"9 "`, and `get` returns
/// those two bytes); in a new item of exactly its digits when it is longer. (memcached also
/// takes the second path when another connection holds a reference to the item at that
/// moment, say while sending it; Larder has no such moment, so it always pads.) The reply to
/// the incr/decr, and `ma`'s value, is the number without padding.
///
/// ```
/// use larder_memcache::counter_value;
/// assert_eq!(counter_value(9, 2), b"9 ");
/// assert_eq!(counter_value(100, 2), b"100");
/// ```
pub fn counter_value(new: u64, old_len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(old_len.max(20));
    push_u64(&mut v, new);
    if v.len() < old_len {
        v.resize(old_len, b' ');
    }
    v
}

/// Writes `v` in decimal. Used by reply composition; avoids `fmt`.
#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

#[inline]
pub(crate) fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsigned_rules() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"+5"), Some(5));
        assert_eq!(parse_u64(b"\t5"), Some(5));
        assert_eq!(parse_u64(b"5\r"), Some(5));
        assert_eq!(parse_u64(b"5\tjunk"), Some(5));
        assert_eq!(parse_u64(b"-0"), Some(0));
        assert_eq!(parse_u64(b"-1"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"-"), None);
        assert_eq!(parse_u64(b"5x"), None);
        assert_eq!(parse_u64(b"x5"), None);
        assert_eq!(parse_u64(b"00000000000000000000000001"), Some(1));
        assert_eq!(parse_u32(b"4294967295"), Some(u32::MAX));
        assert_eq!(parse_u32(b"4294967296"), Some(0));
        assert_eq!(parse_u32(b"4294967297"), Some(1));
        assert_eq!(parse_u32(b"18446744073709551615"), Some(u32::MAX));
        assert_eq!(parse_u32(b"-18446744073709551615"), Some(1));
        assert_eq!(parse_u32(b"-9223372036854775809"), Some(u32::MAX));
        assert_eq!(parse_u32(b"18446744073709551616"), None);
        assert_eq!(parse_u32(b"18446744073709551615\t-"), None);
        assert_eq!(parse_u32(b"-4294967295"), None);
        assert_eq!(parse_u32(b"-1"), None);
    }

    #[test]
    fn signed_rules() {
        assert_eq!(parse_i32(b"-1"), Some(-1));
        assert_eq!(parse_i32(b"2147483647"), Some(i32::MAX));
        assert_eq!(parse_i32(b"-2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"2147483648"), Some(i32::MIN));
        assert_eq!(parse_i32(b"4294967295"), Some(-1));
        assert_eq!(parse_i32(b"4294967396"), Some(100));
        assert_eq!(parse_i32(b"-2147483649"), Some(i32::MAX));
        assert_eq!(parse_i32(b"9223372036854775807"), Some(-1));
        assert_eq!(parse_i32(b"-9223372036854775808"), Some(0));
        assert_eq!(parse_i32(b"9223372036854775808"), None);
        assert_eq!(parse_i32(b"-9223372036854775809"), None);
        assert_eq!(parse_i32(b"999999999999999999999"), None);
        assert_eq!(parse_i32(b"12a"), None);
        assert_eq!(parse_i32(b" \x0b+7"), Some(7));
    }

    #[test]
    fn counters_read_like_do_add_delta() {
        // Checked against memcached 1.6.18 (set, then incr).
        assert_eq!(parse_counter(b"10"), Some(10));
        assert_eq!(parse_counter(b"+5"), Some(5));
        assert_eq!(parse_counter(b" 7"), Some(7));
        assert_eq!(parse_counter(b"\t\n7"), Some(7));
        assert_eq!(parse_counter(b"9 "), Some(9));
        assert_eq!(parse_counter(b"+5\t"), Some(5));
        assert_eq!(parse_counter(b"12 abc"), Some(12));
        assert_eq!(parse_counter(b"5\0xyz"), Some(5));
        assert_eq!(parse_counter(b"-0"), Some(0));
        assert_eq!(parse_counter(b"-18446744073709551615"), Some(1));
        assert_eq!(parse_counter(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_counter(b"18446744073709551615\0-"), Some(u64::MAX));
        assert_eq!(parse_counter(b"18446744073709551615 -"), None);
        assert_eq!(parse_counter(b"18446744073709551616"), None);
        assert_eq!(parse_counter(b"-5"), None);
        assert_eq!(parse_counter(b""), None);
        assert_eq!(parse_counter(b" "), None);
        assert_eq!(parse_counter(b"\x005"), None);
        assert_eq!(parse_counter(b"abc"), None);
        assert_eq!(parse_counter(b"12abc"), None);
    }

    #[test]
    fn counter_results_pad_to_the_old_length() {
        assert_eq!(counter_value(999, 4), b"999 ");
        assert_eq!(counter_value(6, 6), b"6     ");
        assert_eq!(counter_value(1000, 4), b"1000");
        assert_eq!(counter_value(1000, 3), b"1000");
        assert_eq!(counter_value(7, 0), b"7");
        assert_eq!(counter_value(u64::MAX, 1), b"18446744073709551615");
    }

    #[test]
    fn itoa() {
        let mut v = Vec::new();
        push_u64(&mut v, 0);
        v.push(b' ');
        push_u64(&mut v, u64::MAX);
        v.push(b' ');
        push_i64(&mut v, -1);
        v.push(b' ');
        push_i64(&mut v, i64::MIN);
        assert_eq!(v, b"0 18446744073709551615 -1 -9223372036854775808");
    }
}
