//! Client-side caching (CLIENT TRACKING) over real sockets, raw bytes in and out: a tracking
//! client on one worker thread and a writer on the other, RESP3 pushes and RESP2 redirects
//! to a subscriber, a client's own invalidations after its reply (and after EXEC's), BCAST
//! with prefixes and NOLOOP, OPTIN/OPTOUT, flushes, expiry, memcached writes, the broken
//! redirect, the table's limit, and Redis 7.0.15's errors and introspection.
mod common;
use common::*;

use std::time::Duration;

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// A RESP3 invalidation push of `keys`.
fn inv(keys: &[&str]) -> String {
    let mut s = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        s.push_str(&bulk(k));
    }
    s
}

/// The RESP2 `__redis__:invalidate` message of `keys` a redirect client gets.
fn msg(keys: &[&str]) -> String {
    let mut s = "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n".to_string();
    s.push_str(&format!("*{}\r\n", keys.len()));
    for k in keys {
        s.push_str(&bulk(k));
    }
    s
}

fn expect(c: &mut Raw, want: &str) {
    let got = c.read_n(want.len());
    assert_eq!(String::from_utf8_lossy(&got), want);
}

fn hello3(c: &mut Raw) {
    c.send(&cmd(&[b"HELLO", b"3"]));
    read_reply(c);
}

/// A RESP3 tracking client on one worker, a writer on the other.
fn tracked(t: &TestServer, opts: &str) -> (Raw, Raw) {
    let (mut c, w) = one_per_worker(t);
    hello3(&mut c);
    ck(&mut c, &format!("CLIENT TRACKING on{opts}"), "+OK\r\n");
    (c, w)
}

/// A RESP2 client subscribed to `__redis__:invalidate`, and its id.
fn redirect_target(t: &TestServer) -> (Raw, u64) {
    let mut r = Raw::connect(t.resp);
    let id = client_id(&mut r);
    r.check(
        &cmd(&[b"SUBSCRIBE", b"__redis__:invalidate"]),
        b"*3\r\n$9\r\nsubscribe\r\n$20\r\n__redis__:invalidate\r\n:1\r\n",
    );
    (r, id)
}

#[test]
fn a_write_on_another_worker_invalidates_a_key_read_in_resp3() {
    let t = start();
    let (mut c, mut w) = tracked(&t, "");
    ck(&mut w, "SET k 1", "+OK\r\n");
    ck(&mut c, "GET k", "$1\r\n1\r\n");
    ck(&mut w, "SET k 2", "+OK\r\n");
    expect(&mut c, &inv(&["k"]));
    // Invalidated once: the key left the table until the client reads it again.
    ck(&mut w, "SET k 3", "+OK\r\n");
    ck(&mut c, "PING", "+PONG\r\n");
    // A key never read, a write that changes nothing: no message.
    ck(&mut c, "GET k", "$1\r\n3\r\n");
    ck(&mut w, "SET other 1", "+OK\r\n");
    ck(&mut w, "SET k 4 NX", "$-1\r\n");
    ck(&mut w, "DEL nosuch", ":0\r\n");
    // SETBIT of a bit to its value changes nothing either (as in Redis).
    ck(&mut w, "SETBIT k 2 1", ":1\r\n");
    ck(&mut c, "PING", "+PONG\r\n");
    // Keys are tracked across databases, as Redis tracks them.
    ck(&mut w, "SELECT 3", "+OK\r\n");
    ck(&mut w, "SET k x", "+OK\r\n");
    expect(&mut c, &inv(&["k"]));
    // Every write family: a hash field, a list push, an expiry, a rename.
    ck(&mut c, "MGET a b c", "*3\r\n_\r\n_\r\n_\r\n");
    ck(&mut w, "SELECT 0", "+OK\r\n");
    ck(&mut w, "HSET a f v", ":1\r\n");
    expect(&mut c, &inv(&["a"]));
    ck(&mut w, "RPUSH b x", ":1\r\n");
    expect(&mut c, &inv(&["b"]));
    ck(&mut w, "SET src v", "+OK\r\n");
    ck(&mut w, "RENAME src c", "+OK\r\n");
    expect(&mut c, &inv(&["c"]));
}

#[test]
fn resp2_clients_redirect_to_a_subscriber() {
    let t = start();
    let (mut c, mut w) = one_per_worker(&t);
    let (mut r, rid) = redirect_target(&t);
    ck(&mut c, &format!("CLIENT TRACKING on REDIRECT {rid}"), "+OK\r\n");
    ck(&mut c, "CLIENT GETREDIR", &format!(":{rid}\r\n"));
    ck(&mut w, "MSET a 1 b 1", "+OK\r\n");
    ck(&mut c, "GET a", "$1\r\n1\r\n");
    ck(&mut w, "INCR b", ":2\r\n");
    ck(&mut w, "INCR a", ":2\r\n");
    expect(&mut r, &msg(&["a"]));
    // FLUSHALL: the null of the tracking client's protocol.
    ck(&mut c, "GET a", "$1\r\n2\r\n");
    ck(&mut w, "FLUSHALL", "+OK\r\n");
    expect(&mut r, "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n");
    // A RESP2 client without a redirect gets nothing (RESP2 has no pushes).
    ck(&mut c, "CLIENT TRACKING on", "+OK\r\n");
    ck(&mut c, "CLIENT GETREDIR", ":0\r\n");
    ck(&mut c, "GET a", "$-1\r\n");
    ck(&mut w, "SET a 1", "+OK\r\n");
    ck(&mut c, "PING", "+PONG\r\n");
    ck(&mut c, "CLIENT TRACKING off", "+OK\r\n");
    ck(&mut c, "CLIENT GETREDIR", ":-1\r\n");
}

#[test]
fn a_clients_own_invalidations_follow_its_reply_and_its_transaction() {
    let t = start();
    let (mut c, _w) = tracked(&t, "");
    ck(&mut c, "HSET h f 1", ":1\r\n");
    ck(&mut c, "HGET h f", "$1\r\n1\r\n");
    c.send(&cmd(&[b"HDEL", b"h", b"f"]));
    expect(&mut c, &format!(":1\r\n{}", inv(&["h"])));
    ck(&mut c, "MSET a 1 b 2", "+OK\r\n");
    ck(&mut c, "GET a", "$1\r\n1\r\n");
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "INCR a", "+QUEUED\r\n");
    ck(&mut c, "GET b", "+QUEUED\r\n");
    c.send(&cmd(&[b"EXEC"]));
    expect(&mut c, &format!("*2\r\n:2\r\n$1\r\n2\r\n{}", inv(&["a"])));
    // FLUSHDB in a transaction: the null after EXEC's reply.
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "FLUSHDB", "+QUEUED\r\n");
    c.send(&cmd(&[b"EXEC"]));
    expect(&mut c, "*1\r\n+OK\r\n>2\r\n$10\r\ninvalidate\r\n_\r\n");
    // NOLOOP: its own writes are not sent.
    ck(&mut c, "CLIENT TRACKING on NOLOOP", "+OK\r\n");
    ck(&mut c, "GET a", "_\r\n");
    ck(&mut c, "SET a 1", "+OK\r\n");
    ck(&mut c, "PING", "+PONG\r\n");
    // Under CLIENT REPLY OFF the invalidation still goes out.
    ck(&mut c, "CLIENT TRACKING off", "+OK\r\n");
    ck(&mut c, "CLIENT TRACKING on", "+OK\r\n");
    ck(&mut c, "GET a", "$1\r\n1\r\n");
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"OFF"]));
    c.send(&cmd(&[b"SET", b"a", b"2"]));
    expect(&mut c, &inv(&["a"]));
    ck(&mut c, "CLIENT REPLY ON", "+OK\r\n");
}

#[test]
fn a_read_that_expires_a_tracked_key_invalidates_it_after_the_reply() {
    let t = start();
    let (mut c, _w) = tracked(&t, "");
    ck(&mut c, "DEBUG SET-ACTIVE-EXPIRE 0", "+OK\r\n");
    ck(&mut c, "MSET x 1 y 2", "+OK\r\n");
    ck(&mut c, "PEXPIRE y 50", ":1\r\n");
    ck(&mut c, "GET y", "$1\r\n2\r\n");
    std::thread::sleep(Duration::from_millis(80));
    c.send(&cmd(&[b"MGET", b"x", b"y"]));
    expect(&mut c, &format!("*2\r\n$1\r\n1\r\n_\r\n{}", inv(&["y"])));
    // A key the read finds expired that was not tracked before: nothing (Redis remembers
    // keys after the read).
    ck(&mut c, "SET z 1 PX 20", "+OK\r\n");
    std::thread::sleep(Duration::from_millis(40));
    ck(&mut c, "GET z", "_\r\n");
    ck(&mut c, "PING", "+PONG\r\n");
    ck(&mut c, "DEBUG SET-ACTIVE-EXPIRE 1", "+OK\r\n");
    // Active expiry invalidates too.
    ck(&mut c, "SET e 1 PX 30", "+OK\r\n");
    ck(&mut c, "GET e", "$1\r\n1\r\n");
    c.s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    expect(&mut c, &inv(&["e"]));
}

#[test]
fn bcast_sends_one_message_per_prefix_at_the_end_of_the_round() {
    let t = start();
    let (mut c, mut w) = one_per_worker(&t);
    let (mut r, rid) = redirect_target(&t);
    ck(&mut c, &format!("CLIENT TRACKING on BCAST REDIRECT {rid}"), "+OK\r\n");
    ck(&mut w, "MSET b 1 a 2 c 3", "+OK\r\n");
    expect(&mut r, &msg(&["a", "b", "c"]));
    ck(&mut c, "CLIENT TRACKING off", "+OK\r\n");
    ck(&mut c, &format!("CLIENT TRACKING on BCAST REDIRECT {rid} PREFIX a: PREFIX b:"), "+OK\r\n");
    ck(&mut w, "MULTI", "+OK\r\n");
    for k in ["a:1", "b:1", "c:1", "a:2"] {
        ck(&mut w, &format!("INCR {k}"), "+QUEUED\r\n");
    }
    ck(&mut w, "EXEC", "*4\r\n:1\r\n:1\r\n:1\r\n:1\r\n");
    expect(&mut r, &format!("{}{}", msg(&["a:1", "a:2"]), msg(&["b:1"])));
    // NOLOOP: the client's own writes are left out, and a message of only those is not sent.
    ck(&mut c, "CLIENT TRACKING off", "+OK\r\n");
    ck(&mut c, &format!("CLIENT TRACKING on BCAST REDIRECT {rid} NOLOOP"), "+OK\r\n");
    ck(&mut w, "SET other1 1", "+OK\r\n");
    expect(&mut r, &msg(&["other1"]));
    ck(&mut c, "SET loop 1", "+OK\r\n");
    ck(&mut w, "SET other2 1", "+OK\r\n");
    expect(&mut r, &msg(&["other2"]));
    // RESP3 BCAST to itself.
    ck(&mut c, "CLIENT TRACKING off", "+OK\r\n");
    hello3(&mut c);
    ck(&mut c, "CLIENT TRACKING on BCAST PREFIX x", "+OK\r\n");
    ck(&mut w, "SET xy 1", "+OK\r\n");
    expect(&mut c, &inv(&["xy"]));
    ck(&mut c, "CLIENT TRACKINGINFO", "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*1\r\n$1\r\nx\r\n");
}

#[test]
fn optin_and_optout_follow_client_caching() {
    let t = start();
    let (mut c, mut w) = tracked(&t, " OPTIN");
    ck(&mut w, "MSET k1 1 k2 1", "+OK\r\n");
    ck(&mut c, "GET k1", "$1\r\n1\r\n");
    ck(&mut c, "CLIENT CACHING yes", "+OK\r\n");
    ck(&mut c, "GET k2", "$1\r\n1\r\n");
    // The CACHING flag covered one command only.
    ck(&mut c, "GET k1", "$1\r\n1\r\n");
    ck(&mut w, "MSET k1 2 k2 2", "+OK\r\n");
    expect(&mut c, &inv(&["k2"]));
    ck(&mut c, "CLIENT TRACKING off", "+OK\r\n");
    ck(&mut c, "CLIENT TRACKING on OPTOUT", "+OK\r\n");
    ck(&mut c, "CLIENT CACHING no", "+OK\r\n");
    ck(&mut c, "GET k1", "$1\r\n2\r\n");
    ck(&mut c, "GET k2", "$1\r\n2\r\n");
    ck(&mut w, "MSET k1 3 k2 3", "+OK\r\n");
    expect(&mut c, &inv(&["k2"]));
}

#[test]
fn errors_and_introspection_are_redis_7_0s() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    for (req, want) in [
        ("CLIENT TRACKING maybe", "-ERR syntax error\r\n"),
        ("CLIENT TRACKING on FOO", "-ERR syntax error\r\n"),
        ("CLIENT TRACKING on REDIRECT x", "-ERR value is not an integer or out of range\r\n"),
        ("CLIENT TRACKING on REDIRECT 99999", "-ERR The client ID you want redirect to does not exist\r\n"),
        ("CLIENT TRACKING on PREFIX a", "-ERR PREFIX option requires BCAST mode to be enabled\r\n"),
        ("CLIENT TRACKING on BCAST OPTIN", "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"),
        ("CLIENT TRACKING on OPTIN OPTOUT", "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"),
        (
            "CLIENT TRACKING on BCAST PREFIX FOOBAR PREFIX FOO",
            "-ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a single client must not overlap.\r\n",
        ),
        ("CLIENT CACHING yes", "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"),
        ("CLIENT GETREDIR", ":-1\r\n"),
        ("CLIENT TRACKING on BCAST PREFIX FOO PREFIX BAR", "+OK\r\n"),
        (
            "CLIENT TRACKING on BCAST PREFIX FO",
            "-ERR Prefix 'FO' overlaps with an existing prefix 'FOO'. Prefixes for a single client must not overlap.\r\n",
        ),
        (
            "CLIENT TRACKING on",
            "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
        ),
        ("CLIENT CACHING yes", "-ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.\r\n"),
        ("CLIENT CACHING no", "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"),
        ("CLIENT TRACKING off", "+OK\r\n"),
        ("CLIENT TRACKING on OPTIN", "+OK\r\n"),
        (
            "CLIENT TRACKING on OPTOUT",
            "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n",
        ),
        ("CLIENT CACHING maybe", "-ERR syntax error\r\n"),
        ("CLIENT CACHING", "-ERR wrong number of arguments for 'client|caching' command\r\n"),
        (
            "CLIENT TRACKINGINFO",
            "*6\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$5\r\noptin\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n",
        ),
    ] {
        ck(&mut c, req, want);
    }
    let (mut other, oid) = redirect_target(&t);
    ck(
        &mut c,
        &format!("CLIENT TRACKING on REDIRECT {oid} REDIRECT {oid}"),
        "-ERR A client can only redirect to a single other client\r\n",
    );
    ck(&mut c, &format!("CLIENT TRACKING on REDIRECT {oid}"), "+OK\r\n");
    c.send(&cmd(&[b"CLIENT", b"INFO"]));
    let line = String::from_utf8(read_reply(&mut c)).unwrap();
    assert!(line.contains(" flags=t ") && line.contains(&format!(" redir={oid} ")), "{line}");
    // The redirect client goes: the first invalidation marks the redirect broken (flag R).
    ck(&mut c, "GET k", "$-1\r\n");
    ck(&mut other, "QUIT", "+OK\r\n");
    assert!(other.closed());
    let mut w = Raw::connect(t.resp);
    ck(&mut w, "SET k 1", "+OK\r\n");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        c.send(&cmd(&[b"CLIENT", b"INFO"]));
        let line = String::from_utf8(read_reply(&mut c)).unwrap();
        if line.contains(" flags=tR ") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{line}");
        std::thread::sleep(Duration::from_millis(10));
    }
    ck(&mut c, "CLIENT TRACKING off", "+OK\r\n");
    ck(&mut c, "CLIENT TRACKING on BCAST", "+OK\r\n");
    c.send(&cmd(&[b"CLIENT", b"INFO"]));
    let line = String::from_utf8(read_reply(&mut c)).unwrap();
    assert!(line.contains(" flags=tB ") && line.contains(" redir=0 "), "{line}");
}

#[test]
fn a_resp3_client_is_told_its_redirect_is_broken() {
    let t = start();
    let (mut c, mut w) = one_per_worker(&t);
    hello3(&mut c);
    let (mut r, rid) = redirect_target(&t);
    ck(&mut c, &format!("CLIENT TRACKING on REDIRECT {rid}"), "+OK\r\n");
    ck(&mut c, "GET k", "_\r\n");
    ck(&mut r, "QUIT", "+OK\r\n");
    assert!(r.closed());
    ck(&mut w, "SET k 1", "+OK\r\n");
    expect(&mut c, &format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{rid}\r\n"));
    ck(&mut c, "CLIENT TRACKINGINFO", &format!("%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:{rid}\r\n$8\r\nprefixes\r\n*0\r\n"));
}

#[test]
fn memcached_writes_invalidate_tracked_keys() {
    let t = start();
    let (mut c, _w) = tracked(&t, "");
    ck(&mut c, "GET mk", "_\r\n");
    let mut m = Raw::connect(t.mc);
    m.check(b"set mk 0 0 1\r\nv\r\n", b"STORED\r\n");
    expect(&mut c, &inv(&["mk"]));
    ck(&mut c, "GET mk", "$1\r\nv\r\n");
    m.check(b"delete mk\r\n", b"DELETED\r\n");
    expect(&mut c, &inv(&["mk"]));
    ck(&mut c, "GET mk", "_\r\n");
    m.check(b"flush_all\r\n", b"OK\r\n");
    expect(&mut c, ">2\r\n$10\r\ninvalidate\r\n_\r\n");
}

fn info_field(c: &mut Raw, section: &str, field: &str) -> u64 {
    c.send(&cmd(&[b"INFO", section.as_bytes()]));
    let info = read_bulk(c);
    let line = info.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or_else(|| panic!("{field}"));
    line[field.len() + 1..].trim().parse().unwrap()
}

#[test]
fn info_counts_clients_keys_items_and_prefixes_and_the_limit_evicts() {
    let t = start();
    let (mut c, mut w) = tracked(&t, "");
    let mut b = Raw::connect(t.resp);
    ck(&mut b, "CLIENT TRACKING on BCAST PREFIX p:", "+OK\r\n");
    ck(&mut c, "MGET k1 k2 k3", "*3\r\n_\r\n_\r\n_\r\n");
    assert_eq!(info_field(&mut w, "clients", "tracking_clients"), 2);
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), 3);
    assert_eq!(info_field(&mut w, "stats", "tracking_total_items"), 3);
    assert_eq!(info_field(&mut w, "stats", "tracking_total_prefixes"), 1);
    // The limit: two keys go, invalidated as if they had changed.
    ck(&mut w, "CONFIG SET tracking-table-max-keys 1", "+OK\r\n");
    ck(&mut w, "CONFIG GET tracking-table-max-keys", "*2\r\n$23\r\ntracking-table-max-keys\r\n$1\r\n1\r\n");
    let got = String::from_utf8(c.read_n(2 * inv(&["k1"]).len())).unwrap();
    assert_eq!(got.matches("invalidate").count(), 2, "{got}");
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), 1);
    ck(&mut w, "CONFIG SET tracking-table-max-keys 1000000", "+OK\r\n");
    // A client that goes away leaves tracking; its keys stay until they change, as in Redis.
    drop(b);
    drop(c);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while info_field(&mut w, "clients", "tracking_clients") != 0 {
        assert!(std::time::Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(info_field(&mut w, "stats", "tracking_total_prefixes"), 0);
    ck(&mut w, "FLUSHALL", "+OK\r\n");
    assert_eq!(info_field(&mut w, "stats", "tracking_total_keys"), 0);
}

#[test]
fn a_served_blocked_client_gets_its_invalidation_after_its_reply() {
    let t = start();
    let (mut c, mut w) = tracked(&t, "");
    ck(&mut w, "RPUSH dst a", ":1\r\n");
    ck(&mut c, "LRANGE dst 0 -1", "*1\r\n$1\r\na\r\n");
    c.send(&cmd(&[b"BLMOVE", b"src", b"dst", b"LEFT", b"LEFT", b"0"]));
    wait_blocked(&mut w, 1);
    ck(&mut w, "RPUSH src foo", ":1\r\n");
    expect(&mut c, &format!("$3\r\nfoo\r\n{}", inv(&["dst"])));
}

#[test]
fn reads_racing_writes_on_another_worker_never_leave_a_stale_key_cached() {
    // A tracking client reads a key while a writer on the other worker keeps changing it:
    // after the writer stops, the last value the client read is either the final one or was
    // followed by an invalidation.
    let t = start();
    let (mut c, mut w) = tracked(&t, "");
    ck(&mut w, "SET k 0", "+OK\r\n");
    let writer = std::thread::spawn(move || {
        for i in 1..=2000 {
            w.send(&cmd(&[b"SET", b"k", i.to_string().as_bytes()]));
            read_reply(&mut w);
        }
    });
    let mut last = String::new();
    let mut invalidated = false;
    for _ in 0..3000 {
        c.send(&cmd(&[b"GET", b"k"]));
        loop {
            let r = String::from_utf8(read_reply(&mut c)).unwrap();
            // (An invalidation before the reply is about an older value.)
            if r.starts_with('>') {
                continue;
            }
            last = r;
            invalidated = false;
            break;
        }
    }
    writer.join().unwrap();
    // Drain what is still on its way.
    c.send(&cmd(&[b"PING"]));
    loop {
        let r = String::from_utf8(read_reply(&mut c)).unwrap();
        if r.starts_with('>') {
            invalidated = true;
            continue;
        }
        assert_eq!(r, "+PONG\r\n");
        break;
    }
    assert!(invalidated || last == "$4\r\n2000\r\n", "cached {last:?} without an invalidation");
}
