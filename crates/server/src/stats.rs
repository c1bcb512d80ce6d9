//! Counters for INFO (stats, commandstats, errorstats) and the slow log.
//!
//! Each worker writes only its own [`WorkerStats`] ([`Counter`]s on its own cache lines:
//! a plain load and store, no locked instruction); INFO adds them up.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::latency::{Durations, FAST_US};

/// A counter that one thread adds to and any thread reads.
///
/// Only its owner adds to it (a worker its own [`WorkerStats`], the background thread the
/// extra set), with a relaxed load and store: a locked `fetch_add` costs tens of cycles,
/// and a command counted four of them. Any thread reads it with a relaxed load.
///
/// CONFIG RESETSTAT, which may run on another thread than the owner, never stores into
/// the total (the owner's next store would undo it, or it would undo the owner's): it
/// records the total as the counter's new zero, and readers see the total minus the zero.
#[derive(Default, Debug)]
pub struct Counter {
    total: AtomicU64,
    zero: AtomicU64,
}

impl Counter {
    /// Adds `n`. Only the owning thread may call this.
    #[inline]
    pub fn add(&self, n: u64) {
        self.total.store(self.total.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
    }

    /// Adds one. Only the owning thread may call this.
    #[inline]
    pub fn incr(&self) {
        self.add(1)
    }

    /// The count since the last reset.
    pub fn get(&self) -> u64 {
        self.total.load(Ordering::Relaxed).saturating_sub(self.zero.load(Ordering::Relaxed))
    }

    /// Everything ever added, resets or not: for a thread that measures its own progress.
    #[inline]
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Takes back one that was added, if the count since the last reset has one. Only
    /// the owning thread may call this.
    pub fn take_back(&self) {
        let total = self.total.load(Ordering::Relaxed);
        if total != self.zero.load(Ordering::Relaxed) {
            self.total.store(total.wrapping_sub(1), Ordering::Relaxed);
        }
    }

    /// CONFIG RESETSTAT: the count starts again from zero.
    pub fn reset(&self) {
        self.zero.store(self.total.load(Ordering::Relaxed), Ordering::Relaxed);
    }
}

/// Per-command counters (Redis `cmdstat_*`).
#[derive(Default, Debug)]
pub struct CmdStats {
    pub calls: Counter,
    pub usec: Counter,
    pub rejected: Counter,
    pub failed: Counter,
    /// Calls by duration (`latency-tracking`; see [`crate::latency`]): those of less than
    /// [`FAST_US`] µs one counter per µs, the others under the lowest value (ns) of the HDR
    /// sub-bucket Redis counts them in.
    pub fast: [Counter; FAST_US],
    pub slow: Mutex<BTreeMap<u64, u64>>,
}

impl CmdStats {
    /// Counts a call of `usec` µs in its duration histogram. Only the owning worker may
    /// call this.
    #[inline]
    pub fn record(&self, usec: u64) {
        match self.fast.get(usec as usize) {
            Some(c) => c.incr(),
            None => self.record_slow(usec),
        }
    }

    #[cold]
    #[inline(never)]
    fn record_slow(&self, usec: u64) {
        let v = crate::latency::hdr_lowest(crate::latency::recorded_ns(usec));
        *self.slow.lock().unwrap_or_else(|e| e.into_inner()).entry(v).or_default() += 1;
    }

    /// Takes back a call of `usec` µs that [`CmdStats::record`] counted (one that blocked:
    /// it is counted when it is served). Only the owning worker may call this.
    pub fn take_back(&self, usec: u64) {
        match self.fast.get(usec as usize) {
            Some(c) => c.take_back(),
            None => {
                let v = crate::latency::hdr_lowest(crate::latency::recorded_ns(usec));
                let mut slow = self.slow.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(n) = slow.get_mut(&v) {
                    *n -= 1;
                    if *n == 0 {
                        slow.remove(&v);
                    }
                }
            }
        }
    }
}

#[derive(Default, Debug)]
pub struct WorkerStats {
    pub commands: Counter,
    pub connections: Counter,
    pub rejected_connections: Counter,
    pub net_input: Counter,
    pub net_output: Counter,
    /// Reads and writes that moved bytes (INFO `total_reads_processed`,
    /// `total_writes_processed`).
    pub reads: Counter,
    pub writes: Counter,
    /// Resizes of the reply buffer Redis would keep for each client (INFO
    /// `reply_buffer_shrinks`, `reply_buffer_expands`; see CLIENT LIST's `rbs`).
    pub reply_buffer_shrinks: Counter,
    pub reply_buffer_expands: Counter,
    pub keyspace_hits: Counter,
    pub keyspace_misses: Counter,
    pub expired_keys: Counter,
    pub total_errors: Counter,
    /// Write commands that succeeded (INFO `rdb_changes_since_last_save`; one per command,
    /// where Redis counts changed keys).
    pub dirty: Counter,
    /// Error replies by their first word (`ERR`, `WRONGTYPE`, …).
    pub errors: Mutex<HashMap<String, u64>>,
    pub cmd: Vec<CmdStats>,
}

impl WorkerStats {
    /// Counts an error reply under its first word (`code`: errorstats). Allocates only for
    /// a word not seen before.
    pub fn count_error(&self, code: &[u8]) {
        self.total_errors.incr();
        let code = String::from_utf8_lossy(code);
        let mut errors = self.errors.lock().unwrap_or_else(|e| e.into_inner());
        match errors.get_mut(code.as_ref()) {
            Some(n) => *n += 1,
            None => {
                errors.insert(code.into_owned(), 1);
            }
        }
    }
}

pub struct Stats {
    // Boxed so each worker's counters sit in their own allocation, away from the others'
    // cache lines (the workers write them on every command).
    #[allow(clippy::vec_box)]
    workers: Vec<Box<WorkerStats>>,
    /// Commands per second over the last 1.6 s (Redis `instantaneous_ops_per_sec`).
    pub inst_ops: AtomicU64,
    /// KiB/s in and out over the last 1.6 s, as f64 bits.
    pub inst_in_kbps: AtomicU64,
    pub inst_out_kbps: AtomicU64,
    /// Most `used_memory` seen ([`crate::Shared::used_memory`], INFO `used_memory_peak`).
    pub peak_memory: AtomicU64,
}

/// Redis's `trackInstantaneousMetric`: every 100 ms the background thread records how far
/// the totals moved; the rates are the mean of the last 16 samples.
#[derive(Default)]
pub struct Sampler {
    last: Option<(std::time::Instant, [u64; 3])>,
    samples: VecDeque<[f64; 3]>,
}

impl Sampler {
    pub fn sample(&mut self, stats: &Stats) {
        let now = std::time::Instant::now();
        let totals = [stats.sum(|w| &w.commands), stats.sum(|w| &w.net_input), stats.sum(|w| &w.net_output)];
        if let Some((t, prev)) = self.last {
            let secs = now.duration_since(t).as_secs_f64().max(1e-6);
            let rate: [f64; 3] = std::array::from_fn(|i| totals[i].saturating_sub(prev[i]) as f64 / secs);
            self.samples.push_back(rate);
            if self.samples.len() > 16 {
                self.samples.pop_front();
            }
            let n = self.samples.len() as f64;
            let mean = |i: usize| self.samples.iter().map(|s| s[i]).sum::<f64>() / n;
            stats.inst_ops.store(mean(0).round() as u64, Ordering::Relaxed);
            stats.inst_in_kbps.store((mean(1) / 1024.0).to_bits(), Ordering::Relaxed);
            stats.inst_out_kbps.store((mean(2) / 1024.0).to_bits(), Ordering::Relaxed);
        }
        self.last = Some((now, totals));
    }
}

impl Stats {
    pub fn new(n: usize) -> Stats {
        let ncmd = crate::command::table().len();
        Stats {
            workers: (0..n)
                .map(|_| {
                    Box::new(WorkerStats {
                        cmd: (0..ncmd).map(|_| CmdStats::default()).collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            inst_ops: AtomicU64::new(0),
            inst_in_kbps: AtomicU64::new(0),
            inst_out_kbps: AtomicU64::new(0),
            peak_memory: AtomicU64::new(0),
        }
    }

    pub fn worker(&self, i: usize) -> &WorkerStats {
        &self.workers[i.min(self.workers.len() - 1)]
    }

    /// Sum of one counter over every worker.
    pub fn sum(&self, f: impl Fn(&WorkerStats) -> &Counter) -> u64 {
        self.workers.iter().map(|w| f(w).get()).sum()
    }

    /// Per command: (calls, usec, rejected, failed), summed over workers.
    pub fn command(&self, i: usize) -> (u64, u64, u64, u64) {
        let mut t = (0, 0, 0, 0);
        for w in &self.workers {
            if let Some(c) = w.cmd.get(i) {
                t.0 += c.calls.get();
                t.1 += c.usec.get();
                t.2 += c.rejected.get();
                t.3 += c.failed.get();
            }
        }
        t
    }

    /// Per command: its durations, summed over workers.
    pub fn durations(&self, i: usize) -> Durations {
        let mut d = Durations::default();
        for c in self.workers.iter().filter_map(|w| w.cmd.get(i)) {
            for (n, b) in d.fast.iter_mut().zip(&c.fast) {
                *n += b.get();
            }
            for (&v, &n) in c.slow.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                *d.slow.entry(v).or_default() += n;
            }
        }
        d
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
        self.peak_memory.store(0, Ordering::Relaxed);
        for w in &self.workers {
            for a in [
                &w.commands,
                &w.connections,
                &w.rejected_connections,
                &w.net_input,
                &w.net_output,
                &w.reads,
                &w.writes,
                &w.reply_buffer_shrinks,
                &w.reply_buffer_expands,
                &w.keyspace_hits,
                &w.keyspace_misses,
                &w.expired_keys,
                &w.total_errors,
            ] {
                a.reset();
            }
            w.errors.lock().unwrap_or_else(|e| e.into_inner()).clear();
            for c in &w.cmd {
                for a in [&c.calls, &c.usec, &c.rejected, &c.failed].into_iter().chain(&c.fast) {
                    a.reset();
                }
                c.slow.lock().unwrap_or_else(|e| e.into_inner()).clear();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_replies_are_counted_by_their_first_word() {
        let w = WorkerStats::default();
        for code in [&b"ERR"[..], b"WRONGTYPE", b"ERR", b"\xffX"] {
            w.count_error(code);
        }
        assert_eq!(w.total_errors.get(), 4);
        let errors = w.errors.lock().unwrap();
        assert_eq!((errors["ERR"], errors["WRONGTYPE"], errors["\u{fffd}X"]), (2, 1, 1));
        assert_eq!(errors.len(), 3);
    }
}
