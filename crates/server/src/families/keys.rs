//! Keyspace commands (DEL EXISTS EXPIRE TTL SCAN ...).

use crate::command::Spec;

pub const COMMANDS: &[Spec] = &[];
