//! What each connection (or local thread) does next: SET or read by the SET:GET ratio, with
//! keys from the pattern, within a request budget or until a deadline, after a warm-up.

use std::time::Instant;

use crate::keys::{KeyIter, Pattern};

/// The run's clock: warm-up end (= measurement start) and the optional deadline.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub measure_start: Instant,
    pub deadline: Option<Instant>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Set,
    Get,
}

pub struct OpGen {
    pub set_keys: KeyIter,
    pub get_keys: KeyIter,
    sets: u64,
    gets: u64,
    i: u64,
    /// Requests left to issue after the warm-up (None: until the deadline).
    budget: Option<u64>,
}

/// How many of `total` requests connection `conn` of `conns` issues.
pub fn allotment(total: u64, conn: u64, conns: u64) -> u64 {
    let at = |c: u64| (total as u128 * c as u128 / conns as u128) as u64;
    at(conn + 1) - at(conn)
}

/// Parses `SET:GET` (`1:10`, `1:0`, `0:1`).
pub fn parse_ratio(s: &str) -> Result<(u64, u64), String> {
    let bad = || format!("bad ratio {s:?} (expected SET:GET, e.g. 1:10)");
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let (a, b): (u64, u64) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
    if a + b == 0 {
        return Err(bad());
    }
    Ok((a, b))
}

#[derive(Clone, Debug)]
pub struct GenConfig {
    pub ratio: (u64, u64),
    pub patterns: (Pattern, Pattern),
    pub key_min: u64,
    pub key_max: u64,
    pub requests: Option<u64>,
    pub seed: u64,
}

impl OpGen {
    pub fn new(c: &GenConfig, conn: u64, conns: u64) -> OpGen {
        let seed = c.seed.wrapping_mul(0x1000_0000_01b3).wrapping_add(conn);
        OpGen {
            set_keys: KeyIter::new(c.patterns.0, c.key_min, c.key_max, conn, conns, seed),
            get_keys: KeyIter::new(c.patterns.1, c.key_min, c.key_max, conn, conns, seed ^ 0xfeed),
            sets: c.ratio.0,
            gets: c.ratio.1,
            i: 0,
            budget: c.requests.map(|n| allotment(n, conn, conns)),
        }
    }

    /// The next operation to issue at `now`, or None when this connection is done. Whether
    /// it counts: issued after the warm-up.
    #[inline]
    pub fn next(&mut self, now: Instant, clock: &Clock) -> Option<(Op, bool)> {
        let counted = now >= clock.measure_start;
        if counted {
            if clock.deadline.is_some_and(|d| now >= d) {
                return None;
            }
            if let Some(b) = &mut self.budget {
                if *b == 0 {
                    return None;
                }
                *b -= 1;
            }
        }
        let op = if self.i % (self.sets + self.gets) < self.sets { Op::Set } else { Op::Get };
        self.i += 1;
        Some((op, counted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ratio_budget_and_warmup() {
        assert_eq!(parse_ratio("1:10").unwrap(), (1, 10));
        assert!(parse_ratio("0:0").is_err() && parse_ratio("1").is_err());
        assert_eq!((0..7).map(|c| allotment(100, c, 7)).sum::<u64>(), 100);
        let cfg = GenConfig {
            ratio: (1, 2),
            patterns: (Pattern::Sequential, Pattern::Sequential),
            key_min: 0,
            key_max: 9,
            requests: Some(4),
            seed: 1,
        };
        let now = Instant::now();
        let warm = Clock { measure_start: now + Duration::from_secs(3600), deadline: None };
        let mut g = OpGen::new(&cfg, 0, 1);
        // During the warm-up nothing is counted and the budget is not spent.
        assert_eq!(g.next(now, &warm), Some((Op::Set, false)));
        let clock = Clock { measure_start: now, deadline: None };
        let ops: Vec<_> = std::iter::from_fn(|| g.next(now, &clock)).collect();
        assert_eq!(ops, [(Op::Get, true), (Op::Get, true), (Op::Set, true), (Op::Get, true)]);
        let mut g = OpGen::new(&GenConfig { requests: None, ..cfg }, 0, 1);
        let over = Clock { measure_start: now, deadline: Some(now) };
        assert_eq!(g.next(now, &over), None);
    }
}
