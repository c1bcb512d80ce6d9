//! Sorted-set commands, as Redis 7.0's `t_zset.c`: ZADD ZINCRBY ZREM ZSCORE ZMSCORE ZCARD
//! ZCOUNT ZLEXCOUNT ZRANGE ZRANGESTORE ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX
//! ZREVRANGEBYLEX ZREVRANGE ZRANK ZREVRANK ZPOPMIN ZPOPMAX ZMPOP BZPOPMIN BZPOPMAX BZMPOP ZRANDMEMBER ZREMRANGEBYSCORE
//! ZREMRANGEBYRANK ZREMRANGEBYLEX ZUNION ZINTER ZDIFF ZUNIONSTORE ZINTERSTORE ZDIFFSTORE
//! ZINTERCARD ZSCAN.
//!
//! Everything is built on the engine's sorted-set primitives ([`Coll`]): positions in score
//! order, `zseek_score` / `zseek_lex` lower bounds and `zrank`. A range is found with two
//! seeks and read with one `range` walk, so it costs O(log n + m) whatever the set's size;
//! a reverse range is the same positions read backwards.
//!
//! Scores are printed as Redis 7.0 prints them (`%.17g`, `inf`, `-inf`): a bulk string in
//! RESP2, a double (`,1.5`) in RESP3. Member/score pairs are flat in RESP2 and nested
//! `[member, score]` arrays in RESP3, where Redis 7.0 nests them.
//!
//! Commands that read several keys (ZUNIONSTORE and friends, ZRANGESTORE) read each source
//! in its own snapshot and then replace the destination: they are not atomic across keys,
//! a concurrent writer may be seen on one source and not another.

use std::cmp::Ordering as CmpOrd;
use std::collections::HashMap;

use larder_engine::{Coll, Error, Handle, Kind, Type};
use larder_resp::{Protocol, Writer};

use crate::blocking::{self, NullReply};
use crate::command::{
    strtod_erange, strtod_prefix, CmdError, Ctx, Spec, BLOCKING, DENYOOM, FAST, MOVABLEKEYS, NOSCRIPT, READONLY, WRITE,
};
use crate::families::collection::{distinct_positions, rand_below, rand_count, reply_cap, scan_command};
use crate::families::list::parse_timeout;
use crate::families::string::count_lookup;
use crate::notify::{self, notify, Replace, ZSET};

const RO: u32 = READONLY;
const ROF: u32 = READONLY | FAST;
const W: u32 = WRITE;

#[rustfmt::skip]
pub const COMMANDS: &[Spec] = &[
    Spec { name: "zadd", arity: -4, flags: W | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Add one or more members to a sorted set, or update its score if it already exists", handler: cmd_zadd },
    Spec { name: "zincrby", arity: 4, flags: W | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Increment the score of a member in a sorted set", handler: cmd_zincrby },
    Spec { name: "zrem", arity: -3, flags: W | FAST, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Remove one or more members from a sorted set", handler: cmd_zrem },
    Spec { name: "zscore", arity: 3, flags: ROF, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Get the score associated with the given member in a sorted set", handler: cmd_zscore },
    Spec { name: "zmscore", arity: -3, flags: ROF, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Get the score associated with the given members in a sorted set", handler: cmd_zmscore },
    Spec { name: "zcard", arity: 2, flags: ROF, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Get the number of members in a sorted set", handler: cmd_zcard },
    Spec { name: "zcount", arity: 4, flags: ROF, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Count the members in a sorted set with scores within the given values", handler: cmd_zcount },
    Spec { name: "zlexcount", arity: 4, flags: ROF, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Count the number of members in a sorted set between a given lexicographical range", handler: cmd_zlexcount },
    Spec { name: "zrange", arity: -4, flags: RO, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Return a range of members in a sorted set", handler: cmd_zrange },
    Spec { name: "zrangestore", arity: -5, flags: W | DENYOOM, first_key: 1, last_key: 2, step: 1, group: "sorted-set", summary: "Store a range of members from sorted set into another key", handler: cmd_zrangestore },
    Spec { name: "zrangebyscore", arity: -4, flags: RO, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Return a range of members in a sorted set, by score", handler: cmd_zrangebyscore },
    Spec { name: "zrevrangebyscore", arity: -4, flags: RO, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Return a range of members in a sorted set, by score, with scores ordered from high to low", handler: cmd_zrevrangebyscore },
    Spec { name: "zrangebylex", arity: -4, flags: RO, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Return a range of members in a sorted set, by lexicographical range", handler: cmd_zrangebylex },
    Spec { name: "zrevrangebylex", arity: -4, flags: RO, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", handler: cmd_zrevrangebylex },
    Spec { name: "zrevrange", arity: -4, flags: RO, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Return a range of members in a sorted set, by index, with scores ordered from high to low", handler: cmd_zrevrange },
    Spec { name: "zrank", arity: 3, flags: ROF, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Determine the index of a member in a sorted set", handler: cmd_zrank },
    Spec { name: "zrevrank", arity: 3, flags: ROF, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Determine the index of a member in a sorted set, with scores ordered from high to low", handler: cmd_zrevrank },
    Spec { name: "zpopmin", arity: -2, flags: W | FAST, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Remove and return members with the lowest scores in a sorted set", handler: cmd_zpopmin },
    Spec { name: "zpopmax", arity: -2, flags: W | FAST, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Remove and return members with the highest scores in a sorted set", handler: cmd_zpopmax },
    Spec { name: "zmpop", arity: -4, flags: W | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "sorted-set", summary: "Remove and return members with scores in a sorted set", handler: cmd_zmpop },
    Spec { name: "bzpopmin", arity: -3, flags: W | NOSCRIPT | FAST | BLOCKING, first_key: 1, last_key: -2, step: 1, group: "sorted-set", summary: "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", handler: cmd_bzpopmin },
    Spec { name: "bzpopmax", arity: -3, flags: W | NOSCRIPT | FAST | BLOCKING, first_key: 1, last_key: -2, step: 1, group: "sorted-set", summary: "Remove and return the member with the highest score from one or more sorted sets, or block until one is available", handler: cmd_bzpopmax },
    Spec { name: "bzmpop", arity: -5, flags: W | BLOCKING | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "sorted-set", summary: "Remove and return members with scores in a sorted set or block until one is available", handler: cmd_bzmpop },
    Spec { name: "zrandmember", arity: -2, flags: RO, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Get one or multiple random elements from a sorted set", handler: cmd_zrandmember },
    Spec { name: "zremrangebyscore", arity: 4, flags: W, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Remove all members in a sorted set within the given scores", handler: cmd_zremrangebyscore },
    Spec { name: "zremrangebyrank", arity: 4, flags: W, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Remove all members in a sorted set within the given indexes", handler: cmd_zremrangebyrank },
    Spec { name: "zremrangebylex", arity: 4, flags: W, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Remove all members in a sorted set between the given lexicographical range", handler: cmd_zremrangebylex },
    Spec { name: "zunion", arity: -3, flags: RO | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "sorted-set", summary: "Add multiple sorted sets", handler: cmd_zunion },
    Spec { name: "zinter", arity: -3, flags: RO | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "sorted-set", summary: "Intersect multiple sorted sets", handler: cmd_zinter },
    Spec { name: "zdiff", arity: -3, flags: RO | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "sorted-set", summary: "Subtract multiple sorted sets", handler: cmd_zdiff },
    Spec { name: "zunionstore", arity: -4, flags: W | DENYOOM | MOVABLEKEYS, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Add multiple sorted sets and store the resulting sorted set in a new key", handler: cmd_zunionstore },
    Spec { name: "zinterstore", arity: -4, flags: W | DENYOOM | MOVABLEKEYS, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Intersect multiple sorted sets and store the resulting sorted set in a new key", handler: cmd_zinterstore },
    Spec { name: "zdiffstore", arity: -4, flags: W | DENYOOM | MOVABLEKEYS, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Subtract multiple sorted sets and store the resulting sorted set in a new key", handler: cmd_zdiffstore },
    Spec { name: "zintercard", arity: -3, flags: RO | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "sorted-set", summary: "Intersect multiple sorted sets and return the cardinality of the result", handler: cmd_zintercard },
    Spec { name: "zscan", arity: -3, flags: RO, first_key: 1, last_key: 1, step: 1, group: "sorted-set", summary: "Incrementally iterate sorted sets elements and associated scores", handler: cmd_zscan },
];

/// A member and its score.
pub type Scored = (Vec<u8>, f64);

// ---- numbers ----

/// A stored score (8 bytes, little-endian f64).
fn score_of(v: &[u8]) -> f64 {
    v.try_into().map(f64::from_le_bytes).unwrap_or(0.0)
}

/// Appends a score as Redis 7.0 prints it: `inf`/`-inf`, else C's `%.17g`.
pub fn fmt_score(out: &mut Vec<u8>, d: f64) {
    if d.is_infinite() {
        out.extend_from_slice(if d > 0.0 { b"inf" } else { b"-inf" });
        return;
    }
    if d.is_nan() {
        out.extend_from_slice(b"nan");
        return;
    }
    if d == 0.0 {
        out.extend_from_slice(if d.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    // Integers below 10^17 print as themselves under %.17g.
    if d.fract() == 0.0 && d.abs() < 1e17 {
        out.extend_from_slice((d as i64).to_string().as_bytes());
        return;
    }
    // 17 significant digits, correctly rounded, then C's choice of style.
    let s = format!("{:.16e}", d);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: Vec<u8> = mant.bytes().filter(u8::is_ascii_digit).collect();
    if neg {
        out.push(b'-');
    }
    if !(-4..17).contains(&exp) {
        let mut end = digits.len();
        while end > 1 && digits[end - 1] == b'0' {
            end -= 1;
        }
        out.push(digits[0]);
        if end > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..end]);
        }
        out.push(b'e');
        out.push(if exp < 0 { b'-' } else { b'+' });
        let e = exp.unsigned_abs();
        if e < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(e.to_string().as_bytes());
    } else {
        // Fixed: the point goes after digit `exp` (0-based), zeros in front when exp < 0.
        let mut text = Vec::with_capacity(24);
        if exp < 0 {
            text.extend_from_slice(b"0.");
            text.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            text.extend_from_slice(&digits);
        } else {
            let p = exp as usize + 1;
            text.extend_from_slice(&digits[..p]);
            text.push(b'.');
            text.extend_from_slice(&digits[p..]);
        }
        while text.last() == Some(&b'0') {
            text.pop();
        }
        if text.last() == Some(&b'.') {
            text.pop();
        }
        out.extend_from_slice(&text);
    }
}

/// Redis's `getDoubleFromObject`: the whole argument is a float, no leading space, no
/// overflow to ±inf or underflow to 0 (ERANGE), not NaN.
pub fn parse_score(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b[0].is_ascii_whitespace() || b[0] == b'\x0b' {
        return None;
    }
    let (v, n) = strtod_prefix(b);
    if n != b.len() || v.is_nan() || strtod_erange(b, v) {
        return None;
    }
    Some(v)
}

/// One end of a ZRANGEBYSCORE range: Redis's `zslParseRange` (`strtod` up to the end or a
/// NUL byte, `(` for an exclusive bound, NaN refused).
fn parse_bound(b: &[u8]) -> Option<(f64, bool)> {
    let (ex, s) = match b.first() {
        Some(b'(') => (true, &b[1..]),
        _ => (false, b),
    };
    let (v, n) = strtod_prefix(s);
    if (n < s.len() && s[n] != 0) || v.is_nan() {
        return None;
    }
    Some((v, ex))
}

/// A score range: min, min exclusive, max, max exclusive.
#[derive(Clone, Copy, Debug)]
pub struct ScoreRange {
    pub min: f64,
    pub minex: bool,
    pub max: f64,
    pub maxex: bool,
}

fn parse_score_range(min: &[u8], max: &[u8]) -> Result<ScoreRange, CmdError> {
    let bad = || CmdError::new("ERR min or max is not a float");
    let (min, minex) = parse_bound(min).ok_or_else(bad)?;
    let (max, maxex) = parse_bound(max).ok_or_else(bad)?;
    Ok(ScoreRange { min, minex, max, maxex })
}

/// One end of a lexicographical range: `-`, `+`, `[member` or `(member`.
#[derive(Clone, Copy, Debug)]
pub enum Lex<'a> {
    Min,
    Max,
    Incl(&'a [u8]),
    Excl(&'a [u8]),
}

fn parse_lex(b: &[u8]) -> Option<Lex<'_>> {
    match b.first()? {
        b'+' if b.len() == 1 => Some(Lex::Max),
        b'-' if b.len() == 1 => Some(Lex::Min),
        b'[' => Some(Lex::Incl(&b[1..])),
        b'(' => Some(Lex::Excl(&b[1..])),
        _ => None,
    }
}

fn parse_lex_range<'a>(min: &'a [u8], max: &'a [u8]) -> Result<(Lex<'a>, Lex<'a>), CmdError> {
    let bad = || CmdError::new("ERR min or max not valid string range item");
    Ok((parse_lex(min).ok_or_else(bad)?, parse_lex(max).ok_or_else(bad)?))
}

/// Redis's `getRangeLongFromObjectOrReply` with a message: the same text for "not an
/// integer" and "out of range".
fn int_in(ctx: &Ctx<'_>, i: usize, min: i64, max: i64, msg: &str) -> Result<i64, CmdError> {
    match crate::command::parse_i64(ctx.arg(i)) {
        Some(v) if v >= min && v <= max => Ok(v),
        _ => Err(CmdError::new(format!("ERR {msg}"))),
    }
}

fn is(b: &[u8], word: &str) -> bool {
    b.eq_ignore_ascii_case(word.as_bytes())
}

// ---- positions ----

/// Forward positions `[from, to)` of the scores in `r`.
fn score_span(c: &mut Coll<'_>, r: &ScoreRange) -> Result<(u64, u64), Error> {
    let from = c.zseek_score(r.min, r.minex)?;
    let to = c.zseek_score(r.max, !r.maxex)?;
    Ok((from, to.max(from)))
}

fn lex_pos(c: &mut Coll<'_>, b: Lex<'_>, upper: bool) -> Result<u64, Error> {
    match b {
        Lex::Min => Ok(0),
        Lex::Max => Ok(c.len()),
        Lex::Incl(m) => c.zseek_lex(m, upper),
        Lex::Excl(m) => c.zseek_lex(m, !upper),
    }
}

/// Forward positions `[from, to)` of the members in a lexicographical range.
fn lex_span(c: &mut Coll<'_>, min: Lex<'_>, max: Lex<'_>) -> Result<(u64, u64), Error> {
    let from = lex_pos(c, min, false)?;
    let to = lex_pos(c, max, true)?;
    Ok((from, to.max(from)))
}

/// Forward positions of ranks `start..=end` (negative from the end), counted from the
/// high end when `rev`; None when empty.
fn rank_span(len: u64, start: i64, end: i64, rev: bool) -> Option<(u64, u64)> {
    let llen = len as i64;
    let mut start = if start < 0 { start.saturating_add(llen) } else { start };
    let mut end = if end < 0 { end.saturating_add(llen) } else { end };
    if start < 0 {
        start = 0;
    }
    if start > end || start >= llen {
        return None;
    }
    if end >= llen {
        end = llen - 1;
    }
    Some(if rev { ((llen - 1 - end) as u64, (llen - start) as u64) } else { (start as u64, end as u64 + 1) })
}

/// Applies LIMIT to the span `[from, to)`, from the low end or (when `rev`) the high end.
fn limit_span(from: u64, to: u64, offset: i64, count: i64, rev: bool) -> (u64, u64) {
    if offset < 0 {
        return (from, from);
    }
    let n = to - from;
    let off = (offset as u64).min(n);
    let avail = n - off;
    let take = if count < 0 { avail } else { (count as u64).min(avail) };
    if rev {
        (to - off - take, to - off)
    } else {
        (from + off, from + off + take)
    }
}

/// Reads positions `[from, to)`, reversed when `rev`.
fn read_span(c: &Coll<'_>, from: u64, to: u64, rev: bool) -> Result<Vec<Scored>, Error> {
    let mut out = Vec::with_capacity((to.saturating_sub(from)).min(1 << 16) as usize);
    c.range(from, to, |k, v| {
        out.push((k.to_vec(), score_of(v)));
        true
    })?;
    if rev {
        out.reverse();
    }
    Ok(out)
}

// ---- replies ----

/// A score: a bulk string in RESP2, a double in RESP3 (both `%.17g`, as Redis 7.0).
fn reply_score(ctx: &mut Ctx<'_>, d: f64) {
    let mut s = Vec::with_capacity(24);
    fmt_score(&mut s, d);
    reply_double_text(ctx, &s);
}

/// A double already formatted as `s`: a bulk string in RESP2, a RESP3 double (`,s`).
pub(crate) fn reply_double_text(ctx: &mut Ctx<'_>, s: &[u8]) {
    write_double_text(&mut ctx.out, s);
}

/// [`reply_double_text`] on a writer.
pub(crate) fn write_double_text(out: &mut Writer<'_>, s: &[u8]) {
    match out.protocol() {
        Protocol::Resp2 => {
            out.bulk(s);
        }
        Protocol::Resp3 => {
            let buf = out.buf();
            buf.push(b',');
            buf.extend_from_slice(s);
            buf.extend_from_slice(b"\r\n");
        }
    }
}

/// A double as Redis 7.0's `addReplyDouble` writes it (`%.17g`, see [`fmt_score`]).
pub(crate) fn write_double(out: &mut Writer<'_>, d: f64) {
    let mut s = Vec::with_capacity(24);
    fmt_score(&mut s, d);
    write_double_text(out, &s);
}

/// Member/score pairs: members only, flat `m s m s`, or (`nested`) `[[m, s], ...]`.
fn reply_pairs(ctx: &mut Ctx<'_>, items: &[Scored], scores: bool, nested: bool) {
    if nested {
        ctx.out.array(items.len());
        for (m, s) in items {
            ctx.out.array(2);
            ctx.out.bulk(m);
            reply_score(ctx, *s);
        }
    } else if scores {
        ctx.out.array(items.len() * 2);
        for (m, s) in items {
            ctx.out.bulk(m);
            reply_score(ctx, *s);
        }
    } else {
        ctx.out.array(items.len());
        for (m, _) in items {
            ctx.out.bulk(m);
        }
    }
}

fn resp3(ctx: &mut Ctx<'_>) -> bool {
    ctx.out.protocol() == Protocol::Resp3
}

// ---- ops (engine in, result out) ----

/// ZADD's option words.
#[derive(Clone, Copy, Debug, Default)]
pub struct ZAddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub incr: bool,
}

/// What ZADD did: members added, scores changed, pairs not skipped, the last score set
/// (INCR's reply), and whether an increment came out NaN.
#[derive(Clone, Copy, Debug, Default)]
pub struct ZAddOut {
    pub added: u64,
    pub updated: u64,
    pub processed: u64,
    pub score: f64,
    pub nan: bool,
}

/// ZADD / ZINCRBY on one key (Redis's `zsetAdd` per pair). Scores of -0 are stored as 0, as
/// Redis's listpack stores them.
pub fn op_zadd(h: &mut Handle, db: u32, key: &[u8], f: ZAddFlags, pairs: &[(f64, &[u8])]) -> Result<ZAddOut, CmdError> {
    let r = h.coll_write(db, key, Kind::ZSet, !f.xx, |c| {
        let mut out = ZAddOut::default();
        let plain = !(f.nx || f.xx || f.gt || f.lt || f.incr);
        for &(score, m) in pairs {
            if plain {
                // No condition to test first: one lookup (zput's) instead of two.
                out.processed += 1;
                out.score = score;
                match c.zput(m, score + 0.0)? {
                    None => out.added += 1,
                    Some(cur) if cur != score => out.updated += 1,
                    Some(_) => {}
                }
                continue;
            }
            match c.score(m)? {
                Some(cur) => {
                    if f.nx {
                        continue;
                    }
                    let mut s = score;
                    if f.incr {
                        s += cur;
                        if s.is_nan() {
                            out.nan = true;
                            return Ok(out);
                        }
                    }
                    if (f.lt && s >= cur) || (f.gt && s <= cur) {
                        continue;
                    }
                    out.processed += 1;
                    out.score = s;
                    if s != cur {
                        c.zput(m, s + 0.0)?;
                        out.updated += 1;
                    }
                }
                None => {
                    if f.xx {
                        continue;
                    }
                    out.processed += 1;
                    out.score = score;
                    c.zput(m, score + 0.0)?;
                    out.added += 1;
                }
            }
        }
        Ok(out)
    })?;
    Ok(r.unwrap_or_default())
}

/// Pops up to `count` members from the low (or, `max`, high) end of `key`; returns them and
/// whether the sorted set is now empty (so deleted). None if the key is missing. ZPOPMIN,
/// ZPOPMAX and ZMPOP use it; so can their blocking forms.
#[allow(clippy::type_complexity)]
pub fn pop(
    h: &mut Handle,
    db: u32,
    key: &[u8],
    max: bool,
    count: u64,
) -> Result<Option<(Vec<Scored>, bool)>, CmdError> {
    Ok(pop_raw(h, db, key, max, count)?)
}

/// [`pop`] with the engine's error, so the blocking forms can tell WRONGTYPE apart.
#[allow(clippy::type_complexity)]
fn pop_raw(h: &mut Handle, db: u32, key: &[u8], max: bool, count: u64) -> Result<Option<(Vec<Scored>, bool)>, Error> {
    h.coll_write(db, key, Kind::ZSet, false, |c| {
        let n = count.min(c.len());
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let i = if max { c.len() - 1 } else { 0 };
            let (m, s) = c.remove_at(i)?;
            out.push((m, score_of(&s)));
        }
        Ok((out, c.is_empty()))
    })
}

/// The events of members popped from `key` ("zpopmin" / "zpopmax"), and "del" if it went.
fn notify_pop(ctx: &mut Ctx<'_>, key: &[u8], max: bool, items: &[Scored], emptied: bool) {
    if items.is_empty() {
        return;
    }
    notify::notify_removed(ctx, ZSET, if max { "zpopmax" } else { "zpopmin" }, key, emptied);
}

/// How a range is given.
#[derive(Clone, Copy, Debug)]
pub enum RangeBy<'a> {
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(Lex<'a>, Lex<'a>),
}

/// The members of a range of `key` in reply order (None if the key is missing).
/// `limit`: (offset, count) for score and lex ranges, count < 0 meaning all.
pub fn op_range(
    h: &Handle,
    db: u32,
    key: &[u8],
    by: RangeBy<'_>,
    rev: bool,
    limit: (i64, i64),
) -> Result<Option<Vec<Scored>>, CmdError> {
    Ok(h.coll_read(db, key, Kind::ZSet, |c| {
        let (from, to) = match by {
            RangeBy::Rank(start, end) => match rank_span(c.len(), start, end, rev) {
                Some(s) => s,
                None => return Ok(Vec::new()),
            },
            RangeBy::Score(r) => {
                // Reverse score ranges are given max first; `r` is already min..max.
                let (f, t) = score_span(c, &r)?;
                limit_span(f, t, limit.0, limit.1, rev)
            }
            RangeBy::Lex(min, max) => {
                let (f, t) = lex_span(c, min, max)?;
                limit_span(f, t, limit.0, limit.1, rev)
            }
        };
        read_span(c, from, to, rev)
    })?)
}

/// Replaces `dst` (whatever its type) with `items`, or deletes it when `items` is empty.
/// Returns the new size and whether `dst` existed. Not atomic: the old value is deleted,
/// then the new one written.
pub fn op_store(h: &mut Handle, db: u32, dst: &[u8], items: &[Scored]) -> Result<(u64, bool), CmdError> {
    if items.is_empty() {
        return Ok((0, Replace::delete(h, db, dst)?));
    }
    let replace = Replace::begin(h, db, dst)?;
    replace.write(h, |h| {
        h.coll_write(db, dst, Kind::ZSet, true, |c| {
            c.clear()?;
            for (m, s) in items {
                c.zput(m, *s)?;
            }
            Ok(())
        })
    })?;
    Ok((items.len() as u64, replace.existed))
}

/// A STORE command's reply and events.
fn reply_stored(ctx: &mut Ctx<'_>, event: &str, dst: &[u8], (n, existed): (u64, bool)) {
    ctx.out.integer(n as i64);
    notify::notify_store(ctx, ZSET, event, dst, n > 0, existed);
}

/// A source of ZUNION and friends: a sorted set, or a set whose members score 1.
/// Reads it whole (None if missing).
fn read_source(h: &Handle, db: u32, key: &[u8]) -> Result<Option<Vec<Scored>>, CmdError> {
    match h.coll_read(db, key, Kind::ZSet, |c| read_span(c, 0, c.len(), false)) {
        Err(Error::WrongType) => {}
        r => return Ok(r?),
    }
    Ok(h.coll_read(db, key, Kind::Set, |c| {
        let mut out = Vec::with_capacity(c.len().min(1 << 16) as usize);
        c.range(0, c.len(), |k, _| {
            out.push((k.to_vec(), 1.0));
            true
        })?;
        Ok(out)
    })?)
}

/// The size of a source (0 if missing).
fn source_len(h: &Handle, db: u32, key: &[u8]) -> Result<u64, CmdError> {
    match h.coll_read(db, key, Kind::ZSet, |c| Ok(c.len())) {
        Err(Error::WrongType) => {}
        r => return Ok(r?.unwrap_or(0)),
    }
    Ok(h.coll_read(db, key, Kind::Set, |c| Ok(c.len()))?.unwrap_or(0))
}

/// For each candidate member, its score in source `key` (a set's members score 1), or None.
fn lookup_source(h: &Handle, db: u32, key: &[u8], members: &[&[u8]]) -> Result<Vec<Option<f64>>, CmdError> {
    match h.coll_read(db, key, Kind::ZSet, |c| members.iter().map(|m| c.score(m)).collect::<Result<Vec<_>, _>>()) {
        Err(Error::WrongType) => {}
        r => return Ok(r?.unwrap_or_else(|| vec![None; members.len()])),
    }
    let r = h.coll_read(db, key, Kind::Set, |c| {
        members.iter().map(|m| Ok(c.contains(m)?.then_some(1.0))).collect::<Result<Vec<_>, Error>>()
    })?;
    Ok(r.unwrap_or_else(|| vec![None; members.len()]))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetOp {
    Union,
    Inter,
    Diff,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    Sum,
    Min,
    Max,
}

fn aggregate(target: &mut f64, v: f64, a: Aggregate) {
    match a {
        Aggregate::Sum => {
            *target += v;
            // inf + -inf: Redis's convention is 0.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if v < *target {
                *target = v
            }
        }
        Aggregate::Max => {
            if v > *target {
                *target = v
            }
        }
    }
}

fn weighted(s: f64, w: f64) -> f64 {
    let v = s * w;
    if v.is_nan() {
        0.0
    } else {
        v
    }
}

/// Sorts by (score, member), the order of a sorted set.
fn sort_scored(v: &mut [Scored]) {
    v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap_or(CmpOrd::Equal).then_with(|| a.0.cmp(&b.0)));
}

/// ZUNION / ZINTER / ZDIFF (and ZINTERCARD when `card_limit` is Some: stops at that many,
/// 0 = no limit, and returns members without building scores' order). Sources are read one
/// at a time; the result is in score order.
pub fn op_setop(
    h: &Handle,
    db: u32,
    keys: &[&[u8]],
    weights: &[f64],
    op: SetOp,
    agg: Aggregate,
) -> Result<Vec<Scored>, CmdError> {
    let mut out = match op {
        SetOp::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            // Redis visits the sources from the smallest up.
            let mut order: Vec<(u64, usize)> = keys
                .iter()
                .enumerate()
                .map(|(i, k)| Ok((source_len(h, db, k)?, i)))
                .collect::<Result<_, CmdError>>()?;
            order.sort();
            for &(_, i) in &order {
                let Some(items) = read_source(h, db, keys[i])? else { continue };
                for (m, s) in items {
                    let v = weighted(s, weights[i]);
                    match acc.get_mut(&m) {
                        Some(t) => aggregate(t, v, agg),
                        None => {
                            acc.insert(m, v);
                        }
                    }
                }
            }
            acc.into_iter().collect::<Vec<_>>()
        }
        SetOp::Inter => inter(h, db, keys, weights, agg, 0)?,
        SetOp::Diff => {
            let Some(mut cand) = read_source(h, db, keys[0])? else { return Ok(Vec::new()) };
            for k in &keys[1..] {
                if cand.is_empty() {
                    break;
                }
                let ms: Vec<&[u8]> = cand.iter().map(|(m, _)| m.as_slice()).collect();
                let found = lookup_source(h, db, k, &ms)?;
                let mut it = found.into_iter();
                cand.retain(|_| it.next().flatten().is_none());
            }
            cand
        }
    };
    sort_scored(&mut out);
    Ok(out)
}

/// The intersection: the smallest source's members looked up in the others (stops after
/// `limit` members when nonzero).
fn inter(
    h: &Handle,
    db: u32,
    keys: &[&[u8]],
    weights: &[f64],
    agg: Aggregate,
    limit: u64,
) -> Result<Vec<Scored>, CmdError> {
    let mut order: Vec<(u64, usize)> =
        keys.iter().enumerate().map(|(i, k)| Ok((source_len(h, db, k)?, i))).collect::<Result<_, CmdError>>()?;
    order.sort();
    if order[0].0 == 0 {
        return Ok(Vec::new());
    }
    let first = order[0].1;
    let Some(items) = read_source(h, db, keys[first])? else { return Ok(Vec::new()) };
    let mut cand: Vec<Scored> = items.into_iter().map(|(m, s)| (m, weighted(s, weights[first]))).collect();
    for &(_, i) in &order[1..] {
        if cand.is_empty() {
            break;
        }
        let ms: Vec<&[u8]> = cand.iter().map(|(m, _)| m.as_slice()).collect();
        let found = lookup_source(h, db, keys[i], &ms)?;
        let mut it = found.into_iter();
        cand.retain_mut(|(_, t)| match it.next().flatten() {
            Some(s) => {
                aggregate(t, s * weights[i], agg);
                true
            }
            None => false,
        });
    }
    if limit > 0 {
        cand.truncate(limit as usize);
    }
    Ok(cand)
}

// ---- commands ----

fn db(ctx: &Ctx<'_>) -> u32 {
    ctx.conn.db
}

/// # Format
/// `ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]` → added (or
/// changed, with CH) count; with INCR the new score, or null if nothing was done.
fn cmd_zadd(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zadd_generic(ctx, false)
}

/// # Format
/// `ZINCRBY key increment member` → the new score.
fn cmd_zincrby(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zadd_generic(ctx, true)
}

fn zadd_generic(ctx: &mut Ctx<'_>, zincrby: bool) -> Result<(), CmdError> {
    let mut f = ZAddFlags { incr: zincrby, ..Default::default() };
    let mut ch = false;
    let mut idx = 2;
    while idx < ctx.argc() {
        let o = ctx.arg(idx);
        if is(o, "nx") {
            f.nx = true
        } else if is(o, "xx") {
            f.xx = true
        } else if is(o, "ch") {
            ch = true
        } else if is(o, "incr") {
            f.incr = true
        } else if is(o, "gt") {
            f.gt = true
        } else if is(o, "lt") {
            f.lt = true
        } else {
            break;
        }
        idx += 1;
    }
    let elements = ctx.argc() - idx;
    if elements % 2 == 1 || elements == 0 {
        return Err(CmdError::syntax());
    }
    if f.nx && f.xx {
        return Err(CmdError::new("ERR XX and NX options at the same time are not compatible"));
    }
    if ((f.gt || f.lt) && f.nx) || (f.gt && f.lt) {
        return Err(CmdError::new("ERR GT, LT, and/or NX options at the same time are not compatible"));
    }
    if f.incr && elements > 2 {
        return Err(CmdError::new("ERR INCR option supports a single increment-element pair"));
    }
    let mut pairs = Vec::with_capacity(elements / 2);
    for j in (idx..ctx.argc()).step_by(2) {
        let s = parse_score(ctx.arg(j)).ok_or_else(CmdError::not_float)?;
        pairs.push((s, ctx.arg(j + 1)));
    }
    let key = ctx.arg(1);
    let out = op_zadd(ctx.h, db(ctx), key, f, &pairs)?;
    if out.nan {
        return Err(CmdError::new("ERR resulting score is not a number (NaN)"));
    }
    if f.incr {
        if out.processed > 0 {
            reply_score(ctx, out.score);
        } else {
            ctx.out.null();
        }
    } else {
        ctx.out.integer((if ch { out.added + out.updated } else { out.added }) as i64);
    }
    notify_zadd(ctx, key, f, &out);
    Ok(())
}

/// ZADD's (and GEOADD's) event: "zadd", or "zincr" with INCR (ZINCRBY too), when a member
/// was added or its score changed.
pub fn notify_zadd(ctx: &mut Ctx<'_>, key: &[u8], f: ZAddFlags, out: &ZAddOut) {
    if out.added + out.updated > 0 {
        notify(ctx, ZSET, if f.incr { "zincr" } else { "zadd" }, key);
    }
}

/// Members removed from `key`: its event, and "del" if it went.
fn notify_removed(ctx: &mut Ctx<'_>, event: &str, key: &[u8], removed: u64, emptied: bool) {
    if removed > 0 {
        notify::notify_removed(ctx, ZSET, event, key, emptied);
    }
}

/// # Format
/// `ZREM key member [member ...]` → how many were removed.
fn cmd_zrem(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let argv = ctx.argv;
    let r = ctx.h.coll_write(db(ctx), argv.get(1), Kind::ZSet, false, |c| {
        let mut n = 0u64;
        for m in argv.iter().skip(2) {
            if c.del(m)?.is_some() {
                n += 1;
            }
        }
        Ok((n, c.is_empty()))
    })?;
    let (n, emptied) = r.unwrap_or((0, false));
    notify_removed(ctx, "zrem", argv.get(1), n, emptied);
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `ZSCORE key member` → the score, or null.
fn cmd_zscore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let m = ctx.arg(2);
    let r = ctx.h.coll_read(db(ctx), ctx.arg(1), Kind::ZSet, |c| c.score(m))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    match r.flatten() {
        Some(s) => reply_score(ctx, s),
        None => {
            ctx.out.null();
        }
    }
    Ok(())
}

/// # Format
/// `ZMSCORE key member [member ...]` → a score or null per member.
fn cmd_zmscore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let argv = ctx.argv;
    let scores = ctx.h.coll_read(db(ctx), argv.get(1), Kind::ZSet, |c| {
        argv.iter().skip(2).map(|m| c.score(m)).collect::<Result<Vec<_>, _>>()
    })?;
    count_lookup(ctx, ctx.arg(1), scores.is_some());
    let scores = scores.unwrap_or_else(|| vec![None; argv.len() - 2]);
    ctx.out.array(scores.len());
    for s in scores {
        match s {
            Some(s) => reply_score(ctx, s),
            None => {
                ctx.out.null();
            }
        }
    }
    Ok(())
}

/// # Format
/// `ZCARD key` → the number of members.
fn cmd_zcard(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let n = ctx.h.coll_read(db(ctx), ctx.arg(1), Kind::ZSet, |c| Ok(c.len()))?;
    count_lookup(ctx, ctx.arg(1), n.is_some());
    ctx.out.integer(n.unwrap_or(0) as i64);
    Ok(())
}

/// # Format
/// `ZCOUNT key min max` → members with scores in the range.
fn cmd_zcount(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = parse_score_range(ctx.arg(2), ctx.arg(3))?;
    let n = ctx.h.coll_read(db(ctx), ctx.arg(1), Kind::ZSet, |c| score_span(c, &r).map(|(f, t)| t - f))?;
    count_lookup(ctx, ctx.arg(1), n.is_some());
    ctx.out.integer(n.unwrap_or(0) as i64);
    Ok(())
}

/// # Format
/// `ZLEXCOUNT key min max` → members in the lexicographical range.
fn cmd_zlexcount(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (min, max) = parse_lex_range(ctx.arg(2), ctx.arg(3))?;
    let n = ctx.h.coll_read(db(ctx), ctx.arg(1), Kind::ZSet, |c| lex_span(c, min, max).map(|(f, t)| t - f))?;
    count_lookup(ctx, ctx.arg(1), n.is_some());
    ctx.out.integer(n.unwrap_or(0) as i64);
    Ok(())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum By {
    Auto,
    Rank,
    Score,
    Lex,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Dir {
    Auto,
    Fwd,
    Rev,
}

/// Redis's `zrangeGenericCommand`: ZRANGE, ZRANGESTORE and the older range commands.
/// `at` is the index of the source key; `store` the destination's index.
fn zrange_generic(
    ctx: &mut Ctx<'_>,
    at: usize,
    store: Option<usize>,
    mut by: By,
    mut dir: Dir,
) -> Result<(), CmdError> {
    let (mut withscores, mut offset, mut limit) = (false, 0i64, -1i64);
    let mut j = at + 3;
    while j < ctx.argc() {
        let left = ctx.argc() - j - 1;
        let a = ctx.arg(j);
        if store.is_none() && is(a, "withscores") {
            withscores = true;
        } else if is(a, "limit") && left >= 2 {
            offset = ctx.int(j + 1)?;
            limit = ctx.int(j + 2)?;
            j += 2;
        } else if dir == Dir::Auto && is(a, "rev") {
            dir = Dir::Rev;
        } else if by == By::Auto && is(a, "bylex") {
            by = By::Lex;
        } else if by == By::Auto && is(a, "byscore") {
            by = By::Score;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let rev = dir == Dir::Rev;
    if by == By::Auto {
        by = By::Rank;
    }
    if limit != -1 && by == By::Rank {
        return Err(CmdError::new(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if withscores && by == By::Lex {
        return Err(CmdError::new("ERR syntax error, WITHSCORES not supported in combination with BYLEX"));
    }
    let (mut lo, mut hi) = (at + 1, at + 2);
    if rev && by != By::Rank {
        std::mem::swap(&mut lo, &mut hi);
    }
    let spec = match by {
        By::Score => RangeBy::Score(parse_score_range(ctx.arg(lo), ctx.arg(hi))?),
        By::Lex => {
            let (a, b) = parse_lex_range(ctx.arg(lo), ctx.arg(hi))?;
            RangeBy::Lex(a, b)
        }
        _ => RangeBy::Rank(ctx.int(lo)?, ctx.int(hi)?),
    };
    let items = op_range(ctx.h, db(ctx), ctx.arg(at), spec, rev, (offset, limit))?;
    count_lookup(ctx, ctx.arg(at), items.is_some());
    match store {
        Some(d) => {
            let mut items = items.unwrap_or_default();
            if rev {
                items.reverse();
            }
            let stored = op_store(ctx.h, db(ctx), ctx.arg(d), &items)?;
            reply_stored(ctx, "zrangestore", ctx.arg(d), stored);
        }
        None => {
            let items = items.unwrap_or_default();
            let nested = withscores && resp3(ctx);
            reply_pairs(ctx, &items, withscores, nested);
        }
    }
    Ok(())
}

/// # Format
/// `ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]`.
fn cmd_zrange(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrange_generic(ctx, 1, None, By::Auto, Dir::Auto)
}

/// # Format
/// `ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]` → stored count.
fn cmd_zrangestore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrange_generic(ctx, 2, Some(1), By::Auto, Dir::Auto)
}

/// # Format
/// `ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]`.
fn cmd_zrangebyscore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrange_generic(ctx, 1, None, By::Score, Dir::Fwd)
}

/// # Format
/// `ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]`.
fn cmd_zrevrangebyscore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrange_generic(ctx, 1, None, By::Score, Dir::Rev)
}

/// # Format
/// `ZRANGEBYLEX key min max [LIMIT offset count]`.
fn cmd_zrangebylex(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrange_generic(ctx, 1, None, By::Lex, Dir::Fwd)
}

/// # Format
/// `ZREVRANGEBYLEX key max min [LIMIT offset count]`.
fn cmd_zrevrangebylex(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrange_generic(ctx, 1, None, By::Lex, Dir::Rev)
}

/// # Format
/// `ZREVRANGE key start stop [WITHSCORES]`.
fn cmd_zrevrange(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrange_generic(ctx, 1, None, By::Rank, Dir::Rev)
}

fn zrank_generic(ctx: &mut Ctx<'_>, rev: bool) -> Result<(), CmdError> {
    let m = ctx.arg(2);
    let r = ctx.h.coll_read(db(ctx), ctx.arg(1), Kind::ZSet, |c| {
        Ok(c.zrank(m)?.map(|r| if rev { c.len() - 1 - r } else { r }))
    })?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    match r.flatten() {
        Some(r) => ctx.out.integer(r as i64),
        None => ctx.out.null(),
    };
    Ok(())
}

/// # Format
/// `ZRANK key member` → the rank from the lowest score, or null.
fn cmd_zrank(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrank_generic(ctx, false)
}

/// # Format
/// `ZREVRANK key member` → the rank from the highest score, or null.
fn cmd_zrevrank(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zrank_generic(ctx, true)
}

fn zpop_generic(ctx: &mut Ctx<'_>, max: bool) -> Result<(), CmdError> {
    if ctx.argc() > 3 {
        return Err(CmdError::syntax());
    }
    let count = if ctx.argc() == 3 {
        Some(int_in(ctx, 2, 0, i64::MAX, "value is out of range, must be positive")?)
    } else {
        None
    };
    let (items, emptied) = pop(ctx.h, db(ctx), ctx.arg(1), max, count.unwrap_or(1) as u64)?.unwrap_or_default();
    let nested = resp3(ctx) && count.is_some();
    reply_pairs(ctx, &items, true, nested);
    notify_pop(ctx, ctx.arg(1), max, &items, emptied);
    Ok(())
}

/// # Format
/// `ZPOPMIN key [count]` → member, score pairs (nested in RESP3 when a count is given).
fn cmd_zpopmin(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zpop_generic(ctx, false)
}

/// # Format
/// `ZPOPMAX key [count]`.
fn cmd_zpopmax(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    zpop_generic(ctx, true)
}

/// ZMPOP's arguments from `numkeys_at` on: the keys, MIN|MAX, the count.
pub fn parse_mpop<'a>(ctx: &Ctx<'a>, numkeys_at: usize) -> Result<(Vec<&'a [u8]>, bool, u64), CmdError> {
    let numkeys = int_in(ctx, numkeys_at, 1, i64::MAX, "numkeys should be greater than 0")? as usize;
    let where_at = numkeys_at.saturating_add(numkeys).saturating_add(1);
    if where_at >= ctx.argc() {
        return Err(CmdError::syntax());
    }
    let w = ctx.arg(where_at);
    let max = if is(w, "min") {
        false
    } else if is(w, "max") {
        true
    } else {
        return Err(CmdError::syntax());
    };
    let mut count = None;
    let mut j = where_at + 1;
    while j < ctx.argc() {
        if count.is_none() && is(ctx.arg(j), "count") && j + 1 < ctx.argc() {
            count = Some(int_in(ctx, j + 1, 1, i64::MAX, "count should be greater than 0")? as u64);
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let keys = (numkeys_at + 1..where_at).map(|i| ctx.arg(i)).collect();
    Ok((keys, max, count.unwrap_or(1)))
}

/// Writes ZMPOP's reply: `[key, [[member, score], ...]]`.
pub fn reply_mpop(ctx: &mut Ctx<'_>, key: &[u8], items: &[Scored]) {
    ctx.out.array(2);
    ctx.out.bulk(key);
    reply_pairs(ctx, items, true, true);
}

/// # Format
/// `ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]` → `[key, [[member, score], ...]]`
/// from the first non-empty key, or a null array.
fn cmd_zmpop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (keys, max, count) = parse_mpop(ctx, 1)?;
    for k in keys {
        if let Some((items, emptied)) = pop(ctx.h, db(ctx), k, max, count)? {
            reply_mpop(ctx, k, &items);
            notify_pop(ctx, k, max, &items, emptied);
            return Ok(());
        }
    }
    ctx.out.null_array();
    Ok(())
}

// ---- blocking forms (the parking and wake-ups are in `crate::blocking`) ----
//
// As BLPOP / BLMPOP: a `serve_*` function serves a (possibly parked) client from one key,
// or says there is nothing there yet; on a retry a key of another type is "not yet".

/// BZPOPMIN / BZPOPMAX from one key: `[key, member, score]`.
fn serve_bzpop(ctx: &mut Ctx<'_>, key: &[u8], max: bool, retry: bool) -> Result<bool, CmdError> {
    match pop_raw(ctx.h, db(ctx), key, max, 1) {
        Ok(Some((v, emptied))) if !v.is_empty() => {
            ctx.out.array(3);
            ctx.out.bulk(key);
            ctx.out.bulk(&v[0].0);
            reply_score(ctx, v[0].1);
            notify_pop(ctx, key, max, &v, emptied);
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(Error::WrongType) if retry => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn serve_bzpopmin(ctx: &mut Ctx<'_>, key: &[u8], retry: bool) -> Result<bool, CmdError> {
    serve_bzpop(ctx, key, false, retry)
}

fn serve_bzpopmax(ctx: &mut Ctx<'_>, key: &[u8], retry: bool) -> Result<bool, CmdError> {
    serve_bzpop(ctx, key, true, retry)
}

/// BZMPOP from one key: ZMPOP's reply. MIN|MAX and the count come from the arguments.
fn serve_bzmpop(ctx: &mut Ctx<'_>, key: &[u8], retry: bool) -> Result<bool, CmdError> {
    let (_, max, count) = parse_mpop(ctx, 2)?;
    match pop_raw(ctx.h, db(ctx), key, max, count) {
        Ok(Some((v, emptied))) if !v.is_empty() => {
            reply_mpop(ctx, key, &v);
            notify_pop(ctx, key, max, &v, emptied);
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(Error::WrongType) if retry => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// # Format
/// `BZPOPMIN key [key ...] timeout` → `[key, member, score]` from the first non-empty
/// sorted set, or blocks until one gets a member; a null array on timeout.
fn cmd_bzpopmin(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let timeout = parse_timeout(ctx.arg(ctx.argc() - 1))?;
    blocking::serve_or_block(ctx, 1, ctx.argc() - 1, None, timeout, serve_bzpopmin, NullReply::Array)
}

/// # Format
/// `BZPOPMAX key [key ...] timeout` → as BZPOPMIN, the highest score.
fn cmd_bzpopmax(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let timeout = parse_timeout(ctx.arg(ctx.argc() - 1))?;
    blocking::serve_or_block(ctx, 1, ctx.argc() - 1, None, timeout, serve_bzpopmax, NullReply::Array)
}

/// # Format
/// `BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]` → as ZMPOP, blocking while
/// every key is empty. As Redis, the other arguments are checked before the timeout.
fn cmd_bzmpop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (keys, _, _) = parse_mpop(ctx, 2)?;
    let n = keys.len();
    let timeout = parse_timeout(ctx.arg(1))?;
    blocking::serve_or_block(ctx, 3, 3 + n, None, timeout, serve_bzmpop, NullReply::Array)
}

/// # Format
/// `ZRANDMEMBER key [count [WITHSCORES]]` → a member, or `count` distinct members
/// (negative: `|count|` members, repeats allowed).
fn cmd_zrandmember(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let db = db(ctx);
    let key = ctx.arg(1);
    if ctx.argc() == 2 {
        let m = ctx.h.coll_read(db, key, Kind::ZSet, |c| c.get(rand_below(c.len())).map(|(m, _)| m))?;
        count_lookup(ctx, ctx.arg(1), m.is_some());
        match m {
            Some(m) => ctx.out.bulk(&m),
            None => ctx.out.null(),
        };
        return Ok(());
    }
    let l = rand_count(ctx, 2)?;
    if ctx.argc() > 4 || (ctx.argc() == 4 && !is(ctx.arg(3), "withscores")) {
        return Err(CmdError::syntax());
    }
    let withscores = ctx.argc() == 4;
    if withscores && !(-i64::MAX / 2..=i64::MAX / 2).contains(&l) {
        return Err(CmdError::new("ERR value is out of range"));
    }
    let nested = withscores && resp3(ctx);
    let count = l.unsigned_abs();
    if l < 0 || count == 1 {
        // Repeats: written as drawn, cut off at the output bound (see collection.rs).
        let cap = reply_cap(ctx);
        let mark = ctx.out.buf().len();
        let out = &mut ctx.out;
        let r = ctx
            .h
            .coll_read(db, key, Kind::ZSet, |c| {
                let n = c.len();
                out.array(if withscores && !nested { count as usize * 2 } else { count as usize });
                for _ in 0..count {
                    let (m, s) = c.get(rand_below(n))?;
                    if nested {
                        out.array(2);
                    }
                    out.bulk(&m);
                    if withscores {
                        write_score(out, score_of(&s));
                    }
                    if out.buf().len() > cap {
                        return Ok(false);
                    }
                }
                Ok(true)
            })
            // A half-written array must not stay in front of the error reply.
            .inspect_err(|_| ctx.out.buf().truncate(mark))?;
        count_lookup(ctx, ctx.arg(1), r.is_some());
        match r {
            Some(true) => {}
            Some(false) => ctx.conn.close = true,
            None => {
                ctx.out.array(0);
            }
        }
        return Ok(());
    }
    let items = ctx.h.coll_read(db, key, Kind::ZSet, |c| {
        let n = c.len();
        if count >= n {
            // The whole set, from the highest score down, as Redis's iterator walks it.
            return read_span(c, 0, n, true);
        }
        distinct_positions(n, count).into_iter().map(|p| c.get(p).map(|(m, s)| (m, score_of(&s)))).collect()
    })?;
    count_lookup(ctx, ctx.arg(1), items.is_some());
    reply_pairs(ctx, &items.unwrap_or_default(), withscores, nested);
    Ok(())
}

/// A score through a bare writer (ZRANDMEMBER writes while reading).
fn write_score(w: &mut larder_resp::Writer<'_>, d: f64) {
    let mut s = Vec::with_capacity(24);
    fmt_score(&mut s, d);
    match w.protocol() {
        Protocol::Resp2 => {
            w.bulk(&s);
        }
        Protocol::Resp3 => {
            w.raw(b",");
            w.raw(&s);
            w.raw(b"\r\n");
        }
    }
}

/// Removes positions `[from, to)`; returns how many.
fn remove_span(c: &mut Coll<'_>, from: u64, to: u64) -> Result<u64, Error> {
    for _ in from..to {
        c.remove_at(from)?;
    }
    Ok(to - from)
}

fn zremrange(ctx: &mut Ctx<'_>, by: RangeBy<'_>) -> Result<(), CmdError> {
    let r = ctx.h.coll_write(db(ctx), ctx.argv.get(1), Kind::ZSet, false, |c| {
        let (f, t) = match by {
            RangeBy::Rank(s, e) => match rank_span(c.len(), s, e, false) {
                Some(s) => s,
                None => return Ok((0, false)),
            },
            RangeBy::Score(r) => score_span(c, &r)?,
            RangeBy::Lex(a, b) => lex_span(c, a, b)?,
        };
        Ok((remove_span(c, f, t)?, c.is_empty()))
    })?;
    let (n, emptied) = r.unwrap_or((0, false));
    let event = match by {
        RangeBy::Rank(..) => "zremrangebyrank",
        RangeBy::Score(_) => "zremrangebyscore",
        RangeBy::Lex(..) => "zremrangebylex",
    };
    notify_removed(ctx, event, ctx.argv.get(1), n, emptied);
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `ZREMRANGEBYSCORE key min max` → removed count.
fn cmd_zremrangebyscore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = parse_score_range(ctx.arg(2), ctx.arg(3))?;
    zremrange(ctx, RangeBy::Score(r))
}

/// # Format
/// `ZREMRANGEBYRANK key start stop` → removed count.
fn cmd_zremrangebyrank(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (s, e) = (ctx.int(2)?, ctx.int(3)?);
    zremrange(ctx, RangeBy::Rank(s, e))
}

/// # Format
/// `ZREMRANGEBYLEX key min max` → removed count.
fn cmd_zremrangebylex(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let argv = ctx.argv;
    let (a, b) = parse_lex_range(argv.get(2), argv.get(3))?;
    zremrange(ctx, RangeBy::Lex(a, b))
}

/// Redis's `zunionInterDiffGenericCommand`: numkeys at `nk`, the keys, then options;
/// `dst`: the destination's index for the STORE forms; `card`: ZINTERCARD.
fn setop_generic(ctx: &mut Ctx<'_>, dst: Option<usize>, nk: usize, op: SetOp, card: bool) -> Result<(), CmdError> {
    let name = ctx.argv.get(0).to_ascii_lowercase();
    let setnum = ctx.int(nk)?;
    if setnum < 1 {
        return Err(CmdError::new(format!(
            "ERR at least 1 input key is needed for '{}' command",
            String::from_utf8_lossy(&name)
        )));
    }
    if setnum as u64 > (ctx.argc() - (nk + 1)) as u64 {
        return Err(CmdError::syntax());
    }
    let setnum = setnum as usize;
    let keys: Vec<&[u8]> = (nk + 1..nk + 1 + setnum).map(|i| ctx.argv.get(i)).collect();
    // Types are checked before the options, as Redis does.
    // (Each a lookup: a keyspace hit or miss.)
    for k in &keys {
        let t = ctx.h.type_of(db(ctx), k)?;
        count_lookup(ctx, k, t.is_some());
        match t {
            Some(Type::ZSet) | Some(Type::Set) | None => {}
            Some(_) => return Err(Error::WrongType.into()),
        }
    }
    let mut weights = vec![1.0; setnum];
    let mut agg = Aggregate::Sum;
    let mut withscores = false;
    let mut limit = 0u64;
    let mut j = nk + 1 + setnum;
    while j < ctx.argc() {
        let remaining = ctx.argc() - j;
        let a = ctx.arg(j);
        if op != SetOp::Diff && !card && remaining > setnum && is(a, "weights") {
            for (i, w) in weights.iter_mut().enumerate() {
                *w = parse_score(ctx.arg(j + 1 + i)).ok_or_else(|| CmdError::new("ERR weight value is not a float"))?;
            }
            j += 1 + setnum;
        } else if op != SetOp::Diff && !card && remaining >= 2 && is(a, "aggregate") {
            let v = ctx.arg(j + 1);
            agg = if is(v, "sum") {
                Aggregate::Sum
            } else if is(v, "min") {
                Aggregate::Min
            } else if is(v, "max") {
                Aggregate::Max
            } else {
                return Err(CmdError::syntax());
            };
            j += 2;
        } else if dst.is_none() && !card && is(a, "withscores") {
            withscores = true;
            j += 1;
        } else if card && remaining >= 2 && is(a, "limit") {
            limit = int_in(ctx, j + 1, 0, i64::MAX, "LIMIT can't be negative")? as u64;
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    if card {
        let n = inter(ctx.h, db(ctx), &keys, &weights, agg, limit)?.len();
        ctx.out.integer(n as i64);
        return Ok(());
    }
    let items = op_setop(ctx.h, db(ctx), &keys, &weights, op, agg)?;
    match dst {
        Some(d) => {
            let stored = op_store(ctx.h, db(ctx), ctx.argv.get(d), &items)?;
            let event = match op {
                SetOp::Union => "zunionstore",
                SetOp::Inter => "zinterstore",
                SetOp::Diff => "zdiffstore",
            };
            reply_stored(ctx, event, ctx.argv.get(d), stored);
        }
        None => {
            let nested = withscores && resp3(ctx);
            reply_pairs(ctx, &items, withscores, nested);
        }
    }
    Ok(())
}

/// # Format
/// `ZUNION numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
fn cmd_zunion(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    setop_generic(ctx, None, 1, SetOp::Union, false)
}

/// # Format
/// `ZINTER numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]`.
fn cmd_zinter(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    setop_generic(ctx, None, 1, SetOp::Inter, false)
}

/// # Format
/// `ZDIFF numkeys key [key ...] [WITHSCORES]`.
fn cmd_zdiff(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    setop_generic(ctx, None, 1, SetOp::Diff, false)
}

/// # Format
/// `ZUNIONSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]` → size.
fn cmd_zunionstore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    setop_generic(ctx, Some(1), 2, SetOp::Union, false)
}

/// # Format
/// `ZINTERSTORE dst numkeys key [key ...] [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]` → size.
fn cmd_zinterstore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    setop_generic(ctx, Some(1), 2, SetOp::Inter, false)
}

/// # Format
/// `ZDIFFSTORE dst numkeys key [key ...]` → size.
fn cmd_zdiffstore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    setop_generic(ctx, Some(1), 2, SetOp::Diff, false)
}

/// # Format
/// `ZINTERCARD numkeys key [key ...] [LIMIT limit]` → size of the intersection.
fn cmd_zintercard(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    setop_generic(ctx, None, 1, SetOp::Inter, true)
}

/// # Format
/// `ZSCAN key cursor [MATCH pattern] [COUNT count]` → `[next cursor, [member, score, ...]]`.
fn cmd_zscan(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let Some(ents) = scan_command(ctx, Kind::ZSet)? else { return Ok(()) };
    // Scores are strings in both protocols here (Redis sends the listpack's text).
    ctx.out.array(ents.len() * 2);
    let mut s = Vec::with_capacity(24);
    for (m, v) in &ents {
        ctx.out.bulk(m);
        s.clear();
        fmt_score(&mut s, score_of(v));
        ctx.out.bulk(&s);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(d: f64) -> String {
        let mut v = Vec::new();
        fmt_score(&mut v, d);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn scores_print_as_percent_17g() {
        assert_eq!(f(1.5), "1.5");
        assert_eq!(f(0.1), "0.10000000000000001");
        assert_eq!(f(3.0), "3");
        assert_eq!(f(-2.0), "-2");
        assert_eq!(f(f64::INFINITY), "inf");
        assert_eq!(f(f64::NEG_INFINITY), "-inf");
        assert_eq!(f(1e17), "1e+17");
        assert_eq!(f(1.5e300), "1.5000000000000001e+300");
        assert_eq!(f(1e-5), "1.0000000000000001e-05");
        assert_eq!(f(0.0001), "0.0001");
        assert_eq!(f(123456.789), "123456.789");
        assert_eq!(f(-0.0), "-0");
        assert_eq!(f(1e16 + 2.0), "10000000000000002");
    }

    #[test]
    fn score_arguments_parse_as_get_double() {
        assert_eq!(parse_score(b"1.5"), Some(1.5));
        assert_eq!(parse_score(b"+inf"), Some(f64::INFINITY));
        assert_eq!(parse_score(b"-INF"), Some(f64::NEG_INFINITY));
        assert_eq!(parse_score(b"1e400"), None);
        assert_eq!(parse_score(b"1e-400"), None);
        assert_eq!(parse_score(b"0e5"), Some(0.0));
        assert_eq!(parse_score(b" 1"), None);
        assert_eq!(parse_score(b"1 "), None);
        assert_eq!(parse_score(b"nan"), None);
        assert_eq!(parse_score(b""), None);
        assert_eq!(parse_score(b"abc"), None);
        assert_eq!(parse_score(b".5"), Some(0.5));
        // strtod reads hexadecimal floats too.
        assert_eq!(parse_score(b"0x1p3"), Some(8.0));
        assert_eq!(parse_score(b"-0X.8"), Some(-0.5));
        assert_eq!(parse_score(b"0x1."), Some(1.0));
        assert_eq!(parse_score(b"0x1p-1074"), Some(f64::from_bits(1)));
        assert_eq!(parse_score(b"0x1p1024"), None);
        assert_eq!(parse_score(b"0x1p-1080"), None);
        assert_eq!(parse_score(b"0xep-2000"), None);
        assert_eq!(parse_score(b"0x0p-2000"), Some(0.0));
        assert_eq!(parse_score(b"0x"), None);
        assert_eq!(parse_score(b"0x1p"), None);
    }

    #[test]
    fn range_bounds_parse_as_zsl_parse_range() {
        assert_eq!(parse_bound(b"(1.5").map(|b| b.1), Some(true));
        assert_eq!(parse_bound(b"-inf").map(|b| b.0), Some(f64::NEG_INFINITY));
        assert_eq!(parse_bound(b" 2").map(|b| b.0), Some(2.0));
        assert!(parse_bound(b"(nan").is_none());
        assert!(parse_bound(b"1x").is_none());
        assert_eq!(parse_bound(b"3\0junk").map(|b| b.0), Some(3.0));
        assert_eq!(parse_bound(b"(0x10").map(|b| b.0), Some(16.0));
    }

    #[test]
    fn spans() {
        assert_eq!(rank_span(10, 0, -1, false), Some((0, 10)));
        assert_eq!(rank_span(10, 0, 2, true), Some((7, 10)));
        assert_eq!(rank_span(10, 5, 2, false), None);
        assert_eq!(rank_span(10, -100, 100, false), Some((0, 10)));
        assert_eq!(limit_span(2, 8, 1, 2, false), (3, 5));
        assert_eq!(limit_span(2, 8, 1, 2, true), (5, 7));
        assert_eq!(limit_span(2, 8, -1, 2, false), (2, 2));
        assert_eq!(limit_span(2, 8, 10, -1, true), (2, 2));
    }
}
