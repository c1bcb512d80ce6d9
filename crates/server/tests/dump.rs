//! DUMP, RESTORE and MIGRATE over real sockets: exact reply bytes (as redis-server 7.0.15
//! gives them), payloads made by redis-server 7.0.15, what a RESTORE signals (keyspace
//! events, blocked clients, tracking), corrupt payloads, and MIGRATE between two servers.
mod common;
use common::*;
#[path = "common/reply.rs"]
mod reply;
use reply::*;

use std::net::TcpListener;
use std::time::{Duration, Instant};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// redis-server 7.0.15's DUMP of the string "hello".
const HELLO: &str = "000568656c6c6f0a006372df766534200a";

fn dump(c: &mut Raw, key: &str) -> Vec<u8> {
    call_args(c, &[b"DUMP", key.as_bytes()]).bulk()
}

fn restore(c: &mut Raw, args: &[&[u8]]) -> Val {
    let mut all: Vec<&[u8]> = vec![b"RESTORE"];
    all.extend_from_slice(args);
    call_args(c, &all)
}

#[test]
fn dump_of_a_string_is_redis_bytes() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET s hello", "+OK\r\n");
    assert_eq!(dump(&mut c, "s"), unhex(HELLO));
    ck(&mut c, "SET i 12345", "+OK\r\n");
    assert_eq!(dump(&mut c, "i"), unhex("00c139300a009d94ea2793fc08b9"));
    ck(&mut c, "DUMP missing", "$-1\r\n");
    ck(&mut c, "DUMP", "-ERR wrong number of arguments for 'dump' command\r\n");
}

#[test]
fn restore_reads_redis_payloads_of_every_type() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    // DUMPs by redis-server 7.0.15: a quicklist of an LZF-compressed listpack, an intset,
    // a listpack hash, a skiplist sorted set.
    let cases = [
        ("l", "120102c3184058105800000004008161020101ded402e04678e03c000148ff0a0044cc546ab27d5d40", "LRANGE l 0 2", "*3\r\n$1\r\na\r\n$1\r\n1\r\n$4\r\n-300\r\n"),
        ("si", "0b140400000003000000fbffffff01000000701101000a0086a0bbcf3a22ed25", "SMISMEMBER si -5 2 70000", "*3\r\n:1\r\n:0\r\n:1\r\n"),
        ("hl", "1012120000000400816602817602816e020701ff0a00b82adea8407ffaa8", "HGET hl n", "$1\r\n7\r\n"),
        ("zs", "0502c3094046016d6de03900016d6d000000000000f83f016200000000000000c00a0025f99249b21344ee", "ZRANGE zs 0 -1 WITHSCORES", "*4\r\n$1\r\nb\r\n$2\r\n-2\r\n$70\r\nmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm\r\n$3\r\n1.5\r\n"),
    ];
    for (key, hex, read, want) in cases {
        assert_eq!(restore(&mut c, &[key.as_bytes(), b"0", &unhex(hex)]), Val::Simple("OK".into()), "{key}");
        ck(&mut c, read, want);
        ck(&mut c, &format!("TTL {key}"), ":-1\r\n");
    }
}

#[test]
fn restore_errors_are_redis_errors_in_redis_order() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let hello = unhex(HELLO);
    let e = |s: &str| Val::Err(s.to_string());
    ck(&mut c, "SET busy x", "+OK\r\n");
    // Options first, then the key, then the TTL, then the payload.
    assert_eq!(restore(&mut c, &[b"busy", b"x", b"...", b"bogus"]), e("ERR syntax error"));
    assert_eq!(
        restore(&mut c, &[b"busy", b"x", b"...", b"IDLETIME", b"-1"]),
        e("ERR Invalid IDLETIME value, must be >= 0")
    );
    assert_eq!(
        restore(&mut c, &[b"busy", b"x", b"...", b"FREQ", b"256"]),
        e("ERR Invalid FREQ value, must be >= 0 and <= 255")
    );
    assert_eq!(
        restore(&mut c, &[b"busy", b"x", b"...", b"FREQ", b"x"]),
        e("ERR value is not an integer or out of range")
    );
    assert_eq!(restore(&mut c, &[b"busy", b"0", b"...", b"IDLETIME", b"1", b"FREQ", b"1"]), e("ERR syntax error"));
    assert_eq!(restore(&mut c, &[b"busy", b"x", b"..."]), e("BUSYKEY Target key name already exists."));
    assert_eq!(restore(&mut c, &[b"k", b"x", b"..."]), e("ERR value is not an integer or out of range"));
    assert_eq!(restore(&mut c, &[b"k", b"-1", b"..."]), e("ERR Invalid TTL value, must be >= 0"));
    assert_eq!(restore(&mut c, &[b"k", b"0", b"..."]), e("ERR DUMP payload version or checksum are wrong"));
    let mut bad = hello.clone();
    bad[3] ^= 1;
    assert_eq!(restore(&mut c, &[b"k", b"0", &bad]), e("ERR DUMP payload version or checksum are wrong"));
    // dump.tcl's payload claiming 2^64 - 9 bytes, here with a good footer.
    let mut body = b"\x00\x81\xff\xff\xff\xff\xff\xff\xff\xf7".to_vec();
    body.extend_from_slice(&10u16.to_le_bytes());
    let crc = larder_dump::crc64(&body);
    body.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(restore(&mut c, &[b"k", b"0", &body]), e("ERR Bad data format"));
    ck(&mut c, "EXISTS k", ":0\r\n");
    ck(&mut c, "RESTORE k", "-ERR wrong number of arguments for 'restore' command\r\n");
}

#[test]
fn restore_ttl_replace_and_absttl() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let hello = unhex(HELLO);
    let ok = Val::Simple("OK".into());
    assert_eq!(restore(&mut c, &[b"a", b"5000", &hello]), ok);
    let pttl = call(&mut c, "PTTL a").int();
    assert!((4000..=5000).contains(&pttl), "{pttl}");
    // A TTL past 32 bits (dump.tcl).
    assert_eq!(restore(&mut c, &[b"b", b"2569591501", &hello]), ok);
    assert!(call(&mut c, "PTTL b").int() > 2569591501 - 3000);
    // ABSTTL, in the future.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let at = (now + 3000).to_string();
    assert_eq!(restore(&mut c, &[b"c", at.as_bytes(), &hello, b"ABSTTL"]), ok);
    let pttl = call(&mut c, "PTTL c").int();
    assert!((2000..=3100).contains(&pttl), "{pttl}");
    // ABSTTL in the past: OK, and no key; with REPLACE the old one is deleted.
    let past = (now - 3000).to_string();
    assert_eq!(restore(&mut c, &[b"d", past.as_bytes(), &hello, b"ABSTTL"]), ok);
    ck(&mut c, "EXISTS d", ":0\r\n");
    ck(&mut c, "SET d old", "+OK\r\n");
    assert_eq!(restore(&mut c, &[b"d", past.as_bytes(), &hello, b"absttl", b"replace"]), ok);
    ck(&mut c, "EXISTS d", ":0\r\n");
    // Neither counts as a change when nothing was there (Redis's `server.dirty`).
    let changes = |c: &mut Raw| {
        let info = String::from_utf8(call(c, "INFO persistence").bulk()).unwrap();
        let line = info.lines().find(|l| l.starts_with("rdb_changes_since_last_save:")).unwrap().to_string();
        line.split(':').nth(1).unwrap().trim().parse::<i64>().unwrap()
    };
    let before = changes(&mut c);
    assert_eq!(restore(&mut c, &[b"d", past.as_bytes(), &hello, b"ABSTTL"]), ok);
    assert_eq!(changes(&mut c), before);
    // REPLACE over another type; the TTL of the old value does not stay.
    ck(&mut c, "RPUSH e x", ":1\r\n");
    ck(&mut c, "EXPIRE e 100", ":1\r\n");
    assert_eq!(restore(&mut c, &[b"e", b"0", &hello, b"REPLACE", b"IDLETIME", b"10"]), ok);
    ck(&mut c, "GET e", "$5\r\nhello\r\n");
    ck(&mut c, "TTL e", ":-1\r\n");
    // A collection with a TTL.
    ck(&mut c, "HSET h f v", ":1\r\n");
    let h = dump(&mut c, "h");
    assert_eq!(restore(&mut c, &[b"h2", b"100000", &h, b"FREQ", b"5"]), ok);
    ck(&mut c, "HGETALL h2", "*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
    assert!(call(&mut c, "PTTL h2").int() > 90000);
}

#[test]
fn restore_signals_like_a_write() {
    let t = start();
    let (mut sub, mut w) = one_per_worker(&t);
    ck(&mut w, "CONFIG SET notify-keyspace-events KEg", "+OK\r\n");
    sub.check(&cmd(&[b"PSUBSCRIBE", b"*"]), b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n");
    let hello = unhex(HELLO);
    restore(&mut w, &[b"k", b"0", &hello]);
    let ev = |ch: &str, msg: &str| {
        format!("*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n${}\r\n{ch}\r\n${}\r\n{msg}\r\n", ch.len(), msg.len())
    };
    let want = ev("__keyspace@0__:k", "restore") + &ev("__keyevent@0__:restore", "k");
    assert_eq!(sub.read_n(want.len()), want.as_bytes());
    // An ABSTTL in the past with REPLACE deletes: "del".
    restore(&mut w, &[b"k", b"1", &hello, b"ABSTTL", b"REPLACE"]);
    let want = ev("__keyspace@0__:k", "del") + &ev("__keyevent@0__:del", "k");
    assert_eq!(sub.read_n(want.len()), want.as_bytes());
    silent(&mut sub);
}

#[test]
fn restore_of_a_list_wakes_blpop() {
    let t = start();
    let (mut blocked, mut w) = one_per_worker(&t);
    ck(&mut w, "RPUSH src a b", ":2\r\n");
    let payload = dump(&mut w, "src");
    blocked.send(&cmd(&[b"BLPOP", b"dst", b"5"]));
    wait_blocked(&mut w, 1);
    assert_eq!(restore(&mut w, &[b"dst", b"0", &payload]), Val::Simple("OK".into()));
    blocked.check(b"", b"*2\r\n$3\r\ndst\r\n$1\r\na\r\n");
    ck(&mut w, "LRANGE dst 0 -1", "*1\r\n$1\r\nb\r\n");
}

#[test]
fn restore_invalidates_tracked_keys() {
    let t = start();
    let (mut tr, mut w) = one_per_worker(&t);
    tr.send(b"HELLO 3\r\n");
    read_reply(&mut tr);
    ck(&mut tr, "CLIENT TRACKING on", "+OK\r\n");
    ck(&mut w, "SET k old", "+OK\r\n");
    ck(&mut tr, "GET k", "$3\r\nold\r\n");
    restore(&mut w, &[b"k", b"0", &unhex(HELLO), b"REPLACE"]);
    tr.check(b"", b">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n");
}

/// Every single-byte change of valid payloads (with the checksum made good again), and
/// every cut: the server answers each with OK or "Bad data format", never crashes, and
/// leaves no key behind from a refused one.
#[test]
fn corrupt_payloads_are_refused_whole() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "RPUSH l a bb 1 -7 300", ":5\r\n");
    ck(&mut c, "HSET h f v g 12", ":2\r\n");
    ck(&mut c, "ZADD z 1 a 2.5 b", ":2\r\n");
    ck(&mut c, "SADD s 1 2 3", ":3\r\n");
    let mut payloads: Vec<Vec<u8>> = ["l", "h", "z", "s"].iter().map(|k| dump(&mut c, k)).collect();
    payloads.push(unhex("120102c3184058105800000004008161020101ded402e04678e03c000148ff0a0044cc546ab27d5d40"));
    payloads.push(unhex("1012120000000400816602817602816e020701ff0a00b82adea8407ffaa8"));
    let seal = |body: &[u8]| {
        let mut p = body.to_vec();
        p.extend_from_slice(&10u16.to_le_bytes());
        let crc = larder_dump::crc64(&p);
        p.extend_from_slice(&crc.to_le_bytes());
        p
    };
    let mut tried = 0;
    for p in &payloads {
        let body = &p[..p.len() - 10];
        let mut variants: Vec<Vec<u8>> = (0..body.len()).map(|n| seal(&body[..n])).collect();
        for i in 0..body.len() {
            for x in [0x01u8, 0x80, 0xff] {
                let mut b = body.to_vec();
                b[i] ^= x;
                variants.push(seal(&b));
            }
        }
        for v in variants {
            match restore(&mut c, &[b"victim", b"0", &v, b"REPLACE"]) {
                Val::Simple(ok) => assert_eq!(ok, "OK"),
                Val::Err(e) => {
                    assert_eq!(e, "ERR Bad data format");
                    ck(&mut c, "EXISTS victim", ":0\r\n");
                }
                other => panic!("{other:?}"),
            }
            call(&mut c, "DEL victim");
            tried += 1;
        }
    }
    assert!(tried > 400, "{tried}");
    ck(&mut c, "PING", "+PONG\r\n");
}

// ---- MIGRATE ----

fn migrate(c: &mut Raw, port: u16, rest: &[&str]) -> Val {
    let p = port.to_string();
    let mut args: Vec<&[u8]> = vec![b"MIGRATE", b"127.0.0.1", p.as_bytes()];
    args.extend(rest.iter().map(|s| s.as_bytes()));
    call_args(c, &args)
}

#[test]
fn migrate_moves_copies_and_replaces() {
    let (a, b) = (start(), start());
    let (mut ca, mut cb) = (Raw::connect(a.resp), Raw::connect(b.resp));
    let ok = Val::Simple("OK".into());
    ck(&mut ca, "RPUSH list a b c", ":3\r\n");
    ck(&mut ca, "PEXPIRE list 100000", ":1\r\n");
    assert_eq!(migrate(&mut ca, b.resp, &["list", "9", "5000"]), ok);
    ck(&mut ca, "EXISTS list", ":0\r\n");
    ck(&mut cb, "SELECT 9", "+OK\r\n");
    ck(&mut cb, "LRANGE list 0 -1", "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    assert!(call(&mut cb, "PTTL list").int() > 90000);
    // COPY keeps the source; without REPLACE the target's key is not overwritten.
    ck(&mut ca, "SET s v1", "+OK\r\n");
    assert_eq!(migrate(&mut ca, b.resp, &["s", "9", "5000", "COPY"]), ok);
    ck(&mut ca, "EXISTS s", ":1\r\n");
    ck(&mut ca, "SET s v2", "+OK\r\n");
    assert_eq!(
        migrate(&mut ca, b.resp, &["s", "9", "5000", "COPY"]),
        Val::Err("ERR Target instance replied with error: BUSYKEY Target key name already exists.".into())
    );
    assert_eq!(migrate(&mut ca, b.resp, &["s", "9", "5000", "REPLACE"]), ok);
    ck(&mut cb, "GET s", "$2\r\nv2\r\n");
    ck(&mut ca, "EXISTS s", ":0\r\n");
    // KEYS: the missing ones are skipped; none at all is NOKEY.
    ck(&mut ca, "MSET k1 1 k2 2", "+OK\r\n");
    assert_eq!(migrate(&mut ca, b.resp, &["", "0", "5000", "KEYS", "nokey", "k1", "k2"]), ok);
    ck(&mut ca, "DBSIZE", ":0\r\n");
    ck(&mut cb, "SELECT 0", "+OK\r\n");
    ck(&mut cb, "MGET k1 k2", "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    assert_eq!(migrate(&mut ca, b.resp, &["", "0", "5000", "KEYS", "nokey"]), Val::Simple("NOKEY".into()));
    assert_eq!(
        migrate(&mut ca, b.resp, &["x", "0", "5000", "KEYS", "a"]),
        Val::Err("ERR When using MIGRATE KEYS option, the key argument must be set to the empty string".into())
    );
    assert_eq!(migrate(&mut ca, b.resp, &["x", "0", "5000", "AUTH"]), Val::Err("ERR syntax error".into()));
    // Only the keys the target took are deleted.
    ck(&mut ca, "MSET a 1 c 3", "+OK\r\n");
    ck(&mut cb, "SET c busy", "+OK\r\n");
    assert!(
        matches!(migrate(&mut ca, b.resp, &["", "0", "5000", "KEYS", "a", "c"]), Val::Err(e) if e.contains("BUSYKEY"))
    );
    ck(&mut ca, "EXISTS a c", ":1\r\n");
}

#[test]
fn migrate_auth_and_io_errors() {
    let (a, b) = (start(), start());
    let (mut ca, mut cb) = (Raw::connect(a.resp), Raw::connect(b.resp));
    ck(&mut cb, "CONFIG SET requirepass foobar", "+OK\r\n");
    ck(&mut ca, "RPUSH list a", ":1\r\n");
    assert_eq!(migrate(&mut ca, b.resp, &["list", "0", "5000", "AUTH", "foobar"]), Val::Simple("OK".into()));
    ck(&mut ca, "RPUSH list a", ":1\r\n");
    match migrate(&mut ca, b.resp, &["list", "0", "5000", "AUTH", "wrong"]) {
        Val::Err(e) => assert!(e.starts_with("ERR Target instance replied with error: WRONGPASS"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        migrate(&mut ca, b.resp, &["list", "0", "5000", "AUTH2", "default", "foobar", "REPLACE"]),
        Val::Simple("OK".into())
    );
    // A target that accepts and never answers: IOERR after the timeout.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    ck(&mut ca, "SET k v", "+OK\r\n");
    let t0 = Instant::now();
    assert_eq!(
        migrate(&mut ca, port, &["k", "0", "300"]),
        Val::Err("IOERR error or timeout reading to target instance".into())
    );
    assert!(t0.elapsed() >= Duration::from_millis(250));
    drop(silent);
    // Nobody listening.
    assert_eq!(
        migrate(&mut ca, port, &["k", "0", "300"]),
        Val::Err("IOERR error or timeout connecting to the client".into())
    );
    ck(&mut ca, "EXISTS k", ":1\r\n");
}
