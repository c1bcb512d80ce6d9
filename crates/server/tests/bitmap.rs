//! The bitmap commands over a real socket: BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO
//! (SETBIT and GETBIT are in string.rs). Every expected reply here was checked byte for byte
//! against redis-server 7.0.15; tests/python/test_differential_resp.py sends them at random
//! to both servers.
mod common;
use common::*;

const SYNTAX: &str = "-ERR syntax error\r\n";
const NOT_INT: &str = "-ERR value is not an integer or out of range\r\n";
const BAD_OFFSET: &str = "-ERR bit offset is not an integer or out of range\r\n";
const BAD_TYPE: &str =
    "-ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.\r\n";

#[test]
fn bitcount_ranges_in_bytes_and_bits() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET s foobar", "+OK\r\n");
    ck(&mut c, "BITCOUNT s", ":26\r\n");
    ck(&mut c, "BITCOUNT s 0 0", ":4\r\n");
    ck(&mut c, "BITCOUNT s 1 1 BYTE", ":6\r\n");
    ck(&mut c, "BITCOUNT s 5 30 BIT", ":17\r\n");
    ck(&mut c, "BITCOUNT s -2 -1", ":7\r\n");
    ck(&mut c, "BITCOUNT s 100 200", ":0\r\n");
    // Both ends negative and crossed: 0 before the unit is even read.
    ck(&mut c, "BITCOUNT s -1 -2", ":0\r\n");
    ck(&mut c, "BITCOUNT s -1 -2 bogus", ":0\r\n");
    ck(&mut c, "BITCOUNT s 0 -1 bogus", SYNTAX);
    ck(&mut c, "BITCOUNT s 0", SYNTAX);
    ck(&mut c, "BITCOUNT s 0 1 BIT x", SYNTAX);
    ck(&mut c, "BITCOUNT s a 1", NOT_INT);
    // A missing key is 0 whatever the arguments (Redis looks it up first).
    ck(&mut c, "BITCOUNT nokey", ":0\r\n");
    ck(&mut c, "BITCOUNT nokey 0", ":0\r\n");
    ck(&mut c, "BITCOUNT", "-ERR wrong number of arguments for 'bitcount' command\r\n");
    ck(&mut c, "RPUSH l a", ":1\r\n");
    ck(&mut c, "BITCOUNT l", WRONGTYPE);
    // An integer counts as its digits.
    ck(&mut c, "SET n 255", "+OK\r\n");
    ck(&mut c, "BITCOUNT n", ":11\r\n");
}

#[test]
fn bitpos_finds_set_and_clear_bits() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET s foobar", "+OK\r\n");
    ck(&mut c, "BITPOS s 1", ":1\r\n");
    ck(&mut c, "BITPOS s 0", ":0\r\n");
    ck(&mut c, "BITPOS s 1 2", ":17\r\n");
    ck(&mut c, "BITPOS s 1 2 -1 BYTE", ":17\r\n");
    ck(&mut c, "BITPOS s 1 7 15 BIT", ":9\r\n");
    ck(&mut c, "BITPOS s 0 -3 -1 bit", ":45\r\n");
    ck(&mut c, "BITPOS s 2", "-ERR The bit argument must be 1 or 0.\r\n");
    ck(&mut c, "BITPOS s x", NOT_INT);
    // The unit is read before the end.
    ck(&mut c, "BITPOS s 1 0 x BITS", SYNTAX);
    ck(&mut c, "BITPOS s 1 0 x BIT", NOT_INT);
    ck(&mut c, "BITPOS s 1 0 1 BIT x", SYNTAX);
    ck(&mut c, "BITPOS nokey 0", ":0\r\n");
    ck(&mut c, "BITPOS nokey 1", ":-1\r\n");
    ck(&mut c, "BITPOS nokey 2", "-ERR The bit argument must be 1 or 0.\r\n");
    ck(&mut c, "RPUSH l a", ":1\r\n");
    ck(&mut c, "BITPOS l 0", WRONGTYPE);
    // All ones: a clear bit is found just past the end, unless the range has an end.
    c.check(&cmd(&[b"SET", b"e", b"\xff\xff"]), b"+OK\r\n");
    ck(&mut c, "BITPOS e 0", ":16\r\n");
    ck(&mut c, "BITPOS e 0 1", ":16\r\n");
    ck(&mut c, "BITPOS e 0 0 -1", ":-1\r\n");
    ck(&mut c, "BITPOS e 0 0 -1 bit", ":-1\r\n");
    ck(&mut c, "BITPOS e 1 9 -1 bit", ":9\r\n");
    // An empty string holds no bit at all.
    c.check(&cmd(&[b"SET", b"e", b""]), b"+OK\r\n");
    ck(&mut c, "BITPOS e 0", ":-1\r\n");
    ck(&mut c, "BITCOUNT e", ":0\r\n");
}

#[test]
fn bitop_combines_strings_into_a_raw_one() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET s foobar", "+OK\r\n");
    ck(&mut c, "SET n 255", "+OK\r\n");
    ck(&mut c, "BITOP AND d s n", ":6\r\n");
    ck(&mut c, "GET d", "$6\r\n\"%%\x00\x00\x00\r\n");
    ck(&mut c, "OBJECT ENCODING d", "$3\r\nraw\r\n");
    ck(&mut c, "BITOP or d s n", ":6\r\n");
    ck(&mut c, "GET d", "$6\r\nv\x7f\x7fbar\r\n");
    ck(&mut c, "BITOP XOR d s n nokey", ":6\r\n");
    ck(&mut c, "GET d", "$6\r\nTZZbar\r\n");
    ck(&mut c, "BITOP NOT d n", ":3\r\n");
    c.check(b"GET d\r\n", b"$3\r\n\xcd\xca\xca\r\n");
    ck(&mut c, "BITOP NOT d s n", "-ERR BITOP NOT must be called with a single source key.\r\n");
    ck(&mut c, "BITOP NAND d s", SYNTAX);
    ck(&mut c, "RPUSH l a", ":1\r\n");
    ck(&mut c, "BITOP AND d l", WRONGTYPE);
    ck(&mut c, "BITOP or", "-ERR wrong number of arguments for 'bitop' command\r\n");
    // A result of one digit stays a raw string; the destination loses its TTL, and its type.
    ck(&mut c, "SET one 1", "+OK\r\n");
    ck(&mut c, "EXPIRE d 100", ":1\r\n");
    ck(&mut c, "BITOP OR d one", ":1\r\n");
    ck(&mut c, "OBJECT ENCODING d", "$3\r\nraw\r\n");
    ck(&mut c, "TTL d", ":-1\r\n");
    ck(&mut c, "BITOP OR l one", ":1\r\n");
    ck(&mut c, "TYPE l", "+string\r\n");
    // Nothing but missing sources: the destination is deleted.
    ck(&mut c, "BITOP AND d nokey nokey2", ":0\r\n");
    ck(&mut c, "EXISTS d", ":0\r\n");
}

#[test]
fn bitfield_reads_writes_and_overflows() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "BITFIELD f", "*0\r\n");
    ck(&mut c, "BITFIELD f GET u8 0", "*1\r\n:0\r\n");
    ck(&mut c, "EXISTS f", ":0\r\n");
    ck(&mut c, "BITFIELD f SET u8 0 200 GET u8 0 INCRBY u8 0 100 GET i8 0", "*4\r\n:0\r\n:200\r\n:44\r\n:44\r\n");
    ck(
        &mut c,
        "BITFIELD f OVERFLOW SAT INCRBY u8 0 1000 INCRBY i8 0 -1000 OVERFLOW FAIL INCRBY u8 0 1",
        "*3\r\n:255\r\n:-128\r\n:129\r\n",
    );
    ck(
        &mut c,
        "BITFIELD f OVERFLOW WRAP SET i4 #3 7 INCRBY i4 #3 1 GET i4 #3 GET u4 #3",
        "*4\r\n:0\r\n:-8\r\n:-8\r\n:8\r\n",
    );
    ck(
        &mut c,
        "BITFIELD f SET u63 0 -1 GET u63 0 SET i64 0 -1 GET i64 0 GET u1 63",
        "*5\r\n:4648840715353194496\r\n:9223372036854775807\r\n:-2\r\n:-1\r\n:1\r\n",
    );
    ck(
        &mut c,
        "BITFIELD f INCRBY i64 0 9223372036854775807 OVERFLOW SAT INCRBY i64 0 9223372036854775807 \
         INCRBY i64 0 -9223372036854775808",
        "*3\r\n:9223372036854775806\r\n:9223372036854775807\r\n:-1\r\n",
    );
    // Redis saturates a SET of i64::MIN to the type's maximum (its overflow check wraps).
    ck(&mut c, "BITFIELD q OVERFLOW SAT SET i8 0 -9223372036854775808 GET i8 0", "*2\r\n:0\r\n:127\r\n");
    // A write refused by OVERFLOW FAIL still grows the string (or makes the key) first.
    ck(&mut c, "BITFIELD f OVERFLOW FAIL SET u8 200 300", "*1\r\n$-1\r\n");
    ck(&mut c, "STRLEN f", ":26\r\n");
    ck(&mut c, "BITFIELD g OVERFLOW FAIL SET u8 200 300", "*1\r\n$-1\r\n");
    ck(&mut c, "STRLEN g", ":26\r\n");
    ck(&mut c, "BITFIELD_RO f GET u8 0 GET i16 #1", "*2\r\n:255\r\n:-1\r\n");
    // An integer is read as its digits, and made a raw string by a write that changes nothing.
    ck(&mut c, "SET n 12345", "+OK\r\n");
    ck(&mut c, "BITFIELD n GET u8 0", "*1\r\n:49\r\n");
    ck(&mut c, "OBJECT ENCODING n", "$3\r\nint\r\n");
    ck(&mut c, "BITFIELD n SET u8 0 49", "*1\r\n:49\r\n");
    ck(&mut c, "OBJECT ENCODING n", "$3\r\nraw\r\n");
    ck(&mut c, "GET n", "$5\r\n12345\r\n");
}

#[test]
fn bitfield_errors_in_redis_order() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    for ty in ["u64", "i65", "i0", "x8", "i"] {
        ck(&mut c, &format!("BITFIELD f GET {ty} 0"), BAD_TYPE);
    }
    for off in ["-1", "#-1", "x", "#", "4294967296"] {
        ck(&mut c, &format!("BITFIELD f GET i8 {off}"), BAD_OFFSET);
    }
    ck(&mut c, "BITFIELD f SET i8 0 1.5", NOT_INT);
    ck(&mut c, "BITFIELD f INCRBY i8 0", SYNTAX);
    ck(&mut c, "BITFIELD f OVERFLOW", SYNTAX);
    ck(&mut c, "BITFIELD f OVERFLOW BAD GET u8 0", "-ERR Invalid OVERFLOW type specified\r\n");
    ck(&mut c, "BITFIELD f BOGUS", SYNTAX);
    ck(&mut c, "BITFIELD_RO f SET u8 0 1", "-ERR BITFIELD_RO only supports the GET subcommand\r\n");
    // Every subcommand is parsed before BITFIELD_RO refuses a write.
    ck(&mut c, "BITFIELD_RO f GET u8 0 SET u8 0 1 BOGUS", SYNTAX);
    ck(&mut c, "RPUSH l a", ":1\r\n");
    ck(&mut c, "BITFIELD l GET u8 0", WRONGTYPE);
    ck(&mut c, "BITFIELD l SET u8 0 1", WRONGTYPE);
    ck(&mut c, "EXISTS f", ":0\r\n");
}

/// Writes that change nothing are not counted as changes (`rdb_changes_since_last_save`) and
/// do not break a WATCH, as in Redis; writes that change a bit, or only grow the string, do.
#[test]
fn unchanged_bits_are_not_a_modification() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let mut other = Raw::connect(t.resp);
    let changes = |c: &mut Raw| -> u64 {
        let info = ask(c, &[b"INFO", b"persistence"]);
        let line = info.lines().find(|l| l.starts_with("rdb_changes_since_last_save:")).unwrap();
        line.split(':').nth(1).unwrap().trim().parse().unwrap()
    };
    ck(&mut c, "SETBIT b 0 0", ":0\r\n");
    ck(&mut c, "BITFIELD f SET i5 0 0", "*1\r\n:0\r\n");
    let before = changes(&mut c);
    ck(&mut c, "WATCH b f", "+OK\r\n");
    ck(&mut other, "SETBIT b 0 0", ":0\r\n");
    ck(&mut other, "BITFIELD f SET i5 0 0", "*1\r\n:0\r\n");
    assert_eq!(changes(&mut c), before);
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "PING", "+QUEUED\r\n");
    ck(&mut c, "EXEC", "*1\r\n+PONG\r\n");
    // Growing the string, with the new bit clear, is a change.
    ck(&mut c, "WATCH b", "+OK\r\n");
    ck(&mut other, "SETBIT b 90 0", ":0\r\n");
    assert_eq!(changes(&mut c), before + 1);
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "PING", "+QUEUED\r\n");
    ck(&mut c, "EXEC", "*-1\r\n");
    ck(&mut other, "BITFIELD f INCRBY i5 0 1", "*1\r\n:1\r\n");
    assert_eq!(changes(&mut c), before + 2);
}
