//! The tree of a large list: a counted B+tree whose leaves are *chunks*, runs of elements
//! encoded back to back in one arena block, as Redis's quicklist is a list of listpacks.
//!
//! ```text
//!   chunk  @0  u32  CHUNK bit | n            (elements in this chunk)
//!          @4  u32  bytes                    (of the run that follows)
//!          @8  u64  n                        (the count every tree node keeps here)
//!          @16 a Strip: n × { varint len, bytes }
//! ```
//!
//! Inner nodes are [`tree`]'s (entries `{0, 0, child, count}`), so a position is found by
//! counts as in any counted tree, and chunks sit at the same depth everywhere. A chunk holds
//! at most [`BUF_ENTRIES`] elements and [`BUF_BYTES`] bytes (one element may be larger), the
//! same limits as a list's end buffers ([`crate::coll`]), so a buffer that fills becomes a
//! chunk ([`push_edge`]) and an edge chunk becomes a buffer again ([`take_edge`]) by copying
//! bytes. As everywhere in the tree, published blocks never change: a mutation writes fresh
//! ones along its path and lists the ones it replaced in the [`Edit`].

use larder_arena::{Arena, Participant};

use crate::tree::{self, Edit, Ent, Node, INNER_MAX};
use crate::Error;

/// Most elements in one end buffer or one chunk: a buffer that reaches this many settles.
pub(crate) const BUF_ENTRIES: usize = 64;
/// Most bytes in one end buffer or one chunk (a single larger element gets a chunk of its own).
pub(crate) const BUF_BYTES: usize = 2048;

const CHUNK: u32 = 1 << 30;
const INNER: u32 = 1 << 31;
const HEAD: u64 = 16;

/// A run of list elements encoded back to back (`varint len, bytes`), edited in place: a
/// list's end buffers, a packed list, and a chunk read out of the tree. Finding entry `i`
/// walks the lengths before it; a run holds at most [`BUF_ENTRIES`] entries, so that walk
/// is short.
#[derive(Default, Clone)]
pub(crate) struct Strip {
    pub(crate) bytes: Vec<u8>,
    pub(crate) n: usize,
}

impl Strip {
    /// Takes encoded bytes, checking that they are well formed.
    pub(crate) fn parse_owned(bytes: Vec<u8>) -> Result<Strip, Error> {
        let n = Strip::count(&bytes)?;
        Ok(Strip { bytes, n })
    }

    /// Takes a copy of encoded bytes (with room to grow), checking that they are well formed.
    pub(crate) fn parse(from: &[u8]) -> Result<Strip, Error> {
        Ok(Strip::copy(from, Strip::count(from)?))
    }

    fn count(from: &[u8]) -> Result<usize, Error> {
        let (mut pos, mut n) = (0, 0);
        while pos < from.len() {
            let l = match from[pos] {
                b @ 0..0x80 => {
                    pos += 1;
                    b as usize
                }
                _ => get_varint(from, &mut pos)? as usize,
            };
            pos = pos.checked_add(l).filter(|&e| e <= from.len()).ok_or(Error::Corrupt("truncated packed list"))?;
            n += 1;
        }
        Ok(n)
    }

    /// Takes a copy of encoded bytes said to hold `n` entries (with room to grow).
    pub(crate) fn copy(from: &[u8], n: usize) -> Strip {
        if from.is_empty() {
            return Strip::default();
        }
        let mut bytes = Vec::with_capacity(from.len() + 64);
        bytes.extend_from_slice(from);
        Strip { bytes, n }
    }

    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// The offset where entry `i` starts (its length) and the range of its bytes; clamped to
    /// the bytes there are, so bytes that lie about their lengths give wrong entries, never
    /// a read outside the buffer.
    fn locate(&self, i: usize) -> (usize, std::ops::Range<usize>) {
        let end = self.bytes.len();
        let mut pos = 0;
        for _ in 0..i {
            let l = get_varint(&self.bytes, &mut pos).unwrap_or(0) as usize;
            pos = pos.saturating_add(l).min(end);
        }
        let start = pos;
        let l = get_varint(&self.bytes, &mut pos).unwrap_or(0) as usize;
        let pos = pos.min(end);
        (start, pos..pos.saturating_add(l).min(end))
    }

    pub(crate) fn get(&self, i: usize) -> &[u8] {
        &self.bytes[self.locate(i).1]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let mut pos = 0;
        std::iter::from_fn(move || {
            if pos >= self.bytes.len() {
                return None;
            }
            let l = get_varint(&self.bytes, &mut pos).ok()? as usize;
            let from = pos;
            pos = pos.saturating_add(l);
            self.bytes.get(from..pos)
        })
    }

    pub(crate) fn push(&mut self, elem: &[u8]) {
        put_varint(&mut self.bytes, elem.len() as u64);
        self.bytes.extend_from_slice(elem);
        self.n += 1;
    }

    pub(crate) fn insert(&mut self, i: usize, elem: &[u8]) {
        if i >= self.n {
            return self.push(elem);
        }
        let at = self.locate(i).0;
        let mut head = [0u8; 10];
        let hl = varint_into(&mut head, elem.len() as u64);
        let (old, add) = (self.bytes.len(), hl + elem.len());
        self.bytes.resize(old + add, 0);
        self.bytes.copy_within(at..old, at + add);
        self.bytes[at..at + hl].copy_from_slice(&head[..hl]);
        self.bytes[at + hl..at + add].copy_from_slice(elem);
        self.n += 1;
    }

    pub(crate) fn remove(&mut self, i: usize) -> Vec<u8> {
        let (start, r) = self.locate(i);
        let elem = self.bytes[r.clone()].to_vec();
        self.bytes.drain(start..r.end);
        self.n = self.n.saturating_sub(1);
        elem
    }

    pub(crate) fn set(&mut self, i: usize, elem: &[u8]) {
        self.remove(i);
        self.insert(i, elem);
    }

    /// `self` then `other`.
    fn joined(&self, other: &Strip) -> Strip {
        let mut bytes = Vec::with_capacity(self.bytes.len() + other.bytes.len());
        bytes.extend_from_slice(&self.bytes);
        bytes.extend_from_slice(&other.bytes);
        Strip { bytes, n: self.n + other.n }
    }

    /// Entries `from..to` as a strip of their own.
    fn slice(&self, from: usize, to: usize) -> Strip {
        let a = self.locate(from).0;
        let b = if to >= self.n { self.bytes.len() } else { self.locate(to).0 };
        Strip { bytes: self.bytes[a..b].to_vec(), n: to - from }
    }

    /// Whether this run fits one chunk of at most `max` entries.
    pub(crate) fn fits(&self, max: usize) -> bool {
        self.n <= 1 || (self.n <= max && self.bytes.len() <= BUF_BYTES)
    }
}

pub(crate) fn put_varint(out: &mut Vec<u8>, n: u64) {
    let mut b = [0u8; 10];
    let l = varint_into(&mut b, n);
    out.extend_from_slice(&b[..l]);
}

fn varint_into(b: &mut [u8; 10], mut n: u64) -> usize {
    let mut i = 0;
    while n >= 0x80 {
        b[i] = (n as u8) | 0x80;
        n >>= 7;
        i += 1;
    }
    b[i] = n as u8;
    i + 1
}

pub(crate) fn get_varint(b: &[u8], pos: &mut usize) -> Result<u64, Error> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*pos).ok_or(Error::Corrupt("truncated packed collection"))?;
        *pos += 1;
        n |= ((byte & 0x7f) as u64) << shift;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(Error::Corrupt("bad varint in packed collection"))
}

// ---- chunks and nodes ----

/// A node of a list tree: an inner node, or a chunk.
// Read onto the stack and taken apart at once; boxing the big variant would allocate per read.
#[allow(clippy::large_enum_variant)]
enum Block {
    Inner(Node),
    Chunk(Strip),
}

fn read(a: &Arena, off: u64) -> Result<Block, Error> {
    let w = a.u32(off)?.load(std::sync::atomic::Ordering::Relaxed);
    if w & CHUNK == 0 {
        let n = Node::read(a, off)?;
        return if w & INNER != 0 {
            Ok(Block::Inner(n))
        } else {
            Err(Error::Corrupt("a list tree leaf that is not a chunk"))
        };
    }
    Ok(Block::Chunk(read_chunk(a, off)?))
}

fn read_chunk(a: &Arena, off: u64) -> Result<Strip, Error> {
    let mut head = [0u8; HEAD as usize];
    a.read(off, &mut head)?;
    let w = u32::from_le_bytes(head[0..4].try_into().unwrap());
    let bytes = u32::from_le_bytes(head[4..8].try_into().unwrap()) as usize;
    let n = (w & 0xffff) as usize;
    if w & CHUNK == 0 || n == 0 || bytes as u64 > a.capacity() {
        return Err(Error::Corrupt("a bad list chunk"));
    }
    // read_append checks the range before it allocates: a corrupt length is an error.
    let mut b = Vec::new();
    a.read_append(off + HEAD, bytes, &mut b)?;
    // The count says how many entries to expect; a strip never reads outside its bytes.
    Ok(Strip { bytes: b, n })
}

/// Writes `s` (at least one entry) as a fresh chunk; returns its parent's entry for it.
fn write_chunk(p: &Participant, ed: &mut Edit, s: &Strip) -> Result<Ent, Error> {
    if s.n == 0 || s.n > 0xffff || s.bytes.len() > u32::MAX as usize {
        return Err(Error::Corrupt("a list chunk of a bad size"));
    }
    let off = p.alloc(HEAD + s.bytes.len() as u64)?;
    ed.fresh.insert(off);
    let a = p.arena();
    let mut head = [0u8; HEAD as usize];
    head[0..4].copy_from_slice(&(CHUNK | s.n as u32).to_le_bytes());
    head[4..8].copy_from_slice(&(s.bytes.len() as u32).to_le_bytes());
    head[8..16].copy_from_slice(&(s.n as u64).to_le_bytes());
    a.write(off, &head)?;
    a.write(off + HEAD, &s.bytes)?;
    Ok(Ent { prefix: 0, elem: 0, child: off, count: s.n as u64 })
}

fn write_inner(p: &Participant, ed: &mut Edit, n: &Node) -> Result<Ent, Error> {
    let off = ed.put(p, n)?;
    Ok(Ent { prefix: 0, elem: 0, child: off, count: n.ents[..n.n].iter().map(|e| e.count).sum() })
}

/// Splits a run too big for one chunk into two, at the middle by bytes.
fn split(s: &Strip) -> (Strip, Strip) {
    let mut acc = 0;
    let mut cut = 1;
    for (i, e) in s.iter().enumerate() {
        acc += e.len() + 1;
        if acc * 2 >= s.bytes.len() || i + 1 >= s.n.div_ceil(2) {
            cut = i + 1;
            break;
        }
    }
    let cut = cut.clamp(1, s.n - 1);
    (s.slice(0, cut), s.slice(cut, s.n))
}

// ---- reads ----

/// Calls `f` with the element at position `i`.
pub(crate) fn nth<R>(a: &Arena, root: u64, mut i: u64, f: impl FnOnce(&[u8]) -> R) -> Result<R, Error> {
    let mut node = root;
    for _ in 0..64 {
        match read(a, node)? {
            Block::Chunk(s) => {
                if i as usize >= s.n {
                    return Err(Error::Corrupt("list position out of range"));
                }
                return Ok(f(s.get(i as usize)));
            }
            Block::Inner(n) => {
                let (k, base) = tree::child_at(&n, i)?;
                i -= base;
                node = n.ents[k].child;
            }
        }
    }
    Err(Error::Corrupt("tree too deep"))
}

/// Calls `f(element)` for positions `from..to`, in order, until it returns false; returns
/// whether it went to the end.
pub(crate) fn walk(a: &Arena, root: u64, from: u64, to: u64, f: &mut dyn FnMut(&[u8]) -> bool) -> Result<bool, Error> {
    fn go(
        a: &Arena,
        node: u64,
        from: u64,
        to: u64,
        depth: u32,
        f: &mut dyn FnMut(&[u8]) -> bool,
    ) -> Result<bool, Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        match read(a, node)? {
            Block::Chunk(s) => {
                for (i, e) in s.iter().enumerate() {
                    let i = i as u64;
                    if i >= to {
                        break;
                    }
                    if i >= from && !f(e) {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Block::Inner(n) => {
                let mut base = 0;
                for e in &n.ents[..n.n] {
                    let end = base + e.count;
                    if end > from && base < to && !go(a, e.child, from.saturating_sub(base), to - base, depth + 1, f)? {
                        return Ok(false);
                    }
                    base = end;
                    if base >= to {
                        break;
                    }
                }
                Ok(true)
            }
        }
    }
    if root == 0 || from >= to {
        return Ok(true);
    }
    go(a, root, from, to, 0, f)
}

/// The chunk at the front or the back of a non-empty tree.
pub(crate) fn edge_chunk(a: &Arena, root: u64, front: bool) -> Result<Strip, Error> {
    let mut node = root;
    for _ in 0..64 {
        match read(a, node)? {
            Block::Chunk(s) => return Ok(s),
            Block::Inner(n) => node = n.ents[if front { 0 } else { n.n - 1 }].child,
        }
    }
    Err(Error::Corrupt("tree too deep"))
}

/// Calls `f` for every block of the tree (chunks and inner nodes): what a drop retires.
pub(crate) fn for_each_block(a: &Arena, root: u64, f: &mut dyn FnMut(u64) -> Result<(), Error>) -> Result<(), Error> {
    fn go(a: &Arena, node: u64, depth: u32, f: &mut dyn FnMut(u64) -> Result<(), Error>) -> Result<(), Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        let w = a.u32(node)?.load(std::sync::atomic::Ordering::Relaxed);
        if w & CHUNK == 0 {
            let n = Node::read(a, node)?;
            if !n.inner {
                return Err(Error::Corrupt("a list tree leaf that is not a chunk"));
            }
            for e in &n.ents[..n.n] {
                go(a, e.child, depth + 1, f)?;
            }
        }
        f(node)
    }
    if root == 0 {
        return Ok(());
    }
    go(a, root, 0, f)
}

/// Checks a list tree: every chunk well formed and within its header's count, counts that
/// agree, every chunk at the same depth. Returns the element count and the problems found.
pub(crate) fn check(a: &Arena, root: u64) -> Result<(u64, Vec<String>), Error> {
    fn go(
        a: &Arena,
        node: u64,
        depth: u32,
        chunk_depth: &mut Option<u32>,
        problems: &mut Vec<String>,
    ) -> Result<u64, Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        match read(a, node)? {
            Block::Chunk(s) => {
                match Strip::parse(&s.bytes) {
                    Ok(p) if p.n == s.n => {}
                    _ => problems.push(format!("chunk {node:#x}: its entries disagree with its count")),
                }
                if *chunk_depth.get_or_insert(depth) != depth {
                    problems.push("chunks at different depths".into());
                }
                Ok(s.n as u64)
            }
            Block::Inner(n) => {
                let mut total = 0;
                for e in &n.ents[..n.n] {
                    let c = go(a, e.child, depth + 1, chunk_depth, problems)?;
                    if c != e.count {
                        problems.push(format!("node {node:#x}: entry says {} elements, child holds {c}", e.count));
                    }
                    total += c;
                }
                if tree::count(a, node)? != total {
                    problems.push(format!("node {node:#x}: header count disagrees with its entries"));
                }
                Ok(total)
            }
        }
    }
    if root == 0 {
        return Ok((0, Vec::new()));
    }
    let mut problems = Vec::new();
    let n = go(a, root, 0, &mut None, &mut problems)?;
    Ok((n, problems))
}

// ---- writes ----

/// Inserts `elem` at position `i`; returns the new root. `max`: elements per chunk.
pub(crate) fn insert_at(
    p: &Participant,
    ed: &mut Edit,
    root: u64,
    i: u64,
    elem: &[u8],
    max: usize,
) -> Result<u64, Error> {
    fn go(
        p: &Participant,
        ed: &mut Edit,
        node: u64,
        i: u64,
        elem: &[u8],
        max: usize,
        depth: u32,
    ) -> Result<(Ent, Option<Ent>), Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        let a = p.arena();
        match read(a, node)? {
            Block::Chunk(mut s) => {
                if i as usize > s.n {
                    return Err(Error::Corrupt("list position out of range"));
                }
                s.insert(i as usize, elem);
                ed.drop_block(p, node)?;
                if s.fits(max) {
                    return Ok((write_chunk(p, ed, &s)?, None));
                }
                let (l, r) = split(&s);
                Ok((write_chunk(p, ed, &l)?, Some(write_chunk(p, ed, &r)?)))
            }
            Block::Inner(mut n) => {
                // A position on a boundary goes to the end of the left child.
                let (mut k, mut base) = (0, 0);
                while k + 1 < n.n && i > base + n.ents[k].count {
                    base += n.ents[k].count;
                    k += 1;
                }
                let (l, r) = go(p, ed, n.ents[k].child, i - base, elem, max, depth + 1)?;
                n.ents[k] = l;
                match r {
                    None => {
                        ed.drop_block(p, node)?;
                        Ok((write_inner(p, ed, &n)?, None))
                    }
                    Some(r) => tree::place(p, ed, node, n, k + 1, r),
                }
            }
        }
    }
    if root == 0 {
        let mut s = Strip::default();
        s.push(elem);
        return Ok(write_chunk(p, ed, &s)?.child);
    }
    match go(p, ed, root, i, elem, max, 0)? {
        (l, None) => Ok(l.child),
        (l, Some(r)) => tree::grow_root(p, ed, l, r),
    }
}

/// Removes the element at position `i`; returns the new root (0 when the list is now empty
/// of tree elements) and the element.
pub(crate) fn remove_at(
    p: &Participant,
    ed: &mut Edit,
    root: u64,
    i: u64,
    max: usize,
) -> Result<(u64, Vec<u8>), Error> {
    /// The rewritten block's entry and (entries, capacity, is a chunk), or None if it emptied.
    type Left = Option<(Ent, usize, usize)>;
    fn go(
        p: &Participant,
        ed: &mut Edit,
        node: u64,
        i: u64,
        max: usize,
        old: &mut Vec<u8>,
        depth: u32,
    ) -> Result<Left, Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        let a = p.arena();
        let mut n = match read(a, node)? {
            Block::Chunk(mut s) => {
                if i as usize >= s.n {
                    return Err(Error::Corrupt("list position out of range"));
                }
                *old = s.remove(i as usize);
                ed.drop_block(p, node)?;
                if s.n == 0 {
                    return Ok(None);
                }
                return Ok(Some((write_chunk(p, ed, &s)?, s.n, max)));
            }
            Block::Inner(n) => n,
        };
        let (k, base) = tree::child_at(&n, i)?;
        match go(p, ed, n.ents[k].child, i - base, max, old, depth + 1)? {
            None => {
                n.remove(k);
            }
            Some((w, c_n, c_max)) => {
                n.ents[k] = w;
                // An underfull child merges with a neighbour when both fit in one block.
                if c_n < c_max / 4 && n.n > 1 {
                    let j = if k + 1 < n.n { k + 1 } else { k - 1 };
                    let (lk, rk) = (k.min(j), k.max(j));
                    let merged = match (read(a, n.ents[lk].child)?, read(a, n.ents[rk].child)?) {
                        (Block::Chunk(l), Block::Chunk(r)) => {
                            let m = l.joined(&r);
                            if m.fits(max) {
                                Some(write_chunk(p, ed, &m)?)
                            } else {
                                None
                            }
                        }
                        (Block::Inner(l), Block::Inner(r)) if l.n + r.n <= INNER_MAX => {
                            let mut m = l.clone();
                            m.ents[m.n..m.n + r.n].copy_from_slice(&r.ents[..r.n]);
                            m.n += r.n;
                            Some(write_inner(p, ed, &m)?)
                        }
                        (Block::Inner(_), Block::Inner(_)) => None,
                        _ => return Err(Error::Corrupt("list tree siblings of different kinds")),
                    };
                    if let Some(m) = merged {
                        ed.drop_block(p, n.ents[lk].child)?;
                        ed.drop_block(p, n.ents[rk].child)?;
                        n.ents[lk] = m;
                        n.remove(rk);
                    }
                }
            }
        }
        ed.drop_block(p, node)?;
        if n.n == 0 {
            return Ok(None);
        }
        Ok(Some((write_inner(p, ed, &n)?, n.n, INNER_MAX)))
    }
    let mut old = Vec::new();
    let w = go(p, ed, root, i, max, &mut old, 0)?;
    let root = collapse(p, ed, w.map_or(0, |(w, _, _)| w.child))?;
    Ok((root, old))
}

/// A root with one child gives way to the child (repeatedly).
fn collapse(p: &Participant, ed: &mut Edit, mut root: u64) -> Result<u64, Error> {
    while root != 0 {
        match read(p.arena(), root)? {
            Block::Inner(n) if n.n == 1 => {
                ed.drop_block(p, root)?;
                root = n.ents[0].child;
            }
            _ => break,
        }
    }
    Ok(root)
}

/// Adds the run `add` (one chunk's worth) at the front or the back of the tree with one path
/// copy: joined to the edge chunk when both fit in one, else as a new chunk beside it.
pub(crate) fn push_edge(
    p: &Participant,
    ed: &mut Edit,
    root: u64,
    front: bool,
    add: &Strip,
    max: usize,
) -> Result<u64, Error> {
    fn go(
        p: &Participant,
        ed: &mut Edit,
        node: u64,
        front: bool,
        add: &Strip,
        max: usize,
        depth: u32,
    ) -> Result<(Ent, Option<Ent>), Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        let a = p.arena();
        let mut n = match read(a, node)? {
            Block::Chunk(s) => {
                let m = if front { add.joined(&s) } else { s.joined(add) };
                if m.fits(max) {
                    ed.drop_block(p, node)?;
                    return Ok((write_chunk(p, ed, &m)?, None));
                }
                // The edge chunk stays as it is; the new one goes beside it.
                let new = write_chunk(p, ed, add)?;
                let old = Ent { prefix: 0, elem: 0, child: node, count: s.n as u64 };
                return Ok(if front { (new, Some(old)) } else { (old, Some(new)) });
            }
            Block::Inner(n) => n,
        };
        let k = if front { 0 } else { n.n - 1 };
        let (l, r) = go(p, ed, n.ents[k].child, front, add, max, depth + 1)?;
        let Some(r) = r else {
            n.ents[k] = l;
            ed.drop_block(p, node)?;
            return Ok((write_inner(p, ed, &n)?, None));
        };
        // Insert the new entry at the edge itself, so a split keeps the inner half full.
        if front {
            n.ents[k] = r;
            tree::place(p, ed, node, n, k, l)
        } else {
            n.ents[k] = l;
            tree::place(p, ed, node, n, k + 1, r)
        }
    }
    if add.n == 0 {
        return Ok(root);
    }
    if root == 0 {
        return Ok(write_chunk(p, ed, add)?.child);
    }
    match go(p, ed, root, front, add, max, 0)? {
        (l, None) => Ok(l.child),
        (l, Some(r)) => tree::grow_root(p, ed, l, r),
    }
}

/// Takes the front or back chunk out of a non-empty tree; returns the new root (0 when the
/// tree is now empty) and the chunk's elements.
pub(crate) fn take_edge(p: &Participant, ed: &mut Edit, root: u64, front: bool) -> Result<(u64, Strip), Error> {
    fn go(
        p: &Participant,
        ed: &mut Edit,
        node: u64,
        front: bool,
        out: &mut Strip,
        depth: u32,
    ) -> Result<Option<Ent>, Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        let a = p.arena();
        let mut n = match read(a, node)? {
            Block::Chunk(s) => {
                *out = s;
                ed.drop_block(p, node)?;
                return Ok(None);
            }
            Block::Inner(n) => n,
        };
        let k = if front { 0 } else { n.n - 1 };
        match go(p, ed, n.ents[k].child, front, out, depth + 1)? {
            None => {
                n.remove(k);
            }
            Some(w) => n.ents[k] = w,
        }
        ed.drop_block(p, node)?;
        if n.n == 0 {
            return Ok(None);
        }
        Ok(Some(write_inner(p, ed, &n)?))
    }
    let mut out = Strip::default();
    let w = go(p, ed, root, front, &mut out, 0)?;
    let root = collapse(p, ed, w.map_or(0, |w| w.child))?;
    Ok((root, out))
}

/// A copy of a whole tree in fresh blocks (COPY): the same shape, chunk bytes as they are.
pub(crate) fn copy(p: &Participant, ed: &mut Edit, root: u64) -> Result<u64, Error> {
    fn go(p: &Participant, ed: &mut Edit, node: u64, depth: u32) -> Result<Ent, Error> {
        if depth > 64 {
            return Err(Error::Corrupt("tree too deep"));
        }
        let a = p.arena();
        match read(a, node)? {
            Block::Chunk(s) => write_chunk(p, ed, &s),
            Block::Inner(mut n) => {
                for k in 0..n.n {
                    n.ents[k] = go(p, ed, n.ents[k].child, depth + 1)?;
                }
                write_inner(p, ed, &n)
            }
        }
    }
    if root == 0 {
        return Ok(0);
    }
    Ok(go(p, ed, root, 0)?.child)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_insert_remove_and_split() {
        let mut s = Strip::default();
        for i in 0..20u8 {
            s.insert(s.len() / 2, &vec![i; i as usize * 13]);
        }
        let all: Vec<Vec<u8>> = s.iter().map(|e| e.to_vec()).collect();
        assert_eq!(all.len(), 20);
        assert_eq!(Strip::parse(&s.bytes).unwrap().n, 20);
        let (l, r) = split(&s);
        assert!(l.n >= 1 && r.n >= 1);
        let back: Vec<Vec<u8>> = l.joined(&r).iter().map(|e| e.to_vec()).collect();
        assert_eq!(back, all);
        let e = s.remove(3);
        assert_eq!(e, all[3]);
        s.set(0, b"x");
        assert_eq!(s.get(0), b"x");
        assert_eq!(s.get(3), &all[4][..]);
        // Lengths past the end are clamped, never read outside the bytes.
        let bad = Strip { bytes: vec![5, b'a'], n: 3 };
        assert_eq!(bad.get(2), b"");
        assert!(Strip::parse(&[5, b'a']).is_err());
    }
}
