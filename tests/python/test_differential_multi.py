"""Differential test, several connections: scripted and seeded-random scenarios of steps
"connection i sends command C" run against Larder and a real redis-server 7.0, and what every
connection received after each step compared frame by frame (raw RESP bytes).

This covers what the single-connection test (test_differential_resp.py) cannot: blocking
commands served by other clients (FIFO order, chains, timeouts, CLIENT UNBLOCK), pub/sub
(deliveries, counts, the subscribed context of RESP2, RESP3 pushes), client-side caching
(invalidations, BCAST, redirects), MULTI/EXEC/WATCH against
other clients' writes, and CLIENT commands that act on other connections (KILL, UNBLOCK).

Runs when LARDER_REF_RESP_PORT names a redis-server 7 (scripts/test.sh starts one). Each
scenario opens CONNS connections to each server (and a control connection), in databases
DB_A/DB_B of its own, flushed first; channel names start with "dm:". The random scenarios
use fixed seeds (LARDER_DIFF_SEEDS runs others: see conftest.diff_seeds). A failure names
the scenario (and seed), the step, the connection, the command and both servers' frames,
with the steps before it.

How a step is judged (robust on a loaded machine):
- the step's command is sent on connection i of both servers;
- Redis is the oracle for *how many* frames each connection gets. Redis runs one event loop:
  a PING on the control connection answered after the step's command was read means the
  command ran, and a second PING answered after that means the writes of that loop
  iteration (replies, served blocked clients, published messages) are all in our sockets;
  so what Redis's connections hold then is everything the step produces. Where a step waits
  for time to pass (a blocking timeout) it names a connection and waits until Redis has
  answered it (at most REPLY_TIMEOUT).
- if Redis gave the sender nothing (it blocked, or its replies are off), Larder may not have
  run the command yet, and the next step's command (on another connection) could overtake
  it; so the control connection polls Larder's CLIENT LIST for the sender until it is in the
  state Redis's is in (blocked or not, the same cmd=), at most SYNC_TIMEOUT;
- then each Larder connection is read until it has as many frames as Redis's (at most
  REPLY_TIMEOUT, generous for a loaded 2-core CI machine: a reply that should come but does
  not is a failure), and then for SETTLE more: a connection that Redis left blocked (or
  silent) must stay so. A frame Larder sends later than SETTLE is still caught, at the next
  step (reported there, with a note) or in the check at the end of the scenario (END_SETTLE);
- a closed connection is the frame "<closed>"; a connection closed on both servers is
  reopened (SELECT DB_A, and its id is read again).

What is compared, and what is not (and why):
- every frame byte for byte, except:
  - client ids (CLIENT ID, HELLO's `id`) differ by design: CLIENT ID only as an integer, and
    `{id:j}` / `{addr:j}` in a command stand for connection j's id / address on each server;
  - HELLO: not the version either (Larder says 7.0.15; the reference may be another 7.0.x);
  - CLIENT INFO / CLIENT LIST: only the fields whose values are deterministic here (name,
    db, sub, psub, ssub, multi, flags, cmd, user, resp), and every Redis 7.0 field must be
    there; Larder also has 7.2's lib-name and lib-ver after them (accepted: harmless extras);
  - PUBSUB CHANNELS / SHARDCHANNELS: as sorted lists (Redis lists its hash table);
  - a PUBLISH matching several patterns: Redis walks its pattern hash table, so a run of
    pmessage frames for one message is compared sorted;
  - UNSUBSCRIBE / SUNSUBSCRIBE without arguments: Redis walks the client's channel hash
    table, so a run of unsubscribe frames is compared as the channel names sorted and the
    counts in order (PUNSUBSCRIBE's order is Redis's list of patterns: compared as is);
- not sent: CLIENT LIST without ID (other clients of the server show), INFO, DEBUG.
- accepted differences, left out of the scenarios:
  - QUIT under CLIENT REPLY OFF or SKIP: Redis adds no reply, so the client never reaches its
    write handler and the connection stays open (an artifact of CLOSE_AFTER_REPLY); Larder
    closes it;
  - commands queued behind two blocked clients that one write releases: Redis runs the first
    client's queue, then the second's; Larder's worker threads may interleave them. Redis
    does not promise a pipeline runs uninterrupted either;
  - CLIENT KILL MAXAGE: Larder has it (Redis 7.4's filter); 7.0 says syntax error;
  - CLIENT LIST qbuf= of a blocked client that sent more: Redis reads it into its query
    buffer, Larder leaves it in the socket until the client is unblocked (qbuf=0).
- FLUSHALL is sent (one scenario): it empties every database of both servers; no test keeps
  data across tests (conftest.py: keys are namespaced per test).
- random scenarios block with timeout 0 or 30 s only (never firing), so no timeout races a
  push; timeouts are in the scripted scenarios, with nothing else happening meanwhile.
"""

import os
import random
import socket
import time

import pytest

from conftest import HOST, _port, diff_seeds
from test_differential_resp import tree
from test_reference import resp_command, resp_reply_end

REF_RESP = os.environ.get("LARDER_REF_RESP_PORT")

CONNS = 4
DB_A, DB_B = 10, 11  # this test's databases (others use 1, 9, 12, 13)
REPLY_TIMEOUT = 10.0  # a frame Redis sent must reach us from Larder within this (loaded CI)
SYNC_TIMEOUT = 3.0  # at most this for Larder to reach the state Redis's silent sender is in
SETTLE = 0.005  # after a step: how long Larder gets to show a frame Redis did not send (see above)
END_SETTLE = 0.05  # the same, once at the end of each scenario
SEEDS = diff_seeds(default=3)
RANDOM_STEPS = int(os.environ.get("LARDER_DIFF_MULTI_STEPS", "100"))
RECENT = 14

pytestmark = pytest.mark.skipif(not REF_RESP, reason="LARDER_REF_RESP_PORT not set (no reference redis-server)")


class Mismatch(AssertionError):
    pass


# ---------------------------------------------------------------------------------------------
# Connections


class Client:
    """One connection: bytes in, complete frames out (b"<closed>" once at EOF)."""

    def __init__(self, port):
        self.s = socket.create_connection((HOST, port), timeout=REPLY_TIMEOUT)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.frames = []
        self.closed = False
        self.id = None
        self.addr = "%s:%d" % self.s.getsockname()[:2]

    def send(self, data):
        if not self.closed:
            try:
                self.s.sendall(data)
            except OSError:
                self._eof()

    def _eof(self):
        if not self.closed:
            self.closed = True
            self.frames.append(b"<closed>")

    def _split(self):
        while True:
            end = resp_reply_end(self.buf)
            if end is None:
                return
            self.frames.append(self.buf[:end])
            self.buf = self.buf[end:]

    def pump(self, timeout):
        """Reads what is there, waiting at most `timeout` for the first bytes."""
        if self.closed:
            return
        self.s.settimeout(timeout if timeout > 0 else 0.0)
        try:
            data = self.s.recv(65536)
        except (socket.timeout, BlockingIOError):
            return
        except OSError:
            data = b""
        if not data:
            self._eof()
            return
        self.buf += data
        self._split()
        self.s.settimeout(0.0)
        while True:  # whatever else is already there
            try:
                data = self.s.recv(65536)
            except (BlockingIOError, socket.timeout):
                break
            except OSError:
                data = b""
            if not data:
                self._eof()
                break
            self.buf += data
            self._split()

    def wait_frames(self, n, timeout):
        deadline = time.monotonic() + timeout
        while len(self.frames) < n and not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self.pump(min(left, 0.5))
        return len(self.frames) >= n

    def take(self):
        out, self.frames = self.frames, []
        return out

    def call(self, *cmd):
        """A request and its one reply (setup, outside the comparison)."""
        self.send(resp_command(*cmd))
        self.wait_frames(1, REPLY_TIMEOUT)
        assert self.frames, f"no reply to {cmd!r}"
        return self.frames.pop(0)

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


class Side:
    """The connections to one server."""

    def __init__(self, name, port):
        self.name, self.port = name, port
        self.control = Client(port)
        self.conns = [None] * CONNS

    def open(self, j):
        if self.conns[j] is not None:
            self.conns[j].close()
        c = Client(self.port)
        reply = c.call("CLIENT", "ID")
        c.id = int(tree(reply)[1])
        assert c.call("SELECT", DB_A) == b"+OK\r\n"
        self.conns[j] = c

    def reset_dbs(self):
        for db in (DB_B, DB_A):
            assert self.control.call("SELECT", db) == b"+OK\r\n"
            assert self.control.call("FLUSHDB") == b"+OK\r\n"

    def barrier(self):
        """Redis only: two PINGs one after the other on the control connection (see the module
        docstring: after the second, everything the step wrote is in our sockets)."""
        for _ in range(2):
            assert self.control.call("PING") == b"+PONG\r\n"

    def render(self, arg):
        if isinstance(arg, str) and arg.startswith("{") and arg.endswith("}"):
            what, _, j = arg[1:-1].partition(":")
            c = self.conns[int(j)]
            if what == "id":
                return str(c.id)
            if what == "addr":
                return c.addr
        return arg

    def close(self):
        for c in self.conns + [self.control]:
            if c is not None:
                c.close()


# ---------------------------------------------------------------------------------------------
# Normalising frames (see the module docstring for each case)


def bulk_text(node):
    if node is None or node[0] not in (b"$", b"=", b"+"):
        return None
    v = node[1]
    if node[0] == b"=" and v is not None and v[3:4] == b":":
        v = v[4:]  # verbatim: "txt:" prefix
    return v


CLIENT_FIELDS = ["name", "db", "sub", "psub", "ssub", "multi", "flags", "cmd", "user", "resp"]
REDIS70_FIELDS = ("id addr laddr fd name age idle flags db sub psub ssub multi qbuf qbuf-free argv-mem multi-mem rbs "
                  "rbp obl oll omem tot-mem events cmd user redir resp").split()


def client_lines(text):
    out = []
    for line in text.decode(errors="replace").strip("\n").split("\n"):
        fields = dict(f.split("=", 1) for f in line.split(" ") if "=" in f)
        missing = [f for f in REDIS70_FIELDS if f not in fields]
        out.append(("missing", missing) if missing else tuple((f, fields.get(f)) for f in CLIENT_FIELDS))
    return out


def norm_node(node):
    """A parsed frame in a form where accepted differences vanish (also inside EXEC's array)."""
    kind, value = node
    if isinstance(value, list) and len(value) >= 2 and value[0] == (b"$", b"server"):
        # HELLO: neither the version nor the id
        items = list(value)
        for i in range(0, len(items) - 1, 2):
            if items[i][1] in (b"version", b"id"):
                items[i + 1] = (b"?", b"")
        return ("hello", kind, items)
    if isinstance(value, list):
        return (kind, [norm_node(x) for x in value])
    text = bulk_text(node)
    if text is not None and text.startswith(b"id="):
        return ("client-info", kind, client_lines(text))
    return node


def norm_frame(raw):
    return raw if raw == b"<closed>" else norm_node(tree(raw))


def push_word(node):
    if node is None or node[0] not in (b"*", b">") or not isinstance(node[1], list) or not node[1]:
        return None
    first = node[1][0]
    return first[1] if first[0] == b"$" else None


def norm_runs(frames):
    """Hash-table orders of Redis: runs of pmessage frames for one message, and of unsubscribe
    frames, are put in a canonical order."""
    nodes = [norm_frame(f) for f in frames]
    out, i = [], 0
    while i < len(nodes):
        word = push_word(nodes[i]) if isinstance(nodes[i], tuple) and len(nodes[i]) == 2 else None
        if word == b"pmessage":
            key = nodes[i][1][2:]  # channel, message
            j = i
            while j < len(nodes) and push_word(nodes[j]) == b"pmessage" and nodes[j][1][2:] == key:
                j += 1
            out += sorted(nodes[i:j], key=repr)
            i = j
        elif word in (b"unsubscribe", b"sunsubscribe"):
            j = i
            while j < len(nodes) and push_word(nodes[j]) == word:
                j += 1
            run = nodes[i:j]
            out.append((word, sorted(repr(n[1][1]) for n in run), [n[1][2] for n in run], [n[0] for n in run]))
            i = j
        else:
            out.append(nodes[i])
            i += 1
    return out


def equivalent(cmd, a, b):
    if a == b:
        return True
    name = cmd[0].upper() if cmd and isinstance(cmd[0], str) else ""
    sub = cmd[1].upper() if len(cmd) > 1 and isinstance(cmd[1], str) else ""
    try:
        na, nb = norm_runs(a), norm_runs(b)
    except Exception:  # noqa: BLE001  (an unparsable frame: not equivalent)
        return False
    if na == nb:
        return True
    if len(na) != len(nb):
        return False
    # Replies that depend on the command (the sender's own reply, the last frame).
    if name == "CLIENT" and sub == "ID":
        x, y = na[-1], nb[-1]
        return na[:-1] == nb[:-1] and x[0] == y[0] == b":"
    if name == "PUBSUB" and sub in ("CHANNELS", "SHARDCHANNELS"):
        x, y = na[-1], nb[-1]
        return na[:-1] == nb[:-1] and x[0] == y[0] and sorted(x[1]) == sorted(y[1])
    return False


# ---------------------------------------------------------------------------------------------
# Scenarios: lists of steps.
#   (i, [cmd...])                    connection i sends cmd
#   (i, [cmd...], [cmd...], ...)     connection i sends several commands in one write
#   ("wait", i, n, [cmd...], ...)    W(): as (i, ...), then wait until Redis sent connection i
#                                    n frames (a timeout)
#   ("sleep", secs)                  let time pass (expiry)
#   ("reopen", j)                    a fresh connection j on both servers


def S(i, *cmds):
    return (i,) + tuple(c.split() if isinstance(c, str) else c for c in cmds)


def W(i, *cmds, frames=1):
    """Like S, then wait until Redis has sent connection i `frames` frames (a blocking
    command's timeout): the step ends when the timeout has fired, however loaded the machine."""
    return ("wait", i, frames) + S(i, *cmds)[1:]


BLOCKING = {
    "blpop-fifo": [
        S(0, "BLPOP l 0"), S(1, "BLPOP l 0"), S(2, "BRPOP l 0"),
        S(3, "RPUSH l a b"),  # two elements: the first two waiters, in the order they blocked
        S(3, "LLEN l"), S(3, "LPUSH l c d"), S(3, "LRANGE l 0 -1"),
        S(0, "BLPOP l 0"), S(1, "BLPOP l 0"), S(3, "LPUSH l e"), S(3, "LPUSH l f"),
    ],
    "multi-key-waiters": [
        S(0, "BLPOP l1 l2 0"), S(1, "BRPOP l2 l1 0"), S(2, "BLPOP l2 0"),
        S(3, "RPUSH l2 x y z"), S(3, "EXISTS l2"), S(3, "RPUSH l1 w"), S(3, "LRANGE l1 0 -1"),
        S(0, "BLPOP l1 l1 l2 0"), S(3, "RPUSH l1 v"),
    ],
    "wrong-type-and-type-change": [
        S(0, "BLPOP k 0"), S(3, "SET k str"), S(3, "DEL k"), S(3, "SADD k m"), S(3, "TYPE k"),
        S(3, "DEL k"), S(3, "RPUSH k v1"),
        S(1, "BZPOPMIN z 0"), S(3, "RPUSH z notazset"), S(3, "DEL z"), S(3, "ZADD z 1 one"),
        S(0, "BLPOP k 0"), S(3, "ZADD k 1 a"), S(3, "DEL k"), S(3, "LPUSH k after"),
        S(0, "BLPOP k2 0"), S(3, "SET k2 v"), S(3, "EXPIRE k2 100"), S(3, "LPUSH k2 x"),
        S(3, "DEL k2"), S(3, "LPUSH k2 x"),
        S(0, "BLPOP str 0"), S(3, "SET str x"), S(3, "APPEND str y"), S(3, "GETDEL str"), S(3, "RPUSH str ok"),
    ],
    "blmove-chains": [
        S(0, "BLMOVE a b LEFT RIGHT 0"), S(1, "BLMOVE b c RIGHT LEFT 0"), S(2, "BLPOP c 0"),
        S(3, "RPUSH a x y"), S(3, "LRANGE a 0 -1"), S(3, "LRANGE b 0 -1"), S(3, "LRANGE c 0 -1"),
        S(0, "BRPOPLPUSH a a 0"), S(3, "RPUSH a 1 2"), S(3, "LRANGE a 0 -1"),
        S(0, "BRPOPLPUSH q q2 0"), S(1, "BLPOP q2 0"), S(2, "BRPOPLPUSH q2 q 0"), S(3, "LPUSH q m"),
        S(3, "LRANGE q 0 -1"), S(3, "LRANGE q2 0 -1"),
        # the destination has another type when the move is served
        S(0, "BLMOVE src dst LEFT LEFT 0"), S(3, "SET dst string"), S(3, "RPUSH src e1"),
        S(3, "LRANGE src 0 -1"), S(0, "BRPOPLPUSH src dst 0"), S(3, "DEL dst"), S(3, "GET dst"),
        S(1, "BLMOVE src2 dst2 LEFT LEFT 0"), S(3, "ZADD dst2 1 m"), S(3, "RPUSH src2 e2"),
    ],
    "lmove-and-lmpop-serve": [
        S(0, "BLPOP dst 0"), S(3, "RPUSH src a b"), S(3, "LMOVE src dst LEFT RIGHT"),
        S(1, "BLMPOP 0 2 m1 m2 LEFT COUNT 3"), S(2, "BLMPOP 0 1 m2 RIGHT"),
        S(3, "RPUSH m2 1 2 3 4 5"), S(3, "LRANGE m2 0 -1"),
        S(1, "BLMPOP 0 2 m1 m2 RIGHT"), S(3, "RPUSH m1 z"),
        S(0, "BLMPOP 0 1 m3 LEFT COUNT 0"), S(0, "BLMPOP 0 0 m3 LEFT"), S(0, "BLMPOP 0 1 m3 MID"),
        S(0, "BLPOP m3 abc"), S(0, "BLPOP m3 -1"), S(0, "BLMOVE a b UP LEFT 0"),
    ],
    "zset-waiters": [
        S(0, "BZPOPMIN z1 0"), S(1, "BZPOPMAX z1 0"), S(2, "BZMPOP 0 2 z2 z1 MAX COUNT 2"),
        S(3, "ZADD z1 1 a 2 b 3 c 4 d 5 e"), S(3, "ZRANGE z1 0 -1 WITHSCORES"),
        S(0, "BZPOPMIN z2 z1 0"), S(1, "BZMPOP 0 1 z2 MIN"), S(3, "ZADD z2 7 x 8 y"),
        S(3, "ZRANGE z2 0 -1 WITHSCORES"), S(3, "ZINCRBY z3 1 m"), S(0, "BZPOPMIN z3 0"),
        S(1, "BZPOPMAX z4 0"), S(3, "ZUNIONSTORE z4 1 z1"), S(3, "ZCARD z4"),
    ],
    "served-by-exec": [
        S(0, "BLPOP l 0"), S(1, "BLPOP l 0"), S(3, "MULTI"), S(3, "RPUSH l a"), S(3, "RPUSH l b"), S(3, "LPOP l"),
        S(3, "RPUSH l c"), S(3, "EXEC"), S(3, "LRANGE l 0 -1"),
        S(0, "BZPOPMIN z 0"), S(3, "MULTI"), S(3, "ZADD z 1 a"), S(3, "ZREM z a"), S(3, "EXEC"),
        S(3, "MULTI"), S(3, "ZADD z 2 b"), S(3, "DEL z"), S(3, "ZADD z 3 c"), S(3, "EXEC"),
        S(0, "BLPOP l2 0"), S(3, "MULTI"), S(3, "LPUSH l2 x"), S(3, "DEL l2"), S(3, "EXEC"), S(3, "LPUSH l2 y"),
    ],
    "blocking-inside-multi": [
        S(0, "MULTI"), S(0, "BLPOP l 0"), S(0, "BRPOP l 0"), S(0, "BLMOVE l m LEFT LEFT 0"),
        S(0, "BRPOPLPUSH l m 0"), S(0, "BLMPOP 0 1 l LEFT"), S(0, "BZPOPMIN z 0"), S(0, "BZPOPMAX z 0"),
        S(0, "BZMPOP 0 1 z MIN"), S(0, "RPUSH l x"), S(0, "BLPOP l 0"), S(0, "EXEC"),
        S(0, "HELLO 3"), S(0, "MULTI"), S(0, "BLPOP l 0"), S(0, "BLMOVE l m LEFT LEFT 0"), S(0, "BZPOPMIN z 0"),
        S(0, "BLMPOP 0 1 l LEFT"), S(0, "BZMPOP 0 1 z MIN"), S(0, "EXEC"),
        W(0, "BLPOP l 0.05"), S(0, "BLPOP l 0"), S(1, "RPUSH l r3"),
    ],
    "timeouts": [
        W(0, "BLPOP l 0.1"), W(0, "BRPOPLPUSH l m 0.1"), W(0, "BLMOVE l m LEFT LEFT 0.1"), W(0, "BZPOPMIN z 0.1"),
        W(0, "BLMPOP 0.1 1 l LEFT"), W(0, "BZMPOP 0.1 1 z MAX"),
        S(0, "HELLO 3"), W(0, "BLPOP l 0.1"), W(0, "BLMOVE l m LEFT LEFT 0.1"), W(0, "BZPOPMAX z 0.1"),
        W(0, "BLMPOP 0.1 1 l LEFT"),
        # another waiter stays and is served later
        S(2, "BLPOP l 0"), W(1, "BLPOP l 0.1"), S(3, "RPUSH l x"),
        # a timeout, then the next pipelined commands run
        W(1, ["BLPOP", "l", "0.1"], ["PING"], ["RPUSH", "l", "y"], frames=3), S(1, "LRANGE l 0 -1"),
    ],
    "client-unblock": [
        S(0, "BLPOP l 0"), S(3, "CLIENT UNBLOCK {id:0}"), S(3, "CLIENT UNBLOCK {id:0}"),
        S(0, "BLMOVE l m LEFT LEFT 0"), S(3, "CLIENT UNBLOCK {id:0} TIMEOUT"),
        S(0, "BZPOPMIN z 0"), S(3, "CLIENT UNBLOCK {id:0} ERROR"),
        S(0, "BLMPOP 0 1 l LEFT"), S(3, "CLIENT UNBLOCK {id:0} error"),
        S(0, "BRPOPLPUSH l m 0"), S(3, "CLIENT UNBLOCK {id:0} BOGUS"), S(3, "CLIENT UNBLOCK abc"),
        S(3, "CLIENT UNBLOCK -1"), S(3, "CLIENT UNBLOCK 0"), S(3, "CLIENT UNBLOCK {id:0} TIMEOUT x"),
        S(3, "CLIENT UNBLOCK {id:3}"), S(3, "CLIENT UNBLOCK {id:0}"),
        S(0, "HELLO 3"), S(0, "BLPOP l 0"), S(3, "CLIENT UNBLOCK {id:0}"),
        S(0, "BLMOVE l m LEFT LEFT 0"), S(3, "CLIENT UNBLOCK {id:0} ERROR"),
        # the unblocked client's queued commands then run
        S(1, ["BLPOP", "l", "0"], ["RPUSH", "l", "after"], ["LLEN", "l"]), S(3, "CLIENT UNBLOCK {id:1}"),
        # FIFO after an unblock
        S(0, "BLPOP l2 0"), S(1, "BLPOP l2 0"), S(2, "BLPOP l2 0"), S(3, "CLIENT UNBLOCK {id:1}"),
        S(3, "RPUSH l2 a b"),
    ],
    "other-db-and-swapdb": [
        S(0, "SELECT %d" % DB_B), S(0, "BLPOP l 0"), S(3, "RPUSH l x"), S(3, "SWAPDB %d %d" % (DB_A, DB_B)),
        S(3, "LRANGE l 0 -1"), S(1, "BLPOP l 0"), S(3, "SELECT %d" % DB_B), S(3, "RPUSH l y"),
        S(3, "SELECT %d" % DB_A), S(3, "RPUSH l z"),
        S(2, "BZPOPMIN zz 0"), S(3, "SELECT %d" % DB_B), S(3, "ZADD zz 1 a"), S(3, "MOVE zz %d" % DB_A),
        S(3, "SELECT %d" % DB_A), S(3, "EXISTS zz"),
        S(2, "BLPOP cp 0"), S(3, "RPUSH cpsrc v"), S(3, "COPY cpsrc cp"), S(3, "RENAME cpsrc cp2"),
        S(2, "BLPOP rn 0"), S(3, "RENAME cp2 rn"), S(3, "EXISTS rn"),
    ],
    "flush-kill-and-order-of-ready-keys": [
        S(0, "BLPOP l 0"), S(1, "BLPOP l 0"), S(3, "RPUSH l a"), S(3, "FLUSHDB"), S(3, "RPUSH l b"),
        S(0, "BLPOP l 0"), S(1, "BLPOP l 0"), S(3, "CLIENT KILL ID {id:0}"), ("reopen", 0), S(3, "RPUSH l c d"),
        S(3, "LRANGE l 0 -1"), S(3, "DEL l"),
        # keys made ready by one EXEC are served in the order they were written
        S(0, "BLMOVE a b LEFT RIGHT 0"), S(1, "BLPOP b 0"), S(2, "BLPOP b 0"),
        S(3, "MULTI"), S(3, "RPUSH b 1"), S(3, "RPUSH a 2"), S(3, "EXEC"), S(3, "LRANGE b 0 -1"),
        # served by key in write order, not by each client's key order: the first gets y
        S(0, "BLPOP x y 0"), S(1, "BLPOP y x 0"), S(3, "MULTI"), S(3, "RPUSH y 1"), S(3, "RPUSH x 2"), S(3, "EXEC"),
        S(0, "BZPOPMIN zs 0"), S(1, "BLPOP ls 0"), S(3, "SADD src m"), S(3, "SORT src ALPHA STORE ls"),
        S(3, "ZUNIONSTORE zs 1 src"), S(3, "EXISTS ls zs"),
        S(1, "CLIENT LIST ID {id:1}"), S(0, "BLPOP w 0"), S(1, "CLIENT LIST ID {id:0}"), S(1, "CLIENT UNBLOCK {id:0}"),
        S(1, "CLIENT LIST ID {id:0}"),
    ],
    "pipelined-behind-blocked": [
        S(0, ["BLPOP", "l", "0"], ["SET", "after", "1"], ["BLPOP", "l", "0"], ["GET", "after"]),
        S(3, "GET after"), S(3, "RPUSH l a"), S(3, "GET after"), S(3, "RPUSH l b"),
        S(1, ["BLPOP", "l", "0"], ["RPUSH", "l2", "chain"]), S(2, "BLPOP l2 0"), S(3, "RPUSH l c"),
    ],
}

PUBSUB = {
    "subscribe-publish-counts": [
        S(0, "SUBSCRIBE dm:a dm:b"), S(1, "PSUBSCRIBE dm:a*"), S(2, "PUBLISH dm:a hi"), S(2, "PUBLISH dm:b yo"),
        S(2, "PUBLISH dm:ab pat"), S(2, "PUBLISH dm:zz none"), S(2, "PUBSUB NUMSUB dm:a dm:b dm:c"),
        S(2, "PUBSUB NUMSUB"), S(2, "PUBSUB NUMPAT"), S(2, "PUBSUB CHANNELS dm:*"), S(2, "PUBSUB CHANNELS dm:a"),
        S(2, "PUBSUB CHANNELS dm:a x"), S(2, "PUBSUB SHARDCHANNELS dm:*"), S(2, "PUBSUB SHARDNUMSUB dm:a"),
        S(2, "PUBSUB BOGUS"), S(2, "PUBSUB NUMPAT x"),
        S(0, "SUBSCRIBE dm:a"), S(0, "UNSUBSCRIBE dm:a"), S(0, "UNSUBSCRIBE dm:a"), S(0, "UNSUBSCRIBE"),
        S(0, "UNSUBSCRIBE"), S(1, "PUNSUBSCRIBE dm:zz"), S(1, "PUNSUBSCRIBE"), S(1, "PUNSUBSCRIBE"),
        S(2, "PUBLISH dm:a gone"), S(2, "PUBSUB NUMSUB dm:a"), S(2, "PUBSUB NUMPAT"),
    ],
    "subscribed-context-resp2": [
        S(0, "SUBSCRIBE dm:c"), S(0, "GET x"), S(0, "SET x 1"), S(0, "CLIENT ID"), S(0, "MULTI"), S(0, "PING"),
        S(0, "PING hello"), S(0, "PING a b"), S(0, "ECHO e"), S(0, "PUBLISH dm:c self"), S(0, "BLPOP l 0"),
        S(0, "HELLO 2"), S(0, "CLIENT SETNAME n"), S(0, "SELECT 1"), S(0, "BOGUS"), S(0, "GET"),
        S(0, "PSUBSCRIBE dm:p*"), S(0, "SSUBSCRIBE dm:s"), S(0, "UNSUBSCRIBE"), S(0, "GET x"),
        S(0, "PUNSUBSCRIBE"), S(0, "GET x"), S(0, "SUNSUBSCRIBE"), S(0, "GET x"), S(0, "PING"),
        S(1, "PSUBSCRIBE dm:*"), S(1, ["RESET"], ["SELECT", DB_A]), S(1, "GET x"), S(1, "PING"),
        S(2, "SUBSCRIBE dm:q"), S(2, "QUIT"),
        S(3, "PUBSUB NUMSUB dm:q dm:c"), S(3, "PUBSUB NUMPAT"),
    ],
    "subscribed-resp3": [
        S(0, "HELLO 3"), S(0, "SUBSCRIBE dm:c dm:d"), S(0, "GET x"), S(0, "SET x 1"), S(0, "PING"), S(0, "PING m"),
        S(1, "PUBLISH dm:c m1"), S(0, "PUBLISH dm:c self"), S(0, "PUBLISH dm:d self2"), S(0, "CLIENT GETNAME"),
        S(0, "MULTI"), S(0, "PUBLISH dm:c inmulti"), S(0, "GET x"), S(0, "EXEC"),
        S(0, "PSUBSCRIBE dm:c*"), S(1, "PUBLISH dm:c both"), S(0, "BLPOP l 0"), S(1, "RPUSH l v"),
        S(0, "HELLO 2"), S(0, "GET x"), S(0, "HELLO 3"), S(0, "UNSUBSCRIBE dm:c"), S(0, "PUNSUBSCRIBE"),
        S(0, "UNSUBSCRIBE"), S(0, "UNSUBSCRIBE"), S(0, "PING"), S(1, "PUBLISH dm:c none"),
        S(2, "HELLO 3"), S(2, "SUBSCRIBE dm:r"), S(2, ["RESET"], ["SELECT", DB_A]), S(2, "PING"),
        S(3, "PUBSUB NUMSUB dm:r dm:c dm:d"),
    ],
    "shard-channels": [
        S(0, "SSUBSCRIBE dm:s1 dm:s2"), S(1, "SSUBSCRIBE dm:s1"), S(2, "SPUBLISH dm:s1 m"), S(2, "PUBLISH dm:s1 m"),
        S(2, "PUBSUB SHARDCHANNELS dm:*"), S(2, "PUBSUB SHARDNUMSUB dm:s1 dm:s2 dm:s3"), S(2, "PUBSUB CHANNELS dm:*"),
        S(0, "SUBSCRIBE dm:s1"), S(2, "PUBLISH dm:s1 plain"), S(2, "SPUBLISH dm:s1 shard"),
        S(0, "SUNSUBSCRIBE dm:s1"), S(0, "SUNSUBSCRIBE dm:s9"), S(0, "SUNSUBSCRIBE"), S(0, "SUNSUBSCRIBE"),
        S(0, "UNSUBSCRIBE"), S(1, "SUNSUBSCRIBE"), S(2, "PUBSUB SHARDNUMSUB dm:s1"),
        S(3, "MULTI"), S(3, "SSUBSCRIBE dm:x"), S(3, "SUBSCRIBE dm:y"), S(3, "PSUBSCRIBE dm:z*"), S(3, "EXEC"),
        S(3, "PING"), S(2, "PUBLISH dm:y v"), S(2, "PUBSUB NUMSUB dm:y"),
    ],
    "message-order": [
        S(0, "SUBSCRIBE dm:o"), S(1, "SUBSCRIBE dm:o"), S(2, "PUBLISH dm:o 1"), S(3, "PUBLISH dm:o 2"),
        S(2, "PUBLISH dm:o 3"), S(2, ["PUBLISH", "dm:o", "4"], ["PUBLISH", "dm:o", "5"], ["PUBLISH", "dm:o", "6"]),
        S(3, "MULTI"), S(3, "PUBLISH dm:o 7"), S(3, "PUBLISH dm:o 8"), S(3, "EXEC"),
        S(0, "PSUBSCRIBE dm:o* dm:? *"), S(2, "PUBLISH dm:o 9"), S(1, "PSUBSCRIBE dm:o"), S(2, "PUBLISH dm:o 10"),
        S(0, "PUNSUBSCRIBE dm:?"), S(2, "PUBLISH dm:o 11"),
    ],
    "unsubscribe-order": [
        S(0, "PSUBSCRIBE dm:p5 dm:p1 dm:p4 dm:p2 dm:p3 dm:p0 dm:p9 dm:p7"), S(0, "PUNSUBSCRIBE"),
        S(0, "SUBSCRIBE dm:c5 dm:c1 dm:c4"), S(0, "PSUBSCRIBE dm:x dm:y"), S(0, "UNSUBSCRIBE"),
        S(0, "PUNSUBSCRIBE dm:y dm:nope dm:x"), S(0, "UNSUBSCRIBE dm:a dm:b"), S(0, "PUNSUBSCRIBE dm:a"),
        S(0, "PSUBSCRIBE dm:q1 dm:q2 dm:q1"), S(0, "SUBSCRIBE dm:c dm:c"), S(0, "PUNSUBSCRIBE"), S(0, "UNSUBSCRIBE"),
    ],
    "reply-modes-and-pubsub": [
        S(0, "CLIENT REPLY OFF"), S(0, "SUBSCRIBE dm:m"), S(1, "PUBLISH dm:m x"), S(0, "PING"),
        S(0, "UNSUBSCRIBE"), S(0, "GET k"), S(0, "CLIENT REPLY ON"), S(0, "GET k"),
        S(2, "HELLO 3"), S(2, "SUBSCRIBE dm:n"), S(2, "CLIENT REPLY SKIP"), S(2, "PUBLISH dm:n skipped"),
        S(2, "PUBLISH dm:n shown"), S(2, "CLIENT REPLY OFF"), S(2, "PUBLISH dm:n off"), S(2, "GET k"),
        S(2, "CLIENT REPLY ON"),
    ],
}

TX = {
    "watch-other-writes": [
        S(3, "SET k 1"), S(0, "WATCH k"), S(1, "SET k 1"), S(0, "MULTI"), S(0, "INCR k"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "EXPIRE k 100"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "PERSIST k"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "PERSIST k"), S(0, "MULTI"), S(0, "EXEC"),  # no TTL: a no-op
        S(0, "WATCH k"), S(1, "DEL k"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "DEL k"), S(0, "MULTI"), S(0, "EXEC"),  # absent: nothing deleted
        S(0, "WATCH k k2"), S(1, "MULTI"), S(1, "SET k2 v"), S(1, "EXEC"), S(0, "MULTI"), S(0, "GET k2"), S(0, "EXEC"),
        S(0, "WATCH k"), S(0, "SET k mine"), S(0, "MULTI"), S(0, "GET k"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "GET k"), S(1, "EXISTS k"), S(0, "MULTI"), S(0, "GET k"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SET k mine"), S(0, "UNWATCH"), S(0, "MULTI"), S(0, "GET k"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SET k x"), S(0, "MULTI"), S(0, "DISCARD"), S(0, "MULTI"), S(0, "EXEC"),
    ],
    "watch-no-op-writes": [
        S(3, "SADD s a"), S(3, "ZADD z 1 a"), S(3, "RPUSH l a"), S(3, "HSET h f v"), S(3, "SET str v"),
        S(0, "WATCH s"), S(1, "SADD s a"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH s"), S(1, "SREM s nope"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH z"), S(1, "ZADD z 1 a"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH z"), S(1, "ZREM z nope"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH z"), S(1, "ZINCRBY z 0 a"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH l"), S(1, "LREM l 0 nope"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH l"), S(1, "LSET l 0 a"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH l"), S(1, "LTRIM l 0 -1"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH h"), S(1, "HSET h f v"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH h"), S(1, "HDEL h nope"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH h"), S(1, "HSETNX h f w"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "SETNX str w"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "SET str w NX"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, ["APPEND", "str", ""]), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "INCRBY str 0"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "EXPIRE str 100 XX"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "SET str v"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH h"), S(1, "HINCRBY h n 0"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH h"), S(1, "HINCRBYFLOAT h n 0"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH h"), S(1, "HMSET h f v"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, ["SETRANGE", "str", "0", ""]), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "SETRANGE str 0 v"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "GETEX str"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "RENAME str str"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH str"), S(1, "SETBIT str 1 1"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH z"), S(1, "ZADD z XX 1 a"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH z"), S(1, "ZADD z GT 0 a"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH s"), S(1, "SMOVE s s a"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH s"), S(1, "SINTERSTORE s s"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH l"), S(1, "LMOVE l l LEFT LEFT"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH l"), S(1, "LINSERT l BEFORE nope x"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH l"), S(1, "LPOS l a"), S(1, "SORT l ALPHA STORE l"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH missing"), S(1, "LPUSHX missing a"), S(1, "RPOP missing"), S(1, "SREM missing a"),
        S(1, "EXPIRE missing 10"), S(1, "SET missing v XX"), S(0, "MULTI"), S(0, "EXEC"),
    ],
    "watch-flush-swap": [
        S(3, "SET k v"), S(3, "SELECT %d" % DB_B), S(3, "SET kb v"), S(3, "SELECT %d" % DB_A),
        S(0, "WATCH k"), S(1, "FLUSHDB"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "FLUSHDB"), S(0, "MULTI"), S(0, "EXEC"),  # k absent before and after
        S(0, "WATCH kb"), S(1, "SWAPDB %d %d" % (DB_A, DB_B)), S(0, "MULTI"), S(0, "EXEC"),  # kb appears
        S(0, "WATCH kb"), S(1, "SWAPDB %d %d" % (DB_A, DB_B)), S(0, "MULTI"), S(0, "EXEC"),  # kb disappears
        S(0, "WATCH nothing"), S(1, "SWAPDB %d %d" % (DB_A, DB_B)), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH kb"), S(1, "SWAPDB %d %d" % (DB_A, DB_B)), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "SELECT %d" % DB_B), S(0, "WATCH kb"), S(1, "SET kb other-db"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "SELECT %d" % DB_A), S(3, "SET k v"), S(0, "WATCH k"), S(1, "FLUSHALL"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "FLUSHALL"), S(0, "MULTI"), S(0, "EXEC"),
        S(3, "SET k v"), S(0, "WATCH k"), S(1, "MOVE k %d" % DB_B), S(0, "MULTI"), S(0, "EXEC"),
    ],
    "watch-other-ways-in": [
        S(3, "SET src v"), S(3, "SET k old EX 100"), S(3, "SELECT %d" % DB_B), S(3, "SET k fromb"), S(3, "SELECT %d" % DB_A),
        S(0, "WATCH k"), S(1, "RENAME src k"), S(0, "MULTI"), S(0, "EXEC"), S(1, "SET src v"),
        S(0, "WATCH k"), S(1, "COPY src k REPLACE"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "COPY src k"), S(0, "MULTI"), S(0, "EXEC"),  # exists: nothing copied
        S(0, "WATCH k"), S(1, "GETDEL k"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SELECT %d" % DB_B), S(1, "MOVE k %d" % DB_A), S(1, "SELECT %d" % DB_A),
        S(0, "MULTI"), S(0, "EXEC"), S(3, "EXPIRE k 100"),
        S(0, "WATCH k"), S(1, "EXPIRE k 200 NX"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "GETEX k PERSIST"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SET k v2 KEEPTTL"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "EXPIRE k 0"), S(0, "MULTI"), S(0, "EXEC"), S(3, "EXISTS k"),
        S(3, "SADD s1 m"), S(0, "WATCH s2"), S(1, "SMOVE s1 s2 m"), S(0, "MULTI"), S(0, "EXEC"),
        S(3, "RPUSH l1 e"), S(0, "WATCH l2"), S(1, "LMOVE l1 l2 LEFT LEFT"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH st"), S(1, "SORT l2 STORE st"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH st"), S(1, "SORT nosuch STORE st"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH st"), S(1, "SORT nosuch STORE st"), S(0, "MULTI"), S(0, "EXEC"),  # absent: nothing stored
        S(0, "WATCH u"), S(1, "SUNIONSTORE u nosuch"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k l2"), S(0, "WATCH k"), S(1, "UNLINK l2"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(0, "MULTI"), S(1, "SET k late"), S(0, "SET k mine"), S(0, "EXEC"), S(0, "GET k"),
    ],
    "watch-absent-key-created-and-gone": [
        # absent at WATCH and again at EXEC, but it existed in between: EXEC fails
        S(0, "WATCH k"), S(1, "SET k 1"), S(1, "DEL k"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SET k 1 PX 20"), ("sleep", 0.1), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "DEL k"), S(0, "MULTI"), S(0, "EXEC"),  # nothing happened to it
        S(0, "WATCH k"), S(1, "SET other 1"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "MULTI"), S(1, "SET k 1"), S(1, "DEL k"), S(1, "EXEC"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SELECT %d" % DB_B), S(1, "SET k 1"), S(1, "MOVE k %d" % DB_A), S(1, "SELECT %d" % DB_A),
        S(1, "DEL k"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(0, "SET k 1"), S(0, "DEL k"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "LPUSH k 1"), S(1, "LPOP k"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SET src 1"), S(1, "RENAME src k"), S(1, "DEL k"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SET k 1"), S(1, "DEL k"), S(0, "UNWATCH"), S(0, "MULTI"), S(0, "EXEC"),
        S(0, "WATCH k"), S(1, "SET k 1"), S(1, "DEL k"), S(0, "MULTI"), S(0, "DISCARD"), S(0, "MULTI"), S(0, "EXEC"),
    ],
    "watch-expiry": [
        S(3, "SET k v PX 800"), S(0, "WATCH k"), ("sleep", 1.0), S(0, "MULTI"), S(0, "EXEC"),
        S(3, "SET k2 v PX 100"), S(3, "SET k3 v PX 100"), ("sleep", 0.25), S(0, "WATCH k2"), S(1, "GET k2"),
        S(0, "MULTI"), S(0, "EXEC"), S(0, "WATCH k3"), S(1, "SET k3 new"), S(0, "MULTI"), S(0, "EXEC"),
    ],
    "queue-errors-and-runtime-errors": [
        S(0, "MULTI"), S(0, "SET a"), S(0, "SET a 1"), S(0, "EXEC"), S(0, "GET a"),
        S(0, "MULTI"), S(0, "BOGUS x"), S(0, "EXEC"),
        S(0, "MULTI"), S(0, "SET s x"), S(0, "INCR s"), S(0, "LPUSH s a"), S(0, "GET s"), S(0, "EXEC"),
        S(0, "MULTI"), S(0, "WATCH k"), S(0, "MULTI"), S(0, "GET s"), S(0, "EXEC"),
        S(0, "EXEC"), S(0, "DISCARD"), S(0, "UNWATCH"), S(0, "EXEC x"), S(0, "MULTI x"),
        S(0, "MULTI"), S(0, "UNWATCH"), S(0, "DISCARD"), S(0, "DISCARD"),
        S(0, "MULTI"), S(0, "CLIENT SETNAME in-multi"), S(0, "CLIENT GETNAME"), S(0, "SELECT %d" % DB_B),
        S(0, "SET b 1"), S(0, "SELECT %d" % DB_A), S(0, "EXEC"),
        S(0, "MULTI"), S(0, "SUBSCRIBE dm:t"), S(0, "EXEC"), S(0, "PING"), S(0, "UNSUBSCRIBE"),
        S(0, "MULTI"), S(0, "HELLO 3"), S(0, "GET zz"), S(0, "EXEC"), S(0, "GET zz"),
        S(0, "MULTI"), S(0, "CLIENT REPLY OFF"), S(0, "SET r 1"), S(0, "EXEC"), S(0, "CLIENT REPLY ON"),
        S(0, ["MULTI"], ["RESET"], ["SELECT", DB_A]), S(0, "EXEC"),
        S(1, "MULTI"), S(1, "SET q 1"), S(2, "GET q"), S(1, "QUIT"), ("reopen", 1), S(2, "GET q"),
        S(0, "WATCH w"), S(0, ["RESET"], ["SELECT", DB_A]), S(1, "SET w 1"), S(0, "MULTI"), S(0, "EXEC"),
    ],
}

CLIENT = {
    "client-names-ids-info": [
        S(0, "CLIENT GETNAME"), S(0, "CLIENT SETNAME alpha"), S(0, "CLIENT GETNAME"),
        S(0, ["CLIENT", "SETNAME", "a b"]), S(0, "CLIENT GETNAME"), S(0, ["CLIENT", "SETNAME", ""]),
        S(0, "CLIENT GETNAME"), S(0, "CLIENT SETNAME x y"), S(0, "CLIENT ID"), S(0, "CLIENT ID x"),
        S(1, "CLIENT SETNAME beta"), S(1, "SUBSCRIBE dm:i"), S(2, "MULTI"), S(2, "SET x 1"),
        S(3, "CLIENT LIST ID {id:1} {id:2} {id:0}"), S(3, "CLIENT INFO"), S(3, "CLIENT LIST ID abc"),
        S(3, "CLIENT LIST TYPE bogus"), S(3, "CLIENT LIST BOGUS"), S(2, "DISCARD"), S(0, "CLIENT INFO"),
        S(0, "HELLO 3"), S(0, "CLIENT INFO"), S(0, "CLIENT NO-EVICT on"), S(0, "CLIENT NO-EVICT off"),
        S(0, "CLIENT NO-EVICT maybe"), S(0, "CLIENT NO-TOUCH on"), S(0, "CLIENT BOGUS"), S(0, "CLIENT"),
        S(0, "HELLO 3 SETNAME gamma"), S(0, "CLIENT GETNAME"), S(0, ["RESET"], ["SELECT", DB_A]),
        S(0, "CLIENT GETNAME"), S(0, "CLIENT INFO"),
    ],
    "client-kill": [
        S(0, "CLIENT KILL ID {id:1}"), ("reopen", 1), S(0, "CLIENT KILL ID {id:1} SKIPME no"), ("reopen", 1),
        S(0, "CLIENT KILL ADDR {addr:1}"), ("reopen", 1), S(0, "CLIENT KILL {addr:1}"), ("reopen", 1),
        S(0, "CLIENT KILL ID 99999999"), S(0, "CLIENT KILL ADDR 10.9.8.7:1"), S(0, "CLIENT KILL 10.9.8.7:1"),
        S(0, "CLIENT KILL ID {id:0}"), S(0, "CLIENT KILL ID {id:0} SKIPME yes"), S(0, "CLIENT KILL ID 0"),
        S(0, "CLIENT KILL ID abc"), S(0, "CLIENT KILL ID {id:1} BOGUS x"), S(0, "CLIENT KILL ID"),
        S(0, "CLIENT KILL ADDR {addr:1} ID {id:2}"), S(0, "CLIENT KILL ADDR {addr:2} ID {id:2} SKIPME maybe"),
        S(1, "BLPOP l 0"), S(0, "CLIENT KILL ID {id:1}"), ("reopen", 1), S(0, "RPUSH l a"), S(0, "LLEN l"),
        S(1, "SUBSCRIBE dm:k"), S(0, "CLIENT KILL ID {id:1}"), ("reopen", 1), S(0, "PUBSUB NUMSUB dm:k"),
        S(1, "MULTI"), S(1, "SET m 1"), S(0, "CLIENT KILL ID {id:1}"), ("reopen", 1), S(0, "GET m"),
        S(1, "SUBSCRIBE dm:kt"), S(0, "CLIENT KILL TYPE normal ID {id:1}"), S(0, "CLIENT KILL TYPE pubsub ID {id:1}"),
        ("reopen", 1), S(0, "CLIENT KILL USER default ID {id:1}"), ("reopen", 1),
        S(0, "CLIENT KILL USER nobody ID {id:1}"), S(0, "CLIENT KILL TYPE bogus"),
        S(2, "CLIENT KILL ID {id:2} SKIPME no"), ("reopen", 2), S(2, "PING"),
        S(3, "CLIENT KILL {addr:3}"), ("reopen", 3), S(3, "PING"),
    ],
    "client-reply": [
        S(0, "CLIENT REPLY OFF"), S(0, "SET a 1"), S(0, "GET a"), S(0, "BOGUS"), S(0, "CLIENT REPLY ON"),
        S(0, "CLIENT REPLY SKIP"), S(0, "GET a"), S(0, "GET a"), S(0, "CLIENT REPLY SKIP"), S(0, "CLIENT REPLY SKIP"),
        S(0, "GET a"), S(0, "CLIENT REPLY OFF"), S(0, "CLIENT REPLY SKIP"), S(0, "GET a"),
        S(0, "CLIENT REPLY ON"), S(0, "CLIENT REPLY BOGUS"), S(0, "CLIENT REPLY"),
        S(0, "CLIENT REPLY SKIP"), S(0, "BLPOP l 0"), S(1, "RPUSH l x"), S(0, "PING"),
        S(0, "CLIENT REPLY OFF"), S(0, "BLPOP l 0"), S(1, "RPUSH l y"), S(0, "CLIENT REPLY ON"),
        S(0, "CLIENT REPLY SKIP"), S(0, "BLPOP l 0.1"), W(0, "PING"),
        S(0, ["CLIENT", "REPLY", "OFF"], ["RESET"], ["SELECT", DB_A]), S(0, "PING"),
    ],
    "quit-and-reset": [
        S(0, "QUIT"), ("reopen", 0), S(0, "QUIT extra args"), ("reopen", 0),
        S(0, ["PING"], ["QUIT"], ["PING"]), ("reopen", 0),
        S(0, "SELECT %d" % DB_B), S(0, "HELLO 3"), S(0, "CLIENT SETNAME n"), S(0, "MULTI"), S(0, "RESET"),
        S(0, "CLIENT GETNAME"), S(0, "GET x"), S(0, "SELECT %d" % DB_A), S(0, "RESET x"),
        S(1, "BLPOP l 0"), S(1, "RESET"), S(0, "CLIENT UNBLOCK {id:1}"), S(1, "SELECT %d" % DB_A),
    ],
}

SCRIPTED = {**BLOCKING, **PUBSUB, **TX, **CLIENT}

# Keyspace notifications: connection 0 subscribes to every event of every database (RESP2),
# connection 1 to the keyevent channels of DB_A in RESP3 and writes too (its own events come
# to it as pushes, placed among its replies as Redis places them), connection 2 blocks,
# connection 3 writes. FLUSHALL first: no key of another test expires meanwhile (active expiry
# would notify it). The flags are set back to none afterwards (test_multi_notifications).
NOTIFY_ALL = "KEAnm"
NOTIFY = [
    S(3, "FLUSHALL"), S(3, "CONFIG SET notify-keyspace-events %s" % NOTIFY_ALL),
    S(3, "CONFIG GET notify-keyspace-events"), S(3, "CONFIG SET notify-keyspace-events KEA?"),
    S(0, "PSUBSCRIBE __key*__:*"), S(1, "HELLO 3"), S(1, "PSUBSCRIBE __keyevent@%d__:*" % DB_A),
    # strings
    S(3, "SET s v"), S(3, "SET s v2 XX GET"), S(3, "SET s v3 NX"), S(3, "SET s v3 NX GET"), S(3, "SETNX s2 x"),
    S(3, "SETNX s2 y"), S(3, "SET s v EX 100"), S(3, "SET s v KEEPTTL"), S(3, "SETEX s3 100 v"),
    S(3, "PSETEX s3 100000 v"), S(3, "GETSET s g"), S(3, "GETSET s4 g"), S(3, "APPEND s tail"), S(3, "APPEND s5 new"),
    S(3, "SETRANGE s 1 xx"), S(3, ["SETRANGE", "s", "0", ""]), S(3, ["SETRANGE", "s6", "0", ""]), S(3, "SETRANGE s6 2 x"),
    S(3, "INCR n"), S(3, "INCRBY n 5"), S(3, "DECR n"), S(3, "DECRBY n 2"), S(3, "INCRBYFLOAT f 1.5"),
    S(3, "INCRBYFLOAT f 1e400"), S(3, "INCR s"), S(3, "MSET a 1 b 2 a 3"), S(3, "MSETNX a 1 c 2"),
    S(3, "MSETNX c 1 d 2"), S(3, "GETDEL a"), S(3, "GETDEL a"), S(3, "GETEX b EX 100"), S(3, "GETEX b"),
    S(3, "GETEX b PERSIST"), S(3, "GETEX b PERSIST"), S(3, "GETEX b PXAT 1"), S(3, "GETEX b EX 1"),
    # generic
    S(3, "EXPIRE s 100"), S(3, "EXPIRE s 200 NX"), S(3, "PERSIST s"), S(3, "PERSIST s"), S(3, "PEXPIREAT s 1000"),
    S(3, "EXISTS s"), S(3, "EXPIRE s -1"), S(3, "EXPIRE missing 10"), S(3, "DEL c d nothere"), S(3, "UNLINK s2 s3"),
    S(3, "SET r1 v"), S(3, "RENAME r1 r2"), S(3, "SET r3 v"), S(3, "RENAME r2 r3"), S(3, "RENAMENX r3 r3"),
    S(3, "RENAME r3 r3"), S(3, "RENAME nosuch r3"), S(3, "SET r5 v"), S(3, "RENAMENX r5 r3"), S(3, "RENAMENX r5 r6"),
    S(3, "COPY r3 r4"), S(3, "COPY r3 r4"), S(3, "COPY r3 r4 REPLACE"), S(3, "COPY r3 r4 DB %d" % DB_B),
    S(3, "MOVE r4 %d" % DB_B), S(3, "MOVE r3 %d" % DB_B), S(3, "SELECT %d" % DB_B), S(3, "DEL r3 r4"),
    S(3, "SELECT %d" % DB_A),
    # lists
    S(3, "LPUSH l a b"), S(3, "RPUSH l c"), S(3, "LPUSHX nol x"), S(3, "RPUSHX l d"), S(3, "LINSERT l BEFORE a z"),
    S(3, "LINSERT l BEFORE nope z"), S(3, "LSET l 0 q"), S(3, "LREM l 1 q"), S(3, "LREM l 0 nope"),
    S(3, "LTRIM l 0 -1"), S(3, "LTRIM l 0 1"), S(3, "LTRIM nol 0 1"), S(3, "LPOP l"), S(3, "RPOP l 0"),
    S(3, "RPOP l 5"), S(3, "RPUSH m1 x y"), S(3, "LMOVE m1 m2 LEFT RIGHT"), S(3, "RPOPLPUSH m1 m2"),
    S(3, "LMOVE m2 m2 LEFT LEFT"), S(3, "LMPOP 2 nol m2 RIGHT COUNT 5"), S(3, "RPUSH lt 1 2 3"), S(3, "LTRIM lt 5 6"),
    # hashes
    S(3, "HSET h f v g w"), S(3, "HMSET h f v"), S(3, "HSETNX h f x"), S(3, "HSETNX h n x"), S(3, "HINCRBY h i 3"),
    S(3, "HINCRBYFLOAT h j 0.5"), S(3, "HDEL h nope"), S(3, "HDEL h f"), S(3, "HDEL h g i j n"),
    # sets
    S(3, "SADD s1 a b c"), S(3, "SADD s1 a"), S(3, "SREM s1 z"), S(3, "SREM s1 a"), S(3, "SMOVE s1 s2 b"),
    S(3, "SMOVE s1 s2 nope"), S(3, "SADD s2 c"), S(3, "SMOVE s1 s2 c"), S(3, "SADD s1 x"),
    S(3, "SINTERSTORE d s1 s2"), S(3, "SUNIONSTORE d s1 s2"), S(3, "SUNIONSTORE d s1 s2"), S(3, "SDIFFSTORE d s2 s2"),
    S(3, "SDIFFSTORE d s2 s2"), S(3, "SINTERSTORE d nosuch"), S(3, "SPOP s1"), S(3, "SPOP nosuch"),
    S(3, "SPOP s2 0"), S(3, "SREM s2 c"), S(3, "SPOP s2 10"),  # one member left: no hash order to differ
    # sorted sets
    S(3, "ZADD z 1 a 2 b"), S(3, "ZADD z 1 a"), S(3, "ZADD z INCR 1 a"), S(3, "ZINCRBY z 0 a"),
    S(3, "ZINCRBY z 1 c"), S(3, "ZADD z XX 5 nope"), S(3, "ZADD z CH GT 9 b"), S(3, "ZREM z x"), S(3, "ZREM z a"),
    S(3, "ZPOPMIN z"), S(3, "ZPOPMAX z 0"), S(3, "ZPOPMAX z 5"), S(3, "ZADD z 1 a 2 b 3 c 4 d"),
    S(3, "ZREMRANGEBYSCORE z 1 1"), S(3, "ZREMRANGEBYSCORE z 9 9"), S(3, "ZREMRANGEBYRANK z 0 0"),
    S(3, "ZUNIONSTORE zu 2 z nosuch"), S(3, "ZINTERSTORE zu 2 z nosuch"), S(3, "ZINTERSTORE zu 2 z nosuch"),
    S(3, "ZDIFFSTORE zd 1 z"), S(3, "ZRANGESTORE zr z 0 -1"), S(3, "ZRANGESTORE zr z 5 6"),
    S(3, "ZMPOP 1 z MIN COUNT 10"), S(3, "ZADD zl 0 a 0 b"), S(3, "ZREMRANGEBYLEX zl - +"),
    # bits, HyperLogLog, geo, SORT
    S(3, "SETBIT bk 7 1"), S(3, "SETBIT bk 7 1"), S(3, "SETBIT bk 7 0"), S(3, "BITOP OR bo bk"),
    S(3, "BITOP AND bo nope nope2"), S(3, "BITFIELD bf SET u8 0 255"), S(3, "BITFIELD bf SET u8 0 255"),
    S(3, "BITFIELD bf GET u8 0"), S(3, "PFADD hl a b"), S(3, "PFADD hl a"), S(3, "PFMERGE hm hl"), S(3, "PFCOUNT hm"),
    S(3, "GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania"), S(3, "GEOADD g NX 1 1 Palermo"),
    S(3, "GEOSEARCHSTORE gd g FROMLONLAT 15 37 BYRADIUS 200 km"), S(3, "GEORADIUS g 15 37 200 km STORE gr"),
    S(3, "GEORADIUS g 15 37 1 km STORE gr"), S(3, "GEOSEARCHSTORE gd nosuch FROMLONLAT 15 37 BYRADIUS 200 km"),
    S(3, "RPUSH sl 3 1 2"), S(3, "SORT sl STORE so"), S(3, "SORT sl STORE so"), S(3, "SORT nosuch STORE so"),
    # blocked clients served by a push, inside and outside a transaction
    S(2, "BLPOP bl 0"), S(3, "RPUSH bl x y"), S(2, "BLMOVE bl bm RIGHT LEFT 0"), S(2, "BZPOPMIN bz 0"),
    S(3, "ZADD bz 1 m"), S(2, "BLPOP bl2 0"), S(3, "MULTI"), S(3, "SET t 1"), S(3, "INCR t"), S(3, "RPUSH bl2 v"),
    S(3, "DEL t"), S(3, "EXEC"),
    # a RESP3 client's own events, among its replies
    S(1, "SET self v"), S(1, "LPUSH selfl a"), S(1, "RPOP selfl"), S(1, "GETSET self w"), S(1, "EXPIRE self 100"),
    S(1, "DEL self"), S(1, "HSET selfh f v"), S(1, "ZADD selfz 1 a"), S(1, "SET self v GET"),
    # expiry: active expiry finds them
    S(3, "SET e1 v PX 50"), ("sleep", 1.0), S(3, "HSET e2 f v"), S(3, "PEXPIRE e2 50"), ("sleep", 1.0),
    # keyspace misses, and a narrower set of classes
    S(3, "GET nothere"), S(3, "LRANGE nothere 0 -1"), S(3, "SET m v"),
    S(3, "CONFIG SET notify-keyspace-events Kl"), S(3, "CONFIG GET notify-keyspace-events"), S(3, "SET m v2"),
    S(3, "LPUSH ml a"), S(3, "CONFIG SET notify-keyspace-events Ex"), S(3, "SET e3 v PX 50"), ("sleep", 1.0),
    S(3, ["CONFIG", "SET", "notify-keyspace-events", ""]), S(3, "LPUSH ml b"),
]


# Client-side caching (ids differ by design: no TRACKINGINFO or GETREDIR while redirected):
# connection 0 is a RESP2 subscriber of __redis__:invalidate, connection 1
# tracks every key in BCAST mode (RESP3: pushes to itself, its own writes too, after their
# replies), connection 2 tracks the prefixes s and h with NOLOOP, redirected to connection 0;
# connection 3 runs the writes of the notification scenario (every family, STORE commands,
# blocked clients served, expiry). Then the default mode: keys remembered by reads, one
# invalidation each, a client's own after its reply and after EXEC's, OPTIN/OPTOUT, flushes.
_WRITES = NOTIFY[NOTIFY.index(S(3, "SET s v")):NOTIFY.index(S(3, "GET nothere"))]
TRACKING = [
    S(3, "FLUSHALL"), S(0, "SUBSCRIBE __redis__:invalidate"), S(1, "HELLO 3"), S(1, "CLIENT TRACKING on BCAST"),
    S(2, "CLIENT TRACKING on BCAST REDIRECT {id:0} PREFIX s PREFIX h NOLOOP"),
    *_WRITES,
    S(2, "SET s1 own"), S(2, "SET x other"),
    S(1, "CLIENT TRACKING off"), S(2, "CLIENT TRACKING off"), S(1, "CLIENT TRACKING on"),
    S(1, "MGET a b c"), S(3, "SET a 1"), S(3, "MSET b 1 c 2 a 3"), S(3, "SET a 4"), S(1, "GET a"),
    S(3, "SELECT %d" % DB_B), S(3, "SET a x"), S(3, "SELECT %d" % DB_A),
    S(1, "GET a"), S(1, "SET a 2"), S(1, "HSET h f 1"), S(1, "HGET h f"), S(1, "HDEL h f"),
    S(1, "MSET a 1 b 2"), S(1, "GET a"), S(1, "MULTI"), S(1, "INCR a"), S(1, "GET b"), S(1, "EXEC"),
    S(1, "MULTI"), S(1, "FLUSHDB"), S(1, "EXEC"),
    S(1, "CLIENT TRACKING on NOLOOP"), S(1, "GET a"), S(1, "SET a 1"), S(3, "SET a 2"),
    S(1, "CLIENT TRACKING on OPTIN"), S(1, "CLIENT TRACKING off"), S(1, "CLIENT TRACKING on OPTIN"),
    S(1, "GET o1"), S(1, "CLIENT CACHING yes"), S(1, "GET o2"), S(3, "MSET o1 1 o2 2"), S(1, "CLIENT TRACKINGINFO"),
    S(2, "CLIENT TRACKING on REDIRECT {id:0}"), S(2, "GET r"), S(3, "SET r 1"),
    S(3, "SET e v PX 50"), S(1, "CLIENT CACHING yes"), S(1, "GET e"), ("sleep", 1.0),
    S(1, "BLMOVE nosrc dst LEFT LEFT 0"), S(3, "RPUSH dst z"), S(2, "LRANGE dst 0 -1"), S(3, "RPUSH nosrc y"),
    S(3, "FLUSHALL"), S(1, "CLIENT TRACKING off"), S(2, "CLIENT TRACKING off"), S(2, "CLIENT TRACKINGINFO"),
]

# ---------------------------------------------------------------------------------------------
# Random scenarios: the same building blocks, mixed. Blocking timeouts are 0 or 30 (never fire).


class RandomGen:
    """A step of a random scenario meant for a connection that is blocked (on Redis, which is
    deterministic) is skipped: two blocked clients with commands queued behind them, released
    by one push, run those commands one after the other in Redis (one thread) but may
    interleave in Larder (a worker thread each), an accepted difference (see the module
    docstring). The scripted scenarios queue commands behind blocked clients one at a time."""

    LISTS = ["l1", "l2", "l3"]
    ZSETS = ["z1", "z2"]
    CHANNELS = ["dm:r1", "dm:r2", "dm:r3"]
    PATTERNS = ["dm:r*", "dm:r[12]", "dm:?2"]

    def __init__(self, seed):
        self.r = random.Random(seed)

    def pick(self, *xs):
        return self.r.choice(xs)

    def lists(self):
        return self.r.sample(self.LISTS, self.r.randint(1, 2))

    def step(self):
        r, pick = self.r, self.pick
        i = r.randrange(CONNS)
        t = pick("0", "30")
        x = r.random()
        lst, z = pick(*self.LISTS), pick(*self.ZSETS)
        val = "v%d" % r.randrange(100)
        if x < 0.22:  # block
            cmd = pick(
                ["BLPOP"] + self.lists() + [t], ["BRPOP"] + self.lists() + [t],
                ["BLMOVE", lst, pick(*self.LISTS), pick("LEFT", "RIGHT"), pick("LEFT", "RIGHT"), t],
                ["BRPOPLPUSH", lst, pick(*self.LISTS), t],
                ["BLMPOP", t, "2", "l1", "l2", pick("LEFT", "RIGHT"), "COUNT", str(r.randint(1, 3))],
                [pick("BZPOPMIN", "BZPOPMAX"), z, t], ["BZMPOP", t, "1", z, pick("MIN", "MAX")],
            )
        elif x < 0.45:  # push / write
            cmd = pick(
                [pick("LPUSH", "RPUSH"), lst] + [val + str(k) for k in range(r.randint(1, 3))],
                ["LMOVE", lst, pick(*self.LISTS), pick("LEFT", "RIGHT"), pick("LEFT", "RIGHT")],
                ["ZADD", z, str(r.randint(1, 9)), val], ["ZADD", z, "1", "a", "2", "b", "3", "c"],
                ["SET", pick(lst, z), "str"], ["DEL", pick(lst, z)], ["LRANGE", lst, "0", "-1"],
                ["ZRANGE", z, "0", "-1", "WITHSCORES"], ["LPOP", lst], ["RPUSH", lst, val, val],
            )
        elif x < 0.52:
            cmd = ["CLIENT", "UNBLOCK", "{id:%d}" % r.randrange(CONNS)] + pick([], ["TIMEOUT"], ["ERROR"])
        elif x < 0.75:  # pub/sub
            ch = pick(*self.CHANNELS)
            cmd = pick(
                ["SUBSCRIBE", ch], ["SUBSCRIBE"] + self.r.sample(self.CHANNELS, 2), ["PSUBSCRIBE", pick(*self.PATTERNS)],
                ["SSUBSCRIBE", ch], ["UNSUBSCRIBE"] + pick([], [ch]), ["PUNSUBSCRIBE"] + pick([], [pick(*self.PATTERNS)]),
                ["SUNSUBSCRIBE"] + pick([], [ch]), ["PUBLISH", ch, val], ["PUBLISH", ch, val], ["SPUBLISH", ch, val],
                ["PUBSUB", "NUMSUB"] + self.CHANNELS, ["PUBSUB", "NUMPAT"], ["PUBSUB", "SHARDNUMSUB", ch], ["PING"],
            )
        elif x < 0.92:  # transactions
            cmd = pick(["MULTI"], ["EXEC"], ["EXEC"], ["DISCARD"], ["WATCH", pick(lst, z)], ["UNWATCH"],
                       ["WATCH", lst, z])
        elif x < 0.96:
            cmd = ["HELLO", pick("2", "3")]
        else:
            cmd = pick(["CLIENT", "KILL", "ID", "{id:%d}" % r.randrange(CONNS)], "quit",
                       ["CLIENT", "REPLY", pick("ON", "SKIP")], ["GET", lst])
            if cmd == "quit":  # replies on first: see QUIT under CLIENT REPLY OFF/SKIP above
                return (i, ["CLIENT", "REPLY", "ON"], ["QUIT"])
        return (i, cmd)

    def scenario(self, steps):
        return [self.step() for _ in range(steps)]


# ---------------------------------------------------------------------------------------------
# Running a scenario on both servers


def show(frames):
    return [f[:300] for f in frames]


class Runner:
    def __init__(self, name):
        self.name = name
        self.ref = Side("redis", int(REF_RESP))
        self.larder = Side("larder", _port("LARDER_RESP_PORT"))
        self.recent = []
        self.step_no = 0
        self.steps_run = 0
        self.failures = []

    def close(self):
        for side in (self.ref, self.larder):
            side.close()

    def start(self):
        for side in (self.ref, self.larder):
            side.reset_dbs()
            for j in range(CONNS):
                side.open(j)

    def fail(self, msg):
        recent = "\n".join(f"    {s!r}" for s in self.recent[-RECENT:-1]) or "    (none)"
        raise Mismatch(f"{self.name}, step {self.step_no}: {msg}\n  the steps before, oldest first:\n{recent}")

    def run(self, steps, skip_blocked=False):
        self.start()
        for step in steps:
            self.step_no += 1
            if skip_blocked and isinstance(step[0], int) and (self.client_state(self.ref, step[0]) or (0,))[0]:
                continue  # see RandomGen: nothing is sent to a blocked connection
            self.recent.append(step)
            self.do(step)
        # the end: nothing more may come from Larder than from Redis
        time.sleep(END_SETTLE)
        self.ref.barrier()
        for j in range(CONNS):
            self.compare_conn(j, ("(end of scenario)",))

    def do(self, step):
        kind = step[0]
        wait = None
        if kind == "reopen":
            for side in (self.ref, self.larder):
                side.open(step[1])
            return
        if kind == "sleep":
            time.sleep(step[1])
            cmds = [("(sleep)",)]
        else:
            if kind == "wait":
                kind, wait, step = step[1], step[2], step[2:]
            i, cmds = kind, step[1:]
            for side in (self.ref, self.larder):
                data = b"".join(resp_command(*[side.render(a) for a in c]) for c in cmds)
                side.conns[i].send(data)
        self.steps_run += 1
        if wait is not None:
            if not self.ref.conns[i].wait_frames(wait, REPLY_TIMEOUT):
                self.fail(f"redis sent connection {i} no {wait} frames in {REPLY_TIMEOUT} s (the test is wrong)")
        self.ref.barrier()
        for j in range(CONNS):
            self.ref.conns[j].pump(0)
        if isinstance(kind, int) and not self.ref.conns[kind].frames:
            self.sync_silent(kind)
        # Larder: as many frames as Redis on every connection, then SETTLE for any extra
        for j in range(CONNS):
            self.larder.conns[j].wait_frames(len(self.ref.conns[j].frames), REPLY_TIMEOUT)
        time.sleep(SETTLE)
        for j in range(CONNS):
            self.compare_conn(j, cmds[-1] if kind == j else ("(another connection's step)",))
        # a connection closed on both servers is reopened
        for j in range(CONNS):
            if self.ref.conns[j].closed and self.larder.conns[j].closed:
                for side in (self.ref, self.larder):
                    side.open(j)

    def client_state(self, side, j):
        """(blocked, last command) of connection j, from CLIENT LIST on the control connection;
        None if it is gone."""
        c = side.conns[j]
        if c.closed:
            return None
        node = tree(side.control.call("CLIENT", "LIST", "ID", c.id))
        text = bulk_text(node) or b""
        fields = dict(f.split("=", 1) for f in text.decode(errors="replace").split() if "=" in f)
        if not fields:
            return None
        # (Not qbuf: Larder leaves what a blocked client sends in the socket, Redis reads it.)
        return ("b" in fields.get("flags", ""), fields.get("cmd"))

    def sync_silent(self, i):
        """Redis gave the sender nothing (it blocked, or its reply is off): before the next step,
        make sure Larder has run the command too, or another connection's next command could
        overtake it there. Polls Larder's CLIENT LIST until the connection is in the state
        Redis's is in (blocked or not, the same last command); if it never gets there, the
        comparison that follows says how it differs."""
        want = self.client_state(self.ref, i)
        if want is None:
            return
        deadline = time.monotonic() + SYNC_TIMEOUT
        while self.client_state(self.larder, i) != want and time.monotonic() < deadline:
            time.sleep(0.002)

    def compare_conn(self, j, cmd):
        rc, lc = self.ref.conns[j], self.larder.conns[j]
        lc.pump(0)
        a, b = lc.take(), rc.take()
        if a == b or equivalent(list(cmd), a, b):
            return
        late = ""
        if len(a) > len(b) and b == a[: len(b)]:
            late = " (Larder sent more: it may be a late frame of an earlier step)"
        if os.environ.get("LARDER_DIFF_MULTI_CONTINUE"):  # development: report all, fail at the end
            self.failures.append((self.step_no, j, list(cmd), show(a), show(b)))
            print(f"MISMATCH {self.name} step {self.step_no} conn {j} {list(cmd)!r}\n  larder {show(a)!r}\n"
                  f"  redis  {show(b)!r}")
            return
        self.fail(
            f"connection {j} after {list(cmd)!r}{late}:\n"
            f"  larder: {show(a)!r}\n"
            f"  redis:  {show(b)!r}"
        )


def run_scenario(name, steps, skip_blocked=False):
    runner = Runner(name)
    try:
        runner.run(steps, skip_blocked)
    finally:
        runner.close()
    assert not runner.failures, f"{len(runner.failures)} mismatches (printed above)"
    return runner.steps_run


@pytest.mark.parametrize("name", list(SCRIPTED))
def test_multi_scripted(name):
    run_scenario(name, SCRIPTED[name])


@pytest.mark.parametrize("seed", SEEDS)
def test_multi_random(seed):
    run_scenario(f"random seed {seed} (rerun: LARDER_DIFF_SEEDS={seed}-{seed})",
                 RandomGen(seed).scenario(RANDOM_STEPS), skip_blocked=True)


def test_multi_tracking():
    run_scenario("client-side-caching", TRACKING)


def test_multi_notifications():
    try:
        run_scenario("keyspace-notifications", NOTIFY)
    finally:
        for port in (int(REF_RESP), _port("LARDER_RESP_PORT")):
            c = Client(port)
            c.call("CONFIG", "SET", "notify-keyspace-events", "")
            c.close()
