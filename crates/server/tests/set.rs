//! The set commands over a real socket: raw bytes in, exact bytes out, every error path,
//! RESP2 and RESP3 shapes, and a random-operation run against a std HashSet model.
//! The expected replies were checked byte for byte against redis-server 7.0.15 (where the
//! order of a hashtable-encoded set shows, the tests sort instead).
mod common;
#[path = "common/reply.rs"]
mod reply;

use std::collections::{BTreeSet, HashSet};

use common::*;
use reply::{call, Val};

fn sorted(v: Val) -> Vec<String> {
    let mut s = v.strings();
    s.sort();
    s
}

fn strs(v: &[&str]) -> Vec<String> {
    let mut s: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    s.sort();
    s
}

#[test]
fn single_key_commands() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SADD i 5 3 1 -7 10", ":5\r\n");
    // An intset: numeric order.
    ck(&mut c, "SMEMBERS i", "*5\r\n$2\r\n-7\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n$2\r\n10\r\n");
    ck(&mut c, "OBJECT ENCODING i", "$6\r\nintset\r\n");
    ck(&mut c, "SADD s 3 1 2", ":3\r\n");
    ck(&mut c, "SADD s 2 a", ":1\r\n");
    ck(&mut c, "OBJECT ENCODING s", "$9\r\nhashtable\r\n");
    ck(&mut c, "SADD s", "-ERR wrong number of arguments for 'sadd' command\r\n");
    assert_eq!(sorted(call(&mut c, "SMEMBERS s")), strs(&["1", "2", "3", "a"]));
    ck(&mut c, "SMEMBERS nokey", "*0\r\n");
    ck(&mut c, "SISMEMBER s a", ":1\r\n");
    ck(&mut c, "SISMEMBER s z", ":0\r\n");
    ck(&mut c, "SISMEMBER nokey z", ":0\r\n");
    ck(&mut c, "SMISMEMBER s a z 1", "*3\r\n:1\r\n:0\r\n:1\r\n");
    ck(&mut c, "SMISMEMBER nokey a z", "*2\r\n:0\r\n:0\r\n");
    ck(&mut c, "SMISMEMBER s", "-ERR wrong number of arguments for 'smismember' command\r\n");
    ck(&mut c, "SCARD s", ":4\r\n");
    ck(&mut c, "SCARD nokey", ":0\r\n");
    ck(&mut c, "SREM s a zz", ":1\r\n");
    ck(&mut c, "SREM nokey a", ":0\r\n");
    ck(&mut c, "SREM s", "-ERR wrong number of arguments for 'srem' command\r\n");
    ck(&mut c, "SREM s 1 2 3", ":3\r\n");
    ck(&mut c, "EXISTS s", ":0\r\n");
}

#[test]
fn wrong_type_everywhere() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET str x", "+OK\r\n");
    ck(&mut c, "SADD a 1", ":1\r\n");
    for req in [
        "SADD str a",
        "SREM str a",
        "SMEMBERS str",
        "SISMEMBER str a",
        "SMISMEMBER str a",
        "SCARD str",
        "SPOP str",
        "SPOP str 2",
        "SRANDMEMBER str",
        "SRANDMEMBER str 2",
        "SRANDMEMBER str -2",
        "SSCAN str 0",
        "SMOVE str a 1",
        "SMOVE a str 1",
        "SINTER a str",
        "SINTER nokey str",
        "SINTERCARD 2 a str",
        "SUNION a str",
        "SDIFF a str",
        "SINTERSTORE d a str",
        "SUNIONSTORE d str",
        "SDIFFSTORE d nokey str",
    ] {
        ck(&mut c, req, WRONGTYPE);
    }
    // Argument errors first.
    ck(&mut c, "SPOP str -1", "-ERR value is out of range, must be positive\r\n");
    ck(&mut c, "SSCAN str x", "-ERR invalid cursor\r\n");
    // A missing source answers 0 before the destination's type is looked at.
    ck(&mut c, "SMOVE nokey str 1", ":0\r\n");
    ck(&mut c, "GET str", "$1\r\nx\r\n");
}

#[test]
fn spop_and_srandmember() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SPOP nokey", "$-1\r\n");
    ck(&mut c, "SPOP nokey 3", "*0\r\n");
    ck(&mut c, "SPOP nokey -1", "-ERR value is out of range, must be positive\r\n");
    ck(&mut c, "SPOP nokey x", "-ERR value is out of range, must be positive\r\n");
    ck(&mut c, "SPOP nokey 1 2", "-ERR syntax error\r\n");
    ck(&mut c, "SRANDMEMBER nokey", "$-1\r\n");
    ck(&mut c, "SRANDMEMBER nokey 3", "*0\r\n");
    ck(&mut c, "SRANDMEMBER nokey 1 2", "-ERR syntax error\r\n");
    ck(&mut c, "SRANDMEMBER nokey x", "-ERR value is not an integer or out of range\r\n");
    ck(
        &mut c,
        "SRANDMEMBER nokey -9223372036854775808",
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
    );
    ck(&mut c, "SADD one m", ":1\r\n");
    ck(&mut c, "SRANDMEMBER one", "$1\r\nm\r\n");
    ck(&mut c, "SRANDMEMBER one -3", "*3\r\n$1\r\nm\r\n$1\r\nm\r\n$1\r\nm\r\n");
    ck(&mut c, "SRANDMEMBER one 3", "*1\r\n$1\r\nm\r\n");
    ck(&mut c, "SRANDMEMBER one 0", "*0\r\n");
    ck(&mut c, "SPOP one 0", "*0\r\n");
    ck(&mut c, "SPOP one 5", "*1\r\n$1\r\nm\r\n");
    ck(&mut c, "EXISTS one", ":0\r\n");
    ck(&mut c, "SADD one m", ":1\r\n");
    ck(&mut c, "SPOP one", "$1\r\nm\r\n");
    ck(&mut c, "EXISTS one", ":0\r\n");
    for n in [50usize, 2000] {
        let key = format!("s{n}");
        for i in 0..n {
            ck(&mut c, &format!("SADD {key} m{i}"), ":1\r\n");
        }
        for k in [1, 7, n / 2, n - 1, n, n + 5] {
            let got = call(&mut c, &format!("SRANDMEMBER {key} {k}")).strings();
            assert_eq!(got.len(), k.min(n));
            assert_eq!(got.iter().collect::<HashSet<_>>().len(), got.len());
        }
        let got = call(&mut c, &format!("SRANDMEMBER {key} -{}", n * 30)).strings();
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), n, "every member is picked some time");
        // SPOP takes distinct members out, until none are left.
        let mut popped = HashSet::new();
        loop {
            let got = call(&mut c, &format!("SPOP {key} 13")).strings();
            if got.is_empty() {
                break;
            }
            for m in got {
                assert!(popped.insert(m));
            }
        }
        assert_eq!(popped.len(), n);
        ck(&mut c, &format!("EXISTS {key}"), ":0\r\n");
    }
}

#[test]
fn smove() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SADD s 1 2 3", ":3\r\n");
    ck(&mut c, "SMOVE nokey s 1", ":0\r\n");
    ck(&mut c, "SMOVE s s 1", ":1\r\n");
    ck(&mut c, "SMOVE s s 99", ":0\r\n");
    ck(&mut c, "SMOVE s d 1", ":1\r\n");
    ck(&mut c, "SMOVE s d 99", ":0\r\n");
    ck(&mut c, "SMEMBERS d", "*1\r\n$1\r\n1\r\n");
    ck(&mut c, "SMEMBERS s", "*2\r\n$1\r\n2\r\n$1\r\n3\r\n");
    ck(&mut c, "SMOVE s d 2", ":1\r\n");
    ck(&mut c, "SMOVE s d 3", ":1\r\n");
    ck(&mut c, "EXISTS s", ":0\r\n");
    ck(&mut c, "SCARD d", ":3\r\n");
    ck(&mut c, "SMOVE s d", "-ERR wrong number of arguments for 'smove' command\r\n");
}

#[test]
fn intersections_unions_differences() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SADD a 1 2 3 4 x", ":5\r\n");
    ck(&mut c, "SADD b 2 3 x y", ":4\r\n");
    ck(&mut c, "SADD c 3 x z", ":3\r\n");
    ck(&mut c, "SADD i 5 1 3", ":3\r\n");
    assert_eq!(sorted(call(&mut c, "SINTER a b")), strs(&["2", "3", "x"]));
    assert_eq!(sorted(call(&mut c, "SINTER a b c")), strs(&["3", "x"]));
    ck(&mut c, "SINTER a nokey", "*0\r\n");
    ck(&mut c, "SINTER", "-ERR wrong number of arguments for 'sinter' command\r\n");
    ck(&mut c, "SINTER i i", "*3\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n");
    ck(&mut c, "SINTERCARD 2 a b", ":3\r\n");
    ck(&mut c, "SINTERCARD 2 a b LIMIT 1", ":1\r\n");
    ck(&mut c, "SINTERCARD 2 a b LIMIT 0", ":3\r\n");
    ck(&mut c, "SINTERCARD 2 a nokey", ":0\r\n");
    ck(&mut c, "SINTERCARD 2 a b LIMIT -1", "-ERR LIMIT can't be negative\r\n");
    ck(&mut c, "SINTERCARD 2 a b LIMIT x", "-ERR LIMIT can't be negative\r\n");
    ck(&mut c, "SINTERCARD 0 a", "-ERR numkeys should be greater than 0\r\n");
    ck(&mut c, "SINTERCARD x a", "-ERR numkeys should be greater than 0\r\n");
    ck(&mut c, "SINTERCARD 3 a b", "-ERR Number of keys can't be greater than number of args\r\n");
    ck(&mut c, "SINTERCARD 1 a b", "-ERR syntax error\r\n");
    ck(&mut c, "SINTERCARD 1 a LIMIT", "-ERR syntax error\r\n");
    ck(&mut c, "SINTERCARD 1", "-ERR wrong number of arguments for 'sintercard' command\r\n");
    assert_eq!(sorted(call(&mut c, "SUNION a b c")), strs(&["1", "2", "3", "4", "x", "y", "z"]));
    ck(&mut c, "SUNION i nokey", "*3\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n");
    // An all-integer result is an intset: numeric order, as Redis.
    ck(&mut c, "SADD j 10 -2", ":2\r\n");
    ck(&mut c, "SUNION j i", "*5\r\n$2\r\n-2\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n$2\r\n10\r\n");
    assert_eq!(sorted(call(&mut c, "SDIFF a b")), strs(&["1", "4"]));
    ck(&mut c, "SDIFF a b c", "*2\r\n$1\r\n1\r\n$1\r\n4\r\n");
    ck(&mut c, "SDIFF a a", "*0\r\n");
    ck(&mut c, "SDIFF nokey a", "*0\r\n");
    ck(&mut c, "SDIFF i", "*3\r\n$1\r\n1\r\n$1\r\n3\r\n$1\r\n5\r\n");
    // Stores: overwrite any type, delete the destination on an empty result.
    ck(&mut c, "SINTERSTORE dst a b", ":3\r\n");
    assert_eq!(sorted(call(&mut c, "SMEMBERS dst")), strs(&["2", "3", "x"]));
    ck(&mut c, "SET str x", "+OK\r\n");
    ck(&mut c, "EXPIRE str 100", ":1\r\n");
    ck(&mut c, "SINTERSTORE str a b", ":3\r\n");
    ck(&mut c, "TYPE str", "+set\r\n");
    ck(&mut c, "TTL str", ":-1\r\n");
    ck(&mut c, "SINTERSTORE str a nokey", ":0\r\n");
    ck(&mut c, "EXISTS str", ":0\r\n");
    ck(&mut c, "SUNIONSTORE dst a b c", ":7\r\n");
    ck(&mut c, "SCARD dst", ":7\r\n");
    ck(&mut c, "SDIFFSTORE dst a b", ":2\r\n");
    ck(&mut c, "SMEMBERS dst", "*2\r\n$1\r\n1\r\n$1\r\n4\r\n");
    ck(&mut c, "SDIFFSTORE dst a a", ":0\r\n");
    ck(&mut c, "EXISTS dst", ":0\r\n");
    // A destination that is also a source.
    ck(&mut c, "SUNIONSTORE a a c", ":6\r\n");
    ck(&mut c, "SINTERSTORE", "-ERR wrong number of arguments for 'sinterstore' command\r\n");
    ck(&mut c, "SINTERSTORE d", "-ERR wrong number of arguments for 'sinterstore' command\r\n");
}

#[test]
fn resp3_shapes() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let _ = call(&mut c, "HELLO 3");
    ck(&mut c, "SMEMBERS nokey", "~0\r\n");
    ck(&mut c, "SADD i2 3 1 2", ":3\r\n");
    ck(&mut c, "SMEMBERS i2", "~3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
    ck(&mut c, "SPOP nokey 3", "~0\r\n");
    ck(&mut c, "SPOP i2 0", "~0\r\n");
    ck(&mut c, "SPOP nokey", "_\r\n");
    ck(&mut c, "SRANDMEMBER nokey", "_\r\n");
    ck(&mut c, "SRANDMEMBER nokey 2", "*0\r\n");
    ck(&mut c, "SRANDMEMBER i2 5", "*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
    ck(&mut c, "SINTER i2 nokey", "~0\r\n");
    ck(&mut c, "SUNION nokey", "~0\r\n");
    ck(&mut c, "SDIFF i2 nokey", "~3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
    ck(&mut c, "SMISMEMBER i2 1 9", "*2\r\n:1\r\n:0\r\n");
    ck(&mut c, "SSCAN nokey 0", "*2\r\n$1\r\n0\r\n*0\r\n");
    ck(&mut c, "SSCAN i2 0", "*2\r\n$1\r\n0\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
    ck(&mut c, "SPOP i2 5", "~3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n");
}

#[test]
fn sscan() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SSCAN nokey 0 COUNT 0", "*2\r\n$1\r\n0\r\n*0\r\n");
    ck(&mut c, "SADD i 1 12 3", ":3\r\n");
    ck(&mut c, "SSCAN i 0 COUNT 0", "-ERR syntax error\r\n");
    ck(&mut c, "SSCAN i 0 MATCH 1*", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\n1\r\n$2\r\n12\r\n");
    for i in 0..600 {
        ck(&mut c, &format!("SADD big m{i}"), ":1\r\n");
    }
    let mut cursor = "0".to_string();
    let mut seen = HashSet::new();
    loop {
        let r = call(&mut c, &format!("SSCAN big {cursor} COUNT 50")).arr();
        let mut it = r.into_iter();
        cursor = String::from_utf8(it.next().unwrap().bulk()).unwrap();
        for m in it.next().unwrap().strings() {
            assert!(seen.insert(m));
        }
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 600);
}

/// Random SADD / SREM / SPOP / SMOVE against BTreeSets, across the intset→hashtable
/// conversion, comparing SMEMBERS and SCARD along the way.
#[test]
fn model() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let mut model = [BTreeSet::new(), BTreeSet::new()];
    let keys = ["k0", "k1"];
    let mut x: u64 = 0x9876_5432;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for step in 0..3000 {
        let k = rnd(2) as usize;
        // Integers at first (an intset), then words too.
        let m = if step < 1500 || rnd(2) == 0 { format!("{}", rnd(700)) } else { format!("w{}", rnd(300)) };
        match rnd(8) {
            0..=3 => {
                let new = model[k].insert(m.clone());
                assert_eq!(call(&mut c, &format!("SADD {} {m}", keys[k])), Val::Int(new as i64));
            }
            4 => {
                let had = model[k].remove(&m);
                assert_eq!(call(&mut c, &format!("SREM {} {m}", keys[k])), Val::Int(had as i64));
            }
            5 => {
                let got = call(&mut c, &format!("SPOP {}", keys[k]));
                match got {
                    Val::Nil => assert!(model[k].is_empty()),
                    v => assert!(model[k].remove(&String::from_utf8(v.bulk()).unwrap())),
                }
            }
            6 => {
                let had = model[k].remove(&m);
                if had {
                    model[1 - k].insert(m.clone());
                }
                assert_eq!(call(&mut c, &format!("SMOVE {} {} {m}", keys[k], keys[1 - k])), Val::Int(had as i64));
            }
            _ => {
                let want = model[k].contains(&m) as i64;
                assert_eq!(call(&mut c, &format!("SISMEMBER {} {m}", keys[k])), Val::Int(want));
            }
        }
        if step % 200 == 0 {
            for k in 0..2 {
                let got: BTreeSet<String> =
                    call(&mut c, &format!("SMEMBERS {}", keys[k])).strings().into_iter().collect();
                assert_eq!(got, model[k]);
                assert_eq!(call(&mut c, &format!("SCARD {}", keys[k])), Val::Int(model[k].len() as i64));
            }
            let inter: BTreeSet<String> = model[0].intersection(&model[1]).cloned().collect();
            assert_eq!(call(&mut c, "SINTER k0 k1").strings().into_iter().collect::<BTreeSet<_>>(), inter);
            let diff: BTreeSet<String> = model[0].difference(&model[1]).cloned().collect();
            assert_eq!(call(&mut c, "SDIFF k0 k1").strings().into_iter().collect::<BTreeSet<_>>(), diff);
        }
    }
}

#[test]
fn multi_key_commands_count_one_lookup_per_source() {
    // Each source is looked up in turn (a keyspace hit or miss) up to one of another type;
    // the destination is not looked up. Running totals from redis-server 7.0.15.
    let t = start();
    let mut c = Raw::connect(t.resp);
    let stats = &t.server.as_ref().unwrap().shared.stats;
    let counts = || (stats.sum(|w| &w.keyspace_hits), stats.sum(|w| &w.keyspace_misses));
    ck(&mut c, "SADD a 1 2", ":2\r\n");
    ck(&mut c, "SADD b 2 3", ":2\r\n");
    ck(&mut c, "SET str x", "+OK\r\n");
    ck(&mut c, "CONFIG RESETSTAT", "+OK\r\n");
    for (req, totals) in [
        ("SINTER a b", (2, 0)),
        ("SINTER a nosuch str b", (4, 1)),
        ("SINTERCARD 2 a nosuch", (5, 2)),
        ("SUNION a nosuch b", (7, 3)),
        ("SUNIONSTORE d a str b", (9, 3)),
        ("SDIFF nosuch a b", (11, 4)),
        ("SDIFFSTORE d a b", (13, 4)),
        ("SINTERSTORE d str a", (14, 4)),
    ] {
        let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
        c.send(&cmd(&args));
        read_reply(&mut c);
        assert_eq!(counts(), totals, "{req}");
    }
}
