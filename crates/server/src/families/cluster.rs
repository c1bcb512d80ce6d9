//! The cluster and replication commands a client may send to any server: WAIT, READONLY,
//! READWRITE, ASKING, answered as redis-server 7.0.15 answers them with cluster support
//! disabled and no replicas (`replication.c` `waitCommand`, `cluster.c`).

use std::time::Duration;

use crate::blocking::{block_until, OnTimeout};
use crate::command::{parse_i64, CmdError, Ctx, Spec, FAST, LOADING, NOSCRIPT, STALE};

pub const COMMANDS: &[Spec] = &[
    Spec { name: "wait", arity: 3, flags: NOSCRIPT, first_key: 0, last_key: 0, step: 0, group: "generic", summary: "Wait for the synchronous replication of all the write commands sent in the context of the current connection", handler: cmd_wait },
    Spec { name: "readonly", arity: 1, flags: LOADING | STALE | FAST, first_key: 0, last_key: 0, step: 0, group: "cluster", summary: "Enables read queries for a connection to a cluster replica node", handler: cmd_no_cluster },
    Spec { name: "readwrite", arity: 1, flags: LOADING | STALE | FAST, first_key: 0, last_key: 0, step: 0, group: "cluster", summary: "Disables read queries for a connection to a cluster replica node", handler: cmd_no_cluster },
    Spec { name: "asking", arity: 1, flags: FAST, first_key: 0, last_key: 0, step: 0, group: "cluster", summary: "Sent by cluster clients after an -ASK redirect", handler: cmd_no_cluster },
];

/// # Format
/// `WAIT numreplicas timeout` → the number of replicas that acknowledged the client's
/// writes: 0, as there are none. With `numreplicas` 0 or less (or inside EXEC) at once;
/// otherwise after `timeout` milliseconds (0: never), or when CLIENT UNBLOCK ends the wait.
fn cmd_wait(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let replicas = ctx.int(1)?;
    let timeout =
        parse_i64(ctx.arg(2)).ok_or_else(|| CmdError::new("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::new("ERR timeout is negative"));
    }
    if replicas <= 0 || ctx.conn.in_exec {
        ctx.out.integer(0);
        return Ok(());
    }
    block_until(ctx, (timeout > 0).then(|| Duration::from_millis(timeout as u64)), OnTimeout::Zero);
    Ok(())
}

/// # Format
/// `READONLY`, `READWRITE`, `ASKING` → `-ERR This instance has cluster support disabled`.
fn cmd_no_cluster(_: &mut Ctx<'_>) -> Result<(), CmdError> {
    Err(CmdError::new("ERR This instance has cluster support disabled"))
}
