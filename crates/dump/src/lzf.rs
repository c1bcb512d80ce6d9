//! LZF as Redis has it (`lzf_c.c`, `lzf_d.c`), for RDB strings saved compressed
//! (`RDB_ENC_LZF`): decompression with `CHECK_INPUT`, and compression with Redis's settings
//! (`HLOG` 16, `VERY_FAST`), its hash table zeroed first (Redis leaves it uninitialized,
//! which only ever finds fewer matches).
//!
//! # Format
//! A sequence of runs. A control byte below 32 starts a literal run of `ctrl + 1` bytes.
//! Otherwise it is a back reference: length `ctrl >> 5` (7 means: add the next byte), then
//! offset `((ctrl & 0x1f) << 8) + next byte + 1` back from the end of the output so far;
//! `length + 2` bytes are copied from there, one by one (the source may overlap the copy).

/// The most output one input byte can produce: a back reference of 3 bytes copies up to
/// 7 + 255 + 2 = 264 bytes.
pub const MAX_RATIO: usize = 88;

/// Decompresses `input` into exactly `out_len` bytes; None if the input is malformed or
/// does not produce exactly `out_len` bytes. Allocates as the output grows, so a claimed
/// `out_len` the input cannot reach costs nothing.
pub fn decompress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    if out_len > input.len().saturating_mul(MAX_RATIO) {
        return None;
    }
    let mut out: Vec<u8> = Vec::with_capacity(out_len.min(input.len().saturating_mul(4)));
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = input[ip] as usize;
        ip += 1;
        if ctrl < 32 {
            let n = ctrl + 1;
            if out.len() + n > out_len || ip + n > input.len() {
                return None;
            }
            out.extend_from_slice(&input[ip..ip + n]);
            ip += n;
        } else {
            let mut len = ctrl >> 5;
            let mut back = (ctrl & 0x1f) << 8;
            if len == 7 {
                len += *input.get(ip)? as usize;
                ip += 1;
            }
            back += *input.get(ip)? as usize + 1;
            ip += 1;
            let len = len + 2;
            if out.len() + len > out_len || back > out.len() {
                return None;
            }
            let from = out.len() - back;
            for i in 0..len {
                let b = out[from + i];
                out.push(b);
            }
        }
    }
    (out.len() == out_len).then_some(out)
}

const HSIZE: usize = 1 << 16;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// `lzf_compress`: `input` compressed into at most `out_len` bytes, or None if it does not
/// fit (or is empty).
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    let n = input.len();
    if n == 0 || out_len == 0 {
        return None;
    }
    let frst = |p: usize| (input[p] as u32) << 8 | input.get(p + 1).copied().unwrap_or(0) as u32;
    let next = |v: u32, p: usize| v << 8 | input[p + 2] as u32;
    let idx = |h: u32| ((h >> 8).wrapping_sub(h.wrapping_mul(5)) as usize) & (HSIZE - 1);
    let mut htab = vec![0u32; HSIZE];
    // Each literal run is preceded by its length byte, written once the run ends.
    let mut op: Vec<u8> = Vec::with_capacity(out_len + 4);
    let mut lit = 0usize;
    op.push(0);
    let end_run = |op: &mut Vec<u8>, lit: usize| {
        let at = op.len() - lit - 1;
        op[at] = lit.wrapping_sub(1) as u8;
        if lit == 0 {
            op.pop();
        }
    };
    let mut ip = 0usize;
    let mut hval = frst(0);
    while ip + 2 < n {
        hval = next(hval, ip);
        let slot = idx(hval);
        let r = htab[slot] as usize;
        htab[slot] = ip as u32;
        let off = ip.wrapping_sub(r).wrapping_sub(1);
        if r > 0 && off < MAX_OFF && input[r..r + 3] == input[ip..ip + 3] {
            let mut len = 2;
            let maxlen = (n - ip - len).min(MAX_REF);
            if op.len() + 4 >= out_len && op.len() - (lit == 0) as usize + 4 >= out_len {
                return None;
            }
            end_run(&mut op, lit);
            'scan: {
                if maxlen > 16 {
                    for _ in 0..16 {
                        len += 1;
                        if input[r + len] != input[ip + len] {
                            break 'scan;
                        }
                    }
                }
                loop {
                    len += 1;
                    if !(len < maxlen && input[r + len] == input[ip + len]) {
                        break;
                    }
                }
            }
            len -= 2; // the octets matched, less one
            ip += 1;
            if len < 7 {
                op.push(((off >> 8) + (len << 5)) as u8);
            } else {
                op.push(((off >> 8) + (7 << 5)) as u8);
                op.push((len - 7) as u8);
            }
            op.push(off as u8);
            lit = 0;
            op.push(0);
            ip += len + 1;
            if ip + 2 >= n {
                break;
            }
            // VERY_FAST: hash the two positions before the match's end as well.
            ip -= 2;
            hval = frst(ip);
            hval = next(hval, ip);
            htab[idx(hval)] = ip as u32;
            ip += 1;
            hval = next(hval, ip);
            htab[idx(hval)] = ip as u32;
            ip += 1;
        } else {
            if op.len() >= out_len {
                return None;
            }
            lit += 1;
            op.push(input[ip]);
            ip += 1;
            if lit == MAX_LIT {
                end_run(&mut op, lit);
                lit = 0;
                op.push(0);
            }
        }
    }
    if op.len() + 3 > out_len {
        return None;
    }
    while ip < n {
        lit += 1;
        op.push(input[ip]);
        ip += 1;
        if lit == MAX_LIT {
            end_run(&mut op, lit);
            lit = 0;
            op.push(0);
        }
    }
    end_run(&mut op, lit);
    (op.len() <= out_len).then_some(op)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn compress_then_decompress_is_identity(
            input in prop_oneof![
                prop::collection::vec(any::<u8>(), 1..600),
                // Repetitive: few distinct bytes, so matches of every length and offset.
                prop::collection::vec(0u8..3, 1..3000),
                (prop::collection::vec(any::<u8>(), 1..40), 1usize..200).prop_map(|(p, k)| p.repeat(k)),
            ],
            room in 0usize..8,
        ) {
            let out_len = input.len().saturating_sub(room).max(1);
            if let Some(c) = compress(&input, out_len) {
                prop_assert!(c.len() <= out_len);
                prop_assert_eq!(decompress(&c, input.len()), Some(input));
            }
        }
    }

    #[test]
    fn compresses_what_repeats() {
        let s = b"abcdefghij".repeat(20);
        let c = compress(&s, s.len() - 4).unwrap();
        assert!(c.len() < 20, "{}", c.len());
        assert_eq!(decompress(&c, s.len()).unwrap(), s);
        // Random-looking bytes do not fit in less room.
        let noise: Vec<u8> = (0..100u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        assert_eq!(compress(&noise, noise.len() - 4), None);
    }

    #[test]
    fn literals_and_overlapping_back_references() {
        // "abc" then a back reference of length 3+2... copying from 3 back: "abcabcab".
        assert_eq!(decompress(&[2, b'a', b'b', b'c', 0x60, 2], 8).as_deref(), Some(&b"abcabcab"[..]));
        // A run of one byte repeated: "a" then copy 1 back, 9 + 255 ... bytes.
        let long = decompress(&[0, b'a', 0xe0, 10, 0], 1 + 7 + 10 + 2).unwrap();
        assert_eq!(long, vec![b'a'; 20]);
    }

    #[test]
    fn malformed_input_is_refused() {
        assert_eq!(decompress(&[2, b'a'], 3), None, "literal past the input");
        assert_eq!(decompress(&[0x20, 0], 3), None, "reference before the start");
        assert_eq!(decompress(&[0, b'a', 0xe0], 20), None, "reference cut short");
        assert_eq!(decompress(&[1, b'a', b'b'], 3), None, "shorter than claimed");
        assert_eq!(decompress(&[1, b'a', b'b'], 1), None, "longer than claimed");
        assert_eq!(decompress(&[0, b'a'], usize::MAX), None, "claim beyond any ratio");
    }
}
