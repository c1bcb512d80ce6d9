//! The persistent (copy-on-write) counted B+tree that holds large collections.
//!
//! A tree is a sequence of *elements* (arena blocks `klen u32 | vlen u32 | key | value`).
//! Every node records how many elements lie beneath each child, so the tree is addressed by
//! position (`nth`, `insert_at`, `remove_at`): a list uses positions directly, and an ordered
//! collection (hash, set, sorted set) finds the position of a key with [`seek`], which
//! compares a 64-bit `prefix` per element (the field's hash, or a sortable score) before it
//! ever reads key bytes.
//!
//! ```text
//!   node   @0  u32  INNER bit | n          (entries in this node)
//!          @4  u32  0
//!          @8  u64  elements beneath this node
//!          @16 n × leaf entry  { prefix u64, elem u64 }                       16 bytes
//!           or n × inner entry { prefix u64, min elem u64, child u64, count u64 }  32 bytes
//! ```
//!
//! An inner entry carries its child's smallest element (prefix and offset) so a search
//! descends without reading the child. Published nodes never change: a mutation copies the
//! nodes on its path into fresh blocks ([`Edit::fresh`]) and lists the ones it replaced
//! ([`Edit::replaced`]); the caller publishes the new root through the index and retires the
//! replaced nodes, so a reader that holds the old root keeps a whole, consistent version,
//! and a writer that dies before publishing leaves the old version untouched.

use std::cmp::Ordering;
use std::collections::HashSet;

use larder_arena::{Arena, Participant};

use crate::Error;

const INNER: u32 = 1 << 31;
/// Entries per leaf and per inner node. 32 × 16 bytes and 16 × 32 bytes: both node kinds
/// are 528-byte blocks, and a path copy in a tree of a million elements touches 5 of them.
pub(crate) const LEAF_MAX: usize = 32;
pub(crate) const INNER_MAX: usize = 16;
const HEAD: u64 = 16;
/// More elements than any arena holds: a count above it was read from a corrupt node, and
/// counts below it add up (64 levels of 16) without overflowing.
const MAX_COUNT: u64 = 1 << 40;

fn checked_count(c: u64) -> Result<u64, Error> {
    if c > MAX_COUNT {
        return Err(Error::Corrupt("tree node with a bad element count"));
    }
    Ok(c)
}

/// One entry of a node, leaf or inner (a leaf entry leaves `child` 0 and `count` 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ent {
    pub prefix: u64,
    /// The element (leaf), or the child's first element (inner).
    pub elem: u64,
    pub child: u64,
    pub count: u64,
}

/// A node read out of the arena (nodes are small: one copy, then plain reads).
#[derive(Clone)]
pub(crate) struct Node {
    pub inner: bool,
    pub n: usize,
    pub ents: [Ent; LEAF_MAX],
}

impl Node {
    fn new(inner: bool) -> Node {
        Node { inner, n: 0, ents: [Ent::default(); LEAF_MAX] }
    }

    fn max(&self) -> usize {
        if self.inner {
            INNER_MAX
        } else {
            LEAF_MAX
        }
    }

    fn count(&self) -> u64 {
        self.ents[..self.n].iter().map(|e| e.count).sum()
    }

    fn first(&self) -> Ent {
        self.ents[0]
    }

    fn insert(&mut self, i: usize, e: Ent) {
        self.ents.copy_within(i..self.n, i + 1);
        self.ents[i] = e;
        self.n += 1;
    }

    pub(crate) fn remove(&mut self, i: usize) -> Ent {
        let e = self.ents[i];
        self.ents.copy_within(i + 1..self.n, i);
        self.n -= 1;
        e
    }

    pub(crate) fn read(a: &Arena, off: u64) -> Result<Node, Error> {
        let mut head = [0u8; HEAD as usize];
        a.read(off, &mut head)?;
        let w = u32::from_le_bytes(head[0..4].try_into().unwrap());
        let inner = w & INNER != 0;
        let n = (w & 0xffff) as usize;
        if n == 0 || n > if inner { INNER_MAX } else { LEAF_MAX } {
            return Err(Error::Corrupt("tree node with a bad entry count"));
        }
        let esz = if inner { 32 } else { 16 };
        let mut buf = [0u8; LEAF_MAX * 16];
        a.read(off + HEAD, &mut buf[..n * esz])?;
        // Only the n entries there are (the rest stay zero); fixed-size chunks, so no bounds
        // check per word: this runs on every node of every path a write copies.
        let mut node = Node::new(inner);
        node.n = n;
        let w = |b: &[u8], k: usize| u64::from_le_bytes(b[k * 8..k * 8 + 8].try_into().unwrap());
        if inner {
            for (e, b) in node.ents[..n].iter_mut().zip(buf.chunks_exact(32)) {
                *e = Ent { prefix: w(b, 0), elem: w(b, 1), child: w(b, 2), count: checked_count(w(b, 3))? };
            }
        } else {
            for (e, b) in node.ents[..n].iter_mut().zip(buf.chunks_exact(16)) {
                *e = Ent { prefix: w(b, 0), elem: w(b, 1), child: 0, count: 1 };
            }
        }
        Ok(node)
    }

    fn write(&self, p: &Participant) -> Result<u64, Error> {
        let esz = if self.inner { 32 } else { 16 };
        let size = HEAD as usize + self.n * esz;
        let mut buf = [0u8; HEAD as usize + LEAF_MAX * 16];
        let w = (self.n as u32) | if self.inner { INNER } else { 0 };
        buf[0..4].copy_from_slice(&w.to_le_bytes());
        buf[8..16].copy_from_slice(&self.count().to_le_bytes());
        for (i, e) in self.ents[..self.n].iter().enumerate() {
            let o = HEAD as usize + i * esz;
            buf[o..o + 8].copy_from_slice(&e.prefix.to_le_bytes());
            buf[o + 8..o + 16].copy_from_slice(&e.elem.to_le_bytes());
            if self.inner {
                buf[o + 16..o + 24].copy_from_slice(&e.child.to_le_bytes());
                buf[o + 24..o + 32].copy_from_slice(&e.count.to_le_bytes());
            }
        }
        let off = p.alloc(size as u64)?;
        p.arena().write(off, &buf[..size])?;
        Ok(off)
    }
}

/// A published node read in place: the header once, then each entry word as a search
/// needs it (a binary search reads a handful of the node's 64-byte lines, not all of them).
struct View<'a> {
    a: &'a Arena,
    off: u64,
    inner: bool,
    n: usize,
}

impl<'a> View<'a> {
    fn read(a: &'a Arena, off: u64) -> Result<View<'a>, Error> {
        let w = a.u32(off)?.load(std::sync::atomic::Ordering::Relaxed);
        let inner = w & INNER != 0;
        let n = (w & 0xffff) as usize;
        if n == 0 || n > if inner { INNER_MAX } else { LEAF_MAX } {
            return Err(Error::Corrupt("tree node with a bad entry count"));
        }
        Ok(View { a, off, inner, n })
    }

    #[inline]
    fn word(&self, i: usize, k: usize) -> Result<u64, Error> {
        let o = self.off + HEAD + (i * if self.inner { 32 } else { 16 } + k * 8) as u64;
        Ok(self.a.u64(o)?.load(std::sync::atomic::Ordering::Relaxed))
    }

    #[inline]
    fn prefix(&self, i: usize) -> Result<u64, Error> {
        self.word(i, 0)
    }

    #[inline]
    fn elem(&self, i: usize) -> Result<u64, Error> {
        self.word(i, 1)
    }

    #[inline]
    fn child(&self, i: usize) -> Result<u64, Error> {
        self.word(i, 2)
    }

    #[inline]
    fn count(&self, i: usize) -> Result<u64, Error> {
        if self.inner {
            self.word(i, 3).and_then(checked_count)
        } else {
            Ok(1)
        }
    }

    /// How many entries in `lo..n` compare Less than the target (they come first: the
    /// entries are in order), by binary search.
    fn less_than(&self, lo: usize, cmp: &mut dyn FnMut(u64, u64) -> Result<Ordering, Error>) -> Result<usize, Error> {
        let (mut l, mut h) = (lo, self.n);
        while l < h {
            let m = (l + h) / 2;
            if cmp(self.prefix(m)?, self.elem(m)?)? == Ordering::Less {
                l = m + 1;
            } else {
                h = m;
            }
        }
        Ok(l - lo)
    }
}

/// Elements beneath a node (its header's count).
pub(crate) fn count(a: &Arena, node: u64) -> Result<u64, Error> {
    if node == 0 {
        return Ok(0);
    }
    checked_count(a.u64(node + 8)?.load(std::sync::atomic::Ordering::Relaxed))
}

// ---- elements ----

/// Allocates an element holding `key` and `val`.
pub(crate) fn new_elem(p: &Participant, key: &[u8], val: &[u8]) -> Result<u64, Error> {
    if key.len() > u32::MAX as usize || val.len() > u32::MAX as usize {
        return Err(Error::TooLarge);
    }
    let off = p.alloc(8 + key.len() as u64 + val.len() as u64)?;
    let a = p.arena();
    let mut head = [0u8; 8];
    head[0..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
    head[4..8].copy_from_slice(&(val.len() as u32).to_le_bytes());
    a.write(off, &head)?;
    a.write(off + 8, key)?;
    a.write(off + 8 + key.len() as u64, val)?;
    Ok(off)
}

/// An element's key and value lengths.
pub(crate) fn elem_lens(a: &Arena, e: u64) -> Result<(u64, u64), Error> {
    let mut head = [0u8; 8];
    a.read(e, &mut head)?;
    let k = u32::from_le_bytes(head[0..4].try_into().unwrap()) as u64;
    let v = u32::from_le_bytes(head[4..8].try_into().unwrap()) as u64;
    if (e + 8).checked_add(k + v).is_none_or(|end| end > a.capacity()) {
        return Err(Error::Corrupt("element extends past the arena"));
    }
    Ok((k, v))
}

/// Appends an element's key to `k` and value to `v` (both cleared first).
pub(crate) fn read_elem(a: &Arena, e: u64, k: &mut Vec<u8>, v: &mut Vec<u8>) -> Result<(), Error> {
    let (kl, vl) = elem_lens(a, e)?;
    k.clear();
    v.clear();
    a.read_append(e + 8, kl as usize, k)?;
    a.read_append(e + 8 + kl, vl as usize, v)?;
    Ok(())
}

/// Appends an element's key to `k` (cleared first).
pub(crate) fn read_key(a: &Arena, e: u64, k: &mut Vec<u8>) -> Result<(), Error> {
    let (kl, _) = elem_lens(a, e)?;
    k.clear();
    a.read_append(e + 8, kl as usize, k)?;
    Ok(())
}

// ---- reads ----

/// The element at position `i` (0-based), with its prefix.
pub(crate) fn nth(a: &Arena, root: u64, mut i: u64) -> Result<(u64, u64), Error> {
    let mut node = root;
    for _ in 0..64 {
        let n = View::read(a, node)?;
        if !n.inner {
            if i as usize >= n.n {
                return Err(Error::Corrupt("tree position out of range"));
            }
            return Ok((n.prefix(i as usize)?, n.elem(i as usize)?));
        }
        let mut next = None;
        for k in 0..n.n {
            let c = n.count(k)?;
            if i < c {
                next = Some(n.child(k)?);
                break;
            }
            i -= c;
        }
        node = next.ok_or(Error::Corrupt("tree position out of range"))?;
    }
    Err(Error::Corrupt("tree too deep"))
}

/// The position of the first element that is not less than the target (a lower bound).
/// `cmp(prefix, elem)` orders an element against the target.
pub(crate) fn seek(
    a: &Arena,
    root: u64,
    cmp: &mut dyn FnMut(u64, u64) -> Result<Ordering, Error>,
) -> Result<u64, Error> {
    Ok(seek_elem(a, root, cmp)?.0)
}

/// [`seek`], also returning the element at the bound (prefix, offset), if there is one,
/// found in the same descent.
pub(crate) fn seek_elem(
    a: &Arena,
    root: u64,
    cmp: &mut dyn FnMut(u64, u64) -> Result<Ordering, Error>,
) -> Result<(u64, Option<(u64, u64)>), Error> {
    if root == 0 {
        return Ok((0, None));
    }
    let mut node = root;
    let mut rank = 0;
    // The first element after the current subtree: the bound when the target is greater
    // than everything in the subtree.
    let mut after = None;
    for _ in 0..64 {
        let n = View::read(a, node)?;
        if !n.inner {
            let i = n.less_than(0, cmp)?;
            if i < n.n {
                return Ok((rank + i as u64, Some((n.prefix(i)?, n.elem(i)?))));
            }
            return Ok((rank + n.n as u64, after));
        }
        // The last child whose first element is less than the target holds the bound (or
        // the bound is the next child's first element). The first child is taken whatever
        // its first element, so the search starts at entry 1.
        let pick = n.less_than(1, cmp)?;
        if pick + 1 < n.n {
            after = Some((n.prefix(pick + 1)?, n.elem(pick + 1)?));
        }
        for k in 0..pick {
            rank += n.count(k)?;
        }
        node = n.child(pick)?;
    }
    Err(Error::Corrupt("tree too deep"))
}

/// Calls `f(prefix, elem)` for positions `from..to`, in order; `f` returns false to stop.
pub(crate) fn walk(
    a: &Arena,
    root: u64,
    from: u64,
    to: u64,
    f: &mut dyn FnMut(u64, u64) -> Result<bool, Error>,
) -> Result<(), Error> {
    if root == 0 || from >= to {
        return Ok(());
    }
    walk_node(a, root, from, to, 0, f).map(|_| ())
}

fn walk_node(
    a: &Arena,
    node: u64,
    from: u64,
    to: u64,
    depth: u32,
    f: &mut dyn FnMut(u64, u64) -> Result<bool, Error>,
) -> Result<bool, Error> {
    if depth > 64 {
        return Err(Error::Corrupt("tree too deep"));
    }
    let n = View::read(a, node)?;
    let mut base = 0u64;
    for k in 0..n.n {
        let end = base + n.count(k)?;
        if end > from && base < to {
            if n.inner {
                if !walk_node(a, n.child(k)?, from.saturating_sub(base), to - base, depth + 1, f)? {
                    return Ok(false);
                }
            } else if !f(n.prefix(k)?, n.elem(k)?)? {
                return Ok(false);
            }
        }
        base = end;
        if base >= to {
            break;
        }
    }
    Ok(true)
}

/// Calls `f` for every node and (when `elems`) every element of the tree: what a drop
/// retires, and what the checker accounts for.
pub(crate) fn for_each_block(
    a: &Arena,
    root: u64,
    elems: bool,
    f: &mut dyn FnMut(u64, bool) -> Result<(), Error>,
) -> Result<(), Error> {
    fn go(
        a: &Arena,
        node: u64,
        elems: bool,
        depth: u32,
        f: &mut dyn FnMut(u64, bool) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        let n = Node::read(a, node)?;
        for e in &n.ents[..n.n] {
            if n.inner {
                go(a, e.child, elems, depth + 1, f)?;
            } else if elems {
                f(e.elem, false)?;
            }
        }
        f(node, true)
    }
    if root == 0 {
        return Ok(());
    }
    go(a, root, elems, 0, f)
}

// ---- writes ----

/// The blocks one mutation session allocated (not yet published: free them on failure)
/// and the published blocks it replaced (retire them once the new root is published).
#[derive(Default)]
pub(crate) struct Edit {
    pub fresh: Fresh,
    pub replaced: Vec<u64>,
}

/// The blocks a session allocated. Most sessions allocate a handful (one element and a
/// path of nodes): a short vector, searched linearly, with no hashing and no table to grow;
/// a session that builds a large collection moves to a hash set.
#[derive(Default)]
pub(crate) struct Fresh {
    small: Vec<u64>,
    big: Option<HashSet<u64, std::hash::BuildHasherDefault<OffsetHasher>>>,
}

const FRESH_SMALL: usize = 32;

impl Fresh {
    pub(crate) fn insert(&mut self, off: u64) {
        match &mut self.big {
            Some(b) => {
                b.insert(off);
            }
            None if self.small.len() < FRESH_SMALL => self.small.push(off),
            None => {
                let mut b: HashSet<u64, _> = self.small.drain(..).collect();
                b.insert(off);
                self.big = Some(b);
            }
        }
    }

    pub(crate) fn remove(&mut self, off: &u64) -> bool {
        match &mut self.big {
            Some(b) => b.remove(off),
            None => match self.small.iter().rposition(|x| x == off) {
                Some(i) => {
                    self.small.swap_remove(i);
                    true
                }
                None => false,
            },
        }
    }
}

impl IntoIterator for Fresh {
    type Item = u64;
    type IntoIter = Box<dyn Iterator<Item = u64>>;
    fn into_iter(self) -> Self::IntoIter {
        match self.big {
            Some(b) => Box::new(b.into_iter()),
            None => Box::new(self.small.into_iter()),
        }
    }
}

/// Arena offsets are distinct multiples of 8: one multiply spreads them well enough, and
/// costs a fraction of SipHash on the write path.
#[derive(Default)]
pub(crate) struct OffsetHasher(u64);

impl std::hash::Hasher for OffsetHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

impl Edit {
    /// A block this session no longer references: freed at once if nobody else can have
    /// seen it, otherwise retired after publication.
    pub(crate) fn drop_block(&mut self, p: &Participant, off: u64) -> Result<(), Error> {
        if self.fresh.remove(&off) {
            p.free(off)?;
        } else {
            self.replaced.push(off);
        }
        Ok(())
    }

    pub(crate) fn put(&mut self, p: &Participant, n: &Node) -> Result<u64, Error> {
        let off = n.write(p)?;
        self.fresh.insert(off);
        Ok(off)
    }

    pub(crate) fn elem(&mut self, p: &Participant, key: &[u8], val: &[u8]) -> Result<u64, Error> {
        let off = new_elem(p, key, val)?;
        self.fresh.insert(off);
        Ok(off)
    }

    /// Undo: free everything allocated, forget what would have been retired.
    pub(crate) fn abandon(self, p: &Participant) {
        for off in self.fresh {
            let _ = p.free(off);
        }
    }
}

fn inner_ent(n: &Node, off: u64) -> Ent {
    let f = n.first();
    Ent { prefix: f.prefix, elem: f.elem, child: off, count: n.count() }
}

/// A node just written, as its parent's entry for it.
type Written = Ent;

/// Splits a full node that must take one more entry at `i`. Appends keep the left node
/// full (a list pushed at its tail, a sorted set fed in order); prepends keep the right one
/// full; otherwise the halves are even.
fn split_insert(n: &Node, i: usize, e: Ent) -> (Node, Node) {
    let mut all = [Ent::default(); LEAF_MAX + 1];
    all[..i].copy_from_slice(&n.ents[..i]);
    all[i] = e;
    all[i + 1..n.n + 1].copy_from_slice(&n.ents[i..n.n]);
    let total = n.n + 1;
    let cut = if i == n.n {
        n.n
    } else if i == 0 {
        1
    } else {
        total / 2
    };
    let mut l = Node::new(n.inner);
    let mut r = Node::new(n.inner);
    l.ents[..cut].copy_from_slice(&all[..cut]);
    l.n = cut;
    r.ents[..total - cut].copy_from_slice(&all[cut..total]);
    r.n = total - cut;
    (l, r)
}

/// Inserts `(prefix, elem)` at position `i`; returns the new root.
pub(crate) fn insert_at(
    p: &Participant,
    ed: &mut Edit,
    root: u64,
    i: u64,
    prefix: u64,
    elem: u64,
) -> Result<u64, Error> {
    let a = &**p.arena();
    if root == 0 {
        let mut n = Node::new(false);
        n.insert(0, Ent { prefix, elem, child: 0, count: 1 });
        return ed.put(p, &n);
    }
    match insert_rec(p, a, ed, root, i, Ent { prefix, elem, child: 0, count: 1 }, 0)? {
        (l, None) => Ok(l.child),
        (l, Some(r)) => grow_root(p, ed, l, r),
    }
}

fn insert_rec(
    p: &Participant,
    a: &Arena,
    ed: &mut Edit,
    node: u64,
    i: u64,
    e: Ent,
    depth: u32,
) -> Result<(Written, Option<Written>), Error> {
    if depth > 64 {
        return Err(Error::Corrupt("tree too deep"));
    }
    let mut n = Node::read(a, node)?;
    let (pos, ent) = if n.inner {
        // Descend into the child covering position i; a position on a boundary goes to the
        // end of the left child (so appends stay in the last leaf).
        let mut k = 0;
        let mut base = 0;
        while k + 1 < n.n && i > base + n.ents[k].count {
            base += n.ents[k].count;
            k += 1;
        }
        let (l, r) = insert_rec(p, a, ed, n.ents[k].child, i - base, e, depth + 1)?;
        n.ents[k] = l;
        match r {
            None => {
                ed.drop_block(p, node)?;
                let off = ed.put(p, &n)?;
                return Ok((inner_ent(&n, off), None));
            }
            Some(r) => (k + 1, r),
        }
    } else {
        (i as usize, e)
    };
    if pos > n.n {
        return Err(Error::Corrupt("tree position out of range"));
    }
    place(p, ed, node, n, pos, ent)
}

/// Replaces the published `node` (read into `n`) by `n` with `ent` inserted at `pos`: one
/// node, or two halves when it was full.
pub(crate) fn place(
    p: &Participant,
    ed: &mut Edit,
    node: u64,
    mut n: Node,
    pos: usize,
    ent: Ent,
) -> Result<(Written, Option<Written>), Error> {
    ed.drop_block(p, node)?;
    if n.n < n.max() {
        n.insert(pos, ent);
        let off = ed.put(p, &n)?;
        Ok((inner_ent(&n, off), None))
    } else {
        let (l, r) = split_insert(&n, pos, ent);
        let lo = ed.put(p, &l)?;
        let ro = ed.put(p, &r)?;
        Ok((inner_ent(&l, lo), Some(inner_ent(&r, ro))))
    }
}

/// A new root over two nodes that split.
pub(crate) fn grow_root(p: &Participant, ed: &mut Edit, l: Written, r: Written) -> Result<u64, Error> {
    let mut n = Node::new(true);
    n.insert(0, l);
    n.insert(1, r);
    ed.put(p, &n)
}

/// Replaces the element at position `i`; returns the new root and the old element.
pub(crate) fn replace_at(
    p: &Participant,
    ed: &mut Edit,
    root: u64,
    i: u64,
    prefix: u64,
    elem: u64,
) -> Result<(u64, u64), Error> {
    let a = &**p.arena();
    let mut old = 0;
    let w = replace_rec(p, a, ed, root, i, prefix, elem, &mut old, 0)?;
    Ok((w.child, old))
}

#[allow(clippy::too_many_arguments)]
fn replace_rec(
    p: &Participant,
    a: &Arena,
    ed: &mut Edit,
    node: u64,
    i: u64,
    prefix: u64,
    elem: u64,
    old: &mut u64,
    depth: u32,
) -> Result<Written, Error> {
    if depth > 64 {
        return Err(Error::Corrupt("tree too deep"));
    }
    let mut n = Node::read(a, node)?;
    if n.inner {
        let (k, base) = child_at(&n, i)?;
        n.ents[k] = replace_rec(p, a, ed, n.ents[k].child, i - base, prefix, elem, old, depth + 1)?;
    } else {
        let e = n
            .ents
            .get_mut(i as usize)
            .filter(|_| (i as usize) < n.n)
            .ok_or(Error::Corrupt("tree position out of range"))?;
        *old = e.elem;
        e.prefix = prefix;
        e.elem = elem;
    }
    ed.drop_block(p, node)?;
    let off = ed.put(p, &n)?;
    Ok(inner_ent(&n, off))
}

pub(crate) fn child_at(n: &Node, i: u64) -> Result<(usize, u64), Error> {
    let mut base = 0;
    for k in 0..n.n {
        if i < base + n.ents[k].count {
            return Ok((k, base));
        }
        base += n.ents[k].count;
    }
    Err(Error::Corrupt("tree position out of range"))
}

/// Removes the element at position `i`; returns the new root (0 when the tree is empty)
/// and the removed element.
pub(crate) fn remove_at(p: &Participant, ed: &mut Edit, root: u64, i: u64) -> Result<(u64, u64), Error> {
    let a = &**p.arena();
    let mut old = 0;
    let w = remove_rec(p, a, ed, root, i, &mut old, 0)?;
    let root = collapse(p, a, ed, w.map_or(0, |(w, _, _)| w.child))?;
    Ok((root, old))
}

/// A root with one child gives way to the child (repeatedly).
fn collapse(p: &Participant, a: &Arena, ed: &mut Edit, mut root: u64) -> Result<u64, Error> {
    while root != 0 {
        let n = Node::read(a, root)?;
        if n.inner && n.n == 1 {
            ed.drop_block(p, root)?;
            root = n.ents[0].child;
        } else {
            break;
        }
    }
    Ok(root)
}

/// Returns the rewritten node's entry, entry count and capacity (None if it emptied).
fn remove_rec(
    p: &Participant,
    a: &Arena,
    ed: &mut Edit,
    node: u64,
    i: u64,
    old: &mut u64,
    depth: u32,
) -> Result<Option<(Written, usize, usize)>, Error> {
    if depth > 64 {
        return Err(Error::Corrupt("tree too deep"));
    }
    let mut n = Node::read(a, node)?;
    if n.inner {
        let (k, base) = child_at(&n, i)?;
        match remove_rec(p, a, ed, n.ents[k].child, i - base, old, depth + 1)? {
            None => {
                n.remove(k);
            }
            Some((w, c_n, c_max)) => {
                n.ents[k] = w;
                // An underfull child merges with a neighbour when both fit in one node.
                if c_n < c_max / 4 && n.n > 1 {
                    let j = if k + 1 < n.n { k + 1 } else { k - 1 };
                    let (lk, rk) = (k.min(j), k.max(j));
                    let left = Node::read(a, n.ents[lk].child)?;
                    let right = Node::read(a, n.ents[rk].child)?;
                    if left.n + right.n <= c_max {
                        let mut m = left.clone();
                        m.ents[m.n..m.n + right.n].copy_from_slice(&right.ents[..right.n]);
                        m.n += right.n;
                        ed.drop_block(p, n.ents[lk].child)?;
                        ed.drop_block(p, n.ents[rk].child)?;
                        let moff = ed.put(p, &m)?;
                        n.ents[lk] = inner_ent(&m, moff);
                        n.remove(rk);
                    }
                }
            }
        }
    } else {
        if i as usize >= n.n {
            return Err(Error::Corrupt("tree position out of range"));
        }
        *old = n.remove(i as usize).elem;
    }
    ed.drop_block(p, node)?;
    if n.n == 0 {
        return Ok(None);
    }
    let off = ed.put(p, &n)?;
    Ok(Some((inner_ent(&n, off), n.n, n.max())))
}

/// Builds a tree from elements already in order, bottom up, with full nodes.
pub(crate) fn build(p: &Participant, ed: &mut Edit, elems: &[(u64, u64)]) -> Result<u64, Error> {
    if elems.is_empty() {
        return Ok(0);
    }
    let mut level: Vec<Ent> = Vec::with_capacity(elems.len() / LEAF_MAX + 1);
    for chunk in elems.chunks(LEAF_MAX) {
        let mut n = Node::new(false);
        for &(prefix, elem) in chunk {
            n.insert(n.n, Ent { prefix, elem, child: 0, count: 1 });
        }
        let off = ed.put(p, &n)?;
        level.push(inner_ent(&n, off));
    }
    while level.len() > 1 {
        let mut up = Vec::with_capacity(level.len() / INNER_MAX + 1);
        for chunk in level.chunks(INNER_MAX) {
            let mut n = Node::new(true);
            for &e in chunk {
                n.insert(n.n, e);
            }
            let off = ed.put(p, &n)?;
            up.push(inner_ent(&n, off));
        }
        level = up;
    }
    Ok(level[0].child)
}

/// Checks a tree's structure: counts agree, separators are each child's first element,
/// inner nodes hold at least one entry, every leaf is at the same depth. Returns the
/// element count and calls `f(prefix, elem)` in order.
pub(crate) fn check(
    a: &Arena,
    root: u64,
    f: &mut dyn FnMut(u64, u64) -> Result<(), Error>,
) -> Result<Vec<String>, Error> {
    let mut problems = Vec::new();
    let mut leaf_depth = None;
    fn go(
        a: &Arena,
        node: u64,
        depth: u32,
        leaf_depth: &mut Option<u32>,
        problems: &mut Vec<String>,
        f: &mut dyn FnMut(u64, u64) -> Result<(), Error>,
    ) -> Result<(u64, Ent), Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        let n = Node::read(a, node)?;
        let stored = count(a, node)?;
        let mut total = 0;
        for e in &n.ents[..n.n] {
            if n.inner {
                let (c, first) = go(a, e.child, depth + 1, leaf_depth, problems, f)?;
                if c != e.count {
                    problems.push(format!("tree node {node:#x}: child count {} but {} below", e.count, c));
                }
                if first.prefix != e.prefix || first.elem != e.elem {
                    problems.push(format!("tree node {node:#x}: separator is not the child's first element"));
                }
                total += c;
            } else {
                f(e.prefix, e.elem)?;
                total += 1;
            }
        }
        if !n.inner {
            match leaf_depth {
                None => *leaf_depth = Some(depth),
                Some(d) if *d != depth => problems.push(format!("tree leaf {node:#x} at depth {depth}, others at {d}")),
                _ => {}
            }
        }
        if stored != total {
            problems.push(format!("tree node {node:#x}: header count {stored} but {total} below"));
        }
        Ok((total, n.first()))
    }
    if root != 0 {
        go(a, root, 0, &mut leaf_depth, &mut problems, f)?;
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn counts_no_arena_could_hold_are_refused_where_they_are_read() {
        // Counts are added up along every path (and a list's length is its tree's count
        // plus its buffers'): one read from a corrupt node must not overflow them.
        let store = crate::Store::open(crate::StoreConfig::small_for_tests()).unwrap();
        let p = store.arena().register().unwrap();
        let elems: Vec<(u64, u64)> = (0..2000).map(|i| (i, 8 * (i + 1))).collect();
        let root = build(&p, &mut Edit::default(), &elems).unwrap();
        let a = p.arena();
        assert_eq!(count(a, root).unwrap(), 2000);
        let mut seen = 0;
        walk(a, root, 0, 2000, &mut |_, _| {
            seen += 1;
            Ok(true)
        })
        .unwrap();
        assert_eq!(seen, 2000);
        // The header's total, then the first entry's count.
        a.u64(root + 8).unwrap().store(u64::MAX - 3, Relaxed);
        assert!(count(a, root).is_err());
        a.u64(root + 8).unwrap().store(2000, Relaxed);
        a.u64(root + HEAD + 24).unwrap().store(u64::MAX - 3, Relaxed);
        assert!(Node::read(a, root).is_err());
        assert!(walk(a, root, 0, 10, &mut |_, _| Ok(true)).is_err());
    }
}
