//! WAIT, READONLY, READWRITE, ASKING and LOLWUT over real sockets, with the replies of
//! redis-server 7.0.15 (cluster support disabled, no replicas).
mod common;
use common::*;

use std::time::{Duration, Instant};

#[test]
fn wait_answers_zero_at_once_or_after_its_timeout() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "WAIT 0 0", ":0\r\n");
    ck(&mut c, "WAIT -1 0", ":0\r\n");
    ck(&mut c, "WAIT x 0", "-ERR value is not an integer or out of range\r\n");
    ck(&mut c, "WAIT 1 x", "-ERR timeout is not an integer or out of range\r\n");
    ck(&mut c, "WAIT 1 1.5", "-ERR timeout is not an integer or out of range\r\n");
    ck(&mut c, "WAIT 1 -1", "-ERR timeout is negative\r\n");
    ck(&mut c, "WAIT 1", "-ERR wrong number of arguments for 'wait' command\r\n");
    let t0 = Instant::now();
    ck(&mut c, "WAIT 1 200", ":0\r\n");
    assert!(t0.elapsed() >= Duration::from_millis(190), "{:?}", t0.elapsed());
    // Inside a transaction it does not block.
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "WAIT 1 0", "+QUEUED\r\n");
    ck(&mut c, "EXEC", "*1\r\n:0\r\n");
}

#[test]
fn wait_without_timeout_blocks_until_unblocked() {
    let t = start();
    let (mut w, mut other) = one_per_worker(&t);
    let id = client_id(&mut w);
    w.send(&cmd(&[b"WAIT", b"2", b"0"]));
    wait_blocked(&mut other, 1);
    silent(&mut w);
    ck(&mut other, &format!("CLIENT UNBLOCK {id}"), ":1\r\n");
    w.check(b"", b":0\r\n");
    w.send(&cmd(&[b"WAIT", b"1", b"0"]));
    wait_blocked(&mut other, 1);
    ck(&mut other, &format!("CLIENT UNBLOCK {id} ERROR"), ":1\r\n");
    w.check(b"", b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    ck(&mut w, "PING", "+PONG\r\n");
    // RESP3: the same integer.
    w.send(b"HELLO 3\r\n");
    read_reply(&mut w);
    w.send(&cmd(&[b"WAIT", b"1", b"50"]));
    assert_eq!(read_reply(&mut w), b":0\r\n");
}

#[test]
fn cluster_commands_say_cluster_support_is_disabled() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    for name in ["READONLY", "READWRITE", "ASKING", "readonly"] {
        ck(&mut c, name, "-ERR This instance has cluster support disabled\r\n");
    }
    ck(&mut c, "ASKING x", "-ERR wrong number of arguments for 'asking' command\r\n");
}

#[test]
fn lolwut_is_redis_7_0_15s() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "LOLWUT", "$18\r\nRedis ver. 7.0.15\n\r\n");
    // Versions without art, and arguments they do not read.
    for args in ["LOLWUT VERSION 7", "LOLWUT VERSION 59", "LOLWUT VERSION -1", "LOLWUT 5 6", "LOLWUT VERSION"] {
        ck(&mut c, args, "$18\r\nRedis ver. 7.0.15\n\r\n");
    }
    ck(&mut c, "LOLWUT VERSION x", "-ERR value is not an integer or out of range\r\n");
    ck(&mut c, "LOLWUT VERSION 5 x", "-ERR value is not an integer or out of range\r\n");
    // Schotter: 10 columns of 2 x 3 squares is 7 braille lines, an empty one, the caption.
    let text = String::from_utf8(read_bulk_of(&mut c, &[b"LOLWUT", b"VERSION", b"5", b"10", b"2", b"3"])).unwrap();
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), 10, "{text}");
    assert_eq!(lines[0], "⠀⡤⠤⠤⠤⡤⠤⠤⠤⡄", "the unturned first row");
    assert_eq!(lines[8], "Georg Nees - schotter, plotter on paper, 1968. Redis ver. 7.0.15");
    // The skyline: 5 x 3 pixels, then two lines of dedication.
    let text = String::from_utf8(read_bulk_of(&mut c, &[b"LOLWUT", b"VERSION", b"6", b"5", b"3"])).unwrap();
    let lines: Vec<&str> = text.split('\n').collect();
    assert_eq!(lines.len(), 6, "{text}");
    assert!(lines[..3].iter().all(|l| l.matches("\x1b[0m").count() == 5));
    assert_eq!(lines[4], "Original 8 bit image from Plaguemon by hikikomori. Redis ver. 7.0.15");
    // RESP3: verbatim text.
    c.send(b"HELLO 3\r\n");
    read_reply(&mut c);
    ck(&mut c, "LOLWUT", "=22\r\ntxt:Redis ver. 7.0.15\n\r\n");
}

fn read_bulk_of(c: &mut Raw, args: &[&[u8]]) -> Vec<u8> {
    c.send(&cmd(args));
    let r = read_reply(c);
    let eol = r.windows(2).position(|w| w == b"\r\n").unwrap();
    r[eol + 2..r.len() - 2].to_vec()
}
