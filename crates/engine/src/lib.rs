//! Larder's engine: the keyspace, living entirely in a shared [`Arena`], usable by any number
//! of threads and processes at once.
//!
//! ```text
//!   Store  (one per process: the attached arena + the journal)
//!     └─ Handle  (one per thread: a participant slot, scratch buffers)
//!          get / set / incr / expire / scan / ...   ──►  index (per db)  ──►  items
//! ```
//!
//! Reads take no lock: a [`Handle`] pins an epoch, finds the key's slot with a few atomic
//! loads, copies the value out and unpins. Writes build a new item in fresh memory, lock the
//! key's two candidate buckets, publish with one atomic store and retire the old item. Every
//! mutation hands its post-image to the [`Journal`] (a no-op until persistence plugs in).
//!
//! ```
//! use larder_engine::{Store, StoreConfig, SetOptions};
//! let store = Store::open(StoreConfig::small_for_tests()).unwrap();
//! let mut h = store.handle().unwrap();
//! h.set(0, b"greeting", b"hello", &SetOptions::default()).unwrap();
//! assert_eq!(h.get(0, b"greeting").unwrap().as_deref(), Some(&b"hello"[..]));
//! assert_eq!(h.incr_by(0, b"visits", 5).unwrap(), 5);
//! ```

mod check;
mod coll;
mod index;
mod item;
mod keyspace;
mod listtree;
mod pattern;
mod string;
mod tree;

use std::sync::Arc;

pub use check::Report;
pub use coll::{Coll, Entries, Kind, Limits};
pub use index::{split_totals, SplitTotals, MAX_DBS};
pub use item::{parse_canonical_i64, Meta, Type, MAX_VALUE, VERSION_MASK};
pub use keyspace::{
    Change, ExpireCond, ExpireRound, Handle, Hint, KeyChange, Modified, Reporting, Ttl, PREFETCH_GROUP,
};
pub use larder_arena::{monotonic_ns, Arena, Backing, Config as ArenaConfig, PageRelease};
pub use pattern::glob_match;
pub use string::{Cond, Edit, Expiry, Outcome, SetOptions, SetReply};

/// Errors of engine operations. `Display` gives the text Redis replies with where there is
/// one, so the server can map most of them directly.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Arena(#[from] larder_arena::Error),
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,
    #[error("ERR value is not an integer or out of range")]
    NotInteger,
    #[error("ERR value is not a valid float")]
    NotFloat,
    #[error("ERR increment or decrement would overflow")]
    Overflow,
    #[error("ERR increment would produce NaN or Infinity")]
    NanOrInfinity,
    #[error("ERR no such key")]
    NoSuchKey,
    #[error("ERR string exceeds maximum allowed size (proto-max-bulk-len)")]
    TooLarge,
    #[error("ERR DB index is out of range")]
    BadDb,
    #[error("ERR index is full (hash flooding?)")]
    IndexFull,
    #[error("corrupt segment: {0}")]
    Corrupt(&'static str),
}

impl Error {
    /// Whether the arena ran out of memory (Redis: `OOM command not allowed ...`).
    pub fn is_oom(&self) -> bool {
        matches!(self, Error::Arena(larder_arena::Error::Full))
    }
}

/// A post-image of one mutation, handed to the [`Journal`]. Replaying a record twice leaves
/// the same state as replaying it once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// The key now holds this string value.
    Set { db: u32, key: &'a [u8], value: &'a [u8], expire_at: u64, flags: u32 },
    /// The key no longer exists (deleted, or found expired).
    Del { db: u32, key: &'a [u8] },
    /// The database was emptied.
    FlushDb { db: u32 },
    /// Every database was emptied.
    FlushAll,
    /// The contents of two databases were exchanged.
    SwapDb { a: u32, b: u32 },
}

/// Where mutations go after they are published (persistence plugs in here).
pub trait Journal: Send + Sync {
    /// When false, the engine skips building records at all. Asked once, when the
    /// [`Store`] is made: every write checks the answer, and a plain flag is cheaper there
    /// than a call through the trait object.
    fn enabled(&self) -> bool {
        true
    }
    fn append(&self, rec: &Record<'_>);
}

/// The journal that drops everything.
pub struct NoJournal;

impl Journal for NoJournal {
    fn enabled(&self) -> bool {
        false
    }
    fn append(&self, _: &Record<'_>) {}
}

/// How to open a store.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    pub backing: Backing,
    pub arena: ArenaConfig,
    /// Logical databases (Redis `SELECT 0..n-1`), used when the arena is created.
    pub databases: u32,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig { backing: Backing::Anonymous, arena: ArenaConfig::default(), databases: 16 }
    }
}

impl StoreConfig {
    /// An anonymous 64 MiB arena: enough for tests and examples.
    pub fn small_for_tests() -> StoreConfig {
        StoreConfig {
            backing: Backing::Anonymous,
            arena: ArenaConfig { capacity: 64 << 20, max_participants: 64 },
            databases: 16,
        }
    }
}

/// The keyspace as seen by one process. Clone it freely; give each thread its own
/// [`Handle`].
#[derive(Clone)]
pub struct Store {
    inner: Arc<StoreInner>,
}

struct StoreInner {
    arena: Arc<Arena>,
    journal: Arc<dyn Journal>,
    /// `journal.enabled()`, asked once.
    journaling: bool,
    databases: u32,
    limits: Arc<Limits>,
    /// Pushes this process counted into the push sequence (see [`Store::pushes`]): begun
    /// before the sequence's bump, done after it.
    local_pushes_begun: std::sync::atomic::AtomicU32,
    local_pushes_done: std::sync::atomic::AtomicU32,
    /// This process's participant for the counts other processes read (blocked clients, push
    /// waiters), claimed at first use: a process killed with some counted has them taken
    /// back when its slot is reaped. None if the arena had no slot for it.
    counting: std::sync::OnceLock<Option<std::sync::Mutex<larder_arena::Participant>>>,
    /// Until when (Unix ms, inclusive; 0: not) reads leave the expired keys they find in
    /// place (see [`Store::keep_expired_until`]).
    keep_expired_until: std::sync::atomic::AtomicU64,
}

impl Store {
    /// Creates the arena (or attaches to an existing named segment or file) and, if it is
    /// new, lays out the empty databases.
    pub fn open(config: StoreConfig) -> Result<Store, Error> {
        Self::open_with_journal(config, Arc::new(NoJournal))
    }

    pub fn open_with_journal(config: StoreConfig, journal: Arc<dyn Journal>) -> Result<Store, Error> {
        let (arena, _created) = Arena::open_or_create(config.backing.clone(), &config.arena)?;
        Self::from_arena(arena, config.databases, journal)
    }

    /// Attaches to an existing named segment (it must exist).
    pub fn attach(name: &str) -> Result<Store, Error> {
        Self::attach_backing(Backing::Named(name.to_string()))
    }

    /// Attaches to an existing segment file (it must exist), such as one a store made with
    /// [`Backing::File`] before a restart: its keys are all there, and the participants of
    /// processes that died holding it are reaped as they are found.
    pub fn attach_file(path: &std::path::Path) -> Result<Store, Error> {
        Self::attach_backing(Backing::File(path.to_path_buf()))
    }

    /// The database count stored in the segment wins; 16 only initialises one that has no
    /// engine root yet.
    fn attach_backing(backing: Backing) -> Result<Store, Error> {
        Self::from_arena(Arena::open(backing)?, 16, Arc::new(NoJournal))
    }

    /// Uses an already attached arena; initialises the engine's root if nobody has.
    pub fn from_arena(arena: Arc<Arena>, databases: u32, journal: Arc<dyn Journal>) -> Result<Store, Error> {
        arena.set_recovery(Box::new(index::recover));
        arena.set_count_repair(Box::new(index::count_unknown));
        let databases = match index::ndb(&arena)? {
            Some(n) => n,
            None => {
                // Creation: the creator initialises while holding the lock in the root area,
                // so concurrent attachers wait rather than initialising twice.
                let p = arena.register()?;
                let init_lock = arena.u32(larder_arena::ROOT_OFF + 8)?;
                p.lock(init_lock);
                let r = match index::ndb(&arena) {
                    Ok(Some(n)) => Ok(n),
                    Ok(None) => index::init(&p, databases).map(|_| databases),
                    Err(e) => Err(e),
                };
                p.unlock(init_lock);
                r?
            }
        };
        let journaling = journal.enabled();
        Ok(Store {
            inner: Arc::new(StoreInner {
                arena,
                journal,
                journaling,
                databases,
                limits: Arc::default(),
                local_pushes_begun: Default::default(),
                local_pushes_done: Default::default(),
                counting: Default::default(),
                keep_expired_until: Default::default(),
            }),
        })
    }

    /// A handle for the calling thread (claims a participant slot).
    pub fn handle(&self) -> Result<Handle, Error> {
        Handle::new(self.clone())
    }

    pub fn arena(&self) -> &Arc<Arena> {
        &self.inner.arena
    }

    pub fn databases(&self) -> u32 {
        self.inner.databases
    }

    /// Walks every index and the allocator and checks the engine's invariants.
    pub fn check(&self) -> Result<Report, Error> {
        check::check(self)
    }

    /// The push sequence: bumped by every push onto a list or sorted set, and every list or
    /// sorted set that RENAME, COPY, MOVE or SWAPDB puts under a key (by any attached
    /// process), while some process has declared blocked clients with [`Store::add_blockers`].
    pub fn push_seq(&self) -> u32 {
        self.push_word(PUSH_SEQ).map(|w| w.load(std::sync::atomic::Ordering::Acquire)).unwrap_or(0)
    }

    /// Until `until_ms` (Unix ms, inclusive; 0 ends it at once) a read through this store
    /// that finds a key expired answers as if it were gone but leaves it in place, and
    /// [`Handle::expire_cycle`] deletes nothing: the dataset stays as it is, as Redis keeps
    /// it during CLIENT PAUSE. Writes still replace or remove the expired keys they meet.
    /// Only this process's handles obey it; other processes attached to the segment do not.
    pub fn keep_expired_until(&self, until_ms: u64) {
        self.inner.keep_expired_until.store(until_ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether expired keys are kept in place at `now_ms` (see [`Store::keep_expired_until`]).
    pub(crate) fn keeps_expired(&self, now_ms: u64) -> bool {
        now_ms <= self.inner.keep_expired_until.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The push sequence and how many of its steps this process made, so a waiter that
    /// serves its own process's pushes by other means can tell whether another process
    /// pushed (the sequence moved by more than this process did). None while a push of this
    /// process is between its two counts: the pair would not be exact, and a push of ours
    /// taken for another process's would have the waiter act on it out of order.
    pub fn pushes(&self) -> Option<(u32, u32)> {
        use std::sync::atomic::Ordering::SeqCst;
        // A push counts begun, bumps the sequence, counts done: read in the other order,
        // done <= our steps in the sequence <= begun, and equal ends make it exact.
        let done = self.inner.local_pushes_done.load(SeqCst);
        let seq = self.push_seq();
        let begun = self.inner.local_pushes_begun.load(SeqCst);
        (done == begun).then_some((seq, done))
    }

    /// Declares (`delta > 0`) or withdraws blocked clients waiting for pushes; pushes only
    /// pay for a wake-up while the total is above zero. The count is this process's share of
    /// a shared one: if it is killed, reaping its participant takes its blockers back.
    pub fn add_blockers(&self, delta: i32) {
        self.count(BLOCKERS, delta);
    }

    /// Clients blocked on pushes, in every attached process (what [`Store::add_blockers`]
    /// declared, less the shares of processes reaped since they died), and threads sleeping
    /// in [`Store::wait_push`]: what `larder segment info` prints.
    pub fn push_counts(&self) -> (u32, u32) {
        let a = &self.inner.arena;
        let get = |k| a.counter(k).map(|w| w.load(std::sync::atomic::Ordering::SeqCst)).unwrap_or(0);
        (get(BLOCKERS), get(PUSH_WAITERS))
    }

    /// Adds `delta` to shared counter `k` through this process's counting participant (or,
    /// with no slot to be had, to the counter alone, as before participants kept shares: a
    /// kill then leaves it high, so pushes pay a needless wake-up; never low).
    fn count(&self, k: usize, delta: i32) {
        use std::sync::atomic::Ordering::SeqCst;
        let p = self.inner.counting.get_or_init(|| self.inner.arena.register().ok().map(std::sync::Mutex::new));
        if let Some(p) = p {
            let _ = p.lock().unwrap_or_else(|e| e.into_inner()).count(k, delta);
        } else if let Ok(w) = self.inner.arena.counter(k) {
            w.fetch_add(delta as u32, SeqCst);
        }
    }

    /// Waits until the push sequence differs from `seen`, or `timeout` passes (a futex on
    /// the shared word, so a push from another process wakes it too).
    pub fn wait_push(&self, seen: u32, timeout: std::time::Duration) {
        use rustix::thread::futex;
        let Ok(seq) = self.push_word(PUSH_SEQ) else { return };
        self.count(PUSH_WAITERS, 1);
        if seq.load(std::sync::atomic::Ordering::SeqCst) == seen {
            let ts = rustix::time::Timespec { tv_sec: timeout.as_secs() as i64, tv_nsec: timeout.subsec_nanos() as _ };
            let _ = futex::wait(seq, futex::Flags::empty(), seen, Some(&ts));
        }
        self.count(PUSH_WAITERS, -1);
    }

    /// After a push: wakes the waiters of [`Store::wait_push`] if anyone is blocked.
    pub(crate) fn notify_push(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        // The pushed element was published with a plain release store, and a SeqCst load
        // alone (a plain load on x86) may run before that store leaves this CPU: then this
        // push could read no blockers while a client blocking right now (add_blockers, then
        // its retry) still misses the element, and it would wait forever. The fence orders
        // the publication before the check (Dekker's pattern; the blocker's side is a
        // SeqCst read-modify-write).
        std::sync::atomic::fence(SeqCst);
        let a = &self.inner.arena;
        let (Ok(seq), Ok(waiters), Ok(blockers)) =
            (self.push_word(PUSH_SEQ), a.counter(PUSH_WAITERS), a.counter(BLOCKERS))
        else {
            return;
        };
        if blockers.load(SeqCst) == 0 {
            return;
        }
        // Killed here, a process leaves a push nobody hears of (the server's watcher sweeps
        // for those).
        index::failpoint("push-announce");
        self.inner.local_pushes_begun.fetch_add(1, SeqCst);
        seq.fetch_add(1, SeqCst);
        self.inner.local_pushes_done.fetch_add(1, SeqCst);
        if waiters.load(SeqCst) > 0 {
            let _ = rustix::thread::futex::wake(seq, rustix::thread::futex::Flags::empty(), u32::MAX);
        }
    }

    fn push_word(&self, off: u64) -> Result<&std::sync::atomic::AtomicU32, Error> {
        Ok(self.inner.arena.u32(larder_arena::ROOT_OFF + off)?)
    }

    /// The collection size thresholds (CONFIG SET changes them for this process).
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    pub(crate) fn limits_arc(&self) -> Arc<Limits> {
        self.inner.limits.clone()
    }

    pub(crate) fn journal(&self) -> &dyn Journal {
        &*self.inner.journal
    }

    /// Whether mutations are journaled (the journal's `enabled`, asked when the store was
    /// made).
    #[inline]
    pub(crate) fn journaling(&self) -> bool {
        self.inner.journaling
    }
}

// Words in the engine's root area (after the magic, database count and init lock).
const PUSH_SEQ: u64 = 16;
// The arena's participant-backed counters the engine uses (`Arena::counter`): clients
// blocked on pushes in every process, and threads sleeping in `Store::wait_push`.
const BLOCKERS: usize = 0;
const PUSH_WAITERS: usize = 1;

/// Milliseconds since the Unix epoch.
#[inline]
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}
