//! Requests and replies on the wire: RESP (`SET`, `GET`, `MGET`) and memcached text
//! (`set`, `get k1 ... kN`). Encoders append to a write buffer; reply readers take the
//! bytes at the start of a read buffer and say whether a whole reply is there yet.

use std::ops::Range;

use larder_resp::Reply;

/// What a reply was to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Set,
    /// A read of this many keys (1: GET / `get k`; more: MGET / `get k1 ... kN`).
    Get(u32),
}

/// How a reply ended, once complete.
#[derive(Debug, PartialEq, Eq)]
pub enum Status {
    Ok,
    /// The server answered with an error (its text).
    Error(String),
}

fn push_usize(out: &mut Vec<u8>, mut n: usize) {
    let mut d = [0u8; 20];
    let mut i = d.len();
    loop {
        i -= 1;
        d[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&d[i..]);
}

fn resp_bulk_header(out: &mut Vec<u8>, len: usize) {
    out.push(b'$');
    push_usize(out, len);
    out.extend_from_slice(b"\r\n");
}

fn resp_bulk(out: &mut Vec<u8>, b: &[u8]) {
    resp_bulk_header(out, b.len());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// `SET key value`; the value is written by `value` (exactly `vlen` bytes).
pub fn resp_set(out: &mut Vec<u8>, key: &[u8], vlen: usize, value: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"*3\r\n$3\r\nSET\r\n");
    resp_bulk(out, key);
    resp_bulk_header(out, vlen);
    let at = out.len();
    value(out);
    debug_assert_eq!(out.len() - at, vlen);
    out.extend_from_slice(b"\r\n");
}

/// `GET key` for one key, `MGET k1 ... kN` for more.
pub fn resp_get<'a>(out: &mut Vec<u8>, keys: impl ExactSizeIterator<Item = &'a [u8]>) {
    let n = keys.len();
    if n == 1 {
        out.extend_from_slice(b"*2\r\n$3\r\nGET\r\n");
    } else {
        out.push(b'*');
        push_usize(out, n + 1);
        out.extend_from_slice(b"\r\n$4\r\nMGET\r\n");
    }
    for k in keys {
        resp_bulk(out, k);
    }
}

/// `set key 0 0 len\r\nvalue\r\n`.
pub fn mc_set(out: &mut Vec<u8>, key: &[u8], vlen: usize, value: impl FnOnce(&mut Vec<u8>)) {
    out.extend_from_slice(b"set ");
    out.extend_from_slice(key);
    out.extend_from_slice(b" 0 0 ");
    push_usize(out, vlen);
    out.extend_from_slice(b"\r\n");
    value(out);
    out.extend_from_slice(b"\r\n");
}

/// `get k1 ... kN\r\n`.
pub fn mc_get<'a>(out: &mut Vec<u8>, keys: impl Iterator<Item = &'a [u8]>) {
    out.extend_from_slice(b"get");
    for k in keys {
        out.push(b' ');
        out.extend_from_slice(k);
    }
    out.extend_from_slice(b"\r\n");
}

/// Reads one RESP reply to a request of `kind`. For reads, `value(i, bytes)` is called for
/// every key `i` (0-based, request order) that was found. `Ok(None)`: not complete yet.
pub fn resp_reply(
    buf: &[u8],
    kind: Kind,
    mut value: impl FnMut(usize, &[u8]),
) -> Result<Option<(usize, Status)>, String> {
    let Some((r, n)) = larder_resp::parse_reply(buf).map_err(|e| format!("bad RESP reply: {e:?}"))? else {
        return Ok(None);
    };
    if let Reply::Error(e) | Reply::BlobError(e) = r {
        return Ok(Some((n, Status::Error(String::from_utf8_lossy(e).into_owned()))));
    }
    let unexpected = |r: &Reply| Err(format!("unexpected reply {r:?} to {kind:?}"));
    match (kind, &r) {
        (Kind::Set, Reply::Simple(b"OK")) => {}
        (Kind::Get(1), Reply::Bulk(b)) => value(0, b),
        (Kind::Get(1), Reply::NullBulk | Reply::Null) => {}
        (Kind::Get(k), Reply::Array(items)) if k > 1 && items.len() == k as usize => {
            for (i, it) in items.iter().enumerate() {
                match it {
                    Reply::Bulk(b) => value(i, b),
                    Reply::NullBulk | Reply::Null => {}
                    other => return unexpected(other),
                }
            }
        }
        _ => return unexpected(&r),
    }
    Ok(Some((n, Status::Ok)))
}

fn line_end(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|i| from + i)
}

fn is_error_line(line: &[u8]) -> bool {
    line == b"ERROR" || line.starts_with(b"SERVER_ERROR") || line.starts_with(b"CLIENT_ERROR")
}

/// Reads one memcached text reply to a request of `kind`. For reads, `value(key, bytes)` is
/// called for every `VALUE` block. `scratch` holds the blocks' positions between the check
/// that the reply is complete and the calls. `Ok(None)`: not complete yet.
pub fn mc_reply(
    buf: &[u8],
    kind: Kind,
    scratch: &mut Vec<(Range<usize>, Range<usize>)>,
    mut value: impl FnMut(&[u8], &[u8]),
) -> Result<Option<(usize, Status)>, String> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    match kind {
        Kind::Set => {
            let Some(e) = line_end(buf, 0) else { return Ok(None) };
            let line = &buf[..e];
            if line == b"STORED" {
                Ok(Some((e + 2, Status::Ok)))
            } else if is_error_line(line) || line == b"NOT_STORED" {
                Ok(Some((e + 2, Status::Error(text(line)))))
            } else {
                Err(format!("unexpected reply {:?} to set", text(line)))
            }
        }
        Kind::Get(_) => {
            scratch.clear();
            let mut p = 0;
            loop {
                let Some(e) = line_end(buf, p) else { return Ok(None) };
                let line = &buf[p..e];
                if line == b"END" {
                    for (k, v) in scratch.iter() {
                        value(&buf[k.clone()], &buf[v.clone()]);
                    }
                    return Ok(Some((e + 2, Status::Ok)));
                }
                if is_error_line(line) {
                    return Ok(Some((e + 2, Status::Error(text(line)))));
                }
                let mut t = line.split(|&c| c == b' ');
                let (Some(b"VALUE"), Some(key), Some(_flags), Some(len)) = (t.next(), t.next(), t.next(), t.next())
                else {
                    return Err(format!("unexpected reply line {:?} to get", text(line)));
                };
                let len: usize =
                    std::str::from_utf8(len).ok().and_then(|s| s.parse().ok()).ok_or("bad VALUE length")?;
                let start = e + 2;
                let end = start + len;
                if buf.len() < end + 2 {
                    return Ok(None);
                }
                if &buf[end..end + 2] != b"\r\n" {
                    return Err("VALUE data block not followed by \\r\\n".into());
                }
                let k0 = p + 6;
                scratch.push((k0..k0 + key.len(), start..end));
                p = end + 2;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp_requests_are_well_formed() {
        let mut out = Vec::new();
        resp_set(&mut out, b"k1", 3, |o| o.extend_from_slice(b"abc"));
        resp_get(&mut out, [&b"k1"[..]].into_iter());
        resp_get(&mut out, [&b"a"[..], b"bc"].into_iter());
        assert_eq!(
            out,
            b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$3\r\nabc\r\n*2\r\n$3\r\nGET\r\n$2\r\nk1\r\n*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$2\r\nbc\r\n"
        );
        // The server's own parser reads them back.
        let mut args = larder_resp::Args::new();
        let n = larder_resp::parse_command_into(&out, &larder_resp::Limits::DEFAULT, &mut args).unwrap().unwrap();
        assert_eq!(args.get(&out, 2), Some(&b"abc"[..]));
        assert_eq!(n, 30);
    }

    #[test]
    fn mc_requests_are_well_formed() {
        let mut out = Vec::new();
        mc_set(&mut out, b"k1", 3, |o| o.extend_from_slice(b"abc"));
        mc_get(&mut out, [&b"a"[..], b"bc"].into_iter());
        assert_eq!(out, b"set k1 0 0 3\r\nabc\r\nget a bc\r\n");
    }

    type Values = Vec<(usize, Vec<u8>)>;

    fn resp_all(buf: &[u8], kind: Kind) -> (Option<(usize, Status)>, Values) {
        let mut got = Vec::new();
        let r = resp_reply(buf, kind, |i, v| got.push((i, v.to_vec()))).unwrap();
        (r, got)
    }

    #[test]
    fn resp_replies_are_read_whole_or_not_at_all() {
        assert_eq!(resp_all(b"+OK\r\n", Kind::Set).0, Some((5, Status::Ok)));
        assert_eq!(resp_all(b"+OK\r", Kind::Set).0, None);
        assert_eq!(resp_all(b"-ERR x\r\n", Kind::Set).0, Some((8, Status::Error("ERR x".into()))));
        let (r, got) = resp_all(b"$3\r\nabc\r\n+OK", Kind::Get(1));
        assert_eq!(r, Some((9, Status::Ok)));
        assert_eq!(got, vec![(0, b"abc".to_vec())]);
        let (r, got) = resp_all(b"$3\r\nab", Kind::Get(1));
        assert_eq!((r, got.len()), (None, 0));
        let (r, got) = resp_all(b"$-1\r\n", Kind::Get(1));
        assert_eq!((r, got.len()), (Some((5, Status::Ok)), 0));
        let (r, got) = resp_all(b"*3\r\n$1\r\na\r\n$-1\r\n$2\r\nbc\r\n", Kind::Get(3));
        assert_eq!(r, Some((24, Status::Ok)));
        assert_eq!(got, vec![(0, b"a".to_vec()), (2, b"bc".to_vec())]);
        // The wrong shape of reply is a protocol error, not a silent success.
        assert!(resp_reply(b":1\r\n", Kind::Set, |_, _| {}).is_err());
        assert!(resp_reply(b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", Kind::Get(3), |_, _| {}).is_err());
    }

    #[test]
    fn mc_replies_are_read_whole_or_not_at_all() {
        let mut s = Vec::new();
        assert_eq!(mc_reply(b"STORED\r\n", Kind::Set, &mut s, |_, _| {}).unwrap(), Some((8, Status::Ok)));
        assert_eq!(mc_reply(b"STORED\r", Kind::Set, &mut s, |_, _| {}).unwrap(), None);
        assert_eq!(
            mc_reply(b"SERVER_ERROR out of memory\r\n", Kind::Set, &mut s, |_, _| {}).unwrap(),
            Some((28, Status::Error("SERVER_ERROR out of memory".into())))
        );
        let buf = b"VALUE a 0 3\r\nabc\r\nVALUE bc 5 2 99\r\nxy\r\nEND\r\nSTORED\r\n";
        let mut got = Vec::new();
        let r = mc_reply(buf, Kind::Get(3), &mut s, |k, v| got.push((k.to_vec(), v.to_vec()))).unwrap();
        assert_eq!(r, Some((buf.len() - 8, Status::Ok)));
        assert_eq!(got, vec![(b"a".to_vec(), b"abc".to_vec()), (b"bc".to_vec(), b"xy".to_vec())]);
        // Every prefix is incomplete and calls nothing.
        for i in 0..buf.len() - 8 {
            let mut calls = 0;
            assert_eq!(mc_reply(&buf[..i], Kind::Get(3), &mut s, |_, _| calls += 1).unwrap(), None, "prefix {i}");
            assert_eq!(calls, 0);
        }
        assert_eq!(mc_reply(b"END\r\n", Kind::Get(1), &mut s, |_, _| {}).unwrap(), Some((5, Status::Ok)));
        assert!(mc_reply(b"VALUE a 0 3\r\nabcd\r\nEND\r\n", Kind::Get(1), &mut s, |_, _| {}).is_err());
        assert!(mc_reply(b"HUH\r\n", Kind::Get(1), &mut s, |_, _| {}).is_err());
    }
}
