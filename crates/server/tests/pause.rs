//! CLIENT PAUSE / UNPAUSE over real sockets, with the paused clients and the pausing one on
//! different worker threads: raw bytes in, exact bytes out. The replies were checked against
//! redis-server 7.0.15, but for CLIENT UNBLOCK of a paused client (7.0.15 panics; Larder
//! answers 0, as it does for any client not blocked in a blocking command).
mod common;
use common::*;

use std::time::{Duration, Instant};

fn info_field(c: &mut Raw, section: &[u8], field: &str) -> String {
    c.send(&cmd(&[b"INFO", section]));
    let info = read_bulk(c);
    let line = info.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap_or_else(|| panic!("{info}"));
    line[field.len() + 1..].trim().to_string()
}

fn client_list_line(c: &mut Raw, id: u64) -> String {
    let list = ask(c, &[b"CLIENT", b"LIST"]);
    list.lines().find(|l| l.contains(&format!("id={id} "))).unwrap_or_else(|| panic!("{list}")).to_string()
}

#[test]
fn write_pause_holds_writes_on_every_worker_and_lets_reads_through() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "SET k v", "+OK\r\n");
    ck(&mut admin, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    // Reads, and commands that change nothing, run at once on both workers.
    for c in [&mut a, &mut b] {
        ck(c, "GET k", "$1\r\nv\r\n");
        ck(c, "PING", "+PONG\r\n");
        ck(c, "EXISTS k", ":1\r\n");
    }
    assert_eq!(info_field(&mut a, b"clients", "blocked_clients"), "0");
    // A write waits, and so does everything the client sends after it.
    let (ida, idb) = (client_id(&mut a), client_id(&mut b));
    a.send(&[cmd(&[b"SET", b"k", b"a"]), cmd(&[b"GET", b"k"])].concat());
    b.send(&cmd(&[b"INCR", b"n"]));
    wait_blocked(&mut admin, 2);
    silent(&mut a);
    silent(&mut b);
    let line = client_list_line(&mut admin, ida);
    assert!(line.contains(" flags=b ") && line.contains(" cmd=set "), "{line}");
    let line = client_list_line(&mut admin, idb);
    assert!(line.contains(" flags=b ") && line.contains(" cmd=incr "), "{line}");
    // Nothing ran: not the write, not the read behind it.
    ck(&mut admin, "GET k", "$1\r\nv\r\n");
    ck(&mut admin, "CLIENT UNPAUSE", "+OK\r\n");
    assert_eq!(read_reply(&mut a), b"+OK\r\n");
    assert_eq!(read_reply(&mut a), b"$1\r\na\r\n");
    assert_eq!(read_reply(&mut b), b":1\r\n");
    assert_eq!(blocked_clients(&mut admin), 0);
    let line = client_list_line(&mut admin, ida);
    assert!(line.contains(" flags=N "), "{line}");
    // The held commands were counted once, when they ran.
    let stats = ask(&mut admin, &[b"INFO", b"commandstats"]);
    assert!(stats.contains("cmdstat_set:calls=2,"), "{stats}");
    assert!(stats.contains("cmdstat_incr:calls=1,"), "{stats}");
}

#[test]
fn all_pause_holds_every_command_until_its_deadline() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    let started = Instant::now();
    ck(&mut a, "CLIENT PAUSE 400 ALL", "+OK\r\n");
    // The pausing client is paused too, and a read as much as a write.
    a.send(&cmd(&[b"PING"]));
    b.send(&cmd(&[b"GET", b"x"]));
    assert_eq!(read_reply(&mut a), b"+PONG\r\n");
    assert_eq!(read_reply(&mut b), b"$-1\r\n");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(390), "ran after {waited:?}");
    assert!(waited < Duration::from_secs(3), "ran after {waited:?}");
    ck(&mut a, "INFO nosuchsection", "$0\r\n\r\n");
    assert_eq!(blocked_clients(&mut a), 0);
    // The default mode is ALL; a pause of 0 ms is over at once.
    ck(&mut a, "CLIENT PAUSE 0", "+OK\r\n");
    ck(&mut b, "PING", "+PONG\r\n");
}

#[test]
fn may_replicate_commands_and_writing_transactions_wait_under_write() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "PFADD hll x", ":1\r\n");
    ck(&mut admin, "SET FOO BAR", "+OK\r\n");
    // A transaction of reads runs.
    ck(&mut admin, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    ck(&mut a, "MULTI", "+OK\r\n");
    ck(&mut a, "PING", "+QUEUED\r\n");
    ck(&mut a, "GET FOO", "+QUEUED\r\n");
    ck(&mut a, "EXEC", "*2\r\n+PONG\r\n$3\r\nBAR\r\n");
    // PFCOUNT (which may rewrite its key) and PUBLISH (which replicates) wait.
    a.send(&cmd(&[b"PFCOUNT", b"hll"]));
    b.send(&cmd(&[b"PUBLISH", b"ch", b"m"]));
    wait_blocked(&mut admin, 2);
    ck(&mut admin, "CLIENT UNPAUSE", "+OK\r\n");
    assert_eq!(read_reply(&mut a), b":1\r\n");
    assert_eq!(read_reply(&mut b), b":0\r\n");
    // An EXEC whose queue writes waits; a write sent inside MULTI during the pause waits
    // before it is even queued, as in Redis 7.0.
    ck(&mut a, "MULTI", "+OK\r\n");
    ck(&mut a, "SET FOO A", "+QUEUED\r\n");
    ck(&mut b, "MULTI", "+OK\r\n");
    ck(&mut admin, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    a.send(&cmd(&[b"EXEC"]));
    b.send(&cmd(&[b"SET", b"FOO", b"B"]));
    wait_blocked(&mut admin, 2);
    let list = ask(&mut admin, &[b"CLIENT", b"LIST"]);
    assert!(list.contains(" flags=xb ") && list.contains(" cmd=exec ") && list.contains(" cmd=set "), "{list}");
    ck(&mut admin, "CLIENT UNPAUSE", "+OK\r\n");
    assert_eq!(read_reply(&mut a), b"*1\r\n+OK\r\n");
    assert_eq!(read_reply(&mut b), b"+QUEUED\r\n");
    ck(&mut b, "EXEC", "*1\r\n+OK\r\n");
    ck(&mut admin, "GET FOO", "$1\r\nB\r\n");
}

#[test]
fn a_pause_inside_a_transaction_starts_after_it() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    ck(&mut a, "MULTI", "+OK\r\n");
    ck(&mut a, "SET FOO1 BAR", "+QUEUED\r\n");
    ck(&mut a, "CLIENT PAUSE 60000 WRITE", "+QUEUED\r\n");
    ck(&mut a, "SET FOO2 BAR", "+QUEUED\r\n");
    ck(&mut a, "EXEC", "*3\r\n+OK\r\n+OK\r\n+OK\r\n");
    b.send(&cmd(&[b"SET", b"FOO3", b"BAR"]));
    wait_blocked(&mut a, 1);
    ck(&mut a, "MGET FOO1 FOO2 FOO3", "*3\r\n$3\r\nBAR\r\n$3\r\nBAR\r\n$-1\r\n");
    ck(&mut a, "CLIENT UNPAUSE", "+OK\r\n");
    assert_eq!(read_reply(&mut b), b"+OK\r\n");
}

#[test]
fn rejected_commands_are_answered_at_once_and_argument_errors() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "CLIENT PAUSE 100000 WRITE", "+OK\r\n");
    ck(&mut c, "SET FOO", "-ERR wrong number of arguments for 'set' command\r\n");
    ck(&mut c, "NOSUCH x", "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n");
    ck(&mut c, "CLIENT UNPAUSE", "+OK\r\n");
    ck(&mut c, "CLIENT PAUSE -1", "-ERR timeout is negative\r\n");
    ck(&mut c, "CLIENT PAUSE 1.5", "-ERR timeout is not an integer or out of range\r\n");
    ck(&mut c, "CLIENT PAUSE 10 foo", "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n");
    // The mode is checked before the timeout.
    ck(&mut c, "CLIENT PAUSE x foo", "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n");
    ck(
        &mut c,
        "CLIENT Pause 10 write x",
        "-ERR unknown subcommand or wrong number of arguments for 'Pause'. Try CLIENT HELP.\r\n",
    );
    ck(&mut c, "CLIENT PAUSE", "-ERR wrong number of arguments for 'client|pause' command\r\n");
    ck(&mut c, "CLIENT UNPAUSE x", "-ERR wrong number of arguments for 'client|unpause' command\r\n");
    // A timeout so large that Redis's sum wraps is a pause already over.
    ck(&mut c, "CLIENT PAUSE 9223372036854775807", "+OK\r\n");
    ck(&mut c, "PING", "+PONG\r\n");
    // UNPAUSE without a pause is fine.
    ck(&mut c, "CLIENT UNPAUSE", "+OK\r\n");
}

#[test]
fn expired_keys_stay_until_the_pause_ends() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    let before: u64 = info_field(&mut a, b"stats", "expired_keys").parse().unwrap();
    ck(&mut a, "MULTI", "+OK\r\n");
    ck(&mut a, "SET foo bar PX 10", "+QUEUED\r\n");
    ck(&mut a, "SET bar foo PX 10", "+QUEUED\r\n");
    ck(&mut a, "CLIENT PAUSE 50000 WRITE", "+QUEUED\r\n");
    ck(&mut a, "EXEC", "*3\r\n+OK\r\n+OK\r\n+OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
    // Gone for every reader, but not deleted: neither by these reads nor by active expiry
    // (three rounds of it have passed).
    ck(&mut b, "GET foo", "$-1\r\n");
    ck(&mut a, "GET bar", "$-1\r\n");
    ck(&mut b, "DBSIZE", ":2\r\n");
    assert_eq!(info_field(&mut b, b"stats", "expired_keys").parse::<u64>().unwrap(), before);
    ck(&mut a, "CLIENT UNPAUSE", "+OK\r\n");
    ck(&mut b, "GET foo", "$-1\r\n");
    ck(&mut b, "GET bar", "$-1\r\n");
    // (Active expiry may have taken one of them first: either way, counted once each.)
    assert_eq!(info_field(&mut b, b"stats", "expired_keys").parse::<u64>().unwrap(), before + 2);
    ck(&mut b, "DBSIZE", ":0\r\n");
}

#[test]
fn a_skipped_reply_stays_skipped_for_the_held_command() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    ck(&mut a, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    b.send(&[cmd(&[b"CLIENT", b"REPLY", b"SKIP"]), cmd(&[b"SET", b"s", b"1"]), cmd(&[b"GET", b"s"])].concat());
    wait_blocked(&mut a, 1);
    ck(&mut a, "CLIENT UNPAUSE", "+OK\r\n");
    // SET's reply is skipped, GET's is not.
    assert_eq!(read_reply(&mut b), b"$1\r\n1\r\n");
}

#[test]
fn paused_clients_that_go_away_stop_counting() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    let mut c = Raw::connect(t.resp);
    ck(&mut a, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    let idb = client_id(&mut b);
    b.send(&cmd(&[b"SET", b"x", b"1"]));
    c.send(&cmd(&[b"SET", b"y", b"1"]));
    wait_blocked(&mut a, 2);
    // Killed, or disconnected.
    ck(&mut a, &format!("CLIENT KILL ID {idb}"), ":1\r\n");
    drop(c);
    wait_blocked(&mut a, 0);
    // A paused client is not one CLIENT UNBLOCK unblocks (Redis 7.0.15 panics here).
    let mut d = Raw::connect(t.resp);
    let idd = client_id(&mut d);
    d.send(&cmd(&[b"DEL", b"x"]));
    wait_blocked(&mut a, 1);
    ck(&mut a, &format!("CLIENT UNBLOCK {idd}"), ":0\r\n");
    ck(&mut a, "CLIENT UNPAUSE", "+OK\r\n");
    assert_eq!(read_reply(&mut d), b":0\r\n");
    ck(&mut a, "EXISTS x y", ":0\r\n");
}

#[test]
fn memcached_writes_wait_and_reads_run_under_write() {
    let t = start();
    let mut r = Raw::connect(t.resp);
    let mut m = Raw::connect(t.mc);
    let mut m2 = Raw::connect(t.mc);
    m.check(b"set k 0 0 1\r\na\r\n", b"STORED\r\n");
    ck(&mut r, "CLIENT PAUSE 60000 WRITE", "+OK\r\n");
    m.check(b"get k\r\n", b"VALUE k 0 1\r\na\r\nEND\r\n");
    m.check(b"mg k v\r\n", b"VA 1\r\na\r\n");
    m.send(b"set k 0 0 1\r\nb\r\nget k\r\n");
    m2.send(b"incr n 1\r\n");
    wait_blocked(&mut r, 2);
    silent(&mut m);
    ck(&mut r, "GET k", "$1\r\na\r\n");
    ck(&mut r, "CLIENT UNPAUSE", "+OK\r\n");
    assert_eq!(m.read_n(8 + 19), b"STORED\r\nVALUE k 0 1\r\nb\r\nEND\r\n");
    assert_eq!(m2.read_n(11), b"NOT_FOUND\r\n");
    // ALL holds reads too.
    ck(&mut r, "CLIENT PAUSE 300 ALL", "+OK\r\n");
    let started = Instant::now();
    m.check(b"get k\r\n", b"VALUE k 0 1\r\nb\r\nEND\r\n");
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
}
