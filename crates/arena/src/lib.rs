//! The arena: one shared mapping that every Larder process attaches to.
//!
//! ```text
//!   offset 0        header: magic, layout version, geometry, global epoch, allocator roots,
//!                   and a 4 KiB root area the engine owns (database directories)
//!   HEADER_SIZE     participant table: one 128-byte slot per attached thread
//!                   (pid, start time, generation, epoch, intent, retire list)
//!   caches_off      per-participant allocator caches: one 16-byte entry per size class
//!   pagedesc_off    one u32 per 64 KiB page: which size class the page serves, or a large run
//!   data_off        pages: small blocks carved by size class, or runs for large values
//! ```
//!
//! Everything refers to everything else by **offset** from the base (stored as `u32` units of
//! 8 bytes, so an arena is at most 32 GiB), so each process may map the arena anywhere.
//!
//! # The protocols kept here
//!
//! - **Participants.** Each thread that touches the arena claims a slot ([`Participant`]). A
//!   slot records its pid and the process start time, so a dead process is recognised even
//!   after its pid is reused, and its owner holds a lock on the slot's byte of the segment
//!   file that the kernel releases when the process dies, which holds across pid namespaces
//!   (see `participant.rs`, "Liveness"). Whoever finds a dead participant reaps it: finishes its
//!   recorded intent (see below), then bumps the slot's generation and frees the slot. The
//!   dead thread's allocator cache goes to the global stacks (a thread that leaves hands
//!   its own over the same way), and its retire list, not yet ripe, stays with the slot for
//!   the next thread that claims it; nothing has to be undone because published memory is
//!   immutable.
//! - **Epochs.** Readers take no lock: they [`Participant::pin`] (publish "active at epoch
//!   E"), read, and unpin. Memory unlinked by a writer is [`Participant::retire`]d with the
//!   current epoch and reused only once the global epoch is two ahead, which can only
//!   happen after every live participant has left the epoch in which it might have seen it.
//! - **Locks** ([`Participant::lock`]) are `u32` words holding the owner's slot and
//!   generation. A waiter that finds the owner's generation changed, or its process dead,
//!   takes the lock over (after reaping the owner).
//! - **Intents.** An operation that must publish several words at once (an index split, an
//!   atomic multi-key set) first builds everything in fresh memory, takes its locks, writes
//!   an intent record and stores its offset in the slot. If the process dies, the reaper
//!   calls the registered [`RecoveryHandler`] to redo the publication before freeing the
//!   dead slot's locks. Redo is idempotent.
//! - **Allocation** is by size class from per-participant caches (no shared atomics on the
//!   fast path), refilled in batches from lock-free per-class stacks and, when those are
//!   empty, from fresh pages. Values above 32 KiB take whole runs of pages; a freed run
//!   merges with its free neighbours and keeps its pages resident for
//!   [`DIRTY_DECAY_MS`] (at most 64 MiB of them), until [`Participant::purge_dirty`] gives
//!   them back to the kernel.
//!
//! All `unsafe` of the project lives in [`map`](crate::map), beneath safe accessors.

mod alloc;
mod map;
mod participant;

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
#[cfg(test)]
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

pub use alloc::{class_of, class_size, AllocStats, PageRelease, DIRTY_DECAY_MS, LARGE_MIN, NCLASSES};
pub use map::monotonic_ns;
pub use participant::{Guard, Participant, SlotInfo};

use map::Mapping;

/// `b"LARDER\0\x01"`, little-endian.
pub const MAGIC: u64 = u64::from_le_bytes(*b"LARDER\x00\x01");
/// Bumped whenever any shared layout changes; attaching to another version is refused.
pub const LAYOUT_VERSION: u32 = 7;
/// Granularity of stored offsets: offsets are `u32` counts of 8-byte units.
pub const UNIT: u64 = 8;
/// The largest arena a `u32` unit offset can address.
pub const MAX_CAPACITY: u64 = (u32::MAX as u64 + 1) * UNIT;
/// Page size of the allocator (not the OS page).
pub const PAGE: u64 = 64 * 1024;
/// Size of the header, including the engine's root area.
pub const HEADER_SIZE: u64 = 8192;
/// Size of a participant slot.
pub const SLOT_SIZE: u64 = 128;
/// Offset and size of the area of the header the engine owns.
pub const ROOT_OFF: u64 = 4096;
pub const ROOT_SIZE: u64 = 4096;
/// How many participant-backed counters the header has (see [`Arena::counter`]).
pub const COUNTERS: usize = 4;
/// Most participants an arena supports (a lock word keeps 10 bits of slot index).
pub const MAX_PARTICIPANTS: u32 = 1023;

// Header fields (byte offsets). Hot atomics sit on cache lines of their own.
pub(crate) const H_MAGIC: u64 = 0;
pub(crate) const H_VERSION: u64 = 8; // u32
pub(crate) const H_HEADER_SIZE: u64 = 12; // u32
pub(crate) const H_CAPACITY: u64 = 16;
pub(crate) const H_MAX_PART: u64 = 24; // u32
pub(crate) const H_NCLASSES: u64 = 28; // u32
pub(crate) const H_PART_OFF: u64 = 32;
pub(crate) const H_CACHE_OFF: u64 = 40;
pub(crate) const H_PAGEDESC_OFF: u64 = 48;
pub(crate) const H_DATA_OFF: u64 = 56;
pub(crate) const H_SEED: u64 = 64;
pub(crate) const H_SLOT_HWM: u64 = 72; // u32: one past the highest slot ever claimed
pub(crate) const H_EPOCH: u64 = 128;
pub(crate) const H_PAGE_NEXT: u64 = 192; // next never-used page index
pub(crate) const H_LARGE_LOCK: u64 = 256; // u32 lock word
pub(crate) const H_LARGE_HEAD: u64 = 264; // unit offset of the first free large run
pub(crate) const H_LARGE_FREE_PAGES: u64 = 272;
// Pages of free runs whose memory may still be resident (an over-estimate), and the oldest
// such run's free time (monotonic ms; 0 = none): see `Participant::purge_dirty`.
pub(crate) const H_LARGE_DIRTY_PAGES: u64 = 280;
pub(crate) const H_LARGE_DIRTY_OLDEST: u64 = 288;
pub(crate) const H_VERSION_CTR: u64 = 320;
/// [`COUNTERS`] u32 words: counts that processes add to and others read, each backed by
/// its participants' shares (see [`Participant::count`]).
pub(crate) const H_COUNTERS: u64 = 384;
/// u64: participants reaped so far (see [`Arena::reaps`]).
pub(crate) const H_REAPS: u64 = 400;
// (408: the one page-release mark of layout 6, now H_RELEASING's per-class marks.)
/// u64, under the large lock: at least the length in pages of the longest free run (exact
/// after a walk that found none long enough), so a large allocation skips a walk that
/// cannot succeed (many one-page runs from page releases would make every one slow).
pub(crate) const H_LARGE_MAX_RUN: u64 = 416;
pub(crate) const H_CLASS_STACKS: u64 = 512; // NCLASSES × u64 (tag:32 | unit offset:32)
/// NCLASSES × u64: how many blocks each class's stack holds (at least: a pusher counts its
/// batch before it pushes it, a popper after it has it), for [`Arena::used_bytes`].
pub(crate) const H_STACK_BLOCKS: u64 = 2048;
/// NCLASSES × u64: each class's page-release mark, how many releases hold the class's stack
/// and when the last began (see `alloc::release_mark`): an allocation that finds the arena
/// full waits while a release of any class is under way. One per class, and a count, so
/// that a release ending does not clear the mark of another one running beside it (the
/// server's and a local process's).
pub(crate) const H_RELEASING: u64 = 2816;
const _: () = assert!(H_CLASS_STACKS + 8 * NCLASSES as u64 <= H_STACK_BLOCKS);
const _: () = assert!(H_STACK_BLOCKS + 8 * NCLASSES as u64 <= H_RELEASING);
const _: () = assert!(H_RELEASING + 8 * NCLASSES as u64 <= ROOT_OFF);

/// Errors of the arena. None of them is a panic: a corrupt or foreign segment, an offset out
/// of range or a full arena is reported to the caller.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("not a Larder segment (bad magic)")]
    BadMagic,
    #[error("segment has layout version {found}, this build understands {expected}")]
    Version { found: u32, expected: u32 },
    #[error("segment geometry is invalid: {0}")]
    Geometry(&'static str),
    #[error("offset {off} (+{size}) is outside the arena or misaligned")]
    OutOfRange { off: u64, size: u64 },
    #[error("arena is full")]
    Full,
    #[error("all {0} participant slots are in use")]
    NoSlot(u32),
    #[error("invalid segment name {0:?}: use 1-200 characters of [A-Za-z0-9_.-]")]
    BadName(String),
    #[error("segment {0:?} already exists")]
    Exists(String),
    #[error("segment {0:?} does not exist")]
    NotFound(String),
    #[error("segment is still being initialised by its creator")]
    NotReady,
}

/// Where the arena's memory comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// An anonymous memfd: the embedded default, nothing to configure, gone with the process
    /// (other processes can still attach through `/proc/PID/fd/N`).
    Anonymous,
    /// A named POSIX shared-memory segment, `/dev/shm/larder-NAME`, that local processes
    /// attach to by name. It outlives the processes until [`Arena::unlink`].
    Named(String),
    /// A file: the mapping is the file, so its contents survive a restart.
    File(PathBuf),
}

/// Geometry chosen when a segment is created.
#[derive(Clone, Debug)]
pub struct Config {
    /// Bytes of address space reserved (sparse: memory is used only as pages are touched).
    pub capacity: u64,
    /// Participant slots (threads attached at once, across all processes).
    pub max_participants: u32,
}

impl Default for Config {
    fn default() -> Self {
        Config { capacity: default_capacity(), max_participants: 256 }
    }
}

/// Half the machine's memory, at most [`MAX_CAPACITY`], rounded to pages. Sparse, so
/// reserving it costs nothing until used.
pub fn default_capacity() -> u64 {
    let total = rustix::system::sysinfo();
    let ram = total.totalram as u64 * total.mem_unit as u64;
    ((ram / 2).clamp(64 << 20, MAX_CAPACITY)) / PAGE * PAGE
}

/// Called by a reaper to finish a dead participant's intent. `intent` is the offset stored
/// with [`Participant::set_intent`]. It must only store words (no locks, no allocation).
pub type RecoveryHandler = Box<dyn Fn(&Arena, u64) -> Result<(), Error> + Send + Sync>;

/// An attached arena. Cheap to share between threads (`Arc<Arena>`); each thread then claims
/// its own [`Participant`].
pub struct Arena {
    map: Mapping,
    /// The segment's file. Also asks the kernel whether a participant's liveness lock is
    /// held (participants lock through descriptions of their own, see `participant.rs`).
    fd: OwnedFd,
    backing: Backing,
    // Geometry, read once from the header and validated.
    max_participants: u32,
    part_off: u64,
    cache_off: u64,
    pagedesc_off: u64,
    data_off: u64,
    seed: u64,
    recovery: OnceLock<RecoveryHandler>,
    count_repair: OnceLock<RecoveryHandler>,
    /// Unlocks through this attachment that found their lock word no longer theirs (see
    /// [`Participant::unlock`]): the invariant checker reports them.
    unlock_mismatches: AtomicU64,
    /// Tests: treat every owner as living in another pid namespace (lock only, no /proc).
    #[cfg(test)]
    all_foreign_for_tests: AtomicBool,
    #[cfg(test)]
    reaps_for_tests: AtomicU64,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena").field("backing", &self.backing).field("capacity", &self.capacity()).finish()
    }
}

fn shm_name(name: &str) -> Result<String, Error> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        && name != "."
        && name != "..";
    if ok {
        Ok(format!("/larder-{name}"))
    } else {
        Err(Error::BadName(name.to_string()))
    }
}

struct Geometry {
    part_off: u64,
    cache_off: u64,
    pagedesc_off: u64,
    data_off: u64,
}

fn geometry(capacity: u64, max_participants: u32) -> Result<Geometry, Error> {
    if !capacity.is_multiple_of(PAGE) || capacity > MAX_CAPACITY {
        return Err(Error::Geometry("capacity must be a multiple of 64 KiB and at most 32 GiB"));
    }
    if max_participants == 0 || max_participants > MAX_PARTICIPANTS {
        return Err(Error::Geometry("max_participants must be 1..=1023"));
    }
    let part_off = HEADER_SIZE;
    let cache_off = part_off + max_participants as u64 * SLOT_SIZE;
    let pagedesc_off = cache_off + max_participants as u64 * NCLASSES as u64 * alloc::CACHE_ENTRY;
    let data_off = (pagedesc_off + capacity / PAGE * 4).div_ceil(PAGE) * PAGE;
    if data_off + 16 * PAGE > capacity {
        return Err(Error::Geometry("capacity too small for its metadata"));
    }
    Ok(Geometry { part_off, cache_off, pagedesc_off, data_off })
}

impl Arena {
    /// Creates a new segment and initialises its header. A named segment or file that
    /// already exists is an error ([`Error::Exists`]); use [`Arena::open_or_create`] to attach
    /// to it instead.
    pub fn create(backing: Backing, config: &Config) -> Result<Arc<Arena>, Error> {
        let g = geometry(config.capacity, config.max_participants)?;
        let fd: OwnedFd = match &backing {
            Backing::Anonymous => {
                rustix::fs::memfd_create("larder", rustix::fs::MemfdFlags::CLOEXEC).map_err(|e| Error::Io(e.into()))?
            }
            Backing::Named(name) => {
                let path = shm_name(name)?;
                rustix::shm::open(
                    path.as_str(),
                    rustix::shm::OFlags::CREATE | rustix::shm::OFlags::EXCL | rustix::shm::OFlags::RDWR,
                    rustix::fs::Mode::from_raw_mode(0o600),
                )
                .map_err(|e| {
                    if e == rustix::io::Errno::EXIST {
                        Error::Exists(name.clone())
                    } else {
                        Error::Io(e.into())
                    }
                })?
            }
            Backing::File(path) => std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)
                .map_err(|e| {
                    if e.kind() == std::io::ErrorKind::AlreadyExists {
                        Error::Exists(path.display().to_string())
                    } else {
                        Error::Io(e)
                    }
                })?
                .into(),
        };
        let file = File::from(fd);
        // Sparse: no memory or disk is used until pages are touched.
        file.set_len(config.capacity)?;
        let map = Mapping::new(&file, config.capacity)?;
        let seed = {
            // Per-segment hash seed against collision flooding; every attached process reads it.
            let mut b = [0u8; 8];
            let _ = rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty());
            u64::from_le_bytes(b)
        };
        let arena = Arena::assemble(map, file, backing, config.max_participants, &g, seed)?;
        arena.u32(H_VERSION)?.store(LAYOUT_VERSION, Ordering::Relaxed);
        arena.u32(H_HEADER_SIZE)?.store(HEADER_SIZE as u32, Ordering::Relaxed);
        arena.u64(H_CAPACITY)?.store(config.capacity, Ordering::Relaxed);
        arena.u32(H_MAX_PART)?.store(config.max_participants, Ordering::Relaxed);
        arena.u32(H_NCLASSES)?.store(NCLASSES as u32, Ordering::Relaxed);
        arena.u64(H_PART_OFF)?.store(g.part_off, Ordering::Relaxed);
        arena.u64(H_CACHE_OFF)?.store(g.cache_off, Ordering::Relaxed);
        arena.u64(H_PAGEDESC_OFF)?.store(g.pagedesc_off, Ordering::Relaxed);
        arena.u64(H_DATA_OFF)?.store(g.data_off, Ordering::Relaxed);
        arena.u64(H_SEED)?.store(seed, Ordering::Relaxed);
        arena.u64(H_EPOCH)?.store(2, Ordering::Relaxed);
        arena.u64(H_PAGE_NEXT)?.store(g.data_off / PAGE, Ordering::Relaxed);
        arena.u64(H_VERSION_CTR)?.store(1, Ordering::Relaxed);
        // The magic goes last: an attacher that sees it sees a complete header.
        arena.u64(H_MAGIC)?.store(MAGIC, Ordering::Release);
        Ok(Arc::new(arena))
    }

    /// Attaches to an existing segment, validating its header.
    pub fn open(backing: Backing) -> Result<Arc<Arena>, Error> {
        let fd: OwnedFd = match &backing {
            Backing::Anonymous => return Err(Error::Geometry("an anonymous arena cannot be opened by name")),
            Backing::Named(name) => {
                let path = shm_name(name)?;
                rustix::shm::open(path.as_str(), rustix::shm::OFlags::RDWR, rustix::fs::Mode::empty()).map_err(|e| {
                    if e == rustix::io::Errno::NOENT {
                        Error::NotFound(name.clone())
                    } else {
                        Error::Io(e.into())
                    }
                })?
            }
            Backing::File(path) => std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(path)
                .map_err(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Error::NotFound(path.display().to_string())
                    } else {
                        Error::Io(e)
                    }
                })?
                .into(),
        };
        Self::attach_fd(fd, backing)
    }

    /// Attaches to the segment behind an open file descriptor (for example an anonymous
    /// arena reached through `/proc/PID/fd/N`).
    pub fn attach_fd(fd: OwnedFd, backing: Backing) -> Result<Arc<Arena>, Error> {
        let file = File::from(fd);
        let mut len = file.metadata()?.len();
        // A creator may be between creating the file and sizing it: wait a moment.
        for _ in 0..200 {
            if len >= HEADER_SIZE {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            len = file.metadata()?.len();
        }
        if len < HEADER_SIZE {
            return Err(Error::NotReady);
        }
        let header = Mapping::new(&file, HEADER_SIZE)?;
        let mut magic = header.u64(H_MAGIC)?.load(Ordering::Acquire);
        for _ in 0..200 {
            if magic != 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            magic = header.u64(H_MAGIC)?.load(Ordering::Acquire);
        }
        if magic == 0 {
            return Err(Error::NotReady);
        }
        if magic != MAGIC {
            return Err(Error::BadMagic);
        }
        let version = header.u32(H_VERSION)?.load(Ordering::Relaxed);
        if version != LAYOUT_VERSION {
            return Err(Error::Version { found: version, expected: LAYOUT_VERSION });
        }
        let capacity = header.u64(H_CAPACITY)?.load(Ordering::Relaxed);
        let max_participants = header.u32(H_MAX_PART)?.load(Ordering::Relaxed);
        let g = geometry(capacity, max_participants)?;
        if header.u32(H_HEADER_SIZE)?.load(Ordering::Relaxed) as u64 != HEADER_SIZE
            || header.u32(H_NCLASSES)?.load(Ordering::Relaxed) as usize != NCLASSES
            || header.u64(H_PART_OFF)?.load(Ordering::Relaxed) != g.part_off
            || header.u64(H_CACHE_OFF)?.load(Ordering::Relaxed) != g.cache_off
            || header.u64(H_PAGEDESC_OFF)?.load(Ordering::Relaxed) != g.pagedesc_off
            || header.u64(H_DATA_OFF)?.load(Ordering::Relaxed) != g.data_off
        {
            return Err(Error::Geometry("header fields disagree with each other"));
        }
        if len < capacity {
            return Err(Error::Geometry("segment is shorter than its recorded capacity"));
        }
        let seed = header.u64(H_SEED)?.load(Ordering::Relaxed);
        drop(header);
        let map = Mapping::new(&file, capacity)?;
        Ok(Arc::new(Arena::assemble(map, file, backing, max_participants, &g, seed)?))
    }

    fn assemble(
        mut map: Mapping,
        file: File,
        backing: Backing,
        max_participants: u32,
        g: &Geometry,
        seed: u64,
    ) -> Result<Arena, Error> {
        // One descriptor per page of the capacity (see `geometry`).
        map.set_table(g.pagedesc_off, map.len() / PAGE)?;
        Ok(Arena {
            map,
            fd: file.into(),
            backing,
            max_participants,
            part_off: g.part_off,
            cache_off: g.cache_off,
            pagedesc_off: g.pagedesc_off,
            data_off: g.data_off,
            seed,
            recovery: OnceLock::new(),
            count_repair: OnceLock::new(),
            unlock_mismatches: AtomicU64::new(0),
            #[cfg(test)]
            all_foreign_for_tests: AtomicBool::new(false),
            #[cfg(test)]
            reaps_for_tests: AtomicU64::new(0),
        })
    }

    /// Attaches to a named segment or file if it exists, else creates it with `config`.
    pub fn open_or_create(backing: Backing, config: &Config) -> Result<(Arc<Arena>, bool), Error> {
        if backing == Backing::Anonymous {
            return Ok((Self::create(backing, config)?, true));
        }
        loop {
            match Self::open(backing.clone()) {
                Ok(a) => return Ok((a, false)),
                Err(Error::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
            match Self::create(backing.clone(), config) {
                Ok(a) => return Ok((a, true)),
                Err(Error::Exists(_)) => continue, // lost a race with another creator
                Err(e) => return Err(e),
            }
        }
    }

    /// Removes a named segment (existing mappings stay valid until dropped).
    pub fn unlink(name: &str) -> Result<(), Error> {
        rustix::shm::unlink(shm_name(name)?.as_str()).map_err(|e| Error::Io(e.into()))
    }

    /// Path of a named segment on this machine.
    pub fn shm_path(name: &str) -> Result<PathBuf, Error> {
        Ok(PathBuf::from(format!("/dev/shm{}", shm_name(name)?)))
    }

    pub fn backing(&self) -> &Backing {
        &self.backing
    }

    pub fn capacity(&self) -> u64 {
        self.map.len()
    }

    /// Whether this process's mapping is eligible for transparent huge pages (2 MiB on
    /// x86-64): the kernel backs it with them wherever it can get one at a fault. Larder
    /// always asks for them; the machine decides: see the README's "Huge pages".
    pub fn huge_pages(&self) -> bool {
        self.map.huge_page() != 0
    }

    /// How many unlocks through this attachment (this `Arena`) found their lock word
    /// overwritten while held: zero unless the segment is corrupt (or a lock was released
    /// twice, a bug).
    pub fn unlock_mismatches(&self) -> u64 {
        self.unlock_mismatches.load(Ordering::Relaxed)
    }

    /// The per-segment hash seed (the same in every attached process).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    pub fn max_participants(&self) -> u32 {
        self.max_participants
    }

    /// Registers the function a reaper calls to finish a dead participant's intent. The
    /// engine installs one when it opens the arena; it is set once per process.
    pub fn set_recovery(&self, handler: RecoveryHandler) {
        let _ = self.recovery.set(handler);
    }

    /// Registers the function a reaper calls with the offset a dead participant was changing
    /// a count at ([`Participant::counting`]). Set once per process, by the engine.
    pub fn set_count_repair(&self, handler: RecoveryHandler) {
        let _ = self.count_repair.set(handler);
    }

    /// A monotonically increasing 64-bit value, unique across the arena (item versions).
    pub fn version_block(&self, n: u64) -> Result<u64, Error> {
        Ok(self.u64(H_VERSION_CTR)?.fetch_add(n, Ordering::Relaxed))
    }

    // ---- safe accessors over the mapping ----

    #[inline]
    pub fn u64(&self, off: u64) -> Result<&AtomicU64, Error> {
        self.map.u64(off)
    }
    #[inline]
    pub fn u32(&self, off: u64) -> Result<&AtomicU32, Error> {
        self.map.u32(off)
    }
    /// `N` consecutive `u32` words at `off`, bounds-checked once.
    #[inline]
    pub fn u32s<const N: usize>(&self, off: u64) -> Result<&[AtomicU32; N], Error> {
        self.map.u32s(off)
    }
    #[inline]
    pub fn u8(&self, off: u64) -> Result<&AtomicU8, Error> {
        self.map.u8(off)
    }
    /// Copies arena bytes out.
    #[inline]
    pub fn read(&self, off: u64, out: &mut [u8]) -> Result<(), Error> {
        self.map.read(off, out)
    }
    /// Appends `len` arena bytes at `off` to `out`.
    #[inline]
    pub fn read_append(&self, off: u64, len: usize, out: &mut Vec<u8>) -> Result<(), Error> {
        self.map.read_append(off, len, out)
    }
    /// Writes bytes into memory the caller owns and has not published.
    #[inline]
    pub fn write(&self, off: u64, data: &[u8]) -> Result<(), Error> {
        self.map.write(off, data)
    }
    /// Writes `parts` back to back into memory the caller owns and has not published (one
    /// bounds check; short parts copied inline).
    #[inline(always)]
    pub fn write_parts<const N: usize>(&self, off: u64, parts: [&[u8]; N]) -> Result<(), Error> {
        self.map.write_parts(off, parts)
    }
    /// Copies bytes between two disjoint arena ranges.
    #[inline]
    pub fn copy(&self, src: u64, dst: u64, len: u64) -> Result<(), Error> {
        self.map.copy(src, dst, len)
    }
    /// Compares arena bytes with `data`.
    #[inline]
    pub fn bytes_eq(&self, off: u64, data: &[u8]) -> Result<bool, Error> {
        self.map.eq(off, data)
    }
    /// Hints the CPU to bring `off` into cache (for loops over many items).
    #[inline]
    pub fn prefetch(&self, off: u64) {
        self.map.prefetch(off)
    }
    /// Zeroes an arena range the caller owns.
    pub fn zero(&self, off: u64, len: u64) -> Result<(), Error> {
        self.map.zero(off, len)
    }

    /// Converts a byte offset to the stored `u32` unit form.
    #[inline]
    pub fn to_units(off: u64) -> u32 {
        debug_assert!(off.is_multiple_of(UNIT) && off < MAX_CAPACITY);
        (off / UNIT) as u32
    }
    /// Converts a stored unit offset back to bytes.
    #[inline]
    pub fn from_units(units: u32) -> u64 {
        units as u64 * UNIT
    }

    #[inline]
    pub(crate) fn slot_off(&self, slot: u32) -> u64 {
        self.part_off + slot as u64 * SLOT_SIZE
    }

    /// Current global epoch.
    pub fn epoch(&self) -> u64 {
        self.u64(H_EPOCH).map(|e| e.load(Ordering::SeqCst)).unwrap_or(0)
    }
}

#[cfg(test)]
mod model_check;
#[cfg(test)]
mod tests;
