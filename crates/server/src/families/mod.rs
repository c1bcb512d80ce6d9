//! Command families: one file per group, each exporting `COMMANDS`, each command split into
//! an op (engine in, result out) where there is one, and a `cmd_*` handler that parses
//! arguments and writes the reply.

pub mod acl;
pub mod bitmap;
pub mod cluster;
pub mod collection;
pub mod connection;
pub mod dump;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod keys;
pub mod list;
pub mod lolwut;
pub mod memcache;
pub mod module;
pub mod multi;
pub mod pubsub;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod string;
pub mod zset;

use crate::command::Spec;

/// Every family's table, joined by [`crate::command::table`].
pub const ALL: &[&[Spec]] = &[
    connection::COMMANDS,
    string::COMMANDS,
    bitmap::COMMANDS,
    hll::COMMANDS,
    keys::COMMANDS,
    dump::COMMANDS,
    cluster::COMMANDS,
    lolwut::COMMANDS,
    list::COMMANDS,
    server::COMMANDS,
    pubsub::COMMANDS,
    multi::COMMANDS,
    scripting::COMMANDS,
    hash::COMMANDS,
    set::COMMANDS,
    sort::COMMANDS,
    zset::COMMANDS,
    geo::COMMANDS,
    module::COMMANDS,
    acl::COMMANDS,
];

/// Where the keys are in a command whose key positions depend on its arguments
/// (MOVABLEKEYS), for COMMAND GETKEYS: argument indices, or None for a command without such
/// a function (its legacy key range is used).
pub fn movable_keys(name: &str, args: &[&[u8]]) -> Option<Vec<usize>> {
    match name {
        "sort" => Some(sort::key_positions(args)),
        "sintercard" | "zunion" | "zinter" | "zdiff" | "zintercard" | "zmpop" | "lmpop" => {
            Some(numkeys_keys(args, false, 1))
        }
        "zunionstore" | "zinterstore" | "zdiffstore" => Some(numkeys_keys(args, true, 2)),
        "blmpop" | "bzmpop" | "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro" => {
            Some(numkeys_keys(args, false, 2))
        }
        "georadius" => Some(geo::key_positions(args, 6)),
        "georadiusbymember" => Some(geo::key_positions(args, 5)),
        "migrate" => Some(dump::key_positions(args)),
        _ => None,
    }
}

/// The keys of a command whose argument `at` counts the keys right after it (and, if `store`,
/// whose argument 1 is a destination key), found as Redis 7.0 finds them. Its key spec reads
/// the count strictly (`string2ll`, not negative) but truncates it to an `int`; if that count
/// names no keys or runs past the end, the command's fallback reads the count with `atoi` and
/// lists the destination last. So `ZUNIONSTORE d 1x a` has the keys `a d`.
fn numkeys_keys(args: &[&[u8]], store: bool, at: usize) -> Vec<usize> {
    let (argc, first) = (args.len() as i64, at as i64 + 1);
    let dest = store.then_some(1);
    if let Some(n) = args.get(at).and_then(|n| crate::command::parse_i64(n)).filter(|&n| n >= 0) {
        let last = first + (n as i32) as i64 - 1;
        if last < argc && last >= first {
            return dest.into_iter().chain(first as usize..=last as usize).collect();
        }
    }
    let n = args.get(at).map_or(0, |n| atoi(n)) as i64;
    if n < 1 || n > argc - first {
        return Vec::new();
    }
    (first as usize..(first + n) as usize).chain(dest).collect()
}

/// C's `atoi` as glibc has it, `(int) strtol(s, NULL, 10)`: leading white space, a sign,
/// then digits up to the first other byte (or NUL); out of `long`'s range saturates.
pub(crate) fn atoi(s: &[u8]) -> i32 {
    let s = &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())];
    let mut i = s.iter().take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')).count();
    let neg = s.get(i) == Some(&b'-');
    if matches!(s.get(i), Some(b'-' | b'+')) {
        i += 1;
    }
    let mut v: i64 = 0;
    for &b in s[i..].iter().take_while(|b| b.is_ascii_digit()) {
        let d = (b - b'0') as i64;
        v = match v.checked_mul(10).and_then(|v| if neg { v.checked_sub(d) } else { v.checked_add(d) }) {
            Some(v) => v,
            None => {
                if neg {
                    i64::MIN
                } else {
                    i64::MAX
                }
            }
        };
        if v == i64::MIN || v == i64::MAX {
            break;
        }
    }
    v as i32
}

#[cfg(test)]
mod tests {
    use super::{atoi, movable_keys};

    fn keys<'a>(args: &[&'a str]) -> Vec<&'a str> {
        let raw: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        movable_keys(args[0], &raw).unwrap().into_iter().map(|i| args[i]).collect()
    }

    /// Each case checked with COMMAND GETKEYS against redis-server 7.0.15.
    #[test]
    fn numkeys_are_read_as_redis_reads_them() {
        assert_eq!(keys(&["zunionstore", "d", "1", "a", "b"]), ["d", "a"]);
        assert_eq!(keys(&["zunionstore", "d", "2", "a", "b"]), ["d", "a", "b"]);
        // No keys, too many, or no number: none (COMMAND GETKEYS's "Invalid arguments").
        for n in ["0", "3", "-1", "-0", "x", "99999999999999999999"] {
            assert_eq!(keys(&["zunionstore", "d", n, "a", "b"]), Vec::<&str>::new(), "{n}");
            assert_eq!(keys(&["zunion", n, "a"]), Vec::<&str>::new(), "{n}");
        }
        // Not a strict integer: the fallback's atoi, with the destination last.
        for n in ["1x", " 1", "+1", "01", "1.5", "\t1"] {
            assert_eq!(keys(&["zunionstore", "d", n, "a", "b"]), ["a", "d"], "{n:?}");
            assert_eq!(keys(&["lmpop", n, "a", "b", "left"]), ["a"], "{n:?}");
            assert_eq!(keys(&["blmpop", "0", n, "a", "b", "left"]), ["a"], "{n:?}");
        }
        // A strict integer truncated to an int: 2^32 + 1 is 1.
        assert_eq!(keys(&["zunionstore", "d", "4294967297", "a", "b"]), ["d", "a"]);
        assert_eq!(keys(&["sintercard", "4294967297", "a", "b"]), ["a"]);
        // The count may take in the arguments after the keys.
        assert_eq!(keys(&["lmpop", "3", "a", "b", "left"]), ["a", "b", "left"]);
        assert_eq!(keys(&["bzmpop", "0", "2", "a", "b", "min"]), ["a", "b"]);
    }

    #[test]
    fn atoi_is_glibcs() {
        assert_eq!(atoi(b"12ab"), 12);
        assert_eq!(atoi(b" \t\n\x0b\x0c\r-7"), -7);
        assert_eq!(atoi(b"1\x002"), 1);
        assert_eq!(atoi(b"- 1"), 0);
        assert_eq!(atoi(b""), 0);
        assert_eq!(atoi(b"4294967297"), 1);
        assert_eq!(atoi(b"99999999999999999999"), -1);
        assert_eq!(atoi(b"-99999999999999999999"), 0);
    }
}
