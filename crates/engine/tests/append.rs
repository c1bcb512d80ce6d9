//! APPEND in place: values built by appends move O(log n) times, not once per append, and a
//! lock-free reader running beside the appender only ever sees whole prefixes, never a value
//! older than the version it reports.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use larder_engine::{SetOptions, Store, StoreConfig};

/// Chunk `i` of the test value: its number, padded, then a separator.
fn chunk(i: usize) -> Vec<u8> {
    format!("{i:07};").into_bytes()
}

/// The number of whole chunks `v` holds, if it is exactly chunks 0..n in order.
fn whole_chunks(v: &[u8]) -> Option<usize> {
    if !v.len().is_multiple_of(8) {
        return None;
    }
    let n = v.len() / 8;
    (0..n).all(|i| v[i * 8..i * 8 + 8] == chunk(i)[..]).then_some(n)
}

#[test]
fn a_value_built_by_appends_moves_rarely() {
    let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    let mut h = store.handle().unwrap();
    // Start from a SET (an exact-size item, as every SET makes), then 40,000 appends: 320 kB.
    h.set(0, b"log", &chunk(0), &SetOptions::default()).unwrap();
    let mut sizes = vec![h.memory_usage(0, b"log", 0).unwrap().unwrap()];
    for i in 1..40_000 {
        assert_eq!(h.append(0, b"log", &chunk(i)).unwrap(), 8 * (i as u64 + 1));
        let s = h.memory_usage(0, b"log", 0).unwrap().unwrap();
        if s != *sizes.last().unwrap() {
            sizes.push(s);
        }
    }
    assert_eq!(whole_chunks(&h.get(0, b"log").unwrap().unwrap()), Some(40_000));
    // Each move at least doubles the block below 1 MiB: about log2(320k / 20) moves. An
    // append that copies the value every time changes the block with every size class and
    // then every page (hundreds of times).
    assert!(sizes.len() <= 20, "the value moved {} times: {sizes:?}", sizes.len());
    // The spare room is bounded: at most twice the value, plus the size class's rounding.
    assert!(*sizes.last().unwrap() <= 2 * 320_000 + 8192, "{sizes:?}");
    // Expiry and memcached flags survive appends in place and moves.
    h.expire_at(0, b"log", larder_engine::now_ms() + 100_000, Default::default()).unwrap();
    for i in 40_000..40_100 {
        h.append(0, b"log", &chunk(i)).unwrap();
    }
    assert!(matches!(h.pttl(0, b"log").unwrap(), larder_engine::Ttl::Ms(ms) if ms > 90_000));
    assert_eq!(whole_chunks(&h.get(0, b"log").unwrap().unwrap()), Some(40_100));
    let r = store.check().unwrap();
    assert!(r.ok(), "{:?}", r.problems);
}

#[test]
fn appends_to_an_integer_leave_a_string_that_still_increments() {
    let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    let mut h = store.handle().unwrap();
    h.set(0, b"n", b"12", &SetOptions::default()).unwrap();
    assert_eq!(h.append(0, b"n", b"3").unwrap(), 3);
    assert_eq!(h.append(0, b"n", b"4").unwrap(), 4);
    assert_eq!(h.get(0, b"n").unwrap().unwrap(), b"1234");
    assert_eq!(h.incr_by(0, b"n", 1).unwrap(), 1235);
    assert_eq!(h.append(0, b"n", b"x").unwrap(), 5);
    assert_eq!(h.get(0, b"n").unwrap().unwrap(), b"1235x");
}

#[test]
fn readers_beside_an_appender_see_whole_prefixes_and_no_older_than_their_version() {
    let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    let mut w = store.handle().unwrap();
    w.set(0, b"log", &chunk(0), &SetOptions::default()).unwrap();
    const N: usize = 30_000;
    let done = AtomicBool::new(false);
    // Reads so far: the writer lets the reader in every 200 appends, so that the two
    // interleave however the two threads are scheduled (on 2 busy cores the reader once
    // got only 41 reads in).
    let reads = std::sync::atomic::AtomicUsize::new(0);
    let (written, seen) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let r = store.handle().unwrap();
            let mut seen = Vec::new();
            let mut buf = Vec::new();
            while !done.load(Ordering::Acquire) {
                buf.clear();
                let meta = r.get_into(0, b"log", &mut buf).unwrap().unwrap();
                let n = whole_chunks(&buf).unwrap_or_else(|| panic!("torn value of {} bytes", buf.len()));
                seen.push((meta.version, n));
                reads.fetch_add(1, Ordering::Release);
            }
            seen
        });
        // The writer notes the version each append left (it is the only writer).
        let mut written = HashMap::new();
        let mut buf = Vec::new();
        for i in 1..N {
            if i % 200 == 0 {
                let target = reads.load(Ordering::Acquire) + 1;
                // (Unless the reader has stopped: it panicked, and join reports why.)
                while reads.load(Ordering::Acquire) < target && !reader.is_finished() {
                    std::thread::yield_now();
                }
            }
            w.append(0, b"log", &chunk(i)).unwrap();
            buf.clear();
            let meta = w.get_into(0, b"log", &mut buf).unwrap().unwrap();
            written.insert(meta.version, i + 1);
        }
        done.store(true, Ordering::Release);
        (written, reader.join().unwrap())
    });
    assert!(seen.len() > 100, "the reader ran only {} times", seen.len());
    // A (version, value) pair must never pair a version with an older value: a memcached
    // `cas` on that version would overwrite appends its client never saw.
    let mut checked = 0;
    for (version, n) in &seen {
        if let Some(&at_least) = written.get(version) {
            assert!(*n >= at_least, "version {version} came with {n} chunks, it has {at_least}");
            checked += 1;
        }
    }
    assert!(checked > 0, "no observation matched a written version");
}
