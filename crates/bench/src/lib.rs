//! `larder bench`: one load generator for every server Larder is compared with.
//!
//! It speaks RESP (`SET`/`GET`/`MGET`), memcached text (`set`/`get`) and Larder's local
//! shared-memory path (the engine called directly through a named segment), with the same
//! key and value generation, connection handling and timing for all three, so a
//! comparison measures the servers and not the clients.
//!
//! ```text
//!   main thread ── plan (options) ── N client threads ── each: C connections in one mio loop
//!        │                                                  each keeps `pipeline` requests
//!        │                                                  in flight; HDR histograms,
//!        └── progress bar (TTY only), summary, JSON         timeline, verification
//! ```
//!
//! Values are derived from keys ([`value`]), so `--verify` checks every read-back without
//! remembering what was written. Modules: [`keys`] (patterns), [`value`], [`proto`]
//! (encoding and reply readers), [`gen`] (ratio, budget, warm-up), [`stats`].

pub mod gen;
pub mod keys;
mod local;
mod net;
pub mod proto;
pub mod stats;
pub mod value;

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use gen::{Clock, GenConfig};
use stats::{Latency, Stats};
use value::{Sizes, Values};

/// `larder bench` options (names follow memtier_benchmark where there is one).
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// `resp` (Redis protocol), `memcache` (memcached text protocol) or `local` (attach to a
    /// named shared-memory segment and call the engine directly).
    #[arg(long, short = 'P', default_value = "resp")]
    pub protocol: String,
    /// Server address (resp, memcache).
    #[arg(long, short = 's', default_value = "127.0.0.1")]
    pub server: String,
    /// Server port (default: 6379 for resp, 11211 for memcache).
    #[arg(long, short = 'p')]
    pub port: Option<u16>,
    /// Segment to attach to (local): /dev/shm/larder-NAME, e.g. from `larder server --shm NAME`.
    #[arg(long)]
    pub segment: Option<String>,
    /// Client threads.
    #[arg(long, short = 't', default_value_t = 4)]
    pub threads: usize,
    /// Connections per thread (ignored by local).
    #[arg(long, short = 'c', default_value_t = 50)]
    pub clients: usize,
    /// Requests in flight per connection (ignored by local).
    #[arg(long, default_value_t = 1)]
    pub pipeline: usize,
    /// SET:GET ratio, e.g. 1:10 (memtier's default), 1:0 (writes only), 0:1 (reads only).
    #[arg(long, default_value = "1:10")]
    pub ratio: String,
    /// Value size in bytes: fixed (`32`) or a range (`10-100`, each key's size fixed by its hash).
    #[arg(long, short = 'd', default_value = "32")]
    pub data_size: String,
    /// Key prefix; keys are the prefix and a decimal number.
    #[arg(long, default_value = "key:")]
    pub key_prefix: String,
    /// Smallest key number.
    #[arg(long, default_value_t = 0)]
    pub key_min: u64,
    /// Largest key number.
    #[arg(long, default_value_t = 99_999)]
    pub key_max: u64,
    /// Key pattern, for both kinds or as SET:GET: random (R), sequential (S), parallel (P:
    /// each connection its own slice of the range), gaussian (G).
    #[arg(long, default_value = "R")]
    pub key_pattern: String,
    /// Pad keys to this many bytes with filler derived from the key number (0: no padding).
    #[arg(long, default_value_t = 0)]
    pub key_len: usize,
    /// Total requests over all connections (default 100000 unless --duration is given).
    #[arg(long, short = 'n')]
    pub requests: Option<u64>,
    /// Run for this many seconds instead of a request count.
    #[arg(long)]
    pub duration: Option<f64>,
    /// Seconds of load before measuring (not counted, not part of --requests).
    #[arg(long, default_value_t = 0.0)]
    pub warmup: f64,
    /// Keys per read: 1 sends GET / `get k`, more sends MGET / `get k1 ... kN`.
    #[arg(long, default_value_t = 1)]
    pub multiget: u32,
    /// Check every value read back against the one written; a wrong value fails the run.
    /// (Reads of keys never written are misses, counted apart.)
    #[arg(long)]
    pub verify: bool,
    /// Width of a timeline interval, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Print the timeline (ops/s and latency of every interval).
    #[arg(long)]
    pub timeline: bool,
    /// Write every figure, the timeline and the parameters to this file as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// No progress bar (it is only shown when stderr is a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    /// Seed of the random key patterns.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Resp,
    Memcache,
    Local,
}

/// The run, checked and resolved from [`Args`].
pub struct Plan {
    pub protocol: Protocol,
    pub addr: Option<SocketAddr>,
    pub segment: Option<String>,
    pub threads: usize,
    pub clients: usize,
    pub pipeline: usize,
    pub multiget: u32,
    pub prefix: String,
    pub key_len: usize,
    pub values: Values,
    pub gen: GenConfig,
    pub duration: Option<f64>,
    pub warmup: f64,
    pub verify: bool,
    pub interval_ms: u64,
    pub args: Args,
}

impl Plan {
    pub fn new(a: &Args) -> Result<Plan, String> {
        let protocol = match a.protocol.as_str() {
            "resp" | "redis" => Protocol::Resp,
            "memcache" | "memcached" | "memcache_text" => Protocol::Memcache,
            "local" => Protocol::Local,
            p => return Err(format!("unknown protocol {p:?} (resp, memcache or local)")),
        };
        if a.threads == 0 || a.clients == 0 || a.pipeline == 0 || a.multiget == 0 {
            return Err("--threads, --clients, --pipeline and --multiget must be at least 1".into());
        }
        if a.key_min > a.key_max {
            return Err("--key-min is above --key-max".into());
        }
        if a.duration.is_some() && a.requests.is_some() {
            return Err("give --requests or --duration, not both".into());
        }
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if a.duration.is_some_and(|d| !positive(d)) || !(a.warmup == 0.0 || positive(a.warmup)) {
            return Err("--duration must be positive and --warmup not negative".into());
        }
        let addr = match protocol {
            Protocol::Local => {
                if a.segment.is_none() {
                    return Err("--protocol local needs --segment NAME".into());
                }
                None
            }
            _ => {
                let port = a.port.unwrap_or(if protocol == Protocol::Resp { 6379 } else { 11211 });
                let host = if a.server.contains(':') { format!("[{}]", a.server) } else { a.server.clone() };
                Some(
                    format!("{host}:{port}")
                        .to_socket_addrs()
                        .map_err(|e| format!("{}: {e}", a.server))?
                        .next()
                        .ok_or_else(|| format!("{}: no address", a.server))?,
                )
            }
        };
        let (pset, pget) = keys::parse_patterns(&a.key_pattern)?;
        let requests = if a.duration.is_some() { None } else { Some(a.requests.unwrap_or(100_000)) };
        Ok(Plan {
            protocol,
            addr,
            segment: a.segment.clone(),
            threads: a.threads,
            clients: if protocol == Protocol::Local { 1 } else { a.clients },
            pipeline: a.pipeline,
            multiget: a.multiget,
            prefix: a.key_prefix.clone(),
            key_len: a.key_len,
            values: Values::new(Sizes::parse(&a.data_size)?),
            gen: GenConfig {
                ratio: gen::parse_ratio(&a.ratio)?,
                patterns: (pset, pget),
                key_min: a.key_min,
                key_max: a.key_max,
                requests,
                seed: a.seed,
            },
            duration: a.duration,
            warmup: a.warmup,
            verify: a.verify,
            interval_ms: a.interval_ms.max(1),
            args: a.clone(),
        })
    }

    fn conns(&self) -> usize {
        self.threads * self.clients
    }
}

/// What the client threads share: the start line, the clock, progress and a stop flag.
pub struct Shared {
    ready: Barrier,
    go: Barrier,
    clock: OnceLock<Clock>,
    pub done_ops: AtomicU64,
    pub stop: AtomicBool,
}

impl Shared {
    /// Waits until every thread is set up, then for the main thread to start the clock.
    fn sync(&self) -> Clock {
        self.ready.wait();
        self.go.wait();
        *self.clock.get().expect("clock set before the start")
    }
}

/// A finished run.
pub struct Report {
    pub stats: Stats,
    /// From the end of the warm-up to the last counted reply.
    pub elapsed: f64,
}

impl Report {
    pub fn ops_per_sec(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.stats.ops() as f64 / self.elapsed
        } else {
            0.0
        }
    }
}

/// Runs the plan: every thread to completion, results merged.
pub fn run(plan: &Plan) -> Result<Report, String> {
    let store = match (&plan.protocol, &plan.segment) {
        (Protocol::Local, Some(name)) => {
            Some(larder_engine::Store::attach(name).map_err(|e| format!("attach {name}: {e}"))?)
        }
        _ => None,
    };
    let shared = Shared {
        ready: Barrier::new(plan.threads + 1),
        go: Barrier::new(plan.threads + 1),
        clock: OnceLock::new(),
        done_ops: AtomicU64::new(0),
        stop: AtomicBool::new(false),
    };
    let progress = !plan.args.no_progress && std::io::stderr().is_terminal();
    let results: Vec<Result<Stats, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..plan.threads)
            .map(|t| {
                let (shared, store) = (&shared, store.as_ref());
                s.spawn(move || {
                    let r = match store {
                        Some(st) => local::run_thread(plan, shared, st, t),
                        None => net::run_thread(plan, shared, t, plan.addr.expect("network address")),
                    };
                    if r.is_err() {
                        shared.stop.store(true, Ordering::Relaxed);
                    }
                    r
                })
            })
            .collect();
        shared.ready.wait();
        let start = Instant::now();
        let measure_start = start + Duration::from_secs_f64(plan.warmup);
        let deadline = plan.duration.map(|d| measure_start + Duration::from_secs_f64(d));
        let _ = shared.clock.set(Clock { measure_start, deadline });
        shared.go.wait();
        if progress {
            while !handles.iter().all(|h| h.is_finished()) {
                std::thread::sleep(Duration::from_millis(200));
                draw_progress(plan, &shared, start, measure_start);
            }
            eprint!("\r{:78}\r", "");
        }
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("client thread panicked".into()))).collect()
    });
    let mut stats = Stats::new(plan.interval_ms);
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok(s) => stats.merge(&s),
            Err(e) => errors.push(e),
        }
    }
    // Threads that stopped because another one failed say "stopped": report the cause.
    let first_err = errors.iter().find(|e| *e != "stopped").or(errors.first()).cloned();
    if let Some(e) = first_err {
        return Err(e);
    }
    let elapsed = stats.last_ns as f64 / 1e9;
    Ok(Report { stats, elapsed })
}

fn draw_progress(plan: &Plan, shared: &Shared, start: Instant, measure_start: Instant) {
    let now = Instant::now();
    let done = shared.done_ops.load(Ordering::Relaxed);
    let frac = match (plan.duration, plan.gen.requests) {
        (Some(d), _) => now.saturating_duration_since(start).as_secs_f64() / (d + plan.warmup),
        (None, Some(n)) if now >= measure_start => done as f64 / n.max(1) as f64,
        _ => now.duration_since(start).as_secs_f64() / plan.warmup.max(1e-9),
    }
    .clamp(0.0, 1.0);
    let secs = now.duration_since(start).as_secs_f64();
    let width = 30;
    let fill = (frac * width as f64) as usize;
    eprint!(
        "\r[{}{}] {:3.0}% {:>12} ops  {:>10.0} ops/s avg  {:6.1} s{}",
        "#".repeat(fill),
        ".".repeat(width - fill),
        frac * 100.0,
        done,
        done as f64 / secs.max(1e-9),
        secs,
        if now < measure_start { " (warm-up)" } else { "" }
    );
}

/// Runs `larder bench`: the run, the summary on stdout, the JSON file; an error if a value
/// read back was wrong or the server answered with errors.
pub fn main(args: &Args) -> Result<(), String> {
    let plan = Plan::new(args)?;
    let report = run(&plan)?;
    print!("{}", summary(&plan, &report));
    if let Some(path) = &args.json {
        std::fs::write(path, to_json(&plan, &report)).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let s = &report.stats;
    if s.verify_failures > 0 {
        return Err(format!(
            "{} values read back were not the ones written: {}",
            s.verify_failures,
            s.first_errors.join("; ")
        ));
    }
    if s.errors > 0 {
        return Err(format!("{} error replies: {}", s.errors, s.first_errors.join("; ")));
    }
    if s.ops() == 0 {
        return Err(match plan.duration {
            Some(d) => format!(
                "no request could be issued in the {d} s measured window: no reply to the requests sent before it \
                 arrived until it had ended (the server or the machine stalled for at least that long)"
            ),
            None => "no operation completed".into(),
        });
    }
    Ok(())
}

fn describe(plan: &Plan) -> String {
    let a = &plan.args;
    let target = match plan.protocol {
        Protocol::Local => format!("local segment {}", plan.segment.as_deref().unwrap_or("")),
        p => format!(
            "{} {}",
            if p == Protocol::Resp { "resp" } else { "memcache" },
            plan.addr.map(|a| a.to_string()).unwrap_or_default()
        ),
    };
    let run = match (plan.duration, plan.gen.requests) {
        (Some(d), _) => format!("{d} s"),
        (None, Some(n)) => format!("{n} requests"),
        _ => String::new(),
    };
    format!(
        "{target}: {} threads x {} connections, pipeline {}, SET:GET {}, {} B values, keys {}{}..{} {}, {}{}{}{}",
        plan.threads,
        plan.clients,
        plan.pipeline,
        a.ratio,
        a.data_size,
        a.key_prefix,
        a.key_min,
        a.key_max,
        a.key_pattern,
        run,
        if plan.warmup > 0.0 { format!(" after {} s warm-up", plan.warmup) } else { String::new() },
        if plan.multiget > 1 { format!(", {} keys per read", plan.multiget) } else { String::new() },
        if plan.verify { ", verified" } else { "" },
    )
}

/// The human-readable summary.
pub fn summary(plan: &Plan, r: &Report) -> String {
    let s = &r.stats;
    let mut o = String::new();
    let _ = writeln!(o, "larder bench {}", describe(plan));
    let per = |n: u64| if r.elapsed > 0.0 { n as f64 / r.elapsed } else { 0.0 };
    let _ = writeln!(
        o,
        "{} ops in {:.2} s: {:.0} ops/s ({:.0} sets/s, {:.0} reads/s, {:.0} keys read/s; {} hits, {} misses), {:.0} KB/s",
        s.ops(),
        r.elapsed,
        r.ops_per_sec(),
        per(s.sets),
        per(s.gets),
        per(s.get_keys),
        s.hits,
        s.misses,
        per(s.bytes_sent + s.bytes_received) / 1024.0
    );
    let _ = writeln!(
        o,
        "{:<6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  (latency, µs)",
        "", "min", "mean", "p50", "p99", "p99.9", "max", "count"
    );
    for (name, h) in [("SET", &s.set_hist), ("READ", &s.get_hist), ("ALL", &s.all_hist())] {
        let l = Latency::of(h);
        if l.count > 0 {
            let _ = writeln!(
                o,
                "{name:<6} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10}",
                l.min, l.mean, l.p50, l.p99, l.p999, l.max, l.count
            );
        }
    }
    if s.errors > 0 || s.verify_failures > 0 {
        let _ = writeln!(
            o,
            "{} error replies, {} wrong values: {}",
            s.errors,
            s.verify_failures,
            s.first_errors.join("; ")
        );
    }
    if plan.args.timeline {
        let _ = writeln!(o, "timeline ({} ms intervals): t(s) ops/s mean-µs max-µs", plan.interval_ms);
        for (i, b) in s.timeline.iter().enumerate() {
            let secs = plan.interval_ms as f64 / 1000.0;
            let mean = if b.ops > 0 { b.lat_sum_ns as f64 / b.ops as f64 / 1000.0 } else { 0.0 };
            let _ = writeln!(
                o,
                "  {:8.2} {:>12.0} {:>10.2} {:>10.2}",
                i as f64 * secs,
                b.ops as f64 / secs,
                mean,
                b.lat_max_ns as f64 / 1000.0
            );
        }
    }
    o
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

fn json_num(v: f64) -> String {
    if v.is_finite() {
        format!("{}", (v * 1000.0).round() / 1000.0)
    } else {
        "null".into()
    }
}

fn json_latency(l: &Latency) -> String {
    format!(
        "{{\"count\": {}, \"min\": {}, \"mean\": {}, \"p50\": {}, \"p90\": {}, \"p99\": {}, \"p99_9\": {}, \"max\": {}}}",
        l.count,
        json_num(l.min),
        json_num(l.mean),
        json_num(l.p50),
        json_num(l.p90),
        json_num(l.p99),
        json_num(l.p999),
        json_num(l.max)
    )
}

/// Every figure, the timeline and the parameters, as JSON.
pub fn to_json(plan: &Plan, r: &Report) -> String {
    let s = &r.stats;
    let a = &plan.args;
    let per = |n: u64| if r.elapsed > 0.0 { n as f64 / r.elapsed } else { 0.0 };
    let mut o = String::from("{\n");
    let _ = writeln!(
        o,
        "  \"params\": {{\"protocol\": {}, \"server\": {}, \"port\": {}, \"segment\": {}, \"threads\": {}, \"clients\": {}, \"connections\": {}, \"pipeline\": {}, \"ratio\": {}, \"data_size\": {}, \"key_prefix\": {}, \"key_min\": {}, \"key_max\": {}, \"key_pattern\": {}, \"key_len\": {}, \"requests\": {}, \"duration\": {}, \"warmup\": {}, \"multiget\": {}, \"verify\": {}, \"interval_ms\": {}, \"seed\": {}}},",
        json_str(&a.protocol),
        json_str(&a.server),
        plan.addr.map_or("null".into(), |x| x.port().to_string()),
        plan.segment.as_deref().map_or("null".into(), json_str),
        plan.threads,
        plan.clients,
        plan.conns(),
        plan.pipeline,
        json_str(&a.ratio),
        json_str(&a.data_size),
        json_str(&a.key_prefix),
        a.key_min,
        a.key_max,
        json_str(&a.key_pattern),
        a.key_len,
        plan.gen.requests.map_or("null".into(), |n| n.to_string()),
        plan.duration.map_or("null".into(), json_num),
        json_num(plan.warmup),
        plan.multiget,
        plan.verify,
        plan.interval_ms,
        a.seed
    );
    let _ = writeln!(
        o,
        "  \"ops\": {}, \"sets\": {}, \"reads\": {}, \"keys_read\": {}, \"hits\": {}, \"misses\": {}, \"errors\": {}, \"verify_failures\": {},",
        s.ops(),
        s.sets,
        s.gets,
        s.get_keys,
        s.hits,
        s.misses,
        s.errors,
        s.verify_failures
    );
    let _ = writeln!(
        o,
        "  \"elapsed_s\": {}, \"ops_per_sec\": {}, \"sets_per_sec\": {}, \"reads_per_sec\": {}, \"keys_read_per_sec\": {}, \"bytes_sent\": {}, \"bytes_received\": {},",
        json_num(r.elapsed),
        json_num(r.ops_per_sec()),
        json_num(per(s.sets)),
        json_num(per(s.gets)),
        json_num(per(s.get_keys)),
        s.bytes_sent,
        s.bytes_received
    );
    let _ = writeln!(
        o,
        "  \"latency_us\": {{\"all\": {}, \"set\": {}, \"read\": {}}},",
        json_latency(&Latency::of(&s.all_hist())),
        json_latency(&Latency::of(&s.set_hist)),
        json_latency(&Latency::of(&s.get_hist))
    );
    let _ = writeln!(
        o,
        "  \"first_errors\": [{}],",
        s.first_errors.iter().map(|e| json_str(e)).collect::<Vec<_>>().join(", ")
    );
    let secs = plan.interval_ms as f64 / 1000.0;
    let tl: Vec<String> = s
        .timeline
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let mean = if b.ops > 0 { b.lat_sum_ns as f64 / b.ops as f64 / 1000.0 } else { 0.0 };
            format!(
                "{{\"t\": {}, \"ops\": {}, \"ops_per_sec\": {}, \"sets\": {}, \"reads\": {}, \"mean_us\": {}, \"max_us\": {}}}",
                json_num(i as f64 * secs),
                b.ops,
                json_num(b.ops as f64 / secs),
                b.sets,
                b.gets,
                json_num(mean),
                json_num(b.lat_max_ns as f64 / 1000.0)
            )
        })
        .collect();
    let _ = writeln!(o, "  \"timeline\": [\n    {}\n  ]", tl.join(",\n    "));
    o.push_str("}\n");
    o
}
