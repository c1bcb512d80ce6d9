//! Hostile input: requests that cost the server more than their bytes.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::*;

/// The bound on a whole trickle below. Checked on from where it stopped, each takes about
/// 0.2 s in release and 1-1.5 s in debug here; checked from the start after every read,
/// 5-11 s in release and 90-130 s in debug. The bound sits far from both, so
/// that a loaded 2-core CI machine does not fail the fixed code.
fn trickle_limit() -> Duration {
    Duration::from_secs(if cfg!(debug_assertions) { 20 } else { 3 })
}

/// Whether a trickle of chunks, each followed by a round trip through the worker (`took`:
/// the time of each), was too slow: over [`trickle_limit`] in all *and* slowing down as it
/// went, its last quarter's round trips taking over three times its first quarter's. Work
/// redone from the start at every read grows with the chunk number (the last quarter then
/// takes about 7 times the first); a machine that is merely busy slows every round trip
/// alike, and must not fail the test.
fn trickle_too_slow(took: &[Duration]) -> Option<String> {
    let all: Duration = took.iter().sum();
    let q = took.len() / 4;
    let (first, last): (Duration, Duration) = (took[..q].iter().sum(), took[took.len() - q..].iter().sum());
    let growing = last > first * 3;
    (all > trickle_limit() && growing).then(|| format!("{all:?} in all, first quarter {first:?}, last {last:?}"))
}

/// A request of many small arguments arriving over many reads is checked on from where
/// each read left it. Parsed again from its start after every read, it took a whole
/// worker (a million arguments in 5000 reads: 11 s here) and every other client of the
/// worker waited that long for each reply.
#[test]
fn a_long_request_trickling_in_does_not_starve_other_clients() {
    let srv = start_with(|a| a.threads = Some(1));
    let mut slow = Raw::connect(srv.resp);
    let mut other = Raw::connect(srv.resp);
    const N: usize = 1_000_000;
    slow.send(format!("*{}\r\n$5\r\nRPUSH\r\n$4\r\nlong\r\n", N + 2).as_bytes());
    let args = b"$1\r\na\r\n".repeat(N);
    let start = Instant::now();
    let mut took = Vec::new();
    for chunk in args.chunks(args.len() / 5000) {
        let t = Instant::now();
        slow.send(chunk);
        // A round trip through the worker, which has then read the chunk.
        other.check(b"PING\r\n", b"+PONG\r\n");
        took.push(t.elapsed());
    }
    // The push itself may take seconds in a debug build on a busy machine (see below).
    let want = format!(":{N}\r\n").into_bytes();
    assert_eq!(slow.read_n_within(want.len(), trickle_limit()), want);
    eprintln!("{:?} in all, slowest PING {:?}", start.elapsed(), took.iter().max());
    if let Some(e) = trickle_too_slow(&took) {
        panic!("the trickle slowed down as it went: {e}");
    }
}

/// The same for a memcached multiget line, which may grow without bound: it was looked
/// through again for its `\n` after every read (20 MB in 5000 reads: 5 s here).
#[test]
fn a_long_multiget_trickling_in_does_not_starve_other_clients() {
    let srv = start_with(|a| a.threads = Some(1));
    let mut slow = Raw::connect(srv.mc);
    let mut other = Raw::connect(srv.mc);
    other.check(b"set key-0000000001 0 0 1\r\nv\r\n", b"STORED\r\n");
    let mut line = b"get ".to_vec();
    for i in 0..1_300_000 {
        line.extend_from_slice(format!("key-{i:010} ").as_bytes());
    }
    let start = Instant::now();
    let mut took = Vec::new();
    for chunk in line.chunks(line.len() / 5000) {
        let t = Instant::now();
        slow.send(chunk);
        other.check(b"version\r\n", b"VERSION 1.6.21\r\n");
        took.push(t.elapsed());
    }
    // Looking up 1.3M keys takes seconds in a debug build on a busy machine: the bound is
    // trickle_limit, on the whole, not the 5 s of one reply.
    slow.send(b"\r\n");
    let want = b"VALUE key-0000000001 0 1\r\nv\r\nEND\r\n";
    assert_eq!(slow.read_n_within(want.len(), trickle_limit()), want);
    eprintln!("{:?} in all", start.elapsed());
    if let Some(e) = trickle_too_slow(&took) {
        panic!("the trickle slowed down as it went: {e}");
    }
}

/// A peer that sends its last requests and shuts down its side at once (`printf 'PING\r\n'
/// | nc -N`) gets its replies, and then the server closes. The FIN came with the data, in
/// one wake-up, and the server skipped the read that would have said EOF (a short read
/// meant "nothing more"): the connection stayed in CLOSE-WAIT, its descriptor never freed.
#[test]
fn a_peer_that_shuts_down_its_side_after_its_requests_is_closed() {
    let srv = start();
    let cases: [(u16, &[u8], &[u8]); 4] = [
        (srv.resp, b"PING\r\n", b"+PONG\r\n"),
        (srv.resp, b"*2\r\n$3\r\nGET", b""),
        (srv.mc, b"version\r\n", b"VERSION 1.6.21\r\n"),
        (srv.mc, b"set b 0 0 100\r\nabc\r\n", b""),
    ];
    for round in 0..10 {
        for (port, req, reply) in cases {
            let mut c = Raw::connect(port);
            c.send(req);
            c.s.shutdown(std::net::Shutdown::Write).unwrap();
            // Everything up to the server's EOF (or the 5 s read timeout).
            let mut got = Vec::new();
            let eof = loop {
                let mut b = [0u8; 256];
                match c.s.read(&mut b) {
                    Ok(0) => break true,
                    Ok(n) => got.extend_from_slice(&b[..n]),
                    Err(_) => break false,
                }
            };
            let req = String::from_utf8_lossy(req);
            assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(reply), "round {round}: {req:?}");
            assert!(eof, "round {round}: {req:?} then FIN: the server did not close");
        }
    }
}
