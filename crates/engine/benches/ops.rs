//! Micro-benchmarks of single engine operations on a preloaded 100k-key anonymous store, one
//! handle reused per thread. Run with `cargo bench -p larder-engine --bench ops` (add
//! `-- --test` to run each once as a smoke test). For latency under growth, across processes,
//! memory per key and fragmentation see `larder bench-engine`.

use std::cell::{Cell, RefCell};
use std::sync::OnceLock;

use divan::Bencher;
use larder_engine::{ArenaConfig, Backing, Handle, SetOptions, Store, StoreConfig};

const KEYS: u64 = 100_000;
const VALUE: &[u8; 32] = b"0123456789abcdef0123456789ABCDEF";

fn main() {
    divan::main();
}

fn key<const N: usize>(prefix: &str, i: u64) -> [u8; N] {
    format!("{prefix}{i:07}").into_bytes().try_into().expect("key length")
}

/// Preformatted keys `key:0000001..=key:0100000` (and missing ones), stored inline and in a
/// shuffled order: consecutive iterations touch unrelated buckets while the walk over the
/// tables themselves stays sequential (prefetched), so it adds no cache miss of its own.
struct Fixture {
    store: Store,
    keys: Vec<[u8; 11]>,
    missing: Vec<[u8; 13]>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let store = Store::open(StoreConfig {
            backing: Backing::Anonymous,
            arena: ArenaConfig { capacity: 1 << 30, max_participants: 64 },
            databases: 1,
        })
        .expect("open store");
        let mut h = store.handle().expect("handle");
        let mut keys: Vec<[u8; 11]> = (1..=KEYS).map(|i| key("key:", i)).collect();
        for k in &keys {
            h.set(0, k, VALUE, &SetOptions::default()).expect("preload");
        }
        h.set(0, b"counter", b"0", &SetOptions::default()).expect("counter");
        // Deterministic shuffle (xorshift), no extra dependency.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in (1..keys.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            keys.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let missing = (1..=KEYS).map(|i| key::<13>("nokey:", i.wrapping_mul(7919) % KEYS)).collect();
        Fixture { store, keys, missing }
    })
}

thread_local! {
    static HANDLE: RefCell<Handle> = RefCell::new(fixture().store.handle().expect("handle"));
    static POS: Cell<usize> = const { Cell::new(0) };
}

/// The next index into the key tables (a cursor kept across benchmark runs).
fn next(n: usize) -> usize {
    POS.with(|p| {
        let i = p.get() % n;
        p.set(i + 1);
        i
    })
}

#[divan::bench(sample_count = 200, sample_size = 500)]
fn get_hit(b: Bencher) {
    let f = fixture();
    HANDLE.with_borrow(|h| {
        let mut out = Vec::with_capacity(64);
        b.bench_local(|| {
            out.clear();
            let k = &f.keys[next(f.keys.len())];
            h.get_into(0, k, &mut out).unwrap().is_some()
        })
    })
}

#[divan::bench(sample_count = 200, sample_size = 500)]
fn get_miss(b: Bencher) {
    let f = fixture();
    HANDLE.with_borrow(|h| {
        let mut out = Vec::with_capacity(64);
        b.bench_local(|| {
            out.clear();
            let k = &f.missing[next(f.missing.len())];
            h.get_into(0, k, &mut out).unwrap().is_some()
        })
    })
}

#[divan::bench(sample_count = 200, sample_size = 500)]
fn set_overwrite(b: Bencher) {
    let f = fixture();
    let opt = SetOptions::default();
    HANDLE.with_borrow_mut(|h| {
        b.bench_local(|| {
            let k = &f.keys[next(f.keys.len())];
            h.set(0, k, VALUE, &opt).unwrap().version
        })
    })
}

#[divan::bench(sample_count = 200, sample_size = 500)]
fn incr(b: Bencher) {
    HANDLE.with_borrow_mut(|h| b.bench_local(|| h.incr_by(0, b"counter", 1).unwrap()))
}

#[divan::bench(sample_count = 200, sample_size = 500)]
fn mset_10(b: Bencher) {
    let f = fixture();
    HANDLE.with_borrow_mut(|h| {
        b.bench_local(|| {
            let start = next(f.keys.len() / 10) * 10;
            let pairs: [(&[u8], &[u8]); 10] = std::array::from_fn(|j| (&f.keys[start + j][..], &VALUE[..]));
            h.mset(0, &pairs, false).unwrap()
        })
    })
}
