//! Model-based tests of collections: random operation sequences against a std collection,
//! compared after every step, with the invariant checker run after each case. Thresholds
//! are lowered so sequences cross from packed to tree encodings, and long enough for trees
//! of several levels.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;

use larder_engine::{Handle, Kind, Store, StoreConfig};
use proptest::prelude::*;

fn store(small: bool) -> (Store, Handle) {
    let s = Store::open(StoreConfig::small_for_tests()).unwrap();
    if small {
        let l = s.limits();
        l.hash_max_listpack_entries.store(8, Ordering::Relaxed);
        l.hash_max_listpack_value.store(16, Ordering::Relaxed);
        l.set_max_intset_entries.store(8, Ordering::Relaxed);
        l.zset_max_listpack_entries.store(8, Ordering::Relaxed);
        l.zset_max_listpack_value.store(16, Ordering::Relaxed);
        l.list_max_listpack_size.store(8, Ordering::Relaxed);
    }
    let h = s.handle().unwrap();
    (s, h)
}

fn checked(s: &Store) {
    let r = s.check().unwrap();
    assert!(r.ok(), "{:?}", r.problems);
}

fn field(i: u16) -> Vec<u8> {
    // Mostly short fields; every 7th is long enough to exceed a lowered value threshold.
    if i.is_multiple_of(7) {
        format!("field-with-a-long-name-{i}").into_bytes()
    } else {
        format!("f{i}").into_bytes()
    }
}

#[derive(Clone, Debug)]
enum HashOp {
    Put(u16, u16),
    Del(u16),
}

fn hash_ops() -> impl Strategy<Value = Vec<HashOp>> {
    let op = prop_oneof![
        4 => (0..700u16, any::<u16>()).prop_map(|(f, v)| HashOp::Put(f, v)),
        1 => (0..700u16).prop_map(HashOp::Del),
    ];
    prop::collection::vec(op, 1..900)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn hash_matches_model(ops in hash_ops(), small in any::<bool>()) {
        let (s, mut h) = store(small);
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        for (step, op) in ops.iter().enumerate() {
            match *op {
                HashOp::Put(f, v) => {
                    let (k, val) = (field(f), v.to_string().into_bytes());
                    let got = h.coll_write(0, b"h", Kind::Hash, true, |c| c.put(&k, &val)).unwrap().unwrap();
                    prop_assert_eq!(got, model.insert(k, val));
                }
                HashOp::Del(f) => {
                    let k = field(f);
                    let got = h.coll_write(0, b"h", Kind::Hash, false, |c| c.del(&k)).unwrap().flatten();
                    prop_assert_eq!(got, model.remove(&k));
                }
            }
            let probe = field((step as u16 * 31) % 700);
            let got = h.coll_read(0, b"h", Kind::Hash, |c| c.find(&probe)).unwrap().flatten();
            prop_assert_eq!(got.as_ref(), model.get(&probe));
            let all = h.coll_read(0, b"h", Kind::Hash, |c| c.entries()).unwrap().unwrap_or_default();
            let mut all_sorted = all.clone();
            all_sorted.sort();
            let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            prop_assert_eq!(all_sorted, want);
            prop_assert_eq!(h.exists(0, &[b"h"]).unwrap(), (!model.is_empty()) as u64);
        }
        // A full scan returns every field once.
        if !model.is_empty() {
            let mut seen = BTreeSet::new();
            let mut cursor = 0;
            loop {
                cursor = h.coll_read(0, b"h", Kind::Hash, |c| c.scan(cursor, 10, |k, _| { seen.insert(k.to_vec()); })).unwrap().unwrap();
                if cursor == 0 { break; }
            }
            prop_assert_eq!(seen, model.keys().cloned().collect::<BTreeSet<_>>());
        }
        checked(&s);
    }
}

#[derive(Clone, Debug)]
enum ListOp {
    Push(bool, u16),
    /// A push of an element of `len % 700` bytes: big ones overflow a list's end buffers.
    PushBig(bool, u16),
    /// A window of positions, read with `range`.
    Range(u16, u16),
    Pop(bool),
    Insert(u16, u16),
    Remove(u16),
    Set(u16, u16),
}

fn list_ops() -> impl Strategy<Value = Vec<ListOp>> {
    let op = prop_oneof![
        6 => (any::<bool>(), any::<u16>()).prop_map(|(l, v)| ListOp::Push(l, v)),
        1 => (any::<bool>(), any::<u16>()).prop_map(|(l, v)| ListOp::PushBig(l, v)),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(i, n)| ListOp::Range(i, n)),
        2 => any::<bool>().prop_map(ListOp::Pop),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(i, v)| ListOp::Insert(i, v)),
        1 => any::<u16>().prop_map(ListOp::Remove),
        1 => (any::<u16>(), any::<u16>()).prop_map(|(i, v)| ListOp::Set(i, v)),
    ];
    prop::collection::vec(op, 1..1200)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn list_matches_model(ops in list_ops(), small in any::<bool>()) {
        let (s, mut h) = store(small);
        let mut model: Vec<Vec<u8>> = Vec::new();
        for op in &ops {
            let n = model.len() as u64;
            match *op {
                ListOp::Push(left, v) => {
                    let e = v.to_string().into_bytes();
                    h.coll_write(0, b"l", Kind::List, true, |c| { let at = if left { 0 } else { c.len() }; c.insert_at(at, &e) }).unwrap();
                    if left { model.insert(0, e) } else { model.push(e) }
                }
                ListOp::PushBig(left, v) => {
                    let e = vec![b'a' + (v % 26) as u8; v as usize % 700];
                    h.coll_write(0, b"l", Kind::List, true, |c| { let at = if left { 0 } else { c.len() }; c.insert_at(at, &e) }).unwrap();
                    if left { model.insert(0, e) } else { model.push(e) }
                }
                ListOp::Range(i, len) => {
                    let from = i as u64 % (n + 1);
                    let to = from + len as u64 % 80;
                    let mut got = Vec::new();
                    h.coll_read(0, b"l", Kind::List, |c| c.range(from, to, |k, _| { got.push(k.to_vec()); true })).unwrap();
                    let want = &model[from as usize..(to as usize).min(model.len())];
                    prop_assert_eq!(&got[..], want);
                }
                ListOp::Pop(left) => {
                    let got = h.coll_write(0, b"l", Kind::List, false, |c| { let at = if left { 0 } else { c.len() - 1 }; c.remove_at(at) }).unwrap();
                    let want = if model.is_empty() { None } else if left { Some(model.remove(0)) } else { model.pop() };
                    prop_assert_eq!(got.map(|kv| kv.0), want);
                }
                ListOp::Insert(i, v) => {
                    let at = i as u64 % (n + 1);
                    let e = format!("ins{v}").into_bytes();
                    h.coll_write(0, b"l", Kind::List, true, |c| c.insert_at(at, &e)).unwrap();
                    model.insert(at as usize, e);
                }
                ListOp::Remove(i) if n > 0 => {
                    let at = i as u64 % n;
                    let got = h.coll_write(0, b"l", Kind::List, false, |c| c.remove_at(at)).unwrap().unwrap();
                    prop_assert_eq!(got.0, model.remove(at as usize));
                }
                ListOp::Set(i, v) if n > 0 => {
                    let at = i as u64 % n;
                    let e = format!("set{v}").into_bytes();
                    h.coll_write(0, b"l", Kind::List, false, |c| c.set_at(at, &e)).unwrap();
                    model[at as usize] = e;
                }
                _ => {}
            }
            let all: Vec<Vec<u8>> = h.coll_read(0, b"l", Kind::List, |c| c.entries()).unwrap().unwrap_or_default().into_iter().map(|kv| kv.0).collect();
            prop_assert_eq!(&all, &model);
            if !model.is_empty() {
                let mid = model.len() as u64 / 2;
                let got = h.coll_read(0, b"l", Kind::List, |c| c.get(mid)).unwrap().unwrap();
                prop_assert_eq!(&got.0, &model[mid as usize]);
            }
        }
        checked(&s);
    }
}

#[derive(Clone, Debug)]
enum SetOp {
    Add(u16, bool),
    Rem(u16, bool),
    PopNth(u16),
}

fn member(i: u16, int: bool) -> Vec<u8> {
    if int {
        (i as i64 - 300).to_string().into_bytes()
    } else {
        format!("m{i}").into_bytes()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn set_matches_model(
        ops in prop::collection::vec(prop_oneof![
            5 => (0..600u16, prop::bool::weighted(0.9)).prop_map(|(i, b)| SetOp::Add(i, b)),
            2 => (0..600u16, prop::bool::weighted(0.9)).prop_map(|(i, b)| SetOp::Rem(i, b)),
            1 => any::<u16>().prop_map(SetOp::PopNth),
        ], 1..900),
        small in any::<bool>(),
    ) {
        let (s, mut h) = store(small);
        let mut model: BTreeSet<Vec<u8>> = BTreeSet::new();
        for op in &ops {
            match *op {
                SetOp::Add(i, int) => {
                    let m = member(i, int);
                    let got = h.coll_write(0, b"s", Kind::Set, true, |c| c.put(&m, b"")).unwrap().unwrap();
                    prop_assert_eq!(got.is_none(), model.insert(m));
                }
                SetOp::Rem(i, int) => {
                    let m = member(i, int);
                    let got = h.coll_write(0, b"s", Kind::Set, false, |c| c.del(&m)).unwrap().flatten();
                    prop_assert_eq!(got.is_some(), model.remove(&m));
                }
                SetOp::PopNth(i) if !model.is_empty() => {
                    let got = h.coll_write(0, b"s", Kind::Set, false, |c| { let at = i as u64 % c.len(); c.remove_at(at) }).unwrap().unwrap();
                    prop_assert!(model.remove(&got.0));
                }
                _ => {}
            }
            let mut all: Vec<Vec<u8>> = h.coll_read(0, b"s", Kind::Set, |c| c.entries()).unwrap().unwrap_or_default().into_iter().map(|kv| kv.0).collect();
            all.sort();
            prop_assert_eq!(all, model.iter().cloned().collect::<Vec<_>>());
            let probe = member(ops.len() as u16 % 600, true);
            let has = h.coll_read(0, b"s", Kind::Set, |c| c.contains(&probe)).unwrap().unwrap_or(false);
            prop_assert_eq!(has, model.contains(&probe));
        }
        checked(&s);
    }
}

#[derive(Clone, Debug)]
enum ZOp {
    Add(u16, i16),
    Rem(u16),
    PopMin,
    PopMax,
}

fn zmember(i: u16) -> Vec<u8> {
    if i.is_multiple_of(11) {
        format!("a-rather-long-member-name-{i}").into_bytes()
    } else {
        format!("z{i}").into_bytes()
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn zset_matches_model(
        ops in prop::collection::vec(prop_oneof![
            6 => (0..700u16, -50..50i16).prop_map(|(i, s)| ZOp::Add(i, s)),
            2 => (0..700u16).prop_map(ZOp::Rem),
            1 => Just(ZOp::PopMin),
            1 => Just(ZOp::PopMax),
        ], 1..900),
        small in any::<bool>(),
    ) {
        let (s, mut h) = store(small);
        // Model: member -> score, and the order (score, member).
        let mut model: BTreeMap<Vec<u8>, f64> = BTreeMap::new();
        let order = |m: &BTreeMap<Vec<u8>, f64>| {
            let mut v: Vec<(f64, Vec<u8>)> = m.iter().map(|(k, s)| (*s, k.clone())).collect();
            v.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then(a.1.cmp(&b.1)));
            v
        };
        for op in &ops {
            match *op {
                ZOp::Add(i, sc) => {
                    let m = zmember(i);
                    let score = sc as f64 / 4.0;
                    let got = h.coll_write(0, b"z", Kind::ZSet, true, |c| c.zput(&m, score)).unwrap().unwrap();
                    prop_assert_eq!(got, model.insert(m, score));
                }
                ZOp::Rem(i) => {
                    let m = zmember(i);
                    let got = h.coll_write(0, b"z", Kind::ZSet, false, |c| c.del(&m)).unwrap().flatten();
                    prop_assert_eq!(got.is_some(), model.remove(&m).is_some());
                }
                ZOp::PopMin | ZOp::PopMax => {
                    let max = matches!(op, ZOp::PopMax);
                    let got = h.coll_write(0, b"z", Kind::ZSet, false, |c| { let at = if max { c.len() - 1 } else { 0 }; c.remove_at(at) }).unwrap();
                    let o = order(&model);
                    let want = if max { o.last() } else { o.first() };
                    prop_assert_eq!(got.as_ref().map(|kv| kv.0.clone()), want.map(|w| w.1.clone()));
                    if let Some((m, _)) = got { model.remove(&m); }
                }
            }
            let o = order(&model);
            let all: Vec<(f64, Vec<u8>)> = h.coll_read(0, b"z", Kind::ZSet, |c| c.entries()).unwrap().unwrap_or_default()
                .into_iter().map(|(m, s)| (f64::from_le_bytes(s.try_into().unwrap()), m)).collect();
            prop_assert_eq!(&all, &o);
            if let Some((sc, m)) = o.get(o.len() / 2) {
                let (sc, m) = (*sc, m.clone());
                let (rank, by_score, after) = h.coll_read(0, b"z", Kind::ZSet, |c| {
                    Ok((c.zrank(&m)?, c.zseek_score(sc, false)?, c.zseek_score(sc, true)?))
                }).unwrap().unwrap();
                prop_assert_eq!(rank, Some((o.len() / 2) as u64));
                prop_assert_eq!(by_score, o.iter().position(|x| x.0 >= sc).unwrap() as u64);
                prop_assert_eq!(after, o.iter().position(|x| x.0 > sc).unwrap_or(o.len()) as u64);
                let got = h.coll_read(0, b"z", Kind::ZSet, |c| c.score(&m)).unwrap().flatten();
                prop_assert_eq!(got, Some(sc));
            }
        }
        checked(&s);
    }
}

#[test]
fn wrong_type_and_keyspace_commands_on_collections() {
    let (s, mut h) = store(true);
    h.coll_write(0, b"h", Kind::Hash, true, |c| {
        for i in 0..100u16 {
            c.put(&field(i), b"v")?;
        }
        Ok(())
    })
    .unwrap();
    assert!(matches!(h.get(0, b"h"), Err(larder_engine::Error::WrongType)));
    assert!(matches!(h.coll_read(0, b"h", Kind::List, |c| Ok(c.len())), Err(larder_engine::Error::WrongType)));
    assert_eq!(h.type_of(0, b"h").unwrap(), Some(larder_engine::Type::Hash));
    assert_eq!(h.encoding(0, b"h").unwrap(), Some("hashtable"));
    // SCAN's type filter tells the hash from a string beside it.
    h.set(0, b"str", b"v", &Default::default()).unwrap();
    for (ty, want) in [(larder_engine::Type::Hash, &b"h"[..]), (larder_engine::Type::String, b"str")] {
        let mut out = Vec::new();
        assert_eq!(h.scan(0, 0, 1000, None, Some(ty), &mut out).unwrap(), 0);
        assert_eq!(out, [want.to_vec()], "{ty:?}");
    }
    let mut out = Vec::new();
    h.scan(0, 0, 1000, None, Some(larder_engine::Type::List), &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(h.del(0, &[b"str"]).unwrap(), 1);
    // COPY deep-copies the tree; changing the copy leaves the original alone.
    assert!(h.copy(0, b"h", 0, b"h2", false).unwrap());
    h.coll_write(0, b"h2", Kind::Hash, false, |c| c.del(&field(1))).unwrap();
    assert_eq!(h.coll_read(0, b"h", Kind::Hash, |c| Ok(c.len())).unwrap(), Some(100));
    assert_eq!(h.coll_read(0, b"h2", Kind::Hash, |c| Ok(c.len())).unwrap(), Some(99));
    // RENAME hands the tree over; EXPIRE keeps it; DEL and SET over it drop it.
    assert!(h.rename(0, b"h2", b"h3", false).unwrap());
    assert!(h.expire_at(0, b"h3", larder_engine::now_ms() + 100_000, Default::default()).unwrap());
    assert_eq!(h.coll_read(0, b"h3", Kind::Hash, |c| Ok(c.len())).unwrap(), Some(99));
    checked(&s);
    h.set(0, b"h", b"now a string", &Default::default()).unwrap();
    assert_eq!(h.del(0, &[b"h3"]).unwrap(), 1);
    h.collect().unwrap();
    checked(&s);
    // A collection emptied by its last removal is deleted.
    h.coll_write(0, b"l", Kind::List, true, |c| c.insert_at(0, b"x")).unwrap();
    h.coll_write(0, b"l", Kind::List, false, |c| c.remove_at(0)).unwrap();
    assert_eq!(h.exists(0, &[b"l"]).unwrap(), 0);
    // FLUSHALL drops trees too.
    h.coll_write(0, b"z", Kind::ZSet, true, |c| {
        for i in 0..500u16 {
            c.zput(&zmember(i), i as f64)?;
        }
        Ok(())
    })
    .unwrap();
    h.flushall().unwrap();
    checked(&s);
}

#[test]
fn readers_keep_their_version_while_a_writer_changes_a_tree() {
    let s = Store::open(StoreConfig::small_for_tests()).unwrap();
    let mut w = s.handle().unwrap();
    w.coll_write(0, b"l", Kind::List, true, |c| {
        for i in 0..2000u32 {
            c.insert_at(i as u64, &i.to_le_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let s = s.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let h = s.handle().unwrap();
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) || n < 50 {
                    // Every version is a run of consecutive integers (pops at the head,
                    // pushes at the tail): a torn read would break the run.
                    let v = h.coll_read(0, b"l", Kind::List, |c| c.entries()).unwrap().unwrap();
                    let ints: Vec<u32> =
                        v.iter().map(|(k, _)| u32::from_le_bytes(k[..4].try_into().unwrap())).collect();
                    assert!(ints.windows(2).all(|w| w[1] == w[0] + 1), "torn list");
                    n += 1;
                }
            })
        })
        .collect();
    for i in 2000..6000u32 {
        w.coll_write(0, b"l", Kind::List, false, |c| {
            c.remove_at(0)?;
            let n = c.len();
            c.insert_at(n, &i.to_le_bytes())
        })
        .unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    w.collect().unwrap();
    checked(&s);
}

#[test]
fn a_push_wakes_a_waiter_only_while_someone_is_blocked() {
    let s = Store::open(StoreConfig::small_for_tests()).unwrap();
    let mut h = s.handle().unwrap();
    let seq0 = s.push_seq();
    h.coll_write(0, b"q", Kind::List, true, |c| c.insert_at(0, b"a")).unwrap();
    assert_eq!(s.push_seq(), seq0, "no blockers: pushes do not touch the sequence");
    s.add_blockers(1);
    let waiter = {
        let s = s.clone();
        std::thread::spawn(move || {
            let t = std::time::Instant::now();
            while s.push_seq() == seq0 && t.elapsed() < std::time::Duration::from_secs(10) {
                s.wait_push(seq0, std::time::Duration::from_secs(5));
            }
            t.elapsed()
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    // A pop is not a push; a new sorted-set member is.
    h.coll_write(0, b"q", Kind::List, false, |c| c.remove_at(0)).unwrap();
    assert_eq!(s.push_seq(), seq0);
    h.coll_write(0, b"z", Kind::ZSet, true, |c| c.zput(b"m", 1.0)).unwrap();
    let waited = waiter.join().unwrap();
    assert!(waited < std::time::Duration::from_secs(5), "waiter slept through the push: {waited:?}");
    assert_ne!(s.push_seq(), seq0);
    s.add_blockers(-1);
}

/// RENAME, COPY, MOVE and SWAPDB can put a list or sorted set under a key a client blocks
/// on (in the server, or any process attached to the segment): they count as pushes, as
/// Redis signals such a key as ready. Moving a string does not.
#[test]
fn moving_a_list_or_sorted_set_counts_as_a_push() {
    let s = Store::open(StoreConfig::small_for_tests()).unwrap();
    let mut h = s.handle().unwrap();
    s.add_blockers(1);
    let moved = |what: &str, h: &mut Handle, f: &dyn Fn(&mut Handle)| {
        let seq = s.push_seq();
        f(h);
        assert_ne!(s.push_seq(), seq, "{what} did not count as a push");
    };
    h.coll_write(0, b"l", Kind::List, true, |c| c.insert_at(0, b"a")).unwrap();
    h.coll_write(0, b"z", Kind::ZSet, true, |c| c.zput(b"m", 1.0)).unwrap();
    moved("RENAME of a list", &mut h, &|h| assert!(h.rename(0, b"l", b"q", false).unwrap()));
    moved("COPY of a list", &mut h, &|h| assert!(h.copy(0, b"q", 0, b"q2", false).unwrap()));
    moved("MOVE of a list", &mut h, &|h| assert!(h.move_to(0, b"q2", 3).unwrap()));
    moved("RENAME of a sorted set", &mut h, &|h| assert!(h.rename(0, b"z", b"zq", false).unwrap()));
    moved("SWAPDB", &mut h, &|h| h.swapdb(0, 3).unwrap());
    h.set(0, b"str", b"v", &larder_engine::SetOptions::default()).unwrap();
    let seq = s.push_seq();
    assert!(h.rename(0, b"str", b"str2", false).unwrap());
    assert_eq!(s.push_seq(), seq, "a string moved: no push");
    s.add_blockers(-1);
}

#[test]
fn putting_what_is_already_there_publishes_nothing() {
    let (_s, mut h) = store(true);
    for (key, n) in [(&b"small"[..], 3u32), (&b"big"[..], 300)] {
        h.coll_write(0, key, Kind::Set, true, |c| {
            for i in 0..n {
                c.put(format!("m{i}").as_bytes(), b"")?;
            }
            Ok(())
        })
        .unwrap();
        let v0 = h.meta(0, key).unwrap().unwrap().version;
        let old = h.coll_write(0, key, Kind::Set, false, |c| c.put(b"m1", b"")).unwrap().unwrap();
        assert_eq!(old, Some(Vec::new()));
        assert_eq!(h.meta(0, key).unwrap().unwrap().version, v0, "{key:?}: an unchanged set was republished");
        h.coll_write(0, key, Kind::Set, false, |c| c.put(b"new", b"")).unwrap();
        assert_ne!(h.meta(0, key).unwrap().unwrap().version, v0);
    }
}

/// A collection made in one edit session with `set_expire_at` is published with that
/// expiry (RESTORE's TTL), counted among the database's keys with one; 0 takes it off.
#[test]
fn an_edit_session_can_set_the_expiry() {
    use larder_engine::{now_ms, Ttl};
    let (s, mut h) = store(false);
    let at = now_ms() + 60_000;
    for kind in [Kind::List, Kind::Set, Kind::Hash, Kind::ZSet] {
        let key = format!("{kind:?}");
        h.coll_write(0, key.as_bytes(), kind, true, |c| {
            c.set_expire_at(at);
            match kind {
                Kind::List => c.insert_at(0, b"a"),
                Kind::ZSet => c.zput(b"a", 1.0).map(|_| ()),
                _ => c.put(b"a", b"").map(|_| ()),
            }
        })
        .unwrap();
        match h.pttl(0, key.as_bytes()).unwrap() {
            Ttl::Ms(ms) => assert!(ms > 59_000 && ms <= 60_000, "{kind:?} {ms}"),
            other => panic!("{kind:?} {other:?}"),
        }
    }
    assert_eq!(h.expires(0).unwrap(), 4);
    h.coll_write(0, b"List", Kind::List, false, |c| {
        c.set_expire_at(0);
        Ok(())
    })
    .unwrap();
    assert_eq!(h.pttl(0, b"List").unwrap(), Ttl::Persistent);
    assert_eq!(h.expires(0).unwrap(), 3);
    checked(&s);
}
