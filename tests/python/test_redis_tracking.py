"""Client-side caching (CLIENT TRACKING) through redis-py, as Redis 7 behaves.

A RESP3 connection gets invalidation pushes; a RESP2 client redirects its invalidations to
a subscriber of `__redis__:invalidate`; and the errors and introspection answer as Redis
does.
"""

import time

import pytest
import redis

from conftest import HOST, _port, redis_client


def test_resp3_invalidation_push(k):
    """A RESP3 connection gets `invalidate [key]` pushes (redis-py's own cache, which reads
    them, accepts only servers that say 7.4 or later)."""
    port = _port("LARDER_RESP_PORT")
    conn = redis.Connection(host=HOST, port=port, protocol=3, socket_timeout=5)
    writer = redis_client(port, 3)
    try:
        conn.connect()
        pushes = []
        # redis-py hands invalidation pushes to this handler (its cache's hook).
        conn._parser.set_invalidation_push_handler(pushes.append)
        conn.send_command("CLIENT", "TRACKING", "ON")
        assert conn.read_response() in (b"OK", "OK")
        writer.set(k("a"), "1")
        conn.send_command("GET", k("a"))
        assert conn.read_response() == b"1"
        writer.set(k("a"), "2")
        conn.read_response(push_request=True)
        assert pushes == [[b"invalidate", [k("a").encode()]]]
        # The key left the table: the next change is not sent until it is read again.
        writer.set(k("a"), "3")
        conn.send_command("PING")
        assert conn.read_response() in (b"PONG", "PONG")
        assert len(pushes) == 1
    finally:
        conn.disconnect()
        writer.close()


def test_resp2_redirect_to_a_subscriber(k):
    port = _port("LARDER_RESP_PORT")
    sub = redis_client(port, 2)
    tracker = redis_client(port, 2, single_connection_client=True)
    writer = redis_client(port, 2)
    p = sub.pubsub()
    try:
        p.subscribe("__redis__:invalidate")
        assert p.get_message(timeout=2)["type"] == "subscribe"
        sub_id = next(
            c["id"] for c in writer.client_list() if c["flags"].startswith("P") and c["cmd"] == "subscribe"
        )
        assert tracker.execute_command("CLIENT", "TRACKING", "ON", "REDIRECT", sub_id) in (True, "OK")
        assert tracker.client_getredir() == int(sub_id)
        writer.set(k("x"), "1")
        assert tracker.get(k("x")) == "1"
        writer.incr(k("other"))
        writer.set(k("x"), "2")
        deadline = time.time() + 2
        m = None
        while m is None and time.time() < deadline:
            m = p.get_message(ignore_subscribe_messages=True, timeout=0.1)
        assert m is not None and m["channel"] == "__redis__:invalidate"
        assert m["data"] == [k("x")]
        info = tracker.client_trackinginfo()
        assert info[1] == ["on"] or info.get("flags") == ["on"]
        assert tracker.execute_command("CLIENT", "TRACKING", "OFF") in (True, "OK")
        assert tracker.client_getredir() == -1
    finally:
        p.close()
        sub.close()
        tracker.close()
        writer.close()


def test_tracking_errors(r):
    with pytest.raises(redis.ResponseError, match="PREFIX option requires BCAST mode to be enabled"):
        r.execute_command("CLIENT", "TRACKING", "ON", "PREFIX", "a")
    with pytest.raises(redis.ResponseError, match="OPTIN and OPTOUT are not compatible with BCAST"):
        r.execute_command("CLIENT", "TRACKING", "ON", "BCAST", "OPTIN")
    with pytest.raises(redis.ResponseError, match="client is in tracking mode with OPTIN or OPTOUT"):
        r.execute_command("CLIENT", "CACHING", "YES")
