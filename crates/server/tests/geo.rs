//! The geo commands over a real socket: raw bytes in, exact bytes out.
//!
//! `geo_data/cases.rs` holds request/reply pairs recorded from redis-server 7.0.15 by
//! `geo_data/record.py` (RESP2 and, after `HELLO 3`, RESP3): every error path, in Redis's
//! order, searches over a set of 40 points and one of 400 with every option, distance ties,
//! the poles and the antimeridian, scores no GEOADD writes, STORE over other types and TTLs,
//! and COMMAND GETKEYS. They run with the default thresholds (a small set packed) and with
//! every set a tree. A model test then checks searches against a brute-force scan.
mod common;
use common::*;

#[path = "geo_data/cases.rs"]
mod cases;

use std::collections::HashMap;
use std::sync::atomic::Ordering;

fn words(line: &str) -> Vec<u8> {
    let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
    cmd(&args)
}

fn run_cases(t: &TestServer, c: &mut Raw, cases: &[(&str, &[u8])]) {
    let tree = t.server.as_ref().unwrap().shared.store.limits().zset_max_listpack_entries.load(Ordering::Relaxed) == 0;
    for (line, want) in cases {
        c.send(&words(line));
        let got = read_reply(c);
        if tree && line.starts_with("OBJECT ENCODING") {
            assert_eq!(got, b"$8\r\nskiplist\r\n", "request {line:?}");
            continue;
        }
        assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want), "request {line:?}");
    }
}

fn all_trees(t: &TestServer) {
    t.server.as_ref().unwrap().shared.store.limits().zset_max_listpack_entries.store(0, Ordering::Relaxed);
}

#[test]
fn recorded_replies_resp2() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    run_cases(&t, &mut c, cases::RESP2);
}

#[test]
fn recorded_replies_resp3() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ask(&mut c, &[b"HELLO", b"3"]);
    run_cases(&t, &mut c, cases::RESP3);
}

#[test]
fn recorded_replies_with_trees() {
    let t = start();
    all_trees(&t);
    let mut c = Raw::connect(t.resp);
    run_cases(&t, &mut c, cases::RESP2);
    let mut c = Raw::connect(t.resp);
    ask(&mut c, &[b"HELLO", b"3"]);
    run_cases(&t, &mut c, cases::RESP3);
}

#[test]
fn arity_errors() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    for (req, name) in [
        ("GEOADD k 1 1", "geoadd"),
        ("GEODIST k a", "geodist"),
        ("GEOHASH", "geohash"),
        ("GEOPOS", "geopos"),
        ("GEORADIUS k 0 0 1", "georadius"),
        ("GEORADIUS_RO k 0 0 1", "georadius_ro"),
        ("GEORADIUSBYMEMBER k m 1", "georadiusbymember"),
        ("GEORADIUSBYMEMBER_RO k m 1", "georadiusbymember_ro"),
        ("GEOSEARCH k FROMLONLAT 0 0 BYRADIUS", "geosearch"),
        ("GEOSEARCHSTORE d k FROMLONLAT 0 0 BYRADIUS", "geosearchstore"),
    ] {
        ck(&mut c, req, &format!("-ERR wrong number of arguments for '{name}' command\r\n"));
    }
}

/// What COMMAND says of the family: Redis's arity, flags, key positions and group.
#[test]
fn command_table_entries() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let info = ask(&mut c, &[b"COMMAND", b"INFO", b"georadius", b"geosearchstore", b"geopos"]);
    assert!(info.starts_with("*3\r\n*10\r\n$9\r\ngeoradius\r\n:-6\r\n*3\r\n+write\r\n+denyoom\r\n+movablekeys\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@write\r\n+@geo\r\n+@slow\r\n"), "{info}");
    assert!(info.contains("$14\r\ngeosearchstore\r\n:-8\r\n*2\r\n+write\r\n+denyoom\r\n:1\r\n:2\r\n:1\r\n"), "{info}");
    assert!(
        info.contains(
            "$6\r\ngeopos\r\n:-2\r\n*1\r\n+readonly\r\n:1\r\n:1\r\n:1\r\n*3\r\n+@read\r\n+@geo\r\n+@slow\r\n"
        ),
        "{info}"
    );
    let docs = ask(&mut c, &[b"COMMAND", b"DOCS", b"geoadd"]);
    assert!(docs.contains("$5\r\ngroup\r\n$3\r\ngeo\r\n"), "{docs}");
    assert_eq!(ask(&mut c, &[b"COMMAND", b"LIST", b"FILTERBY", b"ACLCAT", b"geo"]).matches("\r\n$").count(), 10);
}

/// GEORADIUS ... STORE and GEOSEARCHSTORE write a sorted set: a client blocked on it in
/// BZPOPMIN is served, on another worker too.
#[test]
fn store_serves_blocked_clients() {
    let t = start_with(|a| a.threads = Some(2));
    let (mut p, mut w) = one_per_worker(&t);
    ck(&mut p, "GEOADD src 13.361389 38.115556 Palermo 15.087269 37.502669 Catania", ":2\r\n");
    w.send(&words("BZPOPMIN dst 0"));
    wait_blocked(&mut p, 1);
    ck(&mut p, "GEORADIUS src 15 37 200 km STOREDIST dst ASC", ":2\r\n");
    w.check(b"", b"*3\r\n$3\r\ndst\r\n$7\r\nCatania\r\n$18\r\n56.441257870158204\r\n");
    w.send(&words("BZPOPMIN other 0"));
    wait_blocked(&mut p, 1);
    ck(&mut p, "GEOSEARCHSTORE other src FROMMEMBER Palermo BYRADIUS 10 km", ":1\r\n");
    w.check(b"", b"*3\r\n$5\r\nother\r\n$7\r\nPalermo\r\n$16\r\n3479099956230698\r\n");
    wait_blocked(&mut p, 0);
    // The read-only forms write nothing, and an empty result only deletes.
    ck(&mut p, "GEORADIUS_RO src 15 37 200 km COUNT 1", "*1\r\n$7\r\nCatania\r\n");
    ck(&mut p, "GEORADIUSBYMEMBER src Palermo 1 m STORE dst", ":1\r\n");
    ck(&mut p, "GEORADIUS src 0 0 1 m STORE dst", ":0\r\n");
    ck(&mut p, "EXISTS dst", ":0\r\n");
}

// ---- a model: searches against a brute-force scan ----

const R: f64 = 6372797.560856;

/// The haversine distance Redis uses, in meters.
fn haversine(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let r = std::f64::consts::PI / 180.0;
    let (u, v) = (((lat2 - lat1) * r / 2.0).sin(), ((lon2 - lon1) * r / 2.0).sin());
    2.0 * R * (u * u + (lat1 * r).cos() * (lat2 * r).cos() * v * v).sqrt().asin()
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * ((self.next() >> 11) as f64 / (1u64 << 53) as f64)
    }
}

/// The elements of an array reply: bulk strings, or (nested) the first of each sub-array and
/// its second as a number.
fn members_and_dists(r: &[u8]) -> Vec<(String, f64)> {
    let Ok(Some((larder_resp::Reply::Array(items), _))) = larder_resp::parse_reply(r) else {
        panic!("{}", String::from_utf8_lossy(r))
    };
    items
        .iter()
        .map(|it| match it {
            larder_resp::Reply::Array(p) => {
                let m = String::from_utf8(p[0].as_bytes().unwrap().to_vec()).unwrap();
                let d = std::str::from_utf8(p[1].as_bytes().unwrap()).unwrap().parse().unwrap();
                (m, d)
            }
            other => (String::from_utf8(other.as_bytes().unwrap().to_vec()).unwrap(), f64::NAN),
        })
        .collect()
}

/// GEOADD with NX/XX/CH against a map (member → point, as GEOPOS answers it: the centre of
/// its cell), then GEOSEARCH by radius and by box against a scan of the map: the same
/// members (but within a relative 1e-9 of the shape's edge), the same distances, nearest
/// first, and COUNT the nearest. Points and centres stay within latitudes ±70, where
/// Redis's nine cells always cover the shape (its own fuzz test keeps there too).
fn model_run(t: &TestServer, seed: u64, points: usize) {
    let mut c = Raw::connect(t.resp);
    ask(&mut c, &[b"DEL", b"g"]);
    let mut rng = Rng(seed);
    let mut model: HashMap<String, (f64, f64)> = HashMap::new();
    let score = |c: &mut Raw, m: &str| ask(c, &[b"ZSCORE", b"g", m.as_bytes()]);
    for _ in 0..points {
        let (lon, lat) = (rng.uniform(-180.0, 180.0), rng.uniform(-70.0, 70.0));
        let m = format!("m{}", rng.next() % (points as u64 * 2));
        let opts = [&[][..], &["NX"], &["XX"], &["CH"], &["XX", "CH"], &["nx", "ch"]][(rng.next() % 6) as usize];
        let (lon_s, lat_s) = (format!("{lon}"), format!("{lat}"));
        let mut args: Vec<&[u8]> = vec![b"GEOADD", b"g"];
        args.extend(opts.iter().map(|o| o.as_bytes()));
        args.extend([lon_s.as_bytes(), lat_s.as_bytes(), m.as_bytes()]);
        let old = score(&mut c, &m);
        let r = ask(&mut c, &args);
        let new = score(&mut c, &m);
        let has = |o: &str| opts.iter().any(|x| x.eq_ignore_ascii_case(o));
        let exists = old != "$-1\r\n";
        let write = !(has("NX") && exists || has("XX") && !exists);
        let want = (write && !exists) as u8 + (has("CH") && write && exists && old != new) as u8;
        assert_eq!(r, format!(":{want}\r\n"), "GEOADD g {opts:?} {lon} {lat} {m}");
        if write {
            let p = parse_pos(&ask(&mut c, &[b"GEOPOS", b"g", m.as_bytes()]));
            assert!((p.0 - lon).abs() < 1e-5 && (p.1 - lat).abs() < 1e-5, "{m}: {p:?} for {lon} {lat}");
            model.insert(m, p);
        } else {
            assert_eq!(new, old, "{m}: not written");
        }
    }
    assert_eq!(ask(&mut c, &[b"ZCARD", b"g"]), format!(":{}\r\n", model.len()));
    for q in 0..40 {
        let (lon, lat) = (rng.uniform(-180.0, 180.0), rng.uniform(-70.0, 70.0));
        let bybox = q % 2 == 1;
        let (w, h) = (rng.uniform(1.0, 3000.0), rng.uniform(1.0, 3000.0));
        let shape = if bybox { format!("BYBOX {w} {h} km") } else { format!("BYRADIUS {w} km") };
        let line = format!("GEOSEARCH g FROMLONLAT {lon} {lat} {shape} ASC WITHDIST");
        c.send(&words(&line));
        let got = members_and_dists(&read_reply(&mut c));
        let inside = |p: (f64, f64), slack: f64| {
            if bybox {
                haversine(p.0, p.1, p.0, lat) <= h * 500.0 * slack && haversine(p.0, p.1, lon, p.1) <= w * 500.0 * slack
            } else {
                haversine(lon, lat, p.0, p.1) <= w * 1000.0 * slack
            }
        };
        let mut last = 0.0;
        for (m, d) in &got {
            let p = model[m];
            assert!(inside(p, 1.0 + 1e-9), "{line}: {m} {p:?} is outside");
            let want = haversine(lon, lat, p.0, p.1) / 1000.0;
            assert!((d - want).abs() <= 0.0001, "{line}: {m} at {d}, the scan says {want}");
            assert!(*d >= last, "{line}: not in ascending order");
            last = *d;
        }
        let found: std::collections::HashSet<&str> = got.iter().map(|(m, _)| m.as_str()).collect();
        for (m, &p) in &model {
            if inside(p, 1.0 - 1e-9) && !found.contains(m.as_str()) {
                panic!("{line}: {m} {p:?} is inside but not found");
            }
        }
        // COUNT takes the nearest.
        let k = 1 + rng.next() % 5;
        c.send(&words(&format!("GEOSEARCH g FROMLONLAT {lon} {lat} {shape} COUNT {k} WITHDIST")));
        let first = members_and_dists(&read_reply(&mut c));
        assert_eq!(first.len(), got.len().min(k as usize), "{line} COUNT {k}");
        for (a, b) in first.iter().zip(&got) {
            assert_eq!(a.1, b.1, "{line} COUNT {k}");
        }
    }
}

fn parse_pos(r: &str) -> (f64, f64) {
    let Ok(Some((larder_resp::Reply::Array(items), _))) = larder_resp::parse_reply(r.as_bytes()) else { panic!("{r}") };
    let larder_resp::Reply::Array(p) = &items[0] else { panic!("{r}") };
    let f = |i: usize| std::str::from_utf8(p[i].as_bytes().unwrap()).unwrap().parse::<f64>().unwrap();
    (f(0), f(1))
}

#[test]
fn model_packed_and_tree() {
    let t = start();
    // 100 points stay packed; 1500 are a tree.
    model_run(&t, 0x9e37_79b9_7f4a_7c15, 100);
    model_run(&t, 0x2545_f491_4f6c_dd1d, 1500);
}
