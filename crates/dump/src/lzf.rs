//! LZF decompression as Redis's `lzf_d.c` does it (with `CHECK_INPUT`), for RDB strings
//! saved compressed (`RDB_ENC_LZF`). Larder's DUMP does not compress, so there is no
//! compressor here.
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

#[cfg(test)]
mod tests {
    use super::*;

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
