//! Command families: one file per group, each exporting `COMMANDS`, each command split into
//! an op (engine in, result out) where there is one, and a `cmd_*` handler that parses
//! arguments and writes the reply.

pub mod connection;
pub mod keys;
pub mod list;
pub mod memcache;
pub mod server;
pub mod string;

use crate::command::Spec;

/// Every family's table, joined by [`crate::command::table`].
pub const ALL: &[&[Spec]] = &[connection::COMMANDS, string::COMMANDS, keys::COMMANDS, list::COMMANDS, server::COMMANDS];
