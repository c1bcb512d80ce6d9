//! Redis's DUMP payload, as `DUMP` writes it and `RESTORE` reads it (Redis's `cluster.c`
//! `createDumpPayload` / `verifyDumpPayload` and `rdb.c` `rdbSaveObject` /
//! `rdbLoadObject`), without any storage: a [`Value`] in, bytes out, and back.
//!
//! # Format
//! ```text
//! type u8 | the value, RDB-serialized | RDB version u16 LE | CRC-64 (Jones) u64 LE
//! ```
//! The checksum covers everything before it. A version above [`RDB_VERSION`] (Redis
//! 7.0's) is refused; older ones are read.
//!
//! [`decode`] reads every encoding Redis 7.0 (and older versions) writes: strings plain,
//! as integers or LZF-compressed; lists as quicklists of listpacks or ziplists, ziplists or
//! plain; sets as intsets or plain; hashes as listpacks, ziplists, zipmaps or plain;
//! sorted sets as listpacks, ziplists or plain with binary or text scores. Module values
//! and streams are refused ("Bad data format"), as Larder has neither.
//!
//! Nothing in a payload is trusted: every length is checked against the bytes left before
//! anything is allocated for it, duplicates and empty collections are refused, and the
//! parser never panics (see the fuzz target in `fuzz/dump`). What a payload decodes to is
//! bounded by its size: LZF expands at most 88 times (a compressed listpack of empty
//! strings is the worst case, each entry then an empty `Vec` here), as it would in Redis.
//!
//! [`encode`] writes the plain forms (type 0 with integer encoding and LZF compression where
//! Redis would use them, 1, 2, 4, 5), which Redis 7.0 reads and re-encodes as listpacks or
//! intsets itself where small (servers before 7.0 refuse the version-10 footer, as they
//! refuse Redis 7.0's own payloads).

mod lzf;
mod packed;

use std::collections::HashSet;

pub use lzf::decompress as lzf_decompress;

/// The RDB version Redis 7.0 writes (and the newest it reads).
pub const RDB_VERSION: u16 = 10;

const CRC: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);

/// A value as a DUMP payload carries it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    ZSet(Vec<(Vec<u8>, f64)>),
}

/// Why a payload was refused, as RESTORE tells the two apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// "ERR DUMP payload version or checksum are wrong".
    VersionOrChecksum,
    /// "ERR Bad data format".
    BadFormat,
}

// RDB object types (`rdb.h`).
const T_STRING: u8 = 0;
const T_LIST: u8 = 1;
const T_SET: u8 = 2;
const T_ZSET: u8 = 3;
const T_HASH: u8 = 4;
const T_ZSET_2: u8 = 5;
const T_HASH_ZIPMAP: u8 = 9;
const T_LIST_ZIPLIST: u8 = 10;
const T_SET_INTSET: u8 = 11;
const T_ZSET_ZIPLIST: u8 = 12;
const T_HASH_ZIPLIST: u8 = 13;
const T_LIST_QUICKLIST: u8 = 14;
const T_HASH_LISTPACK: u8 = 16;
const T_ZSET_LISTPACK: u8 = 17;
const T_LIST_QUICKLIST_2: u8 = 18;

/// The CRC-64 Redis puts in its payloads and RDB files (`crc64(0, p, len)`).
pub fn crc64(bytes: &[u8]) -> u64 {
    CRC.checksum(bytes)
}

/// Redis's `verifyDumpPayload`: at least the footer, a version Redis 7.0 reads, and a
/// checksum that matches.
pub fn verify(payload: &[u8]) -> Result<(), Error> {
    if payload.len() < 10 {
        return Err(Error::VersionOrChecksum);
    }
    let footer = &payload[payload.len() - 10..];
    let version = u16::from_le_bytes([footer[0], footer[1]]);
    let crc = u64::from_le_bytes(footer[2..].try_into().expect("8 bytes"));
    if version > RDB_VERSION || crc64(&payload[..payload.len() - 8]) != crc {
        return Err(Error::VersionOrChecksum);
    }
    Ok(())
}

/// Checks the footer ([`verify`]) and reads the value.
pub fn decode(payload: &[u8]) -> Result<Value, Error> {
    verify(payload)?;
    decode_body(&payload[..payload.len() - 10])
}

/// Reads the value of a payload whose footer was checked (and taken off). Bytes after the
/// value are ignored, as Redis ignores them.
pub fn decode_body(body: &[u8]) -> Result<Value, Error> {
    let mut r = Reader { b: body, at: 0 };
    r.value().ok_or(Error::BadFormat)
}

/// The payload of `v`, footer included.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut w = Vec::new();
    match v {
        Value::String(s) => {
            w.push(T_STRING);
            put_string(&mut w, s);
        }
        Value::List(items) | Value::Set(items) => {
            w.push(if matches!(v, Value::List(_)) { T_LIST } else { T_SET });
            put_len(&mut w, items.len() as u64);
            for s in items {
                put_string(&mut w, s);
            }
        }
        Value::Hash(pairs) => {
            w.push(T_HASH);
            put_len(&mut w, pairs.len() as u64);
            for (f, v) in pairs {
                put_string(&mut w, f);
                put_string(&mut w, v);
            }
        }
        Value::ZSet(pairs) => {
            w.push(T_ZSET_2);
            put_len(&mut w, pairs.len() as u64);
            for (m, s) in pairs {
                put_string(&mut w, m);
                w.extend_from_slice(&s.to_le_bytes());
            }
        }
    }
    w.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&w);
    w.extend_from_slice(&crc.to_le_bytes());
    w
}

/// Redis's `rdbSaveLen`.
fn put_len(w: &mut Vec<u8>, len: u64) {
    if len < 1 << 6 {
        w.push(len as u8);
    } else if len < 1 << 14 {
        w.extend_from_slice(&[0x40 | (len >> 8) as u8, len as u8]);
    } else if len <= u32::MAX as u64 {
        w.push(0x80);
        w.extend_from_slice(&(len as u32).to_be_bytes());
    } else {
        w.push(0x81);
        w.extend_from_slice(&len.to_be_bytes());
    }
}

/// Redis's `rdbSaveRawString` with `rdbcompression yes`: a canonical integer that fits in
/// 32 bits as one (`rdbTryIntegerEncoding`); over 20 bytes LZF-compressed if that saves at
/// least 4 bytes; anything else as length and bytes.
fn put_string(w: &mut Vec<u8>, s: &[u8]) {
    if s.len() <= 11 {
        if let Some(v) = canonical_i64(s) {
            if let Ok(v) = i8::try_from(v) {
                w.extend_from_slice(&[0xc0, v as u8]);
                return;
            } else if let Ok(v) = i16::try_from(v) {
                w.push(0xc1);
                w.extend_from_slice(&v.to_le_bytes());
                return;
            } else if let Ok(v) = i32::try_from(v) {
                w.push(0xc2);
                w.extend_from_slice(&v.to_le_bytes());
                return;
            }
        }
    }
    if s.len() > 20 {
        if let Some(c) = lzf::compress(s, s.len() - 4) {
            w.push(0xc3);
            put_len(w, c.len() as u64);
            put_len(w, s.len() as u64);
            w.extend_from_slice(&c);
            return;
        }
    }
    put_len(w, s.len() as u64);
    w.extend_from_slice(s);
}

/// Redis's `string2ll`: what it would store as an integer and print back the same.
fn canonical_i64(s: &[u8]) -> Option<i64> {
    let t = std::str::from_utf8(s).ok()?;
    let v: i64 = t.parse().ok()?;
    (v.to_string() == t).then_some(v)
}

/// Redis's `zzlStrtod` / `strtod` on a score held as text: the longest prefix that reads
/// as a float (0 if none).
fn text_score(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?.trim_start();
    (1..=t.len()).rev().filter(|&n| t.is_char_boundary(n)).find_map(|n| t[..n].parse::<f64>().ok()).or(Some(0.0))
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

/// A length or a string's special encoding (`rdbLoadLenByRef`).
enum Len {
    Plain(u64),
    Encoded(u8),
}

impl<'a> Reader<'a> {
    fn left(&self) -> usize {
        self.b.len() - self.at
    }

    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.bytes(1)?[0])
    }

    fn len_or_enc(&mut self) -> Option<Len> {
        let b = self.byte()?;
        Some(match b >> 6 {
            0 => Len::Plain((b & 0x3f) as u64),
            1 => Len::Plain(((b as u64 & 0x3f) << 8) | self.byte()? as u64),
            3 => Len::Encoded(b & 0x3f),
            _ if b == 0x80 => Len::Plain(u32::from_be_bytes(self.bytes(4)?.try_into().ok()?) as u64),
            _ if b == 0x81 => Len::Plain(u64::from_be_bytes(self.bytes(8)?.try_into().ok()?)),
            _ => return None,
        })
    }

    fn len(&mut self) -> Option<u64> {
        match self.len_or_enc()? {
            Len::Plain(n) => Some(n),
            Len::Encoded(_) => None,
        }
    }

    /// A count of things each at least `min` bytes long: one the bytes left cannot hold is
    /// refused before anything is allocated for it.
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = self.len()?;
        (n <= (self.left() / min) as u64).then_some(n as usize)
    }

    /// `rdbGenericLoadStringObject`.
    fn string(&mut self) -> Option<Vec<u8>> {
        match self.len_or_enc()? {
            Len::Plain(n) => Some(self.bytes(usize::try_from(n).ok()?)?.to_vec()),
            Len::Encoded(0) => Some((self.byte()? as i8).to_string().into_bytes()),
            Len::Encoded(1) => Some(i16::from_le_bytes(self.bytes(2)?.try_into().ok()?).to_string().into_bytes()),
            Len::Encoded(2) => Some(i32::from_le_bytes(self.bytes(4)?.try_into().ok()?).to_string().into_bytes()),
            Len::Encoded(3) => {
                let clen = usize::try_from(self.len()?).ok()?;
                let len = usize::try_from(self.len()?).ok()?;
                lzf::decompress(self.bytes(clen)?, len)
            }
            Len::Encoded(_) => None,
        }
    }

    fn value(&mut self) -> Option<Value> {
        let ty = self.byte()?;
        let v = match ty {
            T_STRING => Value::String(self.string()?),
            T_LIST => {
                let n = self.count(1)?;
                Value::List((0..n).map(|_| self.string()).collect::<Option<_>>()?)
            }
            T_SET => {
                let n = self.count(1)?;
                Value::Set(unique((0..n).map(|_| self.string()).collect::<Option<_>>()?)?)
            }
            T_ZSET | T_ZSET_2 => {
                let n = self.count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    let m = self.string()?;
                    let s = if ty == T_ZSET_2 {
                        f64::from_le_bytes(self.bytes(8)?.try_into().ok()?)
                    } else {
                        self.text_double()?
                    };
                    pairs.push((m, s));
                }
                zset(pairs)?
            }
            T_HASH => {
                let n = self.count(2)?;
                let mut pairs = Vec::with_capacity(n);
                for _ in 0..n {
                    pairs.push((self.string()?, self.string()?));
                }
                hash(pairs)?
            }
            T_LIST_QUICKLIST | T_LIST_QUICKLIST_2 => {
                let n = self.count(1)?;
                let mut items = Vec::new();
                for _ in 0..n {
                    let plain = if ty == T_LIST_QUICKLIST_2 {
                        match self.len()? {
                            1 => true,
                            2 => false,
                            _ => return None,
                        }
                    } else {
                        false
                    };
                    let node = self.string()?;
                    if node.is_empty() {
                        return None;
                    }
                    if plain {
                        items.push(node);
                    } else if ty == T_LIST_QUICKLIST_2 {
                        items.extend(packed::listpack(&node)?);
                    } else {
                        items.extend(packed::ziplist(&node)?);
                    }
                }
                Value::List(items)
            }
            T_LIST_ZIPLIST => Value::List(packed::ziplist(&self.string()?)?),
            T_SET_INTSET => Value::Set(packed::intset(&self.string()?)?),
            T_HASH_ZIPMAP | T_HASH_ZIPLIST | T_HASH_LISTPACK => {
                let blob = self.string()?;
                let flat = match ty {
                    T_HASH_ZIPMAP => packed::zipmap(&blob)?,
                    T_HASH_ZIPLIST => packed::ziplist(&blob)?,
                    _ => packed::listpack(&blob)?,
                };
                hash(pairs_of(flat)?)?
            }
            T_ZSET_ZIPLIST | T_ZSET_LISTPACK => {
                let blob = self.string()?;
                let flat = if ty == T_ZSET_ZIPLIST { packed::ziplist(&blob)? } else { packed::listpack(&blob)? };
                let pairs =
                    pairs_of(flat)?.into_iter().map(|(m, s)| Some((m, text_score(&s)?))).collect::<Option<_>>()?;
                zset(pairs)?
            }
            // Modules (6, 7) and streams (15, 19): Larder has neither.
            _ => return None,
        };
        let empty = match &v {
            Value::String(_) => false,
            Value::List(x) | Value::Set(x) => x.is_empty(),
            Value::Hash(x) => x.is_empty(),
            Value::ZSet(x) => x.is_empty(),
        };
        (!empty).then_some(v)
    }

    /// `rdbLoadDoubleValue`: a length byte (253 NaN, 254 +inf, 255 -inf) and that much text.
    fn text_double(&mut self) -> Option<f64> {
        match self.byte()? {
            255 => Some(f64::NEG_INFINITY),
            254 => Some(f64::INFINITY),
            253 => Some(f64::NAN),
            n => {
                let t = std::str::from_utf8(self.bytes(n as usize)?).ok()?;
                t.trim().parse().ok()
            }
        }
    }
}

/// Fields and values (or members and scores) taken alternately from a flat list.
fn pairs_of(flat: Vec<Vec<u8>>) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    if !flat.len().is_multiple_of(2) {
        return None;
    }
    let mut it = flat.into_iter();
    let mut out = Vec::with_capacity(it.len() / 2);
    while let (Some(a), Some(b)) = (it.next(), it.next()) {
        out.push((a, b));
    }
    Some(out)
}

fn unique(items: Vec<Vec<u8>>) -> Option<Vec<Vec<u8>>> {
    let mut seen = HashSet::with_capacity(items.len());
    items.iter().all(|m| seen.insert(m.as_slice())).then_some(())?;
    Some(items)
}

fn hash(pairs: Vec<(Vec<u8>, Vec<u8>)>) -> Option<Value> {
    let mut seen = HashSet::with_capacity(pairs.len());
    pairs.iter().all(|(f, _)| seen.insert(f.as_slice())).then_some(())?;
    Some(Value::Hash(pairs))
}

/// A sorted set: no NaN score ("Zset with NAN score detected"), no member twice.
fn zset(pairs: Vec<(Vec<u8>, f64)>) -> Option<Value> {
    let mut seen = HashSet::with_capacity(pairs.len());
    pairs.iter().all(|(m, s)| !s.is_nan() && seen.insert(m.as_slice())).then_some(())?;
    Some(Value::ZSet(pairs))
}

#[cfg(test)]
mod tests;
