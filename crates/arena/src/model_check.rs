//! Exhaustive interleaving checks of the epoch and lock protocols (this crate's stand-in for
//! loom, which cannot model atomics that live in a shared mapping rather than in its own
//! types).
//!
//! Each protocol is written again here as small state machines, one per thread, whose every
//! step is one atomic access of the real code (a load, a store or a compare-and-swap of the
//! same word, in the same order). The lock protocol's words change only by read-modify-writes
//! (and the kernel's byte locks), so sequential consistency is exact for it. The epoch
//! protocol leans on `SeqCst` stores and a fence, which only a weaker model can tell from
//! plain ones: there the writer also runs with an x86 store buffer (TSO), where a plain store
//! reaches memory later and a locked instruction or fence waits for the buffer to drain.
//! [`explore`] then runs every interleaving of the threads (and, for the locks, a process
//! death at every point) and checks the protocol's safety property at each step.
//!
//! A model check is only worth what its model is: each test also runs the model with one
//! known flaw put back (a pin without its re-check or with a plain store, a retire stamp one
//! epoch too old or loaded without the fence, a reaper that ignores a live owner's liveness
//! byte, ...) and asserts that the check finds the failure, so neither the checker nor the
//! model can pass by being blind.
//!
//! Not modelled: the pid-only liveness path (it needs a /proc oracle), an owner that closed
//! its descriptors while it runs (a released byte is taken for death here), reorderings ARM
//! allows beyond x86's, and the retire overflow list.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// A multiply-rotate hash for the visited set: the states are small and many, and SipHash
/// took most of the run time.
#[derive(Default)]
struct StateHasher(u64);

impl Hasher for StateHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
}

/// A system of threads whose every step is atomic.
trait Model: Clone + Eq + Hash {
    /// How many threads (step choices) there are.
    const THREADS: usize;
    /// Thread `t`'s next step from this state: None if it cannot move (finished, or dead),
    /// else the next state, or what safety property the step broke.
    fn step(&self, t: usize) -> Option<Result<Self, String>>;
}

/// Visits every state reachable from `init` (depth first, each state once). Returns how many
/// there were, or the first broken property with the threads that led to it.
fn explore<M: Model>(init: M) -> Result<usize, String> {
    let mut seen: HashSet<M, BuildHasherDefault<StateHasher>> = HashSet::default();
    seen.insert(init.clone());
    // The path from `init`: each state with the next thread to try from it.
    let mut path: Vec<(M, usize)> = vec![(init, 0)];
    while let Some((state, next)) = path.last_mut() {
        if *next == M::THREADS {
            path.pop();
            continue;
        }
        let t = *next;
        *next += 1;
        match state.step(t) {
            None => {}
            Some(Err(why)) => {
                let trace: Vec<usize> = path.iter().map(|(_, n)| n - 1).collect();
                return Err(format!("{why}; threads stepped: {trace:?}"));
            }
            Some(Ok(s)) if seen.insert(s.clone()) => path.push((s, 0)),
            Some(Ok(_)) => {}
        }
    }
    Ok(seen.len())
}

// ---------------------------------------------------------------------------------------
// Epochs: `Participant::pin`, `retire`, `try_advance` and `collect`.
// ---------------------------------------------------------------------------------------

/// A flaw to put back into the epoch model.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum EpochFlaw {
    None,
    /// `pin` stores its epoch once, without loading the global epoch again.
    PinWithoutRecheck,
    /// A pinned retire stamps the epoch it pinned at, not one more.
    StampPinnedAt,
    /// `collect` frees entries one epoch old instead of two.
    RipeAfterOne,
    /// An unpinned retire uses a global epoch loaded before its unlink.
    UnpinnedStampBeforeUnlink,
    /// An unpinned retire loads the global epoch after its unlink without the fence first
    /// (on x86 the load can pass the unlink, still in the store buffer).
    UnpinnedStampWithoutFence,
    /// A pinned retire stamps the global epoch loaded after its unlink (the comment in
    /// `retire` says why that is not enough), not its pinned epoch + 1.
    PinnedStampLoadsGlobal,
    /// `pin` stores its epoch with a plain (Release) store, which can sit in the store
    /// buffer past the re-check, instead of a `SeqCst` one (xchg).
    PinStoreRelease,
}

impl EpochFlaw {
    /// The writer configurations (see [`Epochs::new`]) where the flaw can show.
    fn configs(self) -> &'static [(bool, bool, bool)] {
        use EpochFlaw::*;
        match self {
            None => &[(true, false, true), (true, true, false), (false, false, true)],
            PinWithoutRecheck | StampPinnedAt | RipeAfterOne => &[(true, false, false)],
            PinnedStampLoadsGlobal | PinStoreRelease => &[(true, false, true)],
            UnpinnedStampBeforeUnlink => &[(false, false, false)],
            UnpinnedStampWithoutFence => &[(false, false, true)],
        }
    }
}

const READERS: usize = 2;
/// Participant slots: the readers, the writer, the advancer.
const SLOTS: usize = READERS + 2;
const WRITER: usize = READERS;
const ADVANCER: usize = READERS + 1;
// Bounds: two readers pinning once each, a writer replacing the block twice, and two more
// `try_advance` calls from a participant that does nothing else. About 1.4M states over the
// three writer configurations (about ten seconds in a debug build); each known flaw shows
// within them.
const READER_ROUNDS: u8 = 1;
const WRITES: u8 = 2;
const ADVANCES: u8 = 2;
const DONE: u8 = u8::MAX;

/// One thread's registers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
struct Regs {
    pc: u8,
    /// The epoch being pinned (pin), or the global epoch loaded by `try_advance`.
    e: u8,
    /// The block a reader loaded, or the slot `try_advance` is looking at.
    x: u8,
    rounds: u8,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Epochs {
    flaw: EpochFlaw,
    /// How the writer retires: inside its pin (as the engine's writers do) or unpinned.
    writer_pins: bool,
    /// Whether the writer collects while still pinned (retire collects every
    /// `COLLECT_EVERY`) or after unpinning.
    collect_pinned: bool,
    /// `H_EPOCH`.
    global: u8,
    /// Each slot's `S_EPOCH`: 0, or the pinned epoch * 2 + 1.
    slot_epoch: [u8; SLOTS],
    /// The block the structure points to (readers load it; the writer replaces it).
    published: u8,
    /// Blocks given back to the allocator (bit per block).
    freed: u8,
    /// The writer's retire list: (block, stamp), oldest first; `nretired` entries.
    retired: [(u8, u8); WRITES as usize],
    nretired: u8,
    regs: [Regs; SLOTS],
    /// Whether the writer's plain stores go through an x86 store buffer.
    tso: bool,
    /// That buffer, oldest first: `Store::None` entries are empty.
    buffer: [Store; 6],
}

/// A plain store of the writer's, waiting in its store buffer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Store {
    None,
    /// The unlink: the published pointer becomes this block.
    Publish(u8),
    /// Its own slot's epoch word (unpin, or the flawed plain pin).
    SlotEpoch(u8),
}

impl Epochs {
    /// A writer that retires pinned or not, collects while pinned or not, with plain stores
    /// through a store buffer (`tso`) or straight to memory.
    fn new(flaw: EpochFlaw, (writer_pins, collect_pinned, tso): (bool, bool, bool)) -> Epochs {
        Epochs {
            flaw,
            writer_pins,
            collect_pinned,
            global: 2,
            slot_epoch: [0; SLOTS],
            published: 0,
            freed: 0,
            retired: [(0, 0); WRITES as usize],
            nretired: 0,
            regs: [Regs::default(); SLOTS],
            tso,
            buffer: [Store::None; 6],
        }
    }

    /// A plain store of the writer's: into the store buffer under TSO, else to memory.
    fn plain_store(&mut self, st: Store) {
        if self.tso {
            let free = self.buffer.iter().position(|&b| b == Store::None).expect("store buffer overflow");
            self.buffer[free] = st;
        } else {
            self.apply(st);
        }
    }

    fn apply(&mut self, st: Store) {
        match st {
            Store::None => {}
            Store::Publish(b) => self.published = b,
            Store::SlotEpoch(w) => self.slot_epoch[WRITER] = w,
        }
    }

    /// The writer's oldest buffered store reaches memory.
    fn drain_one(&mut self) {
        let st = self.buffer[0];
        self.buffer.copy_within(1.., 0);
        self.buffer[5] = Store::None;
        self.apply(st);
    }

    /// What the writer reads of its own slot's epoch word: its newest buffered store to it,
    /// else memory (x86 forwards a core's own buffered stores to its loads).
    fn own_slot_epoch(&self) -> u8 {
        let buffered = self.buffer.iter().rev().find_map(|st| match st {
            Store::SlotEpoch(w) => Some(*w),
            _ => None,
        });
        buffered.unwrap_or(self.slot_epoch[WRITER])
    }

    /// Whether the writer's next step is a locked instruction or a fence, which waits for
    /// its store buffer to drain: a `SeqCst` store (xchg), a compare-and-swap, the fence.
    fn writer_step_drains(&self) -> bool {
        match self.regs[WRITER].pc {
            1 => self.writer_pins && self.flaw != EpochFlaw::PinStoreRelease,
            // The bucket lock's compare-and-swap before the unlink (modelled with it).
            3 => true,
            // The unpinned retire's fence before its load.
            4 => !self.writer_pins && self.flaw != EpochFlaw::UnpinnedStampWithoutFence,
            // try_advance's compare-and-swap.
            8 => true,
            _ => false,
        }
    }

    /// `pin`'s steps at pc `at`, `at + 1`, `at + 2`; then continues at `then`.
    fn pin_step(&mut self, t: usize, at: u8, then: u8) {
        let r = &mut self.regs[t];
        match r.pc - at {
            0 => {
                r.e = self.global;
                r.pc += 1;
            }
            1 => {
                let word = r.e * 2 + 1;
                r.pc = if self.flaw == EpochFlaw::PinWithoutRecheck { then } else { at + 2 };
                if t == WRITER && self.flaw == EpochFlaw::PinStoreRelease {
                    self.plain_store(Store::SlotEpoch(word));
                } else {
                    self.slot_epoch[t] = word;
                }
            }
            _ => {
                if self.global == r.e {
                    r.pc = then;
                } else {
                    r.e = self.global;
                    r.pc = at + 1;
                }
            }
        }
    }

    /// `try_advance`'s steps at pc `at` (load the global epoch), `at + 1` (one slot per
    /// step), `at + 2` (the compare-and-swap); then continues at `then`.
    fn advance_step(&mut self, t: usize, at: u8, then: u8) {
        let own = self.own_slot_epoch();
        let r = &mut self.regs[t];
        match r.pc - at {
            0 => {
                r.e = self.global;
                r.x = 0;
                r.pc += 1;
            }
            1 => {
                let ep = if r.x as usize == WRITER && t == WRITER { own } else { self.slot_epoch[r.x as usize] };
                if ep & 1 == 1 && ep >> 1 != r.e {
                    r.pc = then;
                } else {
                    r.x += 1;
                    if r.x as usize == SLOTS {
                        r.pc += 1;
                    }
                }
            }
            _ => {
                if self.global == r.e {
                    self.global += 1;
                }
                r.pc = then;
            }
        }
    }

    /// `collect_list`'s frees, after its `try_advance`: one load of the global epoch, then
    /// the ripe prefix of the list goes back.
    fn free_ripe(&mut self) {
        let g = self.global;
        let age = if self.flaw == EpochFlaw::RipeAfterOne { 1 } else { 2 };
        while self.nretired > 0 {
            let (block, stamp) = self.retired[0];
            if (g.wrapping_sub(stamp) as i8) < age {
                break;
            }
            self.freed |= 1 << block;
            self.retired.copy_within(1.., 0);
            self.nretired -= 1;
        }
    }

    fn reader(&mut self, t: usize) -> Result<(), String> {
        match self.regs[t].pc {
            0..=2 => self.pin_step(t, 0, 3),
            3 => {
                self.regs[t].x = self.published;
                self.regs[t].pc = 4;
            }
            4 => {
                // Reading the block: the scheduler may put this as late as it likes, so
                // checking here covers the whole time the reader holds the block.
                let b = self.regs[t].x;
                if self.freed & (1 << b) != 0 {
                    return Err(format!("reader {t} read block {b} after it was freed"));
                }
                self.regs[t].pc = 5;
            }
            _ => {
                self.slot_epoch[t] = 0;
                let r = &mut self.regs[t];
                r.rounds += 1;
                r.pc = if r.rounds == READER_ROUNDS { DONE } else { 0 };
            }
        }
        Ok(())
    }

    /// The writer: [pin], unlink (publish a new block), retire the old one, [collect while
    /// pinned], [unpin], [collect]; `WRITES` times.
    fn writer(&mut self, t: usize) {
        const UNLINK: u8 = 3;
        const STAMP: u8 = 4;
        const UNPIN: u8 = 5;
        const ADVANCE: u8 = 6;
        const FREE: u8 = 9;
        const END: u8 = DONE - 1;
        let pc = self.regs[t].pc;
        match pc {
            0..=2 if self.writer_pins => self.pin_step(t, 0, UNLINK),
            0..=2 => {
                self.regs[t].e = self.global; // only the flawed stamp uses this early load
                self.regs[t].pc = UNLINK;
            }
            UNLINK => {
                // Under the writer's bucket lock (its compare-and-swap drained the buffer):
                // load the old block, store the new one.
                self.regs[t].x = self.published;
                self.regs[t].pc = STAMP;
                self.plain_store(Store::Publish(self.regs[t].rounds + 1));
            }
            STAMP => {
                let r = &mut self.regs[t];
                let stamp = match (self.writer_pins, self.flaw) {
                    (true, EpochFlaw::StampPinnedAt) => r.e,
                    (true, EpochFlaw::PinnedStampLoadsGlobal) => self.global,
                    (true, _) => r.e + 1,
                    (false, EpochFlaw::UnpinnedStampBeforeUnlink) => r.e,
                    // Fence (the buffer drained first), then load: the global epoch after the
                    // unlink is visible.
                    (false, _) => self.global,
                };
                self.retired[self.nretired as usize] = (r.x, stamp);
                self.nretired += 1;
                r.pc = if self.collect_pinned || !self.writer_pins { ADVANCE } else { UNPIN };
            }
            UNPIN => {
                // A Release store: plain.
                self.plain_store(Store::SlotEpoch(0));
                self.regs[t].pc = if self.collect_pinned { END } else { ADVANCE };
            }
            ADVANCE..=8 => self.advance_step(t, ADVANCE, FREE),
            _ => {
                self.free_ripe();
                self.regs[t].pc = if self.collect_pinned { UNPIN } else { END };
            }
        }
        let r = &mut self.regs[t];
        if r.pc == END {
            r.rounds += 1;
            r.pc = if r.rounds == WRITES { DONE } else { 0 };
        }
    }

    /// Another participant calling `try_advance` (any collect does), `ADVANCES` times.
    fn advancer(&mut self, t: usize) {
        self.advance_step(t, 0, 3);
        let r = &mut self.regs[t];
        if r.pc == 3 {
            r.rounds += 1;
            r.pc = if r.rounds == ADVANCES { DONE } else { 0 };
        }
    }

    /// Forgets what no thread will read again (the registers of a finished step), so that
    /// states differing only there are one state: without this the state space is a
    /// hundred times larger.
    fn forget_dead_registers(&mut self) {
        for (t, r) in self.regs.iter_mut().enumerate() {
            let live_e = match t {
                WRITER => matches!(r.pc, 1..=4 | 7 | 8),
                ADVANCER => r.pc == 1 || r.pc == 2,
                _ => (1..=2).contains(&r.pc),
            };
            let live_x = match t {
                WRITER => r.pc == 4 || r.pc == 7,
                ADVANCER => r.pc == 1,
                _ => r.pc == 4,
            };
            if !live_e {
                r.e = 0;
            }
            if !live_x {
                r.x = 0;
            }
        }
    }
}

impl Model for Epochs {
    /// Each participant, then the writer's store buffer draining one store.
    const THREADS: usize = SLOTS + 1;

    fn step(&self, t: usize) -> Option<Result<Epochs, String>> {
        if t == SLOTS {
            if self.buffer[0] == Store::None {
                return None;
            }
            let mut s = self.clone();
            s.drain_one();
            return Some(Ok(s));
        }
        if self.regs[t].pc == DONE || (t == WRITER && self.writer_step_drains() && self.buffer[0] != Store::None) {
            return None;
        }
        let mut s = self.clone();
        let r = match t {
            WRITER => {
                s.writer(t);
                Ok(())
            }
            ADVANCER => {
                s.advancer(t);
                Ok(())
            }
            _ => s.reader(t),
        };
        s.forget_dead_registers();
        Some(r.map(|()| s))
    }
}

/// Explores each writer configuration the flaw concerns.
fn check_epochs(flaw: EpochFlaw) -> Result<usize, String> {
    flaw.configs().iter().try_fold(0, |n, &cfg| Ok(n + explore(Epochs::new(flaw, cfg))?))
}

#[test]
fn no_interleaving_frees_a_block_a_pinned_reader_can_still_read() {
    let states = check_epochs(EpochFlaw::None).unwrap();
    eprintln!("{states} states");
    assert!(states > 100_000, "explored only {states} states");
}

#[test]
fn the_epoch_check_finds_each_known_flaw() {
    for flaw in [
        EpochFlaw::PinWithoutRecheck,
        EpochFlaw::StampPinnedAt,
        EpochFlaw::RipeAfterOne,
        EpochFlaw::UnpinnedStampBeforeUnlink,
        EpochFlaw::UnpinnedStampWithoutFence,
        EpochFlaw::PinnedStampLoadsGlobal,
        EpochFlaw::PinStoreRelease,
    ] {
        let found = check_epochs(flaw).expect_err(&format!("{flaw:?} went unnoticed"));
        assert!(found.contains("after it was freed"), "{flaw:?}: {found}");
    }
}

// ---------------------------------------------------------------------------------------
// Locks: `Arena::register`, `Participant::lock` (with its stale-owner takeover),
// `Arena::reap` / `finish_reap` and `Participant::drop`, with a process dying anywhere.
// ---------------------------------------------------------------------------------------

/// A flaw to put back into the lock model.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum LockFlaw {
    None,
    /// The reaper does not wait for the liveness byte: it reaps an owner that still runs.
    IgnoreLivenessByte,
    /// The reaper frees the slot without finishing the dead owner's intent.
    SkipIntent,
    /// Reaping and dropping free a slot without moving its generation on: the slot's next
    /// owner locks with its previous owner's lock word.
    NoGenerationBump,
    /// Reaping and dropping store FREE (with the next generation) before bumping the
    /// generation, which lock words are checked against.
    FreeBeforeBump,
}

// Bounds: three processes, two slots (so a slot changes hands), up to two deaths (so a
// reaper can die too). A process registers (reaping dead owners of the slots it scans, as
// `register`'s second pass does), takes the lock once, publishes, unlocks and drops.
const PROCS: usize = 3;
const PSLOTS: usize = 2;
const MAX_DEATHS: u8 = 2;
const NOBODY: u8 = u8::MAX;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Kind {
    Free,
    Claiming,
    Live,
    Reaping,
}

/// A slot's state word: kind, owner (pid) and generation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Word {
    kind: Kind,
    owner: u8,
    gen: u8,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Pc {
    /// register: load the state of the slot being scanned.
    Scan,
    /// register: take that slot's liveness byte.
    TakeByte,
    /// register: exchange FREE for CLAIMING.
    Claim,
    /// register: load the generation (the lock word) and go LIVE.
    GoLive,
    /// lock: the first compare-and-swap.
    Lock,
    /// lock, contended: is the loaded lock word's owner stale? (generation check)
    Stale,
    /// reap(slot of the lock word): load the state, take the byte.
    ReapByte,
    /// reap: load the state again.
    ReapLoad,
    /// reap: exchange the loaded word for REAPING.
    ReapClaim,
    /// reap: finish the intent.
    ReapIntent,
    /// reap: bump the generation.
    ReapBump,
    /// reap: store FREE.
    ReapFree,
    /// reap: give the byte back; the lock word is stale.
    ReapDone,
    /// lock: take a stale lock over.
    TakeOver,
    /// In the critical section: half of a publication is out (an intent is recorded).
    Critical,
    /// unlock.
    Unlock,
    /// drop: exchange LIVE for REAPING.
    DropClaim,
    /// drop: bump the generation.
    DropBump,
    /// drop: store FREE.
    DropFree,
    /// drop: close the liveness description.
    DropByte,
    Done,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Proc {
    pc: Pc,
    alive: bool,
    /// The slot it is scanning, then owns.
    slot: u8,
    /// Its own slot's state word: the FREE word it claims, then its CLAIMING or LIVE word.
    cur: Word,
    /// The state word of the slot it is reaping.
    seen_state: Word,
    /// Whether it reaps for `register` (a slot it scanned) rather than for a lock.
    for_register: bool,
    /// Its lock word: (slot, generation).
    me: (u8, u8),
    /// A lock word it loaded.
    seen: (u8, u8),
    /// The slot it is reaping.
    victim: u8,
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Locks {
    flaw: LockFlaw,
    state: [Word; PSLOTS],
    gen: [u8; PSLOTS],
    /// Who holds each slot's liveness byte (the kernel lets go when the holder dies).
    byte: [u8; PSLOTS],
    intent: [bool; PSLOTS],
    /// The bucket lock: free, or the holder's lock word (slot, generation).
    lock: Option<(u8, u8)>,
    /// A publication half done: set on entering the critical section, cleared on leaving it
    /// or by a reaper finishing the dead owner's intent.
    torn: bool,
    deaths: u8,
    procs: [Proc; PROCS],
}

impl Locks {
    fn new(flaw: LockFlaw) -> Locks {
        let free = Word { kind: Kind::Free, owner: NOBODY, gen: 0 };
        let p = Proc {
            pc: Pc::Scan,
            alive: true,
            slot: 0,
            cur: free,
            seen_state: free,
            for_register: false,
            me: (0, 0),
            seen: (0, 0),
            victim: 0,
        };
        Locks {
            flaw,
            state: [free; PSLOTS],
            gen: [0; PSLOTS],
            byte: [NOBODY; PSLOTS],
            intent: [false; PSLOTS],
            lock: None,
            torn: false,
            deaths: 0,
            procs: [p; PROCS],
        }
    }

    /// A compare-and-swap of a state word, compared whole as the real word is (generation
    /// included).
    fn cas_state(&mut self, slot: u8, expected: Word, new: Word) -> bool {
        let cur = self.state[slot as usize];
        let same = cur == expected;
        if same {
            self.state[slot as usize] = new;
        }
        same
    }

    fn run(&mut self, t: usize) -> Result<(), String> {
        let me = t as u8;
        let mut p = self.procs[t];
        let next_slot = |p: &mut Proc| {
            p.slot = (p.slot + 1) % PSLOTS as u8;
            p.pc = Pc::Scan;
        };
        // Where a reap goes on once the slot is free: `register` looks at the slot again,
        // `lock` takes the stale lock over.
        let reaped = |p: &mut Proc| {
            p.pc = if p.for_register { Pc::Scan } else { Pc::TakeOver };
            p.for_register = false;
        };
        // Where it goes on if the owner lives (or the slot changed): `register` tries the
        // next slot, `lock` waits.
        let gave_up = |p: &mut Proc| {
            if p.for_register {
                next_slot(p);
            } else {
                p.pc = Pc::Lock;
            }
            p.for_register = false;
        };
        match p.pc {
            Pc::Scan => {
                p.cur = self.state[p.slot as usize];
                if p.cur.kind == Kind::Free {
                    p.pc = Pc::TakeByte;
                } else {
                    // `register`'s second pass: reap the slot if its owner is dead.
                    p.victim = p.slot;
                    p.for_register = true;
                    p.pc = Pc::ReapByte;
                }
            }
            Pc::TakeByte => {
                if self.byte[p.slot as usize] == NOBODY {
                    self.byte[p.slot as usize] = me;
                    p.pc = Pc::Claim;
                } else {
                    next_slot(&mut p);
                }
            }
            Pc::Claim => {
                let claiming = Word { kind: Kind::Claiming, owner: me, gen: p.cur.gen };
                if self.cas_state(p.slot, p.cur, claiming) {
                    p.cur = claiming;
                    p.pc = Pc::GoLive;
                } else {
                    self.byte[p.slot as usize] = NOBODY;
                    next_slot(&mut p);
                }
            }
            Pc::GoLive => {
                p.me = (p.slot, self.gen[p.slot as usize]);
                let live = Word { kind: Kind::Live, ..p.cur };
                if !self.cas_state(p.slot, p.cur, live) {
                    return Err(format!("process {t}'s CLAIMING slot {} was taken from it", p.slot));
                }
                p.cur = live;
                p.pc = Pc::Lock;
            }
            Pc::Lock => match self.lock {
                None => {
                    self.lock = Some(p.me);
                    p.pc = Pc::Critical;
                    self.enter(t)?;
                }
                Some(w) => {
                    p.seen = w;
                    p.pc = Pc::Stale;
                }
            },
            Pc::Stale => {
                let (slot, gen) = p.seen;
                if self.gen[slot as usize] != gen {
                    p.pc = Pc::TakeOver;
                } else {
                    // `lock_is_stale(cur, check_pid)`: reap the owner's slot if it is dead.
                    p.victim = slot;
                    p.pc = Pc::ReapByte;
                }
            }
            Pc::ReapByte => {
                let v = p.victim as usize;
                if self.state[v].kind == Kind::Free {
                    reaped(&mut p);
                } else if self.flaw == LockFlaw::IgnoreLivenessByte {
                    p.pc = Pc::ReapLoad;
                } else if self.byte[v] == NOBODY {
                    self.byte[v] = me;
                    p.pc = Pc::ReapLoad;
                } else {
                    gave_up(&mut p); // its owner lives
                }
            }
            Pc::ReapLoad => {
                let v = p.victim as usize;
                p.seen_state = self.state[v];
                if p.seen_state.kind == Kind::Free {
                    self.release(p.victim, me);
                    reaped(&mut p);
                } else {
                    p.pc = Pc::ReapClaim;
                }
            }
            Pc::ReapClaim => {
                // From CLAIMING, LIVE or (its reaper died) REAPING.
                let reaping = Word { kind: Kind::Reaping, ..p.seen_state };
                if self.cas_state(p.victim, p.seen_state, reaping) {
                    p.pc = Pc::ReapIntent;
                } else {
                    self.release(p.victim, me);
                    gave_up(&mut p);
                }
            }
            Pc::ReapIntent => {
                let v = p.victim as usize;
                if self.intent[v] && self.flaw != LockFlaw::SkipIntent {
                    // The recovery handler redoes the dead owner's publication.
                    self.torn = false;
                }
                self.intent[v] = false;
                p.pc = if self.flaw == LockFlaw::FreeBeforeBump { Pc::ReapFree } else { Pc::ReapBump };
            }
            Pc::ReapBump => {
                self.bump(p.victim as usize);
                p.pc = if self.flaw == LockFlaw::FreeBeforeBump { Pc::ReapDone } else { Pc::ReapFree };
            }
            Pc::ReapFree => {
                self.store_free(p.victim);
                p.pc = if self.flaw == LockFlaw::FreeBeforeBump { Pc::ReapBump } else { Pc::ReapDone };
            }
            Pc::ReapDone => {
                self.release(p.victim, me);
                reaped(&mut p);
            }
            Pc::TakeOver => {
                if self.lock == Some(p.seen) {
                    self.lock = Some(p.me);
                    p.pc = Pc::Critical;
                    self.enter(t)?;
                } else {
                    p.pc = Pc::Lock;
                }
            }
            Pc::Critical => {
                self.torn = false;
                self.intent[p.slot as usize] = false;
                p.pc = Pc::Unlock;
            }
            Pc::Unlock => {
                if self.lock != Some(p.me) {
                    return Err(format!("process {t} unlocked a lock it no longer held"));
                }
                self.lock = None;
                p.pc = Pc::DropClaim;
            }
            Pc::DropClaim => {
                let reaping = Word { kind: Kind::Reaping, ..p.cur };
                if !self.cas_state(p.slot, p.cur, reaping) {
                    // Only a reaper takes a slot out of LIVE, and only once its owner died.
                    return Err(format!("process {t}'s slot {} was reaped while it lived", p.slot));
                }
                p.pc = if self.flaw == LockFlaw::FreeBeforeBump { Pc::DropFree } else { Pc::DropBump };
            }
            Pc::DropBump => {
                self.bump(p.slot as usize);
                p.pc = if self.flaw == LockFlaw::FreeBeforeBump { Pc::DropByte } else { Pc::DropFree };
            }
            Pc::DropFree => {
                self.store_free(p.slot);
                p.pc = if self.flaw == LockFlaw::FreeBeforeBump { Pc::DropBump } else { Pc::DropByte };
            }
            Pc::DropByte => {
                self.release(p.slot, me);
                p.pc = Pc::Done;
            }
            Pc::Done => {}
        }
        self.procs[t] = p;
        Ok(())
    }

    /// Process `t` has just taken the lock: nobody else alive may be inside, and the data
    /// must be whole (a dead holder's publication finished by its reaper).
    fn enter(&mut self, t: usize) -> Result<(), String> {
        for (q, other) in self.procs.iter().enumerate() {
            if q != t && other.alive && other.pc == Pc::Critical {
                return Err(format!("processes {q} and {t} both hold the lock"));
            }
        }
        if self.torn {
            return Err(format!("process {t} took the lock over a dead owner's unfinished publication"));
        }
        self.torn = true;
        self.intent[self.procs[t].slot as usize] = true;
        Ok(())
    }

    /// Forgets what no process will read again, as [`Epochs::forget_dead_registers`] does:
    /// all of a dead or finished process but its liveness, and a live one's reap registers
    /// outside a reap.
    fn forget_dead_registers(&mut self) {
        let free = Word { kind: Kind::Free, owner: NOBODY, gen: 0 };
        for p in self.procs.iter_mut() {
            if !p.alive || p.pc == Pc::Done {
                *p = Proc {
                    pc: Pc::Done,
                    alive: p.alive,
                    slot: 0,
                    cur: free,
                    seen_state: free,
                    for_register: false,
                    me: (0, 0),
                    seen: (0, 0),
                    victim: 0,
                };
                continue;
            }
            let reaping = matches!(
                p.pc,
                Pc::ReapByte
                    | Pc::ReapLoad
                    | Pc::ReapClaim
                    | Pc::ReapIntent
                    | Pc::ReapBump
                    | Pc::ReapFree
                    | Pc::ReapDone
            );
            if !reaping {
                p.seen_state = free;
                p.victim = 0;
            }
            if !reaping && !matches!(p.pc, Pc::Stale | Pc::TakeOver) {
                p.seen = (0, 0);
            }
        }
    }

    /// The FREE store: the generation as it is now.
    fn store_free(&mut self, slot: u8) {
        let gen =
            if self.flaw == LockFlaw::FreeBeforeBump { self.gen[slot as usize] + 1 } else { self.gen[slot as usize] };
        self.state[slot as usize] = Word { kind: Kind::Free, owner: NOBODY, gen };
    }

    fn bump(&mut self, slot: usize) {
        if self.flaw != LockFlaw::NoGenerationBump {
            self.gen[slot] += 1;
        }
    }

    fn release(&mut self, slot: u8, me: u8) {
        if self.byte[slot as usize] == me {
            self.byte[slot as usize] = NOBODY;
        }
    }

    /// Process `t` dies (SIGKILL): it takes no more steps, and the kernel lets go of its
    /// liveness bytes.
    fn die(&mut self, t: usize) {
        self.procs[t].alive = false;
        self.deaths += 1;
        for b in self.byte.iter_mut() {
            if *b == t as u8 {
                *b = NOBODY;
            }
        }
    }
}

impl Model for Locks {
    /// Each process's next step, then each process's death.
    const THREADS: usize = 2 * PROCS;

    fn step(&self, t: usize) -> Option<Result<Locks, String>> {
        let p = self.procs[t % PROCS];
        if !p.alive || p.pc == Pc::Done {
            return None;
        }
        let mut s = self.clone();
        if t >= PROCS {
            if self.deaths == MAX_DEATHS {
                return None;
            }
            s.die(t - PROCS);
            return Some(Ok(s));
        }
        let r = s.run(t);
        s.forget_dead_registers();
        Some(r.map(|()| s))
    }
}

#[test]
fn no_interleaving_or_death_lets_two_live_processes_hold_a_lock() {
    let states = explore(Locks::new(LockFlaw::None)).unwrap();
    eprintln!("{states} states");
    assert!(states > 10_000, "explored only {states} states");
}

#[test]
fn the_lock_check_finds_each_known_flaw() {
    for flaw in
        [LockFlaw::IgnoreLivenessByte, LockFlaw::SkipIntent, LockFlaw::NoGenerationBump, LockFlaw::FreeBeforeBump]
    {
        match explore(Locks::new(flaw)) {
            Ok(states) => panic!("{flaw:?} went unnoticed in {states} states"),
            Err(found) => eprintln!("{flaw:?}: {found}"),
        }
    }
}
