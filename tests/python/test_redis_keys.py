"""Keyspace and expiry commands through redis-py, in RESP2 and RESP3 (Redis 7 behaviour)."""

import time

import pytest
from redis.exceptions import ResponseError

from conftest import _port, redis_client


def test_exists_del_unlink_type(r, k):
    r.mset({k("a"): "1", k("b"): "2", k("c"): "3"})
    assert r.exists(k("a"), k("a"), k("missing")) == 2
    assert r.type(k("a")) == "string"
    assert r.type(k("missing")) == "none"
    assert r.delete(k("a"), k("missing")) == 1
    assert r.unlink(k("b"), k("c"), k("b")) == 2
    assert r.exists(k("a"), k("b"), k("c")) == 0
    assert r.touch(k("a"), k("x")) == 0


def test_ttl_states(r, k):
    assert r.ttl(k("missing")) == -2
    assert r.pttl(k("missing")) == -2
    r.set(k("a"), "v")
    assert r.ttl(k("a")) == -1
    assert r.pttl(k("a")) == -1
    assert r.expiretime(k("a")) == -1
    assert r.expiretime(k("missing")) == -2


def test_expire_family(r, k):
    r.set(k("a"), "v")
    assert r.expire(k("a"), 100) is True
    assert 99 <= r.ttl(k("a")) <= 100
    assert r.pexpire(k("a"), 50_000) is True
    assert 49_000 <= r.pttl(k("a")) <= 50_000
    at = int(time.time()) + 300
    assert r.expireat(k("a"), at) is True
    assert r.expiretime(k("a")) == at
    assert r.pexpireat(k("a"), at * 1000 + 500) is True
    assert r.pexpiretime(k("a")) == at * 1000 + 500
    assert r.persist(k("a")) is True
    assert r.persist(k("a")) is False
    assert r.ttl(k("a")) == -1
    assert r.expire(k("missing"), 100) is False


def test_expire_conditions(r, k):
    r.set(k("a"), "v")
    assert r.expire(k("a"), 100, xx=True) is False  # no TTL yet
    assert r.expire(k("a"), 100, nx=True) is True
    assert r.expire(k("a"), 200, nx=True) is False
    assert r.expire(k("a"), 50, gt=True) is False
    assert r.expire(k("a"), 200, gt=True) is True
    assert r.expire(k("a"), 300, lt=True) is False
    assert r.expire(k("a"), 10, lt=True) is True
    assert 9 <= r.ttl(k("a")) <= 10
    with pytest.raises(ResponseError, match="NX and XX, GT or LT options at the same time are not compatible"):
        r.execute_command("EXPIRE", k("a"), "10", "NX", "XX")
    with pytest.raises(ResponseError, match="GT and LT options at the same time are not compatible"):
        r.execute_command("EXPIRE", k("a"), "10", "GT", "LT")
    with pytest.raises(ResponseError, match="Unsupported option"):
        r.execute_command("EXPIRE", k("a"), "10", "SOON")
    with pytest.raises(ResponseError, match="value is not an integer or out of range"):
        r.execute_command("EXPIRE", k("a"), "ten")
    with pytest.raises(ResponseError, match="invalid expire time in 'expire' command"):
        r.execute_command("EXPIRE", k("a"), "9223372036854775807")


def test_expire_in_the_past_deletes(r, k):
    r.set(k("a"), "v")
    assert r.expire(k("a"), -1) is True
    assert r.exists(k("a")) == 0
    r.set(k("b"), "v")
    assert r.expireat(k("b"), 1) is True
    assert r.get(k("b")) is None


def test_keys_expire(r, k):
    r.set(k("a"), "v", px=100)
    r.set(k("b"), "v")
    r.pexpire(k("b"), 100)
    time.sleep(0.3)
    assert r.get(k("a")) is None
    assert r.exists(k("b")) == 0
    assert r.ttl(k("a")) == -2


def test_rename(r, k):
    r.set(k("a"), "1", ex=100)
    assert r.rename(k("a"), k("b")) is True
    assert r.get(k("b")) == "1"
    assert r.exists(k("a")) == 0
    assert 98 <= r.ttl(k("b")) <= 100  # the TTL moves with the value
    with pytest.raises(ResponseError, match="no such key"):
        r.rename(k("missing"), k("c"))
    r.set(k("c"), "3")
    assert r.renamenx(k("b"), k("c")) is False
    assert r.renamenx(k("b"), k("d")) is True
    assert r.get(k("d")) == "1"


def test_copy(r, k):
    r.set(k("src"), "v")
    assert r.copy(k("src"), k("dst")) is True
    assert r.get(k("dst")) == "v"
    r.set(k("src"), "w")
    assert r.copy(k("src"), k("dst")) is False
    assert r.get(k("dst")) == "v"
    assert r.copy(k("src"), k("dst"), replace=True) is True
    assert r.get(k("dst")) == "w"
    assert r.copy(k("missing"), k("x")) is False


def test_move_and_select(r, k, proto):
    r.set(k("a"), "v")
    r.set(k("b"), "mine")
    assert r.move(k("a"), 1) is True
    assert r.exists(k("a")) == 0
    assert r.move(k("missing"), 1) is False
    other = redis_client(_port("LARDER_RESP_PORT"), proto, db=1)
    try:
        assert other.get(k("a")) == "v"
        other.set(k("b"), "theirs")
        assert r.move(k("b"), 1) is False  # the target database has the key already
        assert r.get(k("b")) == "mine"
        with pytest.raises(ResponseError, match="source and destination objects are the same"):
            other.move(k("a"), 1)
        with pytest.raises(ResponseError, match="out of range"):
            r.execute_command("MOVE", k("b"), "16")
    finally:
        other.delete(k("a"), k("b"))
        other.close()
    with pytest.raises(ResponseError, match="DB index is out of range"):
        r.execute_command("SELECT", "16")
    with pytest.raises(ResponseError, match="value is not an integer or out of range"):
        r.execute_command("SELECT", "one")


def test_scan_iter(r, k):
    keys = {k(f"s{i}") for i in range(300)}
    r.mset({key: "x" for key in keys})
    r.set(k("other"), "x")
    assert set(r.scan_iter(match=k("s*"), count=50)) == keys
    assert set(r.scan_iter(match=k("s1?"), count=1000)) == {k(f"s{i}") for i in range(10, 20)}
    assert set(r.scan_iter(match=k("*"), _type="string")) == keys | {k("other")}
    assert set(r.scan_iter(match=k("*"), _type="hash")) == set()
    with pytest.raises(ResponseError, match="invalid cursor"):
        r.execute_command("SCAN", "notanumber")


def test_keys_pattern(r, k):
    r.mset({k("hello"): "1", k("hallo"): "2", k("hxllo"): "3", k("hllo"): "4", k("heeeello"): "5"})
    assert sorted(r.keys(k("h?llo"))) == sorted([k("hello"), k("hallo"), k("hxllo")])
    assert sorted(r.keys(k("h*llo"))) == sorted([k("hello"), k("hallo"), k("hxllo"), k("hllo"), k("heeeello")])
    assert sorted(r.keys(k("h[ae]llo"))) == sorted([k("hello"), k("hallo")])
    assert sorted(r.keys(k("h[^e]llo"))) == sorted([k("hallo"), k("hxllo")])


def test_dbsize_flushdb_randomkey(proto, k):
    # A database of its own: FLUSHDB must not touch the other tests' keys.
    c = redis_client(_port("LARDER_RESP_PORT"), proto, db=9)
    try:
        assert c.flushdb() is True
        assert c.dbsize() == 0
        assert c.randomkey() is None
        c.mset({k("a"): "1", k("b"): "2", k("c"): "3"})
        assert c.dbsize() == 3
        assert c.randomkey() in {k("a"), k("b"), k("c")}
        assert c.flushdb() is True
        assert c.dbsize() == 0
    finally:
        c.close()
