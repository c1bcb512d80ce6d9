"""MONITOR through redis-py's Monitor, in RESP2 and RESP3: what another client runs comes
back parsed (time, database, address, command), in order, transactions and credentials as
Redis shows them."""

import time

import pytest
from redis.exceptions import ResponseError

from conftest import _port, redis_client


def commands_of(m, addr, n):
    """The next `n` commands the monitor `m` reports from the client at `addr`."""
    host, port = addr.rsplit(":", 1)
    out = []
    while len(out) < n:
        c = m.next_command()
        if c["client_address"] == host and c["client_port"] == port:
            out.append(c)
    return out


def test_monitor_reports_another_clients_commands(r, proto, k):
    other = redis_client(_port("LARDER_RESP_PORT"), proto)
    try:
        addr = other.client_info()["addr"]
        with r.monitor() as m:
            before = time.time()
            other.set(k("a"), 'x "y"')
            other.get(k("a"))
            other.execute_command("SELECT", 2)
            other.exists(k("b"))
            other.execute_command("SELECT", 0)
            got = commands_of(m, addr, 5)
    finally:
        other.close()
    assert [c["command"] for c in got] == [
        f'SET {k("a")} x "y"',
        f'GET {k("a")}',
        "SELECT 2",
        f'EXISTS {k("b")}',
        "SELECT 0",
    ]
    # The database is the one each command left selected.
    assert [c["db"] for c in got] == [0, 0, 2, 2, 0]
    assert all(c["client_type"] == "tcp" for c in got)
    assert all(before - 5 < c["time"] < time.time() + 5 for c in got)
    assert [c["time"] for c in got] == sorted(c["time"] for c in got)


def test_monitor_shows_transactions_and_hides_credentials(r, proto, k):
    other = redis_client(_port("LARDER_RESP_PORT"), proto)
    try:
        addr = other.client_info()["addr"]
        with r.monitor() as m:
            with other.pipeline(transaction=True) as p:
                p.incr(k("n"))
                p.incrby(k("n"), 2)
                p.execute()
            other.execute_command("AUTH", "default", "secret")
            other.config_get("maxclients")  # an admin command: not shown
            other.ping()
            got = [c["command"] for c in commands_of(m, addr, 6)]
    finally:
        other.close()
    assert got == [
        "MULTI",
        f"INCRBY {k('n')} 1",
        f"INCRBY {k('n')} 2",
        "EXEC",
        "AUTH (redacted) (redacted)",
        "PING",
    ]


def test_a_monitor_cannot_touch_the_keyspace(proto, k):
    c = redis_client(_port("LARDER_RESP_PORT"), proto)
    conn = c.connection_pool.get_connection()
    try:
        conn.send_command("MONITOR")
        assert conn.read_response() == "OK"
        conn.send_command("GET", k("a"))
        with pytest.raises(ResponseError, match="Replica can't interact with the keyspace"):
            conn.read_response()
    finally:
        conn.disconnect()
        c.close()


def test_client_list_flags_a_monitor(r, proto):
    mon = redis_client(_port("LARDER_RESP_PORT"), proto)
    try:
        mon_id = mon.client_id()
        with mon.monitor():
            flags = [c["flags"] for c in r.client_list() if int(c["id"]) == mon_id]
    finally:
        mon.close()
    assert flags == ["O"]
