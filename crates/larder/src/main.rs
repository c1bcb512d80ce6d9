//! `larder`: the one binary.
//!
//! - `larder server`: the network server (RESP and memcached on one keyspace)
//! - `larder segment create|info|check|unlink NAME`: manage named shared-memory segments
//! - `larder bench`: the load generator (RESP, memcached text, or a local segment)
//! - `larder bench-engine`: engine figures (ns per get/set, growth, memory per key)
//! - `larder stress-worker`: a writer or reader process for the multi-process crash tests

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod engine_bench;
use larder::stress;

#[derive(Parser)]
#[command(
    name = "larder",
    version,
    about = "Larder: one in-memory keyspace, served over Redis and memcached protocols and shared memory"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the server: RESP on 127.0.0.1:6379 and memcached on 127.0.0.1:11211, an anonymous
    /// in-memory arena, one worker thread per core.
    Server(larder_server::Args),
    /// Create, inspect, check or remove a named shared-memory segment (/dev/shm/larder-NAME).
    Segment {
        #[command(subcommand)]
        op: SegmentOp,
    },
    /// Load generator: drive a RESP or memcached server (or a local segment) with SET/GET
    /// traffic and report throughput, HDR latency percentiles and a timeline; `--verify`
    /// checks every value read back.
    Bench(larder_bench::Args),
    /// Measure the engine: get/set latency in-process and from a second process, growth to
    /// millions of keys under concurrent reads, memory per key, fragmentation.
    BenchEngine(engine_bench::Args),
    /// A process for the multi-process crash tests (writes or reads a named segment).
    #[command(hide = true)]
    StressWorker(stress::Args),
}

#[derive(Subcommand)]
enum SegmentOp {
    /// Create a segment (sparse: memory is used as it fills).
    Create {
        name: String,
        /// Bytes to reserve (default: half the machine's memory, at most 32 GiB).
        #[arg(long)]
        capacity: Option<u64>,
        /// Logical databases.
        #[arg(long, default_value_t = 16)]
        databases: u32,
    },
    /// Print the segment's geometry, participants and key counts.
    Info { name: String },
    /// Reap dead participants and run the invariant checker; exits non-zero on a problem.
    Check { name: String },
    /// Remove the segment's name (processes still attached keep their mapping).
    Unlink { name: String },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Server(args) => larder_server::run(&args),
        Cmd::Segment { op } => segment(op),
        Cmd::Bench(args) => larder_bench::main(&args),
        Cmd::BenchEngine(args) => engine_bench::run(&args),
        Cmd::StressWorker(args) => stress::run(&args),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("larder: {e}");
            ExitCode::FAILURE
        }
    }
}

fn segment(op: SegmentOp) -> Result<(), String> {
    use larder_engine::{ArenaConfig, Backing, Store, StoreConfig};
    match op {
        SegmentOp::Create { name, capacity, databases } => {
            let mut arena = ArenaConfig::default();
            if let Some(c) = capacity {
                arena.capacity = c;
            }
            let cfg = StoreConfig { backing: Backing::Named(name.clone()), arena, databases };
            larder_engine::Arena::create(cfg.backing.clone(), &cfg.arena).map_err(|e| e.to_string())?;
            Store::open(cfg).map_err(|e| e.to_string())?;
            println!("created {}", larder_engine::Arena::shm_path(&name).map_err(|e| e.to_string())?.display());
            Ok(())
        }
        SegmentOp::Info { name } => {
            let store = Store::attach(&name).map_err(|e| e.to_string())?;
            let a = store.arena();
            println!("segment    {}", larder_engine::Arena::shm_path(&name).map_err(|e| e.to_string())?.display());
            println!("capacity   {} bytes", a.capacity());
            println!(
                "in use     {} bytes of pages ({} held by data, the rest free large runs)",
                a.pages_in_use_bytes(),
                a.pages_held_bytes()
            );
            println!(
                "used       {} bytes allocated ({} of free small blocks kept by their classes)",
                a.used_bytes(),
                a.free_small_bytes()
            );
            println!(
                "dirty      {} bytes of free runs not yet given back to the kernel (at most)",
                a.dirty_free_bytes()
            );
            println!("epoch      {}", a.epoch());
            println!("databases  {}", store.databases());
            let (blocked, waiting) = store.push_counts();
            println!("blocked    {blocked} clients waiting for pushes, {waiting} threads waiting to be told");
            let h = store.handle().map_err(|e| e.to_string())?;
            for db in 0..store.databases() {
                let n = h.dbsize(db).map_err(|e| e.to_string())?;
                if n > 0 {
                    println!("db{db:<8} keys={n}");
                }
            }
            drop(h);
            for s in a.slots() {
                if s.state != "free" {
                    println!(
                        "slot {:<4} pid={} state={} liveness={} pinned={} retired={}",
                        s.slot,
                        s.pid,
                        s.state,
                        if s.locked { "lock" } else { "pid" },
                        s.pinned,
                        s.retired
                    );
                }
            }
            Ok(())
        }
        SegmentOp::Check { name } => {
            let store = Store::attach(&name).map_err(|e| e.to_string())?;
            let reaped = store.arena().reap_dead();
            let r = store.check().map_err(|e| e.to_string())?;
            println!(
                "reaped {reaped} dead participants; {} keys in {} segments; {} held and {} stale locks",
                r.keys, r.segments, r.held_locks, r.stale_locks
            );
            for p in &r.problems {
                println!("problem: {p}");
            }
            if r.ok() {
                Ok(())
            } else {
                Err(format!("{} problems", r.problems.len()))
            }
        }
        SegmentOp::Unlink { name } => larder_engine::Arena::unlink(&name).map_err(|e| e.to_string()),
    }
}
