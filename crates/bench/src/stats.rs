//! What one client thread measured, merged across threads: HDR latency histograms (ns) for
//! SETs and reads, counters, and a timeline of fixed-width intervals.

use hdrhistogram::Histogram;

use crate::proto::Kind;

/// Highest latency the histograms hold exactly: 100 s (higher values are clamped).
const MAX_NS: u64 = 100_000_000_000;
/// Error texts kept for the report.
const KEEP_ERRORS: usize = 5;

#[derive(Clone, Copy, Debug, Default)]
pub struct Bucket {
    pub ops: u64,
    pub sets: u64,
    pub gets: u64,
    pub lat_sum_ns: u64,
    pub lat_max_ns: u64,
}

#[derive(Clone, Debug)]
pub struct Stats {
    pub set_hist: Histogram<u64>,
    pub get_hist: Histogram<u64>,
    pub sets: u64,
    /// Read requests (GET/MGET/get).
    pub gets: u64,
    /// Keys asked for by the reads.
    pub get_keys: u64,
    pub hits: u64,
    pub misses: u64,
    /// Error replies (the request reached the server and was refused).
    pub errors: u64,
    /// Reads whose value was not the one written (`--verify`).
    pub verify_failures: u64,
    pub first_errors: Vec<String>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Time of the last counted reply, ns after the measurement started.
    pub last_ns: u64,
    pub interval_ns: u64,
    pub timeline: Vec<Bucket>,
}

impl Stats {
    pub fn new(interval_ms: u64) -> Stats {
        let h = Histogram::new_with_bounds(1, MAX_NS, 3).expect("histogram bounds");
        Stats {
            set_hist: h.clone(),
            get_hist: h,
            sets: 0,
            gets: 0,
            get_keys: 0,
            hits: 0,
            misses: 0,
            errors: 0,
            verify_failures: 0,
            first_errors: Vec::new(),
            bytes_sent: 0,
            bytes_received: 0,
            last_ns: 0,
            interval_ns: interval_ms.max(1) * 1_000_000,
            timeline: Vec::new(),
        }
    }

    /// One counted operation: its latency, and when its reply came (ns after the start).
    #[inline]
    pub fn record(&mut self, kind: Kind, latency_ns: u64, at_ns: u64) {
        let lat = latency_ns.clamp(1, MAX_NS);
        match kind {
            Kind::Set => {
                self.sets += 1;
                self.set_hist.saturating_record(lat);
            }
            Kind::Get(n) => {
                self.gets += 1;
                self.get_keys += n as u64;
                self.get_hist.saturating_record(lat);
            }
        }
        let i = (at_ns / self.interval_ns) as usize;
        if i >= self.timeline.len() {
            self.timeline.resize(i + 1, Bucket::default());
        }
        let b = &mut self.timeline[i];
        b.ops += 1;
        match kind {
            Kind::Set => b.sets += 1,
            Kind::Get(_) => b.gets += 1,
        }
        b.lat_sum_ns += lat;
        b.lat_max_ns = b.lat_max_ns.max(lat);
        self.last_ns = self.last_ns.max(at_ns);
    }

    pub fn error(&mut self, text: String) {
        self.errors += 1;
        if self.first_errors.len() < KEEP_ERRORS {
            self.first_errors.push(text);
        }
    }

    pub fn verify_failure(&mut self, key: &[u8], got: &[u8]) {
        self.verify_failures += 1;
        if self.first_errors.len() < KEEP_ERRORS {
            let got = &got[..got.len().min(64)];
            self.first_errors.push(format!(
                "wrong value for {}: {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(got)
            ));
        }
    }

    pub fn ops(&self) -> u64 {
        self.sets + self.gets
    }

    pub fn merge(&mut self, o: &Stats) {
        self.set_hist.add(&o.set_hist).expect("same bounds");
        self.get_hist.add(&o.get_hist).expect("same bounds");
        self.sets += o.sets;
        self.gets += o.gets;
        self.get_keys += o.get_keys;
        self.hits += o.hits;
        self.misses += o.misses;
        self.errors += o.errors;
        self.verify_failures += o.verify_failures;
        for e in &o.first_errors {
            if self.first_errors.len() < KEEP_ERRORS {
                self.first_errors.push(e.clone());
            }
        }
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.last_ns = self.last_ns.max(o.last_ns);
        if o.timeline.len() > self.timeline.len() {
            self.timeline.resize(o.timeline.len(), Bucket::default());
        }
        for (a, b) in self.timeline.iter_mut().zip(&o.timeline) {
            a.ops += b.ops;
            a.sets += b.sets;
            a.gets += b.gets;
            a.lat_sum_ns += b.lat_sum_ns;
            a.lat_max_ns = a.lat_max_ns.max(b.lat_max_ns);
        }
    }

    /// Both kinds together.
    pub fn all_hist(&self) -> Histogram<u64> {
        let mut h = self.set_hist.clone();
        h.add(&self.get_hist).expect("same bounds");
        h
    }
}

/// Latency figures of one histogram, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Latency {
    pub fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            count: h.len(),
            min: us(h.min()),
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.5)),
            p90: us(h.value_at_quantile(0.9)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_merge_and_land_in_their_interval() {
        let mut a = Stats::new(100);
        a.record(Kind::Set, 10_000, 0);
        a.record(Kind::Get(1), 20_000, 150_000_000);
        let mut b = Stats::new(100);
        b.record(Kind::Get(10), 30_000, 250_000_000);
        b.error("ERR x".into());
        a.merge(&b);
        assert_eq!((a.sets, a.gets, a.get_keys, a.errors), (1, 2, 11, 1));
        assert_eq!(a.timeline.iter().map(|b| b.ops).collect::<Vec<_>>(), [1, 1, 1]);
        assert_eq!(a.last_ns, 250_000_000);
        let l = Latency::of(&a.all_hist());
        assert_eq!(l.count, 3);
        assert!((l.min - 10.0).abs() < 0.01 && (l.max - 30.0).abs() < 0.05, "{l:?}");
        assert!((l.p50 - 20.0).abs() < 0.05, "{l:?}");
        assert_eq!(Latency::of(&Stats::new(1).set_hist), Latency::default());
    }
}
