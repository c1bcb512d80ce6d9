//! memcached text and meta protocol, translated onto the same engine operations as the
//! Redis commands (database 0).
//!
//! ```text
//!   read buffer ─► larder_memcache::parse ─► Request ─► one handler below ─► engine (db 0)
//!                                                             └─► reply bytes appended to `out`
//! ```
//!
//! The mapping, so that both protocols see one keyspace:
//!
//! | memcached                   | engine                                              |
//! |-----------------------------|-----------------------------------------------------|
//! | client flags                | the item's `flags` (Redis writes leave 0)           |
//! | exptime                     | the item's absolute expiry in ms (Redis TTL)        |
//! | cas unique                  | the item's version (changes with every write)       |
//! | set/add/replace/cas         | `set` with `Cond::Nx`/`Cond::Xx`/`cas`              |
//! | append/prepend              | `concat` (keeps flags and TTL)                      |
//! | incr/decr                   | `rewrite` (u64, incr wraps, decr stops at 0; a     |
//! |                             | shorter result padded with spaces, as memcached)    |
//! | touch/gat                   | `touch`                                             |
//! | delete, flush_all           | `del`, `flushdb(0)`                                 |
//!
//! Meta commands build on the same calls; where memcached needs an atomic check the engine
//! has no single call for (`ma`, `ms` append with `C`), a read and a CAS-guarded `set` loop.
//!
//! memcached sees strings only. A key holding a Redis hash, list, set or sorted set is no
//! item to it: every command that reads or changes an existing item (get, touch, append,
//! incr, cas, `mg`, `md I`/`x`, `ma`, ...) misses it with that command's miss reply and
//! leaves it alone; whole-value stores (set, add, replace, `ms`) act on the key as Redis's
//! SET with NX/XX does (set and replace overwrite it, add finds it taken), and delete
//! deletes it as DEL does.
//!
//! Item marks memcached keeps in the item header for the meta "stale-while-revalidate"
//! protocol (stale, win token sent) are not stored in the engine: they live here, in a small
//! per-server table keyed by key and valid only for the item version they were set on, so
//! any write from either protocol clears them, as a new item clears them in memcached.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use smallvec::SmallVec;

use larder_engine::{
    now_ms, Cond, Error as EngineError, Expiry, Handle, Meta, Outcome, SetOptions, Store, PREFETCH_GROUP,
};
use larder_memcache::reply::{self, DebugInfo, Status};
use larder_memcache::{
    advance_window, counter_value, item_size, parse_counter, parse_u32, parse_window, ArithMode, Expiry as McExpiry,
    Keys, Limits, MetaFlags, MetaKey, Request, RetrieveCommand, SetMode, Store as StoreReq, StoreCommand, Tokens,
};

use crate::command::ConnState;
use crate::stats::Counter;
use crate::{Proto, Shared};

/// The memcached version we speak (meta commands and their flags as in 1.6.21).
pub const VERSION: &str = "1.6.21";

/// memcached has no databases; it sees Redis's database 0.
const DB: u32 = 0;

/// Attempts of a read + CAS-guarded write before giving up under contention.
const CAS_RETRIES: usize = 1000;

const NON_NUMERIC: &str = "cannot increment or decrement non-numeric value";

// ---- per-server state --------------------------------------------------------------------

/// memcached's counters (`stats`), one set per worker so workers never share a cache line.
#[derive(Clone, Copy)]
#[repr(usize)]
enum C {
    CmdGet,
    CmdSet,
    CmdFlush,
    CmdTouch,
    CmdMeta,
    GetHits,
    GetMisses,
    DeleteMisses,
    DeleteHits,
    IncrMisses,
    IncrHits,
    DecrMisses,
    DecrHits,
    CasMisses,
    CasHits,
    CasBadval,
    TouchHits,
    TouchMisses,
    StoreTooLarge,
    StoreNoMemory,
    AuthCmds,
    AuthErrors,
    TotalItems,
}

const NCOUNTERS: usize = C::TotalItems as usize + 1;

/// One worker's counters, on cache lines of their own. Only that worker adds to them
/// ([`Counter`]: a load and a store, no locked instruction).
#[repr(align(64))]
struct Counters([Counter; NCOUNTERS]);

impl Default for Counters {
    fn default() -> Counters {
        Counters(std::array::from_fn(|_| Counter::default()))
    }
}

/// A delayed `flush_all`: the deadline, and whether the timer thread is alive.
#[derive(Default)]
struct FlushTimer {
    deadline_ms: Option<u64>,
    running: bool,
}

/// Meta protocol marks of one item version (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Mark {
    version: u64,
    stale: bool,
    token_sent: bool,
}

const MARK_SHARDS: usize = 16;
/// Marks are a cache of advisory bits; past this many per shard the shard starts over.
const MARK_SHARD_MAX: usize = 16 * 1024;

/// What the memcached side of one server keeps besides the engine ([`Shared::memcache`]).
pub struct McServer {
    counters: Vec<Counters>,
    flush: Mutex<FlushTimer>,
    flush_cv: Condvar,
    marks: Vec<Mutex<HashMap<Vec<u8>, Mark>>>,
    marks_len: AtomicUsize,
    verbosity: AtomicU32,
    detail: AtomicU32,
}

impl McServer {
    /// State for a server of `workers` worker threads.
    pub fn new(workers: usize) -> McServer {
        McServer {
            counters: (0..workers.max(1)).map(|_| Counters::default()).collect(),
            flush: Mutex::new(FlushTimer::default()),
            flush_cv: Condvar::new(),
            marks: (0..MARK_SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            marks_len: AtomicUsize::new(0),
            verbosity: AtomicU32::new(0),
            detail: AtomicU32::new(0),
        }
    }

    fn sum(&self, c: C) -> u64 {
        self.counters.iter().map(|w| w.0[c as usize].get()).sum()
    }

    fn reset(&self) {
        for w in &self.counters {
            for c in &w.0 {
                c.reset();
            }
        }
    }

    fn shard(&self, key: &[u8]) -> &Mutex<HashMap<Vec<u8>, Mark>> {
        let mut h = DefaultHasher::new();
        key.hash(&mut h);
        &self.marks[h.finish() as usize % MARK_SHARDS]
    }

    /// The marks of `key` at `version` (none if they belong to an older version).
    fn mark(&self, key: &[u8], version: u64) -> Mark {
        if self.marks_len.load(Ordering::Relaxed) == 0 {
            return Mark::default();
        }
        let m = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        match m.get(key) {
            Some(mk) if mk.version == version => *mk,
            _ => Mark::default(),
        }
    }

    /// Records `mark` for `key`, if `mark.version` is still the key's version: a write (an
    /// `md I` on another connection, say) may have made a newer version and marked it
    /// since, and a mark of an older version would overwrite that one. Checked under the
    /// shard's lock, which every marking takes. (A lookup that fails marks nothing.)
    fn set_mark(&self, h: &Handle, key: &[u8], mark: Mark) {
        let mut m = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(h.meta(DB, key), Ok(Some(meta)) if meta.version == mark.version) {
            return;
        }
        let before = m.len();
        if !mark.stale && !mark.token_sent {
            m.remove(key);
        } else {
            if m.len() >= MARK_SHARD_MAX {
                m.clear();
            }
            m.insert(key.to_vec(), mark);
        }
        self.recount(before, m.len());
    }

    /// Keeps `marks_len` the number of marks the shards hold, after one shard went from
    /// `before` to `after` entries (its lock still held).
    fn recount(&self, before: usize, after: usize) {
        if after > before {
            self.marks_len.fetch_add(after - before, Ordering::Relaxed);
        } else {
            self.marks_len.fetch_sub(before - after, Ordering::Relaxed);
        }
    }

    /// Claims the recache token of `key`'s item `version` for the caller: true for the first
    /// claim since the version was made, false once another client has it. Decided under the
    /// shard's lock, as memcached decides under the item lock, so of two readers that qualify
    /// at once exactly one wins. A version the key has since moved on from wins nothing: a
    /// write replaced it, and that write (or, after `md I`, the first reader of the new stale
    /// version) is the recache. `stale` is the caller's view of the stale mark, kept in case
    /// the shard was cleared since it was read.
    fn claim_token(&self, h: &Handle, key: &[u8], version: u64, stale: bool) -> bool {
        let mut m = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        let stale = match m.get(key) {
            Some(mk) if mk.version == version => {
                if mk.token_sent {
                    return false;
                }
                stale || mk.stale
            }
            _ => stale,
        };
        if !matches!(h.meta(DB, key), Ok(Some(meta)) if meta.version == version) {
            return false;
        }
        let before = m.len();
        if before >= MARK_SHARD_MAX {
            m.clear();
        }
        m.insert(key.to_vec(), Mark { version, stale, token_sent: true });
        self.recount(before, m.len());
        true
    }

    /// Schedules (or with `None` cancels) a delayed flush of database 0. One timer thread per
    /// server at most, alive only while a flush is pending: a client repeating
    /// `flush_all <delay>` moves one deadline, it does not start threads.
    fn schedule_flush(self: &Arc<Self>, store: &Store, deadline_ms: Option<u64>) {
        let mut t = self.flush.lock().unwrap_or_else(|e| e.into_inner());
        t.deadline_ms = deadline_ms;
        self.flush_cv.notify_all();
        if deadline_ms.is_none() || t.running {
            return;
        }
        t.running = true;
        let (me, store) = (self.clone(), store.clone());
        let spawned = std::thread::Builder::new().name("larder-mc-flush".into()).spawn(move || me.flush_timer(store));
        if spawned.is_err() {
            t.running = false;
        }
    }

    fn flush_timer(&self, store: Store) {
        let mut t = self.flush.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let Some(at) = t.deadline_ms else {
                t.running = false;
                return;
            };
            let now = now_ms();
            if now >= at {
                t.deadline_ms = None;
                drop(t);
                if let Ok(mut h) = store.handle() {
                    let _ = h.flushdb(DB);
                }
                t = self.flush.lock().unwrap_or_else(|e| e.into_inner());
                continue;
            }
            t = self
                .flush_cv
                .wait_timeout(t, Duration::from_millis(at - now))
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

// ---- time ---------------------------------------------------------------------------------

/// memcached's `ITEM_UPDATE_INTERVAL`: it dates its start this many seconds (and 2 more)
/// early, which decides which absolute `flush_all` times count as before the start.
const ITEM_UPDATE_INTERVAL: u64 = 60;

/// An exptime (memcached's rules, see [`McExpiry`]) as an absolute expiry in Unix ms, 0 for
/// never. Expired-at-once becomes 1 ms after the epoch: in the past, but not "never".
fn deadline_ms(exptime: i64, now: u64) -> u64 {
    match McExpiry::from_exptime(exptime) {
        McExpiry::Never => 0,
        McExpiry::Expired => 1,
        McExpiry::Relative(s) => now + u64::from(s) * 1000,
        McExpiry::Absolute(t) => t.saturating_mul(1000).max(1),
    }
}

/// Seconds left, rounded up (a fresh `set k 0 100` reports 100), -1 for no expiry.
fn ttl_secs(at_ms: u64, now: u64) -> i64 {
    if at_ms == 0 {
        -1
    } else {
        (at_ms.saturating_sub(now).div_ceil(1000)) as i64
    }
}

fn now_secs() -> u64 {
    now_ms() / 1000
}

// ---- the connection loop ------------------------------------------------------------------

/// Executes the complete memcached requests at the start of `buf`, appending replies to
/// `out`, until `out` holds `out_max` bytes; returns the bytes consumed.
///
/// Past `out_max` no further request is started, and a multiget stops between two keys
/// (`conn.mc_resume` says how many it answered; it is run again from there, without its
/// `END` so far): the rest waits in the buffer until the replies have been written. memcached
/// does the same, reading no more of a client that does not read its replies, whose output
/// would otherwise grow without bound: `get k` nine bytes long returns a whole value.
pub fn process(
    buf: &[u8],
    out: &mut Vec<u8>,
    out_max: usize,
    h: &mut Handle,
    conn: &mut ConnState,
    shared: &Shared,
    worker: usize,
) -> usize {
    let mut pos = 0;
    // The rest of a rejected data block (memcached's conn_swallow) may arrive over many reads.
    if conn.mc_swallow > 0 {
        let n = conn.mc_swallow.min(buf.len() as u64);
        conn.mc_swallow -= n;
        pos = n as usize;
        if conn.mc_swallow > 0 {
            return pos;
        }
    }
    if !conn.authenticated && crate::command::auth_required(shared, conn) {
        pos += authenticate(&buf[pos..], out, out_max, conn, shared, worker);
        if !conn.authenticated {
            return pos;
        }
    }
    if pos >= buf.len() {
        return pos;
    }
    let limits = Limits {
        item_size_max: usize::try_from(shared.config.item_size_max.load(Ordering::Relaxed)).unwrap_or(usize::MAX),
        ..Limits::default()
    };
    let mut mc = Mc {
        h,
        out,
        conn,
        shared,
        st: &shared.memcache,
        worker,
        scratch: SCRATCH.take(),
        item_max: limits.item_size_max,
        out_max,
        held: false,
    };
    let ws = shared.stats.worker(worker);
    // memcached's read buffer over these bytes (see `parse_window`): what is left over from
    // the last batch, or what follows a swallowed block, starts a fresh read.
    let mut window = limits.read_buffer_size;
    while pos < buf.len() && !mc.conn.close && mc.out.len() < out_max {
        // Whole requests buffered (a pipeline, up to PREFETCH_GROUP at a time) are parsed
        // first, their keys brought into cache together, then run in order: as the RESP
        // path does, so that their cache misses overlap. A parse that gives no request (an
        // unfinished one, an error) ends the group and is dealt with after it runs.
        // (A SmallVec: an array of 16 requests of a few hundred bytes each would be
        // initialised on every call, for most calls one request.)
        let mut group: SmallVec<[(Request<'_>, usize, usize); PREFETCH_GROUP]> = SmallVec::new();
        let (mut at, mut w) = (pos, window);
        let mut ended = None;
        while group.len() < PREFETCH_GROUP && at < buf.len() {
            match parse_window(&buf[at..], &mut w, &limits) {
                Ok(Some((req, n))) => {
                    at += n;
                    w = advance_window(w, n, &limits);
                    group.push((req, n, w));
                }
                r => {
                    ended = Some(r);
                    break;
                }
            }
        }
        if group.len() > 1 {
            mc.h.prefetch_group(DB, group.iter().filter_map(|(req, ..)| req.first_key()));
        }
        let mut ran = 0;
        for (req, n, w) in &group {
            if mc.conn.close || mc.out.len() >= out_max {
                break;
            }
            // CLIENT PAUSE: the request stays in the buffer until the pause ends.
            if shared.pause.mode() != crate::pause::OFF {
                if let Some(g) = crate::pause::postpones_memcache(shared, changes_items(req)) {
                    mc.conn.postponed = Some(g);
                    break;
                }
            }
            if mc.conn.mc_resume == 0 {
                ws.commands.incr();
            }
            mc.execute(req);
            if mc.held {
                // A multiget stopped part way: it stays in the buffer.
                break;
            }
            pos += n;
            window = *w;
            ran += 1;
        }
        if ran < group.len() {
            break;
        }
        let Some(ended) = ended else { continue };
        if mc.conn.close {
            break;
        }
        // The parse that ended the group, at `pos` now: its window is `w`, as it left it.
        window = w;
        match ended {
            // Unfinished: wait for the rest. (A request that parsed is in the group.)
            Ok(_) => break,
            Err(e) => {
                if e.closes() {
                    mc.conn.close = true;
                    pos = buf.len();
                    break;
                }
                // A too-large set drops the key's old value (below): a write, held by a
                // pause as one.
                if shared.pause.mode() != crate::pause::OFF && e.unlink(&buf[pos..]).is_some() {
                    if let Some(g) = crate::pause::postpones_memcache(shared, true) {
                        mc.conn.postponed = Some(g);
                        break;
                    }
                }
                if e.kind() == Some(larder_memcache::ErrorReply::TooLarge) {
                    mc.count(C::StoreTooLarge);
                }
                // A set or ms too large to store drops the key's old value, as memcached does.
                if let Some(key) = e.unlink(&buf[pos..]) {
                    if let Err(err) = mc.h.del(DB, &[key.bytes()]) {
                        tracing::warn!(%err, "memcached: could not drop the value a too-large set replaces");
                    }
                }
                if let Some(r) = e.reply() {
                    mc.out.extend_from_slice(r);
                }
                pos += e.consumed();
                let skip = e.skip() as u64;
                let now = skip.min((buf.len() - pos) as u64);
                pos += now as usize;
                mc.conn.mc_swallow = skip - now;
                window = advance_window(window, e.consumed() + e.skip(), &limits);
                if mc.conn.mc_swallow > 0 {
                    break;
                }
            }
        }
    }
    // Keep the worker's scratch buffer for the next batch, unless one huge value grew it.
    if mc.scratch.capacity() <= SCRATCH_KEEP {
        mc.scratch.clear();
        SCRATCH.set(mc.scratch);
    }
    pos
}

/// Whether a request may change items (CLIENT PAUSE WRITE holds it): every one but the
/// plain retrievals (`get`, `gets`, `mg` without `T` or `N`) and those that touch no item.
fn changes_items(req: &Request<'_>) -> bool {
    match req {
        Request::Get { command, .. } => command.touches(),
        Request::MetaGet { flags, .. } => flags.ttl.is_some() || flags.vivify_ttl.is_some(),
        Request::Version
        | Request::Verbosity { .. }
        | Request::Quit
        | Request::Stats { .. }
        | Request::MetaNoop
        | Request::MetaDebug { .. } => false,
        Request::Store(_)
        | Request::Incr { .. }
        | Request::Decr { .. }
        | Request::Touch { .. }
        | Request::Delete { .. }
        | Request::FlushAll { .. }
        | Request::MetaSet { .. }
        | Request::MetaDelete { .. }
        | Request::MetaArithmetic { .. } => true,
    }
}

/// Largest scratch buffer a worker keeps between batches.
const SCRATCH_KEEP: usize = 64 * 1024;

thread_local! {
    /// Each worker's value buffer, reused across batches.
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// One connection's view while executing its buffered requests.
struct Mc<'a> {
    h: &'a mut Handle,
    out: &'a mut Vec<u8>,
    conn: &'a mut ConnState,
    shared: &'a Shared,
    st: &'a Arc<McServer>,
    worker: usize,
    /// Values are copied here from the arena, then behind their header into `out`.
    scratch: Vec<u8>,
    item_max: usize,
    /// See [`process`]: no more replies once `out` holds this much.
    out_max: usize,
    /// Set by a multiget that stopped at `out_max` (see [`process`]).
    held: bool,
}

/// What a storage command did, as memcached words it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum StoreResult {
    Stored,
    NotStored,
    Exists,
    NotFound,
}

impl From<Outcome> for StoreResult {
    fn from(o: Outcome) -> StoreResult {
        match o {
            Outcome::Stored => StoreResult::Stored,
            Outcome::NotStored => StoreResult::NotStored,
            Outcome::Exists => StoreResult::Exists,
            Outcome::NotFound => StoreResult::NotFound,
        }
    }
}

/// The longest request line an unauthenticated connection may send: memcached closes the
/// connection past it.
const AUTH_LINE_MAX: usize = 2048;
/// The longest token (`default <password>`) an unauthenticated connection may send. Longer
/// data is skipped unread and fails; memcached reads it all, whatever its size.
const AUTH_TOKEN_MAX: usize = 4096;

/// memcached's ASCII authentication (its `-Y authfile`, which may list several users), with
/// the ACL users as its users (`requirepass` is the password of `default`): while the
/// default user needs a password, a connection may send only
/// `set <key> <flags> <exptime> <bytes>` with `<user> <password>` as the data (key, flags
/// and exptime ignored), answered `STORED` when right. Anything else gets memcached's
/// errors: `CLIENT_ERROR unauthenticated` for another request, `... bad command line
/// termination`, `... bad authentication token format`, `... authentication failure`.
/// Returns the bytes consumed; stops once the connection has authenticated.
fn authenticate(
    buf: &[u8],
    out: &mut Vec<u8>,
    out_max: usize,
    conn: &mut ConnState,
    shared: &Shared,
    worker: usize,
) -> usize {
    let st = &shared.memcache;
    let count = |c: C| st.counters[worker.min(st.counters.len() - 1)].0[c as usize].incr();
    let mut pos = 0;
    while pos < buf.len() && !conn.authenticated && !conn.close && out.len() < out_max {
        let rest = &buf[pos..];
        let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
            // No line end in 2 KiB: junk, and memcached hangs up.
            conn.close |= rest.len() > AUTH_LINE_MAX;
            break;
        };
        let line = rest[..nl].strip_suffix(b"\r").unwrap_or(&rest[..nl]);
        let tokens: SmallVec<[&[u8]; 8]> = line.split(|&b| b == b' ').filter(|t| !t.is_empty()).collect();
        let size = match tokens.as_slice() {
            [b"set", _, _, _, size, ..] => std::str::from_utf8(size).ok().and_then(|s| s.parse::<u32>().ok()),
            _ => None,
        };
        let Some(size) = size.map(|s| s as usize) else {
            reply::client_error(out, "unauthenticated");
            pos += nl + 1;
            continue;
        };
        let data = &rest[nl + 1..];
        if size > AUTH_TOKEN_MAX {
            // Not a token: skip the data (see `process`) and fail.
            count(C::AuthCmds);
            count(C::AuthErrors);
            reply::client_error(out, "authentication failure");
            let now = (size + 2).min(data.len());
            conn.mc_swallow = (size + 2 - now) as u64;
            pos += nl + 1 + now;
            if conn.mc_swallow > 0 {
                break;
            }
            continue;
        }
        if data.len() < size + 2 {
            break; // the rest of the token is still to come
        }
        pos += nl + 1 + size + 2;
        if &data[size..size + 2] != b"\r\n" {
            reply::client_error(out, "bad command line termination");
            continue;
        }
        let mut words = data[..size].split(|&b| b == b' ').filter(|t| !t.is_empty());
        let (Some(user), Some(pass)) = (words.next(), words.next()) else {
            reply::client_error(out, "bad authentication token format");
            continue;
        };
        count(C::AuthCmds);
        if let Some(u) = shared.acl.login(user, pass) {
            conn.authenticated = true;
            *conn.info.user.lock().unwrap_or_else(|e| e.into_inner()) = Some(u.clone());
            conn.user = u;
            out.extend_from_slice(b"STORED\r\n");
        } else {
            count(C::AuthErrors);
            reply::client_error(out, "authentication failure");
        }
    }
    pos
}

impl<'a> Mc<'a> {
    #[inline]
    fn count(&self, c: C) {
        let w = &self.st.counters[self.worker.min(self.st.counters.len() - 1)];
        w.0[c as usize].incr();
    }

    fn execute(&mut self, req: &Request<'_>) {
        let silent = match req {
            Request::Store(s) => s.noreply,
            Request::Incr { noreply, .. }
            | Request::Decr { noreply, .. }
            | Request::Touch { noreply, .. }
            | Request::Delete { noreply, .. }
            | Request::FlushAll { noreply, .. }
            | Request::Verbosity { noreply, .. } => *noreply,
            _ => false,
        };
        if matches!(
            req,
            Request::MetaGet { .. }
                | Request::MetaSet { .. }
                | Request::MetaDelete { .. }
                | Request::MetaArithmetic { .. }
                | Request::MetaNoop
                | Request::MetaDebug { .. }
        ) {
            self.count(C::CmdMeta);
        }
        let r = match req {
            Request::Get { command, exptime, keys } => self.cmd_get(*command, *exptime, *keys),
            Request::Store(s) => self.cmd_store(s),
            Request::Incr { key, delta, noreply } => self.cmd_incr(key, *delta, false, *noreply),
            Request::Decr { key, delta, noreply } => self.cmd_incr(key, *delta, true, *noreply),
            Request::Touch { key, exptime, noreply } => self.cmd_touch(key, *exptime, *noreply),
            Request::Delete { key, noreply } => self.cmd_delete(key, *noreply),
            Request::FlushAll { delay, noreply } => self.cmd_flush_all(*delay, *noreply),
            Request::Version => {
                reply::version(self.out, VERSION);
                Ok(())
            }
            Request::Verbosity { level, noreply } => {
                self.st.verbosity.store(*level, Ordering::Relaxed);
                if !*noreply {
                    reply::ok(self.out);
                }
                Ok(())
            }
            Request::Quit => {
                self.conn.close = true;
                Ok(())
            }
            Request::Stats { args } => self.cmd_stats(*args),
            Request::MetaNoop => {
                reply::mn(self.out);
                Ok(())
            }
            Request::MetaDebug { key } => self.cmd_me(key),
            Request::MetaGet { key, flags } => self.cmd_mg(key, flags),
            Request::MetaSet { key, flags, mode, data } => self.cmd_ms(key, flags, *mode, data),
            Request::MetaDelete { key, flags } => self.cmd_md(key, flags),
            Request::MetaArithmetic { key, flags, mode } => self.cmd_ma(key, flags, *mode),
        };
        if let Err(e) = r {
            if !silent {
                self.engine_error(&e);
            }
        }
    }

    /// The one place engine errors become memcached replies.
    fn engine_error(&mut self, e: &EngineError) {
        if e.is_oom() {
            self.count(C::StoreNoMemory);
            reply::server_error(self.out, "out of memory storing object");
        } else if matches!(e, EngineError::TooLarge) {
            reply::server_error(self.out, "object too large for cache");
        } else if let EngineError::Corrupt(msg @ "too much contention on one key") = e {
            reply::server_error(self.out, msg);
        } else {
            reply::server_error(self.out, &e.to_string());
        }
    }

    // ---- classic commands ----

    /// # Format
    /// `get|gets <key>+` / `gat|gats <exptime> <key>+` → `VALUE <key> <flags> <bytes>[ <cas>]`
    /// + data per hit, then `END`.
    fn cmd_get(&mut self, command: RetrieveCommand, exptime: i32, keys: Keys<'_>) -> Result<(), EngineError> {
        let touch = command.touches();
        let with_cas = command.returns_cas();
        let now = now_ms();
        let at = if touch { deadline_ms(i64::from(exptime), now) } else { 0 };
        // Keys answered before the output held this multiget back (see `process`).
        let done = std::mem::take(&mut self.conn.mc_resume);
        let mut ahead = keys;
        if done > 0 {
            ahead.nth(done - 1);
        }
        for (i, key) in keys.enumerate().skip(done) {
            // Each group's cache misses overlap instead of coming one key after another.
            if (i - done).is_multiple_of(PREFETCH_GROUP) && keys.len() - done > 1 {
                self.h.prefetch_group(DB, ahead.by_ref().take(PREFETCH_GROUP));
            }
            self.count(if touch { C::CmdTouch } else { C::CmdGet });
            // The VALUE line goes out first, then the value straight from the arena. gat
            // touches and reads in one step (the version stays, as memcached keeps its CAS
            // value; an exptime in the past returns the item that once, then deletes it).
            let start = self.out.len();
            let header = |out: &mut Vec<u8>, m: &Meta, len: usize| {
                reply::value_header(out, key, m.flags, len, with_cas.then_some(m.version));
            };
            let found = if touch {
                self.h.touch_get_framed(DB, key, at, self.out, header)
            } else {
                self.h.get_framed(DB, key, self.out, header)
            };
            match found {
                Ok(Some(_)) => {
                    self.out.extend_from_slice(b"\r\n");
                    self.count(if touch { C::TouchHits } else { C::GetHits });
                }
                // A key of another type is a miss to memcached.
                Ok(None) | Err(EngineError::WrongType) => {
                    self.count(if touch { C::TouchMisses } else { C::GetMisses });
                }
                Err(e) => {
                    self.out.truncate(start);
                    return Err(e);
                }
            }
            if self.out.len() >= self.out_max && i + 1 < keys.len() {
                self.conn.mc_resume = i + 1;
                self.held = true;
                return Ok(());
            }
        }
        reply::end(self.out);
        Ok(())
    }

    /// # Format
    /// `set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]` + data,
    /// `cas <key> <flags> <exptime> <bytes> <cas> [noreply]` + data →
    /// `STORED` | `NOT_STORED` | `EXISTS` | `NOT_FOUND`.
    fn cmd_store(&mut self, s: &StoreReq<'_>) -> Result<(), EngineError> {
        self.count(C::CmdSet);
        let at = deadline_ms(i64::from(s.exptime), now_ms());
        let opts = SetOptions { flags: s.flags, expiry: Expiry::at_or_clear(at), ..Default::default() };
        let with = |cond, cas| SetOptions { cond, cas, ..opts };
        let outcome = match s.command {
            StoreCommand::Set => self.op_set(s.key, s.data, &opts)?.0,
            StoreCommand::Add => self.op_set(s.key, s.data, &with(Cond::Nx, None))?.0,
            StoreCommand::Replace => self.op_set(s.key, s.data, &with(Cond::Xx, None))?.0,
            StoreCommand::Append | StoreCommand::Prepend => {
                let prepend = s.command == StoreCommand::Prepend;
                self.op_concat(s.key, s.data, prepend, None, false)?.0
            }
            StoreCommand::Cas => {
                let r = self.op_set(s.key, s.data, &with(Cond::Always, Some(s.cas)))?.0;
                self.count(match r {
                    StoreResult::Stored => C::CasHits,
                    StoreResult::Exists => C::CasBadval,
                    _ => C::CasMisses,
                });
                r
            }
        };
        if !s.noreply {
            reply::status(
                self.out,
                match outcome {
                    StoreResult::Stored => Status::Stored,
                    StoreResult::NotStored => Status::NotStored,
                    StoreResult::Exists => Status::Exists,
                    StoreResult::NotFound => Status::NotFound,
                },
            );
        }
        Ok(())
    }

    /// A store through the engine's `set`: the outcome and the new version (0 if not stored).
    fn op_set(&mut self, key: &[u8], data: &[u8], opts: &SetOptions) -> Result<(StoreResult, u64), EngineError> {
        let r = self.h.set(DB, key, data, opts)?;
        if r.outcome == Outcome::Stored {
            self.count(C::TotalItems);
        }
        Ok((r.outcome.into(), r.version))
    }

    /// append/prepend: `NotStored` if the key is missing or the result would exceed the item
    /// size limit, counted as memcached counts it with the stored item's flags
    /// ([`item_size`]; memcached cannot allocate the new item and says NOT_STORED). With
    /// `cas`, only onto that version (`Exists` otherwise). Returns the outcome and, if
    /// `want_version`, the new version.
    fn op_concat(
        &mut self,
        key: &[u8],
        data: &[u8],
        prepend: bool,
        cas: Option<u64>,
        want_version: bool,
    ) -> Result<(StoreResult, u64), EngineError> {
        if cas.is_none() && !want_version {
            // The size check and the write are two steps; a racing append can make the
            // item exceed the limit by one data block, never more. The length and the
            // flags come from one lookup, so they are the same item's. (A missing key, or
            // one of another type, is for `concat` to refuse.)
            if let Some((m, Some(n))) = self.h.meta_and_len(DB, key)? {
                if item_size(key.len(), m.flags, n as usize + data.len()) > self.item_max {
                    return Ok((StoreResult::NotStored, 0));
                }
            }
            return Ok(match self.h.concat(DB, key, data, prepend, false) {
                Ok(Some(_)) => {
                    self.count(C::TotalItems);
                    (StoreResult::Stored, 0)
                }
                // A Redis collection is a missing item to memcached.
                Ok(None) | Err(EngineError::WrongType) => (StoreResult::NotStored, 0),
                Err(e) => return Err(e),
            });
        }
        // With a CAS, or when the new version is wanted (which `concat` does not return):
        // read, check, and write back guarded by the version we read.
        for _ in 0..CAS_RETRIES {
            let Some(m) = self.read(key, true)? else {
                return Ok((StoreResult::NotStored, 0));
            };
            if cas.is_some_and(|c| c != m.version) {
                return Ok((StoreResult::Exists, 0));
            }
            if item_size(key.len(), m.flags, self.scratch.len() + data.len()) > self.item_max {
                return Ok((StoreResult::NotStored, 0));
            }
            let value = if prepend { [data, &self.scratch].concat() } else { [&self.scratch, data].concat() };
            let opts = SetOptions { cas: Some(m.version), flags: m.flags, expiry: Expiry::Keep, ..Default::default() };
            match self.op_set(key, &value, &opts)? {
                (StoreResult::Stored, v) => return Ok((StoreResult::Stored, v)),
                (StoreResult::NotFound, _) => return Ok((StoreResult::NotStored, 0)),
                _ => {}
            }
        }
        Err(contention())
    }

    /// # Format
    /// `incr|decr <key> <delta> [noreply]` → the new value | `NOT_FOUND` |
    /// `CLIENT_ERROR cannot increment or decrement non-numeric value`.
    ///
    /// The value is read as memcached reads item data ([`parse_counter`]) and the result
    /// stored as memcached leaves it ([`counter_value`]: a shorter number padded with spaces
    /// to the old length, which `get`, and Redis's GET, then return).
    fn cmd_incr(&mut self, key: &[u8], delta: u64, decr: bool, noreply: bool) -> Result<(), EngineError> {
        // The item's version before, whose meta marks an in-place result keeps (see
        // `keep_marks`; looked up only while any item has marks).
        let before = if self.st.marks_len.load(Ordering::Relaxed) > 0 { self.read(key, false)? } else { None };
        let r = self.h.rewrite(DB, key, |v| {
            let cur = parse_counter(v)?;
            let new = if decr { cur.saturating_sub(delta) } else { cur.wrapping_add(delta) };
            let stored = counter_value(new, v.len());
            let in_place = stored.len() == v.len();
            Some((stored, (new, in_place)))
        });
        let (hit, miss) = if decr { (C::DecrHits, C::DecrMisses) } else { (C::IncrHits, C::IncrMisses) };
        match r {
            Ok(Some((v, in_place))) => {
                if let (Some(m), true) = (before, in_place) {
                    if let Some(after) = self.read(key, false)? {
                        self.keep_marks(key, m.version, after.version);
                    }
                }
                self.count(hit);
                if !noreply {
                    reply::number(self.out, v);
                }
            }
            // A Redis collection is a missing item to memcached.
            Ok(None) | Err(EngineError::WrongType) => {
                self.count(miss);
                if !noreply {
                    reply::not_found(self.out);
                }
            }
            Err(EngineError::NotInteger) => {
                if !noreply {
                    reply::client_error(self.out, NON_NUMERIC);
                }
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// memcached's incr/decr/`ma` writes a result that fits into the old value in place, and
    /// the item keeps its meta marks (stale, token sent); a longer result is a new item,
    /// without them. Carries the marks of version `from` over to `to`, the in-place result.
    fn keep_marks(&self, key: &[u8], from: u64, to: u64) {
        let mark = self.st.mark(key, from);
        if mark.stale || mark.token_sent {
            self.st.set_mark(self.h, key, Mark { version: to, ..mark });
        }
    }

    /// # Format
    /// `touch <key> <exptime> [noreply]` → `TOUCHED` | `NOT_FOUND`.
    fn cmd_touch(&mut self, key: &[u8], exptime: i32, noreply: bool) -> Result<(), EngineError> {
        self.count(C::CmdTouch);
        let at = deadline_ms(i64::from(exptime), now_ms());
        let found = self.h.touch(DB, key, at)?;
        self.count(if found { C::TouchHits } else { C::TouchMisses });
        if !noreply {
            reply::status(self.out, if found { Status::Touched } else { Status::NotFound });
        }
        Ok(())
    }

    /// # Format
    /// `delete <key> [0] [noreply]` → `DELETED` | `NOT_FOUND`.
    fn cmd_delete(&mut self, key: &[u8], noreply: bool) -> Result<(), EngineError> {
        let found = self.h.del(DB, &[key])? > 0;
        self.count(if found { C::DeleteHits } else { C::DeleteMisses });
        if !noreply {
            reply::status(self.out, if found { Status::Deleted } else { Status::NotFound });
        }
        Ok(())
    }

    /// # Format
    /// `flush_all [delay] [noreply]` → `OK`. A positive delay (memcached exptime rules)
    /// empties database 0 at that time; a later `flush_all` replaces a pending one. As in
    /// memcached, an absolute time already past flushes now, and one before the server's
    /// start (memcached's `process_started`, which is 62 s before it really started) only
    /// cancels a pending flush: `realtime()` maps it to 1, and `oldest_live` to 0.
    fn cmd_flush_all(&mut self, delay: Option<i32>, noreply: bool) -> Result<(), EngineError> {
        self.count(C::CmdFlush);
        let now = now_ms();
        let at = match delay {
            Some(d) if d > 0 => deadline_ms(i64::from(d), now),
            _ => now,
        };
        let process_started = (now - self.shared.uptime_ms()) / 1000 - (ITEM_UPDATE_INTERVAL + 2);
        if matches!(delay.map(|d| McExpiry::from_exptime(d.into())), Some(McExpiry::Absolute(t)) if t <= process_started)
        {
            self.st.schedule_flush(self.h.store(), None);
        } else if at > now {
            self.st.schedule_flush(self.h.store(), Some(at));
        } else {
            self.st.schedule_flush(self.h.store(), None);
            self.h.flushdb(DB)?;
            crate::tracking::on_flush_detached(self.shared);
        }
        if !noreply {
            reply::ok(self.out);
        }
        Ok(())
    }

    // ---- meta commands ----

    /// # Format
    /// `me <key> [b]` → `ME <key> exp=<s> la=<s> cas=<n> fetch=<yes|no> cls=<n> size=<n>` | `EN`.
    fn cmd_me(&mut self, key: &MetaKey<'_>) -> Result<(), EngineError> {
        let k = key.bytes();
        let Some(m) = self.read(k, true)? else {
            reply::Meta::en(self.out).finish();
            return Ok(());
        };
        // memcached prints current_time - exptime: negative for an item that will expire.
        let exp = if m.expire_at == 0 { -1 } else { -ttl_secs(m.expire_at, now_ms()) };
        let size = item_size(k.len(), m.flags, self.scratch.len()) as u64;
        let info = DebugInfo { exp, la: 0, cas: m.version, fetched: false, cls: 1, size };
        reply::me(self.out, k, key.is_binary(), &info);
        Ok(())
    }

    /// # Format
    /// `mg <key> <flag>*` → `VA <size> <flags>*` + data | `HD <flags>*` | `EN`.
    ///
    /// Return flags come in request order; `T` and `N` change the TTL that a later `t`
    /// reports, as in memcached, which applies them while walking the flags.
    fn cmd_mg(&mut self, key: &MetaKey<'_>, f: &MetaFlags<'_>) -> Result<(), EngineError> {
        let k = key.bytes();
        let now = now_ms();
        self.count(C::CmdGet);
        let need_value = f.return_value || f.return_size;
        let t_at = f.ttl.map(|t| deadline_ms(i64::from(t), now));
        let n_at = f.vivify_ttl.map(|t| deadline_ms(i64::from(t), now));
        let mut found = self.read(k, need_value)?;
        let mut created = false;
        if found.is_none() && n_at.is_some() {
            // Autovivify: an empty item whose creator wins the right to fill it.
            let at = walk_ttl(f, 0, true, t_at, n_at);
            let opts = SetOptions { cond: Cond::Nx, expiry: Expiry::at_or_clear(at), ..Default::default() };
            let (outcome, version) = self.op_set(k, b"", &opts)?;
            if outcome == StoreResult::Stored {
                created = true;
                self.scratch.clear();
                found = Some(Meta { expire_at: at, flags: 0, version, ..meta_template() });
            } else {
                found = self.read(k, need_value)?;
            }
        }
        let Some(m) = found else {
            self.count(C::GetMisses);
            if !f.quiet {
                reply::Meta::en(self.out).echo_opaque_key(f, key).finish();
            }
            return Ok(());
        };
        self.count(C::GetHits);
        let mark = self.st.mark(k, m.version);
        let start_ttl = if created { 0 } else { m.expire_at };
        if !created && f.ttl.is_some() {
            let at = walk_ttl(f, start_ttl, false, t_at, n_at);
            if at != m.expire_at {
                // (A touch keeps the item's version: `c` stays what a `cas` needs.) Only the
                // item read above: a newer one was written after this read.
                self.count(C::CmdTouch);
                if self.h.touch_if_version(DB, k, at, m.version)? {
                    self.count(C::TouchHits);
                }
            }
        }
        let size = self.scratch.len();
        let mut r = if f.return_value { reply::Meta::va(self.out, size) } else { reply::Meta::hd(self.out) };
        let mut cur = start_ttl;
        // Whether this read qualifies for the recache token: it created the item, its TTL
        // is under the R threshold, or the item is stale.
        let mut wants = mark.stale;
        for tok in f.tokens() {
            r = match tok[0] {
                b'T' => {
                    cur = t_at.unwrap_or(cur);
                    r
                }
                b'N' => {
                    if created {
                        cur = n_at.unwrap_or(cur);
                        wants = true;
                    }
                    r
                }
                b'R' => {
                    // In whole seconds, as memcached compares its exptimes: an item whose
                    // `t` is R does not qualify.
                    let recache = f.recache_ttl.map_or(0, |t| deadline_ms(i64::from(t), now));
                    if !created && cur != 0 && ttl_secs(cur, now) < ttl_secs(recache, now) {
                        wants = true;
                    }
                    r
                }
                b's' => r.size(size),
                b't' => r.ttl(ttl_secs(cur, now)),
                b'c' => r.cas(m.version),
                b'f' => r.flags(m.flags),
                // Access times and the fetched bit are not tracked by the engine.
                b'l' => r.last_access(0),
                b'h' => r.hit(false),
                b'O' => r.opaque(&tok[1..]),
                b'k' => r.key(k, key.is_binary()),
                _ => r,
            };
        }
        // One winner per version: a client that qualifies but finds the token already
        // claimed (by a concurrent read since `mark` was looked up) is told it was sent. As
        // in memcached, the creator of a vivified item always wins, and so does a read whose
        // `N` or `T` TTL has already expired the item (the claim then finds no item to mark).
        let expired = cur != 0 && cur <= now;
        let won =
            wants && !mark.token_sent && (self.st.claim_token(self.h, k, m.version, mark.stale) || created || expired);
        if mark.token_sent || (wants && !won) {
            r = r.win_sent();
        }
        if mark.stale {
            r = r.stale();
        }
        if won {
            r = r.won();
        }
        if f.return_value {
            r.finish_value(&self.scratch);
        } else {
            r.finish();
        }
        Ok(())
    }

    /// The item's metadata, and with `value` its value in `scratch`. A key holding another
    /// Redis type is a miss: memcached has no word for it.
    fn read(&mut self, key: &[u8], value: bool) -> Result<Option<Meta>, EngineError> {
        self.scratch.clear();
        let r = if value { self.h.get_into(DB, key, &mut self.scratch) } else { self.h.meta(DB, key) };
        match r {
            Err(EngineError::WrongType) => {
                self.scratch.clear();
                Ok(None)
            }
            // (`meta` answers for any type.)
            Ok(Some(m)) if m.ty != larder_engine::Type::String => Ok(None),
            r => r,
        }
    }

    /// # Format
    /// `ms <key> <datalen> <flag>*` + data → `HD` | `NS` | `EX` | `NF`, with `O k c` echoed.
    fn cmd_ms(&mut self, key: &MetaKey<'_>, f: &MetaFlags<'_>, mode: SetMode, data: &[u8]) -> Result<(), EngineError> {
        self.count(C::CmdSet);
        let k = key.bytes();
        let at = f.ttl.map_or(0, |t| deadline_ms(i64::from(t), now_ms()));
        let opts =
            SetOptions { flags: f.client_flags.unwrap_or(0), expiry: Expiry::at_or_clear(at), ..Default::default() };
        let (outcome, version) = match (mode, f.compare_cas) {
            // memcached turns set and replace with a CAS into a CAS store.
            (SetMode::Set | SetMode::Replace, Some(cas)) => {
                let mut r = self.op_set(k, data, &SetOptions { cas: Some(cas), ..opts })?;
                // C0 is no CAS to memcached, never an older one: no stale store, just EX.
                if r.0 == StoreResult::Exists && f.invalidate && cas != 0 {
                    r = self.op_stale_store(k, data, &opts, cas)?.unwrap_or(r);
                }
                self.count(match r.0 {
                    StoreResult::Stored => C::CasHits,
                    StoreResult::Exists => C::CasBadval,
                    _ => C::CasMisses,
                });
                r
            }
            (SetMode::Set, None) => self.op_set(k, data, &opts)?,
            (SetMode::Add, _) => self.op_set(k, data, &SetOptions { cond: Cond::Nx, ..opts })?,
            (SetMode::Replace, None) => self.op_set(k, data, &SetOptions { cond: Cond::Xx, ..opts })?,
            // For append and prepend memcached takes a CAS of 0 as none.
            (SetMode::Append | SetMode::Prepend, cas) => {
                self.op_concat(k, data, mode == SetMode::Prepend, cas.filter(|&c| c != 0), f.return_cas)?
            }
        };
        if outcome == StoreResult::Stored && f.quiet {
            return Ok(());
        }
        let mut r = match outcome {
            StoreResult::Stored => reply::Meta::hd(self.out),
            StoreResult::NotStored => reply::Meta::ns(self.out),
            StoreResult::Exists => reply::Meta::ex(self.out),
            StoreResult::NotFound => reply::Meta::nf(self.out),
        };
        for tok in f.tokens() {
            r = match tok[0] {
                b'O' => r.opaque(&tok[1..]),
                b'k' => r.key(k, key.is_binary()),
                b'c' => r.cas(version),
                _ => r,
            };
        }
        r.finish();
        Ok(())
    }

    /// `ms` with `I` whose CAS lost: a CAS older than the item's still stores, as a stale
    /// value keeping the item's TTL and its win-token mark. `None` if the CAS was not older.
    fn op_stale_store(
        &mut self,
        key: &[u8],
        data: &[u8],
        opts: &SetOptions,
        cas: u64,
    ) -> Result<Option<(StoreResult, u64)>, EngineError> {
        let Some(cur) = self.h.meta(DB, key)? else {
            return Ok(None);
        };
        if cas >= cur.version {
            return Ok(None);
        }
        let mark = self.st.mark(key, cur.version);
        let r = self.op_set(key, data, &SetOptions { cas: Some(cur.version), expiry: Expiry::Keep, ..*opts })?;
        if r.0 == StoreResult::Stored {
            self.st.set_mark(self.h, key, Mark { version: r.1, stale: true, token_sent: mark.token_sent });
        }
        Ok(Some(r))
    }

    /// # Format
    /// `md <key> <flag>*` → `HD` | `NF` | `EX`, with `O k` echoed. `I` marks the item stale
    /// instead of deleting it (and `T` sets its TTL); `x` empties the value but keeps the key.
    fn cmd_md(&mut self, key: &MetaKey<'_>, f: &MetaFlags<'_>) -> Result<(), EngineError> {
        let k = key.bytes();
        let now = now_ms();
        let outcome = if !f.invalidate && !f.remove_value {
            match f.compare_cas {
                None => {
                    if self.h.del(DB, &[k])? > 0 {
                        StoreResult::Stored
                    } else {
                        StoreResult::NotFound
                    }
                }
                // A CAS-guarded delete in one engine call: replace with an item that has
                // already expired, which nothing can read and expiry reclaims.
                Some(cas) => {
                    let opts = SetOptions { cas: Some(cas), expiry: Expiry::At(1), ..Default::default() };
                    self.h.set(DB, k, b"", &opts)?.outcome.into()
                }
            }
        } else {
            self.op_md_keep(k, f, now)?
        };
        self.count(if outcome == StoreResult::Stored { C::DeleteHits } else { C::DeleteMisses });
        if outcome == StoreResult::Stored && f.quiet {
            return Ok(());
        }
        let r = match outcome {
            StoreResult::Stored => reply::Meta::hd(self.out),
            StoreResult::NotFound => reply::Meta::nf(self.out),
            StoreResult::Exists => reply::Meta::ex(self.out),
            StoreResult::NotStored => reply::Meta::ns(self.out),
        };
        r.echo_opaque_key(f, key).finish();
        Ok(())
    }

    /// `md` with `x` and/or `I`: the key stays.
    ///
    /// Each is one engine step with the CAS check inside it. A version or an expiry read in
    /// a lookup before the step may be an item a concurrent write has since replaced (whose
    /// TTL would be overwritten, or which would pass a CAS meant for the old one), and a
    /// version read back after may be a later write's (whose fresh value would be marked
    /// stale): the mark goes on the version the step itself made.
    fn op_md_keep(&mut self, k: &[u8], f: &MetaFlags<'_>, now: u64) -> Result<StoreResult, EngineError> {
        let t_at = f.ttl.map(|t| deadline_ms(i64::from(t), now));
        let (outcome, version) = if f.remove_value {
            // A tombstone: empty value, the given client flags and TTL (none by default),
            // under a new version (with `I`, the stale one). Only over a string: a CAS,
            // the client's or the version just read, makes the write miss a Redis
            // collection (memcached sees none) even if one replaces the string meanwhile.
            let mut opts = SetOptions {
                cas: f.compare_cas,
                flags: f.client_flags.unwrap_or(0),
                expiry: Expiry::at_or_clear(t_at.unwrap_or(0)),
                ..Default::default()
            };
            let mut r = Err(contention());
            for _ in 0..CAS_RETRIES {
                if f.compare_cas.is_none() {
                    let Some(m) = self.read(k, false)? else {
                        r = Ok((StoreResult::NotFound, 0));
                        break;
                    };
                    opts.cas = Some(m.version);
                }
                match self.op_set(k, b"", &opts)? {
                    // Written over since the read: read again.
                    (StoreResult::Exists, _) if f.compare_cas.is_none() => continue,
                    done => {
                        r = Ok(done);
                        break;
                    }
                }
            }
            r?
        } else {
            // `I` alone: a new version (so CAS writes based on the old value fail), and the
            // TTL only if `T` gives one.
            let expiry = t_at.map_or(Expiry::Keep, Expiry::at_or_clear);
            let r = self.h.touch_and_invalidate(DB, k, expiry, f.compare_cas)?;
            (r.outcome.into(), r.version)
        };
        // Stale, with a fresh chance for one client to win the recache token. (A TTL in the
        // past deleted the key: version 0, or a version `set_mark` finds no item of.)
        if outcome == StoreResult::Stored && f.invalidate && version != 0 {
            self.st.set_mark(self.h, k, Mark { version, stale: true, token_sent: false });
        }
        Ok(outcome)
    }

    /// # Format
    /// `ma <key> <flag>*` → `HD` | `VA <len>` + number | `NF` | `EX`, with `c t O k`.
    /// `N<ttl>` creates a missing counter with `J<initial>` (default 0); `MD`/`M-` decrement.
    fn cmd_ma(&mut self, key: &MetaKey<'_>, f: &MetaFlags<'_>, mode: ArithMode) -> Result<(), EngineError> {
        let k = key.bytes();
        let now = now_ms();
        let decr = mode == ArithMode::Decr;
        let t_at = f.ttl.map(|t| deadline_ms(i64::from(t), now));
        let n_at = f.vivify_ttl.map(|t| deadline_ms(i64::from(t), now));
        let (hit, miss) = if decr { (C::DecrHits, C::DecrMisses) } else { (C::IncrHits, C::IncrMisses) };
        for _ in 0..CAS_RETRIES {
            let Some(m) = self.read(k, true)? else {
                if n_at.is_none() {
                    self.count(miss);
                    reply::Meta::nf(self.out).echo_opaque_key(f, key).finish();
                    return Ok(());
                }
                let value = f.initial_or_default().to_string();
                let at = walk_ttl(f, 0, true, t_at, n_at);
                let opts = SetOptions { cond: Cond::Nx, expiry: Expiry::at_or_clear(at), ..Default::default() };
                if let (StoreResult::Stored, version) = self.op_set(k, value.as_bytes(), &opts)? {
                    // memcached 1.6 answers a vivified counter even in quiet mode.
                    self.ma_reply(key, f, value.as_bytes(), version, 0, true, t_at, n_at, now);
                    return Ok(());
                }
                // Someone's item is there: a string is read on the next round, but a Redis
                // collection (a miss to memcached) is no counter and can't be vivified over.
                if self.h.type_of(DB, k)?.is_some_and(|t| t != larder_engine::Type::String) {
                    self.count(miss);
                    reply::Meta::nf(self.out).echo_opaque_key(f, key).finish();
                    return Ok(());
                }
                continue;
            };
            // memcached's order: an empty value is not a number, then a CAS mismatch (C0
            // means no CAS check), then the parse.
            if !self.scratch.is_empty() && f.compare_cas.is_some_and(|c| c != 0 && c != m.version) {
                reply::Meta::ex(self.out).echo_opaque_key(f, key).finish();
                return Ok(());
            }
            let Some(cur) = parse_counter(&self.scratch) else {
                reply::client_error(self.out, NON_NUMERIC);
                return Ok(());
            };
            let delta = f.delta_or_default();
            let new = if decr { cur.saturating_sub(delta) } else { cur.wrapping_add(delta) };
            // Stored padded like incr's result; the reply carries the number alone.
            let value = new.to_string();
            let stored = counter_value(new, self.scratch.len());
            let expiry = if t_at.is_some() {
                Expiry::at_or_clear(walk_ttl(f, m.expire_at, false, t_at, n_at))
            } else {
                Expiry::Keep
            };
            let opts = SetOptions { cas: Some(m.version), flags: m.flags, expiry, ..Default::default() };
            let r = self.h.set(DB, k, &stored, &opts)?;
            match r.outcome {
                Outcome::Stored => {
                    if stored.len() == self.scratch.len() {
                        self.keep_marks(k, m.version, r.version);
                    }
                    self.count(hit);
                    if !f.quiet {
                        self.ma_reply(key, f, value.as_bytes(), r.version, m.expire_at, false, t_at, n_at, now);
                    }
                    return Ok(());
                }
                Outcome::Exists if f.compare_cas.is_some() => {
                    reply::Meta::ex(self.out).echo_opaque_key(f, key).finish();
                    return Ok(());
                }
                _ => continue,
            }
        }
        Err(contention())
    }

    #[allow(clippy::too_many_arguments)]
    fn ma_reply(
        &mut self,
        key: &MetaKey<'_>,
        f: &MetaFlags<'_>,
        value: &[u8],
        version: u64,
        start_ttl: u64,
        created: bool,
        t_at: Option<u64>,
        n_at: Option<u64>,
        now: u64,
    ) {
        let mut r = if f.return_value { reply::Meta::va(self.out, value.len()) } else { reply::Meta::hd(self.out) };
        let mut cur = start_ttl;
        for tok in f.tokens() {
            r = match tok[0] {
                b'c' => r.cas(version),
                b't' => r.ttl(ttl_secs(cur, now)),
                b'T' => {
                    cur = t_at.unwrap_or(cur);
                    r
                }
                b'N' if created => {
                    cur = n_at.unwrap_or(cur);
                    r
                }
                b'O' => r.opaque(&tok[1..]),
                b'k' => r.key(key.bytes(), key.is_binary()),
                _ => r,
            };
        }
        if f.return_value {
            r.finish_value(value);
        } else {
            r.finish();
        }
    }

    // ---- stats ----

    /// # Format
    /// `stats [settings|items|slabs|sizes|conns|reset|detail on|off|dump|cachedump <id> <n>]`
    /// → `STAT <name> <value>` lines and `END`; an unknown group → `ERROR`.
    fn cmd_stats(&mut self, mut args: Tokens<'_>) -> Result<(), EngineError> {
        let sub = args.next();
        match sub {
            None => self.stats_general()?,
            Some(b"settings") => self.stats_settings(),
            Some(b"items") => self.stats_items()?,
            Some(b"slabs") => self.stats_slabs()?,
            Some(b"sizes") => {
                reply::stat(self.out, "sizes_status", b"disabled");
                reply::end(self.out);
            }
            Some(b"conns") => self.stats_conns(),
            Some(b"reset") => {
                self.st.reset();
                reply::status(self.out, Status::Reset);
            }
            Some(b"detail") => match args.next() {
                Some(b"on") => {
                    self.st.detail.store(1, Ordering::Relaxed);
                    reply::ok(self.out);
                }
                Some(b"off") => {
                    self.st.detail.store(0, Ordering::Relaxed);
                    reply::ok(self.out);
                }
                Some(b"dump") => reply::end(self.out),
                _ => reply::client_error(self.out, "usage: stats detail on|off|dump"),
            },
            Some(b"cachedump") => {
                let (Some(id), Some(limit)) = (args.next(), args.next()) else {
                    reply::client_error(self.out, "bad command line");
                    return Ok(());
                };
                // safe_strtoul, so 4294967297 is class 1; memcached has 64 class ids.
                let (Some(id), Some(limit)) = (parse_u32(id), parse_u32(limit)) else {
                    reply::client_error(self.out, "bad command line format");
                    return Ok(());
                };
                if id >= 64 {
                    reply::client_error(self.out, "Illegal slab id");
                    return Ok(());
                }
                self.stats_cachedump(u64::from(id), u64::from(limit))?;
            }
            Some(_) => reply::error(self.out),
        }
        Ok(())
    }

    fn stats_general(&mut self) -> Result<(), EngineError> {
        let shared = self.shared;
        let st = self.st;
        let (utime, stime) = cpu_times();
        let mc_conns = self.mc_connections();
        let items = self.h.dbsize(DB)?;
        let arena = self.h.store().arena();
        let out = &mut *self.out;
        let s = |out: &mut Vec<u8>, name: &str, v: u64| reply::stat_u64(out, name, v);
        s(out, "pid", u64::from(std::process::id()));
        s(out, "uptime", shared.uptime_ms() / 1000);
        s(out, "time", now_secs());
        reply::stat(out, "version", VERSION.as_bytes());
        reply::stat(out, "implementation", concat!("larder/", env!("CARGO_PKG_VERSION")).as_bytes());
        s(out, "pointer_size", 64);
        reply::stat(out, "rusage_user", utime.as_bytes());
        reply::stat(out, "rusage_system", stime.as_bytes());
        s(out, "max_connections", shared.config.maxclients.load(Ordering::Relaxed));
        s(out, "curr_connections", mc_conns);
        s(out, "total_connections", shared.stats.sum(|w| &w.connections));
        s(out, "rejected_connections", shared.stats.sum(|w| &w.rejected_connections));
        s(out, "connection_structures", mc_conns);
        s(out, "reserved_fds", 20);
        for (name, c) in [
            ("cmd_get", C::CmdGet),
            ("cmd_set", C::CmdSet),
            ("cmd_flush", C::CmdFlush),
            ("cmd_touch", C::CmdTouch),
            ("cmd_meta", C::CmdMeta),
            ("get_hits", C::GetHits),
            ("get_misses", C::GetMisses),
        ] {
            s(out, name, st.sum(c));
        }
        s(out, "get_expired", 0);
        s(out, "get_flushed", 0);
        for (name, c) in [
            ("delete_misses", C::DeleteMisses),
            ("delete_hits", C::DeleteHits),
            ("incr_misses", C::IncrMisses),
            ("incr_hits", C::IncrHits),
            ("decr_misses", C::DecrMisses),
            ("decr_hits", C::DecrHits),
            ("cas_misses", C::CasMisses),
            ("cas_hits", C::CasHits),
            ("cas_badval", C::CasBadval),
            ("touch_hits", C::TouchHits),
            ("touch_misses", C::TouchMisses),
            ("store_too_large", C::StoreTooLarge),
            ("store_no_memory", C::StoreNoMemory),
        ] {
            s(out, name, st.sum(c));
        }
        s(out, "auth_cmds", st.sum(C::AuthCmds));
        s(out, "auth_errors", st.sum(C::AuthErrors));
        s(out, "bytes_read", shared.stats.sum(|w| &w.net_input));
        s(out, "bytes_written", shared.stats.sum(|w| &w.net_output));
        s(out, "limit_maxbytes", arena.capacity());
        s(out, "accepting_conns", 1);
        s(out, "listen_disabled_num", 0);
        s(out, "time_in_listen_disabled_us", 0);
        s(out, "threads", shared.config.threads as u64);
        s(out, "conn_yields", 0);
        s(out, "hash_is_expanding", 0);
        s(out, "malloc_fails", 0);
        s(out, "bytes", arena.used_bytes());
        s(out, "curr_items", items);
        s(out, "total_items", st.sum(C::TotalItems));
        s(out, "expired_unfetched", 0);
        s(out, "evicted_unfetched", 0);
        s(out, "evicted_active", 0);
        s(out, "evictions", 0);
        s(out, "reclaimed", shared.stats.sum(|w| &w.expired_keys));
        reply::end(out);
        Ok(())
    }

    fn mc_connections(&self) -> u64 {
        let clients = self.shared.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.values().filter(|c| c.proto == Proto::Memcache).count() as u64
    }

    fn stats_settings(&mut self) {
        let c = &self.shared.config;
        let capacity = self.h.store().arena().capacity();
        let (_, mc_port) = *self.shared.tcp_ports.get().unwrap_or(&(0, 0));
        let out = &mut *self.out;
        let n = |out: &mut Vec<u8>, name: &str, v: u64| reply::stat_u64(out, name, v);
        let t = |out: &mut Vec<u8>, name: &str, v: &str| reply::stat(out, name, v.as_bytes());
        n(out, "maxbytes", capacity);
        n(out, "maxconns", c.maxclients.load(Ordering::Relaxed));
        n(out, "tcpport", u64::from(mc_port));
        n(out, "udpport", 0);
        t(out, "inter", &c.bind);
        n(out, "verbosity", u64::from(self.st.verbosity.load(Ordering::Relaxed)));
        n(out, "oldest", 0);
        // The engine never evicts to make room: a full store refuses writes, as `-M`.
        t(out, "evictions", "off");
        t(out, "domain_socket", "NULL");
        t(out, "umask", "700");
        t(out, "growth_factor", "1.25");
        n(out, "chunk_size", 48);
        n(out, "num_threads", c.threads as u64);
        t(out, "stat_key_prefix", ":");
        t(out, "detail_enabled", if self.st.detail.load(Ordering::Relaxed) != 0 { "yes" } else { "no" });
        n(out, "reqs_per_event", 20);
        t(out, "cas_enabled", "yes");
        n(out, "tcp_backlog", 1024);
        t(out, "binding_protocol", "ascii");
        t(out, "auth_enabled_sasl", "no");
        let password = !self.shared.acl.default.is_free();
        t(out, "auth_enabled_ascii", if password { "yes" } else { "no" });
        n(out, "item_size_max", self.item_max as u64);
        t(out, "maxconns_fast", "yes");
        n(out, "hashpower_init", 0);
        t(out, "slab_reassign", "no");
        n(out, "slab_automove", 0);
        t(out, "lru_crawler", "no");
        t(out, "flush_enabled", "yes");
        t(out, "dump_enabled", "yes");
        t(out, "lru_maintainer_thread", "no");
        n(out, "idle_timeout", c.timeout.load(Ordering::Relaxed));
        t(out, "track_sizes", "no");
        t(out, "ssl_enabled", "no");
        reply::end(out);
    }

    /// The engine has no slab classes; everything is reported as one class, 1.
    fn stats_items(&mut self) -> Result<(), EngineError> {
        let items = self.h.dbsize(DB)?;
        if items > 0 {
            let bytes = self.h.store().arena().used_bytes();
            let hits = self.st.sum(C::GetHits);
            let reclaimed = self.shared.stats.sum(|w| &w.expired_keys);
            for (name, v) in [
                ("number", items),
                ("number_hot", 0),
                ("number_warm", 0),
                ("number_cold", items),
                ("age_hot", 0),
                ("age_warm", 0),
                ("age", 0),
                ("mem_requested", bytes),
                ("evicted", 0),
                ("evicted_nonzero", 0),
                ("evicted_time", 0),
                ("outofmemory", self.st.sum(C::StoreNoMemory)),
                ("tailrepairs", 0),
                ("reclaimed", reclaimed),
                ("expired_unfetched", 0),
                ("evicted_unfetched", 0),
                ("evicted_active", 0),
                ("crawler_reclaimed", 0),
                ("crawler_items_checked", 0),
                ("lrutail_reflocked", 0),
                ("moves_to_cold", 0),
                ("moves_to_warm", 0),
                ("moves_within_lru", 0),
                ("direct_reclaims", 0),
                ("hits_to_hot", 0),
                ("hits_to_warm", 0),
                ("hits_to_cold", hits),
                ("hits_to_temp", 0),
            ] {
                reply::stat_u64(self.out, &format!("items:1:{name}"), v);
            }
        }
        reply::end(self.out);
        Ok(())
    }

    fn stats_slabs(&mut self) -> Result<(), EngineError> {
        let items = self.h.dbsize(DB)?;
        let bytes = self.h.store().arena().used_bytes();
        if let Some(chunk) = bytes.checked_div(items) {
            let chunk = chunk.max(1);
            for (name, v) in [
                ("chunk_size", chunk),
                ("chunks_per_page", (1 << 20) / chunk),
                ("total_pages", bytes.div_ceil(1 << 20)),
                ("total_chunks", items),
                ("used_chunks", items),
                ("free_chunks", 0),
                ("free_chunks_end", 0),
                ("get_hits", self.st.sum(C::GetHits)),
                ("cmd_set", self.st.sum(C::CmdSet)),
                ("delete_hits", self.st.sum(C::DeleteHits)),
                ("incr_hits", self.st.sum(C::IncrHits)),
                ("decr_hits", self.st.sum(C::DecrHits)),
                ("cas_hits", self.st.sum(C::CasHits)),
                ("cas_badval", self.st.sum(C::CasBadval)),
                ("touch_hits", self.st.sum(C::TouchHits)),
            ] {
                reply::stat_u64(self.out, &format!("1:{name}"), v);
            }
        }
        reply::stat_u64(self.out, "active_slabs", u64::from(items > 0));
        reply::stat_u64(self.out, "total_malloced", bytes);
        reply::end(self.out);
        Ok(())
    }

    fn stats_conns(&mut self) {
        let now = self.shared.uptime_ms();
        let mut clients: Vec<_> = {
            let c = self.shared.clients.lock().unwrap_or_else(|e| e.into_inner());
            c.values().filter(|c| c.proto == Proto::Memcache).cloned().collect()
        };
        clients.sort_by_key(|c| c.id);
        for c in clients {
            let id = c.id;
            reply::stat(self.out, &format!("{id}:addr"), format!("tcp:{}", c.addr).as_bytes());
            reply::stat(self.out, &format!("{id}:listen_addr"), format!("tcp:{}", c.laddr).as_bytes());
            reply::stat(self.out, &format!("{id}:state"), b"conn_parse_cmd");
            let idle = now.saturating_sub(c.last_ms.load(Ordering::Relaxed)) / 1000;
            reply::stat_u64(self.out, &format!("{id}:secs_since_last_cmd"), idle);
        }
        reply::end(self.out);
    }

    /// `stats cachedump 1 <limit>`: up to `limit` keys (0: 100) as
    /// `ITEM <key> [<bytes> b; <expiry unix s> s]`; other classes are empty.
    fn stats_cachedump(&mut self, class: u64, limit: u64) -> Result<(), EngineError> {
        if class == 1 {
            let want = if limit == 0 { 100 } else { limit.min(10_000) } as usize;
            let mut keys = Vec::new();
            let mut cursor = 0;
            loop {
                cursor = self.h.scan(DB, cursor, 100, None, Some(larder_engine::Type::String), &mut keys)?;
                if cursor == 0 || keys.len() >= want {
                    break;
                }
            }
            keys.truncate(want);
            for k in keys {
                // One lookup for both: in a second the key may hold another type (STRLEN
                // then fails, after half the lines are out) or have changed in place.
                // Other types are no memcached items: left out, as `get` misses them.
                let Some((m, Some(len))) = self.h.meta_and_len(DB, &k)? else {
                    continue;
                };
                self.out.extend_from_slice(b"ITEM ");
                self.out.extend_from_slice(&k);
                self.out.extend_from_slice(format!(" [{len} b; {} s]\r\n", m.expire_at / 1000).as_bytes());
            }
        }
        reply::end(self.out);
        Ok(())
    }
}

/// What a read-then-CAS loop reports if it keeps losing (it does not under any real load).
fn contention() -> EngineError {
    EngineError::Corrupt("too much contention on one key")
}

/// A `Meta` to fill in for an item we just created.
fn meta_template() -> Meta {
    Meta { ty: larder_engine::Type::String, expire_at: 0, flags: 0, version: 0 }
}

/// The expiry after memcached's flag walk: `T` sets it, `N` sets it on a created item;
/// the last one in request order wins.
fn walk_ttl(f: &MetaFlags<'_>, start: u64, created: bool, t_at: Option<u64>, n_at: Option<u64>) -> u64 {
    let mut cur = start;
    for tok in f.tokens() {
        match tok[0] {
            b'T' => cur = t_at.unwrap_or(cur),
            b'N' if created => cur = n_at.unwrap_or(cur),
            _ => {}
        }
    }
    cur
}

/// User and system CPU seconds of this process, from /proc (memcached's `rusage_*`).
fn cpu_times() -> (String, String) {
    let fallback = || ("0.000000".to_string(), "0.000000".to_string());
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return fallback();
    };
    // Fields after the command name (which may contain spaces) start at ") ".
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
        return fallback();
    };
    let f: Vec<&str> = rest.split(' ').collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    let (Some(u), Some(s)) =
        (f.get(11).and_then(|v| v.parse::<u64>().ok()), f.get(12).and_then(|v| v.parse::<u64>().ok()))
    else {
        return fallback();
    };
    // Clock ticks are 1/100 s on Linux.
    let fmt = |t: u64| format!("{}.{:06}", t / 100, (t % 100) * 10_000);
    (fmt(u), fmt(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exptimes() {
        let now = 1_700_000_000_000;
        assert_eq!(deadline_ms(0, now), 0);
        assert_eq!(deadline_ms(-1, now), 1);
        assert_eq!(deadline_ms(10, now), now + 10_000);
        assert_eq!(deadline_ms(2_592_000, now), now + 2_592_000_000);
        assert_eq!(deadline_ms(2_592_001, now), 2_592_001_000);
        assert_eq!(ttl_secs(0, now), -1);
        assert_eq!(ttl_secs(now + 10_000, now), 10);
        assert_eq!(ttl_secs(now + 9_001, now), 10);
        assert_eq!(ttl_secs(now - 5, now), 0);
    }

    #[test]
    fn recache_token_claims_and_mark_counts() {
        use larder_engine::StoreConfig;
        let store = Store::open(StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        let st = McServer::new(1);
        let set = |h: &mut Handle, k: &[u8]| h.set(DB, k, b"v", &SetOptions::default()).unwrap().version;
        let total = |st: &McServer| st.marks.iter().map(|m| m.lock().unwrap().len()).sum::<usize>();

        // One winner per version; the caller's stale view is kept; a superseded version
        // wins nothing.
        let v1 = set(&mut h, b"k");
        assert!(st.claim_token(&h, b"k", v1, true));
        assert!(!st.claim_token(&h, b"k", v1, false));
        assert_eq!(st.mark(b"k", v1), Mark { version: v1, stale: true, token_sent: true });
        let v2 = set(&mut h, b"k");
        assert!(!st.claim_token(&h, b"k", v1, false));
        assert!(st.claim_token(&h, b"k", v2, false));
        assert_eq!(st.marks_len.load(Ordering::Relaxed), 1);

        // Overflowing one shard starts it over, and the count follows what the table holds
        // (it used to keep the cleared entries, and `mark` never took its fast path again).
        let shard = st.shard(b"k") as *const _;
        let keys: Vec<Vec<u8>> = (0..)
            .map(|i| format!("key{i}").into_bytes())
            .filter(|k| std::ptr::eq(st.shard(k), shard))
            .take(MARK_SHARD_MAX + 10)
            .collect();
        for k in &keys {
            let v = set(&mut h, k);
            assert!(st.claim_token(&h, k, v, false));
        }
        assert_eq!(st.marks_len.load(Ordering::Relaxed), total(&st));
        assert!(total(&st) < MARK_SHARD_MAX);
    }

    /// A small deterministic generator for the garbage test below.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A pipeline of plausible requests (good, malformed, oversized, unfinished), then
    /// mangled: bytes flipped, dropped or repeated.
    fn pipeline(r: &mut Rng) -> Vec<u8> {
        let mut v = Vec::new();
        for _ in 0..1 + r.below(60) {
            let k = format!("k{}", r.below(6));
            let nr = if r.below(4) == 0 { " noreply" } else { "" };
            let req = match r.below(16) {
                0 | 1 => {
                    let len = match r.below(8) {
                        0 => 1500 + r.below(3000),
                        _ => r.below(20),
                    } as usize;
                    format!(
                        "set {k} {} 0 {len}{nr}\r\n{}\r\n",
                        r.below(3),
                        "x".repeat(len + (r.below(12) == 0) as usize)
                    )
                }
                2 => format!("get {k} k{} k{}\r\n", r.below(6), r.below(6)),
                3 => format!("gets {k}\r\n"),
                4 => format!("incr {k} {}{nr}\r\n", r.below(1000)),
                5 => format!("delete {k}{nr}\r\n"),
                6 => format!("mg {k} v c s f t R30 N30 T20 O1 k q\r\n"),
                7 => format!("md {k} I T10\r\n"),
                8 => format!("ms {k} 2 T0 c MA\r\nab\r\n"),
                9 => format!("ma {k} N0 J5 D3 v\r\n"),
                10 => format!("gat 100 {k}\r\ntouch {k} 10{nr}\r\n"),
                11 => format!("append {k} 0 0 1\r\nz\r\n"),
                12 => "x".repeat(100 + r.below(4000) as usize) + "\r\n",
                13 => format!("mn\r\nme {k}\r\nversion\r\n"),
                14 => format!("verbosity 1{nr}\r\nstats\r\n"),
                _ => format!("cas {k} 0 0 1 {}\r\nq\r\n", r.below(100)),
            };
            v.extend_from_slice(req.as_bytes());
        }
        for _ in 0..r.below(6) {
            let at = r.below(v.len() as u64) as usize;
            match r.below(3) {
                0 => v[at] = r.next() as u8,
                1 => {
                    v.remove(at);
                }
                _ => {
                    let end = (at + 1 + r.below(40) as usize).min(v.len());
                    let piece = v[at..end].to_vec();
                    v.splice(at..at, piece);
                }
            }
        }
        v
    }

    #[test]
    fn mangled_pipelines_in_any_chunking_never_break_the_server() {
        // Random pipelines, mangled, fed to process() in random pieces as reads would bring
        // them: nothing panics, every call consumes only what it was given and answers in
        // proportion, and afterwards the store's invariants hold and a fresh connection
        // is answered.
        let args = crate::Args {
            bind: Some("127.0.0.1".into()),
            port: Some(0),
            memcache_port: Some(0),
            threads: Some(1),
            capacity: Some(64 << 20),
            item_size_max: Some(2048),
            ..Default::default()
        };
        let server = crate::Server::start(crate::Config::load(&args).unwrap()).unwrap();
        let shared = server.shared.clone();
        let mut h = shared.store.handle().unwrap();
        let new_conn = || {
            let info = Arc::new(crate::ClientInfo::new(1, "a".into(), "b".into(), Proto::Memcache, 0, 0, -1, 0));
            ConnState::new(1, 0, info, Arc::new(crate::acl::User::new(b"default", crate::acl::Rules::everything())))
        };
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..2000 {
            let input = pipeline(&mut r);
            let mut conn = new_conn();
            let (mut out, mut rbuf, mut at) = (Vec::new(), Vec::new(), 0);
            while at < input.len() && !conn.close {
                let n = match r.below(3) {
                    0 => 1 + r.below(16),
                    1 => 1 + r.below(2000),
                    _ => 1 << 20,
                };
                let n = (n as usize).min(input.len() - at);
                rbuf.extend_from_slice(&input[at..at + n]);
                at += n;
                let before = out.len();
                let pos = process(&rbuf, &mut out, usize::MAX, &mut h, &mut conn, &shared, 0);
                assert!(pos <= rbuf.len(), "round {round}: consumed {pos} of {}", rbuf.len());
                // A reply is at most a value (2 KiB here) per key asked for, plus its lines.
                assert!(
                    out.len() - before <= 64 * rbuf.len() + 4096,
                    "round {round}: {} reply bytes",
                    out.len() - before
                );
                rbuf.drain(..pos);
            }
        }
        store_checks_out(&shared.store);
        let mut conn = new_conn();
        let mut out = Vec::new();
        assert_eq!(process(b"version\r\n", &mut out, usize::MAX, &mut h, &mut conn, &shared, 0), 9);
        assert_eq!(out, format!("VERSION {VERSION}\r\n").as_bytes());
        server.stop();
    }

    #[test]
    fn replies_held_back_by_out_max_resume_where_they_stopped() {
        // One pipeline run at once, and again with the output capped as the worker caps a
        // client that does not read: the same replies in the same order, each call stopping
        // soon after its cap, between requests or between the keys of a multiget.
        let args = crate::Args {
            bind: Some("127.0.0.1".into()),
            port: Some(0),
            memcache_port: Some(0),
            threads: Some(1),
            capacity: Some(64 << 20),
            ..Default::default()
        };
        let server = crate::Server::start(crate::Config::load(&args).unwrap()).unwrap();
        let shared = server.shared.clone();
        let mut h = shared.store.handle().unwrap();
        let mut input = Vec::new();
        for (k, len) in [("a", 3000), ("b", 10), ("c", 7000)] {
            input.extend_from_slice(format!("set {k} 1 0 {len}\r\n{}\r\n", k.repeat(len)).as_bytes());
        }
        input.extend_from_slice(&b"get a b c x a a c\r\ngat 100 c b a\r\nget b\r\n".repeat(3));
        input.extend_from_slice(b"mn\r\nget c c c c c c c c\r\nversion\r\n");
        let mut run = |cap: usize| {
            let info = Arc::new(crate::ClientInfo::new(1, "a".into(), "b".into(), Proto::Memcache, 0, 0, -1, 0));
            let mut conn = ConnState::new(
                1,
                0,
                info,
                Arc::new(crate::acl::User::new(b"default", crate::acl::Rules::everything())),
            );
            let (mut out, mut pos, mut calls) = (Vec::new(), 0, 0);
            while pos < input.len() {
                let before = out.len();
                let n = process(&input[pos..], &mut out, before.saturating_add(cap), &mut h, &mut conn, &shared, 0);
                assert!(n > 0 || out.len() > before, "cap {cap}: a call that did nothing");
                // Past the cap by at most one value and its lines.
                assert!(out.len() - before <= cap.saturating_add(7100), "cap {cap}: {} bytes", out.len() - before);
                pos += n;
                calls += 1;
            }
            assert_eq!(conn.mc_resume, 0);
            (out, calls)
        };
        let (all, calls) = run(usize::MAX);
        assert_eq!(calls, 1);
        for cap in [1, 100, 5000, 20_000] {
            let (out, calls) = run(cap);
            assert!(calls > 1, "cap {cap}");
            assert!(out == all, "cap {cap}: the replies differ");
        }
        server.stop();
    }

    fn store_checks_out(store: &Store) {
        let report = store.check().unwrap();
        assert!(report.problems.is_empty() && report.held_locks == 0, "{report:?}");
        assert!(report.keys > 0, "nothing was ever stored: the pipelines tested little");
    }
}
