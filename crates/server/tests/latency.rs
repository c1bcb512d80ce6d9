//! LATENCY: the latency monitor's events (`latency-monitor-threshold`) and the per-command
//! histograms (`latency-tracking`), replies as redis-server 7.0.15 gives them.
mod common;
#[path = "common/reply.rs"]
mod reply;

use common::*;
use reply::{call, Val};

/// One command of LATENCY HISTOGRAM: (command, calls, [(bucket µs, cumulative calls)]).
type Histogram = (String, i64, Vec<(i64, i64)>);

fn histogram(c: &mut Raw, req: &str) -> Vec<Histogram> {
    let flat = call(c, req).arr();
    flat.chunks(2)
        .map(|kv| {
            let name = String::from_utf8(kv[0].clone().bulk()).unwrap();
            let m = kv[1].clone().arr();
            assert_eq!(m[0], Val::Bulk(b"calls".to_vec()));
            assert_eq!(m[2], Val::Bulk(b"histogram_usec".to_vec()));
            let buckets = m[3].clone().arr().chunks(2).map(|b| (b[0].clone().int(), b[1].clone().int())).collect();
            (name, m[1].clone().int(), buckets)
        })
        .collect()
}

#[test]
fn histograms_count_each_command_since_resetstat() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "CONFIG RESETSTAT", "+OK\r\n");
    // The RESETSTAT itself is counted once it has run.
    let h = histogram(&mut c, "LATENCY HISTOGRAM");
    assert_eq!(h.len(), 1, "{h:?}");
    assert_eq!((h[0].0.as_str(), h[0].1), ("config|resetstat", 1));
    ck(&mut c, "CONFIG RESETSTAT", "+OK\r\n");
    ck(&mut c, "SET a b", "+OK\r\n");
    ck(&mut c, "SET c d", "+OK\r\n");
    ck(&mut c, "GET a", "$1\r\nb\r\n");
    client_id(&mut c);
    client_id(&mut c);
    // Named commands in the order asked, a container for its subcommands, unknown skipped.
    let h = histogram(&mut c, "LATENCY HISTOGRAM nope set client GET");
    let names: Vec<&str> = h.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(names, ["set", "client|id", "get"]);
    assert_eq!(h.iter().map(|e| e.1).collect::<Vec<_>>(), [2, 2, 1]);
    for (name, calls, buckets) in &h {
        // Cumulative counts that end at the calls, on Redis's bucket labels.
        assert_eq!(buckets.last().unwrap().1, *calls, "{name}");
        assert!(buckets.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1), "{name}: {buckets:?}");
        for (label, _) in buckets {
            assert!([1, 2, 4, 8, 16, 33, 66, 132, 264, 528, 1056, 2113, 4227].contains(label), "{name}: {label}");
        }
    }
    ck(&mut c, "LATENCY HISTOGRAM nope", "*0\r\n");
    // latency-tracking no: nothing more is counted.
    ck(&mut c, "CONFIG SET latency-tracking no", "+OK\r\n");
    ck(&mut c, "GET a", "$1\r\nb\r\n");
    assert_eq!(histogram(&mut c, "LATENCY HISTOGRAM get")[0].1, 1);
    ck(&mut c, "LATENCY HELP xxx", "-ERR wrong number of arguments for 'latency|help' command\r\n");
    ck(&mut c, "LATENCY foo", "-ERR unknown subcommand 'foo'. Try LATENCY HELP.\r\n");
}

#[test]
fn slow_commands_are_latency_events() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let disabled = "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n";
    assert_eq!(call(&mut c, "LATENCY DOCTOR"), Val::Bulk(disabled.into()));
    ck(&mut c, "DEBUG SLEEP 0.06", "+OK\r\n");
    ck(&mut c, "LATENCY LATEST", "*0\r\n");
    ck(&mut c, "CONFIG SET latency-monitor-threshold 50", "+OK\r\n");
    let quiet = "Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n";
    assert_eq!(call(&mut c, "LATENCY DOCTOR"), Val::Bulk(quiet.into()));
    ck(&mut c, "DEBUG SLEEP 0.06", "+OK\r\n");
    let latest = call(&mut c, "LATENCY LATEST").arr();
    assert_eq!(latest.len(), 1);
    let e = latest[0].clone().arr();
    assert_eq!(e[0], Val::Bulk(b"command".to_vec()));
    let (ms, max) = (e[2].clone().int(), e[3].clone().int());
    assert!((60..1000).contains(&ms) && max == ms, "{e:?}");
    let history = call(&mut c, "LATENCY HISTORY command").arr();
    assert_eq!(history, vec![Val::Arr(vec![e[1].clone(), Val::Int(ms)])]);
    ck(&mut c, "LATENCY HISTORY nope", "*0\r\n");
    let graph = String::from_utf8(call(&mut c, "LATENCY GRAPH command").bulk()).unwrap();
    let want =
        format!("command - high {ms} ms, low {ms} ms (all time high {ms} ms)\n{}\n \n \n \n_\n \n", "-".repeat(80));
    assert!(graph.starts_with(&want), "{graph}");
    ck(&mut c, "LATENCY GRAPH nope", "-ERR No samples available for event 'nope'\r\n");
    let doctor = String::from_utf8(call(&mut c, "LATENCY DOCTOR").bulk()).unwrap();
    assert!(doctor.contains(&format!("1. command: 1 latency spikes (average {ms}ms, mean deviation 0ms, period 1.00 sec). Worst all time event {ms}ms.\n")), "{doctor}");
    // Below the threshold: no new event.
    ck(&mut c, "DEBUG SLEEP 0", "+OK\r\n");
    assert_eq!(call(&mut c, "LATENCY LATEST").arr().len(), 1);
    ck(&mut c, "LATENCY RESET nope", ":0\r\n");
    ck(&mut c, "LATENCY RESET COMMAND", ":1\r\n");
    ck(&mut c, "LATENCY LATEST", "*0\r\n");
    ck(&mut c, "LATENCY RESET", ":0\r\n");
}

/// INFO `latencystats`' lines: (command, [(percentile label, value µs)]).
fn latencystats(c: &mut Raw) -> Vec<(String, Vec<(String, String)>)> {
    let info = String::from_utf8(call(c, "INFO latencystats").bulk()).unwrap();
    let mut lines = info.split("\r\n");
    assert_eq!(lines.next(), Some("# Latencystats"));
    lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (name, values) = l.strip_prefix("latency_percentiles_usec_").unwrap().split_once(':').unwrap();
            let values = values
                .split(',')
                .filter(|v| !v.is_empty())
                .map(|v| {
                    let (p, us) = v.split_once('=').unwrap();
                    (p.to_string(), us.to_string())
                })
                .collect();
            (name.to_string(), values)
        })
        .collect()
}

/// A value as Redis prints a percentile: µs with three decimals, the highest value (ns) of
/// a sub-bucket of its HDR histogram (2 significant digits: 2^(k-7) ns wide from 2^k ns).
fn is_hdr_value(us: &str) -> bool {
    let Some((whole, frac)) = us.split_once('.') else { return false };
    let ns: u64 = format!("{whole}{frac}").parse().unwrap();
    let k = 63 - (ns | 255).leading_zeros();
    frac.len() == 3 && (ns + 1).is_multiple_of(1 << (k - 7))
}

#[test]
fn info_latencystats_prints_each_command_percentiles_as_redis() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "CONFIG RESETSTAT", "+OK\r\n");
    let stats = latencystats(&mut c);
    assert_eq!(stats.len(), 1, "{stats:?}");
    assert_eq!(stats[0].0, "config|resetstat");
    ck(&mut c, "DEBUG SLEEP 0.05", "+OK\r\n");
    ck(&mut c, "SET k v", "+OK\r\n");
    let stats = latencystats(&mut c);
    let of = |name: &str| stats.iter().find(|s| s.0 == name).unwrap_or_else(|| panic!("{name}: {stats:?}")).1.clone();
    for (name, values) in &stats {
        let labels: Vec<&str> = values.iter().map(|v| v.0.as_str()).collect();
        assert_eq!(labels, ["p50", "p99", "p99.9"], "{name}");
        assert!(values.iter().all(|v| is_hdr_value(&v.1)), "{name}: {values:?}");
    }
    // One call each: every percentile is that call.
    let debug: f64 = of("debug")[0].1.parse().unwrap();
    assert!((50000.0..60000.0).contains(&debug), "{debug}");
    assert!(of("debug").iter().all(|v| v.1 == of("debug")[0].1));
    let set: f64 = of("set")[0].1.parse().unwrap();
    assert!(set < debug);

    // The percentiles are a setting: any from 0 to 100, printed as Redis prints a double.
    c.check(&cmd(&[b"CONFIG", b"SET", b"latency-tracking-info-percentiles", b"1e1 0x10 99.99999999"]), b"+OK\r\n");
    c.check(
        &cmd(&[b"CONFIG", b"GET", b"latency-tracking-info-percentiles"]),
        b"*2\r\n$33\r\nlatency-tracking-info-percentiles\r\n$9\r\n10 16 100\r\n",
    );
    let labels: Vec<String> = latencystats(&mut c)[0].1.iter().map(|v| v.0.clone()).collect();
    assert_eq!(labels, ["p10", "p16", "p100"]);
    for bad in ["10.0 50.0 a", "50  99", " 50"] {
        c.check(
            &cmd(&[b"CONFIG", b"SET", b"latency-tracking-info-percentiles", bad.as_bytes()]),
            b"-ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - Invalid latency-tracking-info-percentiles parameters\r\n",
        );
    }
    c.check(
        &cmd(&[b"CONFIG", b"SET", b"latency-tracking-info-percentiles", b"10.0 50.0 101.0"]),
        b"-ERR CONFIG SET failed (possibly related to argument 'latency-tracking-info-percentiles') - latency-tracking-info-percentiles parameters should sit between [0.0,100.0]\r\n",
    );
    c.check(
        &cmd(&[b"CONFIG", b"GET", b"latency-tracking-info-percentiles"]),
        b"*2\r\n$33\r\nlatency-tracking-info-percentiles\r\n$9\r\n10 16 100\r\n",
    );
    // None: each command's line without values.
    c.check(&cmd(&[b"CONFIG", b"SET", b"latency-tracking-info-percentiles", b""]), b"+OK\r\n");
    assert!(latencystats(&mut c).iter().all(|s| s.1.is_empty()));
    c.check(&cmd(&[b"CONFIG", b"SET", b"latency-tracking-info-percentiles", b"0 50 100"]), b"+OK\r\n");
    let stats = latencystats(&mut c);
    let set = &stats.iter().find(|s| s.0 == "set").unwrap().1;
    assert_eq!(set.iter().map(|v| v.0.as_str()).collect::<Vec<_>>(), ["p0", "p50", "p100"]);
    // p0 is the lowest value of the sub-bucket, the others its highest.
    assert!(set[0].1 < set[1].1 && set[1].1 == set[2].1, "{set:?}");
    // latency-tracking no: the section's header only.
    ck(&mut c, "CONFIG SET latency-tracking no", "+OK\r\n");
    ck(&mut c, "INFO latencystats", "$16\r\n# Latencystats\r\n\r\n");
}

#[test]
fn blocked_commands_are_timed_when_served() {
    // As Redis 7.0.15's `updateStatsOnUnblock`: a blocked command's latency sample is taken
    // when it is served or unblocked by CLIENT UNBLOCK; one that times out has none (its
    // call is counted in commandstats all the same).
    let t = start();
    let (mut b, mut c) = one_per_worker(&t);
    ck(&mut c, "CONFIG RESETSTAT", "+OK\r\n");
    ck(&mut b, "BLPOP q 0.05", "*-1\r\n");
    ck(&mut c, "LATENCY HISTOGRAM blpop", "*0\r\n");
    assert!(latencystats(&mut c).iter().all(|s| s.0 != "blpop"));
    let stats = String::from_utf8(call(&mut c, "INFO commandstats").bulk()).unwrap();
    assert!(stats.contains("\r\ncmdstat_blpop:calls=1,"), "{stats}");
    // Served by a push from the other worker.
    b.send(&cmd(&[b"BLPOP", b"q", b"0"]));
    wait_blocked(&mut c, 1);
    ck(&mut c, "RPUSH q x", ":1\r\n");
    b.check(b"", b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    assert_eq!(histogram(&mut c, "LATENCY HISTOGRAM blpop")[0].1, 1);
    // Unblocked.
    let id = client_id(&mut b);
    b.send(&cmd(&[b"BLPOP", b"q", b"0"]));
    wait_blocked(&mut c, 1);
    ck(&mut c, &format!("CLIENT UNBLOCK {id}"), ":1\r\n");
    b.check(b"", b"*-1\r\n");
    assert_eq!(histogram(&mut c, "LATENCY HISTOGRAM blpop")[0].1, 2);
    let stats = latencystats(&mut c);
    let blpop = &stats.iter().find(|s| s.0 == "blpop").unwrap().1;
    assert!(blpop.iter().all(|v| is_hdr_value(&v.1)), "{blpop:?}");
    let stats = String::from_utf8(call(&mut c, "INFO commandstats").bulk()).unwrap();
    assert!(stats.contains("\r\ncmdstat_blpop:calls=3,") && stats.contains(",failed_calls=1\r\n"), "{stats}");
}
