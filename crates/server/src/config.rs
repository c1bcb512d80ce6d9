//! Server configuration: command-line flags, the same names in a redis.conf-style file
//! (`--config FILE`: one `name value` per line, `#` comments), and the runtime view that
//! `CONFIG GET` / `CONFIG SET` read and change.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;

/// `larder server` flags. Every flag can also be given in the `--config` file by its name
/// without dashes (`port 7000`, `memcache-port 0`, `maxclients 100`).
#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// A redis.conf-style file: `name value` per line; flags given on the command line win.
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
    /// Largest bulk argument accepted, in bytes (Redis `proto-max-bulk-len`).
    #[arg(long)]
    pub proto_max_bulk_len: Option<u64>,
    /// Output buffer limit per client, in bytes: a client whose pending replies exceed it is
    /// disconnected (Redis `client-output-buffer-limit` for normal clients; 0 = none).
    #[arg(long)]
    pub client_output_buffer_limit: Option<u64>,
    /// Largest memcached item value, in bytes (memcached `-I`).
    #[arg(long)]
    pub item_size_max: Option<u64>,
    /// Bytes reserved for the arena (sparse; default: half the machine's memory).
    #[arg(long)]
    pub capacity: Option<u64>,
}

/// The settings a running server uses. Fields that `CONFIG SET` may change are atomics.
#[derive(Debug)]
pub struct Config {
    pub bind: String,
    pub port: u16,
    pub memcache_port: u16,
    pub threads: usize,
    pub shm: Option<String>,
    pub databases: u32,
    pub capacity: Option<u64>,
    pub maxclients: AtomicU64,
    pub proto_max_bulk_len: AtomicU64,
    pub client_output_buffer_limit: AtomicU64,
    pub item_size_max: AtomicU64,
    pub client_query_buffer_limit: AtomicU64,
    pub slowlog_log_slower_than: AtomicU64,
    pub slowlog_max_len: AtomicUsize,
    pub timeout: AtomicU64,
    /// Parameters Larder accepts and reports but that change nothing (save, appendonly, …
    /// until persistence exists), so tools that set them keep working.
    pub passive: RwLock<Vec<(String, String)>>,
    /// The config file, for CONFIG REWRITE.
    pub file: Option<PathBuf>,
}

fn parse_size(v: &str) -> Result<u64, String> {
    let l = v.to_ascii_lowercase();
    let (num, mul) = if let Some(n) = l.strip_suffix("gb") {
        (n, 1u64 << 30)
    } else if let Some(n) = l.strip_suffix("mb") {
        (n, 1 << 20)
    } else if let Some(n) = l.strip_suffix("kb") {
        (n, 1 << 10)
    } else if let Some(n) = l.strip_suffix('g') {
        (n, 1_000_000_000)
    } else if let Some(n) = l.strip_suffix('m') {
        (n, 1_000_000)
    } else if let Some(n) = l.strip_suffix('k') {
        (n, 1000)
    } else {
        (l.as_str(), 1)
    };
    num.parse::<u64>().ok().and_then(|n| n.checked_mul(mul)).ok_or_else(|| format!("argument must be a memory value"))
}

impl Config {
    /// Builds the configuration: defaults, then the file, then the flags.
    pub fn load(args: &Args) -> Result<Config, String> {
        let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let mut c = Config {
            bind: "127.0.0.1".into(),
            port: 6379,
            memcache_port: 11211,
            threads: cores,
            shm: None,
            databases: 16,
            capacity: None,
            maxclients: AtomicU64::new(10000),
            proto_max_bulk_len: AtomicU64::new(512 << 20),
            client_output_buffer_limit: AtomicU64::new(0),
            item_size_max: AtomicU64::new(1 << 20),
            client_query_buffer_limit: AtomicU64::new(1 << 30),
            slowlog_log_slower_than: AtomicU64::new(10_000),
            slowlog_max_len: AtomicUsize::new(128),
            timeout: AtomicU64::new(0),
            passive: RwLock::new(Vec::new()),
            file: args.config.clone(),
        };
        if let Some(path) = &args.config {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            for (n, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() || line.starts_with('#') {
                    continue;
                }
                let (name, value) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
                let value = value.trim().trim_matches('"');
                c.set_startup(name, value).map_err(|e| format!("{}:{}: {name}: {e}", path.display(), n + 1))?;
            }
        }
        if let Some(v) = &args.bind {
            c.bind = v.clone();
        }
        if let Some(v) = args.port {
            c.port = v;
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
        let set = |a: &AtomicU64, v: Option<u64>| {
            if let Some(v) = v {
                a.store(v, Ordering::Relaxed)
            }
        };
        set(&c.maxclients, args.maxclients);
        set(&c.proto_max_bulk_len, args.proto_max_bulk_len);
        set(&c.client_output_buffer_limit, args.client_output_buffer_limit);
        set(&c.item_size_max, args.item_size_max);
        if c.databases == 0 || c.databases > larder_engine::MAX_DBS {
            return Err(format!("databases must be between 1 and {}", larder_engine::MAX_DBS));
        }
        Ok(c)
    }

    /// Settings only the file (or flags) may give, then everything CONFIG SET may change.
    fn set_startup(&mut self, name: &str, value: &str) -> Result<(), String> {
        let num = |v: &str| v.parse::<u64>().map_err(|_| "argument couldn't be parsed into an integer".to_string());
        match name.to_ascii_lowercase().as_str() {
            "bind" => self.bind = value.split_whitespace().next().unwrap_or("127.0.0.1").to_string(),
            "port" => self.port = num(value)? as u16,
            "memcache-port" => self.memcache_port = num(value)? as u16,
            "threads" | "io-threads" => self.threads = num(value)?.max(1) as usize,
            "shm" => self.shm = Some(value.to_string()),
            "databases" => self.databases = num(value)? as u32,
            "capacity" => self.capacity = Some(parse_size(value)?),
            other => self.set(other, value)?,
        }
        Ok(())
    }

    /// CONFIG SET one parameter. Errors are the text after `ERR CONFIG SET failed (possibly
    /// related to argument '<name>') - `.
    pub fn set(&self, name: &str, value: &str) -> Result<(), String> {
        let name = name.to_ascii_lowercase();
        let mem = |a: &AtomicU64| -> Result<(), String> {
            a.store(parse_size(value)?, Ordering::Relaxed);
            Ok(())
        };
        let int = |a: &AtomicU64| -> Result<(), String> {
            let v: i64 = value.parse().map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            a.store(v.max(0) as u64, Ordering::Relaxed);
            Ok(())
        };
        match name.as_str() {
            "maxclients" => int(&self.maxclients),
            "proto-max-bulk-len" => mem(&self.proto_max_bulk_len),
            "client-query-buffer-limit" => mem(&self.client_query_buffer_limit),
            "item-size-max" => mem(&self.item_size_max),
            "client-output-buffer-limit" => {
                // Redis form: "normal 0 0 0 replica ... pubsub ..."; we keep the normal class's hard limit.
                let parts: Vec<&str> = value.split_whitespace().collect();
                if parts.len() % 4 != 0 && parts.len() != 1 {
                    return Err("Wrong number of arguments in buffer limit configuration.".into());
                }
                if parts.len() == 1 {
                    return mem(&self.client_output_buffer_limit);
                }
                for chunk in parts.chunks(4) {
                    if chunk[0].eq_ignore_ascii_case("normal") {
                        self.client_output_buffer_limit.store(parse_size(chunk[1])?, Ordering::Relaxed);
                    } else if !["replica", "slave", "pubsub"].contains(&chunk[0].to_ascii_lowercase().as_str()) {
                        return Err("Invalid client class specified in buffer limit configuration.".into());
                    }
                }
                Ok(())
            }
            "slowlog-log-slower-than" => {
                let v: i64 = value.parse().map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
                self.slowlog_log_slower_than.store(if v < 0 { u64::MAX } else { v as u64 }, Ordering::Relaxed);
                Ok(())
            }
            "slowlog-max-len" => {
                let v: usize = value.parse().map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
                self.slowlog_max_len.store(v, Ordering::Relaxed);
                Ok(())
            }
            "timeout" => int(&self.timeout),
            _ if PASSIVE.contains(&name.as_str()) => {
                let mut p = self.passive.write().unwrap_or_else(|e| e.into_inner());
                match p.iter_mut().find(|(n, _)| *n == name) {
                    Some(e) => e.1 = value.to_string(),
                    None => p.push((name.clone(), value.to_string())),
                }
                Ok(())
            }
            _ => Err("Unknown option or number of arguments for CONFIG SET".into()),
        }
    }

    /// Every parameter with its current value, for CONFIG GET.
    pub fn all(&self) -> Vec<(String, String)> {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        let slower = self.slowlog_log_slower_than.load(Ordering::Relaxed);
        let mut v = vec![
            ("bind".to_string(), self.bind.clone()),
            ("port".into(), self.port.to_string()),
            ("memcache-port".into(), self.memcache_port.to_string()),
            ("io-threads".into(), self.threads.to_string()),
            ("threads".into(), self.threads.to_string()),
            ("databases".into(), self.databases.to_string()),
            ("maxclients".into(), l(&self.maxclients)),
            ("proto-max-bulk-len".into(), l(&self.proto_max_bulk_len)),
            ("client-query-buffer-limit".into(), l(&self.client_query_buffer_limit)),
            ("item-size-max".into(), l(&self.item_size_max)),
            (
                "client-output-buffer-limit".into(),
                format!("normal {} 0 0 replica 268435456 67108864 60 pubsub 33554432 8388608 60", l(&self.client_output_buffer_limit)),
            ),
            ("slowlog-log-slower-than".into(), if slower == u64::MAX { "-1".into() } else { slower.to_string() }),
            ("slowlog-max-len".into(), self.slowlog_max_len.load(Ordering::Relaxed).to_string()),
            ("timeout".into(), l(&self.timeout)),
        ];
        let p = self.passive.read().unwrap_or_else(|e| e.into_inner());
        for name in PASSIVE {
            let val = p.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()).unwrap_or_else(|| passive_default(name).to_string());
            v.push((name.to_string(), val));
        }
        v
    }
}

/// Parameters accepted and echoed back but not acted on yet.
const PASSIVE: &[&str] = &[
    "save",
    "appendonly",
    "appendfsync",
    "maxmemory",
    "maxmemory-policy",
    "hz",
    "lazyfree-lazy-user-del",
    "lazyfree-lazy-user-flush",
    "loglevel",
    "dir",
    "dbfilename",
    "appendfilename",
    "activerehashing",
    "latency-tracking",
    "notify-keyspace-events",
    "list-max-listpack-size",
    "hash-max-listpack-entries",
    "hash-max-listpack-value",
    "set-max-intset-entries",
    "set-max-listpack-entries",
    "set-max-listpack-value",
    "zset-max-listpack-entries",
    "zset-max-listpack-value",
    "lua-time-limit",
    "busy-reply-threshold",
    "active-expire-effort",
    "lfu-log-factor",
    "lfu-decay-time",
    "maxmemory-samples",
    "tcp-keepalive",
    "close-on-oom",
];

fn passive_default(name: &str) -> &'static str {
    match name {
        "save" => "",
        "appendonly" => "no",
        "appendfsync" => "everysec",
        "maxmemory" => "0",
        "maxmemory-policy" => "noeviction",
        "hz" => "10",
        "loglevel" => "notice",
        "dir" => ".",
        "dbfilename" => "dump.rdb",
        "appendfilename" => "appendonly.aof",
        "activerehashing" => "yes",
        "latency-tracking" => "yes",
        "list-max-listpack-size" => "-2",
        "hash-max-listpack-entries" => "128",
        "hash-max-listpack-value" => "64",
        "set-max-intset-entries" => "512",
        "set-max-listpack-entries" => "128",
        "set-max-listpack-value" => "64",
        "zset-max-listpack-entries" => "128",
        "zset-max-listpack-value" => "64",
        "lua-time-limit" | "busy-reply-threshold" => "5000",
        "active-expire-effort" => "1",
        "lfu-log-factor" => "10",
        "lfu-decay-time" => "1",
        "maxmemory-samples" => "5",
        "tcp-keepalive" => "300",
        _ => "no",
    }
}
