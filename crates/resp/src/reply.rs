//! Reply parsing, for clients, load generators and tests.
//!
//! Two passes share one frame-header reader: [`reply_len`] walks a reply
//! without building anything, and [`parse_reply`] uses it first so that an
//! incomplete reply costs no allocation and building never has to undo work.

use crate::ProtoError;

/// How deeply aggregates may nest in [`parse_reply`] before the reply is
/// rejected; it bounds the parser's recursion on hostile input.
pub const DEFAULT_MAX_DEPTH: usize = 128;

/// A parsed RESP2/RESP3 reply. Strings borrow from the input buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply<'a> {
    /// `+text`.
    Simple(&'a [u8]),
    /// `-CODE message`, without the `-`.
    Error(&'a [u8]),
    /// `:n`.
    Integer(i64),
    /// `$len` bulk string.
    Bulk(&'a [u8]),
    /// `$-1`, the RESP2 null.
    NullBulk,
    /// `*-1`, the RESP2 null array.
    NullArray,
    /// `_`, the RESP3 null.
    Null,
    /// `,` double (`inf`, `-inf` and `nan` included).
    Double(f64),
    /// `#t` / `#f`.
    Boolean(bool),
    /// `!len` blob error.
    BlobError(&'a [u8]),
    /// `=len` verbatim string, split into its 3-byte format and the text.
    Verbatim {
        /// `txt`, `mkd`, ...
        format: &'a [u8],
        /// The text after `fmt:`.
        text: &'a [u8],
    },
    /// `(` big number, as its digits (with an optional sign).
    BigNumber(&'a [u8]),
    /// `*n`.
    Array(Vec<Reply<'a>>),
    /// `%n`, as key/value pairs in wire order.
    Map(Vec<(Reply<'a>, Reply<'a>)>),
    /// `~n`.
    Set(Vec<Reply<'a>>),
    /// `>n` out-of-band push.
    Push(Vec<Reply<'a>>),
    /// `|n` attribute pairs, and the reply they annotate.
    Attribute {
        /// The attribute key/value pairs.
        attrs: Vec<(Reply<'a>, Reply<'a>)>,
        /// The reply that followed the attributes.
        reply: Box<Reply<'a>>,
    },
}

impl<'a> Reply<'a> {
    /// True for every kind of null.
    pub fn is_null(&self) -> bool {
        matches!(self, Reply::Null | Reply::NullBulk | Reply::NullArray)
    }

    /// True for simple and blob errors.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_) | Reply::BlobError(_))
    }

    /// The bytes of a string-like reply (simple, bulk, verbatim text, big
    /// number, either kind of error).
    pub fn as_bytes(&self) -> Option<&'a [u8]> {
        match *self {
            Reply::Simple(s)
            | Reply::Error(s)
            | Reply::Bulk(s)
            | Reply::BlobError(s)
            | Reply::BigNumber(s)
            | Reply::Verbatim { text: s, .. } => Some(s),
            _ => None,
        }
    }

    /// The reply without any attributes wrapped around it.
    pub fn strip_attributes(&self) -> &Reply<'a> {
        let mut r = self;
        while let Reply::Attribute { reply, .. } = r {
            r = reply;
        }
        r
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Agg {
    Array,
    Map,
    Set,
    Push,
    Attribute,
}

impl Agg {
    /// How many replies follow a header announcing `n`.
    fn children(self, n: u64) -> u64 {
        match self {
            Agg::Array | Agg::Set | Agg::Push => n,
            Agg::Map => n.saturating_mul(2),
            Agg::Attribute => n.saturating_mul(2).saturating_add(1),
        }
    }
}

enum Head<'a> {
    Leaf(Reply<'a>),
    Agg(Agg, u64),
}

/// The `\r` ending the line that starts at `start`. Replies are held to the
/// grammar strictly, unlike requests: the `\n` must be there.
fn line_end(buf: &[u8], start: usize) -> Result<Option<usize>, ProtoError> {
    let Some(i) = buf.get(start..).and_then(|r| r.iter().position(|&b| b == b'\r')) else {
        return Ok(None);
    };
    let cr = start + i;
    match buf.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some(cr)),
        Some(_) => Err(ProtoError::InvalidReply("CR not followed by LF")),
    }
}

fn parse_i64(s: &[u8]) -> Result<i64, ProtoError> {
    core::str::from_utf8(s).ok().and_then(|t| t.parse().ok()).ok_or(ProtoError::InvalidReply("bad integer"))
}

/// Reads one frame header (and a leaf's whole payload).
fn head(buf: &[u8], pos: usize) -> Result<Option<(Head<'_>, usize)>, ProtoError> {
    let Some(&t) = buf.get(pos) else {
        return Ok(None);
    };
    if !matches!(
        t,
        b'+' | b'-' | b':' | b'$' | b'*' | b'_' | b',' | b'#' | b'!' | b'=' | b'(' | b'%' | b'~' | b'>' | b'|'
    ) {
        return Err(ProtoError::UnknownReplyType(t));
    }
    let Some(cr) = line_end(buf, pos + 1)? else {
        return Ok(None);
    };
    let line = &buf[pos + 1..cr];
    let next = cr + 2;
    let leaf = |r| Ok(Some((Head::Leaf(r), next)));
    match t {
        b'+' => leaf(Reply::Simple(line)),
        b'-' => leaf(Reply::Error(line)),
        b':' => leaf(Reply::Integer(parse_i64(line)?)),
        b'_' if line.is_empty() => leaf(Reply::Null),
        b'_' => Err(ProtoError::InvalidReply("null with payload")),
        b'#' => match line {
            b"t" => leaf(Reply::Boolean(true)),
            b"f" => leaf(Reply::Boolean(false)),
            _ => Err(ProtoError::InvalidReply("bad boolean")),
        },
        b',' => core::str::from_utf8(line)
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .map_or(Err(ProtoError::InvalidReply("bad double")), |d| leaf(Reply::Double(d))),
        b'(' => {
            let digits = match line.first() {
                Some(b'-' | b'+') => &line[1..],
                _ => line,
            };
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(ProtoError::InvalidReply("bad big number"));
            }
            leaf(Reply::BigNumber(line))
        }
        b'$' | b'!' | b'=' => {
            let len = parse_i64(line)?;
            if len == -1 && t == b'$' {
                return leaf(Reply::NullBulk);
            }
            let Ok(len) = usize::try_from(len) else {
                return Err(ProtoError::InvalidReply("negative length"));
            };
            // Compare by subtraction: `len` comes off the wire and adding to
            // it could overflow.
            let avail = buf.len() - next;
            if avail < 2 || len > avail - 2 {
                return Ok(None);
            }
            let data = &buf[next..next + len];
            if &buf[next + len..next + len + 2] != b"\r\n" {
                return Err(ProtoError::InvalidReply("payload not followed by CRLF"));
            }
            let end = next + len + 2;
            let r = match t {
                b'$' => Reply::Bulk(data),
                b'!' => Reply::BlobError(data),
                _ => {
                    if data.len() < 4 || data[3] != b':' {
                        return Err(ProtoError::InvalidReply("verbatim string without format"));
                    }
                    Reply::Verbatim { format: &data[..3], text: &data[4..] }
                }
            };
            Ok(Some((Head::Leaf(r), end)))
        }
        _ => {
            let n = parse_i64(line)?;
            let kind = match t {
                b'*' if n == -1 => return leaf(Reply::NullArray),
                b'*' => Agg::Array,
                b'%' => Agg::Map,
                b'~' => Agg::Set,
                b'>' => Agg::Push,
                _ => Agg::Attribute,
            };
            let Ok(n) = u64::try_from(n) else {
                return Err(ProtoError::InvalidReply("negative aggregate length"));
            };
            Ok(Some((Head::Agg(kind, n), next)))
        }
    }
}

fn skip(buf: &[u8], pos: usize, depth: usize, max: usize) -> Result<Option<usize>, ProtoError> {
    let Some((h, mut p)) = head(buf, pos)? else {
        return Ok(None);
    };
    match h {
        Head::Leaf(_) => Ok(Some(p)),
        Head::Agg(kind, n) => {
            if depth >= max {
                return Err(ProtoError::TooDeep(max));
            }
            // Each child consumes at least three bytes or ends the walk, so
            // a huge announced count costs nothing until data arrives.
            for _ in 0..kind.children(n) {
                match skip(buf, p, depth + 1, max)? {
                    Some(q) => p = q,
                    None => return Ok(None),
                }
            }
            Ok(Some(p))
        }
    }
}

/// Builds a reply already known to be complete and valid.
fn build<'a>(buf: &'a [u8], pos: usize) -> Result<(Reply<'a>, usize), ProtoError> {
    const BROKEN: ProtoError = ProtoError::InvalidReply("reply changed between passes");
    let (h, mut p) = head(buf, pos)?.ok_or(BROKEN)?;
    let (kind, n) = match h {
        Head::Leaf(r) => return Ok((r, p)),
        Head::Agg(kind, n) => (kind, n),
    };
    // The validation pass proved `n` children are present, each at least
    // three bytes, so this capacity is bounded by the input size.
    let cap = usize::try_from(n).unwrap_or(usize::MAX).min((buf.len() - p) / 3);
    let one = |p: &mut usize| -> Result<Reply<'a>, ProtoError> {
        let (r, q) = build(buf, *p)?;
        *p = q;
        Ok(r)
    };
    let r = match kind {
        Agg::Array | Agg::Set | Agg::Push => {
            let mut v = Vec::with_capacity(cap);
            for _ in 0..n {
                v.push(one(&mut p)?);
            }
            match kind {
                Agg::Array => Reply::Array(v),
                Agg::Set => Reply::Set(v),
                _ => Reply::Push(v),
            }
        }
        Agg::Map | Agg::Attribute => {
            let mut v = Vec::with_capacity(cap / 2);
            for _ in 0..n {
                let k = one(&mut p)?;
                v.push((k, one(&mut p)?));
            }
            if kind == Agg::Map {
                Reply::Map(v)
            } else {
                Reply::Attribute { attrs: v, reply: Box::new(one(&mut p)?) }
            }
        }
    };
    Ok((r, p))
}

/// Length of the complete reply at the start of `buf`, without building it:
/// `Ok(None)` if incomplete. Cheap enough for a load generator that only
/// counts replies. Nesting is limited to [`DEFAULT_MAX_DEPTH`].
///
/// # Format
///
/// See [`parse_reply`].
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, ProtoError> {
    skip(buf, 0, 0, DEFAULT_MAX_DEPTH)
}

/// Parses one RESP2 or RESP3 reply from the start of `buf`.
///
/// `Ok(None)` means incomplete (no allocation is made in that case);
/// `Ok(Some((reply, consumed)))` otherwise. Nesting is limited to
/// [`DEFAULT_MAX_DEPTH`] aggregate levels.
///
/// # Format
///
/// Any of `+ - : $ * _ , # ! = ( % ~ > |` (see the crate docs), nested
/// arbitrarily. Unlike request parsing, every line must end in `\r\n` and
/// every payload must be followed by `\r\n`. An attribute (`|`) is returned
/// together with the reply that follows it. RESP3 streamed strings and
/// aggregates (`$?`, `*?`) are not supported: Redis never sends them.
///
/// ```
/// use larder_resp::{parse_reply, Reply};
/// let (r, n) = parse_reply(b"*2\r\n:1\r\n$-1\r\n").unwrap().unwrap();
/// assert_eq!(n, 13);
/// assert_eq!(r, Reply::Array(vec![Reply::Integer(1), Reply::NullBulk]));
/// assert_eq!(parse_reply(b"*2\r\n:1\r\n").unwrap(), None);
/// ```
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Reply<'_>, usize)>, ProtoError> {
    parse_reply_with_depth(buf, DEFAULT_MAX_DEPTH)
}

/// [`parse_reply`] with an explicit nesting limit (`0` accepts no
/// aggregates at all).
///
/// # Format
///
/// See [`parse_reply`].
pub fn parse_reply_with_depth(buf: &[u8], max_depth: usize) -> Result<Option<(Reply<'_>, usize)>, ProtoError> {
    let Some(len) = skip(buf, 0, 0, max_depth)? else {
        return Ok(None);
    };
    let (r, used) = build(buf, 0)?;
    debug_assert_eq!(used, len);
    Ok(Some((r, used)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Protocol, Writer};

    fn one(buf: &[u8]) -> Reply<'_> {
        let (r, n) = parse_reply(buf).unwrap().unwrap();
        assert_eq!(n, buf.len(), "{:?}", String::from_utf8_lossy(buf));
        assert_eq!(reply_len(buf), Ok(Some(n)));
        for i in 0..buf.len() {
            assert_eq!(parse_reply(&buf[..i]), Ok(None), "prefix {i} of {:?}", String::from_utf8_lossy(buf));
            assert_eq!(reply_len(&buf[..i]), Ok(None));
        }
        r
    }

    fn compose(proto: Protocol, f: impl FnOnce(&mut Writer<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        f(&mut Writer::new(&mut out, proto));
        out
    }

    use Protocol::{Resp2 as R2, Resp3 as R3};

    #[test]
    fn simple_and_errors() {
        for p in [R2, R3] {
            assert_eq!(
                compose(p, |w| {
                    w.ok();
                }),
                b"+OK\r\n"
            );
            assert_eq!(
                one(&compose(p, |w| {
                    w.ok();
                })),
                Reply::Simple(b"OK")
            );
            assert_eq!(
                one(&compose(p, |w| {
                    w.simple(b"PONG");
                })),
                Reply::Simple(b"PONG")
            );
            assert_eq!(
                one(&compose(p, |w| {
                    w.simple(b"a\r\nb");
                })),
                Reply::Simple(b"a  b")
            );
            let e = compose(p, |w| {
                w.error(b"unknown command 'x'");
            });
            assert_eq!(e, b"-ERR unknown command 'x'\r\n");
            assert_eq!(one(&e), Reply::Error(b"ERR unknown command 'x'"));
            let e = compose(p, |w| {
                w.error(b"-WRONGTYPE Operation against a key");
            });
            assert_eq!(e, b"-WRONGTYPE Operation against a key\r\n");
            assert!(one(&e).is_error());
            let e = compose(p, |w| {
                w.error_code(b"NOAUTH", b"Authentication\nrequired.");
            });
            assert_eq!(one(&e), Reply::Error(b"NOAUTH Authentication required."));
            assert_eq!(
                compose(p, |w| {
                    w.error(b"");
                }),
                b"-ERR \r\n"
            );
        }
    }

    #[test]
    fn integers() {
        for p in [R2, R3] {
            for n in [0, 1, -1, 42, i64::MAX, i64::MIN] {
                let b = compose(p, |w| {
                    w.integer(n);
                });
                assert_eq!(b, format!(":{n}\r\n").into_bytes());
                assert_eq!(one(&b), Reply::Integer(n));
                let b = compose(p, |w| {
                    w.bulk_integer(n);
                });
                assert_eq!(one(&b), Reply::Bulk(n.to_string().as_bytes()));
            }
        }
    }

    #[test]
    fn bulks_and_nulls() {
        for p in [R2, R3] {
            let b = compose(p, |w| {
                w.bulk(b"hello\r\nworld");
            });
            assert_eq!(b, b"$12\r\nhello\r\nworld\r\n");
            assert_eq!(one(&b), Reply::Bulk(b"hello\r\nworld"));
            assert_eq!(
                one(&compose(p, |w| {
                    w.bulk(b"");
                })),
                Reply::Bulk(b"")
            );
        }
        assert_eq!(
            compose(R2, |w| {
                w.null();
            }),
            b"$-1\r\n"
        );
        assert_eq!(one(b"$-1\r\n"), Reply::NullBulk);
        assert_eq!(
            compose(R3, |w| {
                w.null();
            }),
            b"_\r\n"
        );
        assert_eq!(one(b"_\r\n"), Reply::Null);
        assert_eq!(
            compose(R2, |w| {
                w.null_array();
            }),
            b"*-1\r\n"
        );
        assert_eq!(one(b"*-1\r\n"), Reply::NullArray);
        assert_eq!(
            compose(R3, |w| {
                w.null_array();
            }),
            b"_\r\n"
        );
        assert!(Reply::NullArray.is_null() && Reply::Null.is_null() && Reply::NullBulk.is_null());
    }

    #[test]
    fn aggregates() {
        let body = |w: &mut Writer<'_>| {
            w.bulk(b"k1").integer(1).bulk(b"k2").array(2).simple(b"x").null();
        };
        let m3 = compose(R3, |w| {
            w.map(2);
            body(w);
        });
        assert_eq!(m3, b"%2\r\n$2\r\nk1\r\n:1\r\n$2\r\nk2\r\n*2\r\n+x\r\n_\r\n");
        assert_eq!(
            one(&m3),
            Reply::Map(vec![
                (Reply::Bulk(b"k1"), Reply::Integer(1)),
                (Reply::Bulk(b"k2"), Reply::Array(vec![Reply::Simple(b"x"), Reply::Null])),
            ])
        );
        let m2 = compose(R2, |w| {
            w.map(2);
            body(w);
        });
        assert_eq!(&m2[..4], b"*4\r\n");
        assert_eq!(
            one(&m2),
            Reply::Array(vec![
                Reply::Bulk(b"k1"),
                Reply::Integer(1),
                Reply::Bulk(b"k2"),
                Reply::Array(vec![Reply::Simple(b"x"), Reply::NullBulk]),
            ])
        );
        let s3 = compose(R3, |w| {
            w.set(2).bulk(b"a").bulk(b"b");
        });
        assert_eq!(one(&s3), Reply::Set(vec![Reply::Bulk(b"a"), Reply::Bulk(b"b")]));
        let s2 = compose(R2, |w| {
            w.set(2).bulk(b"a").bulk(b"b");
        });
        assert_eq!(one(&s2), Reply::Array(vec![Reply::Bulk(b"a"), Reply::Bulk(b"b")]));
        let p3 = compose(R3, |w| {
            w.push(2).bulk(b"message").bulk(b"hi");
        });
        assert_eq!(&p3[..4], b">2\r\n");
        assert_eq!(one(&p3), Reply::Push(vec![Reply::Bulk(b"message"), Reply::Bulk(b"hi")]));
        let p2 = compose(R2, |w| {
            w.push(1).bulk(b"m");
        });
        assert_eq!(one(&p2), Reply::Array(vec![Reply::Bulk(b"m")]));
        for p in [R2, R3] {
            assert_eq!(
                one(&compose(p, |w| {
                    w.array(0);
                })),
                Reply::Array(vec![])
            );
        }
        assert_eq!(one(b"%0\r\n"), Reply::Map(vec![]));
    }

    #[test]
    fn attributes() {
        let a3 = compose(R3, |w| {
            w.attribute(1).simple(b"ttl").integer(5).ok();
        });
        assert_eq!(a3, b"|1\r\n+ttl\r\n:5\r\n+OK\r\n");
        let r = one(&a3);
        assert_eq!(
            r,
            Reply::Attribute {
                attrs: vec![(Reply::Simple(b"ttl"), Reply::Integer(5))],
                reply: Box::new(Reply::Simple(b"OK")),
            }
        );
        assert_eq!(r.strip_attributes(), &Reply::Simple(b"OK"));
        // RESP2 has no attributes: the pairs become an array of their own.
        let a2 = compose(R2, |w| {
            w.attribute(1).simple(b"ttl").integer(5).ok();
        });
        let (r, n) = parse_reply(&a2).unwrap().unwrap();
        assert_eq!(r, Reply::Array(vec![Reply::Simple(b"ttl"), Reply::Integer(5)]));
        assert_eq!(one(&a2[n..]), Reply::Simple(b"OK"));
    }

    #[test]
    fn doubles() {
        for (d, s) in [
            (1.5, "1.5"),
            (0.1, "0.1"),
            (-2.0, "-2"),
            (1e300, "1e+300"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ] {
            let b3 = compose(R3, |w| {
                w.double(d);
            });
            assert_eq!(b3, format!(",{s}\r\n").into_bytes());
            assert_eq!(one(&b3), Reply::Double(d));
            let b2 = compose(R2, |w| {
                w.double(d);
            });
            assert_eq!(b2, format!("${}\r\n{s}\r\n", s.len()).into_bytes());
            assert_eq!(one(&b2), Reply::Bulk(s.as_bytes()));
        }
        let nan = compose(R3, |w| {
            w.double(f64::NAN);
        });
        assert_eq!(nan, b",nan\r\n");
        assert!(matches!(one(&nan), Reply::Double(d) if d.is_nan()));
        assert_eq!(
            compose(R2, |w| {
                w.double(f64::NAN);
            }),
            b"$3\r\nnan\r\n"
        );
    }

    #[test]
    fn booleans_verbatim_bignum() {
        assert_eq!(
            compose(R3, |w| {
                w.boolean(true).boolean(false);
            }),
            b"#t\r\n#f\r\n"
        );
        assert_eq!(
            compose(R2, |w| {
                w.boolean(true).boolean(false);
            }),
            b":1\r\n:0\r\n"
        );
        assert_eq!(one(b"#t\r\n"), Reply::Boolean(true));
        assert_eq!(one(b"#f\r\n"), Reply::Boolean(false));

        let v3 = compose(R3, |w| {
            w.verbatim(b"txt", b"Some string");
        });
        assert_eq!(v3, b"=15\r\ntxt:Some string\r\n");
        let v = one(&v3);
        assert_eq!(v, Reply::Verbatim { format: b"txt", text: b"Some string" });
        assert_eq!(v.as_bytes(), Some(&b"Some string"[..]));
        let v2 = compose(R2, |w| {
            w.verbatim(b"txt", b"Some string");
        });
        assert_eq!(one(&v2), Reply::Bulk(b"Some string"));

        let n3 = compose(R3, |w| {
            w.big_number(b"3492890328409238509324850943850943825024385");
        });
        assert_eq!(one(&n3), Reply::BigNumber(b"3492890328409238509324850943850943825024385"));
        assert_eq!(one(b"(-12\r\n"), Reply::BigNumber(b"-12"));
        let n2 = compose(R2, |w| {
            w.big_number(b"123");
        });
        assert_eq!(one(&n2), Reply::Bulk(b"123"));

        assert_eq!(one(b"!21\r\nSYNTAX invalid syntax\r\n"), Reply::BlobError(b"SYNTAX invalid syntax"));
    }

    #[test]
    fn shared_constants_parse() {
        use crate::shared::*;
        for c in [OK, PONG, QUEUED, CZERO, CONE, CNEGONE, NULL_BULK, NULL_ARRAY, NULL3, EMPTY_ARRAY, EMPTY_BULK] {
            one(c);
        }
    }

    #[test]
    fn pipelined_replies() {
        let buf = compose(R3, |w| {
            w.ok().integer(7).array(1).bulk(b"x").null();
        });
        let mut pos = 0;
        let mut got = Vec::new();
        while let Some((r, n)) = parse_reply(&buf[pos..]).unwrap() {
            got.push(r);
            pos += n;
        }
        assert_eq!(pos, buf.len());
        assert_eq!(got, [Reply::Simple(b"OK"), Reply::Integer(7), Reply::Array(vec![Reply::Bulk(b"x")]), Reply::Null]);
    }

    #[test]
    fn malformed() {
        let bad: &[(&[u8], ProtoError)] = &[
            (b"x\r\n", ProtoError::UnknownReplyType(b'x')),
            (b"\r\n", ProtoError::UnknownReplyType(b'\r')),
            (b"+OK\rX", ProtoError::InvalidReply("CR not followed by LF")),
            (b":abc\r\n", ProtoError::InvalidReply("bad integer")),
            (b":\r\n", ProtoError::InvalidReply("bad integer")),
            (b"$-2\r\n", ProtoError::InvalidReply("negative length")),
            (b"!-1\r\n", ProtoError::InvalidReply("negative length")),
            (b"$x\r\n", ProtoError::InvalidReply("bad integer")),
            (b"$3\r\nfooXY", ProtoError::InvalidReply("payload not followed by CRLF")),
            (b"*-2\r\n", ProtoError::InvalidReply("negative aggregate length")),
            (b"%-1\r\n", ProtoError::InvalidReply("negative aggregate length")),
            (b"#x\r\n", ProtoError::InvalidReply("bad boolean")),
            (b",abc\r\n", ProtoError::InvalidReply("bad double")),
            (b"(12a\r\n", ProtoError::InvalidReply("bad big number")),
            (b"(\r\n", ProtoError::InvalidReply("bad big number")),
            (b"_x\r\n", ProtoError::InvalidReply("null with payload")),
            (b"=3\r\ntxt\r\n", ProtoError::InvalidReply("verbatim string without format")),
            (b"=5\r\ntxt-a\r\n", ProtoError::InvalidReply("verbatim string without format")),
            (b"*1\r\n?\r\n", ProtoError::UnknownReplyType(b'?')),
        ];
        for (buf, e) in bad {
            assert_eq!(parse_reply(buf), Err(*e), "{:?}", String::from_utf8_lossy(buf));
            assert_eq!(reply_len(buf), Err(*e));
        }
    }

    #[test]
    fn huge_lengths_wait() {
        assert_eq!(parse_reply(b"$9223372036854775807\r\nabc"), Ok(None));
        assert_eq!(parse_reply(b"*9223372036854775807\r\n:1\r\n"), Ok(None));
        assert_eq!(parse_reply(b"%9223372036854775807\r\n"), Ok(None));
        assert_eq!(parse_reply(b"|9223372036854775807\r\n"), Ok(None));
    }

    #[test]
    fn depth_limit() {
        let mut deep = Vec::new();
        for _ in 0..1000 {
            deep.extend_from_slice(b"*1\r\n");
        }
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(parse_reply(&deep), Err(ProtoError::TooDeep(DEFAULT_MAX_DEPTH)));
        assert_eq!(parse_reply(&deep[..deep.len() - 4]), Err(ProtoError::TooDeep(DEFAULT_MAX_DEPTH)));
        // Attribute chains recurse too and are counted.
        let chain = b"|0\r\n".repeat(1000);
        assert_eq!(parse_reply(&chain), Err(ProtoError::TooDeep(DEFAULT_MAX_DEPTH)));
        let ok = b"*1\r\n*1\r\n:1\r\n";
        assert_eq!(parse_reply_with_depth(ok, 2).unwrap().unwrap().1, ok.len());
        assert_eq!(parse_reply_with_depth(ok, 1), Err(ProtoError::TooDeep(1)));
        assert_eq!(parse_reply_with_depth(b":1\r\n", 0).unwrap().unwrap().1, 4);
    }
}
