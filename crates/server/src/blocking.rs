//! Blocking commands (BLPOP & co.): parking a client until a key it waits on gets an
//! element, serving blocked clients in the order they blocked, and their timeouts.
//!
//! ```text
//!   handler ── serve_or_block: `serve` on each key ── served: reply
//!                 └─ nothing: ConnState.park = Park { keys, deadline, serve, args }
//!   worker ── enter(): the Registry takes the Park: (db, key) → FIFO of client ids,
//!             the engine is told a client blocks (store.add_blockers); one retry
//!
//!   who serves (any worker, under the registry lock): serve_ready(keys) — while a key's
//!   queue has a head, call the head's `serve` with its original arguments; served: its
//!   reply bytes wait in the registry, it leaves every queue, its worker is woken
//!      ├─ after every write command (`command::call`), for the command's keys (so, as
//!      │  in Redis, the blocked client is served before the pusher gets its reply)
//!      └─ the watcher thread: sleeps on the engine's push sequence (a futex word bumped by
//!         pushes of any thread or of a local process on the --shm segment while clients
//!         are blocked) and wakes the workers holding parked clients; they retry their
//!         clients' keys
//!   owner worker (woken) ── take the reply bytes, send, run the rest of the pipeline;
//!                           deadlines: poll timeout = the nearest one, then null
//! ```
//!
//! When no client is blocked the cost is one atomic load per write command here and one
//! per push in the engine (it skips the futex wake).
//!
//! Fairness: only the head of a key's queue is served from it, whichever worker holds it,
//! so the longest waiter is served first. A served BLMOVE pushed onto its destination: that
//! key is served next, in the same pass (a chain of BLMOVEs completes at once).
//!
//! The per-command part is a [`ServeFn`]: "serve this client from this key, or say there is
//! nothing". Lists have theirs in `families/list.rs`, sorted sets (BZPOPMIN BZPOPMAX BZMPOP)
//! theirs in `families/zset.rs`.
//!
//! Non-blocking mode: with `ConnState::in_exec` set (EXEC running queued commands, Redis's
//! CLIENT_DENY_BLOCKING), [`serve_or_block`] replies null at once instead of parking.
//!
//! Transactions: serving runs under the worker's exec gate (in a batch, or taken for the
//! watcher's retry), so an EXEC on another worker is never observed half done; EXEC serves
//! the keys it wrote, in the order it wrote them, before it releases the other workers. A
//! push by a local process is served when the watcher sees it, between any two commands. A
//! push whose announcement was lost (its process killed between publishing the element and
//! bumping the sequence) is served by the watcher's sweep, which has parked clients retried
//! once the dead process has been reaped (the server reaps once a second).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use larder_engine::Handle;
use larder_resp::{Args, Protocol, Writer};

use crate::command::{reply_error, Argv, CmdError, ConnState, Ctx, Spec, MOVABLEKEYS, WRITE};
use crate::{ClientInfo, Shared};

/// Serves a client from `key`: writes its reply and returns true, or returns false if there
/// is nothing to take. `retry` is false on the command's own first attempt (errors go to the
/// client) and true when a parked client is served (a key of another type then just means
/// "not yet", as Redis only serves keys of the type a client waits for).
pub type ServeFn = fn(&mut Ctx<'_>, &[u8], bool) -> Result<bool, CmdError>;

/// The reply of a blocking command that cannot block (inside EXEC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NullReply {
    /// `*-1` / `_` (BLPOP, BLMPOP; also every timeout).
    Array,
    /// `$-1` / `_` (BLMOVE, BRPOPLPUSH).
    Bulk,
}

/// What a parked client gets when its time is up, or when CLIENT UNBLOCK ends its wait
/// without an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnTimeout {
    /// A null array (every blocking pop).
    Null,
    /// `:0`: WAIT's count of replicas that acknowledged (Larder has none).
    Zero,
}

/// A parked client: what it waits for and how to serve it.
pub struct Park {
    pub db: u32,
    /// Distinct keys, in the order given.
    pub keys: Vec<Vec<u8>>,
    /// Where serving it pushes (BLMOVE's destination): served next.
    pub dst: Option<Vec<u8>>,
    /// None: forever.
    pub deadline: Option<Instant>,
    pub serve: ServeFn,
    pub on_timeout: OnTimeout,
    /// The request's bytes and parsed arguments, so `serve` sees the same arguments later
    /// (set by the worker when it parks the client).
    req: Vec<u8>,
    args: Args,
    /// When the command's first run started (its `ConnState::clock`, in nanoseconds), and how long that run
    /// took (set when the worker parks the client): its latency sample and slow log entry
    /// are taken when it is served, with that time and the serving's.
    start: u64,
    first_usec: u64,
}

impl std::fmt::Debug for Park {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Park")
            .field("db", &self.db)
            .field("keys", &self.keys)
            .field("deadline", &self.deadline)
            .finish()
    }
}

/// Tries `serve` on the keys `ctx.arg(first..last)` in order; if none serves, parks the
/// client (or, in non-blocking mode, replies null). `dst`: the argument a served client
/// pushes onto (BLMOVE). Errors of this first attempt (a key of another type) are the
/// command's reply.
pub fn serve_or_block(
    ctx: &mut Ctx<'_>,
    first: usize,
    last: usize,
    dst: Option<usize>,
    timeout: Option<Duration>,
    serve: ServeFn,
    null: NullReply,
) -> Result<(), CmdError> {
    for i in first..last {
        if serve(ctx, ctx.argv.get(i), false)? {
            return Ok(());
        }
    }
    if ctx.conn.in_exec {
        match null {
            NullReply::Array => ctx.out.null_array(),
            NullReply::Bulk => ctx.out.null(),
        };
        return Ok(());
    }
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(last - first);
    for i in first..last {
        let k = ctx.arg(i);
        if !keys.iter().any(|x| x == k) {
            keys.push(k.to_vec());
        }
    }
    // A deadline past what Instant can hold is as good as forever.
    let deadline = timeout.and_then(|d| Instant::now().checked_add(d));
    let dst = dst.map(|i| ctx.arg(i).to_vec());
    ctx.conn.park = Some(Box::new(Park {
        db: ctx.conn.db,
        keys,
        dst,
        deadline,
        serve,
        on_timeout: OnTimeout::Null,
        req: Vec::new(),
        args: Args::new(),
        start: ctx.conn.clock,
        first_usec: 0,
    }));
    Ok(())
}

struct Waiter {
    park: Box<Park>,
    worker: usize,
    info: Arc<ClientInfo>,
    proto: Protocol,
    /// Set once served (by any worker): the reply its own worker is to send.
    reply: Option<Vec<u8>>,
}

#[derive(Default)]
struct Inner {
    /// (db, key) → ids of the clients waiting on it, longest waiting first.
    queues: HashMap<(u32, Vec<u8>), VecDeque<u64>>,
    waiters: HashMap<u64, Waiter>,
}

/// Who waits on which key, across all workers.
pub struct Registry {
    inner: Mutex<Inner>,
    /// Clients queued per worker: the watcher wakes only workers that have some.
    per_worker: Vec<AtomicU64>,
}

impl Registry {
    pub fn new(workers: usize) -> Registry {
        Registry { inner: Mutex::new(Inner::default()), per_worker: (0..workers).map(|_| AtomicU64::new(0)).collect() }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Clients blocked with a timeout (INFO `clients_in_timeout_table`).
    pub fn with_timeout(&self) -> usize {
        self.lock().waiters.values().filter(|w| w.reply.is_none() && w.park.deadline.is_some()).count()
    }

    /// Clients waiting on `key` of `db`.
    pub fn waiters(&self, db: u32, key: &[u8]) -> usize {
        self.lock().queues.get(&(db, key.to_vec())).map_or(0, |q| q.len())
    }

    /// CLIENT UNBLOCK (run on `worker`): ends client `id`'s wait with a timeout's null, or
    /// with `-UNBLOCKED` if `error`. False if it is not blocked. As Redis 7.0.15 counts it,
    /// the blocked command has failed either way (commandstats' `failed_calls`), and the
    /// error is an error reply (errorstats, `total_error_replies`).
    pub fn unblock(&self, shared: &Shared, worker: usize, id: u64, error: bool) -> bool {
        let mut g = self.lock();
        let Some(w) = g.waiters.get(&id) else { return false };
        if w.reply.is_some() {
            return false;
        }
        let mut out = Vec::new();
        if error {
            shared.stats.worker(worker).count_error(b"UNBLOCKED");
            Writer::new(&mut out, w.proto).error(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK");
        } else {
            timeout_reply(&mut out, w);
        }
        // Redis's `updateStatsOnUnblock(target, 0, 0, 1)`: failed whichever the reply, and
        // logged after the client's arguments were freed, so with none.
        stats_on_unblock(shared, worker, w, 0, true, false);
        let worker = w.worker;
        unqueue(shared, &mut g, id);
        if let Some(w) = g.waiters.get_mut(&id) {
            w.reply = Some(out);
        }
        drop(g);
        wake(shared, worker);
        true
    }
}

/// A blocked client is served (in `serve_usec`) or unblocked by CLIENT UNBLOCK (0): Redis's
/// `updateStatsOnUnblock`, in the stats of `worker` (the one serving). Its command's whole
/// duration, its first run and `serve_usec`, is added to commandstats' time (which counted
/// the first run when it blocked already: Redis counts it twice), its latency histogram
/// (which did not count the first run) and the slow log; `failed` counts a failed call;
/// `serve_usec` is a "command-unblocking" latency event. A timeout counts none of these.
/// `with_args` false logs the slow log entry with no arguments.
fn stats_on_unblock(shared: &Shared, worker: usize, w: &Waiter, serve_usec: u64, failed: bool, with_args: bool) {
    let usec = w.park.first_usec + serve_usec;
    let cfg = &shared.config;
    if let Some(c) = shared.stats.worker(worker).cmd.get(w.info.last_cmd.load(Ordering::Relaxed) as usize) {
        c.usec.add(usec);
        if failed {
            c.failed.incr();
        }
        if cfg.latency_tracking.load(Ordering::Relaxed) {
            c.record(usec);
        }
    }
    let threshold_ms = cfg.latency_monitor_threshold.load(Ordering::Relaxed);
    if threshold_ms > 0 && serve_usec / 1000 >= threshold_ms {
        shared.latency.lock().unwrap_or_else(|e| e.into_inner()).add("command-unblocking", serve_usec / 1000);
    }
    if usec >= cfg.slowlog_log_slower_than.load(Ordering::Relaxed) {
        // Blocking commands have no arguments to redact: no command name needed.
        let none = Args::new();
        let argv =
            if with_args { Argv { args: &w.park.args, buf: &w.park.req } } else { Argv { args: &none, buf: &[] } };
        crate::command::slowlog_add(shared, "", &argv, &w.info, usec);
    }
}

fn wake(shared: &Shared, worker: usize) {
    if let Some(w) = shared.wakers.get().and_then(|w| w.get(worker)) {
        let _ = w.wake();
    }
}

/// Takes client `id` out of its queues (served, timed out, gone): it no longer counts as
/// blocked. Its entry stays until its worker collects the reply (or it is dropped).
fn unqueue(shared: &Shared, g: &mut Inner, id: u64) {
    let Some(w) = g.waiters.get(&id) else { return };
    if w.reply.is_some() {
        return;
    }
    let db = w.park.db;
    let keys: Vec<Vec<u8>> = w.park.keys.clone();
    let (worker, info) = (w.worker, w.info.clone());
    for k in keys {
        let qk = (db, k);
        if let Some(q) = g.queues.get_mut(&qk) {
            q.retain(|&x| x != id);
            if q.is_empty() {
                g.queues.remove(&qk);
            }
        }
    }
    shared.blocking.per_worker[worker].fetch_sub(1, Ordering::SeqCst);
    shared.blocked_clients.fetch_sub(1, Ordering::Relaxed);
    info.blocked.store(false, Ordering::Relaxed);
    info.argv_mem.store(0, Ordering::Relaxed);
    shared.store.add_blockers(-1);
}

/// The worker parked the client whose command just ran: the registry takes its Park, then
/// its keys are tried once more (a push that landed between the command's attempt and
/// the declaration to the engine bumped no sequence). Returns the reply if that served it,
/// else the deadline to watch.
pub(crate) fn enter(
    h: &mut Handle,
    shared: &Shared,
    worker: usize,
    st: &mut ConnState,
    req: &[u8],
    args: &Args,
) -> Result<Vec<u8>, Option<Instant>> {
    let Some(mut p) = st.park.take() else { return Ok(Vec::new()) };
    p.req = req.to_vec();
    p.args = args.clone();
    // The first run, as `command::run` timed it (its end is the clock now). Counted in the
    // latency histogram when the client is served: the sample `run` counted is taken back
    // here rather than the hot path asking every command whether it blocked.
    p.first_usec = st.clock.saturating_sub(p.start) / 1000;
    if shared.config.latency_tracking.load(Ordering::Relaxed) {
        if let Some(c) = shared.stats.worker(worker).cmd.get(st.info.last_cmd.load(Ordering::Relaxed) as usize) {
            c.take_back(p.first_usec);
        }
    }
    // A blocked client keeps its arguments (CLIENT LIST `argv-mem`), as in Redis.
    let argv = crate::command::Argv { args, buf: req };
    st.info.argv_mem.store(argv.iter().map(|a| a.len() as u64).sum(), Ordering::Relaxed);
    let (db, keys, deadline) = (p.db, p.keys.clone(), p.deadline);
    {
        let mut g = shared.blocking.lock();
        for k in &keys {
            g.queues.entry((db, k.clone())).or_default().push_back(st.id);
        }
        g.waiters.insert(st.id, Waiter { park: p, worker, info: st.info.clone(), proto: st.proto, reply: None });
    }
    shared.blocking.per_worker[worker].fetch_add(1, Ordering::SeqCst);
    shared.blocked_clients.fetch_add(1, Ordering::Relaxed);
    st.info.blocked.store(true, Ordering::Relaxed);
    // SeqCst in the engine: either a pusher sees this and bumps the sequence, or the retry
    // below sees the pushed element.
    shared.store.add_blockers(1);
    serve_ready(h, shared, worker, db, keys.iter().map(|k| k.as_slice()));
    match take_reply(shared, st.id) {
        Some(r) => Ok(r),
        None => Err(deadline),
    }
}

/// Serves the clients waiting on `keys` of `db` that can be served now, longest waiting
/// first, and the destinations of served moves after them. Call it after writing keys
/// (EXEC: once the queued commands have run, with the keys they wrote).
pub fn serve_ready<'k>(h: &mut Handle, shared: &Shared, worker: usize, db: u32, keys: impl Iterator<Item = &'k [u8]>) {
    let mut g = shared.blocking.lock();
    let mut todo: VecDeque<Vec<u8>> =
        keys.filter(|k| g.queues.contains_key(&(db, k.to_vec()))).map(|k| k.to_vec()).collect();
    while let Some(key) = todo.pop_front() {
        while let Some(&id) = g.queues.get(&(db, key.clone())).and_then(|q| q.front()) {
            let Some(w) = g.waiters.get(&id) else { break };
            let mut out = Vec::new();
            let served = {
                let mut st = ConnState::new(id, 0, w.info.clone(), shared.acl.default.clone());
                st.db = db;
                st.proto = w.proto;
                // Serving never parks anyone again.
                st.in_exec = true;
                let mut ctx = Ctx {
                    argv: Argv { args: &w.park.args, buf: &w.park.req },
                    out: Writer::new(&mut out, w.proto),
                    h: &mut *h,
                    conn: &mut st,
                    shared,
                    worker,
                };
                let start = Instant::now();
                let (served, failed) = match (w.park.serve)(&mut ctx, &key, true) {
                    Ok(served) => (served, false),
                    Err(e) => {
                        ctx.out.buf().clear();
                        reply_error(&mut ctx, &e, None);
                        (true, true)
                    }
                };
                // What serving changed is invalidated as changed by the served client, whose
                // own invalidations follow its reply (Redis runs it as the current client).
                if ctx.h.has_modified() {
                    crate::tracking::after_command(&mut ctx);
                }
                crate::tracking::pending_into(shared, ctx.conn, ctx.out.buf());
                if served {
                    stats_on_unblock(shared, worker, w, start.elapsed().as_micros() as u64, failed, true);
                }
                served
            };
            if !served {
                break;
            }
            let owner = w.worker;
            if let Some(d) = w.park.dst.clone() {
                todo.push_back(d);
            }
            unqueue(shared, &mut g, id);
            if let Some(w) = g.waiters.get_mut(&id) {
                w.reply = Some(out);
            }
            wake(shared, owner);
        }
    }
}

/// After a command ran (`call`), while clients are blocked: serve the clients waiting on
/// the keys it wrote, so they are served before the writer's reply goes out (as Redis's
/// `handleClientsBlockedOnKeys`). Inside EXEC the keys are noted instead, and EXEC serves
/// them in the order they were written while it still holds every worker's gate (so no
/// other command, and no sweep's retry, runs first). Commands that move keys between databases
/// or have no key positions (SWAPDB, MOVE, FLUSHALL) try every waited-on key.
pub(crate) fn after_call(ctx: &mut Ctx<'_>, spec: &Spec) {
    if ctx.conn.park.is_some() {
        return;
    }
    // EXEC is not a write command: it serves the keys its commands wrote itself, before it
    // lets the other workers go.
    if spec.flags & WRITE == 0 {
        return;
    }
    let keys = written_keys(ctx, spec).unwrap_or_else(|| ctx.shared.blocking.lock().queues.keys().cloned().collect());
    if ctx.conn.in_exec {
        ctx.conn.ready.extend(keys);
        return;
    }
    for (db, k) in keys {
        serve_ready(ctx.h, ctx.shared, ctx.worker, db, std::iter::once(k.as_slice()));
    }
}

/// The keys write command `spec` (just run in `ctx`) may have written, in the current
/// database; None for a command that has no key positions or writes another database
/// (SWAPDB, MOVE, FLUSHALL, COPY ... DB n): every key may have changed.
pub(crate) fn written_keys(ctx: &Ctx<'_>, spec: &Spec) -> Option<Vec<(u32, Vec<u8>)>> {
    let db = ctx.conn.db;
    if spec.first_key <= 0 && spec.flags & MOVABLEKEYS == 0 || matches!(spec.name, "move" | "copy" | "swapdb") {
        return None;
    }
    let movable = (spec.flags & MOVABLEKEYS != 0).then(|| {
        // The keys depend on the arguments (SORT ... STORE dst, LMPOP numkeys ...).
        let args: Vec<&[u8]> = (0..ctx.argc()).map(|i| ctx.arg(i)).collect();
        crate::families::movable_keys(spec.name, &args)
    });
    Some(if let Some(pos) = movable.flatten() {
        pos.into_iter().filter(|&i| i < ctx.argc()).map(|i| (db, ctx.arg(i).to_vec())).collect()
    } else if spec.first_key > 0 {
        let argc = ctx.argc() as i32;
        let last = if spec.last_key < 0 { argc + spec.last_key } else { spec.last_key.min(argc - 1) };
        let step = spec.step.max(1) as usize;
        (spec.first_key..=last).step_by(step).map(|i| (db, ctx.arg(i as usize).to_vec())).collect()
    } else {
        Vec::new()
    })
}

/// The reply of client `id`, if it has been served (it then leaves the registry).
pub(crate) fn take_reply(shared: &Shared, id: u64) -> Option<Vec<u8>> {
    let mut g = shared.blocking.lock();
    g.waiters.get(&id)?.reply.as_ref()?;
    g.waiters.remove(&id).and_then(|w| w.reply)
}

/// The watcher woke this worker: try the keys its parked clients wait on (pushes by local
/// processes, and anything the write-command path did not see).
pub(crate) fn retry(h: &mut Handle, shared: &Shared, worker: usize, ids: &[u64]) {
    let keys: Vec<(u32, Vec<Vec<u8>>)> = {
        let g = shared.blocking.lock();
        ids.iter()
            .filter_map(|id| g.waiters.get(id))
            .filter(|w| w.reply.is_none())
            .map(|w| (w.park.db, w.park.keys.clone()))
            .collect()
    };
    for (db, ks) in keys {
        serve_ready(h, shared, worker, db, ks.iter().map(|k| k.as_slice()));
    }
}

/// Client `id` at `now`: its reply if it was served, a null array (`*-1`, RESP3 `_`, as
/// Redis replies to every timed-out blocking command) if its deadline has passed, else None.
pub(crate) fn expire(shared: &Shared, id: u64, now: Instant) -> Option<Vec<u8>> {
    let mut g = shared.blocking.lock();
    let w = g.waiters.get(&id)?;
    if w.reply.is_none() {
        match w.park.deadline {
            Some(d) if d <= now => {}
            _ => return None,
        }
        let mut out = Vec::new();
        timeout_reply(&mut out, w);
        unqueue(shared, &mut g, id);
        g.waiters.remove(&id);
        return Some(out);
    }
    g.waiters.remove(&id).and_then(|w| w.reply)
}

fn timeout_reply(out: &mut Vec<u8>, w: &Waiter) {
    let mut wr = Writer::new(out, w.proto);
    match w.park.on_timeout {
        OnTimeout::Null => wr.null_array(),
        OnTimeout::Zero => wr.integer(0),
    };
}

/// Parks the client with no key to wait on, until its deadline (None: forever) or CLIENT
/// UNBLOCK, which both answer `on_timeout` (WAIT with replicas to wait for, of which Larder
/// has none).
pub fn block_until(ctx: &mut Ctx<'_>, timeout: Option<Duration>, on_timeout: OnTimeout) {
    fn nothing(_: &mut Ctx<'_>, _: &[u8], _: bool) -> Result<bool, CmdError> {
        Ok(false)
    }
    let deadline = timeout.and_then(|d| Instant::now().checked_add(d));
    ctx.conn.park = Some(Box::new(Park {
        db: ctx.conn.db,
        keys: Vec::new(),
        dst: None,
        deadline,
        serve: nothing,
        on_timeout,
        req: Vec::new(),
        args: Args::new(),
        start: ctx.conn.clock,
        first_usec: 0,
    }));
}

/// The client is gone (disconnected, killed): out of the registry.
pub(crate) fn leave(shared: &Shared, id: u64) {
    let mut g = shared.blocking.lock();
    unqueue(shared, &mut g, id);
    g.waiters.remove(&id);
}

/// A starting point for [`watch`]: the engine's push sequence and this process's share of it.
pub(crate) struct Pushes {
    seq: u32,
    local: u32,
}

impl Pushes {
    /// The counts now, once no push of this process is half counted.
    pub(crate) fn now(store: &larder_engine::Store) -> Pushes {
        loop {
            if let Some((seq, local)) = store.pushes() {
                return Pushes { seq, local };
            }
            std::thread::yield_now();
        }
    }
}

/// [`crate::Mailbox::retry_parked`]'s bits: another process pushed (retried under the
/// worker's own gate, at once); a dead participant was reaped, which may have been a
/// process killed between its push and the push's announcement (retried under every
/// worker's gate, as EXEC runs: a push by another worker of this server may be between its
/// engine write and its command's end, and serving ahead of it would publish its waiters'
/// events, or serve them across keys, out of Redis's order; reaps are rare).
pub(crate) const RETRY_FOREIGN: u32 = 1;
pub(crate) const RETRY_SWEEP: u32 = 2;

/// The watcher thread: sleeps on the engine's push sequence (woken by a push from any
/// thread or attached process while clients are blocked) and wakes the workers that hold
/// parked clients. Checks for shutdown every 100 ms.
pub(crate) fn watch(shared: Arc<Shared>, from: Pushes) {
    let store = &shared.store;
    // `seen` carries over: a push that lands while the workers are being woken moves the
    // sequence past it, and the next wait returns at once.
    // Pushes made through this server serve their waiters themselves (the hook after every
    // write, in write order, and after EXEC in the order of its writes); retrying parked
    // clients here for those too would race with that order. So workers are woken only when
    // the sequence moved further than this process's own pushes: another process pushed.
    //
    // A wake-up can still be lost: a local process killed between publishing its push and
    // bumping the sequence leaves an element under a waited-on key and nobody told. Such a
    // process is reaped (by the server's background thread within a second, or by anyone
    // who meets it first), so after every reap the workers holding parked clients retry
    // their keys (a lookup per waited key): the sweep.
    let (mut seen, mut local) = (from.seq, from.local);
    let arena = store.arena();
    let mut reaps = arena.reaps();
    while !shared.shutdown.load(Ordering::Relaxed) {
        store.wait_push(seen, Duration::from_millis(100));
        // A push of ours between its two counts would read as another process's, and
        // serving for it here could run ahead of the pushing command's own events and
        // serving: wait until it is counted (a few instructions, unless its thread was
        // preempted there).
        let (now, local_now) = loop {
            if let Some(counts) = store.pushes() {
                break counts;
            }
            std::thread::yield_now();
        };
        let foreign = now.wrapping_sub(seen) != local_now.wrapping_sub(local);
        (seen, local) = (now, local_now);
        let reaped = arena.reaps();
        let sweep = reaped != reaps;
        reaps = reaped;
        if !foreign && !sweep {
            continue;
        }
        let why = if sweep { RETRY_SWEEP } else { RETRY_FOREIGN };
        for (w, n) in shared.blocking.per_worker.iter().enumerate() {
            if n.load(Ordering::SeqCst) > 0 {
                if let Some(m) = shared.mailboxes.get(w) {
                    m.retry_parked.fetch_or(why, Ordering::Release);
                }
                wake(&shared, w);
            }
        }
    }
}
