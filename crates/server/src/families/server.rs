//! Server commands: INFO, CONFIG, COMMAND, SLOWLOG, DEBUG, SHUTDOWN, TIME, LASTSAVE, SAVE,
//! BGSAVE, MONITOR, the FLUSH subcommands of FUNCTION and SCRIPT that test harnesses call between
//! tests, and CLUSTER as a server without cluster mode answers it.
//!
//! Replies follow Redis 7: INFO is one text of `# Section` blocks with `field:value` lines
//! (CRLF), sent as a bulk string (a verbatim string in RESP3); COMMAND INFO entries have
//! Redis's ten fields, with key specs and ACL categories derived from the command table.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use larder_resp::Writer;

use crate::command::{
    table, CmdError, Ctx, Handler, Spec, ADMIN, ALLOW_BUSY, BLOCKING, FAST, FLAG_NAMES, LOADING, MOVABLEKEYS, NOSCRIPT,
    NO_ASYNC_LOADING, NO_MANDATORY_KEYS, NO_MULTI, PUBSUB, READONLY, STALE, WRITE,
};
use crate::config::SetError;
use crate::families::connection::cmd_container;
use crate::Shared;

/// A command whose keys (if any) its legacy key range does not describe.
pub(crate) const fn spec(
    name: &'static str,
    arity: i32,
    flags: u32,
    group: &'static str,
    summary: &'static str,
    handler: Handler,
) -> Spec {
    Spec { name, arity, flags, first_key: 0, last_key: 0, step: 0, group, summary, handler }
}

const AS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const LS: u32 = LOADING | STALE;

pub const COMMANDS: &[Spec] = &[
    spec("info", -1, LS, "server", "Returns information and statistics about the server.", cmd_info),
    spec("config", -2, 0, "server", "A container for server configuration commands.", cmd_container),
    spec("command", -1, LS, "server", "Returns detailed information about all commands.", cmd_command),
    spec("slowlog", -2, 0, "server", "A container for slow log commands.", cmd_container),
    spec("latency", -2, 0, "server", "A container for latency diagnostics commands.", cmd_container),
    spec("memory", -2, 0, "server", "A container for memory diagnostics commands.", cmd_container),
    spec("debug", -2, AS, "server", "A container for debugging commands.", cmd_debug),
    spec("role", 1, NOSCRIPT | LOADING | STALE | FAST, "replication", "Returns the replication role.", cmd_role),
    spec(
        "shutdown",
        -1,
        AS | NO_MULTI | ALLOW_BUSY,
        "server",
        "Synchronously saves the database(s) to disk and shuts down the Redis server.",
        cmd_shutdown,
    ),
    spec("time", 1, LS | FAST, "server", "Returns the server time.", cmd_time),
    spec(
        "lastsave",
        1,
        LS | FAST,
        "server",
        "Returns the Unix timestamp of the last successful save to disk.",
        cmd_lastsave,
    ),
    spec(
        "save",
        1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING | NO_MULTI,
        "server",
        "Synchronously saves the database(s) to disk.",
        cmd_save,
    ),
    spec(
        "bgsave",
        -1,
        ADMIN | NOSCRIPT | NO_ASYNC_LOADING,
        "server",
        "Asynchronously saves the database(s) to disk.",
        cmd_save,
    ),
    spec("monitor", 1, AS, "server", "Listens for all requests received by the server in real-time.", cmd_monitor),
    spec("cluster", -2, 0, "cluster", "A container for cluster commands", cmd_container),
];

pub const SUBCOMMANDS: &[Spec] = &[
    spec("config|get", -3, AS, "server", "Returns the effective values of configuration parameters.", cmd_config_get),
    spec("config|set", -4, AS, "server", "Sets configuration parameters in-flight.", cmd_config_set),
    spec("config|resetstat", 2, AS, "server", "Resets the server's statistics.", cmd_config_resetstat),
    spec("config|rewrite", 2, AS, "server", "Persists the effective configuration to file.", cmd_config_rewrite),
    spec("config|help", 2, LS, "server", "Returns helpful text about the different subcommands.", cmd_config_help),
    spec("command|count", 2, LS, "server", "Returns a count of commands.", cmd_command_count),
    spec(
        "command|docs",
        -2,
        LS,
        "server",
        "Returns documentary information about one, multiple or all commands.",
        cmd_command_docs,
    ),
    spec(
        "command|info",
        -2,
        LS,
        "server",
        "Returns information about one, multiple or all commands.",
        cmd_command_info,
    ),
    spec("command|list", -2, LS, "server", "Returns a list of command names.", cmd_command_list),
    spec("command|getkeys", -4, LS, "server", "Extracts the key names from an arbitrary command.", cmd_command_getkeys),
    spec(
        "command|getkeysandflags",
        -4,
        LS,
        "server",
        "Extracts the key names and access flags for an arbitrary command.",
        cmd_command_getkeysandflags,
    ),
    spec("command|help", 2, LS, "server", "Returns helpful text about the different subcommands.", cmd_command_help),
    spec("slowlog|get", -2, ADMIN | LS, "server", "Returns the slow log's entries.", cmd_slowlog_get),
    spec("slowlog|len", 2, ADMIN | LS, "server", "Returns the number of entries in the slow log.", cmd_slowlog_len),
    spec("slowlog|reset", 2, ADMIN | LS, "server", "Clears all entries from the slow log.", cmd_slowlog_reset),
    spec("slowlog|help", 2, LS, "server", "Show helpful text about the different subcommands", cmd_slowlog_help),
    spec("latency|doctor", 2, AS, "server", "Return a human readable latency analysis report.", cmd_latency_doctor),
    spec("latency|graph", 3, AS, "server", "Return a latency graph for the event.", cmd_latency_graph),
    spec("latency|help", 2, LS, "server", "Show helpful text about the different subcommands.", cmd_latency_help),
    spec(
        "latency|histogram",
        -2,
        AS,
        "server",
        "Return the cumulative distribution of latencies of a subset of commands or all.",
        cmd_latency_histogram,
    ),
    spec("latency|history", 3, AS, "server", "Return timestamp-latency samples for the event.", cmd_latency_history),
    spec("latency|latest", 2, AS, "server", "Return the latest latency samples for all events.", cmd_latency_latest),
    spec("latency|reset", -2, AS, "server", "Reset latency data for one or more events.", cmd_latency_reset),
    Spec {
        first_key: 2,
        last_key: 2,
        step: 1,
        ..spec("memory|usage", -3, READONLY, "server", "Estimate the memory usage of a key.", cmd_memory_usage)
    },
    spec("memory|help", 2, LS, "server", "Show helpful text about the different subcommands", cmd_memory_help),
    spec("memory|stats", 2, 0, "server", "Returns details about memory usage.", cmd_memory_stats),
    spec("memory|doctor", 2, 0, "server", "Outputs a memory problems report.", cmd_memory_doctor),
    spec("memory|purge", 2, 0, "server", "Asks the allocator to release memory.", cmd_memory_purge),
    spec("memory|malloc-stats", 2, 0, "server", "Returns the allocator statistics.", cmd_memory_malloc_stats),
    // Larder has no cluster mode: every subcommand answers as a Redis started without it
    // (COMMAND INFO and COMMAND LIST still show them, as Redis's do).
    spec(
        "cluster|addslots",
        -3,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Assign new hash slots to receiving node",
        cmd_cluster,
    ),
    spec(
        "cluster|addslotsrange",
        -4,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Assign new hash slots to receiving node",
        cmd_cluster,
    ),
    spec(
        "cluster|bumpepoch",
        2,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Advance the cluster config epoch",
        cmd_cluster,
    ),
    spec(
        "cluster|count-failure-reports",
        3,
        ADMIN | STALE,
        "cluster",
        "Return the number of failure reports active for a given node",
        cmd_cluster,
    ),
    spec(
        "cluster|countkeysinslot",
        3,
        STALE,
        "cluster",
        "Return the number of local keys in the specified hash slot",
        cmd_cluster,
    ),
    spec(
        "cluster|delslots",
        -3,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Set hash slots as unbound in receiving node",
        cmd_cluster,
    ),
    spec(
        "cluster|delslotsrange",
        -4,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Set hash slots as unbound in receiving node",
        cmd_cluster,
    ),
    spec(
        "cluster|failover",
        -2,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Forces a replica to perform a manual failover of its master.",
        cmd_cluster,
    ),
    spec(
        "cluster|flushslots",
        2,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Delete a node's own slots information",
        cmd_cluster,
    ),
    spec(
        "cluster|forget",
        3,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Remove a node from the nodes table",
        cmd_cluster,
    ),
    spec(
        "cluster|getkeysinslot",
        4,
        STALE,
        "cluster",
        "Return local key names in the specified hash slot",
        cmd_cluster,
    ),
    spec(
        "cluster|help",
        2,
        LOADING | STALE,
        "cluster",
        "Show helpful text about the different subcommands",
        cmd_cluster,
    ),
    spec("cluster|info", 2, STALE, "cluster", "Provides info about Redis Cluster node state", cmd_cluster),
    spec("cluster|keyslot", 3, STALE, "cluster", "Returns the hash slot of the specified key", cmd_cluster),
    spec(
        "cluster|links",
        2,
        STALE,
        "cluster",
        "Returns a list of all TCP links to and from peer nodes in cluster",
        cmd_cluster,
    ),
    spec(
        "cluster|meet",
        -4,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Force a node cluster to handshake with another node",
        cmd_cluster,
    ),
    spec("cluster|myid", 2, STALE, "cluster", "Return the node id", cmd_cluster),
    spec("cluster|nodes", 2, STALE, "cluster", "Get Cluster config for the node", cmd_cluster),
    spec(
        "cluster|replicas",
        3,
        ADMIN | STALE,
        "cluster",
        "List replica nodes of the specified master node",
        cmd_cluster,
    ),
    spec(
        "cluster|replicate",
        3,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Reconfigure a node as a replica of the specified master node",
        cmd_cluster,
    ),
    spec("cluster|reset", -2, ADMIN | NOSCRIPT | STALE, "cluster", "Reset a Redis Cluster node", cmd_cluster),
    spec(
        "cluster|saveconfig",
        2,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Forces the node to save cluster state on disk",
        cmd_cluster,
    ),
    spec(
        "cluster|set-config-epoch",
        3,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Set the configuration epoch in a new node",
        cmd_cluster,
    ),
    spec(
        "cluster|setslot",
        -4,
        ADMIN | STALE | NO_ASYNC_LOADING,
        "cluster",
        "Bind a hash slot to a specific node",
        cmd_cluster,
    ),
    spec("cluster|shards", 2, STALE, "cluster", "Get array of cluster slots to node mappings", cmd_cluster),
    spec("cluster|slaves", 3, ADMIN | STALE, "cluster", "List replica nodes of the specified master node", cmd_cluster),
    spec("cluster|slots", 2, STALE, "cluster", "Get array of Cluster slot to node mappings", cmd_cluster),
];

/// Writes a HELP reply as Redis's `addReplyHelp`: a header naming the command, the given
/// lines, then HELP itself, each a simple string.
pub(crate) fn reply_help(ctx: &mut Ctx<'_>, name: &str, lines: &[&str]) {
    ctx.out.array(lines.len() + 3);
    ctx.out.simple(format!("{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:").as_bytes());
    for l in lines {
        ctx.out.simple(l.as_bytes());
    }
    ctx.out.simple(b"HELP").simple(b"    Prints this help.");
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// ---------------------------------------------------------------------------------- INFO

/// Every section INFO knows, in the order Redis prints them; `true` = part of the default
/// set.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
];

/// Redis's `bytesToHuman`.
pub fn bytes_to_human(n: u64) -> String {
    const UNITS: &[(u64, &str)] = &[(1 << 50, "P"), (1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for &(size, unit) in UNITS {
        if n >= size {
            return format!("{:.2}{unit}", n as f64 / size as f64);
        }
    }
    format!("{n}B")
}

/// Which sections an INFO call asks for (Redis's `genInfoSectionDict`).
fn requested_sections(args: &[&[u8]]) -> Vec<&'static str> {
    let mut want: Vec<&'static str> = Vec::new();
    let mut add = |name: &str| {
        if let Some((s, _)) = SECTIONS.iter().find(|(s, _)| *s == name) {
            if !want.contains(s) {
                want.push(s);
            }
        }
    };
    if args.is_empty() {
        SECTIONS.iter().filter(|(_, d)| *d).for_each(|(s, _)| add(s));
    }
    for a in args {
        match a.to_ascii_lowercase().as_slice() {
            b"default" => SECTIONS.iter().filter(|(_, d)| *d).for_each(|(s, _)| add(s)),
            b"all" | b"everything" => SECTIONS.iter().for_each(|(s, _)| add(s)),
            other => add(&lossy(other)),
        }
    }
    SECTIONS.iter().map(|(s, _)| *s).filter(|s| want.contains(s)).collect()
}

/// CPU seconds (user, system) of the process or of the calling thread, from getrusage.
fn cpu_times(thread: bool) -> (f64, f64) {
    use nix::sys::resource::{getrusage, UsageWho};
    let who = if thread { UsageWho::RUSAGE_THREAD } else { UsageWho::RUSAGE_SELF };
    match getrusage(who) {
        Ok(ru) => {
            let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
            (secs(ru.user_time()), secs(ru.system_time()))
        }
        Err(_) => (0.0, 0.0),
    }
}

/// Resident memory of the process, in bytes (/proc/self/statm).
fn rss_bytes() -> u64 {
    let page = 4096;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        .map_or(0, |p| p * page)
}

fn total_system_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
        })
        .map_or(0, |kb| kb * 1024)
}

fn section_text(ctx: &mut Ctx<'_>, name: &str, out: &mut String) {
    let shared: &Shared = ctx.shared;
    let st = &shared.stats;
    let cfg = &shared.config;
    macro_rules! line {
        ($($arg:tt)*) => {{
            let _ = write!(out, $($arg)*);
            out.push_str("\r\n");
        }};
    }
    match name {
        "server" => {
            out.push_str("# Server\r\n");
            let u = rustix::system::uname();
            let now_ms = larder_engine::now_ms();
            let uptime = shared.uptime_ms() / 1000;
            line!("redis_version:{}", crate::REDIS_VERSION);
            line!("redis_git_sha1:00000000");
            line!("redis_git_dirty:0");
            line!("redis_build_id:0");
            line!("redis_mode:standalone");
            line!(
                "os:{} {} {}",
                u.sysname().to_string_lossy(),
                u.release().to_string_lossy(),
                u.machine().to_string_lossy()
            );
            line!("arch_bits:{}", usize::BITS);
            line!("monotonic_clock:POSIX clock_gettime");
            line!("multiplexing_api:epoll");
            line!("process_id:{}", std::process::id());
            line!("process_supervised:no");
            line!("run_id:{}", shared.run_id);
            let port = cfg.port.load(Ordering::Relaxed);
            line!("tcp_port:{port}");
            line!("server_time_usec:{}", now_ms * 1000);
            line!("uptime_in_seconds:{uptime}");
            line!("uptime_in_days:{}", uptime / 86400);
            let hz = cfg.get("hz").unwrap_or_else(|| "10".into());
            line!("hz:{hz}");
            line!("configured_hz:{hz}");
            line!("lru_clock:{}", (now_ms / 1000) & ((1 << 24) - 1));
            line!("executable:{}", std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default());
            let file =
                cfg.file.as_ref().map(|f| std::fs::canonicalize(f).unwrap_or_else(|_| f.clone()).display().to_string());
            line!("config_file:{}", file.unwrap_or_default());
            line!("io_threads_active:0");
            line!("larder_version:{}", env!("CARGO_PKG_VERSION"));
            line!("larder_threads:{}", cfg.threads);
            line!("larder_memcache_port:{}", shared.tcp_ports.get().map_or(cfg.memcache_port, |p| p.1));
        }
        "clients" => {
            out.push_str("# Clients\r\n");
            let clients: Vec<_> = shared.clients.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
            let max_in = clients.iter().map(|c| c.qbuf.load(Ordering::Relaxed)).max().unwrap_or(0);
            let max_out = clients.iter().map(|c| c.obuf.load(Ordering::Relaxed)).max().unwrap_or(0);
            let pubsub = clients
                .iter()
                .filter(|c| {
                    c.sub.load(Ordering::Relaxed) + c.psub.load(Ordering::Relaxed) + c.ssub.load(Ordering::Relaxed) > 0
                })
                .count();
            line!("connected_clients:{}", shared.connected.load(Ordering::Relaxed));
            line!("cluster_connections:0");
            line!("maxclients:{}", cfg.maxclients.load(Ordering::Relaxed));
            line!("client_recent_max_input_buffer:{max_in}");
            line!("client_recent_max_output_buffer:{max_out}");
            // Clients held by CLIENT PAUSE count as blocked, as Redis blocks them
            // (BLOCKED_POSTPONE).
            line!(
                "blocked_clients:{}",
                shared.blocked_clients.load(Ordering::Relaxed) + shared.pause.postponed.load(Ordering::Relaxed)
            );
            line!("tracking_clients:{}", shared.tracking.counts().0);
            line!("clients_in_timeout_table:{}", shared.blocking.with_timeout());
            // (Redis 7.4's; kept, after 7.0's fields.)
            line!("pubsub_clients:{pubsub}");
        }
        "memory" => {
            out.push_str("# Memory\r\n");
            // Redis 7.0.15's fields in its order, then Larder's own. used_memory is what
            // Redis's zmalloc would count (see `Shared::used_memory`): the arena's bytes
            // allocated and not freed, and the clients' buffers. Free blocks that classes
            // keep for their next allocations (index segments among them) and pages still
            // resident are in the allocator_* and larder_arena fields below and in
            // used_memory_rss.
            let arena = shared.store.arena();
            let m = MemoryFigures::measure(ctx);
            let MemoryFigures { used, peak, clients, overhead, dataset, allocated, active, resident, rss, .. } = m;
            let total = total_system_memory();
            let maxmemory: u64 = cfg.get("maxmemory").and_then(|v| v.parse().ok()).unwrap_or(0);
            line!("used_memory:{used}");
            line!("used_memory_human:{}", bytes_to_human(used));
            line!("used_memory_rss:{rss}");
            line!("used_memory_rss_human:{}", bytes_to_human(rss));
            line!("used_memory_peak:{peak}");
            line!("used_memory_peak_human:{}", bytes_to_human(peak));
            line!("used_memory_peak_perc:{:.2}%", m.peak_perc());
            line!("used_memory_overhead:{overhead}");
            line!("used_memory_startup:{}", m.startup);
            line!("used_memory_dataset:{dataset}");
            line!("used_memory_dataset_perc:{:.2}%", m.dataset_perc());
            line!("allocator_allocated:{allocated}");
            line!("allocator_active:{active}");
            line!("allocator_resident:{resident}");
            line!("total_system_memory:{total}");
            line!("total_system_memory_human:{}", bytes_to_human(total));
            // Lua: the heap of the Lua state that ran a script last (0 before any) and the
            // script cache. Functions share the Lua states: their memory fields are 0.
            let lua_mem = ctx.shared.scripts.lua_memory.load(Ordering::Relaxed);
            let scripts_mem = ctx.shared.scripts.memory();
            line!("used_memory_lua:{lua_mem}");
            line!("used_memory_vm_eval:{lua_mem}");
            line!("used_memory_lua_human:{}", bytes_to_human(lua_mem));
            line!("used_memory_scripts_eval:{scripts_mem}");
            line!("number_of_cached_scripts:{}", ctx.shared.scripts.len());
            let libs = ctx.shared.functions.list();
            line!("number_of_functions:{}", libs.iter().map(|l| l.functions.len()).sum::<usize>());
            line!("number_of_libraries:{}", libs.len());
            line!("used_memory_vm_functions:0");
            line!("used_memory_vm_total:{lua_mem}");
            line!("used_memory_vm_total_human:{}", bytes_to_human(lua_mem));
            line!("used_memory_functions:0");
            line!("used_memory_scripts:{scripts_mem}");
            line!("used_memory_scripts_human:{}", bytes_to_human(scripts_mem));
            line!("maxmemory:{maxmemory}");
            line!("maxmemory_human:{}", bytes_to_human(maxmemory));
            line!("maxmemory_policy:{}", cfg.get("maxmemory-policy").unwrap_or_default());
            line!("allocator_frag_ratio:{:.2}", ratio(active, allocated));
            line!("allocator_frag_bytes:{}", diff(active, allocated));
            line!("allocator_rss_ratio:{:.2}", ratio(resident, active));
            line!("allocator_rss_bytes:{}", diff(resident, active));
            line!("rss_overhead_ratio:{:.2}", ratio(rss, resident));
            line!("rss_overhead_bytes:{}", diff(rss, resident));
            line!("mem_fragmentation_ratio:{:.2}", ratio(rss, used));
            line!("mem_fragmentation_bytes:{}", diff(rss, used));
            // No AOF, replicas, replication backlog or cluster: their buffers are 0, as in a
            // Redis with none. Every client is a normal or pub/sub one.
            line!("mem_not_counted_for_evict:0");
            line!("mem_replication_backlog:0");
            line!("mem_total_replication_buffers:0");
            line!("mem_clients_slaves:0");
            line!("mem_clients_normal:{clients}");
            line!("mem_cluster_links:0");
            line!("mem_aof_buffer:0");
            line!("mem_allocator:larder-arena");
            line!("active_defrag_running:0");
            line!("lazyfree_pending_objects:0");
            line!("lazyfreed_objects:0");
            line!("larder_arena_capacity:{}", arena.capacity());
            line!("larder_arena_huge_pages:{}", u8::from(arena.huge_pages()));
            // Beside used_memory: the pages of small classes and large values (what
            // used_memory was before it counted live bytes: those plus the free blocks in
            // them), the free blocks kept for their class, and the free large runs whose
            // pages are not given back yet.
            line!("larder_arena_pages_held:{}", arena.pages_held_bytes());
            line!("larder_arena_free_blocks_bytes:{}", arena.free_small_bytes());
            line!("larder_arena_dirty_free_bytes:{}", arena.dirty_free_bytes());
            // Memory waiting to come back: the global epoch, blocks retired and not yet
            // freed, and the participants pinned at an older epoch (which hold it back).
            let (epoch, slots) = (arena.epoch(), arena.slots());
            line!("larder_arena_epoch:{epoch}");
            line!("larder_arena_retired_blocks:{}", slots.iter().map(|s| s.retired as u64).sum::<u64>());
            line!("larder_arena_pinned_behind:{}", slots.iter().filter(|s| s.pinned && s.epoch != epoch).count());
        }
        "persistence" => {
            out.push_str("# Persistence\r\n");
            // Redis 7.0.15's fields in its order. Larder has no persistence yet (SAVE and
            // BGSAVE answer an error) and never forks: no save, rewrite or copy-on-write to
            // report, as in a Redis that has not saved.
            line!("loading:0");
            line!("async_loading:0");
            line!("current_cow_peak:0");
            line!("current_cow_size:0");
            line!("current_cow_size_age:0");
            line!("current_fork_perc:0.00");
            line!("current_save_keys_processed:0");
            line!("current_save_keys_total:0");
            line!("rdb_changes_since_last_save:{}", st.sum(|w| &w.dirty));
            line!("rdb_bgsave_in_progress:0");
            line!("rdb_last_save_time:{}", shared.started_unix);
            line!("rdb_last_bgsave_status:ok");
            line!("rdb_last_bgsave_time_sec:-1");
            line!("rdb_current_bgsave_time_sec:-1");
            line!("rdb_saves:0");
            line!("rdb_last_cow_size:0");
            // The closest Larder has to loading: a server started on an existing `--shm`
            // segment serves the keys it finds there (see `AtStart::keys`). Expired ones
            // among them are not dropped then, as Redis's loader drops them, but by expiry
            // later (INFO stats' expired_keys).
            line!("rdb_last_load_keys_expired:0");
            line!("rdb_last_load_keys_loaded:{}", shared.at_start.keys);
            line!("aof_enabled:0");
            line!("aof_rewrite_in_progress:0");
            line!("aof_rewrite_scheduled:0");
            line!("aof_last_rewrite_time_sec:-1");
            line!("aof_current_rewrite_time_sec:-1");
            line!("aof_last_bgrewrite_status:ok");
            line!("aof_rewrites:0");
            line!("aof_rewrites_consecutive_failures:0");
            line!("aof_last_write_status:ok");
            line!("aof_last_cow_size:0");
            line!("module_fork_in_progress:0");
            line!("module_fork_last_cow_size:0");
        }
        "stats" => {
            out.push_str("# Stats\r\n");
            let kbps = |a: &std::sync::atomic::AtomicU64| f64::from_bits(a.load(Ordering::Relaxed));
            // Redis 7.0.15's fields in its order; replication, eviction, defrag, tracking
            // and forks are not there to count (0).
            line!("total_connections_received:{}", st.sum(|w| &w.connections));
            line!("total_commands_processed:{}", st.sum(|w| &w.commands));
            line!("instantaneous_ops_per_sec:{}", st.inst_ops.load(Ordering::Relaxed));
            line!("total_net_input_bytes:{}", st.sum(|w| &w.net_input));
            line!("total_net_output_bytes:{}", st.sum(|w| &w.net_output));
            line!("total_net_repl_input_bytes:0");
            line!("total_net_repl_output_bytes:0");
            line!("instantaneous_input_kbps:{:.2}", kbps(&st.inst_in_kbps));
            line!("instantaneous_output_kbps:{:.2}", kbps(&st.inst_out_kbps));
            line!("instantaneous_input_repl_kbps:0.00");
            line!("instantaneous_output_repl_kbps:0.00");
            line!("rejected_connections:{}", st.sum(|w| &w.rejected_connections));
            line!("sync_full:0");
            line!("sync_partial_ok:0");
            line!("sync_partial_err:0");
            line!("expired_keys:{}", st.sum(|w| &w.expired_keys));
            line!("expired_stale_perc:0.00");
            line!("expired_time_cap_reached_count:0");
            line!("expire_cycle_cpu_milliseconds:0");
            line!("evicted_keys:0");
            line!("evicted_clients:0");
            line!("total_eviction_exceeded_time:0");
            line!("current_eviction_exceeded_time:0");
            line!("keyspace_hits:{}", st.sum(|w| &w.keyspace_hits));
            line!("keyspace_misses:{}", st.sum(|w| &w.keyspace_misses));
            line!("pubsub_channels:{}", shared.pubsub.channel_count());
            line!("pubsub_patterns:{}", shared.pubsub.pattern_count());
            line!("pubsubshard_channels:{}", shared.pubsub.shard_count());
            line!("latest_fork_usec:0");
            line!("total_forks:0");
            line!("migrate_cached_sockets:0");
            line!("slave_expires_tracked_keys:0");
            line!("active_defrag_hits:0");
            line!("active_defrag_misses:0");
            line!("active_defrag_key_hits:0");
            line!("active_defrag_key_misses:0");
            line!("total_active_defrag_time:0");
            line!("current_active_defrag_time:0");
            let (_, keys, items, prefixes) = shared.tracking.counts();
            line!("tracking_total_keys:{keys}");
            line!("tracking_total_items:{items}");
            line!("tracking_total_prefixes:{prefixes}");
            line!("unexpected_error_replies:0");
            line!("total_error_replies:{}", st.sum(|w| &w.total_errors));
            line!("dump_payload_sanitizations:0");
            line!("total_reads_processed:{}", st.sum(|w| &w.reads));
            line!("total_writes_processed:{}", st.sum(|w| &w.writes));
            line!("io_threaded_reads_processed:0");
            line!("io_threaded_writes_processed:0");
            line!("reply_buffer_shrinks:{}", st.sum(|w| &w.reply_buffer_shrinks));
            line!("reply_buffer_expands:{}", st.sum(|w| &w.reply_buffer_expands));
        }
        "replication" => {
            // No replication: a master without replicas, as a fresh Redis reports.
            out.push_str("# Replication\r\n");
            line!("role:master");
            line!("connected_slaves:0");
            line!("master_failover_state:no-failover");
            line!("master_replid:{}", shared.run_id);
            line!("master_replid2:0000000000000000000000000000000000000000");
            line!("master_repl_offset:0");
            line!("second_repl_offset:-1");
            line!("repl_backlog_active:0");
            line!("repl_backlog_size:{}", cfg.get("repl-backlog-size").unwrap_or_default());
            line!("repl_backlog_first_byte_offset:0");
            line!("repl_backlog_histlen:0");
        }
        "cpu" => {
            out.push_str("# CPU\r\n");
            let (user, sys) = cpu_times(false);
            // Larder has no main thread; the thread answering INFO stands in for it.
            let (tuser, tsys) = cpu_times(true);
            line!("used_cpu_sys:{sys:.6}");
            line!("used_cpu_user:{user:.6}");
            line!("used_cpu_sys_children:0.000000");
            line!("used_cpu_user_children:0.000000");
            line!("used_cpu_sys_main_thread:{tsys:.6}");
            line!("used_cpu_user_main_thread:{tuser:.6}");
        }
        "modules" => out.push_str("# Modules\r\n"),
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            let t = table();
            for (i, s) in t.specs.iter().enumerate() {
                let (calls, usec, rejected, failed) = st.command(i);
                if calls == 0 && rejected == 0 && failed == 0 {
                    continue;
                }
                let per = if calls == 0 { 0.0 } else { usec as f64 / calls as f64 };
                line!(
                    "cmdstat_{}:calls={calls},usec={usec},usec_per_call={per:.2},rejected_calls={rejected},failed_calls={failed}",
                    s.name
                );
            }
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            for (prefix, count) in st.errors() {
                line!("errorstat_{prefix}:count={count}");
            }
        }
        "latencystats" => {
            // Redis's `genRedisInfoStringLatencyStats`: each command (then its subcommands)
            // that has a histogram, i.e. was called since CONFIG RESETSTAT.
            out.push_str("# Latencystats\r\n");
            if shared.config.latency_tracking.load(Ordering::Relaxed) {
                let t = table();
                let percentiles = shared.config.latency_percentiles();
                for i in t.commands().flat_map(|i| std::iter::once(i).chain(t.subcommands(i).iter().copied())) {
                    let d = st.durations(i);
                    if d.total() > 0 {
                        line!("{}", d.percentiles_line(t.specs[i].name, &percentiles));
                    }
                }
            }
        }
        "cluster" => {
            out.push_str("# Cluster\r\n");
            line!("cluster_enabled:0");
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            for db in 0..shared.store.databases() {
                let keys = ctx.h.dbsize(db).unwrap_or(0);
                if keys > 0 {
                    let expires = ctx.h.expires(db).unwrap_or(0);
                    let avg_ttl = shared.avg_ttl.get(db as usize).map_or(0, |a| a.load(Ordering::Relaxed));
                    line!("db{db}:keys={keys},expires={expires},avg_ttl={avg_ttl}");
                }
            }
        }
        _ => {}
    }
}

/// # Format
/// `INFO [section ...]` → the sections as text (`# Name` then `field:value` lines, CRLF,
/// a blank line between sections): a bulk string, a verbatim string in RESP3. `default`,
/// `all` and `everything` name sets of sections; unknown names are ignored.
fn cmd_info(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    // The keys this worker found expired since its last round are counted now, so that a
    // pipelined GET of an expired key and INFO see it counted, as in Redis.
    let expired = ctx.h.take_expired();
    ctx.stats().expired_keys.add(expired);
    let args: Vec<&[u8]> = (1..ctx.argc()).map(|i| ctx.arg(i)).collect();
    let mut text = String::new();
    for (n, s) in requested_sections(&args).into_iter().enumerate() {
        if n > 0 {
            text.push_str("\r\n");
        }
        section_text(ctx, s, &mut text);
    }
    ctx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

// -------------------------------------------------------------------------------- CONFIG

/// # Format
/// `CONFIG GET pattern [pattern ...]` → a map (RESP3) or flat array of parameter/value
/// pairs. A pattern without glob characters is answered under the name given (aliases
/// included); a glob matches parameter names case-insensitively. Each parameter once.
fn cmd_config_get(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let cfg = &ctx.shared.config;
    let mut found: Vec<(String, &'static str, String)> = Vec::new();
    for i in 2..ctx.argc() {
        let pat = lossy(ctx.arg(i));
        if !pat.contains(['[', '*', '?']) {
            let lower = pat.to_ascii_lowercase();
            if found.iter().any(|(n, _, _)| n.to_ascii_lowercase() == lower) {
                continue;
            }
            if let (Some(p), Some(v)) = (crate::config::param(&pat), cfg.get(&pat)) {
                found.push((pat.clone(), p.name, v));
            }
            continue;
        }
        // Aliases match too (`*of` finds both replicaof and slaveof), as in Redis 7.0; hidden
        // parameters only by their exact name.
        let names = crate::config::PARAMS
            .iter()
            .filter(|p| !p.hidden)
            .map(|p| p.name)
            .chain(crate::config::ALIASES.iter().map(|(a, _)| *a));
        for name in names {
            if found.iter().any(|(n, _, _)| n == name) {
                continue;
            }
            if larder_engine::glob_match(pat.as_bytes(), name.as_bytes(), true) {
                if let (Some(p), Some(v)) = (crate::config::param(name), cfg.get(name)) {
                    found.push((name.to_string(), p.name, v));
                }
            }
        }
    }
    ctx.out.map(found.len());
    for (name, _, value) in &found {
        ctx.out.bulk(name.as_bytes()).bulk(value.as_bytes());
    }
    Ok(())
}

/// # Format
/// `CONFIG SET parameter value [parameter value ...]` → `+OK`. All pairs are checked
/// before any is applied, so a failed call changes nothing.
fn cmd_config_set(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.argc() % 2 == 1 {
        return Err(CmdError::syntax());
    }
    let cfg = &ctx.shared.config;
    // First every name (Redis reports the first unknown, immutable or repeated one), then
    // every value, then apply: a failed call changes nothing.
    let mut names: Vec<(&'static crate::config::Param, String, String)> = Vec::new();
    for i in (2..ctx.argc()).step_by(2) {
        let (name, value) = (lossy(ctx.arg(i)), lossy(ctx.arg(i + 1)));
        let failed =
            |why: &str| CmdError::new(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}"));
        match crate::config::param(&name) {
            None => {
                return Err(CmdError::new(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                )))
            }
            Some(_) if cfg.check(&name, &value).err() == Some(SetError::Immutable) => {
                return Err(failed("can't set immutable config"))
            }
            Some(p) if names.iter().any(|(q, _, _)| q.name == p.name) => return Err(failed("duplicate parameter")),
            Some(p) => names.push((p, name, value)),
        }
    }
    let mut checked = Vec::with_capacity(names.len());
    for (k, (p, name, value)) in names.iter().enumerate() {
        match cfg.check(name, value) {
            Ok(x) => checked.push(x),
            Err(SetError::Invalid(why)) => {
                // Redis 7.0 sets each value in turn and, when one fails, sets the ones up to
                // it (that one included) back from their printed values. The round trip
                // changes one parameter: notify-keyspace-events prints an n beside A as A.
                for (q, _, _) in &names[..=k] {
                    if q.name == "notify-keyspace-events" {
                        let printed = cfg.get(q.name).unwrap_or_default();
                        let _ = cfg.set(q.name, &printed);
                        crate::notify::sync_worker(ctx.h, ctx.shared, ctx.worker);
                    }
                }
                // Value errors name the parameter by its real name, as Redis does.
                return Err(CmdError::new(format!(
                    "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
                    p.name
                )));
            }
            Err(_) => {
                return Err(CmdError::new(format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{name}'"
                )))
            }
        }
    }
    // The one change that can fail once checked: listening on a new port. It comes first,
    // so that a failure leaves everything as it was (Redis applies, then restores).
    for (p, v) in &checked {
        if p.name == "port" && cfg.get("port").as_deref() != Some(v.as_str()) {
            if let Err(e) = crate::worker::change_resp_port(ctx.shared, v.parse().unwrap_or(0)) {
                tracing::warn!("CONFIG SET port {v}: {e}");
                return Err(CmdError::new(
                    "ERR CONFIG SET failed (possibly related to argument 'port') - Unable to listen on this port. Check server logs.",
                ));
            }
        }
    }
    for (p, v) in &checked {
        cfg.apply(p, v);
        if p.name == "requirepass" {
            ctx.shared.acl.set_default_password(v.as_bytes());
        }
    }
    cfg.sync_limits(ctx.shared.store.limits());
    // This worker's engine handle records what the new notify-keyspace-events asks for from
    // the next command on (the other workers' from their next round).
    crate::notify::sync_worker(ctx.h, ctx.shared, ctx.worker);
    // A lower tracking-table-max-keys is reached at once (Redis: before the next command).
    if checked.iter().any(|(p, _)| p.name == "tracking-table-max-keys") && ctx.shared.tracking.armed() {
        crate::tracking::enforce_limit(ctx.shared);
    }
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CONFIG RESETSTAT` → `+OK`: clears INFO's counters, commandstats and errorstats.
fn cmd_config_resetstat(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    ctx.shared.stats.reset();
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CONFIG REWRITE` → `+OK` once the `--config` file holds the running configuration.
fn cmd_config_rewrite(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    // Without an aclfile the users go into the config file (with one, ACL SAVE keeps them).
    let users: Vec<String> = match ctx.shared.config.get("aclfile").unwrap_or_default().is_empty() {
        true => ctx.shared.acl.all().iter().map(|u| format!("{} {}", u.name_str(), u.rules().describe())).collect(),
        false => Vec::new(),
    };
    ctx.shared.config.rewrite(&users).map_err(|e| CmdError::new(format!("ERR {e}")))?;
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CONFIG HELP` → the subcommands.
fn cmd_config_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "CONFIG",
        &[
            "GET <pattern>",
            "    Return parameters matching the glob-like <pattern> and their values.",
            "SET <directive> <value>",
            "    Set the configuration <directive> to <value>.",
            "RESETSTAT",
            "    Reset statistics reported by the INFO command.",
            "REWRITE",
            "    Rewrite the configuration file.",
        ],
    );
    Ok(())
}

// ------------------------------------------------------------------------------- COMMAND

use crate::acl::CATEGORIES;

/// Categories Redis gives some commands beyond what their group and flags imply.
const EXTRA_CATEGORIES: &[(&str, &[&str])] = &[
    ("command", &["connection"]),
    ("info", &["dangerous"]),
    ("lastsave", &["admin", "dangerous"]),
    ("role", &["admin", "dangerous"]),
    ("keys", &["keyspace", "dangerous"]),
    ("flushdb", &["keyspace", "dangerous"]),
    ("flushall", &["keyspace", "dangerous"]),
    ("swapdb", &["keyspace", "dangerous"]),
    ("dbsize", &["keyspace"]),
    ("restore", &["dangerous"]),
    ("restore-asking", &["keyspace", "dangerous"]),
    ("migrate", &["dangerous"]),
    ("readonly", &["connection"]),
    ("readwrite", &["connection"]),
    ("asking", &["connection"]),
];

/// Commands whose categories in Redis are not their group's: these instead (the flags'
/// implicit ones are added as for any command). SORT is in the generic group but Redis files
/// it under the types it sorts.
const OWN_CATEGORIES: &[(&str, &[&str])] = &[
    ("sort", &["set", "sortedset", "list", "dangerous"]),
    ("sort_ro", &["set", "sortedset", "list", "dangerous"]),
    ("pubsub|help", &[]),
    // WAIT is in the generic group but not in @keyspace.
    ("wait", &["connection"]),
];

fn group_category(group: &str) -> Option<&'static str> {
    Some(match group {
        "generic" | "keys" | "keyspace" => "keyspace",
        "string" => "string",
        "list" => "list",
        "set" => "set",
        "sorted-set" | "sorted_set" | "sortedset" | "zset" => "sortedset",
        "hash" => "hash",
        "bitmap" => "bitmap",
        "hyperloglog" => "hyperloglog",
        "geo" => "geo",
        "stream" => "stream",
        "pubsub" => "pubsub",
        "transactions" | "transaction" => "transaction",
        "connection" => "connection",
        "scripting" => "scripting",
        _ => return None,
    })
}

/// A command's ACL categories: its group's, the implicit ones of its flags (as Redis's
/// `setImplicitACLCategories`), and [`EXTRA_CATEGORIES`].
pub(crate) fn categories(i: usize) -> Vec<&'static str> {
    let t = table();
    let s = t.specs[i];
    let mut cats: Vec<&'static str> = Vec::new();
    // A pure container (CLIENT, CONFIG, …) has no categories of its own but @slow.
    let container = !t.subcommands(i).is_empty() && s.flags == 0;
    if let Some((_, own)) = OWN_CATEGORIES.iter().find(|(n, _)| *n == s.name) {
        cats.extend(own.iter().copied());
    } else if !container {
        cats.extend(group_category(s.group));
        let base = s.name.split('|').next().unwrap_or(s.name);
        for (name, extra) in EXTRA_CATEGORIES {
            if *name == base {
                cats.extend(extra.iter().copied());
            }
        }
    }
    for (flag, cat) in
        [(WRITE, "write"), (READONLY, "read"), (PUBSUB, "pubsub"), (FAST, "fast"), (BLOCKING, "blocking")]
    {
        // A read-only script (EVAL_RO, FCALL_RO) is not @read (Redis's
        // setImplicitACLCategories).
        if flag == READONLY && s.group == "scripting" {
            continue;
        }
        if s.flags & flag != 0 {
            cats.push(cat);
        }
    }
    if s.flags & ADMIN != 0 {
        cats.extend(["admin", "dangerous"]);
    }
    if s.flags & FAST == 0 {
        cats.push("slow");
    }
    CATEGORIES.iter().copied().filter(|c| cats.contains(c)).collect()
}

/// Key-spec flags Redis gives some single-key-spec commands, where the read/write flags
/// alone would say less (SET overwrites, DEL removes, APPEND inserts).
const KEY_FLAGS: &[(&str, &[&str])] = &[
    ("set", &["OW", "update"]),
    ("setex", &["OW", "update"]),
    ("psetex", &["OW", "update"]),
    ("mset", &["OW", "update"]),
    ("getset", &["RW", "access", "update"]),
    ("getdel", &["RW", "access", "delete"]),
    ("getex", &["RW", "access", "update"]),
    ("del", &["RM", "delete"]),
    ("unlink", &["RM", "delete"]),
    ("append", &["RW", "insert"]),
    ("setrange", &["RW", "update"]),
    ("incr", &["RW", "access", "update"]),
    ("decr", &["RW", "access", "update"]),
    ("incrby", &["RW", "access", "update"]),
    ("decrby", &["RW", "access", "update"]),
    ("incrbyfloat", &["RW", "access", "update"]),
    ("exists", &["RO"]),
    ("type", &["RO"]),
    ("ttl", &["RO", "access"]),
    ("pttl", &["RO", "access"]),
    ("expire", &["RW", "update"]),
    ("pexpire", &["RW", "update"]),
    ("expireat", &["RW", "update"]),
    ("pexpireat", &["RW", "update"]),
    ("persist", &["RW", "update"]),
    ("touch", &["RO"]),
    ("watch", &["RO"]),
    // Checked against redis-server 7.0.15's COMMAND INFO (ACLs read these: ACCESS needs
    // read permission; INSERT, DELETE, UPDATE write; RO alone, as the existence and length
    // commands have it, neither).
    ("blmpop", &["RW", "access", "delete"]),
    ("blpop", &["RW", "access", "delete"]),
    ("brpop", &["RW", "access", "delete"]),
    ("bzmpop", &["RW", "access", "delete"]),
    ("bzpopmax", &["RW", "access", "delete"]),
    ("bzpopmin", &["RW", "access", "delete"]),
    ("georadius", &["RO", "access"]),
    ("georadiusbymember", &["RO", "access"]),
    ("geosearchstore", &["OW", "update"]),
    ("hdel", &["RW", "delete"]),
    ("hexists", &["RO"]),
    ("hincrby", &["RW", "access", "update"]),
    ("hincrbyfloat", &["RW", "access", "update"]),
    ("hlen", &["RO"]),
    ("hsetnx", &["RW", "insert"]),
    ("hstrlen", &["RO"]),
    ("linsert", &["RW", "insert"]),
    ("llen", &["RO"]),
    ("lmpop", &["RW", "access", "delete"]),
    ("lpop", &["RW", "access", "delete"]),
    ("lpush", &["RW", "insert"]),
    ("lpushx", &["RW", "insert"]),
    ("lrem", &["RW", "delete"]),
    ("ltrim", &["RW", "delete"]),
    ("memory|usage", &["RO"]),
    ("move", &["RW", "access", "update"]),
    ("msetnx", &["OW", "insert"]),
    ("object|encoding", &["RO"]),
    ("object|freq", &["RO"]),
    ("object|idletime", &["RO"]),
    ("object|refcount", &["RO"]),
    ("pfadd", &["RW", "insert"]),
    ("pfcount", &["RW", "access"]),
    ("pfdebug", &["RW", "access"]),
    ("rpop", &["RW", "access", "delete"]),
    ("rpush", &["RW", "insert"]),
    ("rpushx", &["RW", "insert"]),
    ("sadd", &["RW", "insert"]),
    ("scard", &["RO"]),
    ("setbit", &["RW", "access", "update"]),
    ("setnx", &["OW", "insert"]),
    ("sintercard", &["RO", "access"]),
    ("sismember", &["RO"]),
    ("spop", &["RW", "access", "delete"]),
    ("srem", &["RW", "delete"]),
    ("strlen", &["RO"]),
    ("zcard", &["RO"]),
    ("zdiff", &["RO", "access"]),
    ("zincrby", &["RW", "access", "update"]),
    ("zinter", &["RO", "access"]),
    ("zintercard", &["RO", "access"]),
    ("zmpop", &["RW", "access", "delete"]),
    ("zpopmax", &["RW", "access", "delete"]),
    ("zpopmin", &["RW", "access", "delete"]),
    ("zrem", &["RW", "delete"]),
    ("zremrangebylex", &["RW", "delete"]),
    ("zremrangebyrank", &["RW", "delete"]),
    ("zremrangebyscore", &["RW", "delete"]),
    ("zunion", &["RO", "access"]),
    ("eval", &["RW", "access", "update"]),
    ("evalsha", &["RW", "access", "update"]),
    ("fcall", &["RW", "access", "update"]),
    ("eval_ro", &["RO", "access"]),
    ("evalsha_ro", &["RO", "access"]),
    ("fcall_ro", &["RO", "access"]),
    ("restore", &["OW", "update"]),
    ("restore-asking", &["OW", "update"]),
    ("migrate", &["RW", "access", "delete"]),
    // Commands with two key specs: these are the first's (the key at `first_key`), and
    // KEY_FLAGS_REST has the other keys'.
    ("lmove", &["RW", "access", "delete"]),
    ("blmove", &["RW", "access", "delete"]),
    ("rpoplpush", &["RW", "access", "delete"]),
    ("brpoplpush", &["RW", "access", "delete"]),
    ("smove", &["RW", "access", "delete"]),
    ("rename", &["RW", "access", "delete"]),
    ("renamenx", &["RW", "access", "delete"]),
    ("copy", &["RO", "access"]),
    ("sort", &["RO", "access"]),
    ("bitop", &["OW", "update"]),
    ("pfmerge", &["RW", "access", "insert"]),
    ("sinterstore", &["RW", "update"]),
    ("sunionstore", &["OW", "update"]),
    ("sdiffstore", &["OW", "update"]),
    ("zunionstore", &["OW", "update"]),
    ("zinterstore", &["OW", "update"]),
    ("zdiffstore", &["OW", "update"]),
    ("zrangestore", &["OW", "update"]),
    // Shard channels stand where keys would (cluster slots), but are not keys.
    ("ssubscribe", &["not_key"]),
    ("sunsubscribe", &["not_key"]),
    ("spublish", &["not_key"]),
];

/// The flags of the keys after the first of the commands with two key specs (Redis's second
/// spec: a move's destination, a STORE's sources, SORT's STORE key, ...).
const KEY_FLAGS_REST: &[(&str, &[&str])] = &[
    ("lmove", &["RW", "insert"]),
    ("blmove", &["RW", "insert"]),
    ("rpoplpush", &["RW", "insert"]),
    ("brpoplpush", &["RW", "insert"]),
    ("smove", &["RW", "insert"]),
    ("rename", &["OW", "update"]),
    ("renamenx", &["OW", "insert"]),
    ("copy", &["OW", "update"]),
    ("sort", &["OW", "update"]),
    ("bitop", &["RO", "access"]),
    ("pfmerge", &["RO", "access"]),
    ("sinterstore", &["RO", "access"]),
    ("sunionstore", &["RO", "access"]),
    ("sdiffstore", &["RO", "access"]),
    ("zunionstore", &["RO", "access"]),
    ("zinterstore", &["RO", "access"]),
    ("zdiffstore", &["RO", "access"]),
    ("zrangestore", &["RO", "access"]),
    ("georadius", &["OW", "update"]),
    ("georadiusbymember", &["OW", "update"]),
    ("geosearchstore", &["RO", "access"]),
];

/// Key-spec flags for the key at argument `pos` of a command: [`KEY_FLAGS_REST`] for a key
/// of a two-spec command's second spec, else [`key_flags`].
fn key_flags_at(s: &Spec, pos: usize) -> &'static [&'static str] {
    if pos as i32 != s.first_key {
        if let Some((_, f)) = KEY_FLAGS_REST.iter().find(|(n, _)| *n == s.name) {
            return f;
        }
    }
    key_flags(s)
}

/// Key-spec flags for a command's keys: [`KEY_FLAGS`], else from its read/write flags.
fn key_flags(s: &Spec) -> &'static [&'static str] {
    if let Some((_, f)) = KEY_FLAGS.iter().find(|(n, _)| *n == s.name) {
        f
    } else if s.flags & WRITE != 0 {
        &["RW", "update"]
    } else if s.flags & READONLY != 0 {
        &["RO", "access"]
    } else {
        &["RW", "access"]
    }
}

/// Redis 7.0.15's command tips (`command_tips` in its commands/*.json), as COMMAND INFO lists
/// them: hints for cluster clients and test tools about how to route a command and compare its
/// replies.
const TIPS: &[(&str, &[&str])] = &[
    ("client|info", &["nondeterministic_output"]),
    ("client|list", &["nondeterministic_output"]),
    ("cluster|bumpepoch", &["nondeterministic_output"]),
    ("cluster|count-failure-reports", &["nondeterministic_output"]),
    ("cluster|getkeysinslot", &["nondeterministic_output"]),
    ("cluster|info", &["nondeterministic_output"]),
    ("cluster|links", &["nondeterministic_output"]),
    ("cluster|nodes", &["nondeterministic_output"]),
    ("cluster|replicas", &["nondeterministic_output"]),
    ("cluster|shards", &["nondeterministic_output"]),
    ("cluster|slaves", &["nondeterministic_output"]),
    ("cluster|slots", &["nondeterministic_output"]),
    ("command", &["nondeterministic_output_order"]),
    ("command|docs", &["nondeterministic_output_order"]),
    ("command|info", &["nondeterministic_output_order"]),
    ("command|list", &["nondeterministic_output_order"]),
    ("config|set", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("dbsize", &["request_policy:all_shards", "response_policy:agg_sum"]),
    ("del", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("dump", &["nondeterministic_output"]),
    ("exists", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("flushall", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("flushdb", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|delete", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|flush", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|kill", &["request_policy:all_shards", "response_policy:one_succeeded"]),
    ("function|list", &["nondeterministic_output_order"]),
    ("function|load", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|restore", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("function|stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("hgetall", &["nondeterministic_output_order"]),
    ("hkeys", &["nondeterministic_output_order"]),
    ("hrandfield", &["nondeterministic_output"]),
    ("hscan", &["nondeterministic_output"]),
    ("hvals", &["nondeterministic_output_order"]),
    ("info", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("keys", &["request_policy:all_shards", "nondeterministic_output_order"]),
    ("lastsave", &["nondeterministic_output"]),
    ("latency|doctor", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|graph", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|histogram", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|history", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|latest", &["nondeterministic_output", "request_policy:all_nodes", "response_policy:special"]),
    ("latency|reset", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("memory|doctor", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("memory|malloc-stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("memory|purge", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("memory|stats", &["nondeterministic_output", "request_policy:all_shards", "response_policy:special"]),
    ("mget", &["request_policy:multi_shard"]),
    ("migrate", &["nondeterministic_output"]),
    ("module|list", &["nondeterministic_output_order"]),
    ("mset", &["request_policy:multi_shard", "response_policy:all_succeeded"]),
    ("msetnx", &["request_policy:multi_shard", "response_policy:agg_min"]),
    ("object|encoding", &["nondeterministic_output"]),
    ("object|freq", &["nondeterministic_output"]),
    ("object|idletime", &["nondeterministic_output"]),
    ("object|refcount", &["nondeterministic_output"]),
    ("ping", &["request_policy:all_shards", "response_policy:all_succeeded"]),
    ("pttl", &["nondeterministic_output"]),
    ("randomkey", &["request_policy:all_shards", "nondeterministic_output"]),
    ("scan", &["nondeterministic_output", "request_policy:special"]),
    ("script|exists", &["request_policy:all_shards", "response_policy:agg_logical_and"]),
    ("script|flush", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("script|kill", &["request_policy:all_shards", "response_policy:one_succeeded"]),
    ("script|load", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("sdiff", &["nondeterministic_output_order"]),
    ("sinter", &["nondeterministic_output_order"]),
    ("slowlog|get", &["request_policy:all_nodes", "nondeterministic_output"]),
    ("slowlog|len", &["request_policy:all_nodes", "response_policy:agg_sum", "nondeterministic_output"]),
    ("slowlog|reset", &["request_policy:all_nodes", "response_policy:all_succeeded"]),
    ("smembers", &["nondeterministic_output_order"]),
    ("spop", &["nondeterministic_output"]),
    ("srandmember", &["nondeterministic_output"]),
    ("sscan", &["nondeterministic_output"]),
    ("sunion", &["nondeterministic_output_order"]),
    ("time", &["nondeterministic_output"]),
    ("touch", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("ttl", &["nondeterministic_output"]),
    ("unlink", &["request_policy:multi_shard", "response_policy:agg_sum"]),
    ("wait", &["request_policy:all_shards", "response_policy:agg_min"]),
    ("xadd", &["nondeterministic_output"]),
    ("xautoclaim", &["nondeterministic_output"]),
    ("xclaim", &["nondeterministic_output"]),
    ("xinfo|consumers", &["nondeterministic_output"]),
    ("xpending", &["nondeterministic_output"]),
    ("xtrim", &["nondeterministic_output"]),
    ("zrandmember", &["nondeterministic_output"]),
    ("zscan", &["nondeterministic_output"]),
];

/// The key spec of the script commands (numkeys, then that many keys), as Redis 7.0.15
/// declares them: its notes (EVALSHA and EVALSHA_RO have none); the flags are in
/// [`KEY_FLAGS`], where ACL checks read them too.
fn script_key_spec(name: &str) -> Option<Option<&'static str>> {
    const RW: &str = "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE";
    const RO: &str = "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS";
    Some(match name {
        "eval" | "fcall" => Some(RW),
        "eval_ro" | "fcall_ro" => Some(RO),
        "evalsha" | "evalsha_ro" => None,
        _ => return None,
    })
}

/// One COMMAND INFO entry: name, arity, flags, first key, last key, step, ACL categories,
/// tips, key specs, subcommands.
fn write_command_info(out: &mut Writer<'_>, i: usize) {
    let t = table();
    let s = t.specs[i];
    out.array(10);
    out.bulk(s.name.as_bytes());
    out.integer(s.arity as i64);
    let flags: Vec<&str> = FLAG_NAMES.iter().filter(|(f, _)| s.flags & f != 0).map(|(_, n)| *n).collect();
    out.set(flags.len());
    for f in flags {
        out.simple(f.as_bytes());
    }
    out.integer(s.first_key as i64).integer(s.last_key as i64).integer(s.step as i64);
    let cats = categories(i);
    out.set(cats.len());
    for c in cats {
        out.simple(format!("@{c}").as_bytes());
    }
    let tips = TIPS.iter().find(|(name, _)| *name == s.name).map_or(&[][..], |(_, t)| *t);
    out.set(tips.len());
    for tip in tips {
        out.bulk(tip.as_bytes());
    }
    if let Some(notes) = script_key_spec(s.name) {
        let flags = key_flags(s);
        // EVAL's and FCALL's keys: numkeys at argument 2, then that many keys.
        out.set(1);
        out.map(if notes.is_some() { 4 } else { 3 });
        if let Some(n) = notes {
            out.bulk(b"notes").bulk(n.as_bytes());
        }
        out.bulk(b"flags").set(flags.len());
        for f in flags {
            out.simple(f.as_bytes());
        }
        out.bulk(b"begin_search").map(2);
        out.bulk(b"type").bulk(b"index");
        out.bulk(b"spec").map(1).bulk(b"index").integer(2);
        out.bulk(b"find_keys").map(2);
        out.bulk(b"type").bulk(b"keynum");
        out.bulk(b"spec").map(3);
        out.bulk(b"keynumidx").integer(0);
        out.bulk(b"firstkey").integer(1);
        out.bulk(b"keystep").integer(1);
    } else if s.first_key > 0 {
        // The legacy range as one key spec: keys from index `first`, up to `last` (relative
        // to `first` when positive, to the end when negative), every `step`.
        out.set(1);
        out.map(3);
        let kf = key_flags(s);
        out.bulk(b"flags").set(kf.len());
        for f in kf {
            out.simple(f.as_bytes());
        }
        out.bulk(b"begin_search").map(2);
        out.bulk(b"type").bulk(b"index");
        out.bulk(b"spec").map(1).bulk(b"index").integer(s.first_key as i64);
        out.bulk(b"find_keys").map(2);
        out.bulk(b"type").bulk(b"range");
        let last = if s.last_key < 0 { s.last_key } else { s.last_key - s.first_key };
        out.bulk(b"spec").map(3);
        out.bulk(b"lastkey").integer(last as i64);
        out.bulk(b"keystep").integer(s.step as i64);
        out.bulk(b"limit").integer(0);
    } else {
        out.set(0);
    }
    let subs = t.subcommands(i);
    out.set(subs.len());
    for &j in subs {
        write_command_info(out, j);
    }
}

/// One COMMAND DOCS entry (summary and group; the subcommands of a container).
fn write_command_docs(out: &mut Writer<'_>, i: usize) {
    let t = table();
    let s = t.specs[i];
    let subs = t.subcommands(i);
    out.map(if subs.is_empty() { 2 } else { 3 });
    out.bulk(b"summary").bulk(s.summary.as_bytes());
    out.bulk(b"group").bulk(s.group.as_bytes());
    if !subs.is_empty() {
        out.bulk(b"subcommands").map(subs.len());
        for &j in subs {
            out.bulk(t.specs[j].name.as_bytes());
            write_command_docs(out, j);
        }
    }
}

/// # Format
/// `COMMAND` → an entry (see COMMAND INFO) for every command.
fn cmd_command(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = table();
    let all: Vec<usize> = t.commands().collect();
    ctx.out.array(all.len());
    for i in all {
        write_command_info(&mut ctx.out, i);
    }
    Ok(())
}

/// # Format
/// `COMMAND COUNT` → the number of commands (subcommands not counted).
fn cmd_command_count(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let n = table().commands().count();
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `COMMAND INFO [name ...]` → one entry per name (null for unknown names; `parent|sub`
/// names a subcommand); every command without names.
fn cmd_command_info(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.argc() == 2 {
        return cmd_command(ctx);
    }
    let t = table();
    ctx.out.array(ctx.argc() - 2);
    for j in 2..ctx.argc() {
        match t.lookup_full(&lossy(ctx.arg(j)).to_ascii_lowercase()) {
            Some(i) => write_command_info(&mut ctx.out, i),
            None => {
                ctx.out.null();
            }
        }
    }
    Ok(())
}

/// # Format
/// `COMMAND DOCS [name ...]` → a map from command name to its documentation (unknown
/// names left out); every command without names.
fn cmd_command_docs(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = table();
    let list: Vec<usize> = if ctx.argc() == 2 {
        t.commands().collect()
    } else {
        (2..ctx.argc()).filter_map(|j| t.lookup_full(&lossy(ctx.arg(j)).to_ascii_lowercase())).collect()
    };
    ctx.out.map(list.len());
    for i in list {
        ctx.out.bulk(t.specs[i].name.as_bytes());
        write_command_docs(&mut ctx.out, i);
    }
    Ok(())
}

/// # Format
/// `COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]` → command
/// names, each container followed by its subcommands (`parent|sub`).
fn cmd_command_list(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    enum Filter {
        None,
        Module,
        Category(String),
        Pattern(Vec<u8>),
    }
    let filter = match ctx.argc() {
        2 => Filter::None,
        5 if ctx.arg(2).eq_ignore_ascii_case(b"FILTERBY") => match ctx.arg(3).to_ascii_lowercase().as_slice() {
            b"module" => Filter::Module,
            b"aclcat" => Filter::Category(lossy(ctx.arg(4)).to_ascii_lowercase()),
            b"pattern" => Filter::Pattern(ctx.arg(4).to_vec()),
            _ => return Err(CmdError::syntax()),
        },
        _ => return Err(CmdError::syntax()),
    };
    let t = table();
    let keep = |i: usize| match &filter {
        Filter::None => true,
        // Larder has no modules.
        Filter::Module => false,
        Filter::Category(c) => categories(i).iter().any(|x| x == c),
        Filter::Pattern(p) => larder_engine::glob_match(p, t.specs[i].name.as_bytes(), true),
    };
    let mut names = Vec::new();
    for i in t.commands() {
        if keep(i) {
            names.push(t.specs[i].name);
        }
        names.extend(t.subcommands(i).iter().filter(|&&j| keep(j)).map(|&j| t.specs[j].name));
    }
    ctx.out.array(names.len());
    for n in names {
        ctx.out.bulk(n.as_bytes());
    }
    Ok(())
}

/// The command an arbitrary argument vector names (with its subcommand) and the indices of
/// its keys, or Redis's COMMAND GETKEYS errors.
fn keys_of(args: &[&[u8]]) -> Result<(usize, Vec<usize>), CmdError> {
    let t = table();
    let i = t.lookup_argv(args).ok_or_else(|| CmdError::new("ERR Invalid command specified"))?;
    let s = t.specs[i];
    if s.first_key <= 0 && s.flags & (MOVABLEKEYS | NO_MANDATORY_KEYS) == 0 {
        return Err(CmdError::new("ERR The command has no key arguments"));
    }
    let argc = args.len() as i32;
    if (s.arity > 0 && s.arity != argc) || argc < -s.arity {
        return Err(CmdError::new("ERR Invalid number of arguments specified for command"));
    }
    if s.flags & MOVABLEKEYS != 0 {
        if let Some(keys) = crate::families::movable_keys(s.name, args) {
            if keys.is_empty() && s.flags & NO_MANDATORY_KEYS == 0 {
                return Err(CmdError::new("ERR Invalid arguments specified for command"));
            }
            return Ok((i, keys));
        }
    }
    let last = if s.last_key < 0 { argc + s.last_key } else { s.last_key.min(argc - 1) };
    // The legacy range: keys that depend on the arguments are found only for the commands
    // crate::families::movable_keys knows.
    let step = s.step.max(1);
    let keys: Vec<usize> = if s.first_key <= 0 {
        Vec::new()
    } else {
        (s.first_key..=last).step_by(step as usize).filter(|&k| k < argc).map(|k| k as usize).collect()
    };
    if keys.is_empty() && s.flags & NO_MANDATORY_KEYS == 0 {
        return Err(CmdError::new("ERR Invalid arguments specified for command"));
    }
    Ok((i, keys))
}

/// The keys of a request for command `i` (its subcommand, if any; arity checked) that ACLs
/// check, with the permissions each needs ([`crate::acl::PERM_R`], `PERM_W`, both or
/// neither), from its key specs' flags as Redis's `ACLSelectorCheckKey` reads them: ACCESS
/// needs read, INSERT, DELETE and UPDATE need write; shard channels (`not_key`) are not
/// keys. SET with GET and BITFIELD with SET or INCRBY read and write, as their key-spec
/// functions say; without, SET only writes and BITFIELD only reads.
pub(crate) fn acl_keys(i: usize, args: &[&[u8]]) -> Vec<(usize, u8)> {
    let s = table().specs[i];
    if s.first_key <= 0 && s.flags & MOVABLEKEYS == 0 {
        return Vec::new();
    }
    let positions = match s.flags & MOVABLEKEYS != 0 {
        true => crate::families::movable_keys(s.name, args),
        false => None,
    };
    let positions = positions.unwrap_or_else(|| legacy_keys(s, args.len()));
    // SET's options start after its value, BITFIELD's operations after its key.
    let opt = |from: usize, words: &[&str]| {
        args.iter().skip(from).any(|a| words.iter().any(|w| a.eq_ignore_ascii_case(w.as_bytes())))
    };
    positions
        .into_iter()
        .filter_map(|pos| {
            let flags: &[&str] = match s.name {
                "set" if opt(3, &["get"]) => &["RW", "access", "update"],
                "bitfield" if opt(2, &["set", "incrby"]) => &["RW", "access", "update"],
                "bitfield" => &["RO", "access"],
                _ => key_flags_at(s, pos),
            };
            if flags.contains(&"not_key") {
                return None;
            }
            let mut need = 0;
            if flags.contains(&"access") {
                need |= crate::acl::PERM_R;
            }
            if flags.iter().any(|f| matches!(*f, "insert" | "delete" | "update")) {
                need |= crate::acl::PERM_W;
            }
            Some((pos, need))
        })
        .collect()
}

/// The legacy key range of a command with `argc` arguments.
fn legacy_keys(s: &Spec, argc: usize) -> Vec<usize> {
    let argc = argc as i32;
    if s.first_key <= 0 {
        return Vec::new();
    }
    let last = if s.last_key < 0 { argc + s.last_key } else { s.last_key.min(argc - 1) };
    (s.first_key..=last).step_by(s.step.max(1) as usize).filter(|&k| k < argc).map(|k| k as usize).collect()
}

/// # Format
/// `COMMAND GETKEYS command [arg ...]` → the keys the command would touch.
fn cmd_command_getkeys(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let args: Vec<&[u8]> = (2..ctx.argc()).map(|j| ctx.arg(j)).collect();
    let (_, keys) = keys_of(&args)?;
    ctx.out.array(keys.len());
    for k in keys {
        ctx.out.bulk(args[k]);
    }
    Ok(())
}

/// # Format
/// `COMMAND GETKEYSANDFLAGS command [arg ...]` → `[key, [flags]]` per key.
fn cmd_command_getkeysandflags(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let args: Vec<&[u8]> = (2..ctx.argc()).map(|j| ctx.arg(j)).collect();
    let (i, keys) = keys_of(&args)?;
    ctx.out.array(keys.len());
    for k in keys {
        // (`args` starts at the command's name, as its key positions count.)
        let flags = key_flags_at(table().specs[i], k);
        ctx.out.array(2).bulk(args[k]).set(flags.len());
        for f in flags {
            ctx.out.simple(f.as_bytes());
        }
    }
    Ok(())
}

/// # Format
/// `COMMAND HELP` → the subcommands.
fn cmd_command_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "COMMAND",
        &[
            "(no subcommand)",
            "    Return details about all Redis commands.",
            "COUNT",
            "    Return the total number of commands in this Redis server.",
            "LIST",
            "    Return a list of all commands in this Redis server.",
            "INFO [<command-name> ...]",
            "    Return details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "DOCS [<command-name> ...]",
            "    Return documentation details about multiple Redis commands.",
            "    If no command names are given, documentation details for all",
            "    commands are returned.",
            "GETKEYS <full-command>",
            "    Return the keys from a full Redis command.",
            "GETKEYSANDFLAGS <full-command>",
            "    Return the keys and the access flags from a full Redis command.",
        ],
    );
    Ok(())
}

// ------------------------------------------------------------------------------- SLOWLOG

/// # Format
/// `SLOWLOG GET [count]` → the newest `count` entries (default 10, -1 = all), each
/// `[id, unix time, microseconds, [args], client addr, client name]`.
fn cmd_slowlog_get(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let count = if ctx.argc() == 3 {
        let n = crate::command::parse_i64(ctx.arg(2))
            .filter(|n| *n >= -1)
            .ok_or_else(|| CmdError::new("ERR count should be greater than or equal to -1"))?;
        if n == -1 {
            usize::MAX
        } else {
            n as usize
        }
    } else if ctx.argc() == 2 {
        10
    } else {
        return Err(CmdError::new("ERR wrong number of arguments for 'slowlog|get' command"));
    };
    let entries: Vec<_> = {
        let log = ctx.shared.slowlog.lock().unwrap_or_else(|e| e.into_inner());
        log.entries.iter().take(count).cloned().collect()
    };
    ctx.out.array(entries.len());
    for e in entries {
        ctx.out.array(6).integer(e.id as i64).integer(e.time as i64).integer(e.usec as i64);
        ctx.out.array(e.args.len());
        for a in &e.args {
            ctx.out.bulk(a);
        }
        ctx.out.bulk(e.addr.as_bytes()).bulk(&e.name);
    }
    Ok(())
}

/// # Format
/// `SLOWLOG LEN` → the number of entries.
fn cmd_slowlog_len(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let n = ctx.shared.slowlog.lock().unwrap_or_else(|e| e.into_inner()).entries.len();
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `SLOWLOG RESET` → `+OK`.
fn cmd_slowlog_reset(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    ctx.shared.slowlog.lock().unwrap_or_else(|e| e.into_inner()).entries.clear();
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `SLOWLOG HELP` → the subcommands.
fn cmd_slowlog_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "SLOWLOG",
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}

// ------------------------------------------------------------------------------- LATENCY

fn latency_events(shared: &Shared) -> std::sync::MutexGuard<'_, crate::latency::Events> {
    shared.latency.lock().unwrap_or_else(|e| e.into_inner())
}

/// # Format
/// `LATENCY DOCTOR` → a verbatim string: Redis's latency report for the recorded events.
fn cmd_latency_doctor(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let cfg = &ctx.shared.config;
    let threshold = cfg.latency_monitor_threshold.load(Ordering::Relaxed);
    let slowlog = Some(cfg.slowlog_log_slower_than.load(Ordering::Relaxed)).filter(|&v| v != u64::MAX);
    let report = latency_events(ctx.shared).doctor(threshold, slowlog, crate::latency::anon_huge_pages());
    ctx.out.verbatim(b"txt", report.as_bytes());
    Ok(())
}

/// # Format
/// `LATENCY GRAPH event` → a verbatim string: the event's samples as an ASCII sparkline.
fn cmd_latency_graph(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let event = ctx.arg(2);
    let Some(graph) = latency_events(ctx.shared).graph(event) else {
        let mut e = b"ERR No samples available for event ".to_vec();
        crate::command::quote_arg(&mut e, event, usize::MAX);
        return Err(CmdError(e));
    };
    ctx.out.verbatim(b"txt", graph.as_bytes());
    Ok(())
}

/// # Format
/// `LATENCY HISTORY event` → `[[unix-time, ms], …]`, oldest first (empty for an unknown event).
fn cmd_latency_history(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let samples = latency_events(ctx.shared).history(ctx.arg(2));
    ctx.out.array(samples.len());
    for (time, ms) in samples {
        ctx.out.array(2).integer(time as i64).integer(ms as i64);
    }
    Ok(())
}

/// # Format
/// `LATENCY LATEST` → `[[event, unix-time, latest ms, all-time max ms], …]`.
fn cmd_latency_latest(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let latest = latency_events(ctx.shared).latest();
    ctx.out.array(latest.len());
    for (event, time, ms, max) in latest {
        ctx.out.array(4).bulk(event.as_bytes()).integer(time as i64).integer(ms as i64).integer(max as i64);
    }
    Ok(())
}

/// # Format
/// `LATENCY RESET [event …]` → how many events were forgotten (every event without names).
fn cmd_latency_reset(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut events = latency_events(ctx.shared);
    let n = if ctx.argc() == 2 {
        events.reset(None)
    } else {
        (2..ctx.argc()).map(|i| events.reset(Some(ctx.arg(i)))).sum()
    };
    drop(events);
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `LATENCY HISTOGRAM [command …]` → a map of command name → `{calls, histogram_usec}`,
/// the histogram a map of bucket (µs) → calls up to it, for commands called since the last
/// CONFIG RESETSTAT. A container's name stands for its subcommands; unknown names are
/// skipped.
fn cmd_latency_histogram(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = table();
    let mut wanted: Vec<usize> = Vec::new();
    if ctx.argc() == 2 {
        // Redis walks its command dict, each command followed by its subcommands.
        for i in t.commands() {
            wanted.push(i);
            wanted.extend_from_slice(t.subcommands(i));
        }
    } else {
        for j in 2..ctx.argc() {
            let name = String::from_utf8_lossy(ctx.arg(j)).to_ascii_lowercase();
            if let Some(i) = t.lookup_full(&name) {
                wanted.push(i);
                wanted.extend_from_slice(t.subcommands(i));
            }
        }
    }
    let st = &ctx.shared.stats;
    let with_data: Vec<(usize, [u64; crate::latency::BUCKETS])> = wanted
        .into_iter()
        .map(|i| (i, st.durations(i).log2_buckets()))
        .filter(|(_, h)| h.iter().any(|&n| n > 0))
        .collect();
    ctx.out.map(with_data.len());
    for (i, h) in with_data {
        let total: u64 = h.iter().sum();
        ctx.out.bulk(t.specs[i].name.as_bytes()).map(2);
        ctx.out.bulk(b"calls").integer(total as i64).bulk(b"histogram_usec");
        ctx.out.map(h.iter().filter(|&&n| n > 0).count());
        let mut cumulative = 0;
        for (b, &n) in h.iter().enumerate() {
            if n > 0 {
                cumulative += n;
                ctx.out.integer(crate::latency::bucket_label(b) as i64).integer(cumulative as i64);
            }
        }
    }
    Ok(())
}

/// `LATENCY HELP` → the subcommands.
fn cmd_latency_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "LATENCY",
        &[
            "DOCTOR",
            "    Return a human readable latency analysis report.",
            "GRAPH <event>",
            "    Return an ASCII latency graph for the <event> class.",
            "HISTORY <event>",
            "    Return time-latency samples for the <event> class.",
            "LATEST",
            "    Return the latest latency samples for all events.",
            "RESET [<event> ...]",
            "    Reset latency data of one or more <event> classes.",
            "    (default: reset all data for all event classes)",
            "HISTOGRAM [COMMAND ...]",
            "    Return a cumulative distribution of latencies in the format of a histogram for the specified command names.",
            "    If no commands are specified then all histograms are replied.",
        ],
    );
    Ok(())
}

// ----------------------------------------------------------------------- MEMORY

/// # Format
/// `MEMORY USAGE key [SAMPLES count]` → bytes the key holds in the arena, or nil. With
/// SAMPLES (default 5, 0 = all) a collection tree is measured on that many blocks and the
/// rest estimated, as Redis samples nested values.
fn cmd_memory_usage(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut samples = 5usize;
    let mut i = 3;
    while i < ctx.argc() {
        if ctx.arg(i).eq_ignore_ascii_case(b"samples") && i + 1 < ctx.argc() {
            let n = larder_engine::parse_canonical_i64(ctx.arg(i + 1)).ok_or_else(CmdError::not_integer)?;
            if n < 0 {
                return Err(CmdError::syntax());
            }
            samples = n as usize;
            i += 2;
        } else {
            return Err(CmdError::syntax());
        }
    }
    match ctx.h.memory_usage(ctx.conn.db, ctx.arg(2), samples)? {
        Some(n) => ctx.out.integer(n as i64),
        None => ctx.out.null(),
    };
    Ok(())
}

fn cmd_memory_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "MEMORY",
        &[
            "DOCTOR",
            "    Return memory problems reports.",
            "MALLOC-STATS",
            "    Return internal statistics report from the memory allocator.",
            "PURGE",
            "    Attempt to purge dirty pages for reclamation by the allocator.",
            "STATS",
            "    Return information about the memory usage of the server.",
            "USAGE <key> [SAMPLES <count>]",
            "    Return memory in bytes used by <key> and its value. Nested values are",
            "    sampled up to <count> times (default: 5, 0 means sample all).",
        ],
    );
    Ok(())
}

/// The memory figures of INFO memory and MEMORY STATS (Redis's `getMemoryOverheadData`),
/// as Larder counts them: see the INFO memory section and the README.
struct MemoryFigures {
    /// used_memory: the arena's live bytes (`allocated`) and the clients' buffers.
    used: u64,
    peak: u64,
    /// used_memory when the server started (see `AtStart`).
    startup: u64,
    /// The clients' buffers (`mem_clients_normal`, the sum of CLIENT LIST `tot-mem`).
    clients: u64,
    /// Per database with keys: its number, its index's bytes (directory and segments).
    dbs: Vec<(u32, u64)>,
    keys: u64,
    /// What is not data: what there was at start, the clients' buffers, and what the
    /// databases' indexes grew by since. The items' own headers are in the dataset.
    overhead: u64,
    dataset: u64,
    /// The arena taken as jemalloc: `allocated` its live bytes; `active` the pages those sit
    /// in (small-class pages with their free blocks, and large values' pages); `resident`
    /// those and the free runs not yet given back to the kernel (an over-estimate, see
    /// `dirty_free_bytes`; the arena's header and page descriptors are not in it, as
    /// jemalloc's metadata is not). The clients' buffers are on the process heap, which
    /// none of them counts.
    allocated: u64,
    active: u64,
    resident: u64,
    rss: u64,
}

impl MemoryFigures {
    fn measure(ctx: &mut Ctx<'_>) -> MemoryFigures {
        let shared = ctx.shared;
        let arena = shared.store.arena();
        let (allocated, clients) = shared.used_memory();
        let used = allocated + clients;
        let peak = shared.stats.peak_memory.fetch_max(used, Ordering::Relaxed).max(used);
        let start = &shared.at_start;
        let mut dbs = Vec::new();
        let (mut index, mut keys) = (0, 0);
        for db in 0..shared.store.databases() {
            let bytes = ctx.h.index_bytes(db).unwrap_or(0);
            index += bytes;
            let n = ctx.h.dbsize(db).unwrap_or(0);
            if n > 0 {
                dbs.push((db, bytes));
                keys += n;
            }
        }
        let overhead = (start.used + clients + index).saturating_sub(start.index).min(used);
        let active = arena.pages_held_bytes();
        MemoryFigures {
            used,
            peak,
            startup: start.used,
            clients,
            dbs,
            keys,
            overhead,
            dataset: used - overhead,
            allocated,
            active,
            resident: active + arena.dirty_free_bytes(),
            rss: rss_bytes(),
        }
    }

    /// What was added since start (Redis's `net_usage`: 1 if nothing was).
    fn net(&self) -> u64 {
        if self.used > self.startup {
            self.used - self.startup
        } else {
            1
        }
    }

    /// The dataset's share of what was added since start, in single precision as Redis
    /// computes it.
    fn dataset_perc(&self) -> f32 {
        self.dataset as f32 * 100.0 / self.net() as f32
    }

    fn peak_perc(&self) -> f32 {
        if self.peak == 0 {
            100.0
        } else {
            self.used as f32 * 100.0 / self.peak as f32
        }
    }
}

/// `a / b` as Redis's memory ratios are, in single precision (0 when `b` is).
fn ratio(a: u64, b: u64) -> f32 {
    if b == 0 {
        0.0
    } else {
        a as f32 / b as f32
    }
}

/// `a - b`, signed (Redis's `_bytes` figures beside its ratios).
fn diff(a: u64, b: u64) -> i64 {
    a as i64 - b as i64
}

/// # Format
/// `MEMORY STATS` → a map of Redis 7.0.15's fields in its order (`peak.allocated`, …,
/// `db.N` for each database with keys, …, `fragmentation.bytes`), Larder's figures as INFO
/// memory gives them; the ratios are doubles computed in single precision and printed with
/// `%.17g`, as Redis 7.0's.
fn cmd_memory_stats(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let m = MemoryFigures::measure(ctx);
    let out = &mut ctx.out;
    out.map(27 + m.dbs.len());
    let int = |out: &mut Writer<'_>, name: &str, v: i64| {
        out.bulk(name.as_bytes()).integer(v);
    };
    let dbl = |out: &mut Writer<'_>, name: &str, v: f64| {
        out.bulk(name.as_bytes());
        crate::families::zset::write_double(out, v);
    };
    int(out, "peak.allocated", m.peak as i64);
    int(out, "total.allocated", m.used as i64);
    int(out, "startup.allocated", m.startup as i64);
    // No replication, cluster, AOF, Lua or functions: nothing in their buffers and caches.
    int(out, "replication.backlog", 0);
    int(out, "clients.slaves", 0);
    int(out, "clients.normal", m.clients as i64);
    int(out, "cluster.links", 0);
    int(out, "aof.buffer", 0);
    int(out, "lua.caches", 0);
    int(out, "functions.caches", 0);
    for &(db, index) in &m.dbs {
        // One index per database (expiry lives in the items): all of it is the main table.
        out.bulk(format!("db.{db}").as_bytes()).map(3);
        int(out, "overhead.hashtable.main", index as i64);
        int(out, "overhead.hashtable.expires", 0);
        int(out, "overhead.hashtable.slot-to-keys", 0);
    }
    int(out, "overhead.total", m.overhead as i64);
    int(out, "keys.count", m.keys as i64);
    int(out, "keys.bytes-per-key", m.net().checked_div(m.keys).unwrap_or(0) as i64);
    int(out, "dataset.bytes", m.dataset as i64);
    dbl(out, "dataset.percentage", m.dataset_perc() as f64);
    dbl(out, "peak.percentage", m.peak_perc() as f64);
    int(out, "allocator.allocated", m.allocated as i64);
    int(out, "allocator.active", m.active as i64);
    int(out, "allocator.resident", m.resident as i64);
    dbl(out, "allocator-fragmentation.ratio", ratio(m.active, m.allocated) as f64);
    int(out, "allocator-fragmentation.bytes", diff(m.active, m.allocated));
    dbl(out, "allocator-rss.ratio", ratio(m.resident, m.active) as f64);
    int(out, "allocator-rss.bytes", diff(m.resident, m.active));
    dbl(out, "rss-overhead.ratio", ratio(m.rss, m.resident) as f64);
    int(out, "rss-overhead.bytes", diff(m.rss, m.resident));
    dbl(out, "fragmentation", ratio(m.rss, m.used) as f64);
    int(out, "fragmentation.bytes", diff(m.rss, m.used));
    Ok(())
}

/// # Format
/// `MEMORY DOCTOR` → Redis 7.0.15's report (a verbatim string in RESP3), from the same
/// figures and thresholds: under 5 MB used, "this instance is empty"; else a peak over 150%
/// of what is used, fragmentation, allocator fragmentation or RSS overhead over their ratios
/// and 10 MB, or clients' buffers over 200 KB each on average.
fn cmd_memory_doctor(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let m = MemoryFigures::measure(ctx);
    let over = |a: u64, b: u64| ratio(a, b) > 1.1 && a.saturating_sub(b) > 10 << 20;
    let clients = (ctx.shared.clients.lock().unwrap_or_else(|e| e.into_inner()).len() as u64).max(1);
    let mut found: Vec<&str> = Vec::new();
    let empty = m.used < 5 << 20;
    if !empty {
        if m.peak as f32 / m.used as f32 > 1.5 {
            found.push(" * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n");
        }
        if ratio(m.rss, m.used) > 1.4 && m.rss.saturating_sub(m.used) > 10 << 20 {
            found.push(" * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"larder-arena\".\n\n");
        }
        if over(m.active, m.allocated) {
            found.push(" * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n");
        }
        if over(m.resident, m.active) {
            found.push(" * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n");
        }
        if over(m.rss, m.resident) {
            found.push(" * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the Redis process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts or Modules.\n\n");
        }
        if m.clients / clients > 200 * 1024 {
            found.push(" * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n");
        }
    }
    let report = if empty {
        "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n".to_string()
    } else if found.is_empty() {
        "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n"
            .to_string()
    } else {
        let mut s = String::from("Sam, I detected a few issues in this Redis instance memory implants:\n\n");
        s.extend(found);
        s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
        s
    };
    ctx.out.verbatim(b"txt", report.as_bytes());
    Ok(())
}

/// # Format
/// `MEMORY PURGE` → `+OK`, once retired memory no reader can see is freed, whole free
/// pages of small classes are back in the page pool, and the pages of every free run are
/// given back to the kernel, however recently freed (jemalloc's purge of dirty pages).
fn cmd_memory_purge(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    match ctx.h.purge() {
        Ok(_) => {
            ctx.out.ok();
            Ok(())
        }
        Err(e) => {
            tracing::warn!(%e, "MEMORY PURGE");
            Err(CmdError::new("ERR Error purging dirty pages"))
        }
    }
}

/// # Format
/// `MEMORY MALLOC-STATS` → Redis's answer when its allocator is not jemalloc.
fn cmd_memory_malloc_stats(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    ctx.out.bulk(b"Stats not supported for the current allocator");
    Ok(())
}

/// # Format
/// `ROLE` → `*3 master, 0, *0`: Larder has no replication, so it is a master with no
/// replicas at offset 0, as a Redis with none reports.
fn cmd_role(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    ctx.out.array(3).bulk(b"master").integer(0).array(0);
    Ok(())
}

// ----------------------------------------------------------------------- DEBUG, SHUTDOWN …

/// C's `atoi`/`strtod` on an argument: the longest numeric prefix, 0 if none (DEBUG takes
/// its numbers that loosely in Redis).
fn leading_number(b: &[u8]) -> f64 {
    let s = lossy(b);
    let s = s.trim_start();
    let end = s
        .char_indices()
        .take_while(|(i, c)| c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '-' || *c == '+')))
        .map(|(i, c)| i + c.len_utf8())
        .last()
        .unwrap_or(0);
    (0..=end).rev().find_map(|e| s[..e].parse::<f64>().ok()).unwrap_or(0.0)
}

/// # Format
/// `DEBUG SLEEP seconds` → `+OK` after blocking this worker that long;
/// `DEBUG SET-ACTIVE-EXPIRE 0|1` → `+OK` (0 pauses active expiry); `DEBUG LOG message` →
/// `+OK`; `DEBUG ERROR line` → `-line`; `DEBUG HELP`. Refused unless `enable-debug-command`
/// allows it.
fn cmd_debug(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    crate::families::module::protected(ctx, "DEBUG", "enable-debug-command")?;
    let sub = ctx.arg(1).to_ascii_lowercase();
    match (sub.as_slice(), ctx.argc()) {
        (b"error", 3) => {
            // The argument is the whole error line, code included, newlines made spaces.
            let line: Vec<u8> =
                ctx.arg(2).iter().map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }).collect();
            return Err(CmdError(line));
        }
        (b"sleep", 3) => {
            let secs = leading_number(ctx.arg(2));
            if secs > 0.0 && secs.is_finite() {
                std::thread::sleep(std::time::Duration::from_secs_f64(secs));
            }
            ctx.out.ok();
        }
        (b"set-active-expire", 3) => {
            let on = leading_number(ctx.arg(2)) as i64 != 0;
            ctx.shared.active_expire.store(on, Ordering::Relaxed);
            ctx.out.ok();
        }
        (b"pause-cron", 3) => {
            let on = leading_number(ctx.arg(2)) as i64 != 0;
            ctx.shared.cron_paused.store(on, Ordering::Relaxed);
            ctx.out.ok();
        }
        (b"log", 3) => {
            tracing::warn!("DEBUG LOG: {}", lossy(ctx.arg(2)));
            ctx.out.ok();
        }
        (b"help", 2) => reply_help(
            ctx,
            "DEBUG",
            &[
                "ERROR <string>",
                "    Return a Redis protocol error with <string> as message. Useful for clients",
                "    unit tests to simulate Redis errors.",
                "LOG <message>",
                "    Write <message> to the server log.",
                "PAUSE-CRON <0|1>",
                "    Stop periodic cron job processing.",
                "SET-ACTIVE-EXPIRE <0|1>",
                "    Setting it to 0 disables expiring keys in background when they are not accessed (otherwise the Redis behavior). Setting it to 1 reenables back the default.",
                "SLEEP <seconds>",
                "    Stop the server for <seconds>. Decimals allowed.",
            ],
        ),
        _ => {
            return Err(CmdError::new(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try DEBUG HELP.",
                lossy(&ctx.arg(1)[..ctx.arg(1).len().min(128)])
            )))
        }
    }
    Ok(())
}

/// # Format
/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]` → no reply: the server stops and every
/// connection closes. SAVE fails (there is nothing to save to yet) unless FORCE is given.
fn cmd_shutdown(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (mut nosave, mut save, mut force, mut abort, mut other) = (false, false, false, false, false);
    for j in 1..ctx.argc() {
        match ctx.arg(j).to_ascii_lowercase().as_slice() {
            b"nosave" => nosave = true,
            b"save" => save = true,
            b"now" => other = true,
            b"force" => force = true,
            b"abort" => abort = true,
            _ => return Err(CmdError::syntax()),
        }
    }
    if (abort && (nosave || save || force || other)) || (nosave && save) {
        return Err(CmdError::syntax());
    }
    if abort {
        return Err(CmdError::new("ERR No shutdown in progress."));
    }
    if save && !force {
        tracing::warn!("SHUTDOWN SAVE refused: this server has no persistence yet");
        return Err(CmdError::new("ERR Errors trying to SHUTDOWN. Check logs."));
    }
    tracing::warn!(client = ctx.conn.id, "SHUTDOWN requested by a client");
    ctx.shared.shutdown.store(true, Ordering::SeqCst);
    ctx.shared.wake_all();
    ctx.conn.close = true;
    Ok(())
}

/// # Format
/// `CLUSTER <subcommand> ...` → `-ERR This instance has cluster support disabled`, for every
/// subcommand (HELP included), as Redis without `cluster-enabled`.
fn cmd_cluster(_ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    Err(CmdError::new("ERR This instance has cluster support disabled"))
}

/// # Format
/// `MONITOR` → `+OK`, then a line for each command any client runs (see
/// [`crate::monitor`]); nothing at all if the client is in MONITOR mode already, as Redis.
/// Inside EXEC: `-ERR MONITOR isn't allowed for DENY BLOCKING client`.
fn cmd_monitor(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.conn.in_exec {
        return Err(CmdError::new("ERR MONITOR isn't allowed for DENY BLOCKING client"));
    }
    if ctx.shared.monitors.attach(&ctx.conn.info, ctx.worker, ctx.conn.slot) {
        ctx.out.ok();
    }
    Ok(())
}

/// # Format
/// `TIME` → `[unix seconds, microseconds]` as two bulk strings.
fn cmd_time(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    ctx.out.array(2);
    ctx.out.bulk(now.as_secs().to_string().as_bytes());
    ctx.out.bulk(now.subsec_micros().to_string().as_bytes());
    Ok(())
}

/// # Format
/// `LASTSAVE` → unix time of the last save: the start of the server until persistence
/// exists (what a fresh Redis reports before its first save).
fn cmd_lastsave(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let t = ctx.shared.started_unix as i64;
    ctx.out.integer(t);
    Ok(())
}

/// # Format
/// `SAVE` / `BGSAVE [SCHEDULE]` → an error: there is no persistence to save with yet, and
/// answering `+OK` would claim data is on disk when it is not.
fn cmd_save(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let name = lossy(ctx.arg(0)).to_ascii_uppercase();
    Err(CmdError::new(format!("ERR {name} is not available: this server has no persistence yet")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_and_sections() {
        assert_eq!(bytes_to_human(1000), "1000B");
        assert_eq!(bytes_to_human(916344), "894.87K");
        assert_eq!(bytes_to_human(12222464), "11.66M");
        assert_eq!(requested_sections(&[b"CPU", b"keyspace", b"cpu"]), vec!["cpu", "keyspace"]);
        assert_eq!(requested_sections(&[b"foo"]), Vec::<&str>::new());
        assert!(requested_sections(&[]).contains(&"errorstats"));
        assert!(!requested_sections(&[]).contains(&"commandstats"));
        assert!(requested_sections(&[b"all"]).contains(&"commandstats"));
        assert_eq!(leading_number(b"0.5x"), 0.5);
        assert_eq!(leading_number(b"x"), 0.0);
        assert_eq!(leading_number(b"1"), 1.0);
    }
}
