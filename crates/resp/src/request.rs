//! Request (client → server) parsing: multibulk and inline commands.
//!
//! The parser is stateless: a connection keeps its unconsumed input and calls
//! again with a longer buffer when it got `Ok(None)`. Each call is a single
//! forward scan; bulk payloads are skipped by length, never searched.

use std::borrow::Cow;

use crate::num::string2ll;
use crate::{Limits, ProtoError};

/// One parsed argument: a range of the input buffer, or (inline commands with
/// quotes only) a range of [`Args`]'s scratch buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: usize,
    end: usize,
    owned: bool,
}

/// Reusable argument storage for [`parse_command_into`].
///
/// Arguments are kept as ranges, not slices, so that one `Args` can live in a
/// connection next to its input buffer and be reused for every request
/// without borrowing that buffer: after warm-up a multibulk request costs no
/// allocation at all. Read the arguments back by passing the same buffer that
/// was parsed ([`Args::get`], [`Args::iter`]).
///
/// Inline arguments that needed unescaping (anything quoted) are copied into
/// an internal scratch buffer, which is also reused.
#[derive(Clone, Debug, Default)]
pub struct Args {
    spans: Vec<Span>,
    scratch: Vec<u8>,
    /// Start in `scratch` of the owned argument being built.
    pending: usize,
}

impl Args {
    /// Empty storage; allocates nothing until the first argument.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of arguments of the last parsed request. Zero means the
    /// consumed bytes held only empty requests (see [`parse_command_into`]).
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when the last parse produced no arguments.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Argument `i`. `buf` must be the buffer given to
    /// [`parse_command_into`] (or one that starts with the same bytes);
    /// with any other buffer the result is meaningless or `None`.
    #[inline]
    pub fn get<'a>(&'a self, buf: &'a [u8], i: usize) -> Option<&'a [u8]> {
        let s = self.spans.get(i)?;
        self.resolve(buf, s)
    }

    /// The arguments in order; `buf` as for [`Args::get`]. An argument whose
    /// range does not fit `buf` is yielded as empty.
    pub fn iter<'a>(&'a self, buf: &'a [u8]) -> ArgsIter<'a> {
        ArgsIter { args: self, buf, next: 0 }
    }

    /// The range of `buf` holding argument `i`, or `None` if it is out of
    /// bounds or was unescaped into the scratch buffer (quoted inline
    /// arguments). Lets a caller that keeps the input around (e.g. to store
    /// a value without copying) refer to an argument by position.
    pub fn buf_range(&self, i: usize) -> Option<std::ops::Range<usize>> {
        let s = self.spans.get(i)?;
        (!s.owned).then_some(s.start..s.end)
    }

    /// Copies the arguments out into a self-contained [`Command`], borrowing
    /// from `buf` where possible.
    pub fn to_command<'a>(&self, buf: &'a [u8]) -> Command<'a> {
        let args = self
            .spans
            .iter()
            .map(|s| {
                if s.owned {
                    Cow::Owned(self.scratch[s.start..s.end].to_vec())
                } else {
                    Cow::Borrowed(&buf[s.start..s.end])
                }
            })
            .collect();
        Command { args }
    }

    /// Forgets the arguments, keeping the capacity.
    pub fn clear(&mut self) {
        self.spans.clear();
        self.scratch.clear();
    }

    /// Forgets the arguments, and gives back the storage a request of more than `keep`
    /// arguments grew, so that one huge request does not hold it for as long as the `Args`
    /// lives. (The scratch buffer needs no such care: inline lines are short.)
    pub fn shrink(&mut self, keep: usize) {
        self.clear();
        if self.spans.capacity() > keep {
            self.spans = Vec::new();
        }
    }

    #[inline]
    fn resolve<'a>(&'a self, buf: &'a [u8], s: &Span) -> Option<&'a [u8]> {
        if s.owned {
            self.scratch.get(s.start..s.end)
        } else {
            buf.get(s.start..s.end)
        }
    }
}

/// Iterator returned by [`Args::iter`].
#[derive(Clone, Debug)]
pub struct ArgsIter<'a> {
    args: &'a Args,
    buf: &'a [u8],
    next: usize,
}

impl<'a> Iterator for ArgsIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let s = self.args.spans.get(self.next)?;
        self.next += 1;
        Some(self.args.resolve(self.buf, s).unwrap_or(&[]))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.args.spans.len() - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for ArgsIter<'_> {}

/// A parsed request with its own argument vector, from [`parse_command`].
///
/// Arguments borrow from the input buffer; only quoted inline arguments are
/// owned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Command<'a> {
    args: Vec<Cow<'a, [u8]>>,
}

impl<'a> Command<'a> {
    /// Number of arguments; zero for a run of empty requests.
    pub fn len(&self) -> usize {
        self.args.len()
    }

    /// True for a run of empty requests (nothing to execute or reply to).
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// The command name (first argument), as sent.
    pub fn name(&self) -> Option<&[u8]> {
        self.get(0)
    }

    /// Argument `i`.
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        self.args.get(i).map(|a| &**a)
    }

    /// The arguments in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        self.args.iter().map(|a| &**a)
    }

    /// The argument vector.
    pub fn args(&self) -> &[Cow<'a, [u8]>] {
        &self.args
    }

    /// Takes the argument vector.
    pub fn into_args(self) -> Vec<Cow<'a, [u8]>> {
        self.args
    }
}

/// Where the parser puts arguments. Lets one parser serve both the reusable
/// [`Args`] path and the validate-first pass of [`parse_command`].
trait Sink {
    fn clear(&mut self);
    fn count(&self) -> usize;
    fn borrowed(&mut self, start: usize, end: usize);
    fn owned_begin(&mut self);
    fn owned_byte(&mut self, b: u8);
    fn owned_bytes(&mut self, b: &[u8]);
    fn owned_end(&mut self);
}

impl Sink for Args {
    #[inline]
    fn clear(&mut self) {
        Args::clear(self)
    }
    #[inline]
    fn count(&self) -> usize {
        self.spans.len()
    }
    #[inline]
    fn borrowed(&mut self, start: usize, end: usize) {
        self.spans.push(Span { start, end, owned: false });
    }
    fn owned_begin(&mut self) {
        self.pending = self.scratch.len();
    }
    fn owned_byte(&mut self, b: u8) {
        self.scratch.push(b);
    }
    fn owned_bytes(&mut self, b: &[u8]) {
        self.scratch.extend_from_slice(b);
    }
    fn owned_end(&mut self) {
        self.spans.push(Span { start: self.pending, end: self.scratch.len(), owned: true });
    }
}

/// Counts arguments and stores nothing: the first pass of [`parse_command`],
/// so that an incomplete request costs no allocation.
struct Counter(usize);

impl Sink for Counter {
    fn clear(&mut self) {
        self.0 = 0;
    }
    fn count(&self) -> usize {
        self.0
    }
    fn borrowed(&mut self, _: usize, _: usize) {
        self.0 += 1;
    }
    fn owned_begin(&mut self) {}
    fn owned_byte(&mut self, _: u8) {}
    fn owned_bytes(&mut self, _: &[u8]) {}
    fn owned_end(&mut self) {
        self.0 += 1;
    }
}

/// Builds a [`Command`] directly, for the second pass of [`parse_command`].
struct CowSink<'a> {
    buf: &'a [u8],
    args: Vec<Cow<'a, [u8]>>,
    cur: Vec<u8>,
}

impl<'a> Sink for CowSink<'a> {
    fn clear(&mut self) {
        self.args.clear();
    }
    fn count(&self) -> usize {
        self.args.len()
    }
    fn borrowed(&mut self, start: usize, end: usize) {
        self.args.push(Cow::Borrowed(&self.buf[start..end]));
    }
    fn owned_begin(&mut self) {
        self.cur = Vec::new();
    }
    fn owned_byte(&mut self, b: u8) {
        self.cur.push(b);
    }
    fn owned_bytes(&mut self, b: &[u8]) {
        self.cur.extend_from_slice(b);
    }
    fn owned_end(&mut self) {
        self.args.push(Cow::Owned(std::mem::take(&mut self.cur)));
    }
}

/// Parses one client request from the start of `buf` into the reusable
/// `args`, returning how many bytes it consumed.
///
/// * `Ok(None)`: incomplete, call again once more bytes have arrived (with
///   the same, now longer, buffer). `args` holds nothing meaningful.
/// * `Ok(Some(consumed))`: `args` holds the request; drop `consumed` bytes
///   from the front of the buffer. If `args` is empty, the consumed bytes
///   were only empty requests (`*0\r\n`, `*-1\r\n`, blank inline lines),
///   which Redis skips without a reply: drop them and parse again.
/// * `Err(e)`: a protocol error. Redis replies `-ERR <e>\r\n` (see
///   [`ProtoError::write_reply`]) and closes the connection; nothing after
///   the error can be trusted.
///
/// Empty requests in front of a real one are skipped within the same call,
/// so `args` is only empty when nothing complete follows them.
///
/// # Format
///
/// A request whose first byte is `*` is a multibulk:
/// `*<count>\r\n` then `count` times `$<len>\r\n<len bytes>\r\n`. As in
/// Redis, the two bytes after each header's `\r` and after each payload are
/// skipped without being checked. Anything else is an inline command: a line
/// up to `\n` (a `\r` before it is dropped), split on whitespace with
/// `sdssplitargs` quoting: `"..."` understands `\n \r \t \b \a \xHH` and
/// `\<any>`, `'...'` understands only `\'`, and a closing quote must be
/// followed by whitespace or the end of the line.
///
/// ```
/// use larder_resp::{parse_command_into, Args, Limits};
/// let buf = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n";
/// let mut args = Args::new();
/// let n = parse_command_into(buf, &Limits::default(), &mut args).unwrap().unwrap();
/// assert_eq!(args.iter(buf).collect::<Vec<_>>(), [&b"GET"[..], b"k"]);
/// let rest = &buf[n..];
/// parse_command_into(rest, &Limits::default(), &mut args).unwrap().unwrap();
/// assert_eq!(args.get(rest, 0), Some(&b"PING"[..]));
/// ```
pub fn parse_command_into(buf: &[u8], limits: &Limits, args: &mut Args) -> Result<Option<usize>, ProtoError> {
    if let Some(end) = whole_plain_multibulk(buf, limits, args) {
        return Ok(Some(end));
    }
    parse_with(buf, limits, args)
}

/// The request nearly every client sends, in one tight pass: a multibulk whose count and
/// lengths are all plain (see [`plain_len`]) and within the limits, complete in `buf`.
/// Anything else (incomplete, inline, empty, malformed, over a limit) returns None, having
/// stored nothing the caller relies on, and [`parse_with`] takes it. Where this accepts,
/// `parse_with` gives the same arguments and end: this is its multibulk path without the
/// error results and the loop over empty requests (a SET or GET took 250 instructions to
/// parse, now 175).
#[inline]
fn whole_plain_multibulk(buf: &[u8], limits: &Limits, args: &mut Args) -> Option<usize> {
    if buf.first() != Some(&b'*') {
        return None;
    }
    let (count, cr) = plain_len(buf, 1)?;
    if count > limits.max_multibulk {
        return None;
    }
    args.clear();
    let mut pos = cr + 2;
    for _ in 0..count {
        if buf.get(pos) != Some(&b'$') {
            return None;
        }
        let (len, cr) = plain_len(buf, pos + 1)?;
        let start = cr + 2;
        // The payload and the two bytes after it must all be here.
        if len > limits.proto_max_bulk_len || ((buf.len() - start) as u64) < len + 2 {
            return None;
        }
        let end = start + len as usize;
        args.borrowed(start, end);
        pos = end + 2;
    }
    Some(pos)
}

/// Parses one client request from the start of `buf` into a self-contained
/// [`Command`]. Same contract as [`parse_command_into`] (including empty
/// commands for skipped empty requests), but allocates a fresh argument
/// vector per request; an incomplete request allocates nothing.
///
/// # Format
///
/// See [`parse_command_into`].
///
/// ```
/// use larder_resp::{parse_command, Limits};
/// let (cmd, n) = parse_command(b"set k \"a b\"\r\n", &Limits::default()).unwrap().unwrap();
/// assert_eq!(n, 13);
/// assert_eq!(cmd.iter().collect::<Vec<_>>(), [&b"set"[..], b"k", b"a b"]);
/// ```
pub fn parse_command<'a>(buf: &'a [u8], limits: &Limits) -> Result<Option<(Command<'a>, usize)>, ProtoError> {
    // Validate first without storing anything, so that the frequent
    // incomplete case allocates nothing; the second pass cannot fail.
    let mut counter = Counter(0);
    let Some(consumed) = parse_with(buf, limits, &mut counter)? else {
        return Ok(None);
    };
    let mut sink = CowSink { buf, args: Vec::with_capacity(counter.0), cur: Vec::new() };
    let again = parse_with(buf, limits, &mut sink)?;
    debug_assert_eq!(again, Some(consumed));
    Ok(Some((Command { args: sink.args }, consumed)))
}

// Out of line: inlined into `parse_command_into`, its registers crowded the fast path's
// (which then reloaded the buffer from the stack for every argument).
#[inline(never)]
fn parse_with<S: Sink>(buf: &[u8], limits: &Limits, sink: &mut S) -> Result<Option<usize>, ProtoError> {
    let mut pos = 0;
    loop {
        sink.clear();
        let step = match buf.get(pos) {
            None => None,
            Some(b'*') => multibulk(buf, pos, limits, sink)?,
            Some(_) => inline(buf, pos, limits, sink)?,
        };
        match step {
            Some(end) if sink.count() > 0 => return Ok(Some(end)),
            Some(end) => pos = end,
            None => {
                sink.clear();
                return Ok((pos > 0).then_some(pos));
            }
        }
    }
}

enum Line {
    /// Index of the `\r` ending the line; at least one byte follows it.
    Cr(usize),
    Incomplete,
    TooBig,
}

/// Finds the end of a `*`/`$` header line the way Redis does: the first `\r`
/// anywhere after `start`, which must not be the last byte (its `\n` is
/// assumed, not checked). Without any `\r`, more than `max` pending bytes
/// is an error.
#[inline]
fn header_line(buf: &[u8], start: usize, max: usize) -> Line {
    let rest = &buf[start..];
    match rest.iter().position(|&b| b == b'\r') {
        Some(i) if i + 1 < rest.len() => Line::Cr(start + i),
        Some(_) => Line::Incomplete,
        None if rest.len() > max => Line::TooBig,
        None => Line::Incomplete,
    }
}

/// The common header in one pass: a positive decimal without sign or leading zero (at most
/// 18 digits), then `\r` with at least one byte after it. Anything else (including an
/// incomplete header) returns None and the caller takes the general path, which gives
/// Redis's answer for it; where both apply they agree.
///
/// One or two digits (argument counts, and the lengths of keys and small values) are read
/// without the loop: three bytes, one bounds check.
#[inline]
fn plain_len(buf: &[u8], start: usize) -> Option<(u64, usize)> {
    if let Some(&[a, b, c]) = buf.get(start..start + 3) {
        let (a, b) = (a.wrapping_sub(b'0'), b.wrapping_sub(b'0'));
        if (1..=9).contains(&a) {
            if b == b'\r'.wrapping_sub(b'0') {
                return Some((a as u64, start + 1));
            }
            if b <= 9 && c == b'\r' && start + 3 < buf.len() {
                return Some((a as u64 * 10 + b as u64, start + 2));
            }
        }
    }
    let first = *buf.get(start)?;
    if !(b'1'..=b'9').contains(&first) {
        return None;
    }
    let mut v = (first - b'0') as u64;
    for (i, &b) in buf.iter().enumerate().skip(start + 1).take(18) {
        match b {
            b'0'..=b'9' => v = v * 10 + (b - b'0') as u64,
            b'\r' => return (i + 1 < buf.len()).then_some((v, i)),
            _ => return None,
        }
    }
    None
}

fn multibulk<S: Sink>(buf: &[u8], start: usize, limits: &Limits, sink: &mut S) -> Result<Option<usize>, ProtoError> {
    let Some((count, pos)) = multibulk_header(buf, start, limits)? else { return Ok(None) };
    match bulks(buf, pos, count, limits, sink)? {
        Bulks::Done(end) => Ok(Some(end)),
        Bulks::Partial { .. } => Ok(None),
    }
}

/// The `*<count>` line of a multibulk at `start`: the argument count (0 for the empty
/// requests `*0` and below) and where the first argument starts. None: incomplete.
fn multibulk_header(buf: &[u8], start: usize, limits: &Limits) -> Result<Option<(u64, usize)>, ProtoError> {
    let (count, cr) = match plain_len(buf, start + 1) {
        Some((n, cr)) if n <= limits.max_multibulk => (n, cr),
        _ => {
            let cr = match header_line(buf, start, limits.max_inline) {
                Line::Cr(cr) => cr,
                Line::Incomplete => return Ok(None),
                Line::TooBig => return Err(ProtoError::TooBigMbulkCount),
            };
            match string2ll(&buf[start + 1..cr]) {
                Some(n) if n <= 0 => (0, cr),
                Some(n) if n as u64 <= limits.max_multibulk => (n as u64, cr),
                _ => return Err(ProtoError::InvalidMultibulkLength),
            }
        }
    };
    Ok(Some((count, cr + 2)))
}

/// How far [`bulks`] got.
enum Bulks {
    /// All of them: the request ends here.
    Done(usize),
    /// `left` arguments are still to come, from `pos` (the header of the first of them).
    Partial { pos: usize, left: u64 },
}

/// `count` bulk arguments from `pos`.
fn bulks<S: Sink>(buf: &[u8], mut pos: usize, count: u64, limits: &Limits, sink: &mut S) -> Result<Bulks, ProtoError> {
    for done in 0..count {
        let partial = Bulks::Partial { pos, left: count - done };
        let fast = match buf.get(pos) {
            Some(b'$') => plain_len(buf, pos + 1).filter(|&(n, _)| n <= limits.proto_max_bulk_len),
            _ => None,
        };
        let (len, cr) = match fast {
            Some(x) => x,
            None => {
                let cr = match header_line(buf, pos, limits.max_inline) {
                    Line::Cr(cr) => cr,
                    Line::Incomplete => return Ok(partial),
                    Line::TooBig => return Err(ProtoError::TooBigBulkCount),
                };
                if buf[pos] != b'$' {
                    return Err(ProtoError::ExpectedDollar(buf[pos]));
                }
                match string2ll(&buf[pos + 1..cr]) {
                    Some(n) if n >= 0 && n as u64 <= limits.proto_max_bulk_len => (n as u64, cr),
                    _ => return Err(ProtoError::InvalidBulkLength),
                }
            }
        };
        let start = cr + 2;
        let avail = (buf.len() - start) as u64;
        // The payload and the two bytes after it must all be here.
        if avail < len.saturating_add(2) {
            return Ok(partial);
        }
        let end = start + len as usize;
        sink.borrowed(start, end);
        pos = end + 2;
    }
    Ok(Bulks::Done(pos))
}

/// How far an unfinished multibulk request has been checked, so that a request arriving
/// in many reads is not parsed again from its start after each one: with a million small
/// arguments trickling in, that was a second of CPU per read, and every other client of
/// the worker waited for it. Redis keeps the same progress in its client (`multibulklen`).
///
/// A connection keeps one: after a parse found its first request incomplete it calls
/// [`Progress::ready`], and then, while [`Progress::started`], asks `ready` again before
/// parsing; it resets it (`Progress::default()`) once that request is consumed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Where the first argument still to come starts; 0 before the header was read.
    pos: usize,
    /// Arguments still to come from there.
    left: u64,
}

impl Progress {
    /// Whether a multibulk request has been checked in part ([`Progress::ready`] said no).
    pub fn started(&self) -> bool {
        self.pos > 0
    }

    /// Whether `buf`, which starts with the request this progress was made on, may now hold
    /// all of it (or a protocol error): parse it then. False only for a multibulk still
    /// incomplete; the check goes on from where the last one stopped, so it costs time in
    /// proportion to what arrived since.
    pub fn ready(&mut self, buf: &[u8], limits: &Limits) -> bool {
        if self.pos == 0 {
            if buf.first() != Some(&b'*') {
                return true;
            }
            match multibulk_header(buf, 0, limits) {
                Ok(Some((count, pos))) if count > 0 => *self = Progress { pos, left: count },
                // An incomplete header (at most a line), an empty request, an error.
                _ => return true,
            }
        }
        match bulks(buf, self.pos, self.left, limits, &mut Counter(0)) {
            Ok(Bulks::Partial { pos, left }) => {
                *self = Progress { pos, left };
                false
            }
            Ok(Bulks::Done(_)) | Err(_) => true,
        }
    }
}

fn inline<S: Sink>(buf: &[u8], start: usize, limits: &Limits, sink: &mut S) -> Result<Option<usize>, ProtoError> {
    let rest = &buf[start..];
    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
        return if rest.len() > limits.max_inline { Err(ProtoError::TooBigInlineRequest) } else { Ok(None) };
    };
    let mut line_end = start + nl;
    if nl > 0 && rest[nl - 1] == b'\r' {
        line_end -= 1;
    }
    split_args(buf, start, line_end, sink)?;
    Ok(Some(start + nl + 1))
}

/// C `isspace` in the C locale, used by `sdssplitargs` to skip blanks and to
/// check what follows a closing quote.
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The narrower set that ends an unquoted token in `sdssplitargs`: vertical
/// tab and form feed are skipped between tokens but do not end one.
#[inline]
fn ends_token(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Port of Redis's `sdssplitargs` over `buf[lo..hi]`.
///
/// Unquoted tokens are passed on as ranges of `buf`; a token containing a
/// quote is unescaped into the sink's owned storage. One difference from the
/// C original: a NUL byte is ordinary data here, whereas C string handling
/// in Redis would treat it as the end of the line.
fn split_args<S: Sink>(buf: &[u8], lo: usize, hi: usize, sink: &mut S) -> Result<(), ProtoError> {
    let at = |i: usize| if i < hi { Some(buf[i]) } else { None };
    let mut p = lo;
    loop {
        while p < hi && is_space(buf[p]) {
            p += 1;
        }
        if p >= hi {
            return Ok(());
        }
        let tok = p;
        while p < hi && !ends_token(buf[p]) && buf[p] != b'"' && buf[p] != b'\'' {
            p += 1;
        }
        if p >= hi || ends_token(buf[p]) {
            sink.borrowed(tok, p);
            p += 1;
            continue;
        }

        // The token contains a quote: run the full state machine from it.
        sink.owned_begin();
        sink.owned_bytes(&buf[tok..p]);
        let (mut inq, mut insq) = (false, false);
        loop {
            let c = at(p);
            let mut done = false;
            if inq {
                match c {
                    None => return Err(ProtoError::UnbalancedQuotes),
                    Some(b'\\') => match (at(p + 1), at(p + 2).and_then(hex_val), at(p + 3).and_then(hex_val)) {
                        (Some(b'x'), Some(h), Some(l)) => {
                            sink.owned_byte(h * 16 + l);
                            p += 3;
                        }
                        (Some(e), _, _) => {
                            p += 1;
                            sink.owned_byte(match e {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 0x08,
                                b'a' => 0x07,
                                other => other,
                            });
                        }
                        // A backslash at the very end: kept, and the next
                        // step finds the quote unterminated.
                        (None, _, _) => sink.owned_byte(b'\\'),
                    },
                    Some(b'"') => {
                        if at(p + 1).is_some_and(|n| !is_space(n)) {
                            return Err(ProtoError::UnbalancedQuotes);
                        }
                        done = true;
                    }
                    Some(b) => sink.owned_byte(b),
                }
            } else if insq {
                match c {
                    None => return Err(ProtoError::UnbalancedQuotes),
                    Some(b'\\') if at(p + 1) == Some(b'\'') => {
                        p += 1;
                        sink.owned_byte(b'\'');
                    }
                    Some(b'\'') => {
                        if at(p + 1).is_some_and(|n| !is_space(n)) {
                            return Err(ProtoError::UnbalancedQuotes);
                        }
                        done = true;
                    }
                    Some(b) => sink.owned_byte(b),
                }
            } else {
                match c {
                    None => done = true,
                    Some(b) if ends_token(b) => done = true,
                    Some(b'"') => inq = true,
                    Some(b'\'') => insq = true,
                    Some(b) => sink.owned_byte(b),
                }
            }
            if c.is_some() {
                p += 1;
            }
            if done {
                break;
            }
        }
        sink.owned_end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lim() -> Limits {
        Limits::default()
    }

    #[test]
    fn plain_len_short_path_agrees_with_the_loop() {
        // The definition: digits without a leading zero up to the first byte that is not a
        // digit, which must be a `\r` with a byte after it.
        fn reference(buf: &[u8], start: usize) -> Option<(u64, usize)> {
            let digits = buf.get(start..)?.iter().take_while(|b| b.is_ascii_digit()).count();
            let cr = start + digits;
            if digits == 0 || digits > 18 || buf[start] == b'0' || buf.get(cr) != Some(&b'\r') || cr + 1 >= buf.len() {
                return None;
            }
            let v = buf[start..cr].iter().fold(0u64, |v, &d| v * 10 + (d - b'0') as u64);
            Some((v, cr))
        }
        let alphabet = [b'0', b'1', b'5', b'9', b'\r', b'\n', b'$', b'/', b':', 0, 0xff];
        let mut buf = Vec::new();
        for len in 0..=5 {
            for mut code in 0..alphabet.len().pow(len as u32) {
                buf.clear();
                for _ in 0..len {
                    buf.push(alphabet[code % alphabet.len()]);
                    code /= alphabet.len();
                }
                for start in 0..=len {
                    assert_eq!(plain_len(&buf, start), reference(&buf, start), "{buf:?} from {start}");
                }
            }
        }
    }

    type Parsed = Result<Option<(Vec<Vec<u8>>, usize)>, ProtoError>;

    /// Parses with both entry points, checks they agree, and returns the
    /// arguments and consumed length.
    fn parse(buf: &[u8]) -> Parsed {
        parse_lim(buf, &lim())
    }

    fn parse_lim(buf: &[u8], limits: &Limits) -> Parsed {
        let mut args = Args::new();
        let a = parse_command_into(buf, limits, &mut args)
            .map(|o| o.map(|n| (args.iter(buf).map(<[u8]>::to_vec).collect::<Vec<_>>(), n)));
        let b =
            parse_command(buf, limits).map(|o| o.map(|(c, n)| (c.iter().map(<[u8]>::to_vec).collect::<Vec<_>>(), n)));
        assert_eq!(a, b, "entry points disagree on {:?}", String::from_utf8_lossy(buf));
        if let Ok(Some((_, n))) = &a {
            assert!(*n <= buf.len() && *n > 0);
        }
        a
    }

    fn ok(buf: &[u8]) -> (Vec<Vec<u8>>, usize) {
        parse(buf).unwrap().unwrap()
    }

    fn args_of(buf: &[u8]) -> Vec<String> {
        ok(buf).0.into_iter().map(|a| String::from_utf8_lossy(&a).into_owned()).collect()
    }

    fn err(buf: &[u8]) -> String {
        parse(buf).unwrap_err().to_string()
    }

    fn mb(args: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        crate::write_command(&mut out, args);
        out
    }

    /// Every strict prefix must be incomplete, never an error or a result.
    fn assert_prefixes_incomplete(buf: &[u8]) {
        for i in 0..buf.len() {
            assert_eq!(parse(&buf[..i]), Ok(None), "prefix {i} of {:?}", String::from_utf8_lossy(buf));
        }
    }

    #[test]
    fn progress_is_never_short_of_the_parser() {
        // Fed a growing prefix of one request, the progress may only say "not ready" where
        // the parser finds it incomplete, and must say ready once it is whole or wrong.
        let big = vec![b'v'; 300];
        let cases: Vec<Vec<u8>> = vec![
            mb(&[b"SET", b"key", &big]),
            mb(&[b"RPUSH", b"k", b"", b"a", b"bb", b"", b"ccc"]),
            [mb(&[b"GET", b"k"]), b"PING\r\n".to_vec()].concat(),
            b"*3\r\n$3\r\nSET\r\n$x\r\n$1\r\nv\r\n".to_vec(),
            b"*2\r\n$3\r\nfoo\r\n$-1\r\n".to_vec(),
            b"*2\r\n$3\r\nfoo\r\n:12\r\n".to_vec(),
            b"*2\r\n$3\r\nfoo\r\n$536870913\r\n".to_vec(),
            b"*0\r\n*1\r\n$4\r\nPING\r\n".to_vec(),
            b"*-1\r\n".to_vec(),
            b"*+2\r\n$1\r\na\r\n$01\r\nb\r\n".to_vec(),
            b"PING\r\n".to_vec(),
        ];
        for buf in &cases {
            let mut p = Progress::default();
            for i in 0..=buf.len() {
                if !p.ready(&buf[..i], &lim()) {
                    assert_eq!(parse(&buf[..i]), Ok(None), "prefix {i} of {:?}", String::from_utf8_lossy(buf));
                }
            }
            assert!(p.ready(buf, &lim()), "{:?}", String::from_utf8_lossy(buf));
        }
    }

    #[test]
    fn shrink_gives_back_what_a_huge_request_grew() {
        let mut args = Args::new();
        let many = mb(&vec![&b"a"[..]; 5000]);
        parse_command_into(&many, &lim(), &mut args).unwrap().unwrap();
        assert_eq!(args.len(), 5000);
        args.shrink(1 << 20);
        assert!(args.is_empty() && args.spans.capacity() >= 5000, "kept up to `keep`");
        parse_command_into(&many, &lim(), &mut args).unwrap().unwrap();
        args.shrink(1024);
        assert_eq!(args.spans.capacity(), 0);
    }

    #[test]
    fn progress_goes_on_from_where_it_stopped() {
        let buf = mb(&[b"RPUSH", b"k", b"a", b"b", b"c"]);
        let mut p = Progress::default();
        let cut = buf.len() - b"$1\r\nc\r\n".len();
        assert!(!p.ready(&buf[..cut + 3], &lim()));
        assert_eq!(p, Progress { pos: cut, left: 1 });
        // Bytes before that point are not looked at again.
        let mut other = buf.clone();
        other[..cut].fill(b'#');
        assert!(!p.ready(&other[..cut + 6], &lim()));
        assert!(p.ready(&other, &lim()));
    }

    #[test]
    fn multibulk_basic() {
        let buf = mb(&[b"SET", b"key", b"va\r\nl"]);
        assert_eq!(buf, b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nva\r\nl\r\n");
        assert_eq!(ok(&buf), (vec![b"SET".to_vec(), b"key".to_vec(), b"va\r\nl".to_vec()], buf.len()));
        assert_eq!(args_of(b"*1\r\n$0\r\n\r\n"), [""]);
    }

    #[test]
    fn multibulk_is_zero_copy() {
        let buf = mb(&[b"GET", b"k"]);
        let mut args = Args::new();
        parse_command_into(&buf, &lim(), &mut args).unwrap().unwrap();
        assert_eq!(args.buf_range(0), Some(8..11));
        assert_eq!(args.get(&buf, 1).unwrap().as_ptr(), buf[17..].as_ptr());
        let (cmd, _) = parse_command(&buf, &lim()).unwrap().unwrap();
        assert!(cmd.args().iter().all(|a| matches!(a, Cow::Borrowed(_))));
    }

    #[test]
    fn every_split_point_is_incomplete() {
        let reqs: &[&[u8]] = &[
            b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n",
            b"*1\r\n$0\r\n\r\n",
            b"*2\r\n$4\r\nPING\r\n$12\r\nhello\r\nworld\r\n",
            b"PING\r\n",
            b"set a b\n",
            b"set \"a b\" 'c d' \"\\x41\\n\"\r\n",
            b"  \t echo   x  \r\n",
        ];
        for r in reqs {
            assert_prefixes_incomplete(r);
            assert!(parse(r).unwrap().is_some());
        }
    }

    #[test]
    fn pipelined() {
        let mut buf = mb(&[b"SET", b"a", b"1"]);
        buf.extend_from_slice(b"GET a\r\n");
        buf.extend_from_slice(&mb(&[b"INCR", b"a"]));
        buf.extend_from_slice(b"*0\r\n\r\n*-1\r\n");
        buf.extend_from_slice(&mb(&[b"DEL", b"a"]));
        buf.extend_from_slice(b"*2\r\n$3\r\nGET"); // incomplete tail
        let mut pos = 0;
        let mut seen = Vec::new();
        let mut args = Args::new();
        while let Some(n) = parse_command_into(&buf[pos..], &lim(), &mut args).unwrap() {
            if !args.is_empty() {
                seen.push(args.get(&buf[pos..], 0).unwrap().to_vec());
            }
            pos += n;
        }
        assert_eq!(seen, [&b"SET"[..], b"GET", b"INCR", b"DEL"]);
        assert_eq!(&buf[pos..], b"*2\r\n$3\r\nGET");
    }

    #[test]
    fn empty_requests() {
        // Skipped, consumed, no arguments; a following request is returned
        // in the same call.
        assert_eq!(ok(b"*0\r\n"), (vec![], 4));
        assert_eq!(ok(b"*-1\r\n"), (vec![], 5));
        assert_eq!(ok(b"*-100\r\n"), (vec![], 7));
        assert_eq!(ok(b"\r\n"), (vec![], 2));
        assert_eq!(ok(b"\n"), (vec![], 1));
        assert_eq!(ok(b"   \t \r\n"), (vec![], 7));
        assert_eq!(ok(b"\r\n\n*0\r\nPING\r\n"), (vec![b"PING".to_vec()], 13));
        assert_eq!(ok(b"*0\r\n*1\r\n$1"), (vec![], 4));
        assert_eq!(parse(b"*0\r"), Ok(None));
        assert_eq!(err(b"\r\n*x\r\n"), "Protocol error: invalid multibulk length");
    }

    #[test]
    fn multibulk_count_errors() {
        for bad in [
            &b"*1x\r\n"[..],
            b"*x\r\n",
            b"*\r\n",
            b"*01\r\n",
            b"*+1\r\n",
            b"* 1\r\n",
            b"*-0\r\n",
            b"*2147483648\r\n",
            b"*9223372036854775808\r\n",
            b"*1\n$1\r\n", // the first \r is what ends the count line
        ] {
            assert_eq!(err(bad), "Protocol error: invalid multibulk length", "{:?}", String::from_utf8_lossy(bad));
        }
        // INT_MAX itself is a valid count: it just waits for arguments.
        assert_eq!(parse(b"*2147483647\r\n"), Ok(None));
        let small = Limits { max_multibulk: 2, ..lim() };
        assert_eq!(parse_lim(b"*3\r\n", &small), Err(ProtoError::InvalidMultibulkLength));
        assert_eq!(parse_lim(b"*2\r\n", &small), Ok(None));
    }

    #[test]
    fn bulk_length_errors() {
        for bad in [
            &b"*1\r\n$abc\r\n"[..],
            b"*1\r\n$\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$-5\r\n",
            b"*1\r\n$01\r\n",
            b"*1\r\n$3x\r\n",
            b"*1\r\n$536870913\r\n",
            b"*1\r\n$9223372036854775807\r\n",
            b"*1\r\n$99999999999999999999999\r\n",
        ] {
            assert_eq!(err(bad), "Protocol error: invalid bulk length", "{:?}", String::from_utf8_lossy(bad));
        }
        // Exactly proto-max-bulk-len is allowed and waits for the payload.
        assert_eq!(parse(b"*1\r\n$536870912\r\n"), Ok(None));
        let small = Limits { proto_max_bulk_len: 3, ..lim() };
        assert_eq!(parse_lim(b"*1\r\n$4\r\nabcd\r\n", &small), Err(ProtoError::InvalidBulkLength));
        assert_eq!(parse_lim(b"*1\r\n$3\r\nabc\r\n", &small).unwrap().unwrap().1, 13);
        let huge = Limits { proto_max_bulk_len: u64::MAX, ..lim() };
        assert_eq!(parse_lim(b"*1\r\n$9223372036854775807\r\n", &huge), Ok(None));
    }

    #[test]
    fn expected_dollar() {
        assert_eq!(err(b"*1\r\n:1\r\n"), "Protocol error: expected '$', got ':'");
        assert_eq!(err(b"*2\r\n$1\r\na\r\nX\r\n"), "Protocol error: expected '$', got 'X'");
        assert_eq!(err(b"*1\r\n\r\n"), "Protocol error: expected '$', got ' '");
        // The type byte is only judged once the whole header line is in.
        assert_eq!(parse(b"*1\r\nX"), Ok(None));
        assert_eq!(parse(b"*1\r\nX\r"), Ok(None));
    }

    #[test]
    fn too_big_headers() {
        let max = lim().max_inline;
        let mut count = b"*".to_vec();
        count.resize(max, b'1');
        assert_eq!(parse(&count), Ok(None));
        count.push(b'1');
        assert_eq!(err(&count), "Protocol error: too big mbulk count string");

        let mut bulk = b"*1\r\n$".to_vec();
        bulk.resize(4 + max, b'1');
        assert_eq!(parse(&bulk), Ok(None));
        bulk.push(b'1');
        assert_eq!(err(&bulk), "Protocol error: too big bulk count string");

        // The cap applies before the element's type byte is checked.
        let mut junk = b"*1\r\n".to_vec();
        junk.resize(4 + max + 1, b'X');
        assert_eq!(err(&junk), "Protocol error: too big bulk count string");

        // A long header that does end is judged on its value instead.
        let mut long = b"*".to_vec();
        long.resize(max + 10, b'1');
        long.extend_from_slice(b"\r\n");
        assert_eq!(err(&long), "Protocol error: invalid multibulk length");
    }

    #[test]
    fn too_big_inline() {
        let max = lim().max_inline;
        let mut line = vec![b'a'; max];
        assert_eq!(parse(&line), Ok(None));
        line.push(b'a');
        assert_eq!(err(&line), "Protocol error: too big inline request");
        // With its newline, a long inline line is fine, as in Redis.
        line.extend_from_slice(b" b\r\n");
        assert_eq!(ok(&line).0.len(), 2);
    }

    #[test]
    fn bytes_after_payload_are_skipped_blindly() {
        // Redis skips the two bytes after a payload and after a header's \r
        // without looking at them.
        assert_eq!(ok(b"*1\r\n$3\r\nfooXY"), (vec![b"foo".to_vec()], 13));
        assert_eq!(ok(b"*1\rX$3\rYfoo\r\n"), (vec![b"foo".to_vec()], 13));
        assert_eq!(parse(b"*1\r\n$3\r\nfooX"), Ok(None));
        // A payload shorter than announced swallows what follows, and the
        // parse derails on the leftovers.
        assert_eq!(err(b"*2\r\n$5\r\nab\r\n$1\r\nc\r\n"), "Protocol error: expected '$', got ' '");
    }

    #[test]
    fn inline_basic() {
        assert_eq!(args_of(b"PING\r\n"), ["PING"]);
        assert_eq!(args_of(b"PING\n"), ["PING"]);
        assert_eq!(args_of(b"set a b\n"), ["set", "a", "b"]);
        assert_eq!(args_of(b"  set\t a   b  \r\n"), ["set", "a", "b"]);
        assert_eq!(args_of(b"a\rb\r\n"), ["a", "b"]);
        // \v and \f are skipped between tokens but do not end one.
        assert_eq!(args_of(b"\x0ba\x0bb\x0c c\n"), ["a\x0bb\x0c", "c"]);
        assert_eq!(ok(b"GET k\r\nGET j\r\n").1, 7);
        assert_eq!(ok(b"GET k\r\r\n").0, [b"GET".to_vec(), b"k".to_vec()]);
    }

    #[test]
    fn inline_unquoted_is_zero_copy() {
        let buf = b"set key value\r\n";
        let mut args = Args::new();
        parse_command_into(buf, &lim(), &mut args).unwrap().unwrap();
        assert_eq!(args.buf_range(2), Some(8..13));
        let (cmd, _) = parse_command(buf, &lim()).unwrap().unwrap();
        assert!(cmd.args().iter().all(|a| matches!(a, Cow::Borrowed(_))));
        let (cmd, _) = parse_command(b"set \"k\" v\n", &lim()).unwrap().unwrap();
        assert!(matches!(cmd.args()[1], Cow::Owned(_)));
        assert!(matches!(cmd.args()[2], Cow::Borrowed(_)));
    }

    #[test]
    fn inline_quoting() {
        assert_eq!(args_of(b"set k \"hello world\"\r\n"), ["set", "k", "hello world"]);
        assert_eq!(args_of(b"set k 'hello world'\r\n"), ["set", "k", "hello world"]);
        assert_eq!(args_of(b"\"\"\n"), [""]);
        assert_eq!(args_of(b"a '' b\n"), ["a", "", "b"]);
        assert_eq!(args_of(b"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\\'\"\n"), ["\n\r\t\x08\x07\\\"q'"]);
        assert_eq!(ok(b"\"\\x41\\x6a\\xff\\xZZ\\x4\"\n").0, [b"Aj\xffxZZx4".to_vec()]);
        assert_eq!(args_of(b"'it\\'s' 'a\\b'\n"), ["it's", "a\\b"]);
        assert_eq!(args_of(b"'\"' \"'\"\n"), ["\"", "'"]);
        // A quote can open in the middle of a token.
        assert_eq!(args_of(b"ab\"c d\" e\n"), ["abc d", "e"]);
        assert_eq!(args_of(b"ab'c d'\n"), ["abc d"]);
        // Whitespace after a closing quote may be any isspace byte.
        assert_eq!(args_of(b"\"a\"\x0bb\n"), ["a", "b"]);
        // Newlines only come escaped; a \r before \n ends the line.
        assert_eq!(args_of(b"\"a\"\r\n"), ["a"]);
    }

    #[test]
    fn inline_unbalanced() {
        for bad in [
            &b"\"abc\r\n"[..],
            b"'abc\n",
            b"set \"a\"b\n",
            b"set 'a'b\n",
            b"\"a\"'b'\n",
            b"\"abc\\\"\n",
            b"\"abc\\\n",
            b"'abc\\'\n",
            b"\"\\x4\n",
        ] {
            assert_eq!(err(bad), "Protocol error: unbalanced quotes in request", "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn nul_is_data() {
        assert_eq!(ok(b"a\0b c\n").0, [b"a\0b".to_vec(), b"c".to_vec()]);
        assert_eq!(ok(b"\"a\0b\"\n").0, [b"a\0b".to_vec()]);
    }

    #[test]
    fn args_reuse() {
        let mut args = Args::new();
        let a = b"set \"x y\" z\r\n";
        parse_command_into(a, &lim(), &mut args).unwrap().unwrap();
        assert_eq!(args.get(a, 1), Some(&b"x y"[..]));
        assert_eq!(args.buf_range(1), None);
        assert_eq!(args.to_command(a).get(1), Some(&b"x y"[..]));
        let b = mb(&[b"GET", b"k"]);
        parse_command_into(&b, &lim(), &mut args).unwrap().unwrap();
        assert_eq!(args.len(), 2);
        assert_eq!(args.iter(&b).len(), 2);
        assert_eq!(args.get(&b, 2), None);
        assert_eq!(parse_command_into(b"*2\r\n$3\r\nGET\r\n", &lim(), &mut args), Ok(None));
    }
}
