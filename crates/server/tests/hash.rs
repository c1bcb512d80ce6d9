//! The hash commands over a real socket: raw bytes in, exact bytes out, every error path,
//! RESP2 and RESP3 shapes, and a random-operation run against a std HashMap model.
//! The expected replies were checked byte for byte against redis-server 7.0.15.
mod common;
#[path = "common/reply.rs"]
mod reply;

use std::collections::{HashMap, HashSet};

use common::*;
use reply::{call, call_args, Val};

#[test]
fn set_get_and_friends() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "HSET h a 1 b 2", ":2\r\n");
    ck(&mut c, "HSET h a 1 b", "-ERR wrong number of arguments for 'hset' command\r\n");
    ck(&mut c, "HSET h", "-ERR wrong number of arguments for 'hset' command\r\n");
    ck(&mut c, "HMSET h a 1 b", "-ERR wrong number of arguments for 'hmset' command\r\n");
    ck(&mut c, "HMSET h c 3", "+OK\r\n");
    ck(&mut c, "HSET h a 10 d 4", ":1\r\n");
    ck(&mut c, "HSETNX h a 5", ":0\r\n");
    ck(&mut c, "HSETNX h z 5", ":1\r\n");
    ck(&mut c, "HSETNX h z", "-ERR wrong number of arguments for 'hsetnx' command\r\n");
    ck(&mut c, "HGET h a", "$2\r\n10\r\n");
    ck(&mut c, "HGET h nope", "$-1\r\n");
    ck(&mut c, "HGET nokey a", "$-1\r\n");
    ck(&mut c, "HMGET h a nope b", "*3\r\n$2\r\n10\r\n$-1\r\n$1\r\n2\r\n");
    ck(&mut c, "HMGET nokey a b", "*2\r\n$-1\r\n$-1\r\n");
    ck(&mut c, "HGETALL h", "*10\r\n$1\r\na\r\n$2\r\n10\r\n$1\r\nb\r\n$1\r\n2\r\n$1\r\nc\r\n$1\r\n3\r\n$1\r\nd\r\n$1\r\n4\r\n$1\r\nz\r\n$1\r\n5\r\n");
    ck(&mut c, "HGETALL nokey", "*0\r\n");
    ck(&mut c, "HKEYS h", "*5\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n$1\r\nz\r\n");
    ck(&mut c, "HVALS h", "*5\r\n$2\r\n10\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n");
    ck(&mut c, "HKEYS nokey", "*0\r\n");
    ck(&mut c, "HVALS nokey", "*0\r\n");
    ck(&mut c, "HLEN h", ":5\r\n");
    ck(&mut c, "HLEN nokey", ":0\r\n");
    ck(&mut c, "HEXISTS h a", ":1\r\n");
    ck(&mut c, "HEXISTS h q", ":0\r\n");
    ck(&mut c, "HEXISTS nokey q", ":0\r\n");
    ck(&mut c, "HSTRLEN h a", ":2\r\n");
    ck(&mut c, "HSTRLEN h q", ":0\r\n");
    ck(&mut c, "HSTRLEN nokey q", ":0\r\n");
    ck(&mut c, "HDEL h a q", ":1\r\n");
    ck(&mut c, "HDEL nokey a", ":0\r\n");
    ck(&mut c, "HDEL h", "-ERR wrong number of arguments for 'hdel' command\r\n");
    // The last field gone, the key is gone.
    ck(&mut c, "HDEL h b c d z", ":4\r\n");
    ck(&mut c, "EXISTS h", ":0\r\n");
    ck(&mut c, "HGET h", "-ERR wrong number of arguments for 'hget' command\r\n");
    ck(&mut c, "HLEN", "-ERR wrong number of arguments for 'hlen' command\r\n");
}

#[test]
fn wrong_type_everywhere() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET str x", "+OK\r\n");
    for req in [
        "HSET str a 1",
        "HSETNX str a 1",
        "HMSET str a 1",
        "HGET str a",
        "HMGET str a",
        "HGETALL str",
        "HKEYS str",
        "HVALS str",
        "HDEL str a",
        "HLEN str",
        "HEXISTS str a",
        "HSTRLEN str a",
        "HINCRBY str a 1",
        "HINCRBYFLOAT str a 1",
        "HRANDFIELD str",
        "HRANDFIELD str 3",
        "HSCAN str 0",
        "HSCAN str 0 COUNT 0",
    ] {
        ck(&mut c, req, WRONGTYPE);
    }
    // Argument errors come before the type check, as in Redis.
    ck(&mut c, "HINCRBY str a x", "-ERR value is not an integer or out of range\r\n");
    ck(&mut c, "HINCRBYFLOAT str a x", "-ERR value is not a valid float\r\n");
    ck(&mut c, "HSCAN str x", "-ERR invalid cursor\r\n");
    ck(&mut c, "GET str", "$1\r\nx\r\n");
    // String commands on a hash.
    ck(&mut c, "HSET h a 1", ":1\r\n");
    ck(&mut c, "GET h", WRONGTYPE);
}

#[test]
fn increments() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "HINCRBY h n 5", ":5\r\n");
    ck(&mut c, "HINCRBY h n -10", ":-5\r\n");
    ck(&mut c, "HINCRBY h n x", "-ERR value is not an integer or out of range\r\n");
    ck(&mut c, "HINCRBY h n 9223372036854775807", ":9223372036854775802\r\n");
    ck(&mut c, "HINCRBY h n 10", "-ERR increment or decrement would overflow\r\n");
    ck(&mut c, "HGET h n", "$19\r\n9223372036854775802\r\n");
    ck(&mut c, "HSET h s abc l 007", ":2\r\n");
    ck(&mut c, "HINCRBY h s 1", "-ERR hash value is not an integer\r\n");
    ck(&mut c, "HINCRBY h l 1", "-ERR hash value is not an integer\r\n");
    ck(&mut c, "HINCRBYFLOAT h f 1.5", "$3\r\n1.5\r\n");
    ck(&mut c, "HINCRBYFLOAT h f 0.1", "$3\r\n1.6\r\n");
    ck(&mut c, "HINCRBYFLOAT h f abc", "-ERR value is not a valid float\r\n");
    ck(&mut c, "HINCRBYFLOAT h f inf", "-ERR value is NaN or Infinity\r\n");
    ck(&mut c, "HINCRBYFLOAT h s 1", "-ERR hash value is not a float\r\n");
    // Long double: 1e400 is a number, its sum with the current value is printed in full.
    ck(&mut c, "HSET h f2 1.7976931348623157e308", ":1\r\n");
    c.send(&cmd(&[b"HINCRBYFLOAT", b"h", b"f2", b"1.7976931348623157e308"]));
    let got = c.read_n(313);
    assert!(got.starts_with(b"$309\r\n35953862697246313999"), "{}", String::from_utf8_lossy(&got));
    ck(&mut c, "HSET h big 1e4932", ":1\r\n");
    ck(&mut c, "HINCRBYFLOAT h big 1e4932", "-ERR increment would produce NaN or Infinity\r\n");
    // 64 significant bits: the quarter is lost, as in Redis.
    ck(&mut c, "HINCRBYFLOAT h n 0.25", "$19\r\n9223372036854775802\r\n");
    ck(&mut c, "HINCRBYFLOAT h new 0.1", "$3\r\n0.1\r\n");
    ck(&mut c, "HINCRBYFLOAT h new 0.2", "$3\r\n0.3\r\n");
}

#[test]
fn resp3_shapes() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let _ = call(&mut c, "HELLO 3");
    ck(&mut c, "HSET one a 1", ":1\r\n");
    ck(&mut c, "HGETALL one", "%1\r\n$1\r\na\r\n$1\r\n1\r\n");
    ck(&mut c, "HGETALL nokey", "%0\r\n");
    ck(&mut c, "HRANDFIELD nokey", "_\r\n");
    ck(&mut c, "HGET one x", "_\r\n");
    ck(&mut c, "HMGET one a b", "*2\r\n$1\r\n1\r\n_\r\n");
    ck(
        &mut c,
        "HRANDFIELD one -3 WITHVALUES",
        "*3\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n",
    );
    ck(&mut c, "HRANDFIELD one 5 WITHVALUES", "*1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    ck(&mut c, "HRANDFIELD one 5", "*1\r\n$1\r\na\r\n");
    ck(&mut c, "HSCAN one 0", "*2\r\n$1\r\n0\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n");
}

#[test]
fn hrandfield() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "HRANDFIELD nokey", "$-1\r\n");
    ck(&mut c, "HRANDFIELD nokey 5", "*0\r\n");
    ck(&mut c, "HRANDFIELD nokey -5 WITHVALUES", "*0\r\n");
    ck(&mut c, "HSET one a 1", ":1\r\n");
    ck(&mut c, "HRANDFIELD one", "$1\r\na\r\n");
    ck(&mut c, "HRANDFIELD one -3", "*3\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n");
    ck(&mut c, "HRANDFIELD one -2 WITHVALUES", "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\na\r\n$1\r\n1\r\n");
    ck(&mut c, "HRANDFIELD one 0", "*0\r\n");
    ck(&mut c, "HRANDFIELD one 1 x", "-ERR syntax error\r\n");
    ck(&mut c, "HRANDFIELD one 1 withvalues x", "-ERR syntax error\r\n");
    ck(&mut c, "HRANDFIELD one x", "-ERR value is not an integer or out of range\r\n");
    ck(
        &mut c,
        "HRANDFIELD one -9223372036854775808",
        "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n",
    );
    ck(&mut c, "HRANDFIELD one -9223372036854775807 WITHVALUES", "-ERR value is out of range\r\n");
    ck(&mut c, "HRANDFIELD one 4611686018427387904 WITHVALUES", "-ERR value is out of range\r\n");
    // Packed and tree hashes: distinct picks for a positive count, all of them past the size.
    for n in [20usize, 300] {
        let key = format!("h{n}");
        let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), key.clone().into_bytes()];
        for i in 0..n {
            args.push(format!("f{i}").into_bytes());
            args.push(format!("v{i}").into_bytes());
        }
        let refs: Vec<&[u8]> = args.iter().map(|a| a.as_slice()).collect();
        assert_eq!(call_args(&mut c, &refs), Val::Int(n as i64));
        for k in [1, 5, n / 2, n - 1, n, n + 10] {
            let got = call(&mut c, &format!("HRANDFIELD {key} {k}")).strings();
            assert_eq!(got.len(), k.min(n));
            assert_eq!(got.iter().collect::<HashSet<_>>().len(), got.len(), "repeats in {got:?}");
            assert!(got.iter().all(|f| f.starts_with('f')));
        }
        let got = call(&mut c, &format!("HRANDFIELD {key} 7 WITHVALUES")).strings();
        assert_eq!(got.len(), 14);
        for p in got.chunks(2) {
            assert_eq!(p[0][1..], p[1][1..], "{p:?}");
        }
        // Repeats allowed: every field shows up over enough picks.
        let got = call(&mut c, &format!("HRANDFIELD {key} -{}", n * 40)).strings();
        assert_eq!(got.len(), n * 40);
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), n);
    }
}

#[test]
fn hscan() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "HSCAN nokey 0", "*2\r\n$1\r\n0\r\n*0\r\n");
    // A missing key answers before its options are looked at.
    ck(&mut c, "HSCAN nokey 0 COUNT 0", "*2\r\n$1\r\n0\r\n*0\r\n");
    ck(&mut c, "HSCAN nokey x", "-ERR invalid cursor\r\n");
    ck(&mut c, "HSET h n1 1 n2 2 x 3", ":3\r\n");
    ck(&mut c, "HSCAN h 0 COUNT 0", "-ERR syntax error\r\n");
    ck(&mut c, "HSCAN h 0 COUNT", "-ERR syntax error\r\n");
    ck(&mut c, "HSCAN h 0 BOGUS 1", "-ERR syntax error\r\n");
    ck(&mut c, "HSCAN h 0 COUNT x", "-ERR value is not an integer or out of range\r\n");
    ck(&mut c, "HSCAN h 0 MATCH n* COUNT 100", "*2\r\n$1\r\n0\r\n*4\r\n$2\r\nn1\r\n$1\r\n1\r\n$2\r\nn2\r\n$1\r\n2\r\n");
    // A tree hash: every field exactly once over a full iteration, in steps of about COUNT.
    let n = 1000;
    for i in 0..n {
        ck(&mut c, &format!("HSET big f{i} {i}"), ":1\r\n");
    }
    let mut cursor = "0".to_string();
    let mut seen = HashMap::new();
    let mut calls = 0;
    loop {
        let r = call(&mut c, &format!("HSCAN big {cursor} COUNT 20")).arr();
        let mut it = r.into_iter();
        cursor = String::from_utf8(it.next().unwrap().bulk()).unwrap();
        let kv = it.next().unwrap().strings();
        assert!(kv.len() <= 2 * 40, "a step returned {}", kv.len());
        for p in kv.chunks(2) {
            assert_eq!(format!("f{}", p[1]), p[0]);
            *seen.entry(p[0].clone()).or_insert(0) += 1;
        }
        calls += 1;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), n);
    assert!(seen.values().all(|&v| v == 1));
    assert!(calls > 10, "{calls} calls");
}

#[test]
fn encoding_follows_the_thresholds() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "HSET h a 1", ":1\r\n");
    ck(&mut c, "OBJECT ENCODING h", "$8\r\nlistpack\r\n");
    let long = "x".repeat(65);
    ck(&mut c, &format!("HSET h b {long}"), ":1\r\n");
    ck(&mut c, "OBJECT ENCODING h", "$9\r\nhashtable\r\n");
    ck(&mut c, "HGET h a", "$1\r\n1\r\n");
}

/// Random HSET / HSETNX / HDEL / HINCRBY against a HashMap, across the packed→tree
/// conversion, comparing HGETALL, HLEN and single reads along the way.
#[test]
fn model() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let mut model: HashMap<String, String> = HashMap::new();
    let mut x: u64 = 0x1234_5678;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for step in 0..3000 {
        let f = format!("f{}", rnd(400));
        match rnd(10) {
            0..=3 => {
                let v = format!("{}", rnd(1000));
                let new = model.insert(f.clone(), v.clone()).is_none();
                assert_eq!(call(&mut c, &format!("HSET k {f} {v}")), Val::Int(new as i64));
            }
            4 => {
                let v = format!("n{}", rnd(1000));
                let new = !model.contains_key(&f);
                if new {
                    model.insert(f.clone(), v.clone());
                }
                assert_eq!(call(&mut c, &format!("HSETNX k {f} {v}")), Val::Int(new as i64));
            }
            5..=6 => {
                let had = model.remove(&f).is_some();
                assert_eq!(call(&mut c, &format!("HDEL k {f}")), Val::Int(had as i64));
            }
            7 => {
                let d = rnd(100) as i64 - 50;
                let got = call(&mut c, &format!("HINCRBY k {f} {d}"));
                match model.get(&f).map(|v| v.parse::<i64>()) {
                    Some(Err(_)) => assert_eq!(got, Val::Err("ERR hash value is not an integer".into())),
                    cur => {
                        let n = cur.map_or(0, |r| r.unwrap()) + d;
                        model.insert(f.clone(), n.to_string());
                        assert_eq!(got, Val::Int(n));
                    }
                }
            }
            _ => {
                let want = model.get(&f).map_or(Val::Nil, |v| Val::Bulk(v.clone().into_bytes()));
                assert_eq!(call(&mut c, &format!("HGET k {f}")), want);
            }
        }
        if step % 250 == 0 {
            let all = call(&mut c, "HGETALL k").strings();
            let got: HashMap<String, String> = all.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect();
            assert_eq!(got.len() * 2, all.len());
            assert_eq!(got, model);
            assert_eq!(call(&mut c, "HLEN k"), Val::Int(model.len() as i64));
        }
    }
}

/// CONFIG SET of the thresholds (and their ziplist aliases) changes when new edits convert.
#[test]
fn thresholds_from_config_set() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "CONFIG GET hash-max-listpack-entries", "*2\r\n$25\r\nhash-max-listpack-entries\r\n$3\r\n512\r\n");
    ck(&mut c, "CONFIG SET hash-max-ziplist-entries 2", "+OK\r\n");
    ck(&mut c, "CONFIG GET hash-max-listpack-entries", "*2\r\n$25\r\nhash-max-listpack-entries\r\n$1\r\n2\r\n");
    ck(&mut c, "HSET h a 1 b 2", ":2\r\n");
    ck(&mut c, "OBJECT ENCODING h", "$8\r\nlistpack\r\n");
    ck(&mut c, "HSET h c 3", ":1\r\n");
    ck(&mut c, "OBJECT ENCODING h", "$9\r\nhashtable\r\n");
    ck(&mut c, "CONFIG SET hash-max-listpack-entries 100 hash-max-listpack-value 4", "+OK\r\n");
    ck(&mut c, "HSET h2 a 1234", ":1\r\n");
    ck(&mut c, "OBJECT ENCODING h2", "$8\r\nlistpack\r\n");
    ck(&mut c, "HSET h2 b 12345", ":1\r\n");
    ck(&mut c, "OBJECT ENCODING h2", "$9\r\nhashtable\r\n");
    ck(&mut c, "CONFIG SET set-max-intset-entries 3", "+OK\r\n");
    ck(&mut c, "SADD s 1 2 3", ":3\r\n");
    ck(&mut c, "OBJECT ENCODING s", "$6\r\nintset\r\n");
    ck(&mut c, "SADD s 4", ":1\r\n");
    ck(&mut c, "OBJECT ENCODING s", "$9\r\nhashtable\r\n");
    ck(
        &mut c,
        "CONFIG SET hash-max-listpack-value -1",
        "-ERR CONFIG SET failed (possibly related to argument 'hash-max-listpack-value') - argument must be a memory value\r\n",
    );
    ck(
        &mut c,
        "CONFIG SET set-max-listpack-entries 1",
        "-ERR Unknown option or number of arguments for CONFIG SET - 'set-max-listpack-entries'\r\n",
    );
    ck(&mut c, "CONFIG SET zset-max-ziplist-value 1kb", "+OK\r\n");
    ck(&mut c, "CONFIG GET zset-max-ziplist-value", "*2\r\n$22\r\nzset-max-ziplist-value\r\n$4\r\n1024\r\n");
    let l = t.server.as_ref().unwrap().shared.store.limits();
    assert_eq!(l.zset_max_listpack_value.load(std::sync::atomic::Ordering::Relaxed), 1024);
}

/// A negative count no reply could hold (Redis builds it until its output limit closes
/// the client) ends at the output bound with the connection closed, the server unharmed,
/// and the client gets none of it, as from Redis (which writes nothing to a client it is
/// closing for its output limit).
#[test]
fn endless_random_replies_are_cut_off() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(&cmd(&[b"CONFIG", b"SET", b"client-output-buffer-limit", b"normal 1mb 0 0"]), b"+OK\r\n");
    ck(&mut c, "HSET h a 1", ":1\r\n");
    ck(&mut c, "SADD s a", ":1\r\n");
    for req in [
        "HRANDFIELD h -9223372036854775807",
        "HRANDFIELD h -4611686018427387903 WITHVALUES",
        "SRANDMEMBER s -9223372036854775807",
    ] {
        let mut d = Raw::connect(t.resp);
        let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
        d.send(&cmd(&args));
        assert!(d.closed(), "{req}: still open, or it sent some of the reply");
    }
    ck(&mut c, "HRANDFIELD h -2", "*2\r\n$1\r\na\r\n$1\r\na\r\n");
}
