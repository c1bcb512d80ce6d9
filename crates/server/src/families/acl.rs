//! The ACL command (Redis 7.0's subcommands: SETUSER GETUSER DELUSER USERS LIST WHOAMI CAT
//! GENPASS LOG DRYRUN LOAD SAVE HELP) and what the dispatcher, EXEC, SORT and the
//! connection commands call for ACLs: the check with its ACL LOG entry, and the closing of
//! a user's clients. Users and rules are in [`crate::acl`].

use std::sync::Arc;

use crate::acl::{Context, Denied, LogEntry, LogValue, Reason, User};
use crate::command::{table, CmdError, Ctx, Handler, Spec, ADMIN, LOADING, NOSCRIPT, STALE};
use crate::families::connection::cmd_container;
use crate::families::server::reply_help;
use crate::Shared;

const fn spec(name: &'static str, arity: i32, flags: u32, summary: &'static str, handler: Handler) -> Spec {
    Spec { name, arity, flags, first_key: 0, last_key: 0, step: 0, group: "server", summary, handler }
}

const AS: u32 = ADMIN | NOSCRIPT | LOADING | STALE;
const S: u32 = NOSCRIPT | LOADING | STALE;

pub const COMMANDS: &[Spec] = &[spec("acl", -2, 0, "A container for Access List Control commands ", cmd_container)];

pub const SUBCOMMANDS: &[Spec] = &[
    spec("acl|cat", -2, S, "List the ACL categories or the commands inside a category", cmd_cat),
    spec("acl|genpass", -2, S, "Generate a pseudorandom secure password to use for ACL users", cmd_genpass),
    spec("acl|help", 2, LOADING | STALE, "Show helpful text about the different subcommands", cmd_help),
    spec("acl|save", 2, AS, "Save the current ACL rules in the configured ACL file", cmd_save),
    spec("acl|getuser", 3, AS, "Get the rules for a specific ACL user", cmd_getuser),
    spec("acl|setuser", -3, AS, "Modify or create the rules for a specific ACL user", cmd_setuser),
    spec("acl|deluser", -3, AS, "Remove the specified ACL users and the associated rules", cmd_deluser),
    spec("acl|log", -2, AS, "List latest events denied because of ACLs in place", cmd_log),
    spec("acl|users", 2, AS, "List the username of all the configured ACL rules", cmd_users),
    spec(
        "acl|dryrun",
        -4,
        AS,
        "Returns whether the user can execute the given command without executing the command.",
        cmd_dryrun,
    ),
    spec("acl|list", 2, AS, "List the current ACL rules in ACL config file format", cmd_list),
    spec("acl|load", 2, AS, "Reload the ACLs from the configured ACL file", cmd_load),
    spec("acl|whoami", 2, S, "Return the name of the user associated to the current connection", cmd_whoami),
];

/// The request's arguments as slices.
fn args<'a>(ctx: &Ctx<'a>) -> Vec<&'a [u8]> {
    ctx.argv.iter().collect()
}

/// Checks command `i` of the request against the connection's user; a refusal is logged
/// (ACL LOG) in `context`. The dispatcher calls it for a user that is not open.
pub(crate) fn check(ctx: &mut Ctx<'_>, i: usize, context: Context) -> Result<(), Denied> {
    let a = args(ctx);
    let r = ctx.conn.user.rules().check(i, &a);
    if let Err(d) = r {
        let (reason, object) = match d {
            Denied::Command => (Reason::Command, table().specs[i].name.as_bytes().to_vec()),
            Denied::Key(p) => (Reason::Key, a[p].to_vec()),
            Denied::Channel(p) => (Reason::Channel, a[p].to_vec()),
        };
        log(ctx, reason, context, object, None);
    }
    r
}

/// Adds an ACL LOG entry for the connection (its user, unless `username` names another).
pub(crate) fn log(ctx: &Ctx<'_>, reason: Reason, context: Context, object: Vec<u8>, username: Option<Vec<u8>>) {
    let max = ctx.shared.config.get("acllog-max-len").and_then(|v| v.parse().ok()).unwrap_or(128);
    let entry = LogEntry {
        count: 1,
        reason,
        context,
        object,
        username: username.unwrap_or_else(|| ctx.conn.user.name.clone()),
        ms: larder_engine::now_ms(),
        client_info: crate::families::connection::client_line(&ctx.conn.info, ctx.shared),
    };
    ctx.shared.acl.log(entry, max);
}

/// Whether the connection's user may read every key with command `i` (SORT's BY and GET
/// patterns: Redis's `ACLUserCheckCmdWithUnrestrictedKeyAccess`).
pub(crate) fn reads_all_keys(ctx: &Ctx<'_>, i: usize) -> bool {
    ctx.conn.user.is_open() || ctx.conn.user.rules().check_all_keys(i, &args(ctx), crate::acl::PERM_R)
}

/// Closes every client authenticated as one of `users` (Redis's `ACLFreeUserAndKillClients`):
/// the calling connection after its reply, the others at once.
fn close_clients(ctx: &mut Ctx<'_>, users: &[Arc<User>]) {
    if users.is_empty() {
        return;
    }
    let default = &ctx.shared.acl.default;
    let victims: Vec<_> = clients(ctx.shared)
        .into_iter()
        .filter(|c| users.iter().any(|u| !Arc::ptr_eq(u, default) && c.is_user(u, default)))
        .collect();
    close(ctx, victims);
}

fn clients(shared: &Shared) -> Vec<Arc<crate::ClientInfo>> {
    shared.clients.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
}

fn close(ctx: &mut Ctx<'_>, victims: Vec<Arc<crate::ClientInfo>>) {
    if victims.is_empty() {
        return;
    }
    for c in &victims {
        ctx.shared.kill_client(c);
        if c.id == ctx.conn.id {
            ctx.conn.close = true;
        }
    }
    ctx.shared.wake_all();
}

/// After ACL SETUSER changed `user`'s rules from `old`: closes its subscribers that hold a
/// channel or pattern the new rules no longer allow (Redis's `ACLKillPubsubClientsIfNeeded`).
fn close_subscribers(ctx: &mut Ctx<'_>, user: &Arc<User>, old: &crate::acl::Rules) {
    let new = user.rules().clone();
    let Some(lost) = crate::acl::loses_channels(old, &new) else { return };
    let default = &ctx.shared.acl.default;
    let mut victims: Vec<Arc<crate::ClientInfo>> = Vec::new();
    ctx.shared.pubsub.each_subscription(|info, kind, name| {
        let pattern = kind == crate::families::pubsub::Kind::Pattern;
        if info.is_user(user, default) && lost(name, pattern) && !victims.iter().any(|v| v.id == info.id) {
            victims.push(info.clone());
        }
    });
    close(ctx, victims);
}

/// # Format
/// `ACL SETUSER username [rule ...]` → `+OK`, or the first bad rule's error (nothing changes).
fn cmd_setuser(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let name = ctx.arg(2);
    if crate::acl::has_spaces(name) {
        return Err(CmdError::new("ERR Usernames can't contain spaces or null characters"));
    }
    let a = args(ctx);
    let allchannels = crate::acl::pubsub_default_all(&ctx.shared.config);
    let changed = ctx.shared.acl.set_user(name, &a[3..], allchannels).map_err(|e| CmdError::new(format!("ERR {e}")))?;
    if let Some((old, user)) = changed {
        close_subscribers(ctx, &user, &old);
    }
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `ACL DELUSER username [username ...]` → how many existed; their clients are closed.
fn cmd_deluser(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let names: Vec<&[u8]> = args(ctx)[2..].to_vec();
    if names.contains(&&b"default"[..]) {
        return Err(CmdError::new("ERR The 'default' user cannot be removed"));
    }
    let gone: Vec<Arc<User>> = names.iter().filter_map(|n| ctx.shared.acl.delete(n)).collect();
    close_clients(ctx, &gone);
    ctx.out.integer(gone.len() as i64);
    Ok(())
}

/// The commands, keys and channels of a selector, as ACL GETUSER gives them.
fn write_selector(ctx: &mut Ctx<'_>, s: &crate::acl::Selector) {
    ctx.out.bulk(b"commands").bulk(s.describe_commands().as_bytes());
    ctx.out.bulk(b"keys").bulk(s.describe_keys().as_bytes());
    ctx.out.bulk(b"channels").bulk(s.describe_channels().as_bytes());
}

/// # Format
/// `ACL GETUSER username` → a map of flags, passwords (hashes), commands, keys, channels and
/// selectors; null for no such user.
fn cmd_getuser(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let Some(u) = ctx.shared.acl.get(ctx.arg(2)) else {
        ctx.out.null();
        return Ok(());
    };
    let rules = u.rules().clone();
    ctx.out.map(6);
    let flags = rules.flags();
    ctx.out.bulk(b"flags").set(flags.len());
    for f in flags {
        ctx.out.bulk(f.as_bytes());
    }
    ctx.out.bulk(b"passwords").array(rules.passwords.len());
    for p in &rules.passwords {
        ctx.out.bulk(p.as_bytes());
    }
    write_selector(ctx, &rules.selectors[0]);
    ctx.out.bulk(b"selectors").array(rules.selectors.len() - 1);
    for s in &rules.selectors[1..] {
        ctx.out.map(3);
        write_selector(ctx, s);
    }
    Ok(())
}

/// # Format
/// `ACL USERS` → the user names, sorted.
fn cmd_users(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let users = ctx.shared.acl.all();
    ctx.out.array(users.len());
    for u in users {
        ctx.out.bulk(&u.name);
    }
    Ok(())
}

/// # Format
/// `ACL LIST` → one `user <name> <rules>` line per user, sorted by name.
fn cmd_list(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let users = ctx.shared.acl.all();
    ctx.out.array(users.len());
    for u in users {
        let line = format!("user {} {}", u.name_str(), u.rules().describe());
        ctx.out.bulk(line.as_bytes());
    }
    Ok(())
}

/// # Format
/// `ACL WHOAMI` → the connection's user name.
fn cmd_whoami(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let name = ctx.conn.user.name.clone();
    ctx.out.bulk(&name);
    Ok(())
}

/// The `aclfile`, or Redis's error for a server without one.
fn acl_file(ctx: &Ctx<'_>) -> Result<String, CmdError> {
    ctx.shared.config.get("aclfile").filter(|f| !f.is_empty()).ok_or_else(|| {
        CmdError::new("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")
    })
}

/// # Format
/// `ACL LOAD` → `+OK` once every user is the file's (clients of the users replaced are
/// closed), or the file's errors (nothing changes).
fn cmd_load(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let file = acl_file(ctx)?;
    let allchannels = crate::acl::pubsub_default_all(&ctx.shared.config);
    let old =
        crate::acl::load_file(&ctx.shared.acl, &file, allchannels).map_err(|e| CmdError::new(format!("ERR {e}")))?;
    close_clients(ctx, &old);
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `ACL SAVE` → `+OK` once the file holds every user.
fn cmd_save(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let file = acl_file(ctx)?;
    crate::acl::save_file(&ctx.shared.acl, &file).map_err(|e| {
        tracing::warn!("ACL SAVE to {file}: {e}");
        CmdError::new(
            "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
        )
    })?;
    ctx.out.ok();
    Ok(())
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_error(ctx: &Ctx<'_>) -> CmdError {
    CmdError::new(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try ACL HELP.",
        String::from_utf8_lossy(ctx.arg(1))
    ))
}

/// # Format
/// `ACL CAT [category]` → the categories, or the commands and subcommands in one.
fn cmd_cat(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    match ctx.argc() {
        2 => {
            ctx.out.array(crate::acl::CATEGORIES.len());
            for c in crate::acl::CATEGORIES {
                ctx.out.bulk(c.as_bytes());
            }
        }
        3 => {
            let want = String::from_utf8_lossy(ctx.arg(2)).to_ascii_lowercase();
            if !crate::acl::CATEGORIES.contains(&want.as_str()) {
                let mut msg = b"ERR Unknown category ".to_vec();
                crate::command::quote_arg(&mut msg, ctx.arg(2), 128);
                return Err(CmdError(msg));
            }
            let t = table();
            let names: Vec<&str> =
                (0..t.len()).filter(|&i| crate::acl::in_category(i, &want)).map(|i| t.specs[i].name).collect();
            ctx.out.array(names.len());
            for n in names {
                ctx.out.bulk(n.as_bytes());
            }
        }
        _ => return Err(subcommand_error(ctx)),
    }
    Ok(())
}

/// # Format
/// `ACL GENPASS [bits]` → `bits` (default 256) random bits in hex.
fn cmd_genpass(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let bits = match ctx.argc() {
        2 => 256,
        3 => ctx.int(2)?,
        _ => return Err(subcommand_error(ctx)),
    };
    if !(1..=4096).contains(&bits) {
        return Err(CmdError::new(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
        ));
    }
    let chars = (bits as usize).div_ceil(4);
    let mut raw = vec![0u8; chars.div_ceil(2)];
    let mut filled = 0;
    while filled < raw.len() {
        match rustix::rand::getrandom(&mut raw[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(_) => return Err(CmdError::new("ERR no random bytes")),
        }
    }
    let hex: String = raw.iter().map(|b| format!("{b:02x}")).collect();
    ctx.out.bulk(&hex.as_bytes()[..chars]);
    Ok(())
}

/// # Format
/// `ACL LOG [count | RESET]` → the newest `count` (default 10) entries, each a map of count,
/// reason, context, object, username, age-seconds and client-info; RESET → `+OK`.
fn cmd_log(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let count = match ctx.argc() {
        2 => 10,
        3 if ctx.arg(2).eq_ignore_ascii_case(b"reset") => {
            ctx.shared.acl.log_reset();
            ctx.out.ok();
            return Ok(());
        }
        3 => ctx.int(2)?.max(0) as usize,
        _ => return Err(subcommand_error(ctx)),
    };
    let entries = ctx.shared.acl.log_entries(count);
    let now = larder_engine::now_ms();
    ctx.out.array(entries.len());
    for e in &entries {
        ctx.out.map(7);
        for (name, v) in e.fields(now) {
            ctx.out.bulk(name.as_bytes());
            match v {
                LogValue::Int(n) => ctx.out.integer(n),
                LogValue::Text(t) => ctx.out.bulk(t),
                LogValue::Double(d) => {
                    // `%.17g`, as Redis 7.0's addReplyDouble.
                    let mut text = Vec::new();
                    crate::families::zset::fmt_score(&mut text, d);
                    crate::families::zset::write_double_text(&mut ctx.out, &text);
                    &mut ctx.out
                }
            };
        }
    }
    Ok(())
}

/// # Format
/// `ACL DRYRUN username command [arg ...]` → `+OK` if the user may run it, else a bulk
/// string saying what it may not touch.
fn cmd_dryrun(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let Some(u) = ctx.shared.acl.get(ctx.arg(2)) else {
        return Err(CmdError::new(format!("ERR User '{}' not found", String::from_utf8_lossy(ctx.arg(2)))));
    };
    let a = args(ctx);
    let cmd = &a[3..];
    let t = table();
    let not_found = || CmdError::new(format!("ERR Command '{}' not found", String::from_utf8_lossy(cmd[0])));
    let i = t.lookup_argv(cmd).ok_or_else(not_found)?;
    let spec = t.specs[i];
    let argc = cmd.len() as i32;
    if (spec.arity > 0 && spec.arity != argc) || argc < -spec.arity {
        return Err(CmdError::new(format!("ERR wrong number of arguments for '{}' command", spec.name)));
    }
    let result = u.rules().check(i, cmd);
    match result {
        Ok(()) => {
            ctx.out.ok();
        }
        Err(d) => {
            let text = match d {
                Denied::Command => format!("This user has no permissions to run the '{}' command", spec.name),
                Denied::Key(p) => {
                    format!("This user has no permissions to access the '{}' key", String::from_utf8_lossy(cmd[p]))
                }
                Denied::Channel(p) => {
                    format!("This user has no permissions to access the '{}' channel", String::from_utf8_lossy(cmd[p]))
                }
            };
            ctx.out.bulk(text.as_bytes());
        }
    }
    Ok(())
}

/// # Format
/// `ACL HELP` → the subcommands.
fn cmd_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "ACL",
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}
