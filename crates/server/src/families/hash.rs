//! Hash commands, as Redis 7.0's `t_hash.c`: HSET HSETNX HGET HMSET HMGET HGETALL HDEL HLEN
//! HEXISTS HSTRLEN HINCRBY HINCRBYFLOAT HKEYS HVALS HRANDFIELD HSCAN.
//!
//! Each command is an op (engine in, result out: `op_*`) and a handler (`cmd_*`) that parses
//! the arguments in Redis's order and writes the reply. A hash is a [`Kind::Hash`]
//! collection: small ones packed in insertion order (Redis's listpack), large ones a tree in
//! hash order (Redis's hashtable); the thresholds are `hash-max-listpack-*` (CONFIG).

use larder_engine::{Entries, Error, Handle, Kind};
use larder_resp::{Protocol, Writer};

use crate::command::{CmdError, Ctx, Spec, DENYOOM, FAST, READONLY, WRITE};
use crate::families::collection::{rand_below, rand_count, random_entries, reply_cap, scan_command};
use crate::families::string::{count_lookup, ld};
use crate::notify::{self, notify, HASH};

#[rustfmt::skip]
pub const COMMANDS: &[Spec] = &[
    Spec { name: "hset", arity: -4, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Set the string value of a hash field", handler: cmd_hset },
    Spec { name: "hsetnx", arity: 4, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Set the value of a hash field, only if the field does not exist", handler: cmd_hsetnx },
    Spec { name: "hget", arity: 3, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Get the value of a hash field", handler: cmd_hget },
    Spec { name: "hmset", arity: -4, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Set multiple hash fields to multiple values", handler: cmd_hmset },
    Spec { name: "hmget", arity: -3, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Get the values of all the given hash fields", handler: cmd_hmget },
    Spec { name: "hgetall", arity: 2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Get all the fields and values in a hash", handler: cmd_hgetall },
    Spec { name: "hdel", arity: -3, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Delete one or more hash fields", handler: cmd_hdel },
    Spec { name: "hlen", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Get the number of fields in a hash", handler: cmd_hlen },
    Spec { name: "hexists", arity: 3, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Determine if a hash field exists", handler: cmd_hexists },
    Spec { name: "hstrlen", arity: 3, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Get the length of the value of a hash field", handler: cmd_hstrlen },
    Spec { name: "hincrby", arity: 4, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Increment the integer value of a hash field by the given number", handler: cmd_hincrby },
    Spec { name: "hincrbyfloat", arity: 4, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Increment the float value of a hash field by the given amount", handler: cmd_hincrbyfloat },
    Spec { name: "hkeys", arity: 2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Get all the fields in a hash", handler: cmd_hkeys },
    Spec { name: "hvals", arity: 2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Get all the values in a hash", handler: cmd_hvals },
    Spec { name: "hrandfield", arity: -2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Get one or multiple random fields from a hash", handler: cmd_hrandfield },
    Spec { name: "hscan", arity: -3, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "hash", summary: "Incrementally iterate hash fields and associated values", handler: cmd_hscan },
];

// ---- setting fields ----

/// Op: sets every (field, value) pair; returns how many fields are new.
pub fn op_hset(h: &mut Handle, db: u32, key: &[u8], pairs: &[(&[u8], &[u8])]) -> Result<u64, Error> {
    let added = h.coll_write(db, key, Kind::Hash, true, |c| {
        let mut added = 0;
        for (f, v) in pairs {
            added += c.put(f, v)?.is_none() as u64;
        }
        // Redis signals the key modified even when every value was already there: a WATCH
        // of it fails.
        c.touch()?;
        Ok(added)
    })?;
    Ok(added.unwrap_or(0))
}

/// The field/value pairs from argument 2 on; an odd count is an arity error naming the
/// command, as Redis's `addReplyErrorArity`.
#[allow(clippy::type_complexity)]
fn pairs<'a>(ctx: &Ctx<'a>, name: &str) -> Result<Vec<(&'a [u8], &'a [u8])>, CmdError> {
    if ctx.argc() % 2 == 1 {
        return Err(CmdError::new(format!("ERR wrong number of arguments for '{name}' command")));
    }
    Ok((2..ctx.argc()).step_by(2).map(|i| (ctx.arg(i), ctx.arg(i + 1))).collect())
}

/// # Format
/// `HSET key field value [field value ...]` → how many fields were added.
fn cmd_hset(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let p = pairs(ctx, "hset")?;
    let n = op_hset(ctx.h, ctx.conn.db, ctx.arg(1), &p)?;
    ctx.out.integer(n as i64);
    notify(ctx, HASH, "hset", ctx.arg(1));
    Ok(())
}

/// # Format
/// `HMSET key field value [field value ...]` → `+OK`.
fn cmd_hmset(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let p = pairs(ctx, "hmset")?;
    op_hset(ctx.h, ctx.conn.db, ctx.arg(1), &p)?;
    ctx.out.ok();
    notify(ctx, HASH, "hset", ctx.arg(1));
    Ok(())
}

/// Op: sets `field` only if it is absent; returns whether it was set.
pub fn op_hsetnx(h: &mut Handle, db: u32, key: &[u8], field: &[u8], value: &[u8]) -> Result<bool, Error> {
    let set = h.coll_write(db, key, Kind::Hash, true, |c| {
        if c.contains(field)? {
            return Ok(false);
        }
        c.put(field, value)?;
        Ok(true)
    })?;
    Ok(set.unwrap_or(false))
}

/// # Format
/// `HSETNX key field value` → 1 if the field was set, 0 if it existed.
fn cmd_hsetnx(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let set = op_hsetnx(ctx.h, ctx.conn.db, ctx.arg(1), ctx.arg(2), ctx.arg(3))?;
    ctx.out.integer(set as i64);
    if set {
        notify(ctx, HASH, "hset", ctx.arg(1));
    }
    Ok(())
}

// ---- reading fields ----

/// Op: one field's value (None: no key or no field).
pub fn op_hget(h: &Handle, db: u32, key: &[u8], field: &[u8]) -> Result<Option<Option<Vec<u8>>>, Error> {
    h.coll_read(db, key, Kind::Hash, |c| c.find(field))
}

/// # Format
/// `HGET key field` → the value, or null.
fn cmd_hget(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = op_hget(ctx.h, ctx.conn.db, ctx.arg(1), ctx.arg(2))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    match r.flatten() {
        Some(v) => ctx.out.bulk(&v),
        None => ctx.out.null(),
    };
    Ok(())
}

/// # Format
/// `HMGET key field [field ...]` → the values in order, null for each missing one.
fn cmd_hmget(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let fields: Vec<&[u8]> = (2..ctx.argc()).map(|i| ctx.arg(i)).collect();
    let r = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::Hash, |c| {
        fields.iter().map(|f| c.find(f)).collect::<Result<Vec<_>, _>>()
    })?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    let vals = r.unwrap_or_else(|| vec![None; fields.len()]);
    ctx.out.array(vals.len());
    for v in &vals {
        match v {
            Some(v) => ctx.out.bulk(v),
            None => ctx.out.null(),
        };
    }
    Ok(())
}

/// Op: every (field, value), in the hash's order.
#[allow(clippy::type_complexity)]
pub fn op_hgetall(h: &Handle, db: u32, key: &[u8]) -> Result<Option<Entries>, Error> {
    h.coll_read(db, key, Kind::Hash, |c| c.entries())
}

/// Which parts of each entry HGETALL / HKEYS / HVALS reply with.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Both,
    Keys,
    Values,
}

fn hgetall_generic(ctx: &mut Ctx<'_>, parts: Parts) -> Result<(), CmdError> {
    let r = op_hgetall(ctx.h, ctx.conn.db, ctx.arg(1))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    let ents = r.unwrap_or_default();
    if parts == Parts::Both {
        ctx.out.map(ents.len());
    } else {
        ctx.out.array(ents.len());
    }
    for (f, v) in &ents {
        if parts != Parts::Values {
            ctx.out.bulk(f);
        }
        if parts != Parts::Keys {
            ctx.out.bulk(v);
        }
    }
    Ok(())
}

/// # Format
/// `HGETALL key` → field, value, … (a map in RESP3).
fn cmd_hgetall(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    hgetall_generic(ctx, Parts::Both)
}

/// # Format
/// `HKEYS key` → every field.
fn cmd_hkeys(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    hgetall_generic(ctx, Parts::Keys)
}

/// # Format
/// `HVALS key` → every value.
fn cmd_hvals(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    hgetall_generic(ctx, Parts::Values)
}

/// Op: removes the fields; returns how many existed, and whether the hash is now empty (so
/// deleted).
pub fn op_hdel(h: &mut Handle, db: u32, key: &[u8], fields: &[&[u8]]) -> Result<(u64, bool), Error> {
    let n = h.coll_write(db, key, Kind::Hash, false, |c| {
        let mut n = 0;
        for f in fields {
            n += c.del(f)?.is_some() as u64;
        }
        Ok((n, c.is_empty()))
    })?;
    Ok(n.unwrap_or((0, false)))
}

/// # Format
/// `HDEL key field [field ...]` → how many fields were removed.
fn cmd_hdel(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let fields: Vec<&[u8]> = (2..ctx.argc()).map(|i| ctx.arg(i)).collect();
    let (n, emptied) = op_hdel(ctx.h, ctx.conn.db, ctx.arg(1), &fields)?;
    if n > 0 {
        notify::notify_removed(ctx, HASH, "hdel", ctx.arg(1), emptied);
    }
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `HLEN key` → the number of fields (0 for a missing key).
fn cmd_hlen(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::Hash, |c| Ok(c.len()))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    ctx.out.integer(r.unwrap_or(0) as i64);
    Ok(())
}

/// # Format
/// `HEXISTS key field` → 1 or 0.
fn cmd_hexists(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = ctx.h.coll_read(ctx.conn.db, ctx.arg(1), Kind::Hash, |c| c.contains(ctx.arg(2)))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    ctx.out.integer(r.unwrap_or(false) as i64);
    Ok(())
}

/// # Format
/// `HSTRLEN key field` → the value's length (0 if missing).
fn cmd_hstrlen(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = op_hget(ctx.h, ctx.conn.db, ctx.arg(1), ctx.arg(2))?;
    count_lookup(ctx, ctx.arg(1), r.is_some());
    ctx.out.integer(r.flatten().map_or(0, |v| v.len()) as i64);
    Ok(())
}

// ---- increments ----

/// Op: HINCRBY. The field's value must be a canonical integer (`string2ll`).
pub fn op_hincrby(h: &mut Handle, db: u32, key: &[u8], field: &[u8], incr: i64) -> Result<i64, CmdError> {
    let r = h.coll_write(db, key, Kind::Hash, true, |c| {
        let cur = match c.find(field)? {
            None => 0,
            Some(v) => match larder_engine::parse_canonical_i64(&v) {
                Some(n) => n,
                None => return Ok(Err(CmdError::new("ERR hash value is not an integer"))),
            },
        };
        let Some(new) = cur.checked_add(incr) else {
            return Ok(Err(CmdError::new("ERR increment or decrement would overflow")));
        };
        c.put(field, new.to_string().as_bytes())?;
        // Modified for WATCH even when adding 0, as in Redis.
        c.touch()?;
        Ok(Ok(new))
    })?;
    r.unwrap_or(Ok(0))
}

/// # Format
/// `HINCRBY key field increment` → the new value.
fn cmd_hincrby(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let incr = ctx.int(3)?;
    let n = op_hincrby(ctx.h, ctx.conn.db, ctx.arg(1), ctx.arg(2), incr)?;
    ctx.out.integer(n);
    notify(ctx, HASH, "hincrby", ctx.arg(1));
    Ok(())
}

/// Op: HINCRBYFLOAT in 80-bit long double, printed as INCRBYFLOAT prints (the string
/// family's [`ld`]); returns the new text, which is also what is stored.
pub fn op_hincrbyfloat(h: &mut Handle, db: u32, key: &[u8], field: &[u8], incr: ld::Ld) -> Result<Vec<u8>, CmdError> {
    let r = h.coll_write(db, key, Kind::Hash, true, |c| {
        let cur = match c.find(field)? {
            None => ld::Ld::ZERO,
            Some(v) => match ld::parse(&v) {
                Some(x) => x,
                None => return Ok(Err(CmdError::new("ERR hash value is not a float"))),
            },
        };
        let text = match cur.add(incr) {
            Some(sum) if sum.is_finite() => sum.to_human(),
            _ => return Ok(Err(CmdError::new("ERR increment would produce NaN or Infinity"))),
        };
        c.put(field, &text)?;
        // Modified for WATCH even when adding 0, as in Redis.
        c.touch()?;
        Ok(Ok(text))
    })?;
    r.unwrap_or_else(|| Ok(b"0".to_vec()))
}

/// # Format
/// `HINCRBYFLOAT key field increment` → the new value as a bulk string.
fn cmd_hincrbyfloat(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let incr = ld::parse(ctx.arg(3)).ok_or_else(CmdError::not_float)?;
    if !incr.is_finite() {
        return Err(CmdError::new("ERR value is NaN or Infinity"));
    }
    let text = op_hincrbyfloat(ctx.h, ctx.conn.db, ctx.arg(1), ctx.arg(2), incr)?;
    ctx.out.bulk(&text);
    notify(ctx, HASH, "hincrbyfloat", ctx.arg(1));
    Ok(())
}

// ---- random fields and scans ----

/// # Format
/// `HRANDFIELD key [count [WITHVALUES]]` → one field (null if the key is missing), or an
/// array of fields (with values: flat in RESP2, [field, value] pairs in RESP3).
fn cmd_hrandfield(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    if ctx.argc() == 2 {
        let r = ctx.h.coll_read(db, key, Kind::Hash, |c| random_entries(c, -1))?;
        count_lookup(ctx, ctx.arg(1), r.is_some());
        match r.and_then(|v| v.into_iter().next()) {
            Some((f, _)) => ctx.out.bulk(&f),
            None => ctx.out.null(),
        };
        return Ok(());
    }
    let count = rand_count(ctx, 2)?;
    let withvalues = match ctx.argc() {
        3 => false,
        4 if ctx.arg(3).eq_ignore_ascii_case(b"withvalues") => true,
        _ => return Err(CmdError::syntax()),
    };
    if withvalues && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::new("ERR value is out of range"));
    }
    let resp3 = ctx.out.protocol() == Protocol::Resp3;
    let write = |out: &mut Writer<'_>, ents: &[(Vec<u8>, Vec<u8>)]| {
        for (f, v) in ents {
            if withvalues && resp3 {
                out.array(2);
            }
            out.bulk(f);
            if withvalues {
                out.bulk(v);
            }
        }
    };
    let header = |out: &mut Writer<'_>, n: u64| {
        let n = if withvalues && !resp3 { 2 * n } else { n };
        out.array(n as usize);
    };
    if count >= 0 {
        let r = ctx.h.coll_read(db, key, Kind::Hash, |c| random_entries(c, count))?;
        count_lookup(ctx, ctx.arg(1), r.is_some());
        let ents = r.unwrap_or_default();
        header(&mut ctx.out, ents.len() as u64);
        write(&mut ctx.out, &ents);
        return Ok(());
    }
    // Repeats allowed: `-count` picks, written as they are drawn, so a count no reply could
    // hold stops at the output bound (and the client is dropped) instead of growing a vector.
    let cap = reply_cap(ctx);
    let n = count.unsigned_abs();
    let mark = ctx.out.buf().len();
    let r = ctx
        .h
        .coll_read(db, key, Kind::Hash, |c| {
            let size = c.len();
            header(&mut ctx.out, n);
            for _ in 0..n {
                let (f, v) = c.get(rand_below(size))?;
                write(&mut ctx.out, &[(f, v)]);
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

/// # Format
/// `HSCAN key cursor [MATCH pattern] [COUNT count]` → `[next cursor, [field, value, ...]]`.
fn cmd_hscan(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let Some(ents) = scan_command(ctx, Kind::Hash)? else { return Ok(()) };
    ctx.out.array(ents.len() * 2);
    for (f, v) in &ents {
        ctx.out.bulk(f);
        ctx.out.bulk(v);
    }
    Ok(())
}
