//! The compact encodings Redis saves small collections in, decoded and checked entry by
//! entry (Redis's deep sanitization, always on: a RESTOREd value is rebuilt from its
//! entries, so every entry is read anyway). Each decoder returns the entries as byte
//! strings (integers in their decimal form) or None if the blob is malformed.

/// A listpack (`listpack.c`): `total u32 LE, count u16 LE` (65535: unknown), entries of
/// `encoding+data, backlen`, then 0xFF.
pub fn listpack(lp: &[u8]) -> Option<Vec<Vec<u8>>> {
    if lp.len() < 7 || u32::from_le_bytes(lp[..4].try_into().ok()?) as usize != lp.len() {
        return None;
    }
    let count = u16::from_le_bytes([lp[4], lp[5]]);
    let mut out = Vec::with_capacity((count as usize).min(lp.len()));
    let mut p = 6;
    loop {
        let b = *lp.get(p)?;
        if b == 0xff {
            break;
        }
        let (value, size) = listpack_entry(&lp[p..])?;
        // The entry's length again, backwards, 7 bits a byte (high bit: more to the left).
        let blen = backlen_size(size);
        let back = lp.get(p + size..p + size + blen)?;
        let mut v = 0usize;
        for (i, &c) in back.iter().rev().enumerate() {
            v |= ((c & 127) as usize) << (7 * i);
        }
        if v != size {
            return None;
        }
        out.push(value);
        p += size + blen;
    }
    if p != lp.len() - 1 || (count != u16::MAX && count as usize != out.len()) {
        return None;
    }
    Some(out)
}

fn backlen_size(l: usize) -> usize {
    match l {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2097150 => 3,
        2097151..=268435454 => 4,
        _ => 5,
    }
}

/// One listpack entry at the start of `e`: its value and the size of its encoding and data.
fn listpack_entry(e: &[u8]) -> Option<(Vec<u8>, usize)> {
    let b = e[0];
    let int = |n: usize| -> Option<(Vec<u8>, usize)> {
        let d = e.get(1..1 + n)?;
        let mut v = [0u8; 8];
        v[..n].copy_from_slice(d);
        let shift = 64 - 8 * n as u32;
        let x = (i64::from_le_bytes(v) << shift) >> shift;
        Some((x.to_string().into_bytes(), 1 + n))
    };
    let string = |at: usize, len: usize| -> Option<(Vec<u8>, usize)> {
        Some((e.get(at..at.checked_add(len)?)?.to_vec(), at + len))
    };
    match b {
        0x00..=0x7f => Some(((b as i64).to_string().into_bytes(), 1)),
        0x80..=0xbf => string(1, (b & 0x3f) as usize),
        0xc0..=0xdf => {
            let u = ((b as i64 & 0x1f) << 8) | *e.get(1)? as i64;
            let v = if u >= 1 << 12 { u - (1 << 13) } else { u };
            Some((v.to_string().into_bytes(), 2))
        }
        0xe0..=0xef => string(2, ((b as usize & 0x0f) << 8) | *e.get(1)? as usize),
        0xf0 => string(5, u32::from_le_bytes(e.get(1..5)?.try_into().ok()?) as usize),
        0xf1 => int(2),
        0xf2 => int(3),
        0xf3 => int(4),
        0xf4 => int(8),
        _ => None,
    }
}

/// A ziplist (`ziplist.c`, RDB before version 10): `bytes u32 LE, tail u32 LE, count u16
/// LE`, entries of `prevlen, encoding, data`, then 0xFF.
pub fn ziplist(zl: &[u8]) -> Option<Vec<Vec<u8>>> {
    if zl.len() < 11 || u32::from_le_bytes(zl[..4].try_into().ok()?) as usize != zl.len() || zl[zl.len() - 1] != 0xff {
        return None;
    }
    let tail = u32::from_le_bytes(zl[4..8].try_into().ok()?) as usize;
    let count = u16::from_le_bytes([zl[8], zl[9]]);
    let mut out = Vec::with_capacity((count as usize).min(zl.len()));
    let (mut p, mut prev, mut last) = (10, 0usize, 10);
    while zl[p] != 0xff {
        let e = &zl[p..zl.len() - 1];
        let (prevlen, mut at) = match e[0] {
            254 => (u32::from_le_bytes(e.get(1..5)?.try_into().ok()?) as usize, 5),
            n => (n as usize, 1),
        };
        if prevlen != prev {
            return None;
        }
        let enc = *e.get(at)?;
        at += 1;
        let (value, end) = match enc >> 6 {
            0 => (None, at + (enc & 0x3f) as usize),
            1 => {
                let len = ((enc as usize & 0x3f) << 8) | *e.get(at)? as usize;
                at += 1;
                (None, at + len)
            }
            2 => {
                let len = u32::from_be_bytes(e.get(at..at + 4)?.try_into().ok()?) as usize;
                at += 4;
                (None, at.checked_add(len)?)
            }
            _ => {
                let n = match enc {
                    0xc0 => 2,
                    0xd0 => 4,
                    0xe0 => 8,
                    0xf0 => 3,
                    0xfe => 1,
                    0xf1..=0xfd => 0,
                    _ => return None,
                };
                let v = if n == 0 {
                    (enc & 0x0f) as i64 - 1
                } else {
                    let mut b = [0u8; 8];
                    b[..n].copy_from_slice(e.get(at..at + n)?);
                    let shift = 64 - 8 * n as u32;
                    (i64::from_le_bytes(b) << shift) >> shift
                };
                (Some(v.to_string().into_bytes()), at + n)
            }
        };
        let value = match value {
            Some(v) => v,
            None => e.get(at..end)?.to_vec(),
        };
        if end > e.len() {
            return None;
        }
        out.push(value);
        (last, prev) = (p, end);
        p += end;
    }
    let tail_ok = if out.is_empty() { tail == 10 } else { tail == last };
    if !tail_ok || (count != u16::MAX && count as usize != out.len()) {
        return None;
    }
    Some(out)
}

/// An intset (`intset.c`): `encoding u32 LE (2, 4 or 8), length u32 LE`, then the
/// integers, ascending, with no repeats.
pub fn intset(is: &[u8]) -> Option<Vec<Vec<u8>>> {
    if is.len() < 8 {
        return None;
    }
    let enc = u32::from_le_bytes(is[..4].try_into().ok()?) as usize;
    let len = u32::from_le_bytes(is[4..8].try_into().ok()?) as usize;
    if !matches!(enc, 2 | 4 | 8) || len.checked_mul(enc)?.checked_add(8)? != is.len() {
        return None;
    }
    let mut out = Vec::with_capacity(len);
    let mut prev = None;
    for c in is[8..].chunks_exact(enc) {
        let mut b = [0u8; 8];
        b[..enc].copy_from_slice(c);
        let shift = 64 - 8 * enc as u32;
        let v = (i64::from_le_bytes(b) << shift) >> shift;
        if prev.is_some_and(|p| p >= v) {
            return None;
        }
        prev = Some(v);
        out.push(v.to_string().into_bytes());
    }
    Some(out)
}

/// A zipmap (`zipmap.c`, Redis 2.4 hashes): `count u8`, then `len, field, len, free u8,
/// value, free bytes` per pair (a length below 254 in one byte, else 254 and a u32 LE),
/// then 0xFF. Returns fields and values alternately.
pub fn zipmap(zm: &[u8]) -> Option<Vec<Vec<u8>>> {
    if zm.len() < 2 || zm[zm.len() - 1] != 0xff {
        return None;
    }
    let end = zm.len() - 1;
    let len_at = |p: usize| -> Option<(usize, usize)> {
        match *zm.get(p)? {
            254 => {
                let l = u32::from_le_bytes(zm.get(p + 1..p + 5)?.try_into().ok()?) as usize;
                (l >= 254).then_some((l, 5))
            }
            255 => None,
            l => Some((l as usize, 1)),
        }
    };
    let mut out = Vec::new();
    let mut p = 1;
    while p < end {
        let (l, s) = len_at(p)?;
        p += s;
        if p.checked_add(l)? > end {
            return None;
        }
        out.push(zm[p..p + l].to_vec());
        p += l;
        let (l, s) = len_at(p)?;
        p += s;
        let free = *zm.get(p)? as usize;
        p += 1;
        let v = zm.get(p..p.checked_add(l)?)?;
        if p + l > end || p + l + free > end {
            return None;
        }
        out.push(v.to_vec());
        p += l + free;
    }
    if p != end || out.is_empty() || (zm[0] != 254 && zm[0] as usize != out.len() / 2) {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listpack holding `entries`, encoded as Redis encodes them (strings only, and the
    /// integer forms where given), for the tests.
    pub(crate) fn lp(raw_entries: &[&[u8]]) -> Vec<u8> {
        let mut body = Vec::new();
        for e in raw_entries {
            body.extend_from_slice(e);
            // The length again, 7 bits a byte, most significant first, the high bit set on
            // every byte but the first (Redis's `lpEncodeBacklen`).
            let (mut bl, mut l) = (Vec::new(), e.len());
            loop {
                bl.push((l & 127) as u8);
                l >>= 7;
                if l == 0 {
                    break;
                }
            }
            bl.reverse();
            for b in bl.iter_mut().skip(1) {
                *b |= 128;
            }
            body.extend_from_slice(&bl);
        }
        let total = 6 + body.len() + 1;
        let mut out = (total as u32).to_le_bytes().to_vec();
        out.extend_from_slice(&(raw_entries.len() as u16).to_le_bytes());
        out.extend_from_slice(&body);
        out.push(0xff);
        out
    }

    #[test]
    fn listpack_entries_of_every_encoding() {
        let big = vec![b'x'; 300];
        let mut e12 = vec![0xe0 | (300 >> 8) as u8, (300 & 0xff) as u8];
        e12.extend_from_slice(&big);
        let blob = lp(&[
            &[0x05],
            &[0x83, b'a', b'b', b'c'],
            &[0xc0 | 0x1f, 0xff], // 13-bit -1
            &e12,
            &[0xf1, 0x00, 0x80], // i16 -32768
            &[0xf2, 0xff, 0xff, 0x7f],
            &[0xf3, 0, 0, 0, 0x80],
            &[0xf4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f],
        ]);
        let got = listpack(&blob).unwrap();
        let want: Vec<Vec<u8>> = vec![
            b"5".to_vec(),
            b"abc".to_vec(),
            b"-1".to_vec(),
            big.clone(),
            b"-32768".to_vec(),
            b"8388607".to_vec(),
            b"-2147483648".to_vec(),
            i64::MAX.to_string().into_bytes(),
        ];
        assert_eq!(got, want);
        // Any damage is refused: a wrong count, a wrong total, a cut.
        let mut bad = blob.clone();
        bad[4] = 3;
        assert_eq!(listpack(&bad), None);
        assert_eq!(listpack(&blob[..blob.len() - 1]), None);
        let mut bad = blob.clone();
        bad[7] ^= 1; // the second entry's length
        assert_eq!(listpack(&bad), None);
    }

    #[test]
    fn intset_must_ascend() {
        let mut is = 2u32.to_le_bytes().to_vec();
        is.extend_from_slice(&3u32.to_le_bytes());
        for v in [-5i16, 0, 300] {
            is.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(intset(&is).unwrap(), vec![b"-5".to_vec(), b"0".to_vec(), b"300".to_vec()]);
        let mut bad = is.clone();
        bad[10] = bad[8]; // -5 then -5
        bad[11] = bad[9];
        assert_eq!(intset(&bad), None);
        assert_eq!(intset(&is[..is.len() - 1]), None);
    }

    #[test]
    fn zipmap_pairs() {
        // 2 pairs: "a" => "1" (1 free byte), "bb" => "".
        let zm = [2, 1, b'a', 1, 1, b'1', 0, 2, b'b', b'b', 0, 0, 0xff];
        assert_eq!(zipmap(&zm).unwrap(), vec![b"a".to_vec(), b"1".to_vec(), b"bb".to_vec(), b"".to_vec()]);
        assert_eq!(zipmap(&[1, 1, b'a', 5, 0, b'x', 0xff]), None);
    }

    #[test]
    fn ziplist_entries() {
        // Built by hand: "ab", 7 (immediate), -2 (int8), "x" * 70 (14-bit length).
        let mut entries: Vec<Vec<u8>> = Vec::new();
        entries.push(vec![0x02, b'a', b'b']);
        entries.push(vec![0xf8]);
        entries.push(vec![0xfe, 0xfe]);
        let mut long = vec![0x40, 70];
        long.extend(std::iter::repeat_n(b'x', 70));
        entries.push(long);
        let mut body = Vec::new();
        let (mut prev, mut last) = (0, 0);
        for e in &entries {
            last = 10 + body.len();
            body.push(prev as u8);
            body.extend_from_slice(e);
            prev = e.len() + 1;
        }
        let mut zl = ((10 + body.len() + 1) as u32).to_le_bytes().to_vec();
        zl.extend_from_slice(&(last as u32).to_le_bytes());
        zl.extend_from_slice(&4u16.to_le_bytes());
        zl.extend_from_slice(&body);
        zl.push(0xff);
        let got = ziplist(&zl).unwrap();
        assert_eq!(got, vec![b"ab".to_vec(), b"7".to_vec(), b"-2".to_vec(), vec![b'x'; 70]]);
        let mut bad = zl.clone();
        bad[4] += 1;
        assert_eq!(ziplist(&bad), None, "tail offset");
        let mut bad = zl.clone();
        bad[14] = 9; // the second entry's prevlen
        assert_eq!(ziplist(&bad), None);
    }
}
