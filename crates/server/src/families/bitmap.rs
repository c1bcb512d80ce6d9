//! Bitmap commands, as Redis 7.0's `bitops.c`: SETBIT GETBIT BITCOUNT BITPOS BITOP BITFIELD
//! BITFIELD_RO.
//!
//! A bitmap is a string: bit 0 is the most significant bit of its first byte, and a string
//! reads as if zero bytes followed it forever. BITFIELD's integers are stored most
//! significant bit first from any bit offset, so byte-aligned ones are big-endian.
//!
//! Writes go through one engine operation each (`Handle::setbit`, `Handle::edit`), so
//! a BITFIELD's subcommands are applied together, atomically. Reads copy the value out
//! first; BITOP reads its sources, then stores its result (atomic with other commands only
//! inside MULTI, as every multi-key store is).

use std::sync::atomic::Ordering;

use larder_engine::{Edit, SetOptions};

use super::string::{count_lookup, read_string};
use crate::command::{CmdError, Ctx, Spec, DENYOOM, FAST, READONLY, WRITE};
use crate::notify::{notify, GENERIC, STRING};

#[rustfmt::skip]
pub const COMMANDS: &[Spec] = &[
    Spec { name: "setbit", arity: 4, flags: WRITE | DENYOOM, first_key: 1, last_key: 1, step: 1, group: "bitmap", summary: "Sets or clears the bit at offset in the string value stored at key", handler: cmd_setbit },
    Spec { name: "getbit", arity: 3, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "bitmap", summary: "Returns the bit value at offset in the string value stored at key", handler: cmd_getbit },
    Spec { name: "bitcount", arity: -2, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "bitmap", summary: "Count set bits in a string", handler: cmd_bitcount },
    Spec { name: "bitpos", arity: -3, flags: READONLY, first_key: 1, last_key: 1, step: 1, group: "bitmap", summary: "Find first bit set or clear in a string", handler: cmd_bitpos },
    Spec { name: "bitop", arity: -4, flags: WRITE | DENYOOM, first_key: 2, last_key: -1, step: 1, group: "bitmap", summary: "Perform bitwise operations between strings", handler: cmd_bitop },
    Spec { name: "bitfield", arity: -2, flags: WRITE | DENYOOM, first_key: 1, last_key: 1, step: 1, group: "bitmap", summary: "Perform arbitrary bitfield integer operations on strings", handler: cmd_bitfield },
    Spec { name: "bitfield_ro", arity: -2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "bitmap", summary: "Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD", handler: cmd_bitfield_ro },
];

const BIT_OFFSET_ERR: &str = "ERR bit offset is not an integer or out of range";

/// A bit offset as Redis's `getBitOffsetFromArgument` reads it: a non-negative integer whose
/// byte lies within `proto-max-bulk-len`. With `width` (BITFIELD), `#n` means bit
/// `n * width`.
fn bit_offset(ctx: &Ctx<'_>, i: usize, width: Option<u32>) -> Result<u64, CmdError> {
    let max = ctx.shared.config.proto_max_bulk_len.load(Ordering::Relaxed);
    let arg = ctx.arg(i);
    let n = match (arg.strip_prefix(b"#"), width) {
        // Redis multiplies in a C `long long` without checking (in practice it wraps).
        (Some(n), Some(w)) => crate::command::parse_i64(n).map(|n| n.wrapping_mul(w as i64)),
        _ => crate::command::parse_i64(arg),
    };
    match n {
        Some(n) if n >= 0 && ((n as u64) >> 3) < max => Ok(n as u64),
        _ => Err(CmdError::new(BIT_OFFSET_ERR)),
    }
}

/// `BIT` or `BYTE` (any case): whether a range is in bits.
fn range_unit(arg: &[u8]) -> Result<bool, CmdError> {
    if arg.eq_ignore_ascii_case(b"bit") {
        Ok(true)
    } else if arg.eq_ignore_ascii_case(b"byte") {
        Ok(false)
    } else {
        Err(CmdError::syntax())
    }
}

/// The bits `first..=last` that a BITCOUNT or BITPOS range names in a value of `len` bytes,
/// made absolute as Redis does (negative counts from the end, then both ends are clamped to
/// the value), or None if the range is empty. `bits`: the range is in bits, not bytes.
fn bit_range(len: usize, start: i64, end: i64, bits: bool) -> Option<(u64, u64)> {
    let total = if bits { len as i64 * 8 } else { len as i64 };
    let (mut s, mut e) = (start, end);
    if s < 0 {
        s += total;
    }
    if e < 0 {
        e += total;
    }
    let s = s.max(0);
    let e = e.max(0).min(total - 1);
    if s > e {
        return None;
    }
    Some(if bits { (s as u64, e as u64) } else { (s as u64 * 8, e as u64 * 8 + 7) })
}

/// Byte `b`, at index `i` of a value, with only the bits of `first..=last` kept.
fn keep(b: u8, i: u64, first: u64, last: u64) -> u8 {
    let mut b = b;
    if i == first / 8 {
        b &= 0xff >> (first % 8);
    }
    if i == last / 8 {
        b &= 0xff << (7 - last % 8);
    }
    b
}

/// Set bits among bits `first..=last` of `v` (both within it).
fn popcount(v: &[u8], first: u64, last: u64) -> u64 {
    let (fb, lb) = (first / 8, last / 8);
    let edge = |i: u64| keep(v[i as usize], i, first, last).count_ones() as u64;
    if lb == fb {
        return edge(fb);
    }
    edge(fb) + ones(&v[fb as usize + 1..lb as usize]) + edge(lb)
}

/// Set bits in `bytes`, eight bytes at a time.
fn ones(bytes: &[u8]) -> u64 {
    let words = bytes.chunks_exact(8);
    let tail: u64 = words.remainder().iter().map(|b| b.count_ones() as u64).sum();
    words.map(|w| u64::from_le_bytes(w.try_into().unwrap()).count_ones() as u64).sum::<u64>() + tail
}

/// The first bit equal to `bit` among bits `first..=last` of `v` (both within it).
fn first_bit(v: &[u8], bit: bool, first: u64, last: u64) -> Option<u64> {
    // Looks for a 1 in the bytes, inverted when looking for a 0.
    let flip = if bit { 0 } else { 0xff };
    let found = |i: u64| {
        let b = keep(v[i as usize] ^ flip, i, first, last);
        (b != 0).then(|| i * 8 + b.leading_zeros() as u64)
    };
    let (fb, lb) = (first / 8, last / 8);
    if let Some(p) = found(fb) {
        return Some(p);
    }
    if lb == fb {
        return None;
    }
    // The bytes between, skipped eight at a time while they hold no such bit.
    let middle = &v[fb as usize + 1..lb as usize];
    let skip = u64::from_ne_bytes([flip; 8]);
    let whole = middle.chunks_exact(8).take_while(|w| u64::from_ne_bytes((*w).try_into().unwrap()) == skip).count();
    match middle[whole * 8..].iter().position(|&b| b ^ flip != 0) {
        Some(j) => found(fb + 1 + (whole * 8 + j) as u64),
        None => found(lb),
    }
}

/// # Format
/// `SETBIT key offset 0|1` → the bit's old value.
fn cmd_setbit(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let bit = bit_offset(ctx, 2, None)?;
    let on = match ctx.arg(3) {
        b"0" => false,
        b"1" => true,
        _ => return Err(CmdError::new("ERR bit is not an integer or out of range")),
    };
    let (old, changed) = ctx.h.setbit(ctx.conn.db, ctx.arg(1), bit, on)?;
    ctx.conn.unchanged = !changed;
    if changed {
        notify(ctx, STRING, "setbit", ctx.arg(1));
    }
    ctx.out.integer(old as i64);
    Ok(())
}

/// # Format
/// `GETBIT key offset` → 0 or 1.
fn cmd_getbit(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let bit = bit_offset(ctx, 2, None)?;
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    let v = ctx.h.getbit(db, key, bit)?;
    count_lookup(ctx, ctx.arg(1), v == 1 || ctx.h.meta(db, key)?.is_some());
    ctx.out.integer(v as i64);
    Ok(())
}

/// # Format
/// `BITCOUNT key [start end [BYTE|BIT]]` → the number of set bits (in the range).
fn cmd_bitcount(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    // Redis looks the key up before it reads the range: a missing key is 0 whatever follows.
    let Some(v) = read_string(ctx, ctx.arg(1))? else {
        ctx.out.integer(0);
        return Ok(());
    };
    let range = match ctx.argc() {
        2 => bit_range(v.len(), 0, -1, false),
        4 | 5 => {
            let (start, end) = (ctx.int(2)?, ctx.int(3)?);
            if start < 0 && end < 0 && start > end {
                ctx.out.integer(0);
                return Ok(());
            }
            let bits = ctx.argc() == 5 && range_unit(ctx.arg(4))?;
            bit_range(v.len(), start, end, bits)
        }
        _ => return Err(CmdError::syntax()),
    };
    ctx.out.integer(range.map_or(0, |(first, last)| popcount(&v, first, last)) as i64);
    Ok(())
}

/// # Format
/// `BITPOS key bit [start [end [BYTE|BIT]]]` → the position of the first bit set to `bit`
/// (in the range), or -1. A missing key, or a range without an end, reads as followed by
/// zero bits: looking for a 0 there finds the first bit past the end.
fn cmd_bitpos(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let bit = match ctx.int(2)? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::new("ERR The bit argument must be 1 or 0.")),
    };
    let Some(v) = read_string(ctx, ctx.arg(1))? else {
        ctx.out.integer(if bit { -1 } else { 0 });
        return Ok(());
    };
    let (range, end_given) = match ctx.argc() {
        3 => (bit_range(v.len(), 0, -1, false), false),
        4..=6 => {
            let start = ctx.int(3)?;
            // Redis reads the unit before the end.
            let bits = ctx.argc() == 6 && range_unit(ctx.arg(5))?;
            if ctx.argc() >= 5 {
                (bit_range(v.len(), start, ctx.int(4)?, bits), true)
            } else {
                (bit_range(v.len(), start, -1, false), false)
            }
        }
        _ => return Err(CmdError::syntax()),
    };
    let pos = match range {
        None => -1,
        Some((first, last)) => match first_bit(&v, bit, first, last) {
            Some(p) => p as i64,
            None if !bit && !end_given => last as i64 + 1,
            None => -1,
        },
    };
    ctx.out.integer(pos);
    Ok(())
}

/// # Format
/// `BITOP AND|OR|XOR|NOT destkey key [key ...]` → the length of the string stored at
/// `destkey` (the longest source's; missing sources read as empty). An empty result deletes
/// `destkey`.
fn cmd_bitop(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    #[derive(PartialEq)]
    enum Op {
        And,
        Or,
        Xor,
        Not,
    }
    let name = ctx.arg(1);
    let op = if name.eq_ignore_ascii_case(b"and") {
        Op::And
    } else if name.eq_ignore_ascii_case(b"or") {
        Op::Or
    } else if name.eq_ignore_ascii_case(b"xor") {
        Op::Xor
    } else if name.eq_ignore_ascii_case(b"not") {
        Op::Not
    } else {
        return Err(CmdError::syntax());
    };
    if op == Op::Not && ctx.argc() != 4 {
        return Err(CmdError::new("ERR BITOP NOT must be called with a single source key."));
    }
    let mut srcs = Vec::with_capacity(ctx.argc() - 3);
    for i in 3..ctx.argc() {
        srcs.push(read_string(ctx, ctx.arg(i))?.unwrap_or_default());
    }
    let len = srcs.iter().map(Vec::len).max().unwrap_or(0);
    let (db, dest) = (ctx.conn.db, ctx.arg(2));
    if len == 0 {
        // Redis's `dbDelete`, without a lookup first: an expired key is deleted ("del").
        if crate::notify::Replace::delete(ctx.h, db, dest)? {
            notify(ctx, GENERIC, "del", dest);
        }
    } else {
        let mut res = std::mem::take(&mut srcs[0]);
        res.resize(len, 0);
        match op {
            Op::Not => res.iter_mut().for_each(|b| *b = !*b),
            _ => {
                for src in &srcs[1..] {
                    // Bytes past a source's end are zeros: AND clears them, OR and XOR keep them.
                    if op == Op::And {
                        res[src.len()..].fill(0);
                    }
                    for (r, s) in res.iter_mut().zip(src) {
                        match op {
                            Op::And => *r &= s,
                            Op::Or => *r |= s,
                            _ => *r ^= s,
                        }
                    }
                }
            }
        }
        // A new string, in Redis's `raw` encoding whatever its length.
        ctx.h.set(db, dest, &res, &SetOptions { edited: true, ..Default::default() })?;
        notify(ctx, STRING, "set", dest);
    }
    ctx.out.integer(len as i64);
    Ok(())
}

/// What a BITFIELD does when a SET or INCRBY does not fit its integer type.
#[derive(Clone, Copy, PartialEq)]
enum Overflow {
    Wrap,
    Sat,
    Fail,
}

#[derive(Clone, Copy, PartialEq)]
enum FieldOp {
    Get,
    Set(i64),
    IncrBy(i64),
}

/// One BITFIELD subcommand: an integer of `bits` bits (`signed` or not) at bit `offset`.
#[derive(Clone, Copy)]
struct Field {
    op: FieldOp,
    signed: bool,
    bits: u32,
    offset: u64,
    overflow: Overflow,
}

const BITFIELD_TYPE_ERR: &str =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

/// A BITFIELD type, `i1`..`i64` or `u1`..`u63`: (signed, bits).
fn field_type(arg: &[u8]) -> Result<(bool, u32), CmdError> {
    // Redis reads the type as a C string: a NUL ends it.
    let arg = &arg[..arg.iter().position(|&b| b == 0).unwrap_or(arg.len())];
    let signed = match arg.first() {
        Some(b'i') => true,
        Some(b'u') => false,
        _ => return Err(CmdError::new(BITFIELD_TYPE_ERR)),
    };
    match crate::command::parse_i64(&arg[1..]) {
        Some(n) if n >= 1 && n <= if signed { 64 } else { 63 } => Ok((signed, n as u32)),
        _ => Err(CmdError::new(BITFIELD_TYPE_ERR)),
    }
}

/// Parses BITFIELD's subcommands, in Redis's order (so the same bad request gets the same
/// error).
fn parse_fields(ctx: &Ctx<'_>) -> Result<Vec<Field>, CmdError> {
    let mut fields = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut j = 2;
    while j < ctx.argc() {
        let (sub, left) = (ctx.arg(j), ctx.argc() - j - 1);
        let is = |name: &str| sub.eq_ignore_ascii_case(name.as_bytes());
        let get = is("get") && left >= 2;
        if !get && !((is("set") || is("incrby")) && left >= 3) {
            if is("overflow") && left >= 1 {
                let t = ctx.arg(j + 1);
                overflow = if t.eq_ignore_ascii_case(b"wrap") {
                    Overflow::Wrap
                } else if t.eq_ignore_ascii_case(b"sat") {
                    Overflow::Sat
                } else if t.eq_ignore_ascii_case(b"fail") {
                    Overflow::Fail
                } else {
                    return Err(CmdError::new("ERR Invalid OVERFLOW type specified"));
                };
                j += 2;
                continue;
            }
            return Err(CmdError::syntax());
        }
        let (signed, bits) = field_type(ctx.arg(j + 1))?;
        let offset = bit_offset(ctx, j + 2, Some(bits))?;
        let op = if get {
            FieldOp::Get
        } else if is("set") {
            FieldOp::Set(ctx.int(j + 3)?)
        } else {
            FieldOp::IncrBy(ctx.int(j + 3)?)
        };
        fields.push(Field { op, signed, bits, offset, overflow });
        j += if get { 3 } else { 4 };
    }
    Ok(fields)
}

/// The unsigned integer of `bits` bits at bit `offset` of `v` (bits past its end are 0).
fn get_unsigned(v: &[u8], offset: u64, bits: u32) -> u64 {
    (offset..offset + bits as u64).fold(0, |acc, o| {
        let byte = v.get((o / 8) as usize).copied().unwrap_or(0);
        acc << 1 | ((byte >> (7 - o % 8)) & 1) as u64
    })
}

/// The same, read as two's complement.
fn get_signed(v: &[u8], offset: u64, bits: u32) -> i64 {
    let u = get_unsigned(v, offset, bits);
    if bits < 64 && u & (1 << (bits - 1)) != 0 {
        (u | u64::MAX << bits) as i64
    } else {
        u as i64
    }
}

/// Stores the low `bits` bits of `value` at bit `offset` of `v` (which holds them).
fn set_bits(v: &mut [u8], offset: u64, bits: u32, value: u64) {
    for j in 0..bits as u64 {
        let (o, bit) = (offset + j, (value >> (bits as u64 - 1 - j)) & 1);
        let mask = 0x80u8 >> (o % 8);
        let b = &mut v[(o / 8) as usize];
        *b = if bit == 1 { *b | mask } else { *b & !mask };
    }
}

/// Redis's `checkUnsignedBitfieldOverflow`: whether `value + incr` fits `bits` unsigned bits,
/// and if not, the value to store instead (None for FAIL).
fn unsigned_overflow(value: u64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<u64>> {
    let max = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let max_incr = max.wrapping_sub(value) as i64;
    let min_incr = value.wrapping_neg() as i64;
    let wrap = || value.wrapping_add(incr as u64) & !(u64::MAX << bits);
    let over = value > max || (incr > 0 && incr > max_incr);
    let under = !over && incr < 0 && incr < min_incr;
    if !over && !under {
        return None;
    }
    Some(match ow {
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(if over { max } else { 0 }),
        Overflow::Fail => None,
    })
}

/// Redis's `checkSignedBitfieldOverflow`: the same for `bits` signed bits.
fn signed_overflow(value: i64, incr: i64, bits: u32, ow: Overflow) -> Option<Option<i64>> {
    let max = if bits == 64 { i64::MAX } else { (1i64 << (bits - 1)) - 1 };
    let min = -max - 1;
    let max_incr = (max as u64).wrapping_sub(value as u64) as i64;
    let min_incr = min.wrapping_sub(value);
    let over = value > max || (bits != 64 && incr > max_incr) || (value >= 0 && incr > 0 && incr > max_incr);
    let under = !over && (value < min || (bits != 64 && incr < min_incr) || (value < 0 && incr < 0 && incr < min_incr));
    if !over && !under {
        return None;
    }
    let wrap = || {
        let c = (value as u64).wrapping_add(incr as u64);
        if bits == 64 {
            c as i64
        } else if c & (1 << (bits - 1)) != 0 {
            (c | u64::MAX << bits) as i64
        } else {
            (c & !(u64::MAX << bits)) as i64
        }
    };
    Some(match ow {
        Overflow::Wrap => Some(wrap()),
        Overflow::Sat => Some(if over { max } else { min }),
        Overflow::Fail => None,
    })
}

/// Runs one SET or INCRBY on `v`: the reply (the old value for SET, the new one for INCRBY;
/// None when OVERFLOW FAIL refused it) and whether the bits changed. As in Redis, a SET's
/// value is checked as itself plus 0, an INCRBY as the old value plus the increment.
fn write_field(v: &mut [u8], f: &Field) -> (Option<i64>, bool) {
    let (x, incr) = match f.op {
        FieldOp::Set(x) => (x, false),
        FieldOp::IncrBy(d) => (d, true),
        FieldOp::Get => unreachable!("GET does not write"),
    };
    let (reply, old, new) = if f.signed {
        let old = get_signed(v, f.offset, f.bits);
        let (base, d) = if incr { (old, x) } else { (x, 0) };
        let new = match signed_overflow(base, d, f.bits, f.overflow) {
            None => base.wrapping_add(d),
            Some(Some(limit)) => limit,
            Some(None) => return (None, false),
        };
        (if incr { new } else { old }, old as u64, new as u64)
    } else {
        let old = get_unsigned(v, f.offset, f.bits);
        let (base, d) = if incr { (old, x) } else { (x as u64, 0) };
        let new = match unsigned_overflow(base, d, f.bits, f.overflow) {
            None => base.wrapping_add(d as u64),
            Some(Some(limit)) => limit,
            Some(None) => return (None, false),
        };
        ((if incr { new } else { old }) as i64, old, new)
    };
    set_bits(v, f.offset, f.bits, new);
    (Some(reply), old != new)
}

/// A GET of `f` on `v`.
fn read_field(v: &[u8], f: &Field) -> i64 {
    if f.signed {
        get_signed(v, f.offset, f.bits)
    } else {
        get_unsigned(v, f.offset, f.bits) as i64
    }
}

/// # Format
/// `BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset increment]
/// [OVERFLOW WRAP|SAT|FAIL] ...` → one reply per GET, SET or INCRBY: the value read, the
/// old value, the new value, or nil where OVERFLOW FAIL refused a write. A type is `i1`..
/// `i64` or `u1`..`u63`; an offset `#n` counts in integers of the type. A BITFIELD that
/// writes creates the key, or grows it with zero bytes, up to the last bit it writes, even
/// if every write fails.
fn cmd_bitfield(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    bitfield(ctx, false)
}

/// # Format
/// `BITFIELD_RO key [GET type offset] ...` → BITFIELD with GETs only.
fn cmd_bitfield_ro(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    bitfield(ctx, true)
}

fn bitfield(ctx: &mut Ctx<'_>, read_only: bool) -> Result<(), CmdError> {
    let fields = parse_fields(ctx)?;
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    let last_write = fields.iter().filter(|f| f.op != FieldOp::Get).map(|f| f.offset + f.bits as u64 - 1).max();
    let (changed, replies): (bool, Vec<Option<i64>>) = match last_write {
        None => {
            let v = read_string(ctx, key)?.unwrap_or_default();
            (false, fields.iter().map(|f| Some(read_field(&v, f))).collect())
        }
        Some(_) if read_only => return Err(CmdError::new("ERR BITFIELD_RO only supports the GET subcommand")),
        Some(last) => {
            let len = (last / 8 + 1) as usize;
            ctx.h.edit(db, key, |v, existed| {
                let grown = !existed || v.len() < len;
                if v.len() < len {
                    v.resize(len, 0);
                }
                let mut changed = false;
                let replies = fields
                    .iter()
                    .map(|f| match f.op {
                        FieldOp::Get => Some(read_field(v, f)),
                        _ => {
                            let (r, c) = write_field(v, f);
                            changed |= c;
                            r
                        }
                    })
                    .collect();
                let what = if grown || changed { Edit::Store } else { Edit::Unshare };
                (what, (grown || changed, replies))
            })?
        }
    };
    ctx.conn.unchanged = !changed;
    ctx.out.array(replies.len());
    for r in replies {
        match r {
            Some(n) => ctx.out.integer(n),
            None => ctx.out.null(),
        };
    }
    if changed {
        notify(ctx, STRING, "setbit", key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit `i` of `v`, the slow way.
    fn bit(v: &[u8], i: u64) -> bool {
        v[(i / 8) as usize] & (0x80 >> (i % 8)) != 0
    }

    #[test]
    fn popcount_and_first_bit_match_a_bit_by_bit_walk() {
        let mut zeros = [0u8; 30];
        zeros[25] = 0x10;
        let mut ones = [0xffu8; 30];
        ones[27] = 0xfb;
        let values: [&[u8]; 7] =
            [b"\x00", b"\xff\x00\xff", b"\x81\x7e\x00\x01", b"foobar", b"\x00\x00\x00\x00\x80", &zeros, &ones];
        for v in values {
            let n = v.len() as u64 * 8;
            for first in 0..n {
                for last in first..n {
                    let range = first..=last;
                    assert_eq!(popcount(v, first, last), range.clone().filter(|&i| bit(v, i)).count() as u64);
                    for b in [false, true] {
                        let want = range.clone().find(|&i| bit(v, i) == b);
                        assert_eq!(first_bit(v, b, first, last), want, "{v:?} {first}..={last} bit {b}");
                    }
                }
            }
        }
    }

    #[test]
    fn ranges_are_made_absolute_and_clamped() {
        assert_eq!(bit_range(6, 0, -1, false), Some((0, 47)));
        assert_eq!(bit_range(6, -2, -1, false), Some((32, 47)));
        assert_eq!(bit_range(6, 5, 30, true), Some((5, 30)));
        assert_eq!(bit_range(6, -100, 100, true), Some((0, 47)));
        assert_eq!(bit_range(6, 3, 2, false), None);
        assert_eq!(bit_range(0, 0, -1, false), None);
        assert_eq!(bit_range(6, i64::MIN, i64::MAX, false), Some((0, 47)));
    }

    #[test]
    fn fields_read_back_what_was_written_at_any_offset() {
        let mut v = vec![0u8; 20];
        for bits in 1..=64u32 {
            for offset in [0u64, 1, 7, 8, 13, 63, 64, 90] {
                let value = 0xdead_beef_cafe_f00du64 >> (64 - bits);
                set_bits(&mut v, offset, bits, value);
                assert_eq!(get_unsigned(&v, offset, bits), value, "u{bits} at {offset}");
                let signed = if bits < 64 && value >> (bits - 1) & 1 == 1 { value | u64::MAX << bits } else { value };
                assert_eq!(get_signed(&v, offset, bits), signed as i64, "i{bits} at {offset}");
            }
        }
        // Past the end reads as zeros.
        assert_eq!(get_unsigned(b"\xff", 4, 8), 0xf0);
    }

    /// Overflow checks against arithmetic in i128: None when `base + incr` fits, else the
    /// wrapped value, the saturated one, or a refusal.
    #[test]
    fn overflow_checks_agree_with_wide_arithmetic() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let edges = [0i64, 1, -1, 2, 127, 128, -128, -129, 255, 256, i64::MAX, i64::MIN, i64::MAX - 1, i64::MIN + 1];
        for bits in [1u32, 2, 5, 8, 16, 31, 32, 62, 63, 64] {
            let (smin, smax) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
            let umax = (1i128 << bits.min(63)) - 1;
            for _ in 0..2000 {
                let r = next();
                let pick = |r: u64| {
                    if r.is_multiple_of(3) {
                        edges[(r / 3 % edges.len() as u64) as usize]
                    } else {
                        r as i64 >> (r % 64)
                    }
                };
                let (a, d) = (pick(r), pick(next()));
                // Signed: an INCRBY of an in-range value, or a SET (incr 0) of any value.
                let base = if r.is_multiple_of(2) { (a as i128).clamp(smin, smax) as i64 } else { a };
                let incr = if r.is_multiple_of(2) { d } else { 0 };
                let sum = base as i128 + incr as i128;
                let wrapped = {
                    let m = sum.rem_euclid(1i128 << bits);
                    (if m > smax { m - (1i128 << bits) } else { m }) as i64
                };
                // Redis's quirk, kept: a SET of a value so negative that `max - value`
                // overflows an i64 counts as too large, and saturates to the maximum.
                let high = sum > smax || (bits != 64 && smax - base as i128 > i64::MAX as i128);
                let want = |ow| match ow {
                    _ if (smin..=smax).contains(&sum) => None,
                    Overflow::Wrap => Some(Some(wrapped)),
                    Overflow::Sat => Some(Some(if high { smax as i64 } else { smin as i64 })),
                    Overflow::Fail => Some(None),
                };
                for ow in [Overflow::Wrap, Overflow::Sat, Overflow::Fail] {
                    assert_eq!(signed_overflow(base, incr, bits, ow), want(ow), "i{bits} {base} + {incr}");
                }
                if bits == 64 {
                    continue;
                }
                let ubase = if r.is_multiple_of(2) { (a as i128).rem_euclid(umax + 1) as u64 } else { a as u64 };
                let sum = ubase as i128 + incr as i128;
                let want = |ow| match ow {
                    _ if (0..=umax).contains(&sum) => None,
                    Overflow::Wrap => Some(Some(sum.rem_euclid(umax + 1) as u64)),
                    Overflow::Sat => Some(Some(if sum > umax { umax as u64 } else { 0 })),
                    Overflow::Fail => Some(None),
                };
                for ow in [Overflow::Wrap, Overflow::Sat, Overflow::Fail] {
                    assert_eq!(unsigned_overflow(ubase, incr, bits, ow), want(ow), "u{bits} {ubase} + {incr}");
                }
            }
        }
    }
}
