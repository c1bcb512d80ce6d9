//! Blocking commands (BLPOP & co.): parking a client until a key it waits on gets an
//! element, serving blocked clients in the order they blocked, and their timeouts.
//!
//! ```text
//!   command handler ── serve_or_block: try `serve` on each key ── served: reply
//!                                         └─ nothing: ConnState.park = Park { keys, deadline, serve }
//!   worker ── enter(): the Registry queues (db, key) → FIFO of (client, worker);
//!             the engine is told a client blocks (store.add_blockers), then one retry
//!   any push (this server, or a local process on the --shm segment)
//!        └─ engine bumps the push sequence (a futex word) while blockers > 0
//!   watcher thread ── wait_push(seen) ── sequence moved ── wakes the workers that hold
//!                                                          parked clients (mio Waker)
//!   worker ── try_serve(): for each key where this client heads the queue, call `serve`
//!             again with the original arguments; served: reply, leave(), run the rest
//!             of its pipeline; else stay parked. Deadlines: poll timeout = nearest one.
//! ```
//!
//! One mechanism for every push: pushes through the server are engine pushes too. When no
//! client is blocked anywhere the engine skips the notification (one atomic load per push).
//!
//! Fairness: a client may only take from a key while it is the head of that key's queue, so
//! the longest waiter is served first whichever worker holds it. When a served client leaves
//! a queue, the worker holding the new head is woken (the element may not be the last).
//!
//! Unlike Redis, which serves blocked clients right after the command that pushed, a client
//! here is served asynchronously, a wake-up later: a command pipelined right behind the push
//! on the pushing connection (an LPOP) may take the element first.
//!
//! The per-command part is a [`ServeFn`]: "serve this client from this key, or say there is
//! nothing". Lists have theirs in `families/list.rs`; sorted sets (BZPOPMIN & co.) plug in
//! the same way.
//!
//! Non-blocking mode: when `ConnState::deny_blocking` is set (EXEC running queued commands,
//! as Redis's CLIENT_DENY_BLOCKING), [`serve_or_block`] answers with the null reply at once
//! instead of parking.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use larder_engine::Handle;
use larder_resp::{Args, Writer};

use crate::command::{reply_error, Argv, CmdError, ConnState, Ctx};
use crate::Shared;

/// Serves a client from `key`: writes its reply and returns true, or returns false if there
/// is nothing to take. `retry` is false on the command's own first attempt (errors go to the
/// client) and true when a parked client is retried (a key of another type then just means
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

/// A parked client: what it waits for and how to serve it.
pub struct Park {
    pub db: u32,
    /// Distinct keys, in the order given.
    pub keys: Vec<Vec<u8>>,
    /// None: forever.
    pub deadline: Option<Instant>,
    pub serve: ServeFn,
    /// The request's bytes and parsed arguments, so `serve` sees the same arguments on a
    /// retry (set by the worker when it parks the client).
    req: Vec<u8>,
    args: Args,
}

impl std::fmt::Debug for Park {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Park").field("db", &self.db).field("keys", &self.keys).field("deadline", &self.deadline).finish()
    }
}

/// Tries `serve` on the keys `ctx.arg(first..last)` in order; if none serves, parks the
/// client (or, in non-blocking mode, replies `null`). Errors of the first attempt (a key of
/// another type) are the command's reply.
pub fn serve_or_block(
    ctx: &mut Ctx<'_>,
    first: usize,
    last: usize,
    timeout: Option<Duration>,
    serve: ServeFn,
    null: NullReply,
) -> Result<(), CmdError> {
    for i in first..last {
        if serve(ctx, ctx.argv.get(i), false)? {
            return Ok(());
        }
    }
    if ctx.conn.deny_blocking {
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
    ctx.conn.park = Some(Box::new(Park { db: ctx.conn.db, keys, deadline, serve, req: Vec::new(), args: Args::new() }));
    Ok(())
}

/// (db, key) → the clients waiting on it, as (client id, worker), longest waiting first.
type Queues = HashMap<(u32, Vec<u8>), VecDeque<(u64, usize)>>;

/// Who waits on which key, across all workers.
pub struct Registry {
    queues: Mutex<Queues>,
    /// Parked clients per worker: the watcher wakes only workers that have some.
    per_worker: Vec<AtomicU64>,
}

impl Registry {
    pub fn new(workers: usize) -> Registry {
        Registry { queues: Mutex::new(HashMap::new()), per_worker: (0..workers).map(|_| AtomicU64::new(0)).collect() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Clients waiting on `key` of `db` (for tests and introspection).
    pub fn waiters(&self, db: u32, key: &[u8]) -> usize {
        self.lock().get(&(db, key.to_vec())).map_or(0, |q| q.len())
    }
}

/// The worker parked the client whose command just ran: queue it on its keys and declare it
/// to the engine. The caller then retries it once ([`try_serve`]): a push that landed
/// between the command's attempt and the declaration did not bump the sequence.
pub(crate) fn enter(shared: &Shared, worker: usize, st: &mut ConnState, req: &[u8], args: &Args) {
    let Some(p) = st.park.as_mut() else { return };
    p.req = req.to_vec();
    p.args = args.clone();
    {
        let mut q = shared.blocking.lock();
        for k in &p.keys {
            q.entry((p.db, k.clone())).or_default().push_back((st.id, worker));
        }
    }
    shared.blocking.per_worker[worker].fetch_add(1, Ordering::SeqCst);
    shared.blocked_clients.fetch_add(1, Ordering::Relaxed);
    st.info.blocked.store(true, Ordering::Relaxed);
    // SeqCst in the engine: either the pusher sees this and bumps the sequence, or the retry
    // that follows sees the pushed element.
    shared.store.add_blockers(1);
}

/// Unparks the client (served, timed out, disconnected or killed): out of every queue, and
/// the workers of the new queue heads are woken, since what was left may serve them.
pub(crate) fn leave(shared: &Shared, worker: usize, st: &mut ConnState) {
    let Some(p) = st.park.take() else { return };
    let mut wake = Vec::new();
    {
        let mut q = shared.blocking.lock();
        for k in &p.keys {
            let id = (p.db, k.clone());
            if let Some(v) = q.get_mut(&id) {
                let was_head = v.front().map(|x| x.0) == Some(st.id);
                v.retain(|x| x.0 != st.id);
                if v.is_empty() {
                    q.remove(&id);
                } else if was_head {
                    if let Some(&(_, w)) = v.front() {
                        wake.push(w);
                    }
                }
            }
        }
    }
    shared.blocking.per_worker[worker].fetch_sub(1, Ordering::SeqCst);
    shared.blocked_clients.fetch_sub(1, Ordering::Relaxed);
    st.info.blocked.store(false, Ordering::Relaxed);
    shared.store.add_blockers(-1);
    wake.sort_unstable();
    wake.dedup();
    if let Some(wakers) = shared.wakers.get() {
        for w in wake {
            if let Some(w) = wakers.get(w) {
                let _ = w.wake();
            }
        }
    }
}

/// Retries a parked client on the keys whose queue it heads. Returns true if it was served
/// (its reply, or an error, is in `wbuf` and it has left the registry).
pub(crate) fn try_serve(h: &mut Handle, shared: &Shared, worker: usize, st: &mut ConnState, wbuf: &mut Vec<u8>) -> bool {
    let Some(park) = st.park.take() else { return false };
    let heads: Vec<usize> = {
        let q = shared.blocking.lock();
        (0..park.keys.len())
            .filter(|&i| q.get(&(park.db, park.keys[i].clone())).and_then(|v| v.front()).map(|x| x.0) == Some(st.id))
            .collect()
    };
    let mut served = false;
    if !heads.is_empty() {
        let proto = st.proto;
        let mut ctx = Ctx { argv: Argv { args: &park.args, buf: &park.req }, out: Writer::new(wbuf, proto), h, conn: st, shared, worker };
        let mark = ctx.out.buf().len();
        for &k in &heads {
            match (park.serve)(&mut ctx, &park.keys[k], true) {
                Ok(true) => {
                    served = true;
                    break;
                }
                Ok(false) => {}
                Err(e) => {
                    ctx.out.buf().truncate(mark);
                    reply_error(&mut ctx, &e, None);
                    served = true;
                    break;
                }
            }
        }
    }
    st.park = Some(park);
    if served {
        leave(shared, worker, st);
    }
    served
}

/// Times the client out if its deadline has passed: a null array (`*-1`, RESP3 `_`), as
/// Redis replies to every timed-out blocking command. Returns whether it did.
pub(crate) fn expire(shared: &Shared, worker: usize, st: &mut ConnState, wbuf: &mut Vec<u8>, now: Instant) -> bool {
    match st.park.as_ref().and_then(|p| p.deadline) {
        Some(d) if d <= now => {
            leave(shared, worker, st);
            Writer::new(wbuf, st.proto).null_array();
            true
        }
        _ => false,
    }
}

/// The parked client's deadline, if it has one.
pub(crate) fn deadline(st: &ConnState) -> Option<Instant> {
    st.park.as_ref().and_then(|p| p.deadline)
}

/// The watcher thread: sleeps on the engine's push sequence (woken by a push from any
/// thread or attached process while clients are blocked) and wakes the workers that hold
/// parked clients. Checks for shutdown every 100 ms.
pub(crate) fn watch(shared: Arc<Shared>) {
    let store = &shared.store;
    // `seen` carries over: a push that lands while the workers are being woken moves the
    // sequence past it, and the next wait returns at once.
    let mut seen = store.push_seq();
    while !shared.shutdown.load(Ordering::Relaxed) {
        store.wait_push(seen, Duration::from_millis(100));
        let now = store.push_seq();
        if now == seen {
            continue;
        }
        seen = now;
        if let Some(wakers) = shared.wakers.get() {
            for (w, n) in shared.blocking.per_worker.iter().enumerate() {
                if n.load(Ordering::SeqCst) > 0 {
                    if let Some(w) = wakers.get(w) {
                        let _ = w.wake();
                    }
                }
            }
        }
    }
}
