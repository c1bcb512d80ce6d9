//! The invariant checker: walks every database's directory and segments and the
//! allocator's free lists, and reports what breaks the engine's rules.
//!
//! Run it on a quiet arena (tests run it after their writers stop): it reads without locks.

use std::collections::{HashMap, HashSet};

use larder_arena::Arena;

use crate::index::{self, NB, SLOTS};
use crate::item::ItemView;
use crate::{now_ms, Error, Store};

/// What the checker found.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Keys reachable from the indexes (expired ones included).
    pub keys: u64,
    /// Keys per database.
    pub keys_per_db: Vec<u64>,
    pub segments: u64,
    /// Bytes of arena blocks holding items.
    pub item_bytes: u64,
    /// Bytes of key and value payload in those items.
    pub payload_bytes: u64,
    /// Bytes of segments and directories.
    pub index_bytes: u64,
    /// Bytes of pages the allocator has handed out.
    pub pages_bytes: u64,
    /// Bucket locks still held by a live participant.
    pub held_locks: u64,
    /// Bucket locks whose owner is gone (free for the taking).
    pub stale_locks: u64,
    /// Blocks waiting on retire lists.
    pub retired_blocks: u64,
    /// Segments whose counts await a recount (a writer died between a key and its count).
    pub recounts_pending: u64,
    /// Collections stored as trees, and the bytes of their nodes and elements.
    pub trees: u64,
    pub tree_bytes: u64,
    /// Every broken invariant, in words. Empty means the arena is sound.
    pub problems: Vec<String>,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

pub(crate) fn check(store: &Store) -> Result<Report, Error> {
    let a: &Arena = store.arena();
    let mut r = Report::default();
    let stats = a.alloc_stats()?;
    r.pages_bytes = stats.pages_bytes;
    r.retired_blocks = stats.retired_blocks;
    let free = &stats.free_set;
    let now = now_ms();
    let mut items_seen: HashSet<u64> = HashSet::new();
    let mut key = Vec::new();
    let mismatches = a.unlock_mismatches();
    if mismatches > 0 {
        r.problems.push(format!("{mismatches} unlocks through this attachment found the lock word no longer theirs"));
    }
    for db in 0..store.databases() {
        let (dir, g) = index::directory(a, db)?;
        r.index_bytes += 8 << g;
        let mut db_keys = 0;
        // Every directory entry must agree with the segment it names.
        let mut seg_entries: HashMap<u64, Vec<u64>> = HashMap::new();
        for i in 0..(1u64 << g) {
            let (seg, l) = index::dir_entry(a, dir, i)?;
            seg_entries.entry(seg).or_default().push(i);
            let (depth, retired, _, prefix) = index::seg_header(a, seg)?;
            if depth != l {
                r.problems.push(format!("db {db} entry {i}: depth {l} but segment says {depth}"));
            }
            if retired {
                r.problems.push(format!("db {db} entry {i}: points at a retired segment"));
            }
            if l <= g && (i >> (g - l)) != prefix {
                r.problems
                    .push(format!("db {db} entry {i}: segment prefix {prefix:#x} at depth {l} does not cover it"));
            }
        }
        for (seg, entries) in &seg_entries {
            let (depth, _, count, prefix) = index::seg_header(a, *seg)?;
            if entries.len() as u64 != 1u64 << (g - depth.min(g)) {
                r.problems.push(format!(
                    "db {db} segment {seg:#x}: {} entries, expected {}",
                    entries.len(),
                    1u64 << (g - depth.min(g))
                ));
            }
            if free.contains_key(seg) {
                r.problems.push(format!("db {db} segment {seg:#x} is on a free list"));
            }
            r.segments += 1;
            r.index_bytes += a.block_size(*seg)?;
            let mut n = 0u32;
            let mut with_expiry = 0u32;
            let mut keys_here: HashSet<Vec<u8>> = HashSet::new();
            let mut displaced = vec![0u32; NB as usize];
            for b in 0..NB {
                let bucket = index::bucket_off(*seg, b);
                let lw = index::bucket_lock_word(a, *seg, b)?;
                if lw != 0 {
                    if a.lock_held(lw) {
                        r.held_locks += 1;
                    } else {
                        r.stale_locks += 1;
                    }
                }
                for i in 0..SLOTS {
                    let u = index::slot(a, bucket, i)?.load(std::sync::atomic::Ordering::Acquire);
                    if u == 0 {
                        continue;
                    }
                    n += 1;
                    let off = Arena::from_units(u);
                    if free.contains_key(&off) {
                        r.problems.push(format!("db {db}: item {off:#x} is published and on a free list"));
                        continue;
                    }
                    if !items_seen.insert(off) {
                        r.problems.push(format!("db {db}: item {off:#x} is published twice"));
                    }
                    let it = match ItemView::read(a, off) {
                        Ok(it) => it,
                        Err(e) => {
                            r.problems.push(format!("db {db}: item {off:#x} unreadable: {e}"));
                            continue;
                        }
                    };
                    it.key(a, &mut key)?;
                    let h = index::key_hash(a.seed(), &key);
                    if depth > 0 && (h >> (64 - depth)) != prefix {
                        r.problems.push(format!(
                            "db {db}: key {:?} is in a segment of another prefix",
                            String::from_utf8_lossy(&key)
                        ));
                    }
                    let home = index::bucket_of(h, depth);
                    let dist = (b + NB - home) % NB;
                    if dist >= index::WINDOW {
                        r.problems.push(format!(
                            "db {db}: key {:?} in bucket {b}, home {home}",
                            String::from_utf8_lossy(&key)
                        ));
                    } else if dist > 0 {
                        displaced[home as usize] += 1;
                    }
                    if index::tag_at(a, bucket, i)? != index::expected_tag(h) {
                        r.problems.push(format!("db {db}: key {:?} has a wrong tag", String::from_utf8_lossy(&key)));
                    }
                    if !keys_here.insert(key.clone()) {
                        r.problems.push(format!("db {db}: key {:?} appears twice", String::from_utf8_lossy(&key)));
                    }
                    let size = a.block_size(off)?;
                    let _ = it.expired(a, now)?;
                    with_expiry += (it.expire_at(a)? != 0) as u32;
                    r.item_bytes += size;
                    r.payload_bytes += it.klen + if it.is_string() { it.strlen(a)? } else { it.vlen };
                    if crate::item::is_tree_type(it.ty()) {
                        crate::coll::check_item(a, &it, free, &mut r)?;
                    }
                    if it.val_off() + if it.is_int() { 0 } else { it.vlen } > off + size {
                        r.problems.push(format!("db {db}: item {off:#x} overruns its block"));
                    }
                }
            }
            // A segment whose writer died mid-count is recounted by its next writer; until
            // then its counts are known to be stale (only they: the slots are checked above).
            let pending = index::count_pending(a, *seg)?;
            r.recounts_pending += pending as u64;
            for (b, &d) in displaced.iter().enumerate() {
                let o = index::overflow_of(a, *seg, b as u64)? as u32;
                if o != d && !pending {
                    r.problems
                        .push(format!("db {db} segment {seg:#x} bucket {b}: overflow {o} but {d} displaced keys"));
                }
            }
            if n != count && !pending {
                r.problems.push(format!("db {db} segment {seg:#x}: count {count} but {n} slots used"));
            }
            let expires = index::seg_expires(a, *seg)?;
            if expires != with_expiry && !pending {
                r.problems.push(format!(
                    "db {db} segment {seg:#x}: expiry count {expires} but {with_expiry} keys with an expiry"
                ));
            }
            db_keys += n as u64;
        }
        r.keys_per_db.push(db_keys);
        r.keys += db_keys;
    }
    Ok(r)
}
