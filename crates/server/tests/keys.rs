//! The keyspace family over real sockets: raw bytes in, exact bytes out (the expected
//! bytes are what redis-server 7 replies), plus SCAN over thousands of keys, expiry in real
//! time, and SWAPDB / MOVE / COPY across databases.
mod common;
use common::*;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A parsed RESP2 reply, for the tests that cannot know the exact bytes in advance.
#[derive(Debug, PartialEq)]
enum Reply {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    fn int(&self) -> i64 {
        match self {
            Reply::Int(n) => *n,
            r => panic!("expected an integer, got {r:?}"),
        }
    }
    fn bulk(&self) -> Vec<u8> {
        match self {
            Reply::Bulk(Some(b)) => b.clone(),
            r => panic!("expected a bulk string, got {r:?}"),
        }
    }
    fn array(self) -> Vec<Reply> {
        match self {
            Reply::Array(Some(a)) => a,
            r => panic!("expected an array, got {r:?}"),
        }
    }
}

/// A client that parses replies.
struct Client {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Client {
    fn connect(port: u16) -> Client {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.set_nodelay(true).unwrap();
        Client { r: BufReader::new(s.try_clone().unwrap()), w: s }
    }

    fn call(&mut self, args: &[&[u8]]) -> Reply {
        self.w.write_all(&cmd(args)).unwrap();
        self.read()
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        assert!(l.ends_with("\r\n"), "truncated reply line {l:?}");
        l.truncate(l.len() - 2);
        l
    }

    fn read(&mut self) -> Reply {
        let l = self.line();
        let (t, rest) = l.split_at(1);
        match t {
            "+" => Reply::Simple(rest.to_string()),
            "-" => Reply::Error(rest.to_string()),
            ":" => Reply::Int(rest.parse().unwrap()),
            "$" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Bulk(None);
                }
                let mut b = vec![0u8; n as usize + 2];
                self.r.read_exact(&mut b).unwrap();
                b.truncate(n as usize);
                Reply::Bulk(Some(b))
            }
            "*" => {
                let n: i64 = rest.parse().unwrap();
                if n < 0 {
                    return Reply::Array(None);
                }
                Reply::Array(Some((0..n).map(|_| self.read()).collect()))
            }
            _ => panic!("unexpected reply {l:?}"),
        }
    }

    /// Every key SCAN returns from cursor 0 to the end (with duplicates counted once) and
    /// the number of calls it took.
    fn scan_all(&mut self, extra: &[&[u8]]) -> (HashSet<Vec<u8>>, usize) {
        let mut seen = HashSet::new();
        let mut cursor = b"0".to_vec();
        let mut calls = 0;
        loop {
            let mut args: Vec<&[u8]> = vec![b"SCAN", &cursor];
            args.extend_from_slice(extra);
            let mut r = self.call(&args).array();
            assert_eq!(r.len(), 2);
            let keys = r.pop().unwrap().array();
            cursor = r.pop().unwrap().bulk();
            calls += 1;
            for k in keys {
                seen.insert(k.bulk());
            }
            if cursor == b"0" {
                return (seen, calls);
            }
            assert!(calls < 100_000, "SCAN does not finish");
        }
    }
}

#[test]
fn del_unlink_exists_type_touch() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    c.check(&cmd(&[b"SET", b"b", b"hello"]), b"+OK\r\n");
    c.check(&cmd(&[b"DEL", b"a", b"b", b"c"]), b":2\r\n");
    c.check(&cmd(&[b"DEL", b"a"]), b":0\r\n");
    c.check(&cmd(&[b"EXISTS", b"a", b"b", b"a"]), b":0\r\n");
    c.check(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    // A key named twice counts twice for EXISTS and TOUCH, once for DEL.
    c.check(&cmd(&[b"EXISTS", b"a", b"a", b"x"]), b":2\r\n");
    c.check(&cmd(&[b"TOUCH", b"a", b"x", b"a"]), b":2\r\n");
    c.check(&cmd(&[b"TYPE", b"a"]), b"+string\r\n");
    c.check(&cmd(&[b"TYPE", b"nope"]), b"+none\r\n");
    c.check(&cmd(&[b"SET", b"b", b"2"]), b"+OK\r\n");
    c.check(&cmd(&[b"DEL", b"a", b"a"]), b":1\r\n");
    c.check(&cmd(&[b"UNLINK", b"b", b"x"]), b":1\r\n");
    c.check(&cmd(&[b"UNLINK", b"b"]), b":0\r\n");
    c.check(b"del x\r\n", b":0\r\n");
    for name in ["del", "unlink", "exists", "touch", "type"] {
        let want = format!("-ERR wrong number of arguments for '{name}' command\r\n");
        c.check(&cmd(&[name.to_uppercase().as_bytes()]), want.as_bytes());
    }
    c.check(&cmd(&[b"TYPE", b"a", b"b"]), b"-ERR wrong number of arguments for 'type' command\r\n");
}

#[test]
fn expire_options_and_errors() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    let compat = b"-ERR NX and XX, GT or LT options at the same time are not compatible\r\n";
    for cmd_name in [&b"EXPIRE"[..], b"PEXPIRE", b"EXPIREAT", b"PEXPIREAT"] {
        c.check(&cmd(&[cmd_name, b"a", b"100", b"NX", b"XX"]), compat);
        c.check(&cmd(&[cmd_name, b"a", b"100", b"nx", b"gt"]), compat);
        c.check(&cmd(&[cmd_name, b"a", b"100", b"lt", b"nx"]), compat);
        c.check(
            &cmd(&[cmd_name, b"a", b"100", b"gt", b"lt"]),
            b"-ERR GT and LT options at the same time are not compatible\r\n",
        );
        c.check(&cmd(&[cmd_name, b"a", b"100", b"foo"]), b"-ERR Unsupported option foo\r\n");
        c.check(&cmd(&[cmd_name, b"a", b"100", b"xx", b"Bar"]), b"-ERR Unsupported option Bar\r\n");
        // Options are checked before the time, and both before the key.
        c.check(&cmd(&[cmd_name, b"nope", b"abc", b"foo"]), b"-ERR Unsupported option foo\r\n");
        c.check(&cmd(&[cmd_name, b"nope", b"abc"]), b"-ERR value is not an integer or out of range\r\n");
        c.check(&cmd(&[cmd_name, b"a", b"1.5"]), b"-ERR value is not an integer or out of range\r\n");
        c.check(&cmd(&[cmd_name, b"a", b""]), b"-ERR value is not an integer or out of range\r\n");
        c.check(&cmd(&[cmd_name, b"a", b"99999999999999999999"]), b"-ERR value is not an integer or out of range\r\n");
        let name = String::from_utf8_lossy(cmd_name).to_lowercase();
        c.check(&cmd(&[cmd_name, b"a"]), format!("-ERR wrong number of arguments for '{name}' command\r\n").as_bytes());
    }
    // Overflow of the unit conversion or of the addition of the current time.
    let invalid = |n: &str| format!("-ERR invalid expire time in '{n}' command\r\n").into_bytes();
    c.check(&cmd(&[b"EXPIRE", b"a", b"9223372036854775807"]), &invalid("expire"));
    c.check(&cmd(&[b"EXPIRE", b"a", b"9223372036854775"]), &invalid("expire"));
    c.check(&cmd(&[b"EXPIRE", b"a", b"-9223372036854775808"]), &invalid("expire"));
    c.check(&cmd(&[b"PEXPIRE", b"a", b"9223372036854775807"]), &invalid("pexpire"));
    c.check(&cmd(&[b"EXPIREAT", b"a", b"9223372036854775807"]), &invalid("expireat"));
    c.check(&cmd(&[b"EXPIRE", b"nope", b"9223372036854775807"]), &invalid("expire"));
    c.check(&cmd(&[b"EXISTS", b"a"]), b":1\r\n");
    // No base time to add: the largest PEXPIREAT is valid.
    c.check(&cmd(&[b"PEXPIREAT", b"a", b"9223372036854775807"]), b":1\r\n");
    c.check(&cmd(&[b"PEXPIRETIME", b"a"]), b":9223372036854775807\r\n");
    c.check(&cmd(&[b"EXPIRE", b"a", b"9223372036854"]), b":1\r\n");
    // A time in the past deletes the key, and says 1.
    c.check(&cmd(&[b"EXPIREAT", b"a", b"-1"]), b":1\r\n");
    c.check(&cmd(&[b"EXISTS", b"a"]), b":0\r\n");
    c.check(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    c.check(&cmd(&[b"PEXPIRE", b"a", b"0"]), b":1\r\n");
    c.check(&cmd(&[b"GET", b"a"]), b"$-1\r\n");
    c.check(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    c.check(&cmd(&[b"EXPIRE", b"a", b"-10"]), b":1\r\n");
    c.check(&cmd(&[b"TTL", b"a"]), b":-2\r\n");
    // Missing key: 0, whatever the options.
    c.check(&cmd(&[b"EXPIRE", b"nope", b"100"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"nope", b"100", b"nx"]), b":0\r\n");
    c.check(&cmd(&[b"PEXPIREAT", b"nope", b"1"]), b":0\r\n");

    // The conditions. "No expiry" counts as an infinite TTL for GT and LT.
    c.check(&cmd(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"100", b"XX"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"100", b"GT"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"100", b"XX", b"LT"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"100", b"XX", b"GT"]), b":0\r\n");
    c.check(&cmd(&[b"TTL", b"k"]), b":-1\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"100", b"LT"]), b":1\r\n");
    c.check(&cmd(&[b"TTL", b"k"]), b":100\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"50", b"GT"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"200", b"gt"]), b":1\r\n");
    c.check(&cmd(&[b"TTL", b"k"]), b":200\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"300", b"XX"]), b":1\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"400", b"LT"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"50", b"XX", b"LT"]), b":1\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"60", b"xx", b"lt"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"70", b"xx", b"gt"]), b":1\r\n");
    c.check(&cmd(&[b"TTL", b"k"]), b":70\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"100", b"NX"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"100", b"nx", b"nx"]), b":0\r\n");
    c.check(&cmd(&[b"PERSIST", b"k"]), b":1\r\n");
    c.check(&cmd(&[b"PERSIST", b"k"]), b":0\r\n");
    c.check(&cmd(&[b"PERSIST", b"nope"]), b":0\r\n");
    c.check(&cmd(&[b"EXPIRE", b"k", b"100", b"NX"]), b":1\r\n");
    c.check(&cmd(&[b"PEXPIRE", b"k", b"5000", b"LT"]), b":1\r\n");
    c.check(&cmd(&[b"TTL", b"k"]), b":5\r\n");

    // Absolute times read back exactly.
    c.check(&cmd(&[b"PEXPIREAT", b"k", b"4102444800123"]), b":1\r\n");
    c.check(&cmd(&[b"PEXPIRETIME", b"k"]), b":4102444800123\r\n");
    c.check(&cmd(&[b"EXPIRETIME", b"k"]), b":4102444800\r\n");
    c.check(&cmd(&[b"EXPIREAT", b"k", b"4102444801", b"GT"]), b":1\r\n");
    c.check(&cmd(&[b"PEXPIRETIME", b"k"]), b":4102444801000\r\n");
    c.check(&cmd(&[b"PERSIST", b"k"]), b":1\r\n");
    c.check(&cmd(&[b"EXPIRETIME", b"k"]), b":-1\r\n");
    c.check(&cmd(&[b"PEXPIRETIME", b"k"]), b":-1\r\n");
    c.check(&cmd(&[b"EXPIRETIME", b"nope"]), b":-2\r\n");
    c.check(&cmd(&[b"PEXPIRETIME", b"nope"]), b":-2\r\n");
    c.check(&cmd(&[b"TTL", b"k"]), b":-1\r\n");
    c.check(&cmd(&[b"PTTL", b"k"]), b":-1\r\n");
    c.check(&cmd(&[b"TTL", b"nope"]), b":-2\r\n");
    c.check(&cmd(&[b"PTTL", b"nope"]), b":-2\r\n");
    for name in ["ttl", "pttl", "persist", "expiretime", "pexpiretime"] {
        let want = format!("-ERR wrong number of arguments for '{name}' command\r\n");
        c.check(&cmd(&[name.as_bytes()]), want.as_bytes());
        c.check(&cmd(&[name.as_bytes(), b"a", b"b"]), want.as_bytes());
    }
}

#[test]
fn keys_expire_in_real_time() {
    let t = start();
    let mut c = Client::connect(t.resp);
    let mut raw = Raw::connect(t.resp);
    raw.check(&cmd(&[b"SET", b"short", b"v"]), b"+OK\r\n");
    raw.check(&cmd(&[b"PEXPIRE", b"short", b"100"]), b":1\r\n");
    let pttl = c.call(&[b"PTTL", b"short"]).int();
    assert!((1..=100).contains(&pttl), "PTTL {pttl}");
    raw.check(&cmd(&[b"TTL", b"short"]), b":0\r\n");
    raw.check(&cmd(&[b"EXISTS", b"short"]), b":1\r\n");
    std::thread::sleep(Duration::from_millis(150));
    raw.check(&cmd(&[b"EXISTS", b"short"]), b":0\r\n");
    raw.check(&cmd(&[b"GET", b"short"]), b"$-1\r\n");
    raw.check(&cmd(&[b"TTL", b"short"]), b":-2\r\n");
    raw.check(&cmd(&[b"PERSIST", b"short"]), b":0\r\n");
    raw.check(&cmd(&[b"EXPIRE", b"short", b"10"]), b":0\r\n");

    // Many short-lived keys go away without being touched (active expiry), and none is
    // reported by KEYS, SCAN or RANDOMKEY once expired.
    for i in 0..200 {
        let k = format!("tmp:{i}");
        raw.check(&cmd(&[b"SET", k.as_bytes(), b"x"]), b"+OK\r\n");
        raw.check(&cmd(&[b"PEXPIRE", k.as_bytes(), b"100"]), b":1\r\n");
    }
    raw.check(&cmd(&[b"SET", b"stay", b"x"]), b"+OK\r\n");
    raw.check(&cmd(&[b"EXPIRE", b"stay", b"1000"]), b":1\r\n");
    std::thread::sleep(Duration::from_millis(150));
    raw.check(&cmd(&[b"KEYS", b"*"]), b"*1\r\n$4\r\nstay\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"COUNT", b"1000"]), b"*2\r\n$1\r\n0\r\n*1\r\n$4\r\nstay\r\n");
    raw.check(&cmd(&[b"RANDOMKEY"]), b"$4\r\nstay\r\n");
    // Active expiry samples random buckets, so the last few keys may take a while (and
    // DBSIZE counts them until then, as in Redis): most must go within a few seconds.
    let mut dbsize = 201;
    for _ in 0..50 {
        dbsize = c.call(&[b"DBSIZE"]).int();
        if dbsize <= 5 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(dbsize <= 5, "active expiry left {} of 200 keys behind", dbsize - 1);
    let ttl = c.call(&[b"PTTL", b"stay"]).int();
    assert!(ttl > 990_000 && ttl <= 1_000_000, "PTTL {ttl}");
}

#[test]
fn scan_returns_every_key_with_match_count_and_type() {
    let t = start();
    let mut c = Client::connect(t.resp);
    let mut raw = Raw::connect(t.resp);
    // An empty database and a tiny one finish in one call, as in Redis.
    raw.check(&cmd(&[b"SCAN", b"0"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    raw.check(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SCAN", b"0"]), b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n");
    raw.check(
        &cmd(&[b"scan", b"0", b"match", b"a", b"count", b"10", b"type", b"string"]),
        b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n",
    );
    raw.check(&cmd(&[b"SCAN", b"0", b"TYPE", b"STRING"]), b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"TYPE", b"hash"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"MATCH", b"b*"]), b"*2\r\n$1\r\n0\r\n*0\r\n");
    // strtoul's cursor: empty is 0, a sign is allowed, -1 wraps around.
    raw.check(&cmd(&[b"SCAN", b""]), b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n");
    raw.check(&cmd(&[b"SCAN", b"+0"]), b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n");
    raw.check(&cmd(&[b"SCAN", b"-0"]), b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\na\r\n");
    let r = c.call(&[b"SCAN", b"-1"]).array();
    assert_eq!(r[0], Reply::Bulk(Some(b"0".to_vec())));
    let r = c.call(&[b"SCAN", b"18446744073709551615"]).array();
    assert_eq!(r[0], Reply::Bulk(Some(b"0".to_vec())));
    for bad in [&b" 1"[..], b"1x", b"x", b"-", b"+", b"0x10", b"1 ", b"18446744073709551616", b"1.0"] {
        raw.check(&cmd(&[b"SCAN", bad]), b"-ERR invalid cursor\r\n");
    }
    raw.check(&cmd(&[b"SCAN", b"0", b"COUNT", b"0"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"COUNT", b"-1"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"COUNT", b"x"]), b"-ERR value is not an integer or out of range\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"COUNT"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"MATCH"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"TYPE"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"foo", b"bar"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"SCAN", b"x", b"COUNT", b"0"]), b"-ERR invalid cursor\r\n");
    raw.check(&cmd(&[b"SCAN"]), b"-ERR wrong number of arguments for 'scan' command\r\n");
    raw.check(&cmd(&[b"DEL", b"a"]), b":1\r\n");

    // A few thousand keys: enough for the index to split several times.
    let mut all = HashSet::new();
    let mut pipeline = Vec::new();
    for i in 0..3000 {
        let k = format!("user:{i}");
        pipeline.extend(cmd(&[b"SET", k.as_bytes(), b"v"]));
        all.insert(k.into_bytes());
    }
    for i in 0..1000 {
        let k = format!("other:{i}");
        pipeline.extend(cmd(&[b"SET", k.as_bytes(), b"v"]));
        all.insert(k.into_bytes());
    }
    raw.send(&pipeline);
    assert_eq!(raw.read_n(5 * 4000), b"+OK\r\n".repeat(4000));
    raw.check(&cmd(&[b"DBSIZE"]), b":4000\r\n");

    let users: HashSet<Vec<u8>> = all.iter().filter(|k| k.starts_with(b"user:")).cloned().collect();
    let (seen, calls) = c.scan_all(&[]);
    assert_eq!(seen, all);
    assert!(calls > 4000 / 100, "default COUNT 10 took only {calls} calls");
    let (seen, calls) = c.scan_all(&[b"COUNT", b"100"]);
    assert_eq!(seen, all);
    assert!(calls < 4000 / 10, "COUNT 100 took {calls} calls");
    let (seen, _) = c.scan_all(&[b"COUNT", b"1000000"]);
    assert_eq!(seen, all);
    let (seen, _) = c.scan_all(&[b"MATCH", b"user:*", b"COUNT", b"50"]);
    assert_eq!(seen, users);
    let (seen, _) = c.scan_all(&[b"MATCH", b"user:1?", b"TYPE", b"string"]);
    assert_eq!(seen, (10..20).map(|i| format!("user:{i}").into_bytes()).collect());
    let (seen, _) = c.scan_all(&[b"TYPE", b"string", b"COUNT", b"7"]);
    assert_eq!(seen, all);
    let (seen, _) = c.scan_all(&[b"TYPE", b"list", b"COUNT", b"500"]);
    assert!(seen.is_empty());
    // TYPE picks each kind out of a mixed database (and a type Larder has no keys of,
    // stream, or an unknown name, matches nothing, as in Redis 7.0).
    for (k, setup) in [
        (&b"h"[..], &[&b"HSET"[..], b"h", b"f", b"v"][..]),
        (b"l", &[b"RPUSH", b"l", b"x"]),
        (b"s", &[b"SADD", b"s", b"m"]),
        (b"z", &[b"ZADD", b"z", b"1", b"m"]),
    ] {
        c.call(setup);
        all.insert(k.to_vec());
    }
    for (ty, want) in [(&b"hash"[..], &b"h"[..]), (b"LIST", b"l"), (b"set", b"s"), (b"zset", b"z")] {
        let (seen, _) = c.scan_all(&[b"TYPE", ty, b"COUNT", b"100"]);
        assert_eq!(seen, HashSet::from([want.to_vec()]), "TYPE {}", String::from_utf8_lossy(ty));
    }
    let (seen, _) = c.scan_all(&[b"TYPE", b"string", b"COUNT", b"100"]);
    assert_eq!(seen.len(), 4000);
    for ty in [&b"stream"[..], b"nosuch"] {
        assert!(c.scan_all(&[b"TYPE", ty, b"COUNT", b"500"]).0.is_empty());
    }
    for k in [&b"h"[..], b"l", b"s", b"z"] {
        c.call(&[b"DEL", k]);
        all.remove(k);
    }
    // A later option of the same name wins; MATCH * matches everything.
    let (seen, _) = c.scan_all(&[b"MATCH", b"nothing", b"MATCH", b"*", b"COUNT", b"1", b"COUNT", b"200"]);
    assert_eq!(seen, all);

    // Keys present for the whole scan are returned even while others come and go.
    let mut seen = HashSet::new();
    let mut cursor = b"0".to_vec();
    let mut i = 0;
    loop {
        let mut r = c.call(&[b"SCAN", &cursor, b"COUNT", b"20"]).array();
        for k in r.pop().unwrap().array() {
            seen.insert(k.bulk());
        }
        cursor = r.pop().unwrap().bulk();
        let mut p = Vec::new();
        for _ in 0..20 {
            p.extend(cmd(&[b"SET", format!("churn:{i}").as_bytes(), b"v"]));
            i += 1;
        }
        raw.send(&p);
        assert_eq!(raw.read_n(5 * 20), b"+OK\r\n".repeat(20));
        if cursor == b"0" {
            break;
        }
    }
    assert!(all.is_subset(&seen));

    // KEYS gives each matching key exactly once.
    let keys: Vec<Vec<u8>> = c.call(&[b"KEYS", b"user:*"]).array().iter().map(|r| r.bulk()).collect();
    assert_eq!(keys.len(), 3000);
    assert_eq!(keys.into_iter().collect::<HashSet<_>>(), users);
    let n = c.call(&[b"KEYS", b"*"]).array().len();
    assert_eq!(n as i64, c.call(&[b"DBSIZE"]).int());
    raw.check(&cmd(&[b"KEYS", b"user:100"]), b"*1\r\n$8\r\nuser:100\r\n");
    raw.check(&cmd(&[b"KEYS", b"nomatch*"]), b"*0\r\n");
    raw.check(&cmd(&[b"KEYS"]), b"-ERR wrong number of arguments for 'keys' command\r\n");
    raw.check(&cmd(&[b"KEYS", b"a", b"b"]), b"-ERR wrong number of arguments for 'keys' command\r\n");
}

/// Replies checked against redis-server 7.0.15: its matcher gives an empty key only to the
/// empty pattern and to a pattern of exactly `*` (which KEYS and SCAN don't match at all).
#[test]
fn an_empty_key_matches_only_star_and_the_empty_pattern() {
    let t = start();
    let mut raw = Raw::connect(t.resp);
    raw.check(&cmd(&[b"SET", b"", b"v"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SET", b"h", b"v"]), b"+OK\r\n");
    raw.check(&cmd(&[b"KEYS", b"**"]), b"*1\r\n$1\r\nh\r\n");
    raw.check(&cmd(&[b"KEYS", b"?"]), b"*1\r\n$1\r\nh\r\n");
    raw.check(&cmd(&[b"KEYS", b""]), b"*1\r\n$0\r\n\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"MATCH", b"**"]), b"*2\r\n$1\r\n0\r\n*1\r\n$1\r\nh\r\n");
    raw.check(&cmd(&[b"SCAN", b"0", b"MATCH", b""]), b"*2\r\n$1\r\n0\r\n*1\r\n$0\r\n\r\n");
    let mut c = Client::connect(t.resp);
    assert_eq!(c.call(&[b"KEYS", b"*"]).array().len(), 2);
}

#[test]
fn randomkey_and_dbsize_and_flush() {
    let t = start();
    let mut c = Client::connect(t.resp);
    let mut raw = Raw::connect(t.resp);
    raw.check(&cmd(&[b"RANDOMKEY"]), b"$-1\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":0\r\n");
    raw.check(&cmd(&[b"SET", b"only", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"RANDOMKEY"]), b"$4\r\nonly\r\n");
    for i in 0..50 {
        raw.check(&cmd(&[b"SET", format!("k{i}").as_bytes(), b"1"]), b"+OK\r\n");
    }
    raw.check(&cmd(&[b"DBSIZE"]), b":51\r\n");
    let mut distinct = HashSet::new();
    for _ in 0..50 {
        let k = c.call(&[b"RANDOMKEY"]).bulk();
        assert!(k == b"only" || k.starts_with(b"k"));
        distinct.insert(k);
    }
    assert!(distinct.len() > 1, "RANDOMKEY always returns the same key");
    raw.check(&cmd(&[b"RANDOMKEY", b"x"]), b"-ERR wrong number of arguments for 'randomkey' command\r\n");
    raw.check(&cmd(&[b"DBSIZE", b"x"]), b"-ERR wrong number of arguments for 'dbsize' command\r\n");

    raw.check(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SET", b"in1", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":1\r\n");
    raw.check(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    for name in ["FLUSHDB", "FLUSHALL"] {
        let n = name.as_bytes();
        raw.check(&cmd(&[n, b"foo"]), b"-ERR syntax error\r\n");
        raw.check(&cmd(&[n, b"sync", b"x"]), b"-ERR syntax error\r\n");
        raw.check(&cmd(&[n, b"async", b"async"]), b"-ERR syntax error\r\n");
    }
    raw.check(&cmd(&[b"DBSIZE"]), b":51\r\n");
    raw.check(&cmd(&[b"FLUSHDB"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":0\r\n");
    raw.check(&cmd(&[b"RANDOMKEY"]), b"$-1\r\n");
    // FLUSHDB leaves the other databases alone.
    raw.check(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":1\r\n");
    raw.check(&cmd(&[b"FLUSHDB", b"ASYNC"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":0\r\n");
    raw.check(&cmd(&[b"SET", b"in1", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"flushdb", b"sync"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":0\r\n");
    raw.check(&cmd(&[b"SET", b"in1", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SET", b"in0", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"FLUSHALL", b"async"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":0\r\n");
    raw.check(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":0\r\n");
    raw.check(&cmd(&[b"SET", b"in1", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"FLUSHALL", b"SYNC"]), b"+OK\r\n");
    raw.check(&cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":0\r\n");
}

#[test]
fn rename_renamenx_copy() {
    let t = start();
    let mut c = Client::connect(t.resp);
    let mut raw = Raw::connect(t.resp);
    raw.check(&cmd(&[b"RENAME", b"nope", b"x"]), b"-ERR no such key\r\n");
    raw.check(&cmd(&[b"RENAMENX", b"nope", b"x"]), b"-ERR no such key\r\n");
    raw.check(&cmd(&[b"RENAME", b"nope", b"nope"]), b"-ERR no such key\r\n");
    raw.check(&cmd(&[b"SET", b"a", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"RENAME", b"a", b"a"]), b"+OK\r\n");
    raw.check(&cmd(&[b"RENAMENX", b"a", b"a"]), b":0\r\n");
    raw.check(&cmd(&[b"SET", b"b", b"2"]), b"+OK\r\n");
    raw.check(&cmd(&[b"RENAMENX", b"a", b"b"]), b":0\r\n");
    raw.check(&cmd(&[b"GET", b"b"]), b"$1\r\n2\r\n");
    raw.check(&cmd(&[b"RENAME", b"a", b"b"]), b"+OK\r\n");
    raw.check(&cmd(&[b"GET", b"b"]), b"$1\r\n1\r\n");
    raw.check(&cmd(&[b"EXISTS", b"a"]), b":0\r\n");
    raw.check(&cmd(&[b"RENAMENX", b"b", b"c"]), b":1\r\n");
    raw.check(&cmd(&[b"GET", b"c"]), b"$1\r\n1\r\n");
    // The TTL moves with the value, and an overwritten key's TTL goes with it.
    raw.check(&cmd(&[b"PEXPIREAT", b"c", b"4102444800000"]), b":1\r\n");
    raw.check(&cmd(&[b"RENAME", b"c", b"d"]), b"+OK\r\n");
    raw.check(&cmd(&[b"PEXPIRETIME", b"d"]), b":4102444800000\r\n");
    raw.check(&cmd(&[b"SET", b"e", b"x"]), b"+OK\r\n");
    raw.check(&cmd(&[b"RENAME", b"e", b"d"]), b"+OK\r\n");
    raw.check(&cmd(&[b"PEXPIRETIME", b"d"]), b":-1\r\n");
    raw.check(&cmd(&[b"RENAME", b"d"]), b"-ERR wrong number of arguments for 'rename' command\r\n");
    raw.check(&cmd(&[b"RENAMENX", b"d", b"e", b"f"]), b"-ERR wrong number of arguments for 'renamenx' command\r\n");

    // COPY: option errors, then "same object", then the lookup.
    raw.check(&cmd(&[b"SET", b"src", b"hello"]), b"+OK\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"src"]), b"-ERR source and destination objects are the same\r\n");
    raw.check(&cmd(&[b"COPY", b"nope", b"nope"]), b"-ERR source and destination objects are the same\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"src", b"DB", b"0"]), b"-ERR source and destination objects are the same\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst", b"DB", b"16"]), b"-ERR DB index is out of range\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst", b"DB", b"-1"]), b"-ERR DB index is out of range\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst", b"DB", b"x"]), b"-ERR value is not an integer or out of range\r\n");
    raw.check(
        &cmd(&[b"COPY", b"src", b"dst", b"DB", b"99999999999"]),
        b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
    );
    raw.check(&cmd(&[b"COPY", b"src", b"dst", b"DB"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst", b"foo"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst", b"REPLACE", b"foo"]), b"-ERR syntax error\r\n");
    raw.check(&cmd(&[b"COPY", b"src"]), b"-ERR wrong number of arguments for 'copy' command\r\n");
    raw.check(&cmd(&[b"EXISTS", b"dst"]), b":0\r\n");
    raw.check(&cmd(&[b"COPY", b"nope", b"dst"]), b":0\r\n");
    raw.check(&cmd(&[b"PEXPIREAT", b"src", b"4102444800000"]), b":1\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst"]), b":1\r\n");
    raw.check(&cmd(&[b"GET", b"dst"]), b"$5\r\nhello\r\n");
    raw.check(&cmd(&[b"PEXPIRETIME", b"dst"]), b":4102444800000\r\n");
    raw.check(&cmd(&[b"GET", b"src"]), b"$5\r\nhello\r\n");
    raw.check(&cmd(&[b"SET", b"src", b"world"]), b"+OK\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst"]), b":0\r\n");
    raw.check(&cmd(&[b"GET", b"dst"]), b"$5\r\nhello\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst", b"replace"]), b":1\r\n");
    raw.check(&cmd(&[b"GET", b"dst"]), b"$5\r\nworld\r\n");
    raw.check(&cmd(&[b"PEXPIRETIME", b"dst"]), b":-1\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"dst", b"REPLACE", b"DB", b"0", b"REPLACE"]), b":1\r\n");
    // Across databases: the same name is fine there.
    raw.check(&cmd(&[b"COPY", b"src", b"src", b"DB", b"3"]), b":1\r\n");
    raw.check(&cmd(&[b"COPY", b"src", b"src", b"DB", b"3"]), b":0\r\n");
    raw.check(&cmd(&[b"SET", b"n", b"12345"]), b"+OK\r\n");
    raw.check(&cmd(&[b"COPY", b"n", b"n2", b"db", b"3"]), b":1\r\n");
    raw.check(&cmd(&[b"SELECT", b"3"]), b"+OK\r\n");
    raw.check(&cmd(&[b"GET", b"src"]), b"$5\r\nworld\r\n");
    raw.check(&cmd(&[b"GET", b"n2"]), b"$5\r\n12345\r\n");
    raw.check(&cmd(&[b"OBJECT", b"ENCODING", b"n2"]), b"$3\r\nint\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":2\r\n");
    raw.check(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    assert_eq!(c.call(&[b"DBSIZE"]).int(), 4);
}

#[test]
fn move_and_swapdb_across_databases() {
    let t = start();
    let mut raw = Raw::connect(t.resp);
    let mut other = Raw::connect(t.resp);
    // MOVE: argument errors first.
    raw.check(&cmd(&[b"SET", b"c", b"v0"]), b"+OK\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"0"]), b"-ERR source and destination objects are the same\r\n");
    raw.check(&cmd(&[b"MOVE", b"nope", b"0"]), b"-ERR source and destination objects are the same\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"16"]), b"-ERR DB index is out of range\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"-1"]), b"-ERR DB index is out of range\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"x"]), b"-ERR value is not an integer or out of range\r\n");
    raw.check(
        &cmd(&[b"MOVE", b"c", b"99999999999"]),
        b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
    );
    raw.check(&cmd(&[b"MOVE", b"c"]), b"-ERR wrong number of arguments for 'move' command\r\n");
    raw.check(&cmd(&[b"MOVE", b"nope", b"1"]), b":0\r\n");
    raw.check(&cmd(&[b"PEXPIREAT", b"c", b"4102444800000"]), b":1\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"1"]), b":1\r\n");
    raw.check(&cmd(&[b"EXISTS", b"c"]), b":0\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"1"]), b":0\r\n");
    raw.check(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"GET", b"c"]), b"$2\r\nv0\r\n");
    raw.check(&cmd(&[b"PEXPIRETIME", b"c"]), b":4102444800000\r\n");
    // The destination already has the key: nothing moves.
    raw.check(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SET", b"c", b"again"]), b"+OK\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"1"]), b":0\r\n");
    raw.check(&cmd(&[b"GET", b"c"]), b"$5\r\nagain\r\n");
    // MOVE from a selected database other than 0.
    raw.check(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"2"]), b":1\r\n");
    raw.check(&cmd(&[b"SELECT", b"2"]), b"+OK\r\n");
    raw.check(&cmd(&[b"GET", b"c"]), b"$2\r\nv0\r\n");
    raw.check(&cmd(&[b"MOVE", b"c", b"0"]), b":0\r\n");

    // SWAPDB: errors in order.
    raw.check(&cmd(&[b"SWAPDB", b"x", b"y"]), b"-ERR invalid first DB index\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"x", b"0"]), b"-ERR invalid first DB index\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"0", b"x"]), b"-ERR invalid second DB index\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"99999999999", b"0"]), b"-ERR invalid first DB index\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"0", b"99999999999"]), b"-ERR invalid second DB index\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"0", b"16"]), b"-ERR DB index is out of range\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"16", b"0"]), b"-ERR DB index is out of range\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"-1", b"0"]), b"-ERR DB index is out of range\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"0"]), b"-ERR wrong number of arguments for 'swapdb' command\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"0", b"0"]), b"+OK\r\n");

    // Fill db 0 and db 1 (with a TTL and an integer), watch from another connection on db 1.
    raw.check(&cmd(&[b"FLUSHALL"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    let mut pipeline = Vec::new();
    for i in 0..2000 {
        pipeline.extend(cmd(&[b"SET", format!("zero:{i}").as_bytes(), b"0"]));
    }
    raw.send(&pipeline);
    assert_eq!(raw.read_n(5 * 2000), b"+OK\r\n".repeat(2000));
    raw.check(&cmd(&[b"PEXPIREAT", b"zero:7", b"4102444800000"]), b":1\r\n");
    raw.check(&cmd(&[b"SET", b"counter", b"10"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SET", b"one", b"1"]), b"+OK\r\n");
    raw.check(&cmd(&[b"SELECT", b"0"]), b"+OK\r\n");
    other.check(&cmd(&[b"SELECT", b"1"]), b"+OK\r\n");
    other.check(&cmd(&[b"DBSIZE"]), b":1\r\n");
    raw.check(&cmd(&[b"SWAPDB", b"0", b"1"]), b"+OK\r\n");
    // Both connections keep their index and see the other database's keys.
    raw.check(&cmd(&[b"DBSIZE"]), b":1\r\n");
    raw.check(&cmd(&[b"GET", b"one"]), b"$1\r\n1\r\n");
    raw.check(&cmd(&[b"EXISTS", b"counter"]), b":0\r\n");
    other.check(&cmd(&[b"DBSIZE"]), b":2001\r\n");
    other.check(&cmd(&[b"GET", b"zero:1999"]), b"$1\r\n0\r\n");
    other.check(&cmd(&[b"PEXPIRETIME", b"zero:7"]), b":4102444800000\r\n");
    // Swapped databases are fully writable: updates, new keys (splitting), deletes.
    other.check(&cmd(&[b"SET", b"counter", b"11"]), b"+OK\r\n");
    let mut pipeline = Vec::new();
    for i in 2000..3000 {
        pipeline.extend(cmd(&[b"SET", format!("zero:{i}").as_bytes(), b"0"]));
    }
    other.send(&pipeline);
    assert_eq!(other.read_n(5 * 1000), b"+OK\r\n".repeat(1000));
    other.check(&cmd(&[b"DEL", b"zero:0", b"zero:1"]), b":2\r\n");
    other.check(&cmd(&[b"DBSIZE"]), b":2999\r\n");
    raw.check(&cmd(&[b"SET", b"new", b"x"]), b"+OK\r\n");
    // Swap back, with the indexes the other way round.
    other.check(&cmd(&[b"SWAPDB", b"1", b"0"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":2999\r\n");
    raw.check(&cmd(&[b"GET", b"counter"]), b"$2\r\n11\r\n");
    raw.check(&cmd(&[b"GET", b"zero:2999"]), b"$1\r\n0\r\n");
    other.check(&cmd(&[b"DBSIZE"]), b":2\r\n");
    other.check(&cmd(&[b"GET", b"new"]), b"$1\r\nx\r\n");
    // With an empty database.
    raw.check(&cmd(&[b"SWAPDB", b"0", b"15"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":0\r\n");
    raw.check(&cmd(&[b"SELECT", b"15"]), b"+OK\r\n");
    raw.check(&cmd(&[b"DBSIZE"]), b":2999\r\n");
    // MOVE after a swap.
    raw.check(&cmd(&[b"MOVE", b"counter", b"1"]), b":1\r\n");
    other.check(&cmd(&[b"GET", b"counter"]), b"$2\r\n11\r\n");
    let check = t.server.as_ref().unwrap().shared.store.check().unwrap();
    assert!(check.ok(), "{:?}", check.problems);
}

#[test]
fn swapdb_while_clients_write() {
    let t = start();
    let port = t.resp;
    // Two writers each add distinct keys to their own database index while SWAPDB runs;
    // every acknowledged write must end up in exactly one of the two databases.
    let writers: Vec<_> = (0..2)
        .map(|w: u32| {
            std::thread::spawn(move || {
                let mut raw = Raw::connect(port);
                raw.check(&cmd(&[b"SELECT", w.to_string().as_bytes()]), b"+OK\r\n");
                for chunk in 0..10 {
                    let mut p = Vec::new();
                    for i in chunk * 300..(chunk + 1) * 300 {
                        p.extend(cmd(&[b"SET", format!("w{w}:{i}").as_bytes(), b"v"]));
                    }
                    raw.send(&p);
                    assert_eq!(raw.read_n(5 * 300), b"+OK\r\n".repeat(300));
                }
            })
        })
        .collect();
    let mut swapper = Raw::connect(port);
    let mut swaps = 0;
    while writers.iter().any(|w| !w.is_finished()) {
        swapper.check(&cmd(&[b"SWAPDB", b"0", b"1"]), b"+OK\r\n");
        swaps += 1;
    }
    for w in writers {
        w.join().unwrap();
    }
    assert!(swaps > 0);
    let mut c = Client::connect(port);
    let mut keys = HashSet::new();
    for db in [b"0", b"1"] {
        c.call(&[b"SELECT", db]);
        for k in c.call(&[b"KEYS", b"*"]).array() {
            assert!(keys.insert(k.bulk()), "a key is in both databases");
        }
    }
    assert_eq!(keys.len(), 6000);
    let check = t.server.as_ref().unwrap().shared.store.check().unwrap();
    assert!(check.ok(), "{:?}", check.problems);
}

#[test]
fn object_subcommands() {
    let t = start();
    let mut raw = Raw::connect(t.resp);
    for (k, v) in [
        (&b"i"[..], &b"123"[..]),
        (b"s", b"hello"),
        (b"e44", b"01234567890123456789012345678901234567890123"),
        (b"r45", b"012345678901234567890123456789012345678901234"),
        (b"neg", b"-5"),
        (b"lead0", b"007"),
        (b"huge", b"12345678901234567890"),
        (b"max", b"9223372036854775807"),
        (b"sh", b"9999"),
        (b"nsh", b"10000"),
        (b"zero", b"0"),
    ] {
        raw.check(&cmd(&[b"SET", k, v]), b"+OK\r\n");
    }
    for (k, enc) in [
        (&b"i"[..], &b"int"[..]),
        (b"s", b"embstr"),
        (b"e44", b"embstr"),
        (b"r45", b"raw"),
        (b"neg", b"int"),
        (b"lead0", b"embstr"),
        (b"huge", b"embstr"),
        (b"max", b"int"),
    ] {
        let want = format!("${}\r\n{}\r\n", enc.len(), String::from_utf8_lossy(enc));
        raw.check(&cmd(&[b"OBJECT", b"ENCODING", k]), want.as_bytes());
    }
    raw.check(&cmd(&[b"SET", b"nsh", b"10001"]), b"+OK\r\n");
    raw.check(&cmd(&[b"object", b"encoding", b"nsh"]), b"$3\r\nint\r\n");
    raw.check(&cmd(&[b"OBJECT", b"ENCODING", b"nope"]), b"$-1\r\n");
    // Redis shares the integers 0..9999.
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"i"]), b":2147483647\r\n");
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"sh"]), b":2147483647\r\n");
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"zero"]), b":2147483647\r\n");
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"nsh"]), b":1\r\n");
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"neg"]), b":1\r\n");
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"s"]), b":1\r\n");
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"nope"]), b"$-1\r\n");
    raw.check(&cmd(&[b"OBJECT", b"IDLETIME", b"s"]), b":0\r\n");
    raw.check(&cmd(&[b"OBJECT", b"IDLETIME", b"nope"]), b"$-1\r\n");
    let lfu_off: &[u8] = b"-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n";
    raw.check(&cmd(&[b"OBJECT", b"FREQ", b"s"]), lfu_off);
    raw.check(&cmd(&[b"OBJECT", b"FREQ", b"nope"]), b"$-1\r\n");
    raw.check(&cmd(&[b"OBJECT", b"foo"]), b"-ERR unknown subcommand 'foo'. Try OBJECT HELP.\r\n");
    raw.check(&cmd(&[b"object", b"foo", b"bar"]), b"-ERR unknown subcommand 'foo'. Try OBJECT HELP.\r\n");
    let long = vec![b'x'; 200];
    let want = format!("-ERR unknown subcommand '{}'. Try OBJECT HELP.\r\n", "x".repeat(128));
    raw.check(&cmd(&[b"OBJECT", &long]), want.as_bytes());
    for sub in ["encoding", "freq", "idletime", "refcount"] {
        let want = format!("-ERR wrong number of arguments for 'object|{sub}' command\r\n");
        raw.check(&cmd(&[b"OBJECT", sub.to_uppercase().as_bytes()]), want.as_bytes());
        raw.check(&cmd(&[b"OBJECT", sub.as_bytes(), b"a", b"b"]), want.as_bytes());
    }
    raw.check(&cmd(&[b"OBJECT", b"HELP", b"x"]), b"-ERR wrong number of arguments for 'object|help' command\r\n");
    raw.check(&cmd(&[b"OBJECT"]), b"-ERR wrong number of arguments for 'object' command\r\n");
    let help: &[u8] = b"*15\r\n+OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:\r\n+ENCODING <key>\r\n+    Return the kind of internal representation used in order to store the value\r\n+    associated with a <key>.\r\n+FREQ <key>\r\n+    Return the access frequency index of the <key>. The returned integer is\r\n+    proportional to the logarithm of the recent access frequency of the key.\r\n+IDLETIME <key>\r\n+    Return the idle time of the <key>, that is the approximated number of\r\n+    seconds elapsed since the last access to the key.\r\n+REFCOUNT <key>\r\n+    Return the number of references of the value associated with the specified\r\n+    <key>.\r\n+HELP\r\n+    Prints this help.\r\n";
    raw.check(&cmd(&[b"OBJECT", b"HELP"]), help);
    raw.check(b"object help\r\n", help);

    // Under an LFU policy FREQ answers (not tracked: 0) and IDLETIME refuses; with
    // maxmemory and an LRU policy Redis stops sharing integers.
    let config = &t.server.as_ref().unwrap().shared.config;
    config.set("maxmemory-policy", "allkeys-lfu").unwrap();
    raw.check(&cmd(&[b"OBJECT", b"FREQ", b"s"]), b":0\r\n");
    raw.check(&cmd(&[b"OBJECT", b"IDLETIME", b"s"]), b"-ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n");
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"i"]), b":2147483647\r\n");
    config.set("maxmemory", "100mb").unwrap();
    config.set("maxmemory-policy", "volatile-lru").unwrap();
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"i"]), b":1\r\n");
    raw.check(&cmd(&[b"OBJECT", b"IDLETIME", b"s"]), b":0\r\n");
    raw.check(&cmd(&[b"OBJECT", b"FREQ", b"s"]), lfu_off);
    config.set("maxmemory", "0").unwrap();
    raw.check(&cmd(&[b"OBJECT", b"REFCOUNT", b"i"]), b":2147483647\r\n");
}

#[test]
fn command_table_matches_redis_key_specs() {
    let table = larder_server::command::table();
    // name, arity, first key, last key, step: as Redis 7's COMMAND INFO.
    let want: &[(&str, i32, i32, i32, i32)] = &[
        ("del", -2, 1, -1, 1),
        ("unlink", -2, 1, -1, 1),
        ("exists", -2, 1, -1, 1),
        ("type", 2, 1, 1, 1),
        ("touch", -2, 1, -1, 1),
        ("expire", -3, 1, 1, 1),
        ("pexpire", -3, 1, 1, 1),
        ("expireat", -3, 1, 1, 1),
        ("pexpireat", -3, 1, 1, 1),
        ("expiretime", 2, 1, 1, 1),
        ("pexpiretime", 2, 1, 1, 1),
        ("ttl", 2, 1, 1, 1),
        ("pttl", 2, 1, 1, 1),
        ("persist", 2, 1, 1, 1),
        ("keys", 2, 0, 0, 0),
        ("scan", -2, 0, 0, 0),
        ("randomkey", 1, 0, 0, 0),
        ("rename", 3, 1, 2, 1),
        ("renamenx", 3, 1, 2, 1),
        ("copy", -3, 1, 2, 1),
        ("move", 3, 1, 1, 1),
        ("swapdb", 3, 0, 0, 0),
        ("dbsize", 1, 0, 0, 0),
        ("flushdb", -1, 0, 0, 0),
        ("flushall", -1, 0, 0, 0),
        ("object", -2, 0, 0, 0),
    ];
    for &(name, arity, first, last, step) in want {
        let i = table.lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} missing"));
        let s = table.specs[i];
        assert_eq!((s.arity, s.first_key, s.last_key, s.step), (arity, first, last, step), "{name}");
    }
}

#[test]
fn object_refcount_of_a_key_changing_type_is_never_an_error() {
    // OBJECT REFCOUNT looked the key up twice: its encoding, then (for `int`) its value. A
    // key that turned into a hash in between failed the second lookup with WRONGTYPE, which
    // Redis never answers to OBJECT. Flip `k` between a shared integer and a hash while
    // asking.
    use larder_engine::{Kind, SetOptions};
    use std::sync::atomic::Ordering;
    let t = start();
    let store = t.server.as_ref().unwrap().shared.store.clone();
    let flipper = background(move |stop| {
        let mut h = store.handle().unwrap();
        while !stop.load(Ordering::Relaxed) {
            h.set(0, b"k", b"5", &SetOptions::default()).unwrap();
            h.del(0, &[b"k"]).unwrap();
            h.coll_write(0, b"k", Kind::Hash, true, |c| c.put(b"f", b"v")).unwrap();
            h.del(0, &[b"k"]).unwrap();
        }
    });
    let mut c = Raw::connect(t.resp);
    // (missing, a hash or a string not shared, the shared integer)
    let mut seen = [0u32; 3];
    for _ in 0..20_000 {
        match ask(&mut c, &[b"OBJECT", b"REFCOUNT", b"k"]).as_str() {
            "$-1\r\n" => seen[0] += 1,
            ":1\r\n" => seen[1] += 1,
            ":2147483647\r\n" => seen[2] += 1,
            other => panic!("OBJECT REFCOUNT answered {other:?}"),
        }
    }
    drop(flipper);
    assert!(seen.iter().all(|&n| n > 0), "missing / 1 / shared seen {seen:?} times");
}

/// `--shm` of a segment made with more databases than `--databases` says: the segment's
/// count wins (SELECT, CONFIG GET, INFO), and active expiry goes on in every database (it
/// used to index a table sized by the flag, and its thread died at database 16).
#[test]
fn a_server_on_an_existing_segment_goes_by_its_database_count() {
    struct Unlink(String);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = larder_engine::Arena::unlink(&self.0);
        }
    }
    let name = format!("larder-keys-dbs-{}", std::process::id());
    let _unlink = Unlink(name.clone());
    let _made = larder_engine::Store::open(larder_engine::StoreConfig {
        backing: larder_engine::Backing::Named(name.clone()),
        arena: larder_engine::ArenaConfig { capacity: 64 << 20, max_participants: 64 },
        databases: 32,
    })
    .unwrap();
    let s = start_with(|a| a.shm = Some(name.clone()));
    let mut c = Raw::connect(s.resp);
    ck(&mut c, "CONFIG GET databases", "*2\r\n$9\r\ndatabases\r\n$2\r\n32\r\n");
    for db in ["0", "20"] {
        ck(&mut c, &format!("SELECT {db}"), "+OK\r\n");
        ck(&mut c, "SET k v PX 300", "+OK\r\n");
    }
    // DBSIZE counts expired keys until they are reclaimed: only active expiry brings the
    // counts to 0 here.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for db in ["0", "20"] {
        ck(&mut c, &format!("SELECT {db}"), "+OK\r\n");
        while ask(&mut c, &[b"DBSIZE"]) != ":0\r\n" {
            assert!(std::time::Instant::now() < deadline, "db {db}: the expired key was never reclaimed");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// With active expiry off, expired keys stay until something meets them. As in Redis 7.0:
/// KEYS skips them and leaves them; SCAN deletes those its pattern matches; RANDOMKEY
/// deletes those it draws. Each deletion counts in INFO's `expired_keys`.
#[test]
fn scan_and_randomkey_delete_the_expired_keys_they_meet_and_keys_does_not() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    for i in 0..20 {
        ck(&mut c, &format!("SET a:{i} v PX 1"), "+OK\r\n");
        ck(&mut c, &format!("SET b:{i} v PX 1"), "+OK\r\n");
    }
    ck(&mut c, "SET live v", "+OK\r\n");
    std::thread::sleep(Duration::from_millis(20));
    let expired_keys = |c: &mut Raw| -> u64 {
        c.send(&cmd(&[b"INFO", b"stats"]));
        let info = read_bulk(c);
        info.lines().find_map(|l| l.strip_prefix("expired_keys:")).unwrap().trim().parse().unwrap()
    };
    let before = expired_keys(&mut c);
    ck(&mut c, "KEYS *", "*1\r\n$4\r\nlive\r\n");
    ck(&mut c, "DBSIZE", ":41\r\n");
    ck(&mut c, "SCAN 0 MATCH a:* COUNT 1000", "*2\r\n$1\r\n0\r\n*0\r\n");
    ck(&mut c, "DBSIZE", ":21\r\n");
    assert_eq!(expired_keys(&mut c), before + 20);
    ck(&mut c, "DEL live", ":1\r\n");
    ck(&mut c, "RANDOMKEY", "$-1\r\n");
    ck(&mut c, "DBSIZE", ":0\r\n");
    assert_eq!(expired_keys(&mut c), before + 40);
}
