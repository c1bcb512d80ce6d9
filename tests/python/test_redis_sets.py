"""Set commands and SORT through redis-py, in RESP2 and RESP3 (Redis 7.0 behaviour)."""

import pytest
from redis.exceptions import ResponseError


def test_add_remove_members(r, k):
    s = k("s")
    assert r.sadd(s, "1", "2", "3") == 3
    assert r.sadd(s, "3", "a") == 1
    assert r.smembers(s) == {"1", "2", "3", "a"}
    assert r.smembers(k("missing")) == set()
    assert r.sismember(s, "a") in (True, 1)
    assert r.sismember(s, "z") in (False, 0)
    assert r.smismember(s, ["a", "z"]) in ([1, 0], [True, False])
    assert r.scard(s) == 4
    assert r.srem(s, "a", "zz") == 1
    assert r.smembers(s) == {"1", "2", "3"}
    # No conversion back: it stays a hashtable, as in Redis.
    assert r.object("encoding", s) == "hashtable"
    r.sadd(k("i"), "5", "-1")
    assert r.object("encoding", k("i")) == "intset"


def test_spop_srandmember(r, k):
    s = k("s")
    members = {f"m{i}" for i in range(30)}
    r.sadd(s, *members)
    assert r.srandmember(s) in members
    picked = r.srandmember(s, 10)
    assert len(picked) == 10 and len(set(picked)) == 10
    assert len(r.srandmember(s, -100)) == 100
    assert set(r.srandmember(s, 100)) == members
    popped = set(r.spop(s, 10))
    assert len(popped) == 10 and popped <= members
    assert r.scard(s) == 20
    rest = set(r.spop(s, 100))
    assert popped | rest == members
    assert r.exists(s) == 0
    assert r.spop(s) is None
    with pytest.raises(ResponseError, match="must be positive"):
        r.spop(s, -1)


def test_smove(r, k):
    a, b = k("a"), k("b")
    r.sadd(a, "x", "y")
    assert r.smove(a, b, "x") in (True, 1)
    assert r.smove(a, b, "nope") in (False, 0)
    assert r.smembers(a) == {"y"} and r.smembers(b) == {"x"}


def test_algebra_and_stores(r, k):
    a, b, c, d = k("a"), k("b"), k("c"), k("d")
    r.sadd(a, "1", "2", "3", "x")
    r.sadd(b, "2", "3", "y")
    r.sadd(c, "3", "x")
    assert r.sinter(a, b) == {"2", "3"}
    assert r.sinter(a, b, c) == {"3"}
    assert r.sinter(a, k("missing")) == set()
    assert r.sintercard(2, [a, b]) == 2
    assert r.sintercard(2, [a, b], limit=1) == 1
    assert r.sunion(a, b) == {"1", "2", "3", "x", "y"}
    assert r.sdiff(a, b, c) == {"1"}
    assert r.sinterstore(d, [a, b]) == 2
    assert r.smembers(d) == {"2", "3"}
    assert r.sunionstore(d, [a, c]) == 4
    assert r.sdiffstore(d, [a, a]) == 0
    assert r.exists(d) == 0
    r.set(d, "string")
    assert r.sunionstore(d, [a]) == 4
    assert r.type(d) == "set"
    r.set(k("str"), "x")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        r.sinter(a, k("str"))


def test_sscan(r, k):
    s = k("s")
    members = {f"m{i}" for i in range(700)}
    r.sadd(s, *members)
    assert set(r.sscan_iter(s, count=40)) == members
    assert set(r.sscan_iter(s, match="m1?")) == {f"m1{i}" for i in range(10)}


def test_sort(r, k):
    s = k("s")
    r.sadd(s, "3", "10", "1")
    assert r.sort(s) == ["1", "3", "10"]
    assert r.sort(s, desc=True, start=0, num=2) == ["10", "3"]
    assert r.sort(s, alpha=True) == ["1", "10", "3"]
    r.mset({k("w_1"): "30", k("w_3"): "20", k("w_10"): "10"})
    assert r.sort(s, by=k("w_*")) == ["10", "3", "1"]
    assert r.sort(s, by=k("w_*"), get=["#", k("w_*")]) == ["10", "10", "3", "20", "1", "30"]
    assert r.sort(s, store=k("dst")) == 3
    assert r.type(k("dst")) == "list"
    assert r.sort_ro(s, desc=True) == ["10", "3", "1"]
    r.sadd(k("t"), "a")
    with pytest.raises(ResponseError, match="One or more scores can't be converted into double"):
        r.sort(k("t"))


def test_sort_alpha_compares_as_strcoll_unless_storing(rb, k):
    """SORT ALPHA replies in strcoll order (C locale: up to the first NUL, ties in their
    order); with STORE it compares whole binary strings."""
    lst = k("l")
    rb.rpush(lst, b"1\x00b", b"1", b"0", b"1\x00a", b"b\x00", b"a")
    assert rb.sort(lst, alpha=True) == [b"0", b"1\x00b", b"1", b"1\x00a", b"a", b"b\x00"]
    assert rb.sort(lst, alpha=True, desc=True) == [b"b\x00", b"a", b"1\x00b", b"1", b"1\x00a", b"0"]
    assert rb.sort(lst, alpha=True, store=k("dst")) == 6
    assert rb.lrange(k("dst"), 0, -1) == [b"0", b"1", b"1\x00a", b"1\x00b", b"a", b"b\x00"]
    rb.mset({k("w_1\x00b"): b"x", k("w_1"): b"x\x00z", k("w_0"): b"x\x00a"})
    assert rb.sort(lst, by=k("w_*"), alpha=True) == [b"1\x00a", b"b\x00", b"a", b"1\x00b", b"1", b"0"]
