//! What the collection families (hashes, sets, SORT) share: random picks, the
//! HSCAN/SSCAN/ZSCAN argument parsing and loop, and the guard that stops a reply Redis
//! would stream without end (`HRANDFIELD k -9223372036854775807`).

use std::cell::Cell;
use std::sync::atomic::Ordering;

use larder_engine::{glob_match, Coll, Entries, Error, Handle, Kind};

use crate::command::{CmdError, Ctx};
use crate::families::keys::parse_cursor;
use crate::families::string::count_lookup;

// ---- random numbers ----

thread_local! {
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0);
    let local = 0u8;
    // The stack address differs per thread, the clock per start: enough for random picks,
    // which need to be unpredictable to nobody (Redis uses its own non-crypto PRNG too).
    let s = t ^ (&local as *const u8 as u64).rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
    if s == 0 {
        1
    } else {
        s
    }
}

/// A uniform random number in `0..n` (n > 0): xorshift64* and Lemire's multiply-shift
/// reduction (its bias is below 2^-32 for any n a collection can have).
pub fn rand_below(n: u64) -> u64 {
    RNG.with(|r| {
        let mut x = r.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        r.set(x);
        let v = x.wrapping_mul(0x2545_f491_4f6c_dd1d);
        ((v as u128 * n as u128) >> 64) as u64
    })
}

/// `k` distinct positions in `0..n` (k < n), in random order. Few picks are drawn and
/// rejected when repeated; many are the head of a partial Fisher–Yates shuffle (Redis's
/// SRANDMEMBER cases 3 and 4 split the same way).
pub fn distinct_positions(n: u64, k: u64) -> Vec<u64> {
    debug_assert!(k < n);
    if k * 3 > n {
        let mut all: Vec<u64> = (0..n).collect();
        for i in 0..k as usize {
            let j = i + rand_below(n - i as u64) as usize;
            all.swap(i, j);
        }
        all.truncate(k as usize);
        all
    } else {
        let mut seen = std::collections::HashSet::with_capacity(k as usize);
        let mut out = Vec::with_capacity(k as usize);
        while (out.len() as u64) < k {
            let i = rand_below(n);
            if seen.insert(i) {
                out.push(i);
            }
        }
        out
    }
}

/// HRANDFIELD's and SRANDMEMBER's picks. `count` > 0: that many distinct entries (all of them, in the
/// collection's order, when it has no more); < 0: `-count` picks with repeats. A pick is
/// (key, value). Positions are drawn uniformly, which is Redis's
/// `dictGetFairRandomKey` without its bias.
#[allow(clippy::type_complexity)]
pub fn random_entries(c: &Coll<'_>, count: i64) -> Result<Entries, Error> {
    let size = c.len();
    if count == 0 || size == 0 {
        return Ok(Vec::new());
    }
    if count < 0 {
        return (0..count.unsigned_abs()).map(|_| c.get(rand_below(size))).collect();
    }
    let count = count as u64;
    if count >= size {
        return c.entries();
    }
    distinct_positions(size, count).into_iter().map(|i| c.get(i)).collect()
}

// ---- replies that could be endless ----

/// The most a single reply may occupy before the client is cut off, when no
/// `client-output-buffer-limit` is configured: Redis streams such replies to the socket and
/// its output-buffer limits close the client; Larder builds the reply first, so it needs a
/// bound of its own.
const REPLY_CAP: usize = 1 << 30;

/// How large the output buffer may grow while one reply is built; a reply cut off there
/// closes the connection after what was written, as Redis's CLIENT_CLOSE_ASAP.
pub fn reply_cap(ctx: &Ctx<'_>) -> usize {
    let limit = ctx.shared.config.client_output_buffer_limit.load(Ordering::Relaxed) as usize;
    if limit == 0 {
        REPLY_CAP
    } else {
        limit.min(REPLY_CAP)
    }
}

/// A count argument for HRANDFIELD / SRANDMEMBER: `-LONG_MAX..=LONG_MAX`.
pub fn rand_count(ctx: &Ctx<'_>, i: usize) -> Result<i64, CmdError> {
    let n = ctx.int(i)?;
    if n == i64::MIN {
        return Err(CmdError::new(format!(
            "ERR value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        )));
    }
    Ok(n)
}

// ---- HSCAN / SSCAN / ZSCAN ----

/// The options after the cursor: `MATCH pattern`, `COUNT n`.
pub struct ScanOpts<'a> {
    pub count: usize,
    pub pattern: Option<&'a [u8]>,
}

/// Parses the cursor at `ctx.arg(2)`: `ERR invalid cursor`.
pub fn scan_cursor(ctx: &Ctx<'_>) -> Result<u64, CmdError> {
    parse_cursor(ctx.arg(2)).ok_or_else(|| CmdError::new("ERR invalid cursor"))
}

/// Parses `[MATCH pattern] [COUNT count]` from argument 3 on, as Redis's
/// `scanGenericCommand` (COUNT below 1, a missing value or another word: syntax error).
pub fn scan_opts<'a>(ctx: &Ctx<'a>) -> Result<ScanOpts<'a>, CmdError> {
    let mut o = ScanOpts { count: 10, pattern: None };
    let mut i = 3;
    while i < ctx.argc() {
        if i + 1 >= ctx.argc() {
            return Err(CmdError::syntax());
        }
        let opt = ctx.arg(i);
        if opt.eq_ignore_ascii_case(b"count") {
            let n = ctx.int(i + 1)?;
            if n < 1 {
                return Err(CmdError::syntax());
            }
            o.count = n.min(i32::MAX as i64) as usize;
        } else if opt.eq_ignore_ascii_case(b"match") {
            o.pattern = Some(ctx.arg(i + 1)).filter(|p| *p != b"*");
        } else {
            return Err(CmdError::syntax());
        }
        i += 2;
    }
    Ok(o)
}

/// Op: one step of a collection scan. None if the key is missing; else the next cursor and
/// the (key, value) entries that match the pattern. Redis filters after collecting, so a
/// step may return fewer than `count` entries, or none, with a nonzero cursor.
#[allow(clippy::type_complexity)]
pub fn op_coll_scan(
    h: &Handle,
    db: u32,
    key: &[u8],
    kind: Kind,
    cursor: u64,
    o: &ScanOpts<'_>,
) -> Result<Option<(u64, Entries)>, Error> {
    h.coll_read(db, key, kind, |c: &mut Coll<'_>| {
        let mut out = Vec::new();
        let next = c.scan(cursor, o.count, |k, v| {
            if o.pattern.is_none_or(|p| glob_match(p, k, false)) {
                out.push((k.to_vec(), v.to_vec()));
            }
        })?;
        Ok((next, out))
    })
}

/// Checks the cursor, then the key's type (a missing key answers `[0, []]` whatever the
/// options), then the options: Redis's order for HSCAN/SSCAN/ZSCAN. Writes the reply header
/// and returns the entries; the caller writes them.
#[allow(clippy::type_complexity)]
pub fn scan_command(ctx: &mut Ctx<'_>, kind: Kind) -> Result<Option<Entries>, CmdError> {
    let cursor = scan_cursor(ctx)?;
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    let found = match scan_opts(ctx) {
        Ok(o) => op_coll_scan(ctx.h, db, key, kind, cursor, &o)?,
        // Bad options only matter for a key of the right type.
        Err(e) => match ctx.h.coll_read(db, key, kind, |_| Ok(()))? {
            Some(()) => {
                count_lookup(ctx, key, true);
                return Err(e);
            }
            None => None,
        },
    };
    count_lookup(ctx, key, found.is_some());
    ctx.out.array(2);
    let Some((next, ents)) = found else {
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(None);
    };
    ctx.out.bulk(next.to_string().as_bytes());
    Ok(Some(ents))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rand_below_stays_in_range_and_covers_it() {
        let mut hits = [0u32; 7];
        for _ in 0..7000 {
            let v = rand_below(7);
            hits[v as usize] += 1;
        }
        assert!(hits.iter().all(|&h| h > 700), "{hits:?}");
    }

    #[test]
    fn distinct_positions_are_distinct_for_both_strategies() {
        for (n, k) in [(10, 9), (10, 1), (1000, 10), (1000, 900)] {
            let mut p = distinct_positions(n, k);
            assert_eq!(p.len() as u64, k);
            assert!(p.iter().all(|&i| i < n));
            p.sort();
            p.dedup();
            assert_eq!(p.len() as u64, k);
        }
    }
}
