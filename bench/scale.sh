#!/usr/bin/env bash
# The data-types issue's scale check: the cost of one operation on a 1M-member collection
# against the same on a 1k-member one, through the server. Loads z1000/z1000000 (sorted sets),
# h1000/h1000000 (hashes), l1000/l1000000 (lists), then runs redis-benchmark (P16, 50 clients,
# pinned to core 1; the server, one thread, to core 0) and prints requests/s and the server's
# CPU nanoseconds per request (from /proc; 10 ms ticks) for ZRANK, ZRANGE (10 in the middle),
# ZADD (a random member's score), HGET, LINDEX (the middle). Twice, to see the noise.
#   bench/scale.sh            (needs target/release/larder, redis-cli, redis-benchmark)
#   PORT=7401 REPS=2 bench/scale.sh
set -u
cd "$(dirname "$0")/.."
P=${PORT:-7401}
taskset -c 0 target/release/larder server --threads 1 --port $P --memcache-port 0 > /dev/null 2>&1 &
SP=$!
trap 'kill $SP 2>/dev/null' EXIT
for _ in $(seq 50); do redis-cli -p $P ping > /dev/null 2>&1 && break; sleep 0.1; done
load() { # key n
  python3 - "$1" "$2" <<'PY' | redis-cli -p $P --pipe > /dev/null
import sys
k, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
def cmd(*a):
    out.write(b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a))
kb = k.encode()
for i in range(0, n, 100):
    if k.startswith("z"):
        a = [b"ZADD", kb]
        for j in range(i, min(n, i + 100)): a += [str(j).encode(), b"m:%d" % j]
    elif k.startswith("h"):
        a = [b"HSET", kb]
        for j in range(i, min(n, i + 100)): a += [b"f:%d" % j, b"v%d" % j]
    else:
        a = [b"RPUSH", kb] + [b"e:%d" % j for j in range(i, min(n, i + 100))]
    cmd(*a)
PY
}
for n in 1000 1000000; do load z$n $n; load h$n $n; load l$n $n; done
redis-cli -p $P dbsize
cpu() { awk '{print $14+$15}' /proc/$SP/stat; }
run() { # label N args...
  local label=$1 N=$2; shift 2
  local c0=$(cpu)
  local rps=$(taskset -c 1 redis-benchmark -p $P -P 16 -c 50 -n $N -q "$@" 2>&1 | tr '\r' '\n' | grep "requests per" | tail -1 | sed -E 's/.*: ([0-9.]+) requests.*/\1/')
  local c1=$(cpu)
  echo "$label rps=$rps cpu_ns_op=$(( (c1-c0)*10000000/N ))"
}
for rep in $(seq ${REPS:-2}); do
for n in 1000 1000000; do
  run "zrank   n=$n" 300000 -r $n zrank z$n m:__rand_int__
  run "zrange  n=$n" 300000 zrange z$n $((n/2)) $((n/2+9))
  run "zadd    n=$n" 300000 -r $n zadd z$n __rand_int__ m:__rand_int__
  run "hget    n=$n" 300000 -r $n hget h$n f:__rand_int__
  run "lindex  n=$n" 300000 lindex l$n $((n/2))
done
done
