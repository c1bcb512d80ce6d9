"""Pub/sub and transactions through redis-py, in RESP2 and RESP3 (Redis 7 behaviour).

Channel names are namespaced per test like keys (the `k` fixture), so PUBLISH counts only
see this test's subscribers.
"""

import threading
import time

import pytest
import redis
from redis.exceptions import ResponseError, WatchError

from conftest import HOST, _port, redis_client


def next_message(p, timeout=2.0):
    """The next data message (not a subscribe confirmation) of a PubSub, or None."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = p.get_message(ignore_subscribe_messages=True, timeout=0.1)
        if m is not None:
            return m
    return None


def test_publish_subscribe(r, proto, k):
    sub = redis_client(_port("LARDER_RESP_PORT"), proto)
    p = sub.pubsub()
    p.subscribe(k("news"))
    assert p.get_message(timeout=2)["type"] == "subscribe"
    assert r.publish(k("news"), "hello") == 1
    assert r.publish(k("nobody"), "hello") == 0
    m = next_message(p)
    assert m["type"] == "message" and m["channel"] == k("news") and m["data"] == "hello"
    assert r.pubsub_numsub(k("news"), k("nobody")) == [(k("news"), 1), (k("nobody"), 0)]
    assert k("news") in r.pubsub_channels(k("*"))
    p.unsubscribe()
    assert p.get_message(timeout=2)["type"] == "unsubscribe"
    assert r.publish(k("news"), "again") == 0
    p.close()
    sub.close()


def test_pattern_subscribe_and_handlers(r, proto, k):
    sub = redis_client(_port("LARDER_RESP_PORT"), proto)
    p = sub.pubsub()
    got = []
    p.psubscribe(**{k("ev.*"): lambda m: got.append((m["pattern"], m["channel"], m["data"]))})
    p.get_message(timeout=2)
    assert r.publish(k("ev.one"), "1") == 1
    assert r.publish(k("evone"), "x") == 0
    deadline = time.time() + 2
    while not got and time.time() < deadline:
        p.get_message(timeout=0.1)
    assert got == [(k("ev.*"), k("ev.one"), "1")]
    assert r.pubsub_numpat() >= 1
    p.close()
    sub.close()


def test_many_subscribers_in_threads(r, proto, k):
    subs = [redis_client(_port("LARDER_RESP_PORT"), proto) for _ in range(12)]
    ps = [s.pubsub() for s in subs]
    for p in ps:
        p.subscribe(k("fan"))
        p.get_message(timeout=2)
    for i in range(5):
        assert r.publish(k("fan"), str(i)) == 12
    for p in ps:
        assert [next_message(p)["data"] for _ in range(5)] == ["0", "1", "2", "3", "4"]
    for p, s in zip(ps, subs):
        p.close()
        s.close()


def test_transaction_pipeline(r, k):
    pipe = r.pipeline(transaction=True)
    pipe.set(k("a"), 1).incr(k("a")).get(k("a"))
    assert pipe.execute() == [True, 2, "2"]
    # A runtime error is returned in place; the other commands ran.
    pipe = r.pipeline(transaction=True)
    pipe.set(k("s"), "x").incr(k("s")).set(k("t"), "y")
    res = pipe.execute(raise_on_error=False)
    assert res[0] is True and isinstance(res[1], ResponseError) and res[2] is True
    assert r.get(k("t")) == "y"


def test_queueing_error_aborts(r, k):
    pipe = r.pipeline(transaction=True)
    pipe.set(k("a"), 1)
    pipe.execute_command("GET")  # wrong arity: rejected while queueing
    with pytest.raises(ResponseError, match="EXECABORT|wrong number"):
        pipe.execute()
    assert r.exists(k("a")) == 0


def test_watch_optimistic_locking(r, proto, k):
    other = redis_client(_port("LARDER_RESP_PORT"), proto)
    r.set(k("balance"), 10)
    with r.pipeline() as pipe:
        pipe.watch(k("balance"))
        current = int(pipe.get(k("balance")))
        other.set(k("balance"), 100)  # someone else writes in between
        pipe.multi()
        pipe.set(k("balance"), current - 1)
        with pytest.raises(WatchError):
            pipe.execute()
    assert r.get(k("balance")) == "100"

    def debit(pipe):
        v = int(pipe.get(k("balance")))
        pipe.multi()
        pipe.set(k("balance"), v - 1)

    assert r.transaction(debit, k("balance")) == [True]
    assert r.get(k("balance")) == "99"
    other.close()


def test_concurrent_increments_with_watch(proto, k):
    """Ten clients each add 1 twenty times with WATCH retries: no update is lost."""
    port = _port("LARDER_RESP_PORT")
    setup = redis_client(port, proto)
    setup.set(k("n"), 0)

    def work():
        c = redis_client(port, proto)
        for _ in range(20):
            c.transaction(lambda pipe: (lambda v: (pipe.multi(), pipe.set(k("n"), v + 1)))(int(pipe.get(k("n")))), k("n"))
        c.close()

    threads = [threading.Thread(target=work) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert setup.get(k("n")) == "200"
    setup.close()


def test_subscribed_resp2_client_may_only_subscribe(k):
    conn = redis.Connection(host=HOST, port=_port("LARDER_RESP_PORT"), protocol=2, decode_responses=True, socket_timeout=5)
    conn.send_command("SUBSCRIBE", k("ch"))
    assert conn.read_response() == ["subscribe", k("ch"), 1]
    conn.send_command("GET", k("x"))
    with pytest.raises(ResponseError, match="only \\(P\\|S\\)SUBSCRIBE"):
        conn.read_response()
    conn.send_command("PING")
    assert conn.read_response() == ["pong", ""]
    conn.disconnect()
