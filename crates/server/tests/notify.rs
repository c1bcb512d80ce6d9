//! Keyspace notifications over real sockets, raw bytes in and out: the events of one
//! command per family in Redis 7.0.15's order, delivered from a writer on one worker thread
//! to a subscriber on the other, RESP2 and RESP3 (a client's own events among its
//! replies), lazy and active expiry, a blocked client served by a push, keyspace misses,
//! and what memcached requests notify.
mod common;
use common::*;

use std::time::Duration;

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// The messages a `psubscribe *` subscriber gets for `event` on `key` of `db` with K and E
/// on: the keyspace one, then the keyevent one.
fn ev(db: u32, event: &str, key: &str) -> String {
    let space = format!("__keyspace@{db}__:{key}");
    let evt = format!("__keyevent@{db}__:{event}");
    format!(
        "*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n{}{}*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n{}{}",
        bulk(&space),
        bulk(event),
        bulk(&evt),
        bulk(key)
    )
}

/// Events of database 0, in order.
fn evs(list: &[(&str, &str)]) -> String {
    list.iter().map(|(e, k)| ev(0, e, k)).collect()
}

/// A subscriber to every channel, on one worker, and a writer on the other.
fn pair(t: &TestServer, flags: &str) -> (Raw, Raw) {
    let (mut sub, mut w) = one_per_worker(t);
    ck(&mut w, &format!("CONFIG SET notify-keyspace-events {flags}"), "+OK\r\n");
    sub.check(&cmd(&[b"PSUBSCRIBE", b"*"]), b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n");
    (sub, w)
}

#[test]
fn flags_parse_and_print_as_redis() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    for (set, get) in
        [("KA", "AK"), ("EA", "AE"), ("gKE", "gKE"), ("$lshzxeKE", "$lshzxeKE"), ("KEAn", "AKE"), ("", "")]
    {
        ck(&mut c, &format!("CONFIG SET notify-keyspace-events {set}"), "+OK\r\n");
        c.check(
            &cmd(&[b"CONFIG", b"GET", b"notify-keyspace-events"]),
            format!("*2\r\n$22\r\nnotify-keyspace-events\r\n{}", bulk(get)).as_bytes(),
        );
    }
    ck(
        &mut c,
        "CONFIG SET notify-keyspace-events KEX",
        "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n",
    );
}

#[test]
fn each_family_emits_redis_events_to_a_subscriber_on_another_worker() {
    let t = start();
    let (mut sub, mut w) = pair(&t, "KEAn");
    for (req, reply) in [
        ("SET s v", "+OK\r\n"),
        ("SET s w EX 100", "+OK\r\n"),
        ("INCRBYFLOAT f 1.5", "$3\r\n1.5\r\n"),
        ("MSET a 1 b 2 a 3", "+OK\r\n"),
        ("DEL a nothere b", ":2\r\n"),
        ("RPUSH l x y", ":2\r\n"),
        ("LMOVE l l2 LEFT RIGHT", "$1\r\nx\r\n"),
        ("RPOP l", "$1\r\ny\r\n"),
        ("HSET h f 1", ":1\r\n"),
        ("HINCRBYFLOAT h f 0.5", "$3\r\n1.5\r\n"),
        ("HDEL h f", ":1\r\n"),
        ("SADD st m n", ":2\r\n"),
        ("SINTERSTORE st2 st", ":2\r\n"),
        ("SINTERSTORE st2 nosuch", ":0\r\n"),
        ("SADD mv m", ":1\r\n"),
        ("SMOVE mv mv2 m", ":1\r\n"),
        ("SPOP st 5", "*2\r\n"),
    ] {
        w.send(&cmd(&req.split(' ').map(str::as_bytes).collect::<Vec<_>>()));
        let got = w.read_n(reply.len());
        assert!(got.starts_with(reply.as_bytes()), "{req}: {:?}", String::from_utf8_lossy(&got));
    }
    // SPOP's members come in any order: read the rest of its reply.
    w.read_n(14);
    let want = evs(&[
        ("new", "s"),
        ("set", "s"),
        ("set", "s"),
        ("expire", "s"),
        ("new", "f"),
        ("incrbyfloat", "f"),
        ("new", "a"),
        ("set", "a"),
        ("new", "b"),
        ("set", "b"),
        ("set", "a"),
        ("del", "a"),
        ("del", "b"),
        ("new", "l"),
        ("rpush", "l"),
        ("new", "l2"),
        ("rpush", "l2"),
        ("lpop", "l"),
        ("rpop", "l"),
        ("del", "l"),
        ("new", "h"),
        ("hset", "h"),
        ("hincrbyfloat", "h"),
        ("hdel", "h"),
        ("del", "h"),
        ("new", "st"),
        ("sadd", "st"),
        ("new", "st2"),
        ("sinterstore", "st2"),
        ("del", "st2"),
        ("new", "mv"),
        ("sadd", "mv"),
        ("srem", "mv"),
        ("del", "mv"),
        ("new", "mv2"),
        ("sadd", "mv2"),
        ("spop", "st"),
        ("del", "st"),
    ]);
    sub.check(b"", want.as_bytes());
    for (req, reply) in [
        ("ZADD z 1 a", ":1\r\n"),
        ("ZINCRBY z 1 a", "$1\r\n2\r\n"),
        ("ZADD z 2 a", ":0\r\n"),
        ("ZPOPMIN z", "*2\r\n$1\r\na\r\n$1\r\n2\r\n"),
        ("SETBIT bits 3 1", ":0\r\n"),
        ("SETBIT bits 3 1", ":1\r\n"),
        ("PFADD hll a", ":1\r\n"),
        ("GEOADD g 13.361389 38.115556 Palermo", ":1\r\n"),
        ("RPUSH sl 2 1", ":2\r\n"),
        ("SORT sl STORE sorted", ":2\r\n"),
        ("RENAME sorted renamed", "+OK\r\n"),
        ("COPY renamed copied", ":1\r\n"),
        ("MOVE copied 1", ":1\r\n"),
        ("EXPIRE renamed 0", ":1\r\n"),
        ("PERSIST s", ":1\r\n"),
    ] {
        ck(&mut w, req, reply);
    }
    let mut want = evs(&[
        ("new", "z"),
        ("zadd", "z"),
        ("zincr", "z"),
        ("zpopmin", "z"),
        ("del", "z"),
        ("new", "bits"),
        ("setbit", "bits"),
        ("new", "hll"),
        ("pfadd", "hll"),
        ("new", "g"),
        ("zadd", "g"),
        ("new", "sl"),
        ("rpush", "sl"),
        ("new", "sorted"),
        ("sortstore", "sorted"),
        ("new", "renamed"),
        ("rename_from", "sorted"),
        ("rename_to", "renamed"),
        ("new", "copied"),
        ("copy_to", "copied"),
    ]);
    // MOVE: the new key and move_to in database 1, move_from in 0.
    want += &ev(1, "new", "copied");
    want += &ev(0, "move_from", "copied");
    want += &ev(1, "move_to", "copied");
    want += &evs(&[("del", "renamed"), ("persist", "s")]);
    sub.check(b"", want.as_bytes());
    // Masked classes send nothing; the rest still comes.
    ck(&mut w, "CONFIG SET notify-keyspace-events Kl", "+OK\r\n");
    ck(&mut w, "SET s x", "+OK\r\n");
    ck(&mut w, "LPUSH l z", ":1\r\n");
    let lpush = format!("*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n{}{}", bulk("__keyspace@0__:l"), bulk("lpush"));
    sub.check(b"", lpush.as_bytes());
    w.check(&cmd(&[b"CONFIG", b"SET", b"notify-keyspace-events", b""]), b"+OK\r\n");
    ck(&mut w, "LPUSH l z", ":2\r\n");
    silent(&mut sub);
}

#[test]
fn resp3_clients_get_their_own_events_among_their_replies() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ask(&mut c, &[b"HELLO", b"3"]);
    ck(&mut c, "CONFIG SET notify-keyspace-events E$l", "+OK\r\n");
    c.check(
        &cmd(&[b"PSUBSCRIBE", b"__keyevent@0__:*"]),
        b">3\r\n$10\r\npsubscribe\r\n$16\r\n__keyevent@0__:*\r\n:1\r\n",
    );
    let push = |e: &str, k: &str| {
        format!(
            ">4\r\n$8\r\npmessage\r\n$16\r\n__keyevent@0__:*\r\n{}{}",
            bulk(&format!("__keyevent@0__:{e}")),
            bulk(k)
        )
    };
    // SET publishes before it replies, LPUSH after (as Redis orders them).
    ck(&mut c, "SET k v", &format!("{}+OK\r\n", push("set", "k")));
    ck(&mut c, "LPUSH l a", &format!(":1\r\n{}", push("lpush", "l")));
    ck(&mut c, "GETSET k w", &format!("$1\r\nv\r\n{}", push("set", "k")));
    // A missing key: its miss before the null reply, its creation after (bytes from
    // redis-server 7.0.15).
    ck(&mut c, "CONFIG SET notify-keyspace-events E$lnm", "+OK\r\n");
    for req in ["GETSET fresh w", "SET fresh2 v GET"] {
        let k = req.split(' ').nth(1).unwrap();
        ck(&mut c, req, &format!("{}_\r\n{}{}", push("keymiss", k), push("new", k), push("set", k)));
    }
}

#[test]
fn lazy_and_active_expiry_and_misses_notify() {
    let t = start();
    let (mut sub, mut w) = pair(&t, "Exm");
    let event = |e: &str, k: &str| {
        format!("*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n{}{}", bulk(&format!("__keyevent@0__:{e}")), bulk(k))
    };
    let expired = |k: &str| event("expired", k);
    let keymiss = |k: &str| event("keymiss", k);
    // Lazy: found expired by a read (on the writer's worker), then the miss it was.
    ck(&mut w, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    ck(&mut w, "SET lazy v PX 20", "+OK\r\n");
    ck(&mut w, "SET lazy2 v PX 20", "+OK\r\n");
    std::thread::sleep(Duration::from_millis(60));
    ck(&mut w, "GET lazy", "$-1\r\n");
    sub.check(b"", format!("{}{}", expired("lazy"), keymiss("lazy")).as_bytes());
    // By a write: the expiry, then what the write did (no miss: writes do not count one).
    ck(&mut w, "SET lazy2 again", "+OK\r\n");
    sub.check(b"", expired("lazy2").as_bytes());
    // Active expiry (the background thread), with nobody reading the key.
    ck(&mut w, "DEBUG SET-ACTIVE-EXPIRE 1", "+OK\r\n");
    ck(&mut w, "SET active v PX 20", "+OK\r\n");
    sub.s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let want = expired("active");
    let got = sub.read_n_within(want.len(), Duration::from_secs(10));
    assert_eq!(String::from_utf8_lossy(&got), want);
}

#[test]
fn a_blocked_pop_served_by_a_push_notifies_after_the_push() {
    let t = start();
    let (mut sub, _) = pair(&t, "KEAn");
    let (mut blocked, mut w) = one_per_worker(&t);
    blocked.send(&cmd(&[b"BLPOP", b"q", b"0"]));
    wait_blocked(&mut w, 1);
    ck(&mut w, "RPUSH q x", ":1\r\n");
    blocked.check(b"", b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    sub.check(b"", evs(&[("new", "q"), ("rpush", "q"), ("lpop", "q"), ("del", "q")]).as_bytes());
}

#[test]
fn memcached_requests_notify_the_keys_they_create_or_find_expired() {
    let t = start();
    let (mut sub, _) = pair(&t, "En");
    let mut mc = Raw::connect(t.mc);
    mc.check(b"set mk 0 0 1\r\nv\r\n", b"STORED\r\n");
    mc.check(b"set mk 0 0 1\r\nw\r\n", b"STORED\r\n");
    let new = format!("*4\r\n$8\r\npmessage\r\n$1\r\n*\r\n{}{}", bulk("__keyevent@0__:new"), bulk("mk"));
    sub.check(b"", new.as_bytes());
    silent(&mut sub);
}

/// An INFO stats field as a number.
fn stat(c: &mut Raw, field: &str) -> u64 {
    let info = ask(c, &[b"INFO", b"stats"]);
    let line = info.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or_else(|| panic!("{field}"));
    line[field.len() + 1..].trim().parse().unwrap()
}

#[test]
fn store_commands_with_nothing_to_store_delete_an_expired_destination_as_del() {
    // Redis 7.0.15 deletes the destination without looking it up (`dbDelete`): an expired
    // one is a "del", not an "expired", and no expired key is counted (the events checked
    // against redis-server 7.0.15, a subscriber with KEAm).
    let t = start();
    let (mut sub, mut w) = one_per_worker(&t);
    ck(&mut w, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    ck(&mut w, "SADD src a b", ":2\r\n");
    ck(&mut w, "GEOADD geo 0 0 m", ":1\r\n");
    let dsts = ["sdst", "zdst", "ldst", "gdst", "g2dst", "bdst", "zrdst"];
    for d in dsts {
        ck(&mut w, &format!("SET {d} v PX 20"), "+OK\r\n");
    }
    std::thread::sleep(Duration::from_millis(60));
    ck(&mut w, "CONFIG SET notify-keyspace-events KEAm", "+OK\r\n");
    sub.check(&cmd(&[b"PSUBSCRIBE", b"*"]), b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n");
    let expired_before = stat(&mut w, "expired_keys");
    for req in [
        "SINTERSTORE sdst src nosuch",
        "ZUNIONSTORE zdst 1 nosuch",
        "SORT nosuch STORE ldst",
        "GEORADIUS nosuch 0 0 10 km STORE gdst",
        "GEORADIUS geo 50 50 1 km STORE g2dst",
        "BITOP AND bdst nosuch",
        "ZRANGESTORE zrdst nosuch 0 -1",
    ] {
        ck(&mut w, req, ":0\r\n");
    }
    sub.check(
        b"",
        evs(&[
            ("keymiss", "nosuch"),
            ("del", "sdst"),
            ("keymiss", "nosuch"),
            ("del", "zdst"),
            ("keymiss", "nosuch"),
            ("del", "ldst"),
            ("keymiss", "nosuch"),
            ("del", "gdst"),
            ("del", "g2dst"),
            ("keymiss", "nosuch"),
            ("del", "bdst"),
            ("keymiss", "nosuch"),
            ("del", "zrdst"),
        ])
        .as_bytes(),
    );
    assert_eq!(stat(&mut w, "expired_keys"), expired_before);
    ck(&mut w, "DBSIZE", ":2\r\n");
    silent(&mut sub);
}

#[test]
fn set_with_a_time_already_past_stores_the_key_expired() {
    // As redis-server 7.0.15: SET ... EXAT/PXAT in the past is "new", "set", "expire"; the
    // key stays (DBSIZE counts it) until a lookup finds it expired ("expired", counted in
    // expired_keys) or active expiry takes it.
    let t = start();
    let (mut sub, mut w) = pair(&t, "KEAnm");
    ck(&mut w, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    ck(&mut w, "SET past v PXAT 1", "+OK\r\n");
    ck(&mut w, "SET past2 v EXAT 1 GET", "$-1\r\n");
    ck(&mut w, "SET k0 v", "+OK\r\n");
    ck(&mut w, "SET k0 w PXAT 1", "+OK\r\n");
    sub.check(
        b"",
        evs(&[
            ("new", "past"),
            ("set", "past"),
            ("expire", "past"),
            ("keymiss", "past2"),
            ("new", "past2"),
            ("set", "past2"),
            ("expire", "past2"),
            ("new", "k0"),
            ("set", "k0"),
            ("set", "k0"),
            ("expire", "k0"),
        ])
        .as_bytes(),
    );
    ck(&mut w, "DBSIZE", ":3\r\n");
    let expired_before = stat(&mut w, "expired_keys");
    ck(&mut w, "EXISTS past", ":0\r\n");
    sub.check(b"", evs(&[("expired", "past"), ("keymiss", "past")]).as_bytes());
    assert_eq!(stat(&mut w, "expired_keys"), expired_before + 1);
    ck(&mut w, "DBSIZE", ":2\r\n");
    // Active expiry takes the others.
    ck(&mut w, "DEBUG SET-ACTIVE-EXPIRE 1", "+OK\r\n");
    let want = evs(&[("expired", "k0"), ("expired", "past2")]);
    let got = sub.read_n_within(want.len(), Duration::from_secs(10));
    let (a, b) = (evs(&[("expired", "past2"), ("expired", "k0")]), String::from_utf8_lossy(&got));
    assert!(b == want || b == a, "{b}");
}

#[test]
fn sort_by_and_get_patterns_look_keys_up_as_reads() {
    // Each key a BY or GET pattern names is a read (Redis's `lookupKeyRead`): an expired
    // one is "expired", then every missing one a "keymiss" (checked against redis-server
    // 7.0.15).
    let t = start();
    let (mut sub, mut w) = one_per_worker(&t);
    ck(&mut w, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    ck(&mut w, "RPUSH l 3 1 2", ":3\r\n");
    ck(&mut w, "MSET w_1 10 w_2 5", "+OK\r\n");
    ck(&mut w, "HSET h_1 f a", ":1\r\n");
    ck(&mut w, "SET w_3 7 PX 10", "+OK\r\n");
    std::thread::sleep(Duration::from_millis(40));
    ck(&mut w, "CONFIG SET notify-keyspace-events KEAm", "+OK\r\n");
    sub.check(&cmd(&[b"PSUBSCRIBE", b"*"]), b"*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n");
    ck(&mut w, "SORT l BY w_*", "*3\r\n$1\r\n3\r\n$1\r\n2\r\n$1\r\n1\r\n");
    sub.check(b"", evs(&[("expired", "w_3"), ("keymiss", "w_3")]).as_bytes());
    ask(&mut w, &[b"SORT", b"l", b"BY", b"nosort", b"GET", b"#", b"GET", b"h_*->f"]);
    sub.check(b"", evs(&[("keymiss", "h_3"), ("keymiss", "h_2")]).as_bytes());
    ck(&mut w, "SORT l BY w_* LIMIT 0 1 GET w_*", "*1\r\n$-1\r\n");
    sub.check(b"", evs(&[("keymiss", "w_3"), ("keymiss", "w_3")]).as_bytes());
    silent(&mut sub);
}
