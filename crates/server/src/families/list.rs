//! List commands, as Redis 7.0's `t_list.c`: LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP LLEN
//! LINDEX LSET LRANGE LTRIM LINSERT LREM LPOS LMOVE RPOPLPUSH LMPOP, and the blocking
//! BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP (the parking and wake-ups are in
//! [`crate::blocking`]; this file only says how to serve one of them from one key).
//!
//! A list is an engine collection of kind [`Kind::List`]: positions are O(log n) in the tree
//! form (`get`, `insert_at`, `remove_at`, `set_at`), and a range is one seek and then a walk
//! (`range`), so LRANGE and LINDEX cost the same on a list of a thousand or a million.
//!
//! Arguments are checked in Redis's order (LRANGE parses its integers before the lookup,
//! LINDEX after it), so the same bad request gets the same error.
//!
//! Commands over two keys (LMOVE, RPOPLPUSH and their blocking forms with distinct keys)
//! are a pop from the source and then a push onto the destination: two edits, each atomic
//! on its own. Another client may see the element in neither list for that instant, and a
//! local process attached to the segment could change the destination's type in between
//! (then the element goes back where it came from and the command fails). With one key
//! (a rotation) the pop and the push are one edit.

use std::time::Duration;

use larder_engine::{Coll, Error, Handle, Kind, Type};

use super::string::count_lookup;
use crate::blocking::{self, NullReply};
use crate::command::{
    parse_f64, parse_i64, CmdError, Ctx, Spec, BLOCKING, DENYOOM, FAST, MOVABLEKEYS, NOSCRIPT, READONLY, WRITE,
};
use crate::notify::{self, notify, GENERIC, LIST};

#[rustfmt::skip]
pub const COMMANDS: &[Spec] = &[
    Spec { name: "lpush", arity: -3, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Prepends one or more elements to a list. Creates the key if it doesn't exist.", handler: cmd_lpush },
    Spec { name: "rpush", arity: -3, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Appends one or more elements to a list. Creates the key if it doesn't exist.", handler: cmd_rpush },
    Spec { name: "lpushx", arity: -3, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Prepends one or more elements to a list only when the list exists.", handler: cmd_lpushx },
    Spec { name: "rpushx", arity: -3, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Appends an element to a list only when the list exists.", handler: cmd_rpushx },
    Spec { name: "lpop", arity: -2, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", handler: cmd_lpop },
    Spec { name: "rpop", arity: -2, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", handler: cmd_rpop },
    Spec { name: "llen", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Returns the length of a list.", handler: cmd_llen },
    Spec { name: "lindex", arity: 3, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Returns an element from a list by its index.", handler: cmd_lindex },
    Spec { name: "lset", arity: 4, flags: WRITE | DENYOOM, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Sets the value of an element in a list by its index.", handler: cmd_lset },
    Spec { name: "lrange", arity: 4, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Returns a range of elements from a list.", handler: cmd_lrange },
    Spec { name: "ltrim", arity: 4, flags: WRITE, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", handler: cmd_ltrim },
    Spec { name: "linsert", arity: 5, flags: WRITE | DENYOOM, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Inserts an element before or after another element in a list.", handler: cmd_linsert },
    Spec { name: "lrem", arity: 4, flags: WRITE, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Removes elements from a list. Deletes the list if the last element was removed.", handler: cmd_lrem },
    Spec { name: "lpos", arity: -3, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "list", summary: "Returns the index of matching elements in a list.", handler: cmd_lpos },
    Spec { name: "lmove", arity: 5, flags: WRITE | DENYOOM, first_key: 1, last_key: 2, step: 1, group: "list", summary: "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", handler: cmd_lmove },
    Spec { name: "rpoplpush", arity: 3, flags: WRITE | DENYOOM, first_key: 1, last_key: 2, step: 1, group: "list", summary: "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", handler: cmd_rpoplpush },
    Spec { name: "lmpop", arity: -4, flags: WRITE | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "list", summary: "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", handler: cmd_lmpop },
    Spec { name: "blpop", arity: -3, flags: WRITE | NOSCRIPT | BLOCKING, first_key: 1, last_key: -2, step: 1, group: "list", summary: "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", handler: cmd_blpop },
    Spec { name: "brpop", arity: -3, flags: WRITE | NOSCRIPT | BLOCKING, first_key: 1, last_key: -2, step: 1, group: "list", summary: "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", handler: cmd_brpop },
    Spec { name: "blmove", arity: 6, flags: WRITE | DENYOOM | NOSCRIPT | BLOCKING, first_key: 1, last_key: 2, step: 1, group: "list", summary: "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", handler: cmd_blmove },
    Spec { name: "brpoplpush", arity: 4, flags: WRITE | DENYOOM | NOSCRIPT | BLOCKING, first_key: 1, last_key: 2, step: 1, group: "list", summary: "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", handler: cmd_brpoplpush },
    Spec { name: "blmpop", arity: -5, flags: WRITE | BLOCKING | MOVABLEKEYS, first_key: 0, last_key: 0, step: 0, group: "list", summary: "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", handler: cmd_blmpop },
];

// ---- shared helpers ----

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Left,
    Right,
}

/// Redis's `getListPositionFromObjectOrReply`: LEFT or RIGHT, any case.
fn end_arg(b: &[u8]) -> Result<End, CmdError> {
    if b.eq_ignore_ascii_case(b"left") {
        Ok(End::Left)
    } else if b.eq_ignore_ascii_case(b"right") {
        Ok(End::Right)
    } else {
        Err(CmdError::syntax())
    }
}

/// Redis's `getPositiveLongFromObjectOrReply`: an integer >= 0, else `msg` (the same text
/// for "not a number" and "negative").
fn positive(b: &[u8], msg: &str) -> Result<i64, CmdError> {
    match parse_i64(b) {
        Some(v) if v >= 0 => Ok(v),
        _ => Err(CmdError::new(msg)),
    }
}

/// Redis's `getRangeLongFromObjectOrReply(1, LONG_MAX, msg)`.
fn at_least_one(b: &[u8], msg: &str) -> Result<i64, CmdError> {
    match parse_i64(b) {
        Some(v) if v >= 1 => Ok(v),
        _ => Err(CmdError::new(msg)),
    }
}

/// An index as LINDEX and LSET take it (negative from the tail) → a position, if inside.
fn position(index: i64, len: u64) -> Option<u64> {
    let i = if index < 0 { len as i128 + index as i128 } else { index as i128 };
    (i >= 0 && i < len as i128).then_some(i as u64)
}

/// LRANGE / LTRIM's `start stop` (inclusive, negative from the tail) → the half-open range
/// of positions, or None if it is empty.
fn span(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i128;
    let mut s = start as i128;
    let mut e = stop as i128;
    if s < 0 {
        s += len;
    }
    if e < 0 {
        e += len;
    }
    if s < 0 {
        s = 0;
    }
    if s > e || s >= len {
        return None;
    }
    if e >= len {
        e = len - 1;
    }
    Some((s as u64, e as u64 + 1))
}

/// Walks positions `lo..hi` from the tail towards the head, calling `f(position, element)`
/// until it returns false. The tree has no reverse cursor, so this reads chunks forward
/// (one seek each) and visits each chunk backwards: O(log n) per chunk plus O(1) per
/// element, and it stops as soon as `f` is done.
fn walk_back(c: &Coll<'_>, lo: u64, hi: u64, mut f: impl FnMut(u64, &[u8]) -> bool) -> Result<(), Error> {
    const CHUNK: u64 = 256;
    let mut hi = hi.min(c.len());
    let mut chunk: Vec<Vec<u8>> = Vec::new();
    while hi > lo {
        let from = hi.saturating_sub(CHUNK).max(lo);
        chunk.clear();
        c.range(from, hi, |k, _| {
            chunk.push(k.to_vec());
            true
        })?;
        for (j, e) in chunk.iter().enumerate().rev() {
            if !f(from + j as u64, e) {
                return Ok(());
            }
        }
        hi = from;
    }
    Ok(())
}

/// Removes up to `count` elements from one end; returns them in pop order.
fn pop_n(c: &mut Coll<'_>, end: End, count: u64) -> Result<Vec<Vec<u8>>, Error> {
    let n = count.min(c.len());
    let mut out = Vec::with_capacity(n.min(1 << 16) as usize);
    for _ in 0..n {
        let at = match end {
            End::Left => 0,
            End::Right => c.len() - 1,
        };
        out.push(c.remove_at(at)?.0);
    }
    Ok(out)
}

/// Pops up to `count` elements from one end of `key`; returns them and whether the list is
/// now empty (so deleted), or None if the key is missing.
#[allow(clippy::type_complexity)]
pub fn op_pop(
    h: &mut Handle,
    db: u32,
    key: &[u8],
    end: End,
    count: u64,
) -> Result<Option<(Vec<Vec<u8>>, bool)>, Error> {
    h.coll_write(db, key, Kind::List, false, |c| Ok((pop_n(c, end, count)?, c.is_empty())))
}

/// The events of elements popped from `key`: "lpop" / "rpop", and "del" if the list went
/// (Redis's `listElementsRemoved`).
fn notify_pop(ctx: &mut Ctx<'_>, key: &[u8], end: End, emptied: bool) {
    notify::notify_removed(ctx, LIST, if end == End::Left { "lpop" } else { "rpop" }, key, emptied);
}

/// The event of a push onto `end` of `key`.
fn notify_push(ctx: &mut Ctx<'_>, key: &[u8], end: End) {
    notify(ctx, LIST, if end == End::Left { "lpush" } else { "rpush" }, key);
}

/// Pushes `elems` one by one onto an end (`xx`: only onto an existing list); returns the new
/// length, or None if `xx` and the key is missing.
pub fn op_push(h: &mut Handle, db: u32, key: &[u8], end: End, elems: &[&[u8]], xx: bool) -> Result<Option<u64>, Error> {
    h.coll_write(db, key, Kind::List, !xx, |c| {
        for e in elems {
            let at = match end {
                End::Left => 0,
                End::Right => c.len(),
            };
            c.insert_at(at, e)?;
        }
        Ok(c.len())
    })
}

/// LMOVE: pops from `from` of `src` and pushes onto `to` of `dst`; returns the element and
/// whether `src` is now empty (so deleted), or None if `src` is missing. Errors as Redis checks them: the source's type, then the
/// destination's, before anything changes. With `wrong_src_is_missing`, a source of another
/// type counts as missing (a blocked BLMOVE keeps waiting, as Redis only serves list keys).
pub fn op_lmove(
    h: &mut Handle,
    db: u32,
    src: &[u8],
    dst: &[u8],
    from: End,
    to: End,
    wrong_src_is_missing: bool,
) -> Result<Option<(Vec<u8>, bool)>, Error> {
    let pop_at = |c: &Coll<'_>| match from {
        End::Left => 0,
        End::Right => c.len() - 1,
    };
    if src == dst {
        // A rotation: one edit session, so nobody sees the list one element short.
        let r = h.coll_write(db, src, Kind::List, false, |c| {
            let e = c.remove_at(pop_at(c))?.0;
            let at = match to {
                End::Left => 0,
                End::Right => c.len(),
            };
            c.insert_at(at, &e)?;
            Ok((e, false))
        });
        return match r {
            Err(Error::WrongType) if wrong_src_is_missing => Ok(None),
            r => r,
        };
    }
    match h.type_of(db, src)? {
        None => return Ok(None),
        Some(Type::List) => {}
        Some(_) if wrong_src_is_missing => return Ok(None),
        Some(_) => return Err(Error::WrongType),
    }
    if matches!(h.type_of(db, dst)?, Some(t) if t != Type::List) {
        return Err(Error::WrongType);
    }
    // Not atomic across the two keys (see the module docs): the pop publishes, then the
    // push does.
    let (e, emptied) = match h.coll_write(db, src, Kind::List, false, |c| Ok((c.remove_at(pop_at(c))?.0, c.is_empty())))
    {
        Ok(Some(e)) => e,
        Ok(None) => return Ok(None),
        Err(Error::WrongType) if wrong_src_is_missing => return Ok(None),
        Err(e) => return Err(e),
    };
    let pushed = h.coll_write(db, dst, Kind::List, true, |c| {
        let at = match to {
            End::Left => 0,
            End::Right => c.len(),
        };
        c.insert_at(at, &e)
    });
    if let Err(err) = pushed {
        // The destination changed under us (or memory ran out): put the element back where
        // it was, best effort, and report the error.
        let _ = h.coll_write(db, src, Kind::List, true, |c| {
            let at = match from {
                End::Left => 0,
                End::Right => c.len(),
            };
            c.insert_at(at, &e)
        });
        return Err(err);
    }
    Ok(Some((e, emptied)))
}

/// Writes `elems` as an array.
fn reply_elems(ctx: &mut Ctx<'_>, elems: &[Vec<u8>]) {
    ctx.out.array(elems.len());
    for e in elems {
        ctx.out.bulk(e);
    }
}

// ---- pushes ----

fn push(ctx: &mut Ctx<'_>, end: End, xx: bool) -> Result<(), CmdError> {
    // A few elements (the usual push) go in an array on the stack, not a Vec.
    let argc = ctx.argc();
    let mut few: [&[u8]; 8] = [&[]; 8];
    let many: Vec<&[u8]>;
    let elems: &[&[u8]] = if argc - 2 <= few.len() {
        for i in 2..argc {
            few[i - 2] = ctx.arg(i);
        }
        &few[..argc - 2]
    } else {
        many = (2..argc).map(|i| ctx.arg(i)).collect();
        &many
    };
    let n = op_push(ctx.h, ctx.conn.db, ctx.arg(1), end, elems, xx)?;
    ctx.out.integer(n.unwrap_or(0) as i64);
    if n.is_some() {
        notify_push(ctx, ctx.arg(1), end);
    }
    Ok(())
}

/// # Format
/// `LPUSH key element [element ...]` → the length after the pushes (each element goes to
/// the head in turn, so the last one ends up first).
fn cmd_lpush(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    push(ctx, End::Left, false)
}

/// `RPUSH key element [element ...]` → the length after the pushes.
fn cmd_rpush(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    push(ctx, End::Right, false)
}

/// `LPUSHX key element [element ...]` → the new length, or 0 if the key does not exist.
fn cmd_lpushx(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    push(ctx, End::Left, true)
}

/// `RPUSHX key element [element ...]` → the new length, or 0 if the key does not exist.
fn cmd_rpushx(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    push(ctx, End::Right, true)
}

// ---- pops ----

/// LPOP / RPOP: without a count a bulk string (null if missing); with one an array (a null
/// array if missing: `*-1` in RESP2, `_` in RESP3, as Redis 7.0).
fn pop(ctx: &mut Ctx<'_>, end: End) -> Result<(), CmdError> {
    if ctx.argc() > 3 {
        let name = if end == End::Left { "lpop" } else { "rpop" };
        return Err(CmdError::new(format!("ERR wrong number of arguments for '{name}' command")));
    }
    let count =
        if ctx.argc() == 3 { Some(positive(ctx.arg(2), "ERR value is out of range, must be positive")?) } else { None };
    let db = ctx.conn.db;
    let key = ctx.arg(1);
    let popped = match count {
        None => match op_pop(ctx.h, db, key, end, 1)? {
            Some((v, emptied)) if !v.is_empty() => {
                ctx.out.bulk(&v[0]);
                Some(emptied)
            }
            _ => {
                ctx.out.null();
                None
            }
        },
        Some(n) => match op_pop(ctx.h, db, key, end, n as u64)? {
            Some((v, emptied)) => {
                reply_elems(ctx, &v);
                (!v.is_empty()).then_some(emptied)
            }
            None => {
                ctx.out.null_array();
                None
            }
        },
    };
    if let Some(emptied) = popped {
        notify_pop(ctx, key, end, emptied);
    }
    Ok(())
}

/// `LPOP key [count]` → the first element (bulk), or with a count up to `count` of them.
fn cmd_lpop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    pop(ctx, End::Left)
}

/// `RPOP key [count]` → the last element, or with a count up to `count` of them, tail first.
fn cmd_rpop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    pop(ctx, End::Right)
}

/// Parses LMPOP / BLMPOP from `numkeys_at`: `numkeys key... LEFT|RIGHT [COUNT n]` → (the
/// index of the first key, the number of keys, the end, the count).
fn parse_mpop(ctx: &Ctx<'_>, numkeys_at: usize) -> Result<(usize, usize, End, u64), CmdError> {
    let numkeys = at_least_one(ctx.arg(numkeys_at), "ERR numkeys should be greater than 0")? as u64;
    let where_at = (numkeys_at as u64 + 1).saturating_add(numkeys);
    if where_at >= ctx.argc() as u64 {
        return Err(CmdError::syntax());
    }
    let where_at = where_at as usize;
    let end = end_arg(ctx.arg(where_at))?;
    let mut count = None;
    let mut j = where_at + 1;
    while j < ctx.argc() {
        if count.is_none() && ctx.arg(j).eq_ignore_ascii_case(b"count") && j + 1 < ctx.argc() {
            count = Some(at_least_one(ctx.arg(j + 1), "ERR count should be greater than 0")? as u64);
            j += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    Ok((numkeys_at + 1, numkeys as usize, end, count.unwrap_or(1)))
}

/// Pops for LMPOP / BLMPOP from one key: writes `[key, [elements]]` and returns true, or
/// returns false if the key is missing (or, on a retry, not a list).
fn mpop_from(ctx: &mut Ctx<'_>, key: &[u8], end: End, count: u64, retry: bool) -> Result<bool, CmdError> {
    match op_pop(ctx.h, ctx.conn.db, key, end, count) {
        Ok(Some((v, emptied))) => {
            ctx.out.array(2);
            ctx.out.bulk(key);
            reply_elems(ctx, &v);
            notify_pop(ctx, key, end, emptied);
            Ok(true)
        }
        Ok(None) => Ok(false),
        Err(Error::WrongType) if retry => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]` → `[key, [elements]]` from the
/// first non-empty list, or a null array.
fn cmd_lmpop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (first, n, end, count) = parse_mpop(ctx, 1)?;
    for i in first..first + n {
        if mpop_from(ctx, ctx.arg(i), end, count, false)? {
            return Ok(());
        }
    }
    ctx.out.null_array();
    Ok(())
}

// ---- reads ----

/// `LLEN key` → the length (0 if missing).
fn cmd_llen(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let n = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::List, |c| Ok(c.len()))?;
    count_lookup(ctx, ctx.arg(1), n.is_some());
    ctx.out.integer(n.unwrap_or(0) as i64);
    Ok(())
}

/// `LINDEX key index` → the element at `index` (negative from the tail), or null.
fn cmd_lindex(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    // Redis looks the key up (and checks its type) before it parses the index.
    let index = ctx.int(2);
    let at = index.as_ref().ok().copied();
    let r =
        ctx.h.coll_read(ctx.conn.db, ctx.argv.get(1), Kind::List, |c| match at.and_then(|i| position(i, c.len())) {
            Some(i) => Ok(Some(c.get(i)?.0)),
            None => Ok(None),
        })?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    let Some(v) = r else {
        ctx.out.null();
        return Ok(());
    };
    index?;
    match v {
        Some(e) => ctx.out.bulk(&e),
        None => ctx.out.null(),
    };
    Ok(())
}

/// `LRANGE key start stop` → the elements in the inclusive range (negative from the tail).
fn cmd_lrange(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let start = ctx.int(2)?;
    let stop = ctx.int(3)?;
    let db = ctx.conn.db;
    let out = &mut ctx.out;
    let mark = out.buf().len();
    let r = ctx.h.coll_read(db, ctx.argv.get(1), Kind::List, |c| {
        let Some((from, to)) = span(start, stop, c.len()) else {
            out.array(0);
            return Ok(());
        };
        out.array((to - from) as usize);
        // One seek, then a walk: not one lookup per element.
        c.range(from, to, |e, _| {
            out.bulk(e);
            true
        })
    });
    match r {
        Ok(found) => {
            count_lookup(ctx, ctx.arg(1), found.is_some());
            if found.is_none() {
                ctx.out.array(0);
            }
            Ok(())
        }
        Err(e) => {
            ctx.out.buf().truncate(mark);
            Err(e.into())
        }
    }
}

/// `LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]` → the position of the
/// `rank`-th match (negative rank: counted from the tail), or with COUNT an array of up to
/// `num-matches` positions (0: all); MAXLEN bounds how many elements are compared.
fn cmd_lpos(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut rank: i64 = 1;
    let mut count: Option<u64> = None;
    let mut maxlen: u64 = 0;
    let mut j = 3;
    while j < ctx.argc() {
        let opt = ctx.arg(j);
        let more = j + 1 < ctx.argc();
        if opt.eq_ignore_ascii_case(b"rank") && more {
            rank = ctx.int(j + 1)?;
            if rank == 0 {
                return Err(CmdError::new(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list",
                ));
            }
        } else if opt.eq_ignore_ascii_case(b"count") && more {
            count = Some(positive(ctx.arg(j + 1), "ERR COUNT can't be negative")? as u64);
        } else if opt.eq_ignore_ascii_case(b"maxlen") && more {
            maxlen = positive(ctx.arg(j + 1), "ERR MAXLEN can't be negative")? as u64;
        } else {
            return Err(CmdError::syntax());
        }
        j += 2;
    }
    let elem = ctx.arg(2);
    // Redis negates the rank in a long: LONG_MIN stays negative and then matches from the
    // first hit.
    let skip = if rank == i64::MIN { 0 } else { rank.unsigned_abs() - 1 };
    // How many matches to report: one without COUNT, all with COUNT 0.
    let want = match count {
        None => 1,
        Some(0) => u64::MAX,
        Some(n) => n,
    };
    let r = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::List, |c| {
        let len = c.len();
        let window = if maxlen == 0 { len } else { maxlen.min(len) };
        let mut seen = 0u64;
        let mut found = Vec::new();
        let mut visit = |i: u64, e: &[u8]| {
            if e == elem {
                seen += 1;
                if seen > skip {
                    found.push(i as i64);
                    if found.len() as u64 >= want {
                        return false;
                    }
                }
            }
            true
        };
        if rank > 0 {
            let mut i = 0;
            c.range(0, window, |e, _| {
                let go = visit(i, e);
                i += 1;
                go
            })?;
        } else {
            walk_back(c, len - window, len, visit)?;
        }
        Ok(found)
    })?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    let found = r.unwrap_or_default();
    match count {
        Some(_) => {
            ctx.out.array(found.len());
            for p in found {
                ctx.out.integer(p);
            }
        }
        None => match found.first() {
            Some(&p) => {
                ctx.out.integer(p);
            }
            None => {
                ctx.out.null();
            }
        },
    }
    Ok(())
}

// ---- edits in place ----

/// `LSET key index element` → OK, `ERR no such key`, or `ERR index out of range`.
fn cmd_lset(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    // Redis: the key, its type, then the index.
    let index = ctx.int(2);
    let at = index.as_ref().ok().copied();
    let elem = ctx.arg(3);
    let r = ctx.h.coll_write(ctx.conn.db, ctx.argv.get(1), Kind::List, false, |c| {
        match at.map(|i| position(i, c.len())) {
            Some(Some(i)) => c.set_at(i, elem).map(|_| true),
            _ => Ok(false),
        }
    })?;
    let Some(done) = r else { return Err(CmdError::new("ERR no such key")) };
    index?;
    if !done {
        return Err(CmdError::new("ERR index out of range"));
    }
    ctx.out.ok();
    notify(ctx, LIST, "lset", ctx.argv.get(1));
    Ok(())
}

/// `LTRIM key start stop` → OK; keeps only the inclusive range (the key goes if it empties).
fn cmd_ltrim(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let start = ctx.int(2)?;
    let stop = ctx.int(3)?;
    let r = ctx.h.coll_write(ctx.conn.db, ctx.argv.get(1), Kind::List, false, |c| {
        let len = c.len();
        let Some((from, to)) = span(start, stop, len) else { return c.clear().map(|_| true) };
        let (ltrim, rtrim) = (from, len - to);
        if ltrim + rtrim > to - from {
            // Most of the list goes: rebuild it from what stays.
            let mut keep = Vec::with_capacity((to - from) as usize);
            c.range(from, to, |e, _| {
                keep.push(e.to_vec());
                true
            })?;
            c.clear()?;
            for (i, e) in keep.iter().enumerate() {
                c.insert_at(i as u64, e)?;
            }
        } else {
            for _ in 0..rtrim {
                c.remove_at(c.len() - 1)?;
            }
            for _ in 0..ltrim {
                c.remove_at(0)?;
            }
        }
        // Redis signals the key modified even when the range kept everything: a WATCH of
        // it fails.
        c.touch()?;
        Ok(c.is_empty())
    })?;
    // On a list, "ltrim" even when the range kept everything, as Redis.
    if let Some(emptied) = r {
        notify::notify_removed(ctx, LIST, "ltrim", ctx.argv.get(1), emptied);
    }
    ctx.out.ok();
    Ok(())
}

/// `LINSERT key BEFORE|AFTER pivot element` → the new length, -1 if the pivot is not in
/// the list, 0 if the key is missing.
fn cmd_linsert(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let after = if ctx.arg(2).eq_ignore_ascii_case(b"after") {
        true
    } else if ctx.arg(2).eq_ignore_ascii_case(b"before") {
        false
    } else {
        return Err(CmdError::syntax());
    };
    let (pivot, elem) = (ctx.arg(3), ctx.arg(4));
    let r = ctx.h.coll_write(ctx.conn.db, ctx.arg(1), Kind::List, false, |c| {
        let mut at = None;
        let mut i = 0u64;
        c.range(0, c.len(), |e, _| {
            if e == pivot {
                at = Some(i);
                return false;
            }
            i += 1;
            true
        })?;
        match at {
            Some(p) => {
                c.insert_at(if after { p + 1 } else { p }, elem)?;
                Ok(c.len() as i64)
            }
            None => Ok(-1),
        }
    })?;
    if r.is_some_and(|n| n > 0) {
        notify(ctx, LIST, "linsert", ctx.arg(1));
    }
    ctx.out.integer(r.unwrap_or(0));
    Ok(())
}

/// `LREM key count element` → how many were removed: the first `count` matches from the
/// head (count > 0), from the tail (count < 0), or all (0).
fn cmd_lrem(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let count = ctx.int(2)?;
    let elem = ctx.arg(3);
    let want = if count == 0 { u64::MAX } else { count.unsigned_abs() };
    let r = ctx.h.coll_write(ctx.conn.db, ctx.arg(1), Kind::List, false, |c| {
        let mut hits = Vec::new();
        let mut visit = |i: u64, e: &[u8]| {
            if e == elem {
                hits.push(i);
            }
            (hits.len() as u64) < want
        };
        if count >= 0 {
            let mut i = 0;
            c.range(0, c.len(), |e, _| {
                let go = visit(i, e);
                i += 1;
                go
            })?;
        } else {
            walk_back(c, 0, c.len(), visit)?;
        }
        // Highest position first, so the others do not move.
        hits.sort_unstable_by(|a, b| b.cmp(a));
        for &i in &hits {
            c.remove_at(i)?;
        }
        Ok((hits.len() as i64, c.is_empty()))
    })?;
    let (removed, emptied) = r.unwrap_or((0, false));
    if removed > 0 {
        notify::notify_removed(ctx, LIST, "lrem", ctx.arg(1), emptied);
    }
    ctx.out.integer(removed);
    Ok(())
}

// ---- moves ----

/// Replies to a move (the element, or null) amid its events, in Redis's order: the push
/// onto the destination (after its "new"), the reply, the pop from the source ("del" if it
/// went).
fn reply_moved(ctx: &mut Ctx<'_>, src: &[u8], dst: &[u8], from: End, to: End, e: Option<(Vec<u8>, bool)>) {
    let Some((e, emptied)) = e else {
        ctx.out.null();
        return;
    };
    let f = notify::flags(ctx.shared);
    notify::notify_with(ctx, f, LIST, if to == End::Left { "lpush" } else { "rpush" }, dst);
    ctx.out.bulk(&e);
    notify::notify_with(ctx, f, LIST, if from == End::Left { "lpop" } else { "rpop" }, src);
    if emptied {
        notify::notify_with(ctx, f, GENERIC, "del", src);
    }
}

/// `LMOVE source destination LEFT|RIGHT LEFT|RIGHT` → the element moved, or null.
fn cmd_lmove(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let from = end_arg(ctx.arg(3))?;
    let to = end_arg(ctx.arg(4))?;
    let (src, dst) = (ctx.argv.get(1), ctx.argv.get(2));
    let e = op_lmove(ctx.h, ctx.conn.db, src, dst, from, to, false)?;
    reply_moved(ctx, src, dst, from, to, e);
    Ok(())
}

/// `RPOPLPUSH source destination` → LMOVE source destination RIGHT LEFT.
fn cmd_rpoplpush(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (src, dst) = (ctx.argv.get(1), ctx.argv.get(2));
    let e = op_lmove(ctx.h, ctx.conn.db, src, dst, End::Right, End::Left, false)?;
    reply_moved(ctx, src, dst, End::Right, End::Left, e);
    Ok(())
}

// ---- blocking forms ----
//
// Each has a `serve_*` function: serve this (possibly parked) client from one key, writing
// its reply and returning true, or return false if there is nothing to take yet. The
// command handler tries it on every key at once and parks the client if none served;
// [`crate::blocking`] calls it again, with the original arguments, when something is pushed.

/// Redis's `getTimeoutFromObjectOrReply` in seconds: a float, rounded up to milliseconds;
/// 0 blocks forever. As in Redis, a value whose milliseconds overflow a long long (`inf`,
/// `1e20`) reads as negative.
pub fn parse_timeout(b: &[u8]) -> Result<Option<Duration>, CmdError> {
    let secs = parse_f64(b).ok_or_else(|| CmdError::new("ERR timeout is not a float or out of range"))?;
    let ms = (secs * 1000.0).ceil();
    // ms is never NaN here (parse_f64 refuses NaN); 2^63 ms and up overflow in Redis.
    if !(0.0..9.223_372_036_854_776e18).contains(&ms) {
        return Err(CmdError::new("ERR timeout is negative"));
    }
    let ms = ms as u64;
    Ok((ms > 0).then(|| Duration::from_millis(ms)))
}

/// BLPOP / BRPOP from one key: `[key, element]`.
fn serve_bpop(ctx: &mut Ctx<'_>, key: &[u8], end: End, retry: bool) -> Result<bool, CmdError> {
    match op_pop(ctx.h, ctx.conn.db, key, end, 1) {
        Ok(Some((v, emptied))) if !v.is_empty() => {
            ctx.out.array(2);
            ctx.out.bulk(key);
            ctx.out.bulk(&v[0]);
            notify_pop(ctx, key, end, emptied);
            Ok(true)
        }
        Ok(_) => Ok(false),
        Err(Error::WrongType) if retry => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn serve_blpop(ctx: &mut Ctx<'_>, key: &[u8], retry: bool) -> Result<bool, CmdError> {
    serve_bpop(ctx, key, End::Left, retry)
}

fn serve_brpop(ctx: &mut Ctx<'_>, key: &[u8], retry: bool) -> Result<bool, CmdError> {
    serve_bpop(ctx, key, End::Right, retry)
}

/// BLMOVE / BRPOPLPUSH: the moved element. The destination and ends come from the
/// arguments (`BLMOVE src dst from to timeout`, `BRPOPLPUSH src dst timeout`).
fn serve_move(ctx: &mut Ctx<'_>, key: &[u8], retry: bool) -> Result<bool, CmdError> {
    let (from, to) =
        if ctx.argc() == 6 { (end_arg(ctx.arg(3))?, end_arg(ctx.arg(4))?) } else { (End::Right, End::Left) };
    let dst = ctx.argv.get(2);
    match op_lmove(ctx.h, ctx.conn.db, key, dst, from, to, retry)? {
        Some(e) => {
            reply_moved(ctx, key, dst, from, to, Some(e));
            Ok(true)
        }
        None => Ok(false),
    }
}

fn serve_blmpop(ctx: &mut Ctx<'_>, key: &[u8], retry: bool) -> Result<bool, CmdError> {
    let (_, _, end, count) = parse_mpop(ctx, 2)?;
    mpop_from(ctx, key, end, count, retry)
}

/// `BLPOP key [key ...] timeout` → `[key, element]` from the first non-empty list, or
/// blocks until one is pushed; a null array on timeout.
fn cmd_blpop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let timeout = parse_timeout(ctx.arg(ctx.argc() - 1))?;
    blocking::serve_or_block(ctx, 1, ctx.argc() - 1, None, timeout, serve_blpop, NullReply::Array)
}

/// `BRPOP key [key ...] timeout` → as BLPOP, from the tail.
fn cmd_brpop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let timeout = parse_timeout(ctx.arg(ctx.argc() - 1))?;
    blocking::serve_or_block(ctx, 1, ctx.argc() - 1, None, timeout, serve_brpop, NullReply::Array)
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout` → as LMOVE, blocking while
/// the source is empty.
fn cmd_blmove(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    end_arg(ctx.arg(3))?;
    end_arg(ctx.arg(4))?;
    let timeout = parse_timeout(ctx.arg(5))?;
    blocking::serve_or_block(ctx, 1, 2, Some(2), timeout, serve_move, NullReply::Bulk)
}

/// `BRPOPLPUSH source destination timeout` → BLMOVE source destination RIGHT LEFT timeout.
fn cmd_brpoplpush(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let timeout = parse_timeout(ctx.arg(3))?;
    blocking::serve_or_block(ctx, 1, 2, Some(2), timeout, serve_move, NullReply::Bulk)
}

/// `BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]` → as LMPOP, blocking
/// while every list is empty.
fn cmd_blmpop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (first, n, _, _) = parse_mpop(ctx, 2)?;
    let timeout = parse_timeout(ctx.arg(1))?;
    blocking::serve_or_block(ctx, first, first + n, None, timeout, serve_blmpop, NullReply::Array)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_follow_redis() {
        assert_eq!(span(0, -1, 3), Some((0, 3)));
        assert_eq!(span(-100, 100, 3), Some((0, 3)));
        assert_eq!(span(2, 1, 3), None);
        assert_eq!(span(3, 5, 3), None);
        assert_eq!(span(-1, -1, 3), Some((2, 3)));
        assert_eq!(span(0, 0, 0), None);
        assert_eq!(span(i64::MIN, i64::MAX, 3), Some((0, 3)));
    }

    #[test]
    fn positions_follow_redis() {
        assert_eq!(position(0, 3), Some(0));
        assert_eq!(position(-1, 3), Some(2));
        assert_eq!(position(-4, 3), None);
        assert_eq!(position(3, 3), None);
        assert_eq!(position(i64::MIN, 3), None);
    }

    #[test]
    fn timeouts_follow_redis() {
        assert_eq!(parse_timeout(b"0").unwrap(), None);
        assert_eq!(parse_timeout(b"-0").unwrap(), None);
        assert_eq!(parse_timeout(b"-0.0001").unwrap(), None);
        assert_eq!(parse_timeout(b"0.0001").unwrap(), Some(Duration::from_millis(1)));
        assert_eq!(parse_timeout(b"1.5").unwrap(), Some(Duration::from_millis(1500)));
        assert_eq!(parse_timeout(b"-1").unwrap_err().0, b"ERR timeout is negative");
        assert_eq!(parse_timeout(b"inf").unwrap_err().0, b"ERR timeout is negative");
        assert_eq!(parse_timeout(b"1e20").unwrap_err().0, b"ERR timeout is negative");
        assert_eq!(parse_timeout(b"nan").unwrap_err().0, b"ERR timeout is not a float or out of range");
        assert_eq!(parse_timeout(b"abc").unwrap_err().0, b"ERR timeout is not a float or out of range");
        assert_eq!(parse_timeout(b" 1").unwrap_err().0, b"ERR timeout is not a float or out of range");
    }
}
