//! `larder bench` against real servers: a Larder server started in-process (RESP and
//! memcached, normal and `--floor`), and a named segment for the local mode. Each run is
//! short (thousands of requests) and checks that every value read back was the one written.

use clap::Parser;
use larder_bench::{run, Args, Plan};
use larder_server::{Config, Server};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn args(extra: &[&str]) -> Args {
    let mut v = vec!["bench", "--no-progress"];
    v.extend_from_slice(extra);
    Cli::parse_from(v).args
}

struct TestServer(Option<Server>);

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            s.stop();
            s.join();
        }
    }
}

fn free_port() -> String {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string()
}

fn server(floor: bool) -> (TestServer, u16, u16) {
    #[derive(Parser)]
    struct S {
        #[command(flatten)]
        a: larder_server::Args,
    }
    for _ in 0..20 {
        let (p, m) = (free_port(), free_port());
        let mut cli = vec![
            "server",
            "--bind",
            "127.0.0.1",
            "--port",
            &p,
            "--memcache-port",
            &m,
            "--threads",
            "2",
            "--capacity",
            "268435456",
        ];
        if floor {
            cli.push("--floor");
        }
        let a = S::parse_from(cli).a;
        if let Ok(s) = Server::start(Config::load(&a).unwrap()) {
            let (r, m) = s.ports();
            return (TestServer(Some(s)), r, m);
        }
    }
    panic!("could not start a server");
}

/// Loads keys 0..999, then a verified mixed run; returns the mixed run's report.
fn load_then_mix(proto: &str, port: u16, size: &str, extra: &[&str]) -> larder_bench::Report {
    let port = port.to_string();
    let base = [
        "--protocol",
        proto,
        "--port",
        &port,
        "--key-max",
        "999",
        "--threads",
        "2",
        "--clients",
        "3",
        "--data-size",
        size,
    ];
    let load: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--ratio", "1:0", "--key-pattern", "P", "--requests", "1000", "--verify"])
        .collect();
    let r = run(&Plan::new(&args(&load)).unwrap()).unwrap();
    assert_eq!((r.stats.sets, r.stats.errors), (1000, 0));
    let mix: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--ratio", "1:4", "--requests", "5000", "--verify"])
        .chain(extra.iter().copied())
        .collect();
    let r = run(&Plan::new(&args(&mix)).unwrap()).unwrap();
    assert_eq!(r.stats.ops(), 5000);
    assert_eq!((r.stats.errors, r.stats.verify_failures), (0, 0), "{:?}", r.stats.first_errors);
    assert_eq!(r.stats.misses, 0, "every key was loaded");
    assert_eq!(r.stats.hits, r.stats.get_keys);
    assert!(r.stats.sets > 800 && r.stats.gets > 3800, "sets {} gets {}", r.stats.sets, r.stats.gets);
    assert!(r.ops_per_sec() > 0.0);
    r
}

#[test]
fn resp_and_memcache_runs_verify_every_read() {
    let (_s, resp, mc) = server(false);
    load_then_mix("resp", resp, "32", &[]);
    load_then_mix("resp", resp, "1000", &["--pipeline", "8", "--multiget", "5"]);
    load_then_mix("memcache", mc, "32", &[]);
    let r = load_then_mix("memcache", mc, "10-300", &["--pipeline", "4", "--multiget", "10"]);
    assert_eq!(r.stats.get_keys, r.stats.gets * 10);
}

#[test]
fn a_wrong_value_fails_the_run() {
    let (_s, resp, mc) = server(false);
    for (proto, port) in [("resp", resp), ("memcache", mc)] {
        let port = port.to_string();
        let w = args(&[
            "--protocol",
            proto,
            "--port",
            &port,
            "--key-max",
            "9",
            "--key-pattern",
            "P",
            "--ratio",
            "1:0",
            "--requests",
            "10",
            "-d",
            "40",
        ]);
        run(&Plan::new(&w).unwrap()).unwrap();
        // Read back expecting 32-byte values: every read is a mismatch, and main() fails.
        let r = args(&[
            "--protocol",
            proto,
            "--port",
            &port,
            "--key-max",
            "9",
            "--ratio",
            "0:1",
            "--requests",
            "50",
            "--verify",
        ]);
        let rep = run(&Plan::new(&r).unwrap()).unwrap();
        assert_eq!(rep.stats.verify_failures, 50, "{proto}");
        let err = larder_bench::main(&r).unwrap_err();
        assert!(err.contains("were not the ones written"), "{err}");
    }
}

#[test]
fn duration_warmup_and_timeline() {
    let (_s, resp, _) = server(false);
    let port = resp.to_string();
    let a = args(&[
        "--port",
        &port,
        "--threads",
        "1",
        "--clients",
        "2",
        "--duration",
        "0.6",
        "--warmup",
        "0.2",
        "--interval-ms",
        "100",
        "--verify",
    ]);
    let plan = Plan::new(&a).unwrap();
    let r = run(&plan).unwrap();
    assert!(r.stats.ops() > 0 && r.stats.errors == 0 && r.stats.verify_failures == 0);
    assert!((0.55..2.0).contains(&r.elapsed), "elapsed {}", r.elapsed);
    // 6 full intervals of 100 ms, and perhaps a last one with the replies still in flight.
    assert!((6..=8).contains(&r.stats.timeline.len()), "{}", r.stats.timeline.len());
    assert_eq!(r.stats.timeline.iter().map(|b| b.ops).sum::<u64>(), r.stats.ops());
    let json = larder_bench::to_json(&plan, &r);
    assert!(json.contains("\"timeline\": [") && json.contains("\"p99_9\""));
}

#[test]
fn floor_answers_without_the_keyspace() {
    let (_s, resp, mc) = server(true);
    for (proto, port) in [("resp", resp), ("memcache", mc)] {
        let port = port.to_string();
        // Nothing was written, yet every read hits: the floor answers a fixed value.
        let a = args(&[
            "--protocol",
            proto,
            "--port",
            &port,
            "--threads",
            "1",
            "--clients",
            "4",
            "--ratio",
            "1:1",
            "--requests",
            "2000",
            "--multiget",
            "3",
        ]);
        let r = run(&Plan::new(&a).unwrap()).unwrap();
        assert_eq!((r.stats.ops(), r.stats.errors), (2000, 0), "{proto}");
        assert_eq!(r.stats.hits, 3000, "{proto}");
    }
}

#[test]
fn local_mode_attaches_to_a_named_segment() {
    use larder_engine::{ArenaConfig, Backing, Store, StoreConfig};
    let name = format!("benchtest-{}", std::process::id());
    let _store = Store::open(StoreConfig {
        backing: Backing::Named(name.clone()),
        arena: ArenaConfig { capacity: 64 << 20, ..Default::default() },
        databases: 16,
    })
    .unwrap();
    struct Unlink(String);
    impl Drop for Unlink {
        fn drop(&mut self) {
            let _ = larder_engine::Arena::unlink(&self.0);
        }
    }
    let _u = Unlink(name.clone());
    let base = ["--protocol", "local", "--segment", &name, "--key-max", "1999", "--threads", "2"];
    let load: Vec<&str> =
        base.iter().copied().chain(["--ratio", "1:0", "--key-pattern", "P", "--requests", "2000"]).collect();
    let r = run(&Plan::new(&args(&load)).unwrap()).unwrap();
    assert_eq!((r.stats.sets, r.stats.errors), (2000, 0));
    for extra in [&["--multiget", "1"][..], &["--multiget", "20"]] {
        let mix: Vec<&str> = base
            .iter()
            .copied()
            .chain(["--ratio", "1:3", "--requests", "20000", "--verify"])
            .chain(extra.iter().copied())
            .collect();
        let r = run(&Plan::new(&args(&mix)).unwrap()).unwrap();
        assert_eq!(r.stats.ops(), 20000);
        assert_eq!((r.stats.errors, r.stats.verify_failures, r.stats.misses), (0, 0, 0), "{:?}", r.stats.first_errors);
        assert_eq!(r.stats.hits, r.stats.get_keys);
    }
    // A missing segment is an error, not a hang.
    assert!(run(&Plan::new(&args(&["--protocol", "local", "--segment", "no-such-segment-bench"])).unwrap()).is_err());
}

#[test]
fn a_server_that_is_not_there_fails_fast() {
    let port = free_port();
    let err = run(&Plan::new(&args(&["--port", &port, "--threads", "2", "--clients", "2"])).unwrap()).err().unwrap();
    assert!(err.contains("connect"), "{err}");
}
