"""Hash commands through redis-py, in RESP2 and RESP3 (Redis 7.0 behaviour)."""

import pytest
from redis.exceptions import ResponseError


def test_set_get_and_counts(r, k):
    h = k("h")
    assert r.hset(h, mapping={"a": "1", "b": "2"}) == 2
    assert r.hset(h, "a", "10") == 0
    assert r.hsetnx(h, "a", "x") in (False, 0)
    assert r.hsetnx(h, "c", "3") in (True, 1)
    assert r.hget(h, "a") == "10"
    assert r.hget(h, "nope") is None
    assert r.hmget(h, ["a", "nope", "c"]) == ["10", None, "3"]
    assert r.hgetall(h) == {"a": "10", "b": "2", "c": "3"}
    assert r.hgetall(k("missing")) == {}
    assert r.hkeys(h) == ["a", "b", "c"]
    assert r.hvals(h) == ["10", "2", "3"]
    assert r.hlen(h) == 3
    assert r.hexists(h, "b") is True
    assert r.hexists(h, "z") is False
    assert r.hstrlen(h, "a") == 2
    assert r.hdel(h, "a", "zz") == 1
    assert r.hdel(h, "b", "c") == 2
    assert r.exists(h) == 0


def test_increments(r, k):
    h = k("h")
    assert r.hincrby(h, "n", 5) == 5
    assert r.hincrby(h, "n", -7) == -2
    assert r.hincrbyfloat(h, "f", 0.1) == pytest.approx(0.1)
    assert r.hincrbyfloat(h, "f", 0.2) == pytest.approx(0.3)
    assert r.hget(h, "f") == "0.3"
    r.hset(h, "s", "abc")
    with pytest.raises(ResponseError, match="hash value is not an integer"):
        r.hincrby(h, "s", 1)
    with pytest.raises(ResponseError, match="hash value is not a float"):
        r.hincrbyfloat(h, "s", 1)
    r.hset(h, "big", str(2**63 - 1))
    with pytest.raises(ResponseError, match="increment or decrement would overflow"):
        r.hincrby(h, "big", 1)


def test_wrong_type_and_arity(r, k):
    r.set(k("s"), "x")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        r.hget(k("s"), "a")
    with pytest.raises(ResponseError, match="wrong number of arguments for 'hset' command"):
        r.execute_command("HSET", k("h"), "a", "1", "b")


def test_hrandfield(r, k):
    h = k("h")
    assert r.hrandfield(k("missing")) is None
    assert r.hrandfield(k("missing"), 3) == []
    fields = {f"f{i}": str(i) for i in range(50)}
    r.hset(h, mapping=fields)
    assert r.hrandfield(h) in fields
    picked = r.hrandfield(h, 10)
    assert len(picked) == 10 and len(set(picked)) == 10 and set(picked) <= set(fields)
    assert sorted(r.hrandfield(h, 100)) == sorted(fields)
    assert len(r.hrandfield(h, -200)) == 200
    pairs = r.hrandfield(h, 5, withvalues=True)
    # redis-py flattens RESP3's [field, value] pairs as well.
    flat = [x for p in pairs for x in (p if isinstance(p, list) else [p])]
    assert len(flat) == 10
    for f, v in zip(flat[::2], flat[1::2]):
        assert fields[f] == v


def test_hscan_visits_every_field(r, k):
    h = k("h")
    fields = {f"f{i}": str(i) for i in range(1000)}
    r.hset(h, mapping=fields)
    assert dict(r.hscan_iter(h, count=50)) == fields
    assert dict(r.hscan_iter(h, match="f99*")) == {f: v for f, v in fields.items() if f.startswith("f99")}
    assert r.hscan(k("missing")) == (0, {})


def test_encoding_thresholds(r, k):
    h = k("h")
    r.hset(h, "a", "1")
    assert r.object("encoding", h) == "listpack"
    r.hset(h, "b", "x" * 100)
    assert r.object("encoding", h) == "hashtable"
