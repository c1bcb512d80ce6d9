"""Side by side with the real servers: the same bytes to Larder and to redis-server (or
memcached), the replies compared byte for byte.

Runs only when LARDER_REF_RESP_PORT / LARDER_REF_MC_PORT name a real redis-server 7 /
memcached 1.6 (scripts/test.sh starts them when they are installed). Every case uses replies
that do not depend on the server's identity, clock or memory: error texts, reply types,
option parsing, number formatting, protocol errors; and MONITOR's lines, time and client
address taken out.
"""

import os
import re
import socket
import time
import uuid

import pytest

from conftest import HOST, _port

REF_RESP = os.environ.get("LARDER_REF_RESP_PORT")
REF_MC = os.environ.get("LARDER_REF_MC_PORT")


def resp_command(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def resp_reply_end(buf, i=0):
    """Index just past one complete RESP2/RESP3 reply starting at i, or None if incomplete."""
    if i >= len(buf):
        return None
    nl = buf.find(b"\r\n", i)
    if nl < 0:
        return None
    kind, line, nxt = buf[i : i + 1], buf[i + 1 : nl], nl + 2
    if kind in b"+-:_,#(":
        return nxt
    if kind in b"$!=":
        n = int(line)
        if n < 0:
            return nxt
        return nxt + n + 2 if len(buf) >= nxt + n + 2 else None
    if kind in b"*~>%|":
        n = int(line)
        if n < 0:
            return nxt
        n = n * 2 if kind in b"%|" else n
        for _ in range(n):
            nxt = resp_reply_end(buf, nxt)
            if nxt is None:
                return None
        return nxt
    raise AssertionError(f"not a RESP reply: {buf[i:i + 40]!r}")


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection((HOST, port), timeout=5)
        self.buf = b""

    def resp(self, request, replies=1):
        """Sends request (bytes), reads `replies` complete replies; returns them, and whether
        the server then closed the connection."""
        self.s.sendall(request)
        return self.read_replies(replies)

    def read_replies(self, replies=1):
        """Reads `replies` complete replies (b"<closed>" for the rest if the server closes)."""
        out = []
        while len(out) < replies:
            end = resp_reply_end(self.buf)
            if end is not None:
                out.append(self.buf[:end])
                self.buf = self.buf[end:]
                continue
            data = self.recv()
            if not data:
                out.append(b"<closed>")
                break
            self.buf += data
        return out

    def recv(self):
        try:
            return self.s.recv(65536)
        except ConnectionResetError:
            return b""

    def until_idle(self, request, idle=0.1):
        """Sends request, reads until nothing more comes for `idle` seconds (or EOF)."""
        self.s.sendall(request)
        out = b""
        self.s.settimeout(5)
        first = True
        while True:
            try:
                data = self.recv()
            except socket.timeout:
                break
            if not data:
                out += b"<closed>"
                break
            out += data
            if first:
                self.s.settimeout(idle)
                first = False
        self.s.settimeout(5)
        return out

    def closed(self):
        self.s.settimeout(0.5)
        try:
            return self.recv() == b""
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


# Each case: a list of commands (lists of args). "{k}" in an arg is replaced by a key prefix
# unique to the run (the same for both servers).
RESP_CASES = {
    "set-options": [
        ["SET", "{k}a", "v", "NX", "XX"],
        ["SET", "{k}a", "v", "XX"],
        ["SET", "{k}a", "v", "NX"],
        ["SET", "{k}a", "w", "NX", "GET"],
        ["SET", "{k}a", "w", "XX", "GET"],
        ["SET", "{k}a", "v", "EX", "0"],
        ["SET", "{k}a", "v", "EX", "-1"],
        ["SET", "{k}a", "v", "PX", "0"],
        ["SET", "{k}a", "v", "EXAT", "0"],
        ["SET", "{k}a", "v", "EX", "abc"],
        ["SET", "{k}a", "v", "EX", "10", "PX", "10"],
        ["SET", "{k}a", "v", "KEEPTTL", "PX", "10"],
        ["SET", "{k}a", "v", "EX"],
        ["SET", "{k}a", "v", "ex", "100", "keepttl"],
        ["SET", "{k}a", "v", "GET", "GET"],
        ["SET", "{k}a", "v", "EX", "9223372036854775807"],
        ["SET", "{k}a"],
        ["GET", "{k}a"],
        ["GET", "{k}missing"],
        ["GET", "{k}a", "{k}b"],
    ],
    "set-family": [
        ["SETNX", "{k}a", "1"],
        ["SETNX", "{k}a", "2"],
        ["SETEX", "{k}b", "0", "v"],
        ["SETEX", "{k}b", "x", "v"],
        ["PSETEX", "{k}b", "-1", "v"],
        ["GETSET", "{k}a", "3"],
        ["GETSET", "{k}new", "3"],
        ["GETDEL", "{k}a"],
        ["GETDEL", "{k}a"],
        ["GETEX", "{k}new", "EX", "0"],
        ["GETEX", "{k}new", "PERSIST", "EX", "1"],
        ["GETEX", "{k}new", "FOO"],
        ["GETEX", "{k}missing", "EX", "10"],
        ["GETEX", "{k}new", "PERSIST"],
    ],
    "multi-key": [
        ["MSET", "{k}a", "1", "{k}b"],
        ["MSET", "{k}a", "1", "{k}b", "2"],
        ["MGET", "{k}a", "{k}missing", "{k}b"],
        ["MSETNX", "{k}a", "x", "{k}c", "3"],
        ["MSETNX", "{k}c", "3", "{k}d", "4"],
        ["MGET", "{k}c", "{k}d"],
        ["EXISTS", "{k}a", "{k}a", "{k}zz"],
        ["DEL", "{k}a", "{k}zz", "{k}b"],
        ["UNLINK", "{k}c"],
        ["TOUCH", "{k}d", "{k}zz"],
        ["TYPE", "{k}d"],
        ["TYPE", "{k}zz"],
    ],
    "hex-floats": [
        ["ZADD", "{k}z", "0x1p3", "a", "-0X.8", "b", "0x1.", "c", "0x1p-1074", "d"],
        ["ZADD", "{k}z", "0x", "e"],
        ["ZADD", "{k}z", "0x1p", "e"],
        ["ZADD", "{k}z", "0x1p1024", "e"],
        ["ZADD", "{k}z", "0x1p-1080", "e"],
        ["ZINCRBY", "{k}z", "0x1.8p1", "a"],
        ["ZRANGE", "{k}z", "0", "-1", "WITHSCORES"],
        ["ZRANGEBYSCORE", "{k}z", "(0x0", "0x10"],
        ["ZCOUNT", "{k}z", "0x", "0x1p"],
        ["ZUNION", "1", "{k}z", "WEIGHTS", "0x2", "WITHSCORES"],
        ["BLPOP", "{k}empty", "0x1p-8"],
        ["RPUSH", "{k}l", "0x10", "2", "1e1", "0x1.8"],
        ["SORT", "{k}l"],
        ["RPUSH", "{k}l", "0xz"],
        ["SORT", "{k}l"],
    ],
    "counters": [
        ["INCR", "{k}n"],
        ["INCRBY", "{k}n", "-10"],
        ["DECR", "{k}n"],
        ["DECRBY", "{k}n", "9223372036854775807"],
        ["DECRBY", "{k}n", "-9223372036854775808"],
        ["INCRBY", "{k}n", "abc"],
        ["INCRBY", "{k}n", "1.0"],
        ["SET", "{k}big", "9223372036854775807"],
        ["INCR", "{k}big"],
        ["SET", "{k}s", "12abc"],
        ["INCR", "{k}s"],
        ["SET", "{k}sp", " 12"],
        ["INCR", "{k}sp"],
        ["SET", "{k}f", "10.5"],
        ["INCRBYFLOAT", "{k}f", "0.1"],
        ["INCRBYFLOAT", "{k}f", "-10.6"],
        ["INCRBYFLOAT", "{k}f", "1e3"],
        ["INCRBYFLOAT", "{k}f", "5.0e3"],
        ["INCRBYFLOAT", "{k}f", "abc"],
        ["INCRBYFLOAT", "{k}f", "inf"],
        ["INCRBYFLOAT", "{k}f", "nan"],
        ["INCRBYFLOAT", "{k}s", "1"],
        ["SET", "{k}g", "3.0e3"],
        ["INCRBYFLOAT", "{k}g", "200"],
        ["INCRBYFLOAT", "{k}new", "1.5"],
        ["GET", "{k}new"],
    ],
    "ranges": [
        ["APPEND", "{k}s", "Hello"],
        ["APPEND", "{k}s", " World"],
        ["STRLEN", "{k}s"],
        ["STRLEN", "{k}missing"],
        ["GETRANGE", "{k}s", "0", "4"],
        ["GETRANGE", "{k}s", "-5", "-1"],
        ["GETRANGE", "{k}s", "5", "3"],
        ["GETRANGE", "{k}s", "-100", "100"],
        ["GETRANGE", "{k}s", "0", "-100"],
        ["GETRANGE", "{k}s", "a", "1"],
        ["GETRANGE", "{k}missing", "0", "-1"],
        ["SETRANGE", "{k}s", "6", "Redis"],
        ["SETRANGE", "{k}s", "-1", "x"],
        ["SETRANGE", "{k}s", "536870912", "x"],
        ["SETRANGE", "{k}pad", "3", "x"],
        ["GET", "{k}pad"],
        ["SETRANGE", "{k}none", "3", ""],
        ["EXISTS", "{k}none"],
        ["GET", "{k}s"],
        ["SUBSTR", "{k}s", "0", "4"],
    ],
    "expire": [
        ["TTL", "{k}a"],
        ["PTTL", "{k}a"],
        ["EXPIRETIME", "{k}a"],
        ["SET", "{k}a", "v"],
        ["TTL", "{k}a"],
        ["EXPIRETIME", "{k}a"],
        ["EXPIRE", "{k}a", "100", "XX"],
        ["EXPIRE", "{k}a", "100", "NX"],
        ["EXPIRE", "{k}a", "100", "NX"],
        ["EXPIRE", "{k}a", "50", "GT"],
        ["EXPIRE", "{k}a", "500", "LT"],
        ["EXPIRE", "{k}a", "10", "NX", "XX"],
        ["EXPIRE", "{k}a", "10", "GT", "LT"],
        ["EXPIRE", "{k}a", "10", "NX", "GT"],
        ["EXPIRE", "{k}a", "10", "FOO"],
        ["EXPIRE", "{k}a", "abc"],
        ["EXPIRE", "{k}a", "9223372036854775807"],
        ["PEXPIRE", "{k}a", "9223372036854775807"],
        ["EXPIREAT", "{k}a", "-9223372036854775808"],
        ["PERSIST", "{k}a"],
        ["PERSIST", "{k}a"],
        ["PERSIST", "{k}missing"],
        ["EXPIRE", "{k}missing", "10"],
        ["EXPIRE", "{k}a", "0"],
        ["EXISTS", "{k}a"],
        ["SET", "{k}b", "v"],
        ["PEXPIREAT", "{k}b", "1"],
        ["GET", "{k}b"],
    ],
    "rename-copy-move": [
        ["RENAME", "{k}missing", "{k}x"],
        ["RENAMENX", "{k}missing", "{k}x"],
        ["SET", "{k}a", "1"],
        ["SET", "{k}b", "2"],
        ["RENAMENX", "{k}a", "{k}b"],
        ["RENAME", "{k}a", "{k}a"],
        ["RENAME", "{k}a", "{k}c"],
        ["COPY", "{k}c", "{k}b"],
        ["COPY", "{k}c", "{k}b", "REPLACE"],
        ["COPY", "{k}c", "{k}c"],
        ["COPY", "{k}c", "{k}d", "DB", "16"],
        ["COPY", "{k}c", "{k}d", "DB", "x"],
        ["COPY", "{k}c", "{k}d", "FOO"],
        ["COPY", "{k}missing", "{k}d"],
        ["MOVE", "{k}c", "0"],
        ["MOVE", "{k}c", "16"],
        ["MOVE", "{k}c", "x"],
        ["MOVE", "{k}missing", "1"],
        ["MOVE", "{k}c", "1"],
        ["SELECT", "1"],
        ["GET", "{k}c"],
        ["DEL", "{k}c"],
        ["SELECT", "16"],
        ["SELECT", "-1"],
        ["SELECT", "x"],
        ["SELECT", "0"],
    ],
    "scan-keys-errors": [
        ["SCAN", "x"],
        ["SCAN", "0", "COUNT", "0"],
        ["SCAN", "0", "COUNT", "x"],
        ["SCAN", "0", "FOO"],
        ["SCAN", "0", "MATCH"],
        ["SET", "{k}one", "1"],
        ["KEYS", "{k}on?"],
    ],
    "connection": [
        ["PING"],
        ["PING", "hello"],
        ["PING", "a", "b"],
        ["ECHO", "x"],
        ["ECHO"],
        ["NOSUCHCMD", "a", "b"],
        ["nosuchcmd"],
        ["GET"],
        ["CLIENT", "GETNAME"],
        ["CLIENT", "SETNAME", "a b"],
        ["CLIENT", "SETNAME", "ok-name"],
        ["CLIENT", "GETNAME"],
        ["CLIENT", "SETNAME", ""],
        ["CLIENT", "GETNAME"],
        ["CLIENT", "NOSUCH"],
        ["CONFIG", "GET", "maxclients"],
        ["CONFIG", "GET", "no-such-parameter"],
        ["CONFIG", "SET", "no-such-parameter", "1"],
        ["CONFIG", "SET", "maxclients"],
        ["HELLO", "4"],
        ["HELLO", "x"],
    ],
    # Without a cluster or replicas (WAIT's blocking is in crates/server/tests/cluster.rs).
    "cluster-replication": [
        ["WAIT", "0", "0"],
        ["WAIT", "-5", "0"],
        ["WAIT", "1", "10"],
        ["WAIT", "x", "0"],
        ["WAIT", "1", "x"],
        ["WAIT", "1", "-1"],
        ["WAIT", "1"],
        ["READONLY"],
        ["READWRITE"],
        ["ASKING"],
        ["READONLY", "x"],
        ["LOLWUT"],
        ["LOLWUT", "VERSION", "7"],
        ["LOLWUT", "VERSION", "x"],
        ["LOLWUT", "VERSION", "5", "x"],
        # (DUMP's, MIGRATE's and WAIT's entries differ by their tips, which Larder leaves out.)
        ["COMMAND", "INFO", "restore", "restore-asking", "readonly", "readwrite", "asking", "lolwut"],
        ["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "AUTH", "keys", "KEYS", "a", "b"],
    ],
    # DUMP payloads of strings are byte for byte Redis's (no compression under 21 bytes).
    "dump-restore": [
        ["SET", "{k}s", "hello"],
        ["DUMP", "{k}s"],
        ["SET", "{k}i", "-12345"],
        ["DUMP", "{k}i"],
        ["DUMP", "{k}missing"],
        ["RESTORE", "{k}s", "0", "x"],
        ["RESTORE", "{k}n", "0", "x"],
        ["RESTORE", "{k}n", "-1", "x"],
        ["RESTORE", "{k}n", "x", "x"],
        ["RESTORE", "{k}n", "0", "x", "REPLACE", "FOO"],
        ["RESTORE", "{k}n", "0", "x", "IDLETIME", "-1"],
        ["RESTORE", "{k}n", "0", "x", "FREQ", "300"],
        ["MIGRATE", "127.0.0.1", "1", "{k}s", "0", "10", "KEYS", "a"],
        ["MIGRATE", "127.0.0.1", "1", "", "0", "10", "KEYS", "{k}missing"],
        ["MIGRATE", "127.0.0.1", "1", "{k}s", "0", "x"],
        ["MIGRATE", "127.0.0.1", "1", "{k}s", "0", "10", "AUTH2", "u"],
    ],
}

# Raw requests whose replies end in a protocol error and a closed connection (or not).
RESP_RAW = {
    "inline": b"PING\r\nECHO hi\r\nSET {k}i \"a b\"\r\nGET {k}i\r\n",
    "inline-unbalanced-quotes": b"SET {k}i \"a b\r\n",
    "bad-multibulk-length": b"*abc\r\n",
    "bad-bulk-length": b"*1\r\n$abc\r\n",
    "bulk-not-bulk": b"*1\r\n+PING\r\n",
    "empty-lines": b"\r\n\r\nPING\r\n",
    "zero-multibulk": b"*0\r\n*-1\r\nPING\r\n",
}


def run_resp_case(port, proto, cmds, ns):
    c = Conn(port)
    try:
        if proto == 3:
            c.resp(resp_command("HELLO", "3"))
        out = []
        for cmd in cmds:
            args = [a.replace("{k}", ns) for a in cmd]
            out.append((cmd, c.resp(resp_command(*args))[0]))
        return out
    finally:
        c.close()


def run_resp_raw(port, proto, data, ns):
    c = Conn(port)
    try:
        if proto == 3:
            c.resp(resp_command("HELLO", "3"))
        got = c.until_idle(data.replace(b"{k}", ns.encode()))
        if not got.endswith(b"<closed>") and c.closed():
            got += b"<closed>"
        return got
    finally:
        c.close()


need_ref_resp = pytest.mark.skipif(not REF_RESP, reason="LARDER_REF_RESP_PORT not set (no reference redis-server)")
need_ref_mc = pytest.mark.skipif(not REF_MC, reason="LARDER_REF_MC_PORT not set (no reference memcached)")


@need_ref_resp
@pytest.mark.parametrize("name", sorted(RESP_CASES))
def test_resp_same_replies(name, proto):
    ns = f"ref:{uuid.uuid4().hex[:8]}:"
    ours = run_resp_case(_port("LARDER_RESP_PORT"), proto, RESP_CASES[name], ns)
    theirs = run_resp_case(int(REF_RESP), proto, RESP_CASES[name], ns)
    diffs = [f"{cmd}: larder {a!r} redis {b!r}" for (cmd, a), (_, b) in zip(ours, theirs) if a != b]
    assert not diffs, "\n".join(diffs)


@need_ref_resp
@pytest.mark.parametrize("name", sorted(RESP_RAW))
def test_resp_same_raw_replies(name, proto):
    ns = f"ref:{uuid.uuid4().hex[:8]}:"
    ours = run_resp_raw(_port("LARDER_RESP_PORT"), proto, RESP_RAW[name], ns)
    theirs = run_resp_raw(int(REF_RESP), proto, RESP_RAW[name], ns)
    assert ours == theirs


# MONITOR: what one connection runs, as another connection in MONITOR mode sees it. The
# lines are compared with the time and the client's address taken out.
MONITOR_STEPS = [
    ["SET", "{k}a", b'v "q" \\ \r\n\t\x07\x08\x00\x7f\xff \xc3\xa9'],
    ["GET", "{k}a"],
    ["LPUSH", "{k}a", "x"],
    ["NOSUCH", "x"],
    ["GET"],
    ["SELECT", "1"],
    ["EXISTS", "{k}a"],
    ["SELECT", "0"],
    ["CONFIG", "GET", "maxclients"],
    ["CLIENT", "LIST"],
    ["SLOWLOG", "LEN"],
    ["CLIENT", "ID"],
    ["CLIENT", "SETNAME", "{k}n"],
    ["MULTI"],
    ["SET", "{k}b", "1"],
    ["INCR", "{k}b"],
    ["EXEC"],
    ["MULTI"],
    ["NOSUCH"],
    ["EXEC"],
    ["MULTI"],
    ["EXEC", "x"],
    ["MULTI"],
    ["MONITOR"],
    ["EXEC"],
    ["AUTH", "p"],
    ["AUTH", "u", "p"],
    ["AUTH", "a", "b", "c"],
    ["HELLO", "2", "AUTH", "default", "p", "SETNAME", "nn", "AUTH", "bad", "p", "AUTH", "x", "y"],
    ["HELLO", "2", "SETNAME", "bad name", "AUTH", "x", "y"],
    ["HELLO", "9", "AUTH", "a", "b"],
    ["PING"],
    ["ECHO", ""],
    ["ECHO", "{k}end"],
]


def monitor_lines(port, proto, ns):
    """Runs MONITOR_STEPS on one connection while another monitors; returns the lines about
    the first connection, up to its last ECHO, time and address replaced."""
    mon, c = Conn(port), Conn(port)
    try:
        if proto == 3:
            c.resp(resp_command("HELLO", "3"))
        info = c.resp(resp_command("CLIENT", "INFO"))[0]
        addr = re.search(rb"addr=(\S+)", info).group(1)
        assert mon.resp(resp_command("MONITOR")) == [b"+OK\r\n"]
        for step in MONITOR_STEPS:
            args = [a.replace("{k}", ns) if isinstance(a, str) else a for a in step]
            c.resp(resp_command(*args))
        lines = []
        while not lines or ns.encode() + b"end" not in lines[-1]:
            line = mon.read_replies(1)[0]
            assert line != b"<closed>"
            if b" " + addr + b"] " in line:
                lines.append(re.sub(rb"^\+\d+\.\d{6} \[(\d+) [^\]]+\]", rb"+T [\1 ADDR]", line))
        return lines
    finally:
        mon.close()
        c.close()


@need_ref_resp
def test_monitor_same_lines(proto):
    ns = f"ref:{uuid.uuid4().hex[:8]}:"
    ours = monitor_lines(_port("LARDER_RESP_PORT"), proto, ns)
    theirs = monitor_lines(int(REF_RESP), proto, ns)
    assert ours == theirs


# memcached: each step is raw bytes; the reply is what comes back until the line goes quiet.
MC_CASES = {
    "storage": [
        b"set {k}a 5 0 3\r\nabc\r\n",
        b"get {k}a\r\n",
        b"add {k}a 0 0 1\r\nx\r\n",
        b"replace {k}b 0 0 1\r\nx\r\n",
        b"append {k}a 0 0 2\r\nde\r\n",
        b"prepend {k}a 9 0 2\r\nzz\r\n",
        b"get {k}a {k}b {k}a\r\n",
        b"set {k}e 0 0 0\r\n\r\n",
        b"get {k}e\r\n",
        b"set {k}n 0 0 1 noreply\r\n1\r\nget {k}n\r\n",
        b"cas {k}a 0 0 1 999999999\r\nx\r\n",
        b"cas {k}missing 0 0 1 1\r\nx\r\n",
    ],
    "arithmetic": [
        b"incr {k}missing 1\r\n",
        b"set {k}n 0 0 2\r\n10\r\n",
        b"incr {k}n 5\r\n",
        b"decr {k}n 100\r\n",
        b"incr {k}n abc\r\n",
        b"incr {k}n -1\r\n",
        b"incr {k}n 18446744073709551616\r\n",
        b"set {k}w 0 0 20\r\n18446744073709551615\r\n",
        b"incr {k}w 1\r\n",
        b"set {k}s 0 0 3\r\nabc\r\n",
        b"incr {k}s 1\r\n",
        b"decr {k}s 1\r\n",
        b"incr {k}n\r\n",
    ],
    # do_add_delta writes a shorter result in place, padded with spaces (which get returns),
    # and reads item data with safe_strtoull (leading space, sign, junk after a space or NUL).
    "arithmetic-padding": [
        b"set {k}k 5 0 4\r\n1000\r\n",
        b"decr {k}k 1\r\n",
        b"get {k}k\r\n",
        b"incr {k}k 1\r\n",
        b"decr {k}k 996\r\n",
        b"get {k}k\r\n",
        b"set {k}e 0 0 3\r\n99 \r\n",
        b"incr {k}e 1\r\n",
        b"incr {k}e 900\r\n",
        b"get {k}e\r\n",
        b"set {k}a 0 0 6\r\n 5 abc\r\nincr {k}a 1\r\nget {k}a\r\n",
        b"set {k}b 0 0 3\r\n+5\t\r\nincr {k}b 10\r\nget {k}b\r\n",
        b"set {k}z 0 0 5\r\n5\x00xyz\r\nincr {k}z 1\r\nget {k}z\r\n",
        b"set {k}d 0 0 2\r\n-0\r\nincr {k}d 1\r\n",
        b"set {k}w 0 0 21\r\n-18446744073709551615\r\nincr {k}w 1\r\n",
        b"set {k}x 0 0 22\r\n18446744073709551615 -\r\nincr {k}x 0\r\n",
        b"set {k}x 0 0 2\r\n\x005\r\nincr {k}x 0\r\n",
        b"set {k}m 5 0 4\r\n1000\r\nma {k}m MD v\r\nget {k}m\r\n",
        b"ma {k}m v D5\r\nget {k}m\r\n",
    ],
    # safe_strtoul/safe_strtol parse into a 64-bit long and store into 32 bits: out-of-range
    # flags, exptimes and lengths are truncated, not refused; past 64 bits (ERANGE), or a
    # negative unsigned number, is an error.
    "number-truncation": [
        b"set {k}a 4294967297 0 1\r\na\r\nget {k}a\r\n",
        b"set {k}a 18446744073709551615 0 1\r\na\r\nget {k}a\r\n",
        b"set {k}a -9223372036854775809 0 1\r\na\r\nget {k}a\r\n",
        b"set {k}a -18446744073709551615 0 1\r\na\r\nget {k}a\r\n",
        b"set {k}a 9223372036854775808 0 1\r\na\r\nget {k}a\r\n",
        b"set {k}a -1 0 1\r\na\r\n",
        b"set {k}a -4294967295 0 1\r\na\r\n",
        b"set {k}a 18446744073709551616 0 1\r\na\r\n",
        b"set {k}b 1 4294967296 1\r\nb\r\nget {k}b\r\n",
        b"set {k}b 1 4294967295 1\r\nb\r\nget {k}b\r\n",
        b"set {k}b 1 2147483648 1\r\nb\r\nget {k}b\r\n",
        b"set {k}b 1 -2147483649 1\r\nb\r\nget {k}b\r\n",
        b"set {k}b 1 9223372036854775808 1\r\nb\r\n",
        b"set {k}b 1 4294967396 1\r\nb\r\nmg {k}b t\r\n",
        b"set {k}c 1 0 4294967298\r\nab\r\nget {k}c\r\n",
        b"set {k}c 1 0 -4294967294\r\ncd\r\nget {k}c\r\n",
        b"set {k}c 1 0 4294967295\r\nab\r\n",
        b"set {k}c 1 0 2147483648\r\nab\r\n",
        b"touch {k}c 4294967296\r\nmg {k}c t\r\n",
        b"touch {k}c 4294967396\r\nmg {k}c t\r\n",
        b"gat 4294967296 {k}c\r\nmg {k}c t\r\n",
        b"verbosity 4294967296\r\nverbosity -1\r\n",
        b"ms {k}d 2 F4294967297\r\nab\r\nmg {k}d f v\r\n",
        b"ms {k}d 2 F-1\r\nab\r\n",
        b"ms {k}d 2 T4294967296\r\nab\r\nmg {k}d t v\r\n",
        b"ms {k}d 4294967298 T0\r\nxy\r\nmg {k}d t v\r\n",
        b"ms {k}d 2 T-9223372036854775809\r\nab\r\n",
        b"mg {k}d T4294967396 t\r\nmg {k}d N4294967396 t\r\nmg {k}d R4294967396 t\r\n",
        b"set {k}n 0 0 1\r\n5\r\nincr {k}n  5\r\nincr {k}n \t5\r\nincr {k}n \x0b+5\r\nincr {k}n 5\tx\r\n",
        b"incr {k}n 18446744073709551615\t-\r\nincr {k}n -18446744073709551615\r\n",
        b"set {k}e 1\t- 0 1\r\ne\r\nget {k}e\r\n",
        b"flush_all 4294967296\r\nget {k}e\r\n",
        b"flush_all -4294967296\r\n",
        b"stats cachedump 1\r\nstats cachedump x 1\r\nstats cachedump 64 1\r\nstats cachedump 4294967360 1\r\n",
        b"stats cachedump 1 -1\r\n",
    ],
    # The recache token goes to the reader that vivified the item or qualified for it, even
    # when that read's N or T TTL has already expired the item.
    "meta-token-expired-item": [
        b"mg {k}v N-1 s\r\n",
        b"mg {k}v N2592001 s\r\n",
        b"mg {k}v\r\n",
        b"set {k}r 0 0 1\r\nx\r\n",
        b"mg {k}r T-1 R30 s\r\n",
        b"mg {k}r\r\n",
        # R compares whole seconds: an expired item is not under a threshold in the past.
        b"set {k}q 0 0 1\r\nx\r\n",
        b"mg {k}q T-1 R2592001 s\r\n",
    ],
    # ms I stores a CAS older than the item's as stale, but C0 is no CAS: EX.
    "meta-set-stale-cas-zero": [
        b"set {k}a 0 0 1\r\nx\r\n",
        b"ms {k}a 1 I C0\r\ny\r\n",
        b"ms {k}a 1 I C0 q\r\ny\r\nmn\r\n",
        b"ms {k}a 1 MR I C0\r\ny\r\n",
        b"mg {k}a v\r\n",
    ],
    # incr/decr/ma write a result that fits in place, keeping the item's stale and token
    # marks; a longer result is a new item.
    "meta-stale-counter": [
        b"set {k}c 0 0 2\r\n10\r\nmd {k}c I\r\n",
        b"incr {k}c 1\r\nmg {k}c v\r\n",
        b"ma {k}c MD v\r\nmg {k}c v\r\n",
        b"decr {k}c 1\r\nmg {k}c v\r\n",
        b"incr {k}c 91\r\nmg {k}c v\r\n",
        b"md {k}c I\r\nma {k}c D900 v\r\nmg {k}c v\r\n",
    ],
    "delete-touch": [
        b"delete {k}missing\r\n",
        b"set {k}a 0 0 1\r\nx\r\n",
        b"delete {k}a 0\r\n",
        b"set {k}a 0 0 1\r\nx\r\n",
        b"delete {k}a 5\r\n",
        b"delete {k}a\r\n",
        b"touch {k}missing 10\r\n",
        b"set {k}b 0 0 1\r\nx\r\n",
        b"touch {k}b 10\r\n",
        b"touch {k}b\r\n",
    ],
    "errors": [
        b"nosuchcommand\r\n",
        b"get\r\n",
        b"set {k}a 0 0\r\n",
        b"set {k}a abc 0 1\r\n",
        b"set {k}a 0 0 -1\r\n",
        b"set " + b"x" * 251 + b" 0 0 1\r\nx\r\n",
        b"get " + b"x" * 251 + b"\r\n",
        b"set {k}a 0 0 1\r\nxyz\r\n",
        b"verbosity\r\n",
        b"verbosity 1\r\n",
        b"flush_all noreply\r\nget {k}a\r\n",
    ],
}


# The {k} prefix is "ref:" + 8 hex digits + ":" (see test_memcache_same_replies).
MC_NS_LEN = 13


def mc_sized(line, n):
    """`line` with {n} standing for n, then n bytes of data."""
    return line.replace("{n}", str(n)).encode() + b"\r\n" + b"v" * n + b"\r\n"


def mc_value_max(key, flags=0):
    """The largest value memcached 1.6.18 stores under its defaults (-I 1m, CAS on): the
    item counts a 48-byte header, the 8-byte CAS, the key and a NUL, 4 bytes of flags
    unless they are 0, and the value with its \\r\\n."""
    return 1024 * 1024 - 48 - 8 - (MC_NS_LEN + len(key) + 1) - (4 if flags else 0) - 2


_A, _B = mc_value_max("a"), mc_value_max("b", flags=1)
# Over the limit: SERVER_ERROR object too large for cache, the data swallowed, and for set
# and ms the old value dropped; an append past it is NOT_STORED.
MC_CASES["item-size-limit"] = [
    mc_sized("set {k}a 0 0 {n}", _A),
    b"mg {k}a s\r\n",
    mc_sized("set {k}a 0 0 {n}", _A + 1),
    b"mg {k}a s\r\n",
    mc_sized("set {k}b 1 0 {n}", _B),
    mc_sized("set {k}b 1 0 {n}", _B + 1),
    mc_sized("add {k}b 0 0 {n}", _A + 1),
    mc_sized("replace {k}b 0 0 {n}", _A + 1),
    mc_sized("cas {k}b 0 0 {n} 1", _A + 1),
    mc_sized("append {k}b 0 0 {n} noreply", _A + 1) + b"mg {k}b s\r\n",
    b"append {k}b 0 0 1\r\nx\r\nprepend {k}b 0 0 1\r\nx\r\n",
    mc_sized("set {k}b 0 0 {n} noreply", _A + 1) + b"mg {k}b s\r\n",
    mc_sized("ms {k}a {n}", _A),
    mc_sized("ms {k}a {n} F1", _A),
    b"mg {k}a s\r\n",
    mc_sized("ms {k}a {n} F1 q", _B),
    mc_sized("ms {k}a {n} MA", 1),
    mc_sized("set {k}a 0 0 {n}", _A) + b"mg {k}a s\r\n",
    mc_sized("ms {k}a {n} ME", _A + 1),
    b"mg {k}a s\r\n",
    mc_sized("set {k}a 0 0 {n}", _A + 1)[:-2] + b"XXmn\r\n",
]


def run_mc_case(port, steps, ns):
    c = Conn(port)
    try:
        return [(s, c.until_idle(s.replace(b"{k}", ns.encode()))) for s in steps]
    finally:
        c.close()


@need_ref_mc
@pytest.mark.parametrize("name", sorted(MC_CASES))
def test_memcache_same_replies(name):
    ns = f"ref:{uuid.uuid4().hex[:8]}:"
    ours = run_mc_case(_port("LARDER_MC_PORT"), MC_CASES[name], ns)
    theirs = run_mc_case(int(REF_MC), MC_CASES[name], ns)
    diffs = [f"{s[:100]!r}: larder {a!r} memcached {b!r}" for (s, a), (_, b) in zip(ours, theirs) if a != b]
    assert not diffs, "\n".join(diffs)


def mc_filler(ns, name, upto):
    """A noreply set of {ns}{name} whose bytes end exactly at offset `upto`."""
    head = f"set {ns}{name} 0 0 ".encode()
    for n in range(upto):
        line = head + str(n).encode() + b" noreply\r\n"
        if len(line) + n + 2 == upto:
            return line + b"f" * n + b"\r\n"
    raise AssertionError("no filler fits")


def mc_long_line_cases(ns):
    """Long lines, each sent in one write on a connection of its own. memcached reads into a
    16 KiB buffer and closes a connection whose buffer holds more than 2 KiB of a line
    without its newline, unless the line is a get/gets (try_read_command_ascii): so a line
    over 16 KiB closes it, a shorter one is answered unless it straddles the end of a full
    buffer with more than 2 KiB of it inside."""
    k = ns.encode()
    keys = b" ".join(k + b"key%d" % i for i in range(1500))
    missing = b" ".join(k + b"nokey%d" % i for i in range(1500))
    return {
        "3k-junk": b"x" * 3000 + b"\r\nmn\r\n",
        "16k-junk": b"x" * 16382 + b"\r\nmn\r\n",
        "16k+1-junk": b"x" * 16383 + b"\r\nmn\r\n",
        "20k-key-get": b"get " + b"k" * 20000 + b"\r\nmn\r\n",
        "20k-key-set": b"set " + b"k" * 20000 + b" 0 0 1\r\na\r\nmn\r\n",
        "20k-multiget": b"set " + k + b"key7 0 0 1\r\n7\r\nget " + keys + b"\r\nmn\r\n",
        "20k-multigets": b"gets " + missing + b"\r\nmn\r\n",
        "100-spaces-get": b" " * 100 + b"get " + keys + b"\r\nmn\r\n",
        "101-spaces-get": b" " * 101 + b"get " + keys + b"\r\nmn\r\n",
        "20k-gat": b"gat 0 " + keys + b"\r\nmn\r\n",
        "20k-get-tab": b"get\t" + keys + b"\r\nmn\r\n",
        # A 3 KB line that starts 2.5 KB before the end of the first 16 KiB read: closed.
        "straddle": mc_filler(ns, "f1", 16384 - 2500) + b"y" * 3000 + b"\r\nmn\r\n",
        # Starting 1 KB before it: memcached moves it to the front, reads on, answers.
        "straddle-short": mc_filler(ns, "f2", 16384 - 1000) + b"y" * 3000 + b"\r\nmn\r\n",
        # A data block read past the buffer: the next read starts after it.
        "past-data": b"set " + k + b"d 0 0 20000\r\n" + b"d" * 20000 + b"\r\n" + b"y" * 3000 + b"\r\nmn\r\n",
        "then": b"mg " + k + b"f1 s\r\nmg " + k + b"f2 s\r\nmg " + k + b"d s\r\n",
    }


def run_mc_long_lines(port, ns):
    out = {}
    for name, data in mc_long_line_cases(ns).items():
        c = Conn(port)
        try:
            got = c.until_idle(data)
            if not got.endswith(b"<closed>") and c.closed():
                got += b"<closed>"
            out[name] = got
        finally:
            c.close()
    return out


@need_ref_mc
def test_memcache_long_lines_as_memcached():
    ns = f"ref:{uuid.uuid4().hex[:8]}:"
    ours = run_mc_long_lines(_port("LARDER_MC_PORT"), ns)
    theirs = run_mc_long_lines(int(REF_MC), ns)
    diffs = [f"{name}: larder {ours[name][:200]!r} memcached {theirs[name][:200]!r}" for name in ours if ours[name] != theirs[name]]
    assert not diffs, "\n".join(diffs)
