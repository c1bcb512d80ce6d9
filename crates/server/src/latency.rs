//! The latency monitor and the per-command latency histograms (Redis 7.0.15's `latency.c`,
//! `sparkline.c` and the `latency-tracking` histograms), for LATENCY.
//!
//! - **Histograms** (`latency-tracking yes`, Redis's default): Redis records each command's
//!   duration (whole µs, as ns) in an HDR histogram of 2 significant digits from 1 ns to
//!   1 s: LATENCY HISTOGRAM reports it through a log-2 iterator starting at 1024 ns, INFO
//!   `latencystats` as percentiles (`latency-tracking-info-percentiles`), each the highest
//!   value of the HDR sub-bucket it falls in. Larder's workers count a command's duration
//!   in [`crate::stats::CmdStats`]: under [`FAST_US`] µs one counter per µs (each µs is an
//!   HDR sub-bucket of its own there), slower ones, out of line, by the HDR sub-bucket Redis
//!   would count them in. From these both replies come out as Redis's. The cost per command
//!   is a comparison and one worker-local counter.
//! - **Events** (`latency-monitor-threshold` ms, 0 = off): a command that took at least the
//!   threshold adds a sample to the "command" (or "fast-command") event: per event, the
//!   worst latency of each second over the last [`TS_LEN`] samples, and the all-time worst.
//!   The hot path pays nothing for it: `command::run` compares a command's duration with
//!   one threshold that covers both the slow log and the monitor
//!   ([`crate::config::Config::slow_usec`]).

use std::fmt::Write as _;

/// Buckets of LATENCY HISTOGRAM's reply: durations up to 1 µs, 2 µs, 4 µs, … about 1 s,
/// and above (Redis: 2^10 to 2^30 ns).
pub const BUCKETS: usize = 21;

/// Durations under this many µs are counted one counter per µs.
pub const FAST_US: usize = 32;

/// What Redis records for a command of `usec` µs: ns, clamped to 1 ns .. 1 s.
pub fn recorded_ns(usec: u64) -> u64 {
    usec.saturating_mul(1000).clamp(1, 1_000_000_000)
}

/// Redis's HDR histogram (1 ns to 1 s, 2 significant digits: 256 sub-buckets, unit 1 ns):
/// the power-of-two bucket holding `v` ns (`get_bucket_index`).
fn hdr_bucket(v: u64) -> u32 {
    (64 - (v | 255).leading_zeros()) - 8
}

/// The lowest value of the HDR sub-bucket holding `v` (`lowest_equivalent_value`): what
/// the slow commands' counts are kept under.
pub fn hdr_lowest(v: u64) -> u64 {
    let b = hdr_bucket(v);
    (v >> b) << b
}

/// The highest value of the HDR sub-bucket holding `v` (`highest_equivalent_value`).
pub fn hdr_highest(v: u64) -> u64 {
    let b = hdr_bucket(v);
    let width = if (v >> b) >= 256 { 2u64 << b } else { 1u64 << b };
    hdr_lowest(v) + width - 1
}

/// The LATENCY HISTOGRAM bucket of a command that took `usec` µs.
pub fn bucket(usec: u64) -> usize {
    bucket_ns(recorded_ns(usec))
}

/// The LATENCY HISTOGRAM bucket of a recorded value (ns): the sub-bucket holding 2^k ns
/// spans 2^(k-7) ns, and the log-2 iterator reports at 2^k ns the counts of every
/// sub-bucket up to that one. Every value of one sub-bucket has the same bucket.
pub fn bucket_ns(v: u64) -> usize {
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

/// A command's durations as Redis's HDR histogram holds them: calls of 0 to [`FAST_US`] - 1
/// µs by µs, slower ones by the lowest value (ns) of their HDR sub-bucket.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Durations {
    pub fast: [u64; FAST_US],
    pub slow: std::collections::BTreeMap<u64, u64>,
}

impl Durations {
    pub fn total(&self) -> u64 {
        self.fast.iter().sum::<u64>() + self.slow.values().sum::<u64>()
    }

    /// Every count with the recorded value (ns) that stands for it, in increasing order
    /// (each µs below [`FAST_US`] is in an HDR sub-bucket below every slower one's).
    fn counts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let fast = self.fast.iter().enumerate().map(|(us, &n)| (recorded_ns(us as u64), n));
        fast.chain(self.slow.iter().map(|(&v, &n)| (v, n))).filter(|&(_, n)| n > 0)
    }

    /// LATENCY HISTOGRAM's buckets.
    pub fn log2_buckets(&self) -> [u64; BUCKETS] {
        let mut b = [0; BUCKETS];
        for (v, n) in self.counts() {
            b[bucket_ns(v)] += n;
        }
        b
    }

    /// Redis's `hdr_value_at_percentile` (ns): the sub-bucket where the running count
    /// reaches `percentile`% of the calls, its lowest value for 0, else its highest.
    pub fn value_at_percentile(&self, percentile: f64) -> u64 {
        let requested = if percentile < 100.0 { percentile } else { 100.0 };
        let want = (((requested / 100.0) * self.total() as f64) + 0.5) as i64;
        let want = want.max(1) as u64;
        let mut running = 0;
        for (v, n) in self.counts() {
            running += n;
            if running >= want {
                return if percentile == 0.0 { hdr_lowest(v) } else { hdr_highest(v) };
            }
        }
        0
    }

    /// INFO `latencystats`' line for a command (without the line end): Redis's
    /// `fillPercentileDistributionLatencies`, each percentile named as `%f` prints it with
    /// its trailing zeros cut, each value in µs with three decimals.
    pub fn percentiles_line(&self, name: &str, percentiles: &[f64]) -> String {
        let mut line = format!("latency_percentiles_usec_{name}:");
        for (j, &p) in percentiles.iter().enumerate() {
            if j > 0 {
                line.push(',');
            }
            let _ = write!(line, "p{}={:.3}", percentile_label(p), self.value_at_percentile(p) as f64 / 1000.0);
        }
        line
    }
}

/// A percentile as Redis prints it (INFO `latencystats`, CONFIG GET
/// `latency-tracking-info-percentiles`): `%f`, then `trimDoubleString` (trailing zeros
/// and a trailing point cut).
pub fn percentile_label(p: f64) -> String {
    let mut s = format!("{p:.6}");
    if s.contains('.') {
        let trimmed = s.trim_end_matches('0').trim_end_matches('.').len();
        s.truncate(trimmed);
    }
    s
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

    /// Durations of the calls of `usecs` µs, kept as `CmdStats` keeps them.
    fn durations(usecs: &[u64]) -> Durations {
        let mut d = Durations::default();
        for &us in usecs {
            match d.fast.get_mut(us as usize) {
                Some(n) => *n += 1,
                None => *d.slow.entry(hdr_lowest(recorded_ns(us))).or_default() += 1,
            }
        }
        d
    }

    #[test]
    fn percentiles_are_redis_hdr_values() {
        // Values of redis-server 7.0.15's INFO latencystats for calls of these durations.
        for (us, ns) in [(0, 1), (1, 1003), (3, 3007), (12, 12031), (43, 43007), (50, 50175), (50331, 50331647)] {
            let d = durations(&[us]);
            assert_eq!(d.value_at_percentile(50.0), ns, "{us} µs");
            assert_eq!(d.value_at_percentile(100.0), ns, "{us} µs");
        }
        assert_eq!(durations(&[1]).value_at_percentile(0.0), 1000);
        assert_eq!(durations(&[50]).value_at_percentile(0.0), 49920);
        assert_eq!(durations(&[5_000_000]).value_at_percentile(50.0), 1_002_438_655);
        // The count at a percentile rounds half up; the first sub-bucket reaching it wins.
        let d = durations(&[1, 1, 1, 1, 1, 1, 1, 1, 1, 100]);
        assert_eq!((d.value_at_percentile(50.0), d.value_at_percentile(90.0)), (1003, 1003));
        assert_eq!((d.value_at_percentile(95.0), d.value_at_percentile(99.9)), (100351, 100351));
        let line = d.percentiles_line("get", &[50.0, 99.0, 99.9]);
        assert_eq!(line, "latency_percentiles_usec_get:p50=1.003,p99=100.351,p99.9=100.351");
        assert_eq!(d.percentiles_line("client|id", &[]), "latency_percentiles_usec_client|id:");
        assert_eq!(d.log2_buckets()[..8], [9, 0, 0, 0, 0, 0, 0, 1]);
    }

    #[test]
    fn percentile_labels_are_printed_as_redis_prints_them() {
        for (p, label) in [(50.0, "50"), (99.9, "99.9"), (0.0, "0"), (100.0, "100"), (99.99999999, "100"), (-0.0, "-0")]
        {
            assert_eq!(percentile_label(p), label);
        }
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
