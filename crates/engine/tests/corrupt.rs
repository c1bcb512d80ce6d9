//! A corrupted segment never panics, hangs or aborts the process: every data type is
//! written, random words of the arena's pages (or of its metadata: header, participant
//! slots, block caches, page descriptors) are overwritten, and every operation runs again.
//! Each may fail (with an error); none may panic, hang or abort.
//!
//! A segment is input like any other (another process, a file from disk), so this is the
//! engine's counterpart of the parsers' fuzz targets. The suite runs a few seeds;
//! `LARDER_CORRUPT_SEEDS=N` runs N, and `LARDER_CORRUPT_FROM=S` starts at seed S.

use std::sync::mpsc;
use std::time::Duration;

use larder_engine::{Expiry, Handle, Kind, SetOptions, Store, StoreConfig};

/// How long one seed's operations may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const KINDS: [Kind; 4] = [Kind::Hash, Kind::List, Kind::Set, Kind::ZSet];

/// Collections of every kind, small (packed) and large (trees), and strings: plain, integer,
/// with expiries, and a large one.
fn populate(h: &mut Handle) {
    let opt = SetOptions::default();
    for i in 0..400 {
        h.set(0, format!("s:{i}").as_bytes(), &[b'v'; 40], &opt).unwrap();
        h.set(0, format!("n:{i}").as_bytes(), i.to_string().as_bytes(), &opt).unwrap();
    }
    let later = larder_engine::now_ms() + 3_600_000;
    for i in 0..50 {
        let o = SetOptions { expiry: Expiry::At(later), ..Default::default() };
        h.set(1, format!("t:{i}").as_bytes(), b"ttl", &o).unwrap();
    }
    h.set(0, b"big", &vec![b'b'; 200_000], &opt).unwrap();
    for (k, kind) in KINDS.into_iter().enumerate() {
        for (size, name) in [(5u64, "small"), (1500, "large")] {
            let key = format!("c{k}:{name}");
            h.coll_write(0, key.as_bytes(), kind, true, |c| {
                for i in 0..size {
                    let m = format!("member:{i}");
                    match kind {
                        Kind::List => c.insert_at(c.len(), m.as_bytes()).map(|_| ())?,
                        Kind::ZSet => c.zput(m.as_bytes(), i as f64 * 0.5).map(|_| ())?,
                        Kind::Set => c.put(m.as_bytes(), b"").map(|_| ())?,
                        Kind::Hash => c.put(m.as_bytes(), b"value").map(|_| ())?,
                    }
                }
                Ok(())
            })
            .unwrap();
        }
    }
}

/// What a seed scribbles on.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// The pages handed out: index, items, collections, the engine's roots.
    Data,
    /// The arena's own bookkeeping, each of its regions as likely as the others.
    Metadata,
}

/// Overwrites `n` random 8-byte words of `target` (or flips one bit in each).
fn scribble(store: &Store, rng: &mut Rng, n: u32, target: Target) {
    let a = store.arena();
    let metadata = a.metadata_ranges();
    for _ in 0..n {
        let (start, end) = match target {
            Target::Data => a.data_range(),
            Target::Metadata => {
                let (_, s, e) = metadata[rng.below(metadata.len() as u64) as usize];
                (s, e)
            }
        };
        assert!(end - start >= 8, "{target:?}: an empty range");
        let off = (start + rng.below(end - start)) & !7;
        let mut w = [0u8; 8];
        a.read(off, &mut w).unwrap();
        let new = match rng.below(3) {
            0 => u64::from_le_bytes(w) ^ (1 << rng.below(64)),
            1 => rng.next(),
            // Small numbers: lengths, counts and offsets that look plausible.
            _ => rng.below(1 << 20),
        };
        a.write(off, &new.to_le_bytes()).unwrap();
    }
}

/// Every operation, reads then writes, on every key; returns how many failed.
fn exercise(store: &Store, h: &mut Handle) -> u64 {
    let mut errors = 0u64;
    let mut count = |failed: bool| errors += failed as u64;
    let opt = SetOptions::default();
    let mut out = Vec::new();
    for i in (0..400).step_by(7) {
        let s = format!("s:{i}");
        let n = format!("n:{i}");
        let hint = h.prefetch_bucket(0, s.as_bytes());
        h.prefetch_item(hint);
        h.prefetch_group(0, [s.as_bytes(), n.as_bytes()]);
        count(h.get(0, s.as_bytes()).is_err());
        out.clear();
        count(h.get_into(0, n.as_bytes(), &mut out).is_err());
        count(h.getrange(0, s.as_bytes(), 3, -3).is_err());
        count(h.strlen(0, s.as_bytes()).is_err());
        count(h.meta(0, s.as_bytes()).is_err());
        count(h.type_of(0, n.as_bytes()).is_err());
        count(h.encoding(0, n.as_bytes()).is_err());
        count(h.memory_usage(0, s.as_bytes(), 5).is_err());
        count(h.incr_by(0, n.as_bytes(), 3).is_err());
        count(h.incr_by_float(0, n.as_bytes(), 0.5).is_err());
        count(h.append(0, s.as_bytes(), b"tail").is_err());
        count(h.setrange(0, s.as_bytes(), 2, b"xy").is_err());
        count(h.set(0, s.as_bytes(), b"new", &SetOptions { get: true, ..Default::default() }).is_err());
        count(h.rename(0, s.as_bytes(), format!("r:{i}").as_bytes(), false).is_err());
        count(h.copy(0, n.as_bytes(), 2, n.as_bytes(), true).is_err());
        count(h.del(0, &[n.as_bytes()]).is_err());
    }
    count(h.mget(0, &[b"s:1", b"s:2", b"n:3", b"big"]).is_err());
    count(h.mset(0, &[(b"m:1", b"1"), (b"m:2", b"2")], false).is_err());
    count(h.getrange(0, b"big", 1000, 150_000).is_err());
    for (k, kind) in KINDS.into_iter().enumerate() {
        for name in ["small", "large"] {
            let key = format!("c{k}:{name}");
            let key = key.as_bytes();
            count(
                h.coll_read(0, key, kind, |c| {
                    let len = c.len();
                    c.entries()?;
                    c.range(0, len.min(10_000), |_, _| true)?;
                    if len > 0 {
                        c.get(len / 2)?;
                    }
                    let mut cur = 0;
                    for _ in 0..10_000 {
                        cur = c.scan(cur, 50, |_, _| {})?;
                        if cur == 0 {
                            break;
                        }
                    }
                    if kind != Kind::List {
                        c.find(b"member:3")?;
                        c.contains(b"member:700")?;
                    }
                    if kind == Kind::ZSet {
                        c.score(b"member:4")?;
                        c.zrank(b"member:900")?;
                        c.zseek_score(100.0, false)?;
                        c.zseek_lex(b"member:5", true)?;
                    }
                    Ok(())
                })
                .is_err(),
            );
            count(
                h.coll_write(0, key, kind, true, |c| {
                    match kind {
                        Kind::List => {
                            c.insert_at(0, b"head")?;
                            c.insert_at(c.len(), b"tail")?;
                            if c.len() > 2 {
                                c.insert_at(c.len() / 2, b"mid")?;
                                c.set_at(1, b"one")?;
                                c.remove_at(c.len() / 3)?;
                                c.remove_at(0)?;
                            }
                        }
                        Kind::ZSet => {
                            c.zput(b"member:2", 1e6)?;
                            c.zput(b"fresh", -3.0)?;
                            c.del(b"member:1")?;
                        }
                        _ => {
                            c.put(b"member:2", b"changed")?;
                            c.put(b"fresh", b"")?;
                            c.del(b"member:1")?;
                        }
                    }
                    Ok(())
                })
                .is_err(),
            );
        }
    }
    for db in 0..3 {
        let mut keys = Vec::new();
        let mut cur = 0;
        for _ in 0..10_000 {
            match h.scan(db, cur, 100, Some(b"*:1*"), None, &mut keys) {
                Ok(0) => break,
                Ok(c) => cur = c,
                Err(_) => {
                    count(true);
                    break;
                }
            }
        }
        count(h.dbsize(db).is_err());
        count(h.random_key(db).is_err());
        count(h.expire_cycle(db, 500).is_err());
    }
    count(!matches!(store.check(), Ok(r) if r.ok()));
    count(h.swapdb(0, 3).is_err());
    count(h.flushdb(1).is_err());
    count(h.collect().is_err());
    count(h.flush_free_lists().is_err());
    count(h.release_free_pages(&mut Default::default()).is_err());
    // Writes after all that: new keys land somewhere.
    for i in 0..200 {
        count(h.set(4, format!("after:{i}").as_bytes(), b"v", &opt).is_err());
    }
    count(h.flushall().is_err());
    errors
}

/// One seed: a fresh store, populated, scribbled on, exercised; panics and hangs are
/// reported with the seed, so that a failure can be replayed alone.
fn run_seed(seed: u64, target: Target) -> Result<u64, String> {
    let (tx, rx) = mpsc::channel();
    let t = std::thread::Builder::new()
        .name(format!("{target:?} seed {seed}"))
        .spawn(move || {
            let store = Store::open(StoreConfig::small_for_tests()).unwrap();
            let mut h = store.handle().unwrap();
            populate(&mut h);
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let n = [1, 10, 100, 1000][(seed % 4) as usize];
            scribble(&store, &mut rng, n, target);
            let e = exercise(&store, &mut h);
            let _ = tx.send(e);
        })
        .unwrap();
    match rx.recv_timeout(HANG) {
        Ok(e) => {
            t.join().unwrap();
            Ok(e)
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => Err(format!("{target:?} seed {seed}: panicked (see above)")),
        // The thread is left running: the test fails anyway.
        Err(mpsc::RecvTimeoutError::Timeout) => Err(format!("{target:?} seed {seed}: hung for {HANG:?}")),
    }
}

/// Runs the seeds `LARDER_CORRUPT_FROM..+LARDER_CORRUPT_SEEDS` (default 0..64) against
/// `target`; fails on any panic or hang, or if no scribble was ever noticed.
fn soak(target: Target) {
    let from = env_u64("LARDER_CORRUPT_FROM", 0);
    let seeds = env_u64("LARDER_CORRUPT_SEEDS", 64);
    let mut errors = 0;
    let mut failed = Vec::new();
    let mut slowest = (Duration::ZERO, from);
    for seed in from..from + seeds {
        let t = std::time::Instant::now();
        match run_seed(seed, target) {
            Ok(e) => errors += e,
            Err(f) => failed.push(f),
        }
        slowest = slowest.max((t.elapsed(), seed));
    }
    // How close the slowest seed came to being called a hang.
    eprintln!("{target:?}: {seeds} seeds, slowest {} took {:?}", slowest.1, slowest.0);
    assert!(
        failed.is_empty(),
        "{} of {seeds} corrupted segments broke the engine:\n{}",
        failed.len(),
        failed.join("\n")
    );
    // The scribbles must have been noticed somewhere, or this test proves nothing.
    assert!(errors > 0, "no corruption was ever detected");
}

#[test]
fn a_corrupted_segment_gives_errors_never_panics_or_hangs() {
    soak(Target::Data);
}

#[test]
fn corrupted_arena_metadata_gives_errors_never_panics_or_hangs() {
    soak(Target::Metadata);
}

/// The arena offset of the first occurrence of `needle` in the data pages.
fn find_bytes(store: &Store, needle: &[u8]) -> Option<u64> {
    let a = store.arena();
    let (start, end) = a.data_range();
    let mut buf = vec![0u8; (end - start) as usize];
    a.read(start, &mut buf).unwrap();
    buf.windows(needle.len()).position(|w| w == needle).map(|i| start + i as u64)
}

#[test]
fn a_list_buffer_whose_count_disagrees_with_its_bytes_is_an_error() {
    // A list tree's item keeps its end buffers' entry counts beside their bytes, and they
    // are taken as they are; a count larger than the entries there are made the push that
    // fills the buffer index past them.
    let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    let mut h = store.handle().unwrap();
    h.coll_write(0, b"list", Kind::List, true, |c| {
        for i in 0..500 {
            c.insert_at(c.len(), format!("element:{i}").as_bytes())?;
        }
        c.insert_at(0, b"the-head-element")
    })
    .unwrap();
    // The item: 3 words, head bytes u32, head entries u16, tail entries u16, then the head.
    let head = find_bytes(&store, b"\x10the-head-element").expect("the head buffer");
    let a = store.arena();
    let mut n = [0u8; 2];
    a.read(head - 4, &mut n).unwrap();
    let n = u16::from_le_bytes(n);
    assert!((1..20).contains(&n), "head entries {n}: not the layout this test expects");
    a.write(head - 4, &(n + 10).to_le_bytes()).unwrap();
    let mut results = Vec::new();
    for i in 0..100 {
        results.push(h.coll_write(0, b"list", Kind::List, false, |c| c.insert_at(0, format!("new:{i}").as_bytes())));
    }
    assert!(results.iter().any(|r| r.is_err()), "the bad count was never noticed");
}

#[test]
fn expiries_far_in_the_future_do_not_overflow_an_expire_rounds_sum() {
    // An expiry read from a corrupt item can be anything; so can one a client set. The
    // round's sum of TTLs saturates instead of overflowing (a panic in a debug build).
    let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    let mut h = store.handle().unwrap();
    for i in 0..3 {
        let o = SetOptions { expiry: Expiry::At(u64::MAX - i), ..Default::default() };
        h.set(0, format!("far:{i}").as_bytes(), b"v", &o).unwrap();
    }
    let r = h.expire_cycle(0, 256).unwrap();
    assert_eq!((r.examined, r.ttl_samples, r.ttl_sum_ms), (3, 3, u64::MAX));
}
