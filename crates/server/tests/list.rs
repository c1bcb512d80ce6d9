//! List commands and blocking pops over real sockets: exact bytes in, exact bytes out.
//! Expected replies were taken from redis-server 7.0.15.

mod common;
#[path = "common/reply.rs"]
mod reply;

use std::time::{Duration, Instant};

use common::{blocked_clients, ck, client_id, cmd, one_per_worker, silent, start, start_with, wait_blocked, Raw};

fn c(r: &mut Raw, args: &[&str], want: &str) {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
    r.check(&cmd(&a), want.as_bytes());
}

#[test]
fn pushes_pops_and_ranges() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    c(&mut r, &["LPUSH", "l", "a", "b", "c"], ":3\r\n");
    c(&mut r, &["RPUSH", "l", "d", "e"], ":5\r\n");
    c(&mut r, &["LPUSHX", "nx", "a"], ":0\r\n");
    c(&mut r, &["RPUSHX", "nx", "a"], ":0\r\n");
    c(&mut r, &["EXISTS", "nx"], ":0\r\n");
    c(&mut r, &["LPUSHX", "l", "z"], ":6\r\n");
    c(&mut r, &["RPUSHX", "l", "y", "x"], ":8\r\n");
    c(
        &mut r,
        &["LRANGE", "l", "0", "-1"],
        "*8\r\n$1\r\nz\r\n$1\r\nc\r\n$1\r\nb\r\n$1\r\na\r\n$1\r\nd\r\n$1\r\ne\r\n$1\r\ny\r\n$1\r\nx\r\n",
    );
    c(&mut r, &["LRANGE", "l", "-3", "-2"], "*2\r\n$1\r\ne\r\n$1\r\ny\r\n");
    c(&mut r, &["LRANGE", "l", "5", "2"], "*0\r\n");
    c(&mut r, &["LRANGE", "l", "-100", "1"], "*2\r\n$1\r\nz\r\n$1\r\nc\r\n");
    c(&mut r, &["LRANGE", "l", "7", "100"], "*1\r\n$1\r\nx\r\n");
    c(&mut r, &["LRANGE", "l", "8", "100"], "*0\r\n");
    c(&mut r, &["LRANGE", "nx", "0", "-1"], "*0\r\n");
    c(&mut r, &["LLEN", "l"], ":8\r\n");
    c(&mut r, &["LLEN", "nx"], ":0\r\n");
    c(&mut r, &["LINDEX", "l", "0"], "$1\r\nz\r\n");
    c(&mut r, &["LINDEX", "l", "-1"], "$1\r\nx\r\n");
    c(&mut r, &["LINDEX", "l", "8"], "$-1\r\n");
    c(&mut r, &["LINDEX", "l", "-9"], "$-1\r\n");
    c(&mut r, &["LINDEX", "nx", "0"], "$-1\r\n");
    c(&mut r, &["LSET", "l", "-1", "X"], "+OK\r\n");
    c(&mut r, &["LINDEX", "l", "7"], "$1\r\nX\r\n");
    c(&mut r, &["LPOP", "l"], "$1\r\nz\r\n");
    c(&mut r, &["RPOP", "l"], "$1\r\nX\r\n");
    c(&mut r, &["LPOP", "l", "2"], "*2\r\n$1\r\nc\r\n$1\r\nb\r\n");
    c(&mut r, &["RPOP", "l", "2"], "*2\r\n$1\r\ny\r\n$1\r\ne\r\n");
    c(&mut r, &["LPOP", "l", "0"], "*0\r\n");
    c(&mut r, &["RPOP", "l", "10"], "*2\r\n$1\r\nd\r\n$1\r\na\r\n");
    c(&mut r, &["EXISTS", "l"], ":0\r\n");
    c(&mut r, &["LPOP", "l"], "$-1\r\n");
    c(&mut r, &["LPOP", "l", "1"], "*-1\r\n");
    c(&mut r, &["LPOP", "l", "0"], "*-1\r\n");
    c(&mut r, &["RPOP", "l", "1"], "*-1\r\n");
    c(&mut r, &["TYPE", "l"], "+none\r\n");
    c(&mut r, &["RPUSH", "l", "1"], ":1\r\n");
    c(&mut r, &["TYPE", "l"], "+list\r\n");
    c(&mut r, &["OBJECT", "ENCODING", "l"], "$9\r\nquicklist\r\n");
}

#[test]
fn insert_remove_trim_and_positions() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    c(&mut r, &["RPUSH", "l", "a", "b", "c"], ":3\r\n");
    c(&mut r, &["LINSERT", "l", "BEFORE", "b", "x"], ":4\r\n");
    c(&mut r, &["LINSERT", "l", "after", "c", "y"], ":5\r\n");
    c(&mut r, &["LINSERT", "l", "AFTER", "nope", "y"], ":-1\r\n");
    c(&mut r, &["LINSERT", "nx", "AFTER", "a", "y"], ":0\r\n");
    c(&mut r, &["LRANGE", "l", "0", "-1"], "*5\r\n$1\r\na\r\n$1\r\nx\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\ny\r\n");

    c(&mut r, &["RPUSH", "r", "a", "b", "a", "c", "a", "b", "a"], ":7\r\n");
    c(&mut r, &["LREM", "r", "2", "a"], ":2\r\n");
    c(&mut r, &["LRANGE", "r", "0", "-1"], "*5\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\na\r\n");
    c(&mut r, &["LREM", "r", "-1", "b"], ":1\r\n");
    c(&mut r, &["LRANGE", "r", "0", "-1"], "*4\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\na\r\n$1\r\na\r\n");
    c(&mut r, &["LREM", "r", "0", "a"], ":2\r\n");
    c(&mut r, &["LREM", "r", "0", "zz"], ":0\r\n");
    c(&mut r, &["LREM", "nx", "0", "a"], ":0\r\n");
    c(&mut r, &["LREM", "r", "0", "b"], ":1\r\n");
    c(&mut r, &["LREM", "r", "0", "c"], ":1\r\n");
    c(&mut r, &["EXISTS", "r"], ":0\r\n");

    c(&mut r, &["RPUSH", "t", "1", "2", "3", "4", "5", "6"], ":6\r\n");
    c(&mut r, &["LTRIM", "t", "1", "-2"], "+OK\r\n");
    c(&mut r, &["LRANGE", "t", "0", "-1"], "*4\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n4\r\n$1\r\n5\r\n");
    c(&mut r, &["LTRIM", "t", "0", "0"], "+OK\r\n");
    c(&mut r, &["LRANGE", "t", "0", "-1"], "*1\r\n$1\r\n2\r\n");
    c(&mut r, &["LTRIM", "t", "5", "1"], "+OK\r\n");
    c(&mut r, &["EXISTS", "t"], ":0\r\n");
    c(&mut r, &["LTRIM", "nx", "0", "1"], "+OK\r\n");

    c(&mut r, &["RPUSH", "p", "a", "b", "c", "1", "2", "3", "c", "c"], ":8\r\n");
    c(&mut r, &["LPOS", "p", "c"], ":2\r\n");
    c(&mut r, &["LPOS", "p", "c", "RANK", "2"], ":6\r\n");
    c(&mut r, &["LPOS", "p", "c", "RANK", "-1"], ":7\r\n");
    c(&mut r, &["LPOS", "p", "c", "RANK", "-2", "COUNT", "0"], "*2\r\n:6\r\n:2\r\n");
    c(&mut r, &["LPOS", "p", "c", "COUNT", "0"], "*3\r\n:2\r\n:6\r\n:7\r\n");
    c(&mut r, &["LPOS", "p", "c", "COUNT", "2", "RANK", "2"], "*2\r\n:6\r\n:7\r\n");
    c(&mut r, &["LPOS", "p", "c", "MAXLEN", "2"], "$-1\r\n");
    c(&mut r, &["LPOS", "p", "c", "MAXLEN", "3"], ":2\r\n");
    c(&mut r, &["LPOS", "p", "c", "RANK", "-1", "MAXLEN", "3", "COUNT", "0"], "*2\r\n:7\r\n:6\r\n");
    c(&mut r, &["LPOS", "p", "c", "RANK", "-9223372036854775808"], ":7\r\n");
    c(&mut r, &["LPOS", "p", "zz"], "$-1\r\n");
    c(&mut r, &["LPOS", "p", "zz", "COUNT", "1"], "*0\r\n");
    c(&mut r, &["LPOS", "nx", "zz"], "$-1\r\n");
    c(&mut r, &["LPOS", "nx", "zz", "COUNT", "1"], "*0\r\n");
}

#[test]
fn moves() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    c(&mut r, &["RPUSH", "m", "1", "2", "3"], ":3\r\n");
    c(&mut r, &["LMOVE", "m", "m", "LEFT", "RIGHT"], "$1\r\n1\r\n");
    c(&mut r, &["LRANGE", "m", "0", "-1"], "*3\r\n$1\r\n2\r\n$1\r\n3\r\n$1\r\n1\r\n");
    c(&mut r, &["LMOVE", "m", "n", "RIGHT", "LEFT"], "$1\r\n1\r\n");
    c(&mut r, &["LMOVE", "m", "n", "left", "right"], "$1\r\n2\r\n");
    c(&mut r, &["LRANGE", "n", "0", "-1"], "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
    c(&mut r, &["RPOPLPUSH", "m", "n"], "$1\r\n3\r\n");
    c(&mut r, &["EXISTS", "m"], ":0\r\n");
    c(&mut r, &["RPOPLPUSH", "m", "n"], "$-1\r\n");
    c(&mut r, &["LMOVE", "m", "n", "LEFT", "LEFT"], "$-1\r\n");
    c(&mut r, &["LRANGE", "n", "0", "-1"], "*3\r\n$1\r\n3\r\n$1\r\n1\r\n$1\r\n2\r\n");
    // LMPOP: the first non-empty list, as [key, [elements]].
    c(&mut r, &["LMPOP", "2", "nx", "n", "LEFT"], "*2\r\n$1\r\nn\r\n*1\r\n$1\r\n3\r\n");
    c(&mut r, &["LMPOP", "2", "nx", "n", "RIGHT", "COUNT", "10"], "*2\r\n$1\r\nn\r\n*2\r\n$1\r\n2\r\n$1\r\n1\r\n");
    c(&mut r, &["LMPOP", "2", "nx", "n", "RIGHT", "COUNT", "10"], "*-1\r\n");
}

#[test]
fn errors() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    let wrong = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    let syntax = "-ERR syntax error\r\n";
    let notint = "-ERR value is not an integer or out of range\r\n";
    c(&mut r, &["SET", "s", "v"], "+OK\r\n");
    c(&mut r, &["RPUSH", "l", "a", "b"], ":2\r\n");
    for (name, args) in [
        ("lpush", vec!["LPUSH", "k"]),
        ("rpush", vec!["RPUSH", "k"]),
        ("lpushx", vec!["LPUSHX", "k"]),
        ("rpushx", vec!["RPUSHX", "k"]),
        ("lpop", vec!["LPOP"]),
        ("lpop", vec!["LPOP", "k", "1", "2"]),
        ("rpop", vec!["RPOP", "k", "1", "2"]),
        ("llen", vec!["LLEN"]),
        ("lindex", vec!["LINDEX", "k"]),
        ("lset", vec!["LSET", "k", "0"]),
        ("lrange", vec!["LRANGE", "k", "0"]),
        ("ltrim", vec!["LTRIM", "k", "0"]),
        ("linsert", vec!["LINSERT", "k", "BEFORE", "a"]),
        ("lrem", vec!["LREM", "k", "0"]),
        ("lpos", vec!["LPOS", "k"]),
        ("lmove", vec!["LMOVE", "a", "b", "LEFT"]),
        ("rpoplpush", vec!["RPOPLPUSH", "a"]),
        ("lmpop", vec!["LMPOP", "1", "k"]),
        ("blpop", vec!["BLPOP", "k"]),
        ("brpop", vec!["BRPOP", "k"]),
        ("blmove", vec!["BLMOVE", "a", "b", "LEFT", "LEFT"]),
        ("brpoplpush", vec!["BRPOPLPUSH", "a", "b"]),
        ("blmpop", vec!["BLMPOP", "0", "1", "k"]),
    ] {
        c(&mut r, &args, &format!("-ERR wrong number of arguments for '{name}' command\r\n"));
    }
    for args in [
        vec!["LPUSH", "s", "a"],
        vec!["RPUSH", "s", "a"],
        vec!["LPUSHX", "s", "a"],
        vec!["RPUSHX", "s", "a"],
        vec!["LPOP", "s"],
        vec!["RPOP", "s", "2"],
        vec!["LLEN", "s"],
        vec!["LINDEX", "s", "0"],
        vec!["LINDEX", "s", "x"],
        vec!["LSET", "s", "0", "a"],
        vec!["LSET", "s", "x", "a"],
        vec!["LRANGE", "s", "0", "1"],
        vec!["LTRIM", "s", "0", "1"],
        vec!["LINSERT", "s", "BEFORE", "a", "b"],
        vec!["LREM", "s", "0", "a"],
        vec!["LPOS", "s", "a"],
        vec!["LMOVE", "s", "l", "LEFT", "LEFT"],
        vec!["LMOVE", "l", "s", "LEFT", "LEFT"],
        vec!["RPOPLPUSH", "s", "l"],
        vec!["RPOPLPUSH", "l", "s"],
        vec!["LMPOP", "2", "nx", "s", "LEFT"],
        vec!["BLPOP", "nx", "s", "0"],
        vec!["BRPOP", "s", "0"],
        vec!["BLMOVE", "s", "l", "LEFT", "LEFT", "0"],
        vec!["BLMOVE", "l", "s", "LEFT", "LEFT", "0"],
        vec!["BRPOPLPUSH", "s", "l", "0"],
        vec!["BLMPOP", "0", "1", "s", "LEFT"],
    ] {
        c(&mut r, &args, wrong);
    }
    // Nothing moved on the WRONGTYPE moves.
    c(&mut r, &["LRANGE", "l", "0", "-1"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    // Missing source: null before the destination's type is looked at.
    c(&mut r, &["LMOVE", "nx", "s", "LEFT", "LEFT"], "$-1\r\n");
    c(&mut r, &["RPOPLPUSH", "nx", "s"], "$-1\r\n");

    c(&mut r, &["LPOP", "l", "-1"], "-ERR value is out of range, must be positive\r\n");
    c(&mut r, &["LPOP", "l", "x"], "-ERR value is out of range, must be positive\r\n");
    c(&mut r, &["LRANGE", "l", "x", "1"], notint);
    c(&mut r, &["LRANGE", "nx", "0", "x"], notint);
    c(&mut r, &["LTRIM", "l", "0", "x"], notint);
    c(&mut r, &["LREM", "l", "x", "a"], notint);
    c(&mut r, &["LINDEX", "l", "x"], notint);
    c(&mut r, &["LINDEX", "nx", "x"], "$-1\r\n");
    c(&mut r, &["LSET", "l", "x", "a"], notint);
    c(&mut r, &["LSET", "l", "5", "a"], "-ERR index out of range\r\n");
    c(&mut r, &["LSET", "nx", "0", "a"], "-ERR no such key\r\n");
    c(&mut r, &["LSET", "nx", "x", "a"], "-ERR no such key\r\n");
    c(&mut r, &["LINSERT", "l", "MIDDLE", "a", "b"], syntax);
    c(&mut r, &["LINSERT", "nx", "MIDDLE", "a", "b"], syntax);
    c(&mut r, &["LMOVE", "l", "m", "UP", "LEFT"], syntax);
    c(&mut r, &["LMOVE", "l", "m", "LEFT", "DOWN"], syntax);
    c(
        &mut r,
        &["LPOS", "l", "a", "RANK", "0"],
        "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n",
    );
    c(&mut r, &["LPOS", "l", "a", "RANK", "x"], notint);
    c(&mut r, &["LPOS", "l", "a", "COUNT", "-1"], "-ERR COUNT can't be negative\r\n");
    c(&mut r, &["LPOS", "l", "a", "COUNT", "x"], "-ERR COUNT can't be negative\r\n");
    c(&mut r, &["LPOS", "l", "a", "MAXLEN", "-1"], "-ERR MAXLEN can't be negative\r\n");
    c(&mut r, &["LPOS", "l", "a", "MAXLEN"], syntax);
    c(&mut r, &["LPOS", "l", "a", "FOO", "1"], syntax);
    c(&mut r, &["LPOS", "nx", "a", "RANK", "0"], "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n");
    for p in ["0", "-1", "x"] {
        c(&mut r, &["LMPOP", p, "k", "LEFT"], "-ERR numkeys should be greater than 0\r\n");
        c(&mut r, &["BLMPOP", "0", p, "k", "LEFT"], "-ERR numkeys should be greater than 0\r\n");
    }
    c(&mut r, &["LMPOP", "5", "k", "LEFT"], syntax);
    c(&mut r, &["LMPOP", "1", "k", "MIDDLE"], syntax);
    c(&mut r, &["LMPOP", "1", "k", "LEFT", "COUNT", "0"], "-ERR count should be greater than 0\r\n");
    c(&mut r, &["LMPOP", "1", "k", "LEFT", "COUNT", "x"], "-ERR count should be greater than 0\r\n");
    c(&mut r, &["LMPOP", "1", "k", "LEFT", "COUNT", "1", "COUNT", "1"], syntax);
    c(&mut r, &["LMPOP", "1", "k", "LEFT", "COUNT"], syntax);
    c(&mut r, &["LMPOP", "1", "k", "LEFT", "FOO"], syntax);
    let notfloat = "-ERR timeout is not a float or out of range\r\n";
    let negative = "-ERR timeout is negative\r\n";
    c(&mut r, &["BLPOP", "k", "x"], notfloat);
    c(&mut r, &["BLPOP", "k", "nan"], notfloat);
    c(&mut r, &["BRPOP", "k", " 1"], notfloat);
    c(&mut r, &["BLPOP", "k", "-1"], negative);
    c(&mut r, &["BLPOP", "k", "-0.002"], negative);
    c(&mut r, &["BLPOP", "k", "inf"], negative);
    c(&mut r, &["BLPOP", "k", "1e20"], negative);
    c(&mut r, &["BLMOVE", "a", "b", "LEFT", "LEFT", "x"], notfloat);
    c(&mut r, &["BLMOVE", "a", "b", "UP", "LEFT", "x"], syntax);
    c(&mut r, &["BRPOPLPUSH", "a", "b", "-1"], negative);
    c(&mut r, &["BLMPOP", "x", "1", "k", "LEFT"], notfloat);
    // BLMPOP checks numkeys and the options before the timeout, as Redis.
    c(&mut r, &["BLMPOP", "x", "1", "k", "UP"], syntax);
    c(&mut r, &["BLMPOP", "0", "1", "k", "LEFT", "COUNT", "0"], "-ERR count should be greater than 0\r\n");
    // Nothing was left blocked by any of these.
    assert_eq!(blocked_clients(&mut r), 0);
}

#[test]
fn resp3_shapes() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    r.send(&cmd(&[b"HELLO", b"3"]));
    let _ = read_hello(&mut r);
    c(&mut r, &["LPOP", "nx"], "_\r\n");
    c(&mut r, &["LPOP", "nx", "1"], "_\r\n");
    c(&mut r, &["RPOP", "nx", "0"], "_\r\n");
    c(&mut r, &["LINDEX", "nx", "0"], "_\r\n");
    c(&mut r, &["LPOS", "nx", "a"], "_\r\n");
    c(&mut r, &["LMOVE", "nx", "d", "LEFT", "LEFT"], "_\r\n");
    c(&mut r, &["LMPOP", "1", "nx", "LEFT"], "_\r\n");
    c(&mut r, &["BLPOP", "nx", "0.01"], "_\r\n");
    c(&mut r, &["BLMOVE", "nx", "d", "LEFT", "LEFT", "0.01"], "_\r\n");
    c(&mut r, &["BLMPOP", "0.01", "1", "nx", "LEFT"], "_\r\n");
    c(&mut r, &["RPUSH", "l", "a", "b"], ":2\r\n");
    c(&mut r, &["LRANGE", "l", "0", "-1"], "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    c(&mut r, &["LPOP", "l", "1"], "*1\r\n$1\r\na\r\n");
    c(&mut r, &["BLPOP", "l", "0"], "*2\r\n$1\r\nl\r\n$1\r\nb\r\n");
}

/// Reads HELLO's RESP3 map until its last field (`modules` → empty array).
fn read_hello(r: &mut Raw) -> Vec<u8> {
    let mut got = Vec::new();
    while !got.ends_with(b"$7\r\nmodules\r\n*0\r\n") {
        let b = r.read_n(1);
        assert!(!b.is_empty());
        got.extend_from_slice(&b);
    }
    got
}

/// A model check through the wire: random pushes, pops, sets, inserts, removes and trims on
/// a list big enough to be a tree, against a VecDeque; LRANGE and LINDEX compared often.
#[test]
fn random_ops_match_a_model() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    let mut model: std::collections::VecDeque<String> = Default::default();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n.max(1)
    };
    for step in 0..3000 {
        let v = format!("v{}", rnd(50));
        match rnd(10) {
            0..=2 => {
                let k = 1 + rnd(20);
                let vals: Vec<String> = (0..k).map(|j| format!("{v}-{step}-{j}")).collect();
                let mut args = vec![if rnd(2) == 0 { "LPUSH" } else { "RPUSH" }, "m"];
                args.extend(vals.iter().map(|s| s.as_str()));
                for x in &vals {
                    if args[0] == "LPUSH" {
                        model.push_front(x.clone());
                    } else {
                        model.push_back(x.clone());
                    }
                }
                c(&mut r, &args, &format!(":{}\r\n", model.len()));
            }
            3 => {
                let want = match model.pop_front() {
                    Some(x) => format!("${}\r\n{x}\r\n", x.len()),
                    None => "$-1\r\n".into(),
                };
                c(&mut r, &["LPOP", "m"], &want);
            }
            4 if !model.is_empty() => {
                let i = rnd(model.len() as u64) as usize;
                model[i] = v.clone();
                c(&mut r, &["LSET", "m", &i.to_string(), &v], "+OK\r\n");
            }
            5 if !model.is_empty() => {
                let i = rnd(model.len() as u64) as usize;
                let pivot = model[i].clone();
                let at = model.iter().position(|x| *x == pivot).unwrap();
                model.insert(at + 1, v.clone());
                c(&mut r, &["LINSERT", "m", "AFTER", &pivot, &v], &format!(":{}\r\n", model.len()));
            }
            6 if !model.is_empty() => {
                // LREM of an element that may occur more than once (LSET and LINSERT reuse
                // the short values), from the head, the tail or everywhere.
                let i = rnd(model.len() as u64) as usize;
                let x = model[i].clone();
                let count = rnd(5) as i64 - 2;
                let hits: Vec<usize> = model.iter().enumerate().filter(|(_, y)| **y == x).map(|(j, _)| j).collect();
                let take: Vec<usize> = match count {
                    0 => hits,
                    n if n > 0 => hits.into_iter().take(n as usize).collect(),
                    n => hits.into_iter().rev().take(n.unsigned_abs() as usize).collect(),
                };
                for &j in take.iter().rev().collect::<std::collections::BTreeSet<_>>().iter().rev() {
                    model.remove(*j);
                }
                c(&mut r, &["LREM", "m", &count.to_string(), &x], &format!(":{}\r\n", take.len()));
            }
            7 if model.len() > 400 => {
                let keep_from = rnd(50) as usize;
                let keep_to = model.len() - 1 - rnd(50) as usize;
                model = model.iter().skip(keep_from).take(keep_to + 1 - keep_from).cloned().collect();
                c(&mut r, &["LTRIM", "m", &keep_from.to_string(), &keep_to.to_string()], "+OK\r\n");
            }
            _ => {
                let i = rnd(model.len() as u64 + 2) as i64 - 1;
                let want = match usize::try_from(i).ok().and_then(|i| model.get(i)) {
                    Some(x) => format!("${}\r\n{x}\r\n", x.len()),
                    None if i == -1 && !model.is_empty() => {
                        let x = model.back().unwrap();
                        format!("${}\r\n{x}\r\n", x.len())
                    }
                    None => "$-1\r\n".into(),
                };
                c(&mut r, &["LINDEX", "m", &i.to_string()], &want);
            }
        }
        if step % 250 == 0 {
            let from = rnd(model.len() as u64 + 1) as usize;
            let to = from + rnd(100) as usize;
            let part: Vec<&String> = model.iter().skip(from).take(to + 1 - from).collect();
            let mut want = format!("*{}\r\n", part.len());
            for x in part {
                want.push_str(&format!("${}\r\n{x}\r\n", x.len()));
            }
            c(&mut r, &["LRANGE", "m", &from.to_string(), &to.to_string()], &want);
        }
    }
    c(&mut r, &["LLEN", "m"], &format!(":{}\r\n", model.len()));
}

#[test]
fn blpop_is_served_by_a_push_from_another_connection() {
    let s = start_with(|a| a.threads = Some(2));
    let mut p = Raw::connect(s.resp);
    // Several waiters on several connections: with two workers, some sit on the other
    // worker than the pusher.
    let mut ws: Vec<Raw> = (0..4).map(|_| Raw::connect(s.resp)).collect();
    for (i, w) in ws.iter_mut().enumerate() {
        w.send(&cmd(&[b"BLPOP", format!("k{i}").as_bytes(), b"0"]));
    }
    wait_blocked(&mut p, 4);
    for w in ws.iter_mut() {
        silent(w);
    }
    for i in 0..4 {
        c(&mut p, &["RPUSH", &format!("k{i}"), &format!("v{i}")], ":1\r\n");
    }
    for (i, w) in ws.iter_mut().enumerate() {
        w.check(b"", format!("*2\r\n$2\r\nk{i}\r\n$2\r\nv{i}\r\n").as_bytes());
    }
    wait_blocked(&mut p, 0);
    for i in 0..4 {
        c(&mut p, &["EXISTS", &format!("k{i}")], ":0\r\n");
    }
    // A client blocked on several keys is served from the one that gets an element, and
    // what it sends while blocked runs afterwards.
    let w = &mut ws[0];
    w.send(&cmd(&[b"BRPOP", b"a", b"b", b"a", b"0"]));
    wait_blocked(&mut p, 1);
    w.send(&cmd(&[b"PING"]));
    silent(w);
    c(&mut p, &["LPUSH", "b", "x", "y"], ":2\r\n");
    w.check(b"", b"*2\r\n$1\r\nb\r\n$1\r\nx\r\n+PONG\r\n");
    c(&mut p, &["LRANGE", "b", "0", "-1"], "*1\r\n$1\r\ny\r\n");
    // BLMPOP with a count.
    w.send(&cmd(&[b"BLMPOP", b"0", b"2", b"c", b"d", b"LEFT", b"COUNT", b"2"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["RPUSH", "d", "1", "2", "3"], ":3\r\n");
    w.check(b"", b"*2\r\n$1\r\nd\r\n*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
}

#[test]
fn waiters_are_served_in_the_order_they_blocked() {
    let s = start_with(|a| a.threads = Some(2));
    let mut p = Raw::connect(s.resp);
    let mut ws: Vec<Raw> = (0..3).map(|_| Raw::connect(s.resp)).collect();
    for (i, w) in ws.iter_mut().enumerate() {
        w.send(&cmd(&[b"BLPOP", b"q", b"0"]));
        wait_blocked(&mut p, i as u64 + 1);
    }
    // One element at a time: each goes to the longest waiter.
    c(&mut p, &["RPUSH", "q", "a"], ":1\r\n");
    ws[0].check(b"", b"*2\r\n$1\r\nq\r\n$1\r\na\r\n");
    silent(&mut ws[1]);
    c(&mut p, &["RPUSH", "q", "b", "c"], ":2\r\n");
    ws[1].check(b"", b"*2\r\n$1\r\nq\r\n$1\r\nb\r\n");
    ws[2].check(b"", b"*2\r\n$1\r\nq\r\n$1\r\nc\r\n");
    wait_blocked(&mut p, 0);
    c(&mut p, &["EXISTS", "q"], ":0\r\n");
}

#[test]
fn timeouts_reply_null() {
    let s = start();
    let mut r = Raw::connect(s.resp);
    let t = Instant::now();
    c(&mut r, &["BLPOP", "nx", "0.1"], "*-1\r\n");
    let e = t.elapsed();
    assert!(e >= Duration::from_millis(100) && e < Duration::from_secs(2), "{e:?}");
    c(&mut r, &["BRPOPLPUSH", "nx", "d", "0.05"], "*-1\r\n");
    c(&mut r, &["BLMOVE", "nx", "d", "LEFT", "RIGHT", "0.05"], "*-1\r\n");
    c(&mut r, &["BLMPOP", "0.05", "1", "nx", "LEFT"], "*-1\r\n");
    // Several clients with different deadlines each time out on their own.
    let mut a = Raw::connect(s.resp);
    let mut b = Raw::connect(s.resp);
    a.send(&cmd(&[b"BLPOP", b"nx", b"0.3"]));
    b.send(&cmd(&[b"BLPOP", b"nx", b"0.1"]));
    b.check(b"", b"*-1\r\n");
    silent(&mut a);
    a.check(b"", b"*-1\r\n");
    wait_blocked(&mut r, 0);
    // A timeout of 0 waits for ever (well, past a short while).
    a.send(&cmd(&[b"BLPOP", b"forever", b"0"]));
    std::thread::sleep(Duration::from_millis(300));
    silent(&mut a);
    c(&mut r, &["RPUSH", "forever", "x"], ":1\r\n");
    a.check(b"", b"*2\r\n$7\r\nforever\r\n$1\r\nx\r\n");
}

#[test]
fn blmove_chain() {
    let s = start_with(|a| a.threads = Some(2));
    let mut p = Raw::connect(s.resp);
    let mut a = Raw::connect(s.resp);
    let mut b = Raw::connect(s.resp);
    let mut z = Raw::connect(s.resp);
    // a moves c1 → c2, b moves c2 → c3, z pops c3: one push runs through all three.
    a.send(&cmd(&[b"BLMOVE", b"c1", b"c2", b"LEFT", b"RIGHT", b"0"]));
    wait_blocked(&mut p, 1);
    b.send(&cmd(&[b"BRPOPLPUSH", b"c2", b"c3", b"0"]));
    wait_blocked(&mut p, 2);
    z.send(&cmd(&[b"BLPOP", b"c3", b"0"]));
    wait_blocked(&mut p, 3);
    c(&mut p, &["LPUSH", "c1", "x"], ":1\r\n");
    // As in Redis, the waiters were served before the pusher got its reply: the element
    // has already gone down the whole chain.
    c(&mut p, &["EXISTS", "c1", "c2", "c3"], ":0\r\n");
    a.check(b"", b"$1\r\nx\r\n");
    b.check(b"", b"$1\r\nx\r\n");
    z.check(b"", b"*2\r\n$2\r\nc3\r\n$1\r\nx\r\n");
    wait_blocked(&mut p, 0);
    c(&mut p, &["EXISTS", "c1", "c2", "c3"], ":0\r\n");
    // A rotation on one key, blocking.
    a.send(&cmd(&[b"BLMOVE", b"r", b"r", b"LEFT", b"RIGHT", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["RPUSH", "r", "1"], ":1\r\n");
    a.check(b"", b"$1\r\n1\r\n");
    c(&mut p, &["LRANGE", "r", "0", "-1"], "*1\r\n$1\r\n1\r\n");
    // Self-referential BRPOPLPUSH: the rotation is done when RPUSH replies.
    a.send(&cmd(&[b"BRPOPLPUSH", b"s", b"s", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["RPUSH", "s", "foo"], ":1\r\n");
    c(&mut p, &["LRANGE", "s", "0", "-1"], "*1\r\n$3\r\nfoo\r\n");
    a.check(b"", b"$3\r\nfoo\r\n");
    // A destination of the wrong type: the waiter gets WRONGTYPE, the element stays.
    c(&mut p, &["SET", "str", "x"], "+OK\r\n");
    a.send(&cmd(&[b"BLMOVE", b"w", b"str", b"LEFT", b"LEFT", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["RPUSH", "w", "e"], ":1\r\n");
    a.check(b"", b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    c(&mut p, &["LRANGE", "w", "0", "-1"], "*1\r\n$1\r\ne\r\n");
}

#[test]
fn client_unblock() {
    let s = start();
    let mut p = Raw::connect(s.resp);
    let mut w = Raw::connect(s.resp);
    w.send(&cmd(&[b"CLIENT", b"ID"]));
    let id = String::from_utf8(w.read_n(4)).unwrap().trim_start_matches(':').trim().to_string();
    c(&mut p, &["CLIENT", "UNBLOCK", &id], ":0\r\n");
    w.send(&cmd(&[b"BLPOP", b"k", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["CLIENT", "UNBLOCK", &id], ":1\r\n");
    w.check(b"", b"*-1\r\n");
    w.send(&cmd(&[b"BLMOVE", b"k", b"d", b"LEFT", b"LEFT", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["CLIENT", "UNBLOCK", &id, "TIMEOUT"], ":1\r\n");
    w.check(b"", b"*-1\r\n");
    w.send(&cmd(&[b"BRPOP", b"k", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["CLIENT", "UNBLOCK", &id, "error"], ":1\r\n");
    w.check(b"", b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    wait_blocked(&mut p, 0);
    c(&mut p, &["CLIENT", "UNBLOCK", &id, "FOO"], "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n");
    c(&mut p, &["CLIENT", "UNBLOCK", "x"], "-ERR value is not an integer or out of range\r\n");
    c(
        &mut p,
        &["CLIENT", "UNBLOCK", &id, "TIMEOUT", "x"],
        "-ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP.\r\n",
    );
    c(&mut p, &["CLIENT", "UNBLOCK"], "-ERR wrong number of arguments for 'client|unblock' command\r\n");
    // The unblocked client works normally afterwards.
    c(&mut w, &["PING"], "+PONG\r\n");
}

#[test]
fn disconnected_and_killed_waiters_leave_the_queue() {
    let s = start();
    let mut p = Raw::connect(s.resp);
    let mut gone = Raw::connect(s.resp);
    gone.send(&cmd(&[b"BLPOP", b"k", b"0"]));
    wait_blocked(&mut p, 1);
    let mut w = Raw::connect(s.resp);
    w.send(&cmd(&[b"BLPOP", b"k", b"0"]));
    wait_blocked(&mut p, 2);
    drop(gone);
    wait_blocked(&mut p, 1);
    // The element goes to the remaining waiter, not to the departed head.
    c(&mut p, &["RPUSH", "k", "a"], ":1\r\n");
    w.check(b"", b"*2\r\n$1\r\nk\r\n$1\r\na\r\n");
    // Nobody waits now: a push stays in the list.
    c(&mut p, &["RPUSH", "k", "b"], ":1\r\n");
    c(&mut p, &["LLEN", "k"], ":1\r\n");
    c(&mut p, &["DEL", "k"], ":1\r\n");
    // CLIENT KILL of a blocked client.
    w.send(&cmd(&[b"CLIENT", b"ID"]));
    let id = String::from_utf8(w.read_n(4)).unwrap();
    let id = id.trim_start_matches(':').trim().to_string();
    w.send(&cmd(&[b"BLPOP", b"k", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["CLIENT", "KILL", "ID", &id], ":1\r\n");
    wait_blocked(&mut p, 0);
    assert!(w.closed());
    c(&mut p, &["RPUSH", "k", "c"], ":1\r\n");
    c(&mut p, &["LLEN", "k"], ":1\r\n");
}

/// A local process attached to the server's segment pushes through the engine API: the
/// engine's futex wakes the server's watcher, and the blocked client is served.
#[test]
fn a_push_by_a_local_process_serves_a_blocked_client() {
    struct Unlink(String);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = larder_engine::Arena::unlink(&self.0);
        }
    }
    let name = format!("larder-list-test-{}", std::process::id());
    let _unlink = Unlink(name.clone());
    let s = start_with(|a| a.shm = Some(name.clone()));
    let mut p = Raw::connect(s.resp);
    let mut w = Raw::connect(s.resp);
    w.send(&cmd(&[b"BRPOP", b"jobs", b"0"]));
    wait_blocked(&mut p, 1);
    {
        let store = larder_engine::Store::attach(&name).unwrap();
        let mut h = store.handle().unwrap();
        h.coll_write(0, b"jobs", larder_engine::Kind::List, true, |c| c.insert_at(0, b"job-1")).unwrap();
    }
    w.check(b"", b"*2\r\n$4\r\njobs\r\n$5\r\njob-1\r\n");
    wait_blocked(&mut p, 0);
}

/// Many waiters and pushers on two workers at once: every element is delivered exactly
/// once, and no waiter is left blocked while elements remain (no lost wake-up).
#[test]
fn concurrent_waiters_and_pushers_lose_nothing() {
    use std::io::{BufRead, BufReader, Write};
    let s = start_with(|a| a.threads = Some(2));
    let port = s.resp;
    const WAITERS: usize = 6;
    const PER_WAITER: usize = 200;
    let total = WAITERS * PER_WAITER;
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            std::thread::spawn(move || {
                let st = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                st.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                let mut w = st.try_clone().unwrap();
                let mut rd = BufReader::new(st);
                let mut got = Vec::new();
                for _ in 0..PER_WAITER {
                    // Two keys: pushes alternate between them.
                    w.write_all(&cmd(&[b"BLPOP", b"ka", b"kb", b"5"])).unwrap();
                    // *2 / $len / key / $len / element
                    let mut lines = Vec::new();
                    for _ in 0..5 {
                        let mut line = String::new();
                        rd.read_line(&mut line).unwrap();
                        assert!(!line.starts_with("*-1"), "a waiter timed out with elements pushed");
                        lines.push(line.trim().to_string());
                        if lines.len() == 1 {
                            assert_eq!(lines[0], "*2");
                        }
                    }
                    assert!(lines[2] == "ka" || lines[2] == "kb", "{lines:?}");
                    got.push(lines[4].clone());
                }
                got
            })
        })
        .collect();
    let pushers: Vec<_> = (0..3)
        .map(|p| {
            std::thread::spawn(move || {
                let mut r = Raw::connect(port);
                for i in 0..total / 3 {
                    let key: &[u8] = if i % 2 == 0 { b"ka" } else { b"kb" };
                    let v = format!("e{p}-{i}");
                    r.send(&cmd(&[b"RPUSH", key, v.as_bytes()]));
                    let reply = r.read_n(3);
                    assert!(reply.starts_with(b":"), "{reply:?}");
                    // Drain the rest of the integer reply line.
                    let mut rest = reply;
                    while !rest.ends_with(b"\r\n") {
                        rest.extend(r.read_n(1));
                    }
                }
            })
        })
        .collect();
    for p in pushers {
        p.join().unwrap();
    }
    let mut all: Vec<String> = waiters.into_iter().flat_map(|w| w.join().unwrap()).collect();
    assert_eq!(all.len(), total);
    all.sort();
    all.dedup();
    assert_eq!(all.len(), total, "an element was delivered twice");
    let mut r = Raw::connect(port);
    c(&mut r, &["EXISTS", "ka", "kb"], ":0\r\n");
    wait_blocked(&mut r, 0);
}

/// Inside EXEC blocking commands do not block (null at once, as on timeout: `*-1` for the
/// pops, `$-1` for the moves, as Redis), and waiters see the transaction whole.
#[test]
fn transactions_and_blocking() {
    let s = start_with(|a| a.threads = Some(2));
    let mut p = Raw::connect(s.resp);
    c(&mut p, &["MULTI"], "+OK\r\n");
    c(&mut p, &["BLPOP", "nx", "0"], "+QUEUED\r\n");
    c(&mut p, &["BLMOVE", "nx", "d", "LEFT", "LEFT", "0"], "+QUEUED\r\n");
    c(&mut p, &["BRPOPLPUSH", "nx", "d", "0"], "+QUEUED\r\n");
    c(&mut p, &["BLMPOP", "0", "1", "nx", "LEFT"], "+QUEUED\r\n");
    c(&mut p, &["RPUSH", "l", "x"], "+QUEUED\r\n");
    c(&mut p, &["BLPOP", "l", "0"], "+QUEUED\r\n");
    c(&mut p, &["EXEC"], "*6\r\n*-1\r\n$-1\r\n$-1\r\n*-1\r\n:1\r\n*2\r\n$1\r\nl\r\n$1\r\nx\r\n");
    wait_blocked(&mut p, 0);

    // A waiter gets the state after EXEC: the last of three pushes.
    let mut w = Raw::connect(s.resp);
    w.send(&cmd(&[b"BLPOP", b"q", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["MULTI"], "+OK\r\n");
    for v in ["a", "b", "c"] {
        c(&mut p, &["LPUSH", "q", v], "+QUEUED\r\n");
    }
    c(&mut p, &["EXEC"], "*3\r\n:1\r\n:2\r\n:3\r\n");
    w.check(b"", b"*2\r\n$1\r\nq\r\n$1\r\nc\r\n");
    c(&mut p, &["LRANGE", "q", "0", "-1"], "*2\r\n$1\r\nb\r\n$1\r\na\r\n");
    c(&mut p, &["DEL", "q"], ":1\r\n");
    // LPUSH then DEL in one transaction: the waiter never sees an element.
    w.send(&cmd(&[b"BLPOP", b"q", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["MULTI"], "+OK\r\n");
    c(&mut p, &["LPUSH", "q", "a"], "+QUEUED\r\n");
    c(&mut p, &["DEL", "q"], "+QUEUED\r\n");
    c(&mut p, &["EXEC"], "*2\r\n:1\r\n:1\r\n");
    silent(&mut w);
    assert_eq!(blocked_clients(&mut p), 1);
    c(&mut p, &["RPUSH", "q", "z"], ":1\r\n");
    w.check(b"", b"*2\r\n$1\r\nq\r\n$1\r\nz\r\n");
    // After EXEC the keys are served in the order they were written: the longest waiter
    // gets the first written key, the next one the second.
    let mut w2 = Raw::connect(s.resp);
    w.send(&cmd(&[b"BLMPOP", b"0", b"2", b"k1", b"k2", b"LEFT"]));
    wait_blocked(&mut p, 1);
    w2.send(&cmd(&[b"BLMPOP", b"0", b"2", b"k1", b"k2", b"LEFT"]));
    wait_blocked(&mut p, 2);
    c(&mut p, &["MULTI"], "+OK\r\n");
    c(&mut p, &["RPUSH", "k2", "2"], "+QUEUED\r\n");
    c(&mut p, &["RPUSH", "k1", "1"], "+QUEUED\r\n");
    c(&mut p, &["EXEC"], "*2\r\n:1\r\n:1\r\n");
    w.check(b"", b"*2\r\n$2\r\nk2\r\n*1\r\n$1\r\n2\r\n");
    w2.check(b"", b"*2\r\n$2\r\nk1\r\n*1\r\n$1\r\n1\r\n");
}

/// Keys that appear by RENAME or SORT ... STORE serve waiters too, as in Redis.
#[test]
fn keys_created_by_rename_and_sort_store_serve_waiters() {
    let s = start();
    let mut p = Raw::connect(s.resp);
    let mut w = Raw::connect(s.resp);
    w.send(&cmd(&[b"BLPOP", b"foo", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["LPUSH", "bob", "abc", "def", "hij"], ":3\r\n");
    c(&mut p, &["RENAME", "bob", "foo"], "+OK\r\n");
    w.check(b"", b"*2\r\n$3\r\nfoo\r\n$3\r\nhij\r\n");
    c(&mut p, &["DEL", "foo"], ":1\r\n");
    w.send(&cmd(&[b"BLPOP", b"foo", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["RPUSH", "src", "b", "a"], ":2\r\n");
    c(&mut p, &["SORT", "src", "ALPHA", "STORE", "foo"], ":2\r\n");
    w.check(b"", b"*2\r\n$3\r\nfoo\r\n$1\r\na\r\n");
}

/// A blocking command run under CLIENT REPLY OFF or SKIP: its reply, whenever it comes
/// (served by another client's push, timed out, or CLIENT UNBLOCK), is dropped, as Redis
/// keeps a blocked client's skip flag until it is unblocked. The commands after it are
/// answered again.
#[test]
fn blocked_reply_is_dropped_under_client_reply_off_and_skip() {
    let t = start();
    let (mut c, mut other) = one_per_worker(&t);
    let id = client_id(&mut c).to_string();
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"SKIP"]));
    c.send(&cmd(&[b"BLPOP", b"l", b"0"]));
    wait_blocked(&mut other, 1);
    ck(&mut other, "RPUSH l a", ":1\r\n");
    wait_blocked(&mut other, 0);
    ck(&mut c, "PING", "+PONG\r\n");
    ck(&mut other, "LLEN l", ":0\r\n");
    // Served at once (the list has an element): dropped too.
    ck(&mut other, "RPUSH l b", ":1\r\n");
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"SKIP"]));
    ck(&mut c, "BLPOP l 0", "");
    ck(&mut c, "PING", "+PONG\r\n");
    // A timeout, and CLIENT UNBLOCK with an error.
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"SKIP"]));
    ck(&mut c, "BLPOP l 0.05", "");
    std::thread::sleep(Duration::from_millis(150));
    ck(&mut c, "PING", "+PONG\r\n");
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"OFF"]));
    c.send(&cmd(&[b"BLMOVE", b"l", b"m", b"LEFT", b"LEFT", b"0"]));
    wait_blocked(&mut other, 1);
    other.check(&cmd(&[b"CLIENT", b"UNBLOCK", id.as_bytes(), b"ERROR"]), b":1\r\n");
    wait_blocked(&mut other, 0);
    ck(&mut c, "CLIENT REPLY ON", "+OK\r\n");
    // And without a reply mode, the reply comes.
    c.send(&cmd(&[b"BLPOP", b"l", b"0"]));
    wait_blocked(&mut other, 1);
    ck(&mut other, "RPUSH l c", ":1\r\n");
    c.check(b"", b"*2\r\n$1\r\nl\r\n$1\r\nc\r\n");
}

/// A blocked command goes into the slow log when it is served (or unblocked by CLIENT
/// UNBLOCK), with its original arguments, not when it blocks; a timeout logs nothing
/// (Redis 7.0.15's `updateStatsOnUnblock`; the suite's "SLOWLOG - Rewritten commands are
/// logged as their original command").
#[test]
fn blocked_commands_are_slowlogged_when_served() {
    let s = start();
    let (mut p, mut w) = one_per_worker(&s);
    c(&mut p, &["CONFIG", "SET", "slowlog-log-slower-than", "0"], "+OK\r\n");
    w.send(&cmd(&[b"BLPOP", b"l", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["MULTI"], "+OK\r\n");
    c(&mut p, &["LPUSH", "l", "foo"], "+QUEUED\r\n");
    c(&mut p, &["SLOWLOG", "RESET"], "+QUEUED\r\n");
    c(&mut p, &["EXEC"], "*2\r\n:1\r\n+OK\r\n");
    w.check(b"", b"*2\r\n$1\r\nl\r\n$3\r\nfoo\r\n");
    // The arguments of the newest entries.
    let newest = |p: &mut Raw| {
        let entry = |e: reply::Val| e.arr()[3].clone().strings().join(" ");
        let log: Vec<String> = reply::call(p, "SLOWLOG GET 2").arr().into_iter().map(entry).collect();
        (log[0].clone(), log.get(1).cloned().unwrap_or_default())
    };
    // Newest first: the BLPOP, served after EXEC's commands.
    assert_eq!(newest(&mut p), ("BLPOP l 0".into(), "SLOWLOG RESET".into()));
    // Blocked, then timed out: nothing.
    c(&mut p, &["SLOWLOG", "RESET"], "+OK\r\n");
    w.send(&cmd(&[b"BRPOP", b"x", b"0.05"]));
    w.check(b"", b"*-1\r\n");
    assert_eq!(newest(&mut p), ("SLOWLOG RESET".into(), String::new()));
    let id = client_id(&mut w);
    w.send(&cmd(&[b"BRPOP", b"y", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["CLIENT", "UNBLOCK", &id.to_string()], ":1\r\n");
    w.check(b"", b"*-1\r\n");
    // Blocked, then CLIENT UNBLOCK: logged before the CLIENT UNBLOCK, with no arguments
    // (Redis 7.0.15 logs it once the client's arguments are gone).
    assert_eq!(newest(&mut p), (format!("CLIENT UNBLOCK {id}"), String::new()));
}

/// CLIENT UNBLOCK counts as Redis 7.0.15 counts it: the blocked command has failed either
/// way (failed_calls), the ERROR reply is an error reply (errorstats, total_error_replies),
/// and CLIENT UNBLOCK ... ERROR itself failed too (Redis counts the error reply it added
/// against the running command).
#[test]
fn client_unblock_counts_failed_calls_and_the_error() {
    let s = start();
    let (mut p, mut w) = one_per_worker(&s);
    c(&mut p, &["CONFIG", "RESETSTAT"], "+OK\r\n");
    let id = client_id(&mut w).to_string();
    w.send(&cmd(&[b"BRPOP", b"y", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["CLIENT", "UNBLOCK", &id], ":1\r\n");
    w.check(b"", b"*-1\r\n");
    w.send(&cmd(&[b"BLPOP", b"y", b"0"]));
    wait_blocked(&mut p, 1);
    c(&mut p, &["CLIENT", "UNBLOCK", &id, "ERROR"], ":1\r\n");
    w.check(b"", b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    let info = String::from_utf8(reply::call(&mut p, "INFO all").bulk()).unwrap();
    let field = |name: &str| {
        let line = info.lines().find(|l| l.starts_with(&format!("{name}:"))).unwrap_or_default();
        line.split_once(':').map(|(_, v)| v.to_string()).unwrap_or_default()
    };
    assert!(field("cmdstat_brpop").ends_with(",rejected_calls=0,failed_calls=1"), "{info}");
    assert!(field("cmdstat_blpop").ends_with(",rejected_calls=0,failed_calls=1"), "{info}");
    assert!(field("cmdstat_client|unblock").starts_with("calls=2,"), "{info}");
    assert!(field("cmdstat_client|unblock").ends_with(",rejected_calls=0,failed_calls=1"), "{info}");
    assert_eq!(field("errorstat_UNBLOCKED"), "count=1");
    assert_eq!(field("total_error_replies"), "1");
}
