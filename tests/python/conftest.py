"""Tests through real client libraries (redis-py, pymemcache), the way users will call Larder.

The server is started by scripts/test.sh, which passes its ports in the environment:

    LARDER_HOST       (default 127.0.0.1)
    LARDER_RESP_PORT  the Redis-protocol port
    LARDER_MC_PORT    the memcached-protocol port
    LARDER_REF_RESP_PORT / LARDER_REF_MC_PORT   optional: a real redis-server / memcached,
                      for the side-by-side tests in test_reference.py (skipped without them)

The tests are written to documented Redis 7 and memcached 1.6 behaviour, not to what Larder
does today, so they can be checked against the real servers too (the cross-protocol tests
need one keyspace behind both ports, so leave them out there):

    LARDER_RESP_PORT=6379 LARDER_MC_PORT=11211 .venv/bin/pytest tests/python -m "not cross"

Keys are namespaced per test (the `k` fixture), so tests never depend on FLUSHALL and can
share one server.
"""

import os
import uuid

import pytest
import redis
from pymemcache.client.base import Client as MemcacheClient

HOST = os.environ.get("LARDER_HOST", "127.0.0.1")
TIMEOUT = 5.0


def _port(name):
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set: start a server and export its port (scripts/test.sh does)")
    return int(v)


def redis_client(port, protocol, decode=True, **kw):
    return redis.Redis(
        host=HOST,
        port=port,
        protocol=protocol,
        decode_responses=decode,
        socket_timeout=TIMEOUT,
        socket_connect_timeout=TIMEOUT,
        **kw,
    )


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def proto(request):
    return request.param


@pytest.fixture
def r(proto):
    """A redis-py client in RESP2 and RESP3 (each test using it runs twice), str replies."""
    c = redis_client(_port("LARDER_RESP_PORT"), proto)
    yield c
    c.close()


@pytest.fixture
def rb(proto):
    """Like `r`, but replies stay bytes (binary-safety tests)."""
    c = redis_client(_port("LARDER_RESP_PORT"), proto, decode=False)
    yield c
    c.close()


@pytest.fixture
def mc():
    c = MemcacheClient(
        (HOST, _port("LARDER_MC_PORT")),
        connect_timeout=TIMEOUT,
        timeout=TIMEOUT,
        default_noreply=False,
    )
    yield c
    c.close()


@pytest.fixture
def k(request):
    """A key namespace unique to this test run: k("a") -> "t:<id>:a"."""
    ns = f"t:{uuid.uuid4().hex[:12]}:"

    def key(name=""):
        return ns + name

    key.ns = ns
    return key


def diff_seeds(default):
    """Seeds for the differential tests: 1..default, or LARDER_DIFF_SEEDS: "N" (1..N) or "A-B"."""
    spec = os.environ.get("LARDER_DIFF_SEEDS", "").strip()
    if not spec:
        return list(range(1, default + 1))
    first, _, last = spec.partition("-")
    return list(range(int(first), int(last) + 1)) if last else list(range(1, int(first) + 1))
