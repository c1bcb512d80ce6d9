//! Lua scripting (EVAL and friends), as Redis 7.0 runs scripts: Lua 5.1 through `mlua`, the
//! `redis` table, Redis's conversions between RESP replies and Lua values, its sandbox, and
//! the `cjson`, `cmsgpack` and `bit` libraries.
//!
//! - The script cache ([`Scripts`]) is the server's: SHA-1 → body. Each worker thread keeps
//!   its own Lua state ([`Vm`]) with the scripts it has compiled, rebuilt when SCRIPT FLUSH
//!   bumps the cache's generation. Scripts cannot keep state in a Lua state (globals are
//!   read-only), so a script behaves the same on every worker.
//! - A script runs atomically as EXEC does: its caller holds every worker's gate (see
//!   [`crate::families::scripting`]). `redis.call` runs a command through the dispatcher's
//!   [`crate::command::call`] on the caller's connection state, as EXEC's queued commands
//!   run, so commandstats, keyspace notifications, tracking and blocked clients see it as
//!   any other command. Its reply is written to a buffer of its own and converted to Lua.
//! - The environment (the `redis` table, the read-only globals, pcall's error tables) is
//!   set up by `prelude.lua`; the helpers it needs from Rust are the `N` table here.

pub mod bit;
pub mod cjson;
pub mod cmsgpack;
pub mod sha1;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use larder_resp::{Protocol, Reply, Writer};
use mlua::{Function, Lua, StdLib, Table, Value, Variadic};

/// Shebang flags (`#!lua flags=...`), as Redis's `SCRIPT_FLAG_*`.
pub const NO_WRITES: u32 = 1;
pub const ALLOW_OOM: u32 = 1 << 1;
pub const ALLOW_STALE: u32 = 1 << 2;
pub const NO_CLUSTER: u32 = 1 << 3;
pub const ALLOW_CROSS_SLOT: u32 = 1 << 4;
/// No shebang: the script runs as before Redis 7 (its commands decide what it may do).
pub const EVAL_COMPAT: u32 = 1 << 5;

/// A cached script.
#[derive(Debug)]
pub struct Script {
    pub body: Vec<u8>,
    /// Shebang flags.
    pub flags: u32,
}

/// The server's script cache (shared by every worker).
#[derive(Default)]
pub struct Scripts {
    cache: Mutex<HashMap<String, Arc<Script>>>,
    /// Bumped by SCRIPT FLUSH: each worker drops its Lua state when it sees a new value.
    generation: AtomicU64,
    /// The bytes of the cached scripts' names and bodies (INFO `used_memory_scripts_eval`).
    bytes: AtomicU64,
    /// The Lua heap of the state that ran a script last (INFO `used_memory_lua`).
    pub lua_memory: AtomicU64,
}

impl Scripts {
    pub fn get(&self, sha: &str) -> Option<Arc<Script>> {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).get(sha).cloned()
    }
    pub fn insert(&self, sha: String, script: Script) -> Arc<Script> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let bytes = (sha.len() + script.body.len()) as u64;
        cache
            .entry(sha)
            .or_insert_with(|| {
                self.bytes.fetch_add(bytes, Ordering::Relaxed);
                Arc::new(script)
            })
            .clone()
    }
    pub fn len(&self) -> usize {
        self.cache.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// INFO `used_memory_scripts_eval`: names and bodies plus Redis's per-entry overhead.
    pub fn memory(&self) -> u64 {
        let n = self.len() as u64;
        self.bytes.load(Ordering::Relaxed) + n * 56
    }
    /// SCRIPT FLUSH: forgets every script; each worker's Lua state is rebuilt on its next use.
    pub fn flush(&self) {
        let old = std::mem::take(&mut *self.cache.lock().unwrap_or_else(|e| e.into_inner()));
        self.bytes.store(0, Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Relaxed);
        self.lua_memory.store(0, Ordering::Relaxed);
        drop(old);
    }
}

/// A function a library registered (FUNCTION LIST's fields).
#[derive(Debug, Clone)]
pub struct FunctionMeta {
    pub name: String,
    pub desc: Option<Vec<u8>>,
    /// Shebang flags (`no-writes`, ...).
    pub flags: u32,
}

/// A function library: its name, its whole code (shebang included) and its functions.
#[derive(Debug)]
pub struct Library {
    pub name: String,
    pub code: Vec<u8>,
    pub functions: Vec<FunctionMeta>,
}

/// The server's function libraries (FUNCTION LOAD); each worker's Lua state loads a
/// library's code again the first time it calls one of its functions.
#[derive(Default)]
pub struct Libraries {
    libs: Mutex<std::collections::BTreeMap<String, Arc<Library>>>,
    /// Bumped by every change: each worker forgets the functions it loaded.
    generation: AtomicU64,
}

impl Libraries {
    fn lock(&self) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, Arc<Library>>> {
        self.libs.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub fn list(&self) -> Vec<Arc<Library>> {
        self.lock().values().cloned().collect()
    }
    pub fn get(&self, name: &str) -> Option<Arc<Library>> {
        self.lock().get(name).cloned()
    }
    /// The library holding function `name`, and the function.
    pub fn find_function(&self, name: &str) -> Option<(Arc<Library>, FunctionMeta)> {
        self.lock().values().find_map(|l| {
            l.functions.iter().find(|f| f.name.eq_ignore_ascii_case(name)).map(|f| (l.clone(), f.clone()))
        })
    }
    /// Adds (or replaces) a library, unless one of its functions is another library's:
    /// then that function's name.
    pub fn put(&self, lib: Library) -> Result<(), String> {
        let mut libs = self.lock();
        for l in libs.values().filter(|l| l.name != lib.name) {
            if let Some(f) =
                lib.functions.iter().find(|f| l.functions.iter().any(|g| g.name.eq_ignore_ascii_case(&f.name)))
            {
                return Err(f.name.clone());
            }
        }
        libs.insert(lib.name.clone(), Arc::new(lib));
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
    pub fn delete(&self, name: &str) -> bool {
        let found = self.lock().remove(name).is_some();
        self.generation.fetch_add(1, Ordering::Relaxed);
        found
    }
    pub fn flush(&self) {
        self.lock().clear();
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

/// Whether `name` is a valid library or function name: letters, digits and `_`, not empty.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// The shebang flag named `name`.
fn flag_named(name: &str) -> Option<u32> {
    Some(match name {
        "no-writes" => NO_WRITES,
        "allow-oom" => ALLOW_OOM,
        "allow-stale" => ALLOW_STALE,
        "no-cluster" => NO_CLUSTER,
        "allow-cross-slot-keys" => ALLOW_CROSS_SLOT,
        _ => return None,
    })
}

/// The flags' names, in Redis's order (FUNCTION LIST).
pub const FLAG_NAMES: &[(u32, &str)] = &[
    (NO_WRITES, "no-writes"),
    (ALLOW_OOM, "allow-oom"),
    (ALLOW_STALE, "allow-stale"),
    (NO_CLUSTER, "no-cluster"),
    (ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
];

/// How long a library's code may run while FUNCTION LOAD registers its functions.
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// What a script run is: an EVAL script (by SHA-1) or a function (by name).
#[derive(Clone, Copy)]
pub enum Target<'a> {
    Script(&'a str),
    Function(&'a str),
}

/// A function as a library's code registered it.
pub struct Registered {
    pub meta: FunctionMeta,
    func: Function,
}

/// Reads a script's shebang line: its flags and the length of the line (kept out of the
/// compiled code, but its line feed stays so line numbers do not move). Redis's
/// `evalExtractShebangFlags`, with its error texts.
pub fn shebang(body: &[u8]) -> Result<(u32, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((EVAL_COMPAT, 0));
    }
    let Some(len) = body.iter().position(|&c| c == b'\n') else {
        return Err("Invalid script shebang".into());
    };
    let line = String::from_utf8_lossy(&body[..len]);
    let mut parts = line.split_ascii_whitespace();
    let engine = parts.next().unwrap_or("");
    if engine != "#!lua" {
        return Err(format!("Unexpected engine in script shebang: {engine}"));
    }
    let mut flags = 0;
    for part in parts {
        let Some(list) = part.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {part}"));
        };
        for f in list.split(',').filter(|f| !f.is_empty()) {
            flags |= flag_named(f).ok_or_else(|| format!("Unexpected flag in script shebang: {f}"))?;
        }
    }
    Ok((flags, len))
}

/// Runs one command for `redis.call`: its arguments and the protocol → its RESP reply.
pub type CommandFn<'a> = dyn FnMut(&[Vec<u8>], Call) -> Vec<u8> + 'a;

/// What a script asks of a command (see [`CommandFn`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// Run it (`redis.call`, `redis.pcall`) and answer its reply in this protocol.
    Run(Protocol),
    /// Whether the caller's ACL user may run it (`redis.acl_check_cmd`): `:1` or `:0`, or an
    /// error for a command that does not exist.
    AclCheck,
}

/// A worker's Lua state and the scripts compiled in it.
pub struct Vm {
    lua: Lua,
    generation: u64,
    /// The sandboxed global environment scripts run in.
    env: Table,
    /// The environment of function libraries (only `redis` while a library loads).
    fenv: Table,
    /// The prelude's runner: `run(f, KEYS, ARGV, call, pcall, setresp, acl_check_cmd,
    /// is_function)` → ok, value.
    run: Function,
    /// The prelude's library loader: `load(f, register_function)` → ok, error.
    load: Function,
    funcs: HashMap<String, Function>,
    /// The functions loaded, for [`Libraries`]'s generation `fgen`.
    fns: HashMap<String, Function>,
    fgen: u64,
}

thread_local! {
    static VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's Lua state for the cache's current generation.
pub fn with_vm<R>(scripts: &Scripts, f: impl FnOnce(&mut Vm) -> R) -> R {
    let generation = scripts.generation.load(Ordering::Relaxed);
    VM.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.as_ref().is_none_or(|vm| vm.generation != generation) {
            *slot = None;
            *slot = Some(Vm::new(generation).expect("the Lua state and its prelude load"));
        }
        f(slot.as_mut().expect("just set"))
    })
}

impl Vm {
    fn new(generation: u64) -> mlua::Result<Vm> {
        let lua = Lua::new_with(StdLib::TABLE | StdLib::STRING | StdLib::MATH, mlua::LuaOptions::default())?;
        let n = lua.create_table()?;
        n.set("cjson", cjson::open(&lua)?)?;
        n.set("bit", bit::open(&lua)?)?;
        n.set("cmsgpack", cmsgpack::open(&lua)?)?;
        n.set("version", crate::REDIS_VERSION)?;
        n.set("version_num", version_num(crate::REDIS_VERSION))?;
        n.set(
            "sha1hex",
            lua.create_function(|lua, a: Variadic<Value>| {
                if a.len() != 1 {
                    return Err(raise(lua, b"wrong number of arguments"));
                }
                let body = match &a[0] {
                    Value::String(s) => s.as_bytes().to_vec(),
                    Value::Integer(_) | Value::Number(_) => lua_tostring(&a[0]),
                    _ => Vec::new(),
                };
                Ok(sha1::sha1_hex(&body))
            })?,
        )?;
        n.set("log", lua.create_function(|lua, a: Variadic<Value>| log(lua, &a))?)?;
        // Replication flags are accepted and checked; there is no replication to apply them to.
        n.set(
            "set_repl",
            lua.create_function(|lua, a: Variadic<Value>| {
                if a.len() != 1 {
                    return Err(raise(lua, b"redis.set_repl() requires two arguments."));
                }
                let flags = lua_tonumber(&a[0]) as i64;
                if flags & !3 != 0 {
                    return Err(raise(
                        lua,
                        b"Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                    ));
                }
                Ok(())
            })?,
        )?;
        n.set("take_error", lua.create_function(|lua, e: Value| take_error(lua, &e))?)?;
        n.set(
            "error_text",
            lua.create_function(|lua, s: mlua::LuaString| lua.create_string(error_text(&s.as_bytes())))?,
        )?;
        n.set("handler", lua.create_function(handler)?)?;
        let (env, fenv, run, load): (Table, Table, Function, Function) =
            lua.load(include_str!("prelude.lua")).set_name("=larder").call((lua.globals(), n))?;
        Ok(Vm { lua, generation, env, fenv, run, load, funcs: HashMap::new(), fns: HashMap::new(), fgen: u64::MAX })
    }

    /// Compiles `body` as script `sha` unless this state has it already. The error is
    /// Redis's "Error compiling script" reply, without its `ERR `.
    pub fn compile(&mut self, sha: &str, body: &[u8]) -> Result<(), String> {
        if self.funcs.contains_key(sha) {
            return Ok(());
        }
        let (_, skip) = shebang(body)?;
        let f = self
            .lua
            .load(&body[skip..])
            .set_name("@user_script")
            .set_environment(self.env.clone())
            .into_function()
            .map_err(|e| format!("Error compiling script (new function): {}", error_message(&e)))?;
        self.funcs.insert(sha.to_string(), f);
        Ok(())
    }

    /// Runs a library's code (after its shebang line, whose line feed it starts with) and
    /// returns the functions it registered; the error is FUNCTION LOAD's reply text.
    pub fn load_library(&mut self, code: &[u8]) -> Result<Vec<Registered>, String> {
        let lua = &self.lua;
        let f = lua
            .load(code)
            .set_name("@user_function")
            .set_environment(self.fenv.clone())
            .into_function()
            .map_err(|e| format!("Error compiling function: {}", error_message(&e)))?;
        let registered: RefCell<Vec<Registered>> = RefCell::new(Vec::new());
        let result = lua.scope(|scope| {
            let register = scope.create_function(|lua, a: Variadic<Value>| {
                let r = register_args(&a).map_err(|msg| raise(lua, msg.as_bytes()))?;
                if !valid_name(&r.meta.name) {
                    return Err(raise(lua, b"Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"));
                }
                let mut list = registered.borrow_mut();
                if list.iter().any(|x| x.meta.name.eq_ignore_ascii_case(&r.meta.name)) {
                    return Err(raise(lua, b"Function already exists in the library"));
                }
                list.push(r);
                Ok(())
            })?;
            // A library's code may run 500 ms at most (Redis's LOAD_TIMEOUT_MS).
            let started = std::time::Instant::now();
            lua.set_hook(mlua::HookTriggers::new().every_nth_instruction(100_000), move |lua, _| {
                if started.elapsed() > LOAD_TIMEOUT {
                    return Err(raise(lua, b"FUNCTION LOAD timeout"));
                }
                Ok(mlua::VmState::Continue)
            })?;
            let r: mlua::Result<(bool, Value)> = self.load.call((f, register));
            lua.remove_hook();
            r
        });
        let _ = self.lua.gc_step();
        match result {
            Ok((true, _)) => Ok(registered.into_inner()),
            Ok((false, v)) => {
                let msg = match &v {
                    Value::Table(t) => t.raw_get::<mlua::BString>("err").map(|s| s.to_vec()).unwrap_or_default(),
                    _ => Vec::new(),
                };
                Err(format!("Error registering functions: {}", String::from_utf8_lossy(&msg)))
            }
            Err(e) => Err(format!("Error registering functions: {}", error_message(&e))),
        }
    }

    /// Makes function `name` (of library `lib`) callable in this state, loading its
    /// library's code if this state has not since the libraries last changed.
    pub fn ensure_function(&mut self, libs: &Libraries, lib: &Library, name: &str) -> Result<(), String> {
        let fgen = libs.generation.load(Ordering::Relaxed);
        if self.fgen != fgen {
            self.fns.clear();
            self.fgen = fgen;
        }
        if self.fns.contains_key(name) {
            return Ok(());
        }
        let skip = lib.code.iter().position(|&c| c == b'\n').unwrap_or(lib.code.len());
        for r in self.load_library(&lib.code[skip..])? {
            self.fns.insert(r.meta.name, r.func);
        }
        Ok(())
    }

    /// Runs compiled script `sha` with its keys and arguments. `call` runs one command from
    /// `redis.call`/`redis.pcall` (its arguments; its RESP reply in the protocol given).
    /// Returns what the script returned, or its error (the reply's text, and whether the
    /// error was already counted in the error stats by the command that raised it).
    pub fn run(
        &mut self,
        target: Target<'_>,
        keys: &[&[u8]],
        argv: &[&[u8]],
        call: &mut CommandFn<'_>,
    ) -> Result<Out, (Vec<u8>, bool)> {
        let internal = |e: mlua::Error| (format!("ERR {}", error_message(&e)).into_bytes(), false);
        let (f, label, is_function) = match target {
            Target::Script(sha) => (self.funcs.get(sha), sha, false),
            Target::Function(name) => (self.fns.get(name), name, true),
        };
        let f = f.cloned().ok_or_else(|| (b"ERR Function not found".to_vec(), false))?;
        let lua = &self.lua;
        let keys = lua.create_sequence_from(keys.iter().map(|k| mlua::BString::from(*k))).map_err(internal)?;
        let argv = lua.create_sequence_from(argv.iter().map(|a| mlua::BString::from(*a))).map_err(internal)?;
        let resp = std::cell::Cell::new(Protocol::Resp2);
        let call = RefCell::new(call);
        // redis.call raises a command's error, redis.pcall returns it.
        let command = |lua: &Lua, args: &[Value], raises: bool| -> mlua::Result<Value> {
            let argv = match command_args(args) {
                Ok(a) => a,
                Err(msg) if raises => return Err(raise(lua, msg)),
                Err(msg) => return error_table(lua, msg),
            };
            let reply = (call.borrow_mut())(&argv, Call::Run(resp.get()));
            let (value, failed) = match larder_resp::parse_reply(&reply) {
                Ok(Some((r, _))) => (reply_to_lua(lua, &r)?, r.is_error()),
                _ => (error_table(lua, b"ERR corrupt reply")?, true),
            };
            if failed && raises {
                return Err(raise_table(lua, value));
            }
            Ok(value)
        };
        let _ = lua.set_named_registry_value(PENDING_ERROR, Value::Nil);
        let result = lua.scope(|scope| {
            let call_fn = scope.create_function(|lua, args: Variadic<Value>| command(lua, &args, true))?;
            let pcall_fn = scope.create_function(|lua, args: Variadic<Value>| command(lua, &args, false))?;
            let setresp_fn = scope.create_function(|lua, args: Variadic<Value>| {
                if args.len() != 1 {
                    return Err(raise(lua, b"redis.setresp() requires one argument."));
                }
                match lua_tonumber(&args[0]) as i64 {
                    2 => resp.set(Protocol::Resp2),
                    3 => resp.set(Protocol::Resp3),
                    _ => return Err(raise(lua, b"RESP version must be 2 or 3.")),
                }
                Ok(())
            })?;
            let acl_fn = scope.create_function(|lua, args: Variadic<Value>| {
                let argv = command_args(&args).map_err(|msg| raise(lua, msg))?;
                let reply = (call.borrow_mut())(&argv, Call::AclCheck);
                match reply.first() {
                    Some(b':') => Ok(reply.get(1) == Some(&b'1')),
                    _ => Err(raise(lua, reply.get(1..reply.len().saturating_sub(2)).unwrap_or_default())),
                }
            })?;
            let (ok, v): (bool, Value) =
                self.run.call((f, keys, argv, call_fn, pcall_fn, setresp_fn, acl_fn, is_function))?;
            if !ok {
                return Ok(Err(script_error(&v, label)));
            }
            // An error table returned as the result is an error reply, counted in the
            // error stats unless it is a command's error (redis.pcall's) already counted.
            Ok(match lua_to_out(&v, resp.get(), 0) {
                Out::Error(line) => Err((line[1..].to_vec(), counted_error(&v))),
                out => Ok(out),
            })
        });
        self.lua_gc_step();
        result.map_err(internal)?
    }

    fn lua_gc_step(&self) {
        let _ = self.lua.gc_step();
    }

    /// The bytes of this Lua state's heap.
    pub fn memory(&self) -> u64 {
        self.lua.used_memory() as u64
    }
}

/// The arguments of `redis.register_function`: `(name, callback)` or one table of named
/// arguments (function_name, callback, flags, description). Errors are Redis's.
fn register_args(a: &[Value]) -> Result<Registered, &'static str> {
    let (mut name, mut func, mut desc, mut flags) = (None, None, None, 0);
    match a {
        [Value::Table(t)] => {
            for pair in t.clone().pairs::<Value, Value>() {
                let (k, v) = pair.map_err(|_| "unknown argument given to redis.register_function")?;
                let Value::String(k) = k else {
                    return Err("named argument key given to redis.register_function is not a string");
                };
                match (&*k.as_bytes(), v) {
                    (b"function_name", Value::String(s)) => name = Some(s.to_string_lossy()),
                    (b"function_name", _) => {
                        return Err("function_name argument given to redis.register_function must be a string")
                    }
                    (b"description", Value::String(s)) => desc = Some(s.as_bytes().to_vec()),
                    (b"description", _) => {
                        return Err("description argument given to redis.register_function must be a string")
                    }
                    (b"callback", Value::Function(f)) => func = Some(f),
                    (b"callback", _) => return Err("callback argument given to redis.register_function must be a function"),
                    (b"flags", Value::Table(ft)) => {
                        for v in ft.sequence_values::<Value>() {
                            let f = match v {
                                Ok(Value::String(s)) => flag_named(&s.to_string_lossy()),
                                _ => None,
                            };
                            flags |= f.ok_or("unknown flag given")?;
                        }
                    }
                    (b"flags", _) => {
                        return Err("flags argument to redis.register_function must be a table representing function flags")
                    }
                    _ => return Err("unknown argument given to redis.register_function"),
                }
            }
        }
        [_] => {
            return Err("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")
        }
        [n, f] => {
            let Value::String(n) = n else { return Err("first argument to redis.register_function must be a string") };
            let Value::Function(f) = f else {
                return Err("second argument to redis.register_function must be a function");
            };
            name = Some(n.to_string_lossy());
            func = Some(f.clone());
        }
        _ => return Err("wrong number of arguments to redis.register_function"),
    }
    let name = name.ok_or("redis.register_function must get a function name argument")?;
    let func = func.ok_or("redis.register_function must get a callback argument")?;
    Ok(Registered { meta: FunctionMeta { name, desc, flags }, func })
}

/// `7.0.15` → 0x00070f (Redis's REDIS_VERSION_NUM).
fn version_num(v: &str) -> i64 {
    v.split('.').take(3).fold(0, |acc, p| acc * 256 + p.parse::<i64>().unwrap_or(0))
}

/// The message of an mlua error, without mlua's wrapping (callback context, traceback).
fn error_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::CallbackError { cause, .. } => error_message(cause),
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Redis's `luaPushErrorBuff`: "-CODE msg" keeps its code, "msg" gets ERR; the message is
/// trimmed of CR and LF at both ends.
pub fn error_text(s: &[u8]) -> Vec<u8> {
    let (code, msg): (&[u8], &[u8]) = match s.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&c| c == b' ') {
            Some(sp) => (&rest[..sp], &rest[sp + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", s),
    };
    let trim = |c: &u8| *c == b'\r' || *c == b'\n';
    let start = msg.iter().position(|c| !trim(c)).unwrap_or(msg.len());
    let end = msg.iter().rposition(|c| !trim(c)).map_or(start, |e| e + 1);
    let mut out = code.to_vec();
    out.push(b' ');
    out.extend_from_slice(&msg[start..end]);
    out
}

/// An error table `{err = "CODE msg"}` from a message as [`error_text`] reads it.
fn error_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Value> {
    let t = lua.create_table()?;
    t.set("err", lua.create_string(error_text(msg))?)?;
    Ok(Value::Table(t))
}

/// Where a Rust function puts the error table it raises (Lua errors raised from Rust are
/// mlua error values; the handler and pcall take the table from here).
const PENDING_ERROR: &str = "larder.pending_error";

/// Raises error table `t` from a Rust function (Redis's `luaError` after `luaPushError`).
fn raise_table(lua: &Lua, t: Value) -> mlua::Error {
    let msg = match &t {
        Value::Table(t) => t.raw_get::<mlua::BString>("err").map(|s| String::from_utf8_lossy(&s).into_owned()),
        _ => Ok(String::new()),
    };
    let _ = lua.set_named_registry_value(PENDING_ERROR, t);
    mlua::Error::RuntimeError(msg.unwrap_or_default())
}

/// Raises the error table of message `msg` (as [`error_text`] reads it).
fn raise(lua: &Lua, msg: &[u8]) -> mlua::Error {
    match error_table(lua, msg) {
        Ok(t) => raise_table(lua, t),
        Err(e) => e,
    }
}

/// The error table a Rust function raised, taken from where it was put aside (if any).
fn take_pending(lua: &Lua) -> Option<Table> {
    let t = lua.named_registry_value::<Value>(PENDING_ERROR).ok()?;
    let _ = lua.set_named_registry_value(PENDING_ERROR, Value::Nil);
    match t {
        Value::Table(t) => Some(t),
        _ => None,
    }
}

/// For Redis's `pcall`: the message of an error raised from Rust.
fn take_error(lua: &Lua, e: &Value) -> mlua::Result<Value> {
    if let Some(t) = take_pending(lua) {
        return t.raw_get("err");
    }
    match e {
        Value::Error(e) => Ok(Value::String(lua.create_string(error_message(e))?)),
        other => Ok(other.clone()),
    }
}

/// Lua's `lua_tonumber`: numbers, and strings that read as numbers; 0 otherwise.
fn lua_tonumber(v: &Value) -> f64 {
    match v {
        Value::Integer(i) => *i as f64,
        Value::Number(x) => *x,
        Value::String(s) => {
            let b = s.as_bytes();
            let t = std::str::from_utf8(&b).unwrap_or("").trim();
            t.parse::<f64>().ok().or_else(|| parse_lua_hex(t)).unwrap_or(0.0)
        }
        _ => 0.0,
    }
}

fn parse_lua_hex(t: &str) -> Option<f64> {
    let h = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
    u64::from_str_radix(h, 16).ok().map(|v| v as f64)
}

/// Lua's `tostring` of a number (`%.14g`), for the places Lua itself converts one.
fn lua_tostring(v: &Value) -> Vec<u8> {
    match v {
        Value::Integer(i) => i.to_string().into_bytes(),
        Value::Number(x) => format_g(*x, 14).into_bytes(),
        Value::String(s) => s.as_bytes().to_vec(),
        _ => Vec::new(),
    }
}

/// The arguments of `redis.call`: strings as they are, numbers as `%.17g` (Redis does not
/// use Lua's own conversion, which loses precision). Anything else is refused.
fn command_args(args: &[Value]) -> Result<Vec<Vec<u8>>, &'static [u8]> {
    if args.is_empty() {
        return Err(b"Please specify at least one argument for this redis lib call");
    }
    args.iter()
        .map(|a| match a {
            Value::String(s) => Ok(s.as_bytes().to_vec()),
            Value::Integer(i) => Ok(format_g(*i as f64, 17).into_bytes()),
            Value::Number(x) => Ok(format_g(*x, 17).into_bytes()),
            _ => Err(&b"Lua redis lib command arguments must be strings or integers"[..]),
        })
        .collect()
}

/// C's `printf("%.{prec}g", x)`.
pub fn format_g(x: f64, prec: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan".into() } else { "nan".into() };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    let p = prec.max(1);
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if exp < -4 || exp >= p as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{}{:02}", strip(mantissa), sign, exp.abs())
    } else {
        strip(&format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, x))
    }
}

/// `redis.log(level, ...)`: to the server log at the matching level.
fn log(lua: &Lua, a: &[Value]) -> mlua::Result<()> {
    if a.len() < 2 {
        return Err(raise(lua, b"redis.log() requires two arguments or more."));
    }
    if !matches!(&a[0], Value::Integer(_) | Value::Number(_)) && lua_tonumber(&a[0]) == 0.0 {
        return Err(raise(lua, b"First argument must be a number (log level)."));
    }
    let level = lua_tonumber(&a[0]) as i64;
    if !(0..=3).contains(&level) {
        return Err(raise(lua, b"Invalid debug level."));
    }
    let parts: Vec<String> = a[1..]
        .iter()
        .filter(|v| matches!(v, Value::String(_) | Value::Integer(_) | Value::Number(_)))
        .map(|v| String::from_utf8_lossy(&lua_tostring(v)).into_owned())
        .collect();
    let msg = parts.join(" ");
    match level {
        0 => tracing::debug!(target: "lua", "{msg}"),
        1 => tracing::info!(target: "lua", "{msg}"),
        2 => tracing::info!(target: "lua", "{msg}"),
        _ => tracing::warn!(target: "lua", "{msg}"),
    }
    Ok(())
}

/// The error handler scripts run under (Redis's `__redis__err__handler`): turns any error
/// into a table `{err = ..., source = ..., line = ...}` naming the script line that raised
/// it (the first Lua frame outside Larder's own wrappers).
fn handler(lua: &Lua, e: Value) -> mlua::Result<Table> {
    let pending = match e {
        Value::Error(_) => take_pending(lua),
        _ => None,
    };
    let t = match e {
        _ if pending.is_some() => pending.expect("checked"),
        Value::Table(t) if matches!(t.raw_get::<Value>("err")?, Value::String(_)) => t,
        other => {
            let msg = match &other {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(_) | Value::Number(_) => lua_tostring(&other),
                // luaL_error's position: the Lua function that called the failing one.
                Value::Error(e) => {
                    let at = lua.inspect_stack(2, |d| {
                        let src = d.source();
                        (src.what != "C")
                            .then(|| (src.short_src.as_deref().unwrap_or("?").to_string(), d.current_line()))
                    });
                    let mut m = match at.flatten() {
                        Some((src, Some(line))) => format!("{src}:{line}: "),
                        _ => String::new(),
                    };
                    m.push_str(&error_message(e));
                    m.into_bytes()
                }
                Value::Nil => b"nil".to_vec(),
                Value::Boolean(b) => b.to_string().into_bytes(),
                v => format!("{}: {:p}", v.type_name(), v.to_pointer()).into_bytes(),
            };
            let t = lua.create_table()?;
            let mut err = b"ERR ".to_vec();
            err.extend_from_slice(&msg);
            t.set("err", lua.create_string(err)?)?;
            t
        }
    };
    for level in 1..64 {
        let found = lua.inspect_stack(level, |d| {
            let src = d.source();
            let source = src.source.as_deref().unwrap_or("").to_string();
            (source, src.what, d.current_line())
        });
        let Some((source, what, line)) = found else { break };
        if what == "C" || source == "=larder" {
            continue;
        }
        t.set("source", source)?;
        t.set("line", line.map_or(-1, |l| l as i64))?;
        break;
    }
    Ok(t)
}

/// The error reply of a script that raised error table `v`: Redis's
/// "-CODE msg script: SHA, on @user_script:LINE." and whether the command that raised it
/// counted it already.
fn script_error(v: &Value, sha: &str) -> (Vec<u8>, bool) {
    let Value::Table(t) = v else {
        return (format!("ERR Error running script {sha}, execution failure").into_bytes(), false);
    };
    let get = |k: &str| match t.raw_get::<Value>(k) {
        Ok(v @ (Value::String(_) | Value::Integer(_) | Value::Number(_))) => Some(lua_tostring(&v)),
        _ => None,
    };
    let mut msg = get("err").unwrap_or_default();
    if let (Some(source), Some(line)) = (get("source"), get("line")) {
        msg.extend_from_slice(format!(" script: {sha}, on ").as_bytes());
        msg.extend_from_slice(&source);
        msg.push(b':');
        msg.extend_from_slice(&line);
        msg.push(b'.');
    }
    (msg, counted_error(v))
}

/// Whether error table `v` is a command's error that its command counted already.
fn counted_error(v: &Value) -> bool {
    match v {
        Value::Table(t) => matches!(t.raw_get::<Value>("ignore_error_stats_update"), Ok(Value::Boolean(true))),
        _ => false,
    }
}

/// A command's RESP reply as a Lua value (Redis's `redisProtocolToLuaType`).
fn reply_to_lua(lua: &Lua, r: &Reply<'_>) -> mlua::Result<Value> {
    let table1 = |k: &str, v: Value| -> mlua::Result<Value> {
        let t = lua.create_table()?;
        t.raw_set(k, v)?;
        Ok(Value::Table(t))
    };
    let s = |b: &[u8]| lua.create_string(b).map(Value::String);
    Ok(match r {
        Reply::Simple(x) => table1("ok", s(x)?)?,
        Reply::Error(x) | Reply::BlobError(x) => {
            let mut line = b"-".to_vec();
            line.extend_from_slice(x);
            let t = lua.create_table()?;
            t.raw_set("err", lua.create_string(error_text(&line))?)?;
            t.raw_set("ignore_error_stats_update", true)?;
            Value::Table(t)
        }
        Reply::Integer(i) => Value::Number(*i as f64),
        Reply::Bulk(x) => s(x)?,
        Reply::NullBulk | Reply::NullArray => Value::Boolean(false),
        Reply::Null => Value::Nil,
        Reply::Double(d) => table1("double", Value::Number(*d))?,
        Reply::Boolean(b) => Value::Boolean(*b),
        Reply::BigNumber(x) => table1("big_number", s(x)?)?,
        Reply::Verbatim { format, text } => {
            let v = lua.create_table()?;
            v.raw_set("string", s(text)?)?;
            v.raw_set("format", s(format)?)?;
            table1("verbatim_string", Value::Table(v))?
        }
        Reply::Array(items) | Reply::Push(items) => {
            let t = lua.create_table()?;
            for (i, item) in items.iter().enumerate() {
                t.raw_set(i + 1, reply_to_lua(lua, item)?)?;
            }
            Value::Table(t)
        }
        Reply::Map(pairs) => {
            let m = lua.create_table()?;
            for (k, v) in pairs {
                m.raw_set(reply_to_lua(lua, k)?, reply_to_lua(lua, v)?)?;
            }
            table1("map", Value::Table(m))?
        }
        Reply::Set(items) => {
            let m = lua.create_table()?;
            for k in items {
                m.raw_set(reply_to_lua(lua, k)?, true)?;
            }
            table1("set", Value::Table(m))?
        }
        Reply::Attribute { reply, .. } => reply_to_lua(lua, reply)?,
    })
}

/// A script's result, converted from Lua (Redis's `luaReplyToRedisReply`), to be written in
/// the caller's protocol.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Bulk(Vec<u8>),
    Int(i64),
    /// `{err = ...}`: written as is (its code included).
    Error(Vec<u8>),
    Status(Vec<u8>),
    Double(f64),
    BigNumber(Vec<u8>),
    Verbatim([u8; 3], Vec<u8>),
    Bool(bool),
    Null,
    Array(Vec<Out>),
    Map(Vec<(Out, Out)>),
    Set(Vec<Out>),
}

/// How deep a returned table may nest: Redis stops at its Lua stack limit (about 2000
/// levels); this stops sooner, so the conversion's recursion stays well inside a worker's
/// stack.
const MAX_DEPTH: usize = 200;

/// Converts what a script returned; `resp` is the protocol the script chose (booleans
/// differ).
pub fn lua_to_out(v: &Value, resp: Protocol, depth: usize) -> Out {
    if depth > MAX_DEPTH {
        return Out::Error(b"-ERR reached lua stack limit".to_vec());
    }
    match v {
        Value::String(s) => Out::Bulk(s.as_bytes().to_vec()),
        Value::Boolean(b) => match (resp, b) {
            (Protocol::Resp2, true) => Out::Int(1),
            (Protocol::Resp2, false) => Out::Null,
            (Protocol::Resp3, b) => Out::Bool(*b),
        },
        Value::Integer(i) => Out::Int(*i),
        Value::Number(x) => Out::Int(*x as i64),
        Value::Table(t) => {
            let field = |k: &str| t.raw_get::<Value>(k).unwrap_or(Value::Nil);
            if let Value::String(e) = field("err") {
                let mut line = b"-".to_vec();
                line.extend_from_slice(&e.as_bytes());
                return Out::Error(line);
            }
            if let Value::String(s) = field("ok") {
                return Out::Status(s.as_bytes().to_vec());
            }
            match field("double") {
                Value::Number(d) => return Out::Double(d),
                Value::Integer(i) => return Out::Double(i as f64),
                _ => {}
            }
            if let Value::String(s) = field("big_number") {
                let digits = s.as_bytes().iter().map(|&c| if c == b'\r' || c == b'\n' { b' ' } else { c }).collect();
                return Out::BigNumber(digits);
            }
            if let Value::Table(vt) = field("verbatim_string") {
                if let (Ok(Value::String(f)), Ok(Value::String(s))) =
                    (vt.raw_get::<Value>("format"), vt.raw_get::<Value>("string"))
                {
                    let f = f.as_bytes();
                    let mut format = *b"txt";
                    for (d, c) in format.iter_mut().zip(f.iter()) {
                        *d = *c;
                    }
                    return Out::Verbatim(format, s.as_bytes().to_vec());
                }
            }
            if let Value::Table(m) = field("map") {
                let pairs = m
                    .pairs::<Value, Value>()
                    .filter_map(Result::ok)
                    .map(|(k, v)| (lua_to_out(&k, resp, depth + 1), lua_to_out(&v, resp, depth + 1)))
                    .collect();
                return Out::Map(pairs);
            }
            if let Value::Table(s) = field("set") {
                let items = s
                    .pairs::<Value, Value>()
                    .filter_map(Result::ok)
                    .map(|(k, _)| lua_to_out(&k, resp, depth + 1))
                    .collect();
                return Out::Set(items);
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<Value>(i) {
                    Ok(Value::Nil) | Err(_) => break,
                    Ok(v) => items.push(lua_to_out(&v, resp, depth + 1)),
                }
            }
            Out::Array(items)
        }
        _ => Out::Null,
    }
}

/// Writes a script's result in the caller's protocol.
pub fn write_out(w: &mut Writer<'_>, o: &Out) {
    match o {
        Out::Bulk(b) => {
            w.bulk(b);
        }
        Out::Int(i) => {
            w.integer(*i);
        }
        Out::Error(e) => {
            w.error(e);
        }
        Out::Status(s) => {
            w.simple(s);
        }
        // Redis 7.0's addReplyDouble: `%.17g`.
        Out::Double(d) => {
            let text = format_g(*d, 17);
            match w.protocol() {
                Protocol::Resp2 => w.bulk(text.as_bytes()),
                Protocol::Resp3 => w.raw(format!(",{text}\r\n").as_bytes()),
            };
        }
        Out::BigNumber(b) => {
            w.big_number(b);
        }
        Out::Verbatim(f, s) => {
            w.verbatim(f, s);
        }
        Out::Bool(b) => {
            w.boolean(*b);
        }
        Out::Null => {
            w.null();
        }
        Out::Array(items) => {
            w.array(items.len());
            items.iter().for_each(|i| write_out(w, i));
        }
        Out::Map(pairs) => {
            w.map(pairs.len());
            for (k, v) in pairs {
                write_out(w, k);
                write_out(w, v);
            }
        }
        Out::Set(items) => {
            w.set(items.len());
            items.iter().for_each(|i| write_out(w, i));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_g_is_printfs() {
        for (x, p, want) in [
            (1.0, 17, "1"),
            (0.1, 17, "0.10000000000000001"),
            (2.5, 14, "2.5"),
            (1e20, 14, "1e+20"),
            (1e-5, 14, "1.0000000000000001e-05"),
            (123456789012345678.0, 17, "1.2345678901234568e+17"),
            (-2.5, 17, "-2.5"),
            (100.0, 14, "100"),
            (0.0001, 14, "0.0001"),
        ] {
            if (x, p) == (1e-5, 14) {
                assert_eq!(format_g(x, p), "1e-05");
                continue;
            }
            assert_eq!(format_g(x, p), want, "{x} {p}");
        }
        assert_eq!(format_g(f64::INFINITY, 17), "inf");
    }

    #[test]
    fn shebangs_are_read_as_redis_reads_them() {
        assert_eq!(shebang(b"return 1"), Ok((EVAL_COMPAT, 0)));
        assert_eq!(shebang(b"#!lua\nreturn 1"), Ok((0, 5)));
        assert_eq!(shebang(b"#!lua flags=no-writes,allow-oom\nreturn 1"), Ok((NO_WRITES | ALLOW_OOM, 31)));
        assert_eq!(shebang(b"#!lua"), Err("Invalid script shebang".into()));
        assert_eq!(shebang(b"#!python\n"), Err("Unexpected engine in script shebang: #!python".into()));
        assert_eq!(shebang(b"#!lua flags=bad\n"), Err("Unexpected flag in script shebang: bad".into()));
        assert_eq!(shebang(b"#!lua name=x\n"), Err("Unknown lua shebang option: name=x".into()));
    }

    #[test]
    fn error_text_keeps_or_adds_the_code() {
        assert_eq!(error_text(b"-WRONGTYPE Operation"), b"WRONGTYPE Operation");
        assert_eq!(error_text(b"-ERR x\r\n"), b"ERR x");
        assert_eq!(error_text(b"plain"), b"ERR plain");
        assert_eq!(error_text(b"-NOCODE"), b"ERR NOCODE");
    }

    /// Runs `code` with a fake redis.call that answers `reply` to every command.
    fn run(code: &str, reply: &[u8]) -> Result<Out, (Vec<u8>, bool)> {
        let scripts = Scripts::default();
        with_vm(&scripts, |vm| {
            let sha = sha1::sha1_hex(code.as_bytes());
            vm.compile(&sha, code.as_bytes()).map_err(|e| (e.into_bytes(), false))?;
            let mut call = |_: &[Vec<u8>], _: Call| reply.to_vec();
            vm.run(Target::Script(&sha), &[b"k"], &[b"a", b"b"], &mut call)
        })
    }

    #[test]
    fn replies_convert_as_redis_converts_them() {
        assert_eq!(run("return redis.call('get', KEYS[1])", b"$3\r\nabc\r\n"), Ok(Out::Bulk(b"abc".to_vec())));
        assert_eq!(run("return redis.call('get', KEYS[1])", b"$-1\r\n"), Ok(Out::Null));
        assert_eq!(run("return type(redis.call('get', 'x'))", b"$-1\r\n"), Ok(Out::Bulk(b"boolean".to_vec())));
        assert_eq!(run("return redis.call('incr', 'x')", b":7\r\n"), Ok(Out::Int(7)));
        assert_eq!(run("return redis.call('set', 'x', 1)", b"+OK\r\n"), Ok(Out::Status(b"OK".to_vec())));
        assert_eq!(
            run("return redis.call('lrange', 'x', 0, -1)", b"*3\r\n:1\r\n$-1\r\n:3\r\n"),
            Ok(Out::Array(vec![Out::Int(1), Out::Null, Out::Int(3)]))
        );
        assert_eq!(
            run("return {1, 2, 3.9, 'x', nil, 5}", b""),
            Ok(Out::Array(vec![Out::Int(1), Out::Int(2), Out::Int(3), Out::Bulk(b"x".to_vec())]))
        );
        assert_eq!(run("return true", b""), Ok(Out::Int(1)));
        assert_eq!(run("return false", b""), Ok(Out::Null));
        assert_eq!(run("redis.setresp(3) return false", b""), Ok(Out::Bool(false)));
        assert_eq!(run("return {double = 1.5}", b""), Ok(Out::Double(1.5)));
        assert_eq!(run("return KEYS[1] .. ARGV[2]", b""), Ok(Out::Bulk(b"kb".to_vec())));
        assert_eq!(
            run("return redis.pcall('incr', 'x')", b"-ERR value is not an integer\r\n"),
            Err((b"ERR value is not an integer".to_vec(), true))
        );
        let code = "return redis.call('incr', 'x')";
        assert_eq!(run(code, b"-WRONGTYPE Operation\r\n"), Err((run_err_text(code, "WRONGTYPE Operation"), true)));
    }

    fn run_err_text(code: &str, msg: &str) -> Vec<u8> {
        format!("{msg} script: {}, on @user_script:1.", sha1::sha1_hex(code.as_bytes())).into_bytes()
    }

    #[test]
    fn the_sandbox_refuses_globals_and_library_changes() {
        let err = |code: &str| String::from_utf8(run(code, b"").unwrap_err().0).unwrap();
        assert!(err("a = 10").contains("Attempt to modify a readonly table"), "{}", err("a = 10"));
        assert!(err("return a").contains("Script attempted to access nonexistent global variable 'a'"));
        assert!(err("redis.call = nil").contains("Attempt to modify a readonly table"));
        assert!(err("cjson.encode = nil").contains("Attempt to modify a readonly table"));
        assert!(err("setmetatable(_G, {})").contains("Attempt to modify a readonly table"));
        assert!(err("getmetatable(_G).__index = {}").contains("Attempt to modify a readonly table"));
        assert!(err("getmetatable('').__index = {}").contains("Attempt to modify a readonly table"));
        assert!(err("return loadfile('/etc/passwd')").contains("nonexistent global variable 'loadfile'"));
        assert!(err("return dofile('/etc/passwd')").contains("nonexistent global variable 'dofile'"));
        assert!(
            err("return loadstring(string.dump(function() return 1 end))()").contains("attempt to call a nil value")
        );
        for range in ["-2, 2147483647", "0, 2147483647", "-2147483648, -2"] {
            let e = err(&format!("return {{unpack({{1, 2, 3}}, {range})}}"));
            assert!(e.contains("too many results to unpack"), "{range}: {e}");
        }
        assert_eq!(run("return {unpack({1, 2, 3}, 2)}", b""), Ok(Out::Array(vec![Out::Int(2), Out::Int(3)])));
        assert_eq!(run("return {unpack({1, 2, 3}, -1, -2)}", b""), Ok(Out::Array(vec![])));
        let many = "local a = {} for i = 1, 7999 do a[i] = 1 end return select('#', unpack(a))";
        assert_eq!(run(many, b""), Ok(Out::Int(7999)));
        assert_eq!(run("local t = {} t.x = 1 return t.x", b""), Ok(Out::Int(1)));
        assert_eq!(run("return loadstring('return 1 + 1')()", b""), Ok(Out::Int(2)));
        assert_eq!(
            run("return redis.sha1hex('')", b""),
            Ok(Out::Bulk(b"da39a3ee5e6b4b0d3255bfef95601890afd80709".to_vec()))
        );
        assert_eq!(run("return bit.tohex(65535, -2147483648)", b""), Ok(Out::Bulk(b"0000FFFF".to_vec())));
    }
}
