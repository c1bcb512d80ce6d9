//! MODULE and REPLICAOF / SLAVEOF, as a Redis 7.0 without modules or replication answers
//! them: MODULE LIST is empty and loading fails as a module that does not load fails;
//! REPLICAOF NO ONE succeeds (Larder is always a master) and naming a master is an error,
//! since Larder cannot replicate from one.
//!
//! MODULE LOAD, LOADEX and UNLOAD are protected by `enable-module-command` (default `no`), as
//! DEBUG is by `enable-debug-command`: see [`protected`].

use crate::command::{CmdError, Ctx, Spec, ADMIN, LOADING, NOSCRIPT, NO_ASYNC_LOADING, STALE};
use crate::families::connection::cmd_container;
use crate::families::server::{reply_help, spec};

const PROTECTED_ADMIN: u32 = NO_ASYNC_LOADING | ADMIN | NOSCRIPT;
const REPLICAOF_FLAGS: u32 = NO_ASYNC_LOADING | ADMIN | NOSCRIPT | STALE;
const REPLICAOF_SUMMARY: &str = "Make the server a replica of another instance, or promote it as master.";

pub const COMMANDS: &[Spec] = &[
    spec("module", -2, 0, "server", "A container for module commands", cmd_container),
    spec("replicaof", 3, REPLICAOF_FLAGS, "server", REPLICAOF_SUMMARY, cmd_replicaof),
    spec("slaveof", 3, REPLICAOF_FLAGS, "server", REPLICAOF_SUMMARY, cmd_replicaof),
];

pub const SUBCOMMANDS: &[Spec] = &[
    spec("module|list", 2, ADMIN | NOSCRIPT, "server", "List all modules loaded by the server", cmd_module_list),
    spec("module|load", -3, PROTECTED_ADMIN, "server", "Load a module", cmd_module_load),
    spec("module|loadex", -3, PROTECTED_ADMIN, "server", "Load a module with extended parameters", cmd_module_load),
    spec("module|unload", 3, PROTECTED_ADMIN, "server", "Unload a module", cmd_module_unload),
    spec(
        "module|help",
        2,
        LOADING | STALE,
        "server",
        "Show helpful text about the different subcommands",
        cmd_module_help,
    ),
];

/// Refuses a protected command (DEBUG; MODULE LOAD, LOADEX, UNLOAD) unless `option`
/// (`enable-debug-command`, `enable-module-command`) allows it for this client: `yes`, or
/// `local` and the client came from a loopback address, as Redis's `allowProtectedAction`.
pub(crate) fn protected(ctx: &Ctx<'_>, command: &str, option: &str) -> Result<(), CmdError> {
    let allowed = match ctx.shared.config.get(option).as_deref() {
        Some("yes") => true,
        Some("local") => is_local(&ctx.conn.info.addr),
        _ => false,
    };
    if allowed {
        return Ok(());
    }
    Err(CmdError::new(format!(
        "ERR {command} command not allowed. If the {option} option is set to \"local\", you can run it from a \
         local connection, otherwise you need to set this option in the configuration file, and then restart the \
         server."
    )))
}

/// Whether a client's address (`ip:port`, `[ip6]:port`) is a loopback one.
fn is_local(addr: &str) -> bool {
    addr.parse::<std::net::SocketAddr>().is_ok_and(|a| a.ip().is_loopback())
}

/// # Format
/// `MODULE LIST` → an empty array: Larder loads no modules.
fn cmd_module_list(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    ctx.out.array(0);
    Ok(())
}

/// # Format
/// `MODULE LOAD path [arg ...]`, `MODULE LOADEX path ...` → the error of a module that fails
/// to load (Larder cannot load Redis modules), once `enable-module-command` allows it.
fn cmd_module_load(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    protected(ctx, "MODULE", "enable-module-command")?;
    tracing::warn!(
        "MODULE {}: Larder cannot load Redis modules ({})",
        String::from_utf8_lossy(ctx.arg(1)).to_ascii_uppercase(),
        String::from_utf8_lossy(ctx.arg(2))
    );
    Err(CmdError::new("ERR Error loading the extension. Please check the server logs."))
}

/// # Format
/// `MODULE UNLOAD name` → no module has that name.
fn cmd_module_unload(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    protected(ctx, "MODULE", "enable-module-command")?;
    Err(CmdError::new("ERR Error unloading module: no such module with that name"))
}

fn cmd_module_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "MODULE",
        &[
            "LIST",
            "    Return a list of loaded modules.",
            "LOAD <path> [<arg> ...]",
            "    Load a module library from <path>, passing to it any optional arguments.",
            "LOADEX <path> [[CONFIG NAME VALUE] [CONFIG NAME VALUE]] [ARGS ...]",
            "    Load a module library from <path>, while passing it module configurations and optional arguments.",
            "UNLOAD <name>",
            "    Unload a module.",
        ],
    );
    Ok(())
}

/// # Format
/// `REPLICAOF NO ONE` → `+OK` (Larder is a master already); `REPLICAOF host port` → Redis's
/// port check, then an error: Larder has no replication.
fn cmd_replicaof(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.arg(1).eq_ignore_ascii_case(b"no") && ctx.arg(2).eq_ignore_ascii_case(b"one") {
        ctx.out.ok();
        return Ok(());
    }
    match crate::command::parse_i64(ctx.arg(2)) {
        Some(p) if (0..=65535).contains(&p) => {}
        _ => return Err(CmdError::new("ERR Invalid master port")),
    }
    let name = String::from_utf8_lossy(ctx.arg(0)).to_ascii_uppercase();
    Err(CmdError::new(format!("ERR {name} is not available: this server has no replication yet")))
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_addresses_are_local() {
        assert!(super::is_local("127.0.0.1:5000"));
        assert!(super::is_local("[::1]:5000"));
        assert!(!super::is_local("10.0.0.1:5000"));
        assert!(!super::is_local("[2001:db8::1]:5000"));
        assert!(!super::is_local(""));
    }
}
