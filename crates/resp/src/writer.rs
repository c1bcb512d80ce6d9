//! Reply (server → client) composition, and request encoding for clients.

use crate::num::{self, push_i64, push_u64, DoubleBuf};

/// The protocol version a connection speaks; chosen by `HELLO`. Every
/// [`Writer`] method maps RESP3-only types onto their RESP2 equivalents the
/// way Redis does when the connection is RESP2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// RESP2, the default for a new connection.
    #[default]
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

impl Protocol {
    /// The protocol for a `HELLO` version number, if supported.
    pub fn from_version(v: i64) -> Option<Self> {
        match v {
            2 => Some(Protocol::Resp2),
            3 => Some(Protocol::Resp3),
            _ => None,
        }
    }

    /// The `HELLO` version number (2 or 3).
    pub fn version(self) -> u8 {
        match self {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        }
    }
}

/// Preformatted replies that need no formatting work at all.
pub mod shared {
    /// `+OK`.
    pub const OK: &[u8] = b"+OK\r\n";
    /// `+PONG`.
    pub const PONG: &[u8] = b"+PONG\r\n";
    /// `+QUEUED`, the reply to a command inside `MULTI`.
    pub const QUEUED: &[u8] = b"+QUEUED\r\n";
    /// Integer 0.
    pub const CZERO: &[u8] = b":0\r\n";
    /// Integer 1.
    pub const CONE: &[u8] = b":1\r\n";
    /// Integer -1.
    pub const CNEGONE: &[u8] = b":-1\r\n";
    /// RESP2 null bulk string.
    pub const NULL_BULK: &[u8] = b"$-1\r\n";
    /// RESP2 null array.
    pub const NULL_ARRAY: &[u8] = b"*-1\r\n";
    /// RESP3 null.
    pub const NULL3: &[u8] = b"_\r\n";
    /// Empty array.
    pub const EMPTY_ARRAY: &[u8] = b"*0\r\n";
    /// Empty bulk string.
    pub const EMPTY_BULK: &[u8] = b"$0\r\n\r\n";
}

/// Appends replies to a `Vec<u8>` in the connection's [`Protocol`].
///
/// Aggregate methods ([`Writer::array`], [`Writer::map`], ...) only write
/// the header; the caller then writes exactly that many elements (for maps
/// and attributes, that many key/value *pairs*). Methods return `&mut Self`
/// so replies can be chained.
///
/// # Format
///
/// | method | RESP3 | RESP2 |
/// |---|---|---|
/// | [`null`](Writer::null) | `_` | `$-1` |
/// | [`null_array`](Writer::null_array) | `_` | `*-1` |
/// | [`map`](Writer::map) / [`attribute`](Writer::attribute) | `%n` / `\|n` | `*2n` |
/// | [`set`](Writer::set) / [`push`](Writer::push) | `~n` / `>n` | `*n` |
/// | [`double`](Writer::double) | `,1.5` | `$3\r\n1.5` |
/// | [`boolean`](Writer::boolean) | `#t` / `#f` | `:1` / `:0` |
/// | [`verbatim`](Writer::verbatim) | `=len\r\ntxt:...` | bulk of the text |
/// | [`big_number`](Writer::big_number) | `(digits` | bulk of the digits |
///
/// ```
/// use larder_resp::{Protocol, Writer};
/// let mut out = Vec::new();
/// Writer::new(&mut out, Protocol::Resp3).map(1).bulk(b"score").double(1.5);
/// assert_eq!(out, b"%1\r\n$5\r\nscore\r\n,1.5\r\n");
/// out.clear();
/// Writer::new(&mut out, Protocol::Resp2).map(1).bulk(b"score").double(1.5);
/// assert_eq!(out, b"*2\r\n$5\r\nscore\r\n$3\r\n1.5\r\n");
/// ```
#[derive(Debug)]
pub struct Writer<'a> {
    out: &'a mut Vec<u8>,
    proto: Protocol,
}

impl<'a> Writer<'a> {
    /// A writer appending to `out`.
    pub fn new(out: &'a mut Vec<u8>, proto: Protocol) -> Self {
        Writer { out, proto }
    }

    /// The protocol replies are written in.
    pub fn protocol(&self) -> Protocol {
        self.proto
    }

    /// Switches protocol (after `HELLO`).
    pub fn set_protocol(&mut self, proto: Protocol) {
        self.proto = proto;
    }

    /// The output buffer.
    pub fn buf(&mut self) -> &mut Vec<u8> {
        self.out
    }

    /// Appends preformatted protocol bytes as they are (e.g. [`shared`]).
    #[inline]
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.out.extend_from_slice(bytes);
        self
    }

    /// `+OK`.
    #[inline]
    pub fn ok(&mut self) -> &mut Self {
        self.raw(shared::OK)
    }

    /// Simple string `+s`. CR and LF in `s` become spaces, since a simple
    /// string cannot contain them and one would desynchronise the client.
    pub fn simple(&mut self, s: &[u8]) -> &mut Self {
        self.out.push(b'+');
        self.push_line_text(s);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// Error reply, with Redis's `addReplyError` convention: `msg` that
    /// starts with `-` carries its own code (`-WRONGTYPE Operation...`) and
    /// is sent as is; otherwise `-ERR ` is put in front. CR and LF become
    /// spaces.
    pub fn error(&mut self, msg: &[u8]) -> &mut Self {
        if msg.first() != Some(&b'-') {
            self.out.extend_from_slice(b"-ERR ");
        }
        self.push_line_text(msg);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// Error reply with an explicit code: `-<code> <msg>` (for example
    /// `code = b"WRONGTYPE"`).
    pub fn error_code(&mut self, code: &[u8], msg: &[u8]) -> &mut Self {
        self.out.push(b'-');
        self.push_line_text(code);
        self.out.push(b' ');
        self.push_line_text(msg);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// Integer `:n`.
    #[inline]
    pub fn integer(&mut self, n: i64) -> &mut Self {
        match n {
            0 => self.raw(shared::CZERO),
            1 => self.raw(shared::CONE),
            _ => {
                self.out.reserve(23);
                self.out.push(b':');
                push_i64(self.out, n);
                self.out.extend_from_slice(b"\r\n");
                self
            }
        }
    }

    /// The head of a bulk string of `len` bytes, `$len\r\n`, with room reserved for the
    /// data and its `\r\n`, for a caller that appends the data itself (a value copied
    /// straight out of the keyspace). The caller then ends it with `\r\n`.
    #[inline]
    pub fn bulk_header(out: &mut Vec<u8>, len: usize) {
        out.reserve(len + 24);
        if (10..100).contains(&len) {
            // Most values of a cache: two digits, no loop.
            out.extend_from_slice(&[b'$', b'0' + (len / 10) as u8, b'0' + (len % 10) as u8, b'\r', b'\n']);
        } else {
            out.push(b'$');
            push_u64(out, len as u64);
            out.extend_from_slice(b"\r\n");
        }
    }

    /// Bulk string `$len\r\ndata\r\n`.
    #[inline]
    pub fn bulk(&mut self, data: &[u8]) -> &mut Self {
        self.out.reserve(data.len() + 24);
        self.header(b'$', data.len() as u64);
        self.out.extend_from_slice(data);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    /// Bulk string holding the decimal form of `n` (Redis's
    /// `addReplyBulkLongLong`, e.g. `GET` of an integer-encoded value).
    pub fn bulk_integer(&mut self, n: i64) -> &mut Self {
        let mut stack = [0u8; 20];
        self.bulk(fmt_i64(&mut stack, n))
    }

    /// Null: `$-1` in RESP2 (a null bulk string), `_` in RESP3.
    #[inline]
    pub fn null(&mut self) -> &mut Self {
        match self.proto {
            Protocol::Resp2 => self.raw(shared::NULL_BULK),
            Protocol::Resp3 => self.raw(shared::NULL3),
        }
    }

    /// Null array: `*-1` in RESP2, `_` in RESP3 (`addReplyNullArray`).
    #[inline]
    pub fn null_array(&mut self) -> &mut Self {
        match self.proto {
            Protocol::Resp2 => self.raw(shared::NULL_ARRAY),
            Protocol::Resp3 => self.raw(shared::NULL3),
        }
    }

    /// Array header `*n`; `n` elements follow.
    #[inline]
    pub fn array(&mut self, n: usize) -> &mut Self {
        self.header(b'*', n as u64)
    }

    /// Map header: `%n` in RESP3, `*2n` in RESP2; `n` key/value pairs follow.
    pub fn map(&mut self, n: usize) -> &mut Self {
        match self.proto {
            Protocol::Resp2 => self.header(b'*', 2 * n as u64),
            Protocol::Resp3 => self.header(b'%', n as u64),
        }
    }

    /// Set header: `~n` in RESP3, `*n` in RESP2.
    pub fn set(&mut self, n: usize) -> &mut Self {
        match self.proto {
            Protocol::Resp2 => self.header(b'*', n as u64),
            Protocol::Resp3 => self.header(b'~', n as u64),
        }
    }

    /// Push header (pub/sub messages, invalidations): `>n` in RESP3, `*n`
    /// in RESP2.
    pub fn push(&mut self, n: usize) -> &mut Self {
        match self.proto {
            Protocol::Resp2 => self.header(b'*', n as u64),
            Protocol::Resp3 => self.header(b'>', n as u64),
        }
    }

    /// Attribute header `|n`: `n` key/value pairs, then the reply they
    /// annotate. RESP2 has no attributes; like Redis's deferred form, this
    /// writes `*2n` there, so the pairs arrive as an array in front of the
    /// reply. Servers should simply not send attributes to RESP2 clients.
    pub fn attribute(&mut self, n: usize) -> &mut Self {
        match self.proto {
            Protocol::Resp2 => self.header(b'*', 2 * n as u64),
            Protocol::Resp3 => self.header(b'|', n as u64),
        }
    }

    /// Double: `,<repr>` in RESP3, a bulk string of the same text in RESP2.
    /// The text is Redis 7.2's (see [`format_double`]).
    pub fn double(&mut self, d: f64) -> &mut Self {
        let s = num::format_double(d);
        match self.proto {
            Protocol::Resp2 => self.bulk(&s),
            Protocol::Resp3 => {
                self.out.push(b',');
                self.out.extend_from_slice(&s);
                self.out.extend_from_slice(b"\r\n");
                self
            }
        }
    }

    /// Boolean: `#t`/`#f` in RESP3, integer 1/0 in RESP2.
    pub fn boolean(&mut self, b: bool) -> &mut Self {
        match (self.proto, b) {
            (Protocol::Resp2, true) => self.raw(shared::CONE),
            (Protocol::Resp2, false) => self.raw(shared::CZERO),
            (Protocol::Resp3, true) => self.raw(b"#t\r\n"),
            (Protocol::Resp3, false) => self.raw(b"#f\r\n"),
        }
    }

    /// Verbatim string: `=len\r\nfmt:text` in RESP3 (`fmt` is three bytes,
    /// `txt` or `mkd`), a plain bulk string of `text` in RESP2.
    pub fn verbatim(&mut self, format: &[u8; 3], text: &[u8]) -> &mut Self {
        match self.proto {
            Protocol::Resp2 => self.bulk(text),
            Protocol::Resp3 => {
                self.out.reserve(text.len() + 28);
                self.header(b'=', text.len() as u64 + 4);
                self.out.extend_from_slice(format);
                self.out.push(b':');
                self.out.extend_from_slice(text);
                self.out.extend_from_slice(b"\r\n");
                self
            }
        }
    }

    /// Big number `(digits` in RESP3, a bulk string in RESP2. `digits` is
    /// written as given (an optional `-` then decimal digits).
    pub fn big_number(&mut self, digits: &[u8]) -> &mut Self {
        match self.proto {
            Protocol::Resp2 => self.bulk(digits),
            Protocol::Resp3 => {
                self.out.push(b'(');
                self.push_line_text(digits);
                self.out.extend_from_slice(b"\r\n");
                self
            }
        }
    }

    #[inline]
    fn header(&mut self, prefix: u8, n: u64) -> &mut Self {
        self.out.reserve(23);
        self.out.push(prefix);
        push_u64(self.out, n);
        self.out.extend_from_slice(b"\r\n");
        self
    }

    fn push_line_text(&mut self, s: &[u8]) {
        let start = self.out.len();
        self.out.extend_from_slice(s);
        for b in &mut self.out[start..] {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
    }
}

fn fmt_i64(buf: &mut [u8; 20], n: i64) -> &[u8] {
    let mut v = n.unsigned_abs();
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    if n < 0 {
        // |i64::MIN| has 19 digits, so there is always room for the sign.
        i -= 1;
        buf[i] = b'-';
    }
    &buf[i..]
}

/// Formats a double as Redis 7.2 sends it: the shortest text that parses
/// back to the same value (Redis's `fpconv_dtoa`), with `inf`, `-inf` and
/// `nan` for the special values.
///
/// ```
/// assert_eq!(larder_resp::format_double(0.1).as_str(), "0.1");
/// assert_eq!(larder_resp::format_double(1e21).as_str(), "1e+21");
/// ```
pub fn format_double(d: f64) -> DoubleBuf {
    num::format_double(d)
}

/// Appends a request encoded as a multibulk, the form clients send:
/// `*<n>\r\n` then `$<len>\r\n<arg>\r\n` per argument.
///
/// ```
/// let mut out = Vec::new();
/// larder_resp::write_command(&mut out, [&b"GET"[..], b"k"]);
/// assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
/// ```
pub fn write_command<I>(out: &mut Vec<u8>, args: I)
where
    I: IntoIterator,
    I::IntoIter: ExactSizeIterator,
    I::Item: AsRef<[u8]>,
{
    let args = args.into_iter();
    let mut w = Writer::new(out, Protocol::Resp2);
    w.array(args.len());
    for a in args {
        w.bulk(a.as_ref());
    }
}
