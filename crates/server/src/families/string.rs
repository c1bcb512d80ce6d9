//! String commands (GET SET ... arrive in full with the string family).

use std::sync::atomic::Ordering;

use larder_engine::SetOptions;

use crate::command::{CmdError, Ctx, Spec, DENYOOM, FAST, READONLY, WRITE};

pub const COMMANDS: &[Spec] = &[
    Spec { name: "get", arity: 2, flags: READONLY | FAST, first_key: 1, last_key: 1, step: 1, group: "string", summary: "Returns the string value of a key.", handler: cmd_get },
    Spec { name: "set", arity: -3, flags: WRITE | DENYOOM, first_key: 1, last_key: 1, step: 1, group: "string", summary: "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.", handler: cmd_set },
];

/// # Format
/// `GET key` → bulk string or null.
fn cmd_get(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let key = ctx.arg(1);
    let db = ctx.conn.db;
    // Reply straight from the arena into the output buffer: the header is written after the
    // value is copied, once its length is known.
    let buf = ctx.out.buf();
    let start = buf.len();
    match ctx.h.get_into(db, key, buf)? {
        Some(_) => {
            let value = buf.split_off(start);
            ctx.stats().keyspace_hits.fetch_add(1, Ordering::Relaxed);
            ctx.out.bulk(&value);
        }
        None => {
            ctx.stats().keyspace_misses.fetch_add(1, Ordering::Relaxed);
            ctx.out.null();
        }
    }
    Ok(())
}

/// # Format
/// `SET key value` → `+OK`.
fn cmd_set(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (key, value, db) = (ctx.arg(1), ctx.arg(2), ctx.conn.db);
    ctx.h.set(db, key, value, &SetOptions::default())?;
    ctx.out.ok();
    Ok(())
}
