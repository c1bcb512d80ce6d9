"""DUMP / RESTORE between Larder and a real redis-server 7: a value DUMPed by one is
RESTOREd by the other, both ways, for every type in its small and its large encoding
(listpack, intset, quicklist, hashtable, skiplist; compressed and integer strings), and the
value read back is the same.

Needs LARDER_REF_RESP_PORT (a reference redis-server, as test_reference.py); skipped
without it, except the Larder-only round trips.
"""

import os

import pytest

from conftest import HOST, redis_client, _port

REF_RESP = os.environ.get("LARDER_REF_RESP_PORT")
need_ref = pytest.mark.skipif(not REF_RESP, reason="LARDER_REF_RESP_PORT not set (no reference redis-server)")

BIG = 600  # past every *-max-listpack-entries / set-max-intset-entries default


def values():
    """(name, type, writer, reader) for each case: writer(client, key) fills the key and
    reader(client, key) returns something comparable."""
    lst = lambda c, k: c.lrange(k, 0, -1)
    sset = lambda c, k: sorted(c.smembers(k))
    hsh = lambda c, k: sorted(c.hgetall(k).items())
    zs = lambda c, k: c.zrange(k, 0, -1, withscores=True)
    get = lambda c, k: c.get(k)
    return [
        ("string-short", lambda c, k: c.set(k, b"hello"), get),
        ("string-int", lambda c, k: c.set(k, b"-12345"), get),
        ("string-int64", lambda c, k: c.set(k, b"9223372036854775807"), get),
        ("string-long-compressible", lambda c, k: c.set(k, b"abcdefghij" * 500), get),
        ("string-binary", lambda c, k: c.set(k, bytes(range(256)) * 3), get),
        ("list-small", lambda c, k: c.rpush(k, b"a", b"1", b"-300", b"x" * 70, b""), lst),
        ("list-large", lambda c, k: c.rpush(k, *[str(i).encode() * (i % 7 + 1) for i in range(3000)]), lst),
        ("set-intset", lambda c, k: c.sadd(k, 1, -5, 70000, 2**40), sset),
        ("set-small", lambda c, k: c.sadd(k, b"a", b"b", b"1"), sset),
        ("set-large", lambda c, k: c.sadd(k, *range(BIG)), sset),
        ("hash-small", lambda c, k: c.hset(k, mapping={b"f": b"v", b"n": b"7", b"e": b""}), hsh),
        ("hash-long-value", lambda c, k: c.hset(k, mapping={b"f" * 70: b"v", b"n": b"7"}), hsh),
        ("hash-large", lambda c, k: c.hset(k, mapping={f"f{i}".encode(): str(i).encode() for i in range(BIG)}), hsh),
        ("zset-small", lambda c, k: c.zadd(k, {b"a": 1.5, b"b": -2, b"c": 3e100, b"d": float("inf")}), zs),
        ("zset-large", lambda c, k: c.zadd(k, {f"m{i}".encode(): i / 7 for i in range(BIG)}), zs),
    ]


CASES = values()


def clients():
    larder = redis_client(_port("LARDER_RESP_PORT"), 2, decode=False)
    ref = redis_client(int(REF_RESP), 2, decode=False) if REF_RESP else None
    return larder, ref


@need_ref
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("direction", ["redis-to-larder", "larder-to-redis"])
def test_dump_restore_across_servers(case, direction, k):
    _, write, read = case
    larder, ref = clients()
    src, dst = (ref, larder) if direction == "redis-to-larder" else (larder, ref)
    key = k(case[0])
    # The reference checks every entry of what it is given (Redis's deep sanitization).
    ref.config_set("sanitize-dump-payload", "yes")
    try:
        write(src, key)
        payload = src.dump(key)
        assert dst.restore(key, 0, payload) == b"OK"
        assert read(dst, key) == read(src, key)
        assert dst.type(key) == src.type(key)
        # And back again, with a TTL.
        payload2 = dst.dump(key)
        assert src.restore(key, 10000, payload2, replace=True) == b"OK"
        assert read(src, key) == read(dst, key)
        assert 0 < src.pttl(key) <= 10000
    finally:
        ref.config_set("sanitize-dump-payload", "no")
        larder.delete(key)
        ref.delete(key)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_dump_restore_round_trip(case, k):
    _, write, read = case
    larder, _ = clients()
    key, copy = k(case[0]), k(case[0] + "-copy")
    try:
        write(larder, key)
        assert larder.restore(copy, 0, larder.dump(key)) == b"OK"
        assert read(larder, copy) == read(larder, key)
    finally:
        larder.delete(key, copy)


@need_ref
def test_restore_errors_match_redis(k):
    larder, ref = clients()
    key = k("e")
    ref.set(key, b"v")
    good = ref.dump(key)
    ref.delete(key)
    cases = [
        (key, 0, b"\x00\x01a\x0b\x00" + b"\x00" * 8, ()),  # bad checksum (and newer version)
        (key, 0, good[:-1], ()),
        (key, -1, good, ()),
        (key, "x", good, ()),
        (key, 0, good, ("IDLETIME", "-1")),
        (key, 0, good, ("FREQ", "256")),
        (key, 0, good, ("IDLETIME", "1", "FREQ", "1")),
        (key, 0, good, ("bogus",)),
    ]
    for args in cases:
        out = []
        for c in (larder, ref):
            try:
                out.append(c.execute_command("RESTORE", *args[:3], *args[3]))
            except Exception as e:  # noqa: BLE001 - the error text is what is compared
                out.append(str(e))
            c.delete(key)
        assert out[0] == out[1], args


@need_ref
def test_string_payloads_are_redis_bytes(k):
    """Strings DUMP to Redis's exact bytes: integer encodings, plain, and LZF-compressed
    (Larder's compressor is a port of Redis's lzf_c.c)."""
    larder, ref = clients()
    key = k("s")
    values = [b"0", b"-128", b"32767", b"-2147483648", b"2147483648", b"x" * 20, b"x" * 21]
    values += [b"abcdefghij" * 20, (b"0123456789" * 7 + b"abc") * 300, bytes(range(256)) * 40]
    try:
        for v in values:
            larder.set(key, v)
            ref.set(key, v)
            assert larder.dump(key) == ref.dump(key), v[:30]
    finally:
        larder.delete(key)
        ref.delete(key)
