"""String commands through redis-py, in RESP2 and RESP3 (Redis 7 behaviour)."""

import time

import pytest
from redis.exceptions import ResponseError


def test_set_get(r, k):
    assert r.set(k("a"), "hello") is True
    assert r.get(k("a")) == "hello"
    assert r.get(k("missing")) is None
    assert r.set(k("a"), "again") is True
    assert r.get(k("a")) == "again"


def test_binary_keys_and_values(rb, k):
    key = k("bin\r\n\x00 key").encode()
    value = bytes(range(256)) * 4 + b"\r\n$5\r\n\x00"
    assert rb.set(key, value) is True
    assert rb.get(key) == value
    assert rb.set(k("empty"), b"") is True
    assert rb.get(k("empty")) == b""
    assert rb.strlen(k("empty")) == 0


def test_large_value(rb, k):
    value = bytes(i * 7 % 251 for i in range(3 << 20))  # 3 MiB: bigger than any read buffer
    assert rb.set(k("big"), value) is True
    assert rb.get(k("big")) == value
    assert rb.strlen(k("big")) == len(value)


def test_set_nx_xx(r, k):
    assert r.set(k("a"), "1", xx=True) is None
    assert r.get(k("a")) is None
    assert r.set(k("a"), "1", nx=True) is True
    assert r.set(k("a"), "2", nx=True) is None
    assert r.get(k("a")) == "1"
    assert r.set(k("a"), "3", xx=True) is True
    assert r.get(k("a")) == "3"


def test_set_get_option(r, k):
    assert r.set(k("a"), "1", get=True) is None
    assert r.set(k("a"), "2", get=True) == "1"
    assert r.get(k("a")) == "2"
    # Redis 7.0: NX and GET together; the old value comes back and nothing is set.
    assert r.set(k("a"), "3", nx=True, get=True) == "2"
    assert r.get(k("a")) == "2"


def test_set_expiry_options(r, k):
    r.set(k("a"), "v", ex=100)
    assert 99 <= r.ttl(k("a")) <= 100
    r.set(k("b"), "v", px=100_000)
    assert 99_000 <= r.pttl(k("b")) <= 100_000
    at = int(time.time()) + 200
    r.set(k("c"), "v", exat=at)
    assert 198 <= r.ttl(k("c")) <= 200
    r.set(k("d"), "v", pxat=at * 1000)
    assert 198_000 <= r.pttl(k("d")) <= 200_000
    # KEEPTTL keeps it; a plain SET drops it.
    r.set(k("a"), "w", keepttl=True)
    assert 98 <= r.ttl(k("a")) <= 100
    r.set(k("a"), "x")
    assert r.ttl(k("a")) == -1


def test_set_errors(r, k):
    with pytest.raises(ResponseError, match="syntax error"):
        r.execute_command("SET", k("a"), "v", "NX", "XX")
    with pytest.raises(ResponseError, match="syntax error"):
        r.execute_command("SET", k("a"), "v", "EX", "10", "PX", "100")
    with pytest.raises(ResponseError, match="syntax error"):
        r.execute_command("SET", k("a"), "v", "KEEPTTL", "EX", "10")
    with pytest.raises(ResponseError, match="syntax error"):
        r.execute_command("SET", k("a"), "v", "BOGUS")
    with pytest.raises(ResponseError, match="invalid expire time in 'set' command"):
        r.execute_command("SET", k("a"), "v", "EX", "0")
    with pytest.raises(ResponseError, match="invalid expire time in 'set' command"):
        r.execute_command("SET", k("a"), "v", "PX", "-5")
    with pytest.raises(ResponseError, match="value is not an integer or out of range"):
        r.execute_command("SET", k("a"), "v", "EX", "ten")
    with pytest.raises(ResponseError, match="wrong number of arguments for 'set' command"):
        r.execute_command("SET", k("a"))
    assert r.exists(k("a")) == 0


def test_setnx_setex_psetex_getset(r, k):
    assert r.setnx(k("a"), "1") is True
    assert r.setnx(k("a"), "2") is False
    assert r.setex(k("b"), 50, "v") is True
    assert 49 <= r.ttl(k("b")) <= 50
    assert r.psetex(k("c"), 50_000, "v") is True
    assert 49_000 <= r.pttl(k("c")) <= 50_000
    with pytest.raises(ResponseError, match="invalid expire time in 'setex' command"):
        r.setex(k("d"), 0, "v")
    assert r.getset(k("a"), "new") == "1"
    assert r.getset(k("nope"), "x") is None
    assert r.get(k("a")) == "new"


def test_mset_mget(r, k):
    assert r.mset({k("a"): "1", k("b"): "2", k("c"): "3"}) is True
    assert r.mget([k("a"), k("missing"), k("c"), k("b")]) == ["1", None, "3", "2"]
    with pytest.raises(ResponseError, match="wrong number of arguments for 'mset' command"):
        r.execute_command("MSET", k("a"), "1", k("b"))
    # MSETNX sets all or nothing.
    assert r.msetnx({k("d"): "4", k("a"): "x"}) is False
    assert r.get(k("d")) is None
    assert r.msetnx({k("d"): "4", k("e"): "5"}) is True
    assert r.mget(k("d"), k("e")) == ["4", "5"]


def test_incr_decr(r, k):
    assert r.incr(k("n")) == 1
    assert r.incr(k("n"), 10) == 11
    assert r.decr(k("n")) == 10
    assert r.decr(k("n"), 15) == -5
    assert r.get(k("n")) == "-5"
    r.set(k("big"), "9223372036854775806")
    assert r.incr(k("big")) == 9223372036854775807
    with pytest.raises(ResponseError, match="increment or decrement would overflow"):
        r.incr(k("big"))
    r.set(k("min"), "-9223372036854775808")
    with pytest.raises(ResponseError, match="increment or decrement would overflow"):
        r.decr(k("min"))
    for bad in ["abc", "1.5", " 1", "1 ", "", "99999999999999999999"]:
        r.set(k("s"), bad)
        with pytest.raises(ResponseError, match="value is not an integer or out of range"):
            r.incr(k("s"))
    with pytest.raises(ResponseError, match="value is not an integer or out of range"):
        r.execute_command("INCRBY", k("n"), "one")


def test_incr_keeps_ttl(r, k):
    r.set(k("n"), "5", ex=100)
    assert r.incr(k("n")) == 6
    assert 98 <= r.ttl(k("n")) <= 100


def test_incrbyfloat(r, k):
    r.set(k("f"), "10.5")
    assert r.incrbyfloat(k("f"), 0.1) == pytest.approx(10.6)
    assert r.get(k("f")) == "10.6"
    r.set(k("g"), "5.0e3")
    assert r.incrbyfloat(k("g"), 200) == 5200
    assert r.get(k("g")) == "5200"
    assert r.incrbyfloat(k("new"), -1.5) == -1.5
    r.set(k("s"), "abc")
    with pytest.raises(ResponseError, match="value is not a valid float"):
        r.incrbyfloat(k("s"), 1)
    r.set(k("h"), "1")
    with pytest.raises(ResponseError, match="increment would produce NaN or Infinity"):
        r.execute_command("INCRBYFLOAT", k("h"), "inf")


def test_append_strlen_getrange_setrange(r, k):
    assert r.append(k("s"), "Hello") == 5
    assert r.append(k("s"), " World") == 11
    assert r.strlen(k("s")) == 11
    assert r.strlen(k("missing")) == 0
    assert r.getrange(k("s"), 0, 4) == "Hello"
    assert r.getrange(k("s"), -5, -1) == "World"
    assert r.getrange(k("s"), 5, 3) == ""
    assert r.getrange(k("s"), 0, 1000) == "Hello World"
    assert r.getrange(k("missing"), 0, 10) == ""
    assert r.setrange(k("s"), 6, "Redis") == 11
    assert r.get(k("s")) == "Hello Redis"
    # SETRANGE past the end pads with zero bytes; an empty value on a missing key creates nothing.
    assert r.setrange(k("pad"), 3, "x") == 4
    assert r.get(k("pad")) == "\x00\x00\x00x"
    assert r.setrange(k("none"), 5, "") == 0
    assert r.exists(k("none")) == 0
    with pytest.raises(ResponseError, match="offset is out of range"):
        r.setrange(k("s"), -1, "x")
    with pytest.raises(ResponseError, match="string exceeds maximum allowed size"):
        r.setrange(k("s"), 512 * 1024 * 1024, "x")


def test_getdel_getex(r, k):
    r.set(k("a"), "v")
    assert r.getdel(k("a")) == "v"
    assert r.exists(k("a")) == 0
    assert r.getdel(k("a")) is None
    r.set(k("b"), "w")
    assert r.getex(k("b"), ex=100) == "w"
    assert 99 <= r.ttl(k("b")) <= 100
    assert r.getex(k("b"), persist=True) == "w"
    assert r.ttl(k("b")) == -1
    assert r.getex(k("missing"), ex=10) is None
    with pytest.raises(ResponseError, match="invalid expire time in 'getex' command"):
        r.execute_command("GETEX", k("b"), "EX", "0")
    with pytest.raises(ResponseError, match="syntax error"):
        r.execute_command("GETEX", k("b"), "EX", "10", "PERSIST")
