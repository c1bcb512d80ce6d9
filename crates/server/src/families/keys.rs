//! Keyspace commands: DEL UNLINK EXISTS TYPE TOUCH, the EXPIRE family and TTL/PTTL/PERSIST,
//! KEYS SCAN RANDOMKEY, RENAME RENAMENX COPY MOVE, SWAPDB DBSIZE FLUSHDB FLUSHALL, OBJECT.
//!
//! Replies and error texts follow Redis 7 (`db.c`, `expire.c`, `object.c`), including the
//! order in which arguments are checked: option errors before integer errors before the key
//! lookup, as Redis parses them.
//!
//! Not tracked yet: access time and frequency. `OBJECT IDLETIME` replies 0 and
//! `OBJECT FREQ` (under an LFU policy) 0.

use larder_engine::{now_ms, ExpireCond, Handle, Ttl, Type};

use crate::command::{CmdError, Ctx, Spec, DENYOOM, FAST, LOADING, READONLY, STALE, WRITE};
use crate::families::string::count_lookup;
use crate::notify::{self, notify, GENERIC};

pub const COMMANDS: &[Spec] = &[
    Spec { name: "del", arity: -2, flags: WRITE, first_key: 1, last_key: -1, step: 1, group: "generic", summary: "Deletes one or more keys.", handler: cmd_del },
    Spec { name: "unlink", arity: -2, flags: WRITE | FAST, first_key: 1, last_key: -1, step: 1, group: "generic", summary: "Asynchronously deletes one or more keys.", handler: cmd_del },
    Spec { name: "exists", arity: -2, flags: READONLY | FAST, first_key: 1, last_key: -1, step: 1, group: "generic", summary: "Determines whether one or more keys exist.", handler: cmd_exists },
    Spec { name: "type", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Determines the type of value stored at a key.", handler: cmd_type },
    Spec { name: "touch", arity: -2, flags: READONLY | FAST, first_key: 1, last_key: -1, step: 1, group: "generic", summary: "Returns the number of existing keys out of those specified after updating the time they were last accessed.", handler: cmd_exists },
    Spec { name: "expire", arity: -3, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Sets the expiration time of a key in seconds.", handler: cmd_expire },
    Spec { name: "pexpire", arity: -3, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Sets the expiration time of a key in milliseconds.", handler: cmd_pexpire },
    Spec { name: "expireat", arity: -3, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Sets the expiration time of a key to a Unix timestamp.", handler: cmd_expireat },
    Spec { name: "pexpireat", arity: -3, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Sets the expiration time of a key to a Unix milliseconds timestamp.", handler: cmd_pexpireat },
    Spec { name: "expiretime", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Returns the expiration time of a key as a Unix timestamp.", handler: cmd_expiretime },
    Spec { name: "pexpiretime", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Returns the expiration time of a key as a Unix milliseconds timestamp.", handler: cmd_pexpiretime },
    Spec { name: "ttl", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Returns the expiration time in seconds of a key.", handler: cmd_ttl },
    Spec { name: "pttl", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Returns the expiration time in milliseconds of a key.", handler: cmd_pttl },
    Spec { name: "persist", arity: 2, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Removes the expiration time of a key.", handler: cmd_persist },
    Spec { name: "keys", arity: 2, flags: READONLY, first_key: 0, last_key: 0, step: 0, group: "generic", summary: "Returns all key names that match a pattern.", handler: cmd_keys },
    Spec { name: "scan", arity: -2, flags: READONLY, first_key: 0, last_key: 0, step: 0, group: "generic", summary: "Iterates over the key names in the database.", handler: cmd_scan },
    Spec { name: "randomkey", arity: 1, flags: READONLY, first_key: 0, last_key: 0, step: 0, group: "generic", summary: "Returns a random key name from the database.", handler: cmd_randomkey },
    Spec { name: "rename", arity: 3, flags: WRITE, first_key: 1, last_key: 2, step: 1, group: "generic", summary: "Renames a key and overwrites the destination.", handler: cmd_rename },
    Spec { name: "renamenx", arity: 3, flags: WRITE | FAST, first_key: 1, last_key: 2, step: 1, group: "generic", summary: "Renames a key only when the target key name doesn't exist.", handler: cmd_renamenx },
    Spec { name: "copy", arity: -3, flags: WRITE | DENYOOM, first_key: 1, last_key: 2, step: 1, group: "generic", summary: "Copies the value of a key to a new key.", handler: cmd_copy },
    Spec { name: "move", arity: 3, flags: WRITE | FAST, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Moves a key to another database.", handler: cmd_move },
    Spec { name: "swapdb", arity: 3, flags: WRITE | FAST, first_key: 0, last_key: 0, step: 0, group: "server", summary: "Swaps two Redis databases.", handler: cmd_swapdb },
    Spec { name: "dbsize", arity: 1, flags: READONLY | FAST, first_key: 0, last_key: 0, step: 0, group: "server", summary: "Returns the number of keys in the database.", handler: cmd_dbsize },
    Spec { name: "flushdb", arity: -1, flags: WRITE, first_key: 0, last_key: 0, step: 0, group: "server", summary: "Remove all keys from the current database.", handler: cmd_flushdb },
    Spec { name: "flushall", arity: -1, flags: WRITE, first_key: 0, last_key: 0, step: 0, group: "server", summary: "Removes all keys from all databases.", handler: cmd_flushall },
    Spec { name: "object", arity: -2, flags: 0, first_key: 0, last_key: 0, step: 0, group: "generic", summary: "A container for object introspection commands.", handler: crate::families::connection::cmd_container },
];

/// Redis's `getIntFromObjectOrReply`: an i64 that must also fit in an i32. `msg` replaces
/// both error texts when given (SWAPDB's "invalid first DB index").
pub(crate) fn int32(ctx: &Ctx<'_>, i: usize, msg: Option<&str>) -> Result<i64, CmdError> {
    let v = ctx.int(i).map_err(|e| msg.map(CmdError::new).unwrap_or(e))?;
    if v < i32::MIN as i64 || v > i32::MAX as i64 {
        return Err(CmdError::new(
            msg.unwrap_or("ERR value is out of range, value must between -2147483648 and 2147483647"),
        ));
    }
    Ok(v)
}

/// A database index as SELECT, MOVE and COPY check it.
fn db_index(ctx: &Ctx<'_>, v: i64) -> Result<u32, CmdError> {
    if v < 0 || v >= ctx.shared.store.databases() as i64 {
        return Err(CmdError::new("ERR DB index is out of range"));
    }
    Ok(v as u32)
}

// ---- DEL EXISTS TYPE ----

/// # Format
/// `DEL key [key ...]`, `UNLINK key [key ...]` → the number of keys removed.
///
/// UNLINK is DEL: freeing is already deferred (the old items are retired and reclaimed once
/// no reader can see them), so there is nothing left to do in the background.
fn cmd_del(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let flags = notify::flags(ctx.shared);
    let mut n = 0;
    // One key at a time, each "del" right after its deletion (and after the "expired" of a
    // key found expired before it), as Redis's loop.
    for i in 1..ctx.argc() {
        let key = ctx.arg(i);
        let deleted = ctx.h.del(ctx.conn.db, &[key])?;
        if deleted > 0 {
            notify::notify_with(ctx, flags, GENERIC, "del", key);
        }
        n += deleted;
    }
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `EXISTS key [key ...]`, `TOUCH key [key ...]` → how many of the keys exist (a key named
/// twice counts twice).
///
/// TOUCH only differs by updating the access time, which is not tracked yet.
fn cmd_exists(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut n = 0;
    // Each key is a lookup (a keyspace hit or miss) of its own, as in Redis.
    for i in 1..ctx.argc() {
        let key = ctx.arg(i);
        let found = ctx.h.exists(ctx.conn.db, &[key])?;
        count_lookup(ctx, key, found > 0);
        n += found;
    }
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `TYPE key` → `+string`, or `+none` for a missing key.
fn cmd_type(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = ctx.h.type_of(ctx.conn.db, ctx.arg(1))?;
    count_lookup(ctx, ctx.arg(1), t.is_some());
    let name = match t {
        Some(t) => t.name(),
        None => "none",
    };
    ctx.out.simple(name.as_bytes());
    Ok(())
}

// ---- EXPIRE family ----

/// Parses EXPIRE's NX / XX / GT / LT (from argument 3) as Redis's
/// `parseExtendedExpireArgumentsOrReply` does: every option is read first, then the
/// conflicts are checked.
fn parse_expire_cond(ctx: &Ctx<'_>) -> Result<ExpireCond, CmdError> {
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for i in 3..ctx.argc() {
        let opt = ctx.arg(i);
        match opt.to_ascii_lowercase().as_slice() {
            b"nx" => nx = true,
            b"xx" => xx = true,
            b"gt" => gt = true,
            b"lt" => lt = true,
            _ => return Err(CmdError::new(format!("ERR Unsupported option {}", String::from_utf8_lossy(opt)))),
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::new("ERR NX and XX, GT or LT options at the same time are not compatible"));
    }
    if gt && lt {
        return Err(CmdError::new("ERR GT and LT options at the same time are not compatible"));
    }
    Ok(match (nx, xx, gt, lt) {
        (true, ..) => ExpireCond::Nx,
        // GT already fails on a key without an expiry, so XX adds nothing to it.
        (_, _, true, _) => ExpireCond::Gt,
        (_, true, _, true) => ExpireCond::XxLt,
        (_, false, _, true) => ExpireCond::Lt,
        (_, true, _, _) => ExpireCond::Xx,
        _ => ExpireCond::Always,
    })
}

/// The absolute expiry in Unix ms for `value` (seconds when `seconds`), relative to now
/// when `relative`. None on overflow, which Redis reports as an invalid expire time. The
/// result may be negative (already expired).
fn expire_when(value: i64, seconds: bool, relative: bool) -> Option<i64> {
    let ms = if seconds { value.checked_mul(1000)? } else { value };
    let base = if relative { now_ms() as i64 } else { 0 };
    // Redis checks `when > LLONG_MAX - basetime` only: a large negative value is allowed.
    if ms > i64::MAX - base {
        return None;
    }
    Some(ms + base)
}

/// Op: sets the key's expiry (an absolute time in ms, negative meaning already expired:
/// the key is deleted). Returns Redis's 1/0.
fn op_expire(h: &mut Handle, db: u32, key: &[u8], when: i64, cond: ExpireCond) -> Result<bool, CmdError> {
    Ok(h.expire_at(db, key, when.max(0) as u64, cond)?)
}

fn expire_generic(ctx: &mut Ctx<'_>, name: &str, seconds: bool, relative: bool) -> Result<(), CmdError> {
    let cond = parse_expire_cond(ctx)?;
    let value = ctx.int(2)?;
    let when = expire_when(value, seconds, relative)
        .ok_or_else(|| CmdError::new(format!("ERR invalid expire time in '{name}' command")))?;
    // A time already past deletes the key: "del", as Redis (asked before the write, whose
    // clock is then the later one).
    let past = when <= now_ms() as i64;
    let set = op_expire(ctx.h, ctx.conn.db, ctx.arg(1), when, cond)?;
    // (Redis's order against the reply, for a RESP3 client subscribed to its own keys.)
    if set && past {
        notify(ctx, GENERIC, "del", ctx.arg(1));
    }
    ctx.out.integer(set as i64);
    if set && !past {
        notify(ctx, GENERIC, "expire", ctx.arg(1));
    }
    Ok(())
}

/// # Format
/// `EXPIRE key seconds [NX | XX | GT | LT]` → 1 if the expiry was set (or the key deleted
/// because the time is in the past), 0 if the key is missing or the condition failed.
fn cmd_expire(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    expire_generic(ctx, "expire", true, true)
}

/// # Format
/// `PEXPIRE key milliseconds [NX | XX | GT | LT]` → 1 or 0, as EXPIRE.
fn cmd_pexpire(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    expire_generic(ctx, "pexpire", false, true)
}

/// # Format
/// `EXPIREAT key unix-time-seconds [NX | XX | GT | LT]` → 1 or 0, as EXPIRE.
fn cmd_expireat(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    expire_generic(ctx, "expireat", true, false)
}

/// # Format
/// `PEXPIREAT key unix-time-milliseconds [NX | XX | GT | LT]` → 1 or 0, as EXPIRE.
fn cmd_pexpireat(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    expire_generic(ctx, "pexpireat", false, false)
}

/// Op: the key's absolute expiry in ms: -2 missing, -1 no expiry.
fn op_expire_time(h: &Handle, db: u32, key: &[u8]) -> Result<i64, CmdError> {
    Ok(match h.meta(db, key)? {
        None => -2,
        Some(m) if m.expire_at == 0 => -1,
        Some(m) => m.expire_at.min(i64::MAX as u64) as i64,
    })
}

/// # Format
/// `EXPIRETIME key` → the expiry as a Unix time in seconds, -1 without one, -2 if missing.
fn cmd_expiretime(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = op_expire_time(ctx.h, ctx.conn.db, ctx.arg(1))?;
    count_lookup(ctx, ctx.arg(1), t != -2);
    ctx.out.integer(if t < 0 { t } else { t / 1000 });
    Ok(())
}

/// # Format
/// `PEXPIRETIME key` → the expiry as a Unix time in ms, -1 without one, -2 if missing.
fn cmd_pexpiretime(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = op_expire_time(ctx.h, ctx.conn.db, ctx.arg(1))?;
    count_lookup(ctx, ctx.arg(1), t != -2);
    ctx.out.integer(t);
    Ok(())
}

/// Op: the remaining time to live in ms: -2 missing, -1 no expiry.
fn op_pttl(h: &Handle, db: u32, key: &[u8]) -> Result<i64, CmdError> {
    Ok(match h.pttl(db, key)? {
        Ttl::Missing => -2,
        Ttl::Persistent => -1,
        Ttl::Ms(ms) => ms.min(i64::MAX as u64) as i64,
    })
}

/// # Format
/// `TTL key` → seconds to live (rounded to the nearest second, as Redis), -1 without an
/// expiry, -2 if missing.
fn cmd_ttl(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = op_pttl(ctx.h, ctx.conn.db, ctx.arg(1))?;
    count_lookup(ctx, ctx.arg(1), t != -2);
    ctx.out.integer(if t < 0 { t } else { t.saturating_add(500) / 1000 });
    Ok(())
}

/// # Format
/// `PTTL key` → milliseconds to live, -1 without an expiry, -2 if missing.
fn cmd_pttl(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = op_pttl(ctx.h, ctx.conn.db, ctx.arg(1))?;
    count_lookup(ctx, ctx.arg(1), t != -2);
    ctx.out.integer(t);
    Ok(())
}

/// # Format
/// `PERSIST key` → 1 if an expiry was removed, 0 if the key is missing or had none.
fn cmd_persist(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let removed = ctx.h.persist(ctx.conn.db, ctx.arg(1))?;
    if removed {
        notify(ctx, GENERIC, "persist", ctx.arg(1));
    }
    ctx.out.integer(removed as i64);
    Ok(())
}

// ---- KEYS SCAN RANDOMKEY ----

/// Op: every live key of `db` matching `pattern` (all keys for `*`, which the engine's scan
/// doesn't match at all, as Redis doesn't).
/// # Format
/// `KEYS pattern` → array of the matching key names.
fn cmd_keys(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let keys = ctx.h.keys(ctx.conn.db, ctx.arg(1))?;
    ctx.out.array(keys.len());
    for k in &keys {
        ctx.out.bulk(k);
    }
    Ok(())
}

/// A SCAN cursor as Redis 7.0 reads it (`strtoul`): optional sign, decimal digits, nothing
/// else; a leading space or an overflow is invalid; "-1" wraps to 2^64-1, and the empty
/// string is 0. `strtoul` stops at a NUL byte, so a NUL ends the cursor.
pub(crate) fn parse_cursor(b: &[u8]) -> Option<u64> {
    let b = b.split(|&c| c == 0).next().unwrap_or(b"");
    if b.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match b[0] {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        v = v.checked_mul(10)?.checked_add((d - b'0') as u64)?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// What SCAN's TYPE option asks for.
#[derive(Clone, Copy)]
enum TypeFilter {
    Any,
    Only(Type),
    /// A type no key here has (a type we don't store yet, or an unknown name: Redis 7.0
    /// filters everything out rather than erroring).
    Nothing,
}

/// Engine scan steps one SCAN call may chain (see [`op_scan`]).
const SCAN_STEPS: usize = 16;

/// Op: one SCAN call. Returns the next cursor and the keys.
///
/// An engine step stops after about `count * 10` home buckets even when they are empty,
/// as Redis's `maxiterations`; but the smallest index here has 256 home buckets where
/// Redis's dict would have a handful, so a sparse database would come back a few keys per
/// call. Chaining up to [`SCAN_STEPS`] steps while fewer than `count` keys were found
/// gives what Redis gives: a small database in one call (cursor 0), about `count` keys per
/// call otherwise, and still a bounded amount of work.
fn op_scan(
    h: &Handle,
    db: u32,
    cursor: u64,
    count: usize,
    pattern: Option<&[u8]>,
    ty: TypeFilter,
) -> Result<(u64, Vec<Vec<u8>>), CmdError> {
    let mut keys = Vec::new();
    let only = match ty {
        TypeFilter::Only(t) => Some(t),
        _ => None,
    };
    let mut next = cursor;
    for _ in 0..SCAN_STEPS {
        next = h.scan(db, next, count, pattern, only, &mut keys)?;
        if matches!(ty, TypeFilter::Nothing) {
            keys.clear();
        }
        if next == 0 || keys.len() >= count {
            break;
        }
    }
    Ok((next, keys))
}

/// # Format
/// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]` → `[next cursor, [key ...]]`.
fn cmd_scan(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let cursor = parse_cursor(ctx.arg(1)).ok_or_else(|| CmdError::new("ERR invalid cursor"))?;
    let mut count = 10usize;
    let mut pattern: Option<&[u8]> = None;
    let mut ty = TypeFilter::Any;
    let mut i = 2;
    while i < ctx.argc() {
        let opt = ctx.arg(i).to_ascii_lowercase();
        if i + 1 >= ctx.argc() {
            return Err(CmdError::syntax());
        }
        match opt.as_slice() {
            b"count" => {
                let n = ctx.int(i + 1)?;
                if n < 1 {
                    return Err(CmdError::syntax());
                }
                count = n.min(i32::MAX as i64) as usize;
            }
            // (The engine's scan skips matching for "*", as Redis does.)
            b"match" => pattern = Some(ctx.arg(i + 1)),
            b"type" => {
                let name = ctx.arg(i + 1);
                ty = [Type::String, Type::Hash, Type::List, Type::Set, Type::ZSet]
                    .into_iter()
                    .find(|t| name.eq_ignore_ascii_case(t.name().as_bytes()))
                    .map_or(TypeFilter::Nothing, TypeFilter::Only);
            }
            _ => return Err(CmdError::syntax()),
        }
        i += 2;
    }
    let (next, keys) = op_scan(ctx.h, ctx.conn.db, cursor, count, pattern, ty)?;
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(keys.len());
    for k in &keys {
        ctx.out.bulk(k);
    }
    Ok(())
}

/// # Format
/// `RANDOMKEY` → a random key name, or null if the database is empty.
fn cmd_randomkey(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    match ctx.h.random_key(ctx.conn.db)? {
        Some(k) => ctx.out.bulk(&k),
        None => ctx.out.null(),
    };
    Ok(())
}

// ---- RENAME COPY MOVE ----

/// # Format
/// `RENAME key newkey` → `+OK`; `-ERR no such key` if `key` is missing. The TTL moves with
/// the value; renaming a key to itself is OK.
fn cmd_rename(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    ctx.h.rename(ctx.conn.db, ctx.arg(1), ctx.arg(2), false)?;
    notify_rename(ctx);
    ctx.out.ok();
    Ok(())
}

/// RENAME's events: "rename_from" then "rename_to" (after the destination's "new", which
/// the engine recorded); none when a key is renamed to itself.
fn notify_rename(ctx: &mut Ctx<'_>) {
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    if src != dst {
        let f = notify::flags(ctx.shared);
        notify::notify_with(ctx, f, GENERIC, "rename_from", src);
        notify::notify_with(ctx, f, GENERIC, "rename_to", dst);
    }
}

/// # Format
/// `RENAMENX key newkey` → 1 if renamed, 0 if `newkey` exists (or is `key` itself);
/// `-ERR no such key` if `key` is missing.
fn cmd_renamenx(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let done = ctx.h.rename(ctx.conn.db, ctx.arg(1), ctx.arg(2), true)?;
    if done {
        notify_rename(ctx);
    }
    ctx.out.integer(done as i64);
    Ok(())
}

/// # Format
/// `COPY source destination [DB destination-db] [REPLACE]` → 1 if copied, 0 if the source
/// is missing or the destination exists (without REPLACE).
fn cmd_copy(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let db = ctx.conn.db;
    let mut dst_db = db;
    let mut replace = false;
    let mut i = 3;
    while i < ctx.argc() {
        let opt = ctx.arg(i);
        if opt.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if opt.eq_ignore_ascii_case(b"db") && i + 1 < ctx.argc() {
            let v = int32(ctx, i + 1, None)?;
            dst_db = db_index(ctx, v)?;
            i += 1;
        } else {
            return Err(CmdError::syntax());
        }
        i += 1;
    }
    let (src, dst) = (ctx.arg(1), ctx.arg(2));
    // Checked before the lookup: Redis says so even when the key does not exist.
    if dst_db == db && src == dst {
        return Err(CmdError::new("ERR source and destination objects are the same"));
    }
    let done = ctx.h.copy(db, src, dst_db, dst, replace)?;
    if done {
        notify::notify_db(ctx, GENERIC, "copy_to", dst, dst_db);
    }
    ctx.out.integer(done as i64);
    Ok(())
}

/// # Format
/// `MOVE key db` → 1 if moved, 0 if the key is missing here or exists in `db`.
fn cmd_move(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let v = int32(ctx, 2, None)?;
    let dst_db = db_index(ctx, v)?;
    if dst_db == ctx.conn.db {
        return Err(CmdError::new("ERR source and destination objects are the same"));
    }
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    let done = ctx.h.move_to(db, key, dst_db)?;
    if done {
        let f = notify::flags(ctx.shared);
        notify::notify_db_with(ctx, f, GENERIC, "move_from", key, db);
        notify::notify_db_with(ctx, f, GENERIC, "move_to", key, dst_db);
    }
    ctx.out.integer(done as i64);
    Ok(())
}

// ---- SWAPDB DBSIZE FLUSHDB FLUSHALL ----

/// # Format
/// `SWAPDB index1 index2` → `+OK`. Every client (each selects a database by index) sees
/// the other database's keys from then on, as in Redis.
fn cmd_swapdb(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let a = int32(ctx, 1, Some("ERR invalid first DB index"))?;
    let b = int32(ctx, 2, Some("ERR invalid second DB index"))?;
    let (a, b) = (db_index(ctx, a)?, db_index(ctx, b)?);
    ctx.h.swapdb(a, b)?;
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `DBSIZE` → the number of keys in the selected database.
fn cmd_dbsize(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let n = ctx.h.dbsize(ctx.conn.db)?;
    ctx.out.integer(n as i64);
    Ok(())
}

/// FLUSHDB / FLUSHALL's optional `ASYNC | SYNC` (Redis's `getFlushCommandFlags`). Both
/// modes do the same here: the index is swapped for an empty one at once and the old items
/// are retired, so a client never waits on freeing memory.
fn check_flush_args(ctx: &Ctx<'_>) -> Result<(), CmdError> {
    match ctx.argc() {
        1 => Ok(()),
        2 if ctx.arg(1).eq_ignore_ascii_case(b"sync") || ctx.arg(1).eq_ignore_ascii_case(b"async") => Ok(()),
        _ => Err(CmdError::syntax()),
    }
}

/// # Format
/// `FLUSHDB [ASYNC | SYNC]` → `+OK`.
fn cmd_flushdb(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    check_flush_args(ctx)?;
    ctx.h.flushdb(ctx.conn.db)?;
    crate::tracking::on_flush(ctx);
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `FLUSHALL [ASYNC | SYNC]` → `+OK`.
fn cmd_flushall(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    check_flush_args(ctx)?;
    ctx.h.flushall()?;
    crate::tracking::on_flush(ctx);
    ctx.out.ok();
    Ok(())
}

// ---- OBJECT ----

const OBJECT_HELP: &[&str] = &[
    "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
];

/// Redis's reference count of its shared integer objects (`OBJ_SHARED_REFCOUNT`).
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
/// Redis shares the integers 0..10000 (`OBJ_SHARED_INTEGERS`).
const SHARED_INTEGERS: i64 = 10_000;

/// The current value of a parameter CONFIG SET accepts but nothing acts on yet.
fn passive_config(ctx: &Ctx<'_>, name: &str) -> Option<String> {
    let p = ctx.shared.config.passive.read().unwrap_or_else(|e| e.into_inner());
    p.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
}

/// The maxmemory policy's family: (LRU, LFU), as Redis's `MAXMEMORY_FLAG_*` bits.
fn policy_flags(ctx: &Ctx<'_>) -> (bool, bool) {
    let policy = passive_config(ctx, "maxmemory-policy").unwrap_or_default().to_ascii_lowercase();
    (policy.ends_with("-lru"), policy.ends_with("-lfu"))
}

/// OBJECT's subcommands as Redis 7 lists them (`object|encoding` ...): the command table
/// routes them, checks their arity and counts them in commandstats.
pub const SUBCOMMANDS: &[Spec] = &[
    Spec {
        name: "object|encoding",
        arity: 3,
        flags: READONLY,
        first_key: 2,
        last_key: 2,
        step: 1,
        group: "generic",
        summary: "Returns the internal encoding of a Redis object.",
        handler: cmd_object_encoding,
    },
    Spec {
        name: "object|freq",
        arity: 3,
        flags: READONLY,
        first_key: 2,
        last_key: 2,
        step: 1,
        group: "generic",
        summary: "Returns the logarithmic access frequency counter of a Redis object.",
        handler: cmd_object_freq,
    },
    Spec {
        name: "object|help",
        arity: 2,
        flags: LOADING | STALE,
        first_key: 0,
        last_key: 0,
        step: 0,
        group: "generic",
        summary: "Returns helpful text about the different subcommands.",
        handler: cmd_object_help,
    },
    Spec {
        name: "object|idletime",
        arity: 3,
        flags: READONLY,
        first_key: 2,
        last_key: 2,
        step: 1,
        group: "generic",
        summary: "Returns the time since the last access to a Redis object.",
        handler: cmd_object_idletime,
    },
    Spec {
        name: "object|refcount",
        arity: 3,
        flags: READONLY,
        first_key: 2,
        last_key: 2,
        step: 1,
        group: "generic",
        summary: "Returns the reference count of a value of a key.",
        handler: cmd_object_refcount,
    },
];

/// # Format
/// `OBJECT HELP` → the help lines, as simple strings.
fn cmd_object_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    ctx.out.array(OBJECT_HELP.len());
    for line in OBJECT_HELP {
        ctx.out.simple(line.as_bytes());
    }
    Ok(())
}

/// Op: the encoding of the value under `key` (None: missing), for every OBJECT
/// subcommand's existence check too.
fn op_encoding(h: &Handle, db: u32, key: &[u8]) -> Result<Option<&'static str>, CmdError> {
    Ok(h.encoding(db, key)?)
}

/// # Format
/// `OBJECT ENCODING key` → `int`, `embstr` (up to 44 bytes) or `raw` (longer, or changed
/// by APPEND, SETRANGE or SETBIT, as Redis reports it); null if missing.
fn cmd_object_encoding(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    match op_encoding(ctx.h, ctx.conn.db, ctx.arg(2))? {
        Some(e) => ctx.out.bulk(e.as_bytes()),
        None => ctx.out.null(),
    };
    Ok(())
}

/// # Format
/// `OBJECT REFCOUNT key` → 1, or 2147483647 for the integers Redis shares; null if missing.
fn cmd_object_refcount(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (db, key) = (ctx.conn.db, ctx.arg(2));
    let Some((_, int)) = ctx.h.encoding_and_int(db, key)? else {
        ctx.out.null();
        return Ok(());
    };
    // Redis shares the integers 0..9999 unless maxmemory is set with an LRU/LFU policy
    // (shared objects cannot carry a per-key access field).
    let (lru, lfu) = policy_flags(ctx);
    let maxmemory = passive_config(ctx, "maxmemory").is_some_and(|v| !v.trim().is_empty() && v.trim() != "0");
    let shared = !(maxmemory && (lru || lfu)) && int.is_some_and(|v| (0..SHARED_INTEGERS).contains(&v));
    ctx.out.integer(if shared { SHARED_REFCOUNT } else { 1 });
    Ok(())
}

/// # Format
/// `OBJECT IDLETIME key` → seconds since the last access: 0, as access time is not tracked
/// yet; an error under an LFU policy, as Redis; null if missing.
fn cmd_object_idletime(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if op_encoding(ctx.h, ctx.conn.db, ctx.arg(2))?.is_none() {
        ctx.out.null();
        return Ok(());
    }
    if policy_flags(ctx).1 {
        return Err(CmdError::new("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    ctx.out.integer(0);
    Ok(())
}

/// # Format
/// `OBJECT FREQ key` → the LFU counter: an error unless an LFU policy is set, then 0 (not
/// tracked yet); null if missing.
fn cmd_object_freq(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if op_encoding(ctx.h, ctx.conn.db, ctx.arg(2))?.is_none() {
        ctx.out.null();
        return Ok(());
    }
    if !policy_flags(ctx).1 {
        return Err(CmdError::new("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    ctx.out.integer(0);
    Ok(())
}
