//! The string commands over a real socket: raw bytes in, exact bytes out, every error path.
//! The expected replies were checked byte for byte against redis-server 7.0.
mod common;
use common::*;

use std::io::{Read, Write};

use larder_engine::Ttl;
use larder_server::command::{table, DENYOOM, FAST, READONLY, WRITE};

/// Sends `req` (words separated by single spaces) as a multibulk and checks the exact reply.
fn err(msg: &str) -> String {
    format!("-{msg}\r\n")
}

fn syntax() -> String {
    err("ERR syntax error")
}

fn not_int() -> String {
    err("ERR value is not an integer or out of range")
}

fn arity(name: &str) -> String {
    err(&format!("ERR wrong number of arguments for '{name}' command"))
}

/// The key's TTL as the engine sees it.
fn pttl(t: &TestServer, key: &[u8]) -> Ttl {
    t.server.as_ref().unwrap().shared.store.handle().unwrap().pttl(0, key).unwrap()
}

/// Whether the key exists, as the engine sees it (EXISTS belongs to another family).
fn exists(t: &TestServer, key: &[u8]) -> bool {
    t.server.as_ref().unwrap().shared.store.handle().unwrap().meta(0, key).unwrap().is_some()
}

fn assert_ttl_near(t: &TestServer, key: &[u8], ms: u64) {
    match pttl(t, key) {
        Ttl::Ms(left) => assert!(left <= ms && left + 2_000 > ms, "ttl {left}, wanted about {ms}"),
        other => panic!("ttl {other:?}, wanted about {ms}"),
    }
}

fn now_ms() -> u64 {
    larder_engine::now_ms()
}

#[test]
fn get_and_plain_set() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(b"GET k\r\n", b"$-1\r\n");
    c.check(b"SET k hello\r\n", b"+OK\r\n");
    c.check(b"GET k\r\n", b"$5\r\nhello\r\n");
    // Binary-safe values, an empty value, and integers (stored as integers, read back as text).
    c.check(&cmd(&[b"SET", b"bin", b"a\r\n\0b"]), b"+OK\r\n");
    c.check(&cmd(&[b"GET", b"bin"]), b"$5\r\na\r\n\0b\r\n");
    c.check(&cmd(&[b"SET", b"empty", b""]), b"+OK\r\n");
    c.check(&cmd(&[b"GET", b"empty"]), b"$0\r\n\r\n");
    ck(&mut c, "SET n -9223372036854775808", "+OK\r\n");
    ck(&mut c, "GET n", "$20\r\n-9223372036854775808\r\n");
    // A value with a 4-digit length header.
    let big = vec![b'x'; 1234];
    c.check(&cmd(&[b"SET", b"big", &big]), b"+OK\r\n");
    let mut want = b"$1234\r\n".to_vec();
    want.extend_from_slice(&big);
    want.extend_from_slice(b"\r\n");
    c.check(&cmd(&[b"GET", b"big"]), &want);
    // A plain SET drops the TTL.
    ck(&mut c, "SET k v EX 100", "+OK\r\n");
    ck(&mut c, "SET k v", "+OK\r\n");
    assert_eq!(pttl(&t, b"k"), Ttl::Persistent);
    c.check(b"GET\r\n", arity("get").as_bytes());
    c.check(b"GET a b\r\n", arity("get").as_bytes());
    c.check(b"SET k\r\n", arity("set").as_bytes());
}

#[test]
fn set_conditions_and_get() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET k v XX", "$-1\r\n");
    ck(&mut c, "SET k v GET", "$-1\r\n");
    ck(&mut c, "SET k v1 NX", "$-1\r\n");
    ck(&mut c, "SET k2 v2 nx", "+OK\r\n");
    ck(&mut c, "SET k w xX", "+OK\r\n");
    ck(&mut c, "GET k", "$1\r\nw\r\n");
    // GET returns the old value, whether or not NX / XX let the write happen.
    ck(&mut c, "SET k x GET", "$1\r\nw\r\n");
    ck(&mut c, "SET k y NX GET", "$1\r\nx\r\n");
    ck(&mut c, "GET k", "$1\r\nx\r\n");
    ck(&mut c, "SET k y GET GET XX", "$1\r\nx\r\n");
    ck(&mut c, "SET nk v XX GET", "$-1\r\n");
    assert!(!exists(&t, b"nk"));
    ck(&mut c, "SET nk v NX GET", "$-1\r\n");
    ck(&mut c, "GET nk", "$1\r\nv\r\n");
    // Redis reads option words as C strings: "NX\0zz" is NX.
    c.check(&cmd(&[b"SET", b"nk", b"z", b"nX\0zz"]), b"$-1\r\n");
    // Repeating a word is fine; conflicting words, unknown words and a missing time are not.
    ck(&mut c, "SET k v NX NX", "$-1\r\n");
    ck(&mut c, "SET k v KEEPTTL KEEPTTL", "+OK\r\n");
    for bad in [
        "SET k v NX XX",
        "SET k v XX NX",
        "SET k v EX 10 PX 10",
        "SET k v PX 10 EX 10",
        "SET k v EX 10 EXAT 10",
        "SET k v PXAT 10 EXAT 10",
        "SET k v EX 10 KEEPTTL",
        "SET k v KEEPTTL PX 10",
        "SET k v EX",
        "SET k v ex 10 px",
        "SET k v PERSIST",
        "SET k v FOO",
        "SET k v NXX",
        // Options are checked before the time is parsed.
        "SET k v EX abc NX XX",
    ] {
        ck(&mut c, bad, &syntax());
    }
    ck(&mut c, "GET k", "$1\r\nv\r\n");
}

#[test]
fn set_expiry_options() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET k v EX 100", "+OK\r\n");
    assert_ttl_near(&t, b"k", 100_000);
    ck(&mut c, "SET k v PX 5000", "+OK\r\n");
    assert_ttl_near(&t, b"k", 5_000);
    let at = now_ms() / 1000 + 200;
    ck(&mut c, &format!("SET k v EXAT {at}"), "+OK\r\n");
    assert_ttl_near(&t, b"k", 200_000);
    let at = now_ms() + 300_000;
    ck(&mut c, &format!("SET k v PXAT {at}"), "+OK\r\n");
    assert_ttl_near(&t, b"k", 300_000);
    // KEEPTTL keeps it, a plain SET clears it, the last EX of several wins.
    ck(&mut c, "SET k w KEEPTTL", "+OK\r\n");
    assert_ttl_near(&t, b"k", 300_000);
    ck(&mut c, "SET k v EX 10 EX 20", "+OK\r\n");
    assert_ttl_near(&t, b"k", 20_000);
    ck(&mut c, "SET k v KEEPTTL", "+OK\r\n");
    assert_ttl_near(&t, b"k", 20_000);
    // The largest absolute times fit; relative ones that overflow do not.
    ck(&mut c, "SET k v EXAT 9223372036854775", "+OK\r\n");
    ck(&mut c, "SET k v PXAT 9223372036854775807", "+OK\r\n");
    // An absolute time in the past stores the key already expired (GET still sees the old
    // value); a lookup then finds it expired.
    ck(&mut c, "SET k v EXAT 1 GET", "$1\r\nv\r\n");
    assert!(!exists(&t, b"k"));
    ck(&mut c, "SET k v PXAT 1", "+OK\r\n");
    assert!(!exists(&t, b"k"));
    // A short PX really expires.
    ck(&mut c, "SET short v PX 30", "+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(80));
    ck(&mut c, "GET short", "$-1\r\n");

    let invalid = err("ERR invalid expire time in 'set' command");
    for bad in [
        "SET k v EX 0",
        "SET k v EX -1",
        "SET k v PX 0",
        "SET k v PX -1",
        "SET k v EXAT 0",
        "SET k v PXAT -5",
        "SET k v EX 9223372036854775",
        "SET k v EXAT 9223372036854776",
        "SET k v PX 9223372036854775807",
    ] {
        ck(&mut c, bad, &invalid);
    }
    for bad in ["SET k v EX abc", "SET k v PX 1.5", "SET k v EX 99999999999999999999", "SET k v EX -0", "SET k v PX +5"]
    {
        ck(&mut c, bad, &not_int());
    }
    assert!(!exists(&t, b"k"));
}

#[test]
fn setnx_setex_psetex() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SETNX k v", ":1\r\n");
    ck(&mut c, "SETNX k w", ":0\r\n");
    ck(&mut c, "GET k", "$1\r\nv\r\n");
    ck(&mut c, "SETNX k", &arity("setnx"));

    ck(&mut c, "SETEX k 100 w", "+OK\r\n");
    ck(&mut c, "GET k", "$1\r\nw\r\n");
    assert_ttl_near(&t, b"k", 100_000);
    ck(&mut c, "PSETEX k 5000 x", "+OK\r\n");
    assert_ttl_near(&t, b"k", 5_000);
    let setex = err("ERR invalid expire time in 'setex' command");
    let psetex = err("ERR invalid expire time in 'psetex' command");
    ck(&mut c, "SETEX k 0 v", &setex);
    ck(&mut c, "SETEX k -1 v", &setex);
    ck(&mut c, "SETEX k 9223372036854776 v", &setex);
    ck(&mut c, "PSETEX k 0 v", &psetex);
    ck(&mut c, "PSETEX k -100 v", &psetex);
    ck(&mut c, "PSETEX k 9223372036854775807 v", &psetex);
    ck(&mut c, "SETEX k abc v", &not_int());
    ck(&mut c, "SETEX k 1.5 v", &not_int());
    ck(&mut c, "PSETEX k 1e3 v", &not_int());
    ck(&mut c, "SETEX k 10", &arity("setex"));
    ck(&mut c, "PSETEX k 10 v x", &arity("psetex"));
    // Failed calls leave the key alone.
    ck(&mut c, "GET k", "$1\r\nx\r\n");
}

#[test]
fn getset_getdel() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "GETSET k a", "$-1\r\n");
    ck(&mut c, "GETSET k b", "$1\r\na\r\n");
    ck(&mut c, "GET k", "$1\r\nb\r\n");
    // GETSET drops the TTL, as a plain SET does.
    ck(&mut c, "SET t v EX 100", "+OK\r\n");
    ck(&mut c, "GETSET t w", "$1\r\nv\r\n");
    assert_eq!(pttl(&t, b"t"), Ttl::Persistent);
    ck(&mut c, "GETSET k", &arity("getset"));

    ck(&mut c, "SET n 123", "+OK\r\n");
    ck(&mut c, "GETDEL n", "$3\r\n123\r\n");
    ck(&mut c, "GETDEL n", "$-1\r\n");
    assert!(!exists(&t, b"n"));
    ck(&mut c, "GETDEL n x", &arity("getdel"));
}

#[test]
fn getex_options_and_order() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "GETEX k", "$-1\r\n");
    ck(&mut c, "SET k v", "+OK\r\n");
    ck(&mut c, "GETEX k", "$1\r\nv\r\n");
    assert_eq!(pttl(&t, b"k"), Ttl::Persistent);
    ck(&mut c, "GETEX k EX 100", "$1\r\nv\r\n");
    assert_ttl_near(&t, b"k", 100_000);
    ck(&mut c, "GETEX k", "$1\r\nv\r\n");
    assert_ttl_near(&t, b"k", 100_000);
    ck(&mut c, "GETEX k px 5000", "$1\r\nv\r\n");
    assert_ttl_near(&t, b"k", 5_000);
    ck(&mut c, &format!("GETEX k EXAT {}", now_ms() / 1000 + 200), "$1\r\nv\r\n");
    assert_ttl_near(&t, b"k", 200_000);
    ck(&mut c, &format!("GETEX k PXAT {}", now_ms() + 300_000), "$1\r\nv\r\n");
    assert_ttl_near(&t, b"k", 300_000);
    ck(&mut c, "GETEX k EX 10 EX 20", "$1\r\nv\r\n");
    assert_ttl_near(&t, b"k", 20_000);
    ck(&mut c, "GETEX k PERSIST PERSIST", "$1\r\nv\r\n");
    assert_eq!(pttl(&t, b"k"), Ttl::Persistent);
    // An absolute time in the past: the value comes back, then the key is gone.
    ck(&mut c, "GETEX k PXAT 1", "$1\r\nv\r\n");
    assert!(!exists(&t, b"k"));

    for bad in [
        "GETEX k EX 10 PERSIST",
        "GETEX k PERSIST EX 10",
        "GETEX k EX 10 PX 10",
        "GETEX k KEEPTTL",
        "GETEX k NX",
        "GETEX k GET",
        "GETEX k EX",
        "GETEX k FOO",
    ] {
        ck(&mut c, bad, &syntax());
    }
    // The time is checked only once the key is found: a missing key gets a null.
    ck(&mut c, "GETEX k EX 0", "$-1\r\n");
    ck(&mut c, "GETEX k EX abc", "$-1\r\n");
    ck(&mut c, "SET k v", "+OK\r\n");
    let invalid = err("ERR invalid expire time in 'getex' command");
    ck(&mut c, "GETEX k EX 0", &invalid);
    ck(&mut c, "GETEX k PX -1", &invalid);
    ck(&mut c, "GETEX k EX 9223372036854775", &invalid);
    ck(&mut c, "GETEX k PX 9223372036854775807", &invalid);
    ck(&mut c, "GETEX k EX abc", &not_int());
    ck(&mut c, "GETEX k EXAT 9223372036854775807", &invalid);
    ck(&mut c, "GET k", "$1\r\nv\r\n");
    assert_eq!(pttl(&t, b"k"), Ttl::Persistent);
    c.check(b"GETEX\r\n", arity("getex").as_bytes());
}

#[test]
fn mget_mset_msetnx() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "MSET a 1 b 2", "+OK\r\n");
    ck(&mut c, "MGET a b c", "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n");
    ck(&mut c, "MGET c", "*1\r\n$-1\r\n");
    // The last value of a repeated key wins; MSET drops TTLs.
    ck(&mut c, "SET a x EX 100", "+OK\r\n");
    ck(&mut c, "MSET a 1 a 3", "+OK\r\n");
    ck(&mut c, "MGET a a", "*2\r\n$1\r\n3\r\n$1\r\n3\r\n");
    assert_eq!(pttl(&t, b"a"), Ttl::Persistent);
    ck(&mut c, "MSET a", &arity("mset"));
    ck(&mut c, "MSET a 1 b", &arity("mset"));
    ck(&mut c, "MGET", &arity("mget"));

    ck(&mut c, "MSETNX x 1 y 2", ":1\r\n");
    ck(&mut c, "MSETNX y 3 z 4", ":0\r\n");
    ck(&mut c, "MGET x y z", "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n");
    ck(&mut c, "MSETNX z 1 z 2", ":1\r\n");
    ck(&mut c, "GET z", "$1\r\n2\r\n");
    ck(&mut c, "MSETNX a", &arity("msetnx"));
    ck(&mut c, "MSETNX a 1 b", &arity("msetnx"));

    // A long MGET, pipelined with other commands.
    let mut req = Vec::new();
    let mut want = Vec::new();
    for i in 0..100 {
        req.extend(cmd(&[b"SET", format!("key:{i}").as_bytes(), format!("value:{i}").as_bytes()]));
        want.extend_from_slice(b"+OK\r\n");
    }
    let keys: Vec<String> = (0..101).map(|i| format!("key:{i}")).collect();
    let mut args: Vec<&[u8]> = vec![b"MGET"];
    args.extend(keys.iter().map(|k| k.as_bytes()));
    req.extend(cmd(&args));
    want.extend_from_slice(b"*101\r\n");
    for i in 0..100 {
        let v = format!("value:{i}");
        want.extend_from_slice(format!("${}\r\n{v}\r\n", v.len()).as_bytes());
    }
    want.extend_from_slice(b"$-1\r\n");
    c.check(&req, &want);
}

#[test]
fn incr_decr_incrby_decrby() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "INCR n", ":1\r\n");
    ck(&mut c, "INCR n", ":2\r\n");
    ck(&mut c, "DECR n", ":1\r\n");
    ck(&mut c, "DECR m", ":-1\r\n");
    ck(&mut c, "INCRBY n 10", ":11\r\n");
    ck(&mut c, "INCRBY n -20", ":-9\r\n");
    ck(&mut c, "DECRBY n -9", ":0\r\n");
    ck(&mut c, "DECRBY n 5", ":-5\r\n");
    ck(&mut c, "GET n", "$2\r\n-5\r\n");
    ck(&mut c, "SET s 41", "+OK\r\n");
    ck(&mut c, "INCR s", ":42\r\n");
    // The TTL stays.
    ck(&mut c, "SET t 1 EX 100", "+OK\r\n");
    ck(&mut c, "INCR t", ":2\r\n");
    assert_ttl_near(&t, b"t", 100_000);

    // Overflow, both ways.
    ck(&mut c, "SET big 9223372036854775806", "+OK\r\n");
    ck(&mut c, "INCR big", ":9223372036854775807\r\n");
    ck(&mut c, "INCR big", &err("ERR increment or decrement would overflow"));
    ck(&mut c, "SET small -9223372036854775807", "+OK\r\n");
    ck(&mut c, "DECR small", ":-9223372036854775808\r\n");
    ck(&mut c, "DECR small", &err("ERR increment or decrement would overflow"));
    ck(&mut c, "INCRBY small -1", &err("ERR increment or decrement would overflow"));
    ck(&mut c, "DECRBY big -1", &err("ERR increment or decrement would overflow"));
    ck(&mut c, "DECRBY n -9223372036854775808", &err("ERR decrement would overflow"));
    ck(&mut c, "DECRBY n 9223372036854775807", &err("ERR increment or decrement would overflow"));
    ck(&mut c, "GET n", "$2\r\n-5\r\n");

    // Stored values that are not canonical integers, and bad increments.
    for v in ["abc", "1.0", "01", "-0", "+1", " 1", "1 ", "", "99999999999999999999"] {
        c.check(&cmd(&[b"SET", b"bad", v.as_bytes()]), b"+OK\r\n");
        c.check(&cmd(&[b"INCR", b"bad"]), not_int().as_bytes());
    }
    for d in ["abc", "1.5", "-0", "+1", "01", "99999999999999999999", ""] {
        c.check(&cmd(&[b"INCRBY", b"n", d.as_bytes()]), not_int().as_bytes());
        c.check(&cmd(&[b"DECRBY", b"n", d.as_bytes()]), not_int().as_bytes());
    }
    ck(&mut c, "GET n", "$2\r\n-5\r\n");
    ck(&mut c, "INCR", &arity("incr"));
    ck(&mut c, "DECR a b", &arity("decr"));
    ck(&mut c, "INCRBY n", &arity("incrby"));
    ck(&mut c, "DECRBY n", &arity("decrby"));
}

#[test]
fn incrbyfloat_like_long_double() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "INCRBYFLOAT f 10.5", "$4\r\n10.5\r\n");
    ck(&mut c, "INCRBYFLOAT f 0.1", "$4\r\n10.6\r\n");
    ck(&mut c, "SET f 0.1", "+OK\r\n");
    // In long double, as Redis: not 0.30000000000000004.
    ck(&mut c, "INCRBYFLOAT f 0.2", "$3\r\n0.3\r\n");
    ck(&mut c, "INCRBYFLOAT f -0.3", "$1\r\n0\r\n");
    ck(&mut c, "SET f 5.0e3", "+OK\r\n");
    ck(&mut c, "INCRBYFLOAT f 2.0e2", "$4\r\n5200\r\n");
    ck(&mut c, "GET f", "$4\r\n5200\r\n");
    ck(&mut c, "INCRBYFLOAT f 0x10", "$4\r\n5216\r\n");
    // The result is a string even when it reads as an integer, as Redis stores it; INCR
    // then makes an integer of it (replies recorded from redis-server 7.0.15).
    ck(&mut c, "OBJECT ENCODING f", "$6\r\nembstr\r\n");
    ck(&mut c, "OBJECT REFCOUNT f", ":1\r\n");
    ck(&mut c, "INCRBYFLOAT i 3", "$1\r\n3\r\n");
    ck(&mut c, "OBJECT ENCODING i", "$6\r\nembstr\r\n");
    ck(&mut c, "INCR i", ":4\r\n");
    ck(&mut c, "OBJECT ENCODING i", "$3\r\nint\r\n");
    ck(&mut c, "OBJECT REFCOUNT i", ":2147483647\r\n");
    ck(&mut c, "INCRBYFLOAT i -0", "$1\r\n4\r\n");
    ck(&mut c, "OBJECT ENCODING i", "$6\r\nembstr\r\n");
    ck(&mut c, "SET n -9223372036854775807", "+OK\r\n");
    ck(&mut c, "INCRBYFLOAT n 1.5", "$22\r\n-9223372036854775805.5\r\n");
    ck(&mut c, "INCRBYFLOAT tiny 1e-20", "$1\r\n0\r\n");
    // Beyond double's range but within long double's.
    ck(&mut c, "SET huge 1.7976931348623157e308", "+OK\r\n");
    c.send(&cmd(&[b"INCRBYFLOAT", b"huge", b"1.7976931348623157e308"]));
    let got = c.read_n(316);
    assert!(
        got.starts_with(b"$309\r\n35953862697246313999184209354820886809677289388865835697062884"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    assert!(got.ends_with(b"\r\n"));
    // The TTL stays.
    ck(&mut c, "SET t 1 EX 100", "+OK\r\n");
    ck(&mut c, "INCRBYFLOAT t 1.25", "$4\r\n2.25\r\n");
    assert_ttl_near(&t, b"t", 100_000);

    let not_float = err("ERR value is not a valid float");
    let naninf = err("ERR increment would produce NaN or Infinity");
    ck(&mut c, "INCRBYFLOAT f abc", &not_float);
    ck(&mut c, "INCRBYFLOAT f 1e", &not_float);
    ck(&mut c, "INCRBYFLOAT f nan", &not_float);
    ck(&mut c, "INCRBYFLOAT f 1e5000", &not_float);
    c.check(&cmd(&[b"INCRBYFLOAT", b"f", b" 1"]), not_float.as_bytes());
    c.check(&cmd(&[b"INCRBYFLOAT", b"f", b"1 "]), not_float.as_bytes());
    c.check(&cmd(&[b"INCRBYFLOAT", b"f", b""]), not_float.as_bytes());
    ck(&mut c, "INCRBYFLOAT f inf", &naninf);
    ck(&mut c, "INCRBYFLOAT f -Infinity", &naninf);
    ck(&mut c, "SET m 1e4932", "+OK\r\n");
    ck(&mut c, "INCRBYFLOAT m 1e4932", &naninf);
    // The stored value is parsed first: a bad one wins over an infinite increment.
    ck(&mut c, "SET s abc", "+OK\r\n");
    ck(&mut c, "INCRBYFLOAT s inf", &not_float);
    ck(&mut c, "INCRBYFLOAT s 1", &not_float);
    c.check(&cmd(&[b"SET", b"e", b""]), b"+OK\r\n");
    ck(&mut c, "INCRBYFLOAT e 1", &not_float);
    // Redis parses a stored number of up to 5119 characters; from 5120 on it is not a float
    // (recorded from redis-server 7.0.15).
    let long = [&[b'0'; 5118][..], b"1"].concat();
    c.check(&cmd(&[b"SET", b"long", &long]), b"+OK\r\n");
    ck(&mut c, "INCRBYFLOAT long 1", "$1\r\n2\r\n");
    let longer = [&[b'0'; 5119][..], b"1"].concat();
    c.check(&cmd(&[b"SET", b"long", &longer]), b"+OK\r\n");
    ck(&mut c, "INCRBYFLOAT long 1", &not_float);
    ck(&mut c, "GET f", "$4\r\n5216\r\n");
    ck(&mut c, "INCRBYFLOAT f", &arity("incrbyfloat"));
}

#[test]
fn append_strlen_getrange_setrange() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "APPEND k hello", ":5\r\n");
    ck(&mut c, "APPEND k _world", ":11\r\n");
    ck(&mut c, "GET k", "$11\r\nhello_world\r\n");
    ck(&mut c, "STRLEN k", ":11\r\n");
    ck(&mut c, "STRLEN none", ":0\r\n");
    // An empty APPEND still creates the key.
    c.check(&cmd(&[b"APPEND", b"e", b""]), b":0\r\n");
    assert!(exists(&t, b"e"));
    // On an integer, and keeping the TTL.
    ck(&mut c, "SET i 12345", "+OK\r\n");
    ck(&mut c, "APPEND i 6", ":6\r\n");
    ck(&mut c, "STRLEN i", ":6\r\n");
    ck(&mut c, "INCR i", ":123457\r\n");
    ck(&mut c, "SET t a EX 100", "+OK\r\n");
    ck(&mut c, "APPEND t b", ":2\r\n");
    assert_ttl_near(&t, b"t", 100_000);

    ck(&mut c, "GETRANGE k 0 4", "$5\r\nhello\r\n");
    ck(&mut c, "GETRANGE k -5 -1", "$5\r\nworld\r\n");
    ck(&mut c, "GETRANGE k 6 100", "$5\r\nworld\r\n");
    ck(&mut c, "GETRANGE k 0 -100", "$1\r\nh\r\n");
    ck(&mut c, "GETRANGE k -1 -5", "$0\r\n\r\n");
    ck(&mut c, "GETRANGE k 5 1", "$0\r\n\r\n");
    ck(&mut c, "GETRANGE k 0 9223372036854775807", "$11\r\nhello_world\r\n");
    ck(&mut c, "GETRANGE k -9223372036854775808 0", "$1\r\nh\r\n");
    ck(&mut c, "GETRANGE none 0 -1", "$0\r\n\r\n");
    ck(&mut c, "GETRANGE i 1 2", "$2\r\n23\r\n");
    ck(&mut c, "SUBSTR k 0 4", "$5\r\nhello\r\n");
    ck(&mut c, "SUBSTR k -1 -1", "$1\r\nd\r\n");
    ck(&mut c, "GETRANGE k x 1", &not_int());
    ck(&mut c, "GETRANGE k 1 x", &not_int());
    ck(&mut c, "SUBSTR k 1.5 2", &not_int());

    ck(&mut c, "SETRANGE k 6 WORLD", ":11\r\n");
    ck(&mut c, "GET k", "$11\r\nhello_WORLD\r\n");
    ck(&mut c, "SETRANGE k 11 !", ":12\r\n");
    ck(&mut c, "SETRANGE p 3 x", ":4\r\n");
    c.check(&cmd(&[b"GET", b"p"]), b"$4\r\n\0\0\0x\r\n");
    // An empty value reports the length and never creates the key.
    c.check(&cmd(&[b"SETRANGE", b"k", b"100", b""]), b":12\r\n");
    c.check(&cmd(&[b"SETRANGE", b"q", b"0", b""]), b":0\r\n");
    c.check(&cmd(&[b"SETRANGE", b"q", b"9223372036854775807", b""]), b":0\r\n");
    assert!(!exists(&t, b"q"));
    ck(&mut c, "SETRANGE i 0 9", ":6\r\n");
    ck(&mut c, "GET i", "$6\r\n923457\r\n");
    ck(&mut c, "SETRANGE t 0 z", ":2\r\n");
    assert_ttl_near(&t, b"t", 100_000);

    ck(&mut c, "SETRANGE k -1 x", &err("ERR offset is out of range"));
    c.check(&cmd(&[b"SETRANGE", b"k", b"-1", b""]), err("ERR offset is out of range").as_bytes());
    ck(&mut c, "SETRANGE k x y", &not_int());
    let too_big = err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    ck(&mut c, "SETRANGE k 536870912 x", &too_big);
    ck(&mut c, "SETRANGE k 536870911 xx", &too_big);
    ck(&mut c, "SETRANGE k 9223372036854775807 x", &too_big);
    ck(&mut c, "GET k", "$12\r\nhello_WORLD!\r\n");

    for (cmd_name, req) in [
        ("append", "APPEND k"),
        ("strlen", "STRLEN"),
        ("getrange", "GETRANGE k 1"),
        ("substr", "SUBSTR k 1 2 3"),
        ("setrange", "SETRANGE k 1"),
    ] {
        ck(&mut c, req, &arity(cmd_name));
    }
}

#[test]
fn lengths_follow_proto_max_bulk_len() {
    let t = start_with(|a| a.proto_max_bulk_len = Some(10));
    let mut c = Raw::connect(t.resp);
    let too_big = err("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    ck(&mut c, "SETRANGE k 9 x", ":10\r\n");
    ck(&mut c, "SETRANGE k 10 x", &too_big);
    ck(&mut c, "SETRANGE k 8 xyz", &too_big);
    ck(&mut c, "SETRANGE new 10 x", &too_big);
    assert!(!exists(&t, b"new"));
    ck(&mut c, "SET a 12345", "+OK\r\n");
    ck(&mut c, "APPEND a 67890", ":10\r\n");
    ck(&mut c, "APPEND a x", &too_big);
    ck(&mut c, "STRLEN a", ":10\r\n");
}

#[test]
fn keyspace_hits_and_misses() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let stats = &t.server.as_ref().unwrap().shared.stats;
    let counts = || (stats.sum(|w| &w.keyspace_hits), stats.sum(|w| &w.keyspace_misses));
    // The sequence, its replies and the totals are the ones redis-server 7.0 gives.
    let mut req = Vec::new();
    for r in [
        "SET a 1",
        "SET a 2 GET",
        "SET b 1 GET",
        "SET a 3 NX GET",
        "GETSET a 5",
        "MGET a b c",
        "GETRANGE a 0 1",
        "GETRANGE a x 1",
        "STRLEN zz",
        "STRLEN a",
        "SET empty x",
        "SETRANGE empty 0 x",
        "GETRANGE zz 0 -1",
        "INCR a",
        "APPEND a x",
        "SETRANGE a 1 x",
        "GETEX a",
        "GETEX a EX 0",
        "GETEX nope EX 0",
        "GETEX a FOO",
        "GETDEL a",
        "GETDEL a",
        "SETNX q 1",
        "MSETNX q 1 r 2",
        "INCRBYFLOAT q 1",
        "GET q",
        "GET nope",
    ] {
        let args: Vec<&[u8]> = r.split(' ').map(str::as_bytes).collect();
        req.extend(cmd(&args));
    }
    c.send(&req);
    let want: &[u8] = b"+OK\r\n$1\r\n1\r\n$-1\r\n$1\r\n2\r\n$1\r\n2\r\n*3\r\n$1\r\n5\r\n$1\r\n1\r\n$-1\r\n$1\r\n5\r\n\
-ERR value is not an integer or out of range\r\n:0\r\n:1\r\n+OK\r\n:1\r\n$0\r\n\r\n:6\r\n:2\r\n:2\r\n$2\r\n6x\r\n\
-ERR invalid expire time in 'getex' command\r\n$-1\r\n-ERR syntax error\r\n$2\r\n6x\r\n$-1\r\n:1\r\n:0\r\n$1\r\n2\r\n$1\r\n2\r\n$-1\r\n";
    let got = c.read_n(want.len());
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
    assert_eq!(counts(), (11, 7));
    // An empty string is a hit for STRLEN and GETRANGE.
    c.check(&cmd(&[b"SET", b"e", b""]), b"+OK\r\n");
    ck(&mut c, "STRLEN e", ":0\r\n");
    ck(&mut c, "GETRANGE e 0 -1", "$0\r\n\r\n");
    assert_eq!(counts(), (13, 7));
}

#[test]
fn pipelined_raw_requests() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    // Inline and multibulk requests, errors in the middle, all in one write.
    let req: &[u8] =
        b"SET a 1\r\n*2\r\n$4\r\nINCR\r\n$1\r\na\r\nINCRBY a x\r\n*3\r\n$6\r\nAPPEND\r\n$1\r\na\r\n$1\r\n0\r\n\
MSET a\r\nMGET a b\r\n*4\r\n$3\r\nSET\r\n$1\r\nb\r\n$2\r\nhi\r\n$2\r\nNX\r\nGETDEL a\r\nSTRLEN b\r\n";
    let want = "+OK\r\n:2\r\n-ERR value is not an integer or out of range\r\n:2\r\n\
-ERR wrong number of arguments for 'mset' command\r\n*2\r\n$2\r\n20\r\n$-1\r\n+OK\r\n$2\r\n20\r\n:2\r\n";
    c.check(req, want.as_bytes());
    // A request split across writes.
    c.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk");
    std::thread::sleep(std::time::Duration::from_millis(20));
    c.check(b"\r\n$5\r\nvalue\r\n", b"+OK\r\n");
    c.check(b"GET k\r\n", b"$5\r\nvalue\r\n");
}

#[test]
fn command_table_matches_redis() {
    // (name, arity, flags, first key, last key, step) as COMMAND INFO gives them in Redis 7.
    let want: &[(&str, i32, u32, i32, i32, i32)] = &[
        ("get", 2, READONLY | FAST, 1, 1, 1),
        ("set", -3, WRITE | DENYOOM, 1, 1, 1),
        ("setnx", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
        ("setex", 4, WRITE | DENYOOM, 1, 1, 1),
        ("psetex", 4, WRITE | DENYOOM, 1, 1, 1),
        ("getset", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
        ("getdel", 2, WRITE | FAST, 1, 1, 1),
        ("getex", -2, WRITE | FAST, 1, 1, 1),
        ("mget", -2, READONLY | FAST, 1, -1, 1),
        ("mset", -3, WRITE | DENYOOM, 1, -1, 2),
        ("msetnx", -3, WRITE | DENYOOM, 1, -1, 2),
        ("incr", 2, WRITE | DENYOOM | FAST, 1, 1, 1),
        ("decr", 2, WRITE | DENYOOM | FAST, 1, 1, 1),
        ("incrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
        ("decrby", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
        ("incrbyfloat", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
        ("append", 3, WRITE | DENYOOM | FAST, 1, 1, 1),
        ("strlen", 2, READONLY | FAST, 1, 1, 1),
        ("getrange", 4, READONLY, 1, 1, 1),
        ("substr", 4, READONLY, 1, 1, 1),
        ("setrange", 4, WRITE | DENYOOM, 1, 1, 1),
    ];
    let t = table();
    for &(name, arity, flags, first, last, step) in want {
        let spec = t.specs[t.lookup(name.as_bytes()).unwrap_or_else(|| panic!("{name} missing"))];
        assert_eq!(
            (spec.arity, spec.flags, spec.first_key, spec.last_key, spec.step),
            (arity, flags, first, last, step),
            "{name}"
        );
        assert_eq!(spec.group, "string");
    }
}

/// Reads `n` integer (`:5`) or bulk (`$1 5`) replies, keeping any extra bytes in `buf`;
/// returns their texts.
fn read_values(s: &mut std::net::TcpStream, n: usize, buf: &mut Vec<u8>) -> Vec<String> {
    fn next(buf: &[u8]) -> Option<(String, usize)> {
        let eol = buf.windows(2).position(|w| w == b"\r\n")?;
        let line = std::str::from_utf8(&buf[1..eol]).unwrap();
        match buf[0] {
            b':' => Some((line.to_string(), eol + 2)),
            b'$' => {
                let len: usize = line.parse().unwrap();
                let end = eol + 2 + len + 2;
                (buf.len() >= end).then(|| (String::from_utf8_lossy(&buf[eol + 2..eol + 2 + len]).into_owned(), end))
            }
            _ => panic!("unexpected reply {}", String::from_utf8_lossy(&buf[..eol])),
        }
    }
    let mut out = Vec::with_capacity(n);
    let mut chunk = [0u8; 65536];
    while out.len() < n {
        match next(buf) {
            Some((v, used)) => {
                out.push(v);
                buf.drain(..used);
            }
            None => {
                let k = s.read(&mut chunk).expect("read");
                assert!(k > 0, "connection closed");
                buf.extend_from_slice(&chunk[..k]);
            }
        }
    }
    out
}

/// Two connections served by different worker threads (the kernel spreads connections over
/// the workers' listeners, so keep connecting until both workers have one).
fn connections_on_two_workers(t: &TestServer) -> (Raw, Raw) {
    let shared = &t.server.as_ref().unwrap().shared;
    let mut by_worker: [Option<Raw>; 2] = [None, None];
    for _ in 0..200 {
        let mut c = Raw::connect(t.resp);
        c.check(b"PING\r\n", b"+PONG\r\n");
        let addr = c.s.local_addr().unwrap().to_string();
        let w = shared
            .clients
            .lock()
            .unwrap()
            .values()
            .find(|i| i.addr == addr)
            .map(|i| i.worker)
            .expect("client registered");
        if by_worker[w].is_none() {
            by_worker[w] = Some(c);
        }
        if by_worker.iter().all(Option::is_some) {
            let [a, b] = by_worker;
            return (a.unwrap(), b.unwrap());
        }
    }
    panic!("every connection landed on one worker");
}

#[test]
fn incr_from_two_workers_at_once() {
    let t = start();
    let (a, b) = connections_on_two_workers(&t);
    const BATCHES: usize = 20;
    const PER_BATCH: usize = 500;
    let run = |mut c: Raw, req: Vec<u8>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut last = i64::MIN;
            for _ in 0..BATCHES {
                c.s.write_all(&req).unwrap();
                for v in read_values(&mut c.s, PER_BATCH, &mut buf) {
                    // Each connection sees its own counter values strictly increasing.
                    let v: f64 = v.parse().unwrap_or_else(|_| panic!("reply {v:?}"));
                    assert!(v as i64 > last, "{v} after {last}");
                    last = v as i64;
                }
            }
        })
    };
    let incr: Vec<u8> = (0..PER_BATCH).flat_map(|_| cmd(&[b"INCR", b"counter"])).collect();
    let (ha, hb) = (run(a, incr.clone()), run(b, incr));
    ha.join().unwrap();
    hb.join().unwrap();
    let mut c = Raw::connect(t.resp);
    let total = (2 * BATCHES * PER_BATCH).to_string();
    c.check(&cmd(&[b"GET", b"counter"]), format!("${}\r\n{total}\r\n", total.len()).as_bytes());

    // INCRBYFLOAT retries when another write slips in between its read and its write: mixed
    // with INCR on the same key, no update is lost.
    let (a, b) = connections_on_two_workers(&t);
    let float: Vec<u8> = (0..PER_BATCH).flat_map(|_| cmd(&[b"INCRBYFLOAT", b"mixed", b"1"])).collect();
    let incr: Vec<u8> = (0..PER_BATCH).flat_map(|_| cmd(&[b"INCR", b"mixed"])).collect();
    let (ha, hb) = (run(a, float), run(b, incr));
    ha.join().unwrap();
    hb.join().unwrap();
    c.check(&cmd(&[b"GET", b"mixed"]), format!("${}\r\n{total}\r\n", total.len()).as_bytes());
    assert_eq!(t.server.as_ref().unwrap().shared.stats.sum(|w| &w.total_errors), 0);
}

#[test]
fn incrbyfloat_rejects_a_value_with_a_nul_byte() {
    // Redis's "string to double with null terminator" test.
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(&cmd(&[b"SET", b"foo", b"1\x002"]), b"+OK\r\n");
    c.check(&cmd(&[b"INCRBYFLOAT", b"foo", b"1"]), b"-ERR value is not a valid float\r\n");
    c.check(&cmd(&[b"INCRBYFLOAT", b"bar", b"1\x00"]), b"-ERR value is not a valid float\r\n");
}

/// SETBIT / GETBIT, bytes compared with redis-server 7.0.15.
#[test]
fn setbit_and_getbit() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SETBIT b 7 1", ":0\r\n");
    ck(&mut c, "SETBIT b 7 0", ":1\r\n");
    ck(&mut c, "SETBIT b 100 1", ":0\r\n");
    ck(&mut c, "STRLEN b", ":13\r\n");
    ck(&mut c, "GETBIT b 100", ":1\r\n");
    ck(&mut c, "GETBIT b 10000", ":0\r\n");
    ck(&mut c, "GETBIT nokey 3", ":0\r\n");
    for bad in ["-1", "4294967296", "x", "1.5"] {
        ck(&mut c, &format!("SETBIT b {bad} 1"), "-ERR bit offset is not an integer or out of range\r\n");
    }
    ck(&mut c, "GETBIT b x", "-ERR bit offset is not an integer or out of range\r\n");
    ck(&mut c, "SETBIT b 1 2", "-ERR bit is not an integer or out of range\r\n");
    ck(&mut c, "SETBIT b 1", "-ERR wrong number of arguments for 'setbit' command\r\n");
    ck(&mut c, "RPUSH l a", ":1\r\n");
    ck(&mut c, "SETBIT l 1 1", WRONGTYPE);
    ck(&mut c, "GETBIT l 1", WRONGTYPE);
    // On an integer-encoded value: the digits' bytes ('7' = 0x37, bit 5 set -> 0x33 = '3').
    ck(&mut c, "SET n 7", "+OK\r\n");
    ck(&mut c, "SETBIT n 5 0", ":1\r\n");
    ck(&mut c, "GET n", "$1\r\n3\r\n");
}

/// LCS, replies recorded from redis-server 7.0.15.
#[test]
fn lcs() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "MSET a ohmytext b mynewtext", "+OK\r\n");
    ck(&mut c, "LCS a b", "$6\r\nmytext\r\n");
    ck(&mut c, "LCS a b LEN", ":6\r\n");
    ck(
        &mut c,
        "LCS a b IDX WITHMATCHLEN",
        "*4\r\n$7\r\nmatches\r\n*2\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n*3\r\n*2\r\n:2\r\n:3\r\n*2\r\n:0\r\n:1\r\n:2\r\n$3\r\nlen\r\n:6\r\n",
    );
    ck(
        &mut c,
        "LCS a b IDX MINMATCHLEN 3",
        "*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n",
    );
    ck(&mut c, "LCS a nokey", "$0\r\n\r\n");
    ck(&mut c, "LCS a b LEN IDX", "-ERR If you want both the length and indexes, please just use IDX.\r\n");
    ck(&mut c, "LCS a b FOO", "-ERR syntax error\r\n");
    ck(&mut c, "RPUSH l x", ":1\r\n");
    ck(&mut c, "LCS l a", "-ERR The specified keys must contain string values\r\n");
}

/// Large values pipelined with small requests, in one write: reads switch to a larger
/// chunk while a big request is arriving, and every byte must land in the right request.
#[test]
fn large_values_pipelined_with_small_requests() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let a: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let b: Vec<u8> = (0..700_001u32).map(|i| (i % 241) as u8).collect();
    let mut req = cmd(&[b"SET", b"a", &a]);
    req.extend(cmd(&[b"INCR", b"n"]));
    req.extend(cmd(&[b"SET", b"b", &b]));
    req.extend(cmd(&[b"STRLEN", b"a"]));
    req.extend(cmd(&[b"INCR", b"n"]));
    c.send(&req);
    let want = b"+OK\r\n:1\r\n+OK\r\n:300000\r\n:2\r\n";
    assert_eq!(c.read_n(want.len()), want);
    for (k, v) in [(&b"a"[..], &a), (&b"b"[..], &b)] {
        c.send(&cmd(&[b"GET", k]));
        let mut expect = format!("${}\r\n", v.len()).into_bytes();
        expect.extend_from_slice(v);
        expect.extend_from_slice(b"\r\n");
        assert!(c.read_n(expect.len()) == expect, "GET {} came back different", String::from_utf8_lossy(k));
    }
}

/// GET frames every value length correctly (the header is written before the value is
/// copied, at every width of the length), for raw and integer values, in RESP2 and RESP3,
/// and values sent in small pieces arrive whole.
#[test]
fn get_frames_values_of_every_length() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let lens = [0usize, 1, 9, 10, 99, 100, 999, 1000, 16_383, 16_384, 16_385, 99_999, 100_000, 262_145, 1_000_001];
    for &n in &lens {
        let v: Vec<u8> = (0..n).map(|i| (i * 7 % 253) as u8).collect();
        let key = format!("v{n}");
        let req = cmd(&[b"SET", key.as_bytes(), &v]);
        // Dribble the request in pieces that cross the 16 kB read size unevenly.
        for piece in req.chunks(7_001) {
            c.send(piece);
        }
        assert_eq!(c.read_n(5), b"+OK\r\n", "SET of {n} bytes");
    }
    for proto in ["2", "3"] {
        c.send(&cmd(&[b"HELLO", proto.as_bytes()]));
        read_reply(&mut c);
        for &n in &lens {
            let v: Vec<u8> = (0..n).map(|i| (i * 7 % 253) as u8).collect();
            c.send(&cmd(&[b"GET", format!("v{n}").as_bytes()]));
            let mut want = format!("${n}\r\n").into_bytes();
            want.extend_from_slice(&v);
            want.extend_from_slice(b"\r\n");
            assert!(c.read_n(want.len()) == want, "GET of {n} bytes, RESP{proto}");
        }
        for i in ["0", "-1", "7", "-42", "12345678901", "-9223372036854775808"] {
            ck(&mut c, &format!("SET i {i}"), "+OK\r\n");
            ck(&mut c, "GET i", &format!("${}\r\n{i}\r\n", i.len()));
        }
        ck(&mut c, "INCRBY i 1", ":-9223372036854775807\r\n");
        ck(&mut c, "GET i", "$20\r\n-9223372036854775807\r\n");
    }
}

#[test]
fn edited_strings_report_the_raw_encoding() {
    // Redis turns a string APPEND, SETRANGE or SETBIT changes into a raw one whatever its
    // length, and it stays raw through EXPIRE, COPY, RENAME and GETEX until a SET (replies
    // recorded from redis-server 7.0.15). Larder said embstr (or int) by length.
    let t = start();
    let mut c = Raw::connect(t.resp);
    let enc = |c: &mut Raw, k: &str, want: &str| {
        ck(c, &format!("OBJECT ENCODING {k}"), &format!("${}\r\n{want}\r\n", want.len()))
    };
    ck(&mut c, "SET k abc", "+OK\r\n");
    ck(&mut c, "APPEND k d", ":4\r\n");
    enc(&mut c, "k", "raw");
    ck(&mut c, "EXPIRE k 100", ":1\r\n");
    enc(&mut c, "k", "raw");
    ck(&mut c, "COPY k k2", ":1\r\n");
    enc(&mut c, "k2", "raw");
    ck(&mut c, "RENAME k k3", "+OK\r\n");
    enc(&mut c, "k3", "raw");
    ck(&mut c, "PERSIST k3", ":1\r\n");
    ck(&mut c, "GETEX k3 EX 50", "$4\r\nabcd\r\n");
    enc(&mut c, "k3", "raw");
    ck(&mut c, "SET k3 abc", "+OK\r\n");
    enc(&mut c, "k3", "embstr");
    // An integer appended to is raw; INCR makes an integer of it again.
    ck(&mut c, "SET n 123", "+OK\r\n");
    ck(&mut c, "APPEND n 4", ":4\r\n");
    enc(&mut c, "n", "raw");
    ck(&mut c, "INCR n", ":1235\r\n");
    enc(&mut c, "n", "int");
    // SETRANGE with nothing to write changes nothing; SETRANGE and SETBIT of a missing key
    // make a raw string; APPEND of a missing key stores the value as SET would.
    ck(&mut c, "SET e 1234", "+OK\r\n");
    c.check(&cmd(&[b"SETRANGE", b"e", b"0", b""]), b":4\r\n");
    enc(&mut c, "e", "int");
    ck(&mut c, "SETRANGE r 0 123", ":3\r\n");
    enc(&mut c, "r", "raw");
    ck(&mut c, "SET b 0", "+OK\r\n");
    ck(&mut c, "SETBIT b 1 1", ":0\r\n");
    enc(&mut c, "b", "raw");
    ck(&mut c, "SETBIT nb 1 1", ":0\r\n");
    enc(&mut c, "nb", "raw");
    ck(&mut c, "APPEND a 123", ":3\r\n");
    enc(&mut c, "a", "int");
    // A SET's item whose size class leaves a spare byte takes a 1-byte append in place
    // (12-byte header, key and value: 15 bytes in a 16-byte block).
    ck(&mut c, "SET s ab", "+OK\r\n");
    ck(&mut c, "APPEND s x", ":3\r\n");
    enc(&mut c, "s", "raw");
    ck(&mut c, "GET s", "$3\r\nabx\r\n");
}
