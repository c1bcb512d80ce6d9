//! DUMP, RESTORE, RESTORE-ASKING and MIGRATE: a key's value as Redis's serialized payload
//! (the [`larder_dump`] crate), read out, written back, or carried to another server.
//!
//! Replies, error texts and the order of the checks follow Redis 7.0's `cluster.c`
//! (`dumpCommand`, `restoreCommand`, `migrateCommand`). Differences:
//! - RESTORE's IDLETIME and FREQ are checked and then ignored: Larder does not track access
//!   time or frequency yet (OBJECT IDLETIME answers 0).
//! - RESTORE ... REPLACE deletes the old value, then writes the new one: a reader on another
//!   worker may find the key missing between (Redis's one thread makes them one step). A
//!   value is never published half-built, nor without its TTL.
//! - MIGRATE opens a new connection every time (Redis caches them for 10 s:
//!   `migrate_cached_sockets` stays 0), and while it waits for the target it holds the
//!   worker thread it runs on, as Redis holds its one thread.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use larder_dump::Value;
use larder_engine::{now_ms, Cond, Error, Handle, Kind, Outcome, SetOptions, Ttl, Type};

use crate::command::{parse_i64, CmdError, Ctx, Spec, ASKING, DENYOOM, MOVABLEKEYS, READONLY, WRITE};
use crate::families::string::count_lookup;
use crate::notify::{self, GENERIC};

pub const COMMANDS: &[Spec] = &[
    Spec {
        name: "dump",
        arity: 2,
        flags: READONLY,
        first_key: 1,
        last_key: 1,
        step: 1,
        group: "generic",
        summary: "Return a serialized version of the value stored at the specified key.",
        handler: cmd_dump,
    },
    Spec {
        name: "restore",
        arity: -4,
        flags: WRITE | DENYOOM,
        first_key: 1,
        last_key: 1,
        step: 1,
        group: "generic",
        summary: "Create a key using the provided serialized value, previously obtained using DUMP.",
        handler: cmd_restore,
    },
    Spec {
        name: "restore-asking",
        arity: -4,
        flags: WRITE | DENYOOM | ASKING,
        first_key: 1,
        last_key: 1,
        step: 1,
        group: "server",
        summary: "An internal command for migrating keys in a cluster",
        handler: cmd_restore,
    },
    Spec {
        name: "migrate",
        arity: -6,
        flags: WRITE | MOVABLEKEYS,
        first_key: 3,
        last_key: 3,
        step: 1,
        group: "generic",
        summary: "Atomically transfer a key from a Redis instance to another one.",
        handler: cmd_migrate,
    },
];

/// Op: the value under `key`, None if it is missing.
pub fn op_read_value(h: &Handle, db: u32, key: &[u8]) -> Result<Option<Value>, Error> {
    let Some(ty) = h.type_of(db, key)? else { return Ok(None) };
    let kind = match ty {
        Type::String => return Ok(h.get(db, key)?.map(Value::String)),
        Type::List => Kind::List,
        Type::Set => Kind::Set,
        Type::Hash => Kind::Hash,
        Type::ZSet => Kind::ZSet,
    };
    let Some(entries) = h.coll_read(db, key, kind, |c| c.entries())? else { return Ok(None) };
    Ok(Some(match kind {
        Kind::List => Value::List(entries.into_iter().map(|(k, _)| k).collect()),
        Kind::Set => Value::Set(entries.into_iter().map(|(k, _)| k).collect()),
        Kind::Hash => Value::Hash(entries),
        Kind::ZSet => Value::ZSet(
            entries
                .into_iter()
                .map(|(m, s)| {
                    let s: [u8; 8] = s.try_into().map_err(|_| Error::Corrupt("sorted-set score is not 8 bytes"))?;
                    Ok((m, f64::from_le_bytes(s)))
                })
                .collect::<Result<_, Error>>()?,
        ),
    }))
}

/// Op: writes `value` under `key`, expiring at `expire_at` (Unix ms, 0: never); a
/// collection is built whole and published at once, with its expiry. The caller found the key missing (or
/// deleted it, for `replace`); if a client on another worker wrote it since, the value is
/// not merged into theirs: without `replace` nothing is written and the result is false
/// (the key is busy), with it their value is replaced.
pub fn op_write_value(
    h: &mut Handle,
    db: u32,
    key: &[u8],
    value: &Value,
    expire_at: u64,
    replace: bool,
) -> Result<bool, Error> {
    let kind = match value {
        Value::String(s) => {
            let expiry = larder_engine::Expiry::at_or_clear(expire_at);
            let cond = if replace { Cond::Always } else { Cond::Nx };
            let r = h.set(db, key, s, &SetOptions { expiry, cond, ..SetOptions::default() })?;
            return Ok(r.outcome == Outcome::Stored);
        }
        Value::List(_) => Kind::List,
        Value::Set(_) => Kind::Set,
        Value::Hash(_) => Kind::Hash,
        Value::ZSet(_) => Kind::ZSet,
    };
    let fill = |c: &mut larder_engine::Coll<'_>| -> Result<bool, Error> {
        if !c.is_empty() {
            if !replace {
                return Ok(false);
            }
            c.clear()?;
        }
        c.set_expire_at(expire_at);
        match value {
            Value::String(_) => {}
            Value::List(items) => {
                for e in items {
                    c.insert_at(c.len(), e)?;
                }
            }
            Value::Set(items) => {
                for m in items {
                    c.put(m, b"")?;
                }
            }
            Value::Hash(pairs) => {
                for (f, v) in pairs {
                    c.put(f, v)?;
                }
            }
            Value::ZSet(pairs) => {
                for (m, s) in pairs {
                    c.zput(m, *s)?;
                }
            }
        }
        Ok(true)
    };
    let written = match h.coll_write(db, key, kind, true, fill) {
        Ok(w) => w.unwrap_or(false),
        // Another type got there first.
        Err(Error::WrongType) if replace => {
            h.del(db, &[key])?;
            h.coll_write(db, key, kind, true, fill)?.unwrap_or(false)
        }
        Err(Error::WrongType) => false,
        Err(e) => return Err(e),
    };
    Ok(written)
}

/// # Format
/// `DUMP key` → the value serialized as Redis 7.0 serializes it (RDB version 10, CRC-64),
/// which RESTORE here or on a Redis server reads back; null if the key is missing.
fn cmd_dump(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let key = ctx.arg(1);
    let value = op_read_value(ctx.h, ctx.conn.db, key)?;
    count_lookup(ctx, key, value.is_some());
    match value {
        Some(v) => ctx.out.bulk(&larder_dump::encode(&v)),
        None => ctx.out.null(),
    };
    Ok(())
}

/// # Format
/// `RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]`
/// → `+OK`; `-BUSYKEY` if `key` exists without REPLACE. `ttl` is in milliseconds, 0 for
/// none, a Unix time with ABSTTL; one already past creates nothing (REPLACE still deletes
/// the old value) and answers OK. RESTORE-ASKING is the same command.
fn cmd_restore(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (mut replace, mut absttl) = (false, false);
    let (mut idle, mut freq) = (None, None);
    let mut j = 4;
    while j < ctx.argc() {
        let opt = ctx.arg(j);
        let more = j + 1 < ctx.argc();
        if opt.eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else if opt.eq_ignore_ascii_case(b"absttl") {
            absttl = true;
        } else if opt.eq_ignore_ascii_case(b"idletime") && more && freq.is_none() {
            let v = ctx.int(j + 1)?;
            if v < 0 {
                return Err(CmdError::new("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = Some(v);
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"freq") && more && idle.is_none() {
            let v = ctx.int(j + 1)?;
            if !(0..=255).contains(&v) {
                return Err(CmdError::new("ERR Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = Some(v);
            j += 1;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    if !replace && ctx.h.type_of(db, key)?.is_some() {
        return Err(CmdError::new("BUSYKEY Target key name already exists."));
    }
    let ttl = ctx.int(2)?;
    if ttl < 0 {
        return Err(CmdError::new("ERR Invalid TTL value, must be >= 0"));
    }
    let value = larder_dump::decode(ctx.arg(3)).map_err(|e| match e {
        larder_dump::Error::VersionOrChecksum => CmdError::new("ERR DUMP payload version or checksum are wrong"),
        larder_dump::Error::BadFormat => CmdError::new("ERR Bad data format"),
    })?;
    let deleted = replace && ctx.h.del(db, &[key])? > 0;
    let now = now_ms() as i64;
    let at = if ttl != 0 && !absttl { ttl.saturating_add(now) } else { ttl };
    if at != 0 && at <= now {
        if deleted {
            notify::notify(ctx, GENERIC, "del", key);
        } else {
            ctx.conn.unchanged = true;
        }
        ctx.out.ok();
        return Ok(());
    }
    if !op_write_value(ctx.h, db, key, &value, at as u64, replace)? {
        return Err(CmdError::new("BUSYKEY Target key name already exists."));
    }
    notify::notify(ctx, GENERIC, "restore", key);
    ctx.out.ok();
    Ok(())
}

/// MIGRATE's keys as Redis's `migrateGetKeys` finds them: argument 3, or with KEYS (and an
/// empty argument 3) every argument after it; the arguments of AUTH and AUTH2 are skipped.
pub fn key_positions(args: &[&[u8]]) -> Vec<usize> {
    let mut i = 6;
    while i < args.len() {
        let a = args[i];
        if a.eq_ignore_ascii_case(b"keys") {
            return if args[3].is_empty() { (i + 1..args.len()).collect() } else { Vec::new() };
        }
        if a.eq_ignore_ascii_case(b"auth") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"auth2") {
            i += 2;
        }
        i += 1;
    }
    vec![3]
}

/// MIGRATE's options.
struct Migrate<'a> {
    copy: bool,
    replace: bool,
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys: Vec<&'a [u8]>,
}

fn parse_migrate<'a>(ctx: &Ctx<'a>) -> Result<Migrate<'a>, CmdError> {
    let mut m = Migrate { copy: false, replace: false, auth: None, keys: vec![ctx.arg(3)] };
    let mut j = 6;
    while j < ctx.argc() {
        let (opt, more) = (ctx.arg(j), ctx.argc() - 1 - j);
        if opt.eq_ignore_ascii_case(b"copy") {
            m.copy = true;
        } else if opt.eq_ignore_ascii_case(b"replace") {
            m.replace = true;
        } else if opt.eq_ignore_ascii_case(b"auth") && more >= 1 {
            m.auth = Some((None, ctx.arg(j + 1)));
            j += 1;
        } else if opt.eq_ignore_ascii_case(b"auth2") && more >= 2 {
            m.auth = Some((Some(ctx.arg(j + 1)), ctx.arg(j + 2)));
            j += 2;
        } else if opt.eq_ignore_ascii_case(b"keys") {
            if !ctx.arg(3).is_empty() {
                return Err(CmdError::new(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            m.keys = (j + 1..ctx.argc()).map(|i| ctx.arg(i)).collect();
            break;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    Ok(m)
}

/// A command in RESP, as MIGRATE sends it.
fn put_command(buf: &mut Vec<u8>, args: &[&[u8]]) {
    buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        buf.extend_from_slice(a);
        buf.extend_from_slice(b"\r\n");
    }
}

/// C's `strtol` as Redis's `getLongFromObjectOrReply` needs it: a strict integer.
fn long_arg(ctx: &Ctx<'_>, i: usize) -> Result<i64, CmdError> {
    parse_i64(ctx.arg(i)).ok_or_else(CmdError::not_integer)
}

/// # Format
/// `MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE] [AUTH password]
/// [AUTH2 username password] [KEYS key ...]` → `+OK` once the target has RESTOREd them
/// (and they are deleted here, unless COPY); `+NOKEY` if none of the keys exists;
/// `-IOERR ...` when the target cannot be reached or does not answer within `timeout` ms;
/// `-ERR Target instance replied with error: ...` for the target's first error (the keys
/// it did take are deleted all the same).
fn cmd_migrate(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let m = parse_migrate(ctx)?;
    let timeout = long_arg(ctx, 5)?;
    let target_db = long_arg(ctx, 4)?;
    let timeout = Duration::from_millis(if timeout <= 0 { 1000 } else { timeout as u64 });
    let db = ctx.conn.db;
    let mut found = Vec::new();
    for &key in &m.keys {
        if let Some(v) = op_read_value(ctx.h, db, key)? {
            count_lookup(ctx, key, true);
            found.push((key, v));
        } else {
            count_lookup(ctx, key, false);
        }
    }
    // Only the keys deleted here count as changes (Redis's `server.dirty`).
    ctx.conn.unchanged = true;
    if found.is_empty() {
        ctx.out.simple(b"NOKEY");
        return Ok(());
    }
    let mut cmd = Vec::new();
    if let Some((user, pass)) = m.auth {
        let args: Vec<&[u8]> = [Some(&b"AUTH"[..]), user, Some(pass)].into_iter().flatten().collect();
        put_command(&mut cmd, &args);
    }
    put_command(&mut cmd, &[b"SELECT", target_db.to_string().as_bytes()]);
    let mut sent = Vec::new();
    for (key, value) in &found {
        let ttl = match ctx.h.pttl(db, key)? {
            Ttl::Missing => continue,
            Ttl::Persistent => 0,
            Ttl::Ms(ms) => ms.max(1),
        };
        let payload = larder_dump::encode(value);
        let ttl = ttl.to_string();
        let mut args: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), &payload];
        if m.replace {
            args.push(b"REPLACE");
        }
        put_command(&mut cmd, &args);
        sent.push(*key);
    }
    let replies = exchange(ctx.arg(1), ctx.arg(2), &cmd, m.auth.is_some() as usize + 1 + sent.len(), timeout);
    let (replies, io_error) = match replies {
        Ok(r) => (r, None),
        Err(Io::Connect) => return Err(CmdError::new("IOERR error or timeout connecting to the client")),
        Err(Io::Partial(r, write)) => (r, Some(write)),
    };
    // AUTH's and SELECT's replies come first: an error there is the error, and no key is
    // taken as migrated.
    let head = m.auth.is_some() as usize + 1;
    let head_error = replies.iter().take(head).find(|r| r.starts_with(b"-")).cloned();
    let mut first_error = head_error.clone();
    for (i, key) in sent.iter().enumerate() {
        let Some(r) = replies.get(head + i) else { break };
        if head_error.is_some() || r.starts_with(b"-") {
            first_error.get_or_insert_with(|| r.clone());
        } else if !m.copy && ctx.h.del(db, &[key])? > 0 {
            ctx.conn.unchanged = false;
            notify::notify(ctx, GENERIC, "del", key);
        }
    }
    if let Some(e) = first_error {
        let text = String::from_utf8_lossy(&e[1..]).into_owned();
        return Err(CmdError::new(format!("ERR Target instance replied with error: {text}")));
    }
    if let Some(write) = io_error {
        let what = if write { "writing" } else { "reading" };
        return Err(CmdError::new(format!("IOERR error or timeout {what} to target instance")));
    }
    ctx.out.ok();
    Ok(())
}

/// How talking to MIGRATE's target failed.
enum Io {
    Connect,
    /// The replies read before a write (true) or read (false) failed.
    Partial(Vec<Vec<u8>>, bool),
}

/// Connects to `host:port`, sends `cmd` and reads `n` one-line replies, each step within
/// `timeout`.
fn exchange(host: &[u8], port: &[u8], cmd: &[u8], n: usize, timeout: Duration) -> Result<Vec<Vec<u8>>, Io> {
    let host = String::from_utf8_lossy(host).into_owned();
    let port = crate::families::atoi(port) as u16;
    let addrs = (host.as_str(), port).to_socket_addrs().map_err(|_| Io::Connect)?;
    let mut stream = addrs.into_iter().find_map(|a| TcpStream::connect_timeout(&a, timeout).ok()).ok_or(Io::Connect)?;
    let _ = stream.set_nodelay(true);
    stream.set_read_timeout(Some(timeout)).map_err(|_| Io::Connect)?;
    stream.set_write_timeout(Some(timeout)).map_err(|_| Io::Connect)?;
    if stream.write_all(cmd).is_err() {
        return Err(Io::Partial(Vec::new(), true));
    }
    let mut reader = BufReader::new(stream);
    let mut replies = Vec::with_capacity(n);
    for _ in 0..n {
        // Redis reads a reply line into a 1024-byte buffer; a longer one is cut there.
        let mut line = Vec::new();
        match Read::take(&mut reader, 64 * 1024).read_until(b'\n', &mut line) {
            Ok(len) if len > 0 && line.ends_with(b"\n") => {
                line.truncate(line.len() - 1);
                if line.ends_with(b"\r") {
                    line.pop();
                }
                line.truncate(1023);
                replies.push(line);
            }
            _ => return Err(Io::Partial(replies, false)),
        }
    }
    Ok(replies)
}

#[cfg(test)]
mod tests {
    use larder_dump::Value;
    use larder_engine::{Store, StoreConfig};
    use proptest::prelude::*;

    use super::{key_positions, op_read_value, op_write_value};

    /// A value in a canonical order (sets and hashes have none of their own).
    fn sorted(v: Value) -> Value {
        match v {
            Value::Set(mut m) => {
                m.sort();
                Value::Set(m)
            }
            Value::Hash(mut p) => {
                p.sort();
                Value::Hash(p)
            }
            Value::ZSet(mut p) => {
                p.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
                Value::ZSet(p)
            }
            v => v,
        }
    }

    fn value() -> impl Strategy<Value = Value> {
        // Short and long elements, integers among them, and counts on both sides of the
        // packed/tree thresholds (128 sorted-set members, 512 set and hash entries).
        let elem = prop_oneof![
            prop::collection::vec(any::<u8>(), 0..8),
            prop::collection::vec(any::<u8>(), 60..80),
            any::<i64>().prop_map(|v| v.to_string().into_bytes()),
        ];
        let n = prop_oneof![1usize..20, 100usize..700];
        let score = any::<f64>().prop_filter("no NaN", |s| !s.is_nan()).prop_map(|s| if s == 0.0 { 0.0 } else { s });
        prop_oneof![
            elem.clone().prop_map(Value::String),
            n.clone().prop_flat_map(move |n| prop::collection::vec(elem.clone(), n..=n)).prop_map(Value::List),
            n.clone()
                .prop_flat_map(|n| prop::collection::btree_set(
                    any::<u32>().prop_map(|v| v.to_string().into_bytes()),
                    n..=n
                ))
                .prop_map(|s| Value::Set(s.into_iter().collect())),
            n.clone()
                .prop_flat_map(|n| prop::collection::btree_map(
                    prop::collection::vec(any::<u8>(), 0..70),
                    prop::collection::vec(any::<u8>(), 0..70),
                    n..=n
                ))
                .prop_map(|m| Value::Hash(m.into_iter().collect())),
            n.prop_flat_map(move |n| prop::collection::btree_map(
                prop::collection::vec(any::<u8>(), 1..70),
                score.clone(),
                n..=n
            ))
            .prop_map(|m| Value::ZSet(m.into_iter().collect())),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(16))]
        /// What RESTORE writes, DUMP reads back the same, through the payload too.
        #[test]
        fn written_values_read_back(v in value()) {
            let store = Store::open(StoreConfig::small_for_tests()).unwrap();
            let mut h = store.handle().unwrap();
            prop_assert!(op_write_value(&mut h, 0, b"k", &v, 0, false).unwrap());
            let back = op_read_value(&h, 0, b"k").unwrap().unwrap();
            let again = larder_dump::decode(&larder_dump::encode(&back)).unwrap();
            prop_assert_eq!(sorted(back), sorted(v.clone()));
            prop_assert_eq!(sorted(again), sorted(v));
        }
    }

    /// A key another client wrote between RESTORE's check and its write is not merged
    /// into: left alone (busy) without REPLACE, replaced whole with it.
    #[test]
    fn a_key_written_meanwhile_is_busy_or_replaced() {
        let store = Store::open(StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        let list = Value::List(vec![b"x".to_vec()]);
        let string = Value::String(b"s".to_vec());
        h.coll_write(0, b"k", larder_engine::Kind::List, true, |c| c.insert_at(0, b"theirs")).unwrap();
        assert!(!op_write_value(&mut h, 0, b"k", &list, 0, false).unwrap());
        assert!(!op_write_value(&mut h, 0, b"k", &string, 0, false).unwrap());
        assert_eq!(op_read_value(&h, 0, b"k").unwrap(), Some(Value::List(vec![b"theirs".to_vec()])));
        assert!(op_write_value(&mut h, 0, b"k", &list, 0, true).unwrap());
        assert_eq!(op_read_value(&h, 0, b"k").unwrap(), Some(list.clone()));
        // Another type under the key.
        let set = Value::Set(vec![b"m".to_vec()]);
        assert!(!op_write_value(&mut h, 0, b"k", &set, 0, false).unwrap());
        assert!(op_write_value(&mut h, 0, b"k", &set, 0, true).unwrap());
        assert_eq!(op_read_value(&h, 0, b"k").unwrap(), Some(set));
        assert!(op_write_value(&mut h, 0, b"k", &string, 0, true).unwrap());
        assert_eq!(op_read_value(&h, 0, b"k").unwrap(), Some(string));
    }

    fn keys<'a>(args: &[&'a str]) -> Vec<&'a str> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        key_positions(&raw).into_iter().map(|i| args[i]).collect()
    }

    /// Each case checked with COMMAND GETKEYS against redis-server 7.0.15.
    #[test]
    fn migrate_keys_are_found_as_redis_finds_them() {
        assert_eq!(keys(&["migrate", "h", "1", "k", "0", "5"]), ["k"]);
        assert_eq!(keys(&["migrate", "h", "1", "", "0", "5", "copy", "keys", "a", "b"]), ["a", "b"]);
        // AUTH's password is not the KEYS keyword.
        assert_eq!(keys(&["migrate", "h", "1", "", "0", "5", "auth", "keys", "keys", "a"]), ["a"]);
        assert_eq!(keys(&["migrate", "h", "1", "", "0", "5", "auth2", "u", "keys", "keys", "a"]), ["a"]);
    }
}
