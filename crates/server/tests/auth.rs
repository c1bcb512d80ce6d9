//! `requirepass` and AUTH, over real sockets: replies as redis-server 7.0.15 gives them
//! (the suite's unit/auth, whose tests start their own servers and so cannot run against
//! Larder).
mod common;
use common::*;

use std::io::{Read, Write};
use std::time::Duration;

const WRONGPASS: &str = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
const NOAUTH: &str = "-NOAUTH Authentication required.\r\n";

#[test]
fn without_a_password_auth_is_an_error_or_any_password() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "AUTH foo", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n");
    ck(&mut c, "AUTH a b c", "-ERR syntax error\r\n");
    ck(&mut c, "AUTH default anything", "+OK\r\n");
    ck(&mut c, "AUTH someone anything", WRONGPASS);
    ck(&mut c, "CONFIG GET requirepass", "*2\r\n$11\r\nrequirepass\r\n$0\r\n\r\n");
}

#[test]
fn requirepass_refuses_commands_until_auth() {
    let t = start();
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "CONFIG SET requirepass foobar", "+OK\r\n");
    // Connected before the password was set: still authenticated.
    ck(&mut admin, "SET foo 100", "+OK\r\n");
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET foo bar", NOAUTH);
    ck(&mut c, "PING", NOAUTH);
    // Unknown commands and wrong arity are found before the check, as in Redis.
    ck(&mut c, "NOSUCH", "-ERR unknown command 'NOSUCH', with args beginning with: \r\n");
    ck(&mut c, "GET", "-ERR wrong number of arguments for 'get' command\r\n");
    ck(&mut c, "HELLO 3", "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n");
    ck(&mut c, "AUTH wrong!", WRONGPASS);
    ck(&mut c, "AUTH default wrong!", WRONGPASS);
    ck(&mut c, "AUTH other foobar", WRONGPASS);
    ck(&mut c, "AUTH foobar", "+OK\r\n");
    ck(&mut c, "INCR foo", ":101\r\n");
    // RESET puts the connection back in the default user's state: not authenticated.
    ck(&mut c, "RESET", "+RESET\r\n");
    ck(&mut c, "GET foo", NOAUTH);
    ck(&mut c, "AUTH default foobar", "+OK\r\n");
    ck(&mut c, "GET foo", "$3\r\n101\r\n");
    // HELLO ... AUTH authenticates and switches protocol at once.
    let mut h = Raw::connect(t.resp);
    h.send(&cmd(&[b"HELLO", b"3", b"AUTH", b"default", b"foobar"]));
    assert!(read_reply(&mut h).starts_with(b"%7\r\n$6\r\nserver\r\n"));
    ck(&mut h, "GET foo", "$3\r\n101\r\n");
    // Rejections count as Redis counts them.
    let errors = ask(&mut admin, &[b"INFO", b"errorstats"]);
    assert!(errors.contains("errorstat_NOAUTH:count=4\r\n"), "{errors}");
    assert!(errors.contains("errorstat_WRONGPASS:count=3\r\n"), "{errors}");
    let stats = ask(&mut admin, &[b"INFO", b"commandstats"]);
    assert!(
        stats.contains("cmdstat_ping:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0"),
        "{stats}"
    );
    // With the password removed, a client that never authenticated may run commands, but
    // HELLO still wants it authenticated (Redis looks at the connection's own flag).
    let mut late = Raw::connect(t.resp);
    // Accepted (by its worker) while the password is still set.
    ck(&mut late, "PING", NOAUTH);
    admin.check(&cmd(&[b"CONFIG", b"SET", b"requirepass", b""]), b"+OK\r\n");
    ck(&mut late, "GET foo", "$3\r\n101\r\n");
    ck(&mut late, "HELLO 2", "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n");
}

#[test]
fn unauthenticated_clients_send_and_leave_little() {
    let t = start();
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "CONFIG SET requirepass foobar", "+OK\r\n");
    for (req, err) in [
        (&b"*100\r\n"[..], "multibulk"),
        (b"*11\r\n", "multibulk"),
        (b"*1\r\n$100000000\r\n", "bulk"),
        (b"*1\r\n$16385\r\n", "bulk"),
    ] {
        let mut c = Raw::connect(t.resp);
        c.send(req);
        c.check(b"", format!("-ERR Protocol error: unauthenticated {err} length\r\n").as_bytes());
        assert!(c.closed(), "{req:?}");
    }
    // Past proto-max-bulk-len it is the usual error.
    let mut c = Raw::connect(t.resp);
    c.send(b"*1\r\n$600000000\r\n");
    c.check(b"", b"-ERR Protocol error: invalid bulk length\r\n");
    // Limits apply request by request: the AUTH before a large request lifts them.
    let mut c = Raw::connect(t.resp);
    let mut reqs = cmd(&[b"AUTH", b"foobar"]);
    reqs.extend(cmd(&[b"SET", b"big", &vec![b'x'; 20_000]]));
    reqs.extend(cmd(&[b"MSET", b"a", b"1", b"b", b"2", b"c", b"3", b"d", b"4", b"e", b"5"]));
    c.check(&reqs, b"+OK\r\n+OK\r\n+OK\r\n");
    // A client that sends without reading its NOAUTH errors is closed once they pile up.
    let mut c = Raw::connect(t.resp);
    c.s.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
    let chunk = b"SET x 5\r\n".repeat(10_000);
    let mut sent = 0;
    let closed = loop {
        if c.s.write_all(&chunk).is_err() {
            break true;
        }
        sent += chunk.len();
        if sent > 200 << 20 {
            break false;
        }
    };
    assert!(closed, "still open after {sent} bytes of NOAUTH requests");
    let mut rest = Vec::new();
    let _ = c.s.read_to_end(&mut rest);
}

/// With `requirepass` set the memcached port asks for it too, the way memcached's ASCII
/// authentication (`-Y authfile`) does: a `set` whose data is `default <password>`. Replies
/// as memcached 1.6 gives them, one per request (memcached itself loses all but the last
/// reply of a pipeline sent before authenticating).
#[test]
fn requirepass_guards_the_memcached_port() {
    let t = start();
    let mut before = Raw::connect(t.mc);
    before.check(b"set k 0 0 1\r\nv\r\n", b"STORED\r\n");
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "CONFIG SET requirepass foobar", "+OK\r\n");
    // Connected before the password was set: still authenticated, as on the RESP port.
    before.check(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
    let mut c = Raw::connect(t.mc);
    for (req, want) in [
        (&b"get k\r\n"[..], "CLIENT_ERROR unauthenticated"),
        (b"stats\r\n", "CLIENT_ERROR unauthenticated"),
        (b"mg k v\r\n", "CLIENT_ERROR unauthenticated"),
        (b"SET a 0 0 1\r\n", "CLIENT_ERROR unauthenticated"),
        (b"set a 0 0\r\n", "CLIENT_ERROR unauthenticated"),
        (b"set a 0 0 -1\r\n", "CLIENT_ERROR unauthenticated"),
        // The data of a set is the token: a value is no `user password` pair.
        (b"set k 0 0 2\r\nhi\r\n", "CLIENT_ERROR bad authentication token format"),
        (b"set k 0 0 3\r\nabcde", "CLIENT_ERROR bad command line termination"),
        (b"set k 0 0 14\r\ndefault foobaz\r\n", "CLIENT_ERROR authentication failure"),
        (b"set k 0 0 12\r\nother foobar\r\n", "CLIENT_ERROR authentication failure"),
        // Too long for a token: skipped unread, and it fails.
        (&[&b"set k 0 0 5000\r\n"[..], &[b'x'; 5000], b"\r\n"].concat(), "CLIENT_ERROR authentication failure"),
    ] {
        c.check(req, format!("{want}\r\n").as_bytes());
    }
    // Pipelined: every request gets its reply, and what follows the token runs.
    c.check(
        b"get k\r\nset auth 0 0 14 noreply\r\ndefault foobar\r\nget k\r\n",
        b"CLIENT_ERROR unauthenticated\r\nSTORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n",
    );
    let stats = String::from_utf8(ask_mc(&mut c, b"stats\r\n")).unwrap();
    assert!(stats.contains("STAT auth_cmds 4\r\n") && stats.contains("STAT auth_errors 3\r\n"), "{stats}");
    let settings = String::from_utf8(ask_mc(&mut c, b"stats settings\r\n")).unwrap();
    assert!(settings.contains("STAT auth_enabled_ascii yes\r\n"), "{settings}");
    // 2 KiB without a line end: memcached hangs up.
    let mut junk = Raw::connect(t.mc);
    junk.send(&[b'x'; 3000]);
    assert!(junk.closed());
    // Without a password, nothing to ask.
    admin.check(&cmd(&[b"CONFIG", b"SET", b"requirepass", b""]), b"+OK\r\n");
    let mut c = Raw::connect(t.mc);
    c.check(b"get k\r\n", b"VALUE k 0 1\r\nv\r\nEND\r\n");
}

/// A memcached reply up to its `END`.
fn ask_mc(c: &mut Raw, req: &[u8]) -> Vec<u8> {
    c.send(req);
    let mut out = Vec::new();
    while !out.ends_with(b"END\r\n") {
        out.extend(c.read_n(1));
    }
    out
}
