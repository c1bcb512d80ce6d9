//! `larder bench-engine`: figures for the engine alone (no network): GET/SET latency in one
//! process and from a second process attached to the same named segment, insert throughput
//! and concurrent read latency while the keyspace grows, memory per key, and fragmentation
//! under churn.
//!
//! The second process is this same binary re-executed (`std::env::current_exe()`) as
//! `larder bench-engine --child-attach NAME --child-mode ops|reader ...`; it prints its results
//! as one JSON line on stdout, which the parent parses.
//!
//! Every segment it creates is named `bench-<pid>-<what>` (`/dev/shm/larder-bench-*`) and
//! unlinked when the phase ends, also on error.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use larder_engine::{Arena, ArenaConfig, Backing, Handle, SetOptions, Store, StoreConfig, PREFETCH_GROUP};

/// The subcommand this module is wired under in `main.rs` (used to re-execute ourselves).
pub const SUBCOMMAND: &str = "bench-engine";

const ALL_PHASES: [&str; 7] = ["get", "set", "remote", "grow", "memory", "churn", "colls"];
const VALUE32: &[u8; 32] = b"0123456789abcdef0123456789ABCDEF";
/// Ops per timed batch.
const BATCH: usize = 64;
/// Keys the growth reader reads (inserted before it starts).
const GROW_READ_KEYS: u64 = 100_000;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Keys preloaded for the get/set/remote runs, comma separated: each count is a run of
    /// its own (10k keys fit in this machine's caches, 100k about fill its share of them).
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    pub keys: Vec<u64>,
    /// Operations per get/set run.
    #[arg(long, default_value_t = 1_000_000)]
    pub ops: u64,
    /// Keys inserted by the growth run.
    #[arg(long, default_value_t = 10_000_000)]
    pub grow_keys: u64,
    /// The growth run inserts its keys in groups of this many, each group's buckets and items
    /// prefetched before its sets (`Handle::prefetch_group`, as the server runs a pipeline or
    /// an MSET); 1: one key at a time, each set waiting on its own cache misses.
    #[arg(long, default_value_t = 1)]
    pub grow_batch: u64,
    /// Keys inserted by the memory-per-key run.
    #[arg(long, default_value_t = 1_000_000)]
    pub memory_keys: u64,
    /// Live keys (on average) during the churn run.
    #[arg(long, default_value_t = 200_000)]
    pub churn_keys: u64,
    /// Seconds of churn.
    #[arg(long, default_value_t = 5.0)]
    pub churn_secs: f64,
    /// Phases to run, comma separated: get,set,remote,grow,memory,churn,colls.
    #[arg(long, value_delimiter = ',', default_value = "get,set,remote,grow,memory,churn,colls")]
    pub only: Vec<String>,
    /// Also write every figure to this file as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print the growth run's figures of every 100 ms window: inserts, keys moved by splits
    /// per insert, and the steady run's overwrites.
    #[arg(long)]
    pub print_windows: bool,
    /// Don't pin the processes to cores with `taskset`.
    #[arg(long)]
    pub no_pin: bool,
    /// (internal) Run as the second process, attached to this named segment.
    #[arg(long, hide = true)]
    pub child_attach: Option<String>,
    /// (internal) What the second process does: `ops` or `reader`.
    #[arg(long, hide = true, default_value = "ops")]
    pub child_mode: String,
}

pub fn run(args: &Args) -> Result<(), String> {
    if let Some(name) = &args.child_attach {
        return child_main(args, name);
    }
    for p in &args.only {
        if !ALL_PHASES.contains(&p.as_str()) {
            return Err(format!("unknown phase {p:?} (expected some of {})", ALL_PHASES.join(",")));
        }
    }
    let want = |p: &str| args.only.iter().any(|x| x == p);
    let mut out = Report::default();
    println!(
        "larder bench-engine: keys={:?} ops={} grow-keys={} memory-keys={} churn-keys={} ({} cpus)",
        args.keys,
        args.ops,
        args.grow_keys,
        args.memory_keys,
        args.churn_keys,
        ncpus()
    );
    let timer = timer_overhead_ns();
    out.num("timer_overhead_ns", timer);
    println!("(Instant::now() pair costs ~{timer:.0} ns; it is included in the single-op figures)");
    let huge = Segment::create("probe", 64 << 20)?.1.arena().huge_pages();
    out.num("huge_pages", f64::from(u8::from(huge)));
    if huge {
        println!("(segments are in 2 MiB pages: /dev/shm allows transparent huge pages)");
    } else {
        println!("(segments are in 4 KiB pages: /dev/shm is mounted without huge=; see the README's \"Huge pages\")");
    }
    if want("get") || want("set") || want("remote") {
        for &keys in &args.keys {
            phase_ops(args, keys.max(1), &want, &mut out)?;
        }
    }
    if want("grow") {
        phase_grow(args, &mut out)?;
    }
    if want("memory") {
        phase_memory(args, &mut out)?;
    }
    if want("churn") {
        phase_churn(args, &mut out)?;
    }
    if want("colls") {
        phase_colls(&mut out)?;
    }
    if !out.targets.is_empty() {
        println!("\ntargets");
        for (name, ok, detail) in &out.targets {
            println!("  {:<5} {name:<44} {detail}", if *ok { "MET" } else { "MISS" });
        }
    }
    if let Some(path) = &args.json {
        std::fs::write(path, out.to_json()).map_err(|e| format!("writing {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Results

/// Flat figures (dotted names) plus the target verdicts.
#[derive(Default)]
struct Report {
    figures: BTreeMap<String, f64>,
    targets: Vec<(String, bool, String)>,
}

impl Report {
    fn num(&mut self, name: &str, v: f64) {
        self.figures.insert(name.to_string(), v);
    }

    fn target(&mut self, name: &str, ok: bool, detail: String) {
        self.targets.push((name.to_string(), ok, detail));
    }

    fn to_json(&self) -> String {
        let mut s = String::from("{\n  \"figures\": {");
        for (i, (k, v)) in self.figures.iter().enumerate() {
            let _ = write!(s, "{}\n    \"{}\": {}", if i > 0 { "," } else { "" }, k, json_num(*v));
        }
        s.push_str("\n  },\n  \"targets\": [");
        for (i, (name, ok, detail)) in self.targets.iter().enumerate() {
            let _ = write!(
                s,
                "{}\n    {{\"name\": \"{}\", \"met\": {}, \"detail\": \"{}\"}}",
                if i > 0 { "," } else { "" },
                json_escape(name),
                ok,
                json_escape(detail)
            );
        }
        s.push_str("\n  ]\n}\n");
        s
    }
}

fn json_num(v: f64) -> String {
    if !v.is_finite() {
        "null".into()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.3}")
    }
}

fn json_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c if (c as u32) < 0x20 => vec![' '],
            c => vec![c],
        })
        .collect()
}

/// A flat JSON object of numbers, as the child prints it.
fn flat_json(m: &BTreeMap<String, f64>) -> String {
    let body: Vec<String> = m.iter().map(|(k, v)| format!("\"{}\":{}", json_escape(k), json_num(*v))).collect();
    format!("{{{}}}", body.join(","))
}

fn parse_flat_json(line: &str) -> Result<BTreeMap<String, f64>, String> {
    let body =
        line.trim().strip_prefix('{').and_then(|s| s.strip_suffix('}')).ok_or("child output is not a JSON object")?;
    let mut m = BTreeMap::new();
    for kv in body.split(',').filter(|s| !s.trim().is_empty()) {
        let (k, v) = kv.split_once(':').ok_or_else(|| format!("bad child field {kv:?}"))?;
        let k = k.trim().trim_matches('"').to_string();
        let v = match v.trim() {
            "null" => f64::NAN,
            v => v.parse().map_err(|_| format!("bad child number {v:?}"))?,
        };
        m.insert(k, v);
    }
    Ok(m)
}

/// Latency figures of one op kind.
#[derive(Clone, Debug, Default)]
struct OpStats {
    /// Median and p99 over batches of the batch mean (ns/op).
    batch_p50: f64,
    batch_p99: f64,
    /// Single timed ops (timer included).
    single_p50: f64,
    single_p99: f64,
    single_p999: f64,
    single_max: f64,
    ops_per_sec: f64,
}

impl OpStats {
    fn put(&self, m: &mut BTreeMap<String, f64>, prefix: &str) {
        // A run that timed no single ops (grouped) has no single-op figures to give.
        let singles = self.single_max > 0.0;
        for (k, v, always) in [
            ("batch_p50_ns", self.batch_p50, true),
            ("batch_p99_ns", self.batch_p99, true),
            ("single_p50_ns", self.single_p50, singles),
            ("single_p99_ns", self.single_p99, singles),
            ("single_p999_ns", self.single_p999, singles),
            ("single_max_ns", self.single_max, singles),
            ("ops_per_sec", self.ops_per_sec, true),
        ] {
            if always {
                m.insert(format!("{prefix}.{k}"), v);
            }
        }
    }

    fn get(m: &BTreeMap<String, f64>, prefix: &str) -> Result<OpStats, String> {
        let f = |k: &str| {
            m.get(&format!("{prefix}.{k}")).copied().ok_or_else(|| format!("child output lacks {prefix}.{k}"))
        };
        Ok(OpStats {
            batch_p50: f("batch_p50_ns")?,
            batch_p99: f("batch_p99_ns")?,
            single_p50: f("single_p50_ns")?,
            single_p99: f("single_p99_ns")?,
            single_p999: f("single_p999_ns")?,
            single_max: f("single_max_ns")?,
            ops_per_sec: f("ops_per_sec")?,
        })
    }

    fn row(&self, op: &str, place: &str) {
        // A run that timed no single ops (empty histogram) shows dashes there.
        let single =
            |v: f64, w: usize| if self.single_max > 0.0 { format!("{v:>w$.0}") } else { format!("{:>w$}", "-") };
        println!(
            "  {op:<7} {place:<7} {:>9.1} {:>9.1} {} {} {} {} {:>10.2}",
            self.batch_p50,
            self.batch_p99,
            single(self.single_p50, 11),
            single(self.single_p99, 9),
            single(self.single_p999, 9),
            single(self.single_max, 9),
            self.ops_per_sec / 1e6
        );
    }
}

fn print_ops_header() {
    println!(
        "  {:<7} {:<7} {:>9} {:>9} {:>11} {:>9} {:>9} {:>9} {:>10}",
        "op", "where", "batch p50", "batch p99", "single p50", "p99", "p99.9", "max", "Mops/s"
    );
    println!("  {:<15} {:>19} {:>41} {:>10}", "", "(ns/op, mean of 64)", "(ns, one op timed, timer included)", "");
}

// ---------------------------------------------------------------------------------------------
// Helpers

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Writes `key:NNNNNNN` (at least 7 digits) into `buf` and returns it.
#[inline]
fn fmt_key(prefix: &[u8], i: u64, buf: &mut [u8; 32]) -> usize {
    let p = prefix.len();
    buf[..p].copy_from_slice(prefix);
    let mut digits = [0u8; 20];
    let mut n = 0;
    let mut v = i;
    while v > 0 || n < 7 {
        digits[n] = b'0' + (v % 10) as u8;
        v /= 10;
        n += 1;
    }
    for j in 0..n {
        buf[p + j] = digits[n - 1 - j];
    }
    p + n
}

fn key_of(i: u64) -> Vec<u8> {
    let mut b = [0u8; 32];
    let n = fmt_key(b"key:", i, &mut b);
    b[..n].to_vec()
}

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    #[inline]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in 0..n (n > 0).
    #[inline]
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() as u128 * n as u128) >> 64) as u64
    }
}

fn seed() -> u64 {
    let t =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
    t ^ (std::process::id() as u64).rotate_left(40)
}

fn hist() -> Histogram<u64> {
    Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("histogram bounds")
}

/// Per-window rates: (median, minimum, deepest dip in % below the median, windows more
/// than 10% below it).
fn window_dips(rates: &[f64]) -> (f64, f64, f64, usize) {
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    let med = percentile(&sorted, 0.5);
    let min = sorted.first().copied().unwrap_or(f64::NAN);
    (med, min, (med - min) / med * 100.0, rates.iter().filter(|&&x| x < 0.9 * med).count())
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn timer_overhead_ns() -> f64 {
    let mut v: Vec<f64> = (0..10_001)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(&t);
            t.elapsed().as_nanos() as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// This machine's cost of one random memory read over `bytes` of memory: a chain of
/// dependent loads, one per cache line, in a random cycle over the whole buffer (Sattolo's
/// shuffle), so every load waits for the one before and none is prefetched. Median over
/// seven rounds, in ns per load.
///
/// A get is two such reads, the key's bucket and then its item, so beside the get figures
/// this says how much of a get the machine's memory sets, at the working set's size: the
/// same engine gives very different figures on hosts whose caches (or cache share, on a
/// VM) differ.
fn random_read_ns(bytes: u64) -> f64 {
    const LINE: usize = 16; // u32 words per 64-byte line
    let lines = ((bytes as usize) / 64).max(2);
    let mut next = vec![0u32; lines * LINE];
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut rng = Rng::new(seed());
    for i in (1..lines).rev() {
        order.swap(i, rng.below(i as u64) as usize);
    }
    for w in 0..lines {
        next[order[w] as usize * LINE] = order[(w + 1) % lines] * LINE as u32;
    }
    let steps = (lines * 2).clamp(1 << 20, 1 << 23);
    let mut i = 0usize;
    for _ in 0..lines {
        i = next[i] as usize;
    }
    let mut rounds: Vec<f64> = (0..7)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..steps {
                i = next[i] as usize;
            }
            t.elapsed().as_nanos() as f64 / steps as f64
        })
        .collect();
    std::hint::black_box(i);
    rounds.sort_by(f64::total_cmp);
    percentile(&rounds, 0.5)
}

/// A named segment, unlinked when dropped.
struct Segment {
    name: String,
}

impl Segment {
    fn name(what: &str) -> String {
        format!("bench-{}-{what}", std::process::id())
    }

    fn create(what: &str, capacity: u64) -> Result<(Segment, Store), String> {
        let name = Self::name(what);
        // A leftover from an earlier run of the same pid would be attached to, not created.
        let _ = Arena::unlink(&name);
        let store = Store::open(StoreConfig {
            backing: Backing::Named(name.clone()),
            arena: ArenaConfig { capacity, max_participants: 16 },
            databases: 1,
        })
        .map_err(err("creating the bench segment"))?;
        Ok((Segment { name }, store))
    }

    fn resident_bytes(&self) -> Result<u64, String> {
        let path = Arena::shm_path(&self.name).map_err(err("segment path"))?;
        let md = std::fs::metadata(&path).map_err(err("stat of the segment"))?;
        Ok(md.blocks() * 512)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        let _ = Arena::unlink(&self.name);
    }
}

/// A child process, killed if still running when dropped.
struct ChildProc {
    child: Child,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

impl ChildProc {
    fn spawn(args: &Args, name: &str, mode: &str, extra: &[String]) -> Result<ChildProc, String> {
        let exe = std::env::current_exe().map_err(err("current_exe"))?;
        let mut cmd = match (args.no_pin, taskset()) {
            (false, Some(ts)) => {
                let mut c = Command::new(ts);
                c.arg("-c").arg(other_cpu()).arg(exe);
                c
            }
            _ => Command::new(exe),
        };
        cmd.arg(SUBCOMMAND).arg("--child-attach").arg(name).arg("--child-mode").arg(mode).args(extra);
        cmd.stdout(Stdio::piped()).stderr(Stdio::inherit()).stdin(Stdio::null());
        let mut child = cmd.spawn().map_err(err("spawning the second process"))?;
        let stdout = child.stdout.take().ok_or("no child stdout")?;
        Ok(ChildProc { child, lines: BufReader::new(stdout).lines() })
    }

    /// The child's JSON result line (it prints exactly one line starting with `{`).
    fn result(mut self) -> Result<BTreeMap<String, f64>, String> {
        let mut found = None;
        for line in self.lines.by_ref() {
            let line = line.map_err(err("reading the child's output"))?;
            if line.starts_with('{') {
                found = Some(line);
            }
        }
        let status = self.child.wait().map_err(err("waiting for the child"))?;
        if !status.success() {
            return Err(format!("second process failed: {status}"));
        }
        parse_flat_json(&found.ok_or("second process printed no result")?)
    }

    fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for ChildProc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn taskset() -> Option<&'static str> {
    ["/usr/bin/taskset", "/bin/taskset"].into_iter().find(|p| std::path::Path::new(p).exists())
}

/// CPUs this process may use, as first seen (before it pins itself to one).
fn ncpus() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

/// The core the second process runs on (the parent's hot thread goes on core 0).
fn other_cpu() -> String {
    if ncpus() > 1 { "1" } else { "0" }.to_string()
}

/// Pins (or unpins, with `None`) this whole process; returns the previous affinity list.
fn pin_self(cpus: Option<&str>) -> Option<String> {
    let ts = taskset()?;
    let pid = std::process::id().to_string();
    let prev = Command::new(ts).args(["-p", "-c", &pid]).stderr(Stdio::null()).output().ok()?;
    let prev = String::from_utf8_lossy(&prev.stdout).rsplit(':').next()?.trim().to_string();
    if let Some(c) = cpus {
        Command::new(ts).args(["-a", "-p", "-c", c, &pid]).stdout(Stdio::null()).stderr(Stdio::null()).status().ok()?;
    }
    Some(prev)
}

fn unpin_self(prev: Option<String>) {
    if let (Some(prev), Some(ts)) = (prev, taskset()) {
        let pid = std::process::id().to_string();
        let _ =
            Command::new(ts).args(["-a", "-p", "-c", &prev, &pid]).stdout(Stdio::null()).stderr(Stdio::null()).status();
    }
}

fn preload(h: &mut Handle, from: u64, to: u64, value: &[u8]) -> Result<(), String> {
    let opt = SetOptions::default();
    let mut buf = [0u8; 32];
    for i in from..=to {
        let n = fmt_key(b"key:", i, &mut buf);
        h.set(0, &buf[..n], value, &opt).map_err(err("preload set"))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// get / set (local and from a second process)

/// Keys of one timed batch, formatted before the timer starts (a random pick from a
/// pre-built table would add a cache miss of its own to every op).
struct BatchKeys {
    keys: [[u8; 16]; BATCH],
    lens: [u8; BATCH],
}

impl BatchKeys {
    fn new() -> BatchKeys {
        BatchKeys { keys: [[0; 16]; BATCH], lens: [0; BATCH] }
    }

    /// Fills the batch with random keys among `key:1..=n`.
    #[inline]
    fn fill(&mut self, rng: &mut Rng, n: u64) {
        let mut buf = [0u8; 32];
        for j in 0..BATCH {
            let l = fmt_key(b"key:", 1 + rng.below(n), &mut buf);
            self.keys[j][..l].copy_from_slice(&buf[..l]);
            self.lens[j] = l as u8;
        }
    }

    #[inline]
    fn key(&self, j: usize) -> &[u8] {
        &self.keys[j][..self.lens[j] as usize]
    }
}

fn bench_get(h: &Handle, keys: u64, ops: u64) -> Result<OpStats, String> {
    let mut rng = Rng::new(seed());
    let mut out = Vec::with_capacity(256);
    let mut misses = 0u64;
    let mut b = BatchKeys::new();
    let batches = (ops as usize / BATCH).max(1);
    // Warm up.
    for _ in 0..batches.min(2000) {
        b.fill(&mut rng, keys);
        for j in 0..BATCH {
            out.clear();
            h.get_into(0, b.key(j), &mut out).map_err(err("get"))?;
        }
    }
    let mut means = Vec::with_capacity(batches);
    let mut busy = Duration::ZERO;
    for _ in 0..batches {
        b.fill(&mut rng, keys);
        let t = Instant::now();
        for j in 0..BATCH {
            out.clear();
            if h.get_into(0, b.key(j), &mut out).map_err(err("get"))?.is_none() {
                misses += 1;
            }
        }
        let el = t.elapsed();
        busy += el;
        means.push(el.as_nanos() as f64 / BATCH as f64);
    }
    let mut hs = hist();
    for _ in 0..batches {
        b.fill(&mut rng, keys);
        for j in 0..BATCH {
            out.clear();
            let t = Instant::now();
            let r = h.get_into(0, b.key(j), &mut out);
            let ns = t.elapsed().as_nanos() as u64;
            if r.map_err(err("get"))?.is_none() {
                misses += 1;
            }
            hs.saturating_record(ns.max(1));
        }
    }
    if misses > 0 {
        return Err(format!("get: {misses} preloaded keys were missing"));
    }
    Ok(finish_stats(means, &hs, (batches * BATCH) as f64 / busy.as_secs_f64()))
}

/// Keys looked up together by [`bench_grouped`], as a pipeline's or an MGET's are.
const GROUP: usize = PREFETCH_GROUP;

/// Gets (or sets) of random keys as [`bench_get`] and [`bench_set`] do, but [`GROUP`] at
/// a time the way the server runs a pipeline's requests: every key's bucket prefetched,
/// then every item, then the operations. One key's lookup is two dependent cache misses; a
/// group's overlap. Only batch means: a group's operations are not timed one by one.
fn bench_grouped(h: &mut Handle, keys: u64, ops: u64, set: bool) -> Result<OpStats, String> {
    const _: () = assert!(BATCH.is_multiple_of(GROUP));
    let mut rng = Rng::new(seed());
    let mut out = Vec::with_capacity(256);
    let opt = SetOptions::default();
    let mut b = BatchKeys::new();
    let batches = (ops as usize / BATCH).max(1);
    let mut run = |h: &mut Handle, b: &BatchKeys| -> Result<u64, String> {
        let mut misses = 0;
        for g in (0..BATCH).step_by(GROUP) {
            h.prefetch_group(0, (g..g + GROUP).map(|j| b.key(j)));
            for j in g..g + GROUP {
                if set {
                    h.set(0, b.key(j), VALUE32, &opt).map_err(err("set"))?;
                } else {
                    out.clear();
                    if h.get_into(0, b.key(j), &mut out).map_err(err("get"))?.is_none() {
                        misses += 1;
                    }
                }
            }
        }
        Ok(misses)
    };
    for _ in 0..batches.min(2000) {
        b.fill(&mut rng, keys);
        run(h, &b)?;
    }
    let mut means = Vec::with_capacity(batches);
    let mut busy = Duration::ZERO;
    let mut misses = 0u64;
    for _ in 0..batches {
        b.fill(&mut rng, keys);
        let t = Instant::now();
        misses += run(h, &b)?;
        let el = t.elapsed();
        busy += el;
        means.push(el.as_nanos() as f64 / BATCH as f64);
    }
    if misses > 0 {
        return Err(format!("get: {misses} preloaded keys were missing"));
    }
    Ok(finish_stats(means, &hist(), (batches * BATCH) as f64 / busy.as_secs_f64()))
}

fn bench_set(h: &mut Handle, keys: u64, ops: u64) -> Result<OpStats, String> {
    let mut rng = Rng::new(seed());
    let opt = SetOptions::default();
    let mut b = BatchKeys::new();
    let batches = (ops as usize / BATCH).max(1);
    for _ in 0..batches.min(2000) {
        b.fill(&mut rng, keys);
        for j in 0..BATCH {
            h.set(0, b.key(j), VALUE32, &opt).map_err(err("set"))?;
        }
    }
    let mut means = Vec::with_capacity(batches);
    let mut busy = Duration::ZERO;
    for _ in 0..batches {
        b.fill(&mut rng, keys);
        let t = Instant::now();
        for j in 0..BATCH {
            h.set(0, b.key(j), VALUE32, &opt).map_err(err("set"))?;
        }
        let el = t.elapsed();
        busy += el;
        means.push(el.as_nanos() as f64 / BATCH as f64);
    }
    let mut hs = hist();
    for _ in 0..batches {
        b.fill(&mut rng, keys);
        for j in 0..BATCH {
            let t = Instant::now();
            let r = h.set(0, b.key(j), VALUE32, &opt);
            let ns = t.elapsed().as_nanos() as u64;
            r.map_err(err("set"))?;
            hs.saturating_record(ns.max(1));
        }
    }
    Ok(finish_stats(means, &hs, (batches * BATCH) as f64 / busy.as_secs_f64()))
}

fn finish_stats(mut means: Vec<f64>, hs: &Histogram<u64>, ops_per_sec: f64) -> OpStats {
    means.sort_by(f64::total_cmp);
    OpStats {
        batch_p50: percentile(&means, 0.5),
        batch_p99: percentile(&means, 0.99),
        single_p50: hs.value_at_quantile(0.5) as f64,
        single_p99: hs.value_at_quantile(0.99) as f64,
        single_p999: hs.value_at_quantile(0.999) as f64,
        single_max: hs.max() as f64,
        ops_per_sec,
    }
}

fn phase_ops(args: &Args, keys: u64, want: &dyn Fn(&str) -> bool, out: &mut Report) -> Result<(), String> {
    eprintln!("[ops] preloading {keys} keys into a named segment");
    let (seg, store) = Segment::create("ops", 1 << 30)?;
    let mut h = store.handle().map_err(err("handle"))?;
    preload(&mut h, 1, keys, VALUE32)?;
    let resident = seg.resident_bytes()?;
    let read_ns = random_read_ns(resident);
    let cached_ns = random_read_ns(256 << 10);
    let at = format!("keys{keys}");
    out.num(&format!("{at}.segment_resident_bytes"), resident as f64);
    out.num(&format!("{at}.random_read_ns"), read_ns);
    out.num(&format!("{at}.random_read_256k_ns"), cached_ns);
    println!("\nget/set, 32-byte values, {} random keys of {keys}, {} ops each", args.ops, args.ops);
    println!(
        "(the segment holds {:.1} MiB; a random read over as much plain memory costs {read_ns:.1} ns here, \
         over 256 KiB {cached_ns:.1} ns)",
        resident as f64 / (1u64 << 20) as f64
    );
    print_ops_header();
    let mut m = BTreeMap::new();
    let mut local_get = None;
    let mut local_set = None;
    let (mut grouped_get, mut grouped_set) = (None, None);
    if want("get") {
        eprintln!("[ops] local get");
        let s = bench_get(&h, keys, args.ops)?;
        s.row("get", "local");
        s.put(&mut m, "local.get");
        local_get = Some(s);
        eprintln!("[ops] local get, {GROUP} at a time");
        let s = bench_grouped(&mut h, keys, args.ops, false)?;
        s.row(&format!("get x{GROUP}"), "local");
        s.put(&mut m, "local.get_grouped");
        grouped_get = Some(s);
    }
    if want("set") {
        eprintln!("[ops] local set");
        let s = bench_set(&mut h, keys, args.ops)?;
        s.row("set", "local");
        s.put(&mut m, "local.set");
        local_set = Some(s);
        eprintln!("[ops] local set, {GROUP} at a time");
        let s = bench_grouped(&mut h, keys, args.ops, true)?;
        s.row(&format!("set x{GROUP}"), "local");
        s.put(&mut m, "local.set_grouped");
        grouped_set = Some(s);
    }
    let mut remote = None;
    if want("remote") {
        eprintln!("[ops] second process (attach {})", seg.name);
        let child = ChildProc::spawn(
            args,
            &seg.name,
            "ops",
            &["--keys".into(), keys.to_string(), "--ops".into(), args.ops.to_string()],
        )?;
        let r = child.result()?;
        let g = OpStats::get(&r, "get")?;
        let s = OpStats::get(&r, "set")?;
        g.row("get", "remote");
        s.row("set", "remote");
        g.put(&mut m, "remote.get");
        s.put(&mut m, "remote.set");
        remote = Some((g, s));
    }
    for (k, v) in m {
        out.num(&format!("{at}.{k}"), v);
    }
    let verdict = |out: &mut Report, what: &str, s: &OpStats, limit: f64| {
        out.target(
            &format!("{what} median < {limit:.0} ns ({}k keys)", keys / 1000),
            s.batch_p50 < limit,
            format!("{:.1} ns (batch mean median; {:.2} random reads)", s.batch_p50, s.batch_p50 / read_ns),
        );
    };
    if let Some(s) = &local_get {
        verdict(out, "get local", s, 100.0);
    }
    if let Some(s) = &local_set {
        verdict(out, "set local", s, 200.0);
    }
    if let Some((g, s)) = &remote {
        verdict(out, "get remote", g, 100.0);
        verdict(out, "set remote", s, 200.0);
    }
    // The same targets for operations run as a pipeline's are: the misses of a group
    // overlap, so out of cache a get costs a fraction of a random read.
    if let Some(s) = &grouped_get {
        verdict(out, &format!("get x{GROUP} local"), s, 100.0);
    }
    if let Some(s) = &grouped_set {
        verdict(out, &format!("set x{GROUP} local"), s, 200.0);
    }
    drop(h);
    drop(store);
    drop(seg);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The second process

fn child_main(args: &Args, name: &str) -> Result<(), String> {
    let store = Store::attach(name).map_err(err("attaching"))?;
    let mut h = store.handle().map_err(err("handle"))?;
    let mut m = BTreeMap::new();
    match args.child_mode.as_str() {
        "ops" => {
            let keys = args.keys.first().copied().unwrap_or(1).max(1);
            bench_get(&h, keys, args.ops)?.put(&mut m, "get");
            bench_set(&mut h, keys, args.ops)?.put(&mut m, "set");
        }
        "reader" => child_reader(&mut h, args.keys.first().copied().unwrap_or(1).max(1), &mut m)?,
        other => return Err(format!("unknown child mode {other:?}")),
    }
    drop(h);
    println!("{}", flat_json(&m));
    Ok(())
}

/// Random gets of `key:1..=keys` (90%) and of keys that don't exist (10%), every one timed,
/// until the parent sets `bench:stop`.
fn child_reader(h: &mut Handle, keys: u64, m: &mut BTreeMap<String, f64>) -> Result<(), String> {
    let mut rng = Rng::new(seed());
    let mut hs = hist();
    let mut out = Vec::with_capacity(256);
    let mut buf = [0u8; 32];
    let (mut hits, mut misses, mut lost, mut over_10us, mut over_100us) = (0u64, 0u64, 0u64, 0u64, 0u64);
    h.set(0, b"bench:ready", b"1", &SetOptions::default()).map_err(err("set ready"))?;
    let (vol0, invol0) = ctx_switches();
    let start = Instant::now();
    'outer: loop {
        for _ in 0..1024 {
            let miss = rng.below(10) == 0;
            let n = if miss {
                fmt_key(b"nokey:", rng.below(keys), &mut buf)
            } else {
                fmt_key(b"key:", 1 + rng.below(keys), &mut buf)
            };
            out.clear();
            let t = Instant::now();
            let got = h.get_into(0, &buf[..n], &mut out);
            let ns = t.elapsed().as_nanos() as u64;
            let got = got.map_err(err("get"))?;
            hs.saturating_record(ns.max(1));
            over_10us += (ns > 10_000) as u64;
            over_100us += (ns > 100_000) as u64;
            match (miss, got.is_some()) {
                (false, true) => hits += 1,
                (false, false) => lost += 1,
                (true, _) => misses += 1,
            }
        }
        out.clear();
        if h.get_into(0, b"bench:stop", &mut out).map_err(err("get stop"))?.is_some() {
            break 'outer;
        }
        if start.elapsed() > Duration::from_secs(600) {
            return Err("reader: no stop signal after 10 minutes".into());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let (vol1, invol1) = ctx_switches();
    for (k, v) in [
        ("voluntary_switches", vol1.saturating_sub(vol0) as f64),
        ("involuntary_switches", invol1.saturating_sub(invol0) as f64),
        ("p50_ns", hs.value_at_quantile(0.5) as f64),
        ("p99_ns", hs.value_at_quantile(0.99) as f64),
        ("p999_ns", hs.value_at_quantile(0.999) as f64),
        ("p9999_ns", hs.value_at_quantile(0.9999) as f64),
        ("max_ns", hs.max() as f64),
        ("mean_ns", hs.mean()),
        ("reads", hs.len() as f64),
        ("hits", hits as f64),
        ("misses", misses as f64),
        ("lost", lost as f64),
        ("over_10us", over_10us as f64),
        ("over_100us", over_100us as f64),
        ("secs", secs),
    ] {
        m.insert(k.to_string(), v);
    }
    Ok(())
}

/// This process's (voluntary, involuntary) context switches so far, from /proc (0s if absent).
fn ctx_switches() -> (u64, u64) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field =
        |name: &str| s.lines().find_map(|l| l.strip_prefix(name)).and_then(|v| v.trim().parse().ok()).unwrap_or(0);
    (field("voluntary_ctxt_switches:"), field("nonvoluntary_ctxt_switches:"))
}

// ---------------------------------------------------------------------------------------------
// Growth

fn phase_grow(args: &Args, out: &mut Report) -> Result<(), String> {
    let n = args.grow_keys.max(GROW_READ_KEYS + 1);
    println!(
        "\ngrowth: insert {n} keys (32-byte values) from one thread, {} at a time; another process reads meanwhile",
        args.grow_batch.clamp(1, larder_engine::PREFETCH_GROUP as u64)
    );
    let (seg, store) = Segment::create("grow", 4 << 30)?;
    let mut h = store.handle().map_err(err("handle"))?;
    preload(&mut h, 1, GROW_READ_KEYS, VALUE32)?;
    let prev_affinity = if args.no_pin { None } else { pin_self(Some("0")) };
    let r = grow_inner(args, &seg, &mut h, n, out);
    unpin_self(prev_affinity);
    drop(h);
    drop(store);
    drop(seg);
    r
}

fn grow_inner(args: &Args, seg: &Segment, h: &mut Handle, n: u64, out: &mut Report) -> Result<(), String> {
    let mut child = ChildProc::spawn(args, &seg.name, "reader", &["--keys".into(), GROW_READ_KEYS.to_string()])?;
    let t0 = Instant::now();
    let mut tmp = Vec::new();
    while h.get_into(0, b"bench:ready", &mut tmp).map_err(err("get ready"))?.is_none() {
        if child.exited() || t0.elapsed() > Duration::from_secs(30) {
            return Err("the reader process did not start".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!("[grow] reader attached; inserting keys {}..={n}", GROW_READ_KEYS + 1);
    let opt = SetOptions::default();
    let window = Duration::from_millis(100);
    let mut rates: Vec<f64> = Vec::new();
    // Keys that splits moved, per key inserted, in each window: the growth work itself,
    // free of the machine's timing noise.
    let mut moved: Vec<f64> = Vec::new();
    // The share of each window spent inside splits, and the window's rate with that time
    // taken out: if growth came in waves, the share would jump in the windows that dip;
    // if the rate without splits dips as deep, the dip is not growth's doing.
    let mut split_share: Vec<f64> = Vec::new();
    let mut rates_ex: Vec<f64> = Vec::new();
    let splits_start = larder_engine::split_totals();
    let mut splits_before = splits_start;
    let mut buf = [0u8; 32];
    let start = Instant::now();
    let mut w_start = start;
    let mut w_count = 0u64;
    let mut last_progress = start;
    let batch = args.grow_batch.clamp(1, larder_engine::PREFETCH_GROUP as u64);
    let mut group = [[0u8; 32]; larder_engine::PREFETCH_GROUP];
    let mut group_len = [0usize; larder_engine::PREFETCH_GROUP];
    for i in GROW_READ_KEYS + 1..=n {
        if batch > 1 && (i - GROW_READ_KEYS - 1).is_multiple_of(batch) {
            let m = batch.min(n + 1 - i) as usize;
            for j in 0..m {
                group_len[j] = fmt_key(b"key:", i + j as u64, &mut group[j]);
            }
            h.prefetch_group(0, (0..m).map(|j| &group[j][..group_len[j]]));
        }
        let len = fmt_key(b"key:", i, &mut buf);
        h.set(0, &buf[..len], VALUE32, &opt).map_err(err("grow set"))?;
        w_count += 1;
        if w_count & 255 == 0 || (i == n && rates.is_empty()) {
            let now = Instant::now();
            let el = now - w_start;
            // (A run too short for one whole window, at toy sizes, counts its only one.)
            if el >= window || (i == n && rates.is_empty()) {
                rates.push(w_count as f64 / el.as_secs_f64());
                let t = larder_engine::split_totals();
                moved.push((t.keys - splits_before.keys) as f64 / w_count as f64);
                let in_splits = (t.nanos - splits_before.nanos) as f64 / 1e9;
                split_share.push(in_splits / el.as_secs_f64());
                rates_ex.push(w_count as f64 / (el.as_secs_f64() - in_splits).max(1e-9));
                splits_before = t;
                w_start = now;
                w_count = 0;
                if now - last_progress >= Duration::from_secs(2) {
                    last_progress = now;
                    eprintln!(
                        "[grow] {:.1}M keys, {:.2}M inserts/s in the last window",
                        i as f64 / 1e6,
                        rates.last().unwrap() / 1e6
                    );
                }
            }
        }
    }
    let total = start.elapsed();
    let splits_total = larder_engine::split_totals();
    let moved_total = (splits_total.keys - splits_start.keys) as f64;
    let split_secs_total = (splits_total.nanos - splits_start.nanos) as f64 / 1e9;
    // The same sets with no growth, as long again, while the reader still runs: overwrites
    // of random keys of the grown table. Its windows show how much this machine's timing
    // varies without any split, the floor the growth windows are judged against.
    let mut steady: Vec<f64> = Vec::new();
    let mut rng = Rng::new(0x5eed);
    let (mut w_start, mut w_count) = (Instant::now(), 0u64);
    while steady.len() < rates.len() {
        let len = fmt_key(b"key:", 1 + rng.below(n), &mut buf);
        h.set(0, &buf[..len], VALUE32, &opt).map_err(err("steady set"))?;
        w_count += 1;
        if w_count & 255 == 0 {
            let now = Instant::now();
            if now - w_start >= window {
                steady.push(w_count as f64 / (now - w_start).as_secs_f64());
                (w_start, w_count) = (now, 0);
            }
        }
    }
    h.set(0, b"bench:stop", b"1", &opt).map_err(err("set stop"))?;
    if args.print_windows {
        let w: Vec<String> = rates.iter().map(|r| format!("{:.2}", r / 1e6)).collect();
        println!("  windows (M inserts/s): {}", w.join(" "));
        let w: Vec<String> = moved.iter().map(|r| format!("{r:.2}")).collect();
        println!("  windows (keys moved by splits per insert): {}", w.join(" "));
        let w: Vec<String> = split_share.iter().map(|r| format!("{:.1}", r * 100.0)).collect();
        println!("  windows (% of time in splits): {}", w.join(" "));
        let w: Vec<String> = rates_ex.iter().map(|r| format!("{:.2}", r / 1e6)).collect();
        println!("  windows (M inserts/s, split time taken out): {}", w.join(" "));
        let w: Vec<String> = steady.iter().map(|r| format!("{:.2}", r / 1e6)).collect();
        println!("  steady windows (M overwrites/s): {}", w.join(" "));
    }
    let r = child.result()?;
    let dbsize = h.dbsize(0).map_err(err("dbsize"))?;
    let resident = seg.resident_bytes()?;

    let inserted = n - GROW_READ_KEYS;
    let (med, min, dip, below10) = window_dips(&rates);
    let deepest_at = rates.iter().position(|&x| x == min).unwrap_or(0);
    let (steady_med, _, steady_dip, steady_below10) = window_dips(&steady);
    let mut moved_sorted = moved.clone();
    moved_sorted.sort_by(f64::total_cmp);
    let mut share_sorted = split_share.clone();
    share_sorted.sort_by(f64::total_cmp);
    let (ex_med, _, ex_dip, ex_below10) = window_dips(&rates_ex);
    let g = |k: &str| r.get(k).copied().unwrap_or(f64::NAN);

    println!(
        "  inserted {inserted} keys in {:.2} s: {:.2}M inserts/s overall",
        total.as_secs_f64(),
        inserted as f64 / total.as_secs_f64() / 1e6
    );
    println!(
        "  per 100 ms window ({} windows): median {:.2}M/s, min {:.2}M/s (window {} at ~{:.1} s), deepest dip {:.1}% below median, {} windows >10% below",
        rates.len(),
        med / 1e6,
        min / 1e6,
        deepest_at,
        deepest_at as f64 * 0.1,
        dip,
        below10
    );
    println!(
        "  keys moved by splits per insert, per window: median {:.2}, 90th percentile {:.2}, max {:.2} ({:.2} over the run)",
        percentile(&moved_sorted, 0.5),
        percentile(&moved_sorted, 0.9),
        moved_sorted.last().copied().unwrap_or(f64::NAN),
        moved_total / inserted as f64
    );
    println!(
        "  time in splits, per window: median {:.1}%, 90th percentile {:.1}%, max {:.1}% ({:.1}% over the run)",
        percentile(&share_sorted, 0.5) * 100.0,
        percentile(&share_sorted, 0.9) * 100.0,
        share_sorted.last().copied().unwrap_or(f64::NAN) * 100.0,
        split_secs_total / total.as_secs_f64() * 100.0
    );
    println!(
        "  windows with their split time taken out: median {:.2}M/s, deepest dip {:.1}% below median, {} windows >10% below",
        ex_med / 1e6,
        ex_dip,
        ex_below10
    );
    println!(
        "  steady (random overwrites of the grown table, no splits, {} windows): median {:.2}M/s, deepest dip {:.1}% below median, {} windows >10% below",
        steady.len(),
        steady_med / 1e6,
        steady_dip,
        steady_below10
    );
    println!(
        "  reader (other process, {:.2}M gets, 10% misses, each timed): p50 {:.0} ns, p99 {:.0} ns, p99.9 {:.0} ns, p99.99 {:.0} ns, max {:.0} ns; {} over 10 µs, {} over 100 µs, {} lost keys; reader descheduled {} times (+{} voluntary)",
        g("reads") / 1e6,
        g("p50_ns"),
        g("p99_ns"),
        g("p999_ns"),
        g("p9999_ns"),
        g("max_ns"),
        g("over_10us"),
        g("over_100us"),
        g("lost"),
        g("involuntary_switches"),
        g("voluntary_switches")
    );
    println!(
        "  final dbsize {dbsize}, segment resident {:.1} MiB ({:.1} B/key)",
        resident as f64 / 1048576.0,
        resident as f64 / dbsize as f64
    );

    out.num("grow.keys", n as f64);
    out.num("grow.secs", total.as_secs_f64());
    out.num("grow.inserts_per_sec", inserted as f64 / total.as_secs_f64());
    out.num("grow.window_median_per_sec", med);
    out.num("grow.window_min_per_sec", min);
    out.num("grow.window_deepest_dip_pct", dip);
    out.num("grow.windows", rates.len() as f64);
    out.num("grow.windows_over_10pct_below", below10 as f64);
    out.num("grow.moved_per_insert_median", percentile(&moved_sorted, 0.5));
    out.num("grow.moved_per_insert_p90", percentile(&moved_sorted, 0.9));
    out.num("grow.moved_per_insert_max", moved_sorted.last().copied().unwrap_or(f64::NAN));
    out.num("grow.split_share_median", percentile(&share_sorted, 0.5));
    out.num("grow.split_share_max", share_sorted.last().copied().unwrap_or(f64::NAN));
    out.num("grow.split_share_overall", split_secs_total / total.as_secs_f64());
    out.num("grow.no_split_window_median_per_sec", ex_med);
    out.num("grow.no_split_deepest_dip_pct", ex_dip);
    out.num("grow.no_split_windows_over_10pct_below", ex_below10 as f64);
    out.num("grow.steady_window_median_per_sec", steady_med);
    out.num("grow.steady_deepest_dip_pct", steady_dip);
    out.num("grow.steady_windows_over_10pct_below", steady_below10 as f64);
    out.num("grow.resident_bytes", resident as f64);
    for (k, v) in &r {
        out.num(&format!("grow.reader.{k}"), *v);
    }
    out.target("grow: reader p99.9 < 10 µs", g("p999_ns") < 10_000.0, format!("{:.0} ns", g("p999_ns")));
    out.target(
        "grow: no insert window >10% below median",
        below10 == 0,
        format!("deepest dip {dip:.1}%, {below10} of {} windows", rates.len()),
    );
    if g("lost") > 0.0 {
        return Err(format!("the reader missed {} keys that were inserted before it started", g("lost")));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Memory per key

fn phase_memory(args: &Args, out: &mut Report) -> Result<(), String> {
    let n = args.memory_keys.max(1);
    println!("\nmemory: {n} keys key:0000001.. with 32-byte values in a fresh named segment");
    let (seg, store) = Segment::create("mem", 4 << 30)?;
    let base = seg.resident_bytes()?;
    let mut h = store.handle().map_err(err("handle"))?;
    preload(&mut h, 1, n, VALUE32)?;
    let _ = h.collect();
    let resident = seg.resident_bytes()?;
    let rep = store.check().map_err(err("check"))?;
    if !rep.ok() {
        return Err(format!("check found problems: {:?}", rep.problems));
    }
    let key_len = key_of(n).len() as u64; // 11 for up to 9,999,999 keys
    let payload = n * (key_len + 32);
    let per_key = resident as f64 / n as f64;
    let overhead = (resident as f64 - payload as f64) / n as f64;
    println!(
        "  segment resident {:.1} MiB (empty store {:.1} KiB): {per_key:.1} B/key, overhead {overhead:.1} B/key over {} B of key+value",
        resident as f64 / 1048576.0,
        base as f64 / 1024.0,
        key_len + 32
    );
    println!(
        "  check: keys {}  item_bytes {} ({:.1}/key)  payload_bytes {} ({:.1}/key)  index_bytes {} ({:.1}/key)  pages_bytes {} ({:.1}/key)",
        rep.keys,
        rep.item_bytes,
        rep.item_bytes as f64 / n as f64,
        rep.payload_bytes,
        rep.payload_bytes as f64 / n as f64,
        rep.index_bytes,
        rep.index_bytes as f64 / n as f64,
        rep.pages_bytes,
        rep.pages_bytes as f64 / n as f64,
    );
    out.num("memory.keys", n as f64);
    out.num("memory.resident_bytes", resident as f64);
    out.num("memory.empty_resident_bytes", base as f64);
    out.num("memory.bytes_per_key", per_key);
    out.num("memory.overhead_per_key", overhead);
    out.num("memory.item_bytes", rep.item_bytes as f64);
    out.num("memory.payload_bytes", rep.payload_bytes as f64);
    out.num("memory.index_bytes", rep.index_bytes as f64);
    out.num("memory.pages_bytes", rep.pages_bytes as f64);
    out.target(
        "memory: overhead < 24 B/key",
        overhead < 24.0,
        format!("{overhead:.1} B/key ({per_key:.1} B/key resident)"),
    );
    drop(h);
    drop(store);
    drop(seg);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Fragmentation under churn

fn phase_churn(args: &Args, out: &mut Report) -> Result<(), String> {
    let live = args.churn_keys.max(10);
    // 80% sets / 20% deletes over 1.25 × live keys keeps ~`live` keys present.
    let space = live * 5 / 4;
    println!(
        "\nchurn: {live} keys, then {:.0} s of random sets (values 10..2000 B) and deletes (80/20) over {space} keys",
        args.churn_secs
    );
    let (seg, store) = Segment::create("churn", 4 << 30)?;
    let mut h = store.handle().map_err(err("handle"))?;
    let mut rng = Rng::new(seed());
    let big = vec![b'x'; 2000];
    let opt = SetOptions::default();
    let mut buf = [0u8; 32];
    for i in 0..live {
        let n = fmt_key(b"key:", i, &mut buf);
        let len = 10 + rng.below(1991) as usize;
        h.set(0, &buf[..n], &big[..len], &opt).map_err(err("churn preload"))?;
    }
    let _ = h.collect();
    let before = store.check().map_err(err("check"))?;
    let start = Instant::now();
    let dur = Duration::from_secs_f64(args.churn_secs);
    let (mut sets, mut dels) = (0u64, 0u64);
    while start.elapsed() < dur {
        for _ in 0..1024 {
            let n = fmt_key(b"key:", rng.below(space), &mut buf);
            if rng.below(5) == 0 {
                h.del(0, &[&buf[..n]]).map_err(err("churn del"))?;
                dels += 1;
            } else {
                let len = 10 + rng.below(1991) as usize;
                h.set(0, &buf[..n], &big[..len], &opt).map_err(err("churn set"))?;
                sets += 1;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let _ = h.collect();
    let after = store.check().map_err(err("check"))?;
    if !after.ok() {
        return Err(format!("check found problems: {:?}", after.problems));
    }
    let resident = seg.resident_bytes()?;
    let ratio = |r: &larder_engine::Report| {
        (r.pages_bytes as f64 / r.payload_bytes as f64, r.pages_bytes as f64 / r.item_bytes as f64)
    };
    let (b_pay, b_item) = ratio(&before);
    let (a_pay, a_item) = ratio(&after);
    println!("  {sets} sets + {dels} deletes in {secs:.1} s ({:.2}M ops/s)", (sets + dels) as f64 / secs / 1e6);
    println!(
        "  {:<7} {:>8} {:>12} {:>12} {:>12} {:>12} {:>14} {:>12}",
        "", "keys", "payload MiB", "items MiB", "pages MiB", "index MiB", "pages/payload", "pages/items"
    );
    for (label, r, p, i) in [("before", &before, b_pay, b_item), ("after", &after, a_pay, a_item)] {
        println!(
            "  {label:<7} {:>8} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>14.3} {:>12.3}",
            r.keys,
            r.payload_bytes as f64 / 1048576.0,
            r.item_bytes as f64 / 1048576.0,
            r.pages_bytes as f64 / 1048576.0,
            r.index_bytes as f64 / 1048576.0,
            p,
            i
        );
    }
    println!(
        "  segment resident {:.1} MiB, {} blocks still on retire lists",
        resident as f64 / 1048576.0,
        after.retired_blocks
    );
    out.num("churn.sets", sets as f64);
    out.num("churn.dels", dels as f64);
    out.num("churn.secs", secs);
    out.num("churn.keys", after.keys as f64);
    out.num("churn.payload_bytes", after.payload_bytes as f64);
    out.num("churn.item_bytes", after.item_bytes as f64);
    out.num("churn.pages_bytes", after.pages_bytes as f64);
    out.num("churn.index_bytes", after.index_bytes as f64);
    out.num("churn.resident_bytes", resident as f64);
    out.num("churn.pages_over_payload", a_pay);
    out.num("churn.pages_over_items", a_item);
    out.num("churn.before.pages_over_payload", b_pay);
    out.num("churn.before.pages_over_items", b_item);
    drop(h);
    drop(store);
    drop(seg);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Collections: the cost of an operation on a big collection against a small one

/// Mean ns of `f` over `n` calls.
fn time_ns(n: u64, mut f: impl FnMut(u64) -> Result<(), String>) -> Result<f64, String> {
    let t = Instant::now();
    for i in 0..n {
        f(i)?;
    }
    Ok(t.elapsed().as_nanos() as f64 / n as f64)
}

fn phase_colls(out: &mut Report) -> Result<(), String> {
    use larder_engine::Kind;
    println!("\ncolls: one operation on a collection of 1M members against the same on 1k (mean ns/op, one thread)");
    let (_seg, store) = Segment::create("colls", 2 << 30)?;
    let mut h = store.handle().map_err(err("handle"))?;
    let e = |e: larder_engine::Error| e.to_string();
    let mut figures: Vec<(&str, [f64; 2])> = Vec::new();
    let mut rows: BTreeMap<&str, [f64; 2]> = BTreeMap::new();
    for (slot, n) in [(0usize, 1_000u64), (1, 1_000_000)] {
        let (hk, zk, lk) = (format!("hash{n}"), format!("zset{n}"), format!("list{n}"));
        h.coll_write(0, hk.as_bytes(), Kind::Hash, true, |c| {
            for i in 0..n {
                c.put(format!("field:{i}").as_bytes(), VALUE32)?;
            }
            Ok(())
        })
        .map_err(e)?;
        h.coll_write(0, zk.as_bytes(), Kind::ZSet, true, |c| {
            for i in 0..n {
                c.zput(format!("member:{i}").as_bytes(), i as f64)?;
            }
            Ok(())
        })
        .map_err(e)?;
        h.coll_write(0, lk.as_bytes(), Kind::List, true, |c| {
            for i in 0..n {
                c.insert_at(i, format!("element:{i}").as_bytes())?;
            }
            Ok(())
        })
        .map_err(e)?;
        let mut rng = Rng::new(seed());
        let ops = 100_000;
        let fields: Vec<Vec<u8>> = (0..ops).map(|_| format!("field:{}", rng.below(n)).into_bytes()).collect();
        let members: Vec<Vec<u8>> = (0..ops).map(|_| format!("member:{}", rng.below(n)).into_bytes()).collect();
        let hget = time_ns(ops, |i| {
            h.coll_read(0, hk.as_bytes(), Kind::Hash, |c| c.find(&fields[i as usize])).map_err(e)?;
            Ok(())
        })?;
        let zrank = time_ns(ops, |i| {
            h.coll_read(0, zk.as_bytes(), Kind::ZSet, |c| c.zrank(&members[i as usize])).map_err(e)?;
            Ok(())
        })?;
        let zrange = time_ns(ops, |_| {
            h.coll_read(0, zk.as_bytes(), Kind::ZSet, |c| {
                let mut k = 0;
                c.range(n / 2, n / 2 + 10, |_, _| {
                    k += 1;
                    true
                })?;
                Ok(k)
            })
            .map_err(e)?;
            Ok(())
        })?;
        let lindex = time_ns(ops, |_| {
            h.coll_read(0, lk.as_bytes(), Kind::List, |c| c.get(n / 2)).map_err(e)?;
            Ok(())
        })?;
        let wops = 20_000;
        let zadd = time_ns(wops, |i| {
            let m = &members[i as usize];
            h.coll_write(0, zk.as_bytes(), Kind::ZSet, false, |c| c.zput(m, (i % 1000) as f64 + 0.5)).map_err(e)?;
            Ok(())
        })?;
        let hset = time_ns(wops, |i| {
            let f = &fields[i as usize];
            // A new value each time: putting the value already there is a no-op.
            h.coll_write(0, hk.as_bytes(), Kind::Hash, false, |c| c.put(f, &i.to_le_bytes())).map_err(e)?;
            Ok(())
        })?;
        let push_pop = time_ns(wops, |i| {
            h.coll_write(0, lk.as_bytes(), Kind::List, false, |c| {
                let len = c.len();
                c.insert_at(len, &i.to_le_bytes())?;
                c.remove_at(0).map(|_| ())
            })
            .map_err(e)?;
            Ok(())
        })?;
        let _ = h.collect();
        for (name, v) in [
            ("hget", hget),
            ("hset", hset),
            ("zadd", zadd),
            ("zrank", zrank),
            ("zrange_10", zrange),
            ("lindex_mid", lindex),
            ("rpush_lpop", push_pop),
        ] {
            rows.entry(name).or_insert([0.0; 2])[slot] = v;
        }
    }
    let rep = store.check().map_err(err("check"))?;
    if !rep.ok() {
        return Err(format!("check found problems: {:?}", rep.problems));
    }
    println!("  {:<12} {:>10} {:>10} {:>7}", "op", "1k ns", "1M ns", "ratio");
    for (name, v) in rows {
        println!("  {name:<12} {:>10.0} {:>10.0} {:>6.2}x", v[0], v[1], v[1] / v[0]);
        out.num(&format!("colls.{name}.1k_ns"), v[0]);
        out.num(&format!("colls.{name}.1m_ns"), v[1]);
        figures.push((name, v));
    }
    let worst = figures.iter().map(|(n, v)| (v[1] / v[0], *n)).fold((0.0, ""), |a, b| if b.0 > a.0 { b } else { a });
    out.target("collection op on 1M within 3x of 1k", worst.0 <= 3.0, format!("worst {} at {:.2}x", worst.1, worst.0));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_json() {
        assert_eq!(key_of(1), b"key:0000001");
        assert_eq!(key_of(1_000_000), b"key:1000000");
        assert_eq!(key_of(10_000_000), b"key:10000000");
        let mut m = BTreeMap::new();
        m.insert("a.b".to_string(), 1.5);
        m.insert("c".to_string(), 7.0);
        assert_eq!(parse_flat_json(&flat_json(&m)).unwrap(), m);
    }
}
