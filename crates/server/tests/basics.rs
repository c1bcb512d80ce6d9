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
    c.check(
        b"SELECT 9223372036854775807\r\n",
        b"-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
    );
    // Unknown commands echo the client's bytes as Redis's '%.128s' does: raw, up to a NUL,
    // arguments while fewer than 128 bytes of them are written (checked against 7.0.15).
    c.check(
        &cmd(&[b"\xff\xfe", b"a\x00b", b"\xc3\xa9"]),
        b"-ERR unknown command '\xff\xfe', with args beginning with: 'a' '\xc3\xa9' \r\n",
    );
    let mut want = b"-ERR unknown command '', with args beginning with: '".to_vec();
    want.extend([b'x'; 128]);
    want.extend(b"' \r\n");
    c.check(&cmd(&[b"", &[b'x'; 200], b"a"]), &want);
    c.check(&cmd(&[b"CLIENT", b"\xff\x00z"]), b"-ERR unknown subcommand '\xff'. Try CLIENT HELP.\r\n");
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

/// CPU time (ticks) of this process's worker threads, from /proc/self/task.
fn worker_cpu_ticks() -> u64 {
    let mut total = 0;
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if !comm.starts_with("larder-worker") {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        let f: Vec<&str> = stat.rsplit_once(')').map_or("", |x| x.1).split_whitespace().collect();
        total += f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    }
    total
}

/// Adaptive polling stops once the unpipelined traffic stops: after a burst of one-at-a-time
/// requests, idle workers use (almost) no CPU. A worker that kept spinning would use a whole
/// core's worth of the half second measured. (A limit of 1 ms rather than the default
/// 50 µs, so that the window surely opens even if this test's client is slow to turn round.)
#[test]
fn polling_workers_go_to_sleep_when_traffic_stops() {
    let t = start_with(|a| {
        a.threads = Some(2);
        a.busy_poll_us = 1000;
    });
    let mut c = Raw::connect(t.resp);
    for _ in 0..2000 {
        c.check(b"PING\r\n", b"+PONG\r\n");
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = worker_cpu_ticks();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let used = worker_cpu_ticks() - before;
    let hz = 100; // USER_HZ on Linux
    assert!(used * 1000 / hz < 100, "idle workers used {} ms of CPU in 500 ms", used * 1000 / hz);
    c.check(b"PING\r\n", b"+PONG\r\n");
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
