//! The index: per database, an extendible hash table that grows and shrinks one segment at a
//! time.
//!
//! ```text
//!   db root (in the arena header's root area)
//!     dir word  u64   global depth g << 32 | directory (unit offset)
//!     dir lock  u32   taken only to split or merge (rare)
//!   directory: 2^g entries  u64  local depth l << 32 | segment (unit offset)
//!   segment:   64-byte header (depth, retired, count, prefix) + 256 buckets
//!   bucket:    one cache line: 12 one-byte tags, a lock word, 12 u32 item offsets
//! ```
//!
//! A key's position is its 64-bit hash bent by [`spiral`]; the position picks everything:
//! its top `g` bits the directory entry, the 8 bits after the segment's `l` prefix bits its
//! *home* bucket `b`, its low byte the tag. A key lives in its home bucket or, displaced when
//! that is full, in one of the next `WINDOW - 1` (mod 256). A one-byte count per home says
//! how many of its keys are displaced, so a lookup reads the home's cache line, and the lines
//! after it only if that count is not zero.
//!
//! - **Readers** take no lock: load the directory entry, compare tags, follow the offset,
//!   compare the whole key (a tag is only a hint), copy the value out, inside an epoch.
//! - **Writers** lock the home bucket, re-check that the segment is not retired, then
//!   publish with one atomic store of a slot. A displaced slot is claimed by *trying* its
//!   bucket's lock as well; multi-key writers sort all their home buckets by address.
//! - **Growth**: when a key's whole window is full, the segment splits: the splitter locks
//!   all 256 buckets, copies the slots into two new segments of depth `l + 1` (the items
//!   themselves are shared, not copied; each is read once to rehash its key), then under the
//!   directory lock points the segment's directory range at them (doubling the directory
//!   first if `l == g`) and marks it retired. Only writers of that one segment wait; readers
//!   keep reading the old, frozen copy. Because positions are bent, segments fill at rates
//!   that fall along the hash space and split one after another at a steady pace, not all
//!   at once when the key count doubles (see [`spiral`]).
//! - **Shrink**: two buddy segments that are both nearly empty merge into one the same way.
//! - **Crash safety**: the directory stores of a split or merge are recorded as an intent
//!   before the first one; a reaper that finds the splitter dead redoes them.
//!
//! Home buckets cover contiguous ranges of positions, so a SCAN cursor is simply the next
//! position to visit: splits and merges never make it skip a key.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use larder_arena::{Arena, Participant, ROOT_OFF, ROOT_SIZE};

use crate::item::{self, ItemView};
use crate::Error;

pub(crate) const NB: u64 = 256;
pub(crate) const SLOTS: u64 = 12;
/// A key lives in its home bucket or, displaced, in one of the next `WINDOW - 1`. Eight
/// let a segment fill to about 82% before its first window overflows (four: 73%), which
/// pays for the lower average fill that [`spiral`]'s steady splits leave.
pub(crate) const WINDOW: u64 = 8;
/// Segment header, then one overflow byte per bucket (keys homed there but displaced).
const G_OVERFLOW: u64 = 64;
const SEG_HDR: u64 = 64 + NB;
pub(crate) const SEG_SIZE: u64 = SEG_HDR + NB * 64;

const G_DEPTH: u64 = 0;
const G_RETIRED: u64 = 4;
const G_COUNT: u64 = 8;
const G_PREFIX: u64 = 16;
/// Nonzero when the key count and overflow counts may be off: a writer died between
/// publishing a slot and counting it. The next writer of the segment recounts them.
const G_DIRTY: u64 = 24;
/// Keys of the segment whose item has an expiry set (INFO keyspace's `expires`). Kept with
/// the key count: under `counting`, recounted with it after a crash.
const G_EXPIRES: u64 = 32;

const B_LOCK: u64 = 12;
const B_SLOTS: u64 = 16;

/// Engine root header inside the arena's root area.
const E_MAGIC: u64 = ROOT_OFF;
const E_NDB: u64 = ROOT_OFF + 4;
const ENGINE_MAGIC: u32 = u32::from_le_bytes(*b"LKS1");
const DB_ROOTS: u64 = ROOT_OFF + 64;
const DB_ROOT_SIZE: u64 = 64;
const R_DIR: u64 = 0;
const R_LOCK: u64 = 8;
/// Most logical databases one arena holds.
pub const MAX_DBS: u32 = ((ROOT_SIZE - 64) / DB_ROOT_SIZE) as u32;

/// Deepest a segment may get: 48 prefix bits + 8 bucket bits leave the tag byte alone.
const MAX_DEPTH: u32 = 48;
/// A merge happens when two buddies hold fewer than this many keys together.
pub(crate) const MERGE_BELOW: u32 = (NB * SLOTS / 4) as u32;

const K_SPLIT: u32 = 1;
const K_MERGE: u32 = 2;
const K_MSET: u32 = 3;
const K_SWAP: u32 = 4;

/// A crash hook for the multi-process tests: when the environment variable
/// `LARDER_FAILPOINT` names this point, the process aborts right here (no destructors, no
/// unlocking), as if killed in the middle of a publication. Only on rare paths (splits,
/// merges, multi-key sets, a push while some client is blocked).
pub(crate) fn failpoint(name: &str) {
    static POINT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if POINT.get_or_init(|| std::env::var("LARDER_FAILPOINT").ok()).as_deref() == Some(name) {
        std::process::abort();
    }
}

#[inline]
pub(crate) fn hash(seed: u64, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, seed)
}

/// Where a key lives in the index: its [`hash`] bent by [`spiral`].
#[inline]
pub(crate) fn key_hash(seed: u64, key: &[u8]) -> u64 {
    spiral(hash(seed, key))
}

/// Pieces of the curve [`spiral`] follows; each is a straight line.
const CURVE_PIECES: u32 = 64;
/// `CURVE[i]` = (2^(i/64) − 1) · 2^64, in integers only, so that every process and machine
/// that attaches to a segment computes the very same positions.
const CURVE: [u64; CURVE_PIECES as usize + 1] = curve();

const fn curve() -> [u64; CURVE_PIECES as usize + 1] {
    // 2^(1/64) with 62 fraction bits.
    const STEP: u128 = 0x40b2_68f9_de01_83b9;
    let mut t = [0u64; CURVE_PIECES as usize + 1];
    let mut p: u128 = 1 << 62;
    let mut i = 0;
    while i <= CURVE_PIECES as usize {
        t[i] = ((p - (1 << 62)) << 2) as u64;
        p = (p * STEP) >> 62;
        i += 1;
    }
    t
}

/// Maps a uniform hash `c` (a fraction of 2^64) to the position 2^c − 1 (piecewise linear,
/// increasing), so that keys are twice as dense at the start of the hash space as at its end.
///
/// This is spiral storage (Martin, 1979) on top of extendible hashing. With uniform
/// positions every segment of one depth fills at the same rate, so they all split within a
/// short span of inserts: a wave that halves insert throughput once per doubling. Bent
/// positions make a segment's fill rate fall along the space, so segments split one after
/// another, in order, at a steady rate per insert (about 1.44 keys moved per key inserted)
/// from any size to any size. The price is the spread of fill: segments hold between half
/// and all of what makes them split, about ln 2 of it on average at every size, where
/// uniform positions swing between a half and all of it once per doubling.
#[inline]
pub(crate) fn spiral(c: u64) -> u64 {
    let i = (c >> (64 - CURVE_PIECES.trailing_zeros())) as usize;
    let r = c << CURVE_PIECES.trailing_zeros();
    let (lo, hi) = (CURVE[i], CURVE[i + 1]);
    lo + (((hi - lo) as u128 * r as u128) >> 64) as u64
}

#[inline]
fn dir_index(h: u64, g: u32) -> u64 {
    if g == 0 {
        0
    } else {
        h >> (64 - g)
    }
}

#[inline]
pub(crate) fn bucket_of(h: u64, l: u32) -> u64 {
    (h << l) >> 56
}

#[inline]
fn tag_of(h: u64) -> u8 {
    h as u8
}

#[inline]
fn db_root(db: u32) -> u64 {
    DB_ROOTS + db as u64 * DB_ROOT_SIZE
}

#[inline]
pub(crate) fn bucket_off(seg: u64, b: u64) -> u64 {
    seg + SEG_HDR + (b % NB) * 64
}

/// Where a hash lives: its segment (byte offset), the segment's depth, its home bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc {
    pub seg: u64,
    pub depth: u32,
    pub b: u64,
}

/// A key found in the index: the bucket and slot holding it, and its item.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    pub bucket: u64,
    pub slot: u64,
    pub item: ItemView,
}

/// Initialises the engine's root area of a fresh arena: `ndb` empty databases.
pub(crate) fn init(p: &Participant, ndb: u32) -> Result<(), Error> {
    let a = &**p.arena();
    if ndb == 0 || ndb > MAX_DBS {
        return Err(Error::BadDb);
    }
    for db in 0..ndb {
        let (dir, _) = new_dir_with_empty_segment(p)?;
        a.u64(db_root(db) + R_DIR)?.store(Arena::to_units(dir) as u64, Ordering::Release);
    }
    a.u32(E_NDB)?.store(ndb, Ordering::Release);
    a.u32(E_MAGIC)?.store(ENGINE_MAGIC, Ordering::Release);
    Ok(())
}

/// Number of databases of an initialised arena, or None if the engine has not set it up.
pub(crate) fn ndb(a: &Arena) -> Result<Option<u32>, Error> {
    match a.u32(E_MAGIC)?.load(Ordering::Acquire) {
        ENGINE_MAGIC => {}
        0 => return Ok(None),
        _ => return Err(Error::Corrupt("engine root has a foreign magic")),
    }
    let n = a.u32(E_NDB)?.load(Ordering::Acquire);
    if n == 0 || n > MAX_DBS {
        return Err(Error::Corrupt("database count out of range"));
    }
    Ok(Some(n))
}

fn new_segment(p: &Participant, depth: u32, prefix: u64) -> Result<u64, Error> {
    let a = &**p.arena();
    let seg = p.alloc(SEG_SIZE)?;
    a.zero(seg, SEG_SIZE)?;
    a.u32(seg + G_DEPTH)?.store(depth, Ordering::Relaxed);
    a.u64(seg + G_PREFIX)?.store(prefix, Ordering::Relaxed);
    Ok(seg)
}

/// A one-entry directory over one empty segment (g = 0, l = 0).
fn new_dir_with_empty_segment(p: &Participant) -> Result<(u64, u64), Error> {
    let a = &**p.arena();
    let seg = new_segment(p, 0, 0)?;
    let dir = p.alloc(8)?;
    a.u64(dir)?.store(Arena::to_units(seg) as u64, Ordering::Release);
    Ok((dir, seg))
}

#[inline]
fn dir_word(a: &Arena, db: u32) -> Result<(u64, u32), Error> {
    let w = a.u64(db_root(db) + R_DIR)?.load(Ordering::Acquire);
    let g = (w >> 32) as u32;
    if g > MAX_DEPTH {
        return Err(Error::Corrupt("directory depth out of range"));
    }
    Ok((Arena::from_units(w as u32), g))
}

#[inline]
fn entry(a: &Arena, dir: u64, i: u64) -> Result<(u64, u32), Error> {
    let e = a.u64(dir + i * 8)?.load(Ordering::Acquire);
    let l = (e >> 32) as u32;
    if l > MAX_DEPTH {
        return Err(Error::Corrupt("segment depth out of range"));
    }
    Ok((Arena::from_units(e as u32), l))
}

#[inline]
fn make_entry(seg: u64, l: u32) -> u64 {
    (l as u64) << 32 | Arena::to_units(seg) as u64
}

#[inline]
pub(crate) fn locate(a: &Arena, db: u32, h: u64) -> Result<Loc, Error> {
    let (dir, g) = dir_word(a, db)?;
    let (seg, depth) = entry(a, dir, dir_index(h, g))?;
    if depth > g {
        return Err(Error::Corrupt("segment deeper than its directory"));
    }
    Ok(Loc { seg, depth, b: bucket_of(h, depth) })
}

/// A bucket as sixteen `u32` words, bounds-checked once: words 0..3 hold the twelve tag
/// bytes, word 3 the lock, words 4..16 the item slots.
#[inline]
fn bucket_words(a: &Arena, bucket: u64) -> Result<&[AtomicU32; 16], Error> {
    Ok(a.u32s::<16>(bucket)?)
}

/// Word index of slot `i` in [`bucket_words`].
const SLOT_WORD: usize = (B_SLOTS / 4) as usize;

/// The slots whose tag is `t`, as a bit mask (bit `i` for slot `i`), found by comparing all
/// twelve tag bytes at once (SWAR) instead of one at a time.
#[inline]
fn tag_hits(w: &[AtomicU32; 16], t: u8) -> u32 {
    let lo = w[0].load(Ordering::Acquire) as u64 | (w[1].load(Ordering::Acquire) as u64) << 32;
    let hi = w[2].load(Ordering::Acquire) as u64;
    // XOR with t in every byte leaves a zero byte exactly where a tag equals t. The top four
    // bytes of `hi` are not tags: force them non-zero.
    let rep = 0x0101_0101_0101_0101 * t as u64;
    let lo = zero_bytes(lo ^ rep);
    let hi = zero_bytes((hi ^ rep) | 0xffff_ffff << 32);
    byte_mask(lo) | byte_mask(hi) << 8
}

/// 0x80 in every byte of `x` that is zero, 0 in the others. Exact: adding 0x7f to the low
/// seven bits of a byte carries into its top bit unless they are all zero, and no carry
/// crosses into the next byte.
#[inline]
fn zero_bytes(x: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// Gathers the top bit of each byte of `m` (as [`zero_bytes`] leaves them) into bits 0..8:
/// the multiply shifts byte k's bit to position 49 + k, and no two partial products overlap.
#[inline]
fn byte_mask(m: u64) -> u32 {
    ((m >> 7).wrapping_mul(0x0002_0408_1020_4081) >> 49) as u32 & 0xff
}

#[inline]
pub(crate) fn slot(a: &Arena, bucket: u64, i: u64) -> Result<&AtomicU32, Error> {
    Ok(a.u32(bucket + B_SLOTS + i * 4)?)
}

#[inline]
fn lock_word(a: &Arena, seg: u64, b: u64) -> Result<&AtomicU32, Error> {
    Ok(a.u32(bucket_off(seg, b) + B_LOCK)?)
}

#[inline]
fn overflow(a: &Arena, seg: u64, b: u64) -> Result<&AtomicU8, Error> {
    Ok(a.u8(seg + G_OVERFLOW + b % NB)?)
}

/// Overflow count of a home bucket: keys homed there but displaced (the checker, SCAN).
pub(crate) fn overflow_of(a: &Arena, seg: u64, b: u64) -> Result<u8, Error> {
    Ok(overflow(a, seg, b)?.load(Ordering::Acquire))
}

#[inline(always)]
fn find_in(a: &Arena, bucket: u64, t: u8, key: &[u8]) -> Result<Option<(u64, ItemView)>, Error> {
    let w = bucket_words(a, bucket)?;
    let mut hits = tag_hits(w, t);
    while hits != 0 {
        let i = hits.trailing_zeros() as usize;
        hits &= hits - 1;
        let units = w[SLOT_WORD + i].load(Ordering::Acquire);
        if units == 0 {
            continue;
        }
        let item = ItemView::read(a, Arena::from_units(units))?;
        if item.key_is(a, key)? {
            return Ok(Some((i as u64, item)));
        }
    }
    Ok(None)
}

/// Finds `key` (hash `h`): its home bucket, then, only if keys homed there were displaced,
/// the rest of its window. Lock-free for readers; also used by writers under the lock.
// Always inlined: a lookup is most of a GET, and its result (a Found of 8 words) would
// otherwise be returned through memory and copied again by the caller.
#[inline(always)]
pub(crate) fn find(a: &Arena, loc: &Loc, h: u64, key: &[u8]) -> Result<Option<Found>, Error> {
    let t = tag_of(h);
    for d in 0..WINDOW {
        // A displaced key is published after the overflow count is raised, so a count of
        // zero means no key of this home is elsewhere (as of this read).
        if d == 1 && overflow(a, loc.seg, loc.b)?.load(Ordering::Acquire) == 0 {
            break;
        }
        let bucket = bucket_off(loc.seg, loc.b + d);
        if let Some((slot, item)) = find_in(a, bucket, t, key)? {
            return Ok(Some(Found { bucket, slot, item }));
        }
    }
    Ok(None)
}

/// First half of a prefetch for a lookup of hash `h` that comes soon: brings the home
/// bucket's cache line in. Reads the directory without an epoch, so the segment may be
/// stale by the time the lookup runs; that only makes the hint useless (every read is
/// bounds-checked and a prefetch never faults).
#[inline]
pub(crate) fn prefetch_bucket(a: &Arena, db: u32, h: u64) -> Result<(), Error> {
    let loc = locate(a, db, h)?;
    a.prefetch(bucket_off(loc.seg, loc.b));
    Ok(())
}

/// Second half, once the bucket has had time to arrive: brings in the first cache line of
/// every item in the home bucket whose tag matches, and the line where a key of `klen`
/// bytes ends (where the value starts). No epoch either: a slot may be emptied or reused
/// meanwhile, which again only wastes the hint.
#[inline]
pub(crate) fn prefetch_items(a: &Arena, db: u32, h: u64, klen: usize) -> Result<(), Error> {
    let loc = locate(a, db, h)?;
    let bucket = bucket_off(loc.seg, loc.b);
    let w = bucket_words(a, bucket)?;
    let mut hits = tag_hits(w, tag_of(h));
    while hits != 0 {
        let i = hits.trailing_zeros() as usize;
        hits &= hits - 1;
        let units = w[SLOT_WORD + i].load(Ordering::Relaxed);
        if units != 0 {
            let off = Arena::from_units(units);
            a.prefetch(off);
            a.prefetch(off + 12 + klen as u64);
        }
    }
    Ok(())
}

/// The first empty slot of `bucket` not in `taken` (slots reserved by a multi-key write).
fn empty_slot(a: &Arena, bucket: u64, taken: &[(u64, u64)]) -> Result<Option<u64>, Error> {
    let w = bucket_words(a, bucket)?;
    for i in 0..SLOTS {
        if w[SLOT_WORD + i as usize].load(Ordering::Relaxed) == 0 && !taken.contains(&(bucket, i)) {
            return Ok(Some(i));
        }
    }
    Ok(None)
}

/// An empty slot held for a new key: in its home bucket (covered by the home lock) or
/// displaced into a later bucket of its window, whose lock is then held too.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Reserved {
    pub bucket: u64,
    pub slot: u64,
    /// The window bucket (index) locked for this reservation, to unlock after filling.
    pub locked: Option<u64>,
}

pub(crate) enum Room {
    Slot(Reserved),
    /// Every bucket of the window is full: the segment must split.
    Full,
    /// A window bucket with room is locked by someone else right now: retry.
    Busy,
}

/// Finds room for a new key homed at `loc.b`, whose home lock the caller holds. Slots only
/// go from empty to used under their own bucket's lock, so a displaced slot is claimed by
/// *trying* that bucket's lock (never waiting while holding the home lock: no deadlock).
/// `held` are bucket-lock words the caller already holds (multi-key writes).
pub(crate) fn reserve_slot(p: &Participant, loc: &Loc, taken: &[(u64, u64)], held: &[u64]) -> Result<Room, Error> {
    let a = &**p.arena();
    let home = bucket_off(loc.seg, loc.b);
    if let Some(i) = empty_slot(a, home, taken)? {
        return Ok(Room::Slot(Reserved { bucket: home, slot: i, locked: None }));
    }
    let mut busy = false;
    for d in 1..WINDOW {
        let b = (loc.b + d) % NB;
        let bucket = bucket_off(loc.seg, b);
        let word_off = bucket + B_LOCK;
        let already = held.contains(&word_off);
        if !already && !p.try_lock(a.u32(word_off)?) {
            busy |= empty_slot(a, bucket, taken)?.is_some();
            continue;
        }
        if let Some(i) = empty_slot(a, bucket, taken)? {
            return Ok(Room::Slot(Reserved { bucket, slot: i, locked: if already { None } else { Some(b) } }));
        }
        if !already {
            p.unlock(a.u32(word_off)?);
        }
    }
    Ok(if busy { Room::Busy } else { Room::Full })
}

/// Gives up a reservation without filling it.
pub(crate) fn release(p: &Participant, loc: &Loc, r: &Reserved) -> Result<(), Error> {
    if let Some(b) = r.locked {
        p.unlock(lock_word(p.arena(), loc.seg, b)?);
    }
    Ok(())
}

/// Publishes `item` into a reserved slot (tag first, then the offset with Release; for a
/// displaced slot the home's overflow count goes up first) and releases the reservation.
pub(crate) fn fill(p: &Participant, loc: &Loc, r: &Reserved, h: u64, item: u64) -> Result<(), Error> {
    let a = &**p.arena();
    place(a, loc, r.bucket, r.slot, h, item, Some(p))?;
    release(p, loc, r)
}

/// Publishes a key and counts it. `who` (a live writer; None when a reaper redoes a dead
/// one's work) records the segment while the slot and its counts disagree.
fn place(a: &Arena, loc: &Loc, bucket: u64, i: u64, h: u64, item: u64, who: Option<&Participant>) -> Result<(), Error> {
    if let Some(p) = who {
        p.counting(loc.seg)?;
    }
    if bucket != bucket_off(loc.seg, loc.b) {
        let o = overflow(a, loc.seg, loc.b)?;
        o.store(o.load(Ordering::Relaxed).saturating_add(1), Ordering::Release);
    }
    a.u8(bucket + i)?.store(tag_of(h), Ordering::Relaxed);
    slot(a, bucket, i)?.store(Arena::to_units(item), Ordering::Release);
    if who.is_some() {
        failpoint("count");
    }
    a.u32(loc.seg + G_COUNT)?.fetch_add(1, Ordering::Relaxed);
    if item::expiry_set(a, item)? {
        a.u32(loc.seg + G_EXPIRES)?.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(p) = who {
        p.counting(0)?;
    }
    Ok(())
}

/// Removes a found key (under its home lock) and uncounts it; `who` as in [`place`].
pub(crate) fn remove(a: &Arena, loc: &Loc, f: &Found, who: Option<&Participant>) -> Result<(), Error> {
    if let Some(p) = who {
        p.counting(loc.seg)?;
    }
    slot(a, f.bucket, f.slot)?.store(0, Ordering::Release);
    if f.bucket != bucket_off(loc.seg, loc.b) {
        let o = overflow(a, loc.seg, loc.b)?;
        o.store(o.load(Ordering::Relaxed).saturating_sub(1), Ordering::Release);
    }
    a.u32(loc.seg + G_COUNT)?.fetch_sub(1, Ordering::Relaxed);
    if f.item.expire_at(a)? != 0 {
        uncount_expiry(a, loc.seg)?;
    }
    if let Some(p) = who {
        p.counting(0)?;
    }
    Ok(())
}

/// One key fewer with an expiry. Saturating: a count is only ever low after a crash left it
/// flagged for a recount, and must not wrap meanwhile.
fn uncount_expiry(a: &Arena, seg: u64) -> Result<(), Error> {
    let _ = a.u32(seg + G_EXPIRES)?.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    Ok(())
}

/// A key of segment `seg` gained (`set`) or lost its expiry: one more or one fewer counted.
fn count_expiry_change(a: &Arena, seg: u64, set: bool) -> Result<(), Error> {
    if set {
        a.u32(seg + G_EXPIRES)?.fetch_add(1, Ordering::Relaxed);
        Ok(())
    } else {
        uncount_expiry(a, seg)
    }
}

/// Puts `item` in the slot of the found key `f` of segment `seg`, and counts a change
/// between them of whether an expiry is set (`before` for the item as the writer found
/// it, which an in-place change may since have rewritten; `item == f.item.off` for such
/// an in-place change, where only the count changes).
#[inline(always)]
pub(crate) fn replace_counted(p: &Participant, seg: u64, f: &Found, before: bool, item: u64) -> Result<(), Error> {
    let a = &**p.arena();
    let after = item::expiry_set(a, item)?;
    if before != after {
        return replace_recounted(p, seg, f, after, item);
    }
    if item != f.item.off {
        replace(a, f.bucket, f.slot, item)?;
    }
    Ok(())
}

/// [`replace_counted`] when the key gains or loses its expiry: the slot and the count
/// change under `counting`, as a new key's slot and count do in [`place`].
#[cold]
#[inline(never)]
fn replace_recounted(p: &Participant, seg: u64, f: &Found, after: bool, item: u64) -> Result<(), Error> {
    let a = &**p.arena();
    p.counting(seg)?;
    if item != f.item.off {
        replace(a, f.bucket, f.slot, item)?;
    }
    count_expiry_change(a, seg, after)?;
    p.counting(0)?;
    Ok(())
}

/// The arena's count-repair handler: a writer died while the counts of segment `seg` were
/// being changed. Only flags it (the reaper may be running inside someone's lock); the next
/// writer that locks a bucket of it recounts ([`recount`]).
pub(crate) fn count_unknown(a: &Arena, seg: u64) -> Result<(), larder_arena::Error> {
    a.u32(seg + G_DIRTY)?.store(1, Ordering::Release);
    Ok(())
}

fn dirty(a: &Arena, seg: u64) -> Result<bool, Error> {
    Ok(a.u32(seg + G_DIRTY)?.load(Ordering::Acquire) != 0)
}

/// Recomputes a flagged segment's key count and overflow counts from its slots, with every
/// bucket locked (no writer is between a slot and its counts meanwhile).
fn recount(p: &Participant, seg: u64) -> Result<(), Error> {
    let a = &**p.arena();
    lock_segment(p, seg)?;
    let r = (|| {
        if retired(a, seg)? || !dirty(a, seg)? {
            return Ok(());
        }
        let depth = seg_header(a, seg)?.0;
        let (mut count, mut expires, mut over, mut key) = (0u32, 0u32, [0u8; NB as usize], Vec::new());
        for b in 0..NB {
            let w = bucket_words(a, bucket_off(seg, b))?;
            for i in 0..SLOTS as usize {
                let units = w[SLOT_WORD + i].load(Ordering::Acquire);
                if units == 0 {
                    continue;
                }
                count += 1;
                let item = ItemView::read(a, Arena::from_units(units))?;
                expires += (item.expire_at(a)? != 0) as u32;
                item.key(a, &mut key)?;
                let home = bucket_of(key_hash(a.seed(), &key), depth);
                if home != b {
                    over[home as usize] = over[home as usize].saturating_add(1);
                }
            }
        }
        for (b, &n) in over.iter().enumerate() {
            overflow(a, seg, b as u64)?.store(n, Ordering::Release);
        }
        a.u32(seg + G_COUNT)?.store(count, Ordering::Relaxed);
        a.u32(seg + G_EXPIRES)?.store(expires, Ordering::Relaxed);
        a.u32(seg + G_DIRTY)?.store(0, Ordering::Release);
        Ok(())
    })();
    unlock_segment(p, seg)?;
    r
}

/// Keys in a segment: its count, or (flagged after a crash, not yet recounted) its slots.
pub(crate) fn live_count(a: &Arena, seg: u64) -> Result<u32, Error> {
    if !dirty(a, seg)? {
        return seg_count(a, seg);
    }
    let mut n = 0;
    for b in 0..NB {
        let w = bucket_words(a, bucket_off(seg, b))?;
        n += (0..SLOTS as usize).filter(|&i| w[SLOT_WORD + i].load(Ordering::Acquire) != 0).count() as u32;
    }
    Ok(n)
}

/// Whether a segment awaits a recount (for the checker).
pub(crate) fn count_pending(a: &Arena, seg: u64) -> Result<bool, Error> {
    dirty(a, seg)
}

pub(crate) fn replace(a: &Arena, bucket: u64, i: u64, item: u64) -> Result<(), Error> {
    slot(a, bucket, i)?.store(Arena::to_units(item), Ordering::Release);
    Ok(())
}

/// Keys of a segment with an expiry set. After a crash, until the segment's recount, it
/// may be off by the keys whose writers died.
pub(crate) fn seg_expires(a: &Arena, seg: u64) -> Result<u32, Error> {
    Ok(a.u32(seg + G_EXPIRES)?.load(Ordering::Relaxed))
}

pub(crate) fn seg_count(a: &Arena, seg: u64) -> Result<u32, Error> {
    Ok(a.u32(seg + G_COUNT)?.load(Ordering::Relaxed))
}

/// [`retired`] and [`dirty`] of a segment, read in that order with one bounds check (the
/// header's first seven words).
#[inline]
fn retired_dirty(a: &Arena, seg: u64) -> Result<(bool, bool), Error> {
    const _: () = assert!(G_RETIRED == 4 && G_DIRTY == 24);
    let w = a.u32s::<7>(seg)?;
    let retired = w[1].load(Ordering::Acquire) != 0;
    Ok((retired, w[6].load(Ordering::Acquire) != 0))
}

fn retired(a: &Arena, seg: u64) -> Result<bool, Error> {
    Ok(a.u32(seg + G_RETIRED)?.load(Ordering::Acquire) != 0)
}

/// Locks the home bucket of hash `h` in a segment that is current (not retired), and
/// returns where it is. Every write to a key holds its home bucket's lock.
pub(crate) fn lock_home(p: &Participant, db: u32, h: u64) -> Result<Loc, Error> {
    let a = &**p.arena();
    // A segment is retired only while its replacement is being published, so a retry sees
    // the new one; a corrupt arena could make this loop forever, hence the bound.
    let mut last_retired = None;
    for _ in 0..RETRIES {
        let loc = locate(a, db, h)?;
        p.lock(lock_word(a, loc.seg, loc.b)?);
        let (retired, dirty) = retired_dirty(a, loc.seg)?;
        if retired && last_retired == Some(loc.seg) {
            // A segment is marked retired with all its buckets locked, after the
            // directory stops naming it: having held one of them since, a second look at
            // the directory must find its replacement.
            p.unlock(lock_word(a, loc.seg, loc.b)?);
            return Err(Error::Corrupt("directory points at a retired segment"));
        }
        if !retired {
            if !dirty {
                return Ok(loc);
            }
            // A writer of this segment died mid-count: recount before writing, then retry.
            p.unlock(lock_word(a, loc.seg, loc.b)?);
            recount(p, loc.seg)?;
            continue;
        }
        p.unlock(lock_word(a, loc.seg, loc.b)?);
        last_retired = Some(loc.seg);
    }
    Err(Error::Corrupt("directory keeps pointing at a retired segment"))
}

/// Bound on retries that can only go on forever in a corrupt arena.
pub(crate) const RETRIES: u32 = 100_000;

pub(crate) fn unlock_home(p: &Participant, loc: &Loc) -> Result<(), Error> {
    p.unlock(lock_word(p.arena(), loc.seg, loc.b)?);
    Ok(())
}

/// The lock word offset of a home bucket (for callers that lock several keys in order).
pub(crate) fn home_lock_off(loc: &Loc) -> u64 {
    bucket_off(loc.seg, loc.b) + B_LOCK
}

fn lock_segment(p: &Participant, seg: u64) -> Result<(), Error> {
    let a = &**p.arena();
    for b in 0..NB {
        p.lock(lock_word(a, seg, b)?);
    }
    Ok(())
}

fn unlock_segment(p: &Participant, seg: u64) -> Result<(), Error> {
    let a = &**p.arena();
    for b in 0..NB {
        p.unlock(lock_word(a, seg, b)?);
    }
    Ok(())
}

/// A segment's buckets built in process memory: the target of a split or a merge, which
/// nobody can see yet. Placing a key is then a few plain stores (not atomics and a bounds
/// check per slot), and the finished segment goes into the arena in one copy ([`Build::write`]).
struct Build {
    depth: u32,
    /// Each bucket as it will lie in the arena: 12 tags, the lock word (0), 12 slots.
    buckets: Vec<[u8; 64]>,
    /// Slots used per bucket (filled in order, as [`reserve_slot`] would on a new segment).
    used: Vec<u8>,
    overflow: Vec<u8>,
    count: u32,
    expires: u32,
}

impl Build {
    fn new(depth: u32) -> Build {
        Build {
            depth,
            buckets: vec![[0; 64]; NB as usize],
            used: vec![0; NB as usize],
            overflow: vec![0; NB as usize],
            count: 0,
            expires: 0,
        }
    }

    /// Places item `units` of hash `h` (with an expiry set if `expiry`) in its home bucket
    /// or the next free one of its window; false if the whole window is full.
    fn place(&mut self, h: u64, units: u32, expiry: bool) -> bool {
        let home = bucket_of(h, self.depth) as usize;
        for d in 0..WINDOW as usize {
            let b = (home + d) % NB as usize;
            let i = self.used[b] as usize;
            if i < SLOTS as usize {
                let bucket = &mut self.buckets[b];
                bucket[i] = tag_of(h);
                bucket[B_SLOTS as usize + 4 * i..][..4].copy_from_slice(&units.to_le_bytes());
                self.used[b] += 1;
                if d > 0 {
                    self.overflow[home] = self.overflow[home].saturating_add(1);
                }
                self.count += 1;
                self.expires += expiry as u32;
                return true;
            }
        }
        false
    }

    /// Writes the buckets, overflow counts and key count into `seg`, a fresh segment (zeroed,
    /// depth and prefix set) of this depth that is not yet published.
    fn write(&self, a: &Arena, seg: u64) -> Result<(), Error> {
        a.write(seg + G_OVERFLOW, &self.overflow)?;
        a.write(seg + SEG_HDR, self.buckets.as_flattened())?;
        a.u32(seg + G_COUNT)?.store(self.count, Ordering::Relaxed);
        a.u32(seg + G_EXPIRES)?.store(self.expires, Ordering::Relaxed);
        Ok(())
    }
}

/// Places every key of the segments `from` into one of the builds `to` (the one
/// `pick(hash)` names), rehashing each key once. Fails if a window overflows.
fn copy_slots(a: &Arena, from: &[u64], to: &mut [Build], pick: impl Fn(u64) -> usize) -> Result<bool, Error> {
    let mut items = Vec::with_capacity((NB * SLOTS) as usize * from.len());
    for &seg in from {
        for b in 0..NB {
            let w = bucket_words(a, bucket_off(seg, b))?;
            for i in 0..SLOTS as usize {
                let units = w[SLOT_WORD + i].load(Ordering::Acquire);
                if units != 0 {
                    items.push(units);
                }
            }
        }
    }
    // Rehashing reads every item's key: a cache miss each. Fetching a few items ahead keeps
    // several misses in flight instead of one, which is most of a split's cost.
    const AHEAD: usize = 16;
    for &units in items.iter().take(AHEAD) {
        a.prefetch(Arena::from_units(units));
    }
    let mut key = Vec::new();
    for (n, &units) in items.iter().enumerate() {
        if let Some(&next) = items.get(n + AHEAD) {
            a.prefetch(Arena::from_units(next));
        }
        let item = ItemView::read(a, Arena::from_units(units))?;
        item.key(a, &mut key)?;
        let h = key_hash(a.seed(), &key);
        let target = to.get_mut(pick(h)).ok_or(Error::Corrupt("split target out of range"))?;
        if !target.place(h, units, item.expire_at(a)? != 0) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// What the splits this process has made cost so far. A benchmark reads the totals before
/// and after each stretch of inserts to show how evenly growth spreads its work over them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitTotals {
    /// Segments split.
    pub splits: u64,
    /// Keys those splits moved into new segments.
    pub keys: u64,
    /// Wall time spent inside them, locking the segment to publishing its halves (ns).
    pub nanos: u64,
}

/// Totals of the splits this process has made (every thread of it).
pub fn split_totals() -> SplitTotals {
    SplitTotals {
        splits: SPLITS.load(Ordering::Relaxed),
        keys: SPLIT_KEYS.load(Ordering::Relaxed),
        nanos: SPLIT_NANOS.load(Ordering::Relaxed),
    }
}

static SPLITS: AtomicU64 = AtomicU64::new(0);
static SPLIT_KEYS: AtomicU64 = AtomicU64::new(0);
static SPLIT_NANOS: AtomicU64 = AtomicU64::new(0);

/// Splits the segment of `loc` in two. Returns Ok even if another writer split it first.
pub(crate) fn split(p: &Participant, db: u32, loc: &Loc) -> Result<(), Error> {
    // Two clock reads per split of a few thousand keys: nothing next to the split itself.
    let t0 = std::time::Instant::now();
    let r = split_timed(p, db, loc);
    SPLIT_NANOS.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
    r
}

fn split_timed(p: &Participant, db: u32, loc: &Loc) -> Result<(), Error> {
    let seg = loc.seg;
    lock_segment(p, seg)?;
    let r = split_locked(p, db, seg);
    unlock_segment(p, seg)?;
    if let Ok(Some((old_dir, intent))) = r {
        p.free(intent)?;
        p.retire(seg)?;
        if let Some(d) = old_dir {
            p.retire(d)?;
        }
        return Ok(());
    }
    r.map(|_| ())
}

/// With every bucket of `seg` locked: builds the two halves and publishes them. Returns the
/// replaced directory (if it doubled) and the intent block, for the caller to reclaim.
#[allow(clippy::type_complexity)]
fn split_locked(p: &Participant, db: u32, seg: u64) -> Result<Option<(Option<u64>, u64)>, Error> {
    let a = &**p.arena();
    if retired(a, seg)? {
        return Ok(None);
    }
    let l = a.u32(seg + G_DEPTH)?.load(Ordering::Relaxed);
    if l >= MAX_DEPTH {
        return Err(Error::IndexFull);
    }
    let prefix = a.u64(seg + G_PREFIX)?.load(Ordering::Relaxed);
    let s0 = new_segment(p, l + 1, prefix << 1)?;
    let s1 = match new_segment(p, l + 1, prefix << 1 | 1) {
        Ok(s) => s,
        Err(e) => {
            p.free(s0)?;
            return Err(e);
        }
    };
    let bit = |h: u64| (h << l) >> 63;
    // One pass: each item is read (a cache miss) and hashed once, for whichever half takes it.
    let mut halves = [Build::new(l + 1), Build::new(l + 1)];
    if !copy_slots(a, &[seg], &mut halves, |h| bit(h) as usize)? {
        // Every key of the segment landed in one overfull window of a half: a flood of
        // colliding hashes. Refuse the write rather than corrupt anything.
        p.free(s0)?;
        p.free(s1)?;
        return Err(Error::IndexFull);
    }
    halves[0].write(a, s0)?;
    halves[1].write(a, s1)?;
    SPLITS.fetch_add(1, Ordering::Relaxed);
    SPLIT_KEYS.fetch_add((halves[0].count + halves[1].count) as u64, Ordering::Relaxed);
    let root = db_root(db);
    let dir_lock = a.u32(root + R_LOCK)?;
    p.lock(dir_lock);
    // Until the intent is recorded nothing is published: a failure before it (no memory for
    // a doubled directory or the intent) frees what this split allocated.
    let mut unpublished: Vec<u64> = vec![s0, s1];
    let mut published = false;
    let r = (|| {
        // A FLUSHDB that swapped the directory while we built the halves is waiting for
        // this segment's locks to drain it: the new directory does not name it, and the
        // halves must not go into it.
        if !still_named(a, db, seg, l, prefix)? {
            return Ok(None);
        }
        let (dir, g) = dir_word(a, db)?;
        let (new_dir, new_g) = if l == g {
            let nd = p.alloc(8 << (g + 1))?;
            unpublished.push(nd);
            for i in 0..(1u64 << (g + 1)) {
                a.u64(nd + i * 8)?.store(a.u64(dir + (i >> 1) * 8)?.load(Ordering::Acquire), Ordering::Relaxed);
            }
            (nd, g + 1)
        } else {
            (0, g)
        };
        let intent = p.alloc(64)?;
        unpublished.push(intent);
        a.u32(intent)?.store(K_SPLIT, Ordering::Relaxed);
        a.u32(intent + 4)?.store(db, Ordering::Relaxed);
        for (i, v) in [seg, s0, s1, l as u64, new_dir, new_g as u64].into_iter().enumerate() {
            a.u64(intent + 8 + i as u64 * 8)?.store(v, Ordering::Relaxed);
        }
        published = true;
        p.set_intent(intent)?;
        redo_split(a, intent)?;
        p.clear_intent()?;
        Ok(Some((if new_dir != 0 { Some(dir) } else { None }, intent)))
    })();
    p.unlock(dir_lock);
    if !published {
        for off in unpublished {
            let _ = p.free(off);
        }
    }
    r
}

/// Under `db`'s directory lock: whether its directory still names `seg` (depth `l`, prefix
/// `prefix`). A split or merge checks it before publishing: FLUSHDB replaces the directory
/// under that lock and only then fences the old segments, so a split or merge that locked
/// its segments first finds, at the directory lock, a directory that no longer has them.
fn still_named(a: &Arena, db: u32, seg: u64, l: u32, prefix: u64) -> Result<bool, Error> {
    let (dir, g) = dir_word(a, db)?;
    if g < l {
        return Ok(false);
    }
    let (s, el) = entry(a, dir, prefix << (g - l))?;
    if s == seg && el != l {
        // Not a race: no directory names a segment at a depth its header does not have.
        return Err(Error::Corrupt("directory names a segment at another depth"));
    }
    Ok(s == seg)
}

/// The directory stores of a split; idempotent, so a reaper can repeat them.
fn redo_split(a: &Arena, intent: u64) -> Result<(), Error> {
    let db = a.u32(intent + 4)?.load(Ordering::Relaxed);
    let f = |i: u64| a.u64(intent + 8 + i * 8).map(|w| w.load(Ordering::Relaxed));
    let (seg, s0, s1, l, new_dir, new_g) = (f(0)?, f(1)?, f(2)?, f(3)? as u32, f(4)?, f(5)? as u32);
    if new_dir != 0 {
        a.u64(db_root(db) + R_DIR)?.store((new_g as u64) << 32 | Arena::to_units(new_dir) as u64, Ordering::Release);
    }
    let (dir, g) = dir_word(a, db)?;
    if g <= l {
        return Err(Error::Corrupt("split intent deeper than its directory"));
    }
    let prefix = a.u64(seg + G_PREFIX)?.load(Ordering::Relaxed);
    let span = 1u64 << (g - l);
    let start = prefix << (g - l);
    for i in start..start + span {
        let target = if i < start + span / 2 { s0 } else { s1 };
        a.u64(dir + i * 8)?.store(make_entry(target, l + 1), Ordering::Release);
        if i == start + span / 2 {
            failpoint("split-publish");
        }
    }
    a.u32(seg + G_RETIRED)?.store(1, Ordering::Release);
    Ok(())
}

/// Merges the segment holding hash `h` with its buddy if both are at the same depth and
/// together nearly empty. Returns whether it merged.
pub(crate) fn try_merge(p: &Participant, db: u32, h: u64) -> Result<bool, Error> {
    let a = &**p.arena();
    let loc = locate(a, db, h)?;
    if loc.depth == 0 {
        return Ok(false);
    }
    let l = loc.depth;
    let prefix = a.u64(loc.seg + G_PREFIX)?.load(Ordering::Relaxed);
    let buddy_prefix = prefix ^ 1;
    let buddy_h = buddy_prefix << (64 - l);
    let bl = locate(a, db, buddy_h)?;
    if bl.depth != l || bl.seg == loc.seg {
        return Ok(false);
    }
    if seg_count(a, loc.seg)? + seg_count(a, bl.seg)? >= MERGE_BELOW {
        return Ok(false);
    }
    let (first, second) = if prefix & 1 == 0 { (loc.seg, bl.seg) } else { (bl.seg, loc.seg) };
    let (lo, hi) = if first < second { (first, second) } else { (second, first) };
    lock_segment(p, lo)?;
    lock_segment(p, hi)?;
    let r = merge_locked(p, db, first, second, l);
    unlock_segment(p, hi)?;
    unlock_segment(p, lo)?;
    match r? {
        Some(intent) => {
            p.free(intent)?;
            p.retire(first)?;
            p.retire(second)?;
            Ok(true)
        }
        None => Ok(false),
    }
}

fn merge_locked(p: &Participant, db: u32, s0: u64, s1: u64, l: u32) -> Result<Option<u64>, Error> {
    let a = &**p.arena();
    if retired(a, s0)?
        || retired(a, s1)?
        || a.u32(s0 + G_DEPTH)?.load(Ordering::Relaxed) != l
        || a.u32(s1 + G_DEPTH)?.load(Ordering::Relaxed) != l
        || seg_count(a, s0)? + seg_count(a, s1)? >= MERGE_BELOW
    {
        return Ok(None);
    }
    let prefix = a.u64(s0 + G_PREFIX)?.load(Ordering::Relaxed) >> 1;
    let m = new_segment(p, l - 1, prefix)?;
    let mut merged = [Build::new(l - 1)];
    if !copy_slots(a, &[s0, s1], &mut merged, |_| 0)? {
        p.free(m)?;
        return Ok(None);
    }
    merged[0].write(a, m)?;
    let dir_lock = a.u32(db_root(db) + R_LOCK)?;
    p.lock(dir_lock);
    let r = (|| -> Result<Option<u64>, Error> {
        // As in a split: a FLUSHDB may have swapped the directory meanwhile.
        let own_prefix = |seg: u64| a.u64(seg + G_PREFIX).map(|w| w.load(Ordering::Relaxed));
        if !(still_named(a, db, s0, l, own_prefix(s0)?)? && still_named(a, db, s1, l, own_prefix(s1)?)?) {
            p.free(m)?;
            return Ok(None);
        }
        let intent = match p.alloc(64) {
            Ok(i) => i,
            Err(e) => {
                // Nothing is published yet: the merged copy is ours to free.
                p.free(m)?;
                return Err(e.into());
            }
        };
        a.u32(intent)?.store(K_MERGE, Ordering::Relaxed);
        a.u32(intent + 4)?.store(db, Ordering::Relaxed);
        for (i, v) in [s0, s1, m, l as u64].into_iter().enumerate() {
            a.u64(intent + 8 + i as u64 * 8)?.store(v, Ordering::Relaxed);
        }
        p.set_intent(intent)?;
        redo_merge(a, intent)?;
        p.clear_intent()?;
        Ok(Some(intent))
    })();
    p.unlock(dir_lock);
    r
}

fn redo_merge(a: &Arena, intent: u64) -> Result<(), Error> {
    let db = a.u32(intent + 4)?.load(Ordering::Relaxed);
    let f = |i: u64| a.u64(intent + 8 + i * 8).map(|w| w.load(Ordering::Relaxed));
    let (s0, s1, m, l) = (f(0)?, f(1)?, f(2)?, f(3)? as u32);
    let (dir, g) = dir_word(a, db)?;
    if l == 0 || l > g {
        return Err(Error::Corrupt("merge intent depth out of range"));
    }
    let prefix = a.u64(m + G_PREFIX)?.load(Ordering::Relaxed);
    let span = 1u64 << (g - (l - 1));
    let start = prefix << (g - (l - 1));
    for i in start..start + span {
        a.u64(dir + i * 8)?.store(make_entry(m, l - 1), Ordering::Release);
        if i == start + span / 2 {
            failpoint("merge-publish");
        }
    }
    a.u32(s0 + G_RETIRED)?.store(1, Ordering::Release);
    a.u32(s1 + G_RETIRED)?.store(1, Ordering::Release);
    Ok(())
}

/// One key of a multi-key publication: where its slot is and what goes in it.
pub(crate) struct Placement {
    pub loc: Loc,
    /// The slot holding the key's current item, if any.
    pub found: Option<Found>,
    /// The slot reserved for it if it is new.
    pub free: Option<Reserved>,
    pub item: u64,
}

/// Locks the home buckets of `hashes` (sorted by address, no duplicates) in current
/// segments; the caller is pinned. Returns the locations; `locked` holds the lock words
/// taken.
pub(crate) fn lock_many(p: &Participant, db: u32, hashes: &[u64], locked: &mut Vec<u64>) -> Result<Vec<Loc>, Error> {
    let a = &**p.arena();
    let mut last_retired = None;
    for _ in 0..RETRIES {
        let locs: Vec<Loc> = hashes.iter().map(|&h| locate(a, db, h)).collect::<Result<_, _>>()?;
        locked.clear();
        locked.extend(locs.iter().map(home_lock_off));
        locked.sort_unstable();
        locked.dedup();
        for &w in locked.iter() {
            p.lock(a.u32(w)?);
        }
        let mut stale = None;
        for l in &locs {
            if retired(a, l.seg)? {
                stale = Some(l.seg);
                break;
            }
        }
        let Some(seg) = stale else { return Ok(locs) };
        unlock_many(p, locked)?;
        // As in `lock_home`: having held a lock of a retired segment, the directory no
        // longer names it (and, pinned, we see no new segment at its offset). Named again,
        // the directory is corrupt: say so now, not after RETRIES yields (seconds, and far
        // longer on a busy machine).
        if last_retired == Some(seg) {
            return Err(Error::Corrupt("directory points at a retired segment"));
        }
        last_retired = Some(seg);
        std::thread::yield_now();
    }
    Err(Error::Corrupt("directory keeps pointing at a retired segment"))
}

pub(crate) fn unlock_many(p: &Participant, locked: &[u64]) -> Result<(), Error> {
    let a = &**p.arena();
    for &w in locked.iter().rev() {
        p.unlock(a.u32(w)?);
    }
    Ok(())
}

/// Reserves a slot for each new key. On `Full` or `Busy` for key k, every reservation made
/// so far is released and (k, room) returned.
pub(crate) fn reserve_many(
    p: &Participant,
    places: &mut [Placement],
    held: &[u64],
) -> Result<Option<(usize, Room)>, Error> {
    let mut taken: Vec<(u64, u64)> = Vec::new();
    // The home locks, and the displaced buckets earlier keys locked: a later key whose
    // window passes one of those may use its free slots (trying its lock again would fail
    // against our own hold, and report Busy on every retry).
    let mut held: Vec<u64> = held.to_vec();
    for k in 0..places.len() {
        if places[k].found.is_some() {
            continue;
        }
        match reserve_slot(p, &places[k].loc, &taken, &held)? {
            Room::Slot(r) => {
                taken.push((r.bucket, r.slot));
                if let Some(b) = r.locked {
                    held.push(bucket_off(places[k].loc.seg, b) + B_LOCK);
                }
                places[k].free = Some(r);
            }
            other => {
                for pl in places.iter_mut() {
                    if let Some(r) = pl.free.take() {
                        release(p, &pl.loc, &r)?;
                    }
                }
                return Ok(Some((k, other)));
            }
        }
    }
    Ok(None)
}

/// Records an intent for a multi-key set (each item with the slot it replaces or fills) and
/// publishes it; releases the reservations.
pub(crate) fn publish_many(p: &Participant, db: u32, places: &[Placement]) -> Result<(), Error> {
    let a = &**p.arena();
    let intent = p.alloc(16 + 32 * places.len() as u64)?;
    a.u32(intent)?.store(K_MSET, Ordering::Relaxed);
    a.u32(intent + 4)?.store(db, Ordering::Relaxed);
    a.u64(intent + 8)?.store(places.len() as u64, Ordering::Relaxed);
    for (i, pl) in places.iter().enumerate() {
        let e = intent + 16 + 32 * i as u64;
        let (bucket, slot, fresh) = match (&pl.found, &pl.free) {
            (Some(f), _) => (f.bucket, f.slot, 0),
            (None, Some(r)) => (r.bucket, r.slot, 1),
            (None, None) => return Err(Error::Corrupt("new key without a reserved slot")),
        };
        a.u64(e)?.store(pl.item, Ordering::Relaxed);
        a.u64(e + 8)?.store(bucket, Ordering::Relaxed);
        a.u64(e + 16)?.store(slot | fresh << 32, Ordering::Relaxed);
        a.u64(e + 24)?.store(pl.loc.seg | (pl.loc.b << 48), Ordering::Relaxed);
    }
    p.set_intent(intent)?;
    redo_mset(a, intent)?;
    p.clear_intent()?;
    for pl in places {
        if let Some(r) = &pl.free {
            release(p, &pl.loc, r)?;
        }
    }
    p.free(intent)?;
    Ok(())
}

/// Publishes each item of a multi-key set intent into its recorded slot. Repeating it is
/// harmless: a slot already holding the item is left alone.
fn redo_mset(a: &Arena, intent: u64) -> Result<(), Error> {
    let n = a.u64(intent + 8)?.load(Ordering::Relaxed);
    if n > (a.capacity() / 32) {
        return Err(Error::Corrupt("intent length out of range"));
    }
    let mut key = Vec::new();
    for i in 0..n {
        if i == n / 2 {
            failpoint("mset-publish");
        }
        let e = intent + 16 + 32 * i;
        let item = a.u64(e)?.load(Ordering::Relaxed);
        let bucket = a.u64(e + 8)?.load(Ordering::Relaxed);
        let w = a.u64(e + 16)?.load(Ordering::Relaxed);
        let (slot_i, fresh) = (w & 0xffff_ffff, w >> 32 == 1);
        let segb = a.u64(e + 24)?.load(Ordering::Relaxed);
        let loc = Loc { seg: segb & ((1 << 48) - 1), depth: 0, b: segb >> 48 };
        if slot_i >= SLOTS || loc.b >= NB {
            return Err(Error::Corrupt("intent slot out of range"));
        }
        let cur = slot(a, bucket, slot_i)?.load(Ordering::Acquire);
        if cur == Arena::to_units(item) {
            // Published before the writer died, but maybe not counted (a new key in the key
            // count, a replaced one in the expiry count).
            count_unknown(a, loc.seg)?;
            continue;
        }
        if fresh {
            let view = ItemView::read(a, item)?;
            view.key(a, &mut key)?;
            place(a, &loc, bucket, slot_i, key_hash(a.seed(), &key), item, None)?;
        } else {
            let before = cur != 0 && ItemView::read(a, Arena::from_units(cur))?.expire_at(a)? != 0;
            replace(a, bucket, slot_i, item)?;
            let after = item::expiry_set(a, item)?;
            if before != after {
                count_expiry_change(a, loc.seg, after)?;
            }
        }
    }
    Ok(())
}

/// Finishes a dead participant's intent (installed as the arena's recovery handler).
pub(crate) fn recover(a: &Arena, intent: u64) -> Result<(), larder_arena::Error> {
    let kind = a.u32(intent)?.load(Ordering::Relaxed);
    let r = match kind {
        K_SPLIT => redo_split(a, intent),
        K_MERGE => redo_merge(a, intent),
        K_MSET => redo_mset(a, intent),
        K_SWAP => redo_swap(a, intent),
        _ => Err(Error::Corrupt("unknown intent")),
    };
    r.map_err(|e| match e {
        Error::Arena(e) => e,
        _ => larder_arena::Error::Geometry("intent could not be redone"),
    })
}

/// Every current segment of a database, once each, in hash order: (segment, depth).
pub(crate) fn segments(a: &Arena, db: u32) -> Result<Vec<(u64, u32)>, Error> {
    let (dir, g) = directory(a, db)?;
    let mut out = Vec::new();
    let mut i = 0u64;
    while i < (1u64 << g) {
        let (seg, l) = entry(a, dir, i)?;
        if l > g {
            return Err(Error::Corrupt("segment deeper than its directory"));
        }
        out.push((seg, l));
        i += 1u64 << (g - l);
    }
    Ok(out)
}

/// A database's directory and global depth, for walks of every entry (the checker,
/// [`segments`], SWAPDB's clone): checked to fit in the directory's block, or a corrupt
/// depth would walk them through whatever follows it, up to 2^48 entries. (Lookups, which
/// read one entry, use `dir_word`.)
pub(crate) fn directory(a: &Arena, db: u32) -> Result<(u64, u32), Error> {
    let (dir, g) = dir_word(a, db)?;
    if a.block_size(dir)? < 8 << g {
        return Err(Error::Corrupt("directory larger than its block"));
    }
    Ok((dir, g))
}

pub(crate) fn seg_header(a: &Arena, seg: u64) -> Result<(u32, bool, u32, u64), Error> {
    let depth = a.u32(seg + G_DEPTH)?.load(Ordering::Relaxed);
    if depth > MAX_DEPTH {
        return Err(Error::Corrupt("segment depth out of range"));
    }
    Ok((depth, retired(a, seg)?, seg_count(a, seg)?, a.u64(seg + G_PREFIX)?.load(Ordering::Relaxed)))
}

pub(crate) fn dir_entry(a: &Arena, dir: u64, i: u64) -> Result<(u64, u32), Error> {
    entry(a, dir, i)
}

pub(crate) fn bucket_lock_word(a: &Arena, seg: u64, b: u64) -> Result<u32, Error> {
    Ok(lock_word(a, seg, b)?.load(Ordering::Relaxed))
}

pub(crate) fn tag_at(a: &Arena, bucket: u64, i: u64) -> Result<u8, Error> {
    Ok(a.u8(bucket + i)?.load(Ordering::Relaxed))
}

pub(crate) fn expected_tag(h: u64) -> u8 {
    tag_of(h)
}

/// Replaces a database's whole index with an empty one. Returns the old segments: the
/// caller fences and reclaims them.
pub(crate) fn swap_in_empty(p: &Participant, db: u32) -> Result<Vec<(u64, u32)>, Error> {
    let a = &**p.arena();
    let dir_lock = a.u32(db_root(db) + R_LOCK)?;
    p.lock(dir_lock);
    let r = (|| -> Result<_, Error> {
        let old = segments(a, db)?;
        let mut sorted: Vec<u64> = old.iter().map(|&(s, _)| s).collect();
        sorted.sort_unstable();
        named_once(&sorted)?;
        let (old_dir, _) = dir_word(a, db)?;
        let (dir, _) = new_dir_with_empty_segment(p)?;
        a.u64(db_root(db) + R_DIR)?.store(Arena::to_units(dir) as u64, Ordering::Release);
        Ok((old, old_dir))
    })();
    p.unlock(dir_lock);
    let (old, old_dir) = r?;
    p.retire(old_dir)?;
    Ok(old)
}

/// Every segment belongs to one database and one run of its directory. One named twice
/// (sorted `segs`; a corrupt directory) would be fenced twice and its items retired twice,
/// so whole-index operations (FLUSHDB, SWAPDB) refuse it.
fn named_once(segs: &[u64]) -> Result<(), Error> {
    if segs.windows(2).any(|w| w[0] == w[1]) {
        return Err(Error::Corrupt("a segment is named twice in the directories"));
    }
    Ok(())
}

/// Fences writers out of a segment that is no longer in the directory (locks every bucket,
/// marks it retired) and returns the items it held.
pub(crate) fn drain_segment(p: &Participant, seg: u64) -> Result<Vec<u64>, Error> {
    let a = &**p.arena();
    lock_segment(p, seg)?;
    a.u32(seg + G_RETIRED)?.store(1, Ordering::Release);
    let mut items = Vec::new();
    for b in 0..NB {
        let bucket = bucket_off(seg, b);
        for i in 0..SLOTS {
            let u = slot(a, bucket, i)?.load(Ordering::Acquire);
            if u != 0 {
                items.push(Arena::from_units(u));
            }
        }
    }
    unlock_segment(p, seg)?;
    Ok(items)
}

/// Swaps the indexes of two databases (SWAPDB), atomically for readers and writers.
///
/// Exchanging the two directory words alone is not enough: a writer (or a splitter) that
/// located its segment through db `d1` just before the exchange would lock it afterwards,
/// find it current, and write into what is by then `d2`. So every segment of both databases
/// is fenced the way a split fences one: with all their buckets locked (in address order,
/// like every multi-bucket writer) and both directory locks held (in index order, after the
/// bucket locks, like split and merge), each segment is cloned (slots only: the items are
/// shared), the clones are published under the other database's directory word, and the
/// originals are marked retired. A writer waiting on an old bucket then sees it retired and
/// relocates through the new directory; readers keep reading the frozen originals until
/// their epoch ends. Cost: one 16 KiB copy per segment, no key is rehashed.
pub(crate) fn swap_dbs(p: &Participant, d1: u32, d2: u32) -> Result<(), Error> {
    let a = &**p.arena();
    if d1 == d2 {
        return Ok(());
    }
    let (lo, hi) = if d1 < d2 { (d1, d2) } else { (d2, d1) };
    let mut last_stale: Vec<u64> = Vec::new();
    for _ in 0..RETRIES {
        let seg_lo = segments(a, lo)?;
        let seg_hi = segments(a, hi)?;
        let mut segs: Vec<u64> = seg_lo.iter().chain(seg_hi.iter()).map(|&(s, _)| s).collect();
        segs.sort_unstable();
        named_once(&segs)?;
        for &s in &segs {
            lock_segment(p, s)?;
        }
        let unlock_segs = |segs: &[u64]| -> Result<(), Error> {
            for &s in segs.iter().rev() {
                unlock_segment(p, s)?;
            }
            Ok(())
        };
        // A retired segment was split, merged or flushed before we got its locks: start
        // again from the current directories.
        let mut stale = Vec::new();
        for &s in &segs {
            if retired(a, s)? {
                stale.push(s);
            }
        }
        if !stale.is_empty() {
            unlock_segs(&segs)?;
            // One we held locked and found retired, named again: a corrupt directory (see
            // `lock_home`).
            if stale.iter().any(|s| last_stale.contains(s)) {
                return Err(Error::Corrupt("directory points at a retired segment"));
            }
            last_stale = stale;
            std::thread::yield_now();
            continue;
        }
        let (lock_lo, lock_hi) = (a.u32(db_root(lo) + R_LOCK)?, a.u32(db_root(hi) + R_LOCK)?);
        p.lock(lock_lo);
        p.lock(lock_hi);
        // FLUSHDB replaces a directory before it retires the old segments: check the
        // directories still name exactly the segments we hold.
        let r = if segments(a, lo)? != seg_lo || segments(a, hi)? != seg_hi {
            Ok(None)
        } else {
            swap_locked(p, lo, hi).map(Some)
        };
        p.unlock(lock_hi);
        p.unlock(lock_lo);
        unlock_segs(&segs)?;
        match r? {
            None => {
                std::thread::yield_now();
                continue;
            }
            Some((intent, old_dirs)) => {
                p.free(intent)?;
                for s in segs {
                    p.retire(s)?;
                }
                for d in old_dirs {
                    p.retire(d)?;
                }
                return Ok(());
            }
        }
    }
    Err(Error::Corrupt("directory keeps changing under SWAPDB"))
}

/// With every segment of both databases and both directory locks held: builds the clones
/// and publishes them crosswise. Returns the intent block and the old directories, for the
/// caller to reclaim once the locks are released.
fn swap_locked(p: &Participant, lo: u32, hi: u32) -> Result<(u64, [u64; 2]), Error> {
    let a = &**p.arena();
    let mut built: Vec<u64> = Vec::new();
    let prepared = (|| -> Result<(u64, u64, u64), Error> {
        let (new_lo, old_lo) = clone_index(p, lo, &mut built)?;
        let (new_hi, old_hi) = clone_index(p, hi, &mut built)?;
        let intent = p.alloc(64)?;
        built.push(intent);
        a.u32(intent)?.store(K_SWAP, Ordering::Relaxed);
        a.u32(intent + 4)?.store(lo, Ordering::Relaxed);
        a.u64(intent + 8)?.store(hi as u64, Ordering::Relaxed);
        // lo gets hi's index and hi gets lo's.
        for (i, v) in [new_hi, new_lo, old_lo, old_hi].into_iter().enumerate() {
            a.u64(intent + 16 + i as u64 * 8)?.store(v, Ordering::Relaxed);
        }
        Ok((intent, old_lo, old_hi))
    })();
    let (intent, old_lo, old_hi) = match prepared {
        Ok(x) => x,
        Err(e) => {
            // Nothing is published yet: give every block back.
            for off in built {
                p.free(off)?;
            }
            return Err(e);
        }
    };
    p.set_intent(intent)?;
    redo_swap(a, intent)?;
    p.clear_intent()?;
    let dir = |w: u64| Arena::from_units(w as u32);
    Ok((intent, [dir(old_lo), dir(old_hi)]))
}

/// A copy of a database's directory over copies of its segments (not yet published).
/// Returns (new directory word, current directory word); `built` collects every block
/// allocated, so a failure can free them.
fn clone_index(p: &Participant, db: u32, built: &mut Vec<u64>) -> Result<(u64, u64), Error> {
    let a = &**p.arena();
    let old_word = a.u64(db_root(db) + R_DIR)?.load(Ordering::Acquire);
    let (dir, g) = directory(a, db)?;
    let nd = p.alloc(8 << g)?;
    built.push(nd);
    let mut i = 0u64;
    while i < (1u64 << g) {
        let (seg, l) = entry(a, dir, i)?;
        if l > g {
            return Err(Error::Corrupt("segment deeper than its directory"));
        }
        let copy = clone_segment(p, seg)?;
        built.push(copy);
        let span = 1u64 << (g - l);
        for j in i..i + span {
            a.u64(nd + j * 8)?.store(make_entry(copy, l), Ordering::Relaxed);
        }
        i += span;
    }
    Ok(((g as u64) << 32 | Arena::to_units(nd) as u64, old_word))
}

/// A copy of a fully locked segment: header, overflow counts, tags and slots; lock words
/// start free and the copy is current.
fn clone_segment(p: &Participant, seg: u64) -> Result<u64, Error> {
    let a = &**p.arena();
    let (depth, _, _, prefix) = seg_header(a, seg)?;
    let copy = new_segment(p, depth, prefix)?;
    a.u32(copy + G_COUNT)?.store(seg_count(a, seg)?, Ordering::Relaxed);
    a.u32(copy + G_EXPIRES)?.store(a.u32(seg + G_EXPIRES)?.load(Ordering::Relaxed), Ordering::Relaxed);
    for b in 0..NB {
        overflow(a, copy, b)?.store(overflow(a, seg, b)?.load(Ordering::Acquire), Ordering::Relaxed);
        let (from, to) = (bucket_off(seg, b), bucket_off(copy, b));
        a.u64(to)?.store(a.u64(from)?.load(Ordering::Acquire), Ordering::Relaxed);
        a.u32(to + 8)?.store(a.u32(from + 8)?.load(Ordering::Acquire), Ordering::Relaxed);
        for i in 0..SLOTS {
            slot(a, to, i)?.store(slot(a, from, i)?.load(Ordering::Acquire), Ordering::Relaxed);
        }
    }
    Ok(copy)
}

/// The stores of a SWAPDB: both directory words, then every old segment marked retired.
/// Idempotent, so a reaper can repeat it.
fn redo_swap(a: &Arena, intent: u64) -> Result<(), Error> {
    let lo = a.u32(intent + 4)?.load(Ordering::Relaxed);
    let hi = a.u64(intent + 8)?.load(Ordering::Relaxed);
    let f = |i: u64| a.u64(intent + 16 + i * 8).map(|w| w.load(Ordering::Relaxed));
    let (new_lo, new_hi, old_lo, old_hi) = (f(0)?, f(1)?, f(2)?, f(3)?);
    let ndb = ndb(a)?.unwrap_or(0);
    if lo >= ndb || hi >= ndb as u64 {
        return Err(Error::Corrupt("swap intent names a database out of range"));
    }
    a.u64(db_root(lo) + R_DIR)?.store(new_lo, Ordering::Release);
    failpoint("swap-publish");
    a.u64(db_root(hi as u32) + R_DIR)?.store(new_hi, Ordering::Release);
    for w in [old_lo, old_hi] {
        let (dir, g) = (Arena::from_units(w as u32), (w >> 32) as u32);
        if g > MAX_DEPTH {
            return Err(Error::Corrupt("directory depth out of range"));
        }
        let mut i = 0u64;
        while i < (1u64 << g) {
            let (seg, l) = entry(a, dir, i)?;
            if l > g {
                return Err(Error::Corrupt("segment deeper than its directory"));
            }
            a.u32(seg + G_RETIRED)?.store(1, Ordering::Release);
            i += 1u64 << (g - l);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An MSET of two new keys whose home is full, where the one bucket of the window with
    /// room has two free slots: the first key locks that bucket for its displaced slot, and
    /// the second must use the lock it holds, not try it again (which failed as Busy on every
    /// retry, and the MSET ended with "index is full").
    #[test]
    fn mset_keys_displaced_into_one_bucket_share_its_lock() {
        let store = crate::Store::open(crate::StoreConfig::small_for_tests()).unwrap();
        let seed = store.arena().seed();
        let mut h = store.handle().unwrap();
        assert_eq!(segments(store.arena(), 0).unwrap().len(), 1, "one segment of depth 0");
        // Keys by home bucket (depth 0: the position's top 8 bits).
        let mut by_home: Vec<Vec<Vec<u8>>> = vec![Vec::new(); NB as usize];
        let mut i = 0u64;
        while (10..18).any(|b| by_home[b].len() < 14) {
            let k = format!("k{i}").into_bytes();
            by_home[bucket_of(key_hash(seed, &k), 0) as usize].push(k);
            i += 1;
        }
        let d = crate::SetOptions::default();
        let fill = |h: &mut crate::Handle, b: usize, n: usize| {
            for k in &by_home[b][..n] {
                h.set(0, k, b"v", &d).unwrap();
            }
        };
        fill(&mut h, 10, 12);
        fill(&mut h, 11, 10);
        for b in 12..17 + 1 {
            fill(&mut h, b, 12);
        }
        let (a, b) = (&by_home[10][12], &by_home[10][13]);
        assert!(h.mset(0, &[(a.as_slice(), b"A".as_slice()), (b.as_slice(), b"B".as_slice())], false).unwrap());
        assert_eq!(h.get(0, a).unwrap().as_deref(), Some(&b"A"[..]));
        assert_eq!(h.get(0, b).unwrap().as_deref(), Some(&b"B"[..]));
        assert_eq!(segments(store.arena(), 0).unwrap().len(), 1, "no split was needed");
        let r = store.check().unwrap();
        assert!(r.ok(), "{:?}", r.problems);
        assert_eq!(r.held_locks, 0);
    }

    /// An engine root written by another engine layout (or garbage) is refused, not
    /// initialised over: the keys there would be lost and their memory leaked.
    #[test]
    fn foreign_engine_magic_is_an_error() {
        let store = crate::Store::open(crate::StoreConfig::small_for_tests()).unwrap();
        let arena = store.arena().clone();
        assert_eq!(ndb(&arena).unwrap(), Some(16));
        arena.u32(E_MAGIC).unwrap().store(u32::from_le_bytes(*b"LKS0"), Ordering::Release);
        assert!(matches!(ndb(&arena), Err(Error::Corrupt(_))));
        let again = crate::Store::from_arena(arena.clone(), 16, std::sync::Arc::new(crate::NoJournal));
        assert!(matches!(again, Err(Error::Corrupt(_))));
        assert_eq!(arena.u32(E_MAGIC).unwrap().load(Ordering::Relaxed), u32::from_le_bytes(*b"LKS0"));
    }

    /// The curve is 2^c − 1 to within rounding at every joint, and the bent positions keep
    /// their order (a SCAN cursor is a position) and never wrap.
    #[test]
    fn spiral_follows_two_to_the_c_and_keeps_order() {
        assert_eq!(CURVE[0], 0);
        for (i, &t) in CURVE.iter().enumerate() {
            let exact = (2f64.powf(i as f64 / CURVE_PIECES as f64) - 1.0) * 2f64.powi(64);
            assert!((t as f64 - exact).abs() < 1e6, "joint {i}: {t:#x} vs {exact}");
            if i < CURVE_PIECES as usize {
                assert_eq!(spiral((i as u64) << 58), t);
            }
        }
        assert!(CURVE.windows(2).all(|w| w[0] < w[1]));
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut prev = (0u64, 0u64);
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            for c in [x, x.wrapping_add(1), x | 0x03ff_ffff_ffff_ffff, x & !0x03ff_ffff_ffff_ffff] {
                let (a, b) = (prev.0.min(c), prev.0.max(c));
                assert!(spiral(a) <= spiral(b), "{a:#x} -> {:#x}, {b:#x} -> {:#x}", spiral(a), spiral(b));
                assert!(spiral(c) <= CURVE[64]);
                prev = (c, spiral(c));
            }
        }
        assert!(spiral(u64::MAX) > CURVE[63] && spiral(u64::MAX) <= CURVE[64]);
    }

    /// Keys are twice as dense at the start of the space as at its end: the share of uniform
    /// hashes that land below position y is log2(1 + y).
    #[test]
    fn spiral_density_falls_by_half_across_the_space() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let n = 400_000;
        let mut below = [0u32; 4];
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let y = spiral(x);
            for (q, b) in below.iter_mut().enumerate() {
                *b += (y < ((q as u64 + 1) << 62).wrapping_sub((q == 3) as u64)) as u32;
            }
        }
        for (q, &b) in below.iter().enumerate() {
            let want = (1.0 + (q + 1) as f64 / 4.0).log2();
            let got = b as f64 / n as f64;
            assert!((got - want).abs() < 0.005, "below {}/4: {got} vs {want}", q + 1);
        }
        // The tag byte stays uniform: no value much more than 1/256 of keys.
        let mut tags = [0u32; 256];
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            tags[tag_of(spiral(x)) as usize] += 1;
        }
        let most = *tags.iter().max().unwrap() as f64 / n as f64;
        assert!(most < 1.25 / 256.0, "most common tag takes {most}");
    }

    /// The SWAR tag comparison agrees with comparing the twelve bytes one at a time, whatever
    /// the lock word (byte 12..16) holds.
    #[test]
    fn tag_hits_matches_bytewise() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..20_000 {
            let mut bytes = [0u8; 16];
            for b in bytes.iter_mut() {
                // Few distinct values, so that matches (and zero tags) are common.
                *b = if round % 2 == 0 { (next() % 4) as u8 } else { next() as u8 };
            }
            let w: [AtomicU32; 16] = std::array::from_fn(|i| {
                AtomicU32::new(if i < 4 { u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap()) } else { 0 })
            });
            for t in [0u8, 1, 2, 3, 0x80, 0xff, next() as u8] {
                let want = (0..12).filter(|&i| bytes[i] == t).fold(0u32, |m, i| m | 1 << i);
                assert_eq!(tag_hits(&w, t), want, "tags {bytes:?} t {t}");
            }
        }
    }

    /// A store whose database 0 holds `k0`..`k9999`: several segments.
    fn ten_thousand_keys() -> (crate::Store, crate::Handle) {
        let store = crate::Store::open(crate::StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        for i in 0..10_000 {
            h.set(0, format!("k{i}").as_bytes(), b"v", &crate::SetOptions::default()).unwrap();
        }
        (store, h)
    }

    /// A corrupt directory depth or segment depth is an error where it is read: walks of
    /// every directory entry (the checker, SCAN's segment list, FLUSHDB) stop at once
    /// instead of running through 2^depth entries, and no shift by a depth overflows.
    #[test]
    fn corrupt_directory_and_segment_depths_are_errors() {
        let (store, mut h) = ten_thousand_keys();
        let a = store.arena();
        let segs = segments(a, 0).unwrap();
        assert!(segs.len() > 1);
        assert!(store.check().unwrap().ok());
        let root = a.u64(db_root(0) + R_DIR).unwrap();
        let w = root.load(Ordering::Relaxed);
        // A depth within MAX_DEPTH, but far more entries than the directory's block holds.
        root.store(40 << 32 | (w & 0xffff_ffff), Ordering::Relaxed);
        let t = std::time::Instant::now();
        assert!(segments(a, 0).is_err());
        assert!(store.check().is_err());
        assert!(h.flushdb(0).is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(5), "{:?}", t.elapsed());
        root.store(w, Ordering::Relaxed);
        // A segment's own depth past any a segment can have.
        a.u32(segs[0].0 + G_DEPTH).unwrap().store(70, Ordering::Relaxed);
        assert!(store.check().is_err());
        assert!(seg_header(a, segs[0].0).is_err());
    }

    /// A segment two directories name (or one names twice) is refused by FLUSHDB and
    /// SWAPDB: they would fence it twice and retire its items twice, handing the same
    /// blocks out again later. The directories are left as they were.
    #[test]
    fn a_segment_named_twice_is_refused_by_flushdb_and_swapdb() {
        let (store, mut h) = ten_thousand_keys();
        h.set(3, b"other", b"v", &crate::SetOptions::default()).unwrap();
        let a = store.arena();
        let segs = segments(a, 0).unwrap();
        assert!(segs.len() > 1);
        // Database 3's only segment replaced by database 0's first.
        let (dir3, g3) = dir_word(a, 3).unwrap();
        assert_eq!(g3, 0);
        a.u64(dir3).unwrap().store(make_entry(segs[0].0, 0), Ordering::Relaxed);
        assert!(matches!(h.swapdb(0, 3), Err(Error::Corrupt(_))));
        // Database 0's second run pointed at its first segment.
        let (dir0, g0) = dir_word(a, 0).unwrap();
        let (s1, l1) = segs[1];
        let first_of_s1 = (0..1u64 << g0).find(|&i| entry(a, dir0, i).unwrap().0 == s1).unwrap();
        a.u64(dir0 + first_of_s1 * 8).unwrap().store(make_entry(segs[0].0, l1), Ordering::Relaxed);
        assert!(matches!(h.flushdb(0), Err(Error::Corrupt(_))));
        assert_eq!(dir_word(a, 0).unwrap().0, dir0, "FLUSHDB replaced the directory anyway");
    }

    /// A split whose segment the directory names at a depth its header does not have is
    /// an error, not a lost race with FLUSHDB to retry (writers would split again and
    /// again, MSET and MOVE up to 100000 times).
    #[test]
    fn a_split_of_a_segment_named_at_another_depth_is_an_error() {
        let (store, h) = ten_thousand_keys();
        let a = store.arena();
        let (seg, l) = segments(a, 0).unwrap()[0];
        assert!(l > 0);
        let (dir, _) = dir_word(a, 0).unwrap();
        a.u64(dir).unwrap().store(make_entry(seg, l - 1), Ordering::Relaxed);
        let loc = Loc { seg, depth: l - 1, b: 0 };
        assert!(matches!(split(&h.p, 0, &loc), Err(Error::Corrupt(_))));
    }

    /// A segment the directory still names but marked retired (a scribbled flag) fails a
    /// write at once: it used to be retried 100000 times, a yield each, for every write.
    #[test]
    fn a_write_to_a_retired_segment_the_directory_still_names_is_an_error() {
        let store = crate::Store::open(crate::StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        let d = crate::SetOptions::default();
        h.set(0, b"k", b"v", &d).unwrap();
        let a = store.arena();
        let loc = locate(a, 0, key_hash(a.seed(), b"k")).unwrap();
        a.u32(loc.seg + G_RETIRED).unwrap().store(1, Ordering::Release);
        let t = std::time::Instant::now();
        for _ in 0..20 {
            assert!(matches!(h.set(0, b"k", b"w", &d), Err(Error::Corrupt(_))));
        }
        assert!(t.elapsed() < std::time::Duration::from_millis(200), "{:?}", t.elapsed());
        // The multi-key writers too. They retried 100000 times (MSET and SWAPDB with a
        // yield each, SWAPDB relocking both databases each time). Now each
        // yields once; the bound leaves room for a busy machine's yields.
        let t = std::time::Instant::now();
        for _ in 0..20 {
            assert!(matches!(h.mset(0, &[(b"k", b"w"), (b"j", b"x")], false), Err(Error::Corrupt(_))));
            assert!(matches!(h.rename(0, b"k", b"k2", false), Err(Error::Corrupt(_))));
            assert!(matches!(h.swapdb(0, 1), Err(Error::Corrupt(_))));
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(3), "{:?}", t.elapsed());
    }
}
