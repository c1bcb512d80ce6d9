//! Values derived from their key, so every read-back can be checked without remembering
//! what was written: the value of a key is its key bytes (cut to the value size), then a
//! window of a fixed printable pattern starting at an offset taken from the key's hash.
//! With a size range, the size too comes from the key's hash. A value read back under the
//! wrong key, truncated, or from another size setting does not match.

/// Value sizes: fixed, or a range (each key's size fixed by its hash).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub min: usize,
    pub max: usize,
}

impl Sizes {
    /// `32` or `10-100`.
    pub fn parse(s: &str) -> Result<Sizes, String> {
        let num = |t: &str| t.trim().parse::<usize>().map_err(|_| format!("bad data size {s:?}"));
        let (min, max) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => (num(s)?, num(s)?),
        };
        if min > max {
            return Err(format!("bad data size range {s:?}: minimum above maximum"));
        }
        Ok(Sizes { min, max })
    }

    #[inline]
    pub fn size_of(&self, key: &[u8]) -> usize {
        if self.min == self.max {
            self.min
        } else {
            self.min + (hash(key) >> 8) as usize % (self.max - self.min + 1)
        }
    }
}

const PERIOD: usize = 61;

/// Builds values: holds the pattern once, long enough for the largest value at any offset.
pub struct Values {
    pattern: Vec<u8>,
    pub sizes: Sizes,
}

/// FNV-1a: a key's hash for its size and pattern offset.
#[inline]
pub fn hash(key: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

impl Values {
    pub fn new(sizes: Sizes) -> Values {
        let pattern = (0..sizes.max + PERIOD).map(|i| b'A' + (i % PERIOD) as u8 % 58).collect();
        Values { pattern, sizes }
    }

    #[inline]
    fn parts<'a>(&'a self, key: &'a [u8]) -> (&'a [u8], &'a [u8]) {
        let size = self.sizes.size_of(key);
        let head = &key[..key.len().min(size)];
        let off = (hash(key) % PERIOD as u64) as usize;
        (head, &self.pattern[off..off + size - head.len()])
    }

    /// The value of `key`.
    #[inline]
    pub fn len(&self, key: &[u8]) -> usize {
        self.sizes.size_of(key)
    }

    /// Appends the value of `key` to `out`.
    #[inline]
    pub fn write(&self, key: &[u8], out: &mut Vec<u8>) {
        let (head, tail) = self.parts(key);
        out.extend_from_slice(head);
        out.extend_from_slice(tail);
    }

    /// Whether `got` is the value of `key`.
    #[inline]
    pub fn check(&self, key: &[u8], got: &[u8]) -> bool {
        let (head, tail) = self.parts(key);
        got.len() == head.len() + tail.len() && got[..head.len()] == *head && got[head.len()..] == *tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_wrong_ones_fail() {
        let v = Values::new(Sizes::parse("32").unwrap());
        let mut a = Vec::new();
        v.write(b"key:1", &mut a);
        assert_eq!(a.len(), 32);
        assert!(a.starts_with(b"key:1"));
        assert!(v.check(b"key:1", &a));
        // Another key's value, a truncated value, a flipped byte: all rejected.
        let mut b = Vec::new();
        v.write(b"key:2", &mut b);
        assert!(!v.check(b"key:1", &b));
        assert!(!v.check(b"key:1", &a[..31]));
        let mut c = a.clone();
        c[20] ^= 1;
        assert!(!v.check(b"key:1", &c));
        // Values shorter than the key are the key's first bytes.
        let short = Values::new(Sizes::parse("3").unwrap());
        let mut s = Vec::new();
        short.write(b"key:1", &mut s);
        assert_eq!(s, b"key");
        assert!(short.check(b"key:1", b"key"));
        let zero = Values::new(Sizes::parse("0").unwrap());
        assert!(zero.check(b"k", b""));
    }

    #[test]
    fn size_ranges_are_per_key_and_reproducible() {
        let sizes = Sizes::parse("10-100").unwrap();
        let v = Values::new(sizes);
        let mut seen = std::collections::HashSet::new();
        for i in 0..500 {
            let k = format!("k{i}");
            let n = v.len(k.as_bytes());
            assert!((10..=100).contains(&n));
            assert_eq!(n, sizes.size_of(k.as_bytes()));
            let mut out = Vec::new();
            v.write(k.as_bytes(), &mut out);
            assert_eq!(out.len(), n);
            assert!(v.check(k.as_bytes(), &out));
            seen.insert(n);
        }
        assert!(seen.len() > 50, "sizes spread over the range: {}", seen.len());
        assert!(Sizes::parse("5-1").is_err() && Sizes::parse("x").is_err());
    }

    #[test]
    fn values_are_printable() {
        let v = Values::new(Sizes::parse("1000").unwrap());
        let mut out = Vec::new();
        v.write(b"x", &mut out);
        assert!(out.iter().all(|c| c.is_ascii_graphic()));
    }
}
