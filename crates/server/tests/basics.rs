//! The server over real sockets: raw bytes in, exact bytes out.
mod common;
use common::*;

#[test]
fn ping_set_get_pipelined_and_errors() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(b"PING\r\n", b"+PONG\r\n");
    let mut req = cmd(&[b"SET", b"k", b"abc"]);
    req.extend(cmd(&[b"GET", b"k"]));
    req.extend(cmd(&[b"GET", b"missing"]));
    c.check(&req, b"+OK\r\n$3\r\nabc\r\n$-1\r\n");
    c.check(b"FOO a b\r\n", b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n");
    c.check(b"GET\r\n", b"-ERR wrong number of arguments for 'get' command\r\n");
    c.check(b"SELECT 99\r\n", b"-ERR DB index is out of range\r\n");
    c.check(b"*1\r\n$x\r\n", b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(c.closed());
}

#[test]
fn quit_closes_after_ok() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.check(b"QUIT\r\n", b"+OK\r\n");
    assert!(c.closed());
}

/// `--busy-poll-us`: a worker that polls without sleeping after its events still serves
/// every request, pipelined or one at a time, on several connections, and goes back to
/// sleep (a request after a pause is answered too).
#[test]
fn busy_polling_workers_serve_as_usual() {
    let t = start_with(|a| {
        a.busy_poll_us = 200;
        a.threads = Some(2);
    });
    let mut conns: Vec<Raw> = (0..4).map(|_| Raw::connect(t.resp)).collect();
    for round in 0..50 {
        for (i, c) in conns.iter_mut().enumerate() {
            let v = format!("v{round}-{i}");
            c.check(&cmd(&[b"SET", format!("k{i}").as_bytes(), v.as_bytes()]), b"+OK\r\n");
            let mut req = cmd(&[b"GET", format!("k{i}").as_bytes()]);
            req.extend(cmd(&[b"PING"]));
            c.check(&req, format!("${}\r\n{v}\r\n+PONG\r\n", v.len()).as_bytes());
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    conns[0].check(b"PING\r\n", b"+PONG\r\n");
}
