//! Standard base64 (RFC 4648 alphabet, `=` padding) for meta `b` keys.
//!
//! The decoder reproduces memcached's `base64_decode` (derived from Jouni
//! Malinen's): bytes outside the alphabet are skipped, the number of
//! alphabet bytes (counting `=`) must be a non-zero multiple of four,
//! decoding stops after the first block containing padding, and one or two
//! `=` in that block drop one or two output bytes; more is invalid.
//! Returning `None` corresponds to memcached's "0 bytes decoded" failure.

const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

const INVALID: u8 = 0x80;

const fn decode_table() -> [u8; 256] {
    let mut t = [INVALID; 256];
    let mut i = 0;
    while i < 64 {
        t[TABLE[i] as usize] = i as u8;
        i += 1;
    }
    t[b'=' as usize] = 0;
    t
}

static DTABLE: [u8; 256] = decode_table();

/// Decodes `src` into `out`, returning the decoded length, or `None` where
/// memcached's decoder returns 0 (including when `out` is too small).
pub(crate) fn decode(src: &[u8], out: &mut [u8]) -> Option<usize> {
    let count = src.iter().filter(|&&b| DTABLE[b as usize] != INVALID).count();
    if count == 0 || count % 4 != 0 || count / 4 * 3 > out.len() {
        return None;
    }
    let mut pos = 0;
    let mut block = [0u8; 4];
    let mut n = 0;
    let mut pad = 0;
    for &b in src {
        let v = DTABLE[b as usize];
        if v == INVALID {
            continue;
        }
        if b == b'=' {
            pad += 1;
        }
        block[n] = v;
        n += 1;
        if n == 4 {
            out[pos] = (block[0] << 2) | (block[1] >> 4);
            out[pos + 1] = (block[1] << 4) | (block[2] >> 2);
            out[pos + 2] = (block[2] << 6) | block[3];
            pos += 3;
            n = 0;
            if pad > 0 {
                match pad {
                    1 => pos -= 1,
                    2 => pos -= 2,
                    _ => return None,
                }
                break;
            }
        }
    }
    if pos == 0 {
        None
    } else {
        Some(pos)
    }
}

/// Appends the padded base64 encoding of `src` to `out`.
pub(crate) fn encode(src: &[u8], out: &mut Vec<u8>) {
    out.reserve(src.len().div_ceil(3) * 4);
    let mut chunks = src.chunks_exact(3);
    for c in &mut chunks {
        out.extend_from_slice(&[
            TABLE[(c[0] >> 2) as usize],
            TABLE[(((c[0] & 0x03) << 4) | (c[1] >> 4)) as usize],
            TABLE[(((c[1] & 0x0f) << 2) | (c[2] >> 6)) as usize],
            TABLE[(c[2] & 0x3f) as usize],
        ]);
    }
    match *chunks.remainder() {
        [a] => out.extend_from_slice(&[TABLE[(a >> 2) as usize], TABLE[((a & 0x03) << 4) as usize], b'=', b'=']),
        [a, b] => out.extend_from_slice(&[
            TABLE[(a >> 2) as usize],
            TABLE[(((a & 0x03) << 4) | (b >> 4)) as usize],
            TABLE[((b & 0x0f) << 2) as usize],
            b'=',
        ]),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &[u8]) -> Option<Vec<u8>> {
        let mut out = [0u8; 64];
        decode(s, &mut out).map(|n| out[..n].to_vec())
    }

    #[test]
    fn roundtrip() {
        for len in 0..20u8 {
            let src: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37).wrapping_add(200)).collect();
            let mut enc = Vec::new();
            encode(&src, &mut enc);
            if len == 0 {
                assert!(enc.is_empty());
                assert_eq!(dec(&enc), None);
            } else {
                assert_eq!(dec(&enc).as_deref(), Some(&src[..]), "len {len}");
            }
        }
    }

    #[test]
    fn memcached_quirks() {
        assert_eq!(dec(b"Zm9v").as_deref(), Some(&b"foo"[..]));
        assert_eq!(dec(b"Zm8=").as_deref(), Some(&b"fo"[..]));
        assert_eq!(dec(b"Zg==").as_deref(), Some(&b"f"[..]));
        // invalid bytes are skipped
        assert_eq!(dec(b"Zm\t9v").as_deref(), Some(&b"foo"[..]));
        // unpadded partial block
        assert_eq!(dec(b"Zm9"), None);
        assert_eq!(dec(b"Zg="), None);
        // too much padding
        assert_eq!(dec(b"Z==="), None);
        assert_eq!(dec(b"===="), None);
        // decoding stops after the padded block
        assert_eq!(dec(b"Zg==Zm9v").as_deref(), Some(&b"f"[..]));
        assert_eq!(dec(b"!!!!"), None);
        assert_eq!(dec(b""), None);
    }
}
