"""One keyspace behind both protocols: what redis-py writes, pymemcache reads, and back.

memcached clients see Redis database 0. Larder only (needs both ports on one keyspace)."""

import time

import pytest

from conftest import _port, redis_client
from test_memcache import RawFlags, client

pytestmark = pytest.mark.cross


@pytest.fixture
def rb():
    c = redis_client(_port("LARDER_RESP_PORT"), 2, decode=False)
    yield c
    c.close()


@pytest.fixture
def raw():
    c = client(serde=RawFlags())
    yield c
    c.close()


def test_redis_set_memcache_get(rb, raw, mc, k):
    value = b"from redis\r\n\x00\xff"
    rb.set(k("a"), value)
    assert raw.get(k("a")) == (value, 0)  # no flags from Redis: 0
    assert mc.get_many([k("a"), k("missing")]) == {k("a"): value}


def test_memcache_set_redis_get(rb, raw, k):
    raw.set(k("a"), (b"from memcached", 0))
    assert rb.get(k("a")) == b"from memcached"
    # Flags live on the item; Redis clients don't see them, a Redis write resets them.
    raw.set(k("f"), (b"flagged", 1234))
    assert rb.get(k("f")) == b"flagged"
    assert raw.get(k("f")) == (b"flagged", 1234)
    rb.set(k("f"), b"rewritten")
    assert raw.get(k("f")) == (b"rewritten", 0)


def test_counters_both_ways(rb, mc, k):
    rb.set(k("n"), b"41")
    assert mc.incr(k("n"), 1) == 42
    assert rb.get(k("n")) == b"42"
    assert rb.incrby(k("n"), 8) == 50
    assert mc.get(k("n")) == b"50"
    assert mc.decr(k("n"), 10) == 40
    assert int(rb.get(k("n")).strip()) == 40


def test_delete_both_ways(rb, mc, k):
    rb.set(k("a"), b"1")
    assert mc.delete(k("a")) is True
    assert rb.exists(k("a")) == 0
    mc.set(k("b"), b"2")
    assert rb.delete(k("b")) == 1
    assert mc.get(k("b")) is None


def test_expiry_both_ways(rb, mc, k):
    mc.set(k("a"), b"v", expire=100)
    assert 98 <= rb.ttl(k("a")) <= 100
    rb.set(k("b"), b"v", px=200)
    assert mc.get(k("b")) == b"v"
    time.sleep(0.4)
    assert mc.get(k("b")) is None
    rb.set(k("c"), b"v")
    assert mc.touch(k("c"), 50) is True
    assert 48 <= rb.ttl(k("c")) <= 50


def test_cas_sees_redis_writes(rb, mc, k):
    mc.set(k("a"), b"1")
    _, token = mc.gets(k("a"))
    rb.set(k("a"), b"2")
    assert mc.cas(k("a"), b"3", token) is False
    assert rb.get(k("a")) == b"2"


def test_memcache_sees_database_0_only(k):
    c1 = redis_client(_port("LARDER_RESP_PORT"), 2, decode=False, db=1)
    m = client()
    try:
        c1.set(k("only-in-db1"), b"x")
        assert m.get(k("only-in-db1")) is None
    finally:
        c1.delete(k("only-in-db1"))
        c1.close()
        m.close()
