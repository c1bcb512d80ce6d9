"""Sorted-set commands through redis-py, in RESP2 and RESP3 (Redis 7.0 behaviour)."""

import threading
import time

import pytest
from redis.exceptions import ResponseError

from conftest import _port, redis_client


def pairs(x):
    """(member, score) tuples from any of redis-py's shapes (RESP2 tuples, RESP3 nested
    lists, or a flat [member, score] for ZPOPMIN without a count in RESP3)."""
    if x and not isinstance(x[0], (list, tuple)):
        return [(x[i], float(x[i + 1])) for i in range(0, len(x), 2)]
    return [(m, float(s)) for m, s in x]


def test_zadd_options_and_scores(r, k):
    z = k("z")
    assert r.zadd(z, {"a": 1, "b": 2.5, "c": float("inf")}) == 3
    assert r.zscore(z, "b") == 2.5
    assert r.zscore(z, "c") == float("inf")
    assert r.zscore(z, "nope") is None
    assert r.zadd(z, {"a": 5}, nx=True) == 0
    assert r.zadd(z, {"a": 5, "d": 1}, xx=True, ch=True) == 1
    assert r.zadd(z, {"a": 3}, gt=True, ch=True) == 0
    assert r.zadd(z, {"a": 3}, lt=True, ch=True) == 1
    assert r.zadd(z, {"a": 2}, incr=True) == 5.0
    assert r.zincrby(z, 0.5, "a") == 5.5
    assert r.zmscore(z, ["a", "nope", "b"]) == [5.5, None, 2.5]
    assert r.zcard(z) == 3
    with pytest.raises(ResponseError, match="not compatible"):
        r.execute_command("ZADD", z, "NX", "XX", 1, "a")
    with pytest.raises(ResponseError, match="not a valid float"):
        r.execute_command("ZADD", z, "abc", "a")
    with pytest.raises(ResponseError, match="NaN"):
        r.zadd(z, {"c": float("-inf")}, incr=True)


def test_hex_float_scores_as_strtod(r, k):
    """Redis reads scores, range bounds, weights, SORT weights and timeouts with strtod,
    which takes C99 hexadecimal floats."""
    z, l = k("z"), k("l")
    assert r.execute_command("ZADD", z, "0x1p3", "a", "-0X.8", "b", "0x1.", "c") == 3
    assert pairs(r.zrange(z, 0, -1, withscores=True)) == [("b", -0.5), ("c", 1.0), ("a", 8.0)]
    assert r.execute_command("ZRANGEBYSCORE", z, "(0x0", "0x10") == ["c", "a"]
    assert pairs(r.execute_command("ZUNION", 1, z, "WEIGHTS", "0x2", "WITHSCORES"))[0] == ("b", -1.0)
    assert r.execute_command("BZPOPMIN", k("empty"), "0x1p-8") is None
    r.rpush(l, "0x10", "2", "1e1")
    assert r.sort(l) == ["2", "1e1", "0x10"]
    for bad in ["0x", "0x1p", "0x1p1024", "0x1p-2000"]:
        with pytest.raises(ResponseError, match="not a valid float"):
            r.execute_command("ZADD", z, bad, "d")


def test_ranges(r, k):
    z = k("z")
    r.zadd(z, {"a": 1, "b": 2, "c": 3, "d": 4})
    assert r.zrange(z, 0, -1) == ["a", "b", "c", "d"]
    assert pairs(r.zrange(z, 0, 1, withscores=True)) == [("a", 1.0), ("b", 2.0)]
    assert r.zrange(z, 0, 1, desc=True) == ["d", "c"]
    assert pairs(r.zrevrange(z, 0, 0, withscores=True)) == [("d", 4.0)]
    assert r.zrangebyscore(z, "(1", 3) == ["b", "c"]
    assert r.zrangebyscore(z, "-inf", "+inf", start=1, num=2) == ["b", "c"]
    assert pairs(r.zrevrangebyscore(z, 4, 2, withscores=True)) == [("d", 4.0), ("c", 3.0), ("b", 2.0)]
    assert r.zcount(z, 2, "(4") == 2
    assert r.zrank(z, "c") == 2
    assert r.zrevrank(z, "c") == 1
    assert r.zrank(z, "nope") is None
    assert r.zrangestore(k("dst"), z, 1, 2) == 2
    assert pairs(r.zrange(k("dst"), 0, -1, withscores=True)) == [("b", 2.0), ("c", 3.0)]
    with pytest.raises(ResponseError, match="min or max is not a float"):
        r.zrangebyscore(z, "x", 1)
    with pytest.raises(ResponseError, match="LIMIT is only supported"):
        r.execute_command("ZRANGE", z, 0, 1, "LIMIT", 0, 1)


def test_lex(r, k):
    z = k("z")
    r.zadd(z, {m: 0 for m in "abcdefg"})
    assert r.zrangebylex(z, "[b", "(e") == ["b", "c", "d"]
    assert r.zrevrangebylex(z, "+", "-", start=0, num=2) == ["g", "f"]
    assert r.zlexcount(z, "-", "+") == 7
    assert r.zremrangebylex(z, "[a", "[c") == 3
    assert r.zrange(z, 0, -1) == ["d", "e", "f", "g"]
    with pytest.raises(ResponseError, match="not valid string range item"):
        r.zrangebylex(z, "a", "b")


def test_pops_and_removal(r, k):
    z = k("z")
    r.zadd(z, {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5})
    assert pairs(r.zpopmin(z)) == [("a", 1.0)]
    assert pairs(r.zpopmax(z, 2)) == [("e", 5.0), ("d", 4.0)]
    got = r.zmpop(2, [k("missing"), z], min=True)
    assert got[0] == z and pairs(got[1]) == [("b", 2.0)]
    assert r.zmpop(1, [k("missing")], max=True) is None
    assert r.zrem(z, "c", "nope") == 1
    assert r.exists(z) == 0
    r.zadd(z, {"a": 1, "b": 2, "c": 3})
    assert r.zremrangebyrank(z, 0, 0) == 1
    assert r.zremrangebyscore(z, "-inf", 2) == 1
    assert r.zrange(z, 0, -1) == ["c"]


def test_set_operations(r, k):
    a, b = k("a"), k("b")
    r.zadd(a, {"x": 1, "y": 2, "z": 3})
    r.zadd(b, {"y": 10, "z": 20, "w": 30})
    assert pairs(r.zunion([a, b], withscores=True)) == [("x", 1.0), ("y", 12.0), ("z", 23.0), ("w", 30.0)]
    assert pairs(r.zinter({a: 2, b: 1}, aggregate="MAX", withscores=True)) == [("y", 10.0), ("z", 20.0)]
    assert r.zdiff([a, b]) == ["x"]
    assert r.zunionstore(k("u"), [a, b], aggregate="MIN") == 4
    assert pairs(r.zrange(k("u"), 0, -1, withscores=True)) == [("x", 1.0), ("y", 2.0), ("z", 3.0), ("w", 30.0)]
    assert r.zinterstore(k("i"), [a, b]) == 2
    assert r.zdiffstore(k("d"), [b, a]) == 1
    assert r.zintercard(2, [a, b]) == 2
    assert r.zintercard(2, [a, b], limit=1) == 1
    r.set(k("s"), "str")
    assert r.zunionstore(k("s"), [a]) == 3
    assert r.type(k("s")) == "zset"
    assert r.zinterstore(k("s"), [a, k("missing")]) == 0
    assert r.exists(k("s")) == 0


def test_random_and_scan(r, k):
    z = k("z")
    members = {f"m{i}": i for i in range(300)}
    r.zadd(z, members)
    assert r.zrandmember(z) in members
    got = r.zrandmember(z, 10)
    assert len(got) == 10 and len(set(got)) == 10
    assert len(r.zrandmember(z, -500)) == 500
    pairs = r.zrandmember(z, 3, withscores=True)
    assert len(pairs) in (3, 6)
    seen = dict(r.zscan_iter(z))
    assert seen == {m: float(s) for m, s in members.items()}
    assert set(dict(r.zscan_iter(z, match="m1*"))) == {m for m in members if m.startswith("m1")}


def test_wrongtype(r, k):
    r.set(k("s"), "v")
    for call in (lambda: r.zadd(k("s"), {"a": 1}), lambda: r.zrange(k("s"), 0, 1), lambda: r.zscore(k("s"), "a"),
                 lambda: r.zunion([k("s")]), lambda: r.zpopmin(k("s"))):
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            call()


def _wait_blocked(r, n):
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] != n:
        assert time.monotonic() < deadline, f"never {n} blocked clients"
        time.sleep(0.005)


def test_bzpop_served_at_once_and_timeout(r, k):
    z = k("z")
    r.zadd(z, {"a": 1, "b": 2.5, "c": 3})
    got = r.bzpopmin([k("none"), z], timeout=0.1)
    assert (got[0], got[1], float(got[2])) == (z, "a", 1.0)
    got = r.bzpopmax([z], timeout=0)
    assert (got[0], got[1], float(got[2])) == (z, "c", 3.0)
    t = time.monotonic()
    assert r.bzpopmin([k("none")], timeout=0.1) is None
    assert time.monotonic() - t >= 0.1
    assert r.bzmpop(0.05, 1, [k("none")], min=True) is None
    with pytest.raises(ResponseError, match="timeout is negative"):
        r.bzpopmin([z], timeout=-1)
    with pytest.raises(ResponseError, match="timeout is not a float or out of range"):
        r.execute_command("BZPOPMIN", z, "soon")
    key, items = r.bzmpop(0, 1, [z], max=True, count=5)
    assert key == z and pairs(items) == [("b", 2.5)]


def test_bzpopmin_woken_by_zadd_from_another_thread(r, k, proto):
    z = k("z")
    got = {}
    w = redis_client(_port("LARDER_RESP_PORT"), proto)
    t = threading.Thread(target=lambda: got.update(v=w.bzpopmin([z], timeout=5)))
    t.start()
    _wait_blocked(r, 1)
    r.zadd(z, {"job": 7, "later": 9})
    t.join(5)
    w.close()
    v = got["v"]
    assert (v[0], v[1], float(v[2])) == (z, "job", 7.0)
    assert r.zrange(z, 0, -1) == ["later"]
