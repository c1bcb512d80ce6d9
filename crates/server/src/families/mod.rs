//! Command families: one file per group, each exporting `COMMANDS`, each command split into
//! an op (engine in, result out) where there is one, and a `cmd_*` handler that parses
//! arguments and writes the reply.

pub mod collection;
pub mod connection;
pub mod hash;
pub mod keys;
pub mod list;
pub mod memcache;
pub mod multi;
pub mod pubsub;
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
    keys::COMMANDS,
    list::COMMANDS,
    server::COMMANDS,
    pubsub::COMMANDS,
    multi::COMMANDS,
    hash::COMMANDS,
    set::COMMANDS,
    sort::COMMANDS,
    zset::COMMANDS,
];

/// Where the keys are in a command whose key positions depend on its arguments
/// (MOVABLEKEYS), for COMMAND GETKEYS: argument indices, or None for a command without such
/// a function (its legacy key range is used).
pub fn movable_keys(name: &str, args: &[&[u8]]) -> Option<Vec<usize>> {
    match name {
        "sort" => Some(sort::key_positions(args)),
        "sintercard" => Some(set::sintercard_key_positions(args)),
        "zunion" | "zinter" | "zdiff" | "zintercard" | "zmpop" => Some(zset::numkeys_key_positions(args, 1)),
        "zunionstore" | "zinterstore" | "zdiffstore" => {
            let mut v = vec![1];
            v.extend(zset::numkeys_key_positions(args, 2));
            Some(v)
        }
        "lmpop" => Some(list::mpop_key_positions(args, 1)),
        "blmpop" => Some(list::mpop_key_positions(args, 2)),
        "bzmpop" => Some(zset::numkeys_key_positions(args, 2)),
        _ => None,
    }
}
