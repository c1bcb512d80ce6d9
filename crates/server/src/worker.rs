//! A worker thread: one mio event loop owning its listeners and connections.
//!
//! Per readable connection: read everything available, execute every complete request in
//! the buffer (pipelining); once every ready connection has been read, write each one's
//! replies at once. Limits: the query buffer (`client-query-buffer-limit`), the output
//! buffer (`client-output-buffer-limit`: the normal class, or the pubsub class for a
//! subscribed client) and `maxclients`; a client over a limit is disconnected, as in Redis.
//!
//! Pipelined requests are parsed up to [`PREFETCH_AHEAD`] at a time before they run, and
//! the index buckets and items of their keys are prefetched together ([`prefetch_keys`]):
//! a lookup is two dependent cache misses, and this way a batch's misses overlap.
//!
//! The worker holds its exec gate ([`crate::gate`]) while it executes the requests of one
//! read; it wakes for its mailbox ([`crate::Mailbox`]): pub/sub messages and MONITOR lines
//! for its connections, and CLIENT KILL sweeps; and when a CLIENT PAUSE ends, to run again the
//! requests it held ([`crate::pause`]).

use std::io::{ErrorKind, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Interest, Poll, Token, Waker};
use rustix::event::epoll::{Event, EventFlags};

use larder_engine::{Handle, PREFETCH_GROUP};
use larder_resp::{Args, Limits, Progress, Protocol, Writer};

use crate::command::{dispatch, first_key_index, lookup_command, Argv, ConnState, Ctx, ReplyMode};
use crate::{ClientInfo, Msg, Proto, Shared};

const RESP_LISTENER: Token = Token(0);
const MC_LISTENER: Token = Token(1);
const WAKER: Token = Token(2);
const FIRST_CONN: usize = 3;

const READ_CHUNK: usize = 16 * 1024;
/// Reads into a connection already holding a READ_CHUNK or more of an unfinished request
/// (a large value arriving) go straight into its buffer, which grows by doubling up to
/// this much at a time: a 1 MB SET in 16 kB reads was 64 system calls.
const BIG_READ_CHUNK: usize = 256 * 1024;

/// How many pipelined requests are parsed ahead and prefetched together: as many keys as
/// one [`Handle::prefetch_group`] takes.
const PREFETCH_AHEAD: usize = PREFETCH_GROUP;

/// A memcached client with this much output unwritten has no more of its requests run until
/// it reads (see [`crate::families::memcache::process`]), as memcached runs none while a
/// client's replies wait: a client that sends `get` after `get` and never reads would
/// otherwise have a whole value buffered per nine bytes it sent. (Redis clients keep Redis's
/// rule instead: everything runs, and `client-output-buffer-limit` closes the connection.)
const MC_HELD_OUTPUT: usize = 1 << 20;

/// Argument storage the parsed-ahead requests keep between reads; a request with more
/// arguments than this gives its storage back once it ran.
const ARGS_KEEP: usize = 1024;

struct Conn {
    stream: TcpStream,
    proto: Proto,
    rbuf: Vec<u8>,
    /// Replies not yet written: `wbuf[wsent..]` (see [`drop_written`]).
    wbuf: Vec<u8>,
    wsent: usize,
    state: ConnState,
    writing: bool,
    /// Since when the output buffer has been over the pubsub class's soft limit.
    soft_since: Option<Instant>,
    /// Blocked in a blocking command: its next requests wait in `rbuf`.
    parked: bool,
    /// Held by CLIENT PAUSE: the held request and the ones after it wait in `rbuf` (see
    /// [`crate::pause`]).
    paused: bool,
    /// The blocking command was run under CLIENT REPLY OFF or SKIP: its reply (served,
    /// timed out, unblocked) is dropped when it comes, as Redis keeps the skip flag on a
    /// blocked client until it is unblocked.
    parked_silent: bool,
    /// How far the unfinished request at the start of `rbuf` has been checked.
    progress: Progress,
    /// memcached: `rbuf` holds this much of a long multiget line without its `\n` (0: no).
    multiget: usize,
    /// memcached: requests wait in `rbuf` until the replies before them are written (see
    /// [`MC_HELD_OUTPUT`]).
    held: bool,
    /// memcached: the socket became readable while `held`, and was left unread, as memcached
    /// reads nothing more from a client that does not read its replies.
    unread: bool,
    /// The read buffer's peak fill since the clients cron last looked (Redis's
    /// `querybuf_peak`, by which the cron cuts the buffer down).
    qbuf_peak: usize,
    /// Redis's reply buffer, which CLIENT LIST shows as `rbs` (its size) and `rbp` (its peak
    /// use): Larder keeps all unsent replies in `wbuf`; Redis keeps the first of them in
    /// that buffer (the rest in a list), which starts at 16 KiB and which its clients cron
    /// resizes by the peak. `reply_peak` is the most bytes waiting to be written seen at a
    /// write (at most `reply_size`) since `reply_reset` (ms since start; None: not yet),
    /// `reply_size` the size the cron gave the buffer: see [`resize_reply_buffer`].
    reply_size: usize,
    reply_peak: usize,
    reply_reset: Option<u64>,
}

/// A listener on `addr` for one worker. Every worker binds its own listener to the same
/// port with SO_REUSEPORT and the kernel spreads connections among them; `first` (the first
/// worker's) makes sure no other process listens there already, since SO_REUSEPORT would
/// let a second server join the port and take a share of its connections, where Redis and
/// memcached fail with "Address already in use".
fn listener(addr: SocketAddr, first: bool) -> std::io::Result<std::net::TcpListener> {
    if first && addr.port() != 0 {
        // A bind without SO_REUSEPORT fails on a port anyone listens on. The probe is
        // closed again before the real listeners bind: a server started in between could
        // still join, but two servers no longer share a port unnoticed.
        let probe = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
        probe.set_reuse_address(true)?;
        probe.bind(&addr.into())?;
    }
    let s = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.set_reuse_port(true)?;
    s.set_nonblocking(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

fn resolve(bind: &str, port: u16) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    let host = if bind.contains(':') && !bind.starts_with('[') { format!("[{bind}]") } else { bind.to_string() };
    format!("{host}:{port}")
        .to_socket_addrs()
        .map_err(|e| format!("bind {bind}: {e}"))?
        .next()
        .ok_or_else(|| format!("bind {bind}: no address"))
}

/// Binds every worker's listeners and starts the workers.
#[allow(clippy::type_complexity)]
pub(crate) fn spawn_all(
    shared: &Arc<Shared>,
) -> Result<(Vec<std::thread::JoinHandle<()>>, Vec<Arc<Waker>>, (u16, u16)), String> {
    let c = &shared.config;
    let mut handles = Vec::new();
    let mut wakers = Vec::new();
    let mut ports = (c.port.load(Ordering::Relaxed), c.memcache_port);
    for i in 0..c.threads {
        let poll = Poll::new().map_err(|e| e.to_string())?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| e.to_string())?);
        let mut resp = None;
        let mut mc = None;
        if ports.0 != 0 {
            let l = listener(resolve(&c.bind, ports.0)?, i == 0).map_err(|e| format!("RESP port {}: {e}", ports.0))?;
            let mut l = TcpListener::from_std(l);
            poll.registry().register(&mut l, RESP_LISTENER, Interest::READABLE).map_err(|e| e.to_string())?;
            resp = Some(l);
        }
        if c.memcache_port != 0 {
            let l =
                listener(resolve(&c.bind, ports.1)?, i == 0).map_err(|e| format!("memcached port {}: {e}", ports.1))?;
            let mut l = TcpListener::from_std(l);
            poll.registry().register(&mut l, MC_LISTENER, Interest::READABLE).map_err(|e| e.to_string())?;
            mc = Some(l);
        }
        if i == 0 {
            ports = (
                resp.as_ref().and_then(|l| l.local_addr().ok()).map_or(0, |a| a.port()),
                mc.as_ref().and_then(|l| l.local_addr().ok()).map_or(0, |a| a.port()),
            );
        }
        let h = shared.store.handle().map_err(|e| e.to_string())?;
        let shared = shared.clone();
        let mut w = Worker {
            id: i,
            poll,
            resp,
            mc,
            conns: Vec::new(),
            free: Vec::new(),
            h,
            shared,
            scratch: vec![0u8; READ_CHUNK].into_boxed_slice(),
            parked: Vec::new(),
            paused: Vec::new(),
            pending: Vec::new(),
            batch: (0..PREFETCH_AHEAD).map(|_| Parsed::default()).collect(),
            round_reads: 0,
            collect_next: larder_engine::monotonic_ns(),
            clients_cron: (larder_engine::monotonic_ns() + CLIENTS_CRON_EVERY, 0),
        };
        handles.push(
            std::thread::Builder::new()
                .name(format!("larder-worker-{i}"))
                .spawn(move || w.run())
                .map_err(|e| e.to_string())?,
        );
        wakers.push(waker);
    }
    Ok((handles, wakers, ports))
}

/// CONFIG SET port: listens on `port` (0: not at all) in place of the RESP port in use.
/// Every worker's new listener is bound first, so a port that cannot be had changes
/// nothing; then the config says the new port and each worker gets its listener through
/// its mailbox ([`Msg::Listen`]), dropping the old one (connections still in the old
/// port's accept queue are refused, as Redis's `changeListenPort` leaves them).
pub(crate) fn change_resp_port(shared: &Shared, port: u16) -> Result<(), String> {
    // Two changes at once on two workers must not leave listeners and config apart.
    static CHANGING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = CHANGING.lock().unwrap_or_else(|e| e.into_inner());
    let c = &shared.config;
    // SO_REUSEPORT would let the RESP listeners share the memcached port.
    if port != 0 && port == c.memcache_port {
        return Err(format!("port {port} is the memcached port"));
    }
    let mut new = Vec::with_capacity(c.threads);
    for w in 0..c.threads {
        new.push(if port == 0 {
            None
        } else {
            Some(listener(resolve(&c.bind, port)?, w == 0).map_err(|e| e.to_string())?)
        });
    }
    c.port.store(port, Ordering::Relaxed);
    for (w, resp) in new.into_iter().enumerate() {
        shared.send(w, [Msg::Listen { resp }]);
    }
    Ok(())
}

struct Worker {
    id: usize,
    poll: Poll,
    resp: Option<TcpListener>,
    mc: Option<TcpListener>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    h: Handle,
    shared: Arc<Shared>,
    /// Where small reads land before they are appended to a connection's buffer (zeroed
    /// once: growing the connection buffer and zeroing its spare room on every read was 14%
    /// of the CPU of a pipelined GET load).
    scratch: Box<[u8]>,
    /// Connections parked in a blocking command, in the order they blocked: (slot, client
    /// id, deadline).
    parked: Vec<(usize, u64, Option<std::time::Instant>)>,
    /// Connections held by CLIENT PAUSE, in the order they were held: (slot, client id,
    /// the pause generation they wait at).
    paused: Vec<(usize, u64, u64)>,
    /// Connections whose replies go out once every event of this round is handled (as
    /// Redis's `clients_pending_write`, flushed before it sleeps).
    pending: Vec<usize>,
    /// The requests of one read parsed ahead of running them ([`parse_ahead`]), so that
    /// their keys are prefetched together.
    batch: Vec<Parsed>,
    /// Connections read in this round of events.
    round_reads: u64,
    /// When this worker may next collect retired memory while busy (see `run`; a deadline,
    /// compared once a round).
    collect_next: u64,
    /// When [`Worker::clients_cron`] runs next (a deadline: one comparison a round, where a
    /// `duration_since` was 20 instructions), and the slot it goes on from. Times here are
    /// [`larder_engine::monotonic_ns`]'s.
    clients_cron: (u64, usize),
}

/// How often a worker looks at some of its connections' read buffers (Redis's
/// `clientsCron` at the default `hz 10`).
const CLIENTS_CRON_EVERY: u64 = 100_000_000; // ns

/// Output a client that has not authenticated (while the default user needs a password)
/// may leave unread.
const UNAUTH_OUTPUT_LIMIT: u64 = 16 * 1024 + 1024;

/// What a client that has not authenticated may send (Redis's limits in
/// `processMultibulkBuffer`): at most 10 arguments, each at most 16 KiB.
const UNAUTH_MULTIBULK: u64 = 10;
const UNAUTH_BULK: u64 = 16384;

/// How often a busy worker that holds retired memory collects it (and, when free large
/// runs are still resident, gives back those free for long enough). An idle one collects
/// whenever a poll times out; a busy one with only reads to do would otherwise never
/// free what its last writes retired (a deleted 100 MB value, say). Each collect moves the
/// epoch on at most once and a block needs two moves, so memory comes back in two or three
/// of these.
const BUSY_COLLECT_EVERY: u64 = 10_000_000; // ns

/// One request parsed ahead of running it: its arguments (relative to its own start), its
/// length in the buffer, and its command's table index once looked up.
#[derive(Default)]
struct Parsed {
    args: Args,
    len: usize,
    cmd: Option<usize>,
}

/// Waits for the events of `poll` (registered through mio: edge-triggered, the token in the
/// data word) as mio's `Poll::poll` does, but with the system call itself: mio calls libc's
/// `epoll_wait`, a thread cancellation point, and marking that on and off cost 30
/// instructions a call, more than the rest of the wait (under callgrind).
fn wait(poll: &Poll, events: &mut Vec<Event>, timeout: Duration) -> std::io::Result<()> {
    use std::os::fd::AsFd;
    events.clear();
    // (rustix rounds the timeout up to whole milliseconds, as mio does.)
    let timeout = rustix::time::Timespec::try_from(timeout).map_err(std::io::Error::other)?;
    // The registry's descriptor is the poll's epoll instance.
    rustix::event::epoll::wait(poll.registry().as_fd(), rustix::buffer::spare_capacity(events), Some(&timeout))?;
    Ok(())
}

/// Polling without sleeping, for unpipelined clients (`--busy-poll-us`).
///
/// A client that sends one request and waits for the reply before the next finds this thread
/// asleep every time unless it polls, and each request then pays a wake-up (several µs in a
/// VM, more than the request itself). So after a round whose reads carried about one request
/// each, the worker polls for up to `window` before it sleeps. The window adapts as KVM adapts
/// halt-polling: when the next event came within `max` of the round's end, a longer window
/// would have caught it (or did), so the window doubles; when it took longer, the traffic is
/// sparse and polling was waste, so the window halves. Pipelined rounds never poll: their
/// clients keep the worker busy, and a spin there would only add CPU per request. An idle
/// server does not poll at all.
/// Times in nanoseconds (of [`larder_engine::monotonic_ns`]): this is compared every round.
struct Spin {
    max: u64,
    window: u64,
}

impl Spin {
    const MIN: u64 = 4_000;

    fn new(max: Duration) -> Spin {
        Spin { max: max.as_nanos() as u64, window: 0 }
    }

    /// Whether a round of `reads` reads and `requests` requests was unpipelined traffic.
    fn unpipelined(reads: u64, requests: u64) -> bool {
        reads > 0 && requests <= reads + reads / 2
    }

    /// After an unpipelined round, the next event came (or the poll timed out) after `wait`,
    /// and the poll of the current window had not found it.
    fn waited(&mut self, wait: u64) {
        if wait < self.max {
            self.window = (self.window * 2).max(Self::MIN).min(self.max);
        } else {
            self.window /= 2;
            if self.window < Self::MIN {
                self.window = 0;
            }
        }
    }
}

impl Worker {
    fn run(&mut self) {
        let mut events: Vec<Event> = Vec::with_capacity(1024);
        let mut spin = Spin::new(self.shared.config.busy_poll);
        // Whether the last round's reads carried about one request each (see Spin).
        let mut unpipelined = false;
        while !self.shared.shutdown.load(Ordering::Relaxed) {
            let timeout = self.poll_timeout();
            let waiting = larder_engine::monotonic_ns();
            let mut found = false;
            if unpipelined && spin.window != 0 {
                let until = waiting + spin.window;
                loop {
                    if wait(&self.poll, &mut events, Duration::ZERO).is_ok() && !events.is_empty() {
                        found = true;
                        break;
                    }
                    if larder_engine::monotonic_ns() >= until {
                        break;
                    }
                    // Let a client that shares this core run: it is what we are waiting for.
                    std::thread::yield_now();
                }
            }
            if !found {
                if let Err(e) = wait(&self.poll, &mut events, timeout) {
                    if e.kind() != ErrorKind::Interrupted {
                        tracing::error!("poll: {e}");
                        return;
                    }
                }
                if unpipelined {
                    spin.waited(larder_engine::monotonic_ns().saturating_sub(waiting));
                }
            }
            let commands = self.shared.stats.worker(self.id).commands.total();
            self.round_reads = 0;
            // What the engine records for keyspace notifications follows a CONFIG SET on
            // another worker from the next round on.
            crate::notify::sync_worker(&self.h, &self.shared, self.id);
            // While clients track, the mailbox first: an invalidation posted before another
            // client's reply went out reaches its connection before the reply to anything
            // that connection sent after that, as in Redis, where it is in the connection's
            // buffer already. (Nothing to load while nobody tracks: the handle's flag.)
            if self.h.reporting().modified && self.shared.mailboxes[self.id].posted.load(Ordering::Relaxed) {
                self.on_wake();
            }
            for &ev in &events {
                let flags = ev.flags;
                match Token(ev.data.u64() as usize) {
                    RESP_LISTENER => self.accept(Proto::Resp),
                    MC_LISTENER => self.accept(Proto::Memcache),
                    WAKER => {
                        self.on_wake();
                        self.wake_parked();
                    }
                    Token(t) => {
                        let i = t - FIRST_CONN;
                        // As mio reads the flags: closed for reading on a hangup, or on
                        // input with the peer's FIN (RDHUP).
                        let read_closed =
                            flags.contains(EventFlags::HUP) || flags.contains(EventFlags::IN | EventFlags::RDHUP);
                        if flags.intersects(EventFlags::IN | EventFlags::PRI | EventFlags::ERR) || read_closed {
                            self.on_readable(i, read_closed);
                        }
                        if flags.contains(EventFlags::OUT) {
                            self.flush(i);
                        }
                    }
                }
            }
            // The BCAST invalidations this round's commands noted, before the replies go out
            // (Redis's beforeSleep). Only while the handle reports changed keys: no load
            // otherwise.
            if self.h.reporting().modified {
                crate::tracking::broadcast_due(&self.shared, self.id);
            }
            // Replies are written after every read of the round, back to back: a client
            // waiting on several connections is then woken once for all of them rather
            // than once per reply, and finds more of them ready when it looks.
            for k in 0..self.pending.len() {
                let i = self.pending[k];
                self.flush(i);
            }
            self.pending.clear();
            if !self.parked.is_empty() {
                let now = std::time::Instant::now();
                if self.parked.iter().any(|p| p.2.is_some_and(|d| d <= now)) {
                    self.settle_parked(true);
                }
            }
            if !self.paused.is_empty() {
                self.resume_paused();
            }
            // Keyspace notifications of what memcached requests expired or created.
            if self.h.has_changes() {
                crate::notify::flush_detached(&self.shared, &self.h);
            }
            // Expired keys this worker's reads and writes deleted, into INFO's count.
            let expired = self.h.take_expired();
            if expired > 0 {
                self.shared.stats.worker(self.id).expired_keys.add(expired);
            }
            let requests = self.shared.stats.worker(self.id).commands.total() - commands;
            unpipelined = Spin::unpipelined(self.round_reads, requests);
            if waiting >= self.clients_cron.0 {
                self.clients_cron.0 = waiting + CLIENTS_CRON_EVERY;
                self.clients_cron();
                // The free blocks cached for this worker's next allocations go to the shared
                // stacks: cached, they would keep their pages from the background thread's
                // release (63 random blocks of a class pin most of 50 pages after a FLUSHALL),
                // and a worker with a request every few ms is never idle. Refilling costs a
                // pop per class in use.
                let _ = self.h.flush_free_lists();
            }
            // Let idle periods return memory: reclaim what readers no longer see.
            if events.is_empty() {
                let _ = self.h.collect();
                self.sweep_killed();
                self.sweep_idle();
            } else if waiting >= self.collect_next && self.h.has_memory_to_return() {
                let _ = self.h.collect();
                self.collect_next = waiting + BUSY_COLLECT_EVERY;
            }
        }
        // Shutting down: close every connection.
        for i in 0..self.conns.len() {
            self.close(i);
        }
    }

    fn accept(&mut self, proto: Proto) {
        loop {
            let l = match proto {
                Proto::Resp => self.resp.as_ref(),
                Proto::Memcache => self.mc.as_ref(),
            };
            let Some(l) = l else { return };
            let (mut stream, addr) = match l.accept() {
                Ok(x) => x,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                // A connection reset before we took it, or a signal: the queue may still hold
                // others, and the edge-triggered listener will not say so again.
                Err(e) if matches!(e.kind(), ErrorKind::ConnectionAborted | ErrorKind::Interrupted) => continue,
                Err(e) => {
                    // Out of descriptors or memory: the connections wait in the queue until
                    // the next one arrives (as in Redis, which also just logs).
                    tracing::warn!("accept: {e}");
                    return;
                }
            };
            let ws = self.shared.stats.worker(self.id);
            let max = self.shared.config.maxclients.load(Ordering::Relaxed);
            // Counted first and given back if over: a load, then an add, would let each
            // worker accept one more at the limit.
            if self.shared.connected.fetch_add(1, Ordering::Relaxed) >= max {
                self.shared.connected.fetch_sub(1, Ordering::Relaxed);
                ws.rejected_connections.incr();
                let msg: &[u8] = match proto {
                    Proto::Resp => b"-ERR max number of clients reached\r\n",
                    Proto::Memcache => b"SERVER_ERROR Too many open connections\r\n",
                };
                let _ = stream.write(msg);
                continue;
            }
            ws.connections.incr();
            let _ = stream.set_nodelay(true);
            let id = self.shared.next_client_id.fetch_add(1, Ordering::Relaxed);
            let laddr = stream.local_addr().map(|a| a.to_string()).unwrap_or_default();
            let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
            let slot = match self.free.pop() {
                Some(s) => s,
                None => {
                    self.conns.push(None);
                    self.conns.len() - 1
                }
            };
            let info = Arc::new(ClientInfo::new(
                id,
                addr.to_string(),
                laddr,
                proto,
                self.id,
                slot as u32,
                fd,
                self.shared.uptime_ms(),
            ));
            self.shared.clients.lock().unwrap_or_else(|e| e.into_inner()).insert(id, info.clone());
            if self.poll.registry().register(&mut stream, Token(slot + FIRST_CONN), Interest::READABLE).is_err() {
                self.free.push(slot);
                self.forget(&info);
                continue;
            }
            self.conns[slot] = Some(Conn {
                stream,
                proto,
                rbuf: Vec::new(),
                wbuf: Vec::new(),
                wsent: 0,
                state: ConnState {
                    // Redis's `clientSetDefaultAuth`: a default user that is on with
                    // `nopass` needs no AUTH.
                    authenticated: self.shared.acl.default.is_free(),
                    ..ConnState::new(id, slot as u32, info, self.shared.acl.default.clone())
                },
                writing: false,
                soft_since: None,
                parked: false,
                paused: false,
                parked_silent: false,
                progress: Progress::default(),
                multiget: 0,
                held: false,
                unread: false,
                qbuf_peak: 0,
                // As Redis makes a client: a 16 KiB buffer, its peak at that size.
                reply_size: REPLY_CHUNK,
                reply_peak: REPLY_CHUNK,
                reply_reset: None,
            });
        }
    }

    fn forget(&self, info: &ClientInfo) {
        self.shared.forget_client(info);
    }

    fn close(&mut self, i: usize) {
        if let Some(Some(mut c)) = self.conns.get_mut(i).map(|c| c.take()) {
            if c.parked {
                crate::blocking::leave(&self.shared, c.state.id);
                self.parked.retain(|p| p.0 != i);
            }
            if c.paused {
                self.shared.pause.postponed.fetch_sub(1, Ordering::Relaxed);
                self.paused.retain(|p| p.0 != i);
            }
            let _ = self.poll.registry().deregister(&mut c.stream);
            crate::families::pubsub::forget(&self.shared, &mut c.state);
            crate::families::multi::unwatch_all(&self.shared, &mut c.state);
            crate::tracking::disable(&self.shared, &mut c.state);
            self.shared.monitors.leave(&c.state.info);
            self.forget(&c.state.info);
            self.free.push(i);
        }
    }

    /// Reads what arrived on connection `i` and runs its complete requests. `read_closed`:
    /// the event says the peer shut down its side (its FIN may have come with the data).
    fn on_readable(&mut self, i: usize, read_closed: bool) {
        self.round_reads += 1;
        let limit = self.shared.config.client_query_buffer_limit.load(Ordering::Relaxed) as usize;
        let ws = self.shared.stats.worker(self.id);
        let small = &mut self.scratch;
        let Some(Some(c)) = self.conns.get_mut(i) else { return };
        if c.held {
            // Left in the socket until the client reads its replies (see `flush`): what it
            // sends meanwhile must not pile up here, up to client-query-buffer-limit each.
            c.unread = true;
            return;
        }
        let mut eof = false;
        loop {
            let (asked, got) = if c.rbuf.len() < READ_CHUNK {
                // Small requests: read into the worker's scratch buffer and append what
                // arrived, so that an idle connection's buffer stays as small as its
                // requests.
                (
                    small.len(),
                    rustix::io::read(&c.stream, &mut small[..])
                        .map_err(std::io::Error::from)
                        .inspect(|&n| c.rbuf.extend_from_slice(&small[..n])),
                )
            } else {
                // A large request arriving: read straight into the buffer's spare room (no
                // zeroing, no second copy of the value), growing it by doubling up to
                // BIG_READ_CHUNK at a time.
                c.rbuf.reserve(c.rbuf.len().min(BIG_READ_CHUNK));
                let asked = c.rbuf.capacity() - c.rbuf.len();
                (
                    asked,
                    rustix::io::read(&c.stream, rustix::buffer::spare_capacity(&mut c.rbuf))
                        .map_err(std::io::Error::from),
                )
            };
            match got {
                Ok(0) => {
                    eof = true;
                    break;
                }
                Ok(n) => {
                    ws.net_input.add(n as u64);
                    ws.reads.incr();
                    if c.rbuf.len() > limit {
                        tracing::warn!(client = c.state.id, "closing client that reached max query buffer length");
                        self.close(i);
                        return;
                    }
                    if n < asked && !read_closed {
                        // A short read emptied the socket. Linux's epoll signals every new
                        // arrival even in edge-triggered mode, so skipping the read that
                        // would only say EAGAIN is safe, and saves a syscall per request.
                        // Not when the peer's FIN came with the data: that read says EOF,
                        // and no later event would (the connection stayed in CLOSE-WAIT).
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    break;
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => {
                    self.close(i);
                    return;
                }
            }
        }
        c.state.info.rbuf_cap.store(c.rbuf.capacity() as u64, Ordering::Relaxed);
        c.qbuf_peak = c.qbuf_peak.max(c.rbuf.len());
        self.process(i);
        if eof {
            // Replies to what the peer sent before closing still go out if they can.
            self.flush(i);
            self.close(i);
            return;
        }
        self.pending.push(i);
    }

    /// Executes every complete request in the read buffer, up to a command that blocks or
    /// that CLIENT PAUSE holds.
    fn process(&mut self, i: usize) {
        if let Some(held) = self.process_until_held(i) {
            self.hold(i, held);
        }
    }

    /// Connection `i` stopped at a blocking command or one CLIENT PAUSE held.
    #[cold]
    fn hold(&mut self, i: usize, held: Held) {
        let Some(Some(c)) = self.conns.get_mut(i) else { return };
        match held {
            Held::Parked(deadline) => {
                c.parked = true;
                self.parked.push((i, c.state.id, deadline));
            }
            Held::Postponed(generation, len) => {
                // CLIENT LIST's qbuf, as Redis's, no longer counts the held request (Redis
                // parsed it out of its query buffer).
                c.state.info.qbuf.store(c.rbuf.len().saturating_sub(len) as u64, Ordering::Relaxed);
                c.paused = true;
                c.state.info.blocked.store(true, Ordering::Relaxed);
                self.shared.pause.postponed.fetch_add(1, Ordering::Relaxed);
                self.paused.push((i, c.state.id, generation));
            }
        }
    }

    /// Runs requests until the buffer is consumed (None) or a command parked the client or
    /// was held by CLIENT PAUSE.
    fn process_until_held(&mut self, i: usize) -> Option<Held> {
        let Some(Some(c)) = self.conns.get_mut(i) else { return None };
        if c.parked || c.paused {
            // A blocked or paused client's next commands wait in its buffer, as in Redis.
            return None;
        }
        // Holding the worker's exec gate (an EXEC on another worker waits for the batch to
        // end, and the batch for the EXEC).
        let _gate = self.shared.gates[self.id].hold();
        // Changed keys are reported while anyone tracks (one relaxed load while nobody does).
        crate::tracking::sync_worker(&self.h, &self.shared);
        c.state.clock = larder_engine::monotonic_ns();
        c.state.info.last_ms.store(self.shared.uptime_ms_at(c.state.clock), Ordering::Relaxed);
        let (pos, held) = match c.proto {
            Proto::Resp => run_resp(c, &mut self.batch, &mut self.h, &self.shared, self.id),
            Proto::Memcache => {
                let pos = run_memcache(c, &mut self.h, &self.shared, self.id);
                // Invalidations of the keys the requests changed (memcached clients do not
                // track: nothing waits for their replies).
                if self.h.has_modified() {
                    crate::tracking::flush_detached(&self.shared, &self.h, self.id);
                }
                (pos, c.state.postponed.take().map(|g| Held::Postponed(g, 0)))
            }
        };
        c.rbuf.drain(..pos.min(c.rbuf.len()));
        c.state.info.qbuf.store(c.rbuf.len() as u64, Ordering::Relaxed);
        if c.state.info.killed.load(Ordering::Relaxed) {
            c.state.close = true;
        }
        held
    }

    /// Runs again the clients CLIENT PAUSE held, once the pause they wait at has been
    /// lifted or loosened (UNPAUSE, its deadline), in the order they were held. A command
    /// a newer pause covers is held again.
    fn resume_paused(&mut self) {
        let pause = &self.shared.pause;
        if pause.refresh(&self.shared.store, larder_engine::now_ms() as i64) {
            self.shared.wake_workers();
        }
        let generation = pause.generation();
        if self.paused.iter().all(|p| p.2 == generation) {
            return;
        }
        let (go, stay): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.paused).into_iter().partition(|p| p.2 != generation);
        self.paused = stay;
        for (slot, id, _) in go {
            let Some(Some(c)) = self.conns.get_mut(slot) else { continue };
            if c.state.id != id {
                continue;
            }
            c.paused = false;
            c.state.info.blocked.store(false, Ordering::Relaxed);
            self.shared.pause.postponed.fetch_sub(1, Ordering::Relaxed);
            self.process(slot);
            self.flush(slot);
        }
    }

    /// Woken: parked clients may have been served by another worker (their replies wait
    /// in the registry), or the watcher asks for their keys to be retried (another process
    /// pushed, or its sweep): retry if asked, then send what was served.
    fn wake_parked(&mut self) {
        let retry = self.shared.mailboxes[self.id].retry_parked.swap(0, Ordering::AcqRel);
        if self.parked.is_empty() {
            return;
        }
        if retry != 0 {
            let ids: Vec<u64> = self.parked.iter().map(|p| p.1).collect();
            // Serving pops and pushes: not in the middle of another worker's EXEC, and for
            // the sweep not in the middle of any worker's batch (see RETRY_SWEEP).
            let shared = &*self.shared;
            let _gate = shared.gates[self.id].hold();
            let _all = (retry & crate::blocking::RETRY_SWEEP != 0)
                .then(|| crate::gate::Exclusive::enter(&shared.gates, &shared.exec_lock, self.id));
            crate::tracking::sync_worker(&self.h, shared);
            crate::blocking::retry(&mut self.h, shared, self.id, &ids);
        }
        self.settle_parked(false);
    }

    /// Sends the replies of served parked clients (and, with `expire`, the nulls of those
    /// whose deadline passed), and runs what they sent meanwhile.
    fn settle_parked(&mut self, expire: bool) {
        let now = std::time::Instant::now();
        let mut k = 0;
        while k < self.parked.len() {
            let (slot, id, _) = self.parked[k];
            let r = if expire {
                crate::blocking::expire(&self.shared, id, now)
            } else {
                crate::blocking::take_reply(&self.shared, id)
            };
            let Some(reply) = r else {
                k += 1;
                continue;
            };
            self.parked.remove(k);
            if let Some(Some(c)) = self.conns.get_mut(slot) {
                c.parked = false;
                if !c.parked_silent {
                    c.wbuf.extend_from_slice(&reply);
                }
            }
            self.process(slot);
            self.flush(slot);
        }
    }

    /// How long to wait for events: 100 ms, or less if a parked client's deadline, or the
    /// end of the pause that holds clients here, is nearer.
    fn poll_timeout(&self) -> Duration {
        let mut t = Duration::from_millis(100);
        if !self.parked.is_empty() {
            let now = std::time::Instant::now();
            for d in self.parked.iter().filter_map(|p| p.2) {
                t = t.min(d.saturating_duration_since(now));
            }
        }
        if !self.paused.is_empty() {
            if let Some(left) = self.shared.pause.remaining(larder_engine::now_ms() as i64) {
                t = t.min(left);
            }
        }
        t
    }

    /// Writes what connection `i` has to send, and runs the memcached requests that waited
    /// for it to go out (see [`MC_HELD_OUTPUT`]).
    fn flush(&mut self, i: usize) {
        self.write_out(i);
        while matches!(self.conns.get(i), Some(Some(c)) if c.held && c.wbuf.len() - c.wsent < MC_HELD_OUTPUT) {
            self.process(i);
            self.write_out(i);
        }
        // Input left in the socket while the output was held back is read now: epoll
        // (edge-triggered) will not announce it again. Read to the end of what is there,
        // as after a FIN, since one short read does not say it was all.
        if let Some(Some(c)) = self.conns.get_mut(i) {
            if c.unread && !c.held {
                c.unread = false;
                self.on_readable(i, true);
            }
        }
    }

    fn write_out(&mut self, i: usize) {
        let ws = self.shared.stats.worker(self.id);
        let Some(Some(c)) = self.conns.get_mut(i) else { return };
        if c.wbuf.len() - c.wsent > c.reply_peak {
            reply_peak(c);
        }
        // The limits are checked before anything is written, as Redis checks them when a
        // reply is added: a client whose replies pass the hard limit gets none of them.
        if over_output_limit(&self.shared, c) {
            self.close(i);
            return;
        }
        let mut written = 0;
        while c.wsent + written < c.wbuf.len() {
            // rustix's send is the system call itself; std's (libc's) `send` is a thread
            // cancellation point, and marking that on and off cost more than the call's
            // own user-space part (22 instructions each way, under callgrind).
            match rustix::net::send(&c.stream, &c.wbuf[c.wsent + written..], rustix::net::SendFlags::NOSIGNAL) {
                Ok(0) => break,
                Ok(n) => written += n,
                Err(rustix::io::Errno::AGAIN) => break,
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => {
                    self.close(i);
                    return;
                }
            }
        }
        if written > 0 {
            ws.net_output.add(written as u64);
            ws.writes.incr();
        }
        c.wsent = drop_written(&mut c.wbuf, c.wsent + written);
        c.state.info.obuf.store((c.wbuf.len() - c.wsent) as u64, Ordering::Relaxed);
        if c.wbuf.is_empty() {
            if c.state.close {
                self.close(i);
                return;
            }
            if c.writing {
                c.writing = false;
                let _ = self.poll.registry().reregister(&mut c.stream, Token(i + FIRST_CONN), Interest::READABLE);
            }
        } else if !c.writing {
            c.writing = true;
            let _ = self.poll.registry().reregister(
                &mut c.stream,
                Token(i + FIRST_CONN),
                Interest::READABLE | Interest::WRITABLE,
            );
        }
        if c.wbuf.capacity() > 1 << 20 && c.wbuf.is_empty() {
            c.wbuf = Vec::new();
        }
        if c.rbuf.capacity() > 1 << 20 && c.rbuf.is_empty() {
            c.rbuf = Vec::new();
        }
        // Recorded after the buffers given back above: CLIENT LIST's qbuf-free and tot-mem
        // (and INFO's mem_clients_normal) showed a buffer dropped after a large request for
        // as long as the client stayed quiet.
        let info = &c.state.info;
        info.rbuf_cap.store(c.rbuf.capacity() as u64, Ordering::Relaxed);
        info.mem.store((c.rbuf.capacity() + c.wbuf.capacity() + std::mem::size_of::<Conn>()) as u64, Ordering::Relaxed);
    }

    /// The mailbox: sweep killed clients if asked, then deliver messages to connections.
    fn on_wake(&mut self) {
        let mb = &self.shared.mailboxes[self.id];
        if mb.sweep.swap(false, Ordering::AcqRel) {
            self.sweep_killed();
        }
        let mb = &self.shared.mailboxes[self.id];
        mb.posted.store(false, Ordering::Relaxed);
        let msgs = std::mem::take(&mut *mb.msgs.lock().unwrap_or_else(|e| e.into_inner()));
        let mut touched: Vec<usize> = Vec::new();
        for m in msgs {
            match m {
                Msg::Push { client, slot, data } => {
                    let i = slot as usize;
                    let Some(Some(c)) = self.conns.get_mut(i) else { continue };
                    if c.state.id != client {
                        continue;
                    }
                    c.state.info.pending.fetch_sub(data.len() as u64, Ordering::Relaxed);
                    let start = c.wbuf.len();
                    c.wbuf.extend_from_slice(&data);
                    if c.state.proto == Protocol::Resp3 {
                        c.wbuf[start] = b'>';
                    }
                    // A subscriber that does not read is cut off here, before the rest of
                    // the backlog lands in its buffer.
                    c.state.info.obuf.store((c.wbuf.len() - c.wsent) as u64, Ordering::Relaxed);
                    if over_output_limit(&self.shared, c) {
                        self.close(i);
                        continue;
                    }
                    if touched.last() != Some(&i) {
                        touched.push(i);
                    }
                }
                Msg::Monitor { client, slot, data } => {
                    let i = slot as usize;
                    let Some(Some(c)) = self.conns.get_mut(i) else { continue };
                    if c.state.id != client {
                        continue;
                    }
                    c.state.info.pending.fetch_sub(data.len() as u64, Ordering::Relaxed);
                    // Under CLIENT REPLY OFF, or after QUIT, the lines are dropped, as Redis
                    // drops any reply then.
                    if c.state.reply == ReplyMode::Off || c.state.close {
                        continue;
                    }
                    // (What waits in mailboxes is bounded when it is queued, and the output
                    // limit is checked once written out, below.)
                    c.wbuf.extend_from_slice(&data);
                    c.state.info.obuf.store((c.wbuf.len() - c.wsent) as u64, Ordering::Relaxed);
                    if touched.last() != Some(&i) {
                        touched.push(i);
                    }
                }
                Msg::Listen { resp } => {
                    if let Some(mut old) = self.resp.take() {
                        let _ = self.poll.registry().deregister(&mut old);
                    }
                    if let Some(l) = resp {
                        let mut l = TcpListener::from_std(l);
                        match self.poll.registry().register(&mut l, RESP_LISTENER, Interest::READABLE) {
                            Ok(()) => self.resp = Some(l),
                            Err(e) => tracing::error!("RESP listener of worker {}: {e}", self.id),
                        }
                    }
                }
                Msg::Wake { client, slot } => {
                    let i = slot as usize;
                    if matches!(self.conns.get(i), Some(Some(c)) if c.state.id == client) {
                        self.process(i);
                        touched.push(i);
                    }
                }
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for i in touched {
            self.flush(i);
        }
    }

    /// Closes connections that CLIENT KILL marked.
    fn sweep_killed(&mut self) {
        for i in 0..self.conns.len() {
            let killed = matches!(&self.conns[i], Some(c) if c.state.info.killed.load(Ordering::Relaxed));
            if killed {
                self.close(i);
            }
        }
    }

    /// Closes clients idle longer than `timeout` seconds (0 = never).
    /// Redis's `clientsCron`, on a tenth of the connections (at least 5) each
    /// [`CLIENTS_CRON_EVERY`], so each about once a second:
    /// - `clientsCronResizeQueryBuffer`: a read buffer with more than 4 KiB spare is given
    ///   back when its client has been idle over 2 s, or cut down to its recent peak when it
    ///   is over 32 KiB and twice that peak. A connection that once sent a large value does
    ///   not keep a buffer of its size for good. The peak starts again from what the buffer
    ///   holds.
    /// - `clientsCronResizeOutputBuffer`, for CLIENT LIST's `rbs` and `rbp`: see
    ///   [`resize_reply_buffer`].
    /// - the output buffer limits, so a client over a soft limit for longer than allowed is
    ///   closed even when nothing more is written to it.
    fn clients_cron(&mut self) {
        const RESIZE_THRESHOLD: usize = 32 * 1024;
        let n = self.conns.len();
        if n == 0 {
            return;
        }
        let now = self.shared.uptime_ms();
        let mut i = self.clients_cron.1 % n;
        // A tenth of the connected clients, as Redis counts them: not of the slots, which a
        // burst of connections leaves many of, empty, and which would stretch each client's
        // turn from 100 ms to a second or more.
        let live = n - self.free.len();
        let mut turns = (live / 10).max(5).min(live);
        for _ in 0..n {
            if turns == 0 {
                break;
            }
            if let Some(Some(c)) = self.conns.get_mut(i) {
                turns -= 1;
                let (len, cap) = (c.rbuf.len(), c.rbuf.capacity());
                let peak = c.qbuf_peak;
                let idle_secs = now.saturating_sub(c.state.info.last_ms.load(Ordering::Relaxed)) / 1000;
                if cap - len > 4 * 1024 {
                    if idle_secs > 2 {
                        c.rbuf.shrink_to(len);
                    } else if cap > RESIZE_THRESHOLD && cap / 2 > peak {
                        c.rbuf.shrink_to(len.max(peak));
                    }
                    c.state.info.rbuf_cap.store(c.rbuf.capacity() as u64, Ordering::Relaxed);
                    let mem = c.rbuf.capacity() + c.wbuf.capacity() + std::mem::size_of::<Conn>();
                    c.state.info.mem.store(mem as u64, Ordering::Relaxed);
                }
                c.qbuf_peak = len;
                resize_reply_buffer(c, now, self.shared.stats.worker(self.id));
                if over_output_limit(&self.shared, c) {
                    self.close(i);
                }
            }
            i = (i + 1) % n;
        }
        self.clients_cron.1 = i;
    }

    fn sweep_idle(&mut self) {
        let timeout = self.shared.config.timeout.load(Ordering::Relaxed);
        if timeout == 0 {
            return;
        }
        let now = self.shared.uptime_ms();
        for i in 0..self.conns.len() {
            // Blocked and paused clients are not idle (Redis times out blocked clients by
            // their own deadline, and paused ones never).
            let idle = matches!(&self.conns[i], Some(c) if !c.parked && !c.paused && now.saturating_sub(c.state.info.last_ms.load(Ordering::Relaxed)) > timeout * 1000);
            if idle {
                self.close(i);
            }
        }
    }
}

/// Why a connection's requests stopped before the end of what it sent.
enum Held {
    /// A blocking command parked it, until this deadline (None: forever).
    Parked(Option<std::time::Instant>),
    /// CLIENT PAUSE holds its next request, at this pause generation; the request's length
    /// (0 for memcached, where it is not known here).
    Postponed(u64, usize),
}

/// Runs the complete RESP requests at the start of `c.rbuf`, parsing up to
/// [`PREFETCH_AHEAD`] of them ahead of running them so that their keys are fetched into cache
/// together. Returns the bytes consumed, and why it stopped early if a command parked the
/// client or was held by CLIENT PAUSE (a held request is not consumed).
fn run_resp(
    c: &mut Conn,
    batch: &mut [Parsed],
    h: &mut Handle,
    shared: &Shared,
    worker: usize,
) -> (usize, Option<Held>) {
    let (mut pos, mut held) = (0, None);
    let limits =
        Limits { proto_max_bulk_len: shared.config.proto_max_bulk_len.load(Ordering::Relaxed), ..Limits::DEFAULT };
    // Requests parsed ahead, not yet run: batch[next..filled], starting at pos. The parses
    // wrote to batch[..used] (for the shrink at the end).
    let (mut next, mut filled, mut used) = (0, 0, 0);
    while pos < c.rbuf.len() && !c.state.close {
        if next == filled {
            // Before AUTH (with a password set) requests are small, and parsed one at a time:
            // the AUTH that lifts the limits may be the one before.
            let unauth = !c.state.authenticated && crate::command::auth_required(shared, &c.state);
            let unauth_limits = Limits {
                max_multibulk: UNAUTH_MULTIBULK,
                proto_max_bulk_len: limits.proto_max_bulk_len.min(UNAUTH_BULK),
                ..limits
            };
            let (lim, ahead) = if unauth { (&unauth_limits, 1) } else { (&limits, batch.len()) };
            // A request still arriving over many reads is checked on from where
            // the last read left it, and parsed again only once it is whole.
            if c.progress.started() && !c.progress.ready(&c.rbuf[pos..], lim) {
                break;
            }
            next = 0;
            let parsed = parse_ahead(&c.rbuf[pos..], lim, &mut batch[..ahead]);
            // The requests it parsed, and the one it stopped at.
            used = used.max(parsed.as_ref().map_or(1, |&k| k + 1).min(batch.len()));
            filled = match parsed {
                Ok(0) => {
                    c.progress.ready(&c.rbuf[pos..], lim);
                    break;
                }
                Ok(k) => {
                    c.progress = Progress::default();
                    k
                }
                Err(e) => {
                    // Redis replies with the protocol error and closes.
                    shared.stats.worker(worker).count_error(b"ERR");
                    if unauth && parse_ahead(&c.rbuf[pos..], &limits, &mut batch[..1]).is_ok() {
                        // Only the unauthenticated limits refuse it.
                        let what = if matches!(e, larder_resp::ProtoError::InvalidMultibulkLength) {
                            "multibulk"
                        } else {
                            "bulk"
                        };
                        c.wbuf.extend_from_slice(
                            format!("-ERR Protocol error: unauthenticated {what} length\r\n").as_bytes(),
                        );
                    } else {
                        e.write_reply(&mut c.wbuf);
                    }
                    c.state.close = true;
                    pos = c.rbuf.len();
                    break;
                }
            };
            // Several requests (a pipeline): fetch their keys into cache together.
            if filled > 1 && shared.config.floor.is_none() {
                prefetch_keys(h, c.state.db, &c.rbuf[pos..], &mut batch[..filled]);
            }
        }
        let Parsed { args, len: n, cmd } = &batch[next];
        let (n, cmd) = (*n, *cmd);
        next += 1;
        let buf = &c.rbuf[pos..];
        if !args.is_empty() {
            // CLIENT LIST's qbuf counts the request being executed, as Redis's
            // query buffer still holds it.
            c.state.info.qbuf.store((c.rbuf.len() - pos) as u64, Ordering::Relaxed);
            let floored = match &shared.config.floor {
                Some(v) => crate::floor::resp(args, buf, &mut Writer::new(&mut c.wbuf, c.state.proto), v),
                None => false,
            };
            if !floored {
                // Whether this command's reply is to be dropped (REPLY OFF, or SKIP before
                // it): a blocking command's reply comes later.
                let silent = c.state.reply != ReplyMode::On;
                let mut ctx = Ctx {
                    argv: Argv { args, buf },
                    out: Writer::new(&mut c.wbuf, c.state.proto),
                    h,
                    conn: &mut c.state,
                    shared,
                    worker,
                };
                dispatch(&mut ctx, cmd);
                if c.state.postponed.is_some() {
                    // Held by CLIENT PAUSE: it stays in the buffer, to run again.
                    held = c.state.postponed.take().map(|g| Held::Postponed(g, n));
                    break;
                }
                if c.state.park.is_some() {
                    match crate::blocking::enter(h, shared, worker, &mut c.state, &buf[..n], args) {
                        // Served by the retry: go on.
                        Ok(reply) if !silent => c.wbuf.extend_from_slice(&reply),
                        Ok(_) => {}
                        Err(deadline) => {
                            c.parked_silent = silent;
                            pos += n;
                            held = Some(Held::Parked(deadline));
                            break;
                        }
                    }
                }
            }
        }
        pos += n;
    }
    // One huge request does not keep its argument storage for good. (Only the entries this
    // call wrote to: going over all of them was a hundred instructions per read of one
    // request.)
    for p in &mut batch[..used] {
        p.args.shrink(ARGS_KEEP);
    }
    (pos, held)
}

/// Runs the complete memcached requests at the start of `c.rbuf`, as far as
/// [`MC_HELD_OUTPUT`] lets them; returns the bytes consumed.
fn run_memcache(c: &mut Conn, h: &mut Handle, shared: &Shared, worker: usize) -> usize {
    c.held = false;
    // A long multiget line still without its end: nothing to do until a `\n` comes, and
    // looking through all of it after every read kept a worker busy.
    if c.multiget > 0 && !c.rbuf[c.multiget..].contains(&b'\n') {
        c.multiget = c.rbuf.len();
        return 0;
    }
    let unwritten = c.wbuf.len() - c.wsent;
    if unwritten >= MC_HELD_OUTPUT {
        c.held = !c.rbuf.is_empty();
        return 0;
    }
    let out_max = c.wbuf.len() + (MC_HELD_OUTPUT - unwritten);
    let pos = match &shared.config.floor {
        Some(v) if c.state.mc_swallow == 0 => {
            let state = &mut c.state;
            let max = usize::try_from(shared.config.item_size_max.load(Ordering::Relaxed)).unwrap_or(usize::MAX);
            crate::floor::memcache(&c.rbuf, &mut c.wbuf, v, max, |b, out| {
                crate::families::memcache::process(b, out, usize::MAX, h, state, shared, worker)
            })
        }
        _ => crate::families::memcache::process(&c.rbuf, &mut c.wbuf, out_max, h, &mut c.state, shared, worker),
    };
    c.held = c.wbuf.len() - c.wsent >= MC_HELD_OUTPUT && pos < c.rbuf.len();
    let rest = &c.rbuf[pos.min(c.rbuf.len())..];
    let waits = !c.state.close && larder_memcache::is_long_multiget(rest, &Default::default());
    c.multiget = if waits { rest.len() } else { 0 };
    pos
}

/// Parses up to [`PREFETCH_AHEAD`] complete requests from the start of `buf` into `batch`
/// (arguments and length of each; each request's arguments are relative to its own start).
/// Returns how many; 0 if the first is incomplete. A protocol error is returned only for
/// the first request: a later one is left for the next call, after the good ones ran.
fn parse_ahead(buf: &[u8], limits: &Limits, batch: &mut [Parsed]) -> Result<usize, larder_resp::ProtoError> {
    let mut pos = 0;
    for (k, Parsed { args, len, cmd }) in batch.iter_mut().enumerate() {
        *cmd = None;
        if pos == buf.len() {
            return Ok(k);
        }
        match larder_resp::parse_command_into(&buf[pos..], limits, args) {
            Ok(Some(n)) => {
                *len = n;
                pos += n;
            }
            Ok(None) => return Ok(k),
            Err(e) if k == 0 => return Err(e),
            Err(_) => return Ok(k),
        }
    }
    Ok(batch.len())
}

/// Brings the first keys of the parsed requests `batch` (laid out from the start of `buf`)
/// into cache: every bucket first, then every item, so that their cache misses overlap
/// instead of stalling one request after another.
/// Each request's command is looked up here once, for its key positions, and kept for
/// running it.
fn prefetch_keys(h: &Handle, db: u32, buf: &[u8], batch: &mut [Parsed]) {
    let mut keys: [&[u8]; PREFETCH_AHEAD] = [&[]; PREFETCH_AHEAD];
    let (mut n, mut pos) = (0, 0);
    for p in batch {
        let argv = Argv { args: &p.args, buf: &buf[pos..] };
        p.cmd = lookup_command(argv.get(0));
        if let Some(k) = p.cmd.and_then(|i| first_key_index(i, argv)) {
            keys[n] = argv.get(k);
            n += 1;
        }
        pos += p.len;
    }
    h.prefetch_group(db, keys[..n].iter().copied());
}

/// Redis's `PROTO_REPLY_CHUNK_BYTES` and `PROTO_REPLY_MIN_BYTES`: the size a client's reply
/// buffer starts at and the most it grows back to, and the least it shrinks to.
const REPLY_CHUNK: usize = 16 * 1024;
const REPLY_MIN: usize = 1024;
/// Redis's `REPLY_BUFFER_DEFAULT_PEAK_RESET_TIME` (ms).
const REPLY_PEAK_RESET_MS: u64 = 5000;

/// More bytes wait to be written than Redis's reply buffer held at its peak: the new peak
/// (what of it the buffer holds; the rest would be in Redis's reply list), for CLIENT LIST.
#[cold]
#[inline(never)]
fn reply_peak(c: &mut Conn) {
    c.reply_peak = (c.wbuf.len() - c.wsent).min(c.reply_size);
    c.state.info.rbp.store(c.reply_peak as u64, Ordering::Relaxed);
}

/// Redis 7.0's `clientsCronResizeOutputBuffer` on the size Redis's reply buffer would have
/// for this client (Larder's own `wbuf` grows as it needs): cut to its peak use (at least
/// 1 KiB) when that is under half of it, doubled (up to 16 KiB) when the peak filled it
/// (INFO's `reply_buffer_shrinks` and `reply_buffer_expands`); then every 5 s the peak
/// starts again from what is waiting. As in Redis, whose first reset time is in seconds
/// where the cron compares milliseconds, a new client's first visit resets its peak.
fn resize_reply_buffer(c: &mut Conn, now_ms: u64, ws: &crate::stats::WorkerStats) {
    if c.reply_size / 2 >= REPLY_MIN && c.reply_peak < c.reply_size / 2 {
        c.reply_size = jemalloc_usable_size(REPLY_MIN.max(c.reply_peak + 1));
        ws.reply_buffer_shrinks.incr();
    } else if c.reply_size * 2 < REPLY_CHUNK * 2 && c.reply_peak == c.reply_size {
        c.reply_size = jemalloc_usable_size(REPLY_CHUNK.min(c.reply_size * 2));
        ws.reply_buffer_expands.incr();
    }
    if c.reply_reset.is_none_or(|t| now_ms.saturating_sub(t) >= REPLY_PEAK_RESET_MS) {
        c.reply_peak = (c.wbuf.len() - c.wsent).min(c.reply_size);
        c.reply_reset = Some(now_ms);
    }
    let info = &c.state.info;
    info.rbs.store(c.reply_size as u64, Ordering::Relaxed);
    info.rbp.store(c.reply_peak as u64, Ordering::Relaxed);
}

/// The usable size jemalloc 5.3 (Redis's allocator) gives a request of `n` bytes, which
/// Redis takes as the reply buffer's size (`zmalloc_usable`): its size classes with a 16-byte
/// quantum and four classes per doubling (8, 16, 32, 48, 64, 80, 96, 112, 128, 160, ...,
/// 2560, 3072, 3584, 4096, 5120, ...), the same spacing for its large classes.
fn jemalloc_usable_size(n: usize) -> usize {
    if n <= 8 {
        return 8;
    }
    // The class group (2^(k-1), 2^k] holding n is cut in four, never finer than 16 bytes.
    let k = usize::BITS - (n - 1).leading_zeros();
    let step = (1usize << k.saturating_sub(3)).max(16);
    n.div_ceil(step) * step
}

/// Drops what has been written from the front of an output buffer, `sent` bytes of it, and
/// returns how much of what is left has been written. The rest moves down only once it is
/// no longer than what was written before it, so that each byte moves at most once: a
/// 100 MB reply going out a few MB per writable event used to be moved down after each,
/// gigabytes of copying while the worker's other clients waited.
fn drop_written(wbuf: &mut Vec<u8>, sent: usize) -> usize {
    if sent == wbuf.len() {
        wbuf.clear();
        0
    } else if sent >= wbuf.len() - sent {
        wbuf.drain(..sent);
        0
    } else {
        sent
    }
}

/// Whether a connection's pending output is over its class's `client-output-buffer-limit`:
/// the hard limit at once, the soft limit once it has lasted more than its seconds (as
/// Redis's `checkClientOutputBufferLimits`). Logs the disconnection.
// Always inlined: out of line it cost 30 instructions a write more (see the tracking commit).
#[inline(always)]
fn over_output_limit(shared: &Shared, c: &mut Conn) -> bool {
    let len = (c.wbuf.len() - c.wsent) as u64;
    // A client that has to authenticate first may not pile up replies (its NOAUTH errors)
    // by not reading them: Redis closes it past 1 KiB beyond its 16 KiB reply buffer.
    if !c.state.authenticated && len > UNAUTH_OUTPUT_LIMIT && crate::command::auth_required(shared, &c.state) {
        tracing::warn!(client = c.state.id, "closing unauthenticated client for overcoming of output buffer limits");
        return true;
    }
    let cfg = &shared.config;
    let (hard, soft, secs) = if c.state.subs.is_some() {
        let l = &cfg.pubsub_output_limit;
        (l.hard.load(Ordering::Relaxed), l.soft.load(Ordering::Relaxed), l.soft_secs.load(Ordering::Relaxed))
    } else {
        (cfg.client_output_buffer_limit.load(Ordering::Relaxed), 0, 0)
    };
    let mut over = hard > 0 && len > hard;
    if soft > 0 && len > soft {
        match c.soft_since {
            None => c.soft_since = Some(Instant::now()),
            Some(t) => over |= t.elapsed().as_secs() > secs,
        }
    } else {
        c.soft_since = None;
    }
    if over {
        tracing::warn!(client = c.state.id, "closing client for overcoming of output buffer limits");
    }
    over
}

#[cfg(test)]
mod tests {
    use super::*;

    /// jemalloc 5.3's size classes, as `malloc_usable_size` reports them under Redis
    /// (the figures redis-server 7.0.15 shows as CLIENT LIST `rbs` and `qbuf-free`).
    #[test]
    fn jemalloc_size_classes() {
        let classes = [
            (1, 8),
            (8, 8),
            (9, 16),
            (17, 32),
            (33, 48),
            (65, 80),
            (129, 160),
            (1024, 1024),
            (1025, 1280),
            (2049, 2560),
            (3010, 3072),
            (4097, 5120),
            (6144, 6144),
            (8192, 8192),
            (16384, 16384),
            (16390, 20480),
        ];
        for (n, size) in classes {
            assert_eq!(jemalloc_usable_size(n), size, "{n}");
        }
    }

    #[test]
    fn spin_window_adapts_like_halt_polling() {
        let us = |n: u64| n * 1000;
        let mut s = Spin::new(Duration::from_micros(50));
        assert_eq!(s.window, 0, "an idle server does not poll");
        // Events that come back soon after each round: the window grows to the limit.
        for want in [4, 8, 16, 32, 50, 50] {
            s.waited(us(20));
            assert_eq!(s.window, us(want));
        }
        // Waits longer than the limit: sparse traffic, the window halves down to zero.
        for want in [25, 12, 6, 0, 0] {
            s.waited(us(5_000));
            assert_eq!(s.window / 1000, want);
        }
        // Off: never polls.
        let mut off = Spin::new(Duration::ZERO);
        off.waited(us(1));
        assert_eq!(off.window, 0);
    }

    #[test]
    fn written_output_moves_each_byte_at_most_once() {
        // A 1 MB reply written 10 kB at a time: the unwritten rest is moved down only when
        // it is no longer than what was written, so the bytes moved stay under its size (one
        // drain per write moved 50 MB).
        let total = 1 << 20;
        let mut wbuf: Vec<u8> = (0..total).map(|i| i as u8).collect();
        let (mut sent, mut out, mut moved) = (0, Vec::new(), 0);
        while !wbuf.is_empty() {
            let n = (wbuf.len() - sent).min(10_000);
            out.extend_from_slice(&wbuf[sent..sent + n]);
            let before = wbuf.len();
            sent = drop_written(&mut wbuf, sent + n);
            if wbuf.len() < before && !wbuf.is_empty() {
                moved += wbuf.len();
            }
            assert!(wbuf.len() - sent <= total && sent <= wbuf.len());
        }
        assert_eq!(sent, 0);
        assert!(out.iter().enumerate().all(|(i, &b)| b == i as u8), "the bytes go out in order");
        assert!(moved <= total, "moved {moved} bytes");
    }

    #[test]
    fn only_unpipelined_rounds_poll() {
        assert!(Spin::unpipelined(1, 1));
        assert!(Spin::unpipelined(50, 50));
        assert!(Spin::unpipelined(4, 6));
        assert!(!Spin::unpipelined(4, 7));
        assert!(!Spin::unpipelined(50, 800), "pipeline 16");
        assert!(!Spin::unpipelined(0, 0), "a round without reads (accepts, timers)");
    }
}
