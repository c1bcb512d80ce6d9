//! HyperLogLog commands, as Redis 7.0's `hyperloglog.c`: PFADD PFCOUNT PFMERGE PFDEBUG
//! PFSELFTEST.
//!
//! A HyperLogLog is a string in Redis's own format, byte for byte, so that a value copied
//! from Redis (GET, then SET) works here and back, and every count is Redis's:
//!
//! ```text
//!   "HYLL"  encoding u8 (0 dense, 1 sparse)  3 zero bytes  cached count u64 LE (top bit: stale)
//!   dense:  16384 registers of 6 bits, least significant bits first (12288 bytes)
//!   sparse: opcodes  00xxxxxx ZERO (1-64 zero registers)
//!                    01xxxxxx xxxxxxxx XZERO (1-16384 zero registers)
//!                    1vvvvvxx VAL (1-4 registers of value 1-32)
//! ```
//!
//! An element's 64-bit MurmurHash2 picks a register (its low 14 bits) and a value (the
//! position of the first 1 among the other 50, counted from 1); a register keeps the largest
//! value it was given. A new HyperLogLog is sparse, and becomes dense when a register needs
//! a value above 32 or the sparse form would pass `hll-sparse-max-bytes`. The count is Otmar
//! Ertl's estimator over the histogram of register values, as in Redis.
//!
//! Every write goes through [`larder_engine::Handle::edit`]: one locked read-modify-write of
//! the string, as Redis's in-place updates are atomic. PFCOUNT of one key stores the count it
//! computed in the header (a write, as in Redis).
//!
//! Corrupt values (a HyperLogLog string changed with SETRANGE, say) give Redis's errors and
//! never a panic, and a PFADD keeps what its elements changed before one found the value
//! corrupt, as Redis does. One difference is left: a sparse value cut short in the middle
//! of its last (two-byte) XZERO opcode. Redis reads the missing byte from past the string's
//! end, where an earlier split may have left a byte; Larder reads 0.

use std::sync::atomic::Ordering;

use larder_engine::Edit;

use super::string::read_string;
use crate::command::{CmdError, Ctx, Spec, ADMIN, DENYOOM, FAST, MAY_REPLICATE, READONLY, WRITE};
use crate::notify::{notify, STRING};

#[rustfmt::skip]
pub const COMMANDS: &[Spec] = &[
    Spec { name: "pfadd", arity: -2, flags: WRITE | DENYOOM | FAST, first_key: 1, last_key: 1, step: 1, group: "hyperloglog", summary: "Adds the specified elements to the specified HyperLogLog.", handler: cmd_pfadd },
    Spec { name: "pfcount", arity: -2, flags: READONLY | MAY_REPLICATE, first_key: 1, last_key: -1, step: 1, group: "hyperloglog", summary: "Return the approximated cardinality of the set(s) observed by the HyperLogLog at key(s).", handler: cmd_pfcount },
    Spec { name: "pfmerge", arity: -2, flags: WRITE | DENYOOM, first_key: 1, last_key: -1, step: 1, group: "hyperloglog", summary: "Merge N different HyperLogLogs into a single one.", handler: cmd_pfmerge },
    Spec { name: "pfdebug", arity: 3, flags: WRITE | DENYOOM | ADMIN, first_key: 2, last_key: 2, step: 1, group: "hyperloglog", summary: "Internal commands for debugging HyperLogLog values", handler: cmd_pfdebug },
    Spec { name: "pfselftest", arity: 1, flags: ADMIN, first_key: 0, last_key: 0, step: 0, group: "hyperloglog", summary: "An internal command for testing HyperLogLog values", handler: cmd_pfselftest },
];

const P: u32 = 14;
const REGISTERS: usize = 1 << P;
const Q: u32 = 64 - P;
const HDR: usize = 16;
const DENSE_SIZE: usize = HDR + (REGISTERS * 6).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
const SPARSE_VAL_MAX: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;

const INVALID: &str = "INVALIDOBJ Corrupted HLL object detected";
const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";

/// A sparse representation that does not add up to 16384 registers (a corrupt value).
struct Corrupt;

// ---- the representation ----

/// Redis's MurmurHash64A (endian-neutral: words are read little-endian).
fn murmur64a(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for w in &mut words {
        let mut k = u64::from_le_bytes(w.try_into().unwrap());
        k = k.wrapping_mul(M);
        k ^= k >> 47;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= (b as u64) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 47;
    h = h.wrapping_mul(M);
    h ^ (h >> 47)
}

/// The register `ele` goes to, and the value it offers: where the first 1 is among the
/// hash's bits above the index, counted from 1.
fn pattern(ele: &[u8]) -> (usize, u8) {
    let hash = murmur64a(ele, 0xadc8_3b19);
    let index = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> P) | (1 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Dense register `i` (the byte after the last register reads as 0, as Redis's string
/// terminator does).
fn dense_get(regs: &[u8], i: usize) -> u8 {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let b0 = regs[byte] as u16;
    let b1 = regs.get(byte + 1).copied().unwrap_or(0) as u16;
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

fn dense_set(regs: &mut [u8], i: usize, v: u8) {
    let (byte, fb) = (i * 6 / 8, (i * 6) & 7);
    let v = v as u16;
    regs[byte] = (regs[byte] as u16 & !(63 << fb) | v << fb) as u8;
    if let Some(b1) = regs.get_mut(byte + 1) {
        *b1 = (*b1 as u16 & !(63 >> (8 - fb)) | v >> (8 - fb)) as u8;
    }
}

/// One sparse opcode: (registers it covers, their value, its length in bytes).
fn sparse_op(s: &[u8], at: usize) -> (usize, u8, usize) {
    let b = s[at];
    match b & 0xc0 {
        0x00 => ((b & 0x3f) as usize + 1, 0, 1),
        0x40 => ((((b & 0x3f) as usize) << 8 | s.get(at + 1).copied().unwrap_or(0) as usize) + 1, 0, 2),
        _ => ((b & 3) as usize + 1, ((b >> 2) & 0x1f) + 1, 1),
    }
}

fn val_op(v: u8, len: usize) -> u8 {
    0x80 | (v - 1) << 2 | (len - 1) as u8
}

/// Appends the ZERO or XZERO opcode for `len` zero registers.
fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        out.extend_from_slice(&[0x40 | ((len - 1) >> 8) as u8, (len - 1) as u8]);
    } else {
        out.push((len - 1) as u8);
    }
}

/// Calls `f(first register, run length, value)` for each opcode of a sparse value; fails if
/// they do not add up to exactly 16384 registers.
fn sparse_runs(v: &[u8], mut f: impl FnMut(usize, usize, u8)) -> Result<(), Corrupt> {
    let (mut at, mut idx) = (HDR, 0);
    while at < v.len() {
        let (run, val, len) = sparse_op(v, at);
        if idx + run > REGISTERS {
            return Err(Corrupt);
        }
        f(idx, run, val);
        idx += run;
        at += len;
    }
    if idx == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// A sparse value's opcodes as text, as PFDEBUG DECODE prints them: `z:run` (ZERO),
/// `Z:run` (XZERO), `v:value,run` (VAL).
fn decode(v: &[u8]) -> String {
    let mut words = Vec::new();
    let mut at = HDR;
    while at < v.len() {
        let (run, val, len) = sparse_op(v, at);
        words.push(match (val, len) {
            (0, 1) => format!("z:{run}"),
            (0, _) => format!("Z:{run}"),
            _ => format!("v:{val},{run}"),
        });
        at += len;
    }
    words.join(" ")
}

/// A new, empty HyperLogLog: sparse, one XZERO opcode.
fn new_hll() -> Vec<u8> {
    let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0".to_vec();
    push_zeros(&mut v, REGISTERS);
    v
}

/// Redis's `isHLLObjectOrReply`: a string with the magic, a known encoding and, if dense,
/// the dense length.
fn is_hll(v: &[u8]) -> bool {
    v.len() >= HDR && &v[..4] == b"HYLL" && v[4] <= SPARSE && (v[4] == SPARSE || v.len() == DENSE_SIZE)
}

fn invalidate_cache(v: &mut [u8]) {
    v[15] |= 0x80;
}

/// Rewrites a sparse value as dense (the header, cached count included, is kept).
fn to_dense(v: &mut Vec<u8>) -> Result<(), Corrupt> {
    if v[4] == DENSE {
        return Ok(());
    }
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HDR].copy_from_slice(&v[..HDR]);
    dense[4] = DENSE;
    let regs = &mut dense[HDR..];
    sparse_runs(v, |first, run, val| {
        if val > 0 {
            (first..first + run).for_each(|i| dense_set(regs, i, val));
        }
    })?;
    *v = dense;
    Ok(())
}

/// Raises register `index` to `count` if it is lower; whether it was. A sparse value stays
/// sparse unless the value needs more than 5 bits or the value would pass `max_sparse`
/// bytes (Redis's `hllSparseSet`, opcode for opcode).
fn set_register(v: &mut Vec<u8>, index: usize, count: u8, max_sparse: u64) -> Result<bool, Corrupt> {
    if v[4] == DENSE {
        return Ok(dense_raise(&mut v[HDR..], index, count));
    }
    if count > SPARSE_VAL_MAX {
        return promote(v, index, count);
    }
    // The opcode covering `index`, the one before it, and the first register it covers.
    let (mut at, mut first, mut prev) = (HDR, 0, None);
    let mut found = None;
    while at < v.len() {
        let (run, val, len) = sparse_op(v, at);
        if index < first + run {
            found = Some((run, val, len));
            break;
        }
        prev = Some(at);
        at += len;
        first += run;
    }
    let Some((run, val, oplen)) = found else { return Err(Corrupt) };
    let is_val = v[at] & 0x80 != 0;
    if is_val && val >= count {
        return Ok(false);
    }
    if run == 1 {
        // A VAL or ZERO of one register (an XZERO of one is split as below, as in Redis).
        if is_val || oplen == 1 {
            v[at] = val_op(count, 1);
            merge_vals(v, prev.unwrap_or(HDR));
            invalidate_cache(v);
            return Ok(true);
        }
    }
    // Split the opcode: what comes before `index`, `index` itself, what comes after.
    let last = first + run - 1;
    let mut seq = Vec::with_capacity(5);
    if is_val {
        if index != first {
            seq.push(val_op(val, index - first));
        }
        seq.push(val_op(count, 1));
        if index != last {
            seq.push(val_op(val, last - index));
        }
    } else {
        if index != first {
            push_zeros(&mut seq, index - first);
        }
        seq.push(val_op(count, 1));
        if index != last {
            push_zeros(&mut seq, last - index);
        }
    }
    let new_len = v.len() + seq.len() - oplen;
    if seq.len() > oplen && new_len as u64 > max_sparse {
        return promote(v, index, count);
    }
    // (An XZERO cut short by the value's end, in a corrupt value, counts as two bytes, as
    // Redis reads its string terminator as the second: what would go past the end is cut.)
    let end = (at + oplen).min(v.len());
    v.splice(at..end, seq);
    v.truncate(new_len);
    merge_vals(v, prev.unwrap_or(HDR));
    invalidate_cache(v);
    Ok(true)
}

/// Sparse to dense, then the register set there (Redis's `promote:` path).
fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    to_dense(v)?;
    Ok(dense_raise(&mut v[HDR..], index, count))
}

fn dense_raise(regs: &mut [u8], index: usize, count: u8) -> bool {
    if count > dense_get(regs, index) {
        dense_set(regs, index, count);
        true
    } else {
        false
    }
}

/// Joins adjacent VAL opcodes of one value whose lengths fit one opcode, looking at up to
/// five opcodes from `from` (Redis's step 4).
fn merge_vals(v: &mut Vec<u8>, from: usize) {
    let mut at = from;
    let mut scan = 5;
    while at < v.len() && scan > 0 {
        scan -= 1;
        let b = v[at];
        if b & 0xc0 == 0x40 {
            at += 2;
            continue;
        }
        if b & 0xc0 == 0 {
            at += 1;
            continue;
        }
        if at + 1 < v.len() && v[at + 1] & 0x80 != 0 {
            let (l1, v1, _) = sparse_op(v, at);
            let (l2, v2, _) = sparse_op(v, at + 1);
            if v1 == v2 && l1 + l2 <= SPARSE_VAL_MAX_LEN {
                v[at + 1] = val_op(v1, l1 + l2);
                v.remove(at);
                continue;
            }
        }
        at += 1;
    }
}

/// Raises `max[i]` to each register of `v` (a valid HyperLogLog).
fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), Corrupt> {
    if v[4] == DENSE {
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(&v[HDR..], i));
        }
        return Ok(());
    }
    sparse_runs(v, |first, run, val| {
        for m in &mut max[first..first + run] {
            *m = (*m).max(val);
        }
    })
}

/// How many registers hold each value, of a valid HyperLogLog.
fn histogram(v: &[u8]) -> Result<[u32; 64], Corrupt> {
    let mut h = [0u32; 64];
    if v[4] == DENSE {
        (0..REGISTERS).for_each(|i| h[dense_get(&v[HDR..], i) as usize] += 1);
    } else {
        sparse_runs(v, |_, run, val| h[val as usize] += run as u32)?;
    }
    Ok(h)
}

fn raw_histogram(regs: &[u8; REGISTERS]) -> [u32; 64] {
    let mut h = [0u32; 64];
    regs.iter().for_each(|&r| h[r as usize & 63] += 1);
    h
}

fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let (mut y, mut z) = (1.0, x);
    loop {
        x *= x;
        let before = z;
        z += x * y;
        y += y;
        if z == before {
            return z;
        }
    }
}

fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let (mut y, mut z) = (1.0, 1.0 - x);
    loop {
        x = x.sqrt();
        let before = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z == before {
            return z / 3.0;
        }
    }
}

/// Ertl's estimate of the cardinality from the register histogram (Redis's `hllCount`).
fn estimate(h: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - h[Q as usize + 1] as f64) / m);
    for j in (1..=Q as usize).rev() {
        z += h[j] as f64;
        z *= 0.5;
    }
    z += m * sigma(h[0] as f64 / m);
    (0.721_347_520_444_481_7 * m * m / z).round() as u64
}

fn cached_count(v: &[u8]) -> Option<u64> {
    let c = u64::from_le_bytes(v[8..16].try_into().unwrap());
    (c >> 63 == 0).then_some(c)
}

// ---- commands ----

/// A command's failure inside an edit: the reply error, and nothing stored.
fn fail<T>(e: &str) -> (Edit, Result<T, CmdError>) {
    (Edit::Keep, Err(CmdError::new(e)))
}

/// Store if `changed`; else leave the bytes, but raw, as Redis unshares the string.
fn store_if(changed: bool) -> Edit {
    if changed {
        Edit::Store
    } else {
        Edit::Unshare
    }
}

fn max_sparse(ctx: &Ctx<'_>) -> u64 {
    ctx.shared.config.hll_sparse_max_bytes.load(Ordering::Relaxed)
}

/// # Format
/// `PFADD key [element ...]` → 1 if a register changed (or the key was made), else 0.
fn cmd_pfadd(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (db, key, limit) = (ctx.conn.db, ctx.arg(1), max_sparse(ctx));
    let elements: Vec<&[u8]> = (2..ctx.argc()).map(|i| ctx.arg(i)).collect();
    let updated = ctx.h.edit(db, key, |v, existed| {
        let mut updated = !existed;
        if !existed {
            *v = new_hll();
        } else if !is_hll(v) {
            return fail(NOT_HLL);
        }
        for e in &elements {
            let (index, count) = pattern(e);
            match set_register(v, index, count, limit) {
                Ok(changed) => updated |= changed,
                // Redis keeps what the elements before changed (it edits in place).
                Err(Corrupt) => return (store_if(updated), Err(CmdError::new(INVALID))),
            }
        }
        if updated {
            invalidate_cache(v);
        }
        (store_if(updated), Ok(updated))
    })??;
    ctx.conn.unchanged = !updated;
    if updated {
        notify(ctx, STRING, "pfadd", key);
    }
    ctx.out.integer(updated as i64);
    Ok(())
}

/// The value of a key a PF command reads (`lookupKeyRead`: a hit or a miss), checked to be a
/// HyperLogLog; None if missing.
fn read_hll(ctx: &Ctx<'_>, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    match read_string(ctx, key)? {
        Some(v) if !is_hll(&v) => Err(CmdError::new(NOT_HLL)),
        v => Ok(v),
    }
}

/// # Format
/// `PFCOUNT key [key ...]` → the estimated number of distinct elements added to the key, or
/// to any of the keys (their union). One key's count is cached in its header.
fn cmd_pfcount(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.argc() > 2 {
        let mut max = [0u8; REGISTERS];
        for i in 1..ctx.argc() {
            if let Some(v) = read_hll(ctx, ctx.arg(i))? {
                merge_into(&mut max, &v).map_err(|_| CmdError::new(INVALID))?;
            }
        }
        ctx.out.integer(estimate(&raw_histogram(&max)) as i64);
        return Ok(());
    }
    let Some(v) = read_hll(ctx, ctx.arg(1))? else {
        ctx.out.integer(0);
        return Ok(());
    };
    if let Some(n) = cached_count(&v) {
        ctx.out.integer(n as i64);
        return Ok(());
    }
    // Count, and cache the count, under the key's lock (it may have changed since).
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    let n = ctx.h.edit(db, key, |v, existed| {
        if !existed {
            return (Edit::Keep, Ok(0));
        }
        if !is_hll(v) {
            return fail(NOT_HLL);
        }
        if let Some(n) = cached_count(v) {
            return (Edit::Unshare, Ok(n));
        }
        match histogram(v) {
            Ok(h) => {
                let n = estimate(&h);
                v[8..16].copy_from_slice(&n.to_le_bytes());
                (Edit::Store, Ok(n))
            }
            Err(Corrupt) => fail(INVALID),
        }
    })??;
    ctx.stats().dirty.incr();
    ctx.out.integer(n as i64);
    Ok(())
}

/// # Format
/// `PFMERGE destkey [sourcekey ...]` → OK; `destkey` (itself a source too) then holds the
/// union of them all. Dense if any source was.
fn cmd_pfmerge(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut max = [0u8; REGISTERS];
    let mut dense = false;
    for i in 1..ctx.argc() {
        if let Some(v) = read_hll(ctx, ctx.arg(i))? {
            dense |= v[4] == DENSE;
            merge_into(&mut max, &v).map_err(|_| CmdError::new(INVALID))?;
        }
    }
    let (db, key, limit) = (ctx.conn.db, ctx.arg(1), max_sparse(ctx));
    ctx.h.edit(db, key, |v, existed| {
        if !existed {
            *v = new_hll();
        } else if !is_hll(v) {
            return fail(NOT_HLL);
        }
        if dense && to_dense(v).is_err() {
            return fail(INVALID);
        }
        for (i, &m) in max.iter().enumerate() {
            if m > 0 && set_register(v, i, m, limit).is_err() {
                return fail(INVALID);
            }
        }
        invalidate_cache(v);
        (Edit::Store, Ok(()))
    })??;
    // As Redis: "pfadd" (a merge is a mass add).
    notify(ctx, STRING, "pfadd", key);
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`: the 16384 registers (making the value
/// dense), the sparse opcodes as text, `dense` or `sparse`, or 1 if TODENSE converted it.
fn cmd_pfdebug(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let sub = ctx.arg(1).to_ascii_lowercase();
    let (db, key) = (ctx.conn.db, ctx.arg(2));
    let name = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    enum Out {
        Regs(Vec<u8>),
        Text(String),
        Status(&'static str),
        Int(i64),
    }
    let out = ctx.h.edit(db, key, |v, existed| {
        if !existed {
            return fail("ERR The specified key does not exist");
        }
        if !is_hll(v) {
            return fail(NOT_HLL);
        }
        let was_sparse = v[4] == SPARSE;
        match sub.as_slice() {
            b"getreg" | b"todense" => {
                if to_dense(v).is_err() {
                    return fail(INVALID);
                }
                if sub == b"todense" {
                    return (store_if(was_sparse), Ok(Out::Int(was_sparse as i64)));
                }
                let regs = (0..REGISTERS).map(|i| dense_get(&v[HDR..], i)).collect();
                (store_if(was_sparse), Ok(Out::Regs(regs)))
            }
            b"decode" => {
                if !was_sparse {
                    return fail("ERR HLL encoding is not sparse");
                }
                (Edit::Unshare, Ok(Out::Text(decode(v))))
            }
            b"encoding" => (Edit::Unshare, Ok(Out::Status(if was_sparse { "sparse" } else { "dense" }))),
            _ => fail(&format!("ERR Unknown PFDEBUG subcommand '{name}'")),
        }
    })??;
    match out {
        Out::Regs(regs) => {
            ctx.out.array(regs.len());
            regs.iter().for_each(|&r| {
                ctx.out.integer(r as i64);
            });
        }
        Out::Text(t) => {
            ctx.out.bulk(t.as_bytes());
        }
        Out::Status(s) => {
            ctx.out.simple(s.as_bytes());
        }
        Out::Int(n) => {
            ctx.out.integer(n);
        }
    }
    Ok(())
}

/// # Format
/// `PFSELFTEST` → OK, or the first failed check: dense registers read back what was
/// written, and sparse and dense HyperLogLogs fed the same 10M elements agree and stay
/// within six standard errors at every power of ten (Redis's self test).
fn cmd_pfselftest(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64 ^ larder_engine::now_ms();
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut dense = vec![0u8; DENSE_SIZE - HDR];
    let mut bytes = [0u8; REGISTERS];
    for _ in 0..1000 {
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (next() & 63) as u8;
            dense_set(&mut dense, i, *b);
        }
        for (i, &b) in bytes.iter().enumerate() {
            let got = dense_get(&dense, i);
            if got != b {
                return Err(CmdError::new(format!("TESTFAILED Register {i} should be {b} but is {got}")));
            }
        }
    }
    let mut d = new_hll();
    to_dense(&mut d).map_err(|_| CmdError::new("TESTFAILED dense conversion"))?;
    let mut s = new_hll();
    let limit = max_sparse(ctx);
    let relerr = 1.04 / (REGISTERS as f64).sqrt();
    let seed = next();
    let mut checkpoint = 1u64;
    for j in 1..=10_000_000u64 {
        let ele = (j ^ seed).to_le_bytes();
        let (index, count) = pattern(&ele);
        dense_raise(&mut d[HDR..], index, count);
        set_register(&mut s, index, count, limit).map_err(|_| CmdError::new("TESTFAILED corrupt sparse"))?;
        if j != checkpoint {
            continue;
        }
        if j < limit / 2 && s[4] != SPARSE {
            return Err(CmdError::new("TESTFAILED sparse encoding not used"));
        }
        let card = histogram(&d).map(|h| estimate(&h)).unwrap_or(0);
        if histogram(&s).map(|h| estimate(&h)).ok() != Some(card) {
            return Err(CmdError::new("TESTFAILED dense/sparse disagree"));
        }
        let max_err = if j == 10 { 1 } else { (relerr * 6.0 * checkpoint as f64).ceil() as u64 };
        let err = checkpoint.abs_diff(card);
        if err > max_err {
            return Err(CmdError::new(format!("TESTFAILED Too big error. card:{checkpoint} abserr:{err}")));
        }
        checkpoint *= 10;
    }
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_hyperloglog_is_one_xzero_and_counts_zero() {
        let v = new_hll();
        assert_eq!(v, b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x7f\xff");
        assert!(is_hll(&v));
        assert_eq!(decode(&v), "Z:16384");
        assert_eq!(estimate(&histogram(&v).ok().unwrap()), 0);
    }

    #[test]
    fn sparse_opcodes_split_and_merge_as_in_redis() {
        let mut v = new_hll();
        assert!(set_register(&mut v, 100, 3, 3000).ok().unwrap());
        assert_eq!(decode(&v), "Z:100 v:3,1 Z:16283");
        // Lower or equal values change nothing.
        assert!(!set_register(&mut v, 100, 2, 3000).ok().unwrap());
        // Neighbours of one value join into one VAL opcode (up to four registers).
        assert!(set_register(&mut v, 101, 3, 3000).ok().unwrap());
        assert!(set_register(&mut v, 99, 3, 3000).ok().unwrap());
        assert_eq!(decode(&v), "Z:99 v:3,3 Z:16282");
        assert!(set_register(&mut v, 0, 1, 3000).ok().unwrap());
        assert_eq!(decode(&v), "v:1,1 Z:98 v:3,3 Z:16282");
        assert_eq!(cached_count(&v), None, "a change invalidates the cached count");
        // A value above 32 does not fit a VAL opcode: the value turns dense.
        assert!(set_register(&mut v, 5000, 40, 3000).ok().unwrap());
        assert_eq!(v[4], DENSE);
        assert_eq!(v.len(), DENSE_SIZE);
        assert_eq!((dense_get(&v[HDR..], 0), dense_get(&v[HDR..], 100), dense_get(&v[HDR..], 5000)), (1, 3, 40));
        // So does a sparse value that would pass hll-sparse-max-bytes.
        let mut w = new_hll();
        assert!(set_register(&mut w, 7, 1, 18).ok().unwrap());
        assert_eq!(w[4], DENSE);
    }

    #[test]
    fn dense_registers_read_back_and_leave_their_neighbours_alone() {
        let mut regs = vec![0u8; DENSE_SIZE - HDR];
        for i in 0..REGISTERS {
            dense_set(&mut regs, i, (i * 7 % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i * 7 % 64) as u8, "register {i}");
        }
    }

    #[test]
    fn corrupt_sparse_values_are_errors_not_panics() {
        let mut v = new_hll();
        set_register(&mut v, 10, 5, 3000).ok().unwrap();
        for cut in HDR..v.len() {
            let mut bad = v[..cut].to_vec();
            assert!(histogram(&bad).is_err(), "cut at {cut}");
            assert!(to_dense(&mut bad).is_err());
            let _ = set_register(&mut bad, 16000, 2, 3000);
        }
        // An opcode that runs past the last register.
        let mut long = new_hll();
        long.push(0x05);
        assert!(histogram(&long).is_err());
        let mut max = [0u8; REGISTERS];
        assert!(merge_into(&mut max, &long).is_err());
        assert!(!is_hll(b"HYLL\x00\0\0\0\0\0\0\0\0\0\0\0short dense"));
        assert!(!is_hll(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0\x7f\xff"));
    }

    /// Counts Redis 7.0.15 gave for the same elements (PFADD k 0 1 2 ... n-1; PFCOUNT k).
    #[test]
    fn counts_are_redis_counts() {
        for (n, want) in [(1u64, 1u64), (10, 10), (1000, 1001), (100_000, 99_565)] {
            let mut v = new_hll();
            for i in 0..n {
                let (index, count) = pattern(i.to_string().as_bytes());
                set_register(&mut v, index, count, 3000).ok().unwrap();
            }
            assert_eq!(estimate(&histogram(&v).ok().unwrap()), want, "{n} elements");
        }
    }
}
