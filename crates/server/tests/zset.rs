//! The sorted-set commands over a real socket: raw bytes in, exact bytes out.
//!
//! `zset_data/cases.rs` holds request/reply pairs recorded from redis-server 7.0.15 (RESP2
//! and, after `HELLO 3`, RESP3); every error path of the family is among them. They run
//! twice: with the default thresholds (packed sets) and with every set a tree. A model
//! test then drives random edits and reads against a `BTreeMap`.
mod common;
use common::*;

#[path = "zset_data/cases.rs"]
mod cases;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::Ordering;

use larder_engine::Kind;

/// Reads one complete RESP reply (any type, nested) from the connection.
fn read_reply(c: &mut Raw) -> Vec<u8> {
    let mut buf = Vec::new();
    loop {
        if let Ok(Some(n)) = larder_resp::reply_len(&buf) {
            assert_eq!(n, buf.len(), "more than one reply arrived");
            return buf;
        }
        let mut b = [0u8; 65536];
        let k = c.s.read(&mut b).expect("read");
        assert!(k > 0, "connection closed");
        buf.extend_from_slice(&b[..k]);
    }
}

fn send_words(c: &mut Raw, line: &str) -> Vec<u8> {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    c.s.write_all(&cmd(&args)).unwrap();
    read_reply(c)
}

fn hello3(c: &mut Raw) {
    send_words(c, "HELLO 3");
}

/// Makes a set through the engine (the set commands live in another family).
fn sadd(t: &TestServer, key: &str, members: &[&str]) -> usize {
    let mut h = t.server.as_ref().unwrap().shared.store.handle().unwrap();
    h.coll_write(0, key.as_bytes(), Kind::Set, true, |c| {
        for m in members {
            c.put(m.as_bytes(), b"")?;
        }
        Ok(())
    })
    .unwrap();
    members.len()
}

/// ZSCAN's (member, score) pairs, sorted: a tree returns them in hash order.
fn scan_pairs(r: &[u8]) -> Vec<Vec<u8>> {
    let Ok(Some((larder_resp::Reply::Array(top), _))) = larder_resp::parse_reply(r) else { return vec![r.to_vec()] };
    let larder_resp::Reply::Array(items) = &top[1] else { panic!("{top:?}") };
    let mut v: Vec<Vec<u8>> =
        items.chunks(2).map(|p| [p[0].as_bytes().unwrap(), b" ", p[1].as_bytes().unwrap()].concat()).collect();
    v.sort();
    v.insert(0, top[0].as_bytes().unwrap().to_vec());
    v
}

fn run_cases(t: &TestServer, c: &mut Raw, cases: &[(&str, &[u8])]) {
    let tree = t.server.as_ref().unwrap().shared.store.limits().zset_max_listpack_entries.load(Ordering::Relaxed) == 0;
    for (line, want) in cases {
        let got = if let Some(rest) = line.strip_prefix("SADD ") {
            let mut w = rest.split(' ');
            let key = w.next().unwrap();
            let ms: Vec<&str> = w.collect();
            format!(":{}\r\n", sadd(t, key, &ms)).into_bytes()
        } else {
            send_words(c, line)
        };
        if tree && line.starts_with("ZSCAN") {
            assert_eq!(scan_pairs(&got), scan_pairs(want), "request {line:?}");
            continue;
        }
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want), "request {line:?}");
    }
}

fn all_trees(t: &TestServer) {
    let l = t.server.as_ref().unwrap().shared.store.limits();
    l.zset_max_listpack_entries.store(0, Ordering::Relaxed);
    l.set_max_intset_entries.store(0, Ordering::Relaxed);
}

#[test]
fn recorded_replies_resp2() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    run_cases(&t, &mut c, cases::Q2_RESP2);
    run_cases(&t, &mut c, cases::Q3_RESP2);
}

#[test]
fn recorded_replies_resp3() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    hello3(&mut c);
    run_cases(&t, &mut c, cases::Q2_RESP3);
    run_cases(&t, &mut c, cases::Q3_RESP3);
}

#[test]
fn recorded_replies_with_trees() {
    let t = start();
    all_trees(&t);
    let mut c = Raw::connect(t.resp);
    run_cases(&t, &mut c, cases::Q2_RESP2);
    run_cases(&t, &mut c, cases::Q3_RESP2);
    let mut c = Raw::connect(t.resp);
    hello3(&mut c);
    run_cases(&t, &mut c, cases::Q2_RESP3);
    run_cases(&t, &mut c, cases::Q3_RESP3);
    c.check(&cmd(&[b"ZADD", b"enc", b"1", b"a"]), b":1\r\n");
    c.check(&cmd(&[b"OBJECT", b"ENCODING", b"enc"]), b"$8\r\nskiplist\r\n");
}

#[test]
fn arity_errors() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    for (req, name) in [
        ("ZADD k 1", "zadd"),
        ("ZINCRBY k 1", "zincrby"),
        ("ZREM k", "zrem"),
        ("ZSCORE k", "zscore"),
        ("ZMSCORE k", "zmscore"),
        ("ZCARD", "zcard"),
        ("ZCOUNT k 1", "zcount"),
        ("ZLEXCOUNT k 1", "zlexcount"),
        ("ZRANGE k 1", "zrange"),
        ("ZRANGESTORE d k 1", "zrangestore"),
        ("ZRANGEBYSCORE k 1", "zrangebyscore"),
        ("ZREVRANGEBYSCORE k 1", "zrevrangebyscore"),
        ("ZRANGEBYLEX k 1", "zrangebylex"),
        ("ZREVRANGEBYLEX k 1", "zrevrangebylex"),
        ("ZREVRANGE k 1", "zrevrange"),
        ("ZRANK k", "zrank"),
        ("ZREVRANK k", "zrevrank"),
        ("ZPOPMIN", "zpopmin"),
        ("ZPOPMAX", "zpopmax"),
        ("ZMPOP 1 k", "zmpop"),
        ("ZRANDMEMBER", "zrandmember"),
        ("ZREMRANGEBYSCORE k 1", "zremrangebyscore"),
        ("ZREMRANGEBYRANK k 1", "zremrangebyrank"),
        ("ZREMRANGEBYLEX k 1", "zremrangebylex"),
        ("ZUNION 1", "zunion"),
        ("ZINTER 1", "zinter"),
        ("ZDIFF 1", "zdiff"),
        ("ZUNIONSTORE d 1", "zunionstore"),
        ("ZINTERSTORE d 1", "zinterstore"),
        ("ZDIFFSTORE d 1", "zdiffstore"),
        ("ZINTERCARD 1", "zintercard"),
        ("ZSCAN k", "zscan"),
    ] {
        let want = format!("-ERR wrong number of arguments for '{name}' command\r\n");
        assert_eq!(String::from_utf8_lossy(&send_words(&mut c, req)), want, "{req}");
    }
}

#[test]
fn zrandmember_counts() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    send_words(&mut c, "ZADD z 1 a 2 b 3 c 4 d 5 e 6 f 7 g 8 h 9 i 10 j");
    for tree in [false, true] {
        if tree {
            all_trees(&t);
            send_words(&mut c, "ZADD z 11 k");
        }
        let n = if tree { 11 } else { 10 };
        // Distinct members, fewer than the set (both sampling strategies).
        for count in [2usize, 5, 8] {
            let r = send_words(&mut c, &format!("ZRANDMEMBER z {count}"));
            let (reply, _) = larder_resp::parse_reply(&r).unwrap().unwrap();
            let larder_resp::Reply::Array(items) = reply else { panic!("{reply:?}") };
            let mut ms: Vec<_> = items.iter().map(|i| i.as_bytes().unwrap().to_vec()).collect();
            assert_eq!(ms.len(), count);
            ms.sort();
            ms.dedup();
            assert_eq!(ms.len(), count, "distinct");
        }
        // Repeats allowed: exactly |count| members, each from the set.
        let r = send_words(&mut c, "ZRANDMEMBER z -50 WITHSCORES");
        let (reply, _) = larder_resp::parse_reply(&r).unwrap().unwrap();
        let larder_resp::Reply::Array(items) = reply else { panic!() };
        assert_eq!(items.len(), 100);
        for pair in items.chunks(2) {
            let m = pair[0].as_bytes().unwrap();
            let s: f64 = std::str::from_utf8(pair[1].as_bytes().unwrap()).unwrap().parse().unwrap();
            assert_eq!(m[0] - b'a' + 1, s as u8);
        }
        let r = send_words(&mut c, "ZRANDMEMBER z");
        assert!(r.starts_with(b"$1\r\n") && (b'a'..b'a' + n).contains(&r[4]));
    }
}

#[test]
fn pop_function_for_blocking_commands() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    send_words(&mut c, "ZADD z 1 a 2 b 3 c");
    let mut h = t.server.as_ref().unwrap().shared.store.handle().unwrap();
    let got = larder_server::families::zset::pop(&mut h, 0, b"z", true, 2).unwrap().unwrap();
    assert_eq!(got, (vec![(b"c".to_vec(), 3.0), (b"b".to_vec(), 2.0)], false));
    assert!(larder_server::families::zset::pop(&mut h, 0, b"nokey", false, 1).unwrap().is_none());
    let got = larder_server::families::zset::pop(&mut h, 0, b"z", false, 5).unwrap().unwrap();
    // The last member: the key goes (true).
    assert_eq!(got, (vec![(b"a".to_vec(), 1.0)], true));
    c.check(b"EXISTS z\r\n", b":0\r\n");
}

/// Random edits and reads against a `BTreeMap` model (member → score), over the socket,
/// with small thresholds so sets cross from packed to tree on the way.
#[test]
fn model() {
    let t = start();
    t.server.as_ref().unwrap().shared.store.limits().zset_max_listpack_entries.store(16, Ordering::Relaxed);
    let mut c = Raw::connect(t.resp);
    let mut model: HashMap<Vec<u8>, f64> = HashMap::new();
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let sorted = |m: &HashMap<Vec<u8>, f64>| {
        let mut v: Vec<(f64, Vec<u8>)> = m.iter().map(|(k, s)| (*s, k.clone())).collect();
        v.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap().then_with(|| a.1.cmp(&b.1)));
        v
    };
    let flat = |v: &[(f64, Vec<u8>)], scores: bool| -> Vec<u8> {
        let mut out = format!("*{}\r\n", if scores { v.len() * 2 } else { v.len() }).into_bytes();
        for (s, m) in v {
            out.extend_from_slice(format!("${}\r\n", m.len()).as_bytes());
            out.extend_from_slice(m);
            out.extend_from_slice(b"\r\n");
            if scores {
                let t = format!("{s}");
                out.extend_from_slice(format!("${}\r\n{t}\r\n", t.len()).as_bytes());
            }
        }
        out
    };
    for step in 0..3000 {
        let member = format!("m{}", rnd(200)).into_bytes();
        let score = rnd(50) as f64 - 25.0;
        match rnd(8) {
            0..=2 => {
                let r = send_words(&mut c, &format!("ZADD z {score} {}", String::from_utf8_lossy(&member)));
                let added = model.insert(member, score).is_none();
                assert_eq!(r, format!(":{}\r\n", added as u8).into_bytes(), "step {step}");
            }
            3 => {
                let r = send_words(&mut c, &format!("ZREM z {}", String::from_utf8_lossy(&member)));
                let removed = model.remove(&member).is_some();
                assert_eq!(r, format!(":{}\r\n", removed as u8).into_bytes(), "step {step}");
            }
            4 => {
                let r = send_words(&mut c, &format!("ZINCRBY z {score} {}", String::from_utf8_lossy(&member)));
                let e = model.entry(member).or_insert(0.0);
                *e += score;
                let t = format!("{}", *e);
                assert_eq!(r, format!("${}\r\n{t}\r\n", t.len()).into_bytes(), "step {step}");
            }
            5 => {
                let v = sorted(&model);
                let (a, b) = (rnd(30) as i64 - 5, rnd(30) as i64 - 5);
                let r = send_words(&mut c, &format!("ZRANGE z {a} {b} WITHSCORES"));
                let n = v.len() as i64;
                let (mut s, mut e) = (if a < 0 { a + n } else { a }, if b < 0 { b + n } else { b });
                s = s.max(0);
                e = e.min(n - 1);
                let want = if s > e || s >= n { Vec::new() } else { v[s as usize..=e as usize].to_vec() };
                assert_eq!(
                    String::from_utf8_lossy(&r),
                    String::from_utf8_lossy(&flat(&want, true)),
                    "step {step} {a} {b}"
                );
            }
            6 => {
                let v = sorted(&model);
                let (lo, hi) = (rnd(50) as f64 - 25.0, rnd(50) as f64 - 25.0);
                let r = send_words(&mut c, &format!("ZREVRANGEBYSCORE z {hi} ({lo}"));
                let mut want: Vec<_> = v.into_iter().filter(|(s, _)| *s > lo && *s <= hi).collect();
                want.reverse();
                assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(&flat(&want, false)), "step {step}");
            }
            _ => {
                let v = sorted(&model);
                let r = send_words(&mut c, &format!("ZRANK z {}", String::from_utf8_lossy(&member)));
                let want = match v.iter().position(|(_, m)| *m == member) {
                    Some(p) => format!(":{p}\r\n"),
                    None => "$-1\r\n".into(),
                };
                assert_eq!(String::from_utf8_lossy(&r), want, "step {step}");
            }
        }
        if step % 100 == 99 {
            let r = send_words(&mut c, "ZCARD z");
            assert_eq!(r, format!(":{}\r\n", model.len()).into_bytes());
        }
    }
    // The whole set at the end, both directions.
    let v = sorted(&model);
    let r = send_words(&mut c, "ZRANGEBYSCORE z -inf +inf WITHSCORES");
    assert_eq!(String::from_utf8_lossy(&r), String::from_utf8_lossy(&flat(&v, true)));
}

#[test]
fn command_getkeys_for_numkeys_commands() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    run_cases(&t, &mut c, cases::GETKEYS);
}
