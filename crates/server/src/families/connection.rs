//! Connection commands: PING ECHO QUIT SELECT HELLO AUTH RESET and CLIENT with its
//! subcommands.
//!
//! Per-connection state lives in [`ConnState`](crate::command::ConnState) (what only the
//! owning worker touches: protocol, db, reply mode) and in the shared
//! [`ClientInfo`](crate::ClientInfo) (what CLIENT LIST / KILL on any worker must see).
//! CLIENT KILL takes the client out of CLIENT LIST and `connected_clients` at once (Redis
//! frees it at once), marks it and wakes the workers; its owner closes the socket.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use larder_resp::Protocol;

use crate::command::{
    table, Argv, CmdError, Ctx, Handler, ReplyMode, Spec, ADMIN, ALLOW_BUSY, FAST, LOADING, NOSCRIPT, NO_AUTH, STALE,
};
use crate::families::server::reply_help;
use crate::{tracking, ClientInfo, Shared};

const fn spec(name: &'static str, arity: i32, flags: u32, summary: &'static str, handler: Handler) -> Spec {
    Spec { name, arity, flags, first_key: 0, last_key: 0, step: 0, group: "connection", summary, handler }
}

pub const COMMANDS: &[Spec] = &[
    spec("ping", -1, FAST, "Returns the server's liveliness response.", cmd_ping),
    spec("echo", 2, FAST | LOADING | STALE, "Returns the given string.", cmd_echo),
    spec("quit", -1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, "Closes the connection.", cmd_quit),
    spec("select", 2, FAST | LOADING | STALE, "Changes the selected database.", cmd_select),
    spec(
        "hello",
        -1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        "Handshakes with the Redis server.",
        cmd_hello,
    ),
    spec(
        "auth",
        -2,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY,
        "Authenticates the connection.",
        cmd_auth,
    ),
    spec("reset", 1, NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY, "Resets the connection.", cmd_reset),
    // A container: `CLIENT <sub>` runs one of SUBCOMMANDS (the dispatcher routes it).
    spec("client", -2, 0, "A container for client connection commands.", cmd_container),
];

const CS: u32 = NOSCRIPT | LOADING | STALE;

pub const SUBCOMMANDS: &[Spec] = &[
    spec("client|id", 2, CS, "Returns the unique client ID of the connection.", cmd_client_id),
    spec("client|setname", 3, CS, "Sets the connection name.", cmd_client_setname),
    spec("client|getname", 2, CS, "Returns the name of the connection.", cmd_client_getname),
    spec("client|list", -2, ADMIN | CS, "Lists open connections.", cmd_client_list),
    spec("client|info", 2, CS, "Returns information about the connection.", cmd_client_info),
    spec("client|kill", -3, ADMIN | CS, "Terminates open connections.", cmd_client_kill),
    spec("client|reply", 3, CS, "Instructs the server whether to reply to commands.", cmd_client_reply),
    spec("client|no-evict", 3, ADMIN | CS, "Sets the client eviction mode of the connection.", cmd_client_no_evict),
    spec(
        "client|unblock",
        -3,
        ADMIN | CS,
        "Unblocks a client blocked by a blocking command from a different connection.",
        cmd_client_unblock,
    ),
    spec("client|setinfo", 4, CS, "Sets information specific to the client or connection.", cmd_client_setinfo),
    spec("client|pause", -3, ADMIN | CS, "Suspends commands processing.", cmd_client_pause),
    spec("client|unpause", 2, ADMIN | CS, "Resumes processing commands from paused clients.", cmd_client_unpause),
    spec("client|help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", cmd_client_help),
    spec(
        "client|tracking",
        -3,
        CS,
        "Enable or disable server assisted client side caching support",
        cmd_client_tracking,
    ),
    spec(
        "client|caching",
        3,
        CS,
        "Instruct the server about tracking or not keys in the next request",
        cmd_client_caching,
    ),
    spec("client|getredir", 2, CS, "Get tracking notifications redirection client ID if any", cmd_client_getredir),
    spec(
        "client|trackinginfo",
        2,
        CS,
        "Return information about server assisted client side caching for the current connection",
        cmd_client_trackinginfo,
    ),
];

/// The handler of a container command called without a subcommand. The dispatcher only
/// gets here for an arity the container allows, which none of these does.
pub(crate) fn cmd_container(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let name = String::from_utf8_lossy(ctx.arg(0)).to_ascii_uppercase();
    Err(CmdError::new(format!("ERR unknown subcommand ''. Try {name} HELP.")))
}

/// # Format
/// `PING [message]` → `+PONG` or the message as a bulk string; a subscribed RESP2 client
/// gets `["pong", message]`, as Redis answers inside pub/sub.
fn cmd_ping(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.argc() > 2 {
        return Err(CmdError::new("ERR wrong number of arguments for 'ping' command"));
    }
    let info = &ctx.conn.info;
    let subscribed =
        info.sub.load(Ordering::Relaxed) + info.psub.load(Ordering::Relaxed) + info.ssub.load(Ordering::Relaxed) > 0;
    if subscribed && ctx.conn.proto == Protocol::Resp2 {
        let m = if ctx.argc() == 2 { ctx.arg(1) } else { b"" };
        ctx.out.array(2).bulk(b"pong").bulk(m);
    } else if ctx.argc() == 1 {
        ctx.out.simple(b"PONG");
    } else {
        let m = ctx.arg(1);
        ctx.out.bulk(m);
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
    let db = crate::families::keys::int32(ctx, 1, None)?;
    if db < 0 || db >= ctx.shared.store.databases() as i64 {
        return Err(CmdError::new("ERR DB index is out of range"));
    }
    ctx.conn.db = db as u32;
    ctx.conn.info.db.store(db as u32, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// Logs the connection in as `user` (Redis's `ACLAuthenticateUser`): on success it is
/// authenticated as that user; a failure leaves it as it was and is logged (ACL LOG).
fn authenticate(ctx: &mut Ctx<'_>, user: &[u8], pass: &[u8]) -> Result<(), CmdError> {
    match ctx.shared.acl.login(user, pass) {
        Some(u) => {
            ctx.conn.authenticated = true;
            *ctx.conn.info.user.lock().unwrap_or_else(|e| e.into_inner()) = Some(u.clone());
            ctx.conn.user = u;
            Ok(())
        }
        None => {
            let context =
                if ctx.conn.multi.is_some() { crate::acl::Context::Multi } else { crate::acl::Context::Toplevel };
            let object = ctx.arg(0).to_vec();
            crate::families::acl::log(ctx, crate::acl::Reason::Auth, context, object, Some(user.to_vec()));
            Err(CmdError::new("WRONGPASS invalid username-password pair or user is disabled."))
        }
    }
}

/// Whether `user` / `pass` log in.
pub(crate) fn credentials_ok(shared: &Shared, user: &[u8], pass: &[u8]) -> bool {
    shared.acl.login(user, pass).is_some()
}

/// Whether the default user needs a password (it is off, or not `nopass`).
fn password_set(shared: &Shared) -> bool {
    !shared.acl.default.rules().nopass
}

/// # Format
/// `HELLO [protover [AUTH username password] [SETNAME clientname]]` → a map (RESP3) or flat
/// array (RESP2) of server, version, proto, id, mode, role, modules. The reply is already in
/// the new protocol, and so is every later reply on the connection.
fn cmd_hello(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut proto = None;
    let mut next = 1;
    if ctx.argc() >= 2 {
        let v = crate::command::parse_i64(ctx.arg(1))
            .ok_or_else(|| CmdError::new("ERR Protocol version is not an integer or out of range"))?;
        proto = Some(Protocol::from_version(v).ok_or_else(|| CmdError::new("NOPROTO unsupported protocol version"))?);
        next = 2;
    }
    // Each option takes effect as it is read, as in Redis: a HELLO that fails on a later
    // option keeps the name an earlier SETNAME set.
    let mut j = next;
    while j < ctx.argc() {
        let more = ctx.argc() - 1 - j;
        let opt = ctx.arg(j);
        if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
            let (user, pass) = (ctx.arg(j + 1), ctx.arg(j + 2));
            authenticate(ctx, user, pass)?;
            j += 3;
        } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 {
            set_name(&ctx.conn.info, ctx.arg(j + 1))?;
            j += 2;
        } else {
            // Redis's '%s': the option's bytes as sent, up to a NUL.
            let mut msg = b"ERR Syntax error in HELLO option ".to_vec();
            crate::command::quote_arg(&mut msg, opt, usize::MAX);
            return Err(CmdError(msg));
        }
    }
    // Redis looks at the connection's flag here, not at whether a password is set: a client
    // that connected while one was set must authenticate even after it was removed.
    if !ctx.conn.authenticated {
        return Err(CmdError::new(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time",
        ));
    }
    if let Some(p) = proto {
        ctx.conn.proto = p;
        ctx.out.set_protocol(p);
        ctx.conn.info.resp.store(p.version(), Ordering::Relaxed);
    }
    let id = ctx.conn.id as i64;
    let version = ctx.conn.proto.version() as i64;
    ctx.out.map(7);
    ctx.out.bulk(b"server").bulk(b"redis");
    ctx.out.bulk(b"version").bulk(crate::REDIS_VERSION.as_bytes());
    ctx.out.bulk(b"proto").integer(version);
    ctx.out.bulk(b"id").integer(id);
    ctx.out.bulk(b"mode").bulk(b"standalone");
    ctx.out.bulk(b"role").bulk(b"master");
    ctx.out.bulk(b"modules").array(0);
    Ok(())
}

/// The arguments of an AUTH or HELLO that MONITOR and the slow log show as `(redacted)`:
/// those Redis's handlers redact, up to where they stop. AUTH: the password and the user
/// name, unless it has too many arguments. HELLO: each AUTH option's user and password,
/// in the options read before one fails (a bad protocol version stops before any).
pub(crate) fn redacted_args(shared: &Shared, name: &str, argv: Argv<'_>) -> Vec<usize> {
    let argc = argv.len();
    match name {
        "auth" if argc <= 3 => (1..argc).collect(),
        // Redis redacts every argument from the user name on, whatever happens.
        "acl|setuser" if argc >= 3 => (2..argc).collect(),
        "hello" => {
            let mut out = Vec::new();
            if argc >= 2 && crate::command::parse_i64(argv.get(1)).and_then(Protocol::from_version).is_none() {
                return out;
            }
            // The walk of `cmd_hello`, which stops at the first option that fails.
            let mut j = 2;
            while j < argc {
                let (opt, more) = (argv.get(j), argc - 1 - j);
                if opt.eq_ignore_ascii_case(b"AUTH") && more >= 2 {
                    out.extend([j + 1, j + 2]);
                    if !credentials_ok(shared, argv.get(j + 1), argv.get(j + 2)) {
                        break;
                    }
                    j += 3;
                } else if opt.eq_ignore_ascii_case(b"SETNAME") && more >= 1 && valid_attr(argv.get(j + 1)) {
                    j += 2;
                } else {
                    break;
                }
            }
            out
        }
        _ => Vec::new(),
    }
}

/// # Format
/// `AUTH [username] password` → `+OK` if the user (`default` without one) is on and the
/// password is one of its passwords (any, for a `nopass` user), else `-WRONGPASS` and an
/// ACL LOG entry; `AUTH password` while the default user has no password is the error
/// Redis gives.
fn cmd_auth(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (user, pass) = match ctx.argc() {
        2 if !password_set(ctx.shared) => {
            return Err(CmdError::new(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            ))
        }
        2 => (&b"default"[..], ctx.arg(1)),
        3 => (ctx.arg(1), ctx.arg(2)),
        _ => return Err(CmdError::syntax()),
    };
    authenticate(ctx, user, pass)?;
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `RESET` → `+RESET`: no transaction, no watched keys, no subscriptions, not in MONITOR
/// mode, database 0, RESP2, replies on, no name, no-evict off, as a new connection (the library name and version
/// stay, as in Redis).
fn cmd_reset(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    crate::families::multi::discard(ctx.shared, ctx.conn);
    crate::families::pubsub::forget(ctx.shared, ctx.conn);
    ctx.conn.db = 0;
    ctx.conn.info.db.store(0, Ordering::Relaxed);
    ctx.conn.proto = Protocol::Resp2;
    ctx.out.set_protocol(Protocol::Resp2);
    ctx.conn.info.resp.store(2, Ordering::Relaxed);
    // Redis clears OFF and SKIP_NEXT but not the skip of the command running now.
    if ctx.conn.reply != ReplyMode::Skipping {
        ctx.conn.reply = ReplyMode::On;
    }
    ctx.conn.info.name.lock().unwrap_or_else(|e| e.into_inner()).clear();
    ctx.conn.info.no_evict.store(false, Ordering::Relaxed);
    ctx.shared.monitors.leave(&ctx.conn.info);
    crate::tracking::disable(ctx.shared, ctx.conn);
    // Back to the default user: authenticated only if it needs no password.
    ctx.conn.user = ctx.shared.acl.default.clone();
    *ctx.conn.info.user.lock().unwrap_or_else(|e| e.into_inner()) = None;
    ctx.conn.authenticated = ctx.shared.acl.default.is_free();
    ctx.out.simple(b"RESET");
    Ok(())
}

/// Redis's `validateClientAttr`: printable ASCII without spaces.
fn valid_attr(v: &[u8]) -> bool {
    v.iter().all(|c| (b'!'..=b'~').contains(c))
}

fn set_name(info: &ClientInfo, name: &[u8]) -> Result<(), CmdError> {
    if !valid_attr(name) {
        return Err(CmdError::new("ERR Client names cannot contain spaces, newlines or special characters."));
    }
    *info.name.lock().unwrap_or_else(|e| e.into_inner()) = name.to_vec();
    Ok(())
}

/// # Format
/// `CLIENT ID` → the connection's id.
fn cmd_client_id(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let id = ctx.conn.id as i64;
    ctx.out.integer(id);
    Ok(())
}

/// # Format
/// `CLIENT UNBLOCK client-id [TIMEOUT|ERROR]` → 1 if that client was blocked (it gets the
/// timeout's null, or `-UNBLOCKED ...` with ERROR), else 0.
fn cmd_client_unblock(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.argc() > 4 {
        return Err(CmdError::new(
            "ERR unknown subcommand or wrong number of arguments for 'UNBLOCK'. Try CLIENT HELP.",
        ));
    }
    let mut error = false;
    if ctx.argc() == 4 {
        if ctx.arg(3).eq_ignore_ascii_case(b"error") {
            error = true;
        } else if !ctx.arg(3).eq_ignore_ascii_case(b"timeout") {
            return Err(CmdError::new("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"));
        }
    }
    let id = ctx.int(2)?;
    let done = id > 0 && ctx.shared.blocking.unblock(ctx.shared, ctx.worker, id as u64, error);
    if done && error {
        // Redis counts the error reply it gave the blocked client against the command that
        // was running, so CLIENT UNBLOCK ... ERROR itself has failed too.
        let ws = ctx.shared.stats.worker(ctx.worker);
        if let Some(c) = crate::command::table().lookup_full("client|unblock").and_then(|i| ws.cmd.get(i)) {
            c.failed.incr();
        }
    }
    ctx.out.integer(done as i64);
    Ok(())
}

/// # Format
/// `CLIENT PAUSE timeout [WRITE|ALL]` → `+OK`: for `timeout` ms, every client's commands
/// (ALL, the default; this client's too) or those that may write (WRITE) wait; see
/// [`crate::pause`]. Over a pause in force, the stricter mode and the later end win.
fn cmd_client_pause(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.argc() > 4 {
        // Redis's `addReplySubcommandSyntaxError`: the subcommand as the client wrote it.
        let mut msg = b"ERR unknown subcommand or wrong number of arguments for ".to_vec();
        crate::command::quote_arg(&mut msg, ctx.arg(1), 128);
        msg.extend_from_slice(b". Try CLIENT HELP.");
        return Err(CmdError(msg));
    }
    let kind = if ctx.argc() == 4 {
        match ctx.arg(3).to_ascii_lowercase().as_slice() {
            b"write" => crate::pause::WRITE_ONLY,
            b"all" => crate::pause::ALL,
            _ => return Err(CmdError::new("ERR CLIENT PAUSE mode must be WRITE or ALL")),
        }
    } else {
        crate::pause::ALL
    };
    let now = larder_engine::now_ms() as i64;
    let end = crate::pause::parse_timeout(ctx.arg(2), now).map_err(CmdError::new)?;
    if ctx.shared.pause.pause(&ctx.shared.store, kind, end, now) {
        ctx.shared.wake_workers();
    }
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CLIENT UNPAUSE` → `+OK`; paused clients' commands run (in the order they were held,
/// per worker).
fn cmd_client_unpause(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    if ctx.shared.pause.unpause(&ctx.shared.store, larder_engine::now_ms() as i64) {
        ctx.shared.wake_workers();
    }
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CLIENT SETNAME name` → `+OK` (an empty name clears it).
fn cmd_client_setname(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    set_name(&ctx.conn.info, ctx.arg(2))?;
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CLIENT GETNAME` → the name, or null.
fn cmd_client_getname(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let name = ctx.conn.info.name.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if name.is_empty() {
        ctx.out.null();
    } else {
        ctx.out.bulk(&name);
    }
    Ok(())
}

/// Client classes of CLIENT LIST TYPE / CLIENT KILL TYPE.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    Master,
    Pubsub,
}

fn client_type(name: &[u8]) -> Result<ClientType, CmdError> {
    match name.to_ascii_lowercase().as_slice() {
        b"normal" => Ok(ClientType::Normal),
        b"replica" | b"slave" => Ok(ClientType::Replica),
        b"master" => Ok(ClientType::Master),
        b"pubsub" => Ok(ClientType::Pubsub),
        _ => Err(CmdError::new(format!("ERR Unknown client type '{}'", String::from_utf8_lossy(name)))),
    }
}

fn subscriptions(c: &ClientInfo) -> u64 {
    c.sub.load(Ordering::Relaxed) + c.psub.load(Ordering::Relaxed) + c.ssub.load(Ordering::Relaxed)
}

/// A client's class: Larder has no replication, so every client is normal or pub/sub.
fn type_of(c: &ClientInfo) -> ClientType {
    if subscriptions(c) > 0 {
        ClientType::Pubsub
    } else {
        ClientType::Normal
    }
}

/// Every client, oldest first (CLIENT LIST's order).
fn all_clients(shared: &Shared) -> Vec<Arc<ClientInfo>> {
    let mut v: Vec<_> = shared.clients.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
    v.sort_by_key(|c| c.id);
    v
}

/// Redis's reply buffer and reply list block size (`PROTO_REPLY_CHUNK_BYTES`).
const REPLY_CHUNK: u64 = 16 * 1024;

/// One CLIENT LIST line, in Redis 7.0.15's field order (without the newline), then Redis
/// 7.2's `lib-name` and `lib-ver` (CLIENT SETINFO).
pub fn client_line(c: &ClientInfo, shared: &Shared) -> String {
    let now = shared.uptime_ms();
    let mut flags = String::new();
    if c.monitor.load(Ordering::Relaxed) {
        flags.push('O');
    }
    if subscriptions(c) > 0 {
        flags.push('P');
    }
    let multi = c.multi.load(Ordering::Relaxed);
    if multi >= 0 {
        flags.push('x');
    }
    if c.blocked.load(Ordering::Relaxed) {
        flags.push('b');
    }
    crate::tracking::list_flags(c, &mut flags);
    if c.killed.load(Ordering::Relaxed) {
        flags.push('A');
    }
    if c.no_evict.load(Ordering::Relaxed) {
        flags.push('e');
    }
    if flags.is_empty() {
        flags.push('N');
    }
    let qbuf = c.qbuf.load(Ordering::Relaxed);
    let rcap = c.rbuf_cap.load(Ordering::Relaxed);
    // Replies not yet written, and pub/sub messages still in the worker's mailbox, shown as
    // Redis holds output: the first 16 KiB in the client's reply buffer (obl), the rest in
    // a list of 16 KiB blocks (oll blocks, omem bytes).
    let unsent = c.obuf.load(Ordering::Relaxed) + c.pending.load(Ordering::Relaxed);
    let obl = unsent.min(REPLY_CHUNK);
    let omem = unsent - obl;
    let (argv_mem, multi_mem) = (c.argv_mem.load(Ordering::Relaxed), c.multi_mem.load(Ordering::Relaxed));
    let cmd = match c.last_cmd.load(Ordering::Relaxed) {
        u32::MAX => "NULL",
        i => table().specs.get(i as usize).map_or("NULL", |s| s.name),
    };
    let text = |m: &std::sync::Mutex<Vec<u8>>| {
        String::from_utf8_lossy(&m.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    };
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} ssub={} multi={} qbuf={} \
         qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll={} omem={} tot-mem={} events={} cmd={} \
         user={} redir={} resp={} lib-name={} lib-ver={}",
        c.id,
        c.addr,
        c.laddr,
        c.fd,
        text(&c.name),
        c.created.elapsed().as_secs(),
        now.saturating_sub(c.last_ms.load(Ordering::Relaxed)) / 1000,
        flags,
        c.db.load(Ordering::Relaxed),
        c.sub.load(Ordering::Relaxed),
        c.psub.load(Ordering::Relaxed),
        c.ssub.load(Ordering::Relaxed),
        multi,
        qbuf,
        rcap.saturating_sub(qbuf),
        argv_mem,
        multi_mem,
        c.rbs.load(Ordering::Relaxed),
        c.rbp.load(Ordering::Relaxed),
        obl,
        omem.div_ceil(REPLY_CHUNK),
        omem,
        c.tot_mem(),
        if unsent > 0 { "rw" } else { "r" },
        cmd,
        c.user_name(),
        redirect_of(c),
        c.resp.load(Ordering::Relaxed),
        text(&c.lib_name),
        text(&c.lib_ver),
    )
}

/// # Format
/// `CLIENT LIST [TYPE normal|master|replica|pubsub] [ID id [id ...]]` → one line per client
/// (a bulk string; a verbatim string in RESP3).
fn cmd_client_list(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let clients = all_clients(ctx.shared);
    let selected: Vec<Arc<ClientInfo>> = if ctx.argc() == 2 {
        clients
    } else if ctx.argc() == 4 && ctx.arg(2).eq_ignore_ascii_case(b"TYPE") {
        let t = client_type(ctx.arg(3))?;
        clients.into_iter().filter(|c| type_of(c) == t).collect()
    } else if ctx.argc() > 3 && ctx.arg(2).eq_ignore_ascii_case(b"ID") {
        let mut out = Vec::new();
        for j in 3..ctx.argc() {
            let id = crate::command::parse_i64(ctx.arg(j)).ok_or_else(|| CmdError::new("ERR Invalid client ID"))?;
            out.extend(clients.iter().filter(|c| c.id as i64 == id).cloned());
        }
        out
    } else {
        return Err(CmdError::syntax());
    };
    let mut text = String::new();
    set_own_argv_mem(ctx, true);
    for c in &selected {
        text.push_str(&client_line(c, ctx.shared));
        text.push('\n');
    }
    set_own_argv_mem(ctx, false);
    ctx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

/// While CLIENT LIST or INFO runs, its own line shows the arguments of the command
/// (`argv-mem`), as Redis's does: set them (`on`), then clear them.
fn set_own_argv_mem(ctx: &Ctx<'_>, on: bool) {
    let n = if on { ctx.argv.iter().map(|a| a.len() as u64).sum() } else { 0 };
    ctx.conn.info.argv_mem.store(n, Ordering::Relaxed);
}

/// # Format
/// `CLIENT INFO` → this connection's CLIENT LIST line.
fn cmd_client_info(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    set_own_argv_mem(ctx, true);
    let mut text = client_line(&ctx.conn.info, ctx.shared);
    set_own_argv_mem(ctx, false);
    text.push('\n');
    ctx.out.verbatim(b"txt", text.as_bytes());
    Ok(())
}

/// The filters of CLIENT KILL.
#[derive(Default)]
struct KillFilter {
    addr: Option<Vec<u8>>,
    laddr: Option<Vec<u8>>,
    id: Option<u64>,
    kind: Option<ClientType>,
    max_age: Option<u64>,
    /// USER: the user, and the server's default user (what a client without a user of its
    /// own is authenticated as).
    user: Option<(Arc<crate::acl::User>, Arc<crate::acl::User>)>,
    skip_me: bool,
}

impl KillFilter {
    fn matches(&self, c: &ClientInfo, me: u64) -> bool {
        !(self.addr.as_deref().is_some_and(|a| a != c.addr.as_bytes())
            || self.laddr.as_deref().is_some_and(|a| a != c.laddr.as_bytes())
            || self.id.is_some_and(|id| id != c.id)
            || self.kind.is_some_and(|k| k != type_of(c))
            || self.max_age.is_some_and(|m| c.created.elapsed().as_secs() <= m)
            || self.user.as_ref().is_some_and(|(u, default)| !c.is_user(u, default))
            || (self.skip_me && c.id == me)
            || c.killed.load(Ordering::Relaxed))
    }
}

fn parse_kill_filter(ctx: &Ctx<'_>) -> Result<KillFilter, CmdError> {
    let mut f = KillFilter { skip_me: true, ..Default::default() };
    let mut i = 2;
    while i < ctx.argc() {
        let (opt, more) = (ctx.arg(i), i + 1 < ctx.argc());
        if !more {
            return Err(CmdError::syntax());
        }
        let v = ctx.arg(i + 1);
        match opt.to_ascii_lowercase().as_slice() {
            b"id" => {
                let id = crate::command::parse_i64(v)
                    .filter(|id| *id >= 1)
                    .ok_or_else(|| CmdError::new("ERR client-id should be greater than 0"))?;
                f.id = Some(id as u64);
            }
            b"type" => f.kind = Some(client_type(v)?),
            b"addr" => f.addr = Some(v.to_vec()),
            b"laddr" => f.laddr = Some(v.to_vec()),
            b"user" => {
                let u = ctx.shared.acl.get(v);
                let u = u.ok_or_else(|| CmdError::new(format!("ERR No such user '{}'", String::from_utf8_lossy(v))))?;
                f.user = Some((u, ctx.shared.acl.default.clone()));
            }
            b"skipme" => match v.to_ascii_lowercase().as_slice() {
                b"yes" => f.skip_me = true,
                b"no" => f.skip_me = false,
                _ => return Err(CmdError::syntax()),
            },
            b"maxage" => {
                let age = crate::command::parse_i64(v)
                    .ok_or_else(|| CmdError::new("ERR maxage is not an integer or out of range"))?;
                f.max_age = Some(age.max(0) as u64);
            }
            _ => return Err(CmdError::syntax()),
        }
        i += 2;
    }
    Ok(f)
}

/// # Format
/// `CLIENT KILL ip:port` → `+OK` or `-ERR No such client`;
/// `CLIENT KILL <ID id | ADDR ip:port | LADDR ip:port | TYPE type | USER name | SKIPME yes/no
/// | MAXAGE secs> ...` → the number of clients killed. The caller, if killed, gets its reply
/// first and is closed after it.
fn cmd_client_kill(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let old_form = ctx.argc() == 3;
    let filter = if old_form {
        KillFilter { addr: Some(ctx.arg(2).to_vec()), skip_me: false, ..Default::default() }
    } else {
        parse_kill_filter(ctx)?
    };
    let me = ctx.conn.id;
    let mut killed = 0i64;
    for c in all_clients(ctx.shared) {
        if filter.matches(&c, me) {
            ctx.shared.kill_client(&c);
            if c.id == me {
                ctx.conn.close = true;
            }
            killed += 1;
        }
    }
    if killed > 0 {
        ctx.shared.wake_all();
    }
    if old_form {
        if killed == 0 {
            return Err(CmdError::new("ERR No such client"));
        }
        ctx.out.ok();
    } else {
        ctx.out.integer(killed);
    }
    Ok(())
}

/// # Format
/// `CLIENT REPLY ON|OFF|SKIP` → `+OK` for ON; OFF and SKIP are not answered.
fn cmd_client_reply(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    match ctx.arg(2).to_ascii_lowercase().as_slice() {
        b"on" => {
            ctx.conn.reply = ReplyMode::On;
            ctx.out.ok();
        }
        b"off" => ctx.conn.reply = ReplyMode::Off,
        b"skip" => {
            if ctx.conn.reply != ReplyMode::Off {
                ctx.conn.reply = ReplyMode::SkipNext;
            }
        }
        _ => return Err(CmdError::syntax()),
    }
    Ok(())
}

/// # Format
/// `CLIENT NO-EVICT ON|OFF` → `+OK`.
fn cmd_client_no_evict(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let on = match ctx.arg(2).to_ascii_lowercase().as_slice() {
        b"on" => true,
        b"off" => false,
        _ => return Err(CmdError::syntax()),
    };
    ctx.conn.info.no_evict.store(on, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CLIENT SETINFO LIB-NAME|LIB-VER value` → `+OK` (shown in CLIENT LIST).
fn cmd_client_setinfo(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (attr, v) = (ctx.arg(2), ctx.arg(3));
    let slot = match attr.to_ascii_lowercase().as_slice() {
        b"lib-name" => &ctx.conn.info.lib_name,
        b"lib-ver" => &ctx.conn.info.lib_ver,
        _ => return Err(CmdError::new(format!("ERR Unrecognized option '{}'", String::from_utf8_lossy(attr)))),
    };
    if !valid_attr(v) {
        return Err(CmdError::new(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            String::from_utf8_lossy(attr)
        )));
    }
    *slot.lock().unwrap_or_else(|e| e.into_inner()) = v.to_vec();
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CLIENT HELP` → the subcommands, one simple string per line.
fn cmd_client_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "CLIENT",
        &[
            "CACHING (YES|NO)",
            "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
            "GETREDIR",
            "    Return the client ID we are redirecting to when tracking is enabled.",
            "GETNAME",
            "    Return the name of the current connection.",
            "ID",
            "    Return the ID of the current connection.",
            "INFO",
            "    Return information about the current client connection.",
            "KILL <ip:port>",
            "    Kill connection made from <ip:port>.",
            "KILL <option> <value> [<option> <value> [...]]",
            "    Kill connections. Options are:",
            "    * ADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made from the specified address",
            "    * LADDR (<ip:port>|<unixsocket>:0)",
            "      Kill connections made to specified local address",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Kill connections by type.",
            "    * USER <username>",
            "      Kill connections authenticated by <username>.",
            "    * SKIPME (YES|NO)",
            "      Skip killing current connection (default: yes).",
            "    * ID <client-id>",
            "      Kill connections by client id.",
            "    * MAXAGE <maxage>",
            "      Kill connections older than the specified age.",
            "LIST [options ...]",
            "    Return information about client connections. Options:",
            "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
            "      Return clients of specified type.",
            "    * ID <client-id> [<client-id> ...]",
            "      Return clients of specified IDs only.",
            "UNPAUSE",
            "    Stop the current client pause, resuming traffic.",
            "PAUSE <timeout> [WRITE|ALL]",
            "    Suspend all, or just write, clients for <timeout> milliseconds.",
            "REPLY (ON|OFF|SKIP)",
            "    Control the replies sent to the current connection.",
            "SETNAME <name>",
            "    Assign the name <name> to the current connection.",
            "SETINFO <option> <value>",
            "    Set client meta attr. Options are:",
            "    * LIB-NAME: the client lib name.",
            "    * LIB-VER: the client lib version.",
            "UNBLOCK <clientid> [TIMEOUT|ERROR]",
            "    Unblock the specified blocked client.",
            "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
            "         [OPTIN] [OPTOUT] [NOLOOP]",
            "    Control server assisted client side caching.",
            "TRACKINGINFO",
            "    Report tracking status for the current connection.",
            "NO-EVICT (ON|OFF)",
            "    Protect current client connection from eviction.",
        ],
    );
    Ok(())
}

/// CLIENT LIST's `redir`: the redirect client while tracking (0: none), else -1.
fn redirect_of(c: &ClientInfo) -> i64 {
    if c.tracking.load(Ordering::Relaxed) & tracking::ON != 0 {
        c.redirect.load(Ordering::Relaxed) as i64
    } else {
        -1
    }
}

/// Redis's `checkPrefixCollisionsOrReply`: two prefixes of one client overlap when one
/// starts with the other (the empty prefix overlaps every one).
fn prefix_collision(existing: &[Vec<u8>], new: &[Vec<u8>]) -> Option<CmdError> {
    let overlap = |a: &[u8], b: &[u8]| a[..a.len().min(b.len())] == b[..a.len().min(b.len())];
    // Redis's '%s': up to a NUL.
    let c_str =
        |s: &[u8]| String::from_utf8_lossy(&s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]).into_owned();
    for (i, p) in new.iter().enumerate() {
        if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
            return Some(CmdError::new(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                c_str(p),
                c_str(e)
            )));
        }
        if let Some(q) = new[i + 1..].iter().find(|q| overlap(p, q)) {
            return Some(CmdError::new(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                c_str(p),
                c_str(q)
            )));
        }
    }
    None
}

/// # Format
/// `CLIENT TRACKING ON|OFF [REDIRECT id] [BCAST] [PREFIX prefix ...] [OPTIN] [OPTOUT]
/// [NOLOOP]` → `+OK`; see [`crate::tracking`].
pub(crate) fn cmd_client_tracking(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut redir: i64 = 0;
    let mut options = 0u32;
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let mut j = 3;
    while j < ctx.argc() {
        let more = ctx.argc() - 1 - j;
        let opt = ctx.arg(j).to_ascii_lowercase();
        match opt.as_slice() {
            b"redirect" if more > 0 => {
                j += 1;
                if redir != 0 {
                    return Err(CmdError::new("ERR A client can only redirect to a single other client"));
                }
                redir = ctx.int(j)?;
                let exists = redir > 0
                    && ctx.shared.clients.lock().unwrap_or_else(|e| e.into_inner()).contains_key(&(redir as u64));
                if !exists {
                    return Err(CmdError::new("ERR The client ID you want redirect to does not exist"));
                }
            }
            b"bcast" => options |= tracking::BCAST,
            b"optin" => options |= tracking::OPTIN,
            b"optout" => options |= tracking::OPTOUT,
            b"noloop" => options |= tracking::NOLOOP,
            b"prefix" if more > 0 => {
                j += 1;
                prefixes.push(ctx.arg(j).to_vec());
            }
            _ => return Err(CmdError::syntax()),
        }
        j += 1;
    }
    let mode = ctx.arg(2);
    if mode.eq_ignore_ascii_case(b"on") {
        let flags = ctx.conn.tracking;
        if options & tracking::BCAST == 0 && !prefixes.is_empty() {
            return Err(CmdError::new("ERR PREFIX option requires BCAST mode to be enabled"));
        }
        if flags & tracking::ON != 0 && (flags & tracking::BCAST != 0) != (options & tracking::BCAST != 0) {
            return Err(CmdError::new(
                "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        if options & tracking::BCAST != 0 && options & (tracking::OPTIN | tracking::OPTOUT) != 0 {
            return Err(CmdError::new("ERR OPTIN and OPTOUT are not compatible with BCAST"));
        }
        if options & tracking::OPTIN != 0 && options & tracking::OPTOUT != 0 {
            return Err(CmdError::new("ERR You can't specify both OPTIN mode and OPTOUT mode"));
        }
        if (options & tracking::OPTIN != 0 && flags & tracking::OPTOUT != 0)
            || (options & tracking::OPTOUT != 0 && flags & tracking::OPTIN != 0)
        {
            return Err(CmdError::new(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.",
            ));
        }
        if options & tracking::BCAST != 0 {
            let existing = ctx.conn.tracking_state.as_ref().map(|s| s.prefixes.clone()).unwrap_or_default();
            if let Some(e) = prefix_collision(&existing, &prefixes) {
                return Err(e);
            }
        }
        tracking::enable(ctx, redir as u64, options, &prefixes);
    } else if mode.eq_ignore_ascii_case(b"off") {
        tracking::disable(ctx.shared, ctx.conn);
    } else {
        return Err(CmdError::syntax());
    }
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CLIENT CACHING YES|NO` → `+OK`: the next command (or transaction) of an OPTIN client
/// remembers its keys (YES), or of an OPTOUT client does not (NO).
fn cmd_client_caching(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let flags = ctx.conn.tracking;
    if flags & tracking::ON == 0 {
        return Err(CmdError::new(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled",
        ));
    }
    let opt = ctx.arg(2);
    if opt.eq_ignore_ascii_case(b"yes") {
        if flags & tracking::OPTIN == 0 {
            return Err(CmdError::new("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."));
        }
    } else if opt.eq_ignore_ascii_case(b"no") {
        if flags & tracking::OPTOUT == 0 {
            return Err(CmdError::new("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."));
        }
    } else {
        return Err(CmdError::syntax());
    }
    ctx.conn.tracking |= tracking::CACHING;
    ctx.conn.info.tracking.fetch_or(tracking::CACHING, Ordering::Relaxed);
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `CLIENT GETREDIR` → the redirect client's id, 0 for none, -1 when not tracking.
fn cmd_client_getredir(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let r = redirect_of(&ctx.conn.info);
    ctx.out.integer(r);
    Ok(())
}

/// # Format
/// `CLIENT TRACKINGINFO` → a map: `flags` (a set: on/off, bcast, optin, caching-yes,
/// optout, caching-no, noloop, broken_redirect), `redirect`, `prefixes`.
fn cmd_client_trackinginfo(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let f = ctx.conn.info.tracking.load(Ordering::Relaxed);
    let mut flags: Vec<&[u8]> = vec![if f & tracking::ON != 0 { b"on" } else { b"off" }];
    if f & tracking::BCAST != 0 {
        flags.push(b"bcast");
    }
    if f & tracking::OPTIN != 0 {
        flags.push(b"optin");
        if f & tracking::CACHING != 0 {
            flags.push(b"caching-yes");
        }
    }
    if f & tracking::OPTOUT != 0 {
        flags.push(b"optout");
        if f & tracking::CACHING != 0 {
            flags.push(b"caching-no");
        }
    }
    if f & tracking::NOLOOP != 0 {
        flags.push(b"noloop");
    }
    if f & tracking::BROKEN_REDIR != 0 {
        flags.push(b"broken_redirect");
    }
    let redirect = redirect_of(&ctx.conn.info);
    let prefixes = ctx.conn.tracking_state.as_ref().map(|s| s.prefixes.clone()).unwrap_or_default();
    ctx.out.map(3);
    ctx.out.bulk(b"flags").set(flags.len());
    for fl in flags {
        ctx.out.bulk(fl);
    }
    ctx.out.bulk(b"redirect").integer(redirect);
    ctx.out.bulk(b"prefixes").array(prefixes.len());
    for p in &prefixes {
        ctx.out.bulk(p);
    }
    Ok(())
}
