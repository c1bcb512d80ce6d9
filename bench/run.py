#!/usr/bin/env python3
"""Larder side by side with Redis and memcached: the scenarios of ../shared/BENCHMARKS.md.

    bench/run.py all                 every scenario (about 25 minutes on a 2-core machine)
    bench/run.py latency clients     some scenarios
    bench/run.py --quick all         a smoke test of everything (a minute or two)
    bench/run.py --report            rebuild REPORT.md and the plots from the JSON files
    bench/run.py --list              the scenarios

One command does everything: installs redis-server, memcached and the reference clients from
the distribution's packages if they are missing (apt-get), creates bench/.venv with
matplotlib, builds Larder in release mode, then runs each scenario:

- every server is started by the harness on free loopback ports, pinned to core 0
  (`taskset`), one thread each: Larder `--threads 1`, memcached `-t 1`, Redis (single
  threaded, io-threads off); persistence off unless the scenario is about it;
- the client, `larder bench` (one tool for every server), is pinned to core 1;
- servers alternate run by run (A B C, B C A, ...), at least 3 runs; medians, min and max
  are reported, and ratios are computed run by run;
- each server's CPU time (utime + stime from /proc/PID/stat) is read before and after each
  measurement, and its resident memory from /proc/PID/status;
- `larder server --floor` (same event loop and parsers, no keyspace) runs alongside where it
  applies: the network path alone, the limit no server can beat on this machine.

Every server is in its own process group, dies with the harness (PR_SET_PDEATHSIG), and is
stopped in `finally` blocks and on SIGINT/SIGTERM/SIGHUP. A scenario that fails is recorded
(which and why) in its JSON file and the report, the next one runs, and the exit code is 1.

Output in bench/results/: <scenario>.json (every figure, the commit, the machine, every
parameter), PNG plots, REPORT.md (tables and ratios), history.csv (one line per commit per
scenario) and history.png.
"""
import argparse
import csv
import ctypes
import datetime
import json
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
RESULTS = os.environ.get("LARDER_BENCH_RESULTS") or os.path.join(BENCH, "results")
VENV = os.path.join(BENCH, ".venv")
LARDER = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "larder")
SERVER_CORE = "0"
CLIENT_CORE = "1"
CLK = os.sysconf("SC_CLK_TCK")
# Every process the harness starts carries this in its environment, so a test can prove none
# is left behind.
TAG_VAR = "LARDER_BENCH_TAG"
# Extra arguments for every `larder server` the harness starts (to compare settings side by side).
LARDER_EXTRA = os.environ.get("LARDER_SERVER_ARGS", "").split()
TAG = os.environ.get(TAG_VAR) or f"bench-{os.getpid()}-{int(time.time())}"

# Targets: (server kind, protocol). Larder is compared with Redis over RESP and with
# memcached over the memcached text protocol; the floor runs both protocols.
TARGETS = {
    "larder-resp": ("larder", "resp"),
    "redis": ("redis", "resp"),
    "larder-mc": ("larder", "memcache"),
    "memcached": ("memcached", "memcache"),
    "floor-resp": ("floor", "resp"),
    "floor-mc": ("floor", "memcache"),
}
LABELS = {
    "larder-resp": "Larder (RESP)",
    "redis": "Redis",
    "larder-mc": "Larder (memcached)",
    "memcached": "memcached",
    "floor-resp": "floor (RESP)",
    "floor-mc": "floor (memcached)",
}
COLORS = {
    "larder-resp": "#1f77b4",
    "redis": "#d62728",
    "larder-mc": "#2ca02c",
    "memcached": "#ff7f0e",
    "floor-resp": "#7f7f7f",
    "floor-mc": "#bcbd22",
}
PEERS = [("larder-resp", "redis"), ("larder-mc", "memcached")]
FOUR = ["larder-resp", "redis", "larder-mc", "memcached"]
SIX = FOUR + ["floor-resp", "floor-mc"]


class ScenarioError(Exception):
    pass


# ---------------------------------------------------------------------------------------
# Processes: every one the harness starts is registered, and stopped whatever happens.

_live = []


def _pdeathsig():
    """In the child before exec: die with the harness, even if it is SIGKILLed."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _env():
    e = dict(os.environ)
    e[TAG_VAR] = TAG
    return e


def stop_all():
    for p in list(_live):
        _stop_proc(p)


def _stop_proc(p):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(5)
    if p in _live:
        _live.remove(p)


def _on_signal(sig, _frame):
    stop_all()
    raise SystemExit(128 + sig)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, log, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            raise ScenarioError(f"server exited with {proc.returncode}: {tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise ScenarioError(f"port {port} did not open in {timeout} s: {tail(log)}")


def tail(path, n=400):
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:].strip()
    except OSError:
        return ""


class Server:
    """One server process pinned to SERVER_CORE; a context manager that always stops it."""

    def __init__(self, kind, extra=(), floor_size=32, workdir=None):
        self.kind = kind
        self.ports = {}
        self.workdir = workdir or tempfile.mkdtemp(prefix="larder-bench-")
        self.log = os.path.join(self.workdir, f"{kind}.log")
        if kind in ("larder", "floor"):
            self.ports = {"resp": free_port(), "memcache": free_port()}
            while self.ports["memcache"] == self.ports["resp"]:  # one port can't serve both
                self.ports["memcache"] = free_port()
            cmd = [LARDER, "server", "--threads", "1", "--port", str(self.ports["resp"]),
                   "--memcache-port", str(self.ports["memcache"])] + LARDER_EXTRA
            if kind == "floor":
                cmd += ["--floor", "--floor-value-size", str(floor_size)]
        elif kind == "redis":
            p = free_port()
            self.ports = {"resp": p}
            cmd = ["redis-server", "--port", str(p), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--daemonize", "no", "--io-threads", "1", "--dir", self.workdir, "--logfile", ""]
        elif kind == "memcached":
            p = free_port()
            self.ports = {"memcache": p}
            cmd = ["memcached", "-l", "127.0.0.1", "-p", str(p), "-U", "0", "-t", "1", "-m", "8192", "-c", "4096"]
            if os.getuid() == 0:
                cmd += ["-u", "root"]
        else:
            raise ValueError(kind)
        self.cmd = cmd + list(extra)
        self.proc = None

    def __enter__(self):
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(["taskset", "-c", SERVER_CORE] + self.cmd, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=_pdeathsig, env=_env(), cwd=self.workdir)
        _live.append(self.proc)
        for p in self.ports.values():
            wait_port(p, self.proc, self.log)
        return self

    def __exit__(self, *exc):
        _stop_proc(self.proc)
        shutil.rmtree(self.workdir, ignore_errors=True)
        return False

    def port(self, proto):
        return self.ports[proto]

    def cpu(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK

    def rss(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0


def run_client(cmd, timeout):
    """A client process pinned to CLIENT_CORE, registered like the servers."""
    p = subprocess.Popen(["taskset", "-c", CLIENT_CORE] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=_pdeathsig, env=_env())
    _live.append(p)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_proc(p)
        raise ScenarioError(f"client timed out after {timeout} s: {' '.join(cmd)}")
    finally:
        _stop_proc(p)
    return p.returncode, out, err


def bench(srv, proto, timeout=600, **kw):
    """Runs `larder bench` against one server; returns its JSON plus the server's CPU time."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="larder-bench-")
    os.close(fd)
    args = [LARDER, "bench", "--protocol", proto, "--port", str(srv.port(proto)), "--no-progress", "--json", path]
    for k, v in kw.items():
        flag = "--" + k.replace("_", "-")
        if v is True:
            args.append(flag)
        elif v is not None and v is not False:
            args += [flag, str(v)]
    try:
        c0 = srv.cpu()
        rc, out, err = run_client(args, timeout)
        c1 = srv.cpu()
        if rc != 0:
            log = tail(srv.log, 600)
            raise ScenarioError(f"larder bench failed against {srv.kind} ({proto}): {err.strip()[-600:]}\n  command: {' '.join(args)}"
                                + (f"\n  server log: {log}" if log else ""))
        with open(path) as f:
            j = json.load(f)
    finally:
        os.unlink(path)
    j["server_cpu_s"] = c1 - c0
    j["cpu_us_per_op"] = (c1 - c0) * 1e6 / j["ops"] if j["ops"] else None
    return j


def preload(srv, proto, keys, size=32, prefix="key:", key_len=0):
    """Writes keys 0..keys-1 once each (pipelined), so reads hit and can be verified."""
    return bench(srv, proto, threads=1, clients=4, pipeline=16, ratio="1:0", key_pattern="P", requests=keys,
                 key_min=0, key_max=keys - 1, data_size=size, key_prefix=prefix, key_len=key_len)


def figures(j, keep_timeline=False):
    """The figures of one run worth keeping in the scenario file."""
    lat = j["latency_us"]
    d = {
        "ops": j["ops"], "ops_per_sec": j["ops_per_sec"], "elapsed_s": j["elapsed_s"],
        "keys_read_per_sec": j["keys_read_per_sec"], "hits": j["hits"], "misses": j["misses"],
        "bytes_per_sec": (j["bytes_sent"] + j["bytes_received"]) / j["elapsed_s"] if j["elapsed_s"] else 0,
        "server_cpu_s": j["server_cpu_s"], "cpu_us_per_op": j["cpu_us_per_op"],
        "lat_all": lat["all"], "lat_set": lat["set"], "lat_read": lat["read"],
    }
    if keep_timeline:
        d["timeline"] = [[b["t"], b["ops_per_sec"], b["mean_us"], b["max_us"]] for b in j["timeline"]]
    return d


def rotate(items, r):
    r %= len(items)
    return items[r:] + items[:r]


# ---------------------------------------------------------------------------------------
# Scenarios. Each returns {"params", "rows", "notes"}; a row is one measurement: target,
# run, the point (op, connections, size, ...) and its figures.

def sc_latency(c):
    keys, dur = 10_000, (0.5 if c.quick else 3.0)
    params = dict(threads=1, clients=1, pipeline=1, data_size=32, keys=keys, duration_s=dur, warmup_s=0.2,
                  ops=["SET (1:0)", "GET (0:1)"], targets=SIX)
    rows = []
    for r in range(c.runs):
        for t in rotate(SIX, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                preload(s, proto, keys)
                for op, ratio in (("SET", "1:0"), ("GET", "0:1")):
                    j = bench(s, proto, threads=1, clients=1, ratio=ratio, duration=dur, warmup=0.2, key_max=keys - 1,
                              verify=kind != "floor")
                    rows.append(dict(target=t, run=r, op=op, **figures(j)))
                    c.say(f"latency run {r} {t:12} {op}: p50 {j['latency_us']['all']['p50']:.1f} µs, "
                          f"p99 {j['latency_us']['all']['p99']:.1f} µs")
    return dict(params=params, rows=rows, notes=["1 client thread, 1 connection: one request in flight at a time."])


def sc_throughput(c):
    keys = 100_000
    threads, clients = 4, (10 if c.quick else 50)
    dur, warm = (1.0 if c.quick else 8.0), (0.2 if c.quick else 1.0)
    params = dict(threads=threads, clients=clients, connections=threads * clients, pipeline=1, ratio="1:10",
                  data_size=32, keys=keys, duration_s=dur, warmup_s=warm, interval_ms=250, targets=SIX)
    rows = []
    for r in range(c.runs):
        for t in rotate(SIX, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                preload(s, proto, keys)
                j = bench(s, proto, threads=threads, clients=clients, ratio="1:10", duration=dur, warmup=warm,
                          key_max=keys - 1, interval_ms=250, verify=kind != "floor")
                f = figures(j, keep_timeline=True)
                f["dip"] = deepest_dip([b[1] for b in f["timeline"]])
                rows.append(dict(target=t, run=r, **f))
                c.say(f"throughput run {r} {t:12} {j['ops_per_sec']:10.0f} ops/s  {f['cpu_us_per_op'] or 0:.2f} µs CPU/op  dip {f['dip']:.0%}")
    return dict(params=params, rows=rows, notes=[
        f"Scaled down: {dur:g} s per run (after {warm:g} s warm-up) instead of minutes; timeline in 250 ms intervals."])


def deepest_dip(series):
    """1 - (lowest interval / median interval), the first and last (partial) intervals left out."""
    s = series[1:-1] if len(series) > 3 else series
    if not s:
        return 0.0
    med = statistics.median(s)
    return 1 - min(s) / med if med else 0.0


def windows_below(series, frac):
    """Intervals more than `frac` below the median interval, first and last left out as in deepest_dip."""
    s = series[1:-1] if len(series) > 3 else series
    if not s:
        return 0
    med = statistics.median(s)
    return sum(1 for x in s if x < (1 - frac) * med)


def sc_scaling(c):
    keys = 100_000
    threads_list = [1, 2] if c.quick else [1, 2, 4]
    clients = 10 if c.quick else 50
    dur = 0.5 if c.quick else 2.5
    params = dict(threads=threads_list, clients_per_thread=clients, pipeline=1, ratio="1:10", data_size=32, keys=keys,
                  duration_s=dur, warmup_s=0.3, targets=SIX)
    rows = []
    for r in range(c.runs):
        for t in rotate(SIX, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                preload(s, proto, keys)
                for th in threads_list:
                    j = bench(s, proto, threads=th, clients=clients, ratio="1:10", duration=dur, warmup=0.3,
                              key_max=keys - 1, verify=kind != "floor")
                    rows.append(dict(target=t, run=r, threads=th, **figures(j)))
                    c.say(f"scaling run {r} {t:12} {th} threads: {j['ops_per_sec']:10.0f} ops/s, mean {j['latency_us']['all']['mean']:.0f} µs")
    return dict(params=params, rows=rows, notes=[
        "Client threads 1..4 on one client core (the machine has 2): beyond 1 thread the client "
        "competes with itself, as the server does with its single core; the curve shows how each server "
        "holds up as connections multiply rather than how it scales over cores."])


def sc_clients(c):
    keys = 100_000
    conns = [1, 10, 50] if c.quick else [1, 5, 10, 20, 50, 100, 200, 300]
    dur = 0.3 if c.quick else 0.8
    params = dict(connections=conns, threads=1, pipeline=1, data_size=32, keys=keys, duration_s=dur, warmup_s=0.1,
                  ops=["GET (0:1)", "SET (1:0)"], figure="best of runs", targets=SIX)
    rows = []
    for r in range(c.runs):
        for t in rotate(SIX, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                preload(s, proto, keys)
                for n in conns:
                    for op, ratio in (("GET", "0:1"), ("SET", "1:0")):
                        j = bench(s, proto, threads=1, clients=n, ratio=ratio, duration=dur, warmup=0.1, key_max=keys - 1,
                                  verify=kind != "floor")
                        rows.append(dict(target=t, run=r, op=op, connections=n, **figures(j)))
                c.say(f"clients run {r} {t:12} done")
    return dict(params=params, rows=rows, notes=[
        "Points 1, 5, 10, 20, 50, 100, 200, 300 connections (the published 30..90 steps left out for time); "
        "one client thread drives all connections."])


def sc_multiget(c):
    keys = 10_000
    ns = [10, 100, 1000]
    dur = 0.3 if c.quick else 2.0
    params = dict(keys_per_read=ns, threads=1, clients=10, pipeline=1, data_size=32, keys=keys, duration_s=dur,
                  warmup_s=0.2, targets=SIX)
    rows = []
    for r in range(c.runs):
        for t in rotate(SIX, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                preload(s, proto, keys)
                for n in ns:
                    j = bench(s, proto, threads=1, clients=10, ratio="0:1", multiget=n, duration=dur, warmup=0.2,
                              key_max=keys - 1, verify=kind != "floor")
                    rows.append(dict(target=t, run=r, keys_per_read=n, **figures(j)))
                    c.say(f"multiget run {r} {t:12} N={n}: {j['ops_per_sec']:9.0f} reads/s, {j['keys_read_per_sec']:11.0f} keys/s")
    return dict(params=params, rows=rows, notes=["MGET k1..kN over RESP, `get k1 ... kN` over memcached."])


def sc_memory(c):
    sizes = [10_000, 100_000] if c.quick else [10_000, 100_000, 1_000_000]
    targets = ["larder-resp", "redis", "memcached"]
    params = dict(keys=sizes, data_size=32, key_format="key:N", load="SET only, pipelined, each key once",
                  targets=targets)
    rows = []
    for r in range(c.runs):
        for t in rotate(targets, r):
            kind, proto = TARGETS[t]
            for n in sizes:
                with Server(kind) as s:
                    bench(s, proto, threads=1, clients=1, ratio="1:0", requests=1, key_max=0, key_prefix="warm:")
                    time.sleep(0.2)
                    rss0 = s.rss()
                    j = preload(s, proto, n)
                    time.sleep(0.5)
                    rss1 = s.rss()
                    rows.append(dict(target=t, run=r, keys=n, rss_before=rss0, rss_after=rss1,
                                     bytes_per_key=(rss1 - rss0) / n, load_ops_per_sec=j["ops_per_sec"]))
                    c.say(f"memory run {r} {t:12} {n:>8} keys: {(rss1 - rss0) / n:6.1f} B/key (RSS {rss1 / 2**20:.0f} MiB)")
    return dict(params=params, rows=rows, notes=[
        "Bytes per key = growth of the server's resident memory (VmRSS, which counts Larder's shared arena "
        "pages) over the load, divided by the keys; key and value alone are 10-14 + 32 bytes. Larder's keyspace "
        "is the same over both protocols, so it is measured once (loaded over RESP)."])


def sc_expansion(c):
    # BENCHMARKS.md: insert from 0 to 10M keys and report the deepest dip. Issue 2's measure
    # is finer: 100 ms windows, none more than 10% below the median.
    n = 200_000 if c.quick else 10_000_000
    interval = 50 if c.quick else 100
    params = dict(keys=n, threads=1, clients=50, pipeline=16, data_size=32, interval_ms=interval, targets=FOUR)
    rows = []
    for r in range(c.runs):
        for t in rotate(FOUR, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                j = bench(s, proto, threads=1, clients=50, pipeline=16, ratio="1:0", key_pattern="P", requests=n,
                          key_max=n - 1, interval_ms=interval)
                f = figures(j, keep_timeline=True)
                series = [b[1] for b in f["timeline"]]
                f["dip"] = deepest_dip(series)
                f["below10"] = windows_below(series, 0.10)
                f["rss_after"] = s.rss()
                rows.append(dict(target=t, run=r, **f))
                c.say(f"expansion run {r} {t:12} {j['ops_per_sec']:10.0f} inserts/s, deepest dip {f['dip']:.0%}, "
                      f"{f['below10']} windows >10% below the median")
    return dict(params=params, rows=rows, notes=[
        f"0 to {n:,} keys, pipelined (16 per connection, 50 connections, one client thread) so each run takes "
        f"seconds; {interval} ms buckets instead of 1 s. Dip = 1 - lowest bucket / median bucket; "
        "'windows >10% below' counts the buckets more than 10% below the median (issue 2's measure); "
        "the first and the last (partial) bucket are left out of both."])


def sc_value_size(c):
    sizes = [10, 1000, 100_000] if c.quick else [10, 100, 1000, 10_000, 100_000]
    keys = 1000
    dur = 0.3 if c.quick else 2.0
    params = dict(data_sizes=sizes, keys=keys, threads=1, clients=20, pipeline=1, ratio="1:1", duration_s=dur,
                  warmup_s=0.2, verify=True, targets=FOUR)
    rows = []
    for r in range(c.runs):
        for t in rotate(FOUR, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                for size in sizes:
                    prefix = f"v{size}:"
                    preload(s, proto, keys, size=size, prefix=prefix)
                    j = bench(s, proto, threads=1, clients=20, ratio="1:1", duration=dur, warmup=0.2, key_max=keys - 1,
                              data_size=size, key_prefix=prefix, verify=True)
                    rows.append(dict(target=t, run=r, data_size=size, **figures(j)))
                    c.say(f"value-size run {r} {t:12} {size:>6} B: {j['ops_per_sec']:9.0f} ops/s")
    return dict(params=params, rows=rows, notes=["SET:GET 1:1 over 1000 keys per size, every read verified."])


# Larder's persistence modes, by name, as server flags. Empty until persistence lands: add
# e.g. "log-everysec": ["--appendonly", "yes", "--appendfsync", "everysec"] then.
LARDER_PERSISTENCE = {"none": []}
REDIS_PERSISTENCE = {
    "none": [],
    "snapshot": ["--save", "1 1000"],
    "log-everysec": ["--appendonly", "yes", "--appendfsync", "everysec"],
    "log-always": ["--appendonly", "yes", "--appendfsync", "always"],
}


def sc_persistence(c):
    keys = 100_000
    threads, clients = 4, (10 if c.quick else 50)
    dur = 0.5 if c.quick else 4.0
    configs = [("redis", m) for m in REDIS_PERSISTENCE] + [("larder-resp", m) for m in LARDER_PERSISTENCE]
    params = dict(threads=threads, clients=clients, pipeline=1, ratio="1:0", data_size=32, keys=keys, duration_s=dur,
                  warmup_s=0.3, redis_modes={k: " ".join(v) for k, v in REDIS_PERSISTENCE.items()},
                  larder_modes=list(LARDER_PERSISTENCE))
    rows = []
    for r in range(c.runs):
        for t, mode in rotate(configs, r):
            kind, proto = TARGETS[t]
            extra = REDIS_PERSISTENCE[mode] if kind == "redis" else LARDER_PERSISTENCE[mode]
            with Server(kind, extra=extra) as s:
                j = bench(s, proto, threads=threads, clients=clients, ratio="1:0", duration=dur, warmup=0.3, key_max=keys - 1)
                rows.append(dict(target=t, run=r, mode=mode, **figures(j)))
                c.say(f"persistence run {r} {t:12} {mode:13} {j['ops_per_sec']:10.0f} ops/s, mean {j['latency_us']['all']['mean']:.0f} µs")
    return dict(params=params, rows=rows, notes=[
        "Redis: none / snapshot (`save 1 1000`: an RDB fork every second under load) / AOF everysec / AOF always. "
        "Larder has no persistence yet: only its `none` row exists; LARDER_PERSISTENCE in bench/run.py takes "
        "its modes when persistence lands. SET only, 4 threads x 50 connections."])


def sc_ems_kv(c):
    pairs = 5_000 if c.quick else 50_000
    procs = [1, 2]
    params = dict(pairs=pairs, key_len=100, data_size=4096, client_threads=procs, clients_per_thread=1,
                  phases=["write (SET, each key once)", "read back (GET, verified)"], targets=FOUR)
    rows = []
    for r in range(c.runs):
        for t in rotate(FOUR, r):
            kind, proto = TARGETS[t]
            for p in procs:
                with Server(kind) as s:
                    common = dict(threads=p, clients=1, key_pattern="P", requests=pairs, key_max=pairs - 1,
                                  key_len=100, key_prefix="ems:", data_size=4096)
                    w = bench(s, proto, ratio="1:0", **common)
                    rd = bench(s, proto, ratio="0:1", verify=True, **common)
                    if rd["misses"]:
                        raise ScenarioError(f"ems-kv: {rd['misses']} keys written were not read back from {t}")
                    for phase, j in (("write", w), ("read", rd)):
                        rows.append(dict(target=t, run=r, procs=p, phase=phase, **figures(j)))
                    c.say(f"ems-kv run {r} {t:12} P={p}: write {w['ops_per_sec']:8.0f} ops/s, read {rd['ops_per_sec']:8.0f} ops/s, "
                          f"min {rd['latency_us']['all']['min']:.1f} µs")
    return dict(params=params, rows=rows, notes=[
        "TCP half only: the shared-memory half (Larder in shared memory, `larder bench --protocol local`) arrives "
        "with its own issue (hook: sc_ems_kv_local). Client threads of one process stand for the study's processes. "
        "Keys are 100 bytes (`ems:N-` then pseudo-random filler), values 4096 bytes unique to each key."])


def sc_ems_kv_local(c):
    """Hook for the shared-memory half of ems-kv (its own issue): Larder started with --shm NAME,
    then `larder bench --protocol local --segment NAME` with the same parameters as sc_ems_kv."""
    raise ScenarioError("not implemented yet: arrives with the shared-memory ems-kv issue")


def sc_agreement(c):
    """larder bench against redis-benchmark and memcslap, on the real Redis and memcached."""
    runs = max(c.runs, 3) if not c.quick else 1
    rows = []

    def client_cpu(fn):
        t0 = os.times()
        v = fn()
        t1 = os.times()
        return v, (t1.children_user - t0.children_user) + (t1.children_system - t0.children_system)

    def record(peer, tool, test, conns, pipe, n, ref, ref_cpu, ours, our_cpu):
        rows.append(dict(peer=peer, tool=tool, test=test.upper(), connections=conns, pipeline=pipe, requests=n,
                         reference_ops_per_sec=ref, larder_bench_ops_per_sec=ours, ratio=ours / ref,
                         reference_client_cpu_us=ref_cpu * 1e6 / n, larder_bench_client_cpu_us=our_cpu * 1e6 / n))
        c.say(f"agreement {peer} {test} c={conns} P={pipe}: {tool} {ref:9.0f}  larder bench {ours:9.0f}  ({ours / ref:.2f}); "
              f"client CPU/request {ref_cpu * 1e6 / n:.1f} vs {our_cpu * 1e6 / n:.1f} µs")

    redis_cfgs = [(50, 1, 20_000 if c.quick else 100_000), (50, 16, 50_000 if c.quick else 500_000)]
    mc_cfgs = [(50, 10_000 if c.quick else 100_000), (1, 2_000 if c.quick else 10_000)]
    for r in range(runs):
        with Server("redis") as s:
            for conns, pipe, n in redis_cfgs:
                for test, ratio in (("set", "1:0"), ("get", "0:1")):
                    def ref_run():
                        rc, out, err = run_client(["redis-benchmark", "-p", str(s.port("resp")), "-t", test, "-n", str(n),
                                                   "-c", str(conns), "-P", str(pipe), "-d", "32", "-r", "100000", "--csv"], 600)
                        return parse_redis_benchmark(out, test)

                    def our_run():
                        return bench(s, "resp", threads=1, clients=conns, pipeline=pipe, ratio=ratio, requests=n,
                                     key_max=99_999)["ops_per_sec"]
                    order = [ref_run, our_run] if r % 2 == 0 else [our_run, ref_run]
                    got = {f: client_cpu(f) for f in order}
                    record("redis", "redis-benchmark", test, conns, pipe, n, *got[ref_run], *got[our_run])
        with Server("memcached") as s:
            # memcslap: C blocking threads, each sets (or gets) the same n/C keys of 20-60 bytes
            # with values of ~200-4900 bytes; larder bench is set up to match.
            for conns, n in mc_cfgs:
                execute = n // conns
                preload(s, "memcache", execute, size="200-4900", key_len=40)
                for test, ratio in (("set", "1:0"), ("get", "0:1")):
                    def ref_run():
                        rc, out, err = run_client(["memcslap", f"--servers=127.0.0.1:{s.port('memcache')}", f"--test={test}",
                                                   f"--concurrency={conns}", f"--execute-number={execute}"], 600)
                        return parse_memcslap(out + err, test, conns * execute)

                    def our_run():
                        return bench(s, "memcache", threads=1, clients=conns, ratio=ratio, requests=execute * conns,
                                     key_max=execute - 1, key_len=40, data_size="200-4900")["ops_per_sec"]
                    order = [ref_run, our_run] if r % 2 == 0 else [our_run, ref_run]
                    got = {f: client_cpu(f) for f in order}
                    record("memcached", "memcslap", test, conns, 1, conns * execute, *got[ref_run], *got[our_run])
    params = dict(runs=runs,
                  redis="redis-benchmark -t set|get -c C -P P -d 32 -r 100000 vs larder bench -t 1 -c C --pipeline P -d 32 "
                        "--key-max 99999; C/P = 50/1 and 50/16",
                  memcached="memcslap --concurrency=C (C blocking threads; its get test loads its keys first, untimed) vs "
                            "larder bench -t 1 -c C --key-len 40 -d 200-4900 (memcslap's key and value sizes); C = 50 and 1")
    return dict(params=params, rows=rows, notes=[
        "Pass: the median ratio within 15% (0.85-1.15). Each tool pinned to the client core, alternating which goes first.",
        "Client CPU per request (from the children's rusage) shows where a tool, not the server, sets the pace: with 50 "
        "unpipelined connections one client core is the limit on this machine, and a tool that spends more CPU per "
        "request reports less. Pipelined (16) or with one connection, the server or the round trip sets the pace and "
        "the tools should agree."])


def redis_benchmark(s, proto, test, n, pipeline, *extra, client_cpu=False):
    """One redis-benchmark test (50 connections) against a running server: (requests/s, server CPU seconds),
    and with `client_cpu` also the client's CPU seconds (user + system, from its rusage) and wall seconds."""
    c0 = s.cpu()
    r0, w0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    rc, out, err = run_client(["redis-benchmark", "-p", str(s.port(proto)), "-t", test, "-n", str(n), "-c", "50",
                               "-P", str(pipeline), *extra, "--csv"], 600)
    r1, w1 = resource.getrusage(resource.RUSAGE_CHILDREN), time.monotonic()
    got = (parse_redis_benchmark(out, test), s.cpu() - c0)
    if client_cpu:
        return got + (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, w1 - w0)
    return got


def sc_server(c):
    """The server issue's benchmark: redis-benchmark GET and SET of 32-byte values, 50 connections, pipeline 1
    and 16, against Larder and Redis, with each server's CPU time per request."""
    n = {1: 20_000 if c.quick else 200_000, 16: 100_000 if c.quick else 2_000_000}
    runs = max(c.runs, 5) if not c.quick else 1
    targets = ["larder-resp", "redis", "floor-resp"]
    rows = []
    for r in range(runs):
        for t in rotate(targets, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                for pipe in (1, 16):
                    for test in ("set", "get"):
                        ops, cpu, ccpu, wall = redis_benchmark(s, proto, test, n[pipe], pipe, "-d", "32", "-r", "100000",
                                                               client_cpu=True)
                        # The client's share of its core while it ran: near 1, the client was the limit.
                        busy = ccpu / wall if wall > 0 else None
                        rows.append(dict(target=t, run=r, op=test.upper(), pipeline=pipe, ops_per_sec=ops,
                                         cpu_us_per_op=cpu * 1e6 / n[pipe], client_cpu_us_per_op=ccpu * 1e6 / n[pipe],
                                         client_busy=busy))
                        c.say(f"server run {r} {t:12} {test} P{pipe:<2}: {ops:10.0f} req/s, server CPU {cpu * 1e6 / n[pipe]:.2f} µs/op, "
                              f"client CPU {ccpu * 1e6 / n[pipe]:.2f} µs/op (busy {busy or 0:.0%})")
    params = dict(runs=runs, tool="redis-benchmark -t set|get -n N -c 50 -P 1|16 -d 32 -r 100000 --csv",
                  requests=n, targets=targets, larder_args=LARDER_EXTRA)
    return dict(params=params, rows=rows, notes=[
        "The server issue's targets: at pipeline 16 at most 0.6x Redis's server CPU per request, at pipeline 1 at least "
        "Redis's throughput. One server thread on core 0, redis-benchmark on core 1, servers alternating run by run.",
        "The floor (`larder server --floor`: Larder's event loop and parsers, no keyspace) is what the network path "
        "alone costs: server CPU per request can't go much below it without fewer or cheaper system calls.",
        "client CPU µs/op and client busy are redis-benchmark's own CPU time (its rusage): a client busy near 100% "
        "was the bottleneck, and throughput then says more about the client than about the server."])


# redis-benchmark's own data-type tests, as the data-types issue names them.
TYPES_TESTS = ["lpush", "rpush", "lpop", "rpop", "sadd", "hset", "spop", "zadd", "zpopmin", "lrange_100", "lrange_600"]


def sc_types(c):
    """Redis's data types with Redis's own client: `redis-benchmark -t TEST -P 16` against Larder and Redis."""
    n = 40_000 if c.quick else 400_000
    runs = max(c.runs, 3) if not c.quick else 1
    targets = ["larder-resp", "redis"]
    rows = []
    for r in range(runs):
        for t in rotate(targets, r):
            kind, proto = TARGETS[t]
            with Server(kind) as s:
                # One server takes the tests in order, as `redis-benchmark -t a,b,...` runs them: the pops
                # pop what the pushes pushed (a list of 2n elements), ZPOPMIN what ZADD added.
                for test in TYPES_TESTS:
                    ops, cpu = redis_benchmark(s, proto, test, n, 16)
                    # LRANGE tests push n elements first (untimed by the tool, but on the server's CPU).
                    cpu_op = None if test.startswith("lrange") else cpu * 1e6 / n
                    rows.append(dict(target=t, run=r, op=test.upper(), ops_per_sec=ops, cpu_us_per_op=cpu_op))
                    c.say(f"types run {r} {t:12} {test:10}: {ops:10.0f} req/s" +
                          (f", server CPU {cpu_op:.2f} µs/op" if cpu_op is not None else ""))
    params = dict(runs=runs, tool=f"redis-benchmark -t TEST -n {n} -c 50 -P 16 --csv (its default key and values)",
                  tests=TYPES_TESTS, targets=targets)
    return dict(params=params, rows=rows, notes=[
        "The data-types issue's benchmark: redis-benchmark's own tests at pipeline 16, one server thread on core 0 and "
        "the tool on core 1. Without -r the tests hit one key each (mylist, myset, myhash, myzset): lists grow to "
        f"{2 * n:,} elements and are popped back; SADD/HSET/ZADD set the same member again after the first request.",
        "Server CPU per request is not given for LRANGE_*: redis-benchmark pushes n elements before timing them."])


def parse_redis_benchmark(out, test):
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        # LRANGE_100 is reported as "LRANGE_100 (first 100 elements)".
        if parts and (parts[0].upper() == test.upper() or parts[0].upper().startswith(test.upper() + " (FIRST")):
            return float(parts[1])
    raise ScenarioError(f"no {test} result from redis-benchmark: {out[-300:]!r}")


def parse_memcslap(out, test, requests):
    """memcslap prints `Time to get N keys by C threads: T seconds`, N being the keys it found;
    every one of its `requests` was made, so they are what the rate counts."""
    m = re.search(rf"Time to {test}\s+(\d+)\s+keys by\s+(\d+)\s+threads:\s+([\d.]+)\s+seconds", out)
    if not m:
        raise ScenarioError(f"no {test} timing from memcslap: {out[-300:]!r}")
    return requests / float(m.group(3))


SCENARIOS = {
    "latency": sc_latency,
    "throughput": sc_throughput,
    "scaling": sc_scaling,
    "clients": sc_clients,
    "multiget": sc_multiget,
    "memory": sc_memory,
    "expansion": sc_expansion,
    "value-size": sc_value_size,
    "persistence": sc_persistence,
    "ems-kv": sc_ems_kv,
    "agreement": sc_agreement,
    "types": sc_types,
    "server": sc_server,
}
# Not run by `all` yet (their issues bring them): pagerank, and ems-kv's shared-memory half.
PENDING = {"pagerank": "arrives with the pagerank issue", "ems-kv-local": "arrives with the shared-memory ems-kv issue"}


# ---------------------------------------------------------------------------------------
# Summaries: medians per (point, target) and ratios computed run by run.

def point_keys(rows):
    skip = {"target", "run"}
    first = rows[0] if rows else {}
    return [k for k in ("op", "pipeline", "mode", "threads", "connections", "keys_per_read", "keys", "data_size", "procs", "phase")
            if k in first and k not in skip]


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def get(row, metric):
    v = row
    for part in metric.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v


def summarize(rows, metric, best=False):
    """{point: {target: (median or best, min, max)}}."""
    pk = point_keys(rows)
    out = {}
    for row in rows:
        p = tuple(row[k] for k in pk)
        out.setdefault(p, {}).setdefault(row["target"], []).append(get(row, metric))
    res = {}
    for p, by in out.items():
        res[p] = {}
        for t, vs in by.items():
            vs = [v for v in vs if v is not None]
            if vs:
                res[p][t] = (max(vs) if best else statistics.median(vs), min(vs), max(vs))
    return pk, res


def run_ratios(rows, metric, a, b):
    """Median over runs of a/b, each run's own figures; for every point."""
    pk = point_keys(rows)
    by = {}
    for row in rows:
        by[(tuple(row[k] for k in pk), row["run"], row["target"])] = get(row, metric)
    out = {}
    for (p, r, t), v in by.items():
        if t != a:
            continue
        w = by.get((p, r, b))
        if v is not None and w:
            out.setdefault(p, []).append(v / w)
    return {p: (statistics.median(v), min(v), max(v)) for p, v in out.items()}


# The figure each scenario is judged on: (metric, higher is better, best-of-runs instead of median).
HEADLINE = {
    "latency": ("lat_all.p50", False, False),
    "throughput": ("ops_per_sec", True, False),
    "scaling": ("ops_per_sec", True, False),
    "clients": ("ops_per_sec", True, True),
    "multiget": ("keys_read_per_sec", True, False),
    "memory": ("bytes_per_key", False, False),
    "expansion": ("ops_per_sec", True, False),
    "value-size": ("ops_per_sec", True, False),
    "persistence": ("ops_per_sec", True, False),
    "ems-kv": ("ops_per_sec", True, False),
    "types": ("ops_per_sec", True, False),
    "server": ("ops_per_sec", True, False),
}
EXTRA = {
    "latency": [("lat_all.p99", "p99 µs"), ("lat_all.p99_9", "p99.9 µs"), ("lat_all.max", "max µs"), ("lat_all.min", "min µs"),
                ("cpu_us_per_op", "server CPU µs/op")],
    "throughput": [("cpu_us_per_op", "server CPU µs/op"), ("lat_all.p99", "p99 µs"), ("dip", "deepest dip")],
    "scaling": [("lat_all.mean", "mean latency µs")],
    "expansion": [("dip", "deepest dip"), ("below10", "windows >10% below median")],
    "persistence": [("lat_all.mean", "mean latency µs")],
    "ems-kv": [("lat_all.min", "min latency µs")],
    "clients": [("cpu_us_per_op", "server CPU µs/op")],
    "types": [("cpu_us_per_op", "server CPU µs/op")],
    "server": [("cpu_us_per_op", "server CPU µs/op"), ("client_cpu_us_per_op", "client CPU µs/op"),
               ("client_busy", "client busy")],
}


def fmt(v, metric=""):
    if v is None:
        return "-"
    if metric in ("dip", "client_busy"):
        return f"{v:.0%}"
    if metric == "below10":
        return f"{v:.0f}"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def peers(rows):
    """Larder against each peer; where Larder ran over one protocol only (memory), that run
    stands for Larder against both peers."""
    have = {r["target"] for r in rows}
    out = []
    for a, b in PEERS:
        if a not in have:
            a = next((x for x, _ in PEERS if x in have), a)
        if a in have and b in have:
            out.append((a, b))
    return out


def table(rows, metric, best=False, label=None):
    pk, s = summarize(rows, metric, best)
    targets = [t for t in SIX if any(t in by for by in s.values())]
    pairs = peers(rows)
    ratios = {(a, b): run_ratios(rows, metric, a, b) for a, b in pairs}
    floor_r = {}
    for a, f in (("larder-resp", "floor-resp"), ("larder-mc", "floor-mc")):
        if a in targets and f in targets:
            floor_r[(a, f)] = run_ratios(rows, metric, a, f)
    head = pk + [LABELS[t] for t in targets] + [f"{LABELS[a]} ÷ {LABELS[b]}" for a, b in pairs] + \
        [f"{LABELS[a]} ÷ floor" for a, _ in floor_r]
    lines = [f"{label or metric}{' (best of runs)' if best else ' (median, min-max)'}:", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in sorted(s, key=lambda x: tuple((0, v) if isinstance(v, (int, float)) else (1, str(v)) for v in x)):
        cells = [str(v) for v in p]
        for t in targets:
            v = s[p].get(t)
            cells.append("-" if v is None else (fmt(v[0], metric) if best else f"{fmt(v[0], metric)} ({fmt(v[1], metric)}-{fmt(v[2], metric)})"))
        for key in list(ratios) + list(floor_r):
            d = ratios.get(key) or floor_r.get(key)
            v = d.get(p)
            cells.append("-" if v is None else f"**{v[0]:.2f}**")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def headline_ratios(name, rows):
    """One figure per peer for the report's top table: the median of the run-by-run ratios over
    every point of the scenario (for clients, of the best-of-runs ratio per point)."""
    metric, higher, best = HEADLINE[name]
    out = {}
    for a, b in peers(rows) + [("larder-resp", "floor-resp"), ("larder-mc", "floor-mc")]:
        if best:
            pk, s = summarize(rows, metric, best=True)
            vals = [s[p][a][0] / s[p][b][0] for p in s if a in s[p] and b in s[p] and s[p][b][0]]
        else:
            vals = [v[0] for v in run_ratios(rows, metric, a, b).values()]
        if vals:
            out[f"{'larder-resp' if b == 'redis' else 'larder-mc' if b == 'memcached' else a}/{b}"] = statistics.median(vals)
    return metric, higher, out


# ---------------------------------------------------------------------------------------
# Plots.

def plt_mod():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_scenario(name, data):
    rows = data.get("rows") or []
    if not rows:
        return []
    plt = plt_mod()
    made = []

    def save(fig, fname):
        path = os.path.join(RESULTS, fname)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(fname)

    def lines_vs(xkey, metric, title, ylabel, fname, split=None, best=False, logx=False, logy=False):
        splits = sorted({r[split] for r in rows}) if split else [None]
        fig, axes = plt.subplots(1, len(splits), figsize=(6 * len(splits), 4.2), squeeze=False)
        for ax, sp in zip(axes[0], splits):
            sub = [r for r in rows if split is None or r[split] == sp]
            for t in SIX:
                pts = {}
                for r in sub:
                    if r["target"] == t and get(r, metric) is not None:
                        pts.setdefault(r[xkey], []).append(get(r, metric))
                if not pts:
                    continue
                xs = sorted(pts)
                ys = [max(pts[x]) if best else statistics.median(pts[x]) for x in xs]
                ax.plot(xs, ys, marker="o", label=LABELS[t], color=COLORS[t], linestyle="--" if t.startswith("floor") else "-")
            ax.set_title(f"{title}{' — ' + str(sp) if sp else ''}")
            ax.set_xlabel(xkey.replace("_", " "))
            ax.set_ylabel(ylabel)
            if logx:
                ax.set_xscale("log")
            if logy:
                ax.set_yscale("log")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        save(fig, fname)

    if name == "latency":
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        pcts = [("lat_all.min", "min"), ("lat_all.p50", "p50"), ("lat_all.p99", "p99"), ("lat_all.p99_9", "p99.9")]
        for ax, op in zip(axes, ["SET", "GET"]):
            targets = [t for t in SIX if any(r["target"] == t and r["op"] == op for r in rows)]
            w = 0.8 / max(len(targets), 1)
            for i, t in enumerate(targets):
                vals = [med([get(r, m) for r in rows if r["target"] == t and r["op"] == op]) for m, _ in pcts]
                ax.bar([j + i * w for j in range(len(pcts))], vals, w, label=LABELS[t], color=COLORS[t])
            ax.set_xticks([j + w * (len(targets) - 1) / 2 for j in range(len(pcts))])
            ax.set_xticklabels([p for _, p in pcts])
            ax.set_title(f"{op} latency, 1 connection (median of runs)")
            ax.set_ylabel("µs (log)")
            ax.set_yscale("log")
            ax.grid(alpha=0.3, axis="y")
            ax.legend(fontsize=8)
        save(fig, "latency.png")
    elif name in ("throughput", "expansion"):
        fig, ax = plt.subplots(figsize=(11, 4.5))
        for t in SIX:
            rs = [r for r in rows if r["target"] == t and r.get("timeline")]
            if not rs:
                continue
            r = sorted(rs, key=lambda r: r["ops_per_sec"])[len(rs) // 2]  # the median run
            tl = r["timeline"][:-1] if len(r["timeline"]) > 2 else r["timeline"]
            ax.plot([b[0] for b in tl], [b[1] for b in tl], label=f"{LABELS[t]} (dip {r['dip']:.0%})", color=COLORS[t],
                    linestyle="--" if t.startswith("floor") else "-")
        ax.set_title("Throughput over time (median run)" if name == "throughput" else "Inserts over time while the table grows (median run)")
        ax.set_xlabel("seconds")
        ax.set_ylabel("ops/s")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        save(fig, f"{name}_timeline.png")
        if name == "throughput":
            fig, ax = plt.subplots(figsize=(8, 4))
            ts = [t for t in SIX if any(r["target"] == t for r in rows)]
            vals = [med([r["ops_per_sec"] for r in rows if r["target"] == t]) for t in ts]
            ax.bar([LABELS[t] for t in ts], vals, color=[COLORS[t] for t in ts])
            ax.set_title("Sustained throughput, 4 threads x 50 connections, SET:GET 1:10")
            ax.set_ylabel("ops/s (median of runs)")
            ax.tick_params(axis="x", labelsize=8)
            ax.grid(alpha=0.3, axis="y")
            save(fig, "throughput.png")
    elif name == "scaling":
        lines_vs("threads", "ops_per_sec", "Throughput vs client threads", "ops/s", "scaling.png")
    elif name == "clients":
        lines_vs("connections", "ops_per_sec", "Throughput vs connections", "ops/s (best of runs)", "clients.png",
                 split="op", best=True, logx=True)
    elif name == "multiget":
        lines_vs("keys_per_read", "keys_read_per_sec", "Keys read per second, MGET / get k1..kN", "keys/s",
                 "multiget.png", logx=True)
    elif name == "memory":
        lines_vs("keys", "bytes_per_key", "Resident memory per key (32-byte values)", "bytes per key", "memory.png", logx=True)
    elif name == "value-size":
        lines_vs("data_size", "ops_per_sec", "Throughput vs value size (SET:GET 1:1)", "ops/s", "value_size.png",
                 logx=True, logy=True)
    elif name == "persistence":
        fig, ax = plt.subplots(figsize=(9, 4))
        labels, vals, cols = [], [], []
        for t in ("redis", "larder-resp"):
            for m in dict.fromkeys(r["mode"] for r in rows if r["target"] == t):
                labels.append(f"{LABELS[t]}\n{m}")
                vals.append(med([r["ops_per_sec"] for r in rows if r["target"] == t and r["mode"] == m]))
                cols.append(COLORS[t])
        ax.bar(labels, vals, color=cols)
        ax.set_title("SET throughput by durability mode")
        ax.set_ylabel("ops/s (median of runs)")
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(alpha=0.3, axis="y")
        save(fig, "persistence.png")
    elif name == "ems-kv":
        lines_vs("procs", "ops_per_sec", "EMS KV: write then verified read-back", "ops/s", "ems_kv.png", split="phase")
    return made


def plot_history(hist):
    plt = plt_mod()
    scen = sorted({h["scenario"] for h in hist})
    if not scen:
        return
    fig, axes = plt.subplots(len(scen), 1, figsize=(9, 2.2 * len(scen)), squeeze=False)
    for ax, s in zip(axes[:, 0], scen):
        hs = [h for h in hist if h["scenario"] == s]
        xs = [h["commit"][:7] for h in hs]
        for key, label, col in (("ratio_redis", "Larder ÷ Redis", COLORS["redis"]), ("ratio_memcached", "Larder ÷ memcached", COLORS["memcached"])):
            ys = [float(h[key]) if h.get(key) not in (None, "") else None for h in hs]
            if any(y is not None for y in ys):
                ax.plot(xs, [y if y is not None else float("nan") for y in ys], marker="o", label=label, color=col)
        ax.axhline(1.0, color="black", linewidth=0.6)
        ax.set_title(f"{s}: {hs[-1]['metric']}", fontsize=9)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(RESULTS, "history.png"), dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------
# Report.

def machine():
    cpu = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024

    def version(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except (OSError, IndexError, subprocess.SubprocessError):
            return "?"
    return {"cores": os.cpu_count(), "cpu": cpu, "kernel": platform.release(), "memory_bytes": mem,
            "redis": version(["redis-server", "--version"]), "memcached": version(["memcached", "-V"]),
            "larder": version([LARDER, "--version"]), "server_core": SERVER_CORE, "client_core": CLIENT_CORE}


def git_commit():
    r = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "--", "crates", "Cargo.toml", "Cargo.lock"],
                           capture_output=True, text=True).stdout.strip()
    return r.stdout.strip() + ("-dirty" if dirty else "")


def load_results():
    out = {}
    for name in list(SCENARIOS):
        path = os.path.join(RESULTS, f"{name}.json")
        if os.path.exists(path):
            with open(path) as f:
                out[name] = json.load(f)
    return out


def write_report():
    res = load_results()
    lines = ["# Larder side by side with Redis and memcached", ""]
    any_meta = next((d for d in res.values() if "machine" in d), None)
    if any_meta:
        m = any_meta["machine"]
        lines += [f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory_bytes'] / 2**30:.0f} GiB, Linux {m['kernel']}. "
                  f"{m['redis']}; memcached {m['memcached']}; {m['larder']}.", ""]
    lines += [
        "Method (../shared/BENCHMARKS.md, scaled to this machine): every server runs on **core 0** with one thread "
        "(Larder `--threads 1`, memcached `-t 1`, Redis single-threaded with io-threads off), the client "
        "(`larder bench`, the same tool, key and value generation for every server) on **core 1**. Servers alternate "
        "run by run; figures are medians of the runs with min-max, ratios are computed run by run and their median "
        "shown. Server CPU per operation is read from /proc/PID/stat. `floor` is `larder server --floor`: Larder's "
        "event loop and parsers answering without the keyspace, the most any server can do through this network "
        "path on this machine. Other agents' builds may have shared the machine during these runs: absolute "
        "figures move with that; the ratios of alternated runs much less.",
        "",
        "Generated by `bench/run.py`; every figure is in the scenario's JSON file beside this report.",
        "",
    ]
    notes = os.path.join(RESULTS, "RUN_NOTES.md")
    if os.path.exists(notes):
        with open(notes) as f:
            lines += [f.read().strip(), ""]
    lines += [
        "## Ratios",
        "",
        "Median over the scenario's points of the run-by-run ratio of the headline figure. For latency and memory, "
        "lower is better (a ratio below 1 favours Larder); for the others, higher is better.",
        "",
        "| scenario | headline | commit | Larder ÷ Redis | Larder ÷ memcached | Larder ÷ floor (RESP) | Larder ÷ floor (memcached) |",
        "|---|---|---|---|---|---|---|",
    ]
    hist_rows = []
    for name, d in res.items():
        if name == "agreement" or not d.get("rows"):
            if d.get("failed"):
                why = d.get("error", "?").splitlines()[0].replace("|", "/")[:160]
                lines.append(f"| {name} | **failed**: {why} | {d.get('commit', '?')[:7]} | | | | |")
            continue
        metric, higher, r = headline_ratios(name, d["rows"])
        g = lambda k: f"{r[k]:.2f}" if k in r else "-"
        lines.append(f"| {name} | {metric} ({'higher' if higher else 'lower'} is better) | {d['commit'][:7]} | "
                     f"{g('larder-resp/redis')} | {g('larder-mc/memcached')} | {g('larder-resp/floor-resp')} | {g('larder-mc/floor-mc')} |")
    if "agreement" in res and res["agreement"].get("rows"):
        rows = res["agreement"]["rows"]
        lines += ["", "## Agreement of the load generator with redis-benchmark and memcslap", "",
                  "| peer | tool | test | connections | pipeline | reference ops/s | larder bench ops/s | ratio (median, min-max) | "
                  "within 15% | client CPU µs/request: reference / larder bench |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        keys = []
        for x in rows:
            k = (x["peer"], x["tool"], x["test"], x["connections"], x["pipeline"])
            if k not in keys:
                keys.append(k)
        for k in keys:
            rs = [x for x in rows if (x["peer"], x["tool"], x["test"], x["connections"], x["pipeline"]) == k]
            ratio = statistics.median([x["ratio"] for x in rs])
            md = lambda f: statistics.median([x[f] for x in rs])
            lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {k[4]} | {md('reference_ops_per_sec'):,.0f} | "
                         f"{md('larder_bench_ops_per_sec'):,.0f} | {ratio:.2f} ({min(x['ratio'] for x in rs):.2f}-"
                         f"{max(x['ratio'] for x in rs):.2f}) | {'yes' if 0.85 <= ratio <= 1.15 else '**no**'} | "
                         f"{md('reference_client_cpu_us'):.1f} / {md('larder_bench_client_cpu_us'):.1f} |")
        lines += [""] + [f"- {n}" for n in res["agreement"].get("notes", [])] + \
            [f"- {k}: `{v}`" for k, v in res["agreement"]["params"].items()]
    for name, d in res.items():
        if name == "agreement":
            continue
        lines += ["", f"## {name}", ""]
        if d.get("failed"):
            lines += [f"**Failed** at {d.get('date', '?')}: {d.get('error')}", ""]
            if not d.get("rows"):
                continue
        load = (f", load average {d['loadavg_start'][0]:.1f} at the start and {d['loadavg_end'][0]:.1f} at the end"
                if d.get("loadavg_start") and d.get("loadavg_end") else "")
        lines += [f"Commit {d['commit'][:12]}, {d['date']}{', quick mode (smoke test, not a measurement)' if d.get('quick') else ''}, "
                  f"{d['runs']} runs, {d.get('seconds', 0):.0f} s{load}. Parameters: "
                  + ", ".join(f"{k}={v}" for k, v in d["params"].items()), ""]
        lines += [f"- {n}" for n in d.get("notes", [])] + [""]
        metric, higher, best = HEADLINE[name]
        lines += [table(d["rows"], metric, best, f"{metric} ({'higher' if higher else 'lower'} is better)"), ""]
        for m, label in EXTRA.get(name, []):
            lines += [table(d["rows"], m, False, label), ""]
        for png in d.get("plots", []):
            lines += [f"![{name}]({png})", ""]
    pending = ", ".join(f"`{k}` ({v})" for k, v in PENDING.items())
    lines += ["## Not run yet", "", f"{pending}.", ""]
    if os.path.exists(os.path.join(RESULTS, "history.png")):
        lines += ["## History", "", "One line per commit per scenario in `history.csv`:", "", "![history](history.png)", ""]
    with open(os.path.join(RESULTS, "REPORT.md"), "w") as f:
        f.write("\n".join(lines))
    return hist_rows


HIST_FIELDS = ["commit", "date", "scenario", "metric", "larder_resp", "redis", "larder_mc", "memcached", "floor_resp",
               "floor_mc", "ratio_redis", "ratio_memcached", "quick"]


def update_history(name, d):
    path = os.path.join(RESULTS, "history.csv")
    hist = []
    if os.path.exists(path):
        with open(path) as f:
            hist = list(csv.DictReader(f))
    metric, higher, r = headline_ratios(name, d["rows"])
    best = HEADLINE[name][2]
    _, s = summarize(d["rows"], metric, best)
    agg = {t: med([by[t][0] for by in s.values() if t in by]) for t in SIX}
    row = {"commit": d["commit"], "date": d["date"], "scenario": name, "metric": metric,
           "larder_resp": agg["larder-resp"], "redis": agg["redis"], "larder_mc": agg["larder-mc"],
           "memcached": agg["memcached"], "floor_resp": agg["floor-resp"], "floor_mc": agg["floor-mc"],
           "ratio_redis": r.get("larder-resp/redis"), "ratio_memcached": r.get("larder-mc/memcached"), "quick": d.get("quick", False)}
    row = {k: ("" if v is None else (f"{v:.4g}" if isinstance(v, float) else v)) for k, v in row.items()}
    hist = [h for h in hist if not (h["commit"] == d["commit"] and h["scenario"] == name)] + [row]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=HIST_FIELDS)
        w.writeheader()
        w.writerows(hist)
    try:
        plot_history([h for h in hist if h.get("quick") in ("False", False, "")])
    except Exception as e:  # a plot never fails the run
        print(f"history plot: {e}", file=sys.stderr)


# ---------------------------------------------------------------------------------------
# Setup and main.

def ensure_tools():
    need = {"redis-server": "redis-server", "memcached": "memcached", "redis-benchmark": "redis-tools",
            "memcslap": "libmemcached-tools", "taskset": "util-linux"}
    missing = sorted({pkg for tool, pkg in need.items() if not shutil.which(tool)})
    if missing:
        sudo = [] if os.getuid() == 0 else ["sudo"]
        print(f"installing {' '.join(missing)} (apt-get)", flush=True)
        subprocess.run(sudo + ["apt-get", "update", "-q"], check=True)
        subprocess.run(sudo + ["apt-get", "install", "-y", "-q"] + missing, check=True,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    # Debian starts packaged servers as services; they are not ours and are left alone (the
    # harness uses its own free ports).


def ensure_venv():
    """Re-executes under bench/.venv (created with matplotlib if needed)."""
    if os.environ.get("LARDER_BENCH_IN_VENV") == "1":
        return
    py = os.path.join(VENV, "bin", "python")
    ok = os.path.exists(py) and subprocess.run([py, "-c", "import matplotlib"], capture_output=True).returncode == 0
    if not ok:
        print("creating bench/.venv with matplotlib", flush=True)
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
        subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "matplotlib"], check=True)
    os.environ["LARDER_BENCH_IN_VENV"] = "1"
    os.execv(py, [py, os.path.abspath(__file__)] + sys.argv[1:])


def build():
    print("building larder (release)", flush=True)
    subprocess.run(["nice", "-n", "10", "cargo", "build", "--release", "-p", "larder"], cwd=ROOT, check=True)


class Ctx:
    def __init__(self, quick, runs, verbose=True):
        self.quick, self.runs, self.verbose = quick, runs, verbose

    def say(self, msg):
        if self.verbose:
            print("  " + msg, flush=True)


def run_scenario(name, c, commit, mach):
    os.makedirs(RESULTS, exist_ok=True)
    t0 = time.time()
    print(f"== {name}", flush=True)
    d = {"scenario": name, "commit": commit, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
         "machine": mach, "quick": c.quick, "runs": c.runs, "loadavg_start": os.getloadavg()}
    ok = True
    try:
        d.update(SCENARIOS[name](c))
        # Scenarios that insist on more runs than asked say so in their parameters.
        d["runs"] = d.get("params", {}).get("runs", c.runs)
    except (ScenarioError, subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
        ok = False
        d.update(failed=True, error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-2000:])
        print(f"!! scenario {name} failed: {e}", flush=True)
    finally:
        stop_all()
    d["seconds"] = round(time.time() - t0, 1)
    d["loadavg_end"] = os.getloadavg()
    if ok and name != "agreement":
        try:
            d["plots"] = plot_scenario(name, d)
        except Exception as e:  # a plot never loses the figures
            d["plots"] = []
            d.setdefault("notes", []).append(f"plot failed: {e}")
        update_history(name, d)
    with open(os.path.join(RESULTS, f"{name}.json"), "w") as f:
        json.dump(d, f, indent=1)
    print(f"   {name}: {'ok' if ok else 'FAILED'} in {d['seconds']:.0f} s", flush=True)
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="*", help=f"all, or some of: {', '.join(SCENARIOS)}")
    ap.add_argument("--quick", action="store_true", help="tiny counts and durations: a smoke test, not a measurement")
    ap.add_argument("--runs", type=int, default=None, help="runs per configuration (default 3; --quick: 1)")
    ap.add_argument("--no-install", action="store_true",
                    help="don't apt-get missing servers or tools (a scenario that needs one then fails, saying so)")
    ap.add_argument("--no-build", action="store_true", help="use target/release/larder as it is")
    ap.add_argument("--no-venv", action="store_true", help="use this Python as it is (needs matplotlib)")
    ap.add_argument("--report", action="store_true", help="only rebuild REPORT.md from the JSON files")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    if a.list:
        for n, f in SCENARIOS.items():
            print(f"{n:12} {(f.__doc__ or '').strip().splitlines()[0] if f.__doc__ else ''}")
        for n, why in PENDING.items():
            print(f"{n:12} (not yet: {why})")
        return 0
    if not a.no_venv:
        ensure_venv()
    if a.report:
        write_report()
        return 0
    names = list(SCENARIOS) if (not a.scenarios or a.scenarios == ["all"]) else a.scenarios
    for n in names:
        if n not in SCENARIOS:
            ap.error(f"unknown scenario {n!r} (pending: {', '.join(PENDING)})" if n in PENDING else f"unknown scenario {n!r}")
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    if not a.no_install:
        ensure_tools()
    if not a.no_build:
        build()
    if not os.path.exists(LARDER):
        raise SystemExit(f"{LARDER} is missing: build it (cargo build --release -p larder)")
    c = Ctx(a.quick, a.runs or (1 if a.quick else 3))
    commit, mach = git_commit(), machine()
    failed = []
    try:
        for n in names:
            if not run_scenario(n, c, commit, mach):
                failed.append(n)
    except KeyboardInterrupt:
        print("interrupted: servers stopped", flush=True)
        return 130
    finally:
        stop_all()
        write_report()
    if failed:
        print(f"failed scenarios: {', '.join(failed)} (see bench/results/<scenario>.json and REPORT.md)")
        return 1
    print(f"done: {os.path.join(RESULTS, 'REPORT.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
