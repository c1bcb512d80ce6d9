//! Worker processes for the multi-process crash tests (`tests/multiprocess.rs`).
//!
//! A writer performs a deterministic sequence of operations (operation `s` is a function of
//! `s` alone) and appends `s` to its acknowledgement file after each one returns, so after a
//! SIGKILL the test knows exactly which writes were acknowledged and which one was in flight.
//! A reader checks that every value it sees is whole (no torn value).

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use larder_engine::{Expiry, Kind, SetOptions, Store};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Named segment to attach to.
    #[arg(long, required_unless_present = "file", conflicts_with = "file")]
    shm: Option<String>,
    /// Or a segment file (a store that keeps its data across restarts).
    #[arg(long)]
    file: Option<PathBuf>,
    /// writer | reader | grow | shrink | mset | coll-writer | coll-reader | push
    #[arg(long)]
    mode: String,
    /// Writer identity (its keys are `w{id}:...`).
    #[arg(long, default_value_t = 0)]
    id: u32,
    /// Acknowledgement file (writer modes).
    #[arg(long)]
    ack: Option<PathBuf>,
    /// First sequence number (a restarted writer continues after its last one).
    #[arg(long, default_value_t = 0)]
    start: u64,
    /// Stop after this many seconds.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Writers whose keys a reader checks.
    #[arg(long, default_value_t = 2)]
    writers: u32,
}

/// What operation `s` of writer `id` does: `Set(key, value)`, `Del(key)`, `MSet(keys, value)`
/// or `Append(key, "s;")`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Set(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
    MSet(Vec<Vec<u8>>, Vec<u8>),
    /// APPEND to one of the writer's three logs (`w{id}:a0..2`), which only ever grow.
    Append(Vec<u8>, Vec<u8>),
}

/// The sequence numbers of an append log (`"3;13;23;"`), if it is whole: each entry ends
/// with ';', and they increase.
pub fn log_entries(v: &[u8]) -> Option<Vec<u64>> {
    let text = std::str::from_utf8(v).ok()?;
    let body = text.strip_suffix(';')?;
    let seqs: Vec<u64> = body.split(';').map(|n| n.parse().ok()).collect::<Option<_>>()?;
    seqs.windows(2).all(|w| w[0] < w[1]).then_some(seqs)
}

/// The value written by operation `s`: a header naming it, then bytes derived from it, so a
/// reader can tell a whole value from a torn one.
pub fn value(id: u32, s: u64) -> Vec<u8> {
    let len = 16 + (s % 200) as usize;
    let mut v = format!("{id}:{s}:{len}:").into_bytes();
    v.extend((0..len).map(|i| b'a' + ((s as usize + i) % 26) as u8));
    v
}

/// Checks a value's shape; returns its sequence number.
pub fn verify(v: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(v).ok()?;
    let mut parts = text.splitn(4, ':');
    let id: u32 = parts.next()?.parse().ok()?;
    let s: u64 = parts.next()?.parse().ok()?;
    let len: usize = parts.next()?.parse().ok()?;
    let _ = id;
    let body = parts.next()?.as_bytes();
    (body.len() == len && body.iter().enumerate().all(|(i, &b)| b == b'a' + ((s as usize + i) % 26) as u8)).then_some(s)
}

/// The options of set number `s`: every third gives its key an expiry a day away.
pub fn set_options(s: u64) -> SetOptions {
    let expiry = if s % 3 == 1 { Expiry::At(larder_engine::now_ms() + 86_400_000) } else { Expiry::Clear };
    SetOptions { expiry, ..Default::default() }
}

pub fn op(id: u32, s: u64) -> Op {
    if s % 10 == 3 {
        return Op::Append(format!("w{id}:a{}", (s / 10) % 3).into_bytes(), format!("{s};").into_bytes());
    }
    if s % 50 == 49 {
        let g = (s / 50) % 17;
        return Op::MSet((0..3).map(|j| format!("w{id}:m{g}:{j}").into_bytes()).collect(), value(id, s));
    }
    // A quarter of the writes add new keys, so segments keep splitting under the kills.
    let key = if s.is_multiple_of(4) { format!("w{id}:g{s}") } else { format!("w{id}:k{}", s % 997) }.into_bytes();
    if s % 13 == 5 {
        Op::Del(key)
    } else {
        Op::Set(key, value(id, s))
    }
}

/// The values each key of writer `id` may legitimately hold after a crash: the result of
/// its last acknowledged operation, or of an in-flight operation after it (applied or not
/// before the kill). Append logs are left out: see [`expected_logs`].
pub fn expected(id: u32, acked: &[u64], in_flight: &[u64]) -> HashMap<Vec<u8>, Vec<Option<Vec<u8>>>> {
    let mut last: HashMap<Vec<u8>, (u64, Option<Vec<u8>>)> = HashMap::new();
    let result = |s: u64| -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        match op(id, s) {
            Op::Set(k, v) => vec![(k, Some(v))],
            Op::Del(k) => vec![(k, None)],
            Op::MSet(ks, v) => ks.into_iter().map(|k| (k, Some(v.clone()))).collect(),
            // Logs depend on every append before: `check_log` checks them.
            Op::Append(..) => vec![],
        }
    };
    for &s in acked {
        for (k, v) in result(s) {
            let e = last.entry(k).or_insert((s, v.clone()));
            if s >= e.0 {
                *e = (s, v);
            }
        }
    }
    let mut out: HashMap<Vec<u8>, Vec<Option<Vec<u8>>>> =
        last.iter().map(|(k, (_, v))| (k.clone(), vec![v.clone()])).collect();
    for &s in in_flight {
        for (k, v) in result(s) {
            if last.get(&k).is_none_or(|(ls, _)| s > *ls) {
                out.entry(k.clone()).or_insert_with(|| if last.contains_key(&k) { vec![] } else { vec![None] }).push(v);
            }
        }
    }
    out
}

/// The operations a worker's acknowledgement file (`--ack`) lists, in order: its whole
/// lines. SIGKILL can land in the middle of a `write`, leaving the file ending mid-line (3
/// in 6000 kills of a program appending 9-byte lines, on ext4): that last line does not
/// count, since `137597` cut to `13` would read as an acknowledgement of operation 13.
pub fn read_acks(path: &std::path::Path) -> Vec<u64> {
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(e) => panic!("reading {}: {e}", path.display()),
    };
    let whole = &text[..text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1)];
    whole
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            std::str::from_utf8(l).ok().and_then(|l| l.parse().ok()).unwrap_or_else(|| {
                panic!("{}: not an acknowledgement: {:?}", path.display(), String::from_utf8_lossy(l))
            })
        })
        .collect()
}

/// Opens an acknowledgement file for appending, first cutting off a last line that the
/// previous writer's kill left without its newline, so the first new acknowledgement
/// starts a line of its own instead of running on from the cut one.
fn open_acks(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let f = std::fs::OpenOptions::new().create(true).read(true).append(true).open(path)?;
    let text = std::fs::read(path)?;
    if text.last().is_some_and(|&b| b != b'\n') {
        f.set_len(text.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1) as u64)?;
    }
    Ok(f)
}

/// The acknowledged appends of writer `id`, per log key, in order.
pub fn expected_logs(id: u32, acked: &[u64]) -> HashMap<Vec<u8>, Vec<u64>> {
    let mut want: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
    for &s in acked {
        if let Op::Append(k, _) = op(id, s) {
            want.entry(k).or_default().push(s);
        }
    }
    want
}

/// Checks one append log as read after a crash: it is whole, holds every acknowledged
/// append (`acked_here`, in order), and besides them only appends that were in flight when
/// the writer was killed (applied or not).
pub fn check_log(key: &[u8], v: &[u8], acked_here: &[u64], in_flight: &[u64]) -> Result<(), String> {
    let key = String::from_utf8_lossy(key);
    let got = log_entries(v).ok_or_else(|| format!("log {key} is torn: {:?}", String::from_utf8_lossy(v)))?;
    let extra: Vec<u64> = got.iter().copied().filter(|s| acked_here.binary_search(s).is_err()).collect();
    if !extra.iter().all(|s| in_flight.contains(s)) {
        return Err(format!("log {key} holds appends never made: {extra:?}"));
    }
    if got.len() - extra.len() != acked_here.len() {
        return Err(format!(
            "log {key} lost acknowledged appends: {} of {}",
            got.len() - extra.len(),
            acked_here.len()
        ));
    }
    Ok(())
}

/// What collection operation `s` of writer `id` does (the `coll-writer` mode). Each one
/// determines the final state of what it touches by itself, so after a kill the test knows
/// which states are allowed from the acknowledged and in-flight operations alone.
#[derive(Debug, Clone, PartialEq)]
pub enum CollOp {
    /// HSET key field value(s).
    HSet(Vec<u8>, Vec<u8>, Vec<u8>),
    /// ZADD key score=s member.
    ZAdd(Vec<u8>, Vec<u8>, f64),
    /// SADD (true) or SREM (false) key member.
    SetMember(Vec<u8>, Vec<u8>, bool),
    /// RPUSH key value(s): the list holds increasing operation numbers.
    Push(Vec<u8>, Vec<u8>),
}

pub fn coll_op(id: u32, s: u64) -> CollOp {
    match s % 4 {
        0 => CollOp::HSet(
            format!("w{id}:h{}", s % 7).into_bytes(),
            format!("f{}", (s / 4) % 50).into_bytes(),
            value(id, s),
        ),
        1 => CollOp::ZAdd(format!("w{id}:z").into_bytes(), format!("m{}", (s / 4) % 300).into_bytes(), s as f64),
        2 => CollOp::SetMember(
            format!("w{id}:s").into_bytes(),
            format!("m{}", (s / 4) % 400).into_bytes(),
            (s / 1600).is_multiple_of(2),
        ),
        _ => CollOp::Push(format!("w{id}:l").into_bytes(), value(id, s)),
    }
}

pub fn apply_coll_op(h: &mut larder_engine::Handle, op: &CollOp) -> Result<(), larder_engine::Error> {
    match op {
        CollOp::HSet(k, f, v) => h.coll_write(0, k, Kind::Hash, true, |c| c.put(f, v)).map(|_| ()),
        CollOp::ZAdd(k, m, sc) => h.coll_write(0, k, Kind::ZSet, true, |c| c.zput(m, *sc)).map(|_| ()),
        CollOp::SetMember(k, m, true) => h.coll_write(0, k, Kind::Set, true, |c| c.put(m, b"")).map(|_| ()),
        CollOp::SetMember(k, m, false) => h.coll_write(0, k, Kind::Set, false, |c| c.del(m)).map(|_| ()),
        CollOp::Push(k, v) => h
            .coll_write(0, k, Kind::List, true, |c| {
                let n = c.len();
                c.insert_at(n, v)
            })
            .map(|_| ()),
    }
}

/// Checks one writer's collections for internal consistency (what a reader may check
/// without knowing the history): every value whole, list elements in increasing order,
/// sorted-set scores matching their members.
pub fn check_colls(h: &larder_engine::Handle, id: u32) -> Result<(), String> {
    let e = |e: larder_engine::Error| e.to_string();
    let list =
        h.coll_read(0, format!("w{id}:l").as_bytes(), Kind::List, |c| c.entries()).map_err(e)?.unwrap_or_default();
    let mut last = None;
    for (v, _) in &list {
        let s = verify(v).ok_or_else(|| format!("torn list element {:?}", String::from_utf8_lossy(v)))?;
        if last.is_some_and(|l| l >= s) {
            return Err(format!("list out of order: {last:?} then {s}"));
        }
        last = Some(s);
    }
    for g in 0..7 {
        let hash = h
            .coll_read(0, format!("w{id}:h{g}").as_bytes(), Kind::Hash, |c| c.entries())
            .map_err(e)?
            .unwrap_or_default();
        for (f, v) in &hash {
            let s = verify(v).ok_or_else(|| format!("torn hash value under {:?}", String::from_utf8_lossy(f)))?;
            if format!("f{}", (s / 4) % 50).as_bytes() != &f[..] || s % 7 != g {
                return Err(format!("hash value {s} under the wrong field {:?}", String::from_utf8_lossy(f)));
            }
        }
    }
    let z = h.coll_read(0, format!("w{id}:z").as_bytes(), Kind::ZSet, |c| c.entries()).map_err(e)?.unwrap_or_default();
    let mut prev = f64::NEG_INFINITY;
    for (m, sc) in &z {
        let sc = f64::from_le_bytes(sc[..].try_into().map_err(|_| "bad score".to_string())?);
        if format!("m{}", (sc as u64 / 4) % 300).as_bytes() != &m[..] || sc < prev {
            return Err(format!("sorted set: member {:?} with score {sc}", String::from_utf8_lossy(m)));
        }
        prev = sc;
    }
    Ok(())
}

pub fn run(args: &Args) -> Result<(), String> {
    let store = match (&args.shm, &args.file) {
        (Some(name), _) => Store::attach(name),
        (None, Some(path)) => Store::attach_file(path),
        (None, None) => return Err("--shm or --file is needed".into()),
    }
    .map_err(|e| e.to_string())?;
    let mut h = store.handle().map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(args.seconds);
    let mut ack = match &args.ack {
        Some(p) => Some(open_acks(p).map_err(|e| e.to_string())?),
        None => None,
    };
    let mut acknowledge = |s: u64| -> Result<(), String> {
        if let Some(f) = ack.as_mut() {
            // One write per acknowledgement: what reaches the page cache survives SIGKILL.
            f.write_all(format!("{s}\n").as_bytes()).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    // A full arena says where its pages are (a kill test's writer once failed with it).
    let e = |e: larder_engine::Error| {
        if e.is_oom() {
            format!("{e}\n{}", store.arena().alloc_report())
        } else {
            e.to_string()
        }
    };
    match args.mode.as_str() {
        "writer" => {
            let mut s = args.start;
            while std::time::Instant::now() < deadline {
                match op(args.id, s) {
                    Op::Set(k, v) => {
                        // A third of the sets give the key a (far) expiry, so that kills
                        // also land between a key's slot and its segment's expiry count.
                        h.set(0, &k, &v, &set_options(s)).map_err(e)?;
                    }
                    Op::Del(k) => {
                        h.del(0, &[&k]).map_err(e)?;
                    }
                    Op::MSet(keys, v) => {
                        let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &v[..])).collect();
                        h.mset(0, &pairs, false).map_err(e)?;
                    }
                    Op::Append(k, v) => {
                        h.append(0, &k, &v).map_err(e)?;
                    }
                }
                acknowledge(s)?;
                s += 1;
            }
            Ok(())
        }
        "grow" => {
            // New keys only, acknowledged one by one (the split-crash test).
            let mut s = args.start;
            while std::time::Instant::now() < deadline {
                let k = format!("w{}:g{s}", args.id);
                h.set(0, k.as_bytes(), &value(args.id, s), &set_options(s)).map_err(e)?;
                acknowledge(s)?;
                s += 1;
            }
            Ok(())
        }
        "shrink" => {
            // Deletes the keys a grow run made, in order, acknowledged one by one (the
            // merge-crash test: the index shrinks as they go).
            let mut s = args.start;
            while std::time::Instant::now() < deadline {
                let k = format!("w{}:g{s}", args.id);
                h.del(0, &[k.as_bytes()]).map_err(e)?;
                acknowledge(s)?;
                s += 1;
            }
            Ok(())
        }
        "mset" => {
            // One multi-key set over keys that already hold older values.
            let v = value(args.id, args.start);
            let keys: Vec<Vec<u8>> = (0..40).map(|j| format!("w{}:ms{j}", args.id).into_bytes()).collect();
            let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &v[..])).collect();
            h.mset(0, &pairs, false).map_err(e)?;
            acknowledge(args.start)?;
            Ok(())
        }
        "reader" => {
            let mut n = 0u64;
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ std::process::id() as u64;
            let mut buf = Vec::new();
            while std::time::Instant::now() < deadline {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let id = (x % args.writers.max(1) as u64) as u32;
                buf.clear();
                if x.is_multiple_of(16) {
                    // An append log, read while it grows in place.
                    let k = format!("w{id}:a{}", (x >> 8) % 3);
                    if h.get_into(0, k.as_bytes(), &mut buf).map_err(e)?.is_some() && log_entries(&buf).is_none() {
                        return Err(format!("torn log under {k}: {:?}", String::from_utf8_lossy(&buf)));
                    }
                    n += 1;
                    continue;
                }
                let k = format!("w{id}:k{}", (x >> 8) % 997);
                if h.get_into(0, k.as_bytes(), &mut buf).map_err(e)?.is_some() && verify(&buf).is_none() {
                    return Err(format!("torn value under {k}: {:?}", String::from_utf8_lossy(&buf)));
                }
                n += 1;
            }
            println!("{n}");
            Ok(())
        }
        "coll-writer" => {
            let mut s = args.start;
            while std::time::Instant::now() < deadline {
                apply_coll_op(&mut h, &coll_op(args.id, s)).map_err(e)?;
                acknowledge(s)?;
                s += 1;
            }
            Ok(())
        }
        "push" => {
            // One push of value(id, start) onto the writer's list `w{id}:l` (the lost
            // wake-up test runs it with LARDER_FAILPOINT=push-announce).
            apply_coll_op(&mut h, &CollOp::Push(format!("w{}:l", args.id).into_bytes(), value(args.id, args.start)))
                .map_err(e)?;
            acknowledge(args.start)?;
            Ok(())
        }
        "coll-reader" => {
            let mut n = 0u64;
            while std::time::Instant::now() < deadline {
                for id in 0..args.writers {
                    check_colls(&h, id)?;
                }
                n += 1;
            }
            println!("{n}");
            Ok(())
        }
        "exec" => {
            // Holds a participant, then becomes another program: same pid and start time,
            // but no mapping and no liveness lock (its description is close-on-exec).
            use std::os::unix::process::CommandExt;
            let err = std::process::Command::new("sleep").arg(args.seconds.to_string()).exec();
            drop(h);
            Err(err.to_string())
        }
        m => Err(format!("unknown mode {m}")),
    }
}
