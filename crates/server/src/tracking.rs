//! Client-side caching (CLIENT TRACKING), as Redis 7.0's `tracking.c`.
//!
//! ```text
//!   tracking client, read-only command ── keys into the table: key → [client id]
//!        (before the command runs and again after it, see `remember`)
//!   any worker, any write ── the engine handle reports the keys it changed (on while
//!        anyone tracks: `sync_worker`, one relaxed load per batch) ── after the command,
//!        `after_command`: each key leaves the table and its clients are sent
//!        `>2 invalidate [key]` (RESP3) or, through REDIRECT, a `__redis__:invalidate`
//!        message, through their worker's mailbox; BCAST prefixes note the key for the
//!        end of the worker's round (`broadcast`)
//!   the client's own command ── its invalidations wait in `ConnState` and go out after
//!        its reply (after EXEC's whole reply), as Redis's `tracking_pending_keys`
//!   active expiry ── its handle always reports the keys it deletes; sent after each cycle
//! ```
//!
//! Keys are tracked without their database, as Redis tracks them. FLUSHDB / FLUSHALL (and a
//! memcached `flush_all` that empties now) send every tracking client the null
//! invalidation and empty the table.
//!
//! Threads: a key is remembered before a tracking client's read runs, so a write on
//! another worker that lands during the read finds it (after the read it would find
//! nothing, and the client would cache the old value for good); invalidations a read
//! would cause to its own client for a key it had not tracked before are dropped, as Redis,
//! which remembers keys only after the read, never sends them. A worker's engine handle
//! reports changed keys from its first batch after tracking is switched on: the CLIENT
//! TRACKING ON that switches it on waits (as EXEC does) until every worker's running batch
//! has ended.
//!
//! Not seen: what local processes attached to the shared segment write (they have no
//! server to report to), a memcached `flush_all` with a delay.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use larder_engine::{Handle, Modified, Reporting};
use larder_resp::Protocol;

use crate::command::{Argv, Ctx, Spec, MOVABLEKEYS, PUBSUB, READONLY};
use crate::{ClientInfo, Msg, Shared};

// A client's tracking flags (ClientInfo::tracking, mirrored in ConnState::tracking).
pub const ON: u32 = 1;
pub const BCAST: u32 = 1 << 1;
pub const OPTIN: u32 = 1 << 2;
pub const OPTOUT: u32 = 1 << 3;
pub const NOLOOP: u32 = 1 << 4;
/// CLIENT CACHING YES (OPTIN) or NO (OPTOUT) was given for the next command.
pub const CACHING: u32 = 1 << 5;
/// The redirect client has gone (ClientInfo only: set by whoever found it gone).
pub const BROKEN_REDIR: u32 = 1 << 6;
/// ConnState only: invalidations for this client wait for its reply to go out.
pub const PENDING: u32 = 1 << 7;

/// An invalidation waiting for its client's reply: a key, or None for "every key" (a flush).
pub type Pending = Option<Vec<u8>>;

/// Per connection, while it tracks (or has invalidations waiting).
#[derive(Debug, Default)]
pub struct ConnTracking {
    /// BCAST prefixes, in Redis's (rax) order: sorted.
    pub prefixes: Vec<Vec<u8>>,
    /// Invalidations of keys this client's own command changed, sent after its reply.
    pub pending: Vec<Pending>,
    /// Keys the running read put in the table for this client that were not there before.
    fresh: Vec<Vec<u8>>,
}

/// BCAST keys waiting for the end of a round: prefix → key → the client whose command last
/// changed it (None: expiry, memcached).
type Due = BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Option<u64>>>;

#[derive(Default)]
struct Tables {
    /// key → ids of the clients that may cache it.
    keys: HashMap<Vec<u8>, Vec<u64>>,
    /// Ids across `keys` (INFO `tracking_total_items`).
    items: u64,
    /// BCAST prefix → its clients.
    prefixes: BTreeMap<Vec<u8>, Vec<Arc<ClientInfo>>>,
    /// Per worker (and one for active expiry): prefix → key → the client whose command last
    /// changed it (None: expiry, memcached), sent at the end of that worker's round.
    due: Vec<Due>,
    /// The clients in tracking mode.
    clients: HashMap<u64, Arc<ClientInfo>>,
    /// How many times in a row the limit could not be reached (Redis's `timeout_counter`).
    over_rounds: u32,
}

/// The server's tracking state.
pub struct Tracking {
    /// Keys must be reported (someone tracks, or the table holds keys): the one relaxed
    /// load a worker pays per batch while nobody tracks.
    armed: AtomicBool,
    /// INFO `tracking_clients`.
    clients: AtomicU64,
    /// The table's size, to check the limit without the lock.
    keys: AtomicU64,
    tables: Mutex<Tables>,
    /// Per worker (and active expiry): BCAST keys wait for the end of its round.
    due: Vec<AtomicBool>,
}

impl Tracking {
    /// For `workers` workers (and the active expiry thread, last).
    pub fn new(workers: usize) -> Tracking {
        Tracking {
            armed: AtomicBool::new(false),
            clients: AtomicU64::new(0),
            keys: AtomicU64::new(0),
            tables: Mutex::new(Tables { due: vec![BTreeMap::new(); workers + 1], ..Default::default() }),
            due: (0..=workers).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Whether anyone tracks (or the table holds keys).
    pub fn armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// INFO: `tracking_clients`, `tracking_total_keys`, `tracking_total_items`,
    /// `tracking_total_prefixes`.
    pub fn counts(&self) -> (u64, u64, u64, u64) {
        let t = self.lock();
        (self.clients.load(Ordering::Relaxed), t.keys.len() as u64, t.items, t.prefixes.len() as u64)
    }

    /// Disarms once nobody tracks and the table is empty (the caller holds the lock).
    fn settle(&self, t: &Tables) {
        self.keys.store(t.keys.len() as u64, Ordering::Relaxed);
        if t.clients.is_empty() && t.keys.is_empty() && t.prefixes.is_empty() {
            self.armed.store(false, Ordering::SeqCst);
        }
    }
}

/// Makes worker `w`'s handle report changed keys while tracking is armed; called at the
/// start of every batch, under the worker's exec gate. Over `tracking-table-max-keys`, keys
/// are evicted first (Redis does it before every command).
#[inline]
pub fn sync_worker(h: &Handle, shared: &Shared) {
    let armed = shared.tracking.armed.load(Ordering::Relaxed);
    if armed != h.reporting().modified {
        set_reporting(h, armed);
    }
    if armed {
        enforce_limit_if_over(shared);
    }
}

#[cold]
#[inline(never)]
fn set_reporting(h: &Handle, on: bool) {
    h.report(Reporting { modified: on, ..h.reporting() });
}

#[cold]
#[inline(never)]
fn enforce_limit_if_over(shared: &Shared) {
    let max = shared.config.tracking_table_max_keys.load(Ordering::Relaxed);
    if max > 0 && shared.tracking.keys.load(Ordering::Relaxed) > max {
        enforce_limit(shared);
    }
}

/// Redis's `trackingLimitUsedSlots`: over `tracking-table-max-keys`, invalidate keys (as if
/// they had changed, without BCAST) until under it, at most 100 × (rounds in a row that
/// could not get under it) a call.
pub fn enforce_limit(shared: &Shared) {
    let max = shared.config.tracking_table_max_keys.load(Ordering::Relaxed) as usize;
    let mut out = Outbox::new();
    {
        let mut t = shared.tracking.lock();
        if max == 0 || t.keys.len() <= max {
            t.over_rounds = 0;
            return;
        }
        let effort = 100 * (t.over_rounds as usize + 1);
        let n = (t.keys.len() - max).min(effort);
        let victims: Vec<Vec<u8>> = t.keys.keys().take(n).cloned().collect();
        for k in &victims {
            invalidate_locked(&mut t, &mut out, None, k);
        }
        if t.keys.len() <= max {
            t.over_rounds = 0;
        } else {
            t.over_rounds += 1;
        }
        shared.tracking.settle(&t);
    }
    out.send(shared);
}

/// Messages to clients of any worker, sent once the tables are unlocked.
struct Outbox {
    /// (client, payload): to be routed (redirects looked up) after the lock.
    to: Vec<(Arc<ClientInfo>, Payload)>,
    per_worker: Vec<Vec<Msg>>,
}

/// What an invalidation says.
enum Payload {
    Key(Vec<u8>),
    /// Every key (a flush).
    Null,
    /// A RESP array of keys (BCAST).
    Keys(Arc<Vec<u8>>),
}

/// Where messages for the client running the command go: straight into its output.
struct OwnOut<'a> {
    id: u64,
    proto: Protocol,
    out: &'a mut Vec<u8>,
}

impl Outbox {
    /// Empty, allocating nothing until a message is collected (most writes invalidate
    /// nothing).
    fn new() -> Outbox {
        Outbox { to: Vec::new(), per_worker: Vec::new() }
    }

    /// Routes what was collected (Redis's `sendTrackingMessage` for each) and sends it.
    fn send(mut self, shared: &Shared) {
        self.send_with(shared, None);
    }

    fn send_with(&mut self, shared: &Shared, mut own: Option<&mut OwnOut<'_>>) {
        if self.to.is_empty() {
            return;
        }
        self.per_worker.resize_with(shared.mailboxes.len(), Vec::new);
        for (c, p) in std::mem::take(&mut self.to) {
            message(shared, &mut self.per_worker, own.as_deref_mut(), &c, &p);
        }
        for (w, msgs) in std::mem::take(&mut self.per_worker).into_iter().enumerate() {
            if !msgs.is_empty() {
                shared.send(w, msgs);
            }
        }
    }
}

fn lookup(shared: &Shared, id: u64) -> Option<Arc<ClientInfo>> {
    shared.clients.lock().unwrap_or_else(|e| e.into_inner()).get(&id).cloned()
}

fn subscribed(c: &ClientInfo) -> bool {
    c.sub.load(Ordering::Relaxed) + c.psub.load(Ordering::Relaxed) + c.ssub.load(Ordering::Relaxed) > 0
}

/// Redis's `sendTrackingMessage`: to the client, or to its redirect client (a RESP2 one
/// gets a `__redis__:invalidate` message if it is subscribed to anything); a redirect client
/// that is gone marks the client broken and tells it so (RESP3). A RESP2 client without a
/// redirect gets nothing.
fn message(shared: &Shared, per_worker: &mut [Vec<Msg>], own: Option<&mut OwnOut<'_>>, c: &ClientInfo, p: &Payload) {
    let redir = c.redirect.load(Ordering::Relaxed);
    let resp = c.resp.load(Ordering::Relaxed);
    let mut target: Option<Arc<ClientInfo>> = None;
    if redir != 0 {
        match lookup(shared, redir) {
            Some(r) => target = Some(r),
            None => {
                c.tracking.fetch_or(BROKEN_REDIR, Ordering::Relaxed);
                if resp > 2 {
                    let mut m = b"*2\r\n$21\r\ntracking-redir-broken\r\n".to_vec();
                    m.extend_from_slice(format!(":{redir}\r\n").as_bytes());
                    post(per_worker, own, c, m);
                }
                return;
            }
        }
    }
    let to: &ClientInfo = target.as_deref().unwrap_or(c);
    let mut m = if to.resp.load(Ordering::Relaxed) > 2 {
        b"*2\r\n$10\r\ninvalidate\r\n".to_vec()
    } else if target.is_some() && subscribed(to) {
        b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n".to_vec()
    } else {
        return;
    };
    match p {
        Payload::Key(k) => {
            m.extend_from_slice(format!("*1\r\n${}\r\n", k.len()).as_bytes());
            m.extend_from_slice(k);
            m.extend_from_slice(b"\r\n");
        }
        // The null of the tracking client's protocol, whoever receives it (as Redis).
        Payload::Null => m.extend_from_slice(if resp > 2 { b"_\r\n" } else { b"$-1\r\n" }),
        Payload::Keys(k) => m.extend_from_slice(k),
    }
    post(per_worker, own, to, m);
}

/// Appends a push (encoded with `*`; RESP3 connections get `>`) to a client's output: the
/// running client's own buffer, or its worker's mailbox.
fn post(per_worker: &mut [Vec<Msg>], own: Option<&mut OwnOut<'_>>, to: &ClientInfo, m: Vec<u8>) {
    if let Some(o) = own.filter(|o| o.id == to.id) {
        let start = o.out.len();
        o.out.extend_from_slice(&m);
        if o.proto == Protocol::Resp3 {
            o.out[start] = b'>';
        }
        return;
    }
    to.pending.fetch_add(m.len() as u64, Ordering::Relaxed);
    if let Some(v) = per_worker.get_mut(to.worker) {
        v.push(Msg::Push { client: to.id, slot: to.slot, data: Arc::new(m) });
    }
}

/// The client whose command changed keys: for NOLOOP, and for its own invalidations, which
/// wait for its reply.
struct Current<'a> {
    id: u64,
    state: &'a mut Option<Box<ConnTracking>>,
    flags: &'a mut u32,
}

/// Redis's `trackingInvalidateKey` (without BCAST), the tables locked.
fn invalidate_locked(t: &mut Tables, out: &mut Outbox, mut cur: Option<&mut Current<'_>>, key: &[u8]) {
    let Some(ids) = t.keys.remove(key) else { return };
    t.items -= ids.len() as u64;
    for id in ids {
        let Some(c) = t.clients.get(&id) else { continue };
        let f = c.tracking.load(Ordering::Relaxed);
        if f & ON == 0 || f & BCAST != 0 || c.killed.load(Ordering::Relaxed) {
            continue;
        }
        if let Some(cur) = cur.as_deref_mut().filter(|cur| cur.id == id) {
            if f & NOLOOP != 0 {
                continue;
            }
            let st = cur.state.get_or_insert_with(Default::default);
            // A key the running read put in the table itself: Redis, which remembers keys
            // after the read, would not have had it there.
            if st.fresh.iter().any(|k| k == key) {
                continue;
            }
            st.pending.push(Some(key.to_vec()));
            *cur.flags |= PENDING;
            continue;
        }
        out.to.push((c.clone(), Payload::Key(key.to_vec())));
    }
}

/// After a command (or a served blocked client): the keys the engine reports changed are
/// invalidated, by the client `ctx.conn` (NOLOOP, and its own ones wait for its reply).
#[cold]
#[inline(never)]
pub fn after_command(ctx: &mut Ctx<'_>) {
    let mut changed = ctx.h.take_modified();
    // A write that left its value as it was (SETBIT of a bit to its value, a BITFIELD that
    // wrote what was there) wrote a new item all the same; Redis does not signal the key.
    if ctx.conn.unchanged {
        changed.retain(|m| m.expired);
    }
    let mut cur = Current { id: ctx.conn.id, state: &mut ctx.conn.tracking_state, flags: &mut ctx.conn.tracking };
    invalidate(ctx.shared, ctx.worker, Some(&mut cur), &changed);
}

/// What a handle reports changed outside any client's command (memcached requests, active
/// expiry on `slot`: the workers' count).
pub fn flush_detached(shared: &Shared, h: &Handle, slot: usize) {
    if h.has_modified() {
        let changed = h.take_modified();
        if shared.tracking.armed.load(Ordering::Relaxed) {
            invalidate(shared, slot, None, &changed);
        }
    }
}

fn invalidate(shared: &Shared, slot: usize, mut cur: Option<&mut Current<'_>>, changed: &[Modified]) {
    if changed.is_empty() {
        return;
    }
    let mut out = Outbox::new();
    {
        let mut t = shared.tracking.lock();
        let bcast = !t.prefixes.is_empty();
        for m in changed {
            // Expired keys are changed by nobody (Redis passes no client).
            let by = if m.expired { None } else { cur.as_ref().map(|c| c.id) };
            if bcast {
                let t = &mut *t;
                let matching: Vec<Vec<u8>> = t.prefixes.keys().filter(|p| m.key.starts_with(p)).cloned().collect();
                if let Some(due) = t.due.get_mut(slot) {
                    for p in matching {
                        due.entry(p).or_default().insert(m.key.clone(), by);
                        shared.tracking.due[slot].store(true, Ordering::Relaxed);
                    }
                }
            }
            // NOLOOP and waiting for the reply go by the running client, whoever changed
            // the key (Redis compares with `server.current_client`).
            invalidate_locked(&mut t, &mut out, cur.as_deref_mut(), &m.key);
        }
        shared.tracking.settle(&t);
    }
    out.send(shared);
}

/// The BCAST keys worker (or expiry) `slot` noted, sent at the end of its round: one message
/// per prefix to each of its clients (a NOLOOP client without the keys it changed itself).
#[inline]
pub fn broadcast_due(shared: &Shared, slot: usize) {
    if shared.tracking.due.get(slot).is_some_and(|d| d.load(Ordering::Relaxed)) {
        broadcast(shared, slot);
    }
}

#[cold]
#[inline(never)]
fn broadcast(shared: &Shared, slot: usize) {
    shared.tracking.due[slot].store(false, Ordering::Relaxed);
    let mut out = Outbox::new();
    {
        let mut t = shared.tracking.lock();
        let due = std::mem::take(&mut t.due[slot]);
        for (prefix, keys) in due {
            let Some(clients) = t.prefixes.get(&prefix) else { continue };
            let all = Arc::new(keys_array(&keys, None));
            for c in clients {
                if c.tracking.load(Ordering::Relaxed) & NOLOOP != 0 {
                    if keys.values().any(|&by| by != Some(c.id)) {
                        out.to.push((c.clone(), Payload::Keys(Arc::new(keys_array(&keys, Some(c.id))))));
                    }
                } else {
                    out.to.push((c.clone(), Payload::Keys(all.clone())));
                }
            }
        }
    }
    out.send(shared);
}

/// Redis's `trackingBuildBroadcastReply`: the keys (all, or those not last changed by
/// `except`) as a RESP array.
fn keys_array(keys: &BTreeMap<Vec<u8>, Option<u64>>, except: Option<u64>) -> Vec<u8> {
    let keep: Vec<&Vec<u8>> = keys.iter().filter(|(_, &by)| except.is_none() || by != except).map(|(k, _)| k).collect();
    let mut v = format!("*{}\r\n", keep.len()).into_bytes();
    for k in keep {
        v.extend_from_slice(format!("${}\r\n", k.len()).as_bytes());
        v.extend_from_slice(k);
        v.extend_from_slice(b"\r\n");
    }
    v
}

/// FLUSHDB / FLUSHALL (Redis's `trackingInvalidateKeysOnFlush`): every tracking client gets
/// the null invalidation (the running client after its reply), and the table is emptied.
pub fn on_flush(ctx: &mut Ctx<'_>) {
    let mut cur = Current { id: ctx.conn.id, state: &mut ctx.conn.tracking_state, flags: &mut ctx.conn.tracking };
    flush_with(ctx.shared, Some(&mut cur));
}

/// [`on_flush`] outside a client's command (memcached `flush_all`).
pub fn on_flush_detached(shared: &Shared) {
    if shared.tracking.armed.load(Ordering::Relaxed) {
        flush_with(shared, None);
    }
}

fn flush_with(shared: &Shared, cur: Option<&mut Current<'_>>) {
    if !shared.tracking.armed.load(Ordering::Relaxed) {
        return;
    }
    let mut out = Outbox::new();
    {
        let mut t = shared.tracking.lock();
        let mut clients: Vec<Arc<ClientInfo>> = t.clients.values().cloned().collect();
        clients.sort_by_key(|c| c.id);
        for c in clients {
            if c.tracking.load(Ordering::Relaxed) & ON == 0 || c.killed.load(Ordering::Relaxed) {
                continue;
            }
            match &cur {
                Some(cur) if cur.id == c.id => {}
                _ => out.to.push((c, Payload::Null)),
            }
        }
        if let Some(cur) = cur {
            if t.clients.contains_key(&cur.id) {
                cur.state.get_or_insert_with(Default::default).pending.push(None);
                *cur.flags |= PENDING;
            }
        }
        t.keys.clear();
        t.items = 0;
        shared.tracking.settle(&t);
    }
    out.send(shared);
}

/// After the client's command and its reply (and outside a transaction): the keys of a
/// read-only command remembered ([`after_read`]), its own invalidations (Redis's `trackingHandlePendingKeyInvalidations`), and the end of a CLIENT
/// CACHING's effect (Redis's `resetClient`: kept inside MULTI and after CLIENT commands).
#[cold]
#[inline(never)]
pub fn after_dispatch(ctx: &mut Ctx<'_>, ran: Option<usize>) {
    if let Some(spec) = ran.and_then(|i| crate::command::table().specs.get(i)) {
        after_read(ctx, spec);
    }
    if ctx.conn.tracking & CACHING != 0 && ctx.conn.multi.is_none() {
        let last = ctx.conn.info.last_cmd.load(Ordering::Relaxed);
        let client = crate::command::table().specs.get(last as usize).is_some_and(|s| s.name.starts_with("client"));
        if !client {
            ctx.conn.tracking &= !CACHING;
            ctx.conn.info.tracking.fetch_and(!CACHING, Ordering::Relaxed);
        }
    }
    if ctx.conn.tracking & PENDING != 0 && !ctx.conn.in_exec {
        ctx.conn.tracking &= !PENDING;
        let pending = ctx.conn.tracking_state.as_mut().map(|s| std::mem::take(&mut s.pending)).unwrap_or_default();
        let info = ctx.conn.info.clone();
        let mut out = Outbox::new();
        for p in pending {
            out.to.push((info.clone(), p.map_or(Payload::Null, Payload::Key)));
        }
        let mut own = OwnOut { id: ctx.conn.id, proto: ctx.conn.proto, out: ctx.out.buf() };
        out.send_with(ctx.shared, Some(&mut own));
    }
}

/// A served blocked client's own invalidations, after its reply in `out`.
pub fn pending_into(shared: &Shared, conn: &mut crate::command::ConnState, out: &mut Vec<u8>) {
    if conn.tracking & PENDING == 0 {
        return;
    }
    conn.tracking &= !PENDING;
    let pending = conn.tracking_state.as_mut().map(|s| std::mem::take(&mut s.pending)).unwrap_or_default();
    let mut o = Outbox::new();
    for p in pending {
        o.to.push((conn.info.clone(), p.map_or(Payload::Null, Payload::Key)));
    }
    let mut own = OwnOut { id: conn.id, proto: conn.proto, out };
    o.send_with(shared, Some(&mut own));
}

/// The argument positions of a command's keys (Redis's `getKeysFromCommand`).
pub fn key_positions(spec: &Spec, argv: Argv<'_>) -> Vec<usize> {
    let argc = argv.len();
    if spec.flags & MOVABLEKEYS != 0 {
        let args: Vec<&[u8]> = argv.iter().collect();
        if let Some(keys) = crate::families::movable_keys(spec.name, &args) {
            return keys.into_iter().filter(|&k| k < argc).collect();
        }
    }
    if spec.first_key <= 0 {
        return Vec::new();
    }
    let argc = argc as i32;
    let last = if spec.last_key < 0 { argc + spec.last_key } else { spec.last_key.min(argc - 1) };
    (spec.first_key..=last).step_by(spec.step.max(1) as usize).filter(|&k| k < argc).map(|k| k as usize).collect()
}

/// Whether a read-only command of this client remembers its keys (Redis's
/// `trackingRememberKeys` conditions: not BCAST; OPTIN only after CACHING YES, OPTOUT unless
/// CACHING NO).
fn remembers(flags: u32, spec: &Spec) -> bool {
    if flags & ON == 0 || flags & BCAST != 0 || spec.flags & PUBSUB != 0 {
        return false;
    }
    let caching = flags & CACHING != 0;
    !((flags & OPTIN != 0 && !caching) || (flags & OPTOUT != 0 && caching))
}

/// Before a tracking client's read-only command runs: its keys go in the table, so a write
/// on another worker during the read invalidates them. The ones that were not there are
/// noted as fresh (see [`invalidate_locked`]).
#[cold]
#[inline(never)]
pub fn before_read(ctx: &mut Ctx<'_>, spec: &Spec) {
    if spec.flags & READONLY == 0 || is_script(spec) || !remembers(ctx.conn.tracking, spec) {
        return;
    }
    let fresh = remember(ctx, spec);
    if !fresh.is_empty() {
        ctx.conn.tracking_state.get_or_insert_with(Default::default).fresh = fresh;
    }
}

/// After it ran: its keys go in the table (again: a write, or its own lazy expiry, may have
/// taken them out), as Redis remembers them after the command.
#[cold]
#[inline(never)]
pub fn after_read(ctx: &mut Ctx<'_>, spec: &Spec) {
    if spec.flags & READONLY == 0 || is_script(spec) {
        return;
    }
    if let Some(st) = ctx.conn.tracking_state.as_mut() {
        st.fresh.clear();
    }
    if remembers(ctx.conn.tracking, spec) {
        remember(ctx, spec);
    }
}

/// Whether `spec` runs a script (EVAL_RO, EVALSHA_RO, FCALL_RO are read-only commands): a
/// script's keys are remembered when it runs a read-only command, not for the script
/// itself (see [`after_script_read`]).
fn is_script(spec: &Spec) -> bool {
    matches!(spec.name, "eval_ro" | "evalsha_ro" | "fcall_ro")
}

/// After a script of a tracking client ran a read-only command: the keys the script
/// declared go in the table, as Redis remembers them (not the keys of the command).
#[cold]
#[inline(never)]
pub fn after_script_read(ctx: &mut Ctx<'_>, script: &Spec) {
    if remembers(ctx.conn.tracking, script) {
        remember(ctx, script);
    }
}

/// Puts the command's keys in the table for this client; returns those that were not there
/// for it.
fn remember(ctx: &mut Ctx<'_>, spec: &Spec) -> Vec<Vec<u8>> {
    let keys = key_positions(spec, ctx.argv);
    let mut fresh = Vec::new();
    if keys.is_empty() {
        return fresh;
    }
    let id = ctx.conn.id;
    let mut t = ctx.shared.tracking.lock();
    for k in keys {
        let key = ctx.argv.get(k);
        if !t.keys.contains_key(key) {
            t.keys.insert(key.to_vec(), Vec::new());
        }
        let added = match t.keys.get_mut(key) {
            Some(ids) if !ids.contains(&id) => {
                ids.push(id);
                true
            }
            _ => false,
        };
        if added {
            t.items += 1;
            fresh.push(key.to_vec());
        }
    }
    ctx.shared.tracking.settle(&t);
    fresh
}

/// CLIENT TRACKING ON (Redis's `enableTracking`), options checked. Switching tracking on
/// for the first client waits until no worker is in the middle of a batch, so that from
/// then on every write reports its keys (see the module docs).
pub fn enable(ctx: &mut Ctx<'_>, redirect: u64, options: u32, prefixes: &[Vec<u8>]) {
    let shared = ctx.shared;
    let info = ctx.conn.info.clone();
    let was = ctx.conn.tracking;
    let keep = was & (ON | CACHING | PENDING);
    let flags = ON | (keep & CACHING) | (options & (BCAST | OPTIN | OPTOUT | NOLOOP));
    let arming;
    {
        let mut t = shared.tracking.lock();
        if was & ON == 0 {
            shared.tracking.clients.fetch_add(1, Ordering::Relaxed);
        }
        t.clients.insert(ctx.conn.id, info.clone());
        info.redirect.store(redirect, Ordering::Relaxed);
        info.tracking.store(flags, Ordering::Relaxed);
        if options & BCAST != 0 {
            let st = ctx.conn.tracking_state.get_or_insert_with(Default::default);
            let empty = [Vec::new()];
            let wanted: &[Vec<u8>] = if prefixes.is_empty() { &empty } else { prefixes };
            for p in wanted {
                if !st.prefixes.contains(p) {
                    st.prefixes.push(p.clone());
                    st.prefixes.sort();
                    t.prefixes.entry(p.clone()).or_default().push(info.clone());
                }
            }
        }
        arming = !shared.tracking.armed.swap(true, Ordering::SeqCst);
    }
    ctx.conn.tracking = flags | (keep & PENDING);
    // Every batch that started before tracking was on ends before this reply goes out; the
    // ones after it see it on (`sync_worker`). Inside EXEC no other batch runs anyway.
    if arming && !ctx.conn.in_exec {
        let _all = crate::gate::Exclusive::enter(&shared.gates, &shared.exec_lock, ctx.worker);
    }
    sync_worker(ctx.h, shared);
}

/// CLIENT TRACKING OFF, RESET and connection close (Redis's `disableTracking`): out of its
/// BCAST prefixes; its keys stay in the table until they change (as in Redis).
pub fn disable(shared: &Shared, conn: &mut crate::command::ConnState) {
    let prefixes = conn.tracking_state.as_mut().map(|s| std::mem::take(&mut s.prefixes)).unwrap_or_default();
    if conn.tracking & ON == 0 && prefixes.is_empty() {
        return;
    }
    let mut t = shared.tracking.lock();
    for p in prefixes {
        if let Some(v) = t.prefixes.get_mut(&p) {
            v.retain(|c| c.id != conn.id);
            if v.is_empty() {
                t.prefixes.remove(&p);
            }
        }
    }
    if conn.tracking & ON != 0 {
        shared.tracking.clients.fetch_sub(1, Ordering::Relaxed);
        t.clients.remove(&conn.id);
    }
    conn.tracking &= PENDING;
    conn.info.tracking.store(0, Ordering::Relaxed);
    shared.tracking.settle(&t);
}

/// The flags as CLIENT LIST shows them (`t`, `R`, `B`).
pub fn list_flags(c: &ClientInfo, out: &mut String) {
    let f = c.tracking.load(Ordering::Relaxed);
    if f & ON != 0 {
        out.push('t');
    }
    if f & BROKEN_REDIR != 0 {
        out.push('R');
    }
    if f & BCAST != 0 {
        out.push('B');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_arrays_leave_out_a_noloop_clients_own_keys() {
        let mut keys = BTreeMap::new();
        keys.insert(b"b".to_vec(), Some(7));
        keys.insert(b"a".to_vec(), None);
        keys.insert(b"c".to_vec(), Some(8));
        assert_eq!(keys_array(&keys, None), b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
        assert_eq!(keys_array(&keys, Some(7)), b"*2\r\n$1\r\na\r\n$1\r\nc\r\n");
    }
}
