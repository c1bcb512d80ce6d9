//! SORT and SORT_RO over a real socket, on sets and hashes made by commands and on lists
//! and sorted sets made through the engine. Expected replies checked against
//! redis-server 7.0.15.
mod common;
#[path = "common/reply.rs"]
mod reply;

use common::*;
use larder_engine::Kind;

/// `*n` then each word as a bulk string.
fn arr(words: &[&str]) -> String {
    let mut s = format!("*{}\r\n", words.len());
    for w in words {
        if *w == "(nil)" {
            s.push_str("$-1\r\n");
        } else {
            s.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
    }
    s
}

const NOT_DOUBLE: &str = "-ERR One or more scores can't be converted into double\r\n";

#[test]
fn sets_numeric_alpha_limit() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SADD s 3 10 1 2 -5", ":5\r\n");
    ck(&mut c, "SORT s", &arr(&["-5", "1", "2", "3", "10"]));
    ck(&mut c, "SORT s DESC", &arr(&["10", "3", "2", "1", "-5"]));
    ck(&mut c, "SORT s ALPHA", &arr(&["-5", "1", "10", "2", "3"]));
    ck(&mut c, "SORT s ALPHA DESC", &arr(&["3", "2", "10", "1", "-5"]));
    ck(&mut c, "SORT s LIMIT 1 2", &arr(&["1", "2"]));
    ck(&mut c, "SORT s LIMIT -1 2", &arr(&["-5", "1"]));
    ck(&mut c, "SORT s LIMIT 10 2", "*0\r\n");
    ck(&mut c, "SORT s LIMIT 1 -1", &arr(&["1", "2", "3", "10"]));
    ck(&mut c, "SORT s LIMIT 0 0", "*0\r\n");
    ck(&mut c, "SORT_RO s DESC LIMIT 0 2", &arr(&["10", "3"]));
    ck(&mut c, "SORT nokey", "*0\r\n");
    // Errors.
    ck(&mut c, "SORT s LIMIT x 1", "-ERR value is not an integer or out of range\r\n");
    ck(&mut c, "SORT s LIMIT 1", "-ERR syntax error\r\n");
    ck(&mut c, "SORT s BOGUS", "-ERR syntax error\r\n");
    ck(&mut c, "SORT s GET", "-ERR syntax error\r\n");
    ck(&mut c, "SORT s BY", "-ERR syntax error\r\n");
    ck(&mut c, "SORT s STORE", "-ERR syntax error\r\n");
    ck(&mut c, "SORT_RO s STORE dst", "-ERR syntax error\r\n");
    ck(&mut c, "SORT", "-ERR wrong number of arguments for 'sort' command\r\n");
    ck(&mut c, "SET str x", "+OK\r\n");
    ck(&mut c, "SORT str", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    ck(&mut c, "HSET hh a 1", ":1\r\n");
    ck(&mut c, "SORT hh", "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n");
    ck(&mut c, "SADD t a b c", ":3\r\n");
    ck(&mut c, "SORT t", NOT_DOUBLE);
    ck(&mut c, "SORT t ALPHA", &arr(&["a", "b", "c"]));
    ck(&mut c, "SADD g 1e400", ":1\r\n");
    ck(&mut c, "SORT g", NOT_DOUBLE);
    ck(&mut c, "SADD nn nan", ":1\r\n");
    ck(&mut c, "SORT nn", NOT_DOUBLE);
    // Equal scores: the elements themselves decide.
    ck(&mut c, "SADD same 1 01 1.0", ":3\r\n");
    ck(&mut c, "SORT same", &arr(&["01", "1", "1.0"]));
    ck(&mut c, "SORT same DESC", &arr(&["1.0", "1", "01"]));
}

#[test]
fn by_and_get_patterns() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SADD s 3 10 1 2 -5", ":5\r\n");
    ck(&mut c, "MSET w_3 30 w_10 5 w_1 100 w_2 1 w_-5 7", "+OK\r\n");
    ck(&mut c, "SORT s BY w_*", &arr(&["2", "10", "-5", "3", "1"]));
    ck(&mut c, "SORT s BY w_* DESC", &arr(&["1", "3", "-5", "10", "2"]));
    ck(&mut c, "SORT s BY w_* GET # GET w_*", &arr(&["2", "1", "10", "5", "-5", "7", "3", "30", "1", "100"]));
    ck(
        &mut c,
        "SORT s BY w_* GET w_* GET nostar GET #",
        &arr(&["1", "(nil)", "2", "5", "(nil)", "10", "7", "(nil)", "-5", "30", "(nil)", "3", "100", "(nil)", "1"]),
    );
    ck(&mut c, "SORT s BY w_* LIMIT 0 2", &arr(&["2", "10"]));
    ck(&mut c, "SORT s LIMIT 0 1 GET # GET # DESC ALPHA", &arr(&["3", "3"]));
    // A pattern without '*': no sorting, the set's own order (an intset: numeric).
    ck(&mut c, "SORT s BY nosort", &arr(&["-5", "1", "2", "3", "10"]));
    ck(&mut c, "SORT s BY nosort DESC", &arr(&["-5", "1", "2", "3", "10"]));
    // ... except with STORE, where a set is sorted as strings.
    ck(&mut c, "SORT s BY nosort STORE dst", ":5\r\n");
    ck(&mut c, "TYPE dst", "+list\r\n");
    let h = t.server.as_ref().unwrap().shared.store.handle().unwrap();
    let stored = |key: &[u8]| -> Vec<String> {
        h.coll_read(0, key, Kind::List, |l| l.entries())
            .unwrap()
            .unwrap_or_default()
            .into_iter()
            .map(|(k, _)| String::from_utf8(k).unwrap())
            .collect()
    };
    assert_eq!(stored(b"dst"), ["-5", "1", "10", "2", "3"]);
    // Hash fields.
    for (k, f) in [("h_3", "3"), ("h_1", "1"), ("h_2", "2"), ("h_10", "10"), ("h_-5", "-5")] {
        ck(&mut c, &format!("HSET {k} f {f}"), ":1\r\n");
    }
    ck(&mut c, "HSET h_3 g x", ":1\r\n");
    ck(&mut c, "SORT s BY h_*->f", &arr(&["-5", "1", "2", "3", "10"]));
    ck(
        &mut c,
        "SORT s BY h_*->f GET h_*->g GET h_*->f GET h_*->",
        &arr(&[
            "(nil)", "-5", "(nil)", "(nil)", "1", "(nil)", "(nil)", "2", "(nil)", "x", "3", "(nil)", "(nil)", "10",
            "(nil)",
        ]),
    );
    // A weight that is not a number; ALPHA weights, missing ones first.
    ck(&mut c, "SET w_2 abc", "+OK\r\n");
    ck(&mut c, "SORT s BY w_*", NOT_DOUBLE);
    ck(&mut c, "SORT s BY w_* ALPHA", &arr(&["1", "3", "10", "-5", "2"]));
    ck(&mut c, "SADD t a b c", ":3\r\n");
    // Missing weights count as 0, then the elements decide.
    ck(&mut c, "SORT t BY w_*", &arr(&["a", "b", "c"]));
    // STORE: GET values, an empty string for a missing one; an empty result deletes.
    ck(&mut c, "SORT t ALPHA STORE dst GET nothing_* GET #", ":6\r\n");
    assert_eq!(stored(b"dst"), ["", "a", "", "b", "", "c"]);
    ck(&mut c, "SORT nokey STORE dst", ":0\r\n");
    ck(&mut c, "EXISTS dst", ":0\r\n");
    ck(&mut c, "SET str2 2", "+OK\r\n");
    ck(&mut c, "SADD k str2", ":1\r\n");
    ck(&mut c, "SORT k BY * GET *", &arr(&["2"]));
    let _ = reply::call(&mut c, "HELLO 3");
    ck(&mut c, "SORT s BY w_* GET nostar ALPHA", "*5\r\n_\r\n_\r\n_\r\n_\r\n_\r\n");
}

#[test]
fn lists_and_sorted_sets() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let mut h = t.server.as_ref().unwrap().shared.store.handle().unwrap();
    h.coll_write(0, b"L", Kind::List, true, |l| {
        for e in ["3", "1", "2", "10"] {
            l.insert_at(l.len(), e.as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    h.coll_write(0, b"Z", Kind::ZSet, true, |z| {
        for (m, s) in [("a", 3.0), ("b", 1.0), ("c", 2.0)] {
            z.zput(m.as_bytes(), s)?;
        }
        Ok(())
    })
    .unwrap();
    ck(&mut c, "SORT L", &arr(&["1", "2", "3", "10"]));
    ck(&mut c, "SORT L BY nosort", &arr(&["3", "1", "2", "10"]));
    ck(&mut c, "SORT L BY nosort DESC", &arr(&["10", "2", "1", "3"]));
    ck(&mut c, "SORT L BY nosort LIMIT 1 2", &arr(&["1", "2"]));
    ck(&mut c, "SORT L BY nosort DESC LIMIT 1 2", &arr(&["2", "1"]));
    ck(&mut c, "SORT L ALPHA DESC", &arr(&["3", "2", "10", "1"]));
    ck(&mut c, "SORT_RO L BY nosort DESC LIMIT 0 100", &arr(&["10", "2", "1", "3"]));
    ck(&mut c, "SORT L STORE dst", ":4\r\n");
    let got: Vec<Vec<u8>> =
        h.coll_read(0, b"dst", Kind::List, |l| l.entries()).unwrap().unwrap().into_iter().map(|e| e.0).collect();
    assert_eq!(got, [b"1".to_vec(), b"2".to_vec(), b"3".to_vec(), b"10".to_vec()]);
    ck(&mut c, "SORT Z ALPHA", &arr(&["a", "b", "c"]));
    ck(&mut c, "SORT Z BY nosort", &arr(&["b", "c", "a"]));
    ck(&mut c, "SORT Z BY nosort DESC", &arr(&["a", "c", "b"]));
    ck(&mut c, "SORT Z BY nosort LIMIT 1 5", &arr(&["c", "a"]));
    ck(&mut c, "SORT Z BY nosort DESC LIMIT 1 1", &arr(&["c"]));
    ck(&mut c, "SORT Z", NOT_DOUBLE);
    ck(&mut c, "SORT Z BY nosort GET # GET nokey_*", &arr(&["b", "(nil)", "c", "(nil)", "a", "(nil)"]));
    // A large list: LIMIT on an unsorted list reads only its window.
    h.coll_write(0, b"big", Kind::List, true, |l| {
        for i in 0..5000 {
            l.insert_at(l.len(), i.to_string().as_bytes())?;
        }
        Ok(())
    })
    .unwrap();
    ck(&mut c, "SORT big BY nosort LIMIT 4998 10", &arr(&["4998", "4999"]));
    ck(&mut c, "SORT big DESC LIMIT 0 3", &arr(&["4999", "4998", "4997"]));
}

#[test]
fn command_getkeys_finds_the_store_key() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "COMMAND GETKEYS sort abc store def", &arr(&["abc", "def"]));
    ck(&mut c, "COMMAND GETKEYS sort abc store invalid store stillbad store def", &arr(&["abc", "def"]));
    ck(&mut c, "COMMAND GETKEYS sort abc get store", &arr(&["abc"]));
    ck(&mut c, "COMMAND GETKEYS sort_ro abc", &arr(&["abc"]));
    ck(&mut c, "COMMAND GETKEYS sintercard 2 a b limit 1", &arr(&["a", "b"]));
    ck(&mut c, "COMMAND GETKEYS sintercard 3 a b", "-ERR Invalid arguments specified for command\r\n");
    ck(&mut c, "COMMAND GETKEYS sintercard x a", "-ERR Invalid arguments specified for command\r\n");
}

#[test]
fn the_sorted_key_and_each_pattern_lookup_count_keyspace_hits_and_misses() {
    // Redis looks up the sorted key, then each key a BY or GET pattern names (not `#`, nor
    // a pattern without `*`) with `lookupKeyRead`: a hit if it exists (of any type), else a
    // miss. The running totals are redis-server 7.0.15's for the same sequence.
    let t = start();
    let mut c = Raw::connect(t.resp);
    let stats = &t.server.as_ref().unwrap().shared.stats;
    let counts = || (stats.sum(|w| &w.keyspace_hits), stats.sum(|w| &w.keyspace_misses));
    ck(&mut c, "RPUSH l 3 1 2", ":3\r\n");
    ck(&mut c, "MSET w_1 10 w_2 5", "+OK\r\n");
    ck(&mut c, "HSET h_1 f a", ":1\r\n");
    ck(&mut c, "RPUSH x_1 q", ":1\r\n");
    ck(&mut c, "RPUSH bad a", ":1\r\n");
    ck(&mut c, "CONFIG RESETSTAT", "+OK\r\n");
    for (req, want, totals) in [
        ("SORT l BY w_*", arr(&["3", "2", "1"]), (3, 1)),
        ("SORT l BY nosort GET # GET h_*->f", arr(&["3", "(nil)", "1", "a", "2", "(nil)"]), (5, 3)),
        ("SORT l BY w_* GET w_* STORE dst", ":3\r\n".into(), (10, 5)),
        ("SORT l BY h_*->f ALPHA", arr(&["3", "2", "1"]), (12, 7)),
        ("SORT nosuch BY w_*", "*0\r\n".into(), (12, 8)),
        ("SORT l GET nostar", arr(&["(nil)", "(nil)", "(nil)"]), (13, 8)),
        ("SORT l BY w_* GET x_*", arr(&["(nil)", "(nil)", "(nil)"]), (17, 11)),
        ("SORT l BY w_* LIMIT 0 1 GET w_*", arr(&["(nil)"]), (20, 13)),
        ("SORT bad BY nosort GET k_*", arr(&["(nil)"]), (21, 14)),
    ] {
        let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
        c.check(&cmd(&args), want.as_bytes());
        assert_eq!(counts(), totals, "{req}");
    }
}
