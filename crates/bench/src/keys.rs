//! Key generation: which key number each operation uses (the pattern), and how a number
//! becomes key bytes.
//!
//! Patterns (memtier_benchmark's letters are accepted too):
//! - `random` (`R`): uniform over `[min, max]`.
//! - `sequential` (`S`): the connections walk the range together, connection `c` of `C`
//!   taking `min + c, min + c + C, ...`, so the whole range is covered in order; wraps.
//! - `parallel` (`P`): the range is cut into `C` contiguous slices, connection `c` walks its
//!   own slice from the start; wraps within it. With as many requests as keys, every key is
//!   written exactly once (a load).
//! - `gaussian` (`G`): normal around the middle of the range, standard deviation a sixth of
//!   its width, clamped to the range.

/// A small fast PRNG (SplitMix64): deterministic per seed, no dependency.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, n)` (Lemire's multiply-shift; n > 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }
    /// Uniform in `(0, 1]`.
    #[inline]
    pub fn unit(&mut self) -> f64 {
        ((self.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    Random,
    Sequential,
    Parallel,
    Gaussian,
}

impl Pattern {
    pub fn parse(s: &str) -> Result<Pattern, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "r" | "random" => Pattern::Random,
            "s" | "sequential" => Pattern::Sequential,
            "p" | "parallel" | "parallel-sequential" => Pattern::Parallel,
            "g" | "gaussian" => Pattern::Gaussian,
            _ => {
                return Err(format!("unknown key pattern {s:?} (random, sequential, parallel, gaussian or R, S, P, G)"))
            }
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Random => "random",
            Pattern::Sequential => "sequential",
            Pattern::Parallel => "parallel",
            Pattern::Gaussian => "gaussian",
        }
    }
}

/// `SET:GET` patterns, as `--key-pattern P:R`, or one pattern for both.
pub fn parse_patterns(s: &str) -> Result<(Pattern, Pattern), String> {
    match s.split_once(':') {
        Some((a, b)) => Ok((Pattern::parse(a)?, Pattern::parse(b)?)),
        None => {
            let p = Pattern::parse(s)?;
            Ok((p, p))
        }
    }
}

/// The key numbers one connection (or local thread) uses for one kind of operation.
#[derive(Clone, Debug)]
pub struct KeyIter {
    pattern: Pattern,
    min: u64,
    max: u64,
    /// Next key (sequential, parallel).
    next: u64,
    /// The slice of a parallel walk, or the stride of a sequential one.
    lo: u64,
    hi: u64,
    stride: u64,
    rng: Rng,
}

impl KeyIter {
    /// Keys in `[min, max]` for connection `conn` of `conns`.
    pub fn new(pattern: Pattern, min: u64, max: u64, conn: u64, conns: u64, seed: u64) -> KeyIter {
        assert!(min <= max && conn < conns);
        let range = max - min + 1;
        let (lo, hi) = match pattern {
            Pattern::Parallel => {
                let lo = min + (range as u128 * conn as u128 / conns as u128) as u64;
                let hi = min + (range as u128 * (conn + 1) as u128 / conns as u128) as u64;
                // More connections than keys: some slices are empty; they share the next key.
                if hi > lo {
                    (lo, hi - 1)
                } else {
                    (lo.min(max), lo.min(max))
                }
            }
            _ => (min, max),
        };
        let next = match pattern {
            Pattern::Sequential => min + conn % range,
            _ => lo,
        };
        KeyIter { pattern, min, max, next, lo, hi, stride: conns, rng: Rng::new(seed) }
    }

    #[inline]
    pub fn next_key(&mut self) -> u64 {
        match self.pattern {
            Pattern::Random => self.min + self.rng.below(self.max - self.min + 1),
            Pattern::Sequential => {
                let k = self.next;
                let range = self.max - self.min + 1;
                self.next = self.min + (k - self.min + self.stride % range) % range;
                k
            }
            Pattern::Parallel => {
                let k = self.next;
                self.next = if k >= self.hi { self.lo } else { k + 1 };
                k
            }
            Pattern::Gaussian => {
                // Box-Muller; one of the pair is enough here.
                let (u1, u2) = (self.rng.unit(), self.rng.unit());
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                let mid = (self.min as f64 + self.max as f64) / 2.0;
                let sd = (self.max - self.min) as f64 / 6.0;
                (mid + z * sd).round().clamp(self.min as f64, self.max as f64) as u64
            }
        }
    }
}

/// Formats key number `n`: `prefix` then the decimal number, then (if `len` is longer)
/// filler derived from the number, so keys of any length are distinct and reproducible.
#[inline]
pub fn format_key(out: &mut Vec<u8>, prefix: &[u8], n: u64, len: usize) {
    out.clear();
    out.extend_from_slice(prefix);
    larder_resp::push_u64(out, n);
    if out.len() < len {
        out.push(b'-');
        let mut r = Rng::new(n);
        while out.len() < len {
            const ALPHA: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
            out.push(ALPHA[r.below(62) as usize]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(it: &mut KeyIter, n: usize) -> Vec<u64> {
        (0..n).map(|_| it.next_key()).collect()
    }

    #[test]
    fn sequential_connections_cover_the_range_together_and_wrap() {
        let mut a = KeyIter::new(Pattern::Sequential, 10, 15, 0, 2, 1);
        let mut b = KeyIter::new(Pattern::Sequential, 10, 15, 1, 2, 1);
        assert_eq!(take(&mut a, 4), [10, 12, 14, 10]);
        assert_eq!(take(&mut b, 4), [11, 13, 15, 11]);
        let mut one = KeyIter::new(Pattern::Sequential, 0, 2, 0, 1, 1);
        assert_eq!(take(&mut one, 5), [0, 1, 2, 0, 1]);
    }

    #[test]
    fn parallel_slices_partition_the_range_and_a_full_load_writes_each_key_once() {
        let conns = 3;
        let mut all = Vec::new();
        for c in 0..conns {
            let mut it = KeyIter::new(Pattern::Parallel, 0, 9, c, conns, 1);
            // Slice sizes follow the same split as the request allotment: 3, 3, 4.
            let n = (10 * (c + 1) / conns - 10 * c / conns) as usize;
            all.extend(take(&mut it, n));
        }
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        let mut it = KeyIter::new(Pattern::Parallel, 0, 9, 2, 3, 1);
        assert_eq!(take(&mut it, 6), [6, 7, 8, 9, 6, 7]);
        // More connections than keys: no panic, keys stay in range.
        let mut it = KeyIter::new(Pattern::Parallel, 5, 6, 7, 10, 1);
        assert!(take(&mut it, 3).iter().all(|k| (5..=6).contains(k)));
    }

    #[test]
    fn random_stays_in_range_and_reaches_both_ends() {
        let mut it = KeyIter::new(Pattern::Random, 100, 109, 0, 1, 7);
        let v = take(&mut it, 2000);
        assert!(v.iter().all(|k| (100..=109).contains(k)));
        assert!(v.contains(&100) && v.contains(&109));
        // Deterministic per seed, different across seeds.
        let mut a = KeyIter::new(Pattern::Random, 0, 1 << 40, 0, 1, 7);
        let mut b = KeyIter::new(Pattern::Random, 0, 1 << 40, 0, 1, 7);
        let mut c = KeyIter::new(Pattern::Random, 0, 1 << 40, 0, 1, 8);
        assert_eq!(take(&mut a, 5), take(&mut b, 5));
        assert_ne!(take(&mut a, 5), take(&mut c, 5));
    }

    #[test]
    fn gaussian_centres_on_the_middle() {
        let mut it = KeyIter::new(Pattern::Gaussian, 0, 6000, 0, 1, 3);
        let v = take(&mut it, 20000);
        assert!(v.iter().all(|&k| k <= 6000));
        let mean = v.iter().sum::<u64>() as f64 / v.len() as f64;
        assert!((mean - 3000.0).abs() < 50.0, "mean {mean}");
        // About 68% within one standard deviation (1000).
        let within = v.iter().filter(|&&k| (2000..=4000).contains(&k)).count() as f64 / v.len() as f64;
        assert!((0.64..0.72).contains(&within), "{within}");
    }

    #[test]
    fn keys_are_prefix_and_number_padded_with_reproducible_filler() {
        let mut k = Vec::new();
        format_key(&mut k, b"key:", 0, 0);
        assert_eq!(k, b"key:0");
        format_key(&mut k, b"key:", 1234567, 0);
        assert_eq!(k, b"key:1234567");
        format_key(&mut k, b"k", 42, 20);
        assert_eq!(k.len(), 20);
        assert!(k.starts_with(b"k42-"));
        let first = k.clone();
        format_key(&mut k, b"k", 42, 20);
        assert_eq!(k, first);
        format_key(&mut k, b"k", 43, 20);
        assert_ne!(k[4..], first[4..]);
        assert!(k.iter().all(|c| c.is_ascii_graphic()));
    }

    #[test]
    fn patterns_parse_by_name_and_by_letter() {
        assert_eq!(parse_patterns("P:R").unwrap(), (Pattern::Parallel, Pattern::Random));
        assert_eq!(parse_patterns("gaussian").unwrap(), (Pattern::Gaussian, Pattern::Gaussian));
        assert!(parse_patterns("x").is_err());
    }
}
