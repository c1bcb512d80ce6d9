//! `larder server`: the engine's keyspace served over RESP2/RESP3 and the memcached text and
//! meta protocols.
//!
//! ```text
//!   N worker threads, each:  mio Poll ── its own SO_REUSEPORT listeners (RESP, memcached)
//!                               └─ its connections: read buffer → parse every complete
//!                                  request → dispatch (command table) → families → engine
//!                                  → replies appended to the write buffer → one write
//!   1 background thread:     active expiry, every 100 ms (and the end of a CLIENT PAUSE)
//!   1 watcher thread:        wakes workers holding blocked clients (BLPOP) on pushes
//!   Shared (Arc):            the Store, config, stats, client registry, slowlog, latency events,
//!                            pub/sub registry, one mailbox and one exec gate per worker,
//!                            the CLIENT PAUSE state and the MONITOR count (one relaxed
//!                            load each per command)
//! ```
//!
//! A command runs inline on the thread that read it, against the shared engine: no global
//! lock, no hop to another thread. The kernel spreads new connections over the workers'
//! listeners (SO_REUSEPORT).
//!
//! Workers talk to each other only through mailboxes: PUBLISH (and a keyspace notification,
//! see [`notify`]) appends the encoded message to the mailbox of each subscriber's worker and
//! wakes that worker, which appends it to the connection's output buffer; MONITOR lines travel
//! the same way (see [`monitor`]). EXEC makes a transaction atomic across workers with the exec
//! gates (see [`gate`]). CLIENT UNPAUSE wakes every worker to run the requests it held (see
//! [`pause`]).

pub mod acl;
pub mod blocking;
pub mod command;
pub mod config;
pub mod families;
mod floor;
pub mod gate;
pub mod latency;
pub mod lua;
pub mod monitor;
pub mod notify;
pub mod pause;
pub mod stats;
pub mod tracking;
mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use larder_engine::{ArenaConfig, Backing, Store, StoreConfig};

pub use config::{Args, Config};
use stats::{Slowlog, Stats};

/// The Redis version Larder reports (HELLO, INFO `redis_version`): the release whose
/// commands and replies it follows. Clients pick features by it. (A few additions of later
/// releases are there too, harmless to a 7.0 client: CLIENT SETINFO with CLIENT LIST's
/// `lib-name` and `lib-ver`, INFO's `pubsub_clients`, the `set-max-listpack-*` names,
/// CLIENT KILL MAXAGE.)
pub const REDIS_VERSION: &str = "7.0.15";

/// Which protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    Resp,
    Memcache,
}

/// What the server knows about one client, shared so CLIENT LIST / KILL can see clients of
/// every worker.
#[derive(Debug)]
pub struct ClientInfo {
    pub id: u64,
    pub addr: String,
    pub laddr: String,
    pub proto: Proto,
    pub worker: usize,
    /// The connection's slot in its worker (with the id, how other threads address it).
    pub slot: u32,
    pub created: Instant,
    pub name: Mutex<Vec<u8>>,
    pub lib_name: Mutex<Vec<u8>>,
    pub lib_ver: Mutex<Vec<u8>>,
    pub db: AtomicU32,
    pub resp: AtomicU8,
    /// Index of the last command in the command table (u32::MAX: none yet).
    pub last_cmd: AtomicU32,
    /// Milliseconds since server start of the last interaction.
    pub last_ms: AtomicU64,
    pub qbuf: AtomicU64,
    pub obuf: AtomicU64,
    /// Bytes of pub/sub messages in its worker's mailbox, not yet in its output buffer.
    pub pending: AtomicU64,
    pub killed: AtomicBool,
    /// Out of the registry and of `connected` (see [`Shared::forget_client`]).
    pub forgotten: AtomicBool,
    pub no_evict: AtomicBool,
    /// In MONITOR mode (CLIENT LIST flag `O`); set and cleared by [`monitor::Monitors`].
    pub monitor: AtomicBool,
    /// The socket's file descriptor (CLIENT LIST `fd`).
    pub fd: i32,
    /// Subscriptions (channels, patterns, shard channels), kept by the pub/sub family for
    /// CLIENT LIST and `TYPE pubsub`.
    pub sub: AtomicU64,
    pub psub: AtomicU64,
    pub ssub: AtomicU64,
    /// Commands queued in MULTI, or -1 outside a transaction (CLIENT LIST `multi`).
    pub multi: AtomicI64,
    /// Blocked in a blocking command (CLIENT LIST flag `b`).
    pub blocked: AtomicBool,
    /// Read buffer capacity (CLIENT LIST `qbuf-free` is what of it `qbuf` leaves).
    pub rbuf_cap: AtomicU64,
    /// The size and the recent peak use of the reply buffer Redis would keep for this
    /// client (CLIENT LIST `rbs`, `rbp`; see `worker::resize_reply_buffer`).
    pub rbs: AtomicU64,
    pub rbp: AtomicU64,
    /// Bytes held by the connection's buffers (CLIENT LIST `tot-mem`).
    pub mem: AtomicU64,
    /// CLIENT TRACKING's flags ([`tracking::ON`], ...) and redirect client id (0: none).
    pub tracking: AtomicU32,
    pub redirect: AtomicU64,
    /// Bytes of the arguments of the command it is in (CLIENT LIST `argv-mem`, Redis's
    /// `argv_len_sum`): a blocked command's, and CLIENT LIST's or INFO's own; 0 between
    /// commands.
    pub argv_mem: AtomicU64,
    /// The ACL user it is authenticated as (None: the default user), for CLIENT LIST,
    /// CLIENT KILL USER and the closing of a deleted user's clients. The connection's own
    /// `ConnState::user` is what its commands are checked against.
    pub user: Mutex<Option<Arc<acl::User>>>,
    /// Bytes its MULTI queue holds as Redis counts them (CLIENT LIST `multi-mem`: each queued
    /// command's argument bytes and 8 per argument).
    pub multi_mem: AtomicU64,
}

impl ClientInfo {
    /// A client that just connected.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: u64,
        addr: String,
        laddr: String,
        proto: Proto,
        worker: usize,
        slot: u32,
        fd: i32,
        now_ms: u64,
    ) -> ClientInfo {
        ClientInfo {
            id,
            addr,
            laddr,
            proto,
            worker,
            slot,
            created: Instant::now(),
            name: Default::default(),
            lib_name: Default::default(),
            lib_ver: Default::default(),
            db: AtomicU32::new(0),
            resp: AtomicU8::new(2),
            last_cmd: AtomicU32::new(u32::MAX),
            last_ms: AtomicU64::new(now_ms),
            qbuf: Default::default(),
            obuf: Default::default(),
            pending: Default::default(),
            killed: Default::default(),
            forgotten: Default::default(),
            no_evict: Default::default(),
            monitor: Default::default(),
            fd,
            sub: Default::default(),
            psub: Default::default(),
            ssub: Default::default(),
            multi: AtomicI64::new(-1),
            blocked: Default::default(),
            rbuf_cap: Default::default(),
            // A new client's, as Redis makes it: 16 KiB, its peak at that size.
            rbs: AtomicU64::new(16 * 1024),
            rbp: AtomicU64::new(16 * 1024),
            mem: Default::default(),
            tracking: Default::default(),
            redirect: Default::default(),
            argv_mem: Default::default(),
            user: Default::default(),
            multi_mem: Default::default(),
        }
    }

    /// Bytes the client holds (CLIENT LIST `tot-mem`, Redis's `getClientMemoryUsage`): its
    /// connection's buffers and state as its worker last recorded them (at least the read
    /// buffer and the replies waiting now, recorded at each read), the arguments of the
    /// command it is in and its MULTI queue.
    pub fn tot_mem(&self) -> u64 {
        let unsent = self.obuf.load(Ordering::Relaxed) + self.pending.load(Ordering::Relaxed);
        let buffers = self.rbuf_cap.load(Ordering::Relaxed) + unsent;
        self.mem.load(Ordering::Relaxed).max(buffers)
            + self.argv_mem.load(Ordering::Relaxed)
            + self.multi_mem.load(Ordering::Relaxed)
    }

    /// The name of its ACL user (CLIENT LIST `user=`).
    pub fn user_name(&self) -> String {
        self.user.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map_or_else(|| "default".into(), |u| u.name_str())
    }

    /// Whether it is authenticated as `user`.
    pub fn is_user(&self, user: &Arc<acl::User>, default: &Arc<acl::User>) -> bool {
        match &*self.user.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(u) => Arc::ptr_eq(u, user),
            None => Arc::ptr_eq(default, user),
        }
    }

    /// Marks the client to be closed by its worker (CLIENT KILL); the caller wakes workers.
    pub fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
    }
}

/// A message for a worker, about one of its connections (by slot, checked against the
/// client id since slots are reused), or its listener.
#[derive(Debug)]
pub enum Msg {
    /// Append a pub/sub message to the connection's output. `data` is the RESP2 encoding
    /// (an array); a RESP3 connection gets it with `>` (push) in place of the leading `*`,
    /// so one encoding serves both protocols.
    Push { client: u64, slot: u32, data: Arc<Vec<u8>> },
    /// Append a MONITOR line to the connection's output, as it is (a simple string in
    /// both protocols).
    Monitor { client: u64, slot: u32, data: Arc<Vec<u8>> },
    /// Listen for RESP clients on this listener (None: on none) instead of the one in use
    /// (CONFIG SET port).
    Listen { resp: Option<std::net::TcpListener> },
    /// Run the connection's pending input again (the hook for unblocking a client blocked
    /// in BLPOP & co. once those exist).
    Wake { client: u64, slot: u32 },
}

/// A worker's inbox: messages from other threads, and a request to look for killed clients.
#[derive(Default)]
pub struct Mailbox {
    pub msgs: Mutex<Vec<Msg>>,
    /// Set by CLIENT KILL (through [`Shared::wake_all`]): sweep killed connections.
    pub sweep: AtomicBool,
    /// Set by the blocking watcher ([`blocking::RETRY_FOREIGN`]: another process pushed;
    /// [`blocking::RETRY_SWEEP`]: its periodic sweep): retry the keys of the worker's
    /// parked clients. Other wake-ups do not: a worker woken by a pub/sub message in the
    /// middle of another worker's push must not serve a client before that push's command
    /// has published its events and served its own waiters.
    pub retry_parked: AtomicU32,
    /// The notify-keyspace-events flags the worker's engine handle records for (see
    /// [`notify::sync_worker`]).
    pub notify_flags: AtomicU32,
    /// Set when messages were appended: the worker delivers them before it reads its
    /// connections (the waker's event may come after theirs in a round).
    pub posted: AtomicBool,
}

/// Everything the workers share.
pub struct Shared {
    pub store: Store,
    pub config: Config,
    /// ACL users and the ACL log.
    pub acl: acl::Acl,
    pub stats: Stats,
    pub clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    pub next_client_id: AtomicU64,
    pub connected: AtomicU64,
    pub slowlog: Mutex<Slowlog>,
    /// The latency monitor's events (LATENCY LATEST, HISTORY, …).
    pub latency: Mutex<latency::Events>,
    /// When the server started, in [`larder_engine::monotonic_ns`]'s nanoseconds.
    pub started: u64,
    pub run_id: String,
    pub shutdown: AtomicBool,
    /// Wakers of the worker event loops (to act on CLIENT KILL and SHUTDOWN at once).
    pub wakers: OnceLock<Vec<Arc<mio::Waker>>>,
    /// The RESP and memcached ports bound at startup (CONFIG SET port may move RESP since:
    /// `config.port` says where it is).
    pub tcp_ports: OnceLock<(u16, u16)>,
    /// Active expiry runs (DEBUG SET-ACTIVE-EXPIRE 0 pauses it, as tests of lazy expiry need).
    pub active_expire: AtomicBool,
    /// Per database: INFO keyspace's `avg_ttl` (ms), Redis's running estimate from the keys
    /// active expiry samples (0 while none has been sampled or none has an expiry).
    pub avg_ttl: Vec<AtomicU64>,
    /// Clients blocked in BLPOP & co. (INFO `blocked_clients`), kept by [`blocking`].
    pub blocked_clients: AtomicU64,
    /// Which client waits on which key, in blocking order (see [`blocking`]).
    pub blocking: blocking::Registry,
    /// Unix time (seconds) the server started: LASTSAVE and `rdb_last_save_time` until
    /// persistence exists.
    pub started_unix: u64,
    /// Channel and pattern subscriptions of every client.
    pub pubsub: families::pubsub::Registry,
    /// One per worker.
    pub mailboxes: Vec<Mailbox>,
    /// One per worker: held while the worker executes a batch (see [`gate`]).
    pub gates: Vec<gate::Gate>,
    /// Held by an EXEC while it takes every gate.
    pub exec_lock: Mutex<()>,
    /// The memcached side's counters, delayed flush and meta marks.
    pub memcache: Arc<families::memcache::McServer>,
    /// CLIENT PAUSE (see [`pause`]).
    pub pause: pause::Pause,
    /// Keys watched while absent (see [`families::multi`]).
    pub watches: families::multi::AbsentWatches,
    /// The Lua script cache (see [`lua`]).
    pub scripts: lua::Scripts,
    /// The function libraries (FUNCTION LOAD).
    pub functions: lua::Libraries,
    /// The clients in MONITOR mode (see [`monitor`]).
    pub monitors: monitor::Monitors,
    /// Client-side caching: the tracking table and BCAST prefixes (see [`tracking`]).
    pub tracking: tracking::Tracking,
    /// DEBUG PAUSE-CRON: the background thread's rounds (active expiry, the tracking table's
    /// limit) are skipped while set.
    pub cron_paused: AtomicBool,
    /// The keyspace as the server found it at start (INFO memory's `used_memory_startup`,
    /// persistence's `rdb_last_load_keys_loaded`).
    pub at_start: AtStart,
}

/// What the store held when the server started, before any client.
#[derive(Debug, Default, Clone, Copy)]
pub struct AtStart {
    /// Redis's `initial_memory_usage` (INFO `used_memory_startup`): what the server takes
    /// with no data and no client. A fresh store's used bytes (its databases' empty indexes,
    /// the allocator's first pages); for a `--shm` segment that already held keys, which
    /// count as data as Redis's loaded keys do, only its indexes.
    pub used: u64,
    /// Bytes of the databases' indexes then (what of `used_memory_overhead` was there at
    /// start; the index's growth since is added to it).
    pub index: u64,
    /// Keys the segment held: a server started on an existing `--shm` segment serves them
    /// as Redis serves the keys it loaded from its RDB file (0 for a fresh store).
    pub keys: u64,
}

impl AtStart {
    fn measure(store: &Store) -> Result<AtStart, String> {
        let h = store.handle().map_err(|e| e.to_string())?;
        let (mut index, mut keys) = (0, 0);
        for db in 0..store.databases() {
            index += h.index_bytes(db).map_err(|e| e.to_string())?;
            keys += h.dbsize(db).map_err(|e| e.to_string())?;
        }
        let used = if keys == 0 { store.arena().used_bytes() } else { index };
        Ok(AtStart { used, index, keys })
    }
}

impl Shared {
    /// Bytes the connected clients hold, RESP and memcached alike: the sum of their
    /// `tot-mem` (INFO `mem_clients_normal`; Redis sums its normal, pub/sub and master
    /// clients' there, and Larder has no replicas).
    pub fn clients_memory(&self) -> u64 {
        self.clients.lock().unwrap_or_else(|e| e.into_inner()).values().map(|c| c.tot_mem()).sum()
    }

    /// INFO's `used_memory`, as Redis's zmalloc counts it: the bytes allocated in the arena
    /// and not freed (the keyspace, its indexes, the free tail of pages being carved), and
    /// the clients' buffers, which Larder keeps on the process heap. Returns both parts.
    pub fn used_memory(&self) -> (u64, u64) {
        (self.store.arena().used_bytes(), self.clients_memory())
    }

    /// Milliseconds since the server started.
    pub fn uptime_ms(&self) -> u64 {
        self.uptime_ms_at(larder_engine::monotonic_ns())
    }

    /// Milliseconds from the server's start to `ns` (a [`larder_engine::monotonic_ns`] time).
    pub fn uptime_ms_at(&self, ns: u64) -> u64 {
        ns.saturating_sub(self.started) / 1_000_000
    }

    /// Wakes every worker to sweep killed clients (after CLIENT KILL, or on shutdown).
    pub fn wake_all(&self) {
        for m in &self.mailboxes {
            m.sweep.store(true, Ordering::Release);
        }
        if let Some(w) = self.wakers.get() {
            for w in w {
                let _ = w.wake();
            }
        }
    }

    /// Wakes every worker's event loop (a pause ended: they run their paused clients).
    pub fn wake_workers(&self) {
        if let Some(w) = self.wakers.get() {
            for w in w {
                let _ = w.wake();
            }
        }
    }

    /// CLIENT KILL: the client is gone at once for everyone else, as Redis frees it at once
    /// (out of CLIENT LIST and `connected_clients`); its worker closes the socket when it
    /// sweeps, which the caller asks for.
    pub fn kill_client(&self, c: &ClientInfo) {
        c.kill();
        self.forget_client(c);
    }

    /// Takes a client out of the registry and the connected count, once: at CLIENT KILL or
    /// when its connection closes, whichever comes first.
    pub fn forget_client(&self, c: &ClientInfo) {
        if !c.forgotten.swap(true, Ordering::AcqRel) {
            self.clients.lock().unwrap_or_else(|e| e.into_inner()).remove(&c.id);
            self.connected.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Appends messages to a worker's mailbox and wakes it if the mailbox was empty: one
    /// that was not has a wake-up on its way already (whoever filled it sent one, and the
    /// worker empties the mailbox whole when it wakes), so a burst of publishes costs the
    /// receiving worker one wake-up, not one system call per message.
    pub fn send(&self, worker: usize, msgs: impl IntoIterator<Item = Msg>) {
        let Some(m) = self.mailboxes.get(worker) else { return };
        let was_empty = {
            let mut q = m.msgs.lock().unwrap_or_else(|e| e.into_inner());
            let was_empty = q.is_empty();
            q.extend(msgs);
            was_empty
        };
        m.posted.store(true, Ordering::Release);
        if was_empty {
            if let Some(w) = self.wakers.get().and_then(|w| w.get(worker)) {
                let _ = w.wake();
            }
        }
    }
}

/// A running server.
pub struct Server {
    pub shared: Arc<Shared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Server {
    /// Opens the store, binds the listeners and starts the workers. Returns once every
    /// listener is bound (so a caller can connect right away).
    pub fn start(mut config: Config) -> Result<Server, String> {
        let mut arena = ArenaConfig::default();
        if let Some(c) = config.capacity {
            // The arena is sized in whole 64 KiB allocator pages.
            arena.capacity = c / (64 << 10) * (64 << 10);
        }
        arena.max_participants = (config.threads as u32 + 64).min(1023);
        let backing = match &config.shm {
            Some(name) => Backing::Named(name.clone()),
            None => Backing::Anonymous,
        };
        let store =
            Store::open(StoreConfig { backing, arena, databases: config.databases }).map_err(|e| e.to_string())?;
        config.sync_limits(store.limits());
        // An existing segment (`--shm` of one a local process or an earlier server made)
        // keeps the database count it was made with: that count is what SELECT, INFO and
        // active expiry go by, so CONFIG GET databases reports it too.
        if store.databases() != config.databases {
            tracing::warn!(
                "the segment has {} databases: --databases {} does not apply to it",
                store.databases(),
                config.databases
            );
            config.databases = store.databases();
        }
        // An earlier server killed on this segment (or a local process) may have left
        // participants behind: reaped now, not when first met.
        let reaped = store.arena().reap_dead();
        if reaped > 0 {
            tracing::info!("reaped {reaped} participants of processes that died attached to the segment");
        }
        let at_start = AtStart::measure(&store)?;
        let acl = acl::startup(&config)?;
        let run_id = {
            let mut b = [0u8; 20];
            let _ = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
            b.iter().map(|x| format!("{x:02x}")).collect::<String>()
        };
        let (threads, databases) = (config.threads, config.databases);
        let shared = Arc::new(Shared {
            store,
            stats: Stats::new(threads + 1),
            config,
            acl,
            clients: Mutex::new(HashMap::new()),
            next_client_id: AtomicU64::new(1),
            connected: AtomicU64::new(0),
            slowlog: Mutex::new(Slowlog::default()),
            latency: Mutex::new(latency::Events::default()),
            started: larder_engine::monotonic_ns(),
            run_id,
            shutdown: AtomicBool::new(false),
            wakers: OnceLock::new(),
            tcp_ports: OnceLock::new(),
            active_expire: AtomicBool::new(true),
            avg_ttl: (0..databases).map(|_| AtomicU64::new(0)).collect(),
            blocked_clients: AtomicU64::new(0),
            blocking: blocking::Registry::new(threads),
            started_unix: larder_engine::now_ms() / 1000,
            pubsub: Default::default(),
            mailboxes: (0..threads).map(|_| Mailbox::default()).collect(),
            gates: (0..threads).map(|_| gate::Gate::default()).collect(),
            exec_lock: Mutex::new(()),
            memcache: Arc::new(families::memcache::McServer::new(threads)),
            pause: Default::default(),
            watches: Default::default(),
            scripts: Default::default(),
            functions: Default::default(),
            monitors: Default::default(),
            tracking: tracking::Tracking::new(threads),
            cron_paused: AtomicBool::new(false),
            at_start,
        });
        // Where the blocking watcher starts counting pushes from: taken here, before any
        // worker can block a client, not in the watcher thread (which may first run after a
        // client blocked and another process pushed: that push would then be its starting
        // point, and the client would wait for a wake-up already spent).
        let pushes = blocking::Pushes::now(&shared.store);
        let (workers, wakers, ports) = worker::spawn_all(&shared)?;
        let _ = shared.wakers.set(wakers);
        let _ = shared.tcp_ports.set(ports);
        let mut handles = workers;
        let watcher = shared.clone();
        handles.push(
            std::thread::Builder::new()
                .name("larder-blocking".into())
                .spawn(move || blocking::watch(watcher, pushes))
                .map_err(|e| e.to_string())?,
        );
        let bg = shared.clone();
        handles.push(
            std::thread::Builder::new()
                .name("larder-expire".into())
                .spawn(move || background(bg))
                .map_err(|e| e.to_string())?,
        );
        Ok(Server { shared, threads: handles })
    }

    /// The RESP and memcached ports bound at startup (port 0 turns a protocol off, so tests
    /// pick free ports themselves).
    pub fn ports(&self) -> (u16, u16) {
        *self.shared.tcp_ports.get().unwrap_or(&(0, 0))
    }

    /// Asks every thread to stop.
    pub fn stop(&self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.wake_all();
    }

    /// Waits for every thread to finish.
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

/// Every 100 ms: active expiry, as Redis's `activeExpireCycle` (sample each database and
/// keep going while more than a quarter of the sampled keys with a TTL had expired, at most
/// 25 ms a round), then the instantaneous rates and the memory peak for INFO. Every
/// [`REAP_EVERY`] rounds: reaps the participants of processes that died attached to the
/// segment.
fn background(shared: Arc<Shared>) {
    let Ok(mut h) = shared.store.handle() else { return };
    // The keys active expiry deletes are always reported: a client may start tracking one
    // while a round runs (see `tracking`), and it costs only the expired keys.
    h.report(larder_engine::Reporting { modified: true, ..h.reporting() });
    let mut sampler = stats::Sampler::default();
    let mut round = 0u64;
    let mut pages_seen = larder_engine::PageRelease::default();
    while !shared.shutdown.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        round += 1;
        if round.is_multiple_of(REAP_EVERY) {
            reap_dead(&shared);
            // Whole free pages of one size class go back to the pool (a FLUSHALL of small
            // values, then bigger ones, does not keep both sets of pages). Idle workers
            // hand over the blocks they cache; this thread does the same first.
            let _ = h.flush_free_lists();
            if let Ok(n @ 1..) = h.release_free_pages(&mut pages_seen) {
                tracing::debug!("gave {n} free pages of small size classes back");
            }
        }
        sampler.sample(&shared.stats);
        if shared.cron_paused.load(Ordering::Relaxed) {
            continue;
        }
        if shared.tracking.armed() {
            tracking::enforce_limit(&shared);
        }
        let (arena, clients) = shared.used_memory();
        shared.stats.peak_memory.fetch_max(arena + clients, Ordering::Relaxed);
        // A CLIENT PAUSE past its deadline ends here if no command or paused client saw it
        // end (as Redis's cron ends it).
        if shared.pause.refresh(&shared.store, larder_engine::now_ms() as i64) {
            shared.wake_workers();
        }
        let start = Instant::now();
        // Keys this round expires are notified ("expired") when the flags ask for it.
        notify::sync(&h, &shared);
        // DEBUG SET-ACTIVE-EXPIRE 0 leaves expired keys to lazy expiry only; a pause keeps
        // them all (the engine's expiry cycle deletes nothing then).
        let databases = if shared.active_expire.load(Ordering::Relaxed) { shared.store.databases() } else { 0 };
        for db in 0..databases {
            // As Redis: a database without keys with an expiry is skipped and its average
            // TTL is 0.
            let avg_ttl = &shared.avg_ttl[db as usize];
            if h.expires(db).unwrap_or(0) == 0 {
                avg_ttl.store(0, Ordering::Relaxed);
                continue;
            }
            while let Ok(r) = h.expire_cycle(db, 64) {
                tracking::flush_detached(&shared, &h, shared.config.threads);
                // (The handle counts the keys it deleted: `take_expired` below.)
                if let Some(avg) = r.ttl_sum_ms.checked_div(r.ttl_samples) {
                    avg_ttl.store(running_avg_ttl(avg_ttl.load(Ordering::Relaxed), avg), Ordering::Relaxed);
                }
                if r.examined == 0 || r.deleted * 4 <= r.examined || start.elapsed() > Duration::from_millis(25) {
                    break;
                }
            }
        }
        notify::flush_detached(&shared, &h);
        tracking::broadcast_due(&shared, shared.config.threads);
        shared.stats.worker(shared.config.threads).expired_keys.add(h.take_expired());
        let _ = h.collect();
    }
}

/// Rounds of [`background`] (100 ms each) between two reaps of dead participants.
const REAP_EVERY: u64 = 10;

/// Reaps the participants of processes that died attached to the segment (a local process
/// killed, an earlier server): one lock query per participant. Otherwise a dead process is
/// reaped only by whoever meets one of its locks or its pinned epoch, and until then what
/// it left half done stays so: an MSET it was publishing (readers see some of its keys
/// new), a push it had not announced, its slot and the memory it had retired. Then frees
/// what free slots (reaped ones, and those of processes that left) had retired and was not
/// ripe when they were freed.
fn reap_dead(shared: &Shared) {
    let n = shared.store.arena().reap_dead();
    if n > 0 {
        tracing::info!("reaped {n} participants of processes that died attached to the segment");
    }
    shared.store.arena().collect_free_slots();
}

/// Redis's running estimate of a database's average TTL: the first sample as it is, then
/// 2% of each new sample's average and 98% of the estimate (`activeExpireCycle`).
fn running_avg_ttl(avg: u64, sample: u64) -> u64 {
    let avg = if avg == 0 { sample } else { avg };
    (avg / 50) * 49 + sample / 50
}

/// `larder server`: runs until SIGTERM / SIGINT or SHUTDOWN.
pub fn run(args: &Args) -> Result<(), String> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_target(false)
        .try_init();
    let config = Config::load(args)?;
    let server = Server::start(config)?;
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, term.clone()).map_err(|e| e.to_string())?;
    }
    let (rp, mp) = server.ports();
    tracing::info!(
        resp = rp,
        memcache = mp,
        threads = server.shared.config.threads,
        "Ready to accept connections (RESP on {}, memcached on {})",
        if rp == 0 { "off".to_string() } else { format!("{}:{rp}", server.shared.config.bind) },
        if mp == 0 { "off".to_string() } else { format!("{}:{mp}", server.shared.config.bind) },
    );
    while !term.load(Ordering::Relaxed) && !server.shared.shutdown.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    tracing::info!("shutting down");
    server.stop();
    server.join();
    if let Some(name) = &args.shm {
        tracing::info!("segment {name} stays in /dev/shm for local processes");
    }
    Ok(())
}

#[cfg(test)]
mod avg_ttl_tests {
    use super::running_avg_ttl;

    #[test]
    fn the_first_sample_sets_the_average_then_each_weighs_two_percent() {
        assert_eq!(running_avg_ttl(0, 10_000), 10_000);
        assert_eq!(running_avg_ttl(10_000, 20_000), 10_200);
        // Integer arithmetic as Redis's: (avg/50)*49 + sample/50.
        assert_eq!(running_avg_ttl(1_000, 49), 980);
    }
}
