//! Server configuration: command-line flags, the same names in a redis.conf-style file
//! (`--config FILE`: one `name value` per line, `#` comments), and the runtime view that
//! `CONFIG GET` / `CONFIG SET` / `CONFIG REWRITE` read and change.
//!
//! Every parameter is a row of [`PARAMS`] (name, kind, default, mutability), so validation
//! and the error texts follow Redis's `config.c` in one place. Parameters the server acts on
//! live in atomics; the others are kept as their canonical text in `passive`, so tools that
//! set them (test suites, client libraries) keep working until the feature behind them lands.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

use larder_engine::Limits;

/// `larder server` flags. Every flag can also be given in the `--config` file by its name
/// without dashes (`port 7000`, `memcache-port 0`, `maxclients 100`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Args {
    /// A redis.conf-style file: `name value` per line; flags given on the command line win.
    /// ACL users come from `user <name> <rules>...` lines or from an `aclfile <path>`.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long)]
    pub bind: Option<String>,
    /// RESP (Redis protocol) port; 0 turns RESP off.
    #[arg(long)]
    pub port: Option<u16>,
    /// memcached protocol port; 0 turns memcached off.
    #[arg(long)]
    pub memcache_port: Option<u16>,
    /// Worker threads, each with its own event loop (default: the number of cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Serve a named shared-memory segment (/dev/shm/larder-NAME) that local processes can
    /// attach to; default: an anonymous in-memory arena.
    #[arg(long)]
    pub shm: Option<String>,
    /// Most connected clients at once (Redis `maxclients`).
    #[arg(long)]
    pub maxclients: Option<u64>,
    /// Logical databases (Redis `databases`).
    #[arg(long)]
    pub databases: Option<u32>,
    /// Largest bulk argument accepted, in bytes (Redis `proto-max-bulk-len`). This and the
    /// sizes below take redis.conf's units: `512mb`, `2m` (k/m/g = 1000…, kb/mb/gb = 1024…).
    #[arg(long, value_name = "BYTES", value_parser = parse_mem_arg)]
    pub proto_max_bulk_len: Option<u64>,
    /// Output buffer limit per client, in bytes: a client whose pending replies exceed it is
    /// disconnected (Redis `client-output-buffer-limit` for normal clients; 0 = none).
    #[arg(long, value_name = "BYTES", value_parser = parse_mem_arg)]
    pub client_output_buffer_limit: Option<u64>,
    /// Largest memcached item, in bytes, counted as memcached's `-I` counts one (header,
    /// CAS, key, flags and value: 1 MiB takes values up to 1,048,514 bytes under a 3-byte key).
    #[arg(long, value_name = "BYTES", value_parser = parse_mem_arg)]
    pub item_size_max: Option<u64>,
    /// Bytes reserved for the arena (sparse; default: half the machine's memory).
    #[arg(long, value_name = "BYTES", value_parser = parse_mem_arg)]
    pub capacity: Option<u64>,
    /// A hash stays packed (`OBJECT ENCODING` listpack) up to this many fields [512]; also
    /// `hash-max-ziplist-entries`.
    #[arg(long, value_name = "N")]
    pub hash_max_listpack_entries: Option<String>,
    /// ... and while every field and value is at most this many bytes [64]; units allowed
    /// (`1kb`); also `hash-max-ziplist-value`.
    #[arg(long, value_name = "BYTES")]
    pub hash_max_listpack_value: Option<String>,
    /// A set of integers stays packed (intset) up to this many members [512].
    #[arg(long, value_name = "N")]
    pub set_max_intset_entries: Option<String>,
    /// A sorted set stays packed (listpack) up to this many members [128]; also
    /// `zset-max-ziplist-entries`.
    #[arg(long, value_name = "N")]
    pub zset_max_listpack_entries: Option<String>,
    /// ... and while every member is at most this many bytes [64]; also `zset-max-ziplist-value`.
    #[arg(long, value_name = "BYTES")]
    pub zset_max_listpack_value: Option<String>,
    /// Entries per list chunk and end buffer when N is 1..63 (Larder's chunks hold at most
    /// 64 entries and 2 KiB); -1..-5 (Redis's 4..64 KiB node budgets) leave those limits
    /// as they are [-2]; also `list-max-ziplist-size`.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub list_max_listpack_size: Option<String>,
    /// Benchmark floor: the same event loop and parsers, but GET/MGET/get answer a fixed
    /// value and SET/set answer OK/STORED without touching the keyspace (other commands run
    /// as usual). Measures what the network path alone costs; never for real use.
    #[arg(long)]
    pub floor: bool,
    /// Size of the fixed value `--floor` answers GET with.
    #[arg(long, default_value_t = 32, requires = "floor")]
    pub floor_value_size: usize,
    /// Longest a worker polls without sleeping after a round of unpipelined requests (one
    /// per read), in microseconds [0: never]. Such clients then find it awake instead of
    /// waking it for every request. The window adapts (grows while events come back sooner
    /// than this, halves when a poll finds nothing); pipelined rounds and an idle server
    /// never poll.
    #[arg(long, value_name = "MICROSECONDS", default_value_t = 50)]
    pub busy_poll_us: u64,
}

/// One class of `client-output-buffer-limit` (bytes, bytes, seconds; 0 = no limit).
#[derive(Debug)]
pub struct OutputLimit {
    pub hard: AtomicU64,
    pub soft: AtomicU64,
    pub soft_secs: AtomicU64,
}

/// The settings a running server uses. Fields that `CONFIG SET` may change are atomics.
#[derive(Debug)]
pub struct Config {
    pub bind: String,
    /// The RESP port listened on (0: none); CONFIG SET changes it once the workers' new
    /// listeners are bound (see `worker::change_resp_port`).
    pub port: AtomicU16,
    pub memcache_port: u16,
    pub threads: usize,
    pub shm: Option<String>,
    pub databases: u32,
    pub capacity: Option<u64>,
    /// `--floor`: the fixed value GET answers with, when the server is a benchmark floor.
    pub floor: Option<Vec<u8>>,
    /// `--busy-poll-us`: longest a worker polls without sleeping after unpipelined requests.
    pub busy_poll: std::time::Duration,
    pub maxclients: AtomicU64,
    pub proto_max_bulk_len: AtomicU64,
    pub client_output_buffer_limit: AtomicU64,
    /// The pubsub class of `client-output-buffer-limit`: a subscribed client whose pending
    /// output passes `hard`, or stays above `soft` for `soft_secs`, is disconnected.
    pub pubsub_output_limit: OutputLimit,
    pub item_size_max: AtomicU64,
    pub client_query_buffer_limit: AtomicU64,
    pub slowlog_log_slower_than: AtomicU64,
    pub slowlog_max_len: AtomicUsize,
    /// `latency-tracking`: per-command latency histograms (LATENCY HISTOGRAM).
    pub latency_tracking: AtomicBool,
    /// `latency-monitor-threshold` in ms; 0: the latency monitor is off.
    pub latency_monitor_threshold: AtomicU64,
    /// `latency-tracking-info-percentiles`: the percentiles INFO `latencystats` prints.
    latency_percentiles: RwLock<Vec<f64>>,
    /// The shortest duration (µs) the slow log or the latency monitor wants to hear of
    /// (u64::MAX: neither), so a command's end compares its duration with one value.
    pub slow_usec: AtomicU64,
    pub timeout: AtomicU64,
    /// Largest sparse HyperLogLog (bytes) a PFADD or PFMERGE keeps sparse.
    pub hll_sparse_max_bytes: AtomicU64,
    /// `notify-keyspace-events` as Redis's flags (see [`crate::notify`]); 0: none.
    pub notify_keyspace_events: AtomicU32,
    /// `tracking-table-max-keys` (0: no limit; see [`crate::tracking`]).
    pub tracking_table_max_keys: AtomicU64,
    /// Canonical values of the parameters Larder accepts and reports but does not act on yet
    /// (save, appendonly, … until persistence exists). Absent = the default of [`PARAMS`].
    pub passive: RwLock<Vec<(String, String)>>,
    /// The config file, for CONFIG REWRITE.
    pub file: Option<PathBuf>,
    /// The file's `user <name> <rules>...` lines (ACL users; the text after `user`).
    pub users: Vec<String>,
}

/// How a parameter's value is parsed, checked and printed (Redis's config types).
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A decimal integer within bounds (`string2ll`, no units).
    Int(i64, i64),
    /// Bytes, with an optional unit (`k`=1000, `kb`=1024, `m`, `mb`, `g`, `gb`), within bounds.
    Mem(u64, u64),
    /// Bytes as [`Kind::Mem`], or a share of memory as `N%` (0..=100).
    MemPercent,
    /// `yes` / `no`.
    Bool,
    /// One of a fixed set of words (case-insensitive; stored lowercase).
    Enum(&'static [&'static str]),
    /// Any text.
    Str,
    /// `save`: pairs of `<seconds> <changes>`, or empty.
    Save,
    /// `client-output-buffer-limit`: `<class> <hard> <soft> <soft-seconds>` groups.
    OutputLimit,
    /// `hz`: an integer clamped to 1..=500.
    Hz,
    /// `notify-keyspace-events`: a set of event class characters.
    Events,
    /// `latency-tracking-info-percentiles`: numbers from 0 to 100, separated by spaces (none
    /// for an empty value).
    Percentiles,
}

/// One configuration parameter.
#[derive(Debug)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    /// The default as CONFIG GET prints it (for live parameters, only used by REWRITE).
    pub default: &'static str,
    pub mode: Mode,
    /// Found by its exact name only, not by CONFIG GET patterns (Redis's HIDDEN_CONFIG:
    /// knobs for tests).
    pub hidden: bool,
}

/// Whether CONFIG SET may change a parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Mutable,
    /// Immutable in Redis too: `can't set immutable config`, whatever the value.
    Immutable,
    /// Changeable in Redis (or a Larder flag), fixed once Larder runs: setting the current
    /// value again is accepted as a no-op, as Redis accepts it; another value is refused as
    /// immutable.
    Fixed,
}

const I64MAX: i64 = i64::MAX;
const INTMAX: i64 = i32::MAX as i64;
const LONGMAX: u64 = i64::MAX as u64;

const fn p(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, kind, default, mode: Mode::Mutable, hidden: false }
}
const fn immutable(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, kind, default, mode: Mode::Immutable, hidden: false }
}
const fn fixed(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, kind, default, mode: Mode::Fixed, hidden: false }
}
const fn hidden(name: &'static str, kind: Kind, default: &'static str) -> Param {
    Param { name, kind, default, mode: Mode::Mutable, hidden: true }
}

const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// Every parameter, in the order `CONFIG GET *` lists them.
pub const PARAMS: &[Param] = &[
    fixed("bind", Kind::Str, "127.0.0.1"),
    p("port", Kind::Int(0, 65535), "6379"),
    fixed("memcache-port", Kind::Int(0, 65535), "11211"),
    // No replication: a master, and only that.
    fixed("replicaof", Kind::Str, ""),
    immutable("io-threads", Kind::Int(1, 1024), "0"),
    immutable("databases", Kind::Int(1, 1 << 20), "16"),
    immutable("daemonize", Kind::Bool, "no"),
    immutable("enable-debug-command", Kind::Enum(&["no", "yes", "local"]), "yes"),
    immutable("enable-module-command", Kind::Enum(&["no", "yes", "local"]), "no"),
    immutable("appendfilename", Kind::Str, "appendonly.aof"),
    p("maxclients", Kind::Int(1, u32::MAX as i64), "10000"),
    p("proto-max-bulk-len", Kind::Mem(1 << 20, LONGMAX), "536870912"),
    p("client-query-buffer-limit", Kind::Mem(1 << 20, LONGMAX), "1073741824"),
    p("item-size-max", Kind::Mem(1024, 1 << 30), "1048576"),
    p(
        "client-output-buffer-limit",
        Kind::OutputLimit,
        "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
    ),
    p("slowlog-log-slower-than", Kind::Int(-1, I64MAX), "10000"),
    p("slowlog-max-len", Kind::Int(0, I64MAX), "128"),
    p("timeout", Kind::Int(0, INTMAX), "0"),
    p("hll-sparse-max-bytes", Kind::Mem(0, LONGMAX), "3000"),
    p("save", Kind::Save, ""),
    p("appendonly", Kind::Bool, "no"),
    p("appendfsync", Kind::Enum(&["always", "everysec", "no"]), "everysec"),
    p("maxmemory", Kind::Mem(0, u64::MAX), "0"),
    p("maxmemory-policy", Kind::Enum(POLICIES), "noeviction"),
    p("maxmemory-samples", Kind::Int(1, 64), "5"),
    p("maxmemory-clients", Kind::MemPercent, "0"),
    p("repl-backlog-size", Kind::Mem(16 * 1024, LONGMAX), "1048576"),
    p("hz", Kind::Hz, "10"),
    p("lazyfree-lazy-eviction", Kind::Bool, "no"),
    p("lazyfree-lazy-expire", Kind::Bool, "no"),
    p("lazyfree-lazy-server-del", Kind::Bool, "no"),
    p("lazyfree-lazy-user-del", Kind::Bool, "no"),
    p("lazyfree-lazy-user-flush", Kind::Bool, "no"),
    p("loglevel", Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]), "notice"),
    p("requirepass", Kind::Str, ""),
    // ACLs: the ACL file (read at startup and by ACL LOAD, written by ACL SAVE), whether a new
    // user starts with all channels, and how many entries ACL LOG keeps.
    immutable("aclfile", Kind::Str, ""),
    p("acl-pubsub-default", Kind::Enum(&["allchannels", "resetchannels"]), "resetchannels"),
    p("acllog-max-len", Kind::Int(0, I64MAX), "128"),
    p("dir", Kind::Str, "."),
    p("dbfilename", Kind::Str, "dump.rdb"),
    p("rdbcompression", Kind::Bool, "yes"),
    p("rdbchecksum", Kind::Bool, "yes"),
    // Kept for clients that set it: RESTORE checks every payload entry by entry whatever
    // it says (Larder rebuilds the value from its entries, so they are all read anyway).
    p("sanitize-dump-payload", Kind::Enum(&["no", "yes", "clients"]), "no"),
    p("stop-writes-on-bgsave-error", Kind::Bool, "yes"),
    p("activerehashing", Kind::Bool, "yes"),
    p("latency-tracking", Kind::Bool, "yes"),
    p("latency-monitor-threshold", Kind::Int(0, I64MAX), "0"),
    p("latency-tracking-info-percentiles", Kind::Percentiles, "50 99 99.9"),
    p("notify-keyspace-events", Kind::Events, ""),
    p("tracking-table-max-keys", Kind::Int(0, I64MAX), "1000000"),
    p("list-max-listpack-size", Kind::Int(i32::MIN as i64, INTMAX), "-2"),
    p("list-compress-depth", Kind::Int(0, INTMAX), "0"),
    // The collection thresholds (see LIMIT_PARAMS): Redis 7.0's defaults (its config.c, not
    // the redis.conf it ships, which says 128 for hashes); the `-value` ones take units.
    // (set-max-listpack-* arrived in Redis 7.2.)
    p("hash-max-listpack-entries", Kind::Int(0, I64MAX), "512"),
    p("hash-max-listpack-value", Kind::Mem(0, LONGMAX), "64"),
    p("set-max-intset-entries", Kind::Int(0, I64MAX), "512"),
    p("zset-max-listpack-entries", Kind::Int(0, I64MAX), "128"),
    p("zset-max-listpack-value", Kind::Mem(0, LONGMAX), "64"),
    p("stream-node-max-bytes", Kind::Mem(0, LONGMAX), "4096"),
    p("stream-node-max-entries", Kind::Int(0, I64MAX), "100"),
    p("busy-reply-threshold", Kind::Int(0, I64MAX), "5000"),
    p("active-expire-effort", Kind::Int(1, 10), "1"),
    p("lfu-log-factor", Kind::Int(0, INTMAX), "10"),
    p("lfu-decay-time", Kind::Int(0, INTMAX), "1"),
    p("tcp-keepalive", Kind::Int(0, INTMAX), "300"),
    p("close-on-oom", Kind::Bool, "no"),
    // Redis's hidden knobs that its tests set (delays while saving and loading, which
    // Larder does not do yet): CONFIG GET finds them by exact name only.
    hidden("key-load-delay", Kind::Int(i32::MIN as i64, INTMAX), "0"),
    hidden("rdb-key-save-delay", Kind::Int(i32::MIN as i64, INTMAX), "0"),
    hidden("loading-process-events-interval-bytes", Kind::Int(1024, INTMAX), "2097152"),
];

/// Where a threshold parameter goes in the engine's [`Limits`].
#[derive(Clone, Copy)]
enum LimitField {
    U(fn(&Limits) -> &AtomicU64),
    ListSize,
}

/// The parameters that are the engine's collection thresholds.
const LIMIT_PARAMS: &[(&str, LimitField)] = &[
    ("hash-max-listpack-entries", LimitField::U(|l| &l.hash_max_listpack_entries)),
    ("hash-max-listpack-value", LimitField::U(|l| &l.hash_max_listpack_value)),
    ("set-max-intset-entries", LimitField::U(|l| &l.set_max_intset_entries)),
    ("zset-max-listpack-entries", LimitField::U(|l| &l.zset_max_listpack_entries)),
    ("zset-max-listpack-value", LimitField::U(|l| &l.zset_max_listpack_value)),
    ("list-max-listpack-size", LimitField::ListSize),
];

/// Old names Redis still accepts; CONFIG GET answers under the name asked for.
pub const ALIASES: &[(&str, &str)] = &[
    ("slaveof", "replicaof"),
    ("hash-max-ziplist-entries", "hash-max-listpack-entries"),
    ("hash-max-ziplist-value", "hash-max-listpack-value"),
    ("zset-max-ziplist-entries", "zset-max-listpack-entries"),
    ("zset-max-ziplist-value", "zset-max-listpack-value"),
    ("list-max-ziplist-size", "list-max-listpack-size"),
    ("lua-time-limit", "busy-reply-threshold"),
];

/// Why a CONFIG SET was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum SetError {
    /// No such parameter: `Unknown option or number of arguments for CONFIG SET - 'x'`.
    Unknown,
    /// `can't set immutable config`.
    Immutable,
    /// The value is wrong; the text follows `CONFIG SET failed (...) - `.
    Invalid(String),
}

/// Larder's own names for Redis parameters (its command-line flags); found by name only,
/// not listed by CONFIG GET patterns.
const FLAG_ALIASES: &[(&str, &str)] = &[("threads", "io-threads")];

/// Looks a parameter up by name or alias, case-insensitively.
pub fn param(name: &str) -> Option<&'static Param> {
    let lower = name.to_ascii_lowercase();
    let real = ALIASES.iter().chain(FLAG_ALIASES).find(|(a, _)| *a == lower).map_or(lower.as_str(), |(_, r)| *r);
    PARAMS.iter().find(|p| p.name == real)
}

/// Splits a memory value into its digits and its unit's multiplier (`k`=1000, `kb`=1024, `m`,
/// `mb`, `g`, `gb`, `b` or none, any case); None for a sign, a fraction or another unit.
fn mem_parts(v: &str) -> Option<(&str, u64)> {
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let mul: u64 = match v[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    Some((&v[..digits], mul))
}

/// Redis's `memtoull`, quirks included, for CONFIG SET and config files: no digits read as 0
/// (`CONFIG SET maxmemory ""` is 0), too many saturate as `strtoull` does, and the unit's
/// product wraps. 128 digits or more are an error, as there.
fn parse_mem(v: &str) -> Option<u64> {
    let (digits, mul) = mem_parts(v)?;
    if digits.len() >= 128 {
        return None;
    }
    let n = if digits.is_empty() { 0 } else { digits.parse::<u64>().unwrap_or(u64::MAX) };
    Some(n.wrapping_mul(mul))
}

/// A memory value for Larder's own settings (`--capacity 4gb` and the other flags, `capacity`
/// in a config file): at least one digit, and no overflow.
fn parse_mem_strict(v: &str) -> Option<u64> {
    let (digits, mul) = mem_parts(v)?;
    digits.parse::<u64>().ok()?.checked_mul(mul)
}

fn parse_mem_arg(v: &str) -> Result<u64, String> {
    parse_mem_strict(v).ok_or_else(|| "expected bytes: digits with an optional unit (k, kb, m, mb, g, gb)".to_string())
}

/// Redis's `setConfigLatencyTrackingInfoPercentilesOutputOption`: the value split at each
/// space (CONFIG SET's splitting of a multi-argument parameter: two spaces make an empty
/// word, which is no number), each word a number as `string2d` reads it, from 0 to 100.
fn parse_percentiles(value: &str) -> Result<Vec<f64>, String> {
    if value.is_empty() {
        return Ok(Vec::new());
    }
    value
        .split(' ')
        .map(|w| {
            let p = string2d(w.as_bytes()).ok_or("Invalid latency-tracking-info-percentiles parameters")?;
            if !(0.0..=100.0).contains(&p) {
                return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".to_string());
            }
            Ok(p)
        })
        .collect()
}

/// Redis's `string2d`: the whole text is a number as `strtod` reads it, not starting with
/// white space, neither NaN nor out of range.
fn string2d(s: &[u8]) -> Option<f64> {
    if s.first().is_none_or(|c| b" \t\n\x0b\x0c\r".contains(c)) {
        return None;
    }
    let (v, n) = crate::command::strtod_prefix(s);
    if n != s.len() || v.is_nan() || crate::command::strtod_erange(s, v) {
        return None;
    }
    Some(v)
}

fn bounds_error(min: impl std::fmt::Display, max: impl std::fmt::Display) -> String {
    format!("argument must be between {min} and {max} inclusive")
}

/// Parses and checks a value; returns its canonical text (what CONFIG GET will print).
fn normalize(kind: Kind, value: &str) -> Result<String, String> {
    match kind {
        Kind::Int(min, max) => {
            let v = crate::command::parse_i64(value.as_bytes()).ok_or("argument couldn't be parsed into an integer")?;
            if v < min || v > max {
                return Err(bounds_error(min, max));
            }
            Ok(v.to_string())
        }
        Kind::Hz => {
            let v = crate::command::parse_i64(value.as_bytes()).ok_or("argument couldn't be parsed into an integer")?;
            if !(0..=INTMAX).contains(&v) {
                return Err(bounds_error(0, INTMAX));
            }
            Ok(v.clamp(1, 500).to_string())
        }
        Kind::Mem(min, max) => {
            let v = parse_mem(value).ok_or("argument must be a memory value")?;
            if v < min || v > max {
                return Err(bounds_error(min, max));
            }
            Ok(v.to_string())
        }
        Kind::MemPercent => {
            if let Some(pct) = value.strip_suffix('%') {
                let v =
                    crate::command::parse_i64(pct.as_bytes()).ok_or("argument must be a memory or percent value")?;
                if !(0..=100).contains(&v) {
                    return Err("percentage argument must be less or equal to 100".into());
                }
                return Ok(format!("{v}%"));
            }
            let v = parse_mem(value).ok_or("argument must be a memory or percent value")?;
            Ok(v.to_string())
        }
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" => Ok("yes".into()),
            "no" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Enum(words) => {
            let l = value.to_ascii_lowercase();
            if words.contains(&l.as_str()) {
                Ok(l)
            } else {
                Err(format!("argument(s) must be one of the following: {}", words.join(", ")))
            }
        }
        Kind::Str => Ok(value.to_string()),
        Kind::Save => {
            if value.is_empty() {
                return Ok(String::new());
            }
            let parts: Vec<&str> = value.split(' ').collect();
            let ok = parts.chunks(2).all(|pair| pair.len() == 2)
                && parts.iter().enumerate().all(|(i, s)| {
                    crate::command::parse_i64(s.as_bytes()).is_some_and(|v| if i % 2 == 0 { v >= 1 } else { v >= 0 })
                });
            if !ok {
                return Err("Invalid save parameters".into());
            }
            Ok(parts.join(" "))
        }
        Kind::OutputLimit => {
            let parts: Vec<&str> = value.split_whitespace().collect();
            if parts.len() == 1 {
                // Larder shorthand (the --client-output-buffer-limit flag): the normal class's
                // hard limit alone.
                let hard = parse_mem(parts[0]).ok_or("argument must be a memory value")?;
                return Ok(format!("normal {hard} 0 0"));
            }
            if parts.is_empty() || parts.chunks(4).any(|c| c.len() != 4) {
                return Err("Wrong number of arguments in buffer limit configuration.".into());
            }
            let mut out = Vec::new();
            for c in parts.chunks(4) {
                let class = match c[0].to_ascii_lowercase().as_str() {
                    "normal" => "normal",
                    "slave" | "replica" => "slave",
                    "pubsub" => "pubsub",
                    _ => return Err("Invalid client class specified in buffer limit configuration.".into()),
                };
                let bad = || "Error in hard, soft or soft_seconds setting in buffer limit configuration.".to_string();
                let hard = parse_mem(c[1]).ok_or_else(bad)?;
                let soft = parse_mem(c[2]).ok_or_else(bad)?;
                let secs = crate::command::parse_i64(c[3].as_bytes()).filter(|s| *s >= 0).ok_or_else(bad)?;
                out.push((class, format!("{hard} {soft} {secs}")));
            }
            Ok(out.iter().map(|(c, v)| format!("{c} {v}")).collect::<Vec<_>>().join(" "))
        }
        // Kept as numbers (see `apply`), written back in full here so that none is rounded;
        // CONFIG GET prints them as Redis does.
        Kind::Percentiles => Ok(parse_percentiles(value)?.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(" ")),
        // Checked here, stored as flags (see `apply`): the text CONFIG GET prints is made
        // from them, as Redis prints them (`KA` reads back `AK`).
        Kind::Events => match crate::notify::parse(value.as_bytes()) {
            Some(_) => Ok(value.to_string()),
            None => Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into()),
        },
    }
}

/// Merges a class's triple into an output-limit value, keeping the other classes.
fn merge_output_limits(current: &str, new: &str) -> String {
    let mut classes: Vec<(String, String)> = Vec::new();
    for src in [current, new] {
        let parts: Vec<&str> = src.split_whitespace().collect();
        for c in parts.chunks(4).filter(|c| c.len() == 4) {
            let v = format!("{} {} {}", c[1], c[2], c[3]);
            match classes.iter_mut().find(|(n, _)| n == c[0]) {
                Some(e) => e.1 = v,
                None => classes.push((c[0].to_string(), v)),
            }
        }
    }
    classes.iter().map(|(c, v)| format!("{c} {v}")).collect::<Vec<_>>().join(" ")
}

impl Config {
    /// Every setting at its default.
    pub fn defaults(file: Option<PathBuf>) -> Config {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let dir = std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_else(|_| ".".into());
        Config {
            bind: "127.0.0.1".into(),
            port: AtomicU16::new(6379),
            memcache_port: 11211,
            threads: cores,
            shm: None,
            databases: 16,
            capacity: None,
            floor: None,
            busy_poll: std::time::Duration::from_micros(50),
            maxclients: AtomicU64::new(10000),
            proto_max_bulk_len: AtomicU64::new(512 << 20),
            client_output_buffer_limit: AtomicU64::new(0),
            pubsub_output_limit: OutputLimit {
                hard: AtomicU64::new(32 << 20),
                soft: AtomicU64::new(8 << 20),
                soft_secs: AtomicU64::new(60),
            },
            item_size_max: AtomicU64::new(1 << 20),
            client_query_buffer_limit: AtomicU64::new(1 << 30),
            slowlog_log_slower_than: AtomicU64::new(10_000),
            slowlog_max_len: AtomicUsize::new(128),
            latency_tracking: AtomicBool::new(true),
            latency_monitor_threshold: AtomicU64::new(0),
            latency_percentiles: RwLock::new(vec![50.0, 99.0, 99.9]),
            slow_usec: AtomicU64::new(10_000),
            timeout: AtomicU64::new(0),
            hll_sparse_max_bytes: AtomicU64::new(3000),
            notify_keyspace_events: AtomicU32::new(0),
            tracking_table_max_keys: AtomicU64::new(1_000_000),
            passive: RwLock::new(vec![("dir".into(), dir)]),
            file,
            users: Vec::new(),
        }
    }

    /// Builds the configuration: defaults, then the file, then the flags.
    pub fn load(args: &Args) -> Result<Config, String> {
        let mut c = Config::defaults(args.config.clone());
        if let Some(path) = &args.config {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (name, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                let value = unquote(value.trim());
                c.set_startup(name, &value).map_err(|e| format!("{}:{}: {name}: {e}", path.display(), n + 1))?;
            }
        }
        if let Some(v) = &args.bind {
            c.bind = v.clone();
        }
        if let Some(v) = args.port {
            *c.port.get_mut() = v;
        }
        if let Some(v) = args.memcache_port {
            c.memcache_port = v;
        }
        if let Some(v) = args.threads {
            c.threads = v.max(1);
        }
        if let Some(v) = &args.shm {
            c.shm = Some(v.clone());
        }
        if let Some(v) = args.databases {
            c.databases = v;
        }
        if let Some(v) = args.capacity {
            c.capacity = Some(v);
        }
        if args.floor {
            c.floor = Some(crate::floor::value(args.floor_value_size));
        }
        c.busy_poll = std::time::Duration::from_micros(args.busy_poll_us.min(1_000_000));
        let set = |a: &AtomicU64, v: Option<u64>| {
            if let Some(v) = v {
                a.store(v, Ordering::Relaxed)
            }
        };
        set(&c.maxclients, args.maxclients);
        set(&c.proto_max_bulk_len, args.proto_max_bulk_len);
        set(&c.client_output_buffer_limit, args.client_output_buffer_limit);
        set(&c.item_size_max, args.item_size_max);
        let thresholds = [
            ("hash-max-listpack-entries", &args.hash_max_listpack_entries),
            ("hash-max-listpack-value", &args.hash_max_listpack_value),
            ("set-max-intset-entries", &args.set_max_intset_entries),
            ("zset-max-listpack-entries", &args.zset_max_listpack_entries),
            ("zset-max-listpack-value", &args.zset_max_listpack_value),
            ("list-max-listpack-size", &args.list_max_listpack_size),
        ];
        for (name, v) in thresholds {
            if let Some(v) = v {
                c.set(name, v).map_err(|e| format!("--{name}: {e}"))?;
            }
        }
        if c.databases == 0 || c.databases > larder_engine::MAX_DBS {
            return Err(format!("databases must be between 1 and {}", larder_engine::MAX_DBS));
        }
        // The listeners use SO_REUSEPORT (one per worker), so the kernel would let both
        // protocols bind one port and split its connections between them.
        let port = *c.port.get_mut();
        if port != 0 && port == c.memcache_port {
            return Err(format!("port and memcache-port are both {port}: each protocol needs its own port"));
        }
        Ok(c)
    }

    /// Settings only the file (or flags) may give, then everything CONFIG SET may change.
    fn set_startup(&mut self, name: &str, value: &str) -> Result<(), String> {
        let num = |v: &str| v.parse::<u64>().map_err(|_| "argument couldn't be parsed into an integer".to_string());
        match name.to_ascii_lowercase().as_str() {
            "bind" => self.bind = value.split_whitespace().next().unwrap_or("127.0.0.1").to_string(),
            "port" => *self.port.get_mut() = num(value)? as u16,
            "memcache-port" => self.memcache_port = num(value)? as u16,
            "threads" | "io-threads" => self.threads = num(value)?.max(1) as usize,
            "shm" => self.shm = Some(value.to_string()),
            "databases" => self.databases = num(value)? as u32,
            "capacity" => self.capacity = Some(parse_mem_strict(value).ok_or("argument must be a memory value")?),
            "user" => self.users.push(value.to_string()),
            // Fixed at startup and nothing to change: accepted so a redis.conf loads.
            "daemonize" | "enable-debug-command" | "enable-module-command" | "appendfilename" | "aclfile" => {
                let p = param(name).ok_or("unknown")?;
                let v = normalize(p.kind, value)?;
                self.store_passive(p.name, v);
            }
            other => self.set(other, value)?,
        }
        Ok(())
    }

    /// Validates one CONFIG SET pair without changing anything; returns the parameter and
    /// the canonical value to [`apply`](Config::apply).
    pub fn check(&self, name: &str, value: &str) -> Result<(&'static Param, String), SetError> {
        let p = param(name).ok_or(SetError::Unknown)?;
        match p.mode {
            Mode::Immutable => return Err(SetError::Immutable),
            Mode::Fixed if normalize(p.kind, value).ok() != self.get(p.name) => return Err(SetError::Immutable),
            _ => {}
        }
        let v = normalize(p.kind, value).map_err(SetError::Invalid)?;
        Ok((p, v))
    }

    /// Stores a value that [`check`](Config::check) accepted.
    pub fn apply(&self, p: &Param, v: &str) {
        if p.mode != Mode::Mutable {
            // A fixed parameter set to its current value: nothing to do.
            return;
        }
        let num = || v.parse::<i64>().unwrap_or(0);
        match p.name {
            // Stored with the listeners' change, which may fail (worker::change_resp_port).
            "port" => {}
            "maxclients" => self.maxclients.store(num() as u64, Ordering::Relaxed),
            "proto-max-bulk-len" => self.proto_max_bulk_len.store(num() as u64, Ordering::Relaxed),
            "client-query-buffer-limit" => self.client_query_buffer_limit.store(num() as u64, Ordering::Relaxed),
            "item-size-max" => self.item_size_max.store(num() as u64, Ordering::Relaxed),
            "slowlog-log-slower-than" => {
                let n = num();
                self.slowlog_log_slower_than.store(if n < 0 { u64::MAX } else { n as u64 }, Ordering::Relaxed);
                self.update_slow_usec();
            }
            "latency-tracking" => {
                self.latency_tracking.store(v == "yes", Ordering::Relaxed);
                self.store_passive(p.name, v.to_string());
            }
            "latency-monitor-threshold" => {
                self.latency_monitor_threshold.store(num() as u64, Ordering::Relaxed);
                self.store_passive(p.name, v.to_string());
                self.update_slow_usec();
            }
            "latency-tracking-info-percentiles" => {
                *self.latency_percentiles.write().unwrap_or_else(|e| e.into_inner()) =
                    parse_percentiles(v).unwrap_or_default();
            }
            "slowlog-max-len" => self.slowlog_max_len.store(num() as usize, Ordering::Relaxed),
            "timeout" => self.timeout.store(num() as u64, Ordering::Relaxed),
            "hll-sparse-max-bytes" => self.hll_sparse_max_bytes.store(num() as u64, Ordering::Relaxed),
            "tracking-table-max-keys" => self.tracking_table_max_keys.store(num() as u64, Ordering::Relaxed),
            "notify-keyspace-events" => {
                let flags = crate::notify::parse(v.as_bytes()).unwrap_or(0);
                self.notify_keyspace_events.store(flags, Ordering::Relaxed)
            }
            "client-output-buffer-limit" => {
                let merged = merge_output_limits(&self.get("client-output-buffer-limit").unwrap_or_default(), v);
                let hard = merged
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .chunks(4)
                    .find(|c| c[0] == "normal")
                    .and_then(|c| c[1].parse().ok());
                self.client_output_buffer_limit.store(hard.unwrap_or(0), Ordering::Relaxed);
                let parts: Vec<&str> = merged.split_whitespace().collect();
                if let Some(c) = parts.chunks(4).find(|c| c.len() == 4 && c[0] == "pubsub") {
                    let n = |s: &str| s.parse::<u64>().unwrap_or(0);
                    let l = &self.pubsub_output_limit;
                    l.hard.store(n(c[1]), Ordering::Relaxed);
                    l.soft.store(n(c[2]), Ordering::Relaxed);
                    l.soft_secs.store(n(c[3]), Ordering::Relaxed);
                }
                self.store_passive(p.name, merged);
            }
            _ => self.store_passive(p.name, v.to_string()),
        }
    }

    /// Copies the collection thresholds into the engine's [`Limits`], which decide when a
    /// packed collection becomes a tree. Called once the store is open and after every
    /// CONFIG SET; the values themselves live here, as the text CONFIG GET prints.
    pub fn sync_limits(&self, l: &Limits) {
        for &(name, field) in LIMIT_PARAMS {
            let v: i64 = self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0);
            match field {
                LimitField::U(f) => f(l).store(v.max(0) as u64, Ordering::Relaxed),
                LimitField::ListSize => l.list_max_listpack_size.store(v, Ordering::Relaxed),
            }
        }
    }

    /// `latency-tracking-info-percentiles`.
    pub fn latency_percentiles(&self) -> Vec<f64> {
        self.latency_percentiles.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Recomputes [`slow_usec`](Config::slow_usec) after either threshold changed.
    fn update_slow_usec(&self) {
        let slowlog = self.slowlog_log_slower_than.load(Ordering::Relaxed);
        let monitor = match self.latency_monitor_threshold.load(Ordering::Relaxed) {
            0 => u64::MAX,
            ms => ms.saturating_mul(1000),
        };
        self.slow_usec.store(slowlog.min(monitor), Ordering::Relaxed);
    }

    fn store_passive(&self, name: &str, v: String) {
        let mut pv = self.passive.write().unwrap_or_else(|e| e.into_inner());
        match pv.iter_mut().find(|(n, _)| n == name) {
            Some(e) => e.1 = v,
            None => pv.push((name.to_string(), v)),
        }
    }

    /// CONFIG SET one parameter. Errors are the text after `ERR CONFIG SET failed (possibly
    /// related to argument '<name>') - ` (or the unknown-option text).
    pub fn set(&self, name: &str, value: &str) -> Result<(), String> {
        match self.check(name, value) {
            Ok((p, v)) => {
                self.apply(p, &v);
                Ok(())
            }
            Err(SetError::Unknown) => Err("Unknown option or number of arguments for CONFIG SET".into()),
            Err(SetError::Immutable) => Err("can't set immutable config".into()),
            Err(SetError::Invalid(e)) => Err(e),
        }
    }

    /// The current value of a parameter (by name or alias), as CONFIG GET prints it.
    pub fn get(&self, name: &str) -> Option<String> {
        let p = param(name)?;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        Some(match p.name {
            "bind" => self.bind.clone(),
            "port" => self.port.load(Ordering::Relaxed).to_string(),
            "memcache-port" => self.memcache_port.to_string(),
            "io-threads" => self.threads.to_string(),
            "databases" => self.databases.to_string(),
            "maxclients" => l(&self.maxclients),
            "proto-max-bulk-len" => l(&self.proto_max_bulk_len),
            "client-query-buffer-limit" => l(&self.client_query_buffer_limit),
            "item-size-max" => l(&self.item_size_max),
            "slowlog-log-slower-than" => {
                let v = self.slowlog_log_slower_than.load(Ordering::Relaxed);
                if v == u64::MAX {
                    "-1".into()
                } else {
                    v.to_string()
                }
            }
            "slowlog-max-len" => self.slowlog_max_len.load(Ordering::Relaxed).to_string(),
            "timeout" => l(&self.timeout),
            "hll-sparse-max-bytes" => l(&self.hll_sparse_max_bytes),
            "tracking-table-max-keys" => l(&self.tracking_table_max_keys),
            "notify-keyspace-events" => crate::notify::render(self.notify_keyspace_events.load(Ordering::Relaxed)),
            "latency-tracking-info-percentiles" => self
                .latency_percentiles()
                .iter()
                .map(|&p| crate::latency::percentile_label(p))
                .collect::<Vec<_>>()
                .join(" "),
            "client-output-buffer-limit" => {
                // The normal class's hard limit may have come from the flag.
                let stored = self.passive_value(p);
                let hard = l(&self.client_output_buffer_limit);
                let parts: Vec<&str> = stored.split_whitespace().collect();
                let mut out = Vec::new();
                for c in parts.chunks(4).filter(|c| c.len() == 4) {
                    let h = if c[0] == "normal" { hard.as_str() } else { c[1] };
                    out.push(format!("{} {h} {} {}", c[0], c[2], c[3]));
                }
                out.join(" ")
            }
            _ => self.passive_value(p),
        })
    }

    fn passive_value(&self, p: &Param) -> String {
        let pv = self.passive.read().unwrap_or_else(|e| e.into_inner());
        pv.iter().find(|(n, _)| n == p.name).map_or_else(|| p.default.to_string(), |(_, v)| v.clone())
    }

    /// Every parameter CONFIG GET * lists (not the hidden ones) with its current value, in
    /// [`PARAMS`] order.
    pub fn all(&self) -> Vec<(String, String)> {
        PARAMS
            .iter()
            .filter(|p| !p.hidden)
            .map(|p| (p.name.to_string(), self.get(p.name).unwrap_or_default()))
            .collect()
    }

    /// CONFIG REWRITE: rewrites the `--config` file with the current values, as Redis does:
    /// lines of known parameters get the current value (later duplicates are dropped),
    /// comments and unknown lines stay, and parameters that differ from their default but
    /// were not in the file are appended. `users` are the ACL users' `user` lines (the
    /// text after `user`), which take the place of the file's (none with an `aclfile`, as
    /// Redis's `rewriteConfigUserOption`).
    pub fn rewrite(&self, users: &[String]) -> Result<(), String> {
        let Some(path) = &self.file else { return Err("The server is running without a config file".into()) };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let mut out = Vec::new();
        let mut seen: Vec<&'static str> = Vec::new();
        let mut users_written = false;
        for line in text.lines() {
            let t = line.trim();
            if t.is_empty() || t.starts_with('#') {
                if t != "# Generated by CONFIG REWRITE" {
                    out.push(line.to_string());
                }
                continue;
            }
            let name = t.split_whitespace().next().unwrap_or("");
            if name.eq_ignore_ascii_case("user") {
                if !users_written {
                    out.extend(users.iter().map(|u| format!("user {u}")));
                    users_written = true;
                }
                continue;
            }
            match param(name) {
                Some(p) if !seen.contains(&p.name) => {
                    seen.push(p.name);
                    out.push(format!("{} {}", p.name, quote(&self.get(p.name).unwrap_or_default())));
                }
                Some(_) => {}
                // Larder's startup-only names that are not Redis parameters (shm, capacity).
                None => out.push(line.to_string()),
            }
        }
        let defaults = Config::defaults(None);
        let mut header = false;
        for p in PARAMS {
            if seen.contains(&p.name) || p.name == "dir" {
                continue;
            }
            let (cur, def) = (self.get(p.name).unwrap_or_default(), defaults.get(p.name).unwrap_or_default());
            if cur != def {
                if !header {
                    out.push("# Generated by CONFIG REWRITE".into());
                    header = true;
                }
                out.push(format!("{} {}", p.name, quote(&cur)));
            }
        }
        if !users_written && !users.is_empty() {
            if !header {
                out.push("# Generated by CONFIG REWRITE".into());
            }
            out.extend(users.iter().map(|u| format!("user {u}")));
        }
        let mut body = out.join("\n");
        body.push('\n');
        // Write a temporary file and rename it over the old one, so a crash never leaves a
        // half-written configuration.
        let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
        std::fs::write(&tmp, body)
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|e| format!("Rewriting config file: {e}"))
    }
}

fn unquote(v: &str) -> String {
    if v.len() >= 2 && ((v.starts_with('"') && v.ends_with('"')) || (v.starts_with('\'') && v.ends_with('\''))) {
        v[1..v.len() - 1].to_string()
    } else {
        v.to_string()
    }
}

fn quote(v: &str) -> String {
    if v.is_empty() || v.contains(char::is_whitespace) {
        format!("\"{v}\"")
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn both_protocols_on_one_port_is_refused() {
        let args = Args { port: Some(7000), memcache_port: Some(7000), ..Default::default() };
        assert!(Config::load(&args).unwrap_err().contains("each protocol needs its own port"));
        let args = Args { port: Some(0), memcache_port: Some(0), ..Default::default() };
        assert!(Config::load(&args).is_ok());
    }
    use super::*;

    #[test]
    fn size_flags_take_units_as_the_config_file_does() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let cli = Cli::try_parse_from([
            "larder",
            "--capacity",
            "4gb",
            "--item-size-max",
            "2m",
            "--proto-max-bulk-len",
            "1024",
        ])
        .unwrap();
        assert_eq!(cli.args.capacity, Some(4 << 30));
        assert_eq!(cli.args.item_size_max, Some(2_000_000));
        assert_eq!(cli.args.proto_max_bulk_len, Some(1024));
        assert!(Cli::try_parse_from(["larder", "--capacity", "4 gb"]).is_err());
        assert!(Cli::try_parse_from(["larder", "--client-output-buffer-limit", "-1"]).is_err());
    }

    #[test]
    fn values_are_checked_and_normalized_as_redis_does() {
        assert_eq!(parse_mem("10K"), Some(10_000));
        assert_eq!(parse_mem("1gb"), Some(1 << 30));
        assert_eq!(parse_mem("1.5gb"), None);
        assert_eq!(parse_mem("-1"), None);
        // Redis's memtoull quirks, each checked with CONFIG SET against redis-server 7.0.15.
        assert_eq!(parse_mem(""), Some(0));
        assert_eq!(parse_mem("kb"), Some(0));
        assert_eq!(parse_mem("99999999999999999999999"), Some(u64::MAX));
        assert_eq!(parse_mem("99999999999999999999999kb"), Some(u64::MAX.wrapping_mul(1024)));
        assert_eq!(parse_mem(&"1".repeat(128)), None);
        assert_eq!(parse_mem(" 1"), None);
        assert_eq!(parse_mem_strict(""), None);
        assert_eq!(parse_mem_strict("99999999999999999999999"), None);
        let c = Config::defaults(None);
        assert_eq!(
            c.check("maxclients", "abc").unwrap_err(),
            SetError::Invalid("argument couldn't be parsed into an integer".into())
        );
        assert_eq!(
            c.check("maxclients", "0").unwrap_err(),
            SetError::Invalid("argument must be between 1 and 4294967295 inclusive".into())
        );
        assert_eq!(c.check("port", "1").unwrap().1, "1");
        assert_eq!(c.check("memcache-port", "1").unwrap_err(), SetError::Immutable);
        assert!(c.check("memcache-port", "11211").is_ok());
        assert_eq!(c.check("daemonize", "no").unwrap_err(), SetError::Immutable);
        assert_eq!(c.check("maxmemory-clients", "5%").unwrap().1, "5%");
        assert_eq!(c.check("maxmemory", "").unwrap().1, "0");
        assert_eq!(c.check("maxmemory", "99999999999999999999999").unwrap().1, "18446744073709551615");
        assert_eq!(
            c.check("proto-max-bulk-len", "").unwrap_err(),
            SetError::Invalid("argument must be between 1048576 and 9223372036854775807 inclusive".into())
        );
        assert_eq!(c.check("nosuch", "1").unwrap_err(), SetError::Unknown);
        assert_eq!(c.check("hz", "1000").unwrap().1, "500");
        assert_eq!(c.check("appendonly", "YES").unwrap().1, "yes");
        assert_eq!(c.check("save", "3600 1 300 100").unwrap().1, "3600 1 300 100");
        assert!(c.check("save", " 100 10").is_err());
        c.set("notify-keyspace-events", "KEA").unwrap();
        assert_eq!(c.get("notify-keyspace-events").unwrap(), "AKE");
        // The flags keep what the text Redis prints leaves out (n beside A).
        c.set("notify-keyspace-events", "KAn").unwrap();
        assert_eq!(c.get("notify-keyspace-events").unwrap(), "AK");
        assert_ne!(c.notify_keyspace_events.load(Ordering::Relaxed) & crate::notify::NEW, 0);
        assert_eq!(
            c.check("notify-keyspace-events", "KEX").unwrap_err(),
            SetError::Invalid("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())
        );
        c.set("notify-keyspace-events", "").unwrap();
        assert_eq!(c.notify_keyspace_events.load(Ordering::Relaxed), 0);
        c.set("client-output-buffer-limit", "normal 1mb 2 3").unwrap();
        assert_eq!(
            c.get("client-output-buffer-limit").unwrap(),
            "normal 1048576 2 3 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
        );
        assert_eq!(c.client_output_buffer_limit.load(Ordering::Relaxed), 1 << 20);
        assert_eq!(c.pubsub_output_limit.hard.load(Ordering::Relaxed), 32 << 20);
        c.set("client-output-buffer-limit", "pubsub 100kb 10kb 5").unwrap();
        assert_eq!(c.pubsub_output_limit.hard.load(Ordering::Relaxed), 100 << 10);
        assert_eq!(c.pubsub_output_limit.soft.load(Ordering::Relaxed), 10 << 10);
        assert_eq!(c.pubsub_output_limit.soft_secs.load(Ordering::Relaxed), 5);
        assert_eq!(c.client_output_buffer_limit.load(Ordering::Relaxed), 1 << 20);
        assert_eq!(c.get("HASH-MAX-ZIPLIST-ENTRIES").unwrap(), "512");
    }

    #[test]
    fn collection_thresholds_reach_the_engine() {
        let c = Config::defaults(None);
        let l = Limits::default();
        c.sync_limits(&l);
        assert_eq!(l.hash_max_listpack_entries.load(Ordering::Relaxed), 512);
        c.set("hash-max-ziplist-value", "1kb").unwrap();
        c.set("zset-max-ziplist-entries", "7").unwrap();
        c.set("zset-max-listpack-value", "2k").unwrap();
        c.set("set-max-intset-entries", "3").unwrap();
        c.set("list-max-ziplist-size", "-6").unwrap();
        c.set("hash-max-listpack-entries", "0").unwrap();
        c.sync_limits(&l);
        assert_eq!(l.hash_max_listpack_value.load(Ordering::Relaxed), 1024);
        assert_eq!(l.hash_max_listpack_entries.load(Ordering::Relaxed), 0);
        assert_eq!(l.zset_max_listpack_entries.load(Ordering::Relaxed), 7);
        assert_eq!(l.zset_max_listpack_value.load(Ordering::Relaxed), 2000);
        assert_eq!(l.set_max_intset_entries.load(Ordering::Relaxed), 3);
        assert_eq!(l.list_max_listpack_size.load(Ordering::Relaxed), -6);
        assert_eq!(c.get("hash-max-listpack-value").unwrap(), "1024");
        assert_eq!(c.get("list-max-listpack-size").unwrap(), "-6");
        // Redis's texts for bad values; set-max-listpack-* are Redis 7.2 names.
        assert_eq!(
            c.check("hash-max-listpack-entries", "-1").unwrap_err(),
            SetError::Invalid("argument must be between 0 and 9223372036854775807 inclusive".into())
        );
        assert_eq!(
            c.check("hash-max-listpack-entries", "1k").unwrap_err(),
            SetError::Invalid("argument couldn't be parsed into an integer".into())
        );
        assert_eq!(
            c.check("hash-max-listpack-value", "-1").unwrap_err(),
            SetError::Invalid("argument must be a memory value".into())
        );
        assert_eq!(c.check("set-max-listpack-entries", "5").unwrap_err(), SetError::Unknown);
    }

    #[test]
    fn thresholds_from_flags_and_file() {
        let dir = std::env::temp_dir().join(format!("larder-thresholds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("larder.conf");
        std::fs::write(&file, "hash-max-ziplist-entries 9\nzset-max-listpack-value 1kb\nlist-max-listpack-size -3\n")
            .unwrap();
        let args = Args {
            config: Some(file),
            set_max_intset_entries: Some("17".into()),
            list_max_listpack_size: Some("5".into()),
            ..Default::default()
        };
        let c = Config::load(&args).unwrap();
        let l = Limits::default();
        c.sync_limits(&l);
        assert_eq!(l.hash_max_listpack_entries.load(Ordering::Relaxed), 9);
        assert_eq!(l.zset_max_listpack_value.load(Ordering::Relaxed), 1024);
        assert_eq!(l.set_max_intset_entries.load(Ordering::Relaxed), 17);
        // The flag wins over the file.
        assert_eq!(l.list_max_listpack_size.load(Ordering::Relaxed), 5);
        let bad = Args { hash_max_listpack_entries: Some("x".into()), ..Default::default() };
        assert_eq!(
            Config::load(&bad).unwrap_err(),
            "--hash-max-listpack-entries: argument couldn't be parsed into an integer"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
