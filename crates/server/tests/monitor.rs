//! MONITOR over real sockets: the exact lines (time, database, address, quoted arguments),
//! commands from both worker threads in the order they ran, transactions, what is hidden or
//! redacted, and what a client in MONITOR mode may do.
mod common;
use common::*;

use std::time::{Duration, Instant};

/// The next monitor line, without its `+<secs>.<µs> ` time (checked here) and CRLF.
fn next_line(m: &mut Raw) -> String {
    let reply = String::from_utf8(read_reply(m)).unwrap();
    let body = reply.strip_prefix('+').and_then(|r| r.strip_suffix("\r\n")).unwrap_or_else(|| panic!("{reply:?}"));
    let (time, rest) = body.split_once(' ').unwrap();
    let (secs, micros) = time.split_once('.').unwrap();
    assert!(secs.len() >= 10 && secs.bytes().all(|c| c.is_ascii_digit()), "{reply:?}");
    assert!(micros.len() == 6 && micros.bytes().all(|c| c.is_ascii_digit()), "{reply:?}");
    rest.to_string()
}

/// How the server names this connection in monitor lines.
fn addr(c: &Raw) -> String {
    c.s.local_addr().unwrap().to_string()
}

fn monitor(m: &mut Raw) {
    m.check(&cmd(&[b"MONITOR"]), b"+OK\r\n");
}

#[test]
fn lines_have_redis_format_and_quoting() {
    let t = start();
    let (mut m, mut c) = one_per_worker(&t);
    monitor(&mut m);
    let a = addr(&c);
    c.check(&cmd(&[b"SET", b"k y", b"a\"b\\c\r\n\t\x07\x08\x00\x7f\xff"]), b"+OK\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "SET" "k y" "a\"b\\c\r\n\t\a\b\x00\x7f\xff""#));
    // The database is the one the command left selected; a failed command shows too.
    c.check(&cmd(&[b"SELECT", b"5"]), b"+OK\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[5 {a}] "SELECT" "5""#));
    c.check(&cmd(&[b"INCR", b"k y"]), b":1\r\n");
    c.check(&cmd(&[b"LPUSH", b"k y", b"x"]), WRONGTYPE.as_bytes());
    assert_eq!(next_line(&mut m), format!(r#"[5 {a}] "INCR" "k y""#));
    assert_eq!(next_line(&mut m), format!(r#"[5 {a}] "LPUSH" "k y" "x""#));
    // Empty arguments, inline commands.
    c.check(&cmd(&[b"ECHO", b""]), b"$0\r\n\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[5 {a}] "ECHO" """#));
    c.check(b"ping   hello\r\n", b"$5\r\nhello\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[5 {a}] "ping" "hello""#));
}

#[test]
fn commands_from_both_workers_arrive_in_the_order_they_ran() {
    let t = start();
    let (mut m, mut other) = one_per_worker(&t);
    // A client on the monitor's own worker too.
    let mut same = loop {
        let mut c = Raw::connect(t.resp);
        if worker_of(&t, &mut c) == worker_of(&t, &mut m) {
            break c;
        }
    };
    monitor(&mut m);
    let (ao, as_) = (addr(&other), addr(&same));
    // A pipeline from each: every command of a client, in order.
    let n = 300;
    let mut p1 = Vec::new();
    let mut p2 = Vec::new();
    for i in 0..n {
        p1.extend(cmd(&[b"SET", format!("o{i}").as_bytes(), b"v"]));
        p2.extend(cmd(&[b"GET", format!("s{i}").as_bytes()]));
    }
    other.send(&p1);
    same.send(&p2);
    assert_eq!(other.read_n(5 * n).len(), 5 * n);
    assert_eq!(same.read_n(5 * n).len(), 5 * n);
    let (mut next_o, mut next_s) = (0, 0);
    for _ in 0..2 * n {
        let l = next_line(&mut m);
        if l.starts_with(&format!("[0 {ao}]")) {
            assert_eq!(l, format!(r#"[0 {ao}] "SET" "o{next_o}" "v""#));
            next_o += 1;
        } else {
            assert_eq!(l, format!(r#"[0 {as_}] "GET" "s{next_s}""#));
            next_s += 1;
        }
    }
    // One client after the other, each waiting for its reply: the monitor sees them in that
    // order, across the workers.
    for i in 0..50 {
        let c = if i % 2 == 0 { &mut other } else { &mut same };
        c.check(&cmd(&[b"EXISTS", format!("x{i}").as_bytes()]), b":0\r\n");
    }
    for i in 0..50 {
        let a = if i % 2 == 0 { &ao } else { &as_ };
        assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "EXISTS" "x{i}""#));
    }
}

#[test]
fn transactions_show_their_commands_before_exec() {
    let t = start();
    let (mut m, mut c) = one_per_worker(&t);
    monitor(&mut m);
    let a = addr(&c);
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "SET foo bar", "+QUEUED\r\n");
    ck(&mut c, "GET foo", "+QUEUED\r\n");
    ck(&mut c, "EXEC", "*2\r\n+OK\r\n$3\r\nbar\r\n");
    for want in [r#""MULTI""#, r#""SET" "foo" "bar""#, r#""GET" "foo""#, r#""EXEC""#] {
        assert_eq!(next_line(&mut m), format!("[0 {a}] {want}"));
    }
    // A command refused while queueing is not shown; the EXEC that aborts is.
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "NOSUCH x", "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n");
    ck(&mut c, "EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "MULTI""#));
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "EXEC""#));
    // So is an EXEC refused as a whole (wrong arity), which ends the transaction.
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(
        &mut c,
        "EXEC x",
        "-EXECABORT Transaction discarded because of: wrong number of arguments for 'exec' command\r\n",
    );
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "MULTI""#));
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "EXEC" "x""#));
    // MONITOR inside a transaction is refused when EXEC runs it.
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "MONITOR", "+QUEUED\r\n");
    ck(&mut c, "EXEC", "*1\r\n-ERR MONITOR isn't allowed for DENY BLOCKING client\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "MULTI""#));
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "EXEC""#));
    ck(&mut c, "PING", "+PONG\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "PING""#));
}

#[test]
fn admin_commands_are_hidden_and_credentials_redacted() {
    let t = start();
    let (mut m, mut c) = one_per_worker(&t);
    monitor(&mut m);
    let a = addr(&c);
    // Admin commands (CONFIG, CLIENT LIST, SLOWLOG, MONITOR) are not shown; CLIENT ID is.
    ask(&mut c, &[b"CONFIG", b"GET", b"maxclients"]);
    ask(&mut c, &[b"CLIENT", b"LIST"]);
    ask(&mut c, &[b"SLOWLOG", b"LEN"]);
    ask(&mut c, &[b"CLIENT", b"ID"]);
    assert_eq!(next_line(&mut m), format!(r#"[0 {a}] "CLIENT" "ID""#));
    // Refused before running: not shown.
    ask(&mut c, &[b"GET"]);
    ask(&mut c, &[b"AUTH", b"pass"]);
    ask(&mut c, &[b"AUTH", b"user", b"pass"]);
    ask(&mut c, &[b"AUTH", b"a", b"b", b"c"]);
    ask(&mut c, &[b"HELLO", b"2", b"AUTH", b"default", b"pw", b"SETNAME", b"n", b"AUTH", b"x", b"y"]);
    ask(&mut c, &[b"HELLO", b"2", b"SETNAME", b"bad name", b"AUTH", b"x", b"y"]);
    ask(&mut c, &[b"HELLO", b"4", b"AUTH", b"x", b"y"]);
    ask(&mut c, &[b"HELLO", b"2", b"AUTH", b"x"]);
    for want in [
        r#""AUTH" "(redacted)""#,
        r#""AUTH" "(redacted)" "(redacted)""#,
        r#""AUTH" "a" "b" "c""#,
        r#""HELLO" "2" "AUTH" "(redacted)" "(redacted)" "SETNAME" "n" "AUTH" "(redacted)" "(redacted)""#,
        r#""HELLO" "2" "SETNAME" "bad name" "AUTH" "x" "y""#,
        r#""HELLO" "4" "AUTH" "x" "y""#,
        r#""HELLO" "2" "AUTH" "x""#,
    ] {
        assert_eq!(next_line(&mut m), format!("[0 {a}] {want}"));
    }
}

#[test]
fn a_monitor_may_not_touch_the_keyspace_and_is_not_paused() {
    let t = start();
    let (mut m, mut c) = one_per_worker(&t);
    monitor(&mut m);
    let am = addr(&m);
    // Its own commands are shown to it, after their replies (as in Redis).
    assert_eq!(ask(&mut m, &[b"PING"]), "+PONG\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[0 {am}] "PING""#));
    for req in ["GET k", "SET k v", "PUBLISH ch x", "PFCOUNT h"] {
        ck(&mut m, req, "-ERR Replica can't interact with the keyspace\r\n");
    }
    // MONITOR again: nothing at all.
    m.send(&cmd(&[b"MONITOR"]));
    silent(&mut m);
    let list = ask(&mut c, &[b"CLIENT", b"LIST"]);
    assert!(list.contains(&format!("addr={am} ")) && list.contains("flags=O "), "{list}");
    let normal = ask(&mut c, &[b"CLIENT", b"LIST", b"TYPE", b"normal"]);
    assert!(normal.contains(&format!("addr={am} ")), "{normal}");
    // CLIENT PAUSE holds every other client, not a monitor.
    ck(&mut c, "CLIENT PAUSE 10000 ALL", "+OK\r\n");
    assert_eq!(ask(&mut m, &[b"ECHO", b"hi"]), "$2\r\nhi\r\n");
    assert_eq!(next_line(&mut m), format!(r#"[0 {am}] "ECHO" "hi""#));
    ck(&mut m, "CLIENT UNPAUSE", "+OK\r\n");
    // RESET ends MONITOR mode.
    ck(&mut m, "RESET", "+RESET\r\n");
    ck(&mut c, "SET k v", "+OK\r\n");
    ck(&mut m, "GET k", "$1\r\nv\r\n");
    let list = ask(&mut c, &[b"CLIENT", b"LIST"]);
    assert!(!list.contains("flags=O"), "{list}");
    assert!(!t.server.as_ref().unwrap().shared.monitors.active());
}

#[test]
fn lines_stop_when_the_monitor_goes() {
    let t = start();
    let shared = t.server.as_ref().unwrap().shared.clone();
    let (mut m, mut c) = one_per_worker(&t);
    monitor(&mut m);
    assert!(shared.monitors.active());
    // CLIENT REPLY OFF drops the lines, as Redis drops every reply.
    m.send(&cmd(&[b"CLIENT", b"REPLY", b"OFF"]));
    ck(&mut c, "SET a 1", "+OK\r\n");
    silent(&mut m);
    assert_eq!(ask(&mut m, &[b"CLIENT", b"REPLY", b"ON"]), "+OK\r\n");
    // (Its own commands are shown to it too.)
    assert!(next_line(&mut m).ends_with(r#""CLIENT" "REPLY" "ON""#));
    ck(&mut c, "SET a 2", "+OK\r\n");
    assert!(next_line(&mut m).ends_with(r#""SET" "a" "2""#));
    drop(m);
    let deadline = Instant::now() + Duration::from_secs(5);
    while shared.monitors.active() {
        assert!(Instant::now() < deadline, "the closed monitor is still attached");
        std::thread::sleep(Duration::from_millis(5));
    }
    ck(&mut c, "SET a 3", "+OK\r\n");
}

#[test]
fn a_monitor_that_does_not_read_is_cut_off_at_the_output_limit() {
    let t = start();
    let (mut m, mut c) = one_per_worker(&t);
    monitor(&mut m);
    assert_eq!(ask(&mut c, &[b"CONFIG", b"SET", b"client-output-buffer-limit", b"normal 1mb 0 0"]), "+OK\r\n");
    // 40 MB of lines, well past what the sockets' buffers take.
    let value = vec![b'x'; 1 << 20];
    for i in 0..40 {
        c.check(&cmd(&[b"SET", format!("big{i}").as_bytes(), &value]), b"+OK\r\n");
    }
    let list = ask(&mut c, &[b"CLIENT", b"LIST"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut gone = !list.contains("flags=O");
    while !gone {
        assert!(Instant::now() < deadline, "the monitor was not disconnected: {list}");
        std::thread::sleep(Duration::from_millis(10));
        gone = !ask(&mut c, &[b"CLIENT", b"LIST"]).contains("flags=O");
    }
    assert_eq!(ask(&mut c, &[b"CONFIG", b"SET", b"client-output-buffer-limit", b"normal 0 0 0"]), "+OK\r\n");
}
