//! Reply composition: appends memcached's reply bytes to a `Vec<u8>`.
//!
//! Every function writes one complete reply element including `\r\n`.
//! Numbers are formatted without `fmt` and nothing is allocated beyond
//! growing `out`.
//!
//! ```
//! use larder_memcache::reply;
//! let mut out = Vec::new();
//! reply::value(&mut out, b"k", 5, b"hi", Some(7));
//! reply::end(&mut out);
//! reply::Meta::hd(&mut out).cas(7).opaque(b"xy").finish();
//! assert_eq!(out, b"VALUE k 5 2 7\r\nhi\r\nEND\r\nHD c7 Oxy\r\n");
//! ```

use crate::error::ErrorReply;
use crate::meta::{MetaFlags, MetaKey};
use crate::num::{push_i64, push_u64};

/// The fixed single-line replies of the classic protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `STORED`
    Stored,
    /// `NOT_STORED`
    NotStored,
    /// `EXISTS`
    Exists,
    /// `NOT_FOUND`
    NotFound,
    /// `DELETED`
    Deleted,
    /// `TOUCHED`
    Touched,
    /// `OK`
    Ok,
    /// `ERROR`
    Error,
    /// `END`
    End,
    /// `RESET` (`stats reset`)
    Reset,
}

impl Status {
    /// The line including `\r\n`.
    pub const fn line(self) -> &'static [u8] {
        match self {
            Status::Stored => b"STORED\r\n",
            Status::NotStored => b"NOT_STORED\r\n",
            Status::Exists => b"EXISTS\r\n",
            Status::NotFound => b"NOT_FOUND\r\n",
            Status::Deleted => b"DELETED\r\n",
            Status::Touched => b"TOUCHED\r\n",
            Status::Ok => b"OK\r\n",
            Status::Error => b"ERROR\r\n",
            Status::End => b"END\r\n",
            Status::Reset => b"RESET\r\n",
        }
    }
}

/// Appends a status line.
#[inline]
pub fn status(out: &mut Vec<u8>, s: Status) {
    out.extend_from_slice(s.line());
}

/// `STORED`
pub fn stored(out: &mut Vec<u8>) {
    status(out, Status::Stored)
}
/// `NOT_STORED`
pub fn not_stored(out: &mut Vec<u8>) {
    status(out, Status::NotStored)
}
/// `EXISTS`
pub fn exists(out: &mut Vec<u8>) {
    status(out, Status::Exists)
}
/// `NOT_FOUND`
pub fn not_found(out: &mut Vec<u8>) {
    status(out, Status::NotFound)
}
/// `DELETED`
pub fn deleted(out: &mut Vec<u8>) {
    status(out, Status::Deleted)
}
/// `TOUCHED`
pub fn touched(out: &mut Vec<u8>) {
    status(out, Status::Touched)
}
/// `OK`
pub fn ok(out: &mut Vec<u8>) {
    status(out, Status::Ok)
}
/// `ERROR`
pub fn error(out: &mut Vec<u8>) {
    status(out, Status::Error)
}
/// `END`, closing a get/gets/gat/gats or stats reply.
pub fn end(out: &mut Vec<u8>) {
    status(out, Status::End)
}

/// One parse-error reply line (see [`crate::Error::reply`]).
pub fn error_reply(out: &mut Vec<u8>, e: ErrorReply) {
    out.extend_from_slice(e.line());
}

/// `CLIENT_ERROR <msg>`. The message must not contain `\r\n`.
pub fn client_error(out: &mut Vec<u8>, msg: &str) {
    out.extend_from_slice(b"CLIENT_ERROR ");
    out.extend_from_slice(msg.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `SERVER_ERROR <msg>`, e.g. `out of memory storing object`.
pub fn server_error(out: &mut Vec<u8>, msg: &str) {
    out.extend_from_slice(b"SERVER_ERROR ");
    out.extend_from_slice(msg.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// The reply to a successful `incr`/`decr`: the new value.
pub fn number(out: &mut Vec<u8>, v: u64) {
    push_u64(out, v);
    out.extend_from_slice(b"\r\n");
}

/// `VERSION <version>`.
pub fn version(out: &mut Vec<u8>, version: &str) {
    out.extend_from_slice(b"VERSION ");
    out.extend_from_slice(version.as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// `STAT <name> <value>`; finish the list with [`end`].
pub fn stat(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// `STAT <name> <number>`.
pub fn stat_u64(out: &mut Vec<u8>, name: &str, value: u64) {
    out.extend_from_slice(b"STAT ");
    out.extend_from_slice(name.as_bytes());
    out.push(b' ');
    push_u64(out, value);
    out.extend_from_slice(b"\r\n");
}

/// One hit of a retrieval command:
/// `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n`. `cas` is `Some` for
/// `gets`/`gats`. Finish the whole reply with [`end`].
#[inline]
pub fn value(out: &mut Vec<u8>, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    value_header(out, key, flags, data.len(), cas);
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The `VALUE <key> <flags> <bytes>[ <cas>]\r\n` line of [`value`] alone, with room
/// reserved for the data, for a caller that appends the `len` bytes of data and then
/// `\r\n` itself (a value copied straight out of the keyspace).
#[inline]
pub fn value_header(out: &mut Vec<u8>, key: &[u8], flags: u32, len: usize, cas: Option<u64>) {
    out.reserve(6 + key.len() + 40 + len + 2);
    out.extend_from_slice(b"VALUE ");
    out.extend_from_slice(key);
    out.push(b' ');
    push_u64(out, u64::from(flags));
    out.push(b' ');
    push_u64(out, len as u64);
    if let Some(c) = cas {
        out.push(b' ');
        push_u64(out, c);
    }
    out.extend_from_slice(b"\r\n");
}

/// `MN`, the reply to `mn`.
pub fn mn(out: &mut Vec<u8>) {
    out.extend_from_slice(b"MN\r\n");
}

/// Item details for the `me` (meta debug) reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DebugInfo {
    /// Seconds until expiry, or -1 for never (memcached prints
    /// `current_time - exptime` here, i.e. negative for future expiry; the
    /// caller chooses the convention to report).
    pub exp: i64,
    /// Seconds since last access.
    pub la: u64,
    /// CAS value.
    pub cas: u64,
    /// Whether the item has been fetched.
    pub fetched: bool,
    /// Slab class id (any small number for a non-slab store).
    pub cls: u32,
    /// Total item size in bytes.
    pub size: u64,
}

/// `ME <key> exp=<n> la=<n> cas=<n> fetch=<yes|no> cls=<n> size=<n>`. A
/// binary key is printed base64-encoded (without a `b` flag). On a miss
/// send `EN` ([`Meta::en`]).
pub fn me(out: &mut Vec<u8>, key: &[u8], binary: bool, info: &DebugInfo) {
    out.extend_from_slice(b"ME ");
    if binary {
        crate::base64::encode(key, out);
    } else {
        out.extend_from_slice(key);
    }
    out.extend_from_slice(b" exp=");
    push_i64(out, info.exp);
    out.extend_from_slice(b" la=");
    push_u64(out, info.la);
    out.extend_from_slice(b" cas=");
    push_u64(out, info.cas);
    out.extend_from_slice(if info.fetched { b" fetch=yes" } else { b" fetch=no" });
    out.extend_from_slice(b" cls=");
    push_u64(out, u64::from(info.cls));
    out.extend_from_slice(b" size=");
    push_u64(out, info.size);
    out.extend_from_slice(b"\r\n");
}

/// Builder for one meta reply line: a status code, then return flags,
/// then `\r\n` (and the value for `VA`).
///
/// memcached emits return flags in the order the request listed them
/// (walk [`MetaFlags::tokens`]); `W`, `X`, `Z` come after the others, `Z`
/// before `X` before `W`. Which flags each status carries:
/// * `mg` hit: `s t c f l h O k` as requested; miss `EN` only `O k`.
/// * `ms`: `O k c` (`c` is the CAS the item got).
/// * `md`: `O k`.
/// * `ma` with an item: `c t O k` (value after the line with `v`);
///   `NF`/`EX`/`NS`: `O k`.
#[must_use = "call finish() or finish_value() to terminate the line"]
pub struct Meta<'o> {
    out: &'o mut Vec<u8>,
}

impl<'o> Meta<'o> {
    fn code(out: &'o mut Vec<u8>, code: &[u8]) -> Self {
        out.extend_from_slice(code);
        Meta { out }
    }

    /// `HD`: success without value.
    pub fn hd(out: &'o mut Vec<u8>) -> Self {
        Meta::code(out, b"HD")
    }
    /// `VA <size>`: success with a value of `size` bytes; end with
    /// [`Meta::finish_value`].
    pub fn va(out: &'o mut Vec<u8>, size: usize) -> Self {
        out.extend_from_slice(b"VA ");
        push_u64(out, size as u64);
        Meta { out }
    }
    /// `EN`: miss (mg, me).
    pub fn en(out: &'o mut Vec<u8>) -> Self {
        Meta::code(out, b"EN")
    }
    /// `NF`: not found (md, ma, ms in replace/append modes).
    pub fn nf(out: &'o mut Vec<u8>) -> Self {
        Meta::code(out, b"NF")
    }
    /// `NS`: not stored (ms add/replace/append/prepend conditions).
    pub fn ns(out: &'o mut Vec<u8>) -> Self {
        Meta::code(out, b"NS")
    }
    /// `EX`: CAS mismatch.
    pub fn ex(out: &'o mut Vec<u8>) -> Self {
        Meta::code(out, b"EX")
    }

    fn num(self, flag: u8, v: u64) -> Self {
        self.out.push(b' ');
        self.out.push(flag);
        push_u64(self.out, v);
        self
    }

    /// ` f<flags>`: client flags.
    pub fn flags(self, f: u32) -> Self {
        self.num(b'f', u64::from(f))
    }
    /// ` c<cas>`.
    pub fn cas(self, c: u64) -> Self {
        self.num(b'c', c)
    }
    /// ` t<ttl>`: remaining seconds, or `t-1` for no expiry (pass -1).
    pub fn ttl(self, ttl: i64) -> Self {
        self.out.extend_from_slice(b" t");
        push_i64(self.out, ttl);
        self
    }
    /// ` s<size>`: value size.
    pub fn size(self, s: usize) -> Self {
        self.num(b's', s as u64)
    }
    /// ` l<secs>`: seconds since last access.
    pub fn last_access(self, secs: u64) -> Self {
        self.num(b'l', secs)
    }
    /// ` h0`/` h1`: fetched before.
    pub fn hit(self, fetched: bool) -> Self {
        self.out.extend_from_slice(if fetched { b" h1" } else { b" h0" });
        self
    }
    /// ` O<opaque>`: pass the token value without its `O`.
    pub fn opaque(self, opaque: &[u8]) -> Self {
        self.out.extend_from_slice(b" O");
        self.out.extend_from_slice(opaque);
        self
    }
    /// ` k<key>`; binary keys are base64-encoded and followed by ` b`.
    pub fn key(self, key: &[u8], binary: bool) -> Self {
        self.out.extend_from_slice(b" k");
        if binary {
            crate::base64::encode(key, self.out);
            self.out.extend_from_slice(b" b");
        } else {
            self.out.extend_from_slice(key);
        }
        self
    }
    /// ` W`: the client won the right to recache.
    pub fn won(self) -> Self {
        self.out.extend_from_slice(b" W");
        self
    }
    /// ` X`: the item is stale.
    pub fn stale(self) -> Self {
        self.out.extend_from_slice(b" X");
        self
    }
    /// ` Z`: a win token was already sent to another client.
    pub fn win_sent(self) -> Self {
        self.out.extend_from_slice(b" Z");
        self
    }

    /// Echoes `O` and `k` in request order: the whole flag list of `EN`,
    /// `NF`, `NS`, `EX` and of `md`'s `HD`.
    pub fn echo_opaque_key(mut self, flags: &MetaFlags<'_>, key: &MetaKey<'_>) -> Self {
        for tok in flags.tokens() {
            self = match tok[0] {
                b'O' => self.opaque(&tok[1..]),
                b'k' => self.key(key.bytes(), key.is_binary()),
                _ => self,
            };
        }
        self
    }

    /// Ends the line.
    pub fn finish(self) {
        self.out.extend_from_slice(b"\r\n");
    }

    /// Ends a `VA` line and appends the value block.
    pub fn finish_value(self, data: &[u8]) {
        self.out.reserve(data.len() + 4);
        self.out.extend_from_slice(b"\r\n");
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse, Limits, Request};

    fn w(f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    #[test]
    fn classic_lines() {
        assert_eq!(w(stored), b"STORED\r\n");
        assert_eq!(w(not_stored), b"NOT_STORED\r\n");
        assert_eq!(w(exists), b"EXISTS\r\n");
        assert_eq!(w(not_found), b"NOT_FOUND\r\n");
        assert_eq!(w(deleted), b"DELETED\r\n");
        assert_eq!(w(touched), b"TOUCHED\r\n");
        assert_eq!(w(ok), b"OK\r\n");
        assert_eq!(w(error), b"ERROR\r\n");
        assert_eq!(w(end), b"END\r\n");
        assert_eq!(w(|o| status(o, Status::Reset)), b"RESET\r\n");
        assert_eq!(w(|o| client_error(o, "bad data chunk")), b"CLIENT_ERROR bad data chunk\r\n");
        assert_eq!(
            w(|o| server_error(o, "out of memory storing object")),
            b"SERVER_ERROR out of memory storing object\r\n"
        );
        assert_eq!(w(|o| error_reply(o, ErrorReply::InvalidDelta)), b"CLIENT_ERROR invalid numeric delta argument\r\n");
        assert_eq!(w(|o| number(o, 0)), b"0\r\n");
        assert_eq!(w(|o| number(o, u64::MAX)), b"18446744073709551615\r\n");
        assert_eq!(w(|o| version(o, "1.6.21")), b"VERSION 1.6.21\r\n");
        assert_eq!(w(|o| stat(o, "pid", b"42")), b"STAT pid 42\r\n");
        assert_eq!(w(|o| stat_u64(o, "curr_items", 7)), b"STAT curr_items 7\r\n");
    }

    #[test]
    fn values() {
        assert_eq!(w(|o| value(o, b"foo", 0, b"bar", None)), b"VALUE foo 0 3\r\nbar\r\n");
        assert_eq!(w(|o| value(o, b"foo", u32::MAX, b"", Some(12))), b"VALUE foo 4294967295 0 12\r\n\r\n");
        let mut out = Vec::new();
        value(&mut out, b"a", 1, b"x\r\ny", Some(1));
        value(&mut out, b"b", 2, b"z", Some(2));
        end(&mut out);
        assert_eq!(out, b"VALUE a 1 4 1\r\nx\r\ny\r\nVALUE b 2 1 2\r\nz\r\nEND\r\n");
    }

    #[test]
    fn meta_lines() {
        assert_eq!(w(|o| Meta::hd(o).finish()), b"HD\r\n");
        assert_eq!(w(|o| Meta::en(o).finish()), b"EN\r\n");
        assert_eq!(w(|o| Meta::nf(o).finish()), b"NF\r\n");
        assert_eq!(w(|o| Meta::ns(o).finish()), b"NS\r\n");
        assert_eq!(w(|o| Meta::ex(o).finish()), b"EX\r\n");
        assert_eq!(w(mn), b"MN\r\n");
        assert_eq!(
            w(|o| Meta::va(o, 3)
                .flags(5)
                .cas(9)
                .ttl(-1)
                .size(3)
                .last_access(4)
                .hit(true)
                .hit(false)
                .opaque(b"op")
                .key(b"foo", false)
                .win_sent()
                .stale()
                .won()
                .finish_value(b"bar")),
            b"VA 3 f5 c9 t-1 s3 l4 h1 h0 Oop kfoo Z X W\r\nbar\r\n"
        );
        assert_eq!(w(|o| Meta::hd(o).key(b"foo", true).finish()), b"HD kZm9v b\r\n");
    }

    #[test]
    fn echo_in_request_order() {
        let l = Limits::default();
        let (req, _) = parse(b"mg Zm9v b v k Oxyz q\r\n", &l).unwrap().unwrap();
        let Request::MetaGet { key, flags } = req else { panic!() };
        assert_eq!(w(|o| Meta::en(o).echo_opaque_key(&flags, &key).finish()), b"EN kZm9v b Oxyz\r\n");
        let (req, _) = parse(b"md foo Oa k\r\n", &l).unwrap().unwrap();
        let Request::MetaDelete { key, flags } = req else { panic!() };
        assert_eq!(w(|o| Meta::nf(o).echo_opaque_key(&flags, &key).finish()), b"NF Oa kfoo\r\n");
    }

    #[test]
    fn meta_debug() {
        let info = DebugInfo { exp: -1, la: 2, cas: 3, fetched: false, cls: 1, size: 70 };
        assert_eq!(w(|o| me(o, b"foo", false, &info)), b"ME foo exp=-1 la=2 cas=3 fetch=no cls=1 size=70\r\n");
        let info = DebugInfo { fetched: true, ..info };
        assert_eq!(w(|o| me(o, b"foo", true, &info)), b"ME Zm9v exp=-1 la=2 cas=3 fetch=yes cls=1 size=70\r\n");
    }
}
