//! MULTI / EXEC / DISCARD / WATCH over real sockets: raw bytes in, exact bytes out, with
//! the transaction's client and the other clients on different worker threads.
mod common;
use common::*;

use std::time::Duration;

#[test]
fn queueing_exec_and_the_errors_around_it() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(&cmd(&[b"EXEC"]), b"-ERR EXEC without MULTI\r\n");
    c.check(&cmd(&[b"DISCARD"]), b"-ERR DISCARD without MULTI\r\n");
    c.check(
        &cmd(&[b"EXEC", b"x"]),
        b"-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n",
    );
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"MULTI"]), b"-ERR MULTI calls can not be nested\r\n");
    c.check(&cmd(&[b"WATCH", b"k"]), b"-ERR WATCH inside MULTI is not allowed\r\n");
    c.check(&cmd(&[b"SET", b"a", b"x"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"INCR", b"a"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"SET", b"b", b"1"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"INCR", b"b"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"PING"]), b"+QUEUED\r\n");
    // A runtime error is one element of the array; the other commands still run.
    c.check(&cmd(&[b"EXEC"]), b"*5\r\n+OK\r\n-ERR value is not an integer or out of range\r\n+OK\r\n:2\r\n+PONG\r\n");
    c.check(&cmd(&[b"MGET", b"a", b"b"]), b"*2\r\n$1\r\nx\r\n$1\r\n2\r\n");
    // Errors while queueing doom the transaction: nothing of it runs.
    for bad in [&[&b"NOSUCH"[..]][..], &[b"GET"], &[b"SAVE"]] {
        c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
        c.check(&cmd(&[b"SET", b"doomed", b"1"]), b"+QUEUED\r\n");
        let want: &[u8] = match bad[0] {
            b"NOSUCH" => b"-ERR unknown command 'NOSUCH', with args beginning with: \r\n",
            b"GET" => b"-ERR wrong number of arguments for 'get' command\r\n",
            _ => b"-ERR Command not allowed inside a transaction\r\n",
        };
        c.check(&cmd(bad), want);
        c.check(&cmd(&[b"SET", b"doomed", b"2"]), b"+QUEUED\r\n");
        c.check(&cmd(&[b"EXEC"]), b"-EXECABORT Transaction discarded because of previous errors.\r\n");
        c.check(&cmd(&[b"EXISTS", b"doomed"]), b":0\r\n");
    }
    // DISCARD drops the queue.
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"SET", b"d", b"1"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"DISCARD"]), b"+OK\r\n");
    c.check(&cmd(&[b"EXISTS", b"d"]), b":0\r\n");
    // An empty transaction.
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"EXEC"]), b"*0\r\n");
    // CLIENT LIST while queueing shows flag x and the count.
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"PING"]), b"+QUEUED\r\n");
    let mut other = Raw::connect(t.resp);
    let list = ask(&mut other, &[b"CLIENT", b"LIST"]);
    assert!(list.contains("flags=x db=0 sub=0 psub=0 ssub=0 multi=1 "), "{list}");
    c.check(&cmd(&[b"EXEC"]), b"*1\r\n+PONG\r\n");
}

#[test]
fn quit_reset_and_select_inside_multi() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"SET", b"q", b"1"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"RESET"]), b"+RESET\r\n");
    c.check(&cmd(&[b"EXEC"]), b"-ERR EXEC without MULTI\r\n");
    c.check(&cmd(&[b"EXISTS", b"q"]), b":0\r\n");
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"SELECT", b"3"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"SET", b"in3", b"v"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"EXEC"]), b"*2\r\n+OK\r\n+OK\r\n");
    // SELECT inside the transaction stays in effect.
    c.check(&cmd(&[b"GET", b"in3"]), b"$1\r\nv\r\n");
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"SET", b"q", b"1"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"QUIT"]), b"+OK\r\n");
    assert!(c.closed());
    let mut d = Raw::connect(t.resp);
    d.check(&cmd(&[b"EXISTS", b"q"]), b":0\r\n");
    // SUBSCRIBE is queued and runs inside EXEC; then the client is in the subscribed context.
    d.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    d.check(&cmd(&[b"SUBSCRIBE", b"ch"]), b"+QUEUED\r\n");
    d.check(&cmd(&[b"SSUBSCRIBE", b"sh"]), b"+QUEUED\r\n");
    d.check(
        &cmd(&[b"EXEC"]),
        b"*2\r\n*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n-ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client\r\n",
    );
    d.check(&cmd(&[b"PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

#[test]
fn client_reply_off_inside_exec_silences_what_follows() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"CLIENT", b"REPLY", b"OFF"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"SET", b"x", b"1"]), b"+QUEUED\r\n");
    // As Redis: the array header was out before replies were turned off.
    c.check(&cmd(&[b"EXEC"]), b"*2\r\n");
    c.check(&cmd(&[b"CLIENT", b"REPLY", b"ON"]), b"+OK\r\n");
    c.check(&cmd(&[b"GET", b"x"]), b"$1\r\n1\r\n");
}

#[test]
fn watch_aborts_on_a_write_from_another_worker() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    a.check(&cmd(&[b"SET", b"w", b"1"]), b"+OK\r\n");
    a.check(&cmd(&[b"WATCH", b"w"]), b"+OK\r\n");
    // Even a write of the same value is a change.
    b.check(&cmd(&[b"SET", b"w", b"1"]), b"+OK\r\n");
    a.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    a.check(&cmd(&[b"INCR", b"w"]), b"+QUEUED\r\n");
    a.check(&cmd(&[b"EXEC"]), b"*-1\r\n");
    a.check(&cmd(&[b"GET", b"w"]), b"$1\r\n1\r\n");
    // After EXEC nothing is watched any more.
    a.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    a.check(&cmd(&[b"INCR", b"w"]), b"+QUEUED\r\n");
    a.check(&cmd(&[b"EXEC"]), b"*1\r\n:2\r\n");
    // RESP3: the null is `_`. DEL then SET of the same value still counts (new version).
    ask(&mut a, &[b"HELLO", b"3"]);
    a.check(&cmd(&[b"WATCH", b"w", b"absent"]), b"+OK\r\n");
    b.check(&cmd(&[b"DEL", b"w"]), b":1\r\n");
    b.check(&cmd(&[b"SET", b"w", b"2"]), b"+OK\r\n");
    a.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    a.check(&cmd(&[b"EXEC"]), b"_\r\n");
    // A key created after WATCH (absent before) counts too.
    a.check(&cmd(&[b"WATCH", b"absent"]), b"+OK\r\n");
    b.check(&cmd(&[b"SET", b"absent", b"now"]), b"+OK\r\n");
    a.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    a.check(&cmd(&[b"EXEC"]), b"_\r\n");
    // UNWATCH and DISCARD forget the keys.
    a.check(&cmd(&[b"WATCH", b"w"]), b"+OK\r\n");
    b.check(&cmd(&[b"SET", b"w", b"3"]), b"+OK\r\n");
    a.check(&cmd(&[b"UNWATCH"]), b"+OK\r\n");
    a.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    a.check(&cmd(&[b"GET", b"w"]), b"+QUEUED\r\n");
    a.check(&cmd(&[b"EXEC"]), b"*1\r\n$1\r\n3\r\n");
    a.check(&cmd(&[b"WATCH", b"w"]), b"+OK\r\n");
    b.check(&cmd(&[b"SET", b"w", b"4"]), b"+OK\r\n");
    a.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    a.check(&cmd(&[b"DISCARD"]), b"+OK\r\n");
    a.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    a.check(&cmd(&[b"INCR", b"w"]), b"+QUEUED\r\n");
    a.check(&cmd(&[b"EXEC"]), b"*1\r\n:5\r\n");
}

/// MULTI, PING, EXEC on `a`: EXEC's reply, [`ABORTED`] or [`RAN`].
fn exec_after(a: &mut Raw) -> String {
    a.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    a.check(&cmd(&[b"PING"]), b"+QUEUED\r\n");
    ask(a, &[b"EXEC"])
}
const ABORTED: &str = "*-1\r\n";
const RAN: &str = "*1\r\n+PONG\r\n";

#[test]
fn watch_of_an_absent_key_sees_it_created_even_if_it_is_gone_again() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    // (what the other client does, whether EXEC then runs), as redis-server 7.0.15 answers.
    let cases: &[(&[&[&[u8]]], &str)] = &[
        (&[&[b"SET", b"k", b"1"], &[b"DEL", b"k"]], ABORTED),
        (&[&[b"DEL", b"k"]], RAN),
        (&[&[b"SET", b"other", b"1"]], RAN),
        (&[&[b"LPUSH", b"k", b"1"], &[b"LPOP", b"k"]], ABORTED),
        (&[&[b"SET", b"src", b"1"], &[b"RENAME", b"src", b"k"], &[b"DEL", b"k"]], ABORTED),
        (&[&[b"MULTI"], &[b"SET", b"k", b"1"], &[b"DEL", b"k"], &[b"EXEC"]], ABORTED),
        // MOVE writes another database: every absent watched key is looked at.
        (
            &[&[b"SELECT", b"3"], &[b"SET", b"k", b"1"], &[b"MOVE", b"k", b"0"], &[b"SELECT", b"0"], &[b"DEL", b"k"]],
            ABORTED,
        ),
    ];
    for (writes, want) in cases {
        ask(&mut a, &[b"WATCH", b"k"]);
        for w in *writes {
            ask(&mut b, w);
        }
        assert_eq!(exec_after(&mut a), *want, "after {writes:?}");
    }
    // A key set with a short expiry and gone by EXEC (active expiry off: still in place).
    ask(&mut a, &[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]);
    ask(&mut a, &[b"WATCH", b"k"]);
    ask(&mut b, &[b"SET", b"k", b"1", b"PX", b"1"]);
    std::thread::sleep(Duration::from_millis(10));
    assert_eq!(exec_after(&mut a), ABORTED);
    ask(&mut a, &[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"]);
    // The watcher's own writes count; UNWATCH and DISCARD forget the key.
    ask(&mut a, &[b"WATCH", b"k"]);
    ask(&mut a, &[b"SET", b"k", b"1"]);
    ask(&mut a, &[b"DEL", b"k"]);
    assert_eq!(exec_after(&mut a), ABORTED);
    ask(&mut a, &[b"WATCH", b"k"]);
    ask(&mut b, &[b"SET", b"k", b"1"]);
    ask(&mut b, &[b"DEL", b"k"]);
    ask(&mut a, &[b"UNWATCH"]);
    assert_eq!(exec_after(&mut a), RAN);
    // Nothing stays registered: not after EXEC, UNWATCH, or a client that disconnects
    // while it watches.
    let watches = &t.server.as_ref().unwrap().shared.watches;
    assert!(!watches.any());
    let mut c = Raw::connect(t.resp);
    ask(&mut c, &[b"WATCH", b"k", b"k2"]);
    assert!(watches.any());
    drop(c);
    let since = std::time::Instant::now();
    while watches.any() {
        assert!(since.elapsed() < Duration::from_secs(10), "a closed client's watches stay registered");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn watch_remembers_the_database_and_sees_flush_and_swapdb() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    // The key watched in db 5; the same name written in db 1.
    ask(&mut a, &[b"SELECT", b"5"]);
    ask(&mut a, &[b"SET", b"x", b"30"]);
    ask(&mut a, &[b"WATCH", b"x"]);
    ask(&mut b, &[b"SELECT", b"1"]);
    ask(&mut b, &[b"SET", b"x", b"10"]);
    assert_eq!(exec_after(&mut a), RAN);
    ask(&mut a, &[b"SELECT", b"0"]);
    ask(&mut b, &[b"SELECT", b"0"]);
    // FLUSHALL / FLUSHDB touch a watched key that existed, not one that did not.
    for flush in [&[&b"FLUSHALL"[..]][..], &[b"FLUSHDB"]] {
        ask(&mut a, &[b"SET", b"x", b"30"]);
        ask(&mut a, &[b"WATCH", b"x"]);
        ask(&mut b, flush);
        assert_eq!(exec_after(&mut a), ABORTED);
        ask(&mut a, &[b"DEL", b"x"]);
        ask(&mut a, &[b"WATCH", b"x"]);
        ask(&mut b, flush);
        assert_eq!(exec_after(&mut a), RAN);
    }
    // FLUSHDB of another database leaves the watched key alone.
    ask(&mut a, &[b"SET", b"x", b"30"]);
    ask(&mut a, &[b"WATCH", b"x"]);
    ask(&mut b, &[b"SELECT", b"1"]);
    ask(&mut b, &[b"FLUSHDB"]);
    ask(&mut b, &[b"SELECT", b"0"]);
    assert_eq!(exec_after(&mut a), RAN);
    // SWAPDB: a watched key that exists is replaced (gone); a missing one appears.
    ask(&mut a, &[b"FLUSHALL"]);
    ask(&mut a, &[b"SET", b"x", b"30"]);
    ask(&mut a, &[b"WATCH", b"x"]);
    ask(&mut b, &[b"SWAPDB", b"0", b"1"]);
    assert_eq!(exec_after(&mut a), ABORTED);
    ask(&mut a, &[b"FLUSHALL"]);
    ask(&mut a, &[b"SELECT", b"1"]);
    ask(&mut a, &[b"SET", b"x", b"30"]);
    ask(&mut a, &[b"SELECT", b"0"]);
    ask(&mut a, &[b"WATCH", b"x"]);
    ask(&mut b, &[b"SWAPDB", b"0", b"1"]);
    assert_eq!(exec_after(&mut a), ABORTED);
    // A watched key that had expired is absent: its deletion or a swap with nothing is no
    // change.
    ask(&mut a, &[b"FLUSHALL"]);
    ask(&mut a, &[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]);
    ask(&mut a, &[b"SET", b"x", b"foo", b"PX", b"1"]);
    std::thread::sleep(Duration::from_millis(5));
    ask(&mut a, &[b"WATCH", b"x"]);
    ask(&mut b, &[b"SWAPDB", b"0", b"1"]);
    assert_eq!(exec_after(&mut a), RAN);
    // A key that expires after WATCH is a change (EXEC sees it gone).
    ask(&mut a, &[b"SET", b"y", b"1", b"PX", b"50"]);
    ask(&mut a, &[b"WATCH", b"y"]);
    std::thread::sleep(Duration::from_millis(80));
    assert_eq!(exec_after(&mut a), ABORTED);
    // EXPIRE touches the key.
    ask(&mut a, &[b"SET", b"z", b"1"]);
    ask(&mut a, &[b"WATCH", b"z"]);
    ask(&mut b, &[b"EXPIRE", b"z", b"100"]);
    assert_eq!(exec_after(&mut a), ABORTED);
    ask(&mut a, &[b"DEBUG", b"SET-ACTIVE-EXPIRE", b"1"]);
}

#[test]
fn exec_counts_its_commands_in_commandstats_and_the_slowlog() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ask(&mut c, &[b"CONFIG", b"RESETSTAT"]);
    ask(&mut c, &[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"0"]);
    ask(&mut c, &[b"SLOWLOG", b"RESET"]);
    c.check(&cmd(&[b"MULTI"]), b"+OK\r\n");
    c.check(&cmd(&[b"SET", b"k", b"1"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"INCRBY", b"k", b"41"]), b"+QUEUED\r\n");
    c.check(&cmd(&[b"EXEC"]), b"*2\r\n+OK\r\n:42\r\n");
    let stats = ask(&mut c, &[b"INFO", b"commandstats"]);
    for name in ["multi", "exec", "set", "incrby"] {
        assert!(stats.contains(&format!("cmdstat_{name}:calls=1,")), "{name}: {stats}");
    }
    ask(&mut c, &[b"CONFIG", b"SET", b"slowlog-log-slower-than", b"10000"]);
    let log = ask(&mut c, &[b"SLOWLOG", b"GET", b"10"]);
    // The queued commands are logged one by one, EXEC (skip_slowlog) is not.
    assert!(log.contains("$6\r\nINCRBY\r\n$1\r\nk\r\n$2\r\n41\r\n"), "{log}");
    assert!(log.contains("$3\r\nSET\r\n$1\r\nk\r\n$1\r\n1\r\n"), "{log}");
    assert!(!log.contains("EXEC"), "{log}");
}

/// Two clients on different workers: one adds 1 to `a` and `b` in a transaction, the other
/// reads both with MGET. Without atomicity across workers the reader would see `a` already
/// incremented and `b` not yet.
#[test]
fn exec_is_atomic_for_readers_on_other_workers() {
    let t = start();
    let (mut w, mut r) = one_per_worker(&t);
    ask(&mut w, &[b"MSET", b"a", b"0", b"b", b"0"]);
    let writer = std::thread::spawn(move || {
        let mut req = Vec::new();
        req.extend(cmd(&[b"MULTI"]));
        for _ in 0..10 {
            req.extend(cmd(&[b"INCR", b"a"]));
            req.extend(cmd(&[b"INCR", b"b"]));
        }
        req.extend(cmd(&[b"EXEC"]));
        for _ in 0..400 {
            w.send(&req);
            // +OK, 20 QUEUED, then the EXEC array.
            for _ in 0..21 {
                let _ = read_reply(&mut w);
            }
            let exec = read_reply(&mut w);
            assert!(exec.starts_with(b"*20\r\n"), "{}", String::from_utf8_lossy(&exec));
        }
    });
    let mut reads = 0u64;
    let mut torn = 0u64;
    while !writer.is_finished() {
        let reply = ask(&mut r, &[b"MGET", b"a", b"b"]);
        let vals: Vec<&str> =
            reply.split("\r\n").filter(|l| !l.starts_with('*') && !l.starts_with('$') && !l.is_empty()).collect();
        assert_eq!(vals.len(), 2, "{reply}");
        if vals[0] != vals[1] {
            torn += 1;
        }
        reads += 1;
    }
    writer.join().unwrap();
    assert_eq!(torn, 0, "{torn} of {reads} reads saw half a transaction");
    assert!(reads > 10, "only {reads} reads overlapped the writer");
    r.check(&cmd(&[b"MGET", b"a", b"b"]), b"*2\r\n$4\r\n4000\r\n$4\r\n4000\r\n");
}

/// Redis signals a key modified (so a WATCH of it fails) on some writes whatever they
/// changed: HSET/HMSET of the values already there, HINCRBY/HINCRBYFLOAT by 0, LTRIM that
/// keeps the whole list.
#[test]
fn watch_sees_writes_that_changed_nothing_as_redis_does() {
    let t = start();
    let (mut c, mut other) = one_per_worker(&t);
    ck(&mut other, "HSET h f v n 1", ":2\r\n");
    ck(&mut other, "RPUSH l a b", ":2\r\n");
    let touched: &[(&str, &str, &str)] = &[
        ("h", "HSET h f v", ":0\r\n"),
        ("h", "HMSET h f v", "+OK\r\n"),
        ("h", "HINCRBY h n 0", ":1\r\n"),
        ("h", "HINCRBYFLOAT h n 0", "$1\r\n1\r\n"),
        ("l", "LTRIM l 0 -1", "+OK\r\n"),
    ];
    for (key, write, reply) in touched {
        ck(&mut c, &format!("WATCH {key}"), "+OK\r\n");
        ck(&mut other, write, reply);
        ck(&mut c, "MULTI", "+OK\r\n");
        ck(&mut c, "EXEC", "*-1\r\n");
    }
}

/// A SETBIT that leaves the bit as it was is not a modification for WATCH (Redis does not
/// signal it); one that flips it is.
#[test]
fn watch_ignores_a_setbit_that_changed_nothing() {
    let t = start();
    let (mut c, mut other) = one_per_worker(&t);
    ck(&mut other, "SET s v", "+OK\r\n");
    // 'v' is 0b01110110: bit 1 is already 1.
    ck(&mut c, "WATCH s", "+OK\r\n");
    ck(&mut other, "SETBIT s 1 1", ":1\r\n");
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "EXEC", "*0\r\n");
    ck(&mut c, "WATCH s", "+OK\r\n");
    ck(&mut other, "SETBIT s 0 1", ":0\r\n");
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "EXEC", "*-1\r\n");
    c.check(&cmd(&[b"GET", b"s"]), b"$1\r\n\xf6\r\n");
}
