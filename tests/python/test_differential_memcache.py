"""Differential test, memcached: random batches of text and meta requests sent to Larder and to
a real memcached 1.6, the reply bytes compared batch by batch.

Runs when LARDER_REF_MC_PORT names a memcached (scripts/test.sh starts one). Each case is one
seed; a failure names the seed, the batch, the requests and both servers' replies. More seeds:
LARDER_DIFF_SEEDS (see tests/python/conftest.py: diff_seeds).

Each batch is written at once (a pipeline of 1 to 5 requests) and followed by a sentinel, `ma`
of a missing key with a unique opaque, whose NF reply marks the end of the batch's replies: no
reply is read by waiting for a quiet line. A request that leaves the server waiting for more
data (a declared length past the data sent) is followed by `mn` for it to eat instead.

Isolation: every case starts with flush_all (each other test's keys are its own and none
outlives its test) and works on a few keys of its own; flush_all is also among the requests.

Compared byte for byte after normalising:
- CAS values: each server's are numbered in order of first appearance, and a request's CAS
  token names one of those numbers (so `cas` and `C` can succeed);
- `t` (seconds left): equal when -1, else within T_SLACK (the clocks tick apart); memcached
  prints an already-expired item's `t` wrapped to 32 bits (accepted: anything goes there);
- `l` (seconds since the last access) and `me` (debug output with times): not compared;
- `h` (fetched before): not compared, Larder does not track the fetched bit (always h0, see
  crates/server/src/families/memcache.rs);
- VERSION lines (Larder and the reference differ in version);
- `k` with `b`: the key is decoded (accepted: memcached echoes a key base64 per how it was
  stored, Larder per the request).
Not generated (known accepted differences): the E flag and md's x flag (Larder speaks meta as
of 1.6.21, the reference is 1.6.18); a get line past the first of a pipeline with a key over
250 bytes (memcached drops the replies queued before it); an O token over 32 bytes in mg/ma,
and gat with an over-long key after other keys (memcached applies side effects before the
error); incr/decr/ma of a value memcached reads past the end of (all whitespace, or a number
from 2**63 up: deleted before each; see McDiff.defuse); ma with T
(memcached's result is wrong when the number grows); an incr/decr/ma after a get in the same
pipeline (the get shows the in-place result with memcached's padding): an incr, decr or ma
always starts a batch.
"""

import base64
import os
import random
import re
import socket
import time

import pytest

from conftest import HOST, _port, diff_seeds

REF_MC = os.environ.get("LARDER_REF_MC_PORT")

SEEDS = diff_seeds(default=20)
BATCHES = int(os.environ.get("LARDER_DIFF_BATCHES", "500"))
FLUSH_EVERY = 50  # batches
T_SLACK = 2
REPLY_TIMEOUT = 10.0  # seconds for a batch's replies; only a stuck server takes this long

pytestmark = pytest.mark.skipif(not REF_MC, reason="LARDER_REF_MC_PORT not set (no reference memcached)")


# ---------------------------------------------------------------------------------------------
# The generator: functions of a seeded random.Random (and a fixed `now` for absolute times).

KEYS = [b"a", b"b", b"c", b"n", b"k\x01", b"\xc3\xa9"]
B64 = {k: base64.b64encode(k) for k in KEYS}
ALPHABET = b"abcdefghxyz0123456789 \t\x00"
FILLER = b"mn\r\n"  # eaten (in part) by a request that declared more data than it sent


def rkey(r):
    x = r.random()
    if x < 0.9:
        return r.choice(KEYS)
    if x < 0.95:
        return b"x" * r.choice([249, 250, 251, 300])
    return r.choice([b"", b"a\tb", b"a\rb", b"\x7f", b"a\x00b"])


def rval(r):
    x = r.random()
    if x < 0.35:
        return str(r.choice([0, 1, 9, 10, 99, 100, 999, 2**64 - 1, 2**64 - 2, 2**63, 2**63 - 1])).encode()
    if x < 0.45:
        return r.choice([b"-1", b"-0", b" 5", b"5 ", b"+5", b"12abc", b"", b"0000000000000000000000000000012",
                         b"18446744073709551616"])
    return bytes(r.choice(ALPHABET) for _ in range(r.choice([0, 1, 2, 5, 20, 100])))


def rflags(r):
    return r.choice([b"0", b"0", b"1", b"42", b"4294967295", b"4294967296", b"-1", b"x", b"18446744073709551615",
                     b"99999999999999999999"])


def rexp(r, now):
    # Relative TTLs of 100 s or more, absolute ones 5000 s away: nothing expires while a case runs.
    return r.choice([b"0", b"0", b"0", b"1000", b"-1", b"100", b"2592000", b"2592001", b"%d" % (now + 5000),
                     b"%d" % (now - 5000), b"x", b"2147483648", b"-2147483649", b"99999999999999999999"])


def rnum(r):
    return r.choice([b"1", b"0", b"5", b"100", b"18446744073709551615", b"18446744073709551616", b"-1", b"abc",
                     b"9223372036854775808", b"2"])


def rcas(r):
    """A CAS token: {casN} stands for the N-th CAS value the server showed, else a junk number."""
    if r.random() < 0.6:
        return b"{cas%d}" % r.randrange(0, 30)
    return r.choice([b"0", b"99999999999", b"-1", b"x", b"18446744073709551615", b"18446744073709551616"])


def data_block(r, line, val):
    """A request line and its data: mostly right, sometimes a bad chunk. Each ends in a newline,
    whether the server reads the data as data or, after a bad request line, as a command."""
    x = r.random()
    if x < 0.01:
        return line + val + b"XY\r\n"
    if x < 0.02:
        return line + val + b"Z\r\n"
    if x < 0.03:
        return line + val + r.choice([b"\n", b"\r"]) + FILLER  # one byte short: it eats the filler's first
    return line + val + b"\r\n"


def storage(r, now):
    cmd = r.choice([b"set", b"set", b"add", b"replace", b"append", b"prepend", b"cas"])
    val = rval(r)
    n, short = len(val), False
    length = str(n).encode()
    if r.random() < 0.05:
        length = r.choice([b"%d" % (n + 1), b"%d" % max(0, n - 1), b"-1", b"abc", b"4294967296", b"2147483647"])
        short = length == b"%d" % (n + 1)
    parts = [cmd, rkey(r), rflags(r) if r.random() < 0.3 else b"0", rexp(r, now) if r.random() < 0.3 else b"0",
             length]
    if cmd == b"cas":
        parts.append(rcas(r))
    if r.random() < 0.15:
        parts.append(b"noreply")
    if r.random() < 0.03:
        parts.append(r.choice([b"noreplyx", b"extra", b"noreply"]))
    if r.random() < 0.03:
        parts = parts[: r.randrange(1, len(parts))]
    return data_block(r, b" ".join(parts) + b"\r\n", val) + (FILLER if short else b"")


def retrieval(r, now):
    cmd = r.choice([b"get", b"gets", b"gat", b"gats", b"get", b"gets"])
    keys = [rkey(r) for _ in range(r.choice([0, 1, 1, 1, 2, 3]))]
    if cmd.startswith(b"gat") and len(keys) > 1:
        keys = [k if len(k) <= 250 else b"a" for k in keys]  # accepted: memcached touches the keys before
    parts = [cmd] + ([rexp(r, now) if r.random() < 0.7 else b"100"] if cmd.startswith(b"gat") else [])
    return b" ".join(parts + keys) + b"\r\n"


def arith(r, now):
    parts = [r.choice([b"incr", b"decr"]), rkey(r), rnum(r)]
    if r.random() < 0.15:
        parts.append(b"noreply")
    if r.random() < 0.03:
        parts = parts[: r.randrange(1, len(parts))]
    return b" ".join(parts) + b"\r\n"


MISC_LINES = [
    b"bogus\r\n", b"\r\n", b"x\r\n", b" \r\n", b"GET a\r\n", b"gett a\r\n", b"m\r\n", b"mz a\r\n", b"sets a 0 0 1\r\n",
    b"incr\r\n", b"touch a\r\n", b"mn extra\r\n", b"version extra\r\n", b"me\r\n", b"me a\r\n", b"me YQ== b\r\n",
    b"stats nosuch\r\n", b"stats detail\r\n", b"quit\r\n", b"mg\r\n", b"ms\r\n", b"md\r\n", b"ma\r\n", b"ms a\r\n",
    b"ms a 1\r\n1\r\n", b"mg a " + b" ".join([b"v"] * 20) + b"\r\n", b"mg a v k c f t s O1 q u T10 N10 R10 b l h\r\n",
    b"mg a v k c f t s O1 q u T10 N10 R10 l h P L\r\n", b"ms a 1 k c O1 q T10 F1 I MS s v t f b P L\r\n1\r\n",
    b"ma a k c O1 q N10 J1 D1 MI v t s f P L\r\n", b"md a k O1 q T10 I C1 P L s v t f c N10\r\n", b"gat 100\r\n",
    b"gats\r\n", b"cas a 0 0 1\r\nx\r\n", b"  get a\r\n", b"get a  b\r\n", b"\n", b"get a\n",
]


def misc(r, now):
    x = r.randrange(0, 9)
    if x == 0:
        return b" ".join([b"touch", rkey(r), rexp(r, now)] + ([b"noreply"] if r.random() < 0.15 else [])) + b"\r\n"
    if x == 1:
        parts = [b"delete", rkey(r)]
        if r.random() < 0.15:
            parts.append(r.choice([b"0", b"1", b"noreply"]))
        if r.random() < 0.1:
            parts.append(b"noreply")
        return b" ".join(parts) + b"\r\n"
    if x == 2:
        return r.choice([b"flush_all\r\n", b"flush_all 0\r\n", b"flush_all noreply\r\n", b"flush_all -1\r\n",
                         b"flush_all x\r\n", b"flush_all 0 noreply\r\n", b"flush_all 1 2 3\r\n"])
    if x == 3:
        return r.choice([b"verbosity 1\r\n", b"verbosity\r\n", b"verbosity x\r\n", b"verbosity 1 noreply\r\n",
                         b"verbosity 1 2 3\r\n"])
    if x == 4:
        return r.choice(MISC_LINES)
    return b"mn\r\n"


def flag_token(r, f, now):
    if f == b"O":
        # Up to 32 bytes: over that, memcached's mg/ma apply T, N and the arithmetic before
        # failing (accepted difference).
        return b"O" + r.choice([b"", b"x", b"123", b"a" * 31])
    if f in (b"T", b"N"):
        return f + r.choice([b"0", b"100", b"-1", b"1000", b"x", b"", b"2592001"])
    if f == b"R":
        # Recache thresholds away from every TTL given (100, 1000, 5000 s, 30 days): at a TTL
        # the answer would depend on when each server's clock ticks.
        return f + r.choice([b"0", b"50", b"-1", b"500", b"x", b"", b"2000", b"2592001"])
    if f == b"C":
        return b"C" + rcas(r)
    if f == b"F":
        return b"F" + rflags(r)
    if f in (b"D", b"J"):
        return f + rnum(r)
    return f


def meta_key(r, flags):
    k = rkey(r)
    if b"b" not in flags:
        return k
    if r.random() < 0.85:
        return B64.get(k, base64.b64encode(k[:200]))
    return r.choice([b"!!!", b"YQ", b"YQ=", b"Y", b"====", b"YWJj"])


def pick_flags(r, pool, most):
    flags = r.sample(pool, min(r.randrange(0, most + 1), len(pool)))
    if r.random() < 0.03 and flags:
        flags.append(flags[0])  # a duplicate
    if r.random() < 0.02:
        flags.append(r.choice([b"Z", b"!", b"\x80", b"y"]))
    return flags


MG_FLAGS = [b"v", b"k", b"c", b"f", b"t", b"s", b"h", b"l", b"q", b"O", b"T", b"N", b"b", b"u", b"R"]
MS_FLAGS = [b"k", b"c", b"O", b"q", b"T", b"F", b"C", b"I", b"M", b"b", b"s", b"v"]
MD_FLAGS = [b"q", b"I", b"T", b"C", b"k", b"O", b"b"]
# No T: memcached's ma with T gets the result wrong when the number grows (accepted difference).
MA_FLAGS = [b"N", b"J", b"D", b"M", b"q", b"k", b"O", b"c", b"t", b"v", b"b", b"C"]
MODES = {b"ms": [b"S", b"E", b"A", b"P", b"R", b"s", b"e", b"a", b"p", b"r", b"X", b"", b"SS"],
         b"ma": [b"I", b"D", b"+", b"-", b"i", b"d", b"X", b"", b"II"]}


def meta(r, now, cmd, pool, most):
    flags = pick_flags(r, pool, most)
    tokens = [b"M" + r.choice(MODES[cmd]) if f == b"M" else flag_token(r, f, now) for f in flags]
    key = meta_key(r, flags)
    if not key and tokens and tokens[0][:1] == b"C":
        tokens.append(tokens.pop(0))  # the first flag stands for an empty key: not a CAS, each server's own
    return [cmd, key], tokens


def mg(r, now):
    head, tokens = meta(r, now, b"mg", MG_FLAGS, 7)
    return b" ".join(head + tokens) + b"\r\n"


def md(r, now):
    head, tokens = meta(r, now, b"md", MD_FLAGS, 4)
    return b" ".join(head + tokens) + b"\r\n"


def ma(r, now):
    head, tokens = meta(r, now, b"ma", MA_FLAGS, 6)
    return b" ".join(head + tokens) + b"\r\n"


def ms(r, now):
    head, tokens = meta(r, now, b"ms", MS_FLAGS, 6)
    val = rval(r)
    length, short = b"%d" % len(val), False
    if r.random() < 0.04:
        length = r.choice([b"-1", b"x", b"%d" % (len(val) + 1), b""])
        short = length == b"%d" % (len(val) + 1)
    line = b" ".join(head + ([length] if length else []) + tokens) + b"\r\n"
    if r.random() < 0.03:
        return line + val + b"XX\r\n"
    return line + val + b"\r\n" + (FILLER if short else b"")


GENERATORS = [(storage, 25), (retrieval, 15), (arith, 10), (misc, 8), (mg, 15), (ms, 12), (md, 6), (ma, 10)]
GENERATOR_LIST = [g for g, weight in GENERATORS for _ in range(weight)]
RETRIEVALS = (b"get", b"gets", b"gat", b"gats", b"mg")
ARITHMETIC = (b"incr", b"decr", b"ma")


def first_word(request):
    return request.split(b" ", 1)[0].split(b"\r", 1)[0]


def random_batches(r, now):
    """A pipeline of requests, cut into batches each written at once: an incr, decr or ma starts
    a batch (see McDiff.defuse; and a get before it would show memcached's in-place padding)."""
    reqs = [r.choice(GENERATOR_LIST)(r, now) for _ in range(r.choice([1, 1, 1, 2, 3, 5]))]
    for i in range(1, len(reqs)):
        if reqs[i][:1] in b"gb" and any(len(t) > 250 for t in reqs[i].split(b" ")):
            reqs[i] = b"get a\r\n"  # accepted: memcached drops the replies before such a get
    batches = []
    for req in reqs:
        if not batches or first_word(req) in ARITHMETIC:
            batches.append([])
        batches[-1].append(req)
    return batches


# Every key an incr, decr or ma can name (see rkey).
ARITHMETIC_KEYS = KEYS + [b"x" * 249, b"x" * 250, b"a\tb", b"a\rb", b"\x7f", b"a\x00b"]
SPACE = b" \t\n\v\f\r"


def unparsable_by_memcached(value):
    """Whether memcached's incr reads this value past its end (safe_strtoull): when it is all
    whitespace (strtoull skips on), or a number in [2**63, 2**64) without a '-' in it (it then
    looks for a '-' with strchr, past the value into whatever memory follows)."""
    if value and not value.strip(SPACE):
        return True
    rest = value.lstrip(SPACE)
    rest = rest[1:] if rest[:1] == b"+" else rest
    digits = re.match(rb"[0-9]*", rest).group()
    after = rest[len(digits) : len(digits) + 1]
    ends = after == b"" or after in SPACE or after == b"\0"
    return bool(digits) and ends and b"-" not in value and 2**63 <= int(digits) < 2**64


# ---------------------------------------------------------------------------------------------
# Talking to a server, and normalising what it says.


def meta_key_token(key):
    """A key for a meta request: as it is, or base64 with the b flag if it has odd bytes."""
    if all(0x21 <= c <= 0x7E for c in key):
        return key
    return base64.b64encode(key) + b" b"


def meta_values(reply):
    """The values in a reply to mg requests with v: bytes for VA, None for EN."""
    out, i = [], 0
    while i < len(reply):
        nl = reply.index(b"\r\n", i)
        line = reply[i:nl].split(b" ")
        i = nl + 2
        if line[0] == b"VA":  # VA <size> [flags]
            n = int(line[1])
            out.append(reply[i : i + n])
            i += n + 2
        else:
            assert line[0] in (b"EN", b"HD"), reply
            out.append(None)
    return out


class CasNumbers:
    """Maps a server's CAS values to numbers in order of first appearance, and back."""

    def __init__(self):
        self.ids, self.values = {}, {}

    def canonical(self, value):
        value = int(value)
        if value not in self.ids:
            self.ids[value] = len(self.ids)
            self.values[self.ids[value]] = value
        return b"#%d" % self.ids[value]

    def substitute(self, request):
        return re.sub(rb"\{cas(\d+)\}", lambda m: b"%d" % self.values.get(int(m.group(1)), 77777777777), request)


class McConn:
    """A connection that writes a batch and its sentinel and reads up to the sentinel's reply."""

    def __init__(self, port):
        self.port, self.s, self.seq = port, None, 0

    def exchange(self, batch):
        if self.s is None:
            self.s = socket.create_connection((HOST, self.port), timeout=REPLY_TIMEOUT)
        self.seq += 1
        tag = b"NF Osentinel%d\r\n" % self.seq
        try:
            self.s.sendall(batch + b"ma sentinel-missing Osentinel%d\r\n" % self.seq)
        except OSError:
            self.close()
            return b"<closed>"
        out, deadline = b"", time.monotonic() + REPLY_TIMEOUT
        while not out.endswith(tag):
            try:
                self.s.settimeout(max(0.01, deadline - time.monotonic()))
                data = self.s.recv(1 << 20)
            except socket.timeout:
                return out + b"<no reply to the sentinel in %ds>" % REPLY_TIMEOUT
            except OSError:
                data = b""
            if not data:
                self.close()
                return out + b"<closed>"
            out += data
        return out[: -len(tag)]

    def close(self):
        if self.s is not None:
            self.s.close()
            self.s = None


META_CODES = (b"HD", b"VA", b"EN", b"NF", b"NS", b"EX")


def decoded_key(token):
    if token[:1] == b"k":
        try:
            return b"k" + base64.b64decode(token[1:], validate=True)
        except ValueError:
            pass
    return token


def normalise_meta(tokens, cas):
    if b"b" in tokens:  # accepted: the key echoed in base64 or not, per server
        tokens = [decoded_key(t) for t in tokens if t != b"b"]
    out = []
    for t in tokens:
        if t[:1] == b"c" and t[1:].isdigit():
            t = b"c" + cas.canonical(t[1:])
        elif t in (b"h0", b"h1") or (t[:1] == b"l" and t[1:].isdigit()):
            t = t[:1] + b"?"
        out.append(t)
    return out


def normalise(data, cas):
    """The reply lines, each a list of tokens, with CAS values numbered (see CasNumbers)."""
    lines, out, data_next = data.split(b"\r\n"), [], False
    for line in lines:
        if data_next:
            out.append([line])  # a value's data, as it is
            data_next = False
            continue
        tokens = line.split(b" ")
        if tokens[0] == b"VALUE" and len(tokens) >= 4:
            if len(tokens) == 5 and tokens[4].isdigit():
                tokens[4] = cas.canonical(tokens[4])
            data_next = True
        elif tokens[0] in META_CODES:
            head = 2 if tokens[0] == b"VA" else 1
            data_next = tokens[0] == b"VA"
            tokens = tokens[:head] + normalise_meta(tokens[head:], cas)
        elif tokens[0] == b"ME":
            tokens = [b"ME", b"<debug>"]
        elif tokens[0] == b"VERSION":
            tokens = [b"VERSION", b"<version>"]
        out.append(tokens)
    return out


def ttl_left(token):
    if token[:1] == b"t":
        try:
            return int(token[1:])
        except ValueError:
            return None
    return None


def same_token(x, y):
    if x == y:
        return True
    tx, ty = ttl_left(x), ttl_left(y)
    if tx is None or ty is None:
        return False
    if tx >= 2**31 or ty >= 2**31:
        return True  # accepted: memcached prints an already-expired item's t wrapped to 32 bits
    return tx >= 0 and ty >= 0 and abs(tx - ty) <= T_SLACK


def same_replies(a, b):
    if len(a) != len(b):
        return False
    return all(len(x) == len(y) and all(map(same_token, x, y)) for x, y in zip(a, b))


# ---------------------------------------------------------------------------------------------


class McDiff:
    def __init__(self, seed):
        self.seed = seed
        self.r = random.Random(seed)
        self.now = int(time.time())
        self.larder, self.ref = McConn(_port("LARDER_MC_PORT")), McConn(int(REF_MC))

    def close(self):
        self.larder.close()
        self.ref.close()

    def flush(self):
        for c in (self.larder, self.ref):
            assert c.exchange(b"flush_all\r\n") == b"OK\r\n", f"flush_all on port {c.port}"
        self.cas_larder, self.cas_ref = CasNumbers(), CasNumbers()

    def run(self, batches):
        for n in range(batches):
            if n % FLUSH_EVERY == 0:
                self.flush()
            for batch in random_batches(self.r, self.now):
                if first_word(batch[0]) in ARITHMETIC:
                    self.defuse(n)
                self.compare(n, b"".join(batch))

    def defuse(self, n):
        """Before an incr, decr or ma: deletes (from both servers) the values memcached would
        read past the end of (accepted difference: its reply depends on stale memory). Read
        with mg on both (it has side effects: on a stale item, the win token)."""
        keys = [meta_key_token(k) for k in ARITHMETIC_KEYS]
        reply = self.compare(n, b"".join(b"mg %s v\r\n" % k for k in keys))
        for key, value in zip(keys, meta_values(reply)):
            if value is not None and unparsable_by_memcached(value):
                for c in (self.larder, self.ref):
                    assert c.exchange(b"md %s q\r\n" % key) == b"", f"md {key!r} on port {c.port}"

    def compare(self, n, request):
        a = self.larder.exchange(self.cas_larder.substitute(request))
        b = self.ref.exchange(self.cas_ref.substitute(request))
        # Normalised even when equal: that numbers the CAS values for the requests to come.
        if same_replies(normalise(a, self.cas_larder), normalise(b, self.cas_ref)):
            return a
        raise AssertionError(
            f"seed {self.seed}, batch {n}: requests {request[:300]!r}: larder {a[:200]!r}, memcached {b[:200]!r}\n"
            f"  requests:  {request!r}\n"
            f"  larder:    {a[:1000]!r}\n"
            f"  memcached: {b[:1000]!r}\n"
            f"  rerun: LARDER_DIFF_SEEDS={self.seed}-{self.seed} .venv/bin/pytest "
            f"tests/python/test_differential_memcache.py"
        )


@pytest.mark.parametrize("seed", SEEDS)
def test_memcache_differential(seed):
    case = McDiff(seed)
    try:
        case.run(BATCHES)
    finally:
        case.close()
