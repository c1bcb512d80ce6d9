//! Pub/sub over real sockets: raw bytes in, exact bytes out, in RESP2 and RESP3, with
//! subscribers and publishers on different worker threads.
mod common;
use common::*;

use std::time::{Duration, Instant};

fn message(channel: &str, payload: &str) -> String {
    format!("*3\r\n$7\r\nmessage\r\n${}\r\n{channel}\r\n${}\r\n{payload}\r\n", channel.len(), payload.len())
}

fn numsub(c: &mut Raw, channel: &str) -> String {
    ask(c, &[b"PUBSUB", b"NUMSUB", channel.as_bytes()])
}

#[test]
fn resp2_subscribe_publish_and_the_subscribed_context() {
    let t = start();
    let (mut sub, mut publ) = one_per_worker(&t);
    sub.check(
        &cmd(&[b"SUBSCRIBE", b"a", b"b", b"a"]),
        b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\nb\r\n:2\r\n*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:2\r\n",
    );
    // The publisher is on the other worker.
    publ.check(&cmd(&[b"PUBLISH", b"a", b"hi"]), b":1\r\n");
    sub.check(b"", message("a", "hi").as_bytes());
    publ.check(&cmd(&[b"PUBLISH", b"nobody", b"hi"]), b":0\r\n");
    sub.check(&cmd(&[b"PING"]), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    sub.check(&cmd(&[b"PING", b"x"]), b"*2\r\n$4\r\npong\r\n$1\r\nx\r\n");
    sub.check(
        &cmd(&[b"GET", b"k"]),
        b"-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    sub.check(
        &cmd(&[b"CLIENT", b"LIST"]),
        b"-ERR Can't execute 'client|list': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    sub.check(&cmd(&[b"PSUBSCRIBE", b"a*"]), b"*3\r\n$10\r\npsubscribe\r\n$2\r\na*\r\n:3\r\n");
    // A client subscribed to a channel and a matching pattern gets the message twice.
    publ.check(&cmd(&[b"PUBLISH", b"a", b"m2"]), b":2\r\n");
    sub.check(
        b"",
        format!("{}*4\r\n$8\r\npmessage\r\n$2\r\na*\r\n$1\r\na\r\n$2\r\nm2\r\n", message("a", "m2")).as_bytes(),
    );
    sub.check(&cmd(&[b"PUNSUBSCRIBE"]), b"*3\r\n$12\r\npunsubscribe\r\n$2\r\na*\r\n:2\r\n");
    sub.check(
        &cmd(&[b"UNSUBSCRIBE", b"a", b"zz"]),
        b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$2\r\nzz\r\n:1\r\n",
    );
    sub.check(&cmd(&[b"UNSUBSCRIBE"]), b"*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n");
    // Nothing left: still one reply, with a null channel; and out of the subscribed context.
    sub.check(&cmd(&[b"UNSUBSCRIBE"]), b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
    sub.check(&cmd(&[b"PUNSUBSCRIBE"]), b"*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n");
    sub.check(&cmd(&[b"PING"]), b"+PONG\r\n");
    sub.check(&cmd(&[b"GET", b"k"]), b"$-1\r\n");
    publ.check(&cmd(&[b"PUBLISH", b"a", b"hi"]), b":0\r\n");
}

#[test]
fn resp3_pushes_and_publishing_to_oneself() {
    let t = start();
    let (mut sub, mut publ) = one_per_worker(&t);
    ask(&mut sub, &[b"HELLO", b"3"]);
    sub.check(&cmd(&[b"SUBSCRIBE", b"c"]), b">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n");
    // The message to oneself comes before the PUBLISH reply, as in Redis.
    sub.check(&cmd(&[b"PUBLISH", b"c", b"self"]), b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$4\r\nself\r\n:1\r\n");
    // RESP3 has no subscribed context: every command runs.
    sub.check(&cmd(&[b"GET", b"k"]), b"_\r\n");
    publ.check(&cmd(&[b"PUBLISH", b"c", b"x"]), b":1\r\n");
    sub.check(b"", b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$1\r\nx\r\n");
    sub.check(&cmd(&[b"PSUBSCRIBE", b"c?"]), b">3\r\n$10\r\npsubscribe\r\n$2\r\nc?\r\n:2\r\n");
    publ.check(&cmd(&[b"PUBLISH", b"c1", b"y"]), b":1\r\n");
    sub.check(b"", b">4\r\n$8\r\npmessage\r\n$2\r\nc?\r\n$2\r\nc1\r\n$1\r\ny\r\n");
    sub.check(&cmd(&[b"UNSUBSCRIBE"]), b">3\r\n$11\r\nunsubscribe\r\n$1\r\nc\r\n:1\r\n");
    sub.check(&cmd(&[b"PUNSUBSCRIBE"]), b">3\r\n$12\r\npunsubscribe\r\n$2\r\nc?\r\n:0\r\n");
    sub.check(&cmd(&[b"UNSUBSCRIBE"]), b">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n");
    // Shard channels: their own namespace and count.
    sub.check(&cmd(&[b"SSUBSCRIBE", b"s1"]), b">3\r\n$10\r\nssubscribe\r\n$2\r\ns1\r\n:1\r\n");
    publ.check(&cmd(&[b"PUBLISH", b"s1", b"no"]), b":0\r\n");
    publ.check(&cmd(&[b"SPUBLISH", b"s1", b"yes"]), b":1\r\n");
    sub.check(b"", b">3\r\n$8\r\nsmessage\r\n$2\r\ns1\r\n$3\r\nyes\r\n");
    sub.check(&cmd(&[b"SUNSUBSCRIBE"]), b">3\r\n$12\r\nsunsubscribe\r\n$2\r\ns1\r\n:0\r\n");
}

#[test]
fn pubsub_introspection_and_client_fields() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    let mut c = Raw::connect(t.resp);
    ask(&mut a, &[b"SUBSCRIBE", b"news", b"sport"]);
    ask(&mut a, &[b"SUBSCRIBE", b"sport"]);
    ask(&mut b, &[b"SUBSCRIBE", b"news"]);
    ask(&mut b, &[b"PSUBSCRIBE", b"n*"]);
    ask(&mut a, &[b"PSUBSCRIBE", b"n*", b"x"]);
    c.check(
        &cmd(&[b"PUBSUB", b"NUMSUB", b"news", b"sport", b"none"]),
        b"*6\r\n$4\r\nnews\r\n:2\r\n$5\r\nsport\r\n:1\r\n$4\r\nnone\r\n:0\r\n",
    );
    c.check(&cmd(&[b"PUBSUB", b"NUMPAT"]), b":2\r\n");
    c.check(&cmd(&[b"PUBSUB", b"CHANNELS", b"n*"]), b"*1\r\n$4\r\nnews\r\n");
    let all = ask(&mut c, &[b"PUBSUB", b"CHANNELS"]);
    assert!(all.starts_with("*2\r\n") && all.contains("news") && all.contains("sport"), "{all}");
    c.check(&cmd(&[b"PUBSUB", b"NUMPAT", b"x"]), b"-ERR wrong number of arguments for 'pubsub|numpat' command\r\n");
    c.check(
        &cmd(&[b"PUBSUB", b"channels", b"a", b"b"]),
        b"-ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP.\r\n",
    );
    c.check(&cmd(&[b"PUBSUB", b"nope"]), b"-ERR unknown subcommand 'nope'. Try PUBSUB HELP.\r\n");
    // 2 + 1 subscribers of news, 2 pattern subscribers of n*.
    c.check(&cmd(&[b"PUBLISH", b"news", b"m"]), b":4\r\n");
    let list = ask(&mut c, &[b"CLIENT", b"LIST", b"TYPE", b"pubsub"]);
    assert!(list.contains("sub=2 psub=2 ssub=0") && list.contains("sub=1 psub=1 ssub=0"), "{list}");
    assert!(list.contains("flags=P"), "{list}");
    let info = ask(&mut c, &[b"INFO", b"stats"]);
    assert!(info.contains("pubsub_channels:2\r\n") && info.contains("pubsub_patterns:2\r\n"), "{info}");
    let clients = ask(&mut c, &[b"INFO", b"clients"]);
    assert!(clients.contains("pubsub_clients:2\r\n"), "{clients}");
}

#[test]
fn publish_reaches_many_subscribers_on_every_worker() {
    let t = start();
    let mut subs: Vec<Raw> = Vec::new();
    let mut workers = [0usize; 2];
    for _ in 0..40 {
        let mut s = Raw::connect(t.resp);
        workers[worker_of(&t, &mut s)] += 1;
        ask(&mut s, &[b"SUBSCRIBE", b"fanout"]);
        subs.push(s);
    }
    assert!(workers[0] > 0 && workers[1] > 0, "subscribers on one worker only: {workers:?}");
    let mut p = Raw::connect(t.resp);
    for round in 0..20 {
        let payload = format!("m{round}");
        p.check(&cmd(&[b"PUBLISH", b"fanout", payload.as_bytes()]), b":40\r\n");
    }
    // Each subscriber gets every message, once, in order.
    for s in &mut subs {
        let want: String = (0..20).map(|r| message("fanout", &format!("m{r}"))).collect();
        s.check(b"", want.as_bytes());
    }
}

#[test]
fn reset_and_close_drop_subscriptions() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let mut s = Raw::connect(t.resp);
    ask(&mut s, &[b"SUBSCRIBE", b"ch"]);
    ask(&mut s, &[b"PSUBSCRIBE", b"p*"]);
    s.check(&cmd(&[b"RESET"]), b"+RESET\r\n");
    c.check(&cmd(&[b"PUBSUB", b"NUMSUB", b"ch"]), b"*2\r\n$2\r\nch\r\n:0\r\n");
    c.check(&cmd(&[b"PUBSUB", b"NUMPAT"]), b":0\r\n");
    s.check(&cmd(&[b"GET", b"k"]), b"$-1\r\n");
    ask(&mut s, &[b"SUBSCRIBE", b"ch"]);
    c.check(&cmd(&[b"PUBSUB", b"NUMSUB", b"ch"]), b"*2\r\n$2\r\nch\r\n:1\r\n");
    drop(s);
    let deadline = Instant::now() + Duration::from_secs(5);
    while numsub(&mut c, "ch") != "*2\r\n$2\r\nch\r\n:0\r\n" {
        assert!(Instant::now() < deadline, "closed subscriber still counted");
        std::thread::sleep(Duration::from_millis(10));
    }
    c.check(&cmd(&[b"PUBLISH", b"ch", b"x"]), b":0\r\n");
}

#[test]
fn client_reply_off_does_not_silence_pushes() {
    let t = start();
    let (mut s, mut p) = one_per_worker(&t);
    s.send(&cmd(&[b"CLIENT", b"REPLY", b"OFF"]));
    s.check(&cmd(&[b"SUBSCRIBE", b"ch"]), b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    p.check(&cmd(&[b"PUBLISH", b"ch", b"x"]), b":1\r\n");
    s.check(b"", message("ch", "x").as_bytes());
    // PING is an ordinary reply, silenced.
    s.send(&cmd(&[b"PING"]));
    s.check(&cmd(&[b"UNSUBSCRIBE"]), b"*3\r\n$11\r\nunsubscribe\r\n$2\r\nch\r\n:0\r\n");
}

#[test]
fn slow_subscriber_is_disconnected_past_the_pubsub_hard_limit() {
    let t = start();
    let (mut slow, mut p) = one_per_worker(&t);
    p.check(&cmd(&[b"CONFIG", b"SET", b"client-output-buffer-limit", b"pubsub 256kb 0 0"]), b"+OK\r\n");
    // A small receive buffer so the kernel does not absorb the backlog.
    socket2::SockRef::from(&slow.s).set_recv_buffer_size(4096).unwrap();
    let slow_id = client_id(&mut slow);
    ask(&mut slow, &[b"SUBSCRIBE", b"firehose"]);
    let mut fast = Raw::connect(t.resp);
    ask(&mut fast, &[b"SUBSCRIBE", b"firehose"]);
    let payload = vec![b'x'; 16 * 1024];
    let msg_len = message("firehose", std::str::from_utf8(&payload).unwrap()).len();
    let deadline = Instant::now() + Duration::from_secs(10);
    // Publish until the slow subscriber is cut off (the fast one reads as it goes).
    let mut sent = 0;
    loop {
        let r = ask(&mut p, &[b"PUBLISH", b"firehose", &payload]);
        sent += 1;
        let m = fast.read_n(msg_len);
        assert!(m.len() == msg_len && m.ends_with(b"xxx\r\n"));
        if r == ":1\r\n" {
            break;
        }
        assert_eq!(r, ":2\r\n");
        assert!(Instant::now() < deadline && sent < 100_000, "slow subscriber never disconnected");
    }
    // Well below what would have piled up unbounded: 256 KiB of buffer plus the kernel's.
    assert!(sent < 2000, "took {sent} messages of 16 KiB");
    assert_eq!(numsub(&mut p, "firehose"), "*2\r\n$8\r\nfirehose\r\n:1\r\n");
    // The connection is gone from the server's clients.
    let shared = &t.server.as_ref().unwrap().shared;
    assert!(!shared.clients.lock().unwrap().contains_key(&slow_id));
}

#[test]
fn slow_subscriber_is_disconnected_once_over_the_soft_limit_for_its_seconds() {
    let t = start();
    let (mut slow, mut p) = one_per_worker(&t);
    // No hard limit: only the soft one (64 KiB for more than 1 s) can cut the client off.
    p.check(&cmd(&[b"CONFIG", b"SET", b"client-output-buffer-limit", b"pubsub 0 64kb 1"]), b"+OK\r\n");
    socket2::SockRef::from(&slow.s).set_recv_buffer_size(4096).unwrap();
    ask(&mut slow, &[b"SUBSCRIBE", b"soft"]);
    let payload = vec![b'y'; 16 * 1024];
    // Well past what the kernel's socket buffers absorb.
    for _ in 0..600 {
        let r = ask(&mut p, &[b"PUBLISH", b"soft", &payload]);
        assert!(r == ":1\r\n" || r == ":0\r\n", "{r}");
    }
    std::thread::sleep(Duration::from_millis(2100));
    // The next delivery finds the buffer over the soft limit for more than a second.
    ask(&mut p, &[b"PUBLISH", b"soft", b"last"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while numsub(&mut p, "soft") != "*2\r\n$4\r\nsoft\r\n:0\r\n" {
        assert!(Instant::now() < deadline, "slow subscriber still connected");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A connection owned by worker `w`.
fn on_worker(t: &TestServer, w: usize) -> Raw {
    for _ in 0..200 {
        let mut c = Raw::connect(t.resp);
        if worker_of(t, &mut c) == w {
            return c;
        }
    }
    panic!("no connection reached worker {w}");
}

#[test]
fn messages_for_a_stalled_worker_count_against_the_limit() {
    let t = start();
    let (mut s, mut p) = one_per_worker(&t);
    let ws = worker_of(&t, &mut s);
    let s_id = ask(&mut s, &[b"CLIENT", b"ID"]).trim_start_matches(':').trim_end().parse::<u64>().unwrap();
    let mut z = on_worker(&t, ws);
    p.check(&cmd(&[b"CONFIG", b"SET", b"client-output-buffer-limit", b"pubsub 256kb 0 0"]), b"+OK\r\n");
    ask(&mut s, &[b"SUBSCRIBE", b"stalled"]);
    // The subscriber's worker is busy for a second: nothing leaves its mailbox meanwhile.
    z.send(&cmd(&[b"DEBUG", b"SLEEP", b"1"]));
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let payload = vec![b'z'; 16 * 1024];
    for _ in 0..64 {
        // Counted as a receiver until its worker closes it, as Redis counts a client that is
        // closing asynchronously.
        p.check(&cmd(&[b"PUBLISH", b"stalled", &payload]), b":1\r\n");
    }
    // Cut off at the publisher, while the worker still sleeps: what waits in the mailbox
    // stays under the 256 KiB limit (16 messages), and the client is marked for closing.
    let shared = &t.server.as_ref().unwrap().shared;
    let info = shared.clients.lock().unwrap()[&s_id].clone();
    assert!(started.elapsed() < Duration::from_millis(800), "the worker woke up before the test finished");
    let pending = info.pending.load(std::sync::atomic::Ordering::Relaxed);
    assert!(pending > 0 && pending <= 256 * 1024, "{pending} bytes pending");
    assert!(info.killed.load(std::sync::atomic::Ordering::Relaxed));
    drop(info);
    z.check(b"", b"+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(5);
    while numsub(&mut p, "stalled") != "*2\r\n$7\r\nstalled\r\n:0\r\n" {
        assert!(Instant::now() < deadline, "killed subscriber still subscribed");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// PUNSUBSCRIBE without arguments goes through the patterns in the order they were
/// subscribed (Redis keeps a list per client), each reply with the count left.
#[test]
fn punsubscribe_without_arguments_in_subscription_order() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let pats = ["p5", "p1", "p4", "p2", "p3", "p0", "p9", "p7"];
    let mut want = String::new();
    for (i, p) in pats.iter().enumerate() {
        want += &format!("*3\r\n$10\r\npsubscribe\r\n$2\r\n{p}\r\n:{}\r\n", i + 1);
    }
    ck(&mut c, &format!("PSUBSCRIBE {}", pats.join(" ")), &want);
    let mut want = String::new();
    for (i, p) in pats.iter().enumerate() {
        want += &format!("*3\r\n$12\r\npunsubscribe\r\n$2\r\n{p}\r\n:{}\r\n", pats.len() - 1 - i);
    }
    ck(&mut c, "PUNSUBSCRIBE", &want);
    ck(&mut c, "PUNSUBSCRIBE", "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n");
}

/// A RESP3 client publishing to a channel it is subscribed to under CLIENT REPLY OFF or
/// SKIP still gets the message (a push), but not PUBLISH's count.
#[test]
fn publishing_to_oneself_under_client_reply_off_or_skip() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    c.send(&cmd(&[b"HELLO", b"3"]));
    let _ = read_reply(&mut c);
    ck(&mut c, "SUBSCRIBE n", ">3\r\n$9\r\nsubscribe\r\n$1\r\nn\r\n:1\r\n");
    let push = |m: &str| format!(">3\r\n$7\r\nmessage\r\n$1\r\nn\r\n${}\r\n{m}\r\n", m.len());
    ck(&mut c, "PUBLISH n shown", &(push("shown") + ":1\r\n"));
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"SKIP"]));
    ck(&mut c, "PUBLISH n skipped", &push("skipped"));
    ck(&mut c, "PUBLISH n again", &(push("again") + ":1\r\n"));
    c.send(&cmd(&[b"CLIENT", b"REPLY", b"OFF"]));
    ck(&mut c, "PUBLISH n off", &push("off"));
    ck(&mut c, "SPUBLISH n nobody", "");
    ck(&mut c, "CLIENT REPLY ON", "+OK\r\n");
}
