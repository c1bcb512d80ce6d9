//! `larder server --floor`: the benchmark floor. The worker's event loop, buffers and
//! parsers run as usual, but GET/MGET (RESP) and get/gets (memcached) answer a fixed value
//! and SET/set answer `OK`/`STORED` without touching the keyspace. What such a server
//! achieves is what the network path alone allows on the machine: the limit no store
//! behind the same loop can beat. Every other command runs normally.

use larder_memcache::{reply, Limits, Request, RetrieveCommand, StoreCommand};
use larder_resp::{Args, Writer};

/// The fixed value GET answers with: `size` printable bytes.
pub fn value(size: usize) -> Vec<u8> {
    (0..size).map(|i| b'a' + (i % 26) as u8).collect()
}

/// Answers one RESP request if it is a GET, MGET or SET; `false` leaves it to the
/// dispatcher.
pub(crate) fn resp(args: &Args, buf: &[u8], out: &mut Writer<'_>, value: &[u8]) -> bool {
    let name = args.get(buf, 0).unwrap_or(b"");
    let n = args.len();
    if name.eq_ignore_ascii_case(b"GET") && n == 2 {
        out.bulk(value);
    } else if name.eq_ignore_ascii_case(b"SET") && n >= 3 {
        out.ok();
    } else if name.eq_ignore_ascii_case(b"MGET") && n >= 2 {
        out.array(n - 1);
        for _ in 1..n {
            out.bulk(value);
        }
    } else {
        return false;
    }
    true
}

/// Answers the memcached requests in `buf`: get/gets and set by the floor, anything else
/// (and anything that does not parse) through `normal`, the real memcached path, which
/// returns how many bytes it consumed. Returns the bytes consumed.
pub(crate) fn memcache(
    buf: &[u8],
    out: &mut Vec<u8>,
    value: &[u8],
    item_size_max: usize,
    mut normal: impl FnMut(&[u8], &mut Vec<u8>) -> usize,
) -> usize {
    let limits = Limits { item_size_max, ..Limits::default() };
    let mut pos = 0;
    while pos < buf.len() {
        match larder_memcache::parse(&buf[pos..], &limits) {
            Ok(Some((Request::Get { command: c @ (RetrieveCommand::Get | RetrieveCommand::Gets), keys, .. }, n))) => {
                for k in keys {
                    reply::value(out, k, 0, value, c.returns_cas().then_some(1));
                }
                reply::end(out);
                pos += n;
            }
            Ok(Some((Request::Store(s), n))) if s.command == StoreCommand::Set => {
                if !s.noreply {
                    out.extend_from_slice(b"STORED\r\n");
                }
                pos += n;
            }
            Ok(Some((_, n))) => {
                normal(&buf[pos..pos + n], out);
                pos += n;
            }
            Ok(None) => break,
            // Errors (and what follows them) take the real path, with its exact replies.
            Err(_) => return pos + normal(&buf[pos..], out),
        }
    }
    pos
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memcache_floor_answers_get_and_set_and_hands_the_rest_on() {
        let v = value(4);
        assert_eq!(v, b"abcd");
        let mut out = Vec::new();
        let mut handed = Vec::new();
        let buf = b"set k 0 0 2\r\nhi\r\nget a b\r\nversion\r\nget";
        let n = memcache(buf, &mut out, &v, 1 << 20, |b, _| {
            handed.push(b.to_vec());
            b.len()
        });
        assert_eq!(n, buf.len() - 3, "the incomplete `get` waits for more bytes");
        assert_eq!(out, b"STORED\r\nVALUE a 0 4\r\nabcd\r\nVALUE b 0 4\r\nabcd\r\nEND\r\n");
        assert_eq!(handed, vec![b"version\r\n".to_vec()]);
    }
}
