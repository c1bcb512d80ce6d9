//! The network client: per thread, one mio event loop over its connections. Each
//! connection keeps `pipeline` requests in flight: a new request goes out as each reply
//! comes back. Latency is from the moment a request joined the write buffer to the read
//! that completed its reply.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use crate::gen::{Clock, Op, OpGen};
use crate::keys::format_key;
use crate::proto::{self, Kind, Status};
use crate::stats::Stats;
use crate::{Plan, Protocol, Shared};

/// A server that answers nothing for this long fails the run.
const STALL: Duration = Duration::from_secs(15);

struct Pending {
    kind: Kind,
    sent: Instant,
    counted: bool,
}

struct Conn {
    stream: TcpStream,
    rbuf: Vec<u8>,
    wbuf: Vec<u8>,
    wpos: usize,
    writable_wanted: bool,
    pending: VecDeque<Pending>,
    /// Key numbers of the reads in flight, in order (to check RESP replies by position).
    keys: VecDeque<u64>,
    gen: OpGen,
    finished: bool,
    done: bool,
}

fn connect_all(plan: &Plan, t: usize, addr: SocketAddr) -> Result<(Poll, Vec<Conn>), String> {
    let poll = Poll::new().map_err(|e| e.to_string())?;
    let mut conns = Vec::with_capacity(plan.clients);
    let total = (plan.threads * plan.clients) as u64;
    for c in 0..plan.clients {
        let s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))
            .map_err(|e| format!("connect {addr}: {e}"))?;
        s.set_nodelay(true).map_err(|e| e.to_string())?;
        s.set_nonblocking(true).map_err(|e| e.to_string())?;
        let mut stream = TcpStream::from_std(s);
        poll.registry().register(&mut stream, Token(c), Interest::READABLE).map_err(|e| e.to_string())?;
        let g = (t * plan.clients + c) as u64;
        conns.push(Conn {
            stream,
            rbuf: Vec::with_capacity(16 * 1024),
            wbuf: Vec::with_capacity(16 * 1024),
            wpos: 0,
            writable_wanted: false,
            pending: VecDeque::with_capacity(plan.pipeline),
            keys: VecDeque::new(),
            gen: OpGen::new(&plan.gen, g, total),
            finished: false,
            done: false,
        });
    }
    Ok((poll, conns))
}

/// Runs thread `t`'s connections to the end; returns what they measured.
pub fn run_thread(plan: &Plan, shared: &Shared, t: usize, addr: SocketAddr) -> Result<Stats, String> {
    let setup = connect_all(plan, t, addr);
    // Every thread set up (or failed): start together.
    let clock = shared.sync();
    let (mut poll, mut conns) = setup?;
    let mut w = Worker {
        plan,
        clock,
        stats: Stats::new(plan.interval_ms),
        kbuf: Vec::new(),
        ends: Vec::new(),
        kscratch: Vec::new(),
        mscratch: Vec::new(),
    };
    let mut active = conns.len();
    let now = Instant::now();
    for (i, c) in conns.iter_mut().enumerate() {
        w.fill(c, now);
        w.flush(&poll, c, i)?;
        if c.finished && c.pending.is_empty() {
            c.done = true;
            active -= 1;
        }
    }
    let mut events = Events::with_capacity(1024);
    let mut scratch = vec![0u8; 64 * 1024];
    let mut last_progress = Instant::now();
    while active > 0 {
        if shared.stop.load(Ordering::Relaxed) {
            return Err("stopped".into());
        }
        match poll.poll(&mut events, Some(Duration::from_millis(100))) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("poll: {e}")),
        }
        if events.is_empty() {
            if last_progress.elapsed() > STALL {
                return Err(format!("no reply from {addr} for {} s", STALL.as_secs()));
            }
            continue;
        }
        last_progress = Instant::now();
        for ev in events.iter() {
            let i = ev.token().0;
            let c = &mut conns[i];
            if c.done {
                continue;
            }
            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                let mut closed = false;
                loop {
                    match c.stream.read(&mut scratch) {
                        Ok(0) => {
                            closed = true;
                            break;
                        }
                        Ok(n) => {
                            c.rbuf.extend_from_slice(&scratch[..n]);
                            w.stats.bytes_received += n as u64;
                            if n < scratch.len() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(format!("read from {addr}: {e}")),
                    }
                }
                let now = Instant::now();
                let n = w.replies(c, now)?;
                shared.done_ops.fetch_add(n, Ordering::Relaxed);
                if closed && !(c.finished && c.pending.is_empty()) {
                    return Err(format!("{addr} closed the connection with {} replies outstanding", c.pending.len()));
                }
                w.fill(c, now);
            }
            w.flush(&poll, c, i)?;
            if c.finished && c.pending.is_empty() && c.wpos == c.wbuf.len() {
                c.done = true;
                active -= 1;
                let _ = poll.registry().deregister(&mut c.stream);
            }
        }
    }
    Ok(w.stats)
}

struct Worker<'a> {
    plan: &'a Plan,
    clock: Clock,
    stats: Stats,
    /// Keys of the request being built, back to back, and where each ends.
    kbuf: Vec<u8>,
    ends: Vec<usize>,
    kscratch: Vec<u8>,
    mscratch: Vec<(std::ops::Range<usize>, std::ops::Range<usize>)>,
}

impl Worker<'_> {
    /// Issues requests until `pipeline` are in flight or the connection is finished.
    fn fill(&mut self, c: &mut Conn, now: Instant) {
        let plan = self.plan;
        while !c.finished && c.pending.len() < plan.pipeline {
            let Some((op, counted)) = c.gen.next(now, &self.clock) else {
                c.finished = true;
                break;
            };
            let before = c.wbuf.len();
            let kind = match op {
                Op::Set => {
                    let n = c.gen.set_keys.next_key();
                    format_key(&mut self.kbuf, plan.prefix.as_bytes(), n, plan.key_len);
                    let vlen = plan.values.len(&self.kbuf);
                    let (k, values) = (&self.kbuf, &plan.values);
                    match plan.protocol {
                        Protocol::Resp => proto::resp_set(&mut c.wbuf, k, vlen, |o| values.write(k, o)),
                        _ => proto::mc_set(&mut c.wbuf, k, vlen, |o| values.write(k, o)),
                    }
                    Kind::Set
                }
                Op::Get => {
                    self.kbuf.clear();
                    self.ends.clear();
                    let ends = &mut self.ends;
                    for _ in 0..plan.multiget {
                        let n = c.gen.get_keys.next_key();
                        c.keys.push_back(n);
                        format_key(&mut self.kscratch, plan.prefix.as_bytes(), n, plan.key_len);
                        self.kbuf.extend_from_slice(&self.kscratch);
                        ends.push(self.kbuf.len());
                    }
                    let (kb, ends) = (&self.kbuf, &self.ends);
                    let keys = (0..ends.len()).map(|j| &kb[if j == 0 { 0 } else { ends[j - 1] }..ends[j]]);
                    match plan.protocol {
                        Protocol::Resp => proto::resp_get(&mut c.wbuf, keys),
                        _ => proto::mc_get(&mut c.wbuf, keys),
                    }
                    Kind::Get(plan.multiget)
                }
            };
            self.stats.bytes_sent += (c.wbuf.len() - before) as u64;
            c.pending.push_back(Pending { kind, sent: now, counted });
        }
    }

    /// Takes every complete reply off the read buffer; returns how many.
    fn replies(&mut self, c: &mut Conn, now: Instant) -> Result<u64, String> {
        let plan = self.plan;
        let mut pos = 0;
        let mut n = 0;
        while let Some(p) = c.pending.front() {
            let kind = p.kind;
            let buf = &c.rbuf[pos..];
            let nkeys = match kind {
                Kind::Get(k) => k as usize,
                Kind::Set => 0,
            };
            let mut hits = 0u64;
            let (stats, kscratch) = (&mut self.stats, &mut self.kscratch);
            let r = match plan.protocol {
                Protocol::Resp => {
                    let keys = &c.keys;
                    proto::resp_reply(buf, kind, |i, v| {
                        hits += 1;
                        if plan.verify {
                            format_key(kscratch, plan.prefix.as_bytes(), keys[i], plan.key_len);
                            if !plan.values.check(kscratch, v) {
                                stats.verify_failure(kscratch, v);
                            }
                        }
                    })
                }
                _ => proto::mc_reply(buf, kind, &mut self.mscratch, |k, v| {
                    hits += 1;
                    if plan.verify && !plan.values.check(k, v) {
                        stats.verify_failure(k, v);
                    }
                }),
            };
            let Some((used, status)) = r.map_err(|e| format!("{e} (protocol {:?})", plan.protocol))? else { break };
            pos += used;
            n += 1;
            let p = c.pending.pop_front().expect("front exists");
            c.keys.drain(..nkeys);
            if let Status::Error(e) = status {
                self.stats.error(e);
            }
            if p.counted {
                if nkeys > 0 {
                    self.stats.hits += hits;
                    self.stats.misses += nkeys as u64 - hits.min(nkeys as u64);
                }
                let at = now.saturating_duration_since(self.clock.measure_start).as_nanos() as u64;
                self.stats.record(kind, (now - p.sent).as_nanos() as u64, at);
            }
        }
        c.rbuf.drain(..pos);
        Ok(n)
    }

    fn flush(&mut self, poll: &Poll, c: &mut Conn, i: usize) -> Result<(), String> {
        while c.wpos < c.wbuf.len() {
            match c.stream.write(&c.wbuf[c.wpos..]) {
                Ok(0) => return Err("server closed the connection".into()),
                Ok(n) => c.wpos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        if c.wpos == c.wbuf.len() {
            c.wbuf.clear();
            c.wpos = 0;
            if c.writable_wanted {
                c.writable_wanted = false;
                poll.registry().reregister(&mut c.stream, Token(i), Interest::READABLE).map_err(|e| e.to_string())?;
            }
        } else if !c.writable_wanted {
            c.writable_wanted = true;
            poll.registry()
                .reregister(&mut c.stream, Token(i), Interest::READABLE | Interest::WRITABLE)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
