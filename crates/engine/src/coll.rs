//! Collections: hashes, lists, sets and sorted sets, as values under a key.
//!
//! A small collection is one *packed* item: its entries encoded back to back in the item's
//! value (`varint klen, key[, varint vlen, value]`), rewritten whole on every change, as
//! Redis's listpack and intset are. Past a size threshold (Redis's names:
//! `hash-max-listpack-entries`, `zset-max-listpack-value`, …) it becomes a *tree*: a
//! persistent counted B+tree of arena nodes ([`crate::tree`]) whose root is published through
//! the index in a small item (`root u64, second root u64, count u64`). A change copies the
//! path it touches, so readers never lock and a writer that dies leaves the old version.
//!
//! A list is different: its tree ([`crate::listtree`]) has *chunks* for leaves, runs of
//! elements encoded back to back as in a listpack, and its two ends live in its item as
//! short *buffers* ([`Strip`]s of at most [`BUF_ENTRIES`] entries and [`BUF_BYTES`] bytes,
//! after the item's three words: `head bytes u32, head entries u16, tail entries u16, head,
//! tail`). A push or a pop at either end rewrites only the item, copying the buffer's bytes
//! without decoding them; when a buffer fills, all but its outer quarter becomes a chunk at
//! that end of the tree (one path copy per ~48 pushes), and when one empties, a pop takes
//! the edge chunk back as the buffer. Redis's quicklist keeps its ends in listpack nodes
//! for the same reason. While the tree is empty the list is published as a packed item (the
//! head and tail back to back), so a short list is as compact as a listpack.
//! `list-max-listpack-size`, as a count below [`BUF_ENTRIES`], caps buffers and chunks
//! (Redis 7.0 reports every list as a quicklist whatever its size).

//! | kind  | packed order              | tree order                     | element value |
//! |-------|---------------------------|--------------------------------|---------------|
//! | hash  | insertion                 | (hash(field), field)           | field value   |
//! | set   | integer value (intset)    | (hash(member), member)         | empty         |
//! | zset  | (score, member)           | two trees, sharing elements: by (hash(member), member) and by (score, member) | score, 8 bytes |
//! | list  | position                  | position (chunks of elements)  | none          |
//!
//! The operations every command needs are on [`Coll`]: positions in the kind's natural
//! order (a sorted set's is by score), lookups by field or member, and edits. Commands are
//! built from these in the server; [`Handle::coll_read`] and [`Handle::coll_write`] give a
//! consistent snapshot to read and an edit session that publishes atomically.
//!
//! ```
//! use larder_engine::*;
//! let store = Store::open(StoreConfig::small_for_tests()).unwrap();
//! let mut h = store.handle().unwrap();
//! h.coll_write(0, b"user:1", Kind::Hash, true, |c| c.put(b"name", b"ada")).unwrap();
//! let name = h.coll_read(0, b"user:1", Kind::Hash, |c| c.find(b"name")).unwrap();
//! assert_eq!(name, Some(Some(b"ada".to_vec())));
//! ```

use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AO};

use larder_arena::{Arena, Participant};

use crate::item::{self, parse_canonical_i64, ItemView, NewItem, Value};
use crate::keyspace::Action;
use crate::listtree::{self, get_varint, put_varint, Strip, BUF_BYTES, BUF_ENTRIES};
use crate::tree::{self, Edit};
use crate::{index, Error, Handle};

/// The kind of a collection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Hash,
    List,
    Set,
    ZSet,
}

impl Kind {
    pub(crate) fn pack_type(self) -> u64 {
        match self {
            Kind::Hash => item::T_HASH_PACK,
            Kind::List => item::T_LIST_PACK,
            Kind::Set => item::T_SET_PACK,
            Kind::ZSet => item::T_ZSET_PACK,
        }
    }

    pub(crate) fn tree_type(self) -> u64 {
        self.pack_type() + 1
    }

    /// Whether entries carry a value (hash values, sorted-set scores).
    fn has_value(self) -> bool {
        matches!(self, Kind::Hash | Kind::ZSet)
    }

    fn keyed(self) -> bool {
        self != Kind::List
    }
}

/// The size thresholds past which a packed collection becomes a tree, by Redis's names.
/// Shared by the handles of one process; the server sets them from its configuration.
#[derive(Debug)]
pub struct Limits {
    pub hash_max_listpack_entries: AtomicU64,
    pub hash_max_listpack_value: AtomicU64,
    pub set_max_intset_entries: AtomicU64,
    pub zset_max_listpack_entries: AtomicU64,
    pub zset_max_listpack_value: AtomicU64,
    /// Redis's `list-max-listpack-size`: negative = a byte budget (-1 4 KiB … -5 64 KiB),
    /// positive = entries. A positive value below [`BUF_ENTRIES`] caps the entries of a
    /// list's end buffers (and so of a packed list); the byte budgets are all above
    /// [`BUF_BYTES`], which caps them anyway.
    pub list_max_listpack_size: std::sync::atomic::AtomicI64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            hash_max_listpack_entries: AtomicU64::new(512),
            hash_max_listpack_value: AtomicU64::new(64),
            set_max_intset_entries: AtomicU64::new(512),
            zset_max_listpack_entries: AtomicU64::new(128),
            zset_max_listpack_value: AtomicU64::new(64),
            list_max_listpack_size: std::sync::atomic::AtomicI64::new(-2),
        }
    }
}

/// The prefix that orders sorted-set elements by score: IEEE bits made to compare as
/// unsigned integers (and -0 folded into +0, since Redis treats them as equal).
pub(crate) fn score_key(s: f64) -> u64 {
    let s = if s == 0.0 { 0.0 } else { s };
    let b = s.to_bits();
    if b >> 63 == 0 {
        b | 1 << 63
    } else {
        !b
    }
}

fn score_of(v: &[u8]) -> Result<f64, Error> {
    let b: [u8; 8] = v.try_into().map_err(|_| Error::Corrupt("sorted-set score is not 8 bytes"))?;
    Ok(f64::from_le_bytes(b))
}

fn field_hash(seed: u64, key: &[u8]) -> u64 {
    index::hash(seed ^ 0x9e37_79b9_7f4a_7c15, key)
}

/// How a collection is stored right now.
enum Repr {
    /// Entries in the packed order (see the module table).
    Pack(Pack),
    /// `r0`: the list, or the tree by hash; `r1`: a sorted set's tree by score.
    Tree { r0: u64, r1: u64 },
}

/// Owned entries of a collection, as [`Coll::get`] returns each.
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A collection: a read-only snapshot inside [`Handle::coll_read`], or an edit session
/// inside [`Handle::coll_write`].
pub struct Coll<'a> {
    a: &'a Arena,
    p: Option<&'a Participant>,
    kind: Kind,
    seed: u64,
    repr: Repr,
    len: u64,
    ed: Edit,
    dirty: bool,
    /// Something was added (a push onto a list, a new sorted-set member): blocked
    /// clients may now be served.
    pushed: bool,
    limits: &'a Limits,
    scratch: Vec<u8>,
    /// A list tree's end buffers (positions `0..head.len()` and the last `tail.len()`);
    /// empty for every other collection.
    head: Strip,
    tail: Strip,
    /// A buffer reaching this many entries is settled (see `list-max-listpack-size`).
    buf_entries: usize,
    /// Where the buffers' allocations go back to when the session ends, for the next one.
    spare: Option<&'a Spare>,
    /// The expiry to publish the collection with (Unix ms, 0: none) instead of the one it
    /// has (see [`Coll::set_expire_at`]).
    expire_at: Option<u64>,
}

/// Two byte buffers a handle lends to each list edit, so a push or a pop allocates none.
pub(crate) type Spare = std::cell::Cell<(Vec<u8>, Vec<u8>)>;

impl Drop for Coll<'_> {
    fn drop(&mut self) {
        if let Some(home) = self.spare {
            let keep = |mut v: Vec<u8>| {
                v.clear();
                if v.capacity() > 4 * BUF_BYTES {
                    v = Vec::new();
                }
                v
            };
            home.set((keep(std::mem::take(&mut self.head.bytes)), keep(std::mem::take(&mut self.tail.bytes))));
        }
    }
}

impl<'a> Coll<'a> {
    fn open(
        a: &'a Arena,
        p: Option<&'a Participant>,
        kind: Kind,
        it: Option<&ItemView>,
        limits: &'a Limits,
        spare: Option<&'a Spare>,
    ) -> Result<Coll<'a>, Error> {
        let mut c = Coll {
            a,
            p,
            kind,
            seed: a.seed(),
            repr: Repr::Pack(Pack::default()),
            len: 0,
            ed: Edit::default(),
            dirty: false,
            pushed: false,
            limits,
            scratch: Vec::new(),
            head: Strip::default(),
            tail: Strip::default(),
            buf_entries: match limits.list_max_listpack_size.load(AO::Relaxed) {
                n @ 1.. => (n as usize).min(BUF_ENTRIES),
                _ => BUF_ENTRIES,
            },
            spare,
            expire_at: None,
        };
        if let (Some(s), Kind::List) = (spare, kind) {
            (c.head.bytes, c.tail.bytes) = s.take();
        }
        if kind == Kind::List {
            c.repr = Repr::Tree { r0: 0, r1: 0 };
        }
        let Some(it) = it else { return Ok(c) };
        let ty = it.ty();
        // Before anything is read: a key of another type is WRONGTYPE at once, however large
        // its value.
        if ty != kind.pack_type() && ty != kind.tree_type() {
            return Err(Error::WrongType);
        }
        if kind == Kind::List {
            c.open_list(it)?;
            return Ok(c);
        }
        let mut raw = Vec::new();
        it.raw_value(a, &mut raw)?;
        if ty == kind.pack_type() {
            let pack = Pack::decode(raw, kind)?;
            c.len = pack.len() as u64;
            c.repr = Repr::Pack(pack);
        } else {
            let (r0, r1) = roots_of(&raw, kind)?;
            c.repr = Repr::Tree { r0, r1 };
            c.len = tree::count(a, r0)?;
        }
        Ok(c)
    }

    /// A list's item, read straight into its buffers: a packed list is all head; a list
    /// tree's buffers follow its 32-byte header (their entry counts are taken as they are: a
    /// [`Strip`] never reads outside its bytes, and the checker walks them).
    fn open_list(&mut self, it: &ItemView) -> Result<(), Error> {
        let (a, vlen) = (self.a, it.vlen as usize);
        let mut head = std::mem::take(&mut self.head.bytes);
        head.clear();
        head.reserve(vlen.min(BUF_BYTES * 4) + 64);
        if it.ty() == Kind::List.pack_type() {
            a.read_append(it.val_off(), vlen, &mut head)?;
            self.head = Strip::parse_owned(head)?;
            self.len = self.head.len() as u64;
            return Ok(());
        }
        let mut b = [0u8; 32];
        if vlen < 32 {
            return Err(Error::Corrupt("list tree item of the wrong size"));
        }
        a.read(it.val_off(), &mut b)?;
        let w = |i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        let (hb, hn, tn) = buffer_sizes(&b);
        if hb > vlen - 32 {
            return Err(Error::Corrupt("list tree item of the wrong size"));
        }
        a.read_append(it.val_off() + 32, hb, &mut head)?;
        let mut tail = std::mem::take(&mut self.tail.bytes);
        tail.clear();
        if vlen - 32 > hb {
            tail.reserve(vlen - 32 - hb + 64);
            a.read_append(it.val_off() + 32 + hb as u64, vlen - 32 - hb, &mut tail)?;
        }
        self.head = Strip { bytes: head, n: hn };
        self.tail = Strip { bytes: tail, n: tn };
        self.repr = Repr::Tree { r0: w(0), r1: w(1) };
        self.len = tree::count(a, w(0))? + (hn + tn) as u64;
        Ok(())
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The encoding name `OBJECT ENCODING` reports (Redis 7.0's names).
    pub fn encoding(&self) -> &'static str {
        let packed = matches!(self.repr, Repr::Pack(_));
        match (self.kind, packed) {
            (Kind::Hash, true) | (Kind::ZSet, true) => "listpack",
            (Kind::Hash, false) => "hashtable",
            (Kind::ZSet, false) => "skiplist",
            (Kind::Set, true) => "intset",
            (Kind::Set, false) => "hashtable",
            (Kind::List, _) => "quicklist",
        }
    }

    /// Whether this collection is packed (one encoded item) rather than a tree.
    pub fn is_packed(&self) -> bool {
        matches!(self.repr, Repr::Pack(_))
    }

    // ---- positions (the kind's natural order) ----

    /// The tree that holds the natural order.
    fn order_root(&self) -> u64 {
        match self.repr {
            Repr::Tree { r0, r1 } => {
                if self.kind == Kind::ZSet {
                    r1
                } else {
                    r0
                }
            }
            Repr::Pack(_) => 0,
        }
    }

    /// The entry at position `i` (0-based): (field, value) for a hash, (member, 8-byte
    /// score) for a sorted set, (element, empty) for lists and sets.
    pub fn get(&self, i: u64) -> Result<(Vec<u8>, Vec<u8>), Error> {
        if i >= self.len {
            return Err(Error::Corrupt("collection position out of range"));
        }
        match &self.repr {
            Repr::Pack(v) => Ok((v.key(i as usize).to_vec(), v.val(i as usize).to_vec())),
            Repr::Tree { r0, .. } if self.kind == Kind::List => match self.buffered(i) {
                Ok(k) => Ok((k.to_vec(), Vec::new())),
                Err(j) => Ok((listtree::nth(self.a, *r0, j, |e| e.to_vec())?, Vec::new())),
            },
            Repr::Tree { .. } => {
                let (_, e) = tree::nth(self.a, self.order_root(), i)?;
                let (mut k, mut v) = (Vec::new(), Vec::new());
                tree::read_elem(self.a, e, &mut k, &mut v)?;
                Ok((k, v))
            }
        }
    }

    /// Calls `f(key, value)` for positions `from..to` in order, until it returns false.
    pub fn range(&self, from: u64, to: u64, mut f: impl FnMut(&[u8], &[u8]) -> bool) -> Result<(), Error> {
        let to = to.min(self.len);
        if from >= to {
            return Ok(());
        }
        match &self.repr {
            Repr::Pack(v) => {
                for i in from as usize..to as usize {
                    if !f(v.key(i), v.val(i)) {
                        break;
                    }
                }
                Ok(())
            }
            Repr::Tree { r0, .. } if self.kind == Kind::List => {
                // The head buffer, the tree, then the tail buffer.
                let (hl, tl) = (self.head.len() as u64, self.tail.len() as u64);
                let tn = self.len - hl - tl;
                for e in self.head.iter().take(to.min(hl) as usize).skip(from as usize) {
                    if !f(e, b"") {
                        return Ok(());
                    }
                }
                let (tf, tt) = (from.max(hl) - hl, to.min(hl + tn).saturating_sub(hl));
                if tf < tt && !listtree::walk(self.a, *r0, tf, tt, &mut |e| f(e, b""))? {
                    return Ok(());
                }
                let skip = from.saturating_sub(hl + tn) as usize;
                for e in self.tail.iter().take(to.saturating_sub(hl + tn) as usize).skip(skip) {
                    if !f(e, b"") {
                        break;
                    }
                }
                Ok(())
            }
            Repr::Tree { .. } => {
                let (mut k, mut v) = (Vec::new(), Vec::new());
                let a = self.a;
                tree::walk(a, self.order_root(), from, to, &mut |_, e| {
                    tree::read_elem(a, e, &mut k, &mut v)?;
                    Ok(f(&k, &v))
                })
            }
        }
    }

    /// Every entry, in order.
    pub fn entries(&self) -> Result<Entries, Error> {
        let mut out = Vec::with_capacity(self.len.min(1 << 20) as usize);
        self.range(0, self.len, |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })?;
        Ok(out)
    }

    // ---- lookups by key (hash, set, sorted set) ----

    fn seek_hashed(&mut self, key: &[u8]) -> Result<(u64, Option<u64>), Error> {
        let Repr::Tree { r0, .. } = self.repr else { return Err(Error::Corrupt("not a tree")) };
        let h = field_hash(self.seed, key);
        let a = self.a;
        let s = &mut self.scratch;
        let (rank, at) = tree::seek_elem(a, r0, &mut |prefix, e| {
            Ok(match prefix.cmp(&h) {
                Ordering::Equal => {
                    tree::read_key(a, e, s)?;
                    s.as_slice().cmp(key)
                }
                o => o,
            })
        })?;
        if let Some((prefix, e)) = at {
            if prefix == h {
                tree::read_key(a, e, s)?;
                if s.as_slice() == key {
                    return Ok((rank, Some(e)));
                }
            }
        }
        Ok((rank, None))
    }

    fn pack_find(&self, key: &[u8]) -> Option<usize> {
        let Repr::Pack(v) = &self.repr else { return None };
        if self.kind == Kind::Set {
            let n = parse_canonical_i64(key)?;
            let i = v.partition_point(|k, _| parse_canonical_i64(k).unwrap_or(0) < n);
            return (i < v.len() && v.key(i) == key).then_some(i);
        }
        (0..v.len()).find(|&i| v.key(i) == key)
    }

    /// The value stored under `key`: a hash field's value, a sorted-set member's 8-byte
    /// score, or an empty value for a set member; None if absent.
    pub fn find(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.keyed()?;
        match &self.repr {
            Repr::Pack(v) => Ok(self.pack_find(key).map(|i| v.val(i).to_vec())),
            Repr::Tree { .. } => match self.seek_hashed(key)? {
                (_, Some(e)) => {
                    let (mut k, mut v) = (Vec::new(), Vec::new());
                    tree::read_elem(self.a, e, &mut k, &mut v)?;
                    Ok(Some(v))
                }
                _ => Ok(None),
            },
        }
    }

    pub fn contains(&mut self, key: &[u8]) -> Result<bool, Error> {
        Ok(self.find(key)?.is_some())
    }

    /// A sorted-set member's score.
    pub fn score(&mut self, member: &[u8]) -> Result<Option<f64>, Error> {
        self.zset()?;
        self.find(member)?.map(|v| score_of(&v)).transpose()
    }

    fn keyed(&self) -> Result<(), Error> {
        if self.kind.keyed() {
            Ok(())
        } else {
            Err(Error::Corrupt("lookup by key in a list"))
        }
    }

    fn zset(&self) -> Result<(), Error> {
        if self.kind == Kind::ZSet {
            Ok(())
        } else {
            Err(Error::Corrupt("sorted-set operation on another kind"))
        }
    }

    /// One step of HSCAN/SSCAN/ZSCAN from `cursor` (0 to start): calls `f` with about
    /// `count` entries and returns the next cursor (0 when done). A packed collection comes
    /// back whole, as Redis returns a listpack. The cursor is a hash position, so an entry
    /// present for the whole scan is returned whatever else changes.
    pub fn scan(&mut self, cursor: u64, count: usize, mut f: impl FnMut(&[u8], &[u8])) -> Result<u64, Error> {
        self.keyed()?;
        match &self.repr {
            Repr::Pack(v) => {
                for i in 0..v.len() {
                    f(v.key(i), v.val(i));
                }
                Ok(0)
            }
            Repr::Tree { r0, .. } => {
                let (r0, a) = (*r0, self.a);
                let from = tree::seek(a, r0, &mut |prefix, _| Ok(prefix.cmp(&cursor)))?;
                let (mut k, mut v) = (Vec::new(), Vec::new());
                let mut n = 0usize;
                let mut last = None;
                let mut next = 0;
                tree::walk(a, r0, from, self.len, &mut |prefix, e| {
                    if n >= count.max(1) && last != Some(prefix) {
                        next = prefix;
                        return Ok(false);
                    }
                    tree::read_elem(a, e, &mut k, &mut v)?;
                    f(&k, &v);
                    n += 1;
                    last = Some(prefix);
                    Ok(true)
                })?;
                Ok(next)
            }
        }
    }

    // ---- sorted sets ----

    /// Lower bound in score order. `hint`: the target's score prefix, which settles every
    /// comparison with an element of another score without reading it; `by_score_only`:
    /// (prefix, exclusive) when the target is a score alone.
    fn zseek(
        &mut self,
        cmp: &mut dyn FnMut(f64, &[u8]) -> Ordering,
        hint: Option<u64>,
        by_score_only: Option<(u64, bool)>,
    ) -> Result<u64, Error> {
        match &self.repr {
            Repr::Pack(v) => {
                let mut lo = 0;
                let mut hi = v.len();
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if cmp(score_of(v.val(mid))?, v.key(mid)) == Ordering::Less {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                Ok(lo as u64)
            }
            Repr::Tree { r1, .. } => {
                let (r1, a) = (*r1, self.a);
                let (mut k, mut v) = (Vec::new(), Vec::new());
                tree::seek(a, r1, &mut |prefix, e| {
                    if let Some((target, excl)) = by_score_only {
                        return Ok(if prefix < target || (excl && prefix == target) {
                            Ordering::Less
                        } else {
                            Ordering::Greater
                        });
                    }
                    if let Some(t) = hint {
                        if prefix != t {
                            return Ok(prefix.cmp(&t));
                        }
                    }
                    tree::read_elem(a, e, &mut k, &mut v)?;
                    Ok(cmp(score_of(&v)?, &k))
                })
            }
        }
    }

    /// The position (in score order) of the first member whose score is ≥ `score`
    /// (> `score` when `exclusive`).
    pub fn zseek_score(&mut self, score: f64, exclusive: bool) -> Result<u64, Error> {
        self.zset()?;
        let target = score_key(score);
        self.zseek(
            &mut |s, _| {
                let k = score_key(s);
                if k < target || (exclusive && k == target) {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            },
            Some(target),
            Some((target, exclusive)),
        )
    }

    /// The position of the first member that is ≥ `member` (> when `exclusive`), comparing
    /// members only: meaningful when every score is equal, as ZRANGEBYLEX requires.
    pub fn zseek_lex(&mut self, member: &[u8], exclusive: bool) -> Result<u64, Error> {
        self.zset()?;
        self.zseek(
            &mut |_, m| match m.cmp(member) {
                Ordering::Less => Ordering::Less,
                Ordering::Equal if exclusive => Ordering::Less,
                _ => Ordering::Greater,
            },
            None,
            None,
        )
    }

    /// A member's position in score order (its ZRANK), if present.
    pub fn zrank(&mut self, member: &[u8]) -> Result<Option<u64>, Error> {
        let Some(s) = self.score(member)? else { return Ok(None) };
        let r = self.zseek(&mut |sc, m| (score_key(sc), m).cmp(&(score_key(s), member)), Some(score_key(s)), None)?;
        Ok(Some(r))
    }

    // ---- edits ----

    fn writer(&self) -> Result<&'a Participant, Error> {
        self.p.ok_or(Error::Corrupt("edit of a read-only collection"))
    }

    /// Sets `key` to `val` (a hash field, a set member with an empty value, a sorted-set
    /// member with its 8-byte score); returns the old value.
    pub fn put(&mut self, key: &[u8], val: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.keyed()?;
        let p = self.writer()?;
        if self.kind == Kind::ZSet {
            let s = score_of(val)?;
            return Ok(self.zput(key, s)?.map(|o| o.to_le_bytes().to_vec()));
        }
        let old = match &mut self.repr {
            Repr::Pack(_) => {
                let at = self.pack_find(key);
                let Repr::Pack(v) = &mut self.repr else { unreachable!() };
                match at {
                    // The same value again changes nothing (a set member already there).
                    Some(i) if v.val(i) == val => return Ok(Some(val.to_vec())),
                    Some(i) => {
                        let old = v.val(i).to_vec();
                        v.set_val(i, val);
                        Some(old)
                    }
                    None => {
                        if self.kind == Kind::Set {
                            let n = parse_canonical_i64(key);
                            let i = match n {
                                Some(n) => v.partition_point(|k, _| parse_canonical_i64(k).unwrap_or(0) < n),
                                None => v.len(),
                            };
                            v.insert(i, key, b"");
                        } else {
                            v.insert(v.len(), key, val);
                        }
                        self.len += 1;
                        None
                    }
                }
            }
            Repr::Tree { .. } => {
                let (rank, found) = self.seek_hashed(key)?;
                let mut old_val = None;
                if let Some(old) = found {
                    let (mut k, mut v) = (Vec::new(), Vec::new());
                    tree::read_elem(self.a, old, &mut k, &mut v)?;
                    if v == val {
                        return Ok(Some(v));
                    }
                    old_val = Some(v);
                }
                let Repr::Tree { r0, .. } = &mut self.repr else { unreachable!() };
                let h = field_hash(self.seed, key);
                let e = self.ed.elem(p, key, val)?;
                match found {
                    Some(old) => {
                        let v = old_val.unwrap_or_default();
                        let (root, _) = tree::replace_at(p, &mut self.ed, *r0, rank, h, e)?;
                        *r0 = root;
                        self.ed.drop_block(p, old)?;
                        Some(v)
                    }
                    None => {
                        *r0 = tree::insert_at(p, &mut self.ed, *r0, rank, h, e)?;
                        self.len += 1;
                        None
                    }
                }
            }
        };
        self.dirty = true;
        self.maybe_convert(key.len(), val.len(), parse_canonical_i64(key).is_some())?;
        Ok(old)
    }

    /// Sets a sorted-set member's score; returns the old score.
    pub fn zput(&mut self, member: &[u8], score: f64) -> Result<Option<f64>, Error> {
        self.zset()?;
        let p = self.writer()?;
        if let Repr::Tree { .. } = self.repr {
            return self.zput_tree(p, member, score);
        }
        let old = self.score(member)?;
        if old.is_some_and(|o| o == score && score_key(o) == score_key(score)) {
            return Ok(old);
        }
        self.dirty = true;
        self.pushed |= old.is_none();
        if old.is_some() {
            self.del(member)?;
        }
        match &mut self.repr {
            Repr::Pack(v) => {
                let k = (score_key(score), member);
                let i = v.partition_point(|m, s| (score_key(score_of(s).unwrap_or(0.0)), m) < k);
                v.insert(i, member, &score.to_le_bytes());
                self.len += 1;
            }
            Repr::Tree { .. } => {
                let (rank0, _) = self.seek_hashed(member)?;
                let rank1 = self.zseek(
                    &mut |sc, m| (score_key(sc), m).cmp(&(score_key(score), member)),
                    Some(score_key(score)),
                    None,
                )?;
                let Repr::Tree { r0, r1 } = &mut self.repr else { unreachable!() };
                let e = self.ed.elem(p, member, &score.to_le_bytes())?;
                *r0 = tree::insert_at(p, &mut self.ed, *r0, rank0, field_hash(self.seed, member), e)?;
                *r1 = tree::insert_at(p, &mut self.ed, *r1, rank1, score_key(score), e)?;
                self.len += 1;
            }
        }
        self.maybe_convert(member.len(), 0, false)?;
        Ok(old)
    }

    /// [`Coll::zput`] on a tree: one search by member; a member that stays keeps its place
    /// in the tree by member (its element is swapped in place) and moves in the tree by score.
    fn zput_tree(&mut self, p: &'a Participant, member: &[u8], score: f64) -> Result<Option<f64>, Error> {
        let (rank0, found) = self.seek_hashed(member)?;
        let old = match found {
            Some(e) => {
                let (mut k, mut v) = (Vec::new(), Vec::new());
                tree::read_elem(self.a, e, &mut k, &mut v)?;
                Some(score_of(&v)?)
            }
            None => None,
        };
        if old.is_some_and(|o| o == score && score_key(o) == score_key(score)) {
            return Ok(old);
        }
        self.dirty = true;
        self.pushed |= old.is_none();
        let e = self.ed.elem(p, member, &score.to_le_bytes())?;
        let h = field_hash(self.seed, member);
        match (old, found) {
            (Some(o), Some(old_e)) => {
                let at =
                    self.zseek(&mut |sc, m| (score_key(sc), m).cmp(&(score_key(o), member)), Some(score_key(o)), None)?;
                let Repr::Tree { r0, r1 } = &mut self.repr else { unreachable!() };
                let (root1, out1) = tree::remove_at(p, &mut self.ed, *r1, at)?;
                let (root0, out0) = tree::replace_at(p, &mut self.ed, *r0, rank0, h, e)?;
                if out0 != old_e || out1 != old_e {
                    return Err(Error::Corrupt("sorted-set trees disagree"));
                }
                (*r0, *r1) = (root0, root1);
                self.ed.drop_block(p, old_e)?;
            }
            _ => {
                let Repr::Tree { r0, .. } = &mut self.repr else { unreachable!() };
                *r0 = tree::insert_at(p, &mut self.ed, *r0, rank0, h, e)?;
                self.len += 1;
            }
        }
        let rank1 =
            self.zseek(&mut |sc, m| (score_key(sc), m).cmp(&(score_key(score), member)), Some(score_key(score)), None)?;
        let Repr::Tree { r1, .. } = &mut self.repr else { unreachable!() };
        *r1 = tree::insert_at(p, &mut self.ed, *r1, rank1, score_key(score), e)?;
        Ok(old)
    }

    /// Removes `key`; returns its value.
    pub fn del(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.keyed()?;
        let p = self.writer()?;
        match &mut self.repr {
            Repr::Pack(_) => {
                let Some(i) = self.pack_find(key) else { return Ok(None) };
                let Repr::Pack(v) = &mut self.repr else { unreachable!() };
                self.dirty = true;
                self.len -= 1;
                Ok(Some(v.remove(i).1))
            }
            Repr::Tree { .. } => {
                let (rank0, found) = self.seek_hashed(key)?;
                let Some(e) = found else { return Ok(None) };
                let (mut k, mut v) = (Vec::new(), Vec::new());
                tree::read_elem(self.a, e, &mut k, &mut v)?;
                let rank1 = if self.kind == Kind::ZSet {
                    let s = score_of(&v)?;
                    Some(self.zseek(
                        &mut |sc, m| (score_key(sc), m).cmp(&(score_key(s), key)),
                        Some(score_key(s)),
                        None,
                    )?)
                } else {
                    None
                };
                let Repr::Tree { r0, r1 } = &mut self.repr else { unreachable!() };
                self.dirty = true;
                *r0 = tree::remove_at(p, &mut self.ed, *r0, rank0)?.0;
                if let Some(rank1) = rank1 {
                    *r1 = tree::remove_at(p, &mut self.ed, *r1, rank1)?.0;
                }
                self.ed.drop_block(p, e)?;
                self.len -= 1;
                Ok(Some(v))
            }
        }
    }

    /// Removes the entry at position `i` of the natural order; returns it.
    pub fn remove_at(&mut self, i: u64) -> Result<(Vec<u8>, Vec<u8>), Error> {
        let p = self.writer()?;
        if i >= self.len {
            return Err(Error::Corrupt("collection position out of range"));
        }
        self.dirty = true;
        match &mut self.repr {
            Repr::Pack(v) => {
                self.len -= 1;
                Ok(v.remove(i as usize))
            }
            Repr::Tree { r1, .. } if self.kind == Kind::ZSet => {
                // The position is in score order: take it out of that tree directly, then
                // out of the tree by member.
                let (root1, e) = tree::remove_at(p, &mut self.ed, *r1, i)?;
                *r1 = root1;
                let (mut k, mut v) = (Vec::new(), Vec::new());
                tree::read_elem(self.a, e, &mut k, &mut v)?;
                let (rank0, found) = self.seek_hashed(&k)?;
                if found != Some(e) {
                    return Err(Error::Corrupt("sorted-set trees disagree"));
                }
                let Repr::Tree { r0, .. } = &mut self.repr else { unreachable!() };
                *r0 = tree::remove_at(p, &mut self.ed, *r0, rank0)?.0;
                self.ed.drop_block(p, e)?;
                self.len -= 1;
                Ok((k, v))
            }
            Repr::Tree { .. } if self.kind.keyed() => {
                let kv = self.get(i)?;
                self.del(&kv.0)?;
                Ok(kv)
            }
            Repr::Tree { .. } => self.list_remove(i),
        }
    }

    /// A list tree's position `i`: the head buffer's entry, the tail buffer's, or
    /// Err(the position in the tree).
    fn buffered(&self, i: u64) -> Result<&[u8], u64> {
        let (hl, tl) = (self.head.len() as u64, self.tail.len() as u64);
        let tn = self.len - hl - tl;
        if i < hl {
            Ok(self.head.get(i as usize))
        } else if i >= hl + tn {
            Ok(self.tail.get((i - hl - tn) as usize))
        } else {
            Err(i - hl)
        }
    }

    fn list_remove(&mut self, i: u64) -> Result<(Vec<u8>, Vec<u8>), Error> {
        let p = self.writer()?;
        let (hl, tl) = (self.head.len() as u64, self.tail.len() as u64);
        let tn = self.len - hl - tl;
        if i < hl {
            self.len -= 1;
            return Ok((self.head.remove(i as usize), Vec::new()));
        }
        if i >= hl + tn {
            self.len -= 1;
            return Ok((self.tail.remove((i - hl - tn) as usize), Vec::new()));
        }
        // A pop that emptied a buffer takes the edge chunk back out of the tree.
        if (hl == 0 && i == 0 && self.refill(true)?) || (tl == 0 && i == self.len - 1 && self.refill(false)?) {
            return self.list_remove(i);
        }
        let Repr::Tree { r0, .. } = &mut self.repr else { unreachable!() };
        let (root, e) = listtree::remove_at(p, &mut self.ed, *r0, i - hl, self.buf_entries)?;
        *r0 = root;
        self.len -= 1;
        Ok((e, Vec::new()))
    }

    /// Moves the tree's front (or back) chunk into the empty head (or tail) buffer, if its
    /// elements fit in one; returns whether it did.
    fn refill(&mut self, front: bool) -> Result<bool, Error> {
        let p = self.writer()?;
        let Repr::Tree { r0, .. } = self.repr else { return Ok(false) };
        if r0 == 0 {
            return Ok(false);
        }
        // The caller removes one entry at once, so the buffer ends below its limits.
        let edge = listtree::edge_chunk(self.a, r0, front)?;
        if edge.n > self.buf_entries || edge.bytes.len() > BUF_BYTES {
            return Ok(false);
        }
        let (root, buf) = listtree::take_edge(p, &mut self.ed, r0, front)?;
        *if front { &mut self.head } else { &mut self.tail } = buf;
        self.repr = Repr::Tree { r0: root, r1: 0 };
        Ok(true)
    }

    /// After a list tree's buffer grew: one that is full keeps its outer part (at most a
    /// quarter of the entries and of the bytes) and moves the rest into the tree as chunks.
    /// The quarter left behind spares a pop that follows a push from going to the tree.
    fn settle(&mut self, front: bool) -> Result<(), Error> {
        let p = self.writer()?;
        let buf = if front { &self.head } else { &self.tail };
        let n = buf.len();
        if n < self.buf_entries && buf.bytes.len() <= BUF_BYTES {
            return Ok(());
        }
        let ents: Vec<&[u8]> = buf.iter().collect();
        // The buffer's count came from the item as it was (see `open_list`): bytes that
        // disagree with it are found here, where every entry is walked anyway.
        if ents.len() != n {
            return Err(Error::Corrupt("list buffer's entry count disagrees with its bytes"));
        }
        let bytes = |i: usize| ents[i].len() + 1;
        // Keep the outer end: the head's first entries, the tail's last.
        let outer = |j: usize| if front { j } else { n - 1 - j };
        let (mut keep, mut kept_bytes) = (0, 0);
        while keep < self.buf_entries / 4 && keep < n && kept_bytes + bytes(outer(keep)) <= BUF_BYTES / 4 {
            kept_bytes += bytes(outer(keep));
            keep += 1;
        }
        let (kept, moved) = if front { (0..keep, keep..n) } else { (n - keep..n, 0..n - keep) };
        // The moved entries as chunks of at most `buf_entries` entries and BUF_BYTES bytes.
        let mut chunks = vec![Strip::default()];
        for i in moved {
            let last = chunks.last_mut().unwrap();
            if last.n > 0 && (last.n >= self.buf_entries || last.bytes.len() + ents[i].len() + 1 > BUF_BYTES) {
                chunks.push(Strip::default());
            }
            chunks.last_mut().unwrap().push(ents[i]);
        }
        let mut rest = Strip { bytes: Vec::with_capacity(BUF_BYTES / 4 + 64), n: 0 };
        for i in kept {
            rest.push(ents[i]);
        }
        *if front { &mut self.head } else { &mut self.tail } = rest;
        // Chunk by chunk, the one nearest the tree first.
        let Repr::Tree { r0, .. } = &mut self.repr else { unreachable!() };
        for i in 0..chunks.len() {
            let c = if front { &chunks[chunks.len() - 1 - i] } else { &chunks[i] };
            *r0 = listtree::push_edge(p, &mut self.ed, *r0, front, c, self.buf_entries)?;
        }
        Ok(())
    }

    /// Lists: inserts `elem` at position `i` (0 = head, `len()` = tail).
    pub fn insert_at(&mut self, i: u64, elem: &[u8]) -> Result<(), Error> {
        self.list()?;
        let p = self.writer()?;
        if i > self.len {
            return Err(Error::Corrupt("collection position out of range"));
        }
        self.dirty = true;
        self.pushed = true;
        let (hl, tl) = (self.head.len() as u64, self.tail.len() as u64);
        let tn = self.len - hl - tl;
        match &mut self.repr {
            Repr::Pack(v) => v.insert(i as usize, elem, b""),
            Repr::Tree { .. } if i <= hl || i >= hl + tn => {
                let front = i <= hl;
                if front {
                    self.head.insert(i as usize, elem);
                } else {
                    self.tail.insert((i - hl - tn) as usize, elem);
                }
                self.len += 1;
                return self.settle(front);
            }
            Repr::Tree { r0, .. } => {
                *r0 = listtree::insert_at(p, &mut self.ed, *r0, i - hl, elem, self.buf_entries)?;
            }
        }
        self.len += 1;
        self.maybe_convert(elem.len(), 0, false)
    }

    /// Counts the edit as a change even if it changed nothing: the collection is published
    /// again with a new version (Redis's `signalModifiedKey`, which some commands call
    /// whatever they did, so a WATCH of the key sees them).
    pub fn touch(&mut self) -> Result<(), Error> {
        self.writer()?;
        self.dirty = true;
        Ok(())
    }

    /// Lists: replaces the element at position `i`.
    pub fn set_at(&mut self, i: u64, elem: &[u8]) -> Result<(), Error> {
        self.list()?;
        let p = self.writer()?;
        if i >= self.len {
            return Err(Error::Corrupt("collection position out of range"));
        }
        self.dirty = true;
        let (hl, tl) = (self.head.len() as u64, self.tail.len() as u64);
        let tn = self.len - hl - tl;
        match &mut self.repr {
            Repr::Pack(v) => v.set_key(i as usize, elem),
            Repr::Tree { .. } if i < hl || i >= hl + tn => {
                let front = i < hl;
                if front {
                    self.head.set(i as usize, elem);
                } else {
                    self.tail.set((i - hl - tn) as usize, elem);
                }
                return self.settle(front);
            }
            Repr::Tree { r0, .. } => {
                // Out and in again: the chunk may have to split for a longer element.
                let max = self.buf_entries;
                let (root, _) = listtree::remove_at(p, &mut self.ed, *r0, i - hl, max)?;
                *r0 = listtree::insert_at(p, &mut self.ed, root, i - hl, elem, max)?;
            }
        }
        Ok(())
    }

    fn list(&self) -> Result<(), Error> {
        if self.kind == Kind::List {
            Ok(())
        } else {
            Err(Error::Corrupt("list operation on another kind"))
        }
    }

    /// Publishes the collection expiring at `at_ms` (Unix ms, 0: never) rather than when it
    /// did: a collection made with its TTL (RESTORE) is never seen without it. In an edit
    /// session only.
    pub fn set_expire_at(&mut self, at_ms: u64) {
        self.expire_at = Some(at_ms);
        self.dirty = true;
    }

    /// Removes every entry.
    pub fn clear(&mut self) -> Result<(), Error> {
        let p = self.writer()?;
        self.dirty = true;
        if let (Repr::Tree { r0, .. }, Kind::List) = (&self.repr, self.kind) {
            let mut blocks = Vec::new();
            listtree::for_each_block(self.a, *r0, &mut |b| {
                blocks.push(b);
                Ok(())
            })?;
            for b in blocks {
                self.ed.drop_block(p, b)?;
            }
        } else if let Repr::Tree { r0, r1 } = self.repr {
            let a = self.a;
            let ed = &mut self.ed;
            let mut blocks = Vec::new();
            tree::for_each_block(a, r0, true, &mut |b, _| {
                blocks.push(b);
                Ok(())
            })?;
            tree::for_each_block(a, r1, false, &mut |b, _| {
                blocks.push(b);
                Ok(())
            })?;
            for b in blocks {
                ed.drop_block(p, b)?;
            }
        }
        self.repr = if self.kind == Kind::List { Repr::Tree { r0: 0, r1: 0 } } else { Repr::Pack(Pack::default()) };
        self.head = Strip::default();
        self.tail = Strip::default();
        self.len = 0;
        Ok(())
    }

    /// After an edit: a packed collection that outgrew its thresholds becomes a tree.
    fn maybe_convert(&mut self, klen: usize, vlen: usize, is_int: bool) -> Result<(), Error> {
        let Repr::Pack(v) = &self.repr else { return Ok(()) };
        let l = self.limits;
        let ld = |x: &AtomicU64| x.load(AO::Relaxed);
        let too_big = match self.kind {
            Kind::Hash => {
                let max = ld(&l.hash_max_listpack_value) as usize;
                v.len() as u64 > ld(&l.hash_max_listpack_entries) || klen > max || vlen > max
            }
            Kind::Set => v.len() as u64 > ld(&l.set_max_intset_entries) || !is_int,
            Kind::ZSet => {
                v.len() as u64 > ld(&l.zset_max_listpack_entries) || klen > ld(&l.zset_max_listpack_value) as usize
            }
            // Lists are never a Pack here: they keep their ends in Strips (see the module notes).
            Kind::List => false,
        };
        if too_big {
            self.unpack()?;
        }
        Ok(())
    }

    /// Converts a packed hash, set or sorted set to a tree (thresholds exceeded).
    pub(crate) fn unpack(&mut self) -> Result<(), Error> {
        let p = self.writer()?;
        let Repr::Pack(v) = std::mem::replace(&mut self.repr, Repr::Pack(Pack::default())) else { return Ok(()) };
        self.dirty = true;
        let mut elems = Vec::with_capacity(v.len());
        for (k, val) in v.iter() {
            let e = self.ed.elem(p, k, val)?;
            elems.push((field_hash(self.seed, k), e, k, val));
        }
        let mut by_hash = elems.clone();
        by_hash.sort_by(|x, y| (x.0, x.2).cmp(&(y.0, y.2)));
        let order: Vec<(u64, u64)> = by_hash.iter().map(|&(pr, e, _, _)| (pr, e)).collect();
        let r0 = tree::build(p, &mut self.ed, &order)?;
        let r1 = if self.kind == Kind::ZSet {
            // Packed sorted sets are already in score order.
            let mut order = Vec::with_capacity(elems.len());
            for &(_, e, _, val) in &elems {
                order.push((score_key(score_of(val)?), e));
            }
            tree::build(p, &mut self.ed, &order)?
        } else {
            0
        };
        self.repr = Repr::Tree { r0, r1 };
        Ok(())
    }

    /// Calls `f` with the item value to publish (in pieces written back to back).
    fn encode<R>(&self, f: impl FnOnce(Value<'_>) -> R) -> R {
        match &self.repr {
            Repr::Pack(v) => f(Value::Coll(self.kind.pack_type(), &v.encode(self.kind))),
            Repr::Tree { r0, r1 } => {
                let (head, tail) = (&self.head.bytes[..], &self.tail.bytes[..]);
                if self.kind == Kind::List && *r0 == 0 {
                    // No tree: a packed list, the head then the tail.
                    return f(Value::Parts(self.kind.pack_type(), [head, tail, &[]]));
                }
                let mut b = [0u8; 32];
                b[0..8].copy_from_slice(&r0.to_le_bytes());
                b[8..16].copy_from_slice(&r1.to_le_bytes());
                b[16..24].copy_from_slice(&self.len.to_le_bytes());
                if self.kind != Kind::List {
                    return f(Value::Coll(self.kind.tree_type(), &b[..24]));
                }
                b[24..28].copy_from_slice(&(head.len() as u32).to_le_bytes());
                b[28..30].copy_from_slice(&(self.head.n as u16).to_le_bytes());
                b[30..32].copy_from_slice(&(self.tail.n as u16).to_le_bytes());
                f(Value::Parts(self.kind.tree_type(), [&b, head, tail]))
            }
        }
    }
}

/// A packed collection being read or edited: the item's bytes in one buffer and each
/// entry as ranges into it (two allocations whatever the size, where one per entry made a
/// 1,000-element packed list cost 70 µs to open). Edits append new bytes and move ranges;
/// [`Pack::encode`] writes the live entries back to back.
#[derive(Default)]
struct Pack {
    buf: Vec<u8>,
    /// (key offset, key length, value offset, value length) into `buf`.
    ents: Vec<(u32, u32, u32, u32)>,
}

impl Pack {
    fn decode(buf: Vec<u8>, kind: Kind) -> Result<Pack, Error> {
        if buf.len() > u32::MAX as usize {
            return Err(Error::Corrupt("packed collection too large"));
        }
        let mut ents = Vec::new();
        let mut pos = 0;
        let take = |pos: &mut usize, n: u64| -> Result<(u32, u32), Error> {
            let end = pos
                .checked_add(n as usize)
                .filter(|&e| e <= buf.len())
                .ok_or(Error::Corrupt("truncated packed collection"))?;
            let r = (*pos as u32, n as u32);
            *pos = end;
            Ok(r)
        };
        while pos < buf.len() {
            let kl = get_varint(&buf, &mut pos)?;
            let (ko, kl) = take(&mut pos, kl)?;
            let (vo, vl) = if kind.has_value() {
                let vl = get_varint(&buf, &mut pos)?;
                take(&mut pos, vl)?
            } else {
                (0, 0)
            };
            ents.push((ko, kl, vo, vl));
        }
        Ok(Pack { buf, ents })
    }

    fn len(&self) -> usize {
        self.ents.len()
    }

    fn key(&self, i: usize) -> &[u8] {
        let (o, l, _, _) = self.ents[i];
        &self.buf[o as usize..(o + l) as usize]
    }

    fn val(&self, i: usize) -> &[u8] {
        let (_, _, o, l) = self.ents[i];
        &self.buf[o as usize..(o + l) as usize]
    }

    fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        (0..self.len()).map(|i| (self.key(i), self.val(i)))
    }

    fn partition_point(&self, mut f: impl FnMut(&[u8], &[u8]) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if f(self.key(mid), self.val(mid)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    fn append(&mut self, b: &[u8]) -> (u32, u32) {
        let o = self.buf.len() as u32;
        self.buf.extend_from_slice(b);
        (o, b.len() as u32)
    }

    fn insert(&mut self, i: usize, k: &[u8], v: &[u8]) {
        let (ko, kl) = self.append(k);
        let (vo, vl) = self.append(v);
        self.ents.insert(i, (ko, kl, vo, vl));
    }

    fn set_val(&mut self, i: usize, v: &[u8]) {
        let (vo, vl) = self.append(v);
        self.ents[i].2 = vo;
        self.ents[i].3 = vl;
    }

    fn set_key(&mut self, i: usize, k: &[u8]) {
        let (ko, kl) = self.append(k);
        self.ents[i].0 = ko;
        self.ents[i].1 = kl;
    }

    fn remove(&mut self, i: usize) -> (Vec<u8>, Vec<u8>) {
        let kv = (self.key(i).to_vec(), self.val(i).to_vec());
        self.ents.remove(i);
        kv
    }

    fn encode(&self, kind: Kind) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.iter().map(|(k, v)| k.len() + v.len() + 4).sum());
        self.encode_into(kind, &mut out);
        out
    }

    fn encode_into(&self, kind: Kind, out: &mut Vec<u8>) {
        for (k, v) in self.iter() {
            put_varint(out, k.len() as u64);
            out.extend_from_slice(k);
            if kind.has_value() {
                put_varint(out, v.len() as u64);
                out.extend_from_slice(v);
            }
        }
    }
}

/// The tree roots of a tree item (for dropping and checking), or None for other items.
pub(crate) fn tree_roots(a: &Arena, it: &ItemView) -> Result<Option<(u64, u64)>, Error> {
    let ty = it.ty();
    if !item::is_tree_type(ty) {
        return Ok(None);
    }
    let mut raw = Vec::new();
    it.raw_value(a, &mut raw)?;
    roots_of(&raw, if ty == item::T_LIST_PACK + 1 { Kind::List } else { Kind::Hash }).map(Some)
}

/// A tree item's two roots (24 bytes exactly; a list's 32-byte header and buffers follow).
fn roots_of(raw: &[u8], kind: Kind) -> Result<(u64, u64), Error> {
    if if kind == Kind::List { raw.len() < 32 } else { raw.len() != 24 } {
        return Err(Error::Corrupt("tree item of the wrong size"));
    }
    let w = |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
    Ok((w(0), w(1)))
}

/// A list tree item's head bytes, head entries and tail entries, from its 32-byte header.
fn buffer_sizes(header: &[u8]) -> (usize, usize, usize) {
    let hb = u32::from_le_bytes(header[24..28].try_into().unwrap()) as usize;
    let hn = u16::from_le_bytes(header[28..30].try_into().unwrap()) as usize;
    let tn = u16::from_le_bytes(header[30..32].try_into().unwrap()) as usize;
    (hb, hn, tn)
}

/// A list tree item's head and tail buffers, every entry walked and the counts in the header
/// checked (the checker's reading; [`Coll::open_list`] takes the counts as they are).
fn list_buffers(raw: &[u8]) -> Result<(Strip, Strip), Error> {
    if raw.len() < 32 {
        return Err(Error::Corrupt("list tree item of the wrong size"));
    }
    let (hb, hn, tn) = buffer_sizes(raw);
    let rest = &raw[32..];
    if hb > rest.len() {
        return Err(Error::Corrupt("list tree item of the wrong size"));
    }
    let (h, t) = (Strip::parse(&rest[..hb])?, Strip::parse(&rest[hb..])?);
    if (h.n, t.n) != (hn, tn) {
        return Err(Error::Corrupt("list buffer counts disagree with their entries"));
    }
    Ok((h, t))
}

/// Every block a tree item owns beyond itself: nodes of both trees and the elements (once).
pub(crate) fn owned_blocks(a: &Arena, it: &ItemView) -> Result<Vec<u64>, Error> {
    let mut out = Vec::new();
    if it.ty() == Kind::List.tree_type() {
        let (r0, _) = tree_roots(a, it)?.unwrap_or((0, 0));
        listtree::for_each_block(a, r0, &mut |b| {
            out.push(b);
            Ok(())
        })?;
    } else if let Some((r0, r1)) = tree_roots(a, it)? {
        tree::for_each_block(a, r0, true, &mut |b, _| {
            out.push(b);
            Ok(())
        })?;
        tree::for_each_block(a, r1, false, &mut |b, _| {
            out.push(b);
            Ok(())
        })?;
    }
    Ok(out)
}

/// The checker's part for a tree item: both trees well formed, in order, agreeing on
/// their elements and with the item's count, and no block of theirs on a free list.
pub(crate) fn check_item(
    a: &Arena,
    it: &ItemView,
    free: &std::collections::HashMap<u64, u64>,
    r: &mut crate::Report,
) -> Result<(), Error> {
    let Some((r0, r1)) = tree_roots(a, it)? else { return Ok(()) };
    let mut key = Vec::new();
    it.key(a, &mut key)?;
    let name = String::from_utf8_lossy(&key).into_owned();
    let kind = match it.type_() {
        crate::Type::Hash => Kind::Hash,
        crate::Type::List => Kind::List,
        crate::Type::Set => Kind::Set,
        _ => Kind::ZSet,
    };
    r.trees += 1;
    let mut raw = Vec::new();
    it.raw_value(a, &mut raw)?;
    let count = u64::from_le_bytes(raw[16..24].try_into().unwrap());
    let blocks = owned_blocks(a, it)?;
    for &b in &blocks {
        if free.contains_key(&b) {
            r.problems.push(format!("{name}: tree block {b:#x} is on a free list"));
        }
        r.tree_bytes += a.block_size(b)?;
    }
    if kind == Kind::List {
        let (in_tree, problems) = listtree::check(a, r0)?;
        r.problems.extend(problems.into_iter().map(|p| format!("{name}: {p}")));
        let (head, tail) = list_buffers(&raw)?;
        let held = in_tree + (head.len() + tail.len()) as u64;
        if count != held {
            r.problems.push(format!("{name}: item says {count} elements, tree and buffers hold {held}"));
        }
        if head.len() > BUF_ENTRIES || tail.len() > BUF_ENTRIES {
            r.problems.push(format!("{name}: a list buffer is over its size"));
        }
        return Ok(());
    }
    let seed = a.seed();
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let mut prev: Option<(u64, Vec<u8>)> = None;
    let mut elems0 = Vec::new();
    let mut problems = tree::check(a, r0, &mut |prefix, e| {
        tree::read_elem(a, e, &mut k, &mut v)?;
        elems0.push(e);
        {
            if prefix != field_hash(seed, &k) {
                r.problems.push(format!("{name}: element with a wrong hash prefix"));
            }
            let cur = (prefix, k.clone());
            if prev.as_ref().is_some_and(|p| *p >= cur) {
                r.problems.push(format!("{name}: elements out of hash order"));
            }
            prev = Some(cur);
        }
        Ok(())
    })?;
    let mut elems1 = Vec::new();
    if kind == Kind::ZSet {
        let mut prev: Option<(u64, Vec<u8>)> = None;
        problems.extend(tree::check(a, r1, &mut |prefix, e| {
            tree::read_elem(a, e, &mut k, &mut v)?;
            elems1.push(e);
            if prefix != score_key(score_of(&v)?) {
                r.problems.push(format!("{name}: score prefix disagrees with the score"));
            }
            let cur = (prefix, k.clone());
            if prev.as_ref().is_some_and(|p| *p >= cur) {
                r.problems.push(format!("{name}: elements out of score order"));
            }
            prev = Some(cur);
            Ok(())
        })?);
        let (mut s0, mut s1) = (elems0.clone(), elems1);
        s0.sort_unstable();
        s1.sort_unstable();
        if s0 != s1 {
            r.problems.push(format!("{name}: the two sorted-set trees hold different elements"));
        }
    }
    if count != elems0.len() as u64 {
        r.problems.push(format!("{name}: item says {count} elements, tree holds {}", elems0.len()));
    }
    r.problems.extend(problems.into_iter().map(|p| format!("{name}: {p}")));
    Ok(())
}

/// Builds a deep copy of a collection item under a new key (COPY): a packed item's bytes
/// are copied as they are; a tree is rebuilt from its elements.
pub(crate) fn deep_copy(
    p: &Participant,
    it: &ItemView,
    key: &[u8],
    expire_at: u64,
    version: u64,
) -> Result<u64, Error> {
    let a = &**p.arena();
    let ty = it.ty();
    let mut raw = Vec::new();
    it.raw_value(a, &mut raw)?;
    if item::is_tree_type(ty) {
        let (r0, r1) = tree_roots(a, it)?.unwrap_or((0, 0));
        let mut ed = Edit::default();
        let r = (|| -> Result<Vec<u8>, Error> {
            if ty == Kind::List.tree_type() {
                // Same shape, same chunk bytes; the header's count and the buffers as they are.
                let mut b = raw.clone();
                b[..8].copy_from_slice(&listtree::copy(p, &mut ed, r0)?.to_le_bytes());
                return Ok(b);
            }
            let mut map = std::collections::HashMap::new();
            let mut order0 = Vec::new();
            let (mut k, mut v) = (Vec::new(), Vec::new());
            tree::walk(a, r0, 0, tree::count(a, r0)?, &mut |prefix, e| {
                tree::read_elem(a, e, &mut k, &mut v)?;
                let ne = ed.elem(p, &k, &v)?;
                map.insert(e, ne);
                order0.push((prefix, ne));
                Ok(true)
            })?;
            let n0 = tree::build(p, &mut ed, &order0)?;
            let mut order1 = Vec::new();
            tree::walk(a, r1, 0, tree::count(a, r1)?, &mut |prefix, e| {
                order1.push((prefix, *map.get(&e).ok_or(Error::Corrupt("sorted-set trees disagree"))?));
                Ok(true)
            })?;
            let n1 = tree::build(p, &mut ed, &order1)?;
            let mut b = raw.clone();
            b[..8].copy_from_slice(&n0.to_le_bytes());
            b[8..16].copy_from_slice(&n1.to_le_bytes());
            Ok(b)
        })();
        match r {
            Ok(b) => raw = b,
            Err(e) => {
                ed.abandon(p);
                return Err(e);
            }
        }
        // The copy is published by the caller; its blocks stay allocated.
        drop(ed);
    }
    item::build(p, &NewItem { key, value: Value::Coll(ty, &raw), expire_at, cflags: 0, version })
}

impl Handle {
    /// Reads the collection under `key`: `f` gets a consistent snapshot. Ok(None) if the
    /// key is missing; `WRONGTYPE` if it holds another kind of value.
    pub fn coll_read<R>(
        &self,
        db: u32,
        key: &[u8],
        kind: Kind,
        f: impl FnOnce(&mut Coll<'_>) -> Result<R, Error>,
    ) -> Result<Option<R>, Error> {
        let limits = self.store.limits();
        self.read(db, key, |a, it| {
            let mut c = Coll::open(a, None, kind, Some(it), limits, None)?;
            f(&mut c)
        })
    }

    /// Edits the collection under `key` (an empty one if it is missing and `create`; if it
    /// is missing and not `create`, `f` is not called and the result is None). When `f`
    /// returns Ok, its changes are published at once (a collection left empty is deleted);
    /// when it returns an error, nothing changes.
    pub fn coll_write<R>(
        &mut self,
        db: u32,
        key: &[u8],
        kind: Kind,
        create: bool,
        f: impl FnOnce(&mut Coll<'_>) -> Result<R, Error>,
    ) -> Result<Option<R>, Error> {
        let limits = self.store.limits_arc();
        let spare: Spare = std::cell::Cell::new(std::mem::take(&mut self.list_spare));
        let mut ed_out = None;
        let mut pushed = false;
        let r = self.write(db, key, |p, old| {
            let a = &**p.arena();
            if old.is_none() && !create {
                return Ok((Action::Keep, None));
            }
            let mut c = Coll::open(a, Some(p), kind, old, &limits, Some(&spare))?;
            let r = match f(&mut c) {
                Ok(r) => r,
                Err(e) => {
                    std::mem::take(&mut c.ed).abandon(p);
                    return Err(e);
                }
            };
            if !c.dirty {
                return Ok((Action::Keep, Some(r)));
            }
            pushed = c.pushed && c.len > 0;
            let ed = std::mem::take(&mut c.ed);
            if c.len == 0 {
                ed_out = Some(ed);
                return Ok((Action::Drop, Some(r)));
            }
            let expire_at = match (c.expire_at, old) {
                (Some(at), _) => at,
                (None, Some(o)) => o.expire_at(a)?,
                (None, None) => 0,
            };
            let built = p.next_version().map_err(Error::from).and_then(|version| {
                c.encode(|value| item::build(p, &NewItem { key, value, expire_at, cflags: 0, version }))
            });
            match built {
                Ok(off) => {
                    ed_out = Some(ed);
                    Ok((Action::Update(off), Some(r)))
                }
                Err(e) => {
                    ed.abandon(p);
                    Err(e)
                }
            }
        });
        self.list_spare = spare.take();
        match (&r, ed_out) {
            (Ok(_), Some(ed)) => {
                let _g = self.p.pin();
                for off in ed.replaced {
                    self.p.retire(off)?;
                }
            }
            (Err(_), Some(ed)) => ed.abandon(&self.p),
            _ => {}
        }
        if matches!(r, Ok(Some(_))) {
            let _ = self.after_delete(db, key);
            if pushed {
                self.store.notify_push();
            }
        }
        r
    }
}
