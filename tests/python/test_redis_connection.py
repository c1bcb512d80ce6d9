"""Connection and server commands through redis-py, in RESP2 and RESP3 (Redis 7 behaviour)."""

import pytest
from redis.exceptions import ResponseError

from conftest import _port


def test_ping_echo(r):
    assert r.ping() is True
    r.set_response_callback("PING", lambda reply, **kw: reply)  # redis-py turns PONG into True
    assert r.execute_command("PING", "hi") == "hi"
    assert r.execute_command("PING") == "PONG"
    assert r.echo("hello world") == "hello world"
    with pytest.raises(ResponseError, match="wrong number of arguments for 'ping' command"):
        r.execute_command("PING", "a", "b")


def test_unknown_command_and_arity(r, k):
    with pytest.raises(ResponseError, match="unknown command 'NOSUCHCMD', with args beginning with: 'a' 'b'"):
        r.execute_command("NOSUCHCMD", "a", "b")
    with pytest.raises(ResponseError, match="wrong number of arguments for 'get' command"):
        r.execute_command("GET")
    with pytest.raises(ResponseError, match="wrong number of arguments for 'get' command"):
        r.execute_command("GET", k("a"), k("b"))


def test_hello(r, proto):
    reply = r.execute_command("HELLO", proto)
    if isinstance(reply, list):  # RESP2: a flat list of field, value
        reply = dict(zip(reply[::2], reply[1::2]))
    assert reply["proto"] == proto
    assert isinstance(reply["id"], int)
    assert reply["mode"] == "standalone"
    assert reply["role"] == "master"
    assert "version" in reply
    with pytest.raises(ResponseError, match="NOPROTO"):
        r.execute_command("HELLO", 4)


def test_info(r, k):
    r.set(k("a"), "1")
    info = r.info()
    for field in ["redis_version", "tcp_port", "uptime_in_seconds", "connected_clients", "used_memory"]:
        assert field in info, field
    assert info["tcp_port"] == _port("LARDER_RESP_PORT")
    assert info["connected_clients"] >= 1
    server = r.info("server")
    assert "redis_version" in server
    assert "connected_clients" not in server
    keyspace = r.info("keyspace")
    assert keyspace["db0"]["keys"] >= 1
    assert "total_commands_processed" in r.info("stats")
    assert "used_memory" in r.info("memory")


def test_config_get_set(r):
    got = r.config_get("maxclients")
    assert list(got) == ["maxclients"]
    assert int(got["maxclients"]) > 0
    assert "maxclients" in r.config_get("*max*")
    assert r.config_get("no-such-parameter") == {}
    old = r.config_get("slowlog-max-len")["slowlog-max-len"]
    try:
        assert r.config_set("slowlog-max-len", 200) is True
        assert r.config_get("slowlog-max-len") == {"slowlog-max-len": "200"}
    finally:
        r.config_set("slowlog-max-len", old)
    with pytest.raises(ResponseError, match="Unknown option or number of arguments for CONFIG SET - 'no-such-parameter'"):
        r.config_set("no-such-parameter", "1")


def test_client_name_and_id(r):
    assert r.client_getname() is None
    assert r.client_setname("larder-test") is True
    assert r.client_getname() == "larder-test"
    cid = r.client_id()
    assert isinstance(cid, int) and cid > 0
    me = [c for c in r.client_list() if int(c["id"]) == cid]
    assert len(me) == 1 and me[0]["name"] == "larder-test"
    assert r.client_info()["name"] == "larder-test"
    with pytest.raises(ResponseError, match="Client names cannot contain spaces, newlines or special characters"):
        r.client_setname("has space")
    assert r.client_setname("") is True  # the empty name clears it
    assert r.client_getname() is None


def test_pipeline(r, k):
    p = r.pipeline(transaction=False)
    for i in range(200):
        p.set(k(f"p{i}"), i)
    for i in range(200):
        p.get(k(f"p{i}"))
    p.incr(k("p0"))
    p.incr(k("p0"))
    results = p.execute()
    assert results[:200] == [True] * 200
    assert results[200:400] == [str(i) for i in range(200)]
    assert results[400:] == [1, 2]


def test_pipeline_error_in_the_middle(r, k):
    p = r.pipeline(transaction=False)
    p.set(k("a"), "x")
    p.incr(k("a"))  # not an integer: an error reply, the others still run
    p.set(k("b"), "y")
    p.get(k("b"))
    results = p.execute(raise_on_error=False)
    assert results[0] is True
    assert isinstance(results[1], ResponseError)
    assert "value is not an integer or out of range" in str(results[1])
    assert results[2:] == [True, "y"]


def test_many_connections(proto, k):
    from conftest import redis_client

    clients = [redis_client(_port("LARDER_RESP_PORT"), proto) for _ in range(50)]
    try:
        for i, c in enumerate(clients):
            c.set(k(f"c{i}"), i)
        for i, c in enumerate(clients):
            assert c.get(k(f"c{(i + 1) % 50}")) == str((i + 1) % 50)
    finally:
        for c in clients:
            c.close()
