"""List commands and blocking pops through redis-py, in RESP2 and RESP3 (Redis 7 behaviour)."""

import threading
import time

import pytest
from redis.exceptions import ResponseError

from conftest import _port, redis_client


def test_push_pop_range(r, k):
    assert r.lpush(k("l"), "a", "b", "c") == 3
    assert r.rpush(k("l"), "d", "e") == 5
    assert r.lpushx(k("missing"), "a") == 0
    assert r.rpushx(k("l"), "f") == 6
    assert r.lrange(k("l"), 0, -1) == ["c", "b", "a", "d", "e", "f"]
    assert r.lrange(k("l"), -2, 100) == ["e", "f"]
    assert r.lrange(k("l"), 4, 1) == []
    assert r.llen(k("l")) == 6
    assert r.lindex(k("l"), 0) == "c"
    assert r.lindex(k("l"), -1) == "f"
    assert r.lindex(k("l"), 99) is None
    assert r.lpop(k("l")) == "c"
    assert r.rpop(k("l")) == "f"
    assert r.lpop(k("l"), 2) == ["b", "a"]
    assert r.rpop(k("l"), 5) == ["e", "d"]
    assert r.exists(k("l")) == 0
    assert r.lpop(k("l")) is None
    assert r.lpop(k("l"), 3) is None
    assert r.type(k("l")) == "none"


def test_edits(r, k):
    r.rpush(k("l"), "a", "b", "c", "b", "a")
    assert r.lset(k("l"), 1, "B") is True
    assert r.linsert(k("l"), "BEFORE", "c", "x") == 6
    assert r.linsert(k("l"), "AFTER", "nope", "x") == -1
    assert r.linsert(k("missing"), "AFTER", "a", "x") == 0
    assert r.lrange(k("l"), 0, -1) == ["a", "B", "x", "c", "b", "a"]
    assert r.lrem(k("l"), -1, "a") == 1
    assert r.lrem(k("l"), 0, "b") == 1
    assert r.lrange(k("l"), 0, -1) == ["a", "B", "x", "c"]
    assert r.ltrim(k("l"), 1, 2) is True
    assert r.lrange(k("l"), 0, -1) == ["B", "x"]
    assert r.ltrim(k("l"), 5, 10) is True
    assert r.exists(k("l")) == 0
    with pytest.raises(ResponseError, match="^no such key$"):
        r.lset(k("l"), 0, "v")
    r.rpush(k("l"), "a")
    with pytest.raises(ResponseError, match="^index out of range$"):
        r.lset(k("l"), 5, "v")


def test_lpos(r, k):
    r.rpush(k("l"), "a", "b", "c", "1", "2", "3", "c", "c")
    assert r.lpos(k("l"), "c") == 2
    assert r.lpos(k("l"), "c", rank=-1) == 7
    assert r.lpos(k("l"), "c", rank=2, count=0) == [6, 7]
    assert r.lpos(k("l"), "c", count=0, maxlen=3) == [2]
    assert r.lpos(k("l"), "zz") is None
    assert r.lpos(k("l"), "zz", count=2) == []
    with pytest.raises(ResponseError, match="RANK can't be zero"):
        r.lpos(k("l"), "c", rank=0)
    with pytest.raises(ResponseError, match="COUNT can't be negative"):
        r.lpos(k("l"), "c", count=-1)


def test_moves(r, k):
    a, b = k("{t}a"), k("{t}b")
    r.rpush(a, "1", "2", "3")
    assert r.lmove(a, b, "LEFT", "RIGHT") == "1"
    assert r.rpoplpush(a, b) == "3"
    assert r.lmove(a, a, "LEFT", "RIGHT") == "2"
    assert r.lrange(b, 0, -1) == ["3", "1"]
    assert r.lmpop(2, k("{t}none"), b, direction="RIGHT", count=5) == [b, ["1", "3"]]
    assert r.lmpop(1, b, direction="LEFT") is None
    assert r.rpoplpush(k("{t}none"), b) is None


def test_wrong_type(r, k):
    r.set(k("s"), "v")
    for call in (
        lambda: r.lpush(k("s"), "a"),
        lambda: r.lrange(k("s"), 0, -1),
        lambda: r.llen(k("s")),
        lambda: r.lpop(k("s")),
        lambda: r.blpop([k("s")], timeout=0.1),
    ):
        with pytest.raises(ResponseError, match="^WRONGTYPE"):
            call()


def test_blpop_timeout(r, k):
    t = time.monotonic()
    assert r.blpop([k("a"), k("b")], timeout=0.1) is None
    assert time.monotonic() - t >= 0.1
    assert r.brpoplpush(k("a"), k("b"), timeout=0.05) is None
    assert r.blmpop(0.05, 1, k("a"), direction="LEFT") is None
    with pytest.raises(ResponseError, match="timeout is negative"):
        r.blpop([k("a")], timeout=-1)
    with pytest.raises(ResponseError, match="timeout is not a float or out of range"):
        r.execute_command("BLPOP", k("a"), "soon")


def _blocked_clients(r):
    return r.info("clients")["blocked_clients"]


def _wait_blocked(r, n):
    deadline = time.monotonic() + 5
    while _blocked_clients(r) != n:
        assert time.monotonic() < deadline, f"never {n} blocked clients"
        time.sleep(0.005)


def test_blpop_woken_by_push(r, k, proto):
    results = {}
    w = redis_client(_port("LARDER_RESP_PORT"), proto)

    def wait():
        results["got"] = w.blpop([k("q")], timeout=5)

    t = threading.Thread(target=wait)
    t.start()
    _wait_blocked(r, 1)
    r.rpush(k("q"), "job")
    t.join(5)
    w.close()
    assert list(results["got"]) == [k("q"), "job"]
    assert r.exists(k("q")) == 0


def test_fifo_among_waiters(r, k, proto):
    order = []
    clients = [redis_client(_port("LARDER_RESP_PORT"), proto) for _ in range(3)]
    threads = []
    for i, c in enumerate(clients):
        t = threading.Thread(target=lambda c=c, i=i: order.append((i, c.brpop([k("q")], timeout=5)[1])))
        t.start()
        threads.append(t)
        _wait_blocked(r, i + 1)
    r.rpush(k("q"), "a", "b", "c")
    for t in threads:
        t.join(5)
    for c in clients:
        c.close()
    # The longest waiter pops first: BRPOP takes from the tail.
    assert sorted(order) == [(0, "c"), (1, "b"), (2, "a")]


def test_blmove_served_before_the_push_returns(r, k, proto):
    src, dst = k("{t}src"), k("{t}dst")
    w = redis_client(_port("LARDER_RESP_PORT"), proto)
    got = {}
    t = threading.Thread(target=lambda: got.update(v=w.blmove(src, dst, 5, "LEFT", "RIGHT")))
    t.start()
    _wait_blocked(r, 1)
    r.lpush(src, "x")
    # As in Redis: by the time LPUSH has replied, the element has moved.
    assert r.lrange(dst, 0, -1) == ["x"]
    t.join(5)
    w.close()
    assert got["v"] == "x"
