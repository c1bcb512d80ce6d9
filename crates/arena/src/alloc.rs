//! The allocator: size classes carved from 64 KiB pages, per-participant caches, lock-free
//! per-class batch stacks, and page runs for large values.
//!
//! - **Fast path** (no shared atomics): pop from this participant's free list for the class,
//!   or bump inside its current page. The cache lives in the arena (16 bytes per class per
//!   slot), so a dead participant's cache is not lost: whoever frees its slot (the
//!   participant leaving, or the reaper of a dead one) hands it to the global stacks.
//! - **Refill**: pop a batch of [`BATCH`] blocks from the class's global Treiber stack (a
//!   64-bit head of `tag:32 | unit offset:32`; the tag defeats ABA), else take a fresh page.
//! - **Free**: push on the local list; past `2 × BATCH` blocks, hand a batch to the global
//!   stack so memory freed by one thread feeds others.
//! - **Large** (over [`LARGE_MIN`] bytes): a run of whole pages, first fit from a free-run
//!   list under an owner-recording lock (large allocations are rare), else fresh pages. A
//!   freed run's pages are given back to the kernel (`MADV_REMOVE`).
//!
//! Free-block layout: word 0 (`u32`) is the next block in a list, word 1 the next batch (in
//! a batch head on a global stack) or the retire epoch (on a retire list), word 2 (in a
//! batch head) the batch's length, 1 to [`BATCH`].
//!
//! Page descriptors: one `u32` per page: `0` unused, `1..=NCLASSES` small class + 1,
//! `LARGE | npages` the first page of a run, `CONT` the rest of a run.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{
    Arena, Error, Participant, H_CLASS_STACKS, H_LARGE_DIRTY_OLDEST, H_LARGE_DIRTY_PAGES, H_LARGE_FREE_PAGES,
    H_LARGE_HEAD, H_LARGE_LOCK, H_PAGE_NEXT, H_STACK_BLOCKS, PAGE, UNIT,
};

pub(crate) const CACHE_ENTRY: u64 = 16;
// The four u32 words of a cache entry (indexes, not byte offsets).
const C_FREE_HEAD: usize = 0;
const C_FREE_COUNT: usize = 1;
const C_BUMP_CUR: usize = 2;
const C_BUMP_END: usize = 3;

const BATCH: u32 = 32;
const LARGE: u32 = 0x8000_0000;
const CONT: u32 = 0x4000_0000;

/// Objects larger than this take whole pages.
pub const LARGE_MIN: u64 = 32 * 1024;

/// How long a freed large run keeps its pages resident before
/// [`Participant::purge_dirty`] gives them back to the kernel (jemalloc's dirty-page decay,
/// shorter).
pub const DIRTY_DECAY_MS: u64 = 1000;
/// At most this many free-run pages (64 MiB) stay resident: a free past it gives them all back.
const DIRTY_MAX_PAGES: u64 = (64 << 20) / PAGE;

/// The earlier of two dirty times, 0 meaning none.
fn earliest(x: u64, y: u64) -> u64 {
    if x == 0 || y == 0 {
        x.max(y)
    } else {
        x.min(y)
    }
}

/// Milliseconds on the monotonic clock, which every process on the machine shares; never 0
/// (0 marks a clean run).
fn now_ms() -> u64 {
    crate::map::monotonic_ms().max(1)
}

const fn build_classes() -> ([u32; 96], usize) {
    let mut t = [0u32; 96];
    let mut n = 0;
    // 8-byte steps up to 256 bytes: small items are where per-key overhead matters most.
    let mut s = 16;
    while s <= 256 {
        t[n] = s;
        n += 1;
        s += 8;
    }
    // Then about 12.5% apart, 8-byte aligned, up to LARGE_MIN.
    let mut s = 256u32;
    while s < LARGE_MIN as u32 {
        let step = (s / 8).div_ceil(8) * 8;
        s += step;
        if s > LARGE_MIN as u32 {
            s = LARGE_MIN as u32;
        }
        t[n] = s;
        n += 1;
    }
    (t, n)
}

const CLASSES: ([u32; 96], usize) = build_classes();
/// Number of small size classes.
pub const NCLASSES: usize = CLASSES.1;

/// Per class, the constant of Lemire's divisibility test: a u32 `n` is a multiple of the
/// class size exactly when `n * M <= M - 1` in wrapping u64 arithmetic, with
/// `M = u64::MAX / size + 1` (Lemire, Kaser, Kurz, "Faster remainder by direct computation",
/// 2019). One multiply instead of a division, for checking block boundaries on every free
/// and every allocation.
const DIVISIBLE: [u64; 96] = {
    let mut m = [0u64; 96];
    let mut c = 0;
    while c < NCLASSES {
        m[c] = u64::MAX / CLASSES.0[c] as u64 + 1;
        c += 1;
    }
    m
};

/// Whether byte `at` of a page is where a block of class `c` starts: a multiple of the
/// class size, with the whole block inside the page (the page's tail past its last block
/// is no block).
#[inline]
fn block_start(at: u64, c: usize) -> bool {
    // (Exact for any offset within a page; not for every u64.)
    debug_assert!(at < PAGE);
    let m = DIVISIBLE[c];
    at.wrapping_mul(m) < m && at + class_size(c) <= PAGE
}

/// Block size of class `c`.
#[inline]
pub fn class_size(c: usize) -> u64 {
    CLASSES.0[c] as u64
}

/// Smallest class holding `size` bytes (`size <= LARGE_MIN`).
#[inline]
pub fn class_of(size: u64) -> usize {
    if size <= 256 {
        return (size.max(16) as usize - 16).div_ceil(8);
    }
    CLASSES.0[31..NCLASSES].partition_point(|&c| (c as u64) < size) + 31
}

/// What [`Participant::release_free_pages`] remembers between passes, per class: the
/// class stack's tag it last saw, and when it may look again.
#[derive(Clone, Debug, Default)]
pub struct PageRelease {
    classes: Vec<ClassRelease>,
}

#[derive(Clone, Copy, Debug, Default)]
struct ClassRelease {
    /// The stack's tag after the last pass.
    tag: u32,
    /// Batches' worth of blocks the last pass read.
    batches: u64,
    not_before: u64,
    backoff_ms: u64,
}

/// Figures for measuring fragmentation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Pages ever handed out (small or large), in bytes.
    pub pages_bytes: u64,
    /// Bytes in small-class pages.
    pub small_pages_bytes: u64,
    /// Bytes in large runs currently allocated.
    pub large_bytes: u64,
    /// Bytes in free large runs.
    pub large_free_bytes: u64,
    /// Free small blocks found on caches and global stacks, per class: (class size, count).
    pub free_blocks: Vec<(u64, u64)>,
    /// Blocks waiting for reclamation on retire lists.
    pub retired_blocks: u64,
    /// Free blocks on lists (small + large) by byte offset: for checkers that make sure no
    /// published item sits in free memory.
    pub free_set: HashMap<u64, u64>,
}

impl Arena {
    #[inline]
    pub(crate) fn page_desc(&self, page: u64) -> Result<&AtomicU32, Error> {
        self.map.table_u32(page).ok_or(Error::OutOfRange { off: page.saturating_mul(PAGE), size: 0 })
    }

    fn total_pages(&self) -> u64 {
        self.capacity() / PAGE
    }

    /// One past the last page handed out so far.
    fn next_page(&self) -> Result<u64, Error> {
        Ok(self.u64(H_PAGE_NEXT)?.load(Ordering::Relaxed).min(self.total_pages()))
    }

    /// Whether `off` is the start of a block of class `c`: in the arena, in a page whose
    /// descriptor serves class `c`, on a block boundary. Every free list, stack and bump
    /// cursor lives in the segment, so in a corrupt one it may point anywhere: at metadata,
    /// at another class's blocks, into the middle of live data. A block a list legitimately
    /// holds always passes (a small page keeps its class while any of its blocks is on a
    /// list or in use: a page release takes only pages with none), so the allocator checks
    /// each one before handing it out: a load of the page's descriptor and a multiply.
    #[inline]
    fn serves_class(&self, off: u64, c: usize) -> bool {
        self.map.table_u32(off / PAGE).is_some_and(|d| d.load(Ordering::Relaxed) == c as u32 + 1)
            && block_start(off % PAGE, c)
    }

    /// The free run whose node is at unit offset `units`, as (byte offset, pages, next), if
    /// it is one: page-aligned in the pages handed out so far (below `next_page`, from
    /// [`Arena::next_page`]), at least a page long, and free by its descriptor. None for
    /// anything else (a corrupt link).
    fn free_run(&self, units: u32, next_page: u64) -> Result<Option<(u64, u64, u32)>, Error> {
        let off = Arena::from_units(units);
        if !off.is_multiple_of(PAGE) || off < self.data_off || off / PAGE >= next_page {
            return Ok(None);
        }
        let len = self.u32(off + 4)?.load(Ordering::Relaxed) as u64;
        if len == 0 || off / PAGE + len > next_page || self.page_desc(off / PAGE)?.load(Ordering::Relaxed) != 0 {
            return Ok(None);
        }
        Ok(Some((off, len, self.u32(off)?.load(Ordering::Relaxed))))
    }

    /// Block size of an allocated block at `off`, from its page descriptor.
    pub fn block_size(&self, off: u64) -> Result<u64, Error> {
        let page = off / PAGE;
        let d = self.page_desc(page)?.load(Ordering::Acquire);
        if d & LARGE != 0 {
            if !off.is_multiple_of(PAGE) {
                return Err(Error::OutOfRange { off, size: 0 });
            }
            return Ok((d & !LARGE) as u64 * PAGE);
        }
        Ok(class_size(self.small_class(off, d)?))
    }

    /// The size of the block at `off` as its page descriptor says, without checking that
    /// `off` is a block boundary (0 if the page holds no blocks): cheap, for heuristics.
    #[inline]
    pub(crate) fn size_hint(&self, off: u64) -> u64 {
        match self.page_desc(off / PAGE).map(|d| d.load(Ordering::Relaxed)) {
            Ok(d) if d & LARGE != 0 => (d & !LARGE) as u64 * PAGE,
            Ok(d) if d != 0 && d & CONT == 0 && d as usize <= NCLASSES => class_size(d as usize - 1),
            _ => 0,
        }
    }

    /// The size class of the small block at `off`, whose page descriptor reads `d`: the
    /// descriptor holds the class, so no size-to-class search. Checks that the page is a
    /// small-class page and `off` a block boundary in it.
    #[inline]
    fn small_class(&self, off: u64, d: u32) -> Result<usize, Error> {
        if d == 0 || d & CONT != 0 || d as usize > NCLASSES {
            return Err(Error::OutOfRange { off, size: 0 });
        }
        let c = d as usize - 1;
        if !block_start(off % PAGE, c) {
            return Err(Error::OutOfRange { off, size: class_size(c) });
        }
        Ok(c)
    }

    fn large_lock(&self) -> Result<&AtomicU32, Error> {
        self.u32(H_LARGE_LOCK)
    }

    /// Statistics for fragmentation; walks every free list, so not for hot paths.
    pub fn alloc_stats(&self) -> Result<AllocStats, Error> {
        let mut st = AllocStats::default();
        let first = self.data_off / PAGE;
        let next = self.u64(H_PAGE_NEXT)?.load(Ordering::Acquire).min(self.total_pages());
        st.pages_bytes = (next - first) * PAGE;
        for p in first..next {
            let d = self.page_desc(p)?.load(Ordering::Relaxed);
            if d & LARGE != 0 {
                st.large_bytes += (d & !LARGE) as u64 * PAGE;
            } else if d != 0 && d & CONT == 0 {
                st.small_pages_bytes += PAGE;
            }
        }
        let mut counts = vec![0u64; NCLASSES];
        let limit = self.capacity() / 16;
        let add = |st: &mut AllocStats, off: u64, size: u64| -> Result<(), Error> {
            if st.free_set.insert(off, size).is_some() {
                return Err(Error::Geometry("a block is on two free lists"));
            }
            Ok(())
        };
        // Several sources per class, each counted into `counts[c]`.
        #[allow(clippy::needless_range_loop)]
        for c in 0..NCLASSES {
            let size = class_size(c);
            for slot in 0..self.max_participants {
                let e = self.cache_entry(slot, c);
                let mut b = self.u32(e + 4 * C_FREE_HEAD as u64)?.load(Ordering::Acquire);
                let mut steps = 0;
                while b != 0 && steps < limit {
                    let off = Arena::from_units(b);
                    add(&mut st, off, size)?;
                    counts[c] += 1;
                    b = self.u32(off)?.load(Ordering::Acquire);
                    steps += 1;
                }
            }
            let head = self.u64(H_CLASS_STACKS + c as u64 * 8)?.load(Ordering::Acquire) as u32;
            let mut batch = head;
            while batch != 0 {
                let mut b = batch;
                while b != 0 {
                    let off = Arena::from_units(b);
                    add(&mut st, off, size)?;
                    counts[c] += 1;
                    b = self.u32(off)?.load(Ordering::Acquire);
                }
                batch = self.u32(Arena::from_units(batch) + 4)?.load(Ordering::Acquire);
            }
        }
        st.free_blocks = counts.iter().enumerate().filter(|(_, &n)| n > 0).map(|(c, &n)| (class_size(c), n)).collect();
        let mut run = self.u64(H_LARGE_HEAD)?.load(Ordering::Acquire) as u32;
        while run != 0 {
            let off = Arena::from_units(run);
            let n = self.u32(off + 4)?.load(Ordering::Relaxed) as u64;
            add(&mut st, off, n * PAGE)?;
            st.large_free_bytes += n * PAGE;
            run = self.u32(off)?.load(Ordering::Acquire);
        }
        for slot in 0..self.max_participants {
            let (head, _, _) = self.retire_list(slot)?;
            let mut c = head.load(Ordering::Acquire);
            let mut steps = 0;
            while c != 0 && steps < limit {
                let chunk = Arena::from_units(c);
                let n = self.u32(chunk + 4)?.load(Ordering::Acquire) as u64;
                let s = self.u32(chunk + 8)?.load(Ordering::Acquire) as u64;
                st.retired_blocks += n.min(crate::participant::RETIRE_ENTRIES).saturating_sub(s);
                c = self.u32(chunk)?.load(Ordering::Acquire);
                steps += 1;
            }
        }
        Ok(st)
    }

    /// The byte range of pages handed out so far (for tests that corrupt them on purpose).
    pub fn data_range(&self) -> (u64, u64) {
        let first = self.data_off / PAGE;
        let next = self.u64(H_PAGE_NEXT).map(|p| p.load(Ordering::Relaxed)).unwrap_or(first);
        (first * PAGE, next.min(self.total_pages()) * PAGE)
    }

    /// The byte ranges of the metadata in use, named (for tests that corrupt them on
    /// purpose): the header with the allocator's global words, the claimed participant
    /// slots, their block caches, and the page descriptors of pages handed out so far.
    pub fn metadata_ranges(&self) -> [(&'static str, u64, u64); 4] {
        let slots = self.slot_hwm() as u64;
        let (first, next) = {
            let (s, e) = self.data_range();
            (s / PAGE, e / PAGE)
        };
        [
            ("header", 0, self.part_off),
            ("participants", self.part_off, self.part_off + slots * crate::SLOT_SIZE),
            ("caches", self.cache_off, self.cache_off + slots * NCLASSES as u64 * CACHE_ENTRY),
            ("page descriptors", self.pagedesc_off + first * 4, self.pagedesc_off + next * 4),
        ]
    }

    /// Bytes of pages touched so far (small and large), the allocator's footprint.
    pub fn pages_in_use_bytes(&self) -> u64 {
        let first = self.data_off / PAGE;
        let next = self.u64(H_PAGE_NEXT).map(|p| p.load(Ordering::Relaxed)).unwrap_or(first);
        (next.min(self.total_pages()) - first) * PAGE
    }

    /// [`Arena::pages_in_use_bytes`] less the pages of free large runs (ready for reuse by
    /// any class or value, given back to the kernel after [`DIRTY_DECAY_MS`]): the pages of
    /// small classes and of large values. Free small blocks still count (see
    /// [`Arena::free_small_bytes`]).
    pub fn pages_held_bytes(&self) -> u64 {
        let free = self.u64(H_LARGE_FREE_PAGES).map(|p| p.load(Ordering::Relaxed)).unwrap_or(0);
        self.pages_in_use_bytes().saturating_sub(free * PAGE)
    }

    /// Bytes of free small blocks, kept by their class for its next allocations: on the
    /// class stacks, on participants' free lists, and the rest of each participant's page
    /// being carved. Index segments (16 KiB and more) kept for the next split are among
    /// them. A snapshot taken without stopping anyone (each figure read once; a block in
    /// flight may be missed or counted twice), from per-class counts, not a walk: a load
    /// per class and per participant's class.
    pub fn free_small_bytes(&self) -> u64 {
        let mut blocks = [0u64; NCLASSES];
        for (c, n) in blocks.iter_mut().enumerate() {
            // A count taken off past zero (a corrupt stack's) reads as none, and one past
            // what the arena could hold as that much.
            let on_stack = self.u64(H_STACK_BLOCKS + 8 * c as u64).map(|w| w.load(Ordering::Relaxed)).unwrap_or(0);
            *n = (on_stack as i64).max(0) as u64;
            *n = (*n).min(self.capacity() / class_size(c));
        }
        for slot in 0..self.slot_hwm() {
            for (c, n) in blocks.iter_mut().enumerate() {
                let Ok(e) = self.u32s::<4>(self.cache_entry(slot, c)) else { continue };
                let listed = e[C_FREE_COUNT].load(Ordering::Relaxed).min(2 * BATCH) as u64;
                let (cur, end) = (e[C_BUMP_CUR].load(Ordering::Relaxed), e[C_BUMP_END].load(Ordering::Relaxed));
                let cu = (class_size(c) / UNIT) as u32;
                let carving = if cur == 0 { 0 } else { (end.saturating_sub(cur) / cu) as u64 };
                *n += listed + carving.min(PAGE / class_size(c));
            }
        }
        blocks.iter().enumerate().map(|(c, &n)| n * class_size(c)).sum()
    }

    /// Bytes allocated and not freed, as Redis's `used_memory` (zmalloc's count) means
    /// it: [`Arena::pages_held_bytes`] less [`Arena::free_small_bytes`]. Blocks retired and
    /// not yet reclaimed count (as Redis counts objects a lazy free has yet to free); the
    /// unused tail of a small-class page counts too.
    pub fn used_bytes(&self) -> u64 {
        self.pages_held_bytes().saturating_sub(self.free_small_bytes())
    }

    /// What the allocator holds, in words: for a diagnostic when an allocation fails with
    /// [`Error::Full`] (the stress workers print it), to tell an arena really full of data
    /// from one whose pages sit elsewhere. The pages by their descriptors; the free-run list
    /// as walked beside its counters; per class, its pages, its stack as walked beside its
    /// count, the blocks on participants' free lists and left to carve, and a release under
    /// way; per slot ever used, its state, pinned epoch, retired blocks and cache. Walks
    /// every list and descriptor (a few milliseconds for a 512 MiB arena): never on a hot
    /// path, and a corrupt list is cut short rather than followed for ever.
    pub fn alloc_report(&self) -> String {
        use std::fmt::Write;
        let load = |off: u64| self.u64(off).map(|w| w.load(Ordering::Relaxed)).unwrap_or(0);
        let load32 = |off: u64| self.u32(off).map(|w| w.load(Ordering::Relaxed)).unwrap_or(0);
        let mut out = String::new();
        let first = self.data_off / PAGE;
        let raw_next = load(H_PAGE_NEXT);
        let next = raw_next.clamp(first, self.total_pages());
        let (mut large, mut cont, mut zero, mut bad) = (0u64, 0u64, 0u64, 0u64);
        let mut pages = [0u64; NCLASSES];
        for p in first..next {
            match self.page_desc(p).map(|d| d.load(Ordering::Relaxed)).unwrap_or(u32::MAX) {
                0 => zero += 1,
                d if d & LARGE != 0 => large += 1,
                CONT => cont += 1,
                d if d as usize <= NCLASSES => pages[d as usize - 1] += 1,
                _ => bad += 1,
            }
        }
        let _ = writeln!(
            out,
            "pages: {} of {} handed out (mark {raw_next}): {} of small classes, {large} large runs over {} pages, \
             {zero} free, {bad} with a corrupt descriptor",
            next - first,
            self.total_pages() - first,
            pages.iter().sum::<u64>(),
            large + cont,
        );
        let (mut runs, mut run_pages, mut longest, mut end) = (0u64, 0u64, 0u64, "its end");
        let mut run = load(H_LARGE_HEAD) as u32;
        while run != 0 {
            let Ok(Some((_, len, link))) = self.free_run(run, next) else {
                end = "a corrupt link";
                break;
            };
            (runs, run_pages, longest, run) = (runs + 1, run_pages + len, longest.max(len), link);
            if runs > self.total_pages() {
                end = "a loop";
                break;
            }
        }
        let _ = writeln!(
            out,
            "free runs: {runs} on the list, {run_pages} pages, the longest {longest}, walked to {end}; counted \
             {} free, longest at least {}, {} dirty; large lock {:#x}",
            load(H_LARGE_FREE_PAGES),
            load(crate::H_LARGE_MAX_RUN),
            load(H_LARGE_DIRTY_PAGES),
            load32(H_LARGE_LOCK),
        );
        let hwm = self.slot_hwm();
        let now = now_ms();
        let _ = write!(out, "classes (size: pages, stack walked/counted, listed and to carve by participants):");
        for (c, &held) in pages.iter().enumerate() {
            let cu = (class_size(c) / UNIT) as u32;
            let mut walked = 0u64;
            let mut batch = load(H_CLASS_STACKS + 8 * c as u64) as u32;
            'walk: while batch != 0 {
                let mut b = batch;
                while b != 0 {
                    walked += 1;
                    if walked > self.capacity() / class_size(c) {
                        break 'walk;
                    }
                    b = load32(Arena::from_units(b));
                }
                batch = load32(Arena::from_units(batch) + 4);
            }
            let counted = load(H_STACK_BLOCKS + 8 * c as u64) as i64;
            let (mut listed, mut carving) = (0u64, 0u64);
            for slot in 0..hwm {
                if let Ok(e) = self.u32s::<4>(self.cache_entry(slot, c)) {
                    listed += e[C_FREE_COUNT].load(Ordering::Relaxed) as u64;
                    let (cur, end) = (e[C_BUMP_CUR].load(Ordering::Relaxed), e[C_BUMP_END].load(Ordering::Relaxed));
                    if cur != 0 {
                        carving += (end.saturating_sub(cur) / cu) as u64;
                    }
                }
            }
            let mark = load(crate::H_RELEASING + 8 * c as u64);
            if held == 0 && walked == 0 && counted == 0 && listed == 0 && mark == 0 {
                continue;
            }
            let _ = write!(out, " {}: {held} {walked}/{counted} {listed}+{carving}", class_size(c));
            if release_mark::live(mark, now) {
                let _ = write!(out, " (a release holds it)");
            }
            let _ = write!(out, ";");
        }
        let _ = write!(out, "\nepoch {}; slots (state, pinned at, retired, listed + to carve bytes):", self.epoch());
        for s in self.slots() {
            let cached = self.cached_bytes(s.slot);
            if s.state == "free" && s.retired == 0 && cached == 0 {
                continue;
            }
            let pinned = if s.pinned { s.epoch.to_string() } else { "-".into() };
            let _ = write!(out, " {}: {} {pinned} {} {cached};", s.slot, s.state, s.retired);
        }
        out.push('\n');
        out
    }

    /// Bytes `slot`'s allocator cache holds: its free lists (as their counts say) and what
    /// its bump pages have not carved yet. A free slot's is 0: whoever frees a slot gives
    /// its cache back.
    pub fn cached_bytes(&self, slot: u32) -> u64 {
        let mut cached = 0u64;
        for c in 0..NCLASSES {
            if let Ok(e) = self.u32s::<4>(self.cache_entry(slot, c)) {
                let (cur, end) = (e[C_BUMP_CUR].load(Ordering::Relaxed), e[C_BUMP_END].load(Ordering::Relaxed));
                let carving = if cur == 0 { 0 } else { end.saturating_sub(cur) as u64 * UNIT };
                cached += e[C_FREE_COUNT].load(Ordering::Relaxed) as u64 * class_size(c) + carving.min(PAGE);
            }
        }
        cached
    }

    /// Bytes of free large runs whose pages may still be resident, waiting for
    /// [`Participant::purge_dirty`] (an over-estimate: a run merged with a clean neighbour
    /// counts whole).
    pub fn dirty_free_bytes(&self) -> u64 {
        self.u64(H_LARGE_DIRTY_PAGES).map(|p| p.load(Ordering::Relaxed)).unwrap_or(0) * PAGE
    }
}

impl Participant {
    /// This participant's cache entry for `class` (free-list head and count, bump cursor and
    /// end), bounds-checked once.
    #[inline]
    fn cache(&self, class: usize) -> Result<&[AtomicU32; 4], Error> {
        self.arena.u32s::<4>(self.arena.cache_entry(self.slot, class))
    }

    /// Allocates `size` bytes (8-aligned; at least 16). The memory is this participant's until
    /// it publishes it; it may hold old bytes.
    ///
    /// Inlined: the fast path (pop this participant's free list) is a few loads and stores;
    /// everything else is out of line.
    #[inline]
    pub fn alloc(&self, size: u64) -> Result<u64, Error> {
        if size > LARGE_MIN {
            return self.alloc_large(size);
        }
        let c = class_of(size);
        let entry = self.cache(c)?;
        let (head, count) = (&entry[C_FREE_HEAD], &entry[C_FREE_COUNT]);
        let h = head.load(Ordering::Relaxed);
        let off = Arena::from_units(h);
        if h == 0 || !self.arena.serves_class(off, c) {
            return self.alloc_refill(c);
        }
        head.store(self.arena.u32(off)?.load(Ordering::Relaxed), Ordering::Relaxed);
        count.store(count.load(Ordering::Relaxed).saturating_sub(1), Ordering::Relaxed);
        Ok(off)
    }

    /// [`Participant::alloc`] of class `c` with an empty free list: bump inside the current
    /// page, else a batch freed by someone else, else a fresh page, else whatever this
    /// participant's retired blocks give back.
    ///
    /// A free list whose head is not a block of its class (only a corrupt segment has one)
    /// is dropped, leaking whatever it held, rather than followed.
    #[inline(never)]
    fn alloc_refill(&self, c: usize) -> Result<u64, Error> {
        self.drop_corrupt_free_list(c)?;
        match self.refill_past_release(c) {
            Err(Error::Full) if self.reclaim_for_space() => {
                // Reclaimed blocks of this class are on this participant's free list now
                // (each checked by `free`).
                let entry = self.cache(c)?;
                let h = entry[C_FREE_HEAD].load(Ordering::Relaxed);
                if h == 0 {
                    return self.refill(c);
                }
                let off = Arena::from_units(h);
                entry[C_FREE_HEAD].store(self.arena.u32(off)?.load(Ordering::Relaxed), Ordering::Relaxed);
                let count = &entry[C_FREE_COUNT];
                count.store(count.load(Ordering::Relaxed).saturating_sub(1), Ordering::Relaxed);
                Ok(off)
            }
            r => r,
        }
    }

    /// Empties this participant's free list of class `c` if its head is not a block of
    /// that class.
    fn drop_corrupt_free_list(&self, c: usize) -> Result<(), Error> {
        let entry = self.cache(c)?;
        let h = entry[C_FREE_HEAD].load(Ordering::Relaxed);
        if h != 0 && !self.arena.serves_class(Arena::from_units(h), c) {
            entry[C_FREE_HEAD].store(0, Ordering::Relaxed);
            entry[C_FREE_COUNT].store(0, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The arena has no fresh pages left: collect this participant's retired blocks and say
    /// whether any came back. Retired memory otherwise waits for the next periodic collect,
    /// and a burst of big retirements (whole index copies, large values) can fill the arena
    /// before it. Each collect advances the epoch at most once, and a participant stalled
    /// inside an epoch (descheduled, say) holds every advance back: so this keeps trying,
    /// yielding in between, for up to 50 ms while anything is still waiting to be freed and
    /// can still ripen (a pinned caller's own pin caps the epoch: see
    /// [`Participant::retired_can_ripen`]).
    #[inline(never)]
    fn reclaim_for_space(&self) -> bool {
        if !self.may_reclaim() {
            return false;
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(50);
        loop {
            match self.collect() {
                Ok(n) if n > 0 => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
            if self.retired_waiting() == 0 || std::time::Instant::now() >= deadline || !self.retired_can_ripen() {
                return false;
            }
            std::thread::yield_now();
        }
    }

    fn refill(&self, c: usize) -> Result<u64, Error> {
        let a = &*self.arena;
        let entry = self.cache(c)?;
        let (head, count) = (&entry[C_FREE_HEAD], &entry[C_FREE_COUNT]);
        let cu = (class_size(c) / UNIT) as u32;
        let (cur, end) = (&entry[C_BUMP_CUR], &entry[C_BUMP_END]);
        let (b, e) = (cur.load(Ordering::Relaxed), end.load(Ordering::Relaxed));
        if b != 0 && b.checked_add(cu).is_some_and(|n| n <= e) {
            // The cursor is at a block of this class (a corrupt one is dropped: the next
            // source below takes over).
            let off = Arena::from_units(b);
            if a.serves_class(off, c) {
                cur.store(b + cu, Ordering::Relaxed);
                return Ok(off);
            }
            cur.store(0, Ordering::Relaxed);
        }
        if let Some((batch, len)) = self.pop_batch(c)? {
            let rest = a.u32(batch)?.load(Ordering::Relaxed);
            head.store(rest, Ordering::Relaxed);
            count.store(len - 1, Ordering::Relaxed);
            return Ok(batch);
        }
        let page = self.take_pages(1)?;
        a.page_desc(page / PAGE)?.store(c as u32 + 1, Ordering::Release);
        let first = Arena::to_units(page);
        let n = (PAGE / class_size(c)) as u32;
        // Cursor off, end, cursor: killed between the two stores of the other order, the
        // slot would keep the old page's cursor under the new page's end, and whoever claims
        // the slot next would hand out everything in between, live memory included. Here a
        // kill at worst leaks the page.
        cur.store(0, Ordering::Relaxed);
        end.store(first + n * cu, Ordering::Relaxed);
        #[cfg(test)]
        crate::tests::hook(crate::tests::Hook::RefillEndCur);
        cur.store(first + cu, Ordering::Relaxed);
        Ok(page)
    }

    /// Frees a block at once. Only for memory never published (or published and then
    /// retired and reclaimed): published memory goes through [`Participant::retire`].
    ///
    /// Inlined like [`Participant::alloc`]: the common case pushes on this participant's
    /// free list; large runs, big blocks and spilling a batch are out of line.
    #[inline]
    pub fn free(&self, off: u64) -> Result<(), Error> {
        self.free_inline(off)
    }

    /// [`Participant::free`], always inlined: for `collect`, which frees every block it
    /// reclaims in one loop.
    #[inline(always)]
    pub(crate) fn free_inline(&self, off: u64) -> Result<(), Error> {
        let a = &*self.arena;
        let d = a.page_desc(off / PAGE)?.load(Ordering::Acquire);
        if d & LARGE != 0 {
            return self.free_large(off);
        }
        let c = a.small_class(off, d)?;
        let entry = self.cache(c)?;
        let (head, count) = (&entry[C_FREE_HEAD], &entry[C_FREE_COUNT]);
        let n = count.load(Ordering::Relaxed) + 1;
        // Big blocks (16-32 KiB: index segments, mostly) give their pages back, except the
        // first BATCH on this participant's list. A growing table frees a segment at every
        // split and takes one again at the next: giving those pages back only to fault them
        // in again cost up to 13% of the insert rate, and every discard's TLB shootdown
        // stalls the other attached processes (a concurrent reader's p99.9 was 2-4.5 µs
        // against 1.1-1.5 µs, `bench-engine` growth to 10M keys). A table that
        // shrinks still returns all but those few; the blocks spilled to the global stack
        // (the BATCH freed last, past the first BATCH) have all been discarded
        // (`flush_free_lists` leaves these classes alone).
        if class_size(c) >= 16 * 1024 && n > BATCH {
            a.discard_block(off, class_size(c))?;
        }
        a.u32(off)?.store(head.load(Ordering::Relaxed), Ordering::Relaxed);
        head.store(Arena::to_units(off), Ordering::Relaxed);
        count.store(n, Ordering::Relaxed);
        if n >= 2 * BATCH {
            return self.spill_batch(c);
        }
        Ok(())
    }

    /// Hands the first [`BATCH`] blocks of the free list of class `c` to the global stack,
    /// so memory freed by one thread feeds others.
    #[inline(never)]
    fn spill_batch(&self, c: usize) -> Result<(), Error> {
        let a = &*self.arena;
        let entry = self.cache(c)?;
        let (head, count) = (&entry[C_FREE_HEAD], &entry[C_FREE_COUNT]);
        let n = count.load(Ordering::Relaxed);
        let first = head.load(Ordering::Relaxed);
        let mut last = first;
        for _ in 1..BATCH {
            last = a.u32(Arena::from_units(last))?.load(Ordering::Relaxed);
            if last == 0 {
                return Err(Error::Geometry("free list shorter than its count"));
            }
        }
        let last_word = a.u32(Arena::from_units(last))?;
        head.store(last_word.load(Ordering::Relaxed), Ordering::Relaxed);
        last_word.store(0, Ordering::Relaxed);
        count.store(n - BATCH, Ordering::Relaxed);
        a.u32(Arena::from_units(first) + 8)?.store(BATCH, Ordering::Relaxed);
        a.push_batch(c, Arena::from_units(first), BATCH)
    }

    /// Hands every block on this participant's free lists to the global stacks (in
    /// batches of up to [`BATCH`]), for a participant going idle: blocks cached here would
    /// keep their pages from [`Participant::release_free_pages`], and others may need them.
    /// The list is emptied before its blocks are pushed: killed in between, they are
    /// leaked, never on two lists.
    pub fn flush_free_lists(&self) -> Result<(), Error> {
        let a = &*self.arena;
        let mut blocks = Vec::new();
        // (Not the classes of 16 KiB and more: index segments, whose first BATCH free
        // blocks stay resident on purpose, see `free`; their pages are not released.)
        for c in (0..NCLASSES).filter(|&c| class_size(c) < 16 * 1024) {
            blocks.clear();
            a.take_free_list(self.slot, c, &mut blocks)?;
            a.push_batches(c, &blocks)?;
        }
        Ok(())
    }
}

impl Arena {
    /// Empties `slot`'s free list of class `c` and appends its blocks to `blocks`. The
    /// caller owns the slot (it is its participant, or the slot is being freed).
    ///
    /// A list is under 2 × BATCH blocks; one far longer is corrupt (a loop), and what is
    /// past the bound is leaked, as is everything from a link that is not a block of the
    /// class on (only a corrupt segment has one).
    fn take_free_list(&self, slot: u32, c: usize, blocks: &mut Vec<u32>) -> Result<(), Error> {
        let entry = self.u32s::<4>(self.cache_entry(slot, c))?;
        let (head, count) = (&entry[C_FREE_HEAD], &entry[C_FREE_COUNT]);
        let bound = blocks.len() + count.load(Ordering::Relaxed) as usize + 4 * BATCH as usize;
        let mut b = head.load(Ordering::Relaxed);
        while b != 0 && blocks.len() < bound && self.serves_class(Arena::from_units(b), c) {
            blocks.push(b);
            b = self.u32(Arena::from_units(b))?.load(Ordering::Relaxed);
        }
        head.store(0, Ordering::Relaxed);
        count.store(0, Ordering::Relaxed);
        Ok(())
    }

    /// Empties `slot`'s bump page of class `c` and appends the blocks it had not carved yet
    /// to `blocks` (the caller owns the slot). A cursor and end that are not one page of
    /// that class (a refill killed between its stores, or a corrupt segment) give nothing:
    /// a cursor of 0 is no page, and anything else is leaked rather than trusted.
    fn take_bump_rest(&self, slot: u32, c: usize, blocks: &mut Vec<u32>) -> Result<(), Error> {
        let entry = self.u32s::<4>(self.cache_entry(slot, c))?;
        let (cur, end) = (entry[C_BUMP_CUR].load(Ordering::Relaxed), entry[C_BUMP_END].load(Ordering::Relaxed));
        // Cursor first: with a cursor of 0, `refill` ignores the end.
        entry[C_BUMP_CUR].store(0, Ordering::Relaxed);
        entry[C_BUMP_END].store(0, Ordering::Relaxed);
        let (first, last) = (Arena::from_units(cur), Arena::from_units(end));
        if cur == 0 || cur >= end || !self.serves_class(first, c) || last > first / PAGE * PAGE + PAGE {
            return Ok(());
        }
        let cu = (class_size(c) / UNIT) as u32;
        blocks.extend((cur..end).step_by(cu as usize).take_while(|&b| b + cu <= end));
        Ok(())
    }

    /// Hands everything `slot`'s allocator cache holds to the global stacks: every class's
    /// free list and the uncarved rest of its bump page. For a slot being freed, by its
    /// owner leaving or by the reaper of a dead one: nothing else would use that memory until
    /// someone claimed the slot again, and a page whose blocks sit in a cache is never
    /// released. Big blocks (index segments, 16 KiB and more) give their pages back first,
    /// as `free` does for all but the few a live participant keeps. Each list is emptied
    /// before its blocks are pushed: killed in between, they are leaked, never on two
    /// lists (and the next reaper finds the cache empty).
    pub(crate) fn give_back_caches(&self, slot: u32) -> Result<(), Error> {
        let mut blocks = Vec::new();
        for c in 0..NCLASSES {
            blocks.clear();
            self.take_free_list(slot, c, &mut blocks)?;
            self.take_bump_rest(slot, c, &mut blocks)?;
            if blocks.is_empty() {
                continue;
            }
            if class_size(c) >= 16 * 1024 {
                for &b in &blocks {
                    self.discard_block(Arena::from_units(b), class_size(c))?;
                }
            }
            #[cfg(test)]
            crate::tests::hook(crate::tests::Hook::GiveBackTaken);
            self.push_batches(c, &blocks)?;
        }
        Ok(())
    }

    /// Big blocks (index segments) give their whole OS pages back; the first page keeps the
    /// free-list link.
    #[inline(never)]
    fn discard_block(&self, off: u64, size: u64) -> Result<(), Error> {
        let first = (off + 8).div_ceil(4096) * 4096;
        let end = (off + size) / 4096 * 4096;
        if end > first {
            self.map.discard(first, end - first)?;
        }
        Ok(())
    }

    /// Links `blocks` (of class `c`, the caller's alone) into batches of up to [`BATCH`]
    /// and pushes them on the class's global stack.
    pub(crate) fn push_batches(&self, c: usize, blocks: &[u32]) -> Result<(), Error> {
        for chunk in blocks.chunks(BATCH as usize) {
            for pair in chunk.windows(2) {
                self.u32(Arena::from_units(pair[0]))?.store(pair[1], Ordering::Relaxed);
            }
            self.u32(Arena::from_units(chunk[chunk.len() - 1]))?.store(0, Ordering::Relaxed);
            self.u32(Arena::from_units(chunk[0]) + 8)?.store(chunk.len() as u32, Ordering::Relaxed);
            self.push_batch(c, Arena::from_units(chunk[0]), chunk.len() as u32)?;
        }
        Ok(())
    }

    /// Pushes the batch at `batch` (`len` blocks, its head's third word says so too) on the
    /// stack of class `c`.
    fn push_batch(&self, c: usize, batch: u64, len: u32) -> Result<(), Error> {
        let stack = self.u64(H_CLASS_STACKS + c as u64 * 8)?;
        let link = self.u32(batch + 4)?;
        // Counted before it is pushed, so the count is never below what the stack holds
        // (killed in between, it stays a batch too high).
        self.u64(H_STACK_BLOCKS + c as u64 * 8)?.fetch_add(len as u64, Ordering::Relaxed);
        let mut h = stack.load(Ordering::Acquire);
        loop {
            link.store(h as u32, Ordering::Relaxed);
            let new = ((h >> 32).wrapping_add(1) << 32) | Arena::to_units(batch) as u64;
            match stack.compare_exchange_weak(h, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(()),
                Err(cur) => h = cur,
            }
        }
    }
}

impl Participant {
    /// Pops a batch of class `c`: its head and its length.
    fn pop_batch(&self, c: usize) -> Result<Option<(u64, u32)>, Error> {
        let a = &*self.arena;
        let stack = a.u64(H_CLASS_STACKS + c as u64 * 8)?;
        let mut h = stack.load(Ordering::Acquire);
        loop {
            let top = h as u32;
            if top == 0 {
                return Ok(None);
            }
            // Every block pushed here is of class `c`. One that is not any more was taken
            // since this load and its page given back by a page release (the head moved
            // on: load it again); at the head still, it is a corrupt stack, dropped whole.
            if !a.serves_class(Arena::from_units(top), c) {
                match stack.compare_exchange(h, ((h >> 32).wrapping_add(1)) << 32, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => return Ok(None),
                    Err(cur) => {
                        h = cur;
                        continue;
                    }
                }
            }
            // The block may be popped and reused under us; then this read is garbage but in
            // bounds, and the tagged CAS below fails.
            let next = a.u32(Arena::from_units(top) + 4)?.load(Ordering::Acquire);
            let new = ((h >> 32).wrapping_add(1) << 32) | next as u64;
            match stack.compare_exchange_weak(h, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    let off = Arena::from_units(top);
                    // A batch is BATCH blocks long but for the ones a flush or a page release
                    // made (its head says); a wrong length would only end a later spill early.
                    let len = a.u32(off + 8)?.load(Ordering::Relaxed).clamp(1, BATCH);
                    a.u64(H_STACK_BLOCKS + c as u64 * 8)?.fetch_sub(len as u64, Ordering::Relaxed);
                    return Ok(Some((off, len)));
                }
                Err(cur) => h = cur,
            }
        }
    }

    /// Gives whole free pages of small classes back: for each class whose global stack
    /// changed since its last pass, takes the whole stack, and every page all of whose
    /// blocks are on it becomes free (adjacent ones merged into runs, reused by any class
    /// or large value, given back to the kernel after [`DIRTY_DECAY_MS`] by
    /// [`Participant::purge_dirty`]); the other blocks go back on the stack. Returns the
    /// pages freed. `state` carries what the last passes saw, per class.
    ///
    /// Without it a page would keep its class for good: after a FLUSHALL of small values a
    /// fill with bigger ones took new pages, and the memory stayed at the sum of both.
    ///
    /// Why a page found whole is free: a block is in at most one place (a list, a stack,
    /// a bump range, or in use), and the stack is taken whole with one exchange, so a page
    /// all of whose blocks came off it has none in use, on another list, or still to be
    /// bumped. Blocks are counted once each, so a corrupt stack that lists one block twice
    /// cannot make a page look whole.
    ///
    /// The cost is a read of every free block of the class (about 50 ms per million in
    /// address order, several times that scattered). While a pass holds the stack,
    /// allocations of its class take fresh pages, or, when the arena is full, wait for the
    /// pass. A class whose pass freed nothing while its stack did not grow waits twice as
    /// long for its next (up to about a minute, unless the stack changes by half), so a
    /// fragmented heap is not read every second. Classes of 16 KiB and more (index segments, whose pages `free` already
    /// discards) are left alone. Killed in the middle, a process leaks the blocks it held
    /// (never hands one out twice).
    pub fn release_free_pages(&self, state: &mut PageRelease) -> Result<u64, Error> {
        state.classes.resize(NCLASSES, ClassRelease::default());
        let now = now_ms();
        let mut freed = 0;
        for c in 0..NCLASSES {
            if class_size(c) >= 16 * 1024 {
                continue;
            }
            let stack = self.arena.u64(H_CLASS_STACKS + c as u64 * 8)?;
            let h = stack.load(Ordering::Acquire);
            let st = &mut state.classes[c];
            // The tag moves by one at every batch pushed or popped: a stack that changed by
            // half of what the last pass read (or two pages' worth) is worth reading again
            // even while backing off (a FLUSHALL's blocks arriving after a pass that found
            // them still in use).
            let moved = (h >> 32) as u32;
            let delta = moved.wrapping_sub(st.tag) as u64;
            let enough = (st.batches / 2).max(2 * (PAGE / class_size(c)) / BATCH as u64).max(1);
            if delta == 0 || (h as u32) == 0 || (now < st.not_before && delta < enough) {
                continue;
            }
            let (n, batches, tag) = self.release_class_pages(c)?;
            let st = &mut state.classes[c];
            // The tag as this pass alone left it: blocks pushed while it held the stack
            // (a worker collecting a FLUSHALL's blocks beside it) are on the stack now, and
            // the next pass must read them. (The tag read now would count their pushes as
            // this pass's own, and with nothing pushed after them the class would never
            // be looked at again.)
            st.tag = tag;
            // Back off only from a stack that frees nothing and no longer grows (a heap
            // fragmented for good); one still growing (a FLUSHALL's blocks arriving: a page
            // is whole only when its last block is back) is read again next time.
            let growing = batches > st.batches;
            st.batches = batches;
            st.backoff_ms = if n > 0 || growing { 0 } else { (st.backoff_ms * 2).clamp(1000, 64_000) };
            st.not_before = now + st.backoff_ms;
            freed += n;
        }
        Ok(freed)
    }

    /// [`Participant::release_free_pages`] for class `c`.
    /// Returns the pages freed, the batches' worth of blocks read, and the stack's tag as
    /// the pass left it but for others' pushes and pops meanwhile (its exchange and its
    /// own pushes counted).
    fn release_class_pages(&self, c: usize) -> Result<(u64, u64, u32), Error> {
        let a = &*self.arena;
        let per_page = PAGE / class_size(c);
        let first = a.data_off / PAGE;
        let stack = a.u64(H_CLASS_STACKS + c as u64 * 8)?;
        let releasing = a.u64(crate::H_RELEASING + c as u64 * 8)?;
        release_mark::enter(releasing);
        #[cfg(test)]
        crate::tests::hook(crate::tests::Hook::ReleaseBeforeTake);
        // Take the whole stack.
        let mut h = stack.load(Ordering::Acquire);
        loop {
            let empty = ((h >> 32).wrapping_add(1)) << 32;
            match stack.compare_exchange_weak(h, empty, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(cur) => h = cur,
            }
        }
        // The pages in use, read after the exchange: it acquired every push of a block on
        // the stack, and each pusher took the block's page before, so the page is among
        // them. (Read before, a page taken fresh in between, one of whose blocks was
        // pushed, looked like a corrupt stack's, and the walk stopped there, leaking the
        // rest of the stack.)
        let pages = a.next_page()?.saturating_sub(first);
        // Its blocks, checked as `pop_batch` checks a batch head, counted per page. A batch
        // is at most BATCH blocks and there are at most `pages × per_page` blocks: a
        // longer walk is a corrupt (looping) stack, cut there (the rest is leaked).
        let mut per = vec![0u32; pages as usize];
        let mut blocks: Vec<u32> = Vec::new();
        let mut batch = h as u32;
        'walk: while batch != 0 {
            let mut b = batch;
            for _ in 0..BATCH {
                if b == 0 {
                    break;
                }
                let off = Arena::from_units(b);
                // (A page outside those handed out can only be a corrupt descriptor's.)
                let page = (off / PAGE).wrapping_sub(first);
                if !a.serves_class(off, c) || page >= pages || blocks.len() as u64 >= pages * per_page {
                    break 'walk;
                }
                per[page as usize] += 1;
                blocks.push(b);
                b = a.u32(off)?.load(Ordering::Acquire);
            }
            batch = a.u32(Arena::from_units(batch) + 4)?.load(Ordering::Acquire);
        }
        let walked = (blocks.len() as u64).div_ceil(BATCH as u64);
        // Off the stack's count (what goes back is counted again as it is pushed).
        a.u64(H_STACK_BLOCKS + c as u64 * 8)?.fetch_sub(blocks.len() as u64, Ordering::Relaxed);
        // Pages with as many blocks on the stack as they hold are whole, unless one is
        // listed twice (a corrupt stack): their blocks are grouped by page (a counting
        // sort) and each page's checked against a bitmap of its block indexes.
        let mut at = vec![u32::MAX; pages as usize];
        let mut candidates = 0u32;
        for (i, &n) in per.iter().enumerate() {
            if n as u64 == per_page {
                at[i] = candidates * per_page as u32;
                candidates += 1;
            }
        }
        let mut grouped = vec![0u32; candidates as usize * per_page as usize];
        for &b in &blocks {
            let i = (Arena::from_units(b) / PAGE - first) as usize;
            if at[i] != u32::MAX {
                grouped[at[i] as usize] = b;
                at[i] += 1;
            }
        }
        let mut whole = vec![false; pages as usize];
        let mut bits = vec![0u64; per_page.div_ceil(64) as usize];
        for group in grouped.chunks_exact(per_page as usize) {
            bits.iter_mut().for_each(|w| *w = 0);
            let mut distinct = true;
            for &b in group {
                let k = (Arena::from_units(b) % PAGE / class_size(c)) as usize;
                distinct &= bits[k / 64] & (1 << (k % 64)) == 0;
                bits[k / 64] |= 1 << (k % 64);
            }
            if distinct {
                whole[(Arena::from_units(group[0]) / PAGE - first) as usize] = true;
            }
        }
        drop(grouped);
        let free_pages: Vec<u64> = (0..pages).filter(|&i| whole[i as usize]).map(|i| first + i).collect();
        blocks.retain(|&b| !whole[(Arena::from_units(b) / PAGE - first) as usize]);
        let keep = blocks;
        #[cfg(test)]
        crate::tests::hook(crate::tests::Hook::ReleaseHolding);
        // The rest goes back first, then the pages, adjacent ones as one run, all under
        // one hold of the large lock.
        let pushed = a.push_batches(c, &keep);
        let tag = ((h >> 32) as u32).wrapping_add(1).wrapping_add(keep.len().div_ceil(BATCH as usize) as u32);
        let freed = free_pages.len() as u64;
        let r = self.free_pages_sorted(&free_pages);
        release_mark::leave(releasing);
        pushed?;
        r?;
        Ok((freed, walked, tag))
    }

    /// Frees pages (sorted page indexes, each a small-class page with no block in use or on
    /// a list) as free runs, adjacent ones merged, under one hold of the large lock, each
    /// insertion walking on from the last.
    fn free_pages_sorted(&self, pages: &[u64]) -> Result<(), Error> {
        if pages.is_empty() {
            return Ok(());
        }
        let a = &*self.arena;
        let lock = a.large_lock()?;
        self.lock(lock);
        let mut r = Ok(());
        let mut hint = None;
        let mut i = 0;
        while i < pages.len() {
            let mut j = i + 1;
            while j < pages.len() && pages[j] == pages[j - 1] + 1 {
                j += 1;
            }
            let n = (j - i) as u64;
            match self.insert_free_run_after(pages[i] * PAGE, n, hint) {
                Ok(node) => hint = Some(node),
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
            i = j;
        }
        if r.is_ok() && a.u64(H_LARGE_DIRTY_PAGES)?.load(Ordering::Relaxed) > DIRTY_MAX_PAGES {
            r = self.purge_locked(0).map(|_| ());
        }
        self.unlock(lock);
        r
    }

    /// [`Participant::refill`], which, when the arena is full, tries again while a page
    /// release of any class is in progress (it holds the class's free blocks and is about
    /// to free whole pages, which any class can take: see [`release_mark`]) or the class's
    /// own stack changed since the try (a release just gave its blocks back), for up to two
    /// seconds.
    fn refill_past_release(&self, c: usize) -> Result<u64, Error> {
        let a = &*self.arena;
        let Ok(stack) = a.u64(H_CLASS_STACKS + c as u64 * 8) else {
            return self.refill(c);
        };
        let mut give_up = None;
        loop {
            // Releases are looked for before the try and after it: one that ends during the
            // try may have freed its pages after the try looked (seen before), one that
            // begins during it holds blocks the try did not find (seen after). Either way
            // the loop tries again. (Looked for only after, a release ending during the try
            // made it answer Full with the pages free: a CI run of
            // a_full_arena_waits_for_another_class_release.)
            let releasing = || {
                let now = now_ms();
                (0..NCLASSES).any(|k| {
                    a.u64(crate::H_RELEASING + k as u64 * 8)
                        .is_ok_and(|m| release_mark::live(m.load(Ordering::Acquire), now))
                })
            };
            let before = stack.load(Ordering::Acquire);
            let releasing_before = releasing();
            let r = self.refill(c);
            if !matches!(r, Err(Error::Full)) {
                return r;
            }
            #[cfg(test)]
            crate::tests::hook(crate::tests::Hook::FullTried);
            if !releasing_before && !releasing() && stack.load(Ordering::Acquire) == before {
                return r;
            }
            let deadline =
                *give_up.get_or_insert_with(|| std::time::Instant::now() + std::time::Duration::from_secs(2));
            if std::time::Instant::now() > deadline {
                return r;
            }
            std::thread::yield_now();
        }
    }

    /// `n` contiguous pages: first fit from freed runs, else fresh ones.
    fn take_pages(&self, n: u64) -> Result<u64, Error> {
        let a = &*self.arena;
        if a.u64(H_LARGE_FREE_PAGES)?.load(Ordering::Relaxed) >= n {
            let lock = a.large_lock()?;
            self.lock(lock);
            let found = self.take_free_run(n);
            self.unlock(lock);
            if let Some(off) = found? {
                return Ok(off);
            }
        }
        let next = a.u64(H_PAGE_NEXT)?;
        let mut cur = next.load(Ordering::Relaxed);
        loop {
            // Pages past the mark have never been handed out, so their descriptors are 0,
            // and none lies below the data. A mark that says otherwise is corrupt: such
            // pages are skipped (the mark moves on past them) rather than handed out again.
            let start = cur.max(a.data_off / PAGE);
            if start.saturating_add(n) > a.total_pages() {
                return Err(Error::Full);
            }
            match next.compare_exchange_weak(cur, start + n, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => {
                    if (start..start + n).all(|p| a.page_desc(p).is_ok_and(|d| d.load(Ordering::Relaxed) == 0)) {
                        return Ok(start * PAGE);
                    }
                    cur = start + n;
                }
                Err(c) => cur = c,
            }
        }
    }

    /// Under the large lock: unlinks (or shortens) the first free run of at least `n` pages.
    fn take_free_run(&self, n: u64) -> Result<Option<u64>, Error> {
        let a = &*self.arena;
        let head = a.u64(H_LARGE_HEAD)?;
        let max_run = a.u64(crate::H_LARGE_MAX_RUN)?;
        if max_run.load(Ordering::Relaxed) < n {
            return Ok(None);
        }
        let next_page = a.next_page()?;
        let mut prev: Option<u64> = None;
        let mut run = head.load(Ordering::Acquire) as u32;
        let mut steps = 0u64;
        let mut longest = 0;
        while run != 0 && steps < a.total_pages() {
            let Some((off, len, next)) = a.free_run(run, next_page)? else {
                // A corrupt link: the list ends before it (what it led to is leaked).
                self.cut_runs(prev)?;
                return Ok(None);
            };
            if len >= n {
                // No page handed out twice: every page taken must still be free by its
                // descriptor (a corrupt list may hold runs that overlap each other or live
                // blocks). As many loads as `alloc_large` makes stores.
                let pages = off / PAGE..off / PAGE + n;
                if !pages.clone().all(|p| a.page_desc(p).is_ok_and(|d| d.load(Ordering::Relaxed) == 0)) {
                    self.cut_runs(prev)?;
                    return Ok(None);
                }
                // Take the run's head, so what is left sits next to whatever comes after
                // it: a value that grows finds its last run and the rest merged above it.
                // Unlinked before its pages are marked taken: a process killed in between
                // leaves those pages free but on no list (leaked), where the other order
                // left a listed run whose pages are in use, at which the next walk cut the
                // list and lost every run after it.
                let since = a.u64(off + 8)?.load(Ordering::Relaxed);
                let rest = if len == n {
                    next
                } else {
                    // The rest becomes a node of its own, written before it is linked.
                    let r = off + n * PAGE;
                    a.u64(r + 8)?.store(since, Ordering::Relaxed);
                    a.u32(r + 4)?.store((len - n) as u32, Ordering::Relaxed);
                    a.u32(r)?.store(next, Ordering::Relaxed);
                    Arena::to_units(r)
                };
                if since != 0 {
                    let d = a.u64(H_LARGE_DIRTY_PAGES)?;
                    d.store(d.load(Ordering::Relaxed).saturating_sub(n), Ordering::Relaxed);
                }
                match prev {
                    None => head.store(rest as u64, Ordering::Release),
                    Some(p) => a.u32(p)?.store(rest, Ordering::Release),
                }
                // Saturating: a crash can lose an addition, never make this wrap.
                let free = a.u64(H_LARGE_FREE_PAGES)?;
                free.store(free.load(Ordering::Relaxed).saturating_sub(n), Ordering::Relaxed);
                #[cfg(test)]
                crate::tests::hook(crate::tests::Hook::TakeRunUnlinked);
                // Marked taken here, under the lock (the caller writes the real
                // descriptors after releasing it): another taker that reaches these pages
                // through a corrupt, overlapping run then finds them in use.
                for p in pages {
                    a.page_desc(p)?.store(CONT, Ordering::Relaxed);
                }
                return Ok(Some(off));
            }
            longest = longest.max(len);
            prev = Some(off);
            run = next;
            steps += 1;
        }
        if run == 0 {
            // The whole list walked: the longest run is known.
            max_run.store(longest, Ordering::Relaxed);
        }
        Ok(None)
    }

    /// Under the large lock: ends the free-run list after `prev` (at its head if None).
    fn cut_runs(&self, prev: Option<u64>) -> Result<(), Error> {
        match prev {
            None => self.arena.u64(H_LARGE_HEAD)?.store(0, Ordering::Release),
            Some(p) => self.arena.u32(p)?.store(0, Ordering::Release),
        }
        Ok(())
    }

    #[inline(never)]
    fn alloc_large(&self, size: u64) -> Result<u64, Error> {
        let a = &*self.arena;
        let n = size.div_ceil(PAGE);
        if n >= (CONT as u64) {
            return Err(Error::Full);
        }
        let off = match self.take_pages(n) {
            Err(Error::Full) if self.reclaim_for_space() => self.take_pages(n)?,
            r => r?,
        };
        let first = off / PAGE;
        for p in first + 1..first + n {
            a.page_desc(p)?.store(CONT, Ordering::Relaxed);
        }
        a.page_desc(first)?.store(LARGE | n as u32, Ordering::Release);
        Ok(off)
    }

    /// Frees a large run. Its pages stay resident (dirty) for now: a run freed and taken
    /// again soon (a large value overwritten, a value that grows) costs no page faults and
    /// no zeroing; giving the pages back at once made a SET of 100 kB values three times
    /// slower than Redis's. [`Participant::purge_dirty`] gives them back once they have sat
    /// free for [`DIRTY_DECAY_MS`], and here at once when more than [`DIRTY_MAX_PAGES`] wait.
    #[inline(never)]
    fn free_large(&self, off: u64) -> Result<(), Error> {
        let a = &*self.arena;
        let lock = a.large_lock()?;
        self.lock(lock);
        // Checked under the lock, so that two frees of one run (a bug, or a corrupt
        // segment) cannot both pass: the second finds the descriptors the first cleared.
        let mut r = self.free_run_size(off).and_then(|n| self.insert_free_run(off, n));
        if r.is_ok() && a.u64(H_LARGE_DIRTY_PAGES)?.load(Ordering::Relaxed) > DIRTY_MAX_PAGES {
            r = self.purge_locked(0).map(|_| ());
        }
        self.unlock(lock);
        r
    }

    /// The pages of the allocated large run at `off`, if it is one: its descriptor says so,
    /// it lies inside the pages handed out, and every page after its first is marked as a
    /// continuation. A corrupt count would have a free put other blocks' pages on the free
    /// list, or zero descriptors far past the run (past the table's end, into the data).
    /// (As many loads as the free then makes stores.)
    fn free_run_size(&self, off: u64) -> Result<u64, Error> {
        let a = &*self.arena;
        let d = a.page_desc(off / PAGE)?.load(Ordering::Acquire);
        if d & LARGE == 0 || !off.is_multiple_of(PAGE) {
            return Err(Error::OutOfRange { off, size: 0 });
        }
        let n = (d & !LARGE) as u64;
        let first = off / PAGE;
        if n == 0 || first + n > a.next_page()? {
            return Err(Error::OutOfRange { off, size: n * PAGE });
        }
        for p in first + 1..first + n {
            if a.page_desc(p)?.load(Ordering::Relaxed) != CONT {
                return Err(Error::OutOfRange { off, size: n * PAGE });
            }
        }
        Ok(n)
    }

    /// Gives the pages of free runs that have been free for `min_age_ms` or more back to the
    /// kernel (all of them with 0); returns how many pages that was. Cheap when there is
    /// nothing old enough: two loads. Called by [`Participant::collect`]'s callers — the
    /// server does it on its idle and busy ticks — and by `free` past the budget.
    pub fn purge_dirty(&self, min_age_ms: u64) -> Result<u64, Error> {
        let a = &*self.arena;
        let oldest = a.u64(H_LARGE_DIRTY_OLDEST)?.load(Ordering::Relaxed);
        if a.u64(H_LARGE_DIRTY_PAGES)?.load(Ordering::Relaxed) == 0
            || oldest == 0
            || now_ms().saturating_sub(oldest) < min_age_ms
        {
            return Ok(0);
        }
        let lock = a.large_lock()?;
        self.lock(lock);
        let r = self.purge_locked(min_age_ms);
        self.unlock(lock);
        r
    }

    /// Under the large lock: [`Participant::purge_dirty`]. Each run keeps its first OS page
    /// (the list node). Recounts the dirty pages and the oldest dirty run as it goes.
    fn purge_locked(&self, min_age_ms: u64) -> Result<u64, Error> {
        let a = &*self.arena;
        let now = now_ms();
        let (mut purged, mut still_dirty, mut oldest) = (0, 0, 0u64);
        let mut run = a.u64(H_LARGE_HEAD)?.load(Ordering::Acquire) as u32;
        let next_page = a.next_page()?;
        let mut steps = 0u64;
        let mut prev = None;
        while run != 0 && steps < a.total_pages() {
            let Some((off, len, next)) = a.free_run(run, next_page)? else {
                self.cut_runs(prev)?;
                break;
            };
            let since = a.u64(off + 8)?;
            let t = since.load(Ordering::Relaxed);
            if t != 0 {
                if now.saturating_sub(t) >= min_age_ms {
                    // Discard first, then mark clean: a crash between leaves a clean run
                    // marked dirty, which a later purge discards again.
                    a.map.discard(off + 4096, len * PAGE - 4096)?;
                    since.store(0, Ordering::Relaxed);
                    purged += len;
                } else {
                    still_dirty += len;
                    oldest = earliest(oldest, t);
                }
            }
            prev = Some(off);
            run = next;
            steps += 1;
        }
        a.u64(H_LARGE_DIRTY_PAGES)?.store(still_dirty, Ordering::Relaxed);
        a.u64(H_LARGE_DIRTY_OLDEST)?.store(oldest, Ordering::Relaxed);
        Ok(purged)
    }

    /// Under the large lock: puts the `n` pages at `off` on the free-run list, merged with
    /// the runs right before and after them when they touch. Without merging, a value that
    /// grows (APPEND, SETRANGE, a list packed whole) frees runs each a little smaller than
    /// the next request, none is ever reused, and fresh pages run out while the data is
    /// small: growing one string to 50 MB in 100 kB appends took all 12 GB of an arena.
    ///
    /// The list is kept in address order (`take_free_run` keeps it: it takes a run's head
    /// and links the rest in its place). Each edit that a crash could interrupt is one store, and every prefix of
    /// them at worst leaks pages: no two runs ever overlap.
    ///
    /// A node is the run's first 16 bytes: the next run (unit offset, u32), the length in
    /// pages (u32), and since when its pages have been dirty (`since`, monotonic ms; 0 =
    /// given back to the kernel but for the node's own OS page). The freed pages are dirty
    /// from now; a merged run is dirty since the earliest of its parts, so a purge never
    /// waits longer for any of them.
    fn insert_free_run(&self, off: u64, n: u64) -> Result<(), Error> {
        self.insert_free_run_after(off, n, None).map(|_| ())
    }

    /// [`Participant::insert_free_run`], walking the list from `hint` (a run node below
    /// `off` that this lock holder put there) instead of its head; returns the node that
    /// now holds the run (a later, higher insertion's hint).
    fn insert_free_run_after(&self, off: u64, n: u64, hint: Option<u64>) -> Result<u64, Error> {
        let a = &*self.arena;
        let head = a.u64(H_LARGE_HEAD)?;
        for p in off / PAGE..off / PAGE + n {
            a.page_desc(p)?.store(0, Ordering::Relaxed);
        }
        // The runs just below and just above `off`.
        // (Each node is checked on the way; at a corrupt one the list is cut, leaking the
        // rest. Runs that overlap, which only a corrupt list holds, are caught when taken.)
        let next_page = a.next_page()?;
        let (mut below, mut below_len, mut above) = (None::<u64>, 0, head.load(Ordering::Acquire) as u32);
        if let Some(h) = hint.filter(|&h| h < off) {
            if let Some((o, len, next)) = a.free_run(Arena::to_units(h), next_page)? {
                (below, below_len, above) = (Some(o), len, next);
            }
        }
        let mut above_run = None;
        let mut steps = 0u64;
        while above != 0 && steps < a.total_pages() {
            let Some((o, len, next)) = a.free_run(above, next_page)? else {
                self.cut_runs(below)?;
                above = 0;
                break;
            };
            if o > off {
                above_run = Some((o, len, next));
                break;
            }
            (below, below_len, above) = (Some(o), len, next);
            steps += 1;
        }
        // Absorb the run above if it starts where this one ends.
        let (mut len, mut next, mut since) = (n, above, now_ms());
        if let Some((o, above_len, above_next)) = above_run {
            if o == off + n * PAGE {
                len += above_len;
                next = above_next;
                since = earliest(since, a.u64(o + 8)?.load(Ordering::Relaxed));
            }
        }
        let node = match below {
            Some(b) if b + below_len * PAGE == off => {
                // Grow the run below: first unlink the absorbed one (a crash here leaks
                // it), then its dirty time (a crash before the length leaves a free run
                // marked dirty early: harmless), then one store of the new length.
                if next != above {
                    a.u32(b)?.store(next, Ordering::Release);
                }
                let t = a.u64(b + 8)?;
                t.store(earliest(t.load(Ordering::Relaxed), since), Ordering::Relaxed);
                a.u32(b + 4)?.store((below_len + len) as u32, Ordering::Release);
                len += below_len;
                b
            }
            _ => {
                // A new node, published by one store (which also unlinks an absorbed run).
                a.u64(off + 8)?.store(since, Ordering::Relaxed);
                a.u32(off + 4)?.store(len as u32, Ordering::Relaxed);
                a.u32(off)?.store(next, Ordering::Relaxed);
                let units = Arena::to_units(off);
                match below {
                    None => head.store(units as u64, Ordering::Release),
                    Some(b) => a.u32(b)?.store(units, Ordering::Release),
                }
                off
            }
        };
        a.u64(H_LARGE_FREE_PAGES)?.fetch_add(n, Ordering::Relaxed);
        a.u64(H_LARGE_DIRTY_PAGES)?.fetch_add(n, Ordering::Relaxed);
        a.u64(crate::H_LARGE_MAX_RUN)?.fetch_max(len, Ordering::Relaxed);
        let oldest = a.u64(H_LARGE_DIRTY_OLDEST)?;
        oldest.store(earliest(oldest.load(Ordering::Relaxed), since), Ordering::Relaxed);
        Ok(node)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_sorted_aligned_and_cover_everything() {
        const { assert!(NCLASSES > 40 && NCLASSES < 96) };
        for c in 1..NCLASSES {
            assert!(class_size(c) > class_size(c - 1));
            assert_eq!(class_size(c) % 8, 0);
        }
        assert_eq!(class_size(NCLASSES - 1), LARGE_MIN);
        for size in 1..=LARGE_MIN {
            let c = class_of(size);
            assert!(class_size(c) >= size.max(16), "size {size}");
            assert!(c == 0 || class_size(c - 1) < size, "size {size} not in smallest class");
        }
    }

    use crate::{Backing, Config};

    /// Live blocks (offset, size), and a check that a new one overlaps none of them and
    /// lies in the data pages.
    struct Live {
        data_start: u64,
        blocks: Vec<(u64, u64)>,
    }

    impl Live {
        fn add(&mut self, off: u64, size: u64, what: &str) {
            assert!(off >= self.data_start, "{what}: handed out {off}, inside the metadata");
            for &(o, s) in &self.blocks {
                assert!(off + size <= o || o + s <= off, "{what}: handed out {off}+{size} over live {o}+{s}");
            }
            self.blocks.push((off, size));
        }
    }

    /// An arena with live blocks of a small class, a large run freed, and a free list,
    /// bump cursor and class stack in use; `corrupt` then scribbles one of them, and the
    /// allocations after it must neither overlap a live block nor land in the metadata.
    fn survives(what: &str, corrupt: impl FnOnce(&Arena, &Participant, &Live)) {
        let a = Arena::create(Backing::Anonymous, &Config { capacity: 64 << 20, max_participants: 4 }).unwrap();
        let (p, q) = (a.register().unwrap(), a.register().unwrap());
        let mut live = Live { data_start: a.data_range().0, blocks: Vec::new() };
        for size in [48, 100, 4000] {
            for _ in 0..300 {
                live.add(p.alloc(size).unwrap(), class_size(class_of(size)), "setup");
            }
        }
        // Freed, to fill free lists, the class stack (q frees more than a batch) and the
        // free-run list.
        for _ in 0..3 * BATCH {
            q.free(p.alloc(48).unwrap()).unwrap();
        }
        p.free(p.alloc(LARGE_MIN * 4).unwrap()).unwrap();
        let big = p.alloc(LARGE_MIN * 4).unwrap();
        live.add(big, LARGE_MIN * 4, "setup");
        p.free(p.alloc(LARGE_MIN * 8).unwrap()).unwrap();
        corrupt(&a, &p, &live);
        for size in [48, 100, 4000, LARGE_MIN * 2, LARGE_MIN * 8] {
            for _ in 0..40 {
                match p.alloc(size) {
                    Ok(off) => live.add(off, a.block_size(off).unwrap(), what),
                    Err(e) => panic!("{what}: {e}"),
                }
            }
        }
        let _ = p.purge_dirty(0);
    }

    #[test]
    fn a_corrupt_free_list_head_is_dropped_not_followed() {
        survives("free list at the header", |a, p, _| {
            a.u32s::<4>(a.cache_entry(p.slot(), class_of(48))).unwrap()[C_FREE_HEAD]
                .store(Arena::to_units(512), Ordering::Relaxed);
        });
        survives("free list at another class", |a, p, live| {
            let other = live.blocks.iter().find(|b| b.1 == class_size(class_of(100))).unwrap().0;
            a.u32s::<4>(a.cache_entry(p.slot(), class_of(48))).unwrap()[C_FREE_HEAD]
                .store(Arena::to_units(other), Ordering::Relaxed);
        });
    }

    #[test]
    fn a_full_arena_reports_where_its_pages_are() {
        let a = Arena::create(Backing::Anonymous, &Config { capacity: 4 << 20, max_participants: 4 }).unwrap();
        let (p, reader) = (a.register().unwrap(), a.register().unwrap());
        let big = p.alloc(LARGE_MIN * 3).unwrap();
        p.free(big).unwrap();
        // A reader pinned in an old epoch keeps a retired block from coming back.
        let pinned = reader.pin();
        let epoch = a.epoch();
        p.retire(p.alloc(100).unwrap()).unwrap();
        while p.alloc(100).is_ok() {}
        assert!(matches!(p.alloc(100), Err(Error::Full)));
        let r = a.alloc_report();
        drop(pinned);
        let handed = a.data_range();
        let n = (handed.1 - handed.0) / PAGE;
        assert!(r.contains(&format!("pages: {n} of {n} handed out")), "{r}");
        // The freed run's pages went to the class too (but one, the retire chunk's); the
        // list is empty and its count agrees.
        assert!(r.contains("0 free, 0 with a corrupt descriptor"), "{r}");
        assert!(
            r.contains("free runs: 0 on the list, 0 pages, the longest 0, walked to its end; counted 0 free"),
            "{r}"
        );
        assert!(r.contains(&format!(" {}: {} 0/0 0+0;", class_size(class_of(100)), n - 1)), "{r}");
        assert!(r.contains(&format!(" {}: live - 1 ", p.slot())), "{r}");
        assert!(r.contains(&format!(" {}: live {epoch} 0 0;", reader.slot())), "{r}");
    }

    #[test]
    fn block_starts_agree_with_division() {
        for c in 0..NCLASSES {
            let size = class_size(c);
            for at in 0..PAGE {
                assert_eq!(block_start(at, c), at % size == 0 && at + size <= PAGE, "class {c} ({size} B), byte {at}");
            }
        }
    }

    #[test]
    fn a_free_list_head_inside_a_block_is_dropped() {
        // One flipped bit: the head moves 8 bytes into a free block, whose second word is
        // live data once that block is handed out.
        survives("free list head 8 bytes into a live block", |a, p, live| {
            let block = live.blocks.iter().find(|b| b.1 == class_size(class_of(48))).unwrap().0;
            let e = a.u32s::<4>(a.cache_entry(p.slot(), class_of(48))).unwrap();
            e[C_FREE_HEAD].store(Arena::to_units(block + 8), Ordering::Relaxed);
        });
    }

    #[test]
    fn free_runs_that_overlap_are_never_both_handed_out() {
        // A corrupt list: a one-page run inside a four-page run, and listed before it.
        // Each node is fine by itself; taking the small one first and then the big one
        // would hand its page out twice.
        let a = Arena::create(Backing::Anonymous, &Config { capacity: 64 << 20, max_participants: 4 }).unwrap();
        let p = a.register().unwrap();
        let big = p.alloc(PAGE * 4).unwrap();
        p.alloc(PAGE).unwrap(); // keeps the freed run from merging into fresh pages
        p.free(big).unwrap();
        assert_eq!(a.u64(H_LARGE_HEAD).unwrap().load(Ordering::Relaxed), Arena::to_units(big) as u64);
        let small = big + 2 * PAGE;
        a.u32(small).unwrap().store(Arena::to_units(big), Ordering::Relaxed);
        a.u32(small + 4).unwrap().store(1, Ordering::Relaxed);
        a.u64(H_LARGE_HEAD).unwrap().store(Arena::to_units(small) as u64, Ordering::Relaxed);
        // (The free-page count is corrupt too, or the list would not be asked.)
        a.u64(H_LARGE_FREE_PAGES).unwrap().store(1000, Ordering::Relaxed);
        let mut live = Live { data_start: a.data_range().0, blocks: Vec::new() };
        for size in [PAGE, PAGE * 4, PAGE * 4] {
            let off = p.alloc(size).unwrap();
            live.add(off, a.block_size(off).unwrap(), "overlapping free runs");
        }
    }

    #[test]
    fn a_large_free_with_a_corrupt_page_count_is_refused() {
        let a = Arena::create(Backing::Anonymous, &Config { capacity: 64 << 20, max_participants: 4 }).unwrap();
        let p = a.register().unwrap();
        let run = p.alloc(PAGE * 2).unwrap();
        let kept = p.alloc(PAGE).unwrap();
        a.write(kept, b"still here").unwrap();
        let d = a.page_desc(run / PAGE).unwrap();
        let real = d.load(Ordering::Relaxed);
        // Past the pages handed out (it used to zero descriptors to the table's end and on
        // into the data), and a count whose second page is no continuation.
        for bad in [LARGE | 60_000, LARGE | 3] {
            d.store(bad, Ordering::Relaxed);
            assert!(p.free(run).is_err(), "{bad:#x}");
        }
        d.store(real, Ordering::Relaxed);
        assert!(a.bytes_eq(kept, b"still here").unwrap());
        p.free(run).unwrap();
    }

    #[test]
    fn a_corrupt_bump_cursor_is_dropped() {
        survives("cursor into another class's page", |a, p, live| {
            let other = live.blocks.iter().find(|b| b.1 == class_size(class_of(4000))).unwrap().0;
            let e = a.u32s::<4>(a.cache_entry(p.slot(), class_of(100))).unwrap();
            e[C_FREE_HEAD].store(0, Ordering::Relaxed);
            e[C_BUMP_CUR].store(Arena::to_units(other), Ordering::Relaxed);
            e[C_BUMP_END].store(u32::MAX, Ordering::Relaxed);
        });
        survives("cursor running past its page", |a, p, live| {
            let mine = live.blocks.iter().find(|b| b.1 == class_size(class_of(100))).unwrap().0;
            let e = a.u32s::<4>(a.cache_entry(p.slot(), class_of(100))).unwrap();
            e[C_FREE_HEAD].store(0, Ordering::Relaxed);
            e[C_BUMP_CUR].store(Arena::to_units(mine / PAGE * PAGE + PAGE - 8), Ordering::Relaxed);
            e[C_BUMP_END].store(u32::MAX, Ordering::Relaxed);
        });
    }

    #[test]
    fn a_corrupt_class_stack_is_dropped() {
        survives("class stack at the header", |a, _, _| {
            a.u64(H_CLASS_STACKS + class_of(48) as u64 * 8)
                .unwrap()
                .store(Arena::to_units(256) as u64, Ordering::Relaxed);
            // Empty every free list of the class so that the stack is asked.
            for slot in 0..4 {
                let e = a.u32s::<4>(a.cache_entry(slot, class_of(48))).unwrap();
                e[C_FREE_HEAD].store(0, Ordering::Relaxed);
                e[C_BUMP_CUR].store(0, Ordering::Relaxed);
            }
        });
    }

    #[test]
    fn a_corrupt_free_run_list_is_cut() {
        survives("free run at a live run", |a, _, live| {
            let big = live.blocks.iter().find(|b| b.1 == LARGE_MIN * 4).unwrap().0;
            a.u64(H_LARGE_HEAD).unwrap().store(Arena::to_units(big) as u64, Ordering::Relaxed);
        });
        survives("free run of no pages", |a, _, _| {
            let head = Arena::from_units(a.u64(H_LARGE_HEAD).unwrap().load(Ordering::Relaxed) as u32);
            assert_ne!(head, 0);
            a.u32(head + 4).unwrap().store(0, Ordering::Relaxed);
        });
        survives("free run longer than the pages handed out", |a, _, _| {
            let head = Arena::from_units(a.u64(H_LARGE_HEAD).unwrap().load(Ordering::Relaxed) as u32);
            a.u32(head + 4).unwrap().store(u32::MAX, Ordering::Relaxed);
        });
        survives("free run in the metadata", |a, _, _| {
            a.u64(H_LARGE_HEAD).unwrap().store(Arena::to_units(PAGE) as u64, Ordering::Relaxed);
        });
    }

    #[test]
    fn a_corrupt_page_mark_skips_pages_in_use() {
        survives("page mark at 0", |a, _, _| a.u64(H_PAGE_NEXT).unwrap().store(0, Ordering::Relaxed));
        survives("page mark over used pages", |a, _, live| {
            let first = live.blocks[0].0 / PAGE;
            a.u64(H_PAGE_NEXT).unwrap().store(first, Ordering::Relaxed);
        });
    }
}

/// A class's page-release mark (one u64 per class in the header at `H_RELEASING`): how many
/// releases hold the class's stack, in the top 16 bits, and when (monotonic ms) the last one
/// began, below. A count, not one stamp: two releases of a class can overlap (the server's
/// and a local process's: the first puts back the blocks it keeps before it frees its
/// pages, and the second takes them), and the first to end must not clear the mark while
/// the other holds the blocks. A releaser killed in the middle leaves its count behind, so a
/// mark is live only for two seconds after the last release began.
pub(crate) mod release_mark {
    use super::now_ms;
    use std::sync::atomic::{AtomicU64, Ordering};

    const HOLDER: u64 = 1 << 48;

    /// A release of the class begins.
    pub(crate) fn enter(mark: &AtomicU64) {
        let _ = mark.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
            let holders = (v / HOLDER).saturating_add(1).min(0xffff);
            Some((holders * HOLDER) | (now_ms() & (HOLDER - 1)))
        });
    }

    /// A release of the class ends.
    pub(crate) fn leave(mark: &AtomicU64) {
        let _ = mark
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| Some(if v / HOLDER <= 1 { 0 } else { v - HOLDER }));
    }

    /// Whether a mark read at `now` (monotonic ms) says a release holds the class's blocks:
    /// one began less than two seconds ago. A start further ahead of `now` than a clock
    /// read racing the mark's could put it is a corrupt header's (random bits are nearly
    /// always hours ahead), and would otherwise make every allocation in a full arena wait
    /// its two seconds.
    pub(crate) fn live(v: u64, now: u64) -> bool {
        let began = v & (HOLDER - 1);
        v / HOLDER > 0 && began <= now + 1000 && now.saturating_sub(began) <= 2000
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn overlapping_releases_keep_the_mark_until_the_last_one_ends() {
            let m = AtomicU64::new(0);
            let now = now_ms();
            assert!(!live(m.load(Ordering::Relaxed), now));
            enter(&m);
            enter(&m);
            leave(&m);
            assert!(live(m.load(Ordering::Relaxed), now_ms()), "the other release still holds the blocks");
            leave(&m);
            assert_eq!(m.load(Ordering::Relaxed), 0);
            // A releaser killed in the middle: live for two seconds after it began, then not.
            enter(&m);
            let began = m.load(Ordering::Relaxed) & (HOLDER - 1);
            assert!(live(m.load(Ordering::Relaxed), began + 2000));
            assert!(!live(m.load(Ordering::Relaxed), began + 2001));
            // A leave without an enter (a corrupt header) does not wrap.
            leave(&m);
            leave(&m);
            assert_eq!(m.load(Ordering::Relaxed), 0);
            // Random bits (a corrupt header): a start far ahead of the clock is no release.
            assert!(!live((3 * HOLDER) | (HOLDER - 1), now_ms()));
            assert!(live(HOLDER | (began + 500), began));
        }
    }
}
