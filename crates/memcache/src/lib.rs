//! memcached text and meta protocol: request parsing and reply composition.
//!
//! This crate owns no storage. [`parse`] turns the bytes at the front of a
//! connection's read buffer into one typed [`Request`] (borrowing keys and
//! data from the buffer), and the [`reply`] module appends memcached's reply
//! lines to a `Vec<u8>`. Behaviour mirrors memcached 1.6's `proto_text.c`,
//! including its exact error strings and its quirks, because clients and
//! test suites written against memcached depend on them.
//!
//! # Wire format in brief
//!
//! Every request starts with a command line ending in `\n` (a `\r` before it
//! is stripped). Tokens are separated by single or repeated spaces (only
//! `' '`; tabs are part of a token). A NUL byte ends the line early, because
//! memcached tokenizes with `strlen`.
//!
//! ```text
//! set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]\r\n<data>\r\n
//! cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]\r\n<data>\r\n
//! get|gets <key>+\r\n              gat|gats <exptime> <key>*\r\n
//! incr|decr <key> <delta> [noreply]\r\n
//! touch <key> <exptime> [noreply]\r\n
//! delete <key> [0] [noreply]\r\n
//! flush_all [delay] [noreply]\r\n   verbosity <n> [noreply]\r\n
//! version\r\n  quit\r\n  stats [args]*\r\n
//! mn\r\n  me <key> [b]\r\n
//! mg <key> <flag>*\r\n             md <key> <flag>*\r\n
//! ma <key> <flag>*\r\n             ms <key> <datalen> <flag>*\r\n<data>\r\n
//! ```
//!
//! Replies are single lines (`STORED`, `NOT_FOUND`, `HD c123`, ...) except
//! value blocks: `VALUE <key> <flags> <bytes>[ <cas>]\r\n<data>\r\n` repeated
//! and closed by `END\r\n`, and `VA <size> <flag>*\r\n<data>\r\n` for meta.
//!
//! # Using the parser
//!
//! ```
//! use larder_memcache::{parse, Limits, Request};
//! let limits = Limits::default();
//! let buf = b"set k 5 0 2\r\nhi\r\nget k\r\n";
//! let (req, used) = parse(buf, &limits).unwrap().unwrap();
//! assert!(matches!(req, Request::Store(ref s) if s.data == b"hi"));
//! let (req, _) = parse(&buf[used..], &limits).unwrap().unwrap();
//! assert!(matches!(req, Request::Get { .. }));
//! // A prefix is just incomplete.
//! assert!(parse(b"set k 5 0 2\r\nh", &limits).unwrap().is_none());
//! ```
//!
//! On `Err(e)` the connection deletes [`Error::unlink`]'s key (if any), writes
//! [`Error::reply`] (if any), drops [`Error::consumed`] bytes, then discards
//! [`Error::skip`] further bytes as they arrive, or closes if
//! [`Error::closes`]. A server that wants memcached's verdict on long lines
//! parses through [`parse_window`], which sees the bytes through memcached's
//! 16 KiB read buffer.

mod base64;
mod error;
mod meta;
mod num;
mod parse;
pub mod reply;

pub use error::{Error, ErrorReply, KeyAt};
pub use meta::{ArithMode, MetaFlags, MetaKey, SetMode};
pub use num::{counter_value, parse_counter, parse_u32};
pub use parse::{
    advance_window, is_long_multiget, parse, parse_window, Keys, Request, RetrieveCommand, Store, StoreCommand, Tokens,
};

/// Parser limits. The defaults are memcached 1.6's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest item storage commands may make (`-I`, default 1 MiB), counted
    /// as memcached counts it: [`item_size`] of the key, flags and value, so
    /// with a 3-byte key and flags 0 the largest value is 1,048,514 bytes.
    pub item_size_max: usize,
    /// Longest key (`KEY_MAX_LENGTH`, 250). For meta commands with the `b`
    /// flag this applies to the base64 text, as in memcached.
    pub max_key_len: usize,
    /// If more than this many bytes are buffered without a `\n`, memcached
    /// closes the connection unless the buffer starts (after at most 100
    /// spaces) with `get ` or `gets `: multigets may be arbitrarily long.
    /// memcached uses 2048 here.
    pub max_unterminated_line: usize,
    /// memcached's read buffer (`READ_BUFFER_SIZE`, 16384): how much of a
    /// connection's input it holds at once, which decides when a long line
    /// closes the connection; see [`parse_window`].
    pub read_buffer_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { item_size_max: 1024 * 1024, max_key_len: 250, max_unterminated_line: 2048, read_buffer_size: 16384 }
    }
}

/// memcached's item header (`sizeof(item)` on a 64-bit build), which
/// counts against `item_size_max`.
pub const ITEM_HEADER: usize = 48;

/// The CAS value memcached stores after the header of every item (all but
/// `-C` builds; Larder always has CAS values).
pub const ITEM_CAS: usize = 8;

/// The size memcached 1.6 gives an item, and compares with `item_size_max`
/// (`-I`) when it allocates one (`do_item_alloc`: `item_make_header` plus the
/// CAS): the header, the CAS, the key and its NUL, 4 bytes of client flags
/// unless they are 0, and the value with its `\r\n`. A `set`/`add`/.../`ms`
/// whose item would be larger is answered `SERVER_ERROR object too large for
/// cache`; an append or prepend whose result would be is `NOT_STORED`.
/// (`me`'s `size=` is this number too.)
///
/// Checked against memcached 1.6.18 with its defaults (`-I 1m`, CAS on): a
/// 1-byte key takes values up to 1,048,516 bytes, a 3-byte key 1,048,514,
/// a 250-byte key 1,048,267, each 4 fewer with nonzero flags; `-I 2m` moves
/// the boundary by exactly 1 MiB. (Under `-C`, which Larder has no
/// counterpart of, memcached allows 8 bytes more.)
///
/// ```
/// use larder_memcache::item_size;
/// assert_eq!(item_size(3, 0, 1_048_514), 1024 * 1024);
/// assert_eq!(item_size(3, 1, 1_048_510), 1024 * 1024);
/// ```
pub const fn item_size(nkey: usize, flags: u32, nbytes: usize) -> usize {
    let suffix = if flags == 0 { 0 } else { 4 };
    ITEM_HEADER + ITEM_CAS + nkey + 1 + suffix + nbytes + 2
}

/// memcached's boundary between relative and absolute expiration times:
/// 30 days in seconds (`REALTIME_MAXDELTA`).
pub const REALTIME_MAXDELTA: i64 = 60 * 60 * 24 * 30;

/// What a client-supplied exptime means, by memcached's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// `0`: the item never expires.
    Never,
    /// Negative: the item is expired immediately (memcached maps negative
    /// values to an absolute time in the past). Storing such an item is not
    /// an error; it simply cannot be read back.
    Expired,
    /// `1..=2592000`: this many seconds from now.
    Relative(u32),
    /// `> 2592000`: an absolute unix timestamp in seconds. A timestamp
    /// already in the past means "expired"; the caller compares with its
    /// clock.
    Absolute(u64),
}

impl Expiry {
    /// Classifies an exptime as memcached's `realtime()` does.
    ///
    /// ```
    /// use larder_memcache::Expiry;
    /// assert_eq!(Expiry::from_exptime(0), Expiry::Never);
    /// assert_eq!(Expiry::from_exptime(-1), Expiry::Expired);
    /// assert_eq!(Expiry::from_exptime(2_592_000), Expiry::Relative(2_592_000));
    /// assert_eq!(Expiry::from_exptime(2_592_001), Expiry::Absolute(2_592_001));
    /// ```
    pub fn from_exptime(exptime: i64) -> Expiry {
        if exptime == 0 {
            Expiry::Never
        } else if exptime < 0 {
            Expiry::Expired
        } else if exptime <= REALTIME_MAXDELTA {
            Expiry::Relative(exptime as u32)
        } else {
            Expiry::Absolute(exptime as u64)
        }
    }

    /// The absolute expiry in unix seconds given the current unix time, or
    /// `None` for never. Expired items get `Some(0)` (long past).
    pub fn deadline(self, now_unix: u64) -> Option<u64> {
        match self {
            Expiry::Never => None,
            Expiry::Expired => Some(0),
            Expiry::Relative(s) => Some(now_unix.saturating_add(u64::from(s))),
            Expiry::Absolute(t) => Some(t),
        }
    }
}
