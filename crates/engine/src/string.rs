//! String operations: GET/SET and their variants, counters, APPEND, ranges, MGET/MSET.
//!
//! Each is a closure over [`Handle::read`] (lock-free) or [`Handle::write`] (under the key's
//! bucket-pair lock). Integers are stored as integers, so INCR changes one atomic word in
//! place instead of building a new item.

use std::sync::atomic::Ordering;

use larder_arena::Participant;

use crate::index::{self, Placement};
use crate::item::{self, parse_canonical_i64, ItemView, Meta, NewItem, Value, MAX_VALUE};
use crate::keyspace::Action;
use crate::{now_ms, Error, Handle};

/// SET's NX / XX.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Cond {
    #[default]
    Always,
    /// Only if the key does not exist.
    Nx,
    /// Only if it exists.
    Xx,
}

/// What happens to the key's time to live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expiry {
    /// No expiry (a plain SET removes any TTL).
    #[default]
    Clear,
    /// KEEPTTL.
    Keep,
    /// Absolute Unix milliseconds.
    At(u64),
}

impl Expiry {
    /// An absolute expiry in Unix milliseconds, 0 meaning none (memcached's and the
    /// journal's form).
    pub fn at_or_clear(at: u64) -> Expiry {
        if at == 0 {
            Expiry::Clear
        } else {
            Expiry::At(at)
        }
    }
}

/// Options of [`Handle::set`]: Redis SET's flags and memcached's flags and CAS.
#[derive(Clone, Copy, Debug, Default)]
pub struct SetOptions {
    pub cond: Cond,
    pub expiry: Expiry,
    /// Return the old value (SET ... GET).
    pub get: bool,
    /// memcached client flags to store.
    pub flags: u32,
    /// memcached `cas`: store only if the item is a string of this version (a collection
    /// under the key is `NotFound`, as a missing key).
    pub cas: Option<u64>,
    /// Store the bytes as a string even if they read as a canonical integer (which `set`
    /// otherwise stores as an integer item, for INCR in place). Redis's INCRBYFLOAT makes a
    /// string of "3" too: OBJECT ENCODING says `embstr`, not `int`.
    pub raw: bool,
    /// Store the bytes as a string in what Redis calls the `raw` encoding whatever their
    /// length, as a string an edit or a bit operation made (BITOP's result). Implies `raw`.
    pub edited: bool,
    /// With an `Expiry::At` already past, store the key all the same, as Redis's SET ...
    /// EXAT/PXAT does: it is there, expired (DBSIZE counts it), until a lookup or active
    /// expiry deletes it, which counts and reports it as expired. Without it such a write
    /// deletes the key at once (memcached's negative exptime).
    pub keep_expired: bool,
}

/// What [`Handle::edit`] does with the bytes its closure was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edit {
    /// Leave the key as it was.
    Keep,
    /// Store the bytes as they are now (a new version).
    Store,
    /// Keep the bytes and the version, but make an integer or a short embedded string raw:
    /// what Redis's bit and HyperLogLog commands do to a string they touch even when they
    /// change nothing (`dbUnshareStringValue`; OBJECT ENCODING then says `raw`).
    Unshare,
}

/// What a conditional store did (memcached's replies map one to one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Stored,
    /// NX/XX (add/replace) condition not met.
    NotStored,
    /// CAS version mismatch.
    Exists,
    /// CAS on a missing key.
    NotFound,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetReply {
    pub outcome: Outcome,
    /// The previous value, when `get` was asked for and the key existed.
    pub old: Option<Vec<u8>>,
    /// The new item's version (its memcached CAS value) if stored.
    pub version: u64,
}

fn check_len(n: usize) -> Result<(), Error> {
    if n as u64 > MAX_VALUE {
        Err(Error::TooLarge)
    } else {
        Ok(())
    }
}

/// Parses a float as Redis's INCRBYFLOAT does: no spaces, no NaN.
fn parse_float(b: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(b).ok()?;
    if s.is_empty() || s.bytes().any(|c| c.is_ascii_whitespace()) {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    if v.is_nan() {
        return None;
    }
    Some(v)
}

/// Formats a float as Redis does for INCRBYFLOAT (no exponent, no trailing zeros).
pub(crate) fn fmt_float(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e17 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

impl Handle {
    /// The value of `key`, or None.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// assert_eq!(h.get(0, b"greeting").unwrap(), None);
    /// h.set(0, b"greeting", b"hello", &SetOptions::default()).unwrap();
    /// assert_eq!(h.get(0, b"greeting").unwrap().as_deref(), Some(&b"hello"[..]));
    /// // Each database is a keyspace of its own (Redis SELECT).
    /// assert_eq!(h.get(1, b"greeting").unwrap(), None);
    /// ```
    pub fn get(&self, db: u32, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.read(db, key, |a, it| {
            let mut v = Vec::with_capacity(it.vlen as usize);
            it.value(a, &mut v)?;
            Ok(v)
        })
    }

    /// Appends the value of `key` to `out` (no allocation when `out` has room); returns its
    /// metadata, or None if the key does not exist.
    #[inline]
    pub fn get_into(&self, db: u32, key: &[u8], out: &mut Vec<u8>) -> Result<Option<Meta>, Error> {
        self.read(db, key, |a, it| {
            // Version before value: an in-place INCR stores the value, then the version, so
            // a reader that sees the new version also sees the new value. (The other order
            // could pair an old value with a new CAS version, and a memcached `cas` built on
            // it would overwrite an update it never saw.)
            let meta = it.meta(a)?;
            it.value(a, out)?;
            Ok(meta)
        })
    }

    /// Like [`Handle::get_into`], but calls `header(out, meta, len)` with the value's length
    /// before appending the value, so that a reply's framing (`$len\r\n`, memcached's
    /// `VALUE` line) goes in front of a value copied once. Nothing is called or appended for
    /// a missing key or one of another type.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"k", b"hello", &SetOptions::default()).unwrap();
    /// let mut out = Vec::new();
    /// h.get_framed(0, b"k", &mut out, |out, _meta, len| out.extend_from_slice(format!("${len}\r\n").as_bytes()))
    ///     .unwrap();
    /// assert_eq!(out, b"$5\r\nhello");
    /// ```
    #[inline]
    pub fn get_framed(
        &self,
        db: u32,
        key: &[u8],
        out: &mut Vec<u8>,
        header: impl FnOnce(&mut Vec<u8>, &Meta, usize),
    ) -> Result<Option<Meta>, Error> {
        self.read(db, key, |a, it| {
            // Version before value, as in `get_into`.
            let meta = it.meta(a)?;
            it.value_framed(a, out, |out, len| header(out, &meta, len))?;
            Ok(meta)
        })
    }

    /// Values of several keys, in order (None for missing keys), linear in their number.
    /// The keys are looked up [`PREFETCH_GROUP`](crate::PREFETCH_GROUP) at a time, each
    /// group's cache misses overlapping (see [`Handle::prefetch_group`]).
    pub fn mget(&self, db: u32, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, Error> {
        let mut out = Vec::with_capacity(keys.len());
        for group in keys.chunks(crate::PREFETCH_GROUP) {
            if keys.len() > 1 {
                self.prefetch_group(db, group.iter().copied());
            }
            for k in group {
                out.push(self.get(db, k)?);
            }
        }
        Ok(out)
    }

    /// SET with every option of Redis's SET and memcached's set/add/replace/cas.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// let in_a_minute = now_ms() + 60_000;
    /// let nx = SetOptions { cond: Cond::Nx, expiry: Expiry::At(in_a_minute), ..Default::default() };
    /// assert_eq!(h.set(0, b"lock", b"me", &nx).unwrap().outcome, Outcome::Stored);
    /// assert_eq!(h.set(0, b"lock", b"you", &nx).unwrap().outcome, Outcome::NotStored);
    /// // SET ... GET KEEPTTL: replace, keep the expiry, return the old value.
    /// let r = h.set(0, b"lock", b"you", &SetOptions { get: true, expiry: Expiry::Keep, ..Default::default() }).unwrap();
    /// assert_eq!(r.old.as_deref(), Some(&b"me"[..]));
    /// assert!(matches!(h.pttl(0, b"lock").unwrap(), Ttl::Ms(_)));
    /// // memcached cas: store only if nobody wrote since we read the version.
    /// let version = h.meta(0, b"lock").unwrap().unwrap().version;
    /// let cas = SetOptions { cas: Some(version), ..Default::default() };
    /// assert_eq!(h.set(0, b"lock", b"us", &cas).unwrap().outcome, Outcome::Stored);
    /// assert_eq!(h.set(0, b"lock", b"them", &cas).unwrap().outcome, Outcome::Exists);
    /// // XX: only replace an existing key (memcached replace).
    /// let xx = SetOptions { cond: Cond::Xx, ..Default::default() };
    /// assert_eq!(h.set(0, b"nobody", b"x", &xx).unwrap().outcome, Outcome::NotStored);
    /// assert_eq!(h.set(0, b"lock", b"x", &xx).unwrap().outcome, Outcome::Stored);
    /// // SET ... PXAT in the past, as Redis: stored expired; the next lookup deletes it.
    /// let past = SetOptions { expiry: Expiry::At(1), keep_expired: true, ..Default::default() };
    /// assert_eq!(h.set(0, b"gone", b"x", &past).unwrap().outcome, Outcome::Stored);
    /// assert!(h.present(0, b"gone").unwrap());
    /// assert_eq!(h.get(0, b"gone").unwrap(), None);
    /// assert!(!h.present(0, b"gone").unwrap());
    /// ```
    pub fn set(&mut self, db: u32, key: &[u8], value: &[u8], opt: &SetOptions) -> Result<SetReply, Error> {
        check_len(value.len())?;
        check_len(key.len())?;
        if let Expiry::At(at) = opt.expiry {
            if at <= now_ms() && !opt.keep_expired {
                // An expiry in the past: the write happens and the key is gone at once.
                return self.set_expired(db, key, opt);
            }
        }
        self.write(db, key, |p, old| {
            let a = p.arena();
            let old_val = match (opt.get, old) {
                (true, Some(o)) => {
                    let mut v = Vec::new();
                    o.value(a, &mut v)?;
                    Some(v)
                }
                _ => None,
            };
            let refuse = |outcome| Ok((Action::Keep, SetReply { outcome, old: old_val.clone(), version: 0 }));
            if let Some(outcome) = cas_refusal(a, opt.cas, old)? {
                return refuse(outcome);
            }
            match (opt.cond, old.is_some()) {
                (Cond::Nx, true) | (Cond::Xx, false) => return refuse(Outcome::NotStored),
                _ => {}
            }
            let expire_at = match opt.expiry {
                Expiry::Clear => 0,
                Expiry::At(t) => t,
                Expiry::Keep => match old {
                    Some(o) => o.expire_at(a)?,
                    None => 0,
                },
            };
            let version = p.next_version()?;
            let value = match (opt.edited, opt.raw) {
                (true, _) => Value::Edited(value),
                (false, true) => Value::Raw(value),
                (false, false) => Value::of(value),
            };
            let off = item::build(p, &NewItem { key, value, expire_at, cflags: opt.flags, version })?;
            Ok((Action::Put(off), SetReply { outcome: Outcome::Stored, old: old_val, version }))
        })
    }

    /// SET with an expiry already in the past: same conditions (CAS included) and reply, but
    /// the key ends up deleted.
    fn set_expired(&mut self, db: u32, key: &[u8], opt: &SetOptions) -> Result<SetReply, Error> {
        self.write(db, key, |p, old| {
            let old_val = match (opt.get, old) {
                (true, Some(o)) => {
                    let mut v = Vec::new();
                    o.value(p.arena(), &mut v)?;
                    Some(v)
                }
                _ => None,
            };
            if let Some(outcome) = cas_refusal(p.arena(), opt.cas, old)? {
                return Ok((Action::Keep, SetReply { outcome, old: old_val, version: 0 }));
            }
            match (opt.cond, old.is_some()) {
                (Cond::Nx, true) | (Cond::Xx, false) => {
                    Ok((Action::Keep, SetReply { outcome: Outcome::NotStored, old: old_val, version: 0 }))
                }
                // The write still takes a version, as memcached gives the item a CAS value
                // (`ms k 1 T-1 c` answers `HD c<cas>`).
                _ => Ok((
                    Action::Delete,
                    SetReply { outcome: Outcome::Stored, old: old_val, version: p.next_version()? },
                )),
            }
        })
    }

    /// GETDEL.
    pub fn getdel(&mut self, db: u32, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let r = self.write(db, key, |p, old| match old {
            Some(o) => {
                let mut v = Vec::new();
                o.value(p.arena(), &mut v)?;
                Ok((Action::Delete, Some(v)))
            }
            None => Ok((Action::Keep, None)),
        })?;
        self.after_delete(db, key)?;
        Ok(r)
    }

    /// GETEX: returns the value, and the expiry the key had (Unix ms, 0: none), and changes
    /// the expiry (`Expiry::Keep` leaves it). A change gives the item a new version, so that
    /// WATCH sees it. (memcached gat, which keeps the version, is
    /// [`Handle::touch_get_framed`].)
    pub fn getex(&mut self, db: u32, key: &[u8], expiry: Expiry) -> Result<Option<(Vec<u8>, u64)>, Error> {
        let now = now_ms();
        self.write(db, key, |p, old| {
            let Some(o) = old else { return Ok((Action::Keep, None)) };
            let a = p.arena();
            let mut v = Vec::new();
            o.value(a, &mut v)?;
            let at = deadline(expiry, o, a)?;
            let before = o.expire_at(a)?;
            let version = if at == before { o.version() } else { p.next_version()? };
            Ok((expiry_action(p, o, at, now, version)?, Some((v, before))))
        })
    }

    /// INCRBY / DECRBY (and memcached incr/decr through [`Handle::incr_by`] with checks of
    /// their own). A missing key counts as 0.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"hits", b"41", &SetOptions::default()).unwrap();
    /// assert_eq!(h.incr_by(0, b"hits", 1).unwrap(), 42);
    /// assert_eq!(h.incr_by(0, b"fresh", -5).unwrap(), -5);
    /// assert!(matches!(h.incr_by(0, b"hits", i64::MAX), Err(Error::Overflow)));
    /// h.set(0, b"name", b"larder", &SetOptions::default()).unwrap();
    /// assert!(matches!(h.incr_by(0, b"name", 1), Err(Error::NotInteger)));
    /// ```
    pub fn incr_by(&mut self, db: u32, key: &[u8], delta: i64) -> Result<i64, Error> {
        self.write(db, key, |p, old| {
            let a = p.arena();
            match old {
                None => {
                    let off = item::build(
                        p,
                        &NewItem { key, value: Value::Int(delta), expire_at: 0, cflags: 0, version: p.next_version()? },
                    )?;
                    Ok((Action::Put(off), delta))
                }
                Some(o) if o.is_int() => {
                    let new = o.int(a)?.checked_add(delta).ok_or(Error::Overflow)?;
                    // In place: one atomic store of the integer, one of the state word.
                    a.u64(o.int_off().ok_or(Error::Corrupt("integer item without integer"))?)?
                        .store(new as u64, Ordering::Release);
                    item::set_version(a, o, p.next_version()?)?;
                    Ok((Action::InPlace, new))
                }
                Some(o) => {
                    // No integer is longer than 20 characters: refuse a long value (or a
                    // collection) without copying it.
                    if o.is_string() && o.vlen > 20 {
                        return Err(Error::NotInteger);
                    }
                    let mut v = Vec::new();
                    o.value(a, &mut v)?;
                    let cur = parse_canonical_i64(&v).ok_or(Error::NotInteger)?;
                    let new = cur.checked_add(delta).ok_or(Error::Overflow)?;
                    Ok((Action::Put(rebuild_value(p, o, Value::Int(new))?), new))
                }
            }
        })
    }

    /// Replaces a string's value with what `f` makes of it, in one step under the key's lock,
    /// keeping its TTL and client flags: memcached incr/decr, whose number rules (and the
    /// space-padded result) the protocol crate supplies. `f` returns the bytes to store and
    /// what to return, or None to leave the item alone and fail with [`Error::NotInteger`].
    /// Returns None if the key is missing.
    pub fn rewrite<T>(
        &mut self,
        db: u32,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> Option<(Vec<u8>, T)>,
    ) -> Result<Option<T>, Error> {
        self.write(db, key, |p, old| {
            let Some(o) = old else { return Ok((Action::Keep, None)) };
            let mut v = Vec::new();
            o.value(p.arena(), &mut v)?;
            let (new, r) = f(&v).ok_or(Error::NotInteger)?;
            Ok((Action::Put(rebuild_value(p, o, Value::of(&new))?), Some(r)))
        })
    }

    /// INCRBYFLOAT in f64, printed as the shortest decimal that reads back as the same
    /// f64, without an exponent. Redis adds in 80-bit long double and prints that (0.1 + 0.2
    /// gives `0.3` there, `0.30000000000000004` here): the server's INCRBYFLOAT does as
    /// Redis does and stores through [`Handle::set`]; this is the plain-f64 version for
    /// local callers.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"price", b"10.5", &SetOptions::default()).unwrap();
    /// assert_eq!(h.incr_by_float(0, b"price", 0.25).unwrap(), b"10.75");
    /// // A whole result prints without a fraction, as Redis prints it.
    /// assert_eq!(h.incr_by_float(0, b"price", -5.75).unwrap(), b"5");
    /// assert_eq!(h.get(0, b"price").unwrap().as_deref(), Some(&b"5"[..]));
    /// assert_eq!(h.encoding(0, b"price").unwrap(), Some("embstr")); // a string, as in Redis
    /// assert!(matches!(h.incr_by_float(0, b"price", f64::NAN), Err(Error::NanOrInfinity)));
    /// ```
    pub fn incr_by_float(&mut self, db: u32, key: &[u8], delta: f64) -> Result<Vec<u8>, Error> {
        if !delta.is_finite() {
            return Err(Error::NanOrInfinity);
        }
        self.write(db, key, |p, old| {
            let a = p.arena();
            let cur = match old {
                None => 0.0,
                Some(o) if o.is_int() => o.int(a)? as f64,
                Some(o) => {
                    // Redis refuses numbers of 5 kB and more (MAX_LONG_DOUBLE_CHARS) before
                    // parsing; so do we, without copying the value.
                    if o.is_string() && o.vlen >= 5 * 1024 {
                        return Err(Error::NotFloat);
                    }
                    let mut v = Vec::new();
                    o.value(a, &mut v)?;
                    parse_float(&v).ok_or(Error::NotFloat)?
                }
            };
            let new = cur + delta;
            if !new.is_finite() {
                return Err(Error::NanOrInfinity);
            }
            let text = fmt_float(new);
            // A string even when it reads as an integer ("5"), as Redis stores it (OBJECT
            // ENCODING embstr): the next INCR converts it, as it would any string.
            let value = Value::Raw(text.as_bytes());
            let off = match old {
                None => item::build(p, &NewItem { key, value, expire_at: 0, cflags: 0, version: p.next_version()? })?,
                Some(o) => rebuild_value(p, o, value)?,
            };
            Ok((Action::Put(off), text.into_bytes()))
        })
    }

    /// APPEND: returns the new length. Creates the key if missing.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// assert_eq!(h.append(0, b"log", b"a;").unwrap(), 2);
    /// assert_eq!(h.append(0, b"log", b"b;").unwrap(), 4);
    /// assert_eq!(h.get(0, b"log").unwrap().as_deref(), Some(&b"a;b;"[..]));
    /// ```
    pub fn append(&mut self, db: u32, key: &[u8], data: &[u8]) -> Result<u64, Error> {
        Ok(self.concat(db, key, data, false, true)?.unwrap_or(0))
    }

    /// APPEND or memcached append/prepend (`create` = false: None if the key is missing).
    /// Keeps the TTL and client flags.
    ///
    /// An append lands in place when the value's block has room after it; when it doesn't,
    /// the value moves to a block with room to spare ([`append_room`]), so building a value
    /// by appends costs amortised O(1) per byte, as Redis's string preallocation does.
    pub fn concat(
        &mut self,
        db: u32,
        key: &[u8],
        data: &[u8],
        prepend: bool,
        create: bool,
    ) -> Result<Option<u64>, Error> {
        self.write(db, key, |p, old| {
            let a = p.arena();
            let mut v = Vec::new();
            match old {
                None if !create => return Ok((Action::Keep, None)),
                None => {}
                Some(o) => {
                    if o.is_string() && !prepend {
                        check_len(o.strlen(a)? as usize + data.len())?;
                        if item::append_in_place(a, o, data, p.next_version()?)? {
                            return Ok((Action::InPlace, Some(o.vlen + data.len() as u64)));
                        }
                    }
                    v.reserve(o.vlen as usize + data.len());
                    o.value(a, &mut v)?;
                }
            }
            check_len(v.len() + data.len())?;
            if prepend {
                v.splice(0..0, data.iter().copied());
            } else {
                v.extend_from_slice(data);
            }
            let len = v.len() as u64;
            let off = match old {
                None => item::build(
                    p,
                    &NewItem { key, value: Value::of(&v), expire_at: 0, cflags: 0, version: p.next_version()? },
                )?,
                Some(o) if prepend => rebuild_value(p, o, Value::Edited(&v))?,
                // Edited, not `Value::of`: an integer item can't grow in place (Redis, too,
                // leaves an appended-to string raw; INCR still parses it).
                Some(o) => {
                    let mut k = Vec::new();
                    o.key(a, &mut k)?;
                    let it = NewItem {
                        key: &k,
                        value: Value::Edited(&v),
                        expire_at: o.expire_at(a)?,
                        cflags: o.cflags,
                        version: p.next_version()?,
                    };
                    item::build_with_room(p, &it, append_room(len))?
                }
            };
            Ok((Action::Put(off), Some(len)))
        })
    }

    /// STRLEN.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"k", b"hello", &SetOptions::default()).unwrap();
    /// assert_eq!(h.strlen(0, b"k").unwrap(), 5);
    /// assert_eq!(h.strlen(0, b"missing").unwrap(), 0);
    /// ```
    pub fn strlen(&self, db: u32, key: &[u8]) -> Result<u64, Error> {
        Ok(self.read(db, key, |a, it| it.strlen(a))?.unwrap_or(0))
    }

    /// The key's metadata and, for a string, its length as STRLEN counts it (None for a
    /// collection), from one look at the item; None if the key does not exist.
    ///
    /// One look, so the two belong together: in a second lookup the key could be another
    /// item altogether (another type, and STRLEN an error), and an integer's digits or a
    /// string's length can change in place (INCR, APPEND) between two.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"k", b"hello", &SetOptions { flags: 7, ..Default::default() }).unwrap();
    /// let (meta, len) = h.meta_and_len(0, b"k").unwrap().unwrap();
    /// assert_eq!((meta.ty, meta.flags, len), (Type::String, 7, Some(5)));
    /// h.coll_write(0, b"l", Kind::List, true, |c| c.insert_at(0, b"x")).unwrap();
    /// assert_eq!(h.meta_and_len(0, b"l").unwrap().map(|(m, len)| (m.ty, len)), Some((Type::List, None)));
    /// assert_eq!(h.meta_and_len(0, b"missing").unwrap(), None);
    /// ```
    pub fn meta_and_len(&self, db: u32, key: &[u8]) -> Result<Option<(Meta, Option<u64>)>, Error> {
        self.read(db, key, |a, it| {
            let meta = it.meta(a)?;
            let len = if it.is_string() { Some(it.strlen(a)?) } else { None };
            Ok((meta, len))
        })
    }

    /// GETRANGE with Redis's index rules (negative from the end, clamped, inclusive).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"k", b"This is a string", &SetOptions::default()).unwrap();
    /// assert_eq!(h.getrange(0, b"k", 0, 3).unwrap(), b"This");
    /// assert_eq!(h.getrange(0, b"k", -3, -1).unwrap(), b"ing");
    /// assert_eq!(h.getrange(0, b"k", 10, 100).unwrap(), b"string");
    /// assert_eq!(h.getrange(0, b"missing", 0, -1).unwrap(), b"");
    /// ```
    pub fn getrange(&self, db: u32, key: &[u8], start: i64, end: i64) -> Result<Vec<u8>, Error> {
        Ok(self
            .read(db, key, |a, it| {
                // An integer changes in place under lock-free readers (INCR from another
                // process), so format it once and take the range of that copy: a length
                // read before could be longer than the digits read after.
                let mut digits = Vec::new();
                let len = if it.is_int() {
                    it.value(a, &mut digits)?;
                    digits.len() as i64
                } else {
                    it.strlen(a)? as i64
                };
                let (mut s, mut e) = (start, end);
                if s < 0 && e < 0 && s > e {
                    return Ok(Vec::new());
                }
                if s < 0 {
                    s += len;
                }
                if e < 0 {
                    e += len;
                }
                s = s.max(0);
                e = e.max(0);
                if e >= len {
                    e = len - 1;
                }
                if s > e || len == 0 {
                    return Ok(Vec::new());
                }
                if it.is_int() {
                    return Ok(digits[s as usize..=e as usize].to_vec());
                }
                let mut v = Vec::with_capacity((e - s + 1) as usize);
                a.read_append(it.val_off() + s as u64, (e - s + 1) as usize, &mut v)?;
                Ok(v)
            })?
            .unwrap_or_default())
    }

    /// SETBIT: sets or clears bit `bit` (bit 0 is the most significant bit of the first
    /// byte), growing the string with zero bytes as needed; returns the bit's old value and
    /// whether the string changed (made, grown, or the bit flipped). An unchanged string
    /// keeps its version, as Redis does not count it as modified (a WATCH on it holds), but
    /// is made raw ([`Edit::Unshare`]).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// assert_eq!(h.setbit(0, b"b", 7, true).unwrap(), (0, true));
    /// assert_eq!(h.get(0, b"b").unwrap().as_deref(), Some(&b"\x01"[..]));
    /// assert_eq!(h.getbit(0, b"b", 7).unwrap(), 1);
    /// assert_eq!(h.setbit(0, b"b", 7, true).unwrap(), (1, false));
    /// ```
    pub fn setbit(&mut self, db: u32, key: &[u8], bit: u64, on: bool) -> Result<(u8, bool), Error> {
        let byte = (bit / 8) as usize;
        if byte as u64 >= MAX_VALUE {
            return Err(Error::TooLarge);
        }
        let mask = 0x80u8 >> (bit % 8);
        self.edit(db, key, |v, existed| {
            let grown = !existed || v.len() <= byte;
            if v.len() <= byte {
                v.resize(byte + 1, 0);
            }
            let was = v[byte] & mask != 0;
            if on {
                v[byte] |= mask;
            } else {
                v[byte] &= !mask;
            }
            let changed = grown || was != on;
            (if changed { Edit::Store } else { Edit::Unshare }, (was as u8, changed))
        })
    }

    /// Edits a string's bytes in one step under the key's lock, keeping its TTL and client
    /// flags: `f` gets the value to change in place (empty, and `false`, for a missing key)
    /// and returns what to do with it ([`Edit`]) and what to return. What it stores is a raw
    /// string (never re-encoded as an integer), as Redis leaves a string its bit commands
    /// wrote; a missing key it stores is created without a TTL. SETBIT and the server's
    /// BITFIELD and HyperLogLog commands are built on it.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// let upper = |v: &mut Vec<u8>, existed: bool| {
    ///     v.make_ascii_uppercase();
    ///     (if existed { Edit::Store } else { Edit::Keep }, v.len())
    /// };
    /// assert_eq!(h.edit(0, b"k", upper).unwrap(), 0); // missing: nothing stored
    /// assert_eq!(h.get(0, b"k").unwrap(), None);
    /// h.set(0, b"k", b"hello", &SetOptions::default()).unwrap();
    /// assert_eq!(h.edit(0, b"k", upper).unwrap(), 5);
    /// assert_eq!(h.get(0, b"k").unwrap().as_deref(), Some(&b"HELLO"[..]));
    /// ```
    pub fn edit<T>(
        &mut self,
        db: u32,
        key: &[u8],
        f: impl FnOnce(&mut Vec<u8>, bool) -> (Edit, T),
    ) -> Result<T, Error> {
        self.write(db, key, |p, old| {
            let mut v = Vec::new();
            if let Some(o) = old {
                o.value(p.arena(), &mut v)?;
            }
            let (what, r) = f(&mut v, old.is_some());
            let o = match (what, old) {
                (Edit::Keep, _) | (Edit::Unshare, None) => return Ok((Action::Keep, r)),
                (Edit::Unshare, Some(o)) => {
                    // Only an integer or a short string is stored otherwise than raw.
                    if o.is_int() || (!o.is_edited() && o.vlen <= 44) {
                        return Ok((Action::Put(rebuild(p, o, Value::Edited(&v), o.version())?), r));
                    }
                    return Ok((Action::Keep, r));
                }
                (Edit::Store, o) => o,
            };
            if v.len() as u64 > MAX_VALUE {
                return Err(Error::TooLarge);
            }
            let off = match o {
                // A raw string, as Redis makes it, even from nothing.
                None => item::build(
                    p,
                    &NewItem { key, value: Value::Edited(&v), expire_at: 0, cflags: 0, version: p.next_version()? },
                )?,
                Some(o) => rebuild_value(p, o, Value::Edited(&v))?,
            };
            Ok((Action::Put(off), r))
        })
    }

    /// GETBIT: the value of bit `bit` (0 past the end or for a missing key).
    pub fn getbit(&self, db: u32, key: &[u8], bit: u64) -> Result<u8, Error> {
        let byte = bit / 8;
        let r = self.read(db, key, |a, it| {
            let mut v = Vec::new();
            if it.is_string() && !it.is_int() {
                // Just the one byte (past the end reads as 0).
                if byte < it.vlen {
                    a.read_append(it.val_off() + byte, 1, &mut v)?;
                }
                return Ok(v.first().map_or(0, |b| (b & (0x80 >> (bit % 8)) != 0) as u8));
            }
            it.value(a, &mut v)?;
            Ok(v.get(byte as usize).map_or(0, |b| (b & (0x80 >> (bit % 8)) != 0) as u8))
        })?;
        Ok(r.unwrap_or(0))
    }

    /// SETRANGE: overwrites from `offset` (zero-padding), returns the new length. An empty
    /// `data` never creates the key.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"k", b"Hello World", &SetOptions::default()).unwrap();
    /// assert_eq!(h.setrange(0, b"k", 6, b"Redis").unwrap(), 11);
    /// assert_eq!(h.get(0, b"k").unwrap().as_deref(), Some(&b"Hello Redis"[..]));
    /// // Past the end: the gap fills with zero bytes.
    /// assert_eq!(h.setrange(0, b"pad", 2, b"x").unwrap(), 3);
    /// assert_eq!(h.get(0, b"pad").unwrap().as_deref(), Some(&b"\0\0x"[..]));
    /// // Values stop at 512 MB, as in Redis.
    /// assert!(matches!(h.setrange(0, b"pad", MAX_VALUE as u64, b"x"), Err(Error::TooLarge)));
    /// ```
    pub fn setrange(&mut self, db: u32, key: &[u8], offset: u64, data: &[u8]) -> Result<u64, Error> {
        if data.is_empty() {
            return self.strlen(db, key);
        }
        let end = offset.checked_add(data.len() as u64).ok_or(Error::TooLarge)?;
        if end > MAX_VALUE {
            return Err(Error::TooLarge);
        }
        self.write(db, key, |p, old| {
            let a = p.arena();
            let mut v = Vec::new();
            if let Some(o) = old {
                o.value(a, &mut v)?;
            }
            if v.len() < end as usize {
                v.resize(end as usize, 0);
            }
            v[offset as usize..end as usize].copy_from_slice(data);
            let len = v.len() as u64;
            let off = match old {
                // A raw string, as Redis makes it, even from nothing.
                None => item::build(
                    p,
                    &NewItem { key, value: Value::Edited(&v), expire_at: 0, cflags: 0, version: p.next_version()? },
                )?,
                Some(o) => rebuild_value(p, o, Value::Edited(&v))?,
            };
            Ok((Action::Put(off), len))
        })
    }

    /// MSET (`nx` = false) or MSETNX (`nx` = true): sets every pair, atomically for
    /// writers (all the keys' home buckets are locked while the pairs are published, so a
    /// writer of any of them sees all the new values or none) and for crashes (a writer
    /// killed mid-way leaves an intent the reaper finishes). Not for readers: they take no
    /// lock, and one reading several of the keys while the slots are stored one by one may
    /// see some new values and some old. Returns false (setting nothing) if `nx` and any
    /// key exists.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// assert!(h.mset(0, &[(b"a", b"1"), (b"b", b"2")], false).unwrap());
    /// assert!(!h.mset(0, &[(b"b", b"3"), (b"c", b"4")], true).unwrap()); // b exists
    /// assert_eq!(h.mget(0, &[b"a", b"b", b"c"]).unwrap(), vec![Some(b"1".to_vec()), Some(b"2".to_vec()), None]);
    /// ```
    pub fn mset(&mut self, db: u32, pairs: &[(&[u8], &[u8])], nx: bool) -> Result<bool, Error> {
        self.check_db(db)?;
        // The last value of a repeated key wins, as in Redis.
        let mut uniq: Vec<(&[u8], &[u8], u64)> = Vec::with_capacity(pairs.len());
        {
            let mut seen = std::collections::HashMap::with_capacity(pairs.len());
            for &(k, v) in pairs {
                check_len(v.len())?;
                match seen.get(k) {
                    Some(&i) => uniq[i] = (k, v, self.hash(k)),
                    None => {
                        seen.insert(k, uniq.len());
                        uniq.push((k, v, self.hash(k)));
                    }
                }
            }
        }
        let _g = self.p.pin();
        let p = &self.p;
        let a = &**p.arena();
        let mut items = Vec::with_capacity(uniq.len());
        for &(k, v, _) in &uniq {
            let version = p.next_version()?;
            match item::build(p, &NewItem { key: k, value: Value::of(v), expire_at: 0, cflags: 0, version }) {
                Ok(off) => items.push(off),
                Err(e) => {
                    for &off in &items {
                        p.free(off)?;
                    }
                    return Err(e);
                }
            }
        }
        let hashes: Vec<u64> = uniq.iter().map(|u| u.2).collect();
        let mut locked = Vec::new();
        let now = now_ms();
        for _ in 0..index::RETRIES {
            let locs = index::lock_many(p, db, &hashes, &mut locked)?;
            let r = (|| -> Result<Result<bool, (usize, index::Room)>, Error> {
                let mut places = Vec::with_capacity(uniq.len());
                for (i, &(k, _, h)) in uniq.iter().enumerate() {
                    let found = index::find(a, &locs[i], h, k)?;
                    if nx {
                        if let Some(f) = &found {
                            if !f.item.expired(a, now)? {
                                return Ok(Ok(false));
                            }
                        }
                    }
                    places.push(Placement { loc: locs[i], found, free: None, item: items[i] });
                }
                if let Some(k) = index::reserve_many(p, &mut places, &locked)? {
                    return Ok(Err(k));
                }
                // Expired items are replaced like live ones, but count (and are reported)
                // as expired, and their keys as created.
                let mut expired = Vec::with_capacity(places.len());
                for pl in &places {
                    expired.push(match &pl.found {
                        Some(f) => f.item.expired(a, now)?,
                        None => false,
                    });
                }
                index::publish_many(p, db, &places)?;
                for ((pl, &(k, _, _)), expired) in places.iter().zip(&uniq).zip(expired) {
                    self.journal_item(db, pl.item);
                    if expired {
                        self.count_expired(db, k);
                    }
                    if pl.found.is_none() || expired {
                        self.count_created(db, k);
                    }
                    if let Some(f) = &pl.found {
                        item::retire_view(p, &f.item)?;
                    }
                }
                Ok(Ok(true))
            })();
            index::unlock_many(p, &locked)?;
            match r {
                Ok(Ok(done)) => {
                    if !done {
                        for &off in &items {
                            p.free(off)?;
                        }
                    }
                    return Ok(done);
                }
                Ok(Err((k, index::Room::Full))) => index::split(p, db, &locs[k])?,
                Ok(Err(_)) => std::thread::yield_now(),
                Err(e) => {
                    for &off in &items {
                        let _ = p.free(off);
                    }
                    return Err(e);
                }
            }
        }
        for &off in &items {
            p.free(off)?;
        }
        Err(Error::IndexFull)
    }

    /// memcached `gat`: sets (or with 0 clears) a string key's expiry and appends its value,
    /// after `header(out, meta, len)` as in [`Handle::get_framed`], in one step under the
    /// key's lock. A touch and then a read could return a newer item than the one touched,
    /// with its own TTL, which no order of the two writes explains. The version stays, as
    /// with [`Handle::touch`]. An expiry already past deletes the key once its value is
    /// copied: memcached returns it that one time. A key of another type is left alone
    /// ([`Error::WrongType`], with nothing appended); on any other error `out` may hold the
    /// header and value already, for the caller to truncate.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"k", b"v", &SetOptions::default()).unwrap();
    /// let at = now_ms() + 60_000;
    /// let mut out = Vec::new();
    /// let meta = h.touch_get_framed(0, b"k", at, &mut out, |out, _, len| out.push(b'0' + len as u8)).unwrap();
    /// assert_eq!((out.as_slice(), meta.unwrap().expire_at), (&b"1v"[..], at));
    /// assert_eq!(h.meta(0, b"k").unwrap().unwrap().expire_at, at);
    /// // A past time: the value comes back once, and the key is gone.
    /// out.clear();
    /// assert!(h.touch_get_framed(0, b"k", 1, &mut out, |_, _, _| {}).unwrap().is_some());
    /// assert_eq!((out.as_slice(), h.get(0, b"k").unwrap()), (&b"v"[..], None));
    /// assert!(h.touch_get_framed(0, b"k", at, &mut out, |_, _, _| {}).unwrap().is_none());
    /// ```
    pub fn touch_get_framed(
        &mut self,
        db: u32,
        key: &[u8],
        expire_at: u64,
        out: &mut Vec<u8>,
        header: impl FnOnce(&mut Vec<u8>, &Meta, usize),
    ) -> Result<Option<Meta>, Error> {
        let now = now_ms();
        self.write(db, key, |p, old| {
            let Some(o) = old else { return Ok((Action::Keep, None)) };
            let a = p.arena();
            let meta = Meta { expire_at, ..o.meta(a)? };
            // value_framed refuses another type before it appends anything.
            o.value_framed(a, out, |out, len| header(out, &meta, len))?;
            Ok((expiry_action(p, o, expire_at, now, o.version())?, Some(meta)))
        })
    }

    /// memcached touch: sets (or with 0 clears) the expiry. Returns whether the key exists.
    ///
    /// Unlike EXPIRE, the item keeps its version, as memcached keeps an item's CAS value
    /// across touch and gat: a client's `gets`, `touch`, `cas` still succeeds. (So a Redis
    /// client's WATCH does not see a memcached touch.)
    pub fn touch(&mut self, db: u32, key: &[u8], expire_at: u64) -> Result<bool, Error> {
        Ok(self.touch_versioned(db, key, Expiry::at_or_clear(expire_at), false, None)?.outcome == Outcome::Stored)
    }

    /// [`Handle::touch`] only while the key's version is `version`: for a caller that read
    /// the item and now sets the TTL it computed from it (memcached `mg … T`). If a write
    /// replaced the item in between, the touch is skipped, as if it had come just before
    /// that write; touching the newer item would give it a TTL nobody set on it. Returns
    /// whether it touched.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"k", b"v", &SetOptions::default()).unwrap();
    /// let read = h.meta(0, b"k").unwrap().unwrap().version;
    /// let at = now_ms() + 60_000;
    /// assert!(h.touch_if_version(0, b"k", at, read).unwrap());
    /// h.set(0, b"k", b"newer", &SetOptions::default()).unwrap();
    /// assert!(!h.touch_if_version(0, b"k", at, read).unwrap());
    /// assert_eq!(h.meta(0, b"k").unwrap().unwrap().expire_at, 0);
    /// ```
    pub fn touch_if_version(&mut self, db: u32, key: &[u8], expire_at: u64, version: u64) -> Result<bool, Error> {
        Ok(self.touch_versioned(db, key, Expiry::at_or_clear(expire_at), false, Some(version))?.outcome
            == Outcome::Stored)
    }

    /// memcached `md <key> I`, marking the item stale: gives it a new version, so that CAS
    /// writes based on the old one fail, and sets its expiry (`Expiry::Keep` leaves it); with
    /// `cas`, only if the item's version is that. Returns the outcome (`NotFound` for a
    /// missing key, `Exists` for another version) and the new version (0 if nothing was
    /// stored, or an expiry in the past deleted the key).
    ///
    /// All in one step under the key's lock, because the caller builds on what it did: an
    /// expiry or a version read in a lookup before could be a replaced item's (its TTL would
    /// land on the newer item), and a version read back after could be a later write's
    /// (whose fresh value would then be marked stale).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// let at = now_ms() + 60_000;
    /// h.set(0, b"k", b"v", &SetOptions { expiry: Expiry::At(at), ..Default::default() }).unwrap();
    /// let before = h.meta(0, b"k").unwrap().unwrap();
    /// let r = h.touch_and_invalidate(0, b"k", Expiry::Keep, Some(before.version)).unwrap();
    /// assert_eq!(r.outcome, Outcome::Stored);
    /// let after = h.meta(0, b"k").unwrap().unwrap();
    /// assert_eq!((after.version, after.expire_at), (r.version, at));
    /// // The old version no longer matches; a missing key is NotFound.
    /// let again = h.touch_and_invalidate(0, b"k", Expiry::Keep, Some(before.version)).unwrap();
    /// assert_eq!(again.outcome, Outcome::Exists);
    /// assert_eq!(h.touch_and_invalidate(0, b"nope", Expiry::Clear, None).unwrap().outcome, Outcome::NotFound);
    /// ```
    pub fn touch_and_invalidate(
        &mut self,
        db: u32,
        key: &[u8],
        expiry: Expiry,
        cas: Option<u64>,
    ) -> Result<SetReply, Error> {
        self.touch_versioned(db, key, expiry, true, cas)
    }

    /// The memcached touches: a string key's expiry, and a new version if `new_version`, with
    /// `cas` only on that version. A key of another type is no memcached item: `NotFound`,
    /// and it is left alone.
    fn touch_versioned(
        &mut self,
        db: u32,
        key: &[u8],
        expiry: Expiry,
        new_version: bool,
        cas: Option<u64>,
    ) -> Result<SetReply, Error> {
        let now = now_ms();
        self.write(db, key, |p, old| {
            let reply = |outcome, version| SetReply { outcome, old: None, version };
            let Some(o) = old.filter(|o| o.is_string()) else { return Ok((Action::Keep, reply(Outcome::NotFound, 0))) };
            // Versions fit in 40 bits: a larger CAS matches none (as memcached's 64-bit compare).
            if cas.is_some_and(|c| o.version() != c) {
                return Ok((Action::Keep, reply(Outcome::Exists, 0)));
            }
            let at = deadline(expiry, o, p.arena())?;
            let version = if new_version { p.next_version()? } else { o.version() };
            let action = expiry_action(p, o, at, now, version)?;
            let version = if matches!(action, Action::Delete) { 0 } else { version };
            Ok((action, reply(Outcome::Stored, version)))
        })
    }
}

/// The absolute expiry `expiry` asks of the item `o` (0: none).
fn deadline(expiry: Expiry, o: &ItemView, a: &larder_arena::Arena) -> Result<u64, Error> {
    Ok(match expiry {
        Expiry::Keep => o.expire_at(a)?,
        Expiry::Clear => 0,
        Expiry::At(t) => t,
    })
}

/// What giving the item `o` the expiry `at` (0: none) and `version` (its own, to keep it)
/// comes to, under its key's lock: a deletion if `at` has passed, nothing if neither
/// changes (no rebuilt item, no journal record), else [`set_expiry`].
fn expiry_action(p: &Participant, o: &ItemView, at: u64, now: u64, version: u64) -> Result<Action, Error> {
    if at != 0 && at <= now {
        return Ok(Action::Delete);
    }
    if version == o.version() && at == o.expire_at(p.arena())? {
        return Ok(Action::Keep);
    }
    set_expiry(p, o, at, version)
}

/// Changes an item's expiry, and gives it `version` (a new one, or its own to keep it): in
/// place if it has an expiry field, else by rebuilding it.
pub(crate) fn set_expiry(p: &Participant, o: &ItemView, at: u64, version: u64) -> Result<Action, Error> {
    let a = p.arena();
    match o.expire_off() {
        Some(off) => {
            a.u64(off)?.store(at, Ordering::Release);
            if version != o.version() {
                item::set_version(a, o, version)?;
            }
            Ok(Action::InPlace)
        }
        None => {
            let mut v = Vec::new();
            let value = if o.is_int() {
                Value::Int(o.int(a)?)
            } else if o.is_string() {
                o.value(a, &mut v)?;
                Value::kept(o, &v)
            } else {
                // A collection keeps its encoding (and its tree, see retire_replaced).
                o.raw_value(a, &mut v)?;
                Value::Coll(o.ty(), &v)
            };
            let mut k = Vec::new();
            o.key(a, &mut k)?;
            let off = item::build(p, &NewItem { key: &k, value, expire_at: at, cflags: o.cflags, version })?;
            Ok(Action::Put(off))
        }
    }
}

/// Why a store with `cas` must not happen to `old`, if it must not: `NotFound` for no item or
/// a Redis collection (a CAS is memcached's, which sees strings only), `Exists` for another
/// version. Versions fit in 40 bits: a larger CAS matches none (memcached compares all 64).
fn cas_refusal(a: &larder_arena::Arena, cas: Option<u64>, old: Option<&ItemView>) -> Result<Option<Outcome>, Error> {
    let Some(cas) = cas else { return Ok(None) };
    Ok(match old {
        None => Some(Outcome::NotFound),
        Some(o) if !o.is_string() => Some(Outcome::NotFound),
        Some(o) if o.meta(a)?.version != cas => Some(Outcome::Exists),
        Some(_) => None,
    })
}

/// A new item with `old`'s key, expiry and flags and a new value.
/// Spare bytes to leave after a value of `len` bytes that an append had to move: as much
/// again below 1 MiB (Redis's rule for strings), above that an eighth of it but at least
/// 1 MiB, so the moves of a value built by appends stay geometric (each byte is copied
/// O(1) times on average) and at most an eighth of a large value's block is spare.
fn append_room(len: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    let room = if len < MIB { len } else { (len / 8).max(MIB) };
    room.min(MAX_VALUE - len)
}

fn rebuild_value(p: &Participant, old: &ItemView, value: Value<'_>) -> Result<u64, Error> {
    rebuild(p, old, value, p.next_version()?)
}

/// [`rebuild_value`] with the version given.
fn rebuild(p: &Participant, old: &ItemView, value: Value<'_>, version: u64) -> Result<u64, Error> {
    let a = p.arena();
    let mut k = Vec::new();
    old.key(a, &mut k)?;
    item::build(p, &NewItem { key: &k, value, expire_at: old.expire_at(a)?, cflags: old.cflags, version })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreConfig, Ttl};

    /// Where `key`'s item is (it moves whenever the item is rebuilt).
    fn item_off(h: &Handle, key: &[u8]) -> u64 {
        h.read(0, key, |_, it| Ok(it.off)).unwrap().unwrap()
    }

    #[test]
    fn rewrite_keeps_ttl_and_flags_and_refuses_cleanly() {
        let store = Store::open(StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        assert_eq!(h.rewrite(0, b"n", |_| Some((b"1".to_vec(), 1))).unwrap(), None);
        let opts = SetOptions { flags: 7, expiry: Expiry::At(crate::now_ms() + 100_000), ..Default::default() };
        h.set(0, b"n", b"10", &opts).unwrap();
        let r = h.rewrite(0, b"n", |v| {
            assert_eq!(v, b"10");
            Some((b"9 ".to_vec(), 9u64))
        });
        assert_eq!(r.unwrap(), Some(9));
        assert_eq!(h.get(0, b"n").unwrap().as_deref(), Some(&b"9 "[..]));
        let m = h.meta(0, b"n").unwrap().unwrap();
        assert_eq!(m.flags, 7);
        assert!(matches!(h.pttl(0, b"n").unwrap(), Ttl::Ms(ms) if ms > 90_000));
        // None: not a number; the item stays as it was.
        assert!(matches!(h.rewrite(0, b"n", |_| None::<(Vec<u8>, ())>), Err(Error::NotInteger)));
        assert_eq!(h.get(0, b"n").unwrap().as_deref(), Some(&b"9 "[..]));
        assert_eq!(h.meta(0, b"n").unwrap().unwrap().version, m.version);
    }

    #[test]
    fn ttl_changes_leave_a_large_value_in_place() {
        let store = Store::open(StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        let big = vec![b'v'; 100_000];
        h.set(0, b"big", &big, &SetOptions::default()).unwrap();
        let off = item_off(&h, b"big");
        assert_eq!(h.pttl(0, b"big").unwrap(), Ttl::Persistent);
        let at = crate::now_ms() + 100_000;
        assert!(h.expire_at(0, b"big", at, Default::default()).unwrap());
        assert!(matches!(h.pttl(0, b"big").unwrap(), Ttl::Ms(ms) if ms > 90_000));
        assert!(h.persist(0, b"big").unwrap());
        assert_eq!(h.pttl(0, b"big").unwrap(), Ttl::Persistent);
        assert!(h.touch(0, b"big", at).unwrap());
        assert_eq!(item_off(&h, b"big"), off, "a TTL change copied a 100 kB value");
        assert_eq!(h.get(0, b"big").unwrap().unwrap(), big);
        // A small item has no room for an expiry until it needs one: its first TTL rebuilds
        // it (and keeps it 56 bytes until then).
        h.set(0, b"small", b"v", &SetOptions::default()).unwrap();
        let off = item_off(&h, b"small");
        assert!(h.expire_at(0, b"small", at, Default::default()).unwrap());
        assert_ne!(item_off(&h, b"small"), off);
        let r = store.check().unwrap();
        assert!(r.ok(), "{:?}", r.problems);
    }

    #[test]
    fn touch_keeps_the_version_expire_and_invalidate_change_it() {
        let store = Store::open(StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        let version = |h: &Handle, k: &[u8]| h.meta(0, k).unwrap().unwrap().version;
        let at = crate::now_ms() + 100_000;
        // A small item is rebuilt for its first expiry; a large one changes in place.
        for (k, v) in [(&b"small"[..], vec![b'v'; 3]), (b"large", vec![b'v'; 5000])] {
            h.set(0, k, &v, &SetOptions::default()).unwrap();
            let v0 = version(&h, k);
            assert!(h.touch(0, k, at).unwrap());
            assert!(h.touch(0, k, 0).unwrap());
            assert_eq!(version(&h, k), v0, "touch changed the version of {k:?}");
            let r = h.touch_and_invalidate(0, k, Expiry::At(at), None).unwrap();
            assert_eq!(r.outcome, Outcome::Stored);
            let v1 = version(&h, k);
            assert_ne!(v1, v0);
            assert_eq!(r.version, v1, "touch_and_invalidate returns the version it made");
            assert!(h.expire_at(0, k, at + 1000, Default::default()).unwrap());
            assert_ne!(version(&h, k), v1, "EXPIRE must change the version (WATCH sees it)");
            assert_eq!(h.get(0, k).unwrap().unwrap(), v);
        }
        assert!(!h.touch(0, b"missing", at).unwrap());
        let r = store.check().unwrap();
        assert!(r.ok(), "{:?}", r.problems);
    }

    #[test]
    fn getbit_and_counters_on_long_strings() {
        let store = Store::open(StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        let mut v = vec![0u8; 10_000];
        v[5000] = 0b0010_0000;
        h.set(0, b"bits", &v, &SetOptions::default()).unwrap();
        assert_eq!(h.getbit(0, b"bits", 5000 * 8 + 2).unwrap(), 1);
        assert_eq!(h.getbit(0, b"bits", 5000 * 8 + 3).unwrap(), 0);
        assert_eq!(h.getbit(0, b"bits", 10_000 * 8).unwrap(), 0);
        h.set(0, b"n", b"-1234", &SetOptions::default()).unwrap();
        assert_eq!(h.getbit(0, b"n", 7).unwrap(), 1); // '-' is 0x2d
        assert_eq!(h.getbit(0, b"n", 6).unwrap(), 0);
        assert!(matches!(h.incr_by(0, b"bits", 1), Err(Error::NotInteger)));
        assert!(matches!(h.incr_by_float(0, b"bits", 1.0), Err(Error::NotFloat)));
        // 20 characters is still a number; 21 never is.
        h.set(0, b"n", b"-9223372036854775807", &SetOptions::default()).unwrap();
        assert_eq!(h.incr_by(0, b"n", -1).unwrap(), i64::MIN);
        h.set(0, b"n", b"000000000000000000001", &SetOptions::default()).unwrap();
        assert!(matches!(h.incr_by(0, b"n", 1), Err(Error::NotInteger)));
    }

    #[test]
    fn floats_print_like_redis() {
        assert_eq!(fmt_float(10.5), "10.5");
        assert_eq!(fmt_float(10.5 + 0.1), "10.6");
        assert_eq!(fmt_float(5200.0), "5200");
        assert_eq!(fmt_float(-3.0), "-3");
        assert_eq!(parse_float(b" 1"), None);
        assert_eq!(parse_float(b"nan"), None);
        assert_eq!(parse_float(b"1e3"), Some(1000.0));
    }
}
