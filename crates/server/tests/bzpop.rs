//! BZPOPMIN, BZPOPMAX and BZMPOP over real sockets: exact bytes in, exact bytes out.
//! Expected replies were taken from redis-server 7.0.15 (RESP2, and RESP3 after `HELLO 3`).

mod common;

use std::time::{Duration, Instant};

use common::{blocked_clients, cmd, silent, start, start_with, wait_blocked, Raw};

fn c(r: &mut Raw, args: &[&str], want: &str) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    r.check(&cmd(&a), want.as_bytes());
}

fn send(r: &mut Raw, args: &[&str]) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    r.send(&cmd(&a));
}

/// Switches to RESP3 and skips HELLO's reply.
fn hello3(r: &mut Raw) {
    send(r, &["HELLO", "3"]);
    r.s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
    while !r.read_n(1 << 16).is_empty() {}
    r.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
}

#[test]
fn served_at_once_when_a_set_has_members() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    c(&mut r, &["ZADD", "z", "1", "a", "2", "b", "3.5", "c"], ":3\r\n");
    c(&mut r, &["BZPOPMIN", "z", "0"], "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n");
    c(&mut r, &["BZPOPMAX", "z", "0"], "*3\r\n$1\r\nz\r\n$1\r\nc\r\n$3\r\n3.5\r\n");
    // The first non-empty key in argument order.
    c(&mut r, &["BZPOPMIN", "nokey", "z", "0.1"], "*3\r\n$1\r\nz\r\n$1\r\nb\r\n$1\r\n2\r\n");
    c(&mut r, &["EXISTS", "z"], ":0\r\n");
    c(&mut r, &["ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"], ":4\r\n");
    c(&mut r, &["BZMPOP", "0", "1", "z", "MIN"], "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    c(
        &mut r,
        &["BZMPOP", "0", "2", "nokey", "z", "MAX", "COUNT", "2"],
        "*2\r\n$1\r\nz\r\n*2\r\n*2\r\n$1\r\nd\r\n$1\r\n4\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
    );
    // A count past the size takes what there is; the emptied key is gone.
    c(&mut r, &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "10"], "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n");
    c(&mut r, &["EXISTS", "z"], ":0\r\n");
    // RESP3: scores are doubles.
    hello3(&mut r);
    c(&mut r, &["ZADD", "z", "1", "a", "2.5", "b", "3", "c"], ":3\r\n");
    c(&mut r, &["BZPOPMIN", "z", "0"], "*3\r\n$1\r\nz\r\n$1\r\na\r\n,1\r\n");
    c(&mut r, &["BZPOPMAX", "z", "0"], "*3\r\n$1\r\nz\r\n$1\r\nc\r\n,3\r\n");
    c(&mut r, &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "5"], "*2\r\n$1\r\nz\r\n*1\r\n*2\r\n$1\r\nb\r\n,2.5\r\n");
}

#[test]
fn blocked_then_woken_by_zadd_from_another_connection() {
    let s = start_with(|a| a.threads = Some(2));
    let mut p = Raw::connect(s.resp);
    let mut w = Raw::connect(s.resp);
    c(&mut w, &["PING"], "+PONG\r\n");
    send(&mut w, &["BZPOPMIN", "z1", "z2", "0"]);
    wait_blocked(&mut p, 1);
    silent(&mut w);
    c(&mut p, &["ZADD", "z2", "5", "m", "7", "n"], ":2\r\n");
    w.check(b"", b"*3\r\n$2\r\nz2\r\n$1\r\nm\r\n$1\r\n5\r\n");
    wait_blocked(&mut p, 0);
    c(&mut p, &["ZRANGE", "z2", "0", "-1"], "*1\r\n$1\r\nn\r\n");
    // BZPOPMAX and BZMPOP wait the same way.
    send(&mut w, &["BZPOPMAX", "z1", "0"]);
    wait_blocked(&mut p, 1);
    c(&mut p, &["ZADD", "z1", "1", "x", "2", "y"], ":2\r\n");
    w.check(b"", b"*3\r\n$2\r\nz1\r\n$1\r\ny\r\n$1\r\n2\r\n");
    send(&mut w, &["BZMPOP", "0", "2", "z3", "z4", "MAX", "COUNT", "2"]);
    wait_blocked(&mut p, 1);
    c(&mut p, &["ZADD", "z4", "1", "a", "2", "b", "3", "c"], ":3\r\n");
    w.check(b"", b"*2\r\n$2\r\nz4\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n");
    send(&mut w, &["BZMPOP", "0", "1", "z3", "MIN"]);
    wait_blocked(&mut p, 1);
    c(&mut p, &["ZADD", "z3", "9", "a", "8", "b"], ":2\r\n");
    w.check(b"", b"*2\r\n$2\r\nz3\r\n*1\r\n*2\r\n$1\r\nb\r\n$1\r\n8\r\n");
    wait_blocked(&mut p, 0);
}

#[test]
fn waiters_are_served_in_the_order_they_blocked() {
    let s = start_with(|a| a.threads = Some(2));
    let mut p = Raw::connect(s.resp);
    let mut a = Raw::connect(s.resp);
    let mut b = Raw::connect(s.resp);
    send(&mut a, &["BZPOPMIN", "q", "0"]);
    wait_blocked(&mut p, 1);
    send(&mut b, &["BZPOPMIN", "q", "0"]);
    wait_blocked(&mut p, 2);
    c(&mut p, &["ZADD", "q", "1", "first"], ":1\r\n");
    a.check(b"", b"*3\r\n$1\r\nq\r\n$5\r\nfirst\r\n$1\r\n1\r\n");
    silent(&mut b);
    c(&mut p, &["ZADD", "q", "2", "second", "3", "third"], ":2\r\n");
    b.check(b"", b"*3\r\n$1\r\nq\r\n$6\r\nsecond\r\n$1\r\n2\r\n");
    wait_blocked(&mut p, 0);
    c(&mut p, &["ZRANGE", "q", "0", "-1"], "*1\r\n$5\r\nthird\r\n");
}

#[test]
fn timeouts_reply_null_in_resp2_and_resp3() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    for (args, null) in [
        (&["BZPOPMIN", "nx", "0.1"][..], "*-1\r\n"),
        (&["BZPOPMAX", "nx", "nx2", "0.1"][..], "*-1\r\n"),
        (&["BZMPOP", "0.1", "1", "nx", "MIN", "COUNT", "3"][..], "*-1\r\n"),
    ] {
        let t = Instant::now();
        c(&mut r, args, null);
        let e = t.elapsed();
        assert!(e >= Duration::from_millis(100) && e < Duration::from_secs(2), "{args:?} {e:?}");
    }
    hello3(&mut r);
    c(&mut r, &["BZPOPMIN", "nx", "0.1"], "_\r\n");
    c(&mut r, &["BZPOPMAX", "nx", "0.1"], "_\r\n");
    c(&mut r, &["BZMPOP", "0.1", "1", "nx", "MAX"], "_\r\n");
    c(&mut r, &["PING"], "+PONG\r\n");
}

#[test]
fn inside_multi_an_empty_key_replies_null_at_once() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    c(&mut r, &["ZADD", "z", "1", "a"], ":1\r\n");
    c(&mut r, &["MULTI"], "+OK\r\n");
    c(&mut r, &["BZPOPMIN", "nokey", "0"], "+QUEUED\r\n");
    c(&mut r, &["BZMPOP", "0", "1", "nokey", "MIN"], "+QUEUED\r\n");
    c(&mut r, &["BZPOPMAX", "z", "0"], "+QUEUED\r\n");
    c(&mut r, &["BZPOPMAX", "z", "0"], "+QUEUED\r\n");
    c(&mut r, &["EXEC"], "*4\r\n*-1\r\n*-1\r\n*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n*-1\r\n");
    assert_eq!(blocked_clients(&mut r), 0);
}

#[test]
fn wrong_type_keys() {
    let s = start_with(|a| a.threads = Some(2));
    let mut r = Raw::connect(s.resp);
    let wt = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    c(&mut r, &["SET", "s", "x"], "+OK\r\n");
    // Met before a non-empty set: the error; missing keys before it are skipped.
    c(&mut r, &["BZPOPMIN", "nokey", "s", "0"], wt);
    c(&mut r, &["BZPOPMAX", "s", "0"], wt);
    c(&mut r, &["BZMPOP", "0", "1", "s", "MIN"], wt);
    c(&mut r, &["ZADD", "z", "1", "a"], ":1\r\n");
    c(&mut r, &["BZPOPMIN", "z", "s", "0"], "*3\r\n$1\r\nz\r\n$1\r\na\r\n$1\r\n1\r\n");
    // A parked client ignores a key that becomes another type, and is served once it is
    // a sorted set again.
    let mut w = Raw::connect(s.resp);
    send(&mut w, &["BZPOPMIN", "k", "0"]);
    wait_blocked(&mut r, 1);
    c(&mut r, &["LPUSH", "k", "e"], ":1\r\n");
    silent(&mut w);
    assert_eq!(blocked_clients(&mut r), 1);
    c(&mut r, &["DEL", "k"], ":1\r\n");
    c(&mut r, &["ZADD", "k", "4", "m"], ":1\r\n");
    w.check(b"", b"*3\r\n$1\r\nk\r\n$1\r\nm\r\n$1\r\n4\r\n");
}

#[test]
fn argument_errors() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    c(&mut r, &["ZADD", "z", "1", "a"], ":1\r\n");
    let not_float = "-ERR timeout is not a float or out of range\r\n";
    let negative = "-ERR timeout is negative\r\n";
    let syntax = "-ERR syntax error\r\n";
    c(&mut r, &["BZPOPMIN", "z", "abc"], not_float);
    c(&mut r, &["BZPOPMIN", "z", "-1"], negative);
    c(&mut r, &["BZPOPMAX", "z", "inf"], negative);
    c(&mut r, &["BZPOPMIN", "z"], "-ERR wrong number of arguments for 'bzpopmin' command\r\n");
    c(&mut r, &["BZPOPMAX"], "-ERR wrong number of arguments for 'bzpopmax' command\r\n");
    c(&mut r, &["BZMPOP", "0", "1", "z"], "-ERR wrong number of arguments for 'bzmpop' command\r\n");
    c(&mut r, &["BZMPOP", "0", "0", "z", "MIN"], "-ERR numkeys should be greater than 0\r\n");
    c(&mut r, &["BZMPOP", "0", "-1", "z", "MIN"], "-ERR numkeys should be greater than 0\r\n");
    c(&mut r, &["BZMPOP", "0", "x", "z", "MIN"], "-ERR numkeys should be greater than 0\r\n");
    c(&mut r, &["BZMPOP", "0", "5", "z", "MIN"], syntax);
    c(&mut r, &["BZMPOP", "0", "1", "z", "FOO"], syntax);
    c(&mut r, &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "0"], "-ERR count should be greater than 0\r\n");
    c(&mut r, &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "x"], "-ERR count should be greater than 0\r\n");
    c(&mut r, &["BZMPOP", "0", "1", "z", "MIN", "COUNT"], syntax);
    c(&mut r, &["BZMPOP", "0", "1", "z", "MIN", "COUNT", "1", "COUNT", "1"], syntax);
    c(&mut r, &["BZMPOP", "x", "1", "z", "MIN"], not_float);
    c(&mut r, &["BZMPOP", "-1", "1", "z", "MIN"], negative);
    // As Redis, numkeys is checked before the timeout.
    c(&mut r, &["BZMPOP", "x", "0", "z", "MIN"], "-ERR numkeys should be greater than 0\r\n");
    // Nothing was popped by any of them.
    c(&mut r, &["ZCARD", "z"], ":1\r\n");
    c(&mut r, &["COMMAND", "GETKEYS", "BZMPOP", "0", "2", "a", "b", "MIN"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    c(&mut r, &["COMMAND", "GETKEYS", "BZPOPMIN", "a", "b", "0"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
}

/// A local process attached to the server's segment adds a member through the engine
/// API: the engine's futex wakes the watcher, and the blocked client is served.
#[test]
fn a_member_added_by_a_local_process_serves_a_blocked_client() {
    struct Unlink(String);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = larder_engine::Arena::unlink(&self.0);
        }
    }
    let name = format!("larder-bzpop-test-{}", std::process::id());
    let _unlink = Unlink(name.clone());
    let s = start_with(|a| a.shm = Some(name.clone()));
    let mut p = Raw::connect(s.resp);
    let mut w = Raw::connect(s.resp);
    send(&mut w, &["BZPOPMAX", "jobs", "0"]);
    wait_blocked(&mut p, 1);
    {
        let store = larder_engine::Store::attach(&name).unwrap();
        let mut h = store.handle().unwrap();
        h.coll_write(0, b"jobs", larder_engine::Kind::ZSet, true, |c| c.zput(b"job-1", 2.5)).unwrap();
    }
    w.check(b"", b"*3\r\n$4\r\njobs\r\n$5\r\njob-1\r\n$3\r\n2.5\r\n");
    wait_blocked(&mut p, 0);
}
