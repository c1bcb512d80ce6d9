"""Lua scripts and functions through redis-py, as applications use them: register_script
(EVALSHA with its EVAL fallback after SCRIPT FLUSH), a lock released by a script, a rate
limiter, script errors as exceptions, FUNCTION LOAD and FCALL."""

import pytest
import redis
from redis.exceptions import NoScriptError, ResponseError

# The release script of redis-py's Lock (and of most hand-written locks).
UNLOCK = """
if redis.call('get', KEYS[1]) == ARGV[1] then
    return redis.call('del', KEYS[1])
else
    return 0
end
"""

# A fixed-window rate limiter: how many calls are left in the window, or -1 when over.
RATE_LIMIT = """
local n = redis.call('incr', KEYS[1])
if n == 1 then redis.call('pexpire', KEYS[1], ARGV[2]) end
if n > tonumber(ARGV[1]) then return -1 end
return tonumber(ARGV[1]) - n
"""


def test_register_script_falls_back_to_eval_after_flush(r, k):
    unlock = r.register_script(UNLOCK)
    r.set(k("lock"), "me")
    assert unlock(keys=[k("lock")], args=["someone else"]) == 0
    assert r.get(k("lock")) == "me"
    r.script_flush()
    # EVALSHA answers NOSCRIPT; redis-py's Script loads it again and retries.
    assert unlock(keys=[k("lock")], args=["me"]) == 1
    assert r.exists(k("lock")) == 0
    assert r.script_exists(unlock.sha) == [True]


def test_evalsha_of_an_unknown_script_raises_noscript(r):
    with pytest.raises(NoScriptError):
        r.evalsha("f" * 40, 0)


def test_lock_from_redis_py(r, k):
    lock = r.lock(k("resource"), timeout=5)
    assert lock.acquire(blocking=False)
    assert not r.lock(k("resource")).acquire(blocking=False)
    lock.release()
    assert r.exists(k("resource")) == 0


def test_rate_limiter(r, k):
    limit = r.register_script(RATE_LIMIT)
    left = [limit(keys=[k("rl")], args=[3, 10000]) for _ in range(5)]
    assert left == [2, 1, 0, -1, -1]
    assert 0 < r.pttl(k("rl")) <= 10000


def test_replies_and_errors(r, proto, k):
    assert r.eval("return {1, 'two', {3}}", 0) == [1, "two", [3]]
    assert r.eval("return redis.status_reply('FINE')", 0) in ("FINE", True)
    assert r.eval("return cjson.encode({a = {1, 2}})", 0) == '{"a":[1,2]}'
    r.set(k("s"), "abc")
    with pytest.raises(ResponseError, match="value is not an integer or out of range script: "):
        r.eval("return redis.call('incr', KEYS[1])", 1, k("s"))
    with pytest.raises(ResponseError, match="Write commands are not allowed from read-only scripts"):
        r.eval_ro("return redis.call('set', KEYS[1], 1)", 1, k("s"))
    with pytest.raises(ResponseError, match="Number of keys can't be greater than number of args"):
        r.eval("return 1", 2, k("a"))


def test_functions(r, k):
    lib = "#!lua name=%s\nredis.register_function('%s', function(keys, args) return redis.call('incrby', keys[1], args[1]) end)"
    name = k("lib").replace(":", "_")
    fname = name + "_incr"
    assert r.function_load(lib % (name, fname)) == name
    try:
        assert r.fcall(fname, 1, k("n"), 5) == 5
        assert r.fcall(fname, 1, k("n"), 2) == 7
        assert len(r.function_list(library=name)) == 1
    finally:
        r.function_delete(name)
    with pytest.raises(ResponseError, match="Function not found"):
        r.fcall(fname, 0)
