-- Larder's scripting environment, as Redis 7.0 sets it up (script_lua.c, eval.c).
-- Run once per Lua state with the real global table G and the native helpers N; returns
-- the function that runs one script. Scripts see `env`, a read-only view of G: reading a
-- missing global or writing any global is an error, as are writes to the library tables
-- and to their metatables.
local G, N = ...
local error, type, select, tostring, tonumber, rawget = error, type, select, tostring, tonumber, rawget
local raw_rawset, raw_setmetatable, raw_getmetatable = rawset, setmetatable, getmetatable
local raw_pcall, raw_xpcall, raw_loadstring, raw_load, setfenv = pcall, xpcall, loadstring, load, setfenv
local raw_unpack = unpack
local floor = math.floor

local function raise(e)
  error(e, 0)
end

local function outside(name)
  raise({err = 'ERR ' .. name .. ' can only be called inside a script invocation'})
end

-- Read-only views: writes, rawset and setmetatable on them fail as on Redis's read-only tables.
local readonly = raw_setmetatable({}, {__mode = 'k'})
local function deny()
  error('Attempt to modify a readonly table', 2)
end
local function view(t, index)
  local mt = {__index = index or t, __newindex = deny}
  local mt_view = raw_setmetatable({}, {__index = mt, __newindex = deny, __metatable = false})
  readonly[mt_view] = true
  mt.__metatable = mt_view
  local v = raw_setmetatable({}, mt)
  readonly[v] = true
  return v
end

-- redis.call, redis.pcall, redis.setresp and redis.acl_check_cmd are C functions while a
-- script runs (see the runner below): a Lua wrapper called as `return redis.call(...)` would
-- be a tail call, and the script's line would be lost from the error.
local redis = {}
local function outside_call()
  outside('redis.call/pcall')
end
local function outside_setresp()
  outside('redis.setresp')
end
local function outside_acl_check()
  outside('redis.acl_check_cmd')
end
redis.call, redis.pcall, redis.setresp = outside_call, outside_call, outside_setresp
redis.acl_check_cmd = outside_acl_check
redis.set_repl = N.set_repl
function redis.replicate_commands()
  return true
end
function redis.breakpoint()
  return false
end
function redis.debug()
end
redis.sha1hex = N.sha1hex
redis.log = N.log
function redis.error_reply(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  if s:sub(1, 1) ~= '-' then s = '-' .. s end
  return {err = N.error_text(s)}
end
function redis.status_reply(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = N.version, N.version_num

-- A global's value, or Redis's error for a missing one (blamed on the code that read it).
local function global_in(t, k)
  local v = t[k]
  if v == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 3)
  end
  return v
end
-- (Not tail calls: the error's level counts the __index function's frame.)
local env = view(G, function(_, k)
  local v = global_in(G, k)
  return v
end)

-- FUNCTION LOAD runs a library's code with only `redis` (register_function, log, the
-- version) as globals; its functions, called later, see the same globals as EVAL's scripts.
local load_redis = {}
local function outside_register()
  raise({err = 'ERR redis.register_function can only be called on FUNCTION LOAD command'})
end
load_redis.register_function = outside_register
load_redis.log = N.log
load_redis.LOG_DEBUG, load_redis.LOG_VERBOSE, load_redis.LOG_NOTICE, load_redis.LOG_WARNING = 0, 1, 2, 3
load_redis.REDIS_VERSION, load_redis.REDIS_VERSION_NUM = N.version, N.version_num
local load_globals = {redis = view(load_redis, function(_, k)
  local v = global_in(load_redis, k)
  return v
end)}
local loading = false
local fenv = view(G, function(_, k)
  local v = global_in(loading and load_globals or G, k)
  return v
end)

-- Redis's pcall: an error table raised by redis.call comes back as its message. An error
-- raised from Rust arrives as an mlua error value, with the table (if any) put aside.
local function pcall_result(ok, ...)
  if ok then return true, ... end
  local e = ...
  if type(e) == 'userdata' then e = N.take_error(e) end
  if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then e = e.err end
  return false, e
end
G.pcall = function(f, ...)
  return pcall_result(raw_pcall(f, ...))
end
-- Lua 5.1.5's unpack computes its count in a C int, and an optimising compiler drops the
-- overflow check after it: unpack({}, -2, 2^31 - 1) would crash the server. Redis's Lua has
-- the fix; here the range is checked first, in doubles.
local function to_int(x)
  local n = tonumber(x)
  if not n then return nil end
  return n >= 0 and floor(n) or -floor(-n)
end
-- (Its arguments are passed on as they came: Lua 5.1 allows a C function 8000 stack slots,
-- its arguments included, so unpack(t) of 7999 values must get one argument, not three.)
G.unpack = function(t, ...)
  local i, j = ...
  local from, to = to_int(i or 1), to_int(j)
  if type(t) == 'table' and from and to and to >= from and to - from >= 2147483646 then
    error('too many results to unpack', 2)
  end
  return raw_unpack(t, ...)
end
G.rawset = function(t, k, v)
  if readonly[t] then deny() end
  return raw_rawset(t, k, v)
end
G.setmetatable = function(t, mt)
  if readonly[t] then deny() end
  return raw_setmetatable(t, mt)
end
-- Code loaded at run time sees the same sandbox; bytecode is refused (Redis's Lua does not
-- load binary chunks).
G.loadstring = function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then return nil, 'binary chunks are not allowed' end
  local f, e = raw_loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
G.load = function(reader, name)
  local f, e = raw_load(reader, name)
  if f then setfenv(f, env) end
  return f, e
end
for _, name in ipairs({'print', 'dofile', 'loadfile', 'setfenv', 'getfenv', 'newproxy', 'module', 'require',
                       'debug', 'os', 'io', 'package'}) do
  G[name] = nil
end
G.redis = view(redis)
G.cjson = view(N.cjson)
G.bit = view(N.bit)
G.cmsgpack = view(N.cmsgpack)
for _, name in ipairs({'string', 'table', 'math', 'coroutine'}) do
  G[name] = view(G[name])
end
local string_mt = raw_getmetatable('')
string_mt.__metatable = view(string_mt)
G._G = env

-- Runs compiled script f with KEYS and ARGV (a function gets them as arguments instead),
-- and its scoped redis.call, redis.pcall, redis.setresp and redis.acl_check_cmd: returns true
-- and the result, or false and an error table (see N.handler).
local function run(f, keys, argv, call, pcall, setresp, acl_check, is_function)
  local body = f
  if is_function then
    body = function() return f(keys, argv) end
  else
    raw_rawset(G, 'KEYS', keys)
    raw_rawset(G, 'ARGV', argv)
  end
  redis.call, redis.pcall, redis.setresp, redis.acl_check_cmd = call, pcall, setresp, acl_check
  local ok, v = raw_xpcall(body, N.handler)
  redis.call, redis.pcall, redis.setresp = outside_call, outside_call, outside_setresp
  redis.acl_check_cmd = outside_acl_check
  return ok, v
end

-- Runs a library's compiled code f with its scoped redis.register_function.
local function load(f, register)
  loading, load_redis.register_function = true, register
  local ok, v = raw_xpcall(f, N.handler)
  loading, load_redis.register_function = false, outside_register
  return ok, v
end

return env, fenv, run, load
