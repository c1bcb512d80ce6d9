//! The latency monitor and the per-command latency histograms (Redis 7.0.15's `latency.c`,
//! `sparkline.c` and the `latency-tracking` histograms), for LATENCY.
//!
//! - **Histograms** (`latency-tracking yes`, Redis's default): each worker counts its
//!   commands' durations in [`BUCKETS`] buckets of [`crate::stats::CmdStats`], the power-of-two
//!   ranges LATENCY HISTOGRAM reports. Redis keeps an HDR histogram (2 significant digits,
//!   1 ns to 1 s) and reports it through a log-2 iterator starting at 1024 ns; durations are
//!   whole microseconds, so counting them straight into those reported ranges gives the same
//!   reply. The cost per command is a bucket index and one worker-local counter.
//! - **Events** (`latency-monitor-threshold` ms, 0 = off): a command that took at least the
//!   threshold adds a sample to the "command" (or "fast-command") event: per event, the
//!   worst latency of each second over the last [`TS_LEN`] samples, and the all-time worst.
//!   The hot path pays nothing for it: `command::run` compares a command's duration with
//!   one threshold that covers both the slow log and the monitor
//!   ([`crate::config::Config::slow_usec`]).

use std::fmt::Write as _;

/// Buckets of a command's histogram: durations up to 1 µs, 2 µs, 4 µs, … about 1 s, and
/// above (Redis: 2^10 to 2^30 ns).
pub const BUCKETS: usize = 21;

/// The bucket of a command that took `usec` µs. Redis records `usec * 1000` ns, clamped to
/// 1 ns .. 1 s, in an HDR histogram whose sub-bucket holding 2^k ns spans 2^(k-7) ns; the
/// log-2 iterator reports at 2^k ns the counts of every sub-bucket up to that one.
#[inline]
pub fn bucket(usec: u64) -> usize {
    let v = usec.saturating_mul(1000).clamp(1, 1_000_000_000);
    let k = 63 - v.leading_zeros() as usize;
    if k < 10 {
        return 0;
    }
    let k = if v < (1 << k) + (1 << (k - 7)) { k } else { k + 1 };
    (k - 10).min(BUCKETS - 1)
}

/// The label (µs) LATENCY HISTOGRAM gives bucket `i`: the highest value of the HDR
/// sub-bucket holding 2^(i+10) ns, in whole µs (the last one is the histogram's end).
pub fn bucket_label(i: usize) -> u64 {
    let k = i + 10;
    if k >= 30 {
        return ((1u64 << 30) - 1) / 1000;
    }
    ((1u64 << k) + (1 << (k - 7)) - 1) / 1000
}

/// Samples kept per event (Redis's `LATENCY_TS_LEN`).
pub const TS_LEN: usize = 160;

#[derive(Clone, Copy, Default)]
struct Sample {
    /// Unix seconds; 0 = empty.
    time: u64,
    /// Milliseconds.
    latency: u64,
}

struct Series {
    event: String,
    samples: [Sample; TS_LEN],
    /// Where the next sample goes.
    idx: usize,
    max: u64,
}

impl Series {
    /// The samples, oldest first.
    fn in_order(&self) -> impl Iterator<Item = &Sample> {
        (0..TS_LEN).map(move |j| &self.samples[(self.idx + j) % TS_LEN]).filter(|s| s.time != 0)
    }
}

/// The latency events seen so far, in the order they first happened.
#[derive(Default)]
pub struct Events {
    series: Vec<Series>,
}

fn now_secs() -> u64 {
    larder_engine::now_ms() / 1000
}

impl Events {
    /// Redis's `latencyAddSample`: one sample per second per event, the worst one.
    pub fn add(&mut self, event: &str, ms: u64) {
        let now = now_secs();
        let ts = match self.series.iter().position(|s| s.event == event) {
            Some(i) => &mut self.series[i],
            None => {
                self.series.push(Series {
                    event: event.to_string(),
                    samples: [Sample::default(); TS_LEN],
                    idx: 0,
                    max: 0,
                });
                self.series.last_mut().expect("just pushed")
            }
        };
        ts.max = ts.max.max(ms);
        let prev = (ts.idx + TS_LEN - 1) % TS_LEN;
        if ts.samples[prev].time == now {
            ts.samples[prev].latency = ts.samples[prev].latency.max(ms);
            return;
        }
        ts.samples[ts.idx] = Sample { time: now, latency: ms };
        ts.idx = (ts.idx + 1) % TS_LEN;
    }

    /// Forgets `event` (case-insensitive), or every event: how many were forgotten.
    pub fn reset(&mut self, event: Option<&[u8]>) -> usize {
        let before = self.series.len();
        self.series.retain(|s| event.is_some_and(|e| !s.event.as_bytes().eq_ignore_ascii_case(e)));
        before - self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// LATENCY LATEST: (event, time of the latest sample, its latency, all-time max).
    pub fn latest(&self) -> Vec<(String, u64, u64, u64)> {
        self.series
            .iter()
            .map(|s| {
                let last = s.samples[(s.idx + TS_LEN - 1) % TS_LEN];
                (s.event.clone(), last.time, last.latency, s.max)
            })
            .collect()
    }

    /// LATENCY HISTORY: (time, latency) of `event`, oldest first.
    pub fn history(&self, event: &[u8]) -> Vec<(u64, u64)> {
        self.find(event).map(|s| s.in_order().map(|x| (x.time, x.latency)).collect()).unwrap_or_default()
    }

    /// Redis's dict of events is case-sensitive for HISTORY and GRAPH.
    fn find(&self, event: &[u8]) -> Option<&Series> {
        self.series.iter().find(|s| s.event.as_bytes() == event)
    }

    /// LATENCY GRAPH: Redis's `latencyCommandGenSparkeline`, or None without samples.
    pub fn graph(&self, event: &[u8]) -> Option<String> {
        let ts = self.find(event)?;
        let now = now_secs();
        let mut seq = Sparkline::default();
        let (mut min, mut max) = (0, 0);
        for s in ts.in_order() {
            if seq.samples.is_empty() {
                (min, max) = (s.latency, s.latency);
            } else {
                max = max.max(s.latency);
                min = min.min(s.latency);
            }
            let elapsed = now.saturating_sub(s.time);
            let label = if elapsed < 60 {
                format!("{elapsed}s")
            } else if elapsed < 3600 {
                format!("{}m", elapsed / 60)
            } else if elapsed < 3600 * 24 {
                format!("{}h", elapsed / 3600)
            } else {
                format!("{}d", elapsed / (3600 * 24))
            };
            seq.add(s.latency as f64, label);
        }
        let mut graph = format!("{} - high {max} ms, low {min} ms (all time high {} ms)\n", ts.event, ts.max);
        graph.push_str(&"-".repeat(GRAPH_COLS));
        graph.push('\n');
        seq.render(&mut graph, GRAPH_COLS, 4);
        Some(graph)
    }

    /// LATENCY DOCTOR: Redis's `createLatencyReport`, for the events Larder records
    /// ("command", "fast-command").
    pub fn doctor(&self, threshold_ms: u64, slowlog_usec: Option<u64>, huge_pages: bool) -> String {
        if self.series.is_empty() && threshold_ms == 0 {
            return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".into();
        }
        let mut report = String::new();
        let (mut slowlog_enabled, mut slowlog_tuning, mut slowlog_inspect) = (false, false, false);
        let (mut scheduler, mut large_objects) = (false, false);
        let mut advices = 0;
        for (n, ts) in self.series.iter().enumerate() {
            if n == 0 {
                report.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
            }
            let samples: Vec<u64> = ts.in_order().map(|s| s.latency).collect();
            let count = samples.len() as u64;
            // Every event has a sample (it was made with one).
            let avg = samples.iter().sum::<u64>().checked_div(count).unwrap_or(0);
            let mad = samples
                .iter()
                .map(|&l| (avg as i64 - l as i64).unsigned_abs())
                .sum::<u64>()
                .checked_div(count)
                .unwrap_or(0);
            let period =
                ts.in_order().map(|s| s.time).min().map_or(0, |oldest| now_secs().saturating_sub(oldest).max(1));
            let _ = write!(
                report,
                "{}. {}: {} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
                n + 1,
                ts.event,
                count,
                period as f64 / count as f64,
                ts.max
            );
            if ts.event.eq_ignore_ascii_case("command") {
                match slowlog_usec {
                    None => {
                        slowlog_enabled = true;
                        advices += 1;
                    }
                    Some(us) if us / 1000 > threshold_ms => {
                        slowlog_tuning = true;
                        advices += 1;
                    }
                    Some(_) => {}
                }
                slowlog_inspect = true;
                large_objects = true;
                advices += 2;
            }
            if ts.event.eq_ignore_ascii_case("fast-command") {
                scheduler = true;
                advices += 1;
            }
            report.push('\n');
        }
        if huge_pages {
            advices += 1;
        }
        let events = self.series.len();
        if events == 0 && advices == 0 {
            report.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n");
        } else if events > 0 && advices == 0 {
            report.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n");
        } else {
            report.push_str("\nI have a few advices for you:\n\n");
            if slowlog_enabled {
                let _ = writeln!(report, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.", threshold_ms * 1000);
            }
            if slowlog_tuning {
                let _ = writeln!(report, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {}'.", threshold_ms * 1000);
            }
            if slowlog_inspect {
                report.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
            }
            if scheduler {
                report.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
            }
            if large_objects {
                report.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
            }
            if huge_pages {
                report.push_str("- I detected a non zero amount of anonymous huge pages used by your process. This creates very serious latency events in different conditions, especially when Redis is persisting on disk. To disable THP support use the command 'echo never > /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into /etc/rc.local so that the command will be executed again after a reboot. Note that even if you have already disabled THP, you still need to restart the Redis process to get rid of the huge pages already created.\n");
            }
        }
        report
    }
}

/// Whether this process has anonymous huge pages (Redis's `THPGetAnonHugePagesSize`).
pub fn anon_huge_pages() -> bool {
    std::fs::read_to_string("/proc/self/smaps_rollup")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with("AnonHugePages:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .is_some_and(|kb| kb > 0)
}

const GRAPH_COLS: usize = 80;

/// Redis's `sparkline.c` with `SPARKLINE_FILL`: a column per sample, `rows` rows of
/// `_o#|`, the labels written downwards below.
#[derive(Default)]
struct Sparkline {
    samples: Vec<(f64, String)>,
    min: f64,
    max: f64,
}

impl Sparkline {
    fn add(&mut self, value: f64, label: String) {
        if self.samples.is_empty() {
            (self.min, self.max) = (value, value);
        } else if value < self.min {
            self.min = value;
        } else if value > self.max {
            self.max = value;
        }
        self.samples.push((value, label));
    }

    fn render(&self, out: &mut String, columns: usize, rows: usize) {
        let mut j = 0;
        while j < self.samples.len() {
            let len = (self.samples.len() - j).min(columns);
            if j != 0 {
                out.push('\n');
            }
            self.render_range(out, rows, j, len);
            j += columns;
        }
    }

    fn render_range(&self, out: &mut String, rows: usize, offset: usize, len: usize) {
        const FILL: &[u8] = b"_o#";
        const LABEL_MARGIN_TOP: usize = 1;
        let mut relmax = self.max - self.min;
        if relmax == 0.0 {
            relmax = 1.0;
        }
        let steps = (FILL.len() * rows) as i64;
        let mut row = 0;
        loop {
            let mut more = false;
            let mut chars = vec![b' '; len];
            for (j, ch) in chars.iter_mut().enumerate() {
                let (value, label) = &self.samples[j + offset];
                let relval = value - self.min;
                // C: `step = (int) (relval*steps)/relmax;`
                let step = (((relval * steps as f64) as i64) as f64 / relmax) as i64;
                let step = step.clamp(0, steps - 1);
                if row < rows {
                    let charidx = step - ((rows - row - 1) * FILL.len()) as i64;
                    more = true;
                    if (0..FILL.len() as i64).contains(&charidx) {
                        *ch = FILL[charidx as usize];
                    } else if charidx >= FILL.len() as i64 {
                        *ch = b'|';
                    }
                } else {
                    // Every sample has a label: a blank row first.
                    if row - rows < LABEL_MARGIN_TOP {
                        more = true;
                        break;
                    }
                    let label_char = row - rows - LABEL_MARGIN_TOP;
                    if let Some(&c) = label.as_bytes().get(label_char) {
                        more = true;
                        *ch = c;
                    }
                }
            }
            if !more {
                break;
            }
            row += 1;
            out.push_str(&String::from_utf8_lossy(&chars));
            out.push('\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_redis_hdr_log_iteration() {
        // (µs, label of its bucket)
        for (us, label) in
            [(0, 1), (1, 1), (2, 2), (3, 4), (4, 4), (5, 8), (8, 8), (16, 16), (17, 33), (33, 33), (34, 66)]
        {
            assert_eq!(bucket_label(bucket(us)), label, "{us} µs");
        }
        assert_eq!(bucket_label(bucket(1_000_000)), 1073741);
        assert_eq!(bucket_label(bucket(500_000)), 541065);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn one_sample_per_second_and_reset_by_name() {
        let mut e = Events::default();
        e.add("command", 300);
        e.add("command", 400);
        e.add("command", 250);
        assert_eq!(e.history(b"command").iter().map(|s| s.1).collect::<Vec<_>>(), vec![400]);
        assert_eq!(e.latest()[0].3, 400);
        assert_eq!(e.reset(Some(b"blabla")), 0);
        assert_eq!(e.reset(Some(b"COMMAND")), 1);
        assert!(e.is_empty());
    }

    #[test]
    fn graph_is_redis_sparkline() {
        let mut e = Events::default();
        e.add("command", 5);
        let g = e.graph(b"command").unwrap();
        let mut lines = g.lines();
        assert_eq!(lines.next(), Some("command - high 5 ms, low 5 ms (all time high 5 ms)"));
        assert_eq!(lines.next(), Some("-".repeat(80).as_str()));
        // One sample at the minimum: step 0, only the bottom row has a '_'; then a blank
        // row and the label "0s" downwards.
        assert_eq!(lines.collect::<Vec<_>>(), vec![" ", " ", " ", "_", " ", "0", "s"]);
    }
}
