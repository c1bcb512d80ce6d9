#!/usr/bin/env python3
"""Side-by-side server benchmark: Larder vs Redis over RESP (client: redis-benchmark) and
Larder vs memcached over the memcached text protocol (client: memcslap), until `larder
bench` (its own load generator) exists.

Method (../shared/BENCHMARKS.md): every server pinned to core 0, the client to core 1,
servers alternated run by run (A B A B ...), at least 3 runs, medians reported with min and
max; server CPU time per operation read from /proc/PID/stat before and after each run.

Usage: bench/server_compare.py [--runs 3] [--requests 200000] [--out bench/results/server.json]
Needs: target/release/larder, redis-server, redis-benchmark, memcached, memcslap.
"""
import argparse
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLK = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK  # utime + stime


def wait_port(port, timeout=10):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} did not open")


class Server:
    def __init__(self, kind, port, mport=0):
        self.kind, self.port = kind, port
        if kind == "larder":
            cmd = [f"{ROOT}/target/release/larder", "server", "--threads", "1", "--port", str(port),
                   "--memcache-port", str(mport)]
        elif kind == "redis":
            cmd = ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--daemonize", "no"]
        else:
            cmd = ["memcached", "-p", str(port), "-U", "0", "-t", "1", "-m", "1024"] + (["-u", "root"] if os.getuid() == 0 else [])
        self.proc = subprocess.Popen(["taskset", "-c", "0"] + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def redis_benchmark(port, test, pipeline, requests, clients=50):
    cmd = ["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-t", test, "-n", str(requests),
           "-c", str(clients), "-P", str(pipeline), "-d", "32", "-r", "100000", "-q", "--csv"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    # "test","rps","avg_latency_ms",...
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if parts and parts[0].upper().startswith(test.upper()):
            return float(parts[1])
    raise RuntimeError(f"no result in {out!r}")


def mget_bench(port, n, requests=2000):
    """MGET of n keys (or memcached get k1..kn) through redis-benchmark's custom command."""
    keys = [f"key:{i:07d}" for i in range(n)]
    cmd = ["taskset", "-c", "1", "redis-benchmark", "-p", str(port), "-n", str(requests), "-c", "10", "-q",
           "--csv", "MGET"] + keys
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600).stdout
    for line in out.splitlines():
        parts = [p.strip('"') for p in line.split(",")]
        if parts and parts[0].upper().startswith("MGET"):
            return float(parts[1])
    raise RuntimeError(out)


def memcslap(port, test, concurrency=50, execute=200000):
    cmd = ["taskset", "-c", "1", "memcslap", f"--servers=127.0.0.1:{port}", f"--test={test}",
           f"--concurrency={concurrency}", f"--execute-number={execute // concurrency}", "--binary=false"]
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    took = time.time() - t0
    m = re.search(r"Took\s+([\d.]+)\s+seconds", out.stdout)
    secs = float(m.group(1)) if m else took
    return execute / secs


def run(args):
    results = []
    scenarios = [("set", 1), ("get", 1), ("set", 16), ("get", 16)]
    for r in range(args.runs):
        order = ["larder", "redis"] if r % 2 == 0 else ["redis", "larder"]
        for kind in order:
            port = free_port()
            srv = Server(kind, port)
            try:
                for test, pipe in scenarios:
                    c0 = cpu_seconds(srv.proc.pid)
                    rps = redis_benchmark(port, test, pipe, args.requests)
                    c1 = cpu_seconds(srv.proc.pid)
                    results.append({"run": r, "server": kind, "proto": "resp", "test": test, "pipeline": pipe,
                                    "ops_per_sec": rps, "cpu_us_per_op": (c1 - c0) * 1e6 / args.requests})
                    print(f"run {r} {kind:7} {test} P{pipe:<3} {rps:12.0f} ops/s  "
                          f"{results[-1]['cpu_us_per_op']:.2f} µs CPU/op", flush=True)
                for n in (10, 100, 1000):
                    rps = mget_bench(port, n)
                    results.append({"run": r, "server": kind, "proto": "resp", "test": f"mget{n}", "pipeline": 1,
                                    "ops_per_sec": rps, "keys_per_sec": rps * n})
                    print(f"run {r} {kind:7} MGET {n:<5} {rps:10.0f} req/s  {rps * n:12.0f} keys/s", flush=True)
            finally:
                srv.stop()
        if args.memcache and shutil.which("memcslap"):
            order = ["larder", "memcached"] if r % 2 == 0 else ["memcached", "larder"]
            for kind in order:
                port, mport = free_port(), free_port()
                srv = Server(kind, port, mport)
                if kind == "larder":
                    wait_port(mport)
                else:
                    mport = port
                try:
                    for test in ("set", "get"):
                        c0 = cpu_seconds(srv.proc.pid)
                        ops = memcslap(mport, test, execute=args.requests // 4)
                        c1 = cpu_seconds(srv.proc.pid)
                        results.append({"run": r, "server": kind, "proto": "memcache", "test": test, "pipeline": 1,
                                        "ops_per_sec": ops, "cpu_us_per_op": (c1 - c0) * 1e6 / (args.requests // 4)})
                        print(f"run {r} {kind:9} mc {test} {ops:12.0f} ops/s  "
                              f"{results[-1]['cpu_us_per_op']:.2f} µs CPU/op", flush=True)
                finally:
                    srv.stop()
    return results


def summarize(results):
    lines = ["| proto | test | pipeline | server | ops/s median (min-max) | CPU µs/op median |", "|---|---|---|---|---|---|"]
    keys = sorted({(r["proto"], r["test"], r["pipeline"], r["server"]) for r in results})
    table = {}
    for k in keys:
        rs = [r for r in results if (r["proto"], r["test"], r["pipeline"], r["server"]) == k]
        ops = [r["ops_per_sec"] for r in rs]
        cpu = [r["cpu_us_per_op"] for r in rs if "cpu_us_per_op" in r]
        table[k] = (statistics.median(ops), statistics.median(cpu) if cpu else None)
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | {statistics.median(ops):,.0f} ({min(ops):,.0f}-{max(ops):,.0f}) | "
                     + (f"{statistics.median(cpu):.2f}" if cpu else "-") + " |")
    lines.append("")
    lines.append("| proto | test | pipeline | Larder ÷ peer, ops/s | Larder ÷ peer, CPU/op |")
    lines.append("|---|---|---|---|---|")
    for (proto, test, pipe, server), (ops, cpu) in table.items():
        if server == "larder":
            continue
        l_ops, l_cpu = table.get((proto, test, pipe, "larder"), (None, None))
        if l_ops is None:
            continue
        lines.append(f"| {proto} ({server}) | {test} | {pipe} | {l_ops / ops:.2f} | "
                     + (f"{l_cpu / cpu:.2f}" if cpu and l_cpu else "-") + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--requests", type=int, default=200000)
    ap.add_argument("--memcache", action="store_true",
                    help="also run memcslap against Larder and memcached (its timing parse is unreliable)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "server.json"))
    args = ap.parse_args()
    results = run(args)
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    meta = {"commit": commit, "machine": {"cores": os.cpu_count(), "kernel": platform.release(),
            "cpu": next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")},
            "params": vars(args)}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "results": results}, f, indent=1)
    md = summarize(results)
    with open(args.out.replace(".json", ".md"), "w") as f:
        f.write(f"# Server side by side ({commit}, {meta['machine']['cpu']}, {os.cpu_count()} cores)\n\n"
                "Servers pinned to core 0 (one thread each), clients to core 1; 50 connections, 32-byte values.\n\n"
                + md + "\n")
    print(md)


if __name__ == "__main__":
    sys.exit(main())
