//! Connection commands: PING ECHO QUIT SELECT (HELLO, CLIENT, RESET arrive with the server
//! family).

use crate::command::{CmdError, Ctx, Spec, FAST, LOADING, STALE};

pub const COMMANDS: &[Spec] = &[
    Spec { name: "ping", arity: -1, flags: FAST | STALE, first_key: 0, last_key: 0, step: 0, group: "connection", summary: "Returns the server's liveliness response.", handler: cmd_ping },
    Spec { name: "echo", arity: 2, flags: FAST | LOADING | STALE, first_key: 0, last_key: 0, step: 0, group: "connection", summary: "Returns the given string.", handler: cmd_echo },
    Spec { name: "quit", arity: -1, flags: FAST | LOADING | STALE, first_key: 0, last_key: 0, step: 0, group: "connection", summary: "Closes the connection.", handler: cmd_quit },
    Spec { name: "select", arity: 2, flags: FAST | LOADING | STALE, first_key: 0, last_key: 0, step: 0, group: "connection", summary: "Changes the selected database.", handler: cmd_select },
];

/// # Format
/// `PING [message]` → `+PONG` or the message as a bulk string.
fn cmd_ping(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    match ctx.argc() {
        1 => {
            ctx.out.simple(b"PONG");
        }
        2 => {
            let m = ctx.arg(1);
            ctx.out.bulk(m);
        }
        _ => return Err(CmdError::new("ERR wrong number of arguments for 'ping' command")),
    }
    Ok(())
}

/// # Format
/// `ECHO message` → the message.
fn cmd_echo(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let m = ctx.arg(1);
    ctx.out.bulk(m);
    Ok(())
}

/// # Format
/// `QUIT` → `+OK`, then the connection closes.
fn cmd_quit(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    ctx.out.ok();
    ctx.conn.close = true;
    Ok(())
}

/// # Format
/// `SELECT index` → `+OK`.
fn cmd_select(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let db = ctx.int(1)?;
    if db < 0 || db >= ctx.shared.store.databases() as i64 {
        return Err(CmdError::new("ERR DB index is out of range"));
    }
    ctx.conn.db = db as u32;
    ctx.conn.info.db.store(db as u32, std::sync::atomic::Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}
