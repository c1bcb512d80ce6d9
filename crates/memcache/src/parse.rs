//! Request parsing: memcached 1.6 `try_read_command_ascii` and
//! `process_command_ascii` with the per-command `process_*` checks.
//!
//! memcached tokenizes a command line into at most 24 tokens (23 real ones
//! plus a terminal marker, `MAX_TOKENS`), and every "wrong number of
//! arguments" check (`WANT_TOKENS*`) is written against that count, which
//! we call `nt` below to keep the comparisons identical to the C. Only the
//! get family looks past the 23rd token (memcached re-tokenizes); we scan
//! the keys once, lazily, instead.

use crate::error::{Error, ErrorReply, KeyAt};
use crate::meta::{preparse, ArithMode, MetaFlags, MetaKey, SetMode};
use crate::num::{parse_i32, parse_u32, parse_u64};
use crate::{item_size, Limits};

/// memcached's `MAX_TOKENS`: 23 tokens plus the terminal one.
const MAX_TOKENS: usize = 24;
/// Meta commands may have at most this many tokens, terminal included
/// (`MFLAG_MAX_OPT_LENGTH`): command, key and 17 flags (16 for `ms`).
const MFLAG_MAX_OPT_LENGTH: usize = 20;
/// A multiget buffered without its newline may have at most this many
/// leading spaces before memcached gives up on it.
const MAX_LEADING_SPACES: usize = 100;

/// One parsed request. Keys and data borrow from the parsed buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get`/`gets`/`gat`/`gats` (and the ancient alias `bget`). Reply with
    /// a `VALUE` block per hit, then `END`. `keys` may be empty only for
    /// `gat`/`gats`, for which memcached then just answers `END`.
    Get {
        /// Which retrieval command.
        command: RetrieveCommand,
        /// New exptime for `gat`/`gats`; 0 for `get`/`gets`.
        exptime: i32,
        /// The keys, all validated against `max_key_len`.
        keys: Keys<'a>,
    },
    /// `set`/`add`/`replace`/`append`/`prepend`/`cas`.
    Store(Store<'a>),
    /// `incr <key> <delta>`. Reply the new value, `NOT_FOUND`, or
    /// `CLIENT_ERROR cannot increment or decrement non-numeric value`.
    Incr {
        /// Key.
        key: &'a [u8],
        /// Amount to add (wrapping at 2^64 in memcached).
        delta: u64,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `decr <key> <delta>`; memcached clamps at 0 instead of wrapping.
    Decr {
        /// Key.
        key: &'a [u8],
        /// Amount to subtract.
        delta: u64,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `touch <key> <exptime>`: `TOUCHED` or `NOT_FOUND`.
    Touch {
        /// Key.
        key: &'a [u8],
        /// New exptime (see [`crate::Expiry`]).
        exptime: i32,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `delete <key>`: `DELETED` or `NOT_FOUND`.
    Delete {
        /// Key.
        key: &'a [u8],
        /// Suppress the reply.
        noreply: bool,
    },
    /// `flush_all [delay]`: `OK`. A positive delay invalidates items at
    /// that (memcached-style) exptime; zero or negative means now.
    FlushAll {
        /// Delay as given; `None` if absent.
        delay: Option<i32>,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `version`: `VERSION <x>`. Extra tokens are ignored, as in memcached.
    Version,
    /// `verbosity <level>`: `OK`.
    Verbosity {
        /// Requested level.
        level: u32,
        /// Suppress the reply.
        noreply: bool,
    },
    /// `quit`: close the connection after flushing earlier replies.
    Quit,
    /// `stats [args]`: `STAT` lines then `END`; unknown sub-stats get
    /// `ERROR`, `stats reset` gets `RESET`, `stats detail` without an
    /// argument `CLIENT_ERROR usage: stats detail on|off|dump`.
    Stats {
        /// Tokens after `stats`.
        args: Tokens<'a>,
    },
    /// `mn`: reply `MN`.
    MetaNoop,
    /// `me <key> [b]`: `ME <key> exp=.. la=.. cas=.. fetch=.. cls=.. size=..`
    /// or `EN`.
    MetaDebug {
        /// Key (decoded when the second argument is exactly `b`).
        key: MetaKey<'a>,
    },
    /// `mg <key> <flags>*`.
    MetaGet {
        /// Key.
        key: MetaKey<'a>,
        /// Flags.
        flags: MetaFlags<'a>,
    },
    /// `ms <key> <datalen> <flags>*` + data.
    MetaSet {
        /// Key.
        key: MetaKey<'a>,
        /// Flags.
        flags: MetaFlags<'a>,
        /// Store mode from `M` (memcached turns Set/Replace into a CAS
        /// operation when `C` is present).
        mode: SetMode,
        /// The value, without its trailing `\r\n`.
        data: &'a [u8],
    },
    /// `md <key> <flags>*`.
    MetaDelete {
        /// Key.
        key: MetaKey<'a>,
        /// Flags.
        flags: MetaFlags<'a>,
    },
    /// `ma <key> <flags>*`.
    MetaArithmetic {
        /// Key.
        key: MetaKey<'a>,
        /// Flags (`D` delta, `J` initial, `N` vivify, ...).
        flags: MetaFlags<'a>,
        /// Increment or decrement.
        mode: ArithMode,
    },
}

impl Request<'_> {
    /// The first key the request looks up (a multiget's first), to prefetch it; `None` for
    /// a command without a key.
    pub fn first_key(&self) -> Option<&[u8]> {
        match self {
            Request::Get { keys, .. } => { *keys }.next(),
            Request::Store(s) => Some(s.key),
            Request::Incr { key, .. }
            | Request::Decr { key, .. }
            | Request::Touch { key, .. }
            | Request::Delete { key, .. } => Some(key),
            Request::MetaDebug { key }
            | Request::MetaGet { key, .. }
            | Request::MetaSet { key, .. }
            | Request::MetaDelete { key, .. }
            | Request::MetaArithmetic { key, .. } => Some(key.bytes()),
            Request::FlushAll { .. }
            | Request::Version
            | Request::Verbosity { .. }
            | Request::Quit
            | Request::Stats { .. }
            | Request::MetaNoop => None,
        }
    }
}

/// The retrieval commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetrieveCommand {
    /// `get` (also `bget`).
    Get,
    /// `gets`: like get, `VALUE` lines carry the CAS.
    Gets,
    /// `gat`: get and touch.
    Gat,
    /// `gats`: get and touch, with CAS.
    Gats,
}

impl RetrieveCommand {
    /// Whether `VALUE` lines include the CAS unique.
    pub fn returns_cas(self) -> bool {
        matches!(self, RetrieveCommand::Gets | RetrieveCommand::Gats)
    }

    /// Whether hits have their exptime updated.
    pub fn touches(self) -> bool {
        matches!(self, RetrieveCommand::Gat | RetrieveCommand::Gats)
    }
}

/// The classic storage commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreCommand {
    /// `set`: `STORED`.
    Set,
    /// `add`: `STORED` or `NOT_STORED` if present.
    Add,
    /// `replace`: `STORED` or `NOT_STORED` if absent.
    Replace,
    /// `append`: `STORED` or `NOT_STORED` if absent (flags/exptime ignored).
    Append,
    /// `prepend`: as append.
    Prepend,
    /// `cas`: `STORED`, `EXISTS` (CAS mismatch) or `NOT_FOUND`.
    Cas,
}

/// A classic storage request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Store<'a> {
    /// Which command.
    pub command: StoreCommand,
    /// Key.
    pub key: &'a [u8],
    /// Opaque client flags.
    pub flags: u32,
    /// Expiration (see [`crate::Expiry`]).
    pub exptime: i32,
    /// The value, without its trailing `\r\n`.
    pub data: &'a [u8],
    /// CAS unique for [`StoreCommand::Cas`]; 0 otherwise.
    pub cas: u64,
    /// Suppress the reply. (Any token in the `noreply` position other than
    /// `noreply` itself is ignored, as in memcached.)
    pub noreply: bool,
}

/// Space-separated tokens of a line. Runs of spaces separate; only `' '`
/// is a separator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tokens<'a> {
    rest: &'a [u8],
}

impl<'a> Tokens<'a> {
    pub(crate) fn new(rest: &'a [u8]) -> Self {
        Tokens { rest }
    }

    /// The not yet consumed part of the line.
    pub fn remainder(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let r = self.rest;
        let mut i = 0;
        while i < r.len() && r[i] == b' ' {
            i += 1;
        }
        if i == r.len() {
            self.rest = &[];
            return None;
        }
        let start = i;
        while i < r.len() && r[i] != b' ' {
            i += 1;
        }
        self.rest = &r[i..];
        Some(&r[start..i])
    }
}

/// The keys of a retrieval command, in request order. Iterating re-splits
/// the line; no allocation. `len()` is known up front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keys<'a> {
    tokens: Tokens<'a>,
    remaining: usize,
}

impl<'a> Iterator for Keys<'a> {
    type Item = &'a [u8];

    #[inline]
    fn next(&mut self) -> Option<&'a [u8]> {
        let k = self.tokens.next()?;
        self.remaining -= 1;
        Some(k)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for Keys<'_> {}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// High bit set in each byte of `x` that is zero (exact for the lowest such
/// byte, which is all we use).
#[inline]
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(LO) & !x & HI
}

/// Finds the first `\n` and, if one occurs before it, the first NUL.
/// Word-at-a-time, since a get line may be long and this runs on every
/// (possibly partial) read.
#[inline]
fn scan_line(buf: &[u8]) -> (Option<usize>, Option<usize>) {
    let mut nul = None;
    let mut i = 0;
    while i + 8 <= buf.len() {
        let mut w = [0u8; 8];
        w.copy_from_slice(&buf[i..i + 8]);
        let x = u64::from_le_bytes(w);
        let mut m = zero_bytes(x ^ (LO * u64::from(b'\n')));
        if nul.is_none() {
            m |= zero_bytes(x);
        }
        if m != 0 {
            break;
        }
        i += 8;
    }
    while i < buf.len() {
        match buf[i] {
            b'\n' => return (Some(i), nul),
            0 if nul.is_none() => nul = Some(i),
            _ => {}
        }
        i += 1;
        // Back to word scanning after a NUL: only `\n` matters now.
        if nul.is_some() {
            while i + 8 <= buf.len() {
                let mut w = [0u8; 8];
                w.copy_from_slice(&buf[i..i + 8]);
                if zero_bytes(u64::from_le_bytes(w) ^ (LO * u64::from(b'\n'))) != 0 {
                    break;
                }
                i += 8;
            }
        }
    }
    (None, nul)
}

/// Parses one request from the front of `buf`, all of which counts as read
/// (see [`parse_window`] for memcached's 16 KiB read buffer).
///
/// * `Ok(None)`: more bytes are needed (no line yet, or a storage command
///   whose data block is not fully buffered). Nothing is allocated.
/// * `Ok(Some((request, consumed)))`: `consumed` bytes form the request.
/// * `Err(e)`: what memcached would reply and skip; see [`Error`].
pub fn parse<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<(Request<'a>, usize)>, Error> {
    let mut window = usize::MAX;
    parse_window(buf, &mut window, limits)
}

/// [`parse`], seeing `buf` as memcached sees a connection's bytes: through
/// its read buffer of [`Limits::read_buffer_size`] (16 KiB).
///
/// memcached (`try_read_network`, `try_read_command_ascii`) reads into that
/// buffer, runs every complete line in it, then moves an unfinished line to
/// the front and reads again; a storage command's data block that runs past
/// the buffer is read straight into the item, and the next read starts after
/// it. Whenever it finds no `\n` among more than
/// [`Limits::max_unterminated_line`] (2 KiB) buffered bytes of a line that is
/// not a multiget, it closes the connection. So a long line's fate depends on
/// where the buffer ends: a 3 KB line sent alone is answered (`ERROR` if it
/// is junk), but the same line with more than 2 KiB of it at the end of a
/// full buffer closes the connection, and any line over 16 KiB (the buffer
/// holds 16382 bytes and `\r\n`) closes it unless it is a `get`/`gets`, for
/// which memcached switches to a buffer that grows as needed.
///
/// `window` is how many bytes at the front of `buf` memcached's buffer holds
/// (beyond `buf.len()`: bytes still to come fit in it too): start a batch of
/// freshly read bytes at `limits.read_buffer_size`, and after each request
/// (or error) pass the window through [`advance_window`]. This call changes
/// it when memcached would read again: to a fresh buffer starting at `buf`
/// when the line runs past the old one, or to `usize::MAX` when a multiget
/// outgrew it (modelled as a buffer that holds everything until the batch
/// ends; memcached's grows by doubling, up to 4 times a read).
pub fn parse_window<'a>(
    buf: &'a [u8],
    window: &mut usize,
    limits: &Limits,
) -> Result<Option<(Request<'a>, usize)>, Error> {
    loop {
        let seen = buf.len().min(*window);
        let (nl, nul) = scan_line(&buf[..seen]);
        if let Some(nl) = nl {
            return parse_found(buf, nl, nul, limits);
        }
        match unterminated(buf, seen, window, limits) {
            Some(r) => return r,
            None => continue,
        }
    }
}

/// Whether `buf` starts with a multiget line that memcached reads on without bound: more
/// than [`Limits::max_unterminated_line`] bytes and no `\n` yet. Until its `\n` arrives
/// [`parse_window`] says "incomplete" however long it grows, so a caller need not parse it
/// again (looking through all of it) before a `\n` comes.
pub fn is_long_multiget(buf: &[u8], limits: &Limits) -> bool {
    buf.len() > limits.max_unterminated_line && !buf.contains(&b'\n') && starts_multiget(buf)
}

/// Whether an unterminated line is one memcached keeps reading however long it gets: a
/// `get` or `gets` after at most [`MAX_LEADING_SPACES`] spaces.
fn starts_multiget(line: &[u8]) -> bool {
    let spaces = line.iter().take_while(|&&b| b == b' ').count();
    let rest = &line[spaces..];
    spaces <= MAX_LEADING_SPACES && (rest.starts_with(b"get ") || rest.starts_with(b"gets "))
}

/// The window memcached's buffer leaves after `n` more bytes were consumed
/// (a request, or an error's [`Error::consumed`] plus [`Error::skip`]): the
/// rest of the buffer, or a fresh buffer if those bytes ran past it.
#[inline]
pub fn advance_window(window: usize, n: usize, limits: &Limits) -> usize {
    if n <= window {
        window - n
    } else {
        limits.read_buffer_size
    }
}

/// A line found: parse it.
#[inline]
fn parse_found<'a>(
    buf: &'a [u8],
    nl: usize,
    nul: Option<usize>,
    limits: &Limits,
) -> Result<Option<(Request<'a>, usize)>, Error> {
    let line_len = nl + 1;
    // memcached strips a `\r` only when at least two bytes precede `\n`.
    let mut end = nl;
    if end > 1 && buf[end - 1] == b'\r' {
        end -= 1;
    }
    // memcached tokenizes with strlen: a NUL ends the command.
    if let Some(z) = nul {
        end = end.min(z);
    }
    parse_line(buf, &buf[..end], line_len, limits)
}

/// No `\n` among the `seen` bytes memcached holds: wait, give up on this
/// client, or (`None`) look again through the `window` changed to what
/// memcached would hold after reading more.
#[cold]
fn unterminated<'a>(
    buf: &'a [u8],
    seen: usize,
    window: &mut usize,
    limits: &Limits,
) -> Option<Result<Option<(Request<'a>, usize)>, Error>> {
    if seen > limits.max_unterminated_line {
        if !starts_multiget(buf) {
            return Some(Err(Error::Close));
        }
        // A large multiget: memcached grows its buffer without bound.
        if seen == buf.len() {
            return Some(Ok(None));
        }
        *window = usize::MAX;
        return None;
    }
    if seen == buf.len() {
        // The rest of the line is still to come, and fits.
        return Some(Ok(None));
    }
    // The buffer ends inside the line: memcached moves the line to the front
    // and reads on. (A buffer no larger than the unterminated-line limit would
    // never be given up on; keep the loop finite all the same.)
    *window = limits.read_buffer_size.max(limits.max_unterminated_line + 1);
    None
}

#[inline]
fn reply(reply: ErrorReply, consumed: usize, silent: bool) -> Error {
    Error::Reply { reply, consumed, silent }
}

/// The first (up to) 23 tokens, as memcached's `tokenize_command` keeps them.
struct Toks<'a> {
    t: [&'a [u8]; MAX_TOKENS - 1],
    /// Real tokens stored.
    n: usize,
}

impl<'a> Toks<'a> {
    fn new(cmd: &'a [u8], rest: &mut Tokens<'a>) -> Self {
        let mut t: [&'a [u8]; MAX_TOKENS - 1] = [&[]; MAX_TOKENS - 1];
        t[0] = cmd;
        let mut n = 1;
        while n < MAX_TOKENS - 1 {
            match rest.next() {
                Some(tok) => {
                    t[n] = tok;
                    n += 1;
                }
                None => break,
            }
        }
        Toks { t, n }
    }

    /// memcached's `ntokens`: real tokens plus the terminal one.
    fn nt(&self) -> usize {
        self.n + 1
    }

    /// `set_noreply_maybe`: the last real token is exactly `noreply`.
    fn noreply(&self) -> bool {
        self.t[self.n - 1] == b"noreply"
    }
}

fn parse_line<'a>(
    buf: &'a [u8],
    line: &'a [u8],
    line_len: usize,
    limits: &Limits,
) -> Result<Option<(Request<'a>, usize)>, Error> {
    let err = |r: ErrorReply| Err(reply(r, line_len, false));
    let mut rest = Tokens::new(line);
    let Some(cmd) = rest.next() else {
        return err(ErrorReply::Error);
    };
    // No valid command is shorter than two bytes.
    if cmd.len() < 2 {
        return err(ErrorReply::Error);
    }

    // The get family is handled before general tokenization so that long
    // multigets are scanned once.
    if cmd[0] == b'g' || cmd == b"bget" {
        let command = match cmd {
            b"get" | b"bget" => RetrieveCommand::Get,
            b"gets" => RetrieveCommand::Gets,
            b"gat" => RetrieveCommand::Gat,
            b"gats" => RetrieveCommand::Gats,
            _ => return err(ErrorReply::Error),
        };
        // WANT_TOKENS_MIN(ntokens, 3): at least one argument. memcached
        // checks this before the name, but the reply is ERROR either way.
        let mut keys_tok = rest;
        let Some(first) = keys_tok.next() else {
            return err(ErrorReply::Error);
        };
        let mut exptime = 0;
        let keys_start = if command.touches() {
            match parse_i32(first) {
                Some(e) => exptime = e,
                None => return err(ErrorReply::InvalidExptime),
            }
            keys_tok
        } else {
            rest
        };
        let mut count = 0;
        for k in keys_start {
            if k.len() > limits.max_key_len {
                return err(ErrorReply::BadFormat);
            }
            count += 1;
        }
        let keys = Keys { tokens: keys_start, remaining: count };
        return Ok(Some((Request::Get { command, exptime, keys }, line_len)));
    }

    if cmd == b"stats" {
        return Ok(Some((Request::Stats { args: rest }, line_len)));
    }

    let tk = Toks::new(cmd, &mut rest);
    let nt = tk.nt();
    let t = &tk.t;

    if cmd.len() == 2 && cmd[0] == b'm' {
        return parse_meta(buf, line, line_len, &tk, limits);
    }

    let store = |command| parse_store(buf, line_len, &tk, command, limits);
    match cmd {
        b"set" => store(StoreCommand::Set),
        b"add" => store(StoreCommand::Add),
        b"replace" => store(StoreCommand::Replace),
        b"append" => store(StoreCommand::Append),
        b"prepend" => store(StoreCommand::Prepend),
        b"cas" => store(StoreCommand::Cas),
        b"incr" | b"decr" => {
            if nt != 4 && nt != 5 {
                return err(ErrorReply::Error);
            }
            let noreply = tk.noreply();
            if t[1].len() > limits.max_key_len {
                return Err(reply(ErrorReply::BadFormat, line_len, noreply));
            }
            let Some(delta) = parse_u64(t[2]) else {
                return Err(reply(ErrorReply::InvalidDelta, line_len, noreply));
            };
            let key = t[1];
            let req = if cmd == b"incr" {
                Request::Incr { key, delta, noreply }
            } else {
                Request::Decr { key, delta, noreply }
            };
            Ok(Some((req, line_len)))
        }
        b"touch" => {
            if nt != 4 && nt != 5 {
                return err(ErrorReply::Error);
            }
            let noreply = tk.noreply();
            if t[1].len() > limits.max_key_len {
                return Err(reply(ErrorReply::BadFormat, line_len, noreply));
            }
            let Some(exptime) = parse_i32(t[2]) else {
                return Err(reply(ErrorReply::InvalidExptime, line_len, noreply));
            };
            Ok(Some((Request::Touch { key: t[1], exptime, noreply }, line_len)))
        }
        b"delete" => {
            if !(3..=5).contains(&nt) {
                return err(ErrorReply::Error);
            }
            let mut noreply = false;
            if nt > 3 {
                // Old clients send a hold time of "0"; nothing else is
                // allowed besides noreply.
                let hold_is_zero = t[2] == b"0";
                noreply = tk.noreply();
                let valid = (nt == 4 && (hold_is_zero || noreply)) || (nt == 5 && hold_is_zero && noreply);
                if !valid {
                    return Err(reply(ErrorReply::DeleteUsage, line_len, noreply));
                }
            }
            if t[1].len() > limits.max_key_len {
                return Err(reply(ErrorReply::BadFormat, line_len, noreply));
            }
            Ok(Some((Request::Delete { key: t[1], noreply }, line_len)))
        }
        b"flush_all" => {
            if !(2..=4).contains(&nt) {
                return err(ErrorReply::Error);
            }
            let noreply = tk.noreply();
            let mut delay = None;
            if nt != if noreply { 3 } else { 2 } {
                match parse_i32(t[1]) {
                    Some(d) => delay = Some(d),
                    None => return Err(reply(ErrorReply::InvalidExptime, line_len, noreply)),
                }
            }
            Ok(Some((Request::FlushAll { delay, noreply }, line_len)))
        }
        b"version" => Ok(Some((Request::Version, line_len))),
        b"quit" => Ok(Some((Request::Quit, line_len))),
        b"verbosity" => {
            if nt != 3 && nt != 4 {
                return err(ErrorReply::Error);
            }
            let noreply = tk.noreply();
            let Some(level) = parse_u32(t[1]) else {
                return Err(reply(ErrorReply::BadFormat, line_len, noreply));
            };
            Ok(Some((Request::Verbosity { level, noreply }, line_len)))
        }
        // Everything else, including memcached's admin commands that Larder
        // does not implement (slabs, lru, lru_crawler, watch, shutdown,
        // cache_memlimit, extstore, ...).
        _ => err(ErrorReply::Error),
    }
}

/// `process_update_command` plus the data block read (`conn_nread`) and its
/// `\r\n` check (`complete_nread_ascii`).
fn parse_store<'a>(
    buf: &'a [u8],
    line_len: usize,
    tk: &Toks<'a>,
    command: StoreCommand,
    limits: &Limits,
) -> Result<Option<(Request<'a>, usize)>, Error> {
    let is_cas = command == StoreCommand::Cas;
    let nt = tk.nt();
    let t = &tk.t;
    let ok_counts = if is_cas { (7, 8) } else { (6, 7) };
    if nt != ok_counts.0 && nt != ok_counts.1 {
        return Err(reply(ErrorReply::Error, line_len, false));
    }
    let noreply = tk.noreply();
    let bad = |r| Err(reply(r, line_len, noreply));
    if t[1].len() > limits.max_key_len {
        return bad(ErrorReply::BadFormat);
    }
    let (Some(flags), Some(exptime), Some(vlen)) = (parse_u32(t[2]), parse_i32(t[3]), parse_i32(t[4])) else {
        return bad(ErrorReply::BadFormat);
    };
    let mut cas = 0;
    if is_cas {
        match parse_u64(t[5]) {
            Some(c) => cas = c,
            None => return bad(ErrorReply::BadFormat),
        }
    }
    if !(0..=i32::MAX - 2).contains(&vlen) {
        return bad(ErrorReply::BadFormat);
    }
    let vlen = vlen as usize;
    // memcached cannot allocate the item (do_item_alloc counts header, CAS, key, flags and
    // value against -I): it says so, swallows the data and, for set, drops the old value.
    if item_size(t[1].len(), flags, vlen) > limits.item_size_max {
        return Err(Error::Swallow {
            reply: ErrorReply::TooLarge,
            consumed: line_len,
            skip: vlen + 2,
            silent: noreply,
            unlink: (command == StoreCommand::Set).then(|| key_at(buf, t[1], false)),
        });
    }
    let Some(data) = data_block(buf, line_len, vlen) else {
        return Ok(None);
    };
    let Ok(data) = data else {
        return Err(reply(ErrorReply::BadDataChunk, line_len + vlen + 2, noreply));
    };
    let req = Store { command, key: t[1], flags, exptime, data, cas, noreply };
    Ok(Some((Request::Store(req), line_len + vlen + 2)))
}

/// The `vlen` data bytes after the command line: `None` if not all
/// buffered yet (including the `\r\n`), `Some(Err(()))` if the two bytes
/// after the data are not `\r\n`.
#[inline]
fn data_block(buf: &[u8], line_len: usize, vlen: usize) -> Option<Result<&[u8], ()>> {
    let end = line_len + vlen;
    if buf.len() < end + 2 {
        return None;
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Some(Err(()));
    }
    Some(Ok(&buf[line_len..end]))
}

/// Where `key` (a subslice of `buf`) sits in `buf`.
#[inline]
fn key_at(buf: &[u8], key: &[u8], base64: bool) -> KeyAt {
    KeyAt { start: offset_in(buf, key), len: key.len(), base64 }
}

/// Byte offset of `tok` (a subslice of `line`) within `line`.
#[inline]
fn offset_in(line: &[u8], tok: &[u8]) -> usize {
    tok.as_ptr() as usize - line.as_ptr() as usize
}

fn parse_meta<'a>(
    buf: &'a [u8],
    line: &'a [u8],
    line_len: usize,
    tk: &Toks<'a>,
    limits: &Limits,
) -> Result<Option<(Request<'a>, usize)>, Error> {
    let err = |r: ErrorReply| Err(reply(r, line_len, false));
    let nt = tk.nt();
    let t = &tk.t;
    let sub = tk.t[0][1];
    match sub {
        b'n' => return Ok(Some((Request::MetaNoop, line_len))),
        b'e' => {
            // process_meta_command
            if nt < 3 || t[1].len() > limits.max_key_len {
                return err(ErrorReply::BadFormat);
            }
            let key = if nt >= 4 && t[2] == b"b" {
                match MetaKey::binary(t[1]) {
                    Some(k) => k,
                    None => return err(ErrorReply::BadFormat),
                }
            } else {
                MetaKey::text(t[1])
            };
            return Ok(Some((Request::MetaDebug { key }, line_len)));
        }
        b'g' | b's' | b'd' | b'a' => {}
        _ => return err(ErrorReply::Error),
    }
    // WANT_TOKENS_MIN(ntokens, 3): a key is required.
    if nt < 3 {
        return err(ErrorReply::Error);
    }
    if t[1].len() > limits.max_key_len {
        return err(ErrorReply::BadFormat);
    }
    let flags_from = if sub == b's' { 3 } else { 2 };
    if sub == b's' && nt == 3 {
        return err(ErrorReply::BadFormat);
    }
    if nt > MFLAG_MAX_OPT_LENGTH {
        return err(if sub == b'g' { ErrorReply::MgOptionsTooLong } else { ErrorReply::OptionsTooLong });
    }
    let flag_toks = &t[flags_from.min(tk.n)..tk.n];
    let section = match flag_toks.first() {
        Some(f) => &line[offset_in(line, f)..],
        None => &[][..],
    };

    match sub {
        b'g' => {
            let (key, flags) = match preparse(t[1], flag_toks, section) {
                Ok(kf) => kf,
                Err(r) => return err(r),
            };
            if flags.opaque_too_long {
                return err(ErrorReply::OpaqueTooLong);
            }
            Ok(Some((Request::MetaGet { key, flags }, line_len)))
        }
        b'd' | b'a' => {
            // md and ma report every preparse failure the same way.
            let Ok((key, flags)) = preparse(t[1], flag_toks, section) else {
                return err(ErrorReply::InvalidOrDuplicateFlag);
            };
            if sub == b'd' {
                if flags.opaque_too_long {
                    return err(ErrorReply::OpaqueTooLong);
                }
                return Ok(Some((Request::MetaDelete { key, flags }, line_len)));
            }
            let Some(mode) = ArithMode::from_flag(flags.mode) else {
                return err(ErrorReply::InvalidMaMode);
            };
            if flags.opaque_too_long {
                return err(ErrorReply::OpaqueTooLong);
            }
            Ok(Some((Request::MetaArithmetic { key, flags, mode }, line_len)))
        }
        _ => {
            // process_mset_command
            let vlen = match parse_i32(t[2]) {
                Some(v) if (0..=i32::MAX - 2).contains(&v) => v as usize,
                _ => return err(ErrorReply::BadFormat),
            };
            // From here on memcached swallows the data block on error, and
            // meta errors are never silenced by q.
            let swallow =
                |r| Err(Error::Swallow { reply: r, consumed: line_len, skip: vlen + 2, silent: false, unlink: None });
            let (key, flags) = match preparse(t[1], flag_toks, section) {
                Ok(kf) => kf,
                Err(r) => return swallow(r),
            };
            let Some(mode) = SetMode::from_flag(flags.mode) else {
                return swallow(ErrorReply::InvalidMsMode);
            };
            if flags.opaque_too_long {
                return swallow(ErrorReply::OpaqueTooLong);
            }
            // Too large (see parse_store): memcached drops the key's old value whatever the
            // mode, counting the decoded length of a base64 key.
            let flags_in_item = flags.client_flags.unwrap_or(0);
            if item_size(key.bytes().len(), flags_in_item, vlen) > limits.item_size_max {
                return Err(Error::Swallow {
                    reply: ErrorReply::TooLarge,
                    consumed: line_len,
                    skip: vlen + 2,
                    silent: false,
                    unlink: Some(key_at(buf, t[1], flags.base64_key)),
                });
            }
            let Some(data) = data_block(buf, line_len, vlen) else {
                return Ok(None);
            };
            let Ok(data) = data else {
                return Err(reply(ErrorReply::BadDataChunk, line_len + vlen + 2, false));
            };
            Ok(Some((Request::MetaSet { key, flags, mode, data }, line_len + vlen + 2)))
        }
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
