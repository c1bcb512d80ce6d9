//! Participant slots, epochs, owner-recording locks, reaping and intents.
//!
//! Slot layout (128 bytes, all little-endian atomics):
//!
//! ```text
//!   0  state   u64  gen(24 bits) << 40 | pid << 8 | LOCKED(0x10)? | FREE(0) CLAIMING(1)
//!                   LIVE(2) REAPING(3). The generation makes every claim's word new, so an
//!                   exchange from a word read earlier fails if the slot changed hands since.
//!   8  gen     u32  bumped each time the slot is freed; lock words carry its low 22 bits
//!  16  start   u64  the process's start time (clock ticks since boot, /proc/PID/stat)
//!  24  epoch   u64  epoch << 1 | active
//!  32  intent  u64  byte offset of an intent record being published, or 0
//!  40  retire head u32, 44 retire tail u32, 48 retire count u32   (unit offsets)
//!  56  counting u64 (see Participant::counting)
//!  64  pidns   u64  the inode of the owner's pid namespace (/proc/self/ns/pid), 0 unknown
//!  72  counts  u32 × COUNTERS  this participant's shares of the header's counters
//! ```
//!
//! # Liveness
//!
//! A slot names its owner by pid and start time, but a pid means something only in its own
//! pid namespace: a process in another container, or one hidden by `hidepid`, would look
//! dead through `/proc`, and reaping a live owner hands its locks to someone else. So an
//! owner also holds a lock that the kernel releases when it dies: before claiming slot `i`
//! it takes an open-file-description lock on byte `i` of the segment's file, through a
//! description of its own, and closes that description only after freeing the slot (the
//! state's LOCKED bit says it holds one). A reaper takes the same byte before it reaps, so
//! claiming and reaping exclude each other, and a held byte is a live owner; see
//! [`Arena::reap`]. A child forked without exec would share the descriptions and keep the
//! locks of a parent that has died: a fork handler (`map::ofd`) lets go of them in the child.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::map::ofd::LockFd;
use crate::{Arena, Error, H_EPOCH, H_SLOT_HWM};

const S_STATE: u64 = 0;
const S_GEN: u64 = 8;
const S_START: u64 = 16;
const S_EPOCH: u64 = 24;
const S_INTENT: u64 = 32;
const S_RETIRE_HEAD: u64 = 40;
const S_RETIRE_TAIL: u64 = 44;
const S_RETIRE_COUNT: u64 = 48;
/// What this participant is changing a count of (the engine's segment), between publishing
/// a slot and updating the count; 0 otherwise. See [`Participant::counting`].
const S_COUNTING: u64 = 56;
const S_PIDNS: u64 = 64;
/// [`crate::COUNTERS`] u32 words: what this participant added to each of the header's
/// counters ([`Participant::count`]); taken back when the slot is freed or reaped.
const S_COUNTS: u64 = 72;

const FREE: u64 = 0;
const CLAIMING: u64 = 1;
const LIVE: u64 = 2;
const REAPING: u64 = 3;
/// The state's kind bits (FREE..REAPING).
const KIND: u64 = 0x0f;
/// Set in a CLAIMING or LIVE state whose owner holds its slot's liveness lock, and in a
/// REAPING state whose reaper does.
const LOCKED: u64 = 0x10;
/// The state word's generation field (the low 24 bits of the slot's `gen`).
const WORD_GEN_SHIFT: u32 = 40;
const WORD_GEN: u64 = 0xff_ffff << WORD_GEN_SHIFT;
const PID_MASK: u64 = 0xffff_ffff << 8;

/// The FREE state word after the generation became `gen`.
fn free_word(gen: u32) -> u64 {
    ((gen as u64) << WORD_GEN_SHIFT) & WORD_GEN
}

const GEN_BITS: u32 = 22;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;

/// Size of a retire chunk and the entries it holds.
pub(crate) const RETIRE_CHUNK: u64 = 512;
pub(crate) const RETIRE_ENTRIES: u64 = (RETIRE_CHUNK - 16) / 8;
/// A retire chunk as u32 words, read with one bounds check: word 0 next chunk, 1 count,
/// 2 start, then entry `i` at words `4 + 2i` (unit offset) and `5 + 2i` (epoch).
const CHUNK_WORDS: usize = (RETIRE_CHUNK / 4) as usize;
const W_NEXT: usize = 0;
const W_COUNT: usize = 1;
const W_START: usize = 2;

#[inline]
fn entry_words(i: u32) -> (usize, usize) {
    (4 + 2 * i as usize, 5 + 2 * i as usize)
}

/// Whether a block retired with epoch stamp `stamp` may be freed once the global epoch is
/// `global`: two epochs on, every participant pinned when it was unlinked has left. Signed,
/// since a block retired by a pinned writer is stamped one epoch ahead of the global one
/// (and the 32-bit stamps wrap).
#[inline]
fn ripe(global: u32, stamp: u32) -> bool {
    global.wrapping_sub(stamp) as i32 >= 2
}

/// Weight of retirements (a block counts 1 + its size in KiB) a participant accumulates
/// before it tries to reclaim: 128 small blocks, or fewer big ones.
const COLLECT_EVERY: u64 = 128;
/// How many failed epoch advances caused by one slot before its process is checked.
const SUSPECT_AFTER: u32 = 32;

/// How long a waiter for a lock waits between asking whether the owner's process is alive
/// (a lock is held for microseconds; the question costs a system call).
const PID_CHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(1);

/// What [`Arena::slots`] reports about one participant slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotInfo {
    pub slot: u32,
    pub pid: u32,
    pub state: &'static str,
    pub gen: u32,
    pub pinned: bool,
    pub epoch: u64,
    pub retired: u32,
    pub intent: u64,
    /// Whether the owner holds the slot's liveness lock (else it is judged by its pid).
    pub locked: bool,
}

/// A thread's membership in the arena: its epoch, allocator cache and lock identity.
///
/// One per thread; not `Sync`. Dropping it leaves the epoch and frees the slot (its cache
/// and pending retirements stay with the slot for the next thread that claims it).
pub struct Participant {
    pub(crate) arena: Arc<Arena>,
    pub(crate) slot: u32,
    lock_word: u32,
    pins: Cell<u32>,
    /// The epoch this participant entered at its outermost [`Participant::pin`].
    pinned_at: Cell<u64>,
    versions: Cell<(u64, u64)>,
    suspect: Cell<(u32, u32)>,
    /// Weight retired since the last collect (one per block plus one per KiB, so big blocks
    /// bring the next collect sooner); [`Participant::retire`] collects at [`COLLECT_EVERY`].
    pending: Cell<u64>,
    /// Set while retire() edits the retire list: allocation must not collect then.
    retiring: Cell<bool>,
    /// Retirements that found the arena too full for a new retire chunk: (offset, stamp),
    /// kept in this process's heap and freed by collect like the list's. A retire comes
    /// after its unlink is published, so it must not fail for want of memory (a DEL in a
    /// full arena would answer an error for a key it did delete).
    overflow: Cell<Vec<(u64, u32)>>,
    /// The slot's state word while this participant owns it.
    word: u64,
    /// The process that claimed the slot. A child forked without exec has a copy of this
    /// participant; dropping that copy must leave the parent's slot alone.
    pid: u32,
    /// The open file description holding this slot's liveness lock, if it took one. Closed
    /// (releasing the lock) only after `drop` has freed the slot.
    _liveness: Option<LockFd>,
}

/// Proof that the holder is inside an epoch: memory it reads stays allocated until the
/// guard is dropped.
pub struct Guard<'a> {
    p: &'a Participant,
}

impl Drop for Guard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.p.unpin();
    }
}

fn getpid() -> u32 {
    rustix::process::getpid().as_raw_nonzero().get() as u32
}

/// This process's start time and pid namespace inode, looked up once per process (a forked
/// child looks again). The inode is 0, unknown, where /proc does not speak for this pid
/// namespace (`/proc/self` is not our pid: a /proc mounted for another namespace), since
/// then no pid it shows means what the slot's pid means.
fn self_identity() -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    use std::sync::Mutex;
    static CACHE: Mutex<(u32, u64, u64)> = Mutex::new((0, 0, 0));
    let pid = getpid();
    let mut c = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if c.0 != pid {
        let ours = std::fs::read_link("/proc/self").is_ok_and(|p| p.as_os_str() == pid.to_string().as_str());
        let ns = if ours { std::fs::metadata("/proc/self/ns/pid").map(|m| m.ino()).unwrap_or(0) } else { 0 };
        *c = (pid, if ours { proc_start_time(pid).unwrap_or(0) } else { 0 }, ns);
    }
    (c.1, c.2)
}

/// Where participant `slot`'s liveness lock lies in the segment's file: one byte each. The
/// locks are advisory, so they may lie over the header.
fn liveness_byte(slot: u32) -> u64 {
    slot as u64
}

/// Whether this process's /proc shows every process of its pid namespace: the last proc
/// mounted on /proc has no `hidepid` (or `hidepid=0`/`off`). Read once per process.
fn proc_shows_all() -> bool {
    static ALL: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ALL.get_or_init(|| std::fs::read_to_string("/proc/self/mountinfo").is_ok_and(|m| mountinfo_shows_all(&m)))
}

/// Whether a `/proc/PID/maps` text maps a file with inode `ino`.
pub(crate) fn maps_show_inode(maps: &str, ino: u64) -> bool {
    // "start-end perms offset MAJ:MIN inode [path]"
    let ino = ino.to_string();
    maps.lines().any(|l| l.split_ascii_whitespace().nth(4) == Some(ino.as_str()))
}

/// [`proc_shows_all`] from the text of a `mountinfo` file.
pub(crate) fn mountinfo_shows_all(m: &str) -> bool {
    // "id parent dev root MOUNTPOINT opts [tags] - fstype source SUPEROPTS"
    m.lines().rfind(|l| l.split(' ').nth(4) == Some("/proc") && l.contains(" - proc ")).is_some_and(|l| {
        let opts = l.rsplit(' ').next().unwrap_or("");
        !opts.split(',').any(|o| o.strip_prefix("hidepid=").is_some_and(|v| v != "0" && v != "off"))
    })
}

/// Field 22 of /proc/PID/stat, and whether the process is a zombie or dead (state Z or X).
fn proc_stat(pid: u32) -> Result<(u64, bool), Unread> {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => stat_fields(&s).ok_or(Unread::Failed),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Unread::NoSuchPid),
        Err(_) => Err(Unread::Failed),
    }
}

/// Why a process's stat could not be read: no such pid here, or anything else (no
/// descriptors left, a garbled file), which says nothing about the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unread {
    NoSuchPid,
    Failed,
}

/// (start time, zombie or dead) from the text of a `stat` file.
fn stat_fields(s: &str) -> Option<(u64, bool)> {
    // The command name (field 2) may contain spaces and parentheses; fields resume after the
    // last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let start = fields.nth(18)?.parse().ok()?;
    Some((start, state == "Z" || state == "X"))
}

/// Whether any thread of `pid` is neither a zombie nor dead. A process's main thread shows
/// Z as soon as it exits (after SIGKILL, or a `pthread_exit`) while other threads may still
/// be running, in the middle of a system call that writes the arena. A thread whose state
/// cannot be read counts as running.
fn some_thread_runs(pid: u32) -> bool {
    let tasks = match std::fs::read_dir(format!("/proc/{pid}/task")) {
        Ok(t) => t,
        Err(e) => return e.kind() != std::io::ErrorKind::NotFound,
    };
    tasks.flatten().any(|t| match std::fs::read_to_string(t.path().join("stat")) {
        Ok(s) => stat_fields(&s).is_none_or(|(_, z)| !z),
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    })
}

fn proc_start_time(pid: u32) -> Option<u64> {
    proc_stat(pid).ok().map(|(s, _)| s)
}

#[cfg(test)]
pub(crate) fn proc_start_time_for_tests(pid: u32) -> Option<u64> {
    proc_start_time(pid)
}

/// What this process's /proc says about a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Alive,
    /// Its stat shows another start time (the pid was reused) or every thread a zombie.
    Dead,
    /// No such pid here: it has exited, or it lives where this /proc cannot see it.
    Absent,
}

/// What /proc says of a slot's owner, where it can speak for the owner's namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    Running,
    Gone,
    Unknown,
}

/// Whether the process `pid` that started at `start` (0: any) is running, as far as this
/// process's /proc shows. A zombie counts as dead (it will never touch the arena again) only
/// once every one of its threads is: a SIGKILLed process's main thread turns Z while another
/// thread may still be inside an madvise that discards arena pages, under a lock the reaper
/// would hand to someone else.
fn proc_says(pid: u32, start: u64) -> Seen {
    if pid == 0 {
        return Seen::Dead;
    }
    match proc_stat(pid) {
        Ok((s, zombie)) if (start == 0 || s == start) && (!zombie || some_thread_runs(pid)) => Seen::Alive,
        Ok(_) => Seen::Dead,
        Err(Unread::NoSuchPid) => Seen::Absent,
        // Unreadable (EMFILE, say) is no evidence of death: a wrong "dead" is the harmful
        // mistake.
        Err(Unread::Failed) => Seen::Alive,
    }
}

/// Whether the process `pid` that started at `start` is running, by /proc alone.
#[cfg(test)]
pub(crate) fn process_alive(pid: u32, start: u64) -> bool {
    proc_says(pid, start) == Seen::Alive
}

impl Arena {
    #[inline]
    fn slot_u64(&self, slot: u32, field: u64) -> Result<&AtomicU64, Error> {
        self.u64(self.slot_off(slot) + field)
    }
    #[inline]
    fn slot_u32(&self, slot: u32, field: u64) -> Result<&AtomicU32, Error> {
        self.u32(self.slot_off(slot) + field)
    }

    pub(crate) fn slot_hwm(&self) -> u32 {
        // SeqCst, as the epoch words are: try_advance's scan up to it is then ordered with
        // the pins it must see (Acquire suffices on x86 and ARMv8, not by the C++ rules).
        self.u32(H_SLOT_HWM).map(|h| h.load(Ordering::SeqCst)).unwrap_or(0).min(self.max_participants)
    }

    /// A new open file description of the segment's file, for a participant's liveness lock
    /// (a lock belongs to its description, so each participant needs its own). None where
    /// /proc cannot reopen the descriptor (no /proc, a non-dumpable process, no descriptors
    /// left): such a participant is judged by its pid alone, and `larder segment info` shows
    /// `liveness=pid` for it. Reopening by name instead could find another segment created
    /// since under the same name.
    fn liveness_description(&self) -> Option<LockFd> {
        use std::os::fd::AsRawFd;
        let path = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        std::fs::OpenOptions::new().read(true).write(true).open(path).ok().map(|f| LockFd::new(f.into()))
    }

    /// Claims a participant slot for the calling thread.
    pub fn register(self: &Arc<Self>) -> Result<Participant, Error> {
        let mut liveness = self.liveness_description();
        for pass in 0..2 {
            for slot in 0..self.max_participants {
                let kind = self.slot_u64(slot, S_STATE)?.load(Ordering::Acquire) & KIND;
                if kind != FREE && (pass == 0 || !self.reap(slot)) {
                    continue;
                }
                if let Some(p) = self.claim(slot, &mut liveness)? {
                    return Ok(p);
                }
            }
        }
        Err(Error::NoSlot(self.max_participants))
    }

    /// Claims `slot` for the calling thread if it is free. `liveness`: a description of the
    /// segment's file of this process's own, for the slot's liveness lock; the participant
    /// keeps it (it is taken) if it gets the lock.
    fn claim(self: &Arc<Self>, slot: u32, liveness: &mut Option<LockFd>) -> Result<Option<Participant>, Error> {
        use std::os::fd::AsFd;
        let pid = getpid();
        let state = self.slot_u64(slot, S_STATE)?;
        let cur = state.load(Ordering::Acquire);
        if cur & KIND != FREE {
            return Ok(None);
        }
        // The liveness lock comes before the claim and goes after the slot is freed,
        // so whoever finds this slot CLAIMING or LIVE finds the lock held.
        let locked = match liveness.as_ref() {
            Some(fd) => match crate::map::ofd::try_lock(fd.as_fd(), liveness_byte(slot)) {
                Ok(true) => LOCKED,
                // Held: someone is claiming or reaping it, or a child forked by its last
                // owner still has that owner's description open.
                Ok(false) => return Ok(None),
                Err(_) => 0,
            },
            None => 0,
        };
        let claimed = (cur & WORD_GEN) | (pid as u64) << 8 | locked;
        let unlock = |liveness: &Option<LockFd>| {
            if let (Some(fd), LOCKED) = (liveness, locked) {
                let _ = crate::map::ofd::unlock(fd.as_fd(), liveness_byte(slot));
            }
        };
        if state.compare_exchange(cur, claimed | CLAIMING, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            unlock(liveness);
            return Ok(None);
        }
        let (start, pidns) = self_identity();
        self.slot_u64(slot, S_START)?.store(start, Ordering::Relaxed);
        self.slot_u64(slot, S_PIDNS)?.store(pidns, Ordering::Relaxed);
        self.slot_u64(slot, S_EPOCH)?.store(0, Ordering::Relaxed);
        self.slot_u64(slot, S_INTENT)?.store(0, Ordering::Relaxed);
        self.slot_u64(slot, S_COUNTING)?.store(0, Ordering::Relaxed);
        let gen = self.slot_u32(slot, S_GEN)?.load(Ordering::Relaxed);
        // Nobody reaps a CLAIMING slot whose claimer may live (see reap), so this
        // exchange fails only if the arena is corrupt.
        if state.compare_exchange(claimed | CLAIMING, claimed | LIVE, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            unlock(liveness);
            return Ok(None);
        }
        self.u32(H_SLOT_HWM)?.fetch_max(slot + 1, Ordering::SeqCst);
        Ok(Some(Participant {
            arena: self.clone(),
            slot,
            lock_word: ((slot + 1) << GEN_BITS) | (gen & GEN_MASK),
            pins: Cell::new(0),
            pinned_at: Cell::new(0),
            versions: Cell::new((0, 0)),
            suspect: Cell::new((u32::MAX, 0)),
            pending: Cell::new(0),
            retiring: Cell::new(false),
            overflow: Cell::new(Vec::new()),
            word: claimed | LIVE,
            pid,
            _liveness: if locked == LOCKED { liveness.take() } else { None },
        }))
    }

    /// Frees what the retire lists of free slots hold and no reader can still see. A slot's
    /// list outlives its owner: what was not ripe when the owner left (or was reaped) waits
    /// for the slot's next owner, and a slot nobody claims again (one of many, freed after
    /// a burst of processes) would keep it for ever. So each such slot is claimed here for
    /// a moment: its collect frees what has ripened, and its leaving hands the freed blocks
    /// to the global stacks. For a process's housekeeping (the server calls it once a
    /// second): two loads per slot when there is nothing to do. Returns the blocks freed.
    pub fn collect_free_slots(self: &Arc<Self>) -> usize {
        let mut freed = 0;
        let mut liveness = None;
        for slot in 0..self.slot_hwm() {
            let (Ok(state), Ok((_, _, waiting))) = (self.slot_u64(slot, S_STATE), self.retire_list(slot)) else {
                continue;
            };
            if state.load(Ordering::Acquire) & KIND != FREE || waiting.load(Ordering::Relaxed) == 0 {
                continue;
            }
            if liveness.is_none() {
                liveness = self.liveness_description();
            }
            if let Ok(Some(p)) = self.claim(slot, &mut liveness) {
                // Twice: a collect frees what was retired before the previous epoch advance.
                freed += p.collect().unwrap_or(0);
                freed += p.collect().unwrap_or(0);
            }
        }
        freed
    }

    /// The owner recorded in `slot` (state word `cur`): pid-namespace inode, pid, and start
    /// time (0, meaning any, while it is still CLAIMING and may not have written it).
    fn owner_identity(&self, slot: u32, cur: u64) -> (u64, u32, u64) {
        let field = |f| self.slot_u64(slot, f).map(|s| s.load(Ordering::Relaxed)).unwrap_or(0);
        let start = if cur & KIND == CLAIMING { 0 } else { field(S_START) };
        (field(S_PIDNS), (cur >> 8) as u32, start)
    }

    #[cfg(test)]
    fn foreign(&self) -> bool {
        self.all_foreign_for_tests.load(Ordering::Relaxed)
    }
    #[cfg(not(test))]
    #[inline(always)]
    fn foreign(&self) -> bool {
        false
    }

    /// What /proc says of the owner of `slot` (state word `cur`, not CLAIMING), where it can
    /// speak: the owner shares this pid namespace (both inodes known and equal, so its pid
    /// means the same here). Running means its pid shows it, still mapping the segment;
    /// gone means its pid names another process or a zombie, or nothing where /proc hides
    /// no process, or a process that no longer maps the segment (it has exec'd).
    fn proc_verdict(&self, slot: u32, cur: u64) -> Verdict {
        let (ns, pid, start) = self.owner_identity(slot, cur);
        let (_, own) = self_identity();
        if ns == 0 || own == 0 || ns != own || self.foreign() {
            return Verdict::Unknown;
        }
        match proc_says(pid, start) {
            Seen::Alive if self.mapped_by(pid) => Verdict::Running,
            Seen::Alive | Seen::Dead => Verdict::Gone,
            Seen::Absent if proc_shows_all() => Verdict::Gone,
            Seen::Absent => Verdict::Unknown,
        }
    }

    /// Whether process `pid` maps this segment's file (`/proc/PID/maps`). Every live owner
    /// does: it maps the segment before it claims a slot and unmaps it after freeing it. A
    /// process that has exec'd keeps its pid and start time but not the mapping. Matched by
    /// inode alone: the device maps shows need not be stat's (on btrfs stat gives the
    /// subvolume's), and a match on another device's inode errs towards alive. True where it
    /// cannot be told, since a wrong "dead" is the harmful mistake: maps unreadable (another
    /// user's process, say) or empty (the main thread has exited and shows no memory, while
    /// other threads may still run in it).
    fn mapped_by(&self, pid: u32) -> bool {
        let Ok(st) = rustix::fs::fstat(&self.fd) else { return true };
        #[allow(clippy::unnecessary_cast)] // its width varies by target
        let ino = st.st_ino as u64;
        match std::fs::read_to_string(format!("/proc/{pid}/maps")) {
            Ok(maps) if !maps.trim().is_empty() => maps_show_inode(&maps, ino),
            _ => true,
        }
    }

    /// Takes `slot`'s liveness byte through a new description of this process's own, if
    /// nobody holds it. Dropping the result gives it back.
    fn take_liveness_byte(&self, slot: u32) -> Option<LockFd> {
        use std::os::fd::AsFd;
        // One query first: a held byte, the usual answer, needs no new description. An
        // error counts as held: a wrong "dead" is the harmful mistake.
        if crate::map::ofd::held_by_other(self.fd.as_fd(), liveness_byte(slot)).unwrap_or(true) {
            return None;
        }
        let fd = self.liveness_description()?;
        matches!(crate::map::ofd::try_lock(fd.as_fd(), liveness_byte(slot)), Ok(true)).then_some(fd)
    }

    /// Reaps `slot` if its process is dead: finishes its intent, leaves its epoch, bumps its
    /// generation (which frees every lock it held) and frees the slot. Returns whether the
    /// slot is now known not to belong to a live process.
    ///
    /// - An owner with a liveness lock is alive while its byte is held. The reaper takes
    ///   the byte itself: it gets it only once the owner's description is closed, and while
    ///   it holds it nobody can claim the slot. It keeps it until the slot is free (REAPING
    ///   with LOCKED set; if the reaper dies, the byte is released and the next reaper
    ///   takes over, every step being idempotent). One exception: a released byte whose
    ///   owner /proc shows running and still mapping the segment, in this pid namespace, is
    ///   alive (it closed its descriptors, as daemons do; one that exec'd maps it no more).
    /// - An owner without one (it could not reopen the file) is judged by /proc, and only
    ///   where /proc speaks for its pid namespace; a CLAIMING one never (its fields may still
    ///   be its predecessor's), nor a REAPING one (its reaper's death would leave the slot
    ///   stuck: a known limit of this path).
    ///
    /// Every exchange compares the whole state word, generation included, so a word read
    /// before the slot changed hands never matches.
    pub fn reap(&self, slot: u32) -> bool {
        let Ok(state) = self.slot_u64(slot, S_STATE) else { return false };
        let cur = state.load(Ordering::Acquire);
        if cur & KIND == FREE {
            return true;
        }
        if cur & LOCKED == 0 {
            if cur & KIND != LIVE || self.proc_verdict(slot, cur) != Verdict::Gone {
                return false;
            }
            return self.finish_reap(state, slot, cur, None);
        }
        let Some(byte) = self.take_liveness_byte(slot) else { return false };
        let cur = state.load(Ordering::Acquire);
        if cur & KIND == FREE {
            return true;
        }
        // REAPING too: an owner's own drop passes through REAPING without holding the byte if
        // it closed its descriptors; a dead reaper's owner, being reaped, is not running.
        if cur & LOCKED == 0 || (cur & KIND != CLAIMING && self.proc_verdict(slot, cur) == Verdict::Running) {
            return false;
        }
        self.finish_reap(state, slot, cur, Some(byte))
    }

    /// The reaping itself, once the owner of `cur` is known dead. `byte`: the slot's
    /// liveness byte, held by this reaper until the slot is free.
    fn finish_reap(&self, state: &AtomicU64, slot: u32, cur: u64, byte: Option<LockFd>) -> bool {
        let reaping = (cur & (WORD_GEN | PID_MASK)) | REAPING | if byte.is_some() { LOCKED } else { 0 };
        #[cfg(test)]
        if self.foreign() {
            std::thread::yield_now(); // widen the window the race test aims at
        }
        if state.compare_exchange(cur, reaping, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return false;
        }
        #[cfg(test)]
        self.reaps_for_tests.fetch_add(1, Ordering::Relaxed);
        let intent = self.slot_u64(slot, S_INTENT).map(|i| i.load(Ordering::Acquire)).unwrap_or(0);
        if intent != 0 {
            let done = match self.recovery.get() {
                Some(h) => h(self, intent).is_ok(),
                None => false,
            };
            if !done {
                // This process cannot finish the intent; leave the slot for one that can.
                state.store(cur, Ordering::Release);
                return false;
            }
            if let Ok(i) = self.slot_u64(slot, S_INTENT) {
                i.store(0, Ordering::Release);
            }
        }
        // Killed between publishing a slot and counting it: the count is no longer known.
        if let Ok(c) = self.slot_u64(slot, S_COUNTING) {
            let off = c.load(Ordering::Acquire);
            if off != 0 {
                if let Some(h) = self.count_repair.get() {
                    let _ = h(self, off);
                }
                c.store(0, Ordering::Release);
            }
        }
        if let Ok(e) = self.slot_u64(slot, S_EPOCH) {
            e.store(0, Ordering::Release);
        }
        self.take_back_counts(slot);
        // The dead owner's cached blocks go to the global stacks (its retire list stays for
        // the next owner: it is not ripe yet, and only a participant can free).
        let _ = self.give_back_caches(slot);
        let gen = self.slot_u32(slot, S_GEN).map(|g| g.fetch_add(1, Ordering::AcqRel).wrapping_add(1)).unwrap_or(0);
        state.store(free_word(gen), Ordering::Release);
        drop(byte); // only now may the slot be claimed again
        if let Ok(r) = self.u64(crate::H_REAPS) {
            r.fetch_add(1, Ordering::AcqRel);
        }
        true
    }

    /// How many dead participants have been reaped in this arena, by anyone: a process that
    /// waits for others' announcements (pushes, say) can look again for what a process
    /// killed before announcing it left behind, once it has been reaped.
    pub fn reaps(&self) -> u64 {
        self.u64(crate::H_REAPS).map(|r| r.load(Ordering::Acquire)).unwrap_or(0)
    }

    /// Header counter `k` (< [`crate::COUNTERS`]): the sum of what participants added with
    /// [`Participant::count`], plus what a participant killed in the middle of a change
    /// added to it alone. Never less than the live participants' shares, so a reader that
    /// sees 0 knows nobody counts anything; a killed participant's share is taken back when
    /// its slot is reaped.
    pub fn counter(&self, k: usize) -> Result<&AtomicU32, Error> {
        if k >= crate::COUNTERS {
            return Err(Error::OutOfRange { off: k as u64, size: 4 });
        }
        self.u32(crate::H_COUNTERS + 4 * k as u64)
    }

    /// Takes slot `slot`'s shares out of the header's counters (the slot is being freed by
    /// its owner or a reaper, so nobody else changes them). The share is zeroed before the
    /// counter goes down: a reaper killed in between leaves the counter too high (a reader
    /// does some needless work), never too low.
    fn take_back_counts(&self, slot: u32) {
        for k in 0..crate::COUNTERS {
            let (Ok(share), Ok(total)) = (self.slot_u32(slot, S_COUNTS + 4 * k as u64), self.counter(k)) else {
                continue;
            };
            let n = share.swap(0, Ordering::AcqRel);
            if n != 0 {
                total.fetch_sub(n, Ordering::SeqCst);
            }
        }
    }

    /// Reaps every slot whose process has died. Returns how many were reaped.
    pub fn reap_dead(&self) -> usize {
        let mut n = 0;
        for slot in 0..self.slot_hwm() {
            let kind = self.slot_u64(slot, S_STATE).map(|s| s.load(Ordering::Acquire) & KIND).unwrap_or(FREE);
            if kind != FREE && self.reap(slot) {
                n += 1;
            }
        }
        n
    }

    /// Describes every slot ever used (for `larder segment info` and tests).
    pub fn slots(&self) -> Vec<SlotInfo> {
        (0..self.slot_hwm())
            .filter_map(|slot| {
                let st = self.slot_u64(slot, S_STATE).ok()?.load(Ordering::Acquire);
                let ep = self.slot_u64(slot, S_EPOCH).ok()?.load(Ordering::Acquire);
                Some(SlotInfo {
                    slot,
                    pid: (st >> 8) as u32,
                    state: match st & KIND {
                        FREE => "free",
                        CLAIMING => "claiming",
                        LIVE => "live",
                        REAPING => "reaping",
                        _ => "corrupt",
                    },
                    gen: self.slot_u32(slot, S_GEN).ok()?.load(Ordering::Relaxed),
                    pinned: ep & 1 == 1,
                    epoch: ep >> 1,
                    retired: self.slot_u32(slot, S_RETIRE_COUNT).ok()?.load(Ordering::Relaxed),
                    intent: self.slot_u64(slot, S_INTENT).ok()?.load(Ordering::Relaxed),
                    locked: st & LOCKED != 0,
                })
            })
            .collect()
    }

    /// Whether a lock word's owner is gone: its slot was reaped (generation moved on) or the
    /// word is not a valid owner at all. `check_pid` additionally asks the OS whether the
    /// owner's process is alive, reaping it if not.
    pub(crate) fn lock_is_stale(&self, word: u32, check_pid: bool) -> bool {
        let slot = (word >> GEN_BITS).wrapping_sub(1);
        if slot >= self.max_participants {
            return true;
        }
        let gen = self.slot_u32(slot, S_GEN).map(|g| g.load(Ordering::Acquire)).unwrap_or(0);
        if gen & GEN_MASK != word & GEN_MASK {
            return true;
        }
        if check_pid && self.reap(slot) {
            return true;
        }
        false
    }

    /// Whether a lock word is held by a live owner (for the invariant checker).
    pub fn lock_held(&self, word: u32) -> bool {
        word != 0 && !self.lock_is_stale(word, false)
    }

    /// The slots' cache area offset for the allocator.
    pub(crate) fn cache_entry(&self, slot: u32, class: usize) -> u64 {
        self.cache_off + (slot as u64 * crate::NCLASSES as u64 + class as u64) * crate::alloc::CACHE_ENTRY
    }

    pub(crate) fn retire_list(&self, slot: u32) -> Result<(&AtomicU32, &AtomicU32, &AtomicU32), Error> {
        const _: () = assert!(S_RETIRE_TAIL == S_RETIRE_HEAD + 4 && S_RETIRE_COUNT == S_RETIRE_HEAD + 8);
        let [head, tail, count] = self.u32s::<3>(self.slot_off(slot) + S_RETIRE_HEAD)?;
        Ok((head, tail, count))
    }
}

impl Participant {
    pub fn arena(&self) -> &Arc<Arena> {
        &self.arena
    }

    /// This participant's slot index.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// Enters the current epoch (nestable). While the guard lives, nothing this thread reads
    /// from the arena is reused.
    #[inline]
    pub fn pin(&self) -> Guard<'_> {
        let n = self.pins.get();
        if n == 0 {
            // One accessor after the other (not both results built first, then matched):
            // this is on every operation's path.
            if let Ok(g) = self.arena.u64(H_EPOCH) {
                let mut e = g.load(Ordering::SeqCst);
                #[cfg(test)]
                crate::tests::hook(crate::tests::Hook::PinLoadStore);
                if let Ok(mine) = self.arena.slot_u64(self.slot, S_EPOCH) {
                    // Until the store is visible, advancers see this slot unpinned and may
                    // move the global epoch on: a pin that landed late, at an epoch already
                    // passed, would protect nothing read in the newer one (and retire's
                    // stamp of pinned_at + 1 would be too old). So check the epoch again
                    // after the store and re-pin until they agree; from then on, an advance
                    // sees this slot, and the global epoch stays <= pinned_at + 1.
                    loop {
                        mine.store(e << 1 | 1, Ordering::SeqCst);
                        let now = g.load(Ordering::SeqCst);
                        if now == e {
                            break;
                        }
                        e = now;
                    }
                    self.pinned_at.set(e);
                }
            }
        }
        self.pins.set(n + 1);
        Guard { p: self }
    }

    #[inline]
    fn unpin(&self) {
        let n = self.pins.get() - 1;
        self.pins.set(n);
        if n == 0 {
            if let Ok(mine) = self.arena.slot_u64(self.slot, S_EPOCH) {
                mine.store(0, Ordering::Release);
            }
        }
    }

    /// Hands `off` (an allocated block no longer reachable from anything published) to
    /// epoch-based reclamation: it is freed once no participant can still be reading it.
    ///
    /// The block itself is left untouched (readers may still be reading it); its offset and
    /// epoch go into this slot's retire chunks, 512-byte blocks of 62 entries:
    /// `next u32, count u32, start u32, pad, then (unit offset u32, epoch u32) × 62`.
    pub fn retire(&self, off: u64) -> Result<(), Error> {
        let a = &*self.arena;
        // `off` came out of the arena (an index slot, a tree node): in a corrupt segment it
        // may be anything, and it is stored in unit form. Whether it is really a block is
        // checked when it is freed.
        if !off.is_multiple_of(crate::UNIT) || off >= a.capacity() {
            return Err(Error::OutOfRange { off, size: 0 });
        }
        // The block is stamped with an epoch no smaller than the global epoch *after* the
        // unlink became visible: a reader pinned at E may have seen the block only if the
        // stamp is >= E, and the global epoch cannot reach E + 2 while that reader is pinned.
        // Loading the global epoch here is not enough by itself: on x86 that load may run
        // before the unlinking store leaves this CPU's store buffer. So a pinned caller
        // stamps its own epoch + 1 (the global epoch cannot pass that while it is pinned),
        // and an unpinned one fences first. (That fence orders the unlink before the load on
        // x86-64 and ARMv8, which are multi-copy atomic; the C++ model alone would also want
        // the reader's load of the pointer to be SeqCst.) model_check.rs checks both stamps
        // under x86's store buffer.
        let e = if self.pins.get() > 0 {
            self.pinned_at.get() + 1
        } else {
            std::sync::atomic::fence(Ordering::SeqCst);
            a.u64(H_EPOCH)?.load(Ordering::SeqCst)
        };
        match self.record(off, e as u32) {
            Err(Error::Full) => {
                let mut v = self.overflow.take();
                v.push((off, e as u32));
                self.overflow.set(v);
            }
            r => r?,
        }
        let pending = self.pending.get() + 1 + a.size_hint(off) / 1024;
        self.pending.set(pending);
        if pending >= COLLECT_EVERY {
            self.collect()?;
        }
        Ok(())
    }

    /// Appends `off`, stamped `e`, to this slot's retire list. Fails with `Full` only when
    /// a new chunk is needed and there is no memory for it.
    fn record(&self, off: u64, e: u32) -> Result<(), Error> {
        let a = &*self.arena;
        let (head, tail, total) = a.retire_list(self.slot)?;
        let mut t = tail.load(Ordering::Relaxed);
        if head.load(Ordering::Relaxed) == 0 {
            let c = self.new_retire_chunk()?;
            head.store(c, Ordering::Release);
            tail.store(c, Ordering::Release);
            t = c;
        } else if t == 0 {
            // A crash left the tail unset: find it.
            t = head.load(Ordering::Relaxed);
            for _ in 0..a.capacity() / RETIRE_CHUNK {
                let next = a.u32(Arena::from_units(t))?.load(Ordering::Relaxed);
                if next == 0 {
                    break;
                }
                t = next;
            }
            tail.store(t, Ordering::Release);
        }
        let mut chunk = a.u32s::<CHUNK_WORDS>(Arena::from_units(t))?;
        let mut n = chunk[W_COUNT].load(Ordering::Relaxed);
        if n as u64 >= RETIRE_ENTRIES {
            let c = self.new_retire_chunk()?;
            chunk[W_NEXT].store(c, Ordering::Release);
            tail.store(c, Ordering::Release);
            chunk = a.u32s::<CHUNK_WORDS>(Arena::from_units(c))?;
            n = 0;
        }
        let (unit_w, epoch_w) = entry_words(n);
        chunk[unit_w].store(Arena::to_units(off), Ordering::Relaxed);
        chunk[epoch_w].store(e, Ordering::Relaxed);
        chunk[W_COUNT].store(n + 1, Ordering::Release);
        total.store(total.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        Ok(())
    }

    fn new_retire_chunk(&self) -> Result<u32, Error> {
        // No collecting inside this alloc: the caller is in the middle of editing the list.
        self.retiring.set(true);
        let c = self.alloc(RETIRE_CHUNK);
        self.retiring.set(false);
        let c = c?;
        self.arena.zero(c, 16)?;
        Ok(Arena::to_units(c))
    }

    /// How many blocks this participant has retired that are not yet freed (a relaxed read
    /// of its slot's count: one load, for a caller deciding whether to [`collect`]).
    ///
    /// [`collect`]: Participant::collect
    pub fn retired_waiting(&self) -> u32 {
        let v = self.overflow.take();
        let extra = v.len() as u32;
        self.overflow.set(v);
        self.arena.retire_list(self.slot).map(|(_, _, n)| n.load(Ordering::Relaxed)).unwrap_or(0) + extra
    }

    /// Whether allocation may collect to find space (not from inside [`Participant::retire`]).
    pub(crate) fn may_reclaim(&self) -> bool {
        !self.retiring.get()
    }

    /// Whether waiting can still make the oldest unripe entry of this participant's retire
    /// list ripe. Unpinned, it always can. Pinned at P, the global epoch stays <= P + 1, and
    /// an entry stamped S ripens at S + 2: so only entries stamped P - 1 or earlier can, and
    /// collect frees in list order, stopping at the first unripe entry.
    pub(crate) fn retired_can_ripen(&self) -> bool {
        if self.pins.get() == 0 {
            return true;
        }
        let pinned_at = self.pinned_at.get() as u32;
        let v = self.overflow.take();
        let overflow_can = v.iter().any(|&(_, e)| ripe(pinned_at.wrapping_add(1), e));
        self.overflow.set(v);
        if overflow_can {
            return true;
        }
        let a = &*self.arena;
        let Ok((head, _, _)) = a.retire_list(self.slot) else { return false };
        let h = head.load(Ordering::Acquire);
        if h == 0 {
            return false;
        }
        let Ok(words) = a.u32s::<CHUNK_WORDS>(Arena::from_units(h)) else { return false };
        let (start, n) = (words[W_START].load(Ordering::Relaxed), words[W_COUNT].load(Ordering::Acquire));
        if start >= n || start as u64 >= RETIRE_ENTRIES {
            return false;
        }
        let stamp = words[entry_words(start).1].load(Ordering::Relaxed);
        ripe(pinned_at.wrapping_add(1), stamp)
    }

    /// Frees every retired block that no participant can still see. Called automatically
    /// after [`COLLECT_EVERY`] weight of retirements, and by an allocation that finds the
    /// arena full; call it when idle to return memory sooner.
    pub fn collect(&self) -> Result<usize, Error> {
        let a = &*self.arena;
        let (head, tail, total) = a.retire_list(self.slot)?;
        let r = self.collect_list(head, tail, total);
        // What is left was retired too recently to free now (a collect frees what was
        // retired before the previous one): wait for COLLECT_EVERY more weight of
        // retirements rather than walking the same unripe entries again at every retire.
        self.pending.set(0);
        let mut freed = r?;
        let mut v = self.overflow.take();
        if !v.is_empty() {
            let g = a.u64(H_EPOCH)?.load(Ordering::SeqCst) as u32;
            let mut first_err = None;
            v.retain(|&(off, e)| {
                if !ripe(g, e) {
                    return true;
                }
                if let Err(err) = self.free(off) {
                    first_err.get_or_insert(err);
                }
                freed += 1;
                false
            });
            self.overflow.set(v);
            if let Some(err) = first_err {
                return Err(err);
            }
        }
        Ok(freed)
    }

    fn collect_list(&self, head: &AtomicU32, tail: &AtomicU32, total: &AtomicU32) -> Result<usize, Error> {
        self.try_advance();
        let a = &*self.arena;
        let g = a.u64(H_EPOCH)?.load(Ordering::SeqCst) as u32;
        let mut freed = 0;
        loop {
            let h = head.load(Ordering::Acquire);
            if h == 0 {
                break;
            }
            let chunk = Arena::from_units(h);
            let words = a.u32s::<CHUNK_WORDS>(chunk)?;
            let n = (words[W_COUNT].load(Ordering::Acquire) as u64).min(RETIRE_ENTRIES) as u32;
            let start = &words[W_START];
            let s = start.load(Ordering::Relaxed);
            // Entries s..e are old enough to free (they are in retirement order).
            let mut e = s;
            while e < n && ripe(g, words[entry_words(e).1].load(Ordering::Relaxed)) {
                e += 1;
            }
            if e > s {
                // Advance first, once for the whole run: a crash before the frees below
                // leaks these blocks rather than freeing them twice.
                start.store(e, Ordering::Release);
                total.store(total.load(Ordering::Relaxed).saturating_sub(e - s), Ordering::Relaxed);
                let mut first_err = Ok(());
                for i in s..e {
                    let units = words[entry_words(i).0].load(Ordering::Relaxed);
                    if let Err(err) = self.free_inline(Arena::from_units(units)) {
                        first_err = first_err.and(Err(err));
                    }
                }
                first_err?;
                freed += (e - s) as usize;
            }
            if e < n {
                return Ok(freed);
            }
            let next = words[W_NEXT].load(Ordering::Acquire);
            if next != 0 {
                head.store(next, Ordering::Release);
                self.free(chunk)?;
            } else {
                // The tail chunk: empty it for reuse (count before start, so a crash between
                // the two can only skip entries, never replay them).
                words[W_COUNT].store(0, Ordering::Release);
                start.store(0, Ordering::Release);
                if tail.load(Ordering::Relaxed) != h {
                    tail.store(h, Ordering::Release);
                }
                return Ok(freed);
            }
        }
        Ok(freed)
    }

    /// Advances the global epoch if every pinned participant has reached it. A participant
    /// that keeps blocking the advance is checked for being dead, and reaped.
    pub fn try_advance(&self) -> bool {
        let a = &*self.arena;
        let Ok(global) = a.u64(H_EPOCH) else { return false };
        let g = global.load(Ordering::SeqCst);
        for slot in 0..a.slot_hwm() {
            let Ok(ep) = a.slot_u64(slot, S_EPOCH) else { return false };
            let ep = ep.load(Ordering::SeqCst);
            if ep & 1 == 1 && ep >> 1 != g {
                let (s, n) = self.suspect.get();
                let n = if s == slot { n + 1 } else { 1 };
                self.suspect.set((slot, n));
                if slot != self.slot && n >= SUSPECT_AFTER {
                    self.suspect.set((u32::MAX, 0));
                    if a.reap(slot) {
                        continue;
                    }
                }
                return false;
            }
        }
        global.compare_exchange(g, g + 1, Ordering::SeqCst, Ordering::Relaxed).is_ok()
    }

    /// The word this participant stores in a lock it holds.
    pub fn lock_word(&self) -> u32 {
        self.lock_word
    }

    /// Takes an owner-recording lock. Spins, then yields; takes the lock over when its owner
    /// is found dead (after reaping the owner, which finishes any intent it recorded).
    ///
    /// Inlined: an uncontended lock is one compare-and-swap; waiting is out of line.
    #[inline]
    pub fn lock(&self, word: &AtomicU32) {
        if word.compare_exchange(0, self.lock_word, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended(word);
        }
    }

    #[inline(never)]
    fn lock_contended(&self, word: &AtomicU32) {
        let mut spins: u32 = 0;
        // When the owner's process is next asked about (see below).
        let mut pid_check_at: Option<std::time::Instant> = None;
        loop {
            let cur = match word.compare_exchange_weak(0, self.lock_word, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return,
                Err(cur) => cur,
            };
            // A word naming this participant, which is waiting for the lock: no code path
            // takes a lock it holds (they are not re-entrant), so the word came from a
            // corrupt segment. Waiting would be waiting for ourselves; take it. (Unless
            // this is a forked child's copy of the participant, whose parent may hold it.)
            if cur == self.lock_word && getpid() == self.pid {
                return;
            }
            spins = spins.wrapping_add(1);
            if cur != 0 && spins.is_multiple_of(64) {
                // Every 64th spin the cheap check (generation); the owner's process once the
                // wait has lasted PID_CHECK_EVERY, and every PID_CHECK_EVERY after (or every
                // 16384th spin, if that comes first). Counted in time, not only in spins: on
                // a loaded machine each yield below may give the CPU away for a timeslice,
                // and 256 yields kept a waiter (a server worker, with all its clients) off a
                // dead process's lock for seconds.
                let now = std::time::Instant::now();
                let due = *pid_check_at.get_or_insert(now + PID_CHECK_EVERY);
                let check_pid = spins.is_multiple_of(16384) || now >= due;
                if check_pid {
                    pid_check_at = Some(now + PID_CHECK_EVERY);
                }
                if self.arena.lock_is_stale(cur, check_pid)
                    && word.compare_exchange(cur, self.lock_word, Ordering::Acquire, Ordering::Relaxed).is_ok()
                {
                    return;
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Takes the lock if it is free (or stale) right now.
    pub fn try_lock(&self, word: &AtomicU32) -> bool {
        match word.compare_exchange(0, self.lock_word, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => true,
            Err(cur) => {
                self.arena.lock_is_stale(cur, false)
                    && word.compare_exchange(cur, self.lock_word, Ordering::Acquire, Ordering::Relaxed).is_ok()
            }
        }
    }

    /// Releases a lock this participant holds. A word that no longer names this participant
    /// was overwritten while held, which only a corrupt segment does (a scribble, or a block
    /// handed out from a corrupt free list over live memory), or released twice, a bug: it
    /// is left as it is, since clearing it could release another owner's lock, and counted
    /// for the invariant checker ([`Arena::unlock_mismatches`]). (It used to be a debug
    /// assertion, which turned such a segment into a panic.)
    #[inline]
    pub fn unlock(&self, word: &AtomicU32) {
        if word.load(Ordering::Relaxed) == self.lock_word {
            word.store(0, Ordering::Release);
        } else {
            self.arena.unlock_mismatches.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Records the intent being published (byte offset of a record the recovery handler
    /// understands). Set it after taking every lock the publication needs and after building
    /// everything it publishes; clear it after the last store.
    /// Adds `delta` to header counter `k` ([`Arena::counter`]) on this participant's behalf:
    /// the count other processes read stays right when this process is killed, since the
    /// reaper takes this participant's share back. A rise goes into the counter before the
    /// share and a fall into the share before the counter, so the counter is never below
    /// the live shares' sum, even with a process killed in between (only above it). The
    /// counter is updated SeqCst, for a reader's Dekker-style check against its own store.
    pub fn count(&self, k: usize, delta: i32) -> Result<(), Error> {
        let a = &*self.arena;
        let total = a.counter(k)?;
        let share = a.slot_u32(self.slot, S_COUNTS + 4 * k as u64)?;
        let d = delta.unsigned_abs();
        if delta >= 0 {
            total.fetch_add(d, Ordering::SeqCst);
            share.fetch_add(d, Ordering::Release);
        } else {
            share.fetch_sub(d, Ordering::Release);
            total.fetch_sub(d, Ordering::SeqCst);
        }
        Ok(())
    }

    pub fn set_intent(&self, off: u64) -> Result<(), Error> {
        self.arena.slot_u64(self.slot, S_INTENT)?.store(off, Ordering::SeqCst);
        Ok(())
    }

    pub fn clear_intent(&self) -> Result<(), Error> {
        self.arena.slot_u64(self.slot, S_INTENT)?.store(0, Ordering::Release);
        Ok(())
    }

    /// Records that this participant is about to change a count kept beside the data it
    /// publishes (the engine's per-segment key count), at `off` (0: done). A publication and
    /// its count are two stores; if the process dies between them, the reaper hands `off` to
    /// the arena's count-repair handler ([`Arena::set_count_repair`]). Plain stores to this
    /// participant's own slot: no fence.
    #[inline]
    pub fn counting(&self, off: u64) -> Result<(), Error> {
        self.arena.slot_u64(self.slot, S_COUNTING)?.store(off, Ordering::Relaxed);
        Ok(())
    }

    /// A fresh version number, unique across the arena (taken from the shared counter in
    /// blocks of 1024 so writers do not share a cache line per write).
    #[inline]
    pub fn next_version(&self) -> Result<u64, Error> {
        let (next, end) = self.versions.get();
        if next < end {
            self.versions.set((next + 1, end));
            return Ok(next);
        }
        let start = self.arena.version_block(1024)?;
        self.versions.set((start + 1, start + 1024));
        Ok(start)
    }
}

impl Drop for Participant {
    fn drop(&mut self) {
        if getpid() != self.pid {
            return; // a forked child's copy: the slot is its parent's
        }
        let a = &*self.arena;
        let Ok(state) = a.slot_u64(self.slot, S_STATE) else { return };
        // Take the slot out of LIVE first, as a reaper would (REAPING, LOCKED while this
        // participant holds its byte, so no reaper interferes). A slot a reaper has already
        // taken, judging this owner dead, is the reaper's, with its epoch, retire list and
        // generation: touching them could now touch a new owner's.
        if state
            .compare_exchange(self.word, (self.word & !KIND) | REAPING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return;
        }
        if let Ok(e) = a.slot_u64(self.slot, S_EPOCH) {
            e.store(0, Ordering::Release);
        }
        a.take_back_counts(self.slot);
        let _ = self.collect();
        // What is still unripe goes on the slot's list for its next owner, if there is
        // memory for it now; otherwise it is lost to the arena (a leak, never a free).
        for (off, e) in self.overflow.take() {
            let _ = self.record(off, e);
        }
        let _ = a.give_back_caches(self.slot);
        let gen = a.slot_u32(self.slot, S_GEN).map(|g| g.fetch_add(1, Ordering::AcqRel).wrapping_add(1)).unwrap_or(0);
        state.store(free_word(gen), Ordering::Release);
        // Then `_liveness` closes, releasing the byte.
    }
}

#[cfg(test)]
impl Arena {
    /// Makes `slot`'s owner look like process `pid`, started at `start`, of the pid namespace
    /// with inode `ns`, keeping its state's kind and LOCKED bit.
    pub(crate) fn disguise_owner_for_tests(&self, slot: u32, pid: u32, start: u64, ns: u64) {
        let state = self.slot_u64(slot, S_STATE).unwrap();
        let cur = state.load(Ordering::Acquire);
        self.slot_u64(slot, S_START).unwrap().store(start, Ordering::Relaxed);
        self.slot_u64(slot, S_PIDNS).unwrap().store(ns, Ordering::Relaxed);
        state.store((cur & WORD_GEN) | (pid as u64) << 8 | (cur & 0xff), Ordering::Release);
    }

    /// This process's (start time, pid namespace inode).
    pub(crate) fn identity_for_tests() -> (u64, u64) {
        self_identity()
    }

    /// Clears the LOCKED bit of `slot`'s state, as for an owner that could take no lock.
    pub(crate) fn drop_locked_bit_for_tests(&self, slot: u32) {
        let state = self.slot_u64(slot, S_STATE).unwrap();
        state.store(state.load(Ordering::Acquire) & !LOCKED, Ordering::Release);
    }

    pub(crate) fn fd_for_tests(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.fd.as_fd()
    }

    /// How many reapings got past their exchange.
    pub(crate) fn reaps_for_tests(&self) -> u64 {
        self.reaps_for_tests.load(Ordering::Relaxed)
    }

    /// From now on, every owner counts as living in another pid namespace.
    pub(crate) fn all_foreign_for_tests(&self) {
        self.all_foreign_for_tests.store(true, Ordering::Relaxed);
    }
}

#[cfg(test)]
impl Participant {
    /// Whether this participant holds its slot's liveness lock.
    pub(crate) fn has_liveness_lock(&self) -> bool {
        self._liveness.is_some()
            && self.arena.slot_u64(self.slot, S_STATE).unwrap().load(Ordering::Acquire) & LOCKED != 0
    }

    /// Closes the description holding the liveness lock, as a process that closes every
    /// descriptor would.
    pub(crate) fn close_liveness_for_tests(&mut self) {
        self._liveness = None;
    }

    /// Makes this participant look like a forked child's copy (another pid).
    pub(crate) fn pretend_forked_for_tests(&mut self) {
        self.pid ^= 1 << 30;
    }

    pub(crate) fn liveness_fd_for_tests(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self._liveness.as_ref().unwrap().as_fd()
    }

    /// Whether the slot is still this participant's: its state word and generation.
    pub(crate) fn still_owns_slot(&self) -> bool {
        let a = &self.arena;
        a.slot_u64(self.slot, S_STATE).unwrap().load(Ordering::Acquire) == self.word
            && a.slot_u32(self.slot, S_GEN).unwrap().load(Ordering::Acquire) & GEN_MASK == self.lock_word & GEN_MASK
    }
}
