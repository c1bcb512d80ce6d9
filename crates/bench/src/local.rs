//! `--protocol local`: the same operations, keys and values, called on the engine directly
//! through a named shared-memory segment (`Store::attach`), one handle per thread. No
//! connections and no pipelining: each operation is timed on its own (the clock read,
//! ~20-40 ns, is included).

use std::sync::atomic::Ordering;
use std::time::Instant;

use larder_engine::{SetOptions, Store};

use crate::gen::{Op, OpGen};
use crate::keys::format_key;
use crate::proto::Kind;
use crate::stats::Stats;
use crate::{Plan, Shared};

/// Database the local mode reads and writes (the one memcached clients see).
const DB: u32 = 0;

pub fn run_thread(plan: &Plan, shared: &Shared, store: &Store, t: usize) -> Result<Stats, String> {
    let h = store.handle().map_err(|e| format!("engine handle: {e}"));
    let mut gen = OpGen::new(&plan.gen, t as u64, plan.threads as u64);
    let clock = shared.sync();
    let mut h = h?;
    let mut stats = Stats::new(plan.interval_ms);
    let opts = SetOptions::default();
    let mut key = Vec::new();
    let mut val = Vec::new();
    let mut keys: Vec<Vec<u8>> = (0..plan.multiget).map(|_| Vec::new()).collect();
    let mut now = Instant::now();
    let mut since_progress = 0u64;
    while let Some((op, counted)) = gen.next(now, &clock) {
        let kind = match op {
            Op::Set => {
                format_key(&mut key, plan.prefix.as_bytes(), gen.set_keys.next_key(), plan.key_len);
                val.clear();
                plan.values.write(&key, &mut val);
                if let Err(e) = h.set(DB, &key, &val, &opts) {
                    stats.error(e.to_string());
                }
                Kind::Set
            }
            Op::Get if plan.multiget == 1 => {
                format_key(&mut key, plan.prefix.as_bytes(), gen.get_keys.next_key(), plan.key_len);
                match h.get(DB, &key) {
                    Ok(Some(v)) => {
                        if counted {
                            stats.hits += 1;
                        }
                        if plan.verify && !plan.values.check(&key, &v) {
                            stats.verify_failure(&key, &v);
                        }
                    }
                    Ok(None) => {
                        if counted {
                            stats.misses += 1;
                        }
                    }
                    Err(e) => stats.error(e.to_string()),
                }
                Kind::Get(1)
            }
            Op::Get => {
                for k in keys.iter_mut() {
                    format_key(k, plan.prefix.as_bytes(), gen.get_keys.next_key(), plan.key_len);
                }
                let refs: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
                match h.mget(DB, &refs) {
                    Ok(vals) => {
                        for (k, v) in refs.iter().zip(vals) {
                            match v {
                                Some(v) => {
                                    stats.hits += counted as u64;
                                    if plan.verify && !plan.values.check(k, &v) {
                                        stats.verify_failure(k, &v);
                                    }
                                }
                                None => stats.misses += counted as u64,
                            }
                        }
                    }
                    Err(e) => stats.error(e.to_string()),
                }
                Kind::Get(plan.multiget)
            }
        };
        let end = Instant::now();
        if counted {
            let at = end.saturating_duration_since(clock.measure_start).as_nanos() as u64;
            stats.record(kind, (end - now).as_nanos() as u64, at);
        }
        now = end;
        since_progress += 1;
        if since_progress == 1024 {
            shared.done_ops.fetch_add(since_progress, Ordering::Relaxed);
            since_progress = 0;
            if shared.stop.load(Ordering::Relaxed) {
                return Err("stopped".into());
            }
        }
    }
    shared.done_ops.fetch_add(since_progress, Ordering::Relaxed);
    Ok(stats)
}
