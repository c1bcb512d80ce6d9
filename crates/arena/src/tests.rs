use std::collections::HashSet;
use std::sync::atomic::Ordering;

use super::*;

fn small() -> Config {
    Config { capacity: 64 << 20, max_participants: 16 }
}

/// Allocates blocks of `size` until the arena is full; any other error fails the test.
fn fill(p: &Participant, size: u64) -> Vec<u64> {
    let mut blocks = Vec::new();
    loop {
        match p.alloc(size) {
            Ok(off) => blocks.push(off),
            Err(Error::Full) => return blocks,
            Err(e) => panic!("{e}"),
        }
    }
}

/// A thread that gives free pages back over and over, beside a churn, until stopped.
/// `fresh`: a new `PageRelease` state each pass (no backoff: every stack with blocks is read).
struct Reclaimer {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Reclaimer {
    fn start(a: &std::sync::Arc<Arena>, fresh: bool) -> Reclaimer {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (a, flag) = (a.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let p = a.register().unwrap();
            let (mut seen, mut freed) = (crate::PageRelease::default(), 0);
            while !flag.load(Ordering::Relaxed) {
                if fresh {
                    seen = crate::PageRelease::default();
                }
                freed += p.release_free_pages(&mut seen).unwrap();
                std::thread::yield_now();
            }
            freed
        });
        Reclaimer { stop, thread }
    }

    /// Stops it; the pages it gave back.
    fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// One step of a xorshift64 generator.
fn xorshift(x: &mut u64) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
}

fn unique(tag: &str) -> String {
    format!("test-{tag}-{}-{:?}", std::process::id(), std::thread::current().id()).replace(['(', ')'], "")
}

#[test]
fn anonymous_arena_allocates_distinct_blocks() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let mut seen = HashSet::new();
    for size in [1u64, 16, 17, 100, 256, 257, 4000, 32 * 1024, 32 * 1024 + 1, 200_000] {
        for _ in 0..50 {
            let off = p.alloc(size).unwrap();
            assert_eq!(off % 8, 0);
            assert!(a.block_size(off).unwrap() >= size);
            assert!(seen.insert(off), "block handed out twice");
            a.write(off, &vec![0xAB; size as usize]).unwrap();
        }
    }
}

#[test]
fn freed_blocks_are_reused_and_batches_move_between_participants() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let q = a.register().unwrap();
    let blocks: Vec<u64> = (0..1000).map(|_| p.alloc(40).unwrap()).collect();
    let used = a.pages_in_use_bytes();
    for &b in &blocks {
        p.free(b).unwrap();
    }
    // q has an empty cache: it must be fed from the batches p handed to the global stack.
    let again: HashSet<u64> = (0..900).map(|_| q.alloc(40).unwrap()).collect();
    assert_eq!(a.pages_in_use_bytes(), used, "no new pages needed");
    assert!(again.iter().all(|b| blocks.contains(b)));
}

#[test]
fn retired_memory_waits_for_pinned_readers() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let writer = a.register().unwrap();
    let reader = a.register().unwrap();
    let guard = reader.pin();
    let off = writer.alloc(64).unwrap();
    writer.retire(off).unwrap();
    for _ in 0..10 {
        writer.collect().unwrap();
    }
    assert!(!a.alloc_stats().unwrap().free_set.contains_key(&off), "freed while a reader was pinned");
    drop(guard);
    for _ in 0..4 {
        writer.collect().unwrap();
    }
    assert!(a.alloc_stats().unwrap().free_set.contains_key(&off), "not freed after the reader left");
}

/// A writer's unlinking store may still sit in its CPU's store buffer when it reads the
/// global epoch, so a reader that pins one epoch later may still find the block. Retire
/// stamps such a block one epoch past the writer's own, and it outlives that reader.
#[test]
fn a_block_outlives_readers_of_the_epoch_after_its_writers() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let writer = a.register().unwrap();
    let other = a.register().unwrap();
    let off = writer.alloc(64).unwrap();
    {
        let _w = writer.pin();
        writer.retire(off).unwrap();
        assert!(other.try_advance(), "a writer pinned in the current epoch lets it advance once");
    }
    let reader = other.pin();
    for _ in 0..10 {
        writer.collect().unwrap();
    }
    assert!(!a.alloc_stats().unwrap().free_set.contains_key(&off), "freed while a reader of the next epoch was pinned");
    drop(reader);
    for _ in 0..4 {
        writer.collect().unwrap();
    }
    assert!(a.alloc_stats().unwrap().free_set.contains_key(&off), "not freed after the reader left");
}

/// An allocation that finds the arena full collects this participant's retired blocks
/// and retries, instead of failing while reclaimable memory waits for the next collect.
#[test]
fn a_full_arena_reclaims_retired_blocks_before_failing() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let mut blocks = fill(&p, 1 << 20);
    assert!(blocks.len() > 10);
    // Retiring collects at once (a big block), but the block is not ripe yet.
    p.retire(blocks.pop().unwrap()).unwrap();
    let again = p.alloc(1 << 20).expect("the retired block should be reclaimed for this allocation");
    assert!(p.alloc(1 << 20).is_err(), "only one block was retired");
    p.free(again).unwrap();
}

#[test]
fn named_segment_attach_and_errors() {
    let name = unique("named");
    let a = Arena::create(Backing::Named(name.clone()), &small()).unwrap();
    assert!(matches!(Arena::create(Backing::Named(name.clone()), &small()), Err(Error::Exists(_))));
    let b = Arena::open(Backing::Named(name.clone())).unwrap();
    assert_eq!(a.seed(), b.seed());
    let p = a.register().unwrap();
    let off = p.alloc(16).unwrap();
    a.u64(off).unwrap().store(42, Ordering::Release);
    assert_eq!(b.u64(off).unwrap().load(Ordering::Acquire), 42);
    Arena::unlink(&name).unwrap();
    assert!(matches!(Arena::open(Backing::Named(name)), Err(Error::NotFound(_))));
    assert!(matches!(Arena::open(Backing::Named("bad/name".into())), Err(Error::BadName(_))));
}

#[test]
fn foreign_or_corrupt_segments_are_refused() {
    let dir = std::env::temp_dir().join(unique("foreign"));
    std::fs::write(&dir, vec![7u8; 1 << 20]).unwrap();
    assert!(matches!(Arena::open(Backing::File(dir.clone())), Err(Error::BadMagic)));
    std::fs::remove_file(&dir).unwrap();

    let a = Arena::create(Backing::File(dir.clone()), &small()).unwrap();
    a.u32(H_VERSION).unwrap().store(99, Ordering::Relaxed);
    assert!(matches!(Arena::open(Backing::File(dir.clone())), Err(Error::Version { found: 99, .. })));
    a.u32(H_VERSION).unwrap().store(LAYOUT_VERSION, Ordering::Relaxed);
    a.u64(H_DATA_OFF).unwrap().store(12345, Ordering::Relaxed);
    assert!(matches!(Arena::open(Backing::File(dir.clone())), Err(Error::Geometry(_))));
    std::fs::remove_file(&dir).unwrap();

    std::fs::write(&dir, b"short").unwrap();
    assert!(matches!(Arena::open(Backing::File(dir.clone())), Err(Error::NotReady)));
    std::fs::remove_file(&dir).unwrap();
}

#[test]
fn out_of_range_offsets_are_errors() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    assert!(a.u64(a.capacity()).is_err());
    assert!(a.u64(3).is_err());
    assert!(a.read(a.capacity() - 2, &mut [0u8; 4]).is_err());
    assert!(a.write(u64::MAX - 1, b"xy").is_err());
    assert!(a.block_size(12).is_err());
    let p = a.register().unwrap();
    assert!(p.free(a.capacity() - 8).is_err());
    // A retired offset is stored in unit form until it is freed: one that isn't a unit
    // boundary in the arena (read from a corrupt segment) is refused at once.
    let b = p.alloc(64).unwrap();
    assert!(p.retire(b + 3).is_err());
    assert!(p.retire(a.capacity()).is_err());
    assert!(p.retire(u64::MAX - 7).is_err());
    p.retire(b).unwrap();
}

#[test]
fn arena_reports_full() {
    let a = Arena::create(Backing::Anonymous, &Config { capacity: 4 << 20, max_participants: 4 }).unwrap();
    let p = a.register().unwrap();
    let mut n = 0;
    loop {
        match p.alloc(100_000) {
            Ok(_) => n += 1,
            Err(Error::Full) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(n > 10);
}

#[test]
fn lock_of_a_dropped_participant_is_stale() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let word = a.u32(ROOT_OFF).unwrap();
    p.lock(word);
    assert!(a.lock_held(word.load(Ordering::Relaxed)));
    drop(p); // as if its thread ended while holding the lock
    let q = a.register().unwrap();
    assert!(!a.lock_held(word.load(Ordering::Relaxed)));
    assert!(q.try_lock(word));
    q.unlock(word);
}

#[test]
fn a_lock_word_naming_its_waiter_is_taken_not_waited_for() {
    // Locks are not re-entrant: a participant that finds its own word in a lock it is
    // taking does not hold it (the word came from a corrupt segment), and waiting would be
    // for itself, forever. It takes the lock.
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let b = a.clone();
    // On its own thread, left behind if it hangs: the test fails either way.
    std::thread::spawn(move || {
        let p = b.register().unwrap();
        let word = b.u32(ROOT_OFF).unwrap();
        word.store(p.lock_word(), Ordering::Relaxed);
        p.lock(word);
        p.unlock(word);
        tx.send(word.load(Ordering::Relaxed)).unwrap();
    });
    let after = rx.recv_timeout(std::time::Duration::from_secs(10));
    assert_eq!(after, Ok(0), "lock() waited for its own word");
}

#[test]
fn unlocking_a_word_overwritten_while_held_leaves_it_alone() {
    // In a corrupt segment a held lock's word can be overwritten (a scribble, a block handed
    // out twice). Unlocking then neither panics nor clears a word naming another owner.
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let (p, q) = (a.register().unwrap(), a.register().unwrap());
    let word = a.u32(ROOT_OFF).unwrap();
    p.lock(word);
    word.store(q.lock_word(), Ordering::Relaxed);
    p.unlock(word);
    assert_eq!(word.load(Ordering::Relaxed), q.lock_word(), "p released q's lock");
    word.store(0, Ordering::Relaxed);
    p.lock(word);
    word.store(0, Ordering::Relaxed);
    p.unlock(word);
    assert_eq!(word.load(Ordering::Relaxed), 0);
    assert_eq!(a.unlock_mismatches(), 2, "the checker is not told");
    // And an ordinary unlock still releases.
    p.lock(word);
    p.unlock(word);
    assert!(q.try_lock(word));
    assert_eq!(a.unlock_mismatches(), 2);
}

#[test]
fn threads_allocate_concurrently_without_overlap() {
    let a = Arena::create(Backing::Anonymous, &Config { capacity: 256 << 20, max_participants: 16 }).unwrap();
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let p = a.register().unwrap();
                let mut mine = Vec::new();
                for i in 0..20_000u64 {
                    let size = 16 + (i * 7 + t) % 300;
                    let off = p.alloc(size).unwrap();
                    a.u64(off).unwrap().store(t << 32 | i, Ordering::Relaxed);
                    mine.push((off, t << 32 | i));
                    if i % 3 == 0 {
                        let (o, _) = mine.swap_remove((i as usize * 13) % mine.len());
                        let _g = p.pin();
                        p.retire(o).unwrap();
                    }
                }
                for (off, v) in &mine {
                    assert_eq!(a.u64(*off).unwrap().load(Ordering::Relaxed), *v, "block overwritten");
                }
                mine.len()
            })
        })
        .collect();
    for h in handles {
        assert!(h.join().unwrap() > 0);
    }
    a.alloc_stats().unwrap();
}

#[test]
fn bytes_eq_compares_every_length_and_position() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let off = p.alloc(128).unwrap() + 3; // unaligned on purpose
    let data: Vec<u8> = (0..100u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
    a.write(off, &data).unwrap();
    for n in 0..=data.len() {
        assert!(a.bytes_eq(off, &data[..n]).unwrap(), "len {n}");
        for at in 0..n {
            let mut other = data[..n].to_vec();
            other[at] ^= 1;
            assert!(!a.bytes_eq(off, &other).unwrap(), "len {n}, differs at {at}");
        }
    }
    // Out of range is an error, not a panic.
    assert!(a.bytes_eq(a.capacity() - 4, &data[..8]).is_err());
    assert!(a.bytes_eq(u64::MAX - 2, &data[..8]).is_err());
}

#[test]
fn u32s_is_bounds_and_alignment_checked() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    assert!(a.u32s::<16>(a.capacity() - 64).is_ok());
    assert!(a.u32s::<16>(a.capacity() - 60).is_err());
    assert!(a.u32s::<16>(a.capacity() - 62).is_err());
    assert!(a.u32s::<16>(u64::MAX - 8).is_err());
}

/// Places in the arena's code where a test can make something happen (another process
/// advancing the epoch, a SIGKILL) between two steps that are otherwise back to back.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Hook {
    /// In the next outermost pin, between its load of the global epoch and its store into
    /// the slot.
    PinLoadStore,
    /// In the next `refill` that takes a new page, between its stores of the bump end and
    /// the bump cursor.
    RefillEndCur,
    /// In the next page release of a class with free blocks, after it marks the header and
    /// before it takes the class's stack.
    ReleaseBeforeTake,
    /// In the next page release of a class with free blocks, while it holds the blocks it
    /// took (after its walk, before it gives back the rest).
    ReleaseHolding,
    /// In the next take of a free large run, between unlinking the run and marking its
    /// pages taken (under the large lock).
    TakeRunUnlinked,
    /// In the next allocation of a full arena that waits for page releases, after a try
    /// found nothing and before it looks whether a release is under way.
    FullTried,
    /// In the next give-back of a freed slot's cache, after it has emptied a class's lists
    /// and before it pushes their blocks.
    GiveBackTaken,
}

type HookFn = Box<dyn FnOnce()>;

thread_local! {
    static HOOK: std::cell::RefCell<Option<(Hook, HookFn)>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` once, when this thread next reaches `at`.
fn set_hook(at: Hook, f: impl FnOnce() + 'static) {
    HOOK.with(|h| *h.borrow_mut() = Some((at, Box::new(f))));
}

/// Called at `at` (test builds only): runs the hook set for it, if any.
pub(crate) fn hook(at: Hook) {
    let f = HOOK.with(|h| {
        let mut h = h.borrow_mut();
        match h.take() {
            Some((w, f)) if w == at => Some(f),
            other => {
                *h = other;
                None
            }
        }
    });
    if let Some(f) = f {
        f();
    }
}

/// A pin whose store lands late (it loaded the global epoch, then others advanced it twice
/// before the store) must still stop the blocks it retires from being freed under a reader
/// of the current epoch: it re-pins at the epoch it finds after its store.
#[test]
fn a_pin_that_lands_late_still_protects_the_current_epoch() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let writer = a.register().unwrap();
    let reader = a.register().unwrap();
    let advancer = a.register().unwrap();
    let block = writer.alloc(64).unwrap();
    let g0 = a.u64(H_EPOCH).unwrap().load(Ordering::SeqCst);
    set_hook(Hook::PinLoadStore, move || {
        assert!(advancer.try_advance());
        assert!(advancer.try_advance());
    });
    let w = writer.pin();
    // (Dropping the advancer at the end of the hook collects, which advances once more.)
    assert!(a.u64(H_EPOCH).unwrap().load(Ordering::SeqCst) >= g0 + 2, "the hook ran inside the pin");
    // A reader pinned in the current epoch finds the block, still linked; the writer then
    // unlinks and retires it, and leaves.
    let r = reader.pin();
    writer.retire(block).unwrap();
    drop(w);
    for _ in 0..10 {
        writer.collect().unwrap();
    }
    let freed = a.alloc_stats().unwrap().free_set.contains_key(&block);
    drop(r);
    assert!(!freed, "freed while a reader pinned before the retire was still pinned");
    for _ in 0..10 {
        writer.collect().unwrap();
    }
    assert!(a.alloc_stats().unwrap().free_set.contains_key(&block), "freed once the reader left");
}

/// A pinned allocation in a full arena doesn't wait for blocks its own pin keeps unripe
/// (before: 50 ms of collecting and yielding, holding whatever locks the caller held,
/// then Full anyway).
#[test]
fn a_pinned_allocation_does_not_wait_for_what_its_pin_holds_back() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let mut blocks = fill(&p, 1 << 20);
    let g = p.pin();
    p.retire(blocks.pop().unwrap()).unwrap();
    let t = std::time::Instant::now();
    assert!(matches!(p.alloc(1 << 20), Err(Error::Full)));
    let waited = t.elapsed();
    assert!(waited < std::time::Duration::from_millis(40), "waited {waited:?}");
    drop(g);
    // Unpinned, the same allocation waits for the block to ripen and gets it.
    assert!(p.alloc(1 << 20).is_ok());
}

/// A value that keeps growing (each new size a little over the last, the old one freed)
/// reuses the freed runs once they merge: before merging, every step took fresh pages and
/// the arena filled with free runs each too small for the next request.
#[test]
fn a_growing_large_value_reuses_its_freed_runs() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let step = 100_000u64;
    let mut cur = p.alloc(step).unwrap();
    for i in 2..=150u64 {
        // 150 steps of 100 kB: 1.1 GB of requests in all, in a 64 MiB arena (without
        // merging, it was full at the 36th).
        let next = p.alloc(i * step).unwrap_or_else(|e| panic!("step {i}: {e}"));
        p.free(cur).unwrap();
        cur = next;
    }
    assert!(a.pages_in_use_bytes() < 4 * 150 * step, "{} bytes of pages", a.pages_in_use_bytes());
    p.free(cur).unwrap();
    let st = a.alloc_stats().unwrap();
    assert_eq!(st.large_bytes, 0);
}

/// Runs freed in any order merge with both neighbours into one run, which then serves a
/// request as large as all of them without fresh pages.
#[test]
fn adjacent_free_runs_merge() {
    for order in [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]] {
        let a = Arena::create(Backing::Anonymous, &small()).unwrap();
        let p = a.register().unwrap();
        let runs: Vec<u64> = (0..3).map(|_| p.alloc(3 * PAGE).unwrap()).collect();
        assert_eq!(runs[1], runs[0] + 3 * PAGE, "fresh runs are adjacent");
        assert_eq!(runs[2], runs[1] + 3 * PAGE);
        for &i in &order {
            p.free(runs[i]).unwrap();
        }
        let st = a.alloc_stats().unwrap();
        assert_eq!(st.large_free_bytes, 9 * PAGE, "{order:?}");
        assert_eq!(st.free_set.get(&runs[0]), Some(&(9 * PAGE)), "{order:?}: one run of nine pages");
        let used = a.pages_in_use_bytes();
        assert_eq!(p.alloc(9 * PAGE).unwrap(), runs[0], "{order:?}");
        assert_eq!(a.pages_in_use_bytes(), used, "{order:?}: no fresh pages");
    }
}

/// A retire that needs a new retire chunk in a full arena still succeeds (it comes after
/// an unlink that is already published), and the block is freed once it ripens.
#[test]
fn retiring_in_a_full_arena_succeeds_and_frees_later() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let mut blocks = fill(&p, 64);
    let g = p.pin();
    // The first retire needs the list's first chunk, and every 62 more a new one.
    let retired: Vec<u64> = blocks.drain(..200).collect();
    for &b in &retired {
        p.retire(b).expect("retire must not fail for want of memory");
    }
    assert!(p.retired_waiting() >= 200);
    drop(g);
    for _ in 0..10 {
        p.collect().unwrap();
    }
    assert_eq!(p.retired_waiting(), 0);
    let st = a.alloc_stats().unwrap();
    for b in &retired {
        assert!(st.free_set.contains_key(b), "retired block {b} was freed");
    }
}

/// Whether the bytes of `off..off + len` are all `b`.
fn all_bytes(a: &Arena, off: u64, len: u64, b: u8) -> bool {
    let mut buf = vec![0u8; len as usize];
    a.read(off, &mut buf).unwrap();
    buf.iter().all(|&x| x == b)
}

/// Whether a discard of `off..off + len` gave its pages back: they read as zero. With huge
/// pages only the whole 2 MiB pages inside the range go (and a range without one keeps all).
fn given_back(a: &Arena, off: u64, len: u64) -> bool {
    let huge = a.map.huge_page();
    let gone = if huge != 0 { crate::map::whole_huge_pages(off, len, huge) } else { Some((off, len)) };
    gone.is_none_or(|(off, len)| all_bytes(a, off, len, 0))
}

/// A freed large run keeps its pages (its bytes are still there) until a purge finds it old
/// enough; then everything past the node's OS page reads as zero: given back to the kernel.
#[test]
fn freed_runs_keep_their_pages_until_purged() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let runs: Vec<u64> = (0..3).map(|_| p.alloc(8 * PAGE).unwrap()).collect();
    for &r in &runs {
        a.write(r, &vec![0xab; 8 * PAGE as usize]).unwrap();
    }
    p.free(runs[0]).unwrap();
    p.free(runs[2]).unwrap();
    assert_eq!(a.dirty_free_bytes(), 16 * PAGE);
    assert!(all_bytes(&a, runs[0] + 4096, 8 * PAGE - 4096, 0xab), "freed pages were given back at once");
    // Freed just now: younger than the decay.
    assert_eq!(p.purge_dirty(DIRTY_DECAY_MS).unwrap(), 0);
    assert!(all_bytes(&a, runs[2] + 4096, 8 * PAGE - 4096, 0xab));
    assert_eq!(p.purge_dirty(0).unwrap(), 16);
    assert_eq!(a.dirty_free_bytes(), 0);
    for r in [runs[0], runs[2]] {
        assert!(given_back(&a, r + 4096, 8 * PAGE - 4096), "a purged run kept its pages");
    }
    assert!(all_bytes(&a, runs[1], 8 * PAGE, 0xab), "the live run between them was touched");
    // A purge with nothing dirty does nothing.
    assert_eq!(p.purge_dirty(0).unwrap(), 0);
}

/// A dirty run taken again, whole or in part, belongs to its new owner: a purge leaves its
/// bytes alone and gives back only what is still free.
#[test]
fn a_purge_never_touches_a_run_taken_again() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let big = p.alloc(16 * PAGE).unwrap();
    let _guard = p.alloc(PAGE * 2).unwrap(); // keeps the run from merging with fresh pages
    a.write(big, &vec![0x11; 16 * PAGE as usize]).unwrap();
    p.free(big).unwrap();
    // Its head, taken again without page faults: the old bytes are still there.
    let head = p.alloc(6 * PAGE).unwrap();
    assert_eq!(head, big, "the freed run is reused from its head");
    assert!(all_bytes(&a, head + 4096, 6 * PAGE - 4096, 0x11), "a dirty run came back zeroed");
    a.write(head, &vec![0x22; 6 * PAGE as usize]).unwrap();
    assert_eq!(a.dirty_free_bytes(), 10 * PAGE);
    p.purge_dirty(0).unwrap();
    assert!(all_bytes(&a, head, 6 * PAGE, 0x22), "a purge discarded pages of a live block");
    let rest = head + 6 * PAGE;
    assert!(given_back(&a, rest + 4096, 10 * PAGE - 4096), "the free rest kept its pages");
    // Freed again, it merges with its clean rest into one run, dirty as a whole.
    p.free(head).unwrap();
    let st = a.alloc_stats().unwrap();
    assert_eq!(st.free_set.get(&big), Some(&(16 * PAGE)));
    assert_eq!(a.dirty_free_bytes(), 6 * PAGE);
    p.purge_dirty(0).unwrap();
    assert!(given_back(&a, big + 4096, 16 * PAGE - 4096));
}

/// More than 64 MiB of freed runs waiting is given back at once, not after the decay.
#[test]
fn dirty_runs_past_the_budget_are_given_back_at_once() {
    let a = Arena::create(Backing::Anonymous, &Config { capacity: 256 << 20, max_participants: 16 }).unwrap();
    let p = a.register().unwrap();
    let n = (24 << 20) / PAGE; // three of them pass 64 MiB
    let runs: Vec<u64> = (0..3).map(|_| p.alloc(n * PAGE).unwrap()).collect();
    for &r in &runs {
        a.write(r, &vec![0x33; (n * PAGE) as usize]).unwrap();
    }
    p.free(runs[0]).unwrap();
    p.free(runs[2]).unwrap();
    assert_eq!(a.dirty_free_bytes(), 2 * n * PAGE, "under the budget: kept");
    assert!(all_bytes(&a, runs[0] + n * PAGE - 8, 8, 0x33));
    p.free(runs[1]).unwrap();
    assert_eq!(a.dirty_free_bytes(), 0, "past the budget: all given back");
    for &r in &runs {
        assert!(given_back(&a, r + 4096, n * PAGE - 4096));
    }
}

/// A participant killed in `refill` between storing its new page's bump end and its bump
/// cursor leaves them in its slot's cache, which whoever frees the slot gives back to the
/// global stacks. That must never hand out memory that is someone else's. (Found by
/// review: with the end stored before the cursor was cleared, the next claimer bumped
/// from the old page's cursor across every page in between.)
#[test]
fn a_refill_killed_halfway_hands_out_nothing_twice() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let o = a.register().unwrap();
    let size = 20_000u64;
    let cs = class_size(class_of(size));
    // Use up p's first page of the class, then put someone else's data right after it.
    for _ in 0..PAGE / cs {
        p.alloc(size).unwrap();
    }
    let live = o.alloc(2 * PAGE).unwrap();
    // p's next refill takes a new page and is "killed" between the two stores: the hook
    // unwinds out of it, as far as the arena can tell the same as a SIGKILL there.
    set_hook(Hook::RefillEndCur, || panic!("killed in refill"));
    let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.alloc(size)));
    assert!(killed.is_err(), "the hook did not run");
    drop(p);
    let q = a.register().unwrap();
    for _ in 0..8 {
        let b = q.alloc(size).unwrap();
        assert!(
            b + cs <= live || b >= live + 2 * PAGE,
            "block {b:#x}+{cs} handed out inside live run {live:#x}+{}",
            2 * PAGE
        );
    }
}

/// A participant killed while it takes a free large run (holding the large lock) loses at
/// most that run: the runs after it on the free list are still found. (Found by review:
/// with the pages marked taken before the run was unlinked, the next walk met a listed run
/// whose pages were in use, took the list for corrupt and cut it there.)
#[test]
fn a_take_of_a_free_run_killed_halfway_loses_only_that_run() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let size = 4 * PAGE;
    // Three runs of free pages, kept apart by live ones so they do not merge.
    let runs: Vec<u64> = (0..6).map(|_| p.alloc(size).unwrap()).collect();
    for &r in [runs[0], runs[2], runs[4]].iter() {
        p.free(r).unwrap();
    }
    set_hook(Hook::TakeRunUnlinked, || panic!("killed in take_free_run"));
    let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.alloc(size)));
    assert!(killed.is_err(), "the hook did not run");
    // The dead holder's large lock goes to the next taker once its slot is reaped.
    drop(p);
    a.reap_dead();
    let q = a.register().unwrap();
    let (b, c) = (q.alloc(size).unwrap(), q.alloc(size).unwrap());
    let mut got = vec![b, c];
    got.sort();
    let free: Vec<u64> = [runs[0], runs[2], runs[4]].into_iter().filter(|r| got.contains(r)).collect();
    assert_eq!(free.len(), 2, "the two runs left on the list were not found: got {got:#x?}, runs {runs:#x?}");
}

/// A process whose main thread has exited (it shows Z) while another thread still runs is
/// alive: that thread may be in the middle of a system call on the arena (after a SIGKILL,
/// an madvise that discards pages under the large-run lock), and reaping it would hand its
/// lock to someone else. Found by review. The child is Python (already needed by the test
/// suite), whose main thread calls `pthread_exit` while a second thread sleeps.
#[test]
fn a_process_with_a_zombie_main_thread_but_live_threads_is_alive() {
    use std::io::BufRead;
    let script = "import ctypes, os, sys, threading, time\n\
                  threading.Thread(target=lambda: time.sleep(30)).start()\n\
                  print(os.getpid(), flush=True)\n\
                  ctypes.CDLL(None).pthread_exit(None)\n";
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 is needed by this test");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    let start = crate::participant::proc_start_time_for_tests(pid).unwrap();
    // Wait for the main thread to show Z.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap().contains(") Z ") {
        assert!(std::time::Instant::now() < deadline, "the child's main thread never exited");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let alive = crate::participant::process_alive(pid, start);
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(alive, "a process with a running thread was judged dead");
    assert!(!crate::participant::process_alive(pid, start), "a reaped process is alive");
}

/// A pid that no process has here (above the kernel's largest pid_max, 2^22).
const NO_SUCH_PID: u32 = (1 << 22) + 12345;

/// An owner in another pid namespace (a container sharing /dev/shm) shows a pid that means
/// nothing here, or another process; one hidden by hidepid shows nothing. While it holds its
/// liveness lock it is alive. Before the lock, /proc alone judged it dead and reaped it
/// while it ran, handing its bucket locks to the next waiter.
#[test]
fn an_owner_holding_its_liveness_lock_is_alive_whatever_its_pid_shows() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    assert!(p.has_liveness_lock(), "a participant took no liveness lock");
    assert!(a.slots()[p.slot() as usize].locked);
    let (start, ns) = Arena::identity_for_tests();
    assert_ne!(ns, 0, "no pid namespace inode from /proc/self/ns/pid");
    for (pid, start, ns) in
        [(NO_SUCH_PID, 777, ns + 1), (1, 777, ns + 1), (NO_SUCH_PID, start, ns), (std::process::id(), start + 1, ns)]
    {
        a.disguise_owner_for_tests(p.slot(), pid, start, ns);
        assert!(!a.reap(p.slot()), "a live owner shown as pid {pid} was reaped");
    }
    assert_eq!(a.reap_dead(), 0);
    assert_eq!(a.slots()[p.slot() as usize].state, "live");
}

/// A released liveness lock is a dead owner, wherever it lived, unless it shares this pid
/// namespace and /proc shows it running (it closed its descriptors).
#[test]
fn a_released_liveness_lock_is_a_dead_owner_unless_proc_shows_it_running() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let (start, ns) = Arena::identity_for_tests();
    let mut p = a.register().unwrap();
    let gen = a.slots()[p.slot() as usize].gen;
    p.close_liveness_for_tests();
    assert!(!a.reap(p.slot()), "a running owner that closed its lock description was reaped");
    a.disguise_owner_for_tests(p.slot(), 1, start, ns + 1);
    assert!(a.reap(p.slot()), "a dead owner in another pid namespace was not reaped");
    let s = &a.slots()[p.slot() as usize];
    assert_eq!((s.state, s.gen), ("free", gen + 1));
    // The reaped participant's own drop leaves the slot alone.
    let slot = p.slot();
    drop(p);
    assert_eq!(a.slots()[slot as usize].gen, gen + 1);
}

/// A copy of a participant dropped in a forked child (a different pid) leaves the slot,
/// its generation and its epoch alone: they are the parent's.
#[test]
fn a_participant_dropped_by_another_process_leaves_the_slot_alone() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let mut p = a.register().unwrap();
    let before = a.slots()[p.slot() as usize].clone();
    let _g = p.pin();
    drop(_g);
    p.pretend_forked_for_tests();
    let slot = p.slot();
    drop(p);
    let after = &a.slots()[slot as usize];
    assert_eq!((after.state, after.gen), ("live", before.gen), "a child's drop freed its parent's slot");
}

/// What a forked child runs: every registered liveness description is let go (the number
/// stays open, on /dev/null), so a child does not keep its parent's locks.
#[test]
fn letting_go_of_a_description_releases_its_lock_and_keeps_the_number() {
    use std::os::fd::{AsFd, AsRawFd};
    use std::sync::atomic::AtomicI32;
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    assert!(p.has_liveness_lock());
    let fd = p.liveness_fd_for_tests();
    let registry = [AtomicI32::new(fd.as_raw_fd() + 1), AtomicI32::new(0)];
    assert!(crate::map::ofd::held_by_other(a.fd_for_tests(), p.slot() as u64).unwrap());
    crate::map::ofd::let_go(&registry);
    assert!(!crate::map::ofd::held_by_other(a.fd_for_tests(), p.slot() as u64).unwrap(), "the lock survived");
    assert!(rustix::io::fcntl_getfd(fd.as_fd()).is_ok(), "the descriptor number was closed");
}

/// The fork handler's own /dev/null may have been closed and its number reused, here by a
/// liveness description: the handler must see that, open another /dev/null, and let go of
/// both numbers. Found by review: it skipped the reused number and pointed the others at it.
#[test]
fn letting_go_survives_a_reused_dev_null_number() {
    use std::os::fd::{AsFd, AsRawFd};
    use std::sync::atomic::AtomicI32;
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let fd = p.liveness_fd_for_tests();
    let n = crate::map::ofd::reuse_null_number_for_tests(fd.as_fd());
    let registry = [AtomicI32::new(n + 1), AtomicI32::new(fd.as_raw_fd() + 1)];
    crate::map::ofd::let_go(&registry);
    assert!(!crate::map::ofd::held_by_other(a.fd_for_tests(), p.slot() as u64).unwrap(), "the lock survived");
}

/// An owner without a liveness lock is judged by /proc, and only where /proc speaks for its
/// pid namespace.
#[test]
fn an_owner_without_a_lock_is_judged_by_proc_in_its_own_namespace_only() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let (start, ns) = Arena::identity_for_tests();
    let mut p = a.register().unwrap();
    p.close_liveness_for_tests();
    a.drop_locked_bit_for_tests(p.slot());
    assert!(!a.slots()[p.slot() as usize].locked);
    assert!(!a.reap(p.slot()), "a running owner was reaped");
    a.disguise_owner_for_tests(p.slot(), NO_SUCH_PID, start, ns + 1);
    assert!(!a.reap(p.slot()), "an owner of another pid namespace was judged by our /proc");
    a.disguise_owner_for_tests(p.slot(), std::process::id(), start + 1, ns);
    assert!(a.reap(p.slot()), "an owner whose pid was reused was not reaped");
}

#[test]
fn maps_are_searched_by_inode() {
    use crate::participant::maps_show_inode;
    let maps = "7f3a00000000-7f3a40000000 rw-s 00000000 00:01 4242 /memfd:larder (deleted)\n\
                7f3a50000000-7f3a50021000 r-xp 00000000 fd:1a5 99 /usr/lib/libc.so.6\n\
                7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]\n";
    assert!(maps_show_inode(maps, 4242));
    assert!(maps_show_inode(maps, 99));
    assert!(!maps_show_inode(maps, 424));
    assert!(!maps_show_inode(maps, 4));
    // This process maps its own arena.
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let st = rustix::fs::fstat(a.fd_for_tests()).unwrap();
    let own = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(maps_show_inode(&own, st.st_ino as u64), "our arena is not in /proc/self/maps");
}

#[test]
fn hidepid_is_read_from_mountinfo() {
    use crate::participant::mountinfo_shows_all;
    let line = |opts: &str| format!("22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc {opts}\n");
    assert!(mountinfo_shows_all(&line("rw")));
    assert!(mountinfo_shows_all(&line("rw,hidepid=0")));
    assert!(mountinfo_shows_all(&line("rw,hidepid=off,subset=pid")));
    assert!(!mountinfo_shows_all(&line("rw,hidepid=2")));
    assert!(!mountinfo_shows_all(&line("rw,hidepid=invisible")));
    // The last proc mounted on /proc wins; other mount points do not count.
    assert!(!mountinfo_shows_all(&(line("rw") + &line("rw,hidepid=invisible"))));
    assert!(mountinfo_shows_all(&(line("rw") + "30 1 0:50 / /mnt/proc rw - proc proc rw,hidepid=2\n")));
    assert!(!mountinfo_shows_all("25 1 0:23 / /sys rw - sysfs sysfs rw\n"), "no /proc: nothing is known");
}

/// Threads of one process each hold their own slot's lock, and a slot freed by one is
/// claimed (and locked) again by the next.
#[test]
fn liveness_locks_follow_their_slots() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    a.all_foreign_for_tests();
    let ps: Vec<Participant> = (0..4).map(|_| a.register().unwrap()).collect();
    assert!(ps.iter().all(|p| p.has_liveness_lock()));
    assert_eq!(a.reap_dead(), 0);
    drop(ps);
    assert!(a.slots().iter().all(|s| s.state == "free"));
    let q = a.register().unwrap();
    assert_eq!(q.slot(), 0, "the freed slot 0 was not claimed again");
    assert!(q.has_liveness_lock());
    assert_eq!(a.reap_dead(), 0, "a reclaimed slot's new owner was reaped");
    assert!(q.still_owns_slot());
}

/// Owners claim one slot over and over, every other one "dying" (its description closed,
/// its participant forgotten), while reapers look at the slot; every owner is judged by its
/// lock alone, as from another pid namespace. Every dead owner is reaped, and no live owner
/// may lose its slot. Found by review: a reaper that judged, then exchanged, could take a
/// slot that a sibling thread had claimed in between with the same state word.
#[test]
fn reapers_reap_the_dead_and_never_a_live_owner() {
    let a = Arena::create(Backing::Anonymous, &Config { capacity: 64 << 20, max_participants: 1 }).unwrap();
    a.all_foreign_for_tests();
    let (lost, deaths) = race_owners_and_reapers(&a, 3, 4, 60, |n, mut p| {
        if n % 2 == 0 {
            p.close_liveness_for_tests();
            std::mem::forget(p);
            true
        } else {
            false
        }
    });
    assert!(deaths >= 20, "too few deaths: {deaths}");
    // Each death is reaped before the slot is claimed again (by a reaper thread, or by a
    // register that found no free slot): at most the last is left.
    assert!(a.reaps_for_tests() + 1 >= deaths, "{} reaps for {deaths} deaths", a.reaps_for_tests());
    assert_eq!(lost, 0, "live owners lost their slot to a reaper ({deaths} deaths)");
}

/// An owner that has closed its description (as a daemon closing every descriptor does)
/// is kept alive by /proc in its own namespace, and its drop passes through REAPING
/// without the byte: a reaper must not take that REAPING over. Found by review: it did,
/// and the owner's drop then freed the next owner's slot.
#[test]
fn a_dropping_owner_without_its_description_is_not_reaped_under_it() {
    let a = Arena::create(Backing::Anonymous, &Config { capacity: 64 << 20, max_participants: 1 }).unwrap();
    let (lost, _) = race_owners_and_reapers(&a, 2, 3, 0, |_, mut p| {
        p.close_liveness_for_tests();
        drop(p);
        false
    });
    assert_eq!(a.reaps_for_tests(), 0, "a live owner was reaped");
    assert_eq!(lost, 0, "live owners lost their slot to a reaper");
}

/// Runs `reapers` threads reaping slot 0 and `owners` threads claiming it, checking they
/// still own it, then handing it to `end` (which returns whether the owner "died"), until
/// `want` deaths or, at most, a few seconds. Returns (owners that lost the slot, deaths).
fn race_owners_and_reapers(
    a: &Arc<Arena>,
    reapers: usize,
    owners: u64,
    want: u64,
    end: impl Fn(u64, Participant) -> bool + Send + Sync + Copy + 'static,
) -> (u64, u64) {
    use std::sync::atomic::AtomicBool;
    let stop = Arc::new(AtomicBool::new(false));
    let lost = Arc::new(AtomicU64::new(0));
    let deaths = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for _ in 0..reapers {
        let (a, stop) = (a.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                a.reap(0);
            }
        }));
    }
    for t in 0..owners {
        let (a, stop, lost, deaths) = (a.clone(), stop.clone(), lost.clone(), deaths.clone());
        threads.push(std::thread::spawn(move || {
            let mut n = t;
            while !stop.load(Ordering::Relaxed) {
                let Ok(p) = a.register() else {
                    std::thread::yield_now();
                    continue;
                };
                for _ in 0..3 {
                    std::thread::yield_now();
                    if !p.still_owns_slot() {
                        lost.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                }
                n += 1;
                if end(n, p) {
                    deaths.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(if want > 0 { 20 } else { 2 });
    while std::time::Instant::now() < deadline && (want == 0 || deaths.load(Ordering::Relaxed) < want) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    (lost.load(Ordering::Relaxed), deaths.load(Ordering::Relaxed))
}

/// A child forked without exec shares its parent's descriptions; the fork handler makes it
/// let go of the liveness ones, so a parent that dies (here: closes its description) is
/// seen dead while the child still runs.
#[test]
fn a_forked_child_lets_go_of_its_parents_liveness_locks() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let mut p = a.register().unwrap();
    let child = crate::map::ofd::fork_sleeping_child_for_tests(10);
    assert!(child > 0, "fork failed");
    let child = rustix::process::Pid::from_raw(child).unwrap();
    p.close_liveness_for_tests();
    // The child runs the handler when it is first scheduled, after fork has returned here.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut held = true;
    while held && std::time::Instant::now() < deadline {
        held = crate::map::ofd::held_by_other(a.fd_for_tests(), p.slot() as u64).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let _ = rustix::process::kill_process(child, rustix::process::Signal::KILL);
    let _ = rustix::process::waitpid(Some(child), rustix::process::WaitOptions::empty());
    assert!(!held, "the forked child kept its parent's liveness lock");
}

/// A lock whose owner died is taken over promptly even when the waiter shares a loaded
/// machine: it used to ask about the owner's process only every 16384th spin (after 256
/// yields), and with every core busy each yield could give the CPU away for a timeslice:
/// 0.25-1.9 s on 2 cores with 4 busy processes.
#[test]
fn a_dead_owners_lock_is_taken_over_promptly_on_a_loaded_machine() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let (start, ns) = Arena::identity_for_tests();
    let p = a.register().unwrap();
    let word = a.u32(crate::ROOT_OFF + 40).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let busy: Vec<_> = (0..2 * cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let mut worst = std::time::Duration::ZERO;
    for _ in 0..3 {
        let mut dead = a.register().unwrap();
        dead.lock(word);
        // Dead: its liveness lock released and its pid nobody's.
        dead.close_liveness_for_tests();
        a.disguise_owner_for_tests(dead.slot(), NO_SUCH_PID, start, ns);
        std::mem::forget(dead);
        let t = std::time::Instant::now();
        p.lock(word);
        worst = worst.max(t.elapsed());
        p.unlock(word);
    }
    stop.store(true, Ordering::Relaxed);
    for b in busy {
        b.join().unwrap();
    }
    assert!(worst < std::time::Duration::from_millis(200), "a dead owner's lock was taken over after {worst:?}");
}

/// Counters backed by participants' shares: a participant's share goes with its slot,
/// whether its owner frees the slot or a reaper does; a reaped owner's own drop takes
/// nothing twice.
#[test]
fn a_counters_shares_go_with_their_participants() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let total = |k| a.counter(k).unwrap().load(Ordering::SeqCst);
    let p = a.register().unwrap();
    let q = a.register().unwrap();
    p.count(0, 3).unwrap();
    q.count(0, 2).unwrap();
    q.count(1, 1).unwrap();
    p.count(0, -1).unwrap();
    assert_eq!((total(0), total(1)), (4, 1));
    assert!(a.counter(crate::COUNTERS).is_err());
    assert!(p.count(crate::COUNTERS, 1).is_err());
    // The owner's own drop takes its share back.
    drop(p);
    assert_eq!((total(0), total(1)), (2, 1));
    // A dead owner's is taken back by its reaper, and only once.
    let (start, ns) = Arena::identity_for_tests();
    let mut q = q;
    q.close_liveness_for_tests();
    a.disguise_owner_for_tests(q.slot(), 1, start, ns + 1);
    let reaps = a.reaps();
    assert!(a.reap(q.slot()));
    assert_eq!(a.reaps(), reaps + 1, "a reap is counted");
    assert_eq!((total(0), total(1)), (0, 0));
    drop(q);
    assert_eq!((total(0), total(1)), (0, 0));
    // The slot's next owner starts with no share.
    let r = a.register().unwrap();
    r.count(0, 1).unwrap();
    drop(r);
    assert_eq!(total(0), 0);
}

/// Whole free pages of a small class go back to the page pool: a fill of small blocks,
/// all freed, then a fill of bigger ones reuses the small ones' pages instead of taking
/// new ones; a page with one block still in use stays with its class; nothing is handed
/// out twice, and every free list stays sound.
#[test]
fn whole_free_pages_of_a_class_go_back_to_the_pool() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let q = a.register().unwrap();
    let small_blocks: Vec<u64> = (0..20_000).map(|_| p.alloc(64).unwrap()).collect();
    let used = a.pages_in_use_bytes();
    // One block kept per 64 KiB page in the first ten: those pages must stay.
    let keep: std::collections::HashSet<u64> =
        small_blocks.iter().copied().filter(|o| o % PAGE < 64).take(10).collect();
    assert_eq!(keep.len(), 10);
    for &b in &small_blocks {
        if !keep.contains(&b) {
            q.free(b).unwrap();
        }
    }
    let mut seen = crate::PageRelease::default();
    let pages = used / PAGE;
    // Blocks cached on a participant's own list keep their pages.
    let cached = q.release_free_pages(&mut seen).unwrap();
    assert!(cached + 10 < pages, "{cached} of {pages} pages freed");
    q.flush_free_lists().unwrap();
    let freed = cached + q.release_free_pages(&mut seen).unwrap();
    // All but the ten kept and p's page still being carved.
    assert!(freed + 11 >= pages && freed + 10 <= pages, "{freed} of {pages} pages freed");
    // A second pass with nothing changed does nothing.
    assert_eq!(q.release_free_pages(&mut seen).unwrap(), 0);
    let st = a.alloc_stats().unwrap();
    assert!(st.large_free_bytes >= freed * PAGE, "{st:?}");
    // Bigger blocks now fill the freed pages: no new pages until they are used up.
    let big: Vec<u64> = (0..(freed * PAGE / 256) as usize - 300).map(|_| p.alloc(256).unwrap()).collect();
    assert!(a.pages_in_use_bytes() <= used + 2 * PAGE, "{} > {}", a.pages_in_use_bytes(), used);
    // Nothing overlaps: the kept blocks, the big ones, and the small class's free blocks
    // allocated again.
    let again: Vec<u64> = (0..500).map(|_| p.alloc(64).unwrap()).collect();
    let mut spans: Vec<(u64, u64)> = keep.iter().chain(&again).map(|&o| (o, o + 64)).collect();
    spans.extend(big.iter().map(|&o| (o, o + 256)));
    spans.sort_unstable();
    for w in spans.windows(2) {
        assert!(w[0].1 <= w[1].0, "blocks overlap: {:?} and {:?}", w[0], w[1]);
    }
    for &o in keep.iter().chain(&again) {
        assert_eq!(a.block_size(o).unwrap(), 64);
    }
    a.alloc_stats().unwrap();
}

/// Threads allocating and freeing blocks of two classes while another gives whole free
/// pages back, over and over: every block keeps what its owner wrote until freed (no
/// block or page is handed out twice), and the free lists stay sound.
#[test]
fn pages_given_back_under_churn_are_never_handed_out_twice() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let reclaimer = Reclaimer::start(&a, false);
    let workers: Vec<_> = (0..3u64)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let p = a.register().unwrap();
                let mut live: Vec<(u64, u64)> = Vec::new();
                let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                for i in 0..150_000u64 {
                    xorshift(&mut rng);
                    // Waves: fill up, then drain, so whole pages come free.
                    let filling = (i / 20_000) % 2 == 0;
                    if filling || live.is_empty() {
                        let size = if rng.is_multiple_of(3) { 200 } else { 64 };
                        let off = p.alloc(size).unwrap();
                        let tag = t << 48 | i;
                        a.u64(off).unwrap().store(tag, Ordering::Relaxed);
                        live.push((off, tag));
                    } else {
                        let (off, tag) = live.swap_remove(rng as usize % live.len());
                        assert_eq!(a.u64(off).unwrap().load(Ordering::Relaxed), tag, "block {off} was reused");
                        p.free(off).unwrap();
                    }
                }
                for (off, tag) in live {
                    assert_eq!(a.u64(off).unwrap().load(Ordering::Relaxed), tag, "block {off} was reused");
                    p.free(off).unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let during = reclaimer.stop();
    // The free lists are sound: no block on two of them, none inside a freed page.
    let st = a.alloc_stats().unwrap();
    for (&off, &size) in &st.free_set {
        if size < PAGE {
            assert_eq!(a.block_size(off).unwrap(), size, "free block {off} is in a page given back");
        }
    }
    eprintln!("{during} pages given back during the churn; {} small pages left", st.small_pages_bytes / PAGE);
}

/// A flushed free list goes to the global stack as batches of whatever length it had;
/// a participant that takes a short batch counts it right, and spills as usual later.
#[test]
fn flushed_free_lists_make_batches_of_their_own_length() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let q = a.register().unwrap();
    let blocks: Vec<u64> = (0..5).map(|_| p.alloc(48).unwrap()).collect();
    for &b in &blocks {
        p.free(b).unwrap();
    }
    p.flush_free_lists().unwrap();
    let st = a.alloc_stats().unwrap();
    assert_eq!(st.free_blocks, [(48, 5)]);
    // q takes the batch of five, then frees enough to spill twice: no error, nothing lost.
    let mut got: Vec<u64> = (0..5).map(|_| q.alloc(48).unwrap()).collect();
    got.sort_unstable();
    let mut want = blocks.clone();
    want.sort_unstable();
    assert_eq!(got, want, "the flushed blocks first");
    let more: Vec<u64> = (0..200).map(|_| q.alloc(48).unwrap()).collect();
    for &b in got.iter().chain(&more) {
        q.free(b).unwrap();
    }
    let st = a.alloc_stats().unwrap();
    let free: u64 = st.free_blocks.iter().map(|&(_, n)| n).sum();
    assert!(free >= 205, "{:?}", st.free_blocks);
}

/// Pages of one class interleaved with another's, the first class's all freed and
/// released: the pages come back as many one-page runs, in one pass under the large lock,
/// and a two-page allocation then skips them (the longest free run is known) and takes
/// fresh pages, until a run long enough is freed, which the next one reuses.
#[test]
fn released_pages_are_one_page_runs_that_large_allocations_skip_until_one_fits() {
    let n = 200u64;
    let a = Arena::create(Backing::Anonymous, &Config { capacity: (2 * n + 64) * PAGE, max_participants: 4 }).unwrap();
    let p = a.register().unwrap();
    let q = a.register().unwrap();
    let (sa, sb) = (class_size(class_of(4096)), class_size(class_of(2048)));
    let mut blocks_a = Vec::new();
    for _ in 0..n {
        blocks_a.extend((0..PAGE / sa).map(|_| p.alloc(sa).unwrap()));
        for _ in 0..PAGE / sb {
            p.alloc(sb).unwrap();
        }
    }
    for b in blocks_a {
        q.free(b).unwrap();
    }
    q.flush_free_lists().unwrap();
    let freed = q.release_free_pages(&mut crate::PageRelease::default()).unwrap();
    assert!(freed >= n - 2, "{freed} of {n} pages");
    let st = a.alloc_stats().unwrap();
    assert_eq!(st.large_free_bytes, freed * PAGE);
    let before = a.pages_in_use_bytes();
    let big = p.alloc(2 * PAGE).unwrap();
    assert_eq!(a.pages_in_use_bytes(), before + 2 * PAGE, "no free run of two pages: fresh ones");
    p.free(big).unwrap();
    let again = p.alloc(2 * PAGE).unwrap();
    assert_eq!(again, big, "the two-page run freed is reused");
    assert_eq!(a.pages_in_use_bytes(), before + 2 * PAGE);
    // One-page needs take the released pages.
    let small = p.alloc(PAGE).unwrap();
    assert_eq!(a.pages_in_use_bytes(), before + 2 * PAGE);
    p.free(small).unwrap();
}

/// While a page release holds a class's stack, an allocation of that class in a full
/// arena waits for it instead of failing with Full (found by review: 10M Full errors in 3 s
/// while 4M blocks were free).
#[test]
fn a_full_arena_waits_for_a_page_release_instead_of_failing() {
    let a = Arena::create(Backing::Anonymous, &Config { capacity: 8 << 20, max_participants: 8 }).unwrap();
    let p = a.register().unwrap();
    let q = a.register().unwrap();
    let mut blocks = Vec::new();
    loop {
        match p.alloc(16) {
            Ok(b) => blocks.push(b),
            Err(Error::Full) => break,
            Err(e) => panic!("{e}"),
        }
    }
    // One block kept per page: nothing is whole, every pass takes and gives back the lot.
    for &b in blocks.iter().filter(|&&b| b % PAGE != 0) {
        q.free(b).unwrap();
    }
    q.flush_free_lists().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let releaser = {
        let (a, stop) = (a.clone(), stop.clone());
        std::thread::spawn(move || {
            let r = a.register().unwrap();
            let mut passes = 0;
            while !stop.load(Ordering::Relaxed) {
                // A fresh state each time: no backoff, a pass whenever the stack changed.
                r.release_free_pages(&mut crate::PageRelease::default()).unwrap();
                passes += 1;
            }
            passes
        })
    };
    let u = a.register().unwrap();
    let mut held = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(700);
    let mut allocs = 0u64;
    while std::time::Instant::now() < deadline {
        held.push(u.alloc(16).unwrap_or_else(|e| panic!("allocation {allocs} failed: {e}")));
        allocs += 1;
        if held.len() == 4096 {
            for b in held.drain(..) {
                u.free(b).unwrap();
            }
            u.flush_free_lists().unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let passes = releaser.join().unwrap();
    assert!(passes > 1, "{passes} release passes");
}

/// A double free (a buggy attached process, a corrupt segment) makes a free list loop;
/// flushed and released, its blocks are listed many times: the page they are on, which
/// still has a block in use, is not given back, and nothing panics or walks for long.
#[test]
fn a_page_listed_with_a_block_twice_is_not_released() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let size = class_size(class_of(4096));
    let per_page = (PAGE / size) as usize;
    let blocks: Vec<u64> = (0..per_page).map(|_| p.alloc(size).unwrap()).collect();
    assert!(blocks.iter().all(|&b| b / PAGE == blocks[0] / PAGE), "one page");
    let live = blocks[per_page - 1];
    a.u64(live).unwrap().store(0xfeed, Ordering::Relaxed);
    for &b in &blocks[..per_page - 2] {
        p.free(b).unwrap();
    }
    // Block per_page - 2 freed twice, around another: the list loops.
    p.free(blocks[per_page - 2]).unwrap();
    p.free(blocks[0]).unwrap();
    p.free(blocks[per_page - 2]).unwrap();
    p.flush_free_lists().unwrap();
    let t = std::time::Instant::now();
    let freed = p.release_free_pages(&mut crate::PageRelease::default()).unwrap();
    assert_eq!(freed, 0, "a page with a block in use was given back");
    assert!(t.elapsed() < std::time::Duration::from_secs(1));
    assert_eq!(a.block_size(live).unwrap(), size);
    assert_eq!(a.u64(live).unwrap().load(Ordering::Relaxed), 0xfeed);
    // Exactly as many entries as the page holds, one of them twice and the live block
    // missing: the count alone would call the page whole.
    let q = a.register().unwrap();
    let blocks: Vec<u64> = (0..per_page).map(|_| q.alloc(size).unwrap()).collect();
    let live = blocks[per_page - 1];
    a.u64(live).unwrap().store(0xbeef, Ordering::Relaxed);
    let mut listed: Vec<u32> = blocks[..per_page - 1].iter().map(|&b| Arena::to_units(b)).collect();
    listed.push(listed[0]);
    a.push_batches(class_of(size), &listed).unwrap();
    assert_eq!(q.release_free_pages(&mut crate::PageRelease::default()).unwrap(), 0);
    assert_eq!(a.block_size(live).unwrap(), size);
    assert_eq!(a.u64(live).unwrap().load(Ordering::Relaxed), 0xbeef);
}

/// A corrupt page descriptor past the pages handed out, naming a class, and a block of
/// that page on the class's stack: the release stops its walk there instead of indexing
/// past its per-page counts (a panic before).
#[test]
fn a_release_over_a_corrupt_descriptor_past_the_pages_in_use_does_not_panic() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let size = class_size(class_of(4096));
    let blocks: Vec<u64> = (0..64).map(|_| p.alloc(size).unwrap()).collect();
    let far = a.capacity() / PAGE - 1;
    a.page_desc(far).unwrap().store(class_of(size) as u32 + 1, Ordering::Relaxed);
    let mut listed: Vec<u32> = vec![Arena::to_units(far * PAGE)];
    listed.extend(blocks.iter().map(|&b| Arena::to_units(b)));
    a.push_batches(class_of(size), &listed).unwrap();
    let _ = p.release_free_pages(&mut crate::PageRelease::default());
}

/// Free blocks of a class pushed while a page release holds its stack (a worker's collect
/// after a FLUSHALL, running beside the server's once-a-second pass) are on the stack when
/// the pass ends: the next pass must read them. It used to note the stack's tag after its
/// own push of what it kept, so those pushes counted as its own: with nothing pushed after
/// it, no pass ever looked at the class again, and pages whose last blocks came during the
/// pass were never given back (server_cmds' `flushed_small_values_give_their_pages_back`
/// waited 20 s in vain about once in 20 runs on a loaded machine).
#[test]
fn blocks_pushed_during_a_page_release_are_read_by_the_next_pass() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let q = a.register().unwrap();
    let r = a.register().unwrap();
    let size = class_size(class_of(4000));
    let per_page = (PAGE / size) as usize;
    // Four pages carved whole (p's bump range ends with them).
    let blocks: Vec<u64> = (0..4 * per_page).map(|_| p.alloc(size).unwrap()).collect();
    let pages: HashSet<u64> = blocks.iter().map(|b| b / PAGE).collect();
    assert_eq!(pages.len(), 4);
    // All but the last block of each page freed and handed to the stack; the last ones
    // come while the release holds the stack.
    let (late, early): (Vec<u64>, Vec<u64>) = blocks.iter().partition(|&&b| (b % PAGE) / size == per_page as u64 - 1);
    for &b in &early {
        q.free(b).unwrap();
    }
    q.flush_free_lists().unwrap();
    set_hook(Hook::ReleaseHolding, move || {
        for &b in &late {
            q.free(b).unwrap();
        }
        q.flush_free_lists().unwrap();
    });
    let mut seen = crate::PageRelease::default();
    assert_eq!(r.release_free_pages(&mut seen).unwrap(), 0, "no page was whole when the pass took the stack");
    // Nothing has changed since that pass ended, but the blocks it did not see are there.
    assert_eq!(r.release_free_pages(&mut seen).unwrap(), 4, "the next pass gives back the four pages");
    assert!(a.alloc_stats().unwrap().free_blocks.is_empty());
}

/// A page taken fresh just before a release takes the stack, with a block of it freed and
/// pushed in between: the release knows the page (it reads how many pages are in use after
/// it takes the stack), so it neither stops its walk there nor leaks the blocks past it.
/// It read that count before taking the stack, and cut the walk at that block as if the
/// stack were corrupt, leaking every block below it.
#[test]
fn a_release_reads_blocks_of_pages_taken_just_before_it() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let p = a.register().unwrap();
    let q = a.register().unwrap();
    let r = a.register().unwrap();
    let size = class_size(class_of(4000));
    let per_page = (PAGE / size) as usize;
    let page_a: Vec<u64> = (0..per_page).map(|_| p.alloc(size).unwrap()).collect();
    assert!(page_a.iter().all(|b| b / PAGE == page_a[0] / PAGE));
    for &b in &page_a {
        q.free(b).unwrap();
    }
    q.flush_free_lists().unwrap();
    // Between the release's mark and its exchange: another participant takes page A's
    // blocks off the stack, then a block of a fresh page, and gives them all back, the
    // fresh page's block last, in a batch of its own on top.
    let fresh_page = std::rc::Rc::new(std::cell::Cell::new(0));
    let seen_page = fresh_page.clone();
    // (Kept past the release: leaving, it would give the rest of its bump page back too.)
    let taker = std::rc::Rc::new(std::cell::Cell::new(None));
    let keep_taker = taker.clone();
    set_hook(Hook::ReleaseBeforeTake, move || {
        let u = a.register().unwrap();
        let mut got: Vec<u64> = (0..=per_page).map(|_| u.alloc(size).unwrap()).collect();
        let fresh = got.pop().unwrap();
        assert!(got.iter().all(|b| b / PAGE == page_a[0] / PAGE), "page A's blocks first");
        assert_ne!(fresh / PAGE, page_a[0] / PAGE);
        seen_page.set(fresh / PAGE);
        for b in got {
            u.free(b).unwrap();
        }
        u.flush_free_lists().unwrap();
        u.free(fresh).unwrap();
        u.flush_free_lists().unwrap();
        keep_taker.set(Some(u));
    });
    let freed = r.release_free_pages(&mut crate::PageRelease::default()).unwrap();
    assert_ne!(fresh_page.get(), 0, "the hook ran");
    assert_eq!(freed, 1, "page A is given back");
    // The fresh page's block is still free on the stack (the rest of its page is its
    // taker's bump range), not leaked.
    let st = r.arena().alloc_stats().unwrap();
    assert_eq!(st.free_blocks, [(size, 1)], "{st:?}");
}

/// `used_bytes` is the bytes of blocks and runs allocated and not freed, whichever list or
/// stack the free ones are on, and whatever a page release did with them; a small-class
/// page's unused tail counts as used.
#[test]
fn used_bytes_counts_what_is_allocated_not_what_is_free() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let (p, q) = (a.register().unwrap(), a.register().unwrap());
    assert_eq!(a.used_bytes(), 0);
    let small_blocks: Vec<u64> = (0..20_000).map(|_| p.alloc(64).unwrap()).collect();
    let s2 = class_size(class_of(1000));
    let other: Vec<u64> = (0..3000).map(|_| p.alloc(s2).unwrap()).collect();
    let per_page2 = PAGE / s2;
    let tails = 3000u64.div_ceil(per_page2) * (PAGE % s2);
    let mut want = 20_000 * 64 + 3000 * s2 + tails;
    assert_eq!(a.used_bytes(), want, "carved, with the rest of each page being carved free");
    // Freed by another participant: onto its list, spilled to the stack as it grows.
    for &b in &small_blocks[..12_000] {
        q.free(b).unwrap();
    }
    // (Every third: no page of them comes whole, whose tail a release would take along.)
    let thirds: Vec<u64> = other.iter().step_by(3).copied().collect();
    let rest: Vec<u64> = other.iter().enumerate().filter(|(i, _)| i % 3 != 0).map(|(_, &b)| b).collect();
    for &b in &thirds {
        q.free(b).unwrap();
    }
    want -= 12_000 * 64 + 1000 * s2;
    assert_eq!(a.used_bytes(), want, "freed onto a list and the stack");
    q.flush_free_lists().unwrap();
    assert_eq!(a.used_bytes(), want, "flushed");
    // Whole pages of 64-byte blocks (no tail) go back to the pool: nothing changes.
    let freed = q.release_free_pages(&mut crate::PageRelease::default()).unwrap();
    assert!(freed >= 10, "{freed} pages");
    assert_eq!(a.used_bytes(), want, "after a page release");
    // Taken again from the stack, and a large run.
    let again: Vec<u64> = (0..500).map(|_| q.alloc(s2).unwrap()).collect();
    want += 500 * s2;
    assert_eq!(a.used_bytes(), want, "popped from the stack");
    let big = q.alloc(100_000).unwrap();
    assert_eq!(a.used_bytes(), want + 2 * PAGE, "a run of two pages");
    q.free(big).unwrap();
    assert_eq!(a.used_bytes(), want, "the run freed");
    // Everything freed: only the tails of the pages the bigger class still holds.
    for &b in small_blocks[12_000..].iter().chain(&rest).chain(&again) {
        p.free(b).unwrap();
    }
    p.flush_free_lists().unwrap();
    q.flush_free_lists().unwrap();
    assert_eq!(a.used_bytes(), tails, "only the tails of the bigger class's pages");
    q.release_free_pages(&mut crate::PageRelease::default()).unwrap();
    assert!(a.used_bytes() < tails, "released pages take their tails along");
    assert_eq!(a.used_bytes() % (PAGE % s2), 0, "only tails: {}", a.used_bytes());
}

/// The stacks' block counts stay exact under threads that allocate, free, spill, refill
/// and flush beside a page release that takes the stacks over and over: in the end, what
/// the threads still hold is what counts as used (classes whose blocks fill their pages
/// exactly, so no tail counts).
#[test]
fn used_bytes_stays_exact_under_churn_and_page_releases() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    // A fresh state each pass: no backoff, a pass whenever a stack holds blocks.
    let reclaimer = Reclaimer::start(&a, true);
    let workers: Vec<_> = (0..3u64)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let p = a.register().unwrap();
                let mut live: Vec<(u64, u64)> = Vec::new();
                let mut rng = 0x2545_f491_4f6c_dd1du64 ^ t;
                for i in 0..95_000u64 {
                    xorshift(&mut rng);
                    // Fill, then drain for twice as long (empty, then one block at a time), so
                    // pages come free whole while the releaser runs.
                    if (i / 10_000) % 3 == 0 || live.is_empty() {
                        let size = [64, 128, 256][rng as usize % 3];
                        live.push((p.alloc(size).unwrap(), size));
                    } else {
                        p.free(live.swap_remove(rng as usize % live.len()).0).unwrap();
                    }
                    if i % 1000 == 0 {
                        p.flush_free_lists().unwrap();
                    }
                }
                // Keep one in seven; the rest goes back.
                let mut kept = Vec::new();
                for (i, (b, size)) in live.into_iter().enumerate() {
                    if i % 7 == 0 {
                        kept.push((b, size));
                    } else {
                        p.free(b).unwrap();
                    }
                }
                p.flush_free_lists().unwrap();
                (kept, p)
            })
        })
        .collect();
    // (The participants stay registered, so their caches are still read.)
    let done: Vec<(Vec<(u64, u64)>, Participant)> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let released = reclaimer.stop();
    let kept: u64 = done.iter().flat_map(|d| &d.0).map(|&(_, size)| size).sum();
    assert!(kept > 0);
    assert_eq!(a.used_bytes(), kept, "free blocks counted as used (or the other way); {released} pages released");
    // Then all of it, and the whole pages go back: nothing is used.
    for (blocks, p) in &done {
        for &(b, _) in blocks {
            p.free(b).unwrap();
        }
        p.flush_free_lists().unwrap();
    }
    assert_eq!(a.used_bytes(), 0);
    let p = a.register().unwrap();
    assert!(p.release_free_pages(&mut crate::PageRelease::default()).unwrap() > 0);
    assert_eq!(a.used_bytes(), 0);
}

/// Two page releases at once (the server's and a local process's), of two classes: the one
/// that ends first must not clear the other's mark, or an allocation of the class still
/// held, in a full arena, fails with Full instead of waiting for its blocks to come back.
/// The mark was one word for the whole arena.
#[test]
fn a_release_ending_leaves_another_releases_mark_alone() {
    let a = Arena::create(Backing::Anonymous, &Config { capacity: 8 << 20, max_participants: 8 }).unwrap();
    let p = a.register().unwrap();
    // (X first: B's pass reaches it before Y.)
    let (sx, sy) = (class_size(class_of(100)), class_size(class_of(1000)));
    // Class Y: a block on its stack (its page not whole: the other block stays).
    let y = [p.alloc(sy).unwrap(), p.alloc(sy).unwrap()];
    p.free(y[0]).unwrap();
    p.flush_free_lists().unwrap();
    // Class X fills the arena; one block of each page but the first goes to its stack.
    let xs = fill(&p, sx);
    for &b in xs.iter().filter(|&&b| b % PAGE >= sx) {
        p.free(b).unwrap();
    }
    p.flush_free_lists().unwrap();
    let waiter = std::sync::Arc::new(std::sync::Mutex::new(None));
    let w = waiter.clone();
    let (a2, b) = (a.clone(), a.register().unwrap());
    // B holds X's stack; meanwhile A releases Y and ends, then an allocation of X comes.
    set_hook(Hook::ReleaseHolding, move || {
        let r = a2.register().unwrap();
        r.release_free_pages(&mut crate::PageRelease::default()).unwrap();
        let a3 = a2.clone();
        *w.lock().unwrap() = Some(std::thread::spawn(move || {
            let u = a3.register().unwrap();
            u.alloc(sx).map(|_| ())
        }));
        std::thread::sleep(std::time::Duration::from_millis(300));
    });
    b.release_free_pages(&mut crate::PageRelease::default()).unwrap();
    let t = waiter.lock().unwrap().take().expect("the hook ran");
    assert!(t.join().unwrap().is_ok(), "the allocation failed while X's blocks were held");
}

/// An 8 MiB arena that blocks of `size` filled, then all freed: every page whole on the
/// class's stack, none left for another class until a page release frees them.
fn arena_full_of_freed(size: u64) -> (std::sync::Arc<Arena>, Participant) {
    let a = Arena::create(Backing::Anonymous, &Config { capacity: 8 << 20, max_participants: 8 }).unwrap();
    let p = a.register().unwrap();
    for b in fill(&p, size) {
        p.free(b).unwrap();
    }
    p.flush_free_lists().unwrap();
    (a, p)
}

/// A release that ends while a full arena's allocation tries (its pages freed after the
/// try looked) is still waited for: the allocation tries again and gets them. (The release
/// was looked for only after the try, and the allocation answered Full with the pages free:
/// a_full_arena_waits_for_another_class_release failed so in a CI run.)
#[test]
fn a_release_ending_during_a_full_try_is_waited_for() {
    let (sx, sy) = (class_size(class_of(100)), class_size(class_of(1000)));
    let (a, p) = arena_full_of_freed(sy);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let waiter = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (w, a2, d2) = (waiter.clone(), a.clone(), done.clone());
    // The release holds Y's stack; an allocation of X tries, finds nothing, and the release
    // ends (its pages freed) before the allocation looks for releases.
    set_hook(Hook::ReleaseHolding, move || {
        *w.lock().unwrap() = Some(std::thread::spawn(move || {
            set_hook(Hook::FullTried, move || {
                let t = std::time::Instant::now();
                while !d2.load(std::sync::atomic::Ordering::Acquire) {
                    assert!(t.elapsed() < std::time::Duration::from_secs(20), "the release never ended");
                    std::thread::yield_now();
                }
            });
            let u = a2.register().unwrap();
            u.alloc(sx).map(|_| ())
        }));
        // Until the allocation has tried (it waits in its hook for the release to end).
        std::thread::sleep(std::time::Duration::from_millis(300));
    });
    let freed = p.release_free_pages(&mut crate::PageRelease::default()).unwrap();
    assert!(freed > 0);
    done.store(true, std::sync::atomic::Ordering::Release);
    let t = waiter.lock().unwrap().take().expect("the hook ran");
    assert!(t.join().unwrap().is_ok(), "the allocation answered Full after the release freed its pages");
}

/// A full arena's allocation waits for a page release of another class too: the pages it
/// is about to free can be taken by any class. (With a mark per class and only its own
/// looked at, an allocation of X answered Full at once while Y's whole pages were held.)
#[test]
fn a_full_arena_waits_for_another_class_release() {
    let (sx, sy) = (class_size(class_of(100)), class_size(class_of(1000)));
    let (a, p) = arena_full_of_freed(sy);
    let waiter = std::sync::Arc::new(std::sync::Mutex::new(None));
    let w = waiter.clone();
    let a2 = a.clone();
    // The release holds Y's stack, its pages not yet freed; an allocation of X comes.
    set_hook(Hook::ReleaseHolding, move || {
        *w.lock().unwrap() = Some(std::thread::spawn(move || {
            let u = a2.register().unwrap();
            u.alloc(sx).map(|_| ())
        }));
        std::thread::sleep(std::time::Duration::from_millis(300));
    });
    let freed = p.release_free_pages(&mut crate::PageRelease::default()).unwrap();
    assert!(freed > 0);
    let t = waiter.lock().unwrap().take().expect("the hook ran");
    assert!(t.join().unwrap().is_ok(), "the allocation failed while Y's pages were about to be freed");
}

/// What the global stack of the class of `size` blocks holds, and what the slots' caches of
/// that class hold (free lists plus uncarved bump blocks).
fn stacked_and_cached(a: &Arena, size: u64) -> (u64, u64) {
    let cs = class_size(class_of(size));
    // Free lists and stacks (a block on two of them fails the call).
    let free = a.alloc_stats().unwrap().free_blocks.iter().find(|&&(s, _)| s == cs).map_or(0, |&(_, n)| n);
    let (mut listed, mut uncarved) = (0, 0);
    for slot in 0..a.max_participants {
        let e = a.u32s::<4>(a.cache_entry(slot, class_of(size))).unwrap();
        let (cur, end) = (e[2].load(Ordering::Relaxed), e[3].load(Ordering::Relaxed));
        listed += e[1].load(Ordering::Relaxed) as u64;
        uncarved += if cur == 0 { 0 } else { (end - cur) as u64 * UNIT / cs };
    }
    (free - listed, listed + uncarved)
}

/// A participant with `freed` of `used` blocks of `size` freed again: its free list holds
/// `freed` blocks and its bump page the rest of the page, uncarved.
fn participant_with_cache(a: &Arc<Arena>, size: u64, used: usize, freed: usize) -> Participant {
    let p = a.register().unwrap();
    let blocks: Vec<u64> = (0..used).map(|_| p.alloc(size).unwrap()).collect();
    for &b in &blocks[..freed] {
        p.free(b).unwrap();
    }
    p
}

/// A participant that leaves hands its cached blocks (free list and the uncarved rest of its
/// bump page) to the global stacks, where the next participant finds them: before, they
/// stayed in its free slot until someone claimed that slot again.
#[test]
fn a_leaving_participants_cache_goes_to_the_global_stacks() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let _first = a.register().unwrap();
    let per_page = (PAGE / class_size(class_of(48))) as usize;
    let p = participant_with_cache(&a, 48, 10, 4);
    assert_eq!(stacked_and_cached(&a, 48).1, 4 + per_page as u64 - 10);
    let pages = a.u64(H_PAGE_NEXT).unwrap().load(Ordering::Relaxed);
    drop(p);
    let (stacked, cached) = stacked_and_cached(&a, 48);
    assert_eq!((stacked, cached), (4 + per_page as u64 - 10, 0));
    // Someone else takes them, from another slot, without a new page.
    let _second = a.register().unwrap();
    let q = a.register().unwrap();
    for _ in 0..per_page - 6 {
        q.alloc(48).unwrap();
    }
    assert_eq!(a.u64(H_PAGE_NEXT).unwrap().load(Ordering::Relaxed), pages);
}

/// A dead participant's cached blocks go to the global stacks when its slot is reaped, as
/// its own drop would have done; its index-segment blocks (16 KiB and more) too.
#[test]
fn a_reaped_participants_cache_goes_to_the_global_stacks() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let (start, ns) = Arena::identity_for_tests();
    let per_page = PAGE / class_size(class_of(48));
    let mut dead = participant_with_cache(&a, 48, 10, 4);
    let big: Vec<u64> = (0..3).map(|_| dead.alloc(20_000).unwrap()).collect();
    dead.free(big[0]).unwrap();
    let (_, cached_big) = stacked_and_cached(&a, 20_000);
    assert!(cached_big >= 2, "one freed, at least one uncarved: {cached_big}");
    dead.close_liveness_for_tests();
    a.disguise_owner_for_tests(dead.slot(), NO_SUCH_PID, start, ns);
    std::mem::forget(dead);
    assert_eq!(stacked_and_cached(&a, 48), (0, 4 + per_page - 10));
    assert_eq!(a.reap_dead(), 1);
    assert_eq!(stacked_and_cached(&a, 48), (4 + per_page - 10, 0));
    assert_eq!(stacked_and_cached(&a, 20_000), (cached_big, 0));
}

/// A reaper killed while it gives a dead slot's cache back leaks the class it was pushing
/// (emptied from the cache, not yet on the stack) and never lists a block twice; the next
/// reaper finishes the slot and gives back the rest.
#[test]
fn a_give_back_killed_halfway_lists_nothing_twice() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let (start, ns) = Arena::identity_for_tests();
    let mut dead = participant_with_cache(&a, 48, 10, 4);
    let others: Vec<u64> = (0..5).map(|_| dead.alloc(1000).unwrap()).collect();
    dead.free(others[0]).unwrap();
    let (_, cached_1000) = stacked_and_cached(&a, 1000);
    dead.close_liveness_for_tests();
    a.disguise_owner_for_tests(dead.slot(), NO_SUCH_PID, start, ns);
    std::mem::forget(dead);
    set_hook(Hook::GiveBackTaken, || panic!("reaper killed in give-back"));
    let killed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| a.reap_dead()));
    assert!(killed.is_err(), "the hook did not run");
    assert_eq!(a.reap_dead(), 1, "the next reaper finishes the slot");
    // alloc_stats fails on a block listed twice.
    assert_eq!(stacked_and_cached(&a, 48), (0, 0), "the class being pushed is leaked");
    assert_eq!(stacked_and_cached(&a, 1000), (cached_1000, 0));
    assert!(a.slots().iter().all(|s| s.state == "free"));
}

/// What a participant retired and could not free before it left (a reader was pinned)
/// stays on its slot's retire list; `collect_free_slots` frees it once it is ripe, though
/// nobody claims that slot again.
#[test]
fn a_free_slots_retire_list_is_collected_without_a_new_owner() {
    let a = Arena::create(Backing::Anonymous, &small()).unwrap();
    let reader = a.register().unwrap();
    let p = a.register().unwrap();
    let slot = p.slot();
    let blocks: Vec<u64> = (0..10).map(|_| p.alloc(48).unwrap()).collect();
    {
        let _pin = reader.pin();
        for &b in &blocks {
            p.retire(b).unwrap();
        }
        drop(p);
        assert_eq!(a.collect_free_slots(), 0, "nothing is ripe while the reader is pinned");
    }
    let waiting = |a: &Arena| a.slots().iter().find(|s| s.slot == slot).unwrap().retired;
    assert_eq!(waiting(&a), 10);
    // Epochs move on (each collect advances at most once).
    for _ in 0..3 {
        reader.try_advance();
    }
    assert_eq!(a.collect_free_slots(), 10);
    assert_eq!(waiting(&a), 0);
    let st = a.alloc_stats().unwrap();
    assert!(a.slots().iter().all(|s| s.state != "live" || s.slot == reader.slot()));
    // On the global stack, not in the slot's cache.
    let cached: u64 =
        (0..NCLASSES).map(|c| a.u32s::<4>(a.cache_entry(slot, c)).unwrap()[1].load(Ordering::Relaxed) as u64).sum();
    assert_eq!(cached, 0);
    assert!(st.free_blocks.iter().any(|&(s, n)| s == class_size(class_of(48)) && n >= 10), "{st:?}");
    assert_eq!(a.collect_free_slots(), 0, "nothing left to do");
}
