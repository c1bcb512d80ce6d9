"""The memcached text protocol through pymemcache (memcached 1.6 behaviour)."""

import json
import time

import pytest
from pymemcache.client.base import Client as MemcacheClient
from pymemcache.exceptions import MemcacheClientError, MemcacheServerError

from conftest import HOST, TIMEOUT, _port


class TypedSerde:
    """Client flags say how to read the bytes back: 0 bytes, 1 str, 2 int, 3 JSON.

    Also remembers the flags of the last value read, so tests can check them raw."""

    def __init__(self):
        self.last_flags = None

    def serialize(self, key, value):
        if isinstance(value, bytes):
            return value, 0
        if isinstance(value, str):
            return value.encode(), 1
        if isinstance(value, int):
            return str(value).encode(), 2
        return json.dumps(value).encode(), 3

    def deserialize(self, key, value, flags):
        self.last_flags = flags
        if flags == 1:
            return value.decode()
        if flags == 2:
            return int(value)
        if flags == 3:
            return json.loads(value)
        return value


class RawFlags:
    """Stores (bytes, flags) pairs exactly as given; reads back (bytes, flags)."""

    def serialize(self, key, value):
        return value

    def deserialize(self, key, value, flags):
        return value, flags


def client(serde=None):
    return MemcacheClient(
        (HOST, _port("LARDER_MC_PORT")), serde=serde, connect_timeout=TIMEOUT, timeout=TIMEOUT, default_noreply=False
    )


def test_set_get_delete(mc, k):
    assert mc.set(k("a"), b"hello") is True
    assert mc.get(k("a")) == b"hello"
    assert mc.get(k("missing")) is None
    assert mc.delete(k("a")) is True
    assert mc.delete(k("a")) is False
    assert mc.get(k("a")) is None


def test_binary_and_empty_values(mc, k):
    value = bytes(range(256)) + b"\r\nEND\r\n"
    assert mc.set(k("bin"), value) is True
    assert mc.get(k("bin")) == value
    assert mc.set(k("empty"), b"") is True
    assert mc.get(k("empty")) == b""


def test_large_value_and_limit(mc, k):
    value = bytes(i % 253 for i in range(512 * 1024))
    assert mc.set(k("big"), value) is True
    assert mc.get(k("big")) == value
    # Over the item size limit (1 MiB by default, as memcached's -I): refused, the
    # connection stays usable.
    with pytest.raises(MemcacheServerError, match="object too large for cache"):
        mc.set(k("huge"), b"x" * (2 * 1024 * 1024))
    assert mc.get(k("huge")) is None
    assert mc.get(k("big")) == value


def test_noreply(mc, k):
    assert mc.set(k("a"), b"1", noreply=True) is True
    assert mc.add(k("b"), b"2", noreply=True) is True
    assert mc.get_many([k("a"), k("b")]) == {k("a"): b"1", k("b"): b"2"}


def test_add_replace_append_prepend(mc, k):
    assert mc.add(k("a"), b"1") is True
    assert mc.add(k("a"), b"2") is False
    assert mc.get(k("a")) == b"1"
    assert mc.replace(k("missing"), b"x") is False
    assert mc.get(k("missing")) is None
    assert mc.replace(k("a"), b"3") is True
    assert mc.append(k("a"), b"45") is True
    assert mc.prepend(k("a"), b"012") is True
    assert mc.get(k("a")) == b"012345"
    assert mc.append(k("missing"), b"x") is False
    assert mc.prepend(k("missing"), b"x") is False


def test_gets_cas(mc, k):
    assert mc.gets(k("missing")) == (None, None)
    mc.set(k("a"), b"v1")
    value, token = mc.gets(k("a"))
    assert value == b"v1" and token is not None
    assert mc.cas(k("a"), b"v2", token) is True
    assert mc.get(k("a")) == b"v2"
    assert mc.cas(k("a"), b"v3", token) is False  # EXISTS: changed since
    assert mc.get(k("a")) == b"v2"
    _, token2 = mc.gets(k("a"))
    assert token2 != token
    assert mc.cas(k("missing"), b"x", token2) is None  # NOT_FOUND
    many = mc.gets_many([k("a"), k("missing")])
    assert list(many) == [k("a")] and many[k("a")][0] == b"v2"


def test_incr_decr(mc, k):
    assert mc.incr(k("missing"), 1) is None
    mc.set(k("n"), b"10")
    assert mc.incr(k("n"), 5) == 15
    assert mc.decr(k("n"), 3) == 12
    assert mc.decr(k("n"), 100) == 0  # decr stops at zero
    mc.set(k("n"), b"9")
    assert mc.incr(k("n"), 1) == 10
    assert mc.get(k("n")) == b"10"
    mc.set(k("w"), b"18446744073709551615")
    assert mc.incr(k("w"), 2) == 1  # incr wraps at 2^64
    mc.set(k("s"), b"abc")
    with pytest.raises(MemcacheClientError, match="cannot increment or decrement non-numeric value"):
        mc.incr(k("s"), 1)
    assert mc.incr(k("n"), 1, noreply=True) is None
    # A result shorter than the old value (decr, or an incr that wraps) is space-padded to
    # its length, as memcached leaves it; the number is what counts.
    assert mc.get(k("n")).strip() == b"11"


def test_touch_and_expiry(mc, k):
    assert mc.touch(k("missing"), 10) is False
    mc.set(k("a"), b"v", expire=1)
    mc.set(k("b"), b"v", expire=1)
    assert mc.touch(k("b"), 100) is True
    mc.set(k("gone"), b"v", expire=-1)  # a negative exptime expires at once
    assert mc.get(k("gone")) is None
    time.sleep(2.1)
    assert mc.get(k("a")) is None
    assert mc.get(k("b")) == b"v"


def test_get_many_500(mc, k):
    values = {k(f"m{i}"): f"value-{i}".encode() * (i % 7 + 1) for i in range(500)}
    assert mc.set_many(values) == []
    missing = [k(f"none{i}") for i in range(10)]
    got = mc.get_many(list(values) + missing)
    assert got == values
    assert mc.delete_many(list(values)) is True
    assert mc.get_many(list(values)) == {}


def test_flags_through_a_serde(k):
    s = TypedSerde()
    c = client(serde=s)
    try:
        for name, value, flags in [("b", b"raw", 0), ("s", "text ☃", 1), ("i", 42, 2), ("j", {"a": [1, 2]}, 3)]:
            assert c.set(k(name), value) is True
            assert c.get(k(name)) == value
            assert s.last_flags == flags
        got = c.get_many([k("s"), k("i"), k("j")])
        assert got == {k("s"): "text ☃", k("i"): 42, k("j"): {"a": [1, 2]}}
    finally:
        c.close()


def test_flags_full_32_bits(k):
    c = client(serde=RawFlags())
    try:
        for flags in [0, 1, 0xDEADBEEF, 0xFFFFFFFF]:
            assert c.set(k("f"), (b"v", flags)) is True
            assert c.get(k("f")) == (b"v", flags)
        # append keeps the item's flags.
        c.set(k("g"), (b"a", 77))
        assert c.append(k("g"), (b"b", 0)) is True
        assert c.get(k("g")) == (b"ab", 77)
    finally:
        c.close()


def test_version_and_stats(mc):
    assert mc.version()
    stats = mc.stats()
    for field in [b"pid", b"uptime", b"curr_connections", b"curr_items", b"get_hits", b"cmd_get"]:
        assert field in stats, field


def test_flush_all(mc, k):
    mc.set(k("a"), b"1")
    assert mc.flush_all() is True
    assert mc.get(k("a")) is None
