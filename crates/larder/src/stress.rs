//! Worker processes for the multi-process crash tests (`tests/multiprocess.rs`).
//!
//! A writer performs a deterministic sequence of operations (operation `s` is a function of
//! `s` alone) and appends `s` to its acknowledgement file after each one returns, so after a
//! SIGKILL the test knows exactly which writes were acknowledged and which one was in flight.
//! A reader checks that every value it sees is whole (no torn value).

use std::io::Write;
use std::path::PathBuf;

use larder_engine::{SetOptions, Store};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Named segment to attach to.
    #[arg(long)]
    shm: String,
    /// writer | reader | grow | mset
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

/// What operation `s` of writer `id` does: `Set(key, value)`, `Del(key)` or `MSet(keys, value)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    Set(Vec<u8>, Vec<u8>),
    Del(Vec<u8>),
    MSet(Vec<Vec<u8>>, Vec<u8>),
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

pub fn op(id: u32, s: u64) -> Op {
    if s % 50 == 49 {
        let g = (s / 50) % 17;
        return Op::MSet((0..3).map(|j| format!("w{id}:m{g}:{j}").into_bytes()).collect(), value(id, s));
    }
    // A quarter of the writes add new keys, so segments keep splitting under the kills.
    let key = if s % 4 == 0 { format!("w{id}:g{s}") } else { format!("w{id}:k{}", s % 997) }.into_bytes();
    if s % 13 == 5 {
        Op::Del(key)
    } else {
        Op::Set(key, value(id, s))
    }
}

pub fn run(args: &Args) -> Result<(), String> {
    let store = Store::attach(&args.shm).map_err(|e| e.to_string())?;
    let mut h = store.handle().map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs_f64(args.seconds);
    let mut ack = match &args.ack {
        Some(p) => Some(std::fs::OpenOptions::new().create(true).append(true).open(p).map_err(|e| e.to_string())?),
        None => None,
    };
    let mut acknowledge = |s: u64| -> Result<(), String> {
        if let Some(f) = ack.as_mut() {
            // One write per acknowledgement: what reaches the page cache survives SIGKILL.
            f.write_all(format!("{s}\n").as_bytes()).map_err(|e| e.to_string())?;
        }
        Ok(())
    };
    let e = |e: larder_engine::Error| e.to_string();
    match args.mode.as_str() {
        "writer" => {
            let mut s = args.start;
            while std::time::Instant::now() < deadline {
                match op(args.id, s) {
                    Op::Set(k, v) => {
                        h.set(0, &k, &v, &SetOptions::default()).map_err(e)?;
                    }
                    Op::Del(k) => {
                        h.del(0, &[&k]).map_err(e)?;
                    }
                    Op::MSet(keys, v) => {
                        let pairs: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (&k[..], &v[..])).collect();
                        h.mset(0, &pairs, false).map_err(e)?;
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
                h.set(0, k.as_bytes(), &value(args.id, s), &SetOptions::default()).map_err(e)?;
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
                let k = format!("w{id}:k{}", (x >> 8) % 997);
                buf.clear();
                if h.get_into(0, k.as_bytes(), &mut buf).map_err(e)?.is_some() && verify(&buf).is_none() {
                    return Err(format!("torn value under {k}: {:?}", String::from_utf8_lossy(&buf)));
                }
                n += 1;
            }
            println!("{n}");
            Ok(())
        }
        m => Err(format!("unknown mode {m}")),
    }
}
