//! Set commands, as Redis 7.0's `t_set.c`: SADD SREM SMEMBERS SISMEMBER SMISMEMBER SCARD
//! SPOP SRANDMEMBER SMOVE SINTER SINTERCARD SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE
//! SSCAN.
//!
//! A set is a [`Kind::Set`] collection: small all-integer sets are packed in numeric order
//! (Redis's intset), the others a tree in hash order (Redis's hashtable).
//!
//! The multi-key commands read each source in its own snapshot, then write the
//! destination: unlike Redis, which runs them alone, a write to a source in between may or
//! may not be seen (each key on its own is consistent). Intersections and differences keep
//! the first (or smallest) set's members in memory and test them against the others one
//! lookup at a time, so a large second set is never copied.

use std::collections::HashSet;

use larder_engine::{parse_canonical_i64, Error, Handle, Kind};
use larder_resp::Writer;

use crate::command::{CmdError, Ctx, Spec, DENYOOM, FAST, MOVABLEKEYS, READONLY, WRITE};
use crate::families::collection::{
    distinct_positions, rand_below, rand_count, random_entries, reply_cap, scan_command,
};
use crate::families::string::count_lookup;
use crate::notify::{self, notify, Replace, GENERIC, SET};

#[rustfmt::skip]
pub const COMMANDS: &[Spec] = &[
    Spec { name: "sadd", arity: -3, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Add one or more members to a set", handler: cmd_sadd },
    Spec { name: "srem", arity: -3, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Remove one or more members from a set", handler: cmd_srem },
    Spec { name: "smembers", arity: 2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Get all the members in a set", handler: cmd_smembers },
    Spec { name: "sismember", arity: 3, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Determine if a given value is a member of a set", handler: cmd_sismember },
    Spec { name: "smismember", arity: -3, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Returns the membership associated with the given elements for a set", handler: cmd_smismember },
    Spec { name: "scard", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Get the number of members in a set", handler: cmd_scard },
    Spec { name: "spop", arity: -2, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Remove and return one or multiple random members from a set", handler: cmd_spop },
    Spec { name: "srandmember", arity: -2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Get one or multiple random members from a set", handler: cmd_srandmember },
    Spec { name: "smove", arity: 4, flags: WRITE | FAST, first_key: 1, last_key: 2, step: 1, group: "set", summary: "Move a member from one set to another", handler: cmd_smove },
    Spec { name: "sinter", arity: -2, flags: READONLY, first_key: 1, last_key: -1, step: 1, group: "set", summary: "Intersect multiple sets", handler: cmd_sinter },
    Spec { name: "sintercard", arity: -3, flags: READONLY | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "set", summary: "Intersect multiple sets and return the cardinality of the result", handler: cmd_sintercard },
    Spec { name: "sinterstore", arity: -3, flags: WRITE | DENYOOM, first_key: 1, last_key: -1, step: 1, group: "set", summary: "Intersect multiple sets and store the resulting set in a key", handler: cmd_sinterstore },
    Spec { name: "sunion", arity: -2, flags: READONLY, first_key: 1, last_key: -1, step: 1, group: "set", summary: "Add multiple sets", handler: cmd_sunion },
    Spec { name: "sunionstore", arity: -3, flags: WRITE | DENYOOM, first_key: 1, last_key: -1, step: 1, group: "set", summary: "Add multiple sets and store the resulting set in a key", handler: cmd_sunionstore },
    Spec { name: "sdiff", arity: -2, flags: READONLY, first_key: 1, last_key: -1, step: 1, group: "set", summary: "Subtract multiple sets", handler: cmd_sdiff },
    Spec { name: "sdiffstore", arity: -3, flags: WRITE | DENYOOM, first_key: 1, last_key: -1, step: 1, group: "set", summary: "Subtract multiple sets and store the resulting set in a key", handler: cmd_sdiffstore },
    Spec { name: "sscan", arity: -3, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "set", summary: "Incrementally iterate Set elements", handler: cmd_sscan },
];

fn args_from<'a>(ctx: &Ctx<'a>, from: usize) -> Vec<&'a [u8]> {
    (from..ctx.argc()).map(|i| ctx.arg(i)).collect()
}

fn members_reply(out: &mut Writer<'_>, members: &[Vec<u8>]) {
    out.set(members.len());
    for m in members {
        out.bulk(m);
    }
}

// ---- single-key commands ----

/// Op: adds the members; returns how many were new.
pub fn op_sadd(h: &mut Handle, db: u32, key: &[u8], members: &[&[u8]]) -> Result<u64, Error> {
    let n = h.coll_write(db, key, Kind::Set, true, |c| {
        let mut n = 0;
        for m in members {
            // A member already there changes nothing (put leaves it, and nothing is
            // published if no member was new).
            if c.put(m, b"")?.is_none() {
                n += 1;
            }
        }
        Ok(n)
    })?;
    Ok(n.unwrap_or(0))
}

/// # Format
/// `SADD key member [member ...]` → how many members were added.
fn cmd_sadd(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let n = op_sadd(ctx.h, ctx.conn.db, ctx.arg(1), &args_from(ctx, 2))?;
    if n > 0 {
        notify(ctx, SET, "sadd", ctx.arg(1));
    }
    ctx.out.integer(n as i64);
    Ok(())
}

/// Op: removes the members; returns how many were there, and whether the set is now empty
/// (so deleted).
pub fn op_srem(h: &mut Handle, db: u32, key: &[u8], members: &[&[u8]]) -> Result<(u64, bool), Error> {
    let n = h.coll_write(db, key, Kind::Set, false, |c| {
        let mut n = 0;
        for m in members {
            n += c.del(m)?.is_some() as u64;
        }
        Ok((n, c.is_empty()))
    })?;
    Ok(n.unwrap_or((0, false)))
}

/// The events of members taken from `key` ("srem", "spop"), and "del" if it went.
fn notify_removed(ctx: &mut Ctx<'_>, event: &str, key: &[u8], emptied: bool) {
    notify::notify_removed(ctx, SET, event, key, emptied);
}

/// # Format
/// `SREM key member [member ...]` → how many members were removed.
fn cmd_srem(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (n, emptied) = op_srem(ctx.h, ctx.conn.db, ctx.arg(1), &args_from(ctx, 2))?;
    if n > 0 {
        notify_removed(ctx, "srem", ctx.arg(1), emptied);
    }
    ctx.out.integer(n as i64);
    Ok(())
}

/// Op: every member, in the set's order (None: no such key).
pub fn op_smembers(h: &Handle, db: u32, key: &[u8]) -> Result<Option<Vec<Vec<u8>>>, Error> {
    h.coll_read(db, key, Kind::Set, |c| {
        let mut out = Vec::with_capacity(c.len().min(1 << 20) as usize);
        c.range(0, c.len(), |k, _| {
            out.push(k.to_vec());
            true
        })?;
        Ok(out)
    })
}

/// # Format
/// `SMEMBERS key` → every member (a set in RESP3).
fn cmd_smembers(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = op_smembers(ctx.h, ctx.conn.db, ctx.arg(1))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    members_reply(&mut ctx.out, &r.unwrap_or_default());
    Ok(())
}

/// # Format
/// `SISMEMBER key member` → 1 or 0.
fn cmd_sismember(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::Set, |c| c.contains(ctx.arg(2)))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    ctx.out.integer(r.unwrap_or(false) as i64);
    Ok(())
}

/// # Format
/// `SMISMEMBER key member [member ...]` → 1 or 0 for each member.
fn cmd_smismember(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let members = args_from(ctx, 2);
    let r = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::Set, |c| {
        members.iter().map(|m| c.contains(m)).collect::<Result<Vec<_>, _>>()
    })?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    let r = r.unwrap_or_else(|| vec![false; members.len()]);
    ctx.out.array(r.len());
    for b in r {
        ctx.out.integer(b as i64);
    }
    Ok(())
}

/// # Format
/// `SCARD key` → the number of members.
fn cmd_scard(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::Set, |c| Ok(c.len()))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    ctx.out.integer(r.unwrap_or(0) as i64);
    Ok(())
}

// ---- random members ----

/// Op: removes and returns up to `count` random members (all of them when the set has no
/// more, and the key goes: then true). None if the key is missing.
#[allow(clippy::type_complexity)]
pub fn op_spop(h: &mut Handle, db: u32, key: &[u8], count: u64) -> Result<Option<(Vec<Vec<u8>>, bool)>, Error> {
    h.coll_write(db, key, Kind::Set, false, |c| {
        let size = c.len();
        if count >= size {
            let all = c.entries()?.into_iter().map(|(k, _)| k).collect();
            c.clear()?;
            return Ok((all, true));
        }
        let picked = distinct_positions(size, count)
            .into_iter()
            .map(|i| c.get(i).map(|e| e.0))
            .collect::<Result<Vec<_>, _>>()?;
        for m in &picked {
            c.del(m)?;
        }
        Ok((picked, false))
    })
}

/// # Format
/// `SPOP key [count]` → one member (null if missing), or a set of up to `count` members.
fn cmd_spop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    match ctx.argc() {
        2 => {
            let r = op_spop(ctx.h, db, key, 1)?;
            match r.and_then(|(v, emptied)| Some((v.into_iter().next()?, emptied))) {
                // Redis's order: "spop", the member, then "del".
                Some((m, emptied)) => {
                    let f = notify::flags(ctx.shared);
                    notify::notify_with(ctx, f, SET, "spop", key);
                    ctx.out.bulk(&m);
                    if emptied {
                        notify::notify_with(ctx, f, GENERIC, "del", key);
                    }
                }
                None => {
                    ctx.out.null();
                }
            };
        }
        3 => {
            // Redis's getPositiveLongFromObjectOrReply: one message for both faults.
            let n = match ctx.int(2) {
                Ok(n) if n >= 0 => n,
                _ => return Err(CmdError::new("ERR value is out of range, must be positive")),
            };
            let r = if n == 0 {
                // Only the type is checked.
                ctx.h.coll_read(db, key, Kind::Set, |_| Ok(()))?;
                Vec::new()
            } else {
                match op_spop(ctx.h, db, key, n as u64)? {
                    Some((v, emptied)) => {
                        notify_removed(ctx, "spop", key, emptied);
                        v
                    }
                    None => Vec::new(),
                }
            };
            members_reply(&mut ctx.out, &r);
        }
        _ => return Err(CmdError::syntax()),
    }
    Ok(())
}

/// # Format
/// `SRANDMEMBER key [count]` → one member (null if missing), or an array: `count` distinct
/// members (all when fewer), or with a negative count `-count` picks that may repeat.
fn cmd_srandmember(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    match ctx.argc() {
        2 => {
            let r = ctx.h.coll_read(db, key, Kind::Set, |c| random_entries(c, -1))?;
            count_lookup(ctx, ctx.arg(1), r.is_some());
            match r.and_then(|v| v.into_iter().next()) {
                Some((m, _)) => ctx.out.bulk(&m),
                None => ctx.out.null(),
            };
            return Ok(());
        }
        3 => {}
        _ => return Err(CmdError::syntax()),
    }
    let count = rand_count(ctx, 2)?;
    if count >= 0 {
        let r = ctx.h.coll_read(db, key, Kind::Set, |c| random_entries(c, count))?;
        count_lookup(ctx, ctx.arg(1), r.is_some());
        let r = r.unwrap_or_default();
        ctx.out.array(r.len());
        for (m, _) in &r {
            ctx.out.bulk(m);
        }
        return Ok(());
    }
    // Repeats: written as drawn, cut off at the output bound (see collection.rs).
    let cap = reply_cap(ctx);
    let n = count.unsigned_abs();
    let mark = ctx.out.buf().len();
    let r = ctx
        .h
        .coll_read(db, key, Kind::Set, |c| {
            let size = c.len();
            ctx.out.array(n as usize);
            for _ in 0..n {
                ctx.out.bulk(&c.get(rand_below(size))?.0);
                if ctx.out.buf().len() > cap {
                    return Ok(false);
                }
            }
            Ok(true)
        })
        // A half-written array must not stay in front of the error reply.
        .inspect_err(|_| ctx.out.buf().truncate(mark))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    match r {
        None => {
            ctx.out.array(0);
        }
        Some(false) => ctx.conn.close = true,
        Some(true) => {}
    }
    Ok(())
}

/// What an SMOVE did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// The member was moved (or, when source and destination are the same key, is there).
    pub moved: bool,
    /// The source went (its last member moved).
    pub src_emptied: bool,
    /// The member was new in the destination.
    pub added: bool,
}

/// Op: SMOVE. The source's removal and the destination's addition are two steps: another
/// client may see the member in neither for a moment.
pub fn op_smove(h: &mut Handle, db: u32, src: &[u8], dst: &[u8], member: &[u8]) -> Result<Moved, Error> {
    // The checks in Redis's order: a missing source, then both types.
    if h.coll_read(db, src, Kind::Set, |_| Ok(()))?.is_none() {
        return Ok(Moved::default());
    }
    h.coll_read(db, dst, Kind::Set, |_| Ok(()))?;
    if src == dst {
        let there = h.coll_read(db, src, Kind::Set, |c| c.contains(member))?.unwrap_or(false);
        return Ok(Moved { moved: there, ..Moved::default() });
    }
    let removed = h.coll_write(db, src, Kind::Set, false, |c| Ok((c.del(member)?.is_some(), c.is_empty())))?;
    let Some((true, src_emptied)) = removed else { return Ok(Moved::default()) };
    let added = h.coll_write(db, dst, Kind::Set, true, |c| Ok(c.put(member, b"")?.is_none()))?.unwrap_or(false);
    Ok(Moved { moved: true, src_emptied, added })
}

/// # Format
/// `SMOVE source destination member` → 1 if moved, 0 if not.
fn cmd_smove(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    let m = op_smove(ctx.h, ctx.conn.db, src, dst, ctx.arg(3))?;
    if m.moved && src != dst {
        // Redis's order: the keys found expired (its lookups come first), "srem" (and
        // "del") of the source, then the destination's "new" and "sadd". The engine
        // recorded the destination's creation before the source's events could be sent,
        // so it is held back until they are.
        let f = notify::flags(ctx.shared);
        let (created, found): (Vec<_>, Vec<_>) =
            notify::take_changes(ctx).into_iter().partition(|c| c.change == larder_engine::Change::Created);
        for c in &found {
            notify::publish_change(ctx, f, c);
        }
        notify::notify_with(ctx, f, SET, "srem", src);
        if m.src_emptied {
            notify::notify_with(ctx, f, GENERIC, "del", src);
        }
        for c in &created {
            notify::publish_change(ctx, f, c);
        }
        if m.added {
            notify::notify_with(ctx, f, SET, "sadd", dst);
        }
    }
    ctx.out.integer(m.moved as i64);
    Ok(())
}

// ---- intersections, unions, differences ----

/// The size of each source's set (0 for a missing key), looked up in turn as Redis's
/// SINTER, SUNION, SDIFF and their STORE and CARD forms look them up (`lookupKeyRead`: a
/// keyspace hit or miss each), up to one that holds another type (a hit, then WRONGTYPE).
fn sources(ctx: &Ctx<'_>, keys: &[&[u8]]) -> Result<Vec<u64>, CmdError> {
    let mut sizes = Vec::with_capacity(keys.len());
    for k in keys {
        let r = ctx.h.coll_read(ctx.conn.db, k, Kind::Set, |c| Ok(c.len()));
        count_lookup(ctx, k, !matches!(r, Ok(None)));
        sizes.push(r?.unwrap_or(0));
    }
    Ok(sizes)
}

/// Keeps the candidates that are (`keep_if` true) or are not (false) in `key`'s set.
fn filter_by(h: &Handle, db: u32, key: &[u8], cands: &mut Vec<Vec<u8>>, keep_if: bool) -> Result<(), Error> {
    let kept = h.coll_read(db, key, Kind::Set, |c| {
        let mut kept = Vec::with_capacity(cands.len());
        for m in cands.drain(..) {
            if c.contains(&m)? == keep_if {
                kept.push(m);
            }
        }
        Ok(kept)
    })?;
    // The key vanished between the two reads: as an empty set.
    *cands = match kept {
        Some(k) => k,
        None if keep_if => Vec::new(),
        None => std::mem::take(cands),
    };
    Ok(())
}

/// Op: the intersection, in the smallest set's order; stops at `limit` members (0: no limit).
/// `sz`: each key's size, from [`sources`] (which checked their types).
pub fn op_sinter(h: &Handle, db: u32, keys: &[&[u8]], sz: &[u64], limit: u64) -> Result<Vec<Vec<u8>>, Error> {
    if sz.contains(&0) {
        return Ok(Vec::new());
    }
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| sz[i]);
    let mut cands = op_smembers(h, db, keys[order[0]])?.unwrap_or_default();
    for &i in &order[1..] {
        if keys[i] == keys[order[0]] {
            continue;
        }
        filter_by(h, db, keys[i], &mut cands, true)?;
        if cands.is_empty() {
            break;
        }
    }
    if limit > 0 {
        cands.truncate(limit as usize);
    }
    Ok(cands)
}

/// A result set built as Redis builds one: an intset (numeric order) while every member is
/// an integer and there are at most `set-max-intset-entries`, else in the order found.
fn as_result_set(h: &Handle, mut members: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let max = h.store().limits().set_max_intset_entries.load(std::sync::atomic::Ordering::Relaxed);
    if members.len() as u64 <= max && members.iter().all(|m| parse_canonical_i64(m).is_some()) {
        members.sort_by_key(|m| parse_canonical_i64(m).unwrap_or(0));
    }
    members
}

/// Op: the union, members in the order first seen. `sz`: each key's size, from [`sources`]
/// (which checked their types).
pub fn op_sunion(h: &Handle, db: u32, keys: &[&[u8]], sz: &[u64]) -> Result<Vec<Vec<u8>>, Error> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (k, _) in keys.iter().zip(sz).filter(|(_, &n)| n > 0) {
        for m in op_smembers(h, db, k)?.unwrap_or_default() {
            if seen.insert(m.clone()) {
                out.push(m);
            }
        }
    }
    Ok(as_result_set(h, out))
}

/// Op: the first set's members that are in none of the others. Its keys' types were
/// checked by [`sources`].
pub fn op_sdiff(h: &Handle, db: u32, keys: &[&[u8]]) -> Result<Vec<Vec<u8>>, Error> {
    let mut cands = op_smembers(h, db, keys[0])?.unwrap_or_default();
    for k in &keys[1..] {
        if cands.is_empty() {
            break;
        }
        if *k == keys[0] {
            cands.clear();
            break;
        }
        filter_by(h, db, k, &mut cands, false)?;
    }
    Ok(as_result_set(h, cands))
}

/// Op: replaces `dst` (whatever it held) with a set of `members`, or deletes it when there
/// are none; returns the new size and whether `dst` existed. Two steps (delete, then
/// write), so a reader may see the key missing in between.
pub fn op_store(h: &mut Handle, db: u32, dst: &[u8], members: &[Vec<u8>]) -> Result<(u64, bool), Error> {
    if members.is_empty() {
        return Ok((0, Replace::delete(h, db, dst)?));
    }
    let replace = Replace::begin(h, db, dst)?;
    let n = replace.write(h, |h| {
        h.coll_write(db, dst, Kind::Set, true, |c| {
            for m in members {
                c.put(m, b"")?;
            }
            Ok(c.len())
        })
    })?;
    Ok((n.unwrap_or(0), replace.existed))
}

/// The STORE commands' end: the destination written, the reply, the events.
fn store(ctx: &mut Ctx<'_>, members: &[Vec<u8>], event: &str) -> Result<(), CmdError> {
    let (n, existed) = op_store(ctx.h, ctx.conn.db, ctx.arg(1), members)?;
    ctx.out.integer(n as i64);
    notify::notify_store(ctx, SET, event, ctx.arg(1), n > 0, existed);
    Ok(())
}

/// # Format
/// `SINTER key [key ...]` → the members in every set.
fn cmd_sinter(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let keys = args_from(ctx, 1);
    let sz = sources(ctx, &keys)?;
    let r = op_sinter(ctx.h, ctx.conn.db, &keys, &sz, 0)?;
    members_reply(&mut ctx.out, &r);
    Ok(())
}

/// # Format
/// `SINTERCARD numkeys key [key ...] [LIMIT limit]` → the intersection's size (at most
/// `limit` when given and not 0).
fn cmd_sintercard(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let numkeys = match ctx.int(1) {
        Ok(n) if n >= 1 => n as u64,
        _ => return Err(CmdError::new("ERR numkeys should be greater than 0")),
    };
    if numkeys > ctx.argc() as u64 - 2 {
        return Err(CmdError::new("ERR Number of keys can't be greater than number of args"));
    }
    let end = 2 + numkeys as usize;
    let mut limit = 0;
    let mut j = end;
    while j < ctx.argc() {
        if ctx.arg(j).eq_ignore_ascii_case(b"limit") && j + 1 < ctx.argc() {
            limit = match ctx.int(j + 1) {
                Ok(n) if n >= 0 => n as u64,
                _ => return Err(CmdError::new("ERR LIMIT can't be negative")),
            };
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    let keys: Vec<&[u8]> = (2..end).map(|i| ctx.arg(i)).collect();
    let sz = sources(ctx, &keys)?;
    let r = op_sinter(ctx.h, ctx.conn.db, &keys, &sz, limit)?;
    ctx.out.integer(r.len() as i64);
    Ok(())
}

/// # Format
/// `SINTERSTORE destination key [key ...]` → the size of the stored intersection.
fn cmd_sinterstore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let keys = args_from(ctx, 2);
    let sz = sources(ctx, &keys)?;
    let r = op_sinter(ctx.h, ctx.conn.db, &keys, &sz, 0)?;
    store(ctx, &r, "sinterstore")
}

/// # Format
/// `SUNION key [key ...]` → the members of any of the sets.
fn cmd_sunion(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let keys = args_from(ctx, 1);
    let sz = sources(ctx, &keys)?;
    let r = op_sunion(ctx.h, ctx.conn.db, &keys, &sz)?;
    members_reply(&mut ctx.out, &r);
    Ok(())
}

/// # Format
/// `SUNIONSTORE destination key [key ...]` → the size of the stored union.
fn cmd_sunionstore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let keys = args_from(ctx, 2);
    let sz = sources(ctx, &keys)?;
    let r = op_sunion(ctx.h, ctx.conn.db, &keys, &sz)?;
    store(ctx, &r, "sunionstore")
}

/// # Format
/// `SDIFF key [key ...]` → the first set's members that are in none of the others.
fn cmd_sdiff(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let keys = args_from(ctx, 1);
    sources(ctx, &keys)?;
    let r = op_sdiff(ctx.h, ctx.conn.db, &keys)?;
    members_reply(&mut ctx.out, &r);
    Ok(())
}

/// # Format
/// `SDIFFSTORE destination key [key ...]` → the size of the stored difference.
fn cmd_sdiffstore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let keys = args_from(ctx, 2);
    sources(ctx, &keys)?;
    let r = op_sdiff(ctx.h, ctx.conn.db, &keys)?;
    store(ctx, &r, "sdiffstore")
}

/// # Format
/// `SSCAN key cursor [MATCH pattern] [COUNT count]` → `[next cursor, [member ...]]`.
fn cmd_sscan(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let Some(ents) = scan_command(ctx, Kind::Set)? else { return Ok(()) };
    ctx.out.array(ents.len());
    for (m, _) in &ents {
        ctx.out.bulk(m);
    }
    Ok(())
}
