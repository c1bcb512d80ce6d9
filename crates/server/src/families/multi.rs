//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH, as Redis 7.0.
//!
//! - MULTI opens a queue in the connection's state; the dispatcher queues every later
//!   command but EXEC, DISCARD, MULTI, WATCH, QUIT and RESET (answering `+QUEUED`), after
//!   the checks Redis makes at queue time. A command rejected then (unknown, wrong arity,
//!   `no-multi`) marks the transaction, and EXEC answers `-EXECABORT`.
//! - WATCH records each key's item version (the memcached CAS value, which every write
//!   changes) or its absence; an expired key counts as absent. EXEC compares them again and
//!   answers a null array if any differs. Versions make WATCH work across databases and
//!   worker threads with no bookkeeping in the write path, and they give FLUSHDB, FLUSHALL
//!   and SWAPDB Redis's results: a watched key that existed is gone (or replaced by another
//!   item) afterwards, while a key absent or stale before and after counts as untouched.
//! - A key absent at WATCH and absent again at EXEC has no version to compare, though it
//!   may have existed in between (SET then DEL, or SET with a short expiry), which makes
//!   Redis's EXEC fail. So such keys are also listed in [`AbsentWatches`], and a write
//!   command that leaves one of them existing marks its watchers (one relaxed load per
//!   write command while nobody watches an absent key). Local processes' writes are not
//!   seen there (EXEC is not atomic against them anyway: see the README).
//! - EXEC runs the queued commands while holding every worker's exec gate
//!   ([`crate::gate`]), so no command of another client, on any worker, runs in between.
//!   Each queued command is counted in commandstats and may enter the slow log on its own,
//!   as in Redis; EXEC itself is `skip_slowlog`.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use larder_resp::{Args, Limits, Writer};

use crate::command::{
    Argv, CmdError, Ctx, Handler, ReplyMode, Spec, ALLOW_BUSY, FAST, LOADING, NOSCRIPT, SKIP_SLOWLOG, STALE,
};
use crate::gate::Exclusive;

const fn spec(name: &'static str, arity: i32, flags: u32, summary: &'static str, handler: Handler) -> Spec {
    Spec { name, arity, flags, first_key: 0, last_key: 0, step: 0, group: "transactions", summary, handler }
}

const TX: u32 = NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY;

pub const COMMANDS: &[Spec] = &[
    spec("multi", 1, TX, "Starts a transaction.", cmd_multi),
    spec("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG, "Executes all commands in a transaction.", cmd_exec),
    spec("discard", 1, TX, "Discards a transaction.", cmd_discard),
    Spec {
        name: "watch",
        arity: -2,
        flags: TX,
        first_key: 1,
        last_key: -1,
        step: 1,
        group: "transactions",
        summary: "Monitors changes to keys to determine the execution of a transaction.",
        handler: cmd_watch,
    },
    spec("unwatch", 1, TX, "Forgets about watched keys of a transaction.", cmd_unwatch),
];

/// The commands a transaction queued, each re-encoded as a RESP request (so the queue is
/// one buffer, parsed again at EXEC) with its command-table index.
#[derive(Debug, Default)]
pub struct Queue {
    buf: Vec<u8>,
    cmds: Vec<u32>,
    /// A command was rejected while queueing: EXEC must abort.
    pub dirty: bool,
    /// The flags of the queued commands, together (CLIENT PAUSE WRITE holds an EXEC that
    /// would write, as Redis's `mstate.cmd_flags`).
    pub flags: u32,
}

/// One watched key: its database, name and the version it had (None: absent or expired).
#[derive(Debug)]
pub struct Watched {
    db: u32,
    key: Vec<u8>,
    version: Option<u64>,
}

/// The keys clients watch while they are absent, and the clients whose EXEC must fail
/// because one of them came to exist (see the module notes).
#[derive(Default)]
pub struct AbsentWatches {
    /// Registrations (client, key) in `inner`: zero lets writes skip the lock.
    n: AtomicU64,
    inner: Mutex<AbsentInner>,
}

#[derive(Default)]
struct AbsentInner {
    /// (db, key) → the clients watching it.
    keys: HashMap<(u32, Vec<u8>), Vec<u64>>,
    /// Clients one of whose absent watched keys was created.
    dirty: HashSet<u64>,
}

impl AbsentWatches {
    fn lock(&self) -> std::sync::MutexGuard<'_, AbsentInner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether any client watches an absent key (one relaxed load).
    #[inline]
    pub fn any(&self) -> bool {
        self.n.load(Ordering::Relaxed) > 0
    }

    fn add(&self, id: u64, db: u32, key: &[u8]) {
        let mut g = self.lock();
        g.keys.entry((db, key.to_vec())).or_default().push(id);
        self.n.fetch_add(1, Ordering::Relaxed);
    }

    /// Drops client `id`'s registrations for its watched keys `watched`; returns whether
    /// one of them was created meanwhile.
    fn forget(&self, id: u64, watched: &[Watched]) -> bool {
        if !watched.iter().any(|w| w.version.is_none()) {
            return false;
        }
        let mut g = self.lock();
        for w in watched.iter().filter(|w| w.version.is_none()) {
            let k = (w.db, w.key.clone());
            if let Some(ids) = g.keys.get_mut(&k) {
                if let Some(i) = ids.iter().position(|&x| x == id) {
                    ids.swap_remove(i);
                    self.n.fetch_sub(1, Ordering::Relaxed);
                }
                if ids.is_empty() {
                    g.keys.remove(&k);
                }
            }
        }
        g.dirty.remove(&id)
    }
}

/// After write command `spec` ran, while some client watches an absent key: marks the
/// watchers of each such key the command may have written that exists now. A command
/// with no key positions, or one that writes another database (MOVE, COPY, SWAPDB),
/// checks every absent watched key.
pub(crate) fn touch_created(ctx: &mut Ctx<'_>, spec: &Spec) {
    let watches = &ctx.shared.watches;
    let candidates: Vec<(u32, Vec<u8>)> = match crate::blocking::written_keys(ctx, spec) {
        Some(keys) => {
            let g = watches.lock();
            keys.into_iter().filter(|k| g.keys.contains_key(k)).collect()
        }
        None => watches.lock().keys.keys().cloned().collect(),
    };
    for (db, key) in candidates {
        // Present, even if already expired (a SET ... PX 1 on a busy machine): the write
        // created it, as Redis's signalModifiedKey says at once.
        if !matches!(ctx.h.present(db, &key), Ok(true)) {
            continue;
        }
        let mut g = watches.lock();
        if let Some(ids) = g.keys.remove(&(db, key)) {
            watches.n.fetch_sub(ids.len() as u64, Ordering::Relaxed);
            g.dirty.extend(ids);
        }
    }
}

/// Whether command `name` runs at once inside MULTI instead of being queued.
pub fn runs_in_multi(name: &str) -> bool {
    matches!(name, "exec" | "discard" | "multi" | "watch" | "quit" | "reset")
}

/// Queues the request in `ctx` (table entry `i`) and answers `+QUEUED`. A queue already
/// doomed by an error keeps nothing, as Redis. A queue past the query-buffer limit closes
/// the connection, as an oversized query buffer does: queued commands are input the server
/// holds on the client's behalf.
pub fn queue(ctx: &mut Ctx<'_>, i: usize) {
    let limit = ctx.shared.config.client_query_buffer_limit.load(Ordering::Relaxed) as usize;
    let args: Vec<&[u8]> = ctx.argv.iter().collect();
    let flags = crate::families::scripting::command_flags(ctx, crate::command::table().specs[i]);
    let Some(q) = ctx.conn.multi.as_mut() else { return };
    if !q.dirty {
        let mem = args.iter().map(|a| a.len() + 8).sum::<usize>() as u64;
        ctx.conn.info.multi_mem.fetch_add(mem, Ordering::Relaxed);
        larder_resp::write_command(&mut q.buf, args);
        q.cmds.push(i as u32);
        q.flags |= flags;
    }
    let (n, size) = (q.cmds.len(), q.buf.len());
    ctx.conn.info.multi.store(n as i64, Ordering::Relaxed);
    if size > limit {
        tracing::warn!(client = ctx.conn.id, "closing client whose MULTI queue reached the query buffer limit");
        ctx.conn.close = true;
    }
    ctx.out.simple(b"QUEUED");
}

/// Marks an open transaction so that EXEC aborts (Redis's `flagTransaction`).
pub fn flag(conn: &mut crate::command::ConnState) {
    if let Some(q) = conn.multi.as_mut() {
        q.dirty = true;
    }
}

/// Leaves MULTI (if in it) and forgets the watched keys (DISCARD, RESET, aborted EXEC).
pub fn discard(shared: &crate::Shared, conn: &mut crate::command::ConnState) {
    conn.multi = None;
    unwatch_all(shared, conn);
    conn.info.multi.store(-1, Ordering::Relaxed);
    conn.info.multi_mem.store(0, Ordering::Relaxed);
}

/// Forgets the client's watched keys (UNWATCH, and a closing connection).
pub fn unwatch_all(shared: &crate::Shared, conn: &mut crate::command::ConnState) {
    shared.watches.forget(conn.id, &conn.watched);
    conn.watched.clear();
}

/// # Format
/// `MULTI` → `+OK`; `-ERR MULTI calls can not be nested` inside a transaction.
fn cmd_multi(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.conn.multi.is_some() {
        return Err(CmdError::new("ERR MULTI calls can not be nested"));
    }
    ctx.conn.multi = Some(Box::default());
    ctx.conn.info.multi.store(0, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `DISCARD` → `+OK` (the queue and the watched keys are dropped).
fn cmd_discard(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.conn.multi.is_none() {
        return Err(CmdError::new("ERR DISCARD without MULTI"));
    }
    discard(ctx.shared, ctx.conn);
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `WATCH key [key ...]` → `+OK`.
fn cmd_watch(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.conn.multi.is_some() {
        return Err(CmdError::new("ERR WATCH inside MULTI is not allowed"));
    }
    let db = ctx.conn.db;
    for j in 1..ctx.argc() {
        let key = ctx.arg(j);
        // A key already watched in this database keeps the version it was first seen with.
        if ctx.conn.watched.iter().any(|w| w.db == db && w.key == key) {
            continue;
        }
        let version = ctx.h.meta(db, key)?.map(|m| m.version);
        if version.is_none() {
            ctx.shared.watches.add(ctx.conn.id, db, key);
        }
        ctx.conn.watched.push(Watched { db, key: key.to_vec(), version });
    }
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `UNWATCH` → `+OK`.
fn cmd_unwatch(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    unwatch_all(ctx.shared, ctx.conn);
    ctx.out.ok();
    Ok(())
}

/// Whether a watched key changed since WATCH (an engine error counts as a change).
fn touched(ctx: &Ctx<'_>, watched: &[Watched]) -> bool {
    watched.iter().any(|w| match ctx.h.meta(w.db, &w.key) {
        Ok(m) => m.map(|m| m.version) != w.version,
        Err(_) => true,
    })
}

/// # Format
/// `EXEC` → an array with the reply of each queued command (errors included, the other
/// commands still run); a null array if a watched key changed; `-EXECABORT Transaction
/// discarded because of previous errors.` if a command was rejected while queueing.
fn cmd_exec(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let Some(q) = ctx.conn.multi.take() else {
        return Err(CmdError::new("ERR EXEC without MULTI"));
    };
    let watched = std::mem::take(&mut ctx.conn.watched);
    discard(ctx.shared, ctx.conn);
    // CLIENT LIST shows the client in MULTI (flag `x`) while its EXEC runs, as Redis does.
    ctx.conn.info.multi.store(q.cmds.len() as i64, Ordering::Relaxed);
    if q.dirty {
        ctx.conn.info.multi.store(-1, Ordering::Relaxed);
        return Err(CmdError::new("EXECABORT Transaction discarded because of previous errors."));
    }
    let started = ctx.conn.clock;
    let shared = ctx.shared;
    {
        // From here to the end of the block no other worker runs a command.
        let _all = Exclusive::enter(&shared.gates, &shared.exec_lock, ctx.worker);
        let created = shared.watches.forget(ctx.conn.id, &watched);
        if created || touched(ctx, &watched) {
            ctx.out.null_array();
        } else {
            run(ctx, &q);
        }
        // Clients blocked on the keys the transaction wrote are served now, in the order the
        // keys were written, before any other worker runs a command (or its once-a-second
        // sweep retries its parked clients, which would try their keys in their own order).
        for (db, k) in std::mem::take(&mut ctx.conn.ready) {
            crate::blocking::serve_ready(ctx.h, shared, ctx.worker, db, std::iter::once(k.as_slice()));
        }
    }
    ctx.conn.info.multi.store(-1, Ordering::Relaxed);
    // EXEC's own time in commandstats covers the commands it ran.
    ctx.conn.clock = started;
    Ok(())
}

/// Runs the queued commands, each through the dispatcher's `call` (stats, slow log).
fn run(ctx: &mut Ctx<'_>, q: &Queue) {
    // Blocking commands must not block inside EXEC (they answer as on timeout) and
    // SSUBSCRIBE is refused: families check `in_exec` (Redis's CLIENT_DENY_BLOCKING).
    ctx.conn.in_exec = true;
    let silent_before = ctx.conn.reply != ReplyMode::On;
    ctx.out.array(q.cmds.len());
    let limits = Limits { proto_max_bulk_len: u64::MAX, ..Limits::DEFAULT };
    let mut args = Args::new();
    let mut pos = 0;
    ctx.conn.clock = larder_engine::monotonic_ns();
    for &i in &q.cmds {
        let buf = &q.buf[pos.min(q.buf.len())..];
        match larder_resp::parse_command_into(buf, &limits, &mut args) {
            Ok(Some(n)) => {
                let proto = ctx.conn.proto;
                let mut inner = Ctx {
                    argv: Argv { args: &args, buf },
                    out: Writer::new(ctx.out.buf(), proto),
                    h: &mut *ctx.h,
                    conn: &mut *ctx.conn,
                    shared: ctx.shared,
                    worker: ctx.worker,
                };
                // ACLs are checked again: the rules may have changed since the command was
                // queued (Redis's `execCommand`).
                if !inner.conn.user.is_open() {
                    if let Err(d) = crate::families::acl::check(&mut inner, i as usize, crate::acl::Context::Multi) {
                        crate::command::reply_error(&mut inner, &CmdError::new(d.exec_error()), None);
                        pos += n;
                        continue;
                    }
                }
                let mark = inner.out.buf().len();
                let spec = crate::command::table().specs[i as usize];
                // A tracking client's reads remember their keys, as outside a transaction.
                if inner.conn.tracking != 0 {
                    crate::tracking::before_read(&mut inner, spec);
                }
                crate::command::call(&mut inner, i as usize);
                if inner.conn.tracking != 0 {
                    crate::tracking::after_read(&mut inner, spec);
                }
                // CLIENT REPLY OFF inside the transaction silences the replies after it,
                // as Redis decides per reply (the array header is already out).
                if inner.conn.reply == ReplyMode::Off && !inner.conn.pushed {
                    inner.out.buf().truncate(mark);
                }
                pos += n;
            }
            // The queue holds what `queue` encoded, so this does not happen; the reply
            // still gets one element per command.
            _ => {
                ctx.out.error(b"-ERR corrupt transaction queue");
                pos = q.buf.len();
            }
        }
    }
    // A HELLO inside the transaction changed the protocol of what follows.
    let proto = ctx.conn.proto;
    ctx.out.set_protocol(proto);
    ctx.conn.in_exec = false;
    // What went out before a CLIENT REPLY OFF inside stays out: the dispatcher must not
    // silence EXEC's reply as a whole.
    if !silent_before && ctx.conn.reply == ReplyMode::Off {
        ctx.conn.pushed = true;
    }
}
