//! Starts a real server on free loopback ports for a test, and talks raw bytes to it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use larder_server::{Args, Config, Server};

pub struct TestServer {
    pub server: Option<Server>,
    pub resp: u16,
    pub mc: u16,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop();
            s.join();
        }
    }
}

/// Two free ports, distinct from each other and from every port this test process handed
/// out before. The server's listeners use SO_REUSEPORT, so a port picked twice (the kernel
/// may give a just-released port again) would be shared by two listeners, and a RESP
/// client could land on a memcached one.
fn free_ports() -> (u16, u16) {
    static USED: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    loop {
        let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (pa, pb) = (a.local_addr().unwrap().port(), b.local_addr().unwrap().port());
        let mut used = USED.lock().unwrap();
        if !used.contains(&pa) && !used.contains(&pb) {
            used.extend([pa, pb]);
            return (pa, pb);
        }
    }
}

/// A server with 2 workers, both protocols, a small anonymous arena.
pub fn start() -> TestServer {
    start_with(|_| {})
}

pub fn start_with(f: impl Fn(&mut Args)) -> TestServer {
    for _ in 0..20 {
        let (resp, mc) = free_ports();
        let mut args = Args {
            config: None,
            bind: Some("127.0.0.1".into()),
            port: Some(resp),
            memcache_port: Some(mc),
            threads: Some(2),
            shm: None,
            maxclients: None,
            databases: None,
            proto_max_bulk_len: None,
            client_output_buffer_limit: None,
            item_size_max: None,
            capacity: Some(256 << 20),
            ..Default::default()
        };
        f(&mut args);
        let config = Config::load(&args).unwrap();
        if let Ok(server) = Server::start(config) {
            let (resp, mc) = server.ports();
            return TestServer { server: Some(server), resp, mc };
        }
    }
    panic!("could not start a server");
}

/// A raw connection: send bytes, read exactly the expected bytes back.
pub struct Raw {
    pub s: TcpStream,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.set_nodelay(true).unwrap();
        Raw { s }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.s.write_all(bytes).unwrap();
    }

    /// Reads until `n` bytes have arrived (or the peer closes / 5 s pass).
    pub fn read_n(&mut self, n: usize) -> Vec<u8> {
        self.read_n_within(n, Duration::from_secs(5))
    }

    /// Reads until `n` bytes have arrived (or the peer closes / `wait` passes).
    pub fn read_n_within(&mut self, n: usize, wait: Duration) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 65536];
        let deadline = Instant::now() + wait;
        while out.len() < n && Instant::now() < deadline {
            match self.s.read(&mut buf) {
                Ok(0) => break,
                Ok(k) => out.extend_from_slice(&buf[..k]),
                Err(_) => break,
            }
        }
        out
    }

    /// Sends `req` and asserts the exact reply bytes.
    pub fn check(&mut self, req: &[u8], want: &[u8]) {
        self.send(req);
        let got = self.read_n(want.len());
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(want),
            "request {:?}",
            String::from_utf8_lossy(req)
        );
    }

    /// Whether the server closed the connection (reads EOF within a second).
    pub fn closed(&mut self) -> bool {
        self.s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0))
    }
}

/// Encodes a command as a RESP multibulk.
pub fn cmd(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Sends `req` (words split on single spaces) and checks the exact reply bytes.
pub fn ck(c: &mut Raw, req: &str, want: &str) {
    let args: Vec<&[u8]> = req.split(' ').map(str::as_bytes).collect();
    c.check(&cmd(&args), want.as_bytes());
}

pub const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

// ---- blocked clients (list and sorted-set blocking tests) ----

/// Reads one bulk-string reply (INFO).
pub fn read_bulk(r: &mut Raw) -> String {
    let mut got = Vec::new();
    loop {
        if let Some(eol) = got.windows(2).position(|w| w == b"\r\n") {
            let n: usize = String::from_utf8_lossy(&got[1..eol]).parse().unwrap();
            if got.len() >= eol + 2 + n + 2 {
                return String::from_utf8_lossy(&got[eol + 2..eol + 2 + n]).into_owned();
            }
        }
        let b = r.read_n(1);
        assert!(!b.is_empty(), "connection closed");
        got.extend_from_slice(&b);
    }
}

pub fn blocked_clients(r: &mut Raw) -> u64 {
    r.send(&cmd(&[b"INFO", b"clients"]));
    let info = read_bulk(r);
    let line = info.lines().find(|l| l.starts_with("blocked_clients:")).unwrap();
    line["blocked_clients:".len()..].trim().parse().unwrap()
}

/// Waits until the server counts `n` blocked clients (as the Redis suite's
/// `wait_for_blocked_clients_count`).
pub fn wait_blocked(r: &mut Raw, n: u64) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while blocked_clients(r) != n {
        assert!(Instant::now() < deadline, "never reached {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Nothing arrives on `r` for a short while.
pub fn silent(r: &mut Raw) {
    r.s.set_read_timeout(Some(Duration::from_millis(150))).unwrap();
    let mut b = [0u8; 64];
    let got = std::io::Read::read(&mut r.s, &mut b);
    assert!(got.is_err(), "unexpected reply {:?}", got.map(|n| String::from_utf8_lossy(&b[..n]).to_string()));
    r.s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
}

// ---- one reply at a time, and connections on given workers ----

/// Reads exactly one complete reply.
pub fn read_reply(c: &mut Raw) -> Vec<u8> {
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(Some(n)) = larder_resp::reply_len(&buf) {
            assert_eq!(n, buf.len(), "more than one reply: {:?}", String::from_utf8_lossy(&buf));
            return buf;
        }
        assert!(Instant::now() < deadline, "no complete reply: {:?}", String::from_utf8_lossy(&buf));
        let mut tmp = [0u8; 4096];
        match c.s.read(&mut tmp[..1]) {
            Ok(0) => panic!("connection closed after {:?}", String::from_utf8_lossy(&buf)),
            Ok(k) => buf.extend_from_slice(&tmp[..k]),
            Err(e) => panic!("read: {e} after {:?}", String::from_utf8_lossy(&buf)),
        }
    }
}

pub fn ask(c: &mut Raw, args: &[&[u8]]) -> String {
    c.send(&cmd(args));
    String::from_utf8(read_reply(c)).unwrap()
}

pub fn client_id(c: &mut Raw) -> u64 {
    ask(c, &[b"CLIENT", b"ID"]).trim_start_matches(':').trim_end().parse().unwrap()
}

/// The worker thread that owns connection `c`.
pub fn worker_of(t: &TestServer, c: &mut Raw) -> usize {
    let id = client_id(c);
    let shared = &t.server.as_ref().unwrap().shared;
    let clients = shared.clients.lock().unwrap();
    clients[&id].worker
}

/// One connection on each of the two workers (the kernel spreads connections over the
/// workers' listeners; keep connecting until both have one).
pub fn one_per_worker(t: &TestServer) -> (Raw, Raw) {
    let mut by_worker: [Option<Raw>; 2] = [None, None];
    for _ in 0..200 {
        let mut c = Raw::connect(t.resp);
        let w = worker_of(t, &mut c);
        if by_worker[w].is_none() {
            by_worker[w] = Some(c);
        }
        if by_worker.iter().all(|c| c.is_some()) {
            let [a, b] = by_worker;
            return (a.unwrap(), b.unwrap());
        }
    }
    panic!("connections never reached both workers");
}

/// A thread that runs `f` until the guard drops, for tests that race requests against
/// writes: `f` gets the stop flag to poll. Dropping the guard stops and joins the thread
/// (its panic becomes the test's, unless the test is already panicking).
pub struct Background {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub fn background(f: impl FnOnce(&std::sync::atomic::AtomicBool) + Send + 'static) -> Background {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = stop.clone();
    Background { stop, thread: Some(std::thread::spawn(move || f(&flag))) }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let r = t.join();
            if !std::thread::panicking() {
                r.unwrap();
            }
        }
    }
}
