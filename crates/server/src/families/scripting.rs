//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT, FCALL, FCALL_RO and FUNCTION, as
//! Redis 7.0 (eval.c, script.c, functions.c, function_lua.c).
//! The Lua side (states, sandbox, conversions) is in [`crate::lua`].
//!
//! - A script runs while its worker holds every worker's exec gate ([`crate::gate`]), as
//!   EXEC does: no command of another client runs between two of its commands. Inside EXEC
//!   the gates are held already.
//! - Commands called from the script run through [`crate::command::call`] on the caller's
//!   connection state with `in_exec` set (blocking commands answer as on timeout), after
//!   the checks Redis's `scriptCall` makes (unknown command, arity, `noscript`, writes from
//!   a read-only script). The caller's database is restored afterwards: a SELECT inside a
//!   script does not change the caller's.
//! - Clients blocked on keys the script wrote are served when it ends, before the other
//!   workers go on.
//! - There is no script timeout: SCRIPT KILL always answers NOTBUSY, and a script that never
//!   ends holds the server (Redis would answer BUSY to other clients meanwhile).

use larder_resp::{Args, Limits, Protocol, Writer};

use crate::command::{
    table, Argv, CmdError, Ctx, Handler, Spec, ALLOW_BUSY, DENYOOM, LOADING, MAY_REPLICATE, MOVABLEKEYS, NOSCRIPT,
    NO_MANDATORY_KEYS, READONLY, SKIP_MONITOR, STALE, WRITE,
};
use crate::gate::Exclusive;
use crate::lua::{self, sha1::sha1_hex};

const fn spec(name: &'static str, arity: i32, flags: u32, summary: &'static str, handler: Handler) -> Spec {
    Spec { name, arity, flags, first_key: 0, last_key: 0, step: 0, group: "scripting", summary, handler }
}

const EVAL: u32 = NOSCRIPT | STALE | SKIP_MONITOR | NO_MANDATORY_KEYS | MOVABLEKEYS;
/// A script that may write is held by CLIENT PAUSE WRITE (Redis's `may-replicate`).
const EVAL_RW: u32 = EVAL | MAY_REPLICATE;

pub const COMMANDS: &[Spec] = &[
    spec("eval", -3, EVAL_RW, "Execute a Lua script server side", cmd_eval),
    spec("evalsha", -3, EVAL_RW, "Execute a Lua script server side", cmd_evalsha),
    spec("eval_ro", -3, EVAL | READONLY, "Execute a read-only Lua script server side", cmd_eval_ro),
    spec("evalsha_ro", -3, EVAL | READONLY, "Execute a read-only Lua script server side", cmd_evalsha_ro),
    spec(
        "script",
        -2,
        0,
        "A container for Lua scripts management commands",
        crate::families::connection::cmd_container,
    ),
    spec("fcall", -3, EVAL_RW, "Invoke a function", cmd_fcall),
    spec("fcall_ro", -3, EVAL | READONLY, "Invoke a read-only function", cmd_fcall_ro),
    spec("function", -2, 0, "A container for function commands", crate::families::connection::cmd_container),
];

pub const SUBCOMMANDS: &[Spec] = &[
    spec("script|debug", 3, NOSCRIPT, "Set the debug mode for executed scripts.", cmd_script_debug),
    spec("script|exists", -3, NOSCRIPT, "Check existence of scripts in the script cache.", cmd_script_exists),
    spec("script|flush", -2, NOSCRIPT, "Remove all the scripts from the script cache.", cmd_script_flush),
    spec("script|help", 2, LOADING | STALE, "Show helpful text about the different subcommands", cmd_script_help),
    spec("script|kill", 2, NOSCRIPT | ALLOW_BUSY, "Kill the script currently in execution.", cmd_script_kill),
    spec("script|load", 3, NOSCRIPT | STALE, "Load the specified Lua script into the script cache.", cmd_script_load),
    spec("function|delete", 3, WRITE | NOSCRIPT, "Delete a function by name", cmd_function_delete),
    spec("function|flush", -2, WRITE | NOSCRIPT, "Deleting all functions", cmd_function_flush),
    spec("function|help", 2, LOADING | STALE, "Show helpful text about the different subcommands", cmd_function_help),
    spec("function|kill", 2, NOSCRIPT | ALLOW_BUSY, "Kill the function currently in execution.", cmd_script_kill),
    spec("function|list", -2, NOSCRIPT, "List information about all the functions", cmd_function_list),
    spec(
        "function|load",
        -3,
        WRITE | DENYOOM | NOSCRIPT,
        "Create a function with the given arguments (name, code, description)",
        cmd_function_load,
    ),
    spec(
        "function|stats",
        2,
        NOSCRIPT | ALLOW_BUSY,
        "Return information about the function currently running (name, description, duration)",
        cmd_function_stats,
    ),
];

const NOSCRIPT_ERR: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// # Format
/// `EVAL script numkeys [key ...] [arg ...]` → what the script returns.
fn cmd_eval(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    eval(ctx, false, false)
}

/// # Format
/// `EVALSHA sha1 numkeys [key ...] [arg ...]` → what the cached script returns;
/// `-NOSCRIPT No matching script. Please use EVAL.` if it is not cached.
fn cmd_evalsha(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    eval(ctx, true, false)
}

/// # Format
/// `EVAL_RO script numkeys [key ...] [arg ...]`: EVAL whose script may not write.
fn cmd_eval_ro(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    eval(ctx, false, true)
}

/// # Format
/// `EVALSHA_RO sha1 numkeys [key ...] [arg ...]`: EVALSHA whose script may not write.
fn cmd_evalsha_ro(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    eval(ctx, true, true)
}

/// The flags of command `spec` as run with the arguments in `ctx`: for a script or a
/// function with flags (a shebang, or a function's), its own in place of the command's
/// write flags, as Redis's `evalGetCommandFlags` and `fcallGetCommandFlags` compute them;
/// for every other command, its table flags. CLIENT PAUSE WRITE holds by these.
pub fn command_flags(ctx: &Ctx<'_>, spec: &Spec) -> u32 {
    if spec.flags & SKIP_MONITOR == 0 {
        return spec.flags;
    }
    let arg = ctx.arg(1);
    let script_flags = match spec.name {
        "fcall" | "fcall_ro" => ctx.shared.functions.find_function(&String::from_utf8_lossy(arg)).map(|(_, f)| f.flags),
        "evalsha" | "evalsha_ro" => {
            let sha = String::from_utf8_lossy(&arg.to_ascii_lowercase()).into_owned();
            ctx.shared.scripts.get(&sha).map(|s| s.flags)
        }
        _ => match ctx.shared.scripts.get(&sha1_hex(arg)) {
            Some(s) => Some(s.flags),
            None => lua::shebang(arg).ok().map(|(f, _)| f),
        },
    };
    match script_flags {
        Some(f) if f & lua::EVAL_COMPAT == 0 => {
            let mut flags = spec.flags & !(STALE | DENYOOM | WRITE | MAY_REPLICATE);
            if f & (lua::ALLOW_OOM | lua::NO_WRITES) == 0 {
                flags |= DENYOOM;
            }
            if f & lua::NO_WRITES == 0 {
                flags |= WRITE;
            }
            if f & lua::ALLOW_STALE != 0 {
                flags |= STALE;
            }
            flags
        }
        _ => spec.flags,
    }
}

/// Caches `body` (compiling it in this worker's Lua state) and returns its SHA-1; the
/// error is the compile error's reply.
fn load(ctx: &Ctx<'_>, body: &[u8]) -> Result<(String, std::sync::Arc<lua::Script>), CmdError> {
    let sha = sha1_hex(body);
    let scripts = &ctx.shared.scripts;
    if let Some(s) = scripts.get(&sha) {
        return Ok((sha, s));
    }
    let (flags, _) = lua::shebang(body).map_err(|e| CmdError::new(format!("ERR {e}")))?;
    lua::with_vm(scripts, |vm| vm.compile(&sha, body)).map_err(|e| CmdError::new(format!("ERR {e}")))?;
    let script = scripts.insert(sha.clone(), lua::Script { body: body.to_vec(), flags });
    Ok((sha, script))
}

fn eval(ctx: &mut Ctx<'_>, by_sha: bool, ro: bool) -> Result<(), CmdError> {
    let numkeys = ctx.int(2)?;
    if numkeys > ctx.argc() as i64 - 3 {
        return Err(CmdError::new("ERR Number of keys can't be greater than number of args"));
    } else if numkeys < 0 {
        return Err(CmdError::new("ERR Number of keys can't be negative"));
    }
    let (sha, script) = if by_sha {
        let sha = ctx.arg(1).to_ascii_lowercase();
        let sha = String::from_utf8_lossy(&sha).into_owned();
        match (sha.len() == 40).then(|| ctx.shared.scripts.get(&sha)).flatten() {
            Some(s) => (sha, s),
            None => return Err(CmdError::new(NOSCRIPT_ERR)),
        }
    } else {
        load(ctx, ctx.arg(1))?
    };
    let compat = script.flags & lua::EVAL_COMPAT != 0;
    if !compat && script.flags & lua::NO_WRITES == 0 && ro {
        return Err(CmdError::new("ERR Can not execute a script with write flag using *_ro command."));
    }
    let read_only = ro || (!compat && script.flags & lua::NO_WRITES != 0);
    run_script(ctx, lua::Target::Script(&sha), numkeys as usize, read_only, |vm| vm.compile(&sha, &script.body))
}

/// Runs a script or function atomically (see the module notes) with the keys and arguments
/// from argument 3 on, after `prepare` made sure this worker's Lua state has it, and writes
/// its reply.
fn run_script(
    ctx: &mut Ctx<'_>,
    target: lua::Target<'_>,
    numkeys: usize,
    read_only: bool,
    prepare: impl FnOnce(&mut lua::Vm) -> Result<(), String>,
) -> Result<(), CmdError> {
    let args: Vec<&[u8]> = ctx.argv.iter().skip(3).collect();
    let (keys, argv) = args.split_at(numkeys);

    // Inside EXEC every gate is held already.
    let nested = ctx.conn.in_exec;
    let shared = ctx.shared;
    let all = (!nested).then(|| Exclusive::enter(&shared.gates, &shared.exec_lock, ctx.worker));
    let (db, started) = (ctx.conn.db, ctx.conn.clock);
    ctx.conn.in_exec = true;
    ctx.conn.in_script = true;
    let result = lua::with_vm(&shared.scripts, |vm| {
        if let Err(e) = prepare(vm) {
            return Err((format!("ERR {e}").into_bytes(), false));
        }
        let mut call = |args: &[Vec<u8>], what: lua::Call| match what {
            lua::Call::Run(proto) => script_call(ctx, args, proto, read_only),
            lua::Call::AclCheck => acl_check_cmd(ctx, args),
        };
        let r = vm.run(target, keys, argv, &mut call);
        shared.scripts.lua_memory.store(vm.memory(), std::sync::atomic::Ordering::Relaxed);
        r
    });
    ctx.conn.in_exec = nested;
    ctx.conn.in_script = false;
    ctx.conn.db = db;
    if !nested {
        for (db, k) in std::mem::take(&mut ctx.conn.ready) {
            crate::blocking::serve_ready(ctx.h, shared, ctx.worker, db, std::iter::once(k.as_slice()));
        }
    }
    drop(all);
    // The script's own time in commandstats covers the commands it ran, as EXEC's does.
    ctx.conn.clock = started;
    match result {
        Ok(out) => {
            lua::write_out(&mut ctx.out, &out);
            Ok(())
        }
        // An error a command of the script answered was counted when it did.
        Err((msg, true)) => {
            let mut line = b"-".to_vec();
            line.extend_from_slice(&msg);
            ctx.out.error(&line);
            Ok(())
        }
        Err((msg, false)) => Err(CmdError(msg)),
    }
}

/// Runs one command for `redis.call` (Redis's `scriptCall`) and returns its reply, in
/// protocol `proto`.
fn script_call(ctx: &mut Ctx<'_>, argv: &[Vec<u8>], proto: Protocol, read_only: bool) -> Vec<u8> {
    let mut req = Vec::new();
    larder_resp::write_command(&mut req, argv.iter().map(|a| a.as_slice()));
    let limits = Limits { proto_max_bulk_len: u64::MAX, ..Limits::DEFAULT };
    let mut args = Args::new();
    let mut out = Vec::new();
    if !matches!(larder_resp::parse_command_into(&req, &limits, &mut args), Ok(Some(_))) {
        return b"-ERR Unknown Redis command called from script\r\n".to_vec();
    }
    let mut inner = Ctx {
        argv: Argv { args: &args, buf: &req },
        out: Writer::new(&mut out, proto),
        h: &mut *ctx.h,
        conn: &mut *ctx.conn,
        shared: ctx.shared,
        worker: ctx.worker,
    };
    let t = table();
    let Some(i) = t.lookup_argv(argv) else {
        crate::command::reply_error(&mut inner, &CmdError::new("ERR Unknown Redis command called from script"), None);
        return out;
    };
    let spec = t.specs[i];
    let argc = argv.len() as i32;
    // Redis's scriptCall: arity, NOSCRIPT, the caller's ACL user (logged in the "lua"
    // context), then a read-only script's writes.
    let refusal = if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        Some("ERR Wrong number of args calling Redis command from script".to_string())
    } else if spec.flags & NOSCRIPT != 0 {
        Some("ERR This Redis command is not allowed from script".to_string())
    } else if let Err(denied) = script_acl(&mut inner, i) {
        Some(format!("ERR The user executing the script {}", denied.script_reason()))
    } else if read_only && spec.flags & (WRITE | MAY_REPLICATE) != 0 {
        Some("ERR Write commands are not allowed from read-only scripts.".to_string())
    } else {
        None
    };
    if let Some(msg) = refusal {
        crate::command::reply_error(&mut inner, &CmdError::new(msg), Some((i, true)));
        return out;
    }
    crate::command::call(&mut inner, i);
    // A tracking client's script that reads remembers the keys it declared (Redis 7.0's rule).
    if ctx.conn.tracking != 0 && spec.flags & READONLY != 0 {
        if let Some(script) = t.lookup(ctx.arg(0)) {
            crate::tracking::after_script_read(ctx, t.specs[script]);
        }
    }
    out
}

/// `redis.acl_check_cmd(command, args...)`: `:1` if the caller's ACL user may run it with
/// those arguments, `:0` if not (nothing is logged), an error (its message, which the script
/// raises as an `ERR`) for a command that does not exist (a container's unknown subcommand
/// included; a container alone is the container). No arity check, as in Redis.
fn acl_check_cmd(ctx: &Ctx<'_>, argv: &[Vec<u8>]) -> Vec<u8> {
    let Some(i) = table().lookup_argv(argv) else {
        return b"-Invalid command passed to redis.acl_check_cmd()\r\n".to_vec();
    };
    let args: Vec<&[u8]> = argv.iter().map(|a| a.as_slice()).collect();
    let allowed = ctx.conn.user.is_open() || ctx.conn.user.rules().check(i, &args).is_ok();
    if allowed {
        b":1\r\n".to_vec()
    } else {
        b":0\r\n".to_vec()
    }
}

/// The caller's ACL user's verdict on command `i` a script calls (one load for a user
/// with every permission).
fn script_acl(ctx: &mut Ctx<'_>, i: usize) -> Result<(), crate::acl::Denied> {
    if ctx.conn.user.is_open() {
        return Ok(());
    }
    crate::families::acl::check(ctx, i, crate::acl::Context::Lua)
}

/// # Format
/// `SCRIPT LOAD script` → the script's SHA-1 (the script is compiled and cached).
fn cmd_script_load(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (sha, _) = load(ctx, ctx.arg(2))?;
    ctx.out.bulk(sha.as_bytes());
    Ok(())
}

/// # Format
/// `SCRIPT EXISTS sha1 [sha1 ...]` → an array of 1 (cached) or 0.
fn cmd_script_exists(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let n = ctx.argc() - 2;
    ctx.out.array(n);
    for j in 2..ctx.argc() {
        let sha = String::from_utf8_lossy(&ctx.arg(j).to_ascii_lowercase()).into_owned();
        let found = ctx.shared.scripts.get(&sha).is_some();
        ctx.out.integer(found as i64);
    }
    Ok(())
}

/// # Format
/// `SCRIPT FLUSH [ASYNC|SYNC]` → `+OK` (the cache is emptied; the Lua states are rebuilt).
fn cmd_script_flush(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let ok = ctx.argc() == 2
        || (ctx.argc() == 3 && (ctx.arg(2).eq_ignore_ascii_case(b"SYNC") || ctx.arg(2).eq_ignore_ascii_case(b"ASYNC")));
    if !ok {
        return Err(CmdError::new("ERR SCRIPT FLUSH only support SYNC|ASYNC option"));
    }
    ctx.shared.scripts.flush();
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `SCRIPT KILL` → `-NOTBUSY No scripts in execution right now.` (a running script holds
/// every worker, so no other client's SCRIPT KILL can run meanwhile).
fn cmd_script_kill(_ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    Err(CmdError::new("NOTBUSY No scripts in execution right now."))
}

/// # Format
/// `SCRIPT DEBUG YES|SYNC|NO` → an error for YES and SYNC: Larder has no Lua debugger.
fn cmd_script_debug(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mode = ctx.arg(2);
    if mode.eq_ignore_ascii_case(b"no") {
        ctx.out.ok();
        return Ok(());
    }
    if mode.eq_ignore_ascii_case(b"yes") || mode.eq_ignore_ascii_case(b"sync") {
        return Err(CmdError::new("ERR SCRIPT DEBUG is not supported: this server has no Lua debugger"));
    }
    Err(CmdError::new("ERR Use SCRIPT DEBUG YES/SYNC/NO"))
}

/// # Format
/// `SCRIPT HELP` → the subcommands available.
fn cmd_script_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    crate::families::server::reply_help(
        ctx,
        "SCRIPT",
        &[
            "DEBUG (YES|SYNC|NO)",
            "    Set the debug mode for subsequent scripts executed.",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
        ],
    );
    Ok(())
}

// ------------------------------------------------------------------------------ functions

/// # Format
/// `FCALL function numkeys [key ...] [arg ...]` → what the function returns.
fn cmd_fcall(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    fcall(ctx, false)
}

/// # Format
/// `FCALL_RO function numkeys [key ...] [arg ...]`: FCALL of a `no-writes` function.
fn cmd_fcall_ro(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    fcall(ctx, true)
}

fn fcall(ctx: &mut Ctx<'_>, ro: bool) -> Result<(), CmdError> {
    let name = String::from_utf8_lossy(ctx.arg(1)).into_owned();
    let Some((lib, meta)) = ctx.shared.functions.find_function(&name) else {
        return Err(CmdError::new("ERR Function not found"));
    };
    let numkeys =
        crate::command::parse_i64(ctx.arg(2)).ok_or_else(|| CmdError::new("ERR Bad number of keys provided"))?;
    if numkeys > ctx.argc() as i64 - 3 {
        return Err(CmdError::new("ERR Number of keys can't be greater than number of args"));
    } else if numkeys < 0 {
        return Err(CmdError::new("ERR Number of keys can't be negative"));
    }
    let no_writes = meta.flags & lua::NO_WRITES != 0;
    if ro && !no_writes {
        return Err(CmdError::new("ERR Can not execute a script with write flag using *_ro command."));
    }
    // Function names are case-insensitive: the registered name is the one to run.
    let (functions, name) = (&ctx.shared.functions, meta.name);
    run_script(ctx, lua::Target::Function(&name), numkeys as usize, ro || no_writes, |vm| {
        vm.ensure_function(functions, &lib, &name)
    })
}

/// Reads a library's first line, `#!ENGINE name=NAME` (Redis's `functionExtractLibMetaData`):
/// the engine and the name.
fn library_metadata(code: &[u8]) -> Result<(String, String), String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    let Some(end) = code.iter().position(|&c| c == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let line = String::from_utf8_lossy(&code[..end]).into_owned();
    let parts = split_args(&line).ok_or("Invalid library metadata")?;
    let engine = parts.first().map_or("", |p| p.get(2..).unwrap_or("")).to_string();
    let mut name = None;
    for part in parts.iter().skip(1) {
        match part.get(..5).filter(|p| p.eq_ignore_ascii_case("name=")) {
            Some(_) if name.is_some() => {
                return Err("Invalid metadata value, name argument was given multiple times".into())
            }
            Some(_) => name = Some(part[5..].to_string()),
            None => return Err(format!("Invalid metadata value given: {part}")),
        }
    }
    let name = name.ok_or("Library name was not given")?;
    Ok((engine, name))
}

/// Splits a line into words as Redis's `sdssplitargs` does: white space separates them, and
/// a quote inside a word starts a "double quoted" (with backslash escapes) or 'single
/// quoted' part, which must end the word. None for unbalanced quotes.
fn split_args(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_ascii_whitespace()).is_some() {}
        if chars.peek().is_none() {
            return Some(words);
        }
        let mut word = String::new();
        while let Some(c) = chars.next_if(|c| !c.is_ascii_whitespace()) {
            if c != '"' && c != '\'' {
                word.push(c);
                continue;
            }
            loop {
                match chars.next()? {
                    q if q == c => break,
                    '\\' if c == '"' => word.push(match chars.next()? {
                        'n' => '\n',
                        'r' => '\r',
                        't' => '\t',
                        e => e,
                    }),
                    e => word.push(e),
                }
            }
            if chars.peek().is_some_and(|c| !c.is_ascii_whitespace()) {
                return None;
            }
        }
        words.push(word);
    }
}

/// # Format
/// `FUNCTION LOAD [REPLACE] code` → the library's name. The code's first line is
/// `#!lua name=NAME`; running it registers the library's functions.
fn cmd_function_load(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let mut replace = false;
    for j in 2..ctx.argc() - 1 {
        if ctx.arg(j).eq_ignore_ascii_case(b"replace") {
            replace = true;
        } else {
            return Err(CmdError::new(format!("ERR Unknown option given: {}", String::from_utf8_lossy(ctx.arg(j)))));
        }
    }
    let code = ctx.arg(ctx.argc() - 1);
    let err = |e: String| CmdError::new(format!("ERR {e}"));
    let (engine, name) = library_metadata(code).map_err(err)?;
    if !lua::valid_name(&name) {
        return Err(err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into()));
    }
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(err(format!("Engine '{engine}' not found")));
    }
    let functions = &ctx.shared.functions;
    if !replace && functions.get(&name).is_some() {
        return Err(err(format!("Library '{name}' already exists")));
    }
    let skip = code.iter().position(|&c| c == b'\n').unwrap_or(code.len());
    let registered = lua::with_vm(&ctx.shared.scripts, |vm| vm.load_library(&code[skip..])).map_err(err)?;
    if registered.is_empty() {
        return Err(err("No functions registered".into()));
    }
    let lib = lua::Library {
        name: name.clone(),
        code: code.to_vec(),
        functions: registered.into_iter().map(|r| r.meta).collect(),
    };
    functions.put(lib).map_err(|f| err(format!("Function {f} already exists")))?;
    ctx.out.bulk(name.as_bytes());
    Ok(())
}

/// # Format
/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]` → one map per library: its name, engine,
/// functions (name, description, flags) and, with WITHCODE, its code.
fn cmd_function_list(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (mut with_code, mut pattern) = (false, None);
    let mut j = 2;
    while j < ctx.argc() {
        let a = ctx.arg(j);
        if !with_code && a.eq_ignore_ascii_case(b"withcode") {
            with_code = true;
        } else if pattern.is_none() && a.eq_ignore_ascii_case(b"libraryname") {
            if j + 1 >= ctx.argc() {
                return Err(CmdError::new("ERR library name argument was not given"));
            }
            j += 1;
            pattern = Some(ctx.arg(j));
        } else {
            return Err(CmdError::new(format!("ERR Unknown argument {}", String::from_utf8_lossy(a))));
        }
        j += 1;
    }
    let libs: Vec<_> = ctx
        .shared
        .functions
        .list()
        .into_iter()
        .filter(|l| pattern.is_none_or(|p| larder_engine::glob_match(p, l.name.as_bytes(), true)))
        .collect();
    ctx.out.array(libs.len());
    for l in libs {
        ctx.out.map(if with_code { 4 } else { 3 });
        ctx.out.bulk(b"library_name").bulk(l.name.as_bytes());
        ctx.out.bulk(b"engine").bulk(b"LUA");
        ctx.out.bulk(b"functions").array(l.functions.len());
        for f in &l.functions {
            ctx.out.map(3);
            ctx.out.bulk(b"name").bulk(f.name.as_bytes());
            ctx.out.bulk(b"description");
            match &f.desc {
                Some(d) => ctx.out.bulk(d),
                None => ctx.out.null(),
            };
            let flags: Vec<&str> = lua::FLAG_NAMES.iter().filter(|(b, _)| f.flags & b != 0).map(|(_, n)| *n).collect();
            ctx.out.bulk(b"flags").set(flags.len());
            for n in flags {
                ctx.out.simple(n.as_bytes());
            }
        }
        if with_code {
            ctx.out.bulk(b"library_code").bulk(&l.code);
        }
    }
    Ok(())
}

/// # Format
/// `FUNCTION DELETE library` → `+OK`; `-ERR Library not found`.
fn cmd_function_delete(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let name = String::from_utf8_lossy(ctx.arg(2)).into_owned();
    if !ctx.shared.functions.delete(&name) {
        return Err(CmdError::new("ERR Library not found"));
    }
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `FUNCTION FLUSH [ASYNC|SYNC]` → `+OK` (every library is deleted).
fn cmd_function_flush(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    match ctx.argc() {
        2 => {}
        3 if ctx.arg(2).eq_ignore_ascii_case(b"SYNC") || ctx.arg(2).eq_ignore_ascii_case(b"ASYNC") => {}
        3 => return Err(CmdError::new("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")),
        _ => {
            return Err(CmdError::new(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
                String::from_utf8_lossy(ctx.arg(1))
            )))
        }
    }
    ctx.shared.functions.flush();
    ctx.out.ok();
    Ok(())
}

/// # Format
/// `FUNCTION STATS` → `running_script` (always null: a running function holds every worker)
/// and, per engine, the libraries and functions loaded.
fn cmd_function_stats(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let libs = ctx.shared.functions.list();
    let n_functions: usize = libs.iter().map(|l| l.functions.len()).sum();
    ctx.out.map(2);
    ctx.out.bulk(b"running_script").null();
    ctx.out.bulk(b"engines").map(1).bulk(b"LUA").map(2);
    ctx.out.bulk(b"libraries_count").integer(libs.len() as i64);
    ctx.out.bulk(b"functions_count").integer(n_functions as i64);
    Ok(())
}

/// # Format
/// `FUNCTION HELP` → the subcommands available.
fn cmd_function_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    crate::families::server::reply_help(
        ctx,
        "FUNCTION",
        &[
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (On collision, the old library is restored).",
        ],
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each checked against FUNCTION LOAD on redis-server 7.0.15.
    #[test]
    fn library_metadata_is_read_as_redis_reads_it() {
        assert_eq!(library_metadata(b"#!lua name=x\n"), Ok(("lua".into(), "x".into())));
        assert_eq!(library_metadata(b"#!LUA NAME=x\n"), Ok(("LUA".into(), "x".into())));
        assert_eq!(library_metadata(b"#!lua name=\"foo\"\n"), Ok(("lua".into(), "foo".into())));
        assert_eq!(library_metadata(b"#! name=x\n"), Ok(("".into(), "x".into())));
        assert_eq!(library_metadata(b"lua name=x\n"), Err("Missing library metadata".into()));
        assert_eq!(library_metadata(b"#!lua name=x"), Err("Invalid library metadata".into()));
        assert_eq!(library_metadata(b"#!lua\n"), Err("Library name was not given".into()));
        assert_eq!(library_metadata(b"#!lua name=x foo=bar\n"), Err("Invalid metadata value given: foo=bar".into()));
        assert_eq!(
            library_metadata(b"#!lua name=x name=y\n"),
            Err("Invalid metadata value, name argument was given multiple times".into())
        );
        assert_eq!(split_args("a 'b c' \"d\\te\""), Some(vec!["a".into(), "b c".into(), "d\te".into()]));
        assert_eq!(split_args("a \"b"), None);
        assert_eq!(split_args("\"a\"b"), None);
    }
}
