//! Items: one arena block holding a key, its value and its metadata.
//!
//! ```text
//!   @0   meta   u64   type:4 | flags:4 | klen:16 | version:40      (the item's state word;
//!                     flags: HAS_EXPIRY, HAS_CFLAGS, LONG_KEY, EDITED)
//!   @8   vlen   u32   value length in bytes (8 for an integer item)
//!   @12  cflags u32   memcached client flags            (only if HAS_CFLAGS)
//!   then klen   u32   key length, when it needs more than 16 bits (only if LONG_KEY)
//!   then, 8-aligned:
//!        expire u64   absolute expiry, Unix ms; 0 = none (only if HAS_EXPIRY)
//!        int    i64   the value of an integer item      (only if type = INT)
//!   then key bytes, then value bytes (raw items)
//! ```
//!
//! A 12-byte header is what keeps per-key overhead low: `key:0000001` with a 32-byte value
//! is a 56-byte block. Published items never change, except the state word (a new version
//! when an integer is incremented in place), the integer, the expiry field, and a raw
//! string's length, each with one atomic store under the key's bucket lock. The length
//! changes only by APPEND in place ([`append_in_place`]): the new bytes go into the block's
//! spare room past the value, where no reader looks, before the store that publishes them.
//! The value's existing bytes never change.

use std::sync::atomic::Ordering;

use larder_arena::{Arena, Participant};

use crate::Error;

pub(crate) const T_RAW: u64 = 0;
pub(crate) const T_INT: u64 = 1;
// Collections (see coll.rs): each kind has a packed type and, one above it, a tree type.
pub(crate) const T_HASH_PACK: u64 = 2;
pub(crate) const T_LIST_PACK: u64 = 4;
pub(crate) const T_SET_PACK: u64 = 6;
pub(crate) const T_ZSET_PACK: u64 = 8;
const T_MAX: u64 = 9;

/// Whether an item of this type holds tree roots (and owns the tree's blocks).
pub(crate) fn is_tree_type(ty: u64) -> bool {
    (T_HASH_PACK..=T_MAX).contains(&ty) && ty % 2 == 1
}

const HAS_EXPIRY: u64 = 1 << 4;
const HAS_CFLAGS: u64 = 1 << 5;
const LONG_KEY: u64 = 1 << 6;
/// A string that APPEND, SETRANGE or SETBIT changed in place of its old value: what Redis
/// calls the `raw` encoding whatever the length, until a SET replaces it (OBJECT ENCODING).
const EDITED: u64 = 1 << 7;

const VERSION_SHIFT: u32 = 24;
/// Item versions (memcached CAS values) are 40 bits wide.
pub const VERSION_MASK: u64 = (1 << 40) - 1;

/// The largest value a string may hold (Redis's `proto-max-bulk-len` default).
pub const MAX_VALUE: u64 = 512 * 1024 * 1024;

/// The type of the value under a key, as `TYPE` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Type {
    String,
    Hash,
    List,
    Set,
    ZSet,
}

impl Type {
    pub fn name(self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Hash => "hash",
            Type::List => "list",
            Type::Set => "set",
            Type::ZSet => "zset",
        }
    }

    pub(crate) fn of_code(ty: u64) -> Type {
        match ty {
            2 | 3 => Type::Hash,
            4 | 5 => Type::List,
            6 | 7 => Type::Set,
            8 | 9 => Type::ZSet,
            _ => Type::String,
        }
    }
}

/// The value of an item being built.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Value<'a> {
    Raw(&'a [u8]),
    /// A raw string made by editing the key's old value (APPEND, SETRANGE, SETBIT): stored
    /// as `Raw`, marked [`EDITED`].
    Edited(&'a [u8]),
    Int(i64),
    /// A collection item: its type code and encoded bytes (coll.rs).
    Coll(u64, &'a [u8]),
    /// The same, in pieces written back to back (a list's header and its two buffers).
    Parts(u64, [&'a [u8]; 3]),
}

impl<'a> Value<'a> {
    /// Canonical integers ("123", "-7"; not "007", "+1", " 1") are stored as integers so
    /// INCR can update them in place; `GET` renders the same bytes back.
    pub(crate) fn of(bytes: &'a [u8]) -> Value<'a> {
        match parse_canonical_i64(bytes) {
            Some(i) => Value::Int(i),
            None => Value::Raw(bytes),
        }
    }

    /// The bytes of string item `old`, to rebuild it unchanged (a new key, expiry or
    /// version): an edited string stays edited.
    pub(crate) fn kept(old: &ItemView, bytes: &'a [u8]) -> Value<'a> {
        if old.is_edited() {
            Value::Edited(bytes)
        } else {
            Value::Raw(bytes)
        }
    }
}

/// Parses the decimal form Redis's `string2ll` accepts: optional '-', no leading zeros, no
/// '+', no spaces, fits in i64.
pub fn parse_canonical_i64(b: &[u8]) -> Option<i64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let (neg, digits) = if b[0] == b'-' { (true, &b[1..]) } else { (false, b) };
    if digits.is_empty() || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = (d - b'0') as i64;
        v = if neg { v.checked_mul(10)?.checked_sub(d)? } else { v.checked_mul(10)?.checked_add(d)? };
    }
    Some(v)
}

/// Metadata of an item, as read by a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub ty: Type,
    /// Absolute expiry in Unix milliseconds, 0 when the key does not expire.
    pub expire_at: u64,
    /// memcached client flags.
    pub flags: u32,
    /// A version that changes with every write: the memcached CAS value.
    pub version: u64,
}

/// A parsed view of a published item's header; the bytes stay in the arena.
///
/// Kept small (it is returned through every lookup): the optional fields' offsets are
/// derived from `key_off` on demand, since they sit just before the key (see the layout).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ItemView {
    pub off: u64,
    pub meta: u64,
    pub vlen: u64,
    pub klen: u64,
    pub cflags: u32,
    pub key_off: u64,
}

struct Layout {
    size: u64,
    expire: Option<u64>,
    int: Option<u64>,
    key: u64,
}

fn layout(meta: u64, klen: u64, vlen_raw: u64) -> Layout {
    let mut p = 12;
    if meta & HAS_CFLAGS != 0 {
        p += 4;
    }
    if meta & LONG_KEY != 0 {
        p += 4;
    }
    let mut expire = None;
    let mut int = None;
    if meta & HAS_EXPIRY != 0 || meta & 0xf == T_INT {
        p = (p + 7) & !7;
        if meta & HAS_EXPIRY != 0 {
            expire = Some(p);
            p += 8;
        }
        if meta & 0xf == T_INT {
            int = Some(p);
            p += 8;
        }
    }
    Layout { size: p + klen + vlen_raw, expire, int, key: p }
}

/// Whether the item at `off` has an expiry set. Most items have no expiry field, and their
/// first word says so.
#[inline(always)]
pub(crate) fn expiry_set(a: &Arena, off: u64) -> Result<bool, Error> {
    if a.u64(off)?.load(Ordering::Acquire) & HAS_EXPIRY == 0 {
        return Ok(false);
    }
    expiry_field_set(a, off)
}

#[inline(never)]
fn expiry_field_set(a: &Arena, off: u64) -> Result<bool, Error> {
    Ok(ItemView::read(a, off)?.expire_at(a)? != 0)
}

impl ItemView {
    /// Reads and validates the header of the item at `off`. Every length is checked against
    /// the arena before it is used.
    #[inline]
    pub(crate) fn read(a: &Arena, off: u64) -> Result<ItemView, Error> {
        let meta = a.u64(off)?.load(Ordering::Acquire);
        // Acquire: an APPEND in place writes its bytes before it stores the new length.
        let vlen = a.u32(off + 8)?.load(Ordering::Acquire) as u64;
        let ty = meta & 0xf;
        if ty > T_MAX {
            return Err(Error::Corrupt("unknown item type"));
        }
        let (klen, cflags, key_at) = if meta & (HAS_EXPIRY | HAS_CFLAGS | LONG_KEY) == 0 && ty != T_INT {
            // The common case: the key right after the 12-byte header.
            ((meta >> 8) & 0xffff, 0, 12)
        } else {
            Self::read_extended(a, off, meta)?
        };
        let vraw = if ty == T_INT { 0 } else { vlen };
        let key_off = off + key_at;
        // The whole item must lie inside the arena.
        if key_off.checked_add(klen + vraw).is_none_or(|end| end > a.capacity()) {
            return Err(Error::Corrupt("item extends past the arena"));
        }
        Ok(ItemView { off, meta, vlen, klen, cflags, key_off })
    }

    /// The version in the state word as this view read it.
    #[inline]
    pub(crate) fn version(&self) -> u64 {
        self.meta >> VERSION_SHIFT
    }

    /// Whether this is a string APPEND, SETRANGE or SETBIT made (see [`EDITED`]).
    #[inline]
    pub(crate) fn is_edited(&self) -> bool {
        self.meta & EDITED != 0
    }

    /// The header fields beyond the first 12 bytes: (key length, client flags, key position).
    fn read_extended(a: &Arena, off: u64, meta: u64) -> Result<(u64, u32, u64), Error> {
        let cflags = if meta & HAS_CFLAGS != 0 { a.u32(off + 12)?.load(Ordering::Relaxed) } else { 0 };
        let klen = if meta & LONG_KEY != 0 {
            a.u32(off + if meta & HAS_CFLAGS != 0 { 16 } else { 12 })?.load(Ordering::Relaxed) as u64
        } else {
            (meta >> 8) & 0xffff
        };
        Ok((klen, cflags, layout(meta, 0, 0).key))
    }

    /// Where the value starts.
    #[inline]
    pub(crate) fn val_off(&self) -> u64 {
        self.key_off + self.klen
    }

    /// Where the expiry field is, if the item has one (the 8-aligned words before the key
    /// are the expiry, then the integer).
    #[inline]
    pub(crate) fn expire_off(&self) -> Option<u64> {
        (self.meta & HAS_EXPIRY != 0).then(|| self.key_off - 8 - if self.is_int() { 8 } else { 0 })
    }

    /// Where an integer item's value is.
    #[inline]
    pub(crate) fn int_off(&self) -> Option<u64> {
        self.is_int().then(|| self.key_off - 8)
    }

    #[inline]
    pub(crate) fn key_is(&self, a: &Arena, key: &[u8]) -> Result<bool, Error> {
        Ok(self.klen == key.len() as u64 && a.bytes_eq(self.key_off, key)?)
    }

    pub(crate) fn key(&self, a: &Arena, out: &mut Vec<u8>) -> Result<(), Error> {
        out.clear();
        a.read_append(self.key_off, self.klen as usize, out)?;
        Ok(())
    }

    #[inline]
    pub(crate) fn is_int(&self) -> bool {
        self.meta & 0xf == T_INT
    }

    /// The item's type code (T_RAW, T_INT, T_HASH_PACK, …).
    #[inline]
    pub(crate) fn ty(&self) -> u64 {
        self.meta & 0xf
    }

    #[inline]
    pub(crate) fn is_string(&self) -> bool {
        self.meta & 0xf <= T_INT
    }

    pub(crate) fn type_(&self) -> Type {
        Type::of_code(self.ty())
    }

    /// The value's bytes as stored, for any type but an integer (a collection's encoding).
    pub(crate) fn raw_value(&self, a: &Arena, out: &mut Vec<u8>) -> Result<(), Error> {
        out.clear();
        if self.is_int() {
            return self.value(a, out);
        }
        Ok(a.read_append(self.val_off(), self.vlen as usize, out)?)
    }

    #[inline]
    pub(crate) fn int(&self, a: &Arena) -> Result<i64, Error> {
        Ok(a.u64(self.int_off().ok_or(Error::Corrupt("not an integer item"))?)?.load(Ordering::Acquire) as i64)
    }

    #[inline]
    pub(crate) fn expire_at(&self, a: &Arena) -> Result<u64, Error> {
        match self.expire_off() {
            Some(o) => Ok(a.u64(o)?.load(Ordering::Acquire)),
            None => Ok(0),
        }
    }

    #[inline]
    pub(crate) fn expired(&self, a: &Arena, now: u64) -> Result<bool, Error> {
        Ok(match self.expire_off() {
            Some(o) => {
                let e = a.u64(o)?.load(Ordering::Acquire);
                e != 0 && e <= now
            }
            None => false,
        })
    }

    #[inline]
    pub(crate) fn meta(&self, a: &Arena) -> Result<Meta, Error> {
        Ok(Meta {
            ty: self.type_(),
            expire_at: self.expire_at(a)?,
            flags: self.cflags,
            // The state word as `read` loaded it, before anything else of the item: an
            // in-place INCR stores the value, then the version, so a caller that reads the
            // value after this sees at least the value of this version.
            version: self.meta >> VERSION_SHIFT,
        })
    }

    /// Appends the value's bytes (an integer rendered in decimal) to `out`.
    #[inline]
    pub(crate) fn value(&self, a: &Arena, out: &mut Vec<u8>) -> Result<(), Error> {
        if !self.is_string() {
            return Err(Error::WrongType);
        }
        if self.is_int() {
            let mut buf = itoa_buf();
            out.extend_from_slice(fmt_i64(self.int(a)?, &mut buf));
            Ok(())
        } else {
            Ok(a.read_append(self.val_off(), self.vlen as usize, out)?)
        }
    }

    /// Like [`ItemView::value`], but first calls `header(out, len)` with the length of the
    /// value about to be appended, so that a reply's framing goes before the value and the
    /// value is copied once.
    #[inline]
    pub(crate) fn value_framed(
        &self,
        a: &Arena,
        out: &mut Vec<u8>,
        header: impl FnOnce(&mut Vec<u8>, usize),
    ) -> Result<(), Error> {
        if !self.is_string() {
            return Err(Error::WrongType);
        }
        if self.is_int() {
            let mut buf = itoa_buf();
            let digits = fmt_i64(self.int(a)?, &mut buf);
            header(out, digits.len());
            out.extend_from_slice(digits);
            Ok(())
        } else {
            header(out, self.vlen as usize);
            Ok(a.read_append(self.val_off(), self.vlen as usize, out)?)
        }
    }

    /// Length of the value as a string.
    pub(crate) fn strlen(&self, a: &Arena) -> Result<u64, Error> {
        if !self.is_string() {
            return Err(Error::WrongType);
        }
        if self.is_int() {
            let mut buf = itoa_buf();
            Ok(fmt_i64(self.int(a)?, &mut buf).len() as u64)
        } else {
            Ok(self.vlen)
        }
    }
}

pub(crate) fn itoa_buf() -> [u8; 20] {
    [0u8; 20]
}

/// Formats `v` into the end of `buf` without allocating.
pub(crate) fn fmt_i64(v: i64, buf: &mut [u8; 20]) -> &[u8] {
    let mut n = v.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Everything needed to build an item.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewItem<'a> {
    pub key: &'a [u8],
    pub value: Value<'a>,
    pub expire_at: u64,
    pub cflags: u32,
    pub version: u64,
}

/// Values from this size on always get an expiry field (0 when they have no TTL), so that
/// EXPIRE, PERSIST and memcached touch change them in place instead of copying them whole.
/// The 8 bytes are under 1% of such an item; small items, where they would show in the
/// memory per key, are rebuilt on their first TTL instead.
const EXPIRY_FIELD_FROM: u64 = 1024;

/// Allocates and writes an item; returns its offset. It is not published.
pub(crate) fn build(p: &Participant, it: &NewItem<'_>) -> Result<u64, Error> {
    if let Value::Raw(v) = it.value {
        if it.expire_at == 0 && it.cflags == 0 && it.key.len() <= 0xffff && (v.len() as u64) < EXPIRY_FIELD_FROM {
            return build_plain(p, it.key, v, it.version);
        }
    }
    build_with_room(p, it, 0)
}

/// [`build`] with `room` spare bytes in the block after the value, for later appends in
/// place.
pub(crate) fn build_with_room(p: &Participant, it: &NewItem<'_>, room: u64) -> Result<u64, Error> {
    let klen = it.key.len() as u64;
    let (ty, vraw, vlen) = match it.value {
        Value::Raw(v) | Value::Edited(v) => (T_RAW, v.len() as u64, v.len() as u64),
        Value::Int(_) => (T_INT, 0, 8),
        Value::Coll(ty, v) => (ty, v.len() as u64, v.len() as u64),
        Value::Parts(ty, ps) => {
            let n = ps.iter().map(|p| p.len() as u64).sum();
            (ty, n, n)
        }
    };
    if vlen > MAX_VALUE || klen > MAX_VALUE {
        return Err(Error::TooLarge);
    }
    let mut meta = ty | ((it.version & VERSION_MASK) << VERSION_SHIFT);
    if it.expire_at != 0 || vraw >= EXPIRY_FIELD_FROM {
        meta |= HAS_EXPIRY;
    }
    if it.cflags != 0 {
        meta |= HAS_CFLAGS;
    }
    if klen > 0xffff {
        meta |= LONG_KEY;
    } else {
        meta |= klen << 8;
    }
    if matches!(it.value, Value::Edited(_)) {
        meta |= EDITED;
    }
    let l = layout(meta, klen, vraw);
    let a = &**p.arena();
    let off = p.alloc(l.size + room)?;
    // Header bytes first, into a local buffer, then the key and value straight into place.
    let mut head = [0u8; 40];
    head[0..8].copy_from_slice(&meta.to_le_bytes());
    head[8..12].copy_from_slice(&(vlen as u32).to_le_bytes());
    let mut p2 = 12;
    if meta & HAS_CFLAGS != 0 {
        head[12..16].copy_from_slice(&it.cflags.to_le_bytes());
        p2 = 16;
    }
    if meta & LONG_KEY != 0 {
        head[p2..p2 + 4].copy_from_slice(&(klen as u32).to_le_bytes());
    }
    if let Some(e) = l.expire {
        head[e as usize..e as usize + 8].copy_from_slice(&it.expire_at.to_le_bytes());
    }
    if let (Some(i), Value::Int(v)) = (l.int, it.value) {
        head[i as usize..i as usize + 8].copy_from_slice(&v.to_le_bytes());
    }
    let head = &head[..l.key as usize];
    match it.value {
        Value::Raw(v) | Value::Edited(v) | Value::Coll(_, v) => a.write_parts(off, [head, it.key, v])?,
        Value::Parts(_, [p0, p1, p2]) => a.write_parts(off, [head, it.key, p0, p1, p2])?,
        Value::Int(_) => a.write_parts(off, [head, it.key])?,
    }
    Ok(off)
}

/// [`build`] for the commonest item, a raw string with no expiry, no client flags and a
/// key under 64 KiB: only the 12-byte header (state word and value length), then the key
/// and the value. Skips working out the general layout.
#[inline]
fn build_plain(p: &Participant, key: &[u8], v: &[u8], version: u64) -> Result<u64, Error> {
    let (klen, vlen) = (key.len() as u64, v.len() as u64);
    let meta = T_RAW | klen << 8 | (version & VERSION_MASK) << VERSION_SHIFT;
    debug_assert_eq!(layout(meta, klen, vlen).size, 12 + klen + vlen);
    let off = p.alloc(12 + klen + vlen)?;
    let mut head = [0u8; 12];
    head[..8].copy_from_slice(&meta.to_le_bytes());
    head[8..].copy_from_slice(&(vlen as u32).to_le_bytes());
    p.arena().write_parts(off, [&head, key, v])?;
    Ok(off)
}

/// Retires a published item that is being dropped for good, with every block it owns (a
/// collection tree's nodes and elements).
pub(crate) fn retire_item(p: &Participant, off: u64) -> Result<(), Error> {
    retire_view(p, &ItemView::read(p.arena(), off)?)
}

/// [`retire_item`] for an item whose view the caller already read (items are immutable, so
/// the view still says what it owns).
// Inlined: every overwrite ends here, and for a string it is just the retire.
#[inline]
pub(crate) fn retire_view(p: &Participant, v: &ItemView) -> Result<(), Error> {
    if is_tree_type(v.ty()) {
        retire_tree(p, v)?;
    }
    p.retire(v.off)?;
    Ok(())
}

/// The blocks of a collection item's tree.
#[inline(never)]
fn retire_tree(p: &Participant, v: &ItemView) -> Result<(), Error> {
    for b in crate::coll::owned_blocks(p.arena(), v)? {
        p.retire(b)?;
    }
    Ok(())
}

/// APPEND in place: if `view` is a raw string whose block has room for `data` after the
/// value, writes `data` there, then publishes the new length and then `version`, each with
/// one atomic store; returns false, having written nothing, if it doesn't fit. The caller
/// holds the key's bucket lock.
///
/// The order is INCR's: a reader loads the state word before the length, so the value it
/// copies is at least as new as the version it reports (a memcached `cas` with that version
/// can fail spuriously, never overwrite an append it didn't see). A crash between the stores
/// leaves the longer value under the old version, as if the append had come just before it.
pub(crate) fn append_in_place(a: &Arena, view: &ItemView, data: &[u8], version: u64) -> Result<bool, Error> {
    if view.ty() != T_RAW {
        return Ok(false);
    }
    let end = view.val_off() + view.vlen;
    let new_len = view.vlen + data.len() as u64;
    if new_len > MAX_VALUE || end + data.len() as u64 > view.off + a.block_size(view.off)? {
        return Ok(false);
    }
    a.write(end, data)?;
    a.u32(view.off + 8)?.store(new_len as u32, Ordering::Release);
    // The new version, and the mark of an edited string (a SET's item can have a few bytes
    // of room from its size class).
    let w = a.u64(view.off)?;
    let m = w.load(Ordering::Relaxed);
    w.store((m & ((1 << VERSION_SHIFT) - 1)) | EDITED | ((version & VERSION_MASK) << VERSION_SHIFT), Ordering::Release);
    Ok(true)
}

/// Sets a new version in an item's state word (in place, one atomic store).
pub(crate) fn set_version(a: &Arena, view: &ItemView, version: u64) -> Result<(), Error> {
    let w = a.u64(view.off)?;
    let m = w.load(Ordering::Relaxed);
    w.store((m & ((1 << VERSION_SHIFT) - 1)) | ((version & VERSION_MASK) << VERSION_SHIFT), Ordering::Release);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_integers() {
        for (s, v) in [("0", Some(0)), ("-1", Some(-1)), ("123", Some(123)), ("9223372036854775807", Some(i64::MAX))] {
            assert_eq!(parse_canonical_i64(s.as_bytes()), v, "{s}");
        }
        assert_eq!(parse_canonical_i64(b"-9223372036854775808"), Some(i64::MIN));
        for s in ["", "-", "-0", "007", "+1", " 1", "1 ", "9223372036854775808", "1.0", "abc"] {
            assert_eq!(parse_canonical_i64(s.as_bytes()), None, "{s}");
        }
    }

    #[test]
    fn integer_formatting() {
        for v in [0i64, 1, -1, 42, i64::MAX, i64::MIN] {
            let mut b = itoa_buf();
            assert_eq!(fmt_i64(v, &mut b), v.to_string().as_bytes());
        }
    }

    #[test]
    fn small_item_is_56_bytes() {
        // The memory target rests on this: 12-byte header + 11-byte key + 32-byte value.
        let l = layout(T_RAW | (11 << 8), 11, 32);
        assert_eq!(l.size, 55);
        assert_eq!(larder_arena::class_size(larder_arena::class_of(l.size)), 56);
    }
}
