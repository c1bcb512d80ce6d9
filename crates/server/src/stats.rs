//! Counters for INFO (stats, commandstats, errorstats) and the slow log.
//!
//! Each worker writes only its own [`WorkerStats`] (relaxed atomics on its own cache
//! lines); INFO adds them up.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Per-command counters (Redis `cmdstat_*`).
#[derive(Default, Debug)]
pub struct CmdStats {
    pub calls: AtomicU64,
    pub usec: AtomicU64,
    pub rejected: AtomicU64,
    pub failed: AtomicU64,
}

#[derive(Default, Debug)]
pub struct WorkerStats {
    pub commands: AtomicU64,
    pub connections: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub net_input: AtomicU64,
    pub net_output: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub expired_keys: AtomicU64,
    pub total_errors: AtomicU64,
    /// Error replies by their first word (`ERR`, `WRONGTYPE`, …).
    pub errors: Mutex<HashMap<String, u64>>,
    pub cmd: Vec<CmdStats>,
}

pub struct Stats {
    workers: Vec<Box<WorkerStats>>,
}

impl Stats {
    pub fn new(n: usize) -> Stats {
        let ncmd = crate::command::table().len();
        Stats {
            workers: (0..n)
                .map(|_| Box::new(WorkerStats { cmd: (0..ncmd).map(|_| CmdStats::default()).collect(), ..Default::default() }))
                .collect(),
        }
    }

    pub fn worker(&self, i: usize) -> &WorkerStats {
        &self.workers[i.min(self.workers.len() - 1)]
    }

    /// Sum of one counter over every worker.
    pub fn sum(&self, f: impl Fn(&WorkerStats) -> &AtomicU64) -> u64 {
        self.workers.iter().map(|w| f(w).load(Ordering::Relaxed)).sum()
    }

    /// Per command: (calls, usec, rejected, failed), summed over workers.
    pub fn command(&self, i: usize) -> (u64, u64, u64, u64) {
        let mut t = (0, 0, 0, 0);
        for w in &self.workers {
            if let Some(c) = w.cmd.get(i) {
                t.0 += c.calls.load(Ordering::Relaxed);
                t.1 += c.usec.load(Ordering::Relaxed);
                t.2 += c.rejected.load(Ordering::Relaxed);
                t.3 += c.failed.load(Ordering::Relaxed);
            }
        }
        t
    }

    /// Error counts by prefix, summed over workers.
    pub fn errors(&self) -> Vec<(String, u64)> {
        let mut all: HashMap<String, u64> = HashMap::new();
        for w in &self.workers {
            for (k, v) in w.errors.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                *all.entry(k.clone()).or_default() += v;
            }
        }
        let mut v: Vec<_> = all.into_iter().collect();
        v.sort();
        v
    }

    /// CONFIG RESETSTAT.
    pub fn reset(&self) {
        for w in &self.workers {
            for a in [
                &w.commands,
                &w.connections,
                &w.rejected_connections,
                &w.net_input,
                &w.net_output,
                &w.keyspace_hits,
                &w.keyspace_misses,
                &w.expired_keys,
                &w.total_errors,
            ] {
                a.store(0, Ordering::Relaxed);
            }
            w.errors.lock().unwrap_or_else(|e| e.into_inner()).clear();
            for c in &w.cmd {
                for a in [&c.calls, &c.usec, &c.rejected, &c.failed] {
                    a.store(0, Ordering::Relaxed);
                }
            }
        }
    }
}

/// One slow log entry (Redis SLOWLOG GET format).
#[derive(Clone, Debug)]
pub struct SlowEntry {
    pub id: u64,
    pub time: u64,
    pub usec: u64,
    pub args: Vec<Vec<u8>>,
    pub addr: String,
    pub name: Vec<u8>,
}

#[derive(Default, Debug)]
pub struct Slowlog {
    pub next_id: u64,
    pub entries: VecDeque<SlowEntry>,
}
