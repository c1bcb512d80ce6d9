#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine: installs what the tests need, builds,
# and runs every test. `.ci/run` calls exactly this.
#
# Phases:
#   setup        apt packages (only when one is missing: one `apt-get update`, then install),
#                a Python venv in .venv with tests/python/requirements.txt, Redis's own
#                test suite from Debian's redis source package, and the test suites of
#                redis-py and pymemcache from their sdists on PyPI (each with a venv of its
#                own), cached in tests/.cache/
#   rustfmt      `cargo fmt --all --check`, and rustfmt on fuzz/*/fuzz_targets (style: rustfmt.toml)
#   cargo build  the workspace, all targets;  cargo test: `cargo test --workspace --no-fail-fast`
#   clippy       `cargo clippy --workspace --all-targets -- -D warnings`
#   release      `cargo build --release -p larder`
#   server       `larder server` on free loopback ports (stopped on exit, whatever happens)
#   pytest       tests/python through redis-py (RESP2 and RESP3) and pymemcache
#   memccapable  scripts/memccapable.sh: libmemcached's ascii protocol checks
#   redis-suite  scripts/redis-suite.sh: units of Redis 7.0's Tcl test suite, external mode
#   redis-py     scripts/client-suites.sh: redis-py's own tests, RESP2 and RESP3, against a
#                server of their own
#   pymemcache   scripts/client-suites.sh: pymemcache's integration tests, against that server
# then a summary: each phase, its result and its time.
#
# What must pass (the exit code is 1 if one of these fails):
#   rustfmt, cargo build, clippy, cargo test, the release build and the server start, always;
#   PYTEST_REQUIRED=1        the client-library tests;
#   MEMCCAPABLE_REQUIRED=1   memccapable's ascii checks;
#   REDIS_SUITE_REQUIRED=1   every unit of Redis's test suite that is run but those in
#     REDIS_SUITE_OPTIONAL_UNITS (unit/pubsub; the tests that need commands Larder does not
#     have are skipped by name; both in scripts/redis-suite.sh);
#     0: only REDIS_SUITE_REQUIRED_UNITS="unit/type/string unit/type/incr unit/expire
#     unit/keyspace unit/protocol unit/info-command unit/quit" (the server issue's);
#   CLIENT_SUITES_REQUIRED=1 redis-py's and pymemcache's tests (those that need what Larder
#                            lacks are deselected by name in scripts/client-suites.sh, each
#                            group with its reason).
# Other knobs (environment):
#   LARDER_RESP_PORT, LARDER_MC_PORT   ports for the server (default: free ones); likewise
#   LARDER_REF_RESP_PORT, LARDER_REF_MC_PORT for the reference servers
#   LARDER_TEST_REFERENCE=1  also run a real redis-server and memcached side by side, for
#                            tests/python/test_reference.py (0: don't install or start them)
#   LARDER_TEST_CARGO=1      0 skips cargo build/test (to iterate on the server suites)
#   PYTEST_TIMEOUT=480       seconds for pytest (it takes ~25 s); memccapable and the Redis
#                            units have their own limits (see those scripts), so even a server
#                            that never answers keeps the whole run under ~25 minutes.
# `scripts/test.sh --setup-only` installs what the tests need and stops.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/tests/.cache
mkdir -p "$CACHE"

: "${PYTEST_REQUIRED:=1}"
: "${MEMCCAPABLE_REQUIRED:=1}"
: "${REDIS_SUITE_REQUIRED:=1}"
: "${CLIENT_SUITES_REQUIRED:=1}"
: "${REDIS_SUITE_REQUIRED_UNITS=unit/type/string unit/type/incr unit/expire unit/keyspace unit/protocol unit/info-command unit/quit}"
: "${LARDER_TEST_REFERENCE:=1}"
: "${LARDER_TEST_CARGO:=1}"
: "${PYTEST_TIMEOUT:=480}"
export MEMCCAPABLE_REQUIRED REDIS_SUITE_REQUIRED REDIS_SUITE_REQUIRED_UNITS
# The Redis suite phase must pass when some of its units are required.
REDIS_SUITE_PHASE_REQUIRED=$REDIS_SUITE_REQUIRED
[ -n "$REDIS_SUITE_REQUIRED_UNITS" ] && REDIS_SUITE_PHASE_REQUIRED=1

SETUP_ONLY=0
[ "${1:-}" = --setup-only ] && SETUP_ONLY=1  # install what the tests need, then stop

need() { command -v "$1" >/dev/null 2>&1; }
if [ "$SETUP_ONLY" = 0 ] && ! need cargo; then
  echo "cargo is required (rustup.rs); it is preinstalled on the project's machines" >&2
  exit 1
fi
# Named segments live in /dev/shm; make sure it is there and writable.
if [ "$SETUP_ONLY" = 0 ] && [ ! -w /dev/shm ]; then
  echo "/dev/shm is not writable: the multi-process tests need POSIX shared memory" >&2
  exit 1
fi
export CARGO_TERM_COLOR=never

# ---------------------------------------------------------------------------------------------
# Phase bookkeeping: every phase gets a row in the summary.
ROWS=()
FAILED_REQUIRED=0
PASSED_TESTS=0
FAILED_TESTS=0
# row NAME STATUS SECONDS DETAIL REQUIRED(1|0)
row() {
  ROWS+=("$(printf '%-12s %-8s %5ss  %s' "$1" "$2" "$3" "$4")")
  if [ "$5" = 1 ] && [ "$2" = FAIL ]; then FAILED_REQUIRED=1; fi
}

summary() {
  echo
  echo "==================== summary ===================="
  printf '%s\n' "${ROWS[@]}"
  echo "(failing: failures counted but not enforced, see *_REQUIRED at the top of scripts/test.sh)"
  echo "must pass: rustfmt, clippy, cargo, server$([ "$PYTEST_REQUIRED" = 1 ] && echo ", pytest")$([ "$MEMCCAPABLE_REQUIRED" = 1 ] && echo ", memccapable")$([ "$REDIS_SUITE_REQUIRED" = 1 ] && echo ", redis-suite" || { [ -n "$REDIS_SUITE_REQUIRED_UNITS" ] && echo ", redis-suite's required units"; })$([ "$CLIENT_SUITES_REQUIRED" = 1 ] && echo ", redis-py, pymemcache")"
  echo "tests: $PASSED_TESTS passed, $FAILED_TESTS failed"
}

# ---------------------------------------------------------------------------------------------
# Processes we start, stopped on any exit.
PIDS=()
stop_all() {
  local pid i
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${PIDS[@]}"; do
    for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  PIDS=()
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---------------------------------------------------------------------------------------------
# setup
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
PY=${PYTHON:-python3}

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }
have_redis_src() { ls "$CACHE"/redis-src/redis-*/runtest >/dev/null 2>&1; }
have_client_suites() { scripts/client-suites.sh fetch --check; }

# `apt-get source` needs a deb-src line; add one for the Debian mirror already configured.
ensure_deb_src() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    grep -qsE '^Types:.*deb-src' "$f" && grep -qs '/debian' "$f" && return 0
  done
  grep -qsE '^deb-src .*/debian' /etc/apt/sources.list /etc/apt/sources.list.d/*.list && return 0
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
      $SUDO tee /etc/apt/sources.list.d/larder-deb-src.sources >/dev/null
  elif grep -qsE '^deb .*debian' /etc/apt/sources.list; then
    grep -E '^deb .*debian' /etc/apt/sources.list | sed 's/^deb /deb-src /' |
      $SUDO tee /etc/apt/sources.list.d/larder-deb-src.list >/dev/null
  fi
}

setup() {
  local log=$CACHE/setup.log pkgs=() missing=() p
  : >"$log"
  # tcl: runtest; libmemcached-tools: memccapable; dpkg-dev: unpacks the redis source with
  # Debian's patches; redis-server and memcached: the side-by-side references only.
  pkgs=(tcl libmemcached-tools)
  have_redis_src || pkgs+=(dpkg-dev)
  [ "$LARDER_TEST_REFERENCE" = 1 ] && pkgs+=(redis-server memcached)
  need "$PY" || { PY=python3 && pkgs+=(python3); }
  "$PY" -c 'import venv, ensurepip' 2>/dev/null || pkgs+=(python3-venv)
  for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ] || ! have_redis_src; then
    have_redis_src || ensure_deb_src >>"$log" 2>&1
    echo "setup: apt-get update; installing: ${missing[*]:-(nothing)}$(have_redis_src || echo '; fetching the redis source')"
    $SUDO apt-get update -qq >>"$log" 2>&1 || echo "setup: apt-get update failed (see $log)"
    if [ ${#missing[@]} -gt 0 ]; then
      $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        >>"$log" 2>&1 || { echo "setup: apt-get install failed (see $log)"; tail -n 5 "$log"; }
    fi
  fi
  have_redis_src || scripts/redis-suite.sh fetch || echo "setup: could not fetch Redis's test suite"
  have_client_suites || scripts/client-suites.sh fetch >>"$log" 2>&1 ||
    echo "setup: could not fetch the client libraries' tests (see $log)"

  # The venv, rebuilt only when requirements.txt changes or the venv is broken.
  local stamp
  stamp=.venv/.req-$(sha256sum tests/python/requirements.txt | cut -c1-16)
  if ! .venv/bin/python -c 'import redis, pymemcache, pytest' 2>/dev/null || [ ! -f "$stamp" ]; then
    echo "setup: creating .venv (tests/python/requirements.txt)"
    .venv/bin/python -c 1 2>/dev/null || { rm -rf .venv && "$PY" -m venv .venv >>"$log" 2>&1; }
    .venv/bin/python -m pip install -q --disable-pip-version-check -r tests/python/requirements.txt >>"$log" 2>&1 &&
      rm -f .venv/.req-* && touch "$stamp" || { echo "setup: pip install failed (see $log)"; tail -n 5 "$log"; }
  fi
}

t=$SECONDS
setup
detail=""
need tclsh8.6 || need tclsh8.5 || detail+=" no tclsh;"
need memccapable || detail+=" no memccapable;"
have_redis_src || detail+=" no redis test suite;"
have_client_suites || detail+=" no client library tests;"
.venv/bin/python -c 'import redis, pymemcache, pytest' 2>/dev/null || detail+=" no .venv;"
row setup "$([ -z "$detail" ] && echo ok || echo PARTIAL)" $((SECONDS - t)) "${detail:-packages, .venv, redis source, client library tests}" 0
if [ "$SETUP_ONLY" = 1 ]; then
  printf '%s\n' "${ROWS[@]}"
  [ -z "$detail" ]
  exit
fi

# ---------------------------------------------------------------------------------------------
# cargo
# count_cargo LOG: adds up cargo's "test result: ok. N passed; M failed" lines into
# PASSED_TESTS / FAILED_TESTS and sets CARGO_COUNTS.
count_cargo() {
  local p f
  p=$(grep -oE 'test result: [A-Za-z]+\. [0-9]+ passed; [0-9]+ failed' "$1" | awk '{s+=$4} END {print s+0}')
  f=$(grep -oE 'test result: [A-Za-z]+\. [0-9]+ passed; [0-9]+ failed' "$1" | awk '{s+=$6} END {print s+0}')
  PASSED_TESTS=$((PASSED_TESTS + p)) FAILED_TESTS=$((FAILED_TESTS + f))
  CARGO_COUNTS="$p passed, $f failed"
}

if [ "$LARDER_TEST_CARGO" = 1 ]; then
  # Formatting first (seconds): rustfmt.toml is the project's style, and a diff that is
  # all re-wrapping hides the change in it.
  t=$SECONDS
  need_fmt() { cargo fmt --version >/dev/null 2>&1; }
  need_fmt || rustup component add rustfmt >/dev/null 2>&1
  # The fuzz crates are not workspace members: their targets are checked file by file.
  fmt_check() { cargo fmt --all --check && rustfmt --check --edition 2021 fuzz/*/fuzz_targets/*.rs; }
  if need_fmt && fmt_check >/dev/null; then
    row rustfmt ok $((SECONDS - t)) "" 1
  else
    need_fmt && fmt_check | head -40
    row rustfmt FAIL $((SECONDS - t)) "$(need_fmt && echo 'run cargo fmt --all, and rustfmt fuzz/*/fuzz_targets/*.rs' || echo 'no rustfmt')" 1
  fi
  t=$SECONDS
  if cargo build --workspace --all-targets; then
    row "cargo build" ok $((SECONDS - t)) "" 1
  else
    row "cargo build" FAIL $((SECONDS - t)) "" 1
    summary
    exit 1
  fi
  # Lints: clippy's defaults, every warning an error. A lint that is a judgment call is
  # allowed where it applies, with the reason beside it.
  t=$SECONDS
  need_clippy() { cargo clippy --version >/dev/null 2>&1; }
  need_clippy || rustup component add clippy >/dev/null 2>&1
  if need_clippy && cargo clippy --workspace --all-targets -- -D warnings; then
    row clippy ok $((SECONDS - t)) "" 1
  else
    row clippy FAIL $((SECONDS - t)) "$(need_clippy || echo 'no clippy')" 1
  fi
  t=$SECONDS
  # --no-fail-fast: one failing test binary must not hide the results of the others.
  cargo test --workspace --no-fail-fast 2>&1 | tee "$CACHE/cargo-test.log"
  rc=${PIPESTATUS[0]}
  count_cargo "$CACHE/cargo-test.log"
  row "cargo test" "$([ "$rc" = 0 ] && echo ok || echo FAIL)" $((SECONDS - t)) "$CARGO_COUNTS" 1
else
  row "cargo" skipped 0 "LARDER_TEST_CARGO=0" 0
fi

t=$SECONDS
if cargo build --release -p larder; then
  row release ok $((SECONDS - t)) "" 1
else
  row release FAIL $((SECONDS - t)) "" 1
  summary
  exit 1
fi
LARDER=${CARGO_TARGET_DIR:-$ROOT/target}/release/larder

# ---------------------------------------------------------------------------------------------
# servers
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
# wait_ports PID PORT... : until every port accepts, the process dies, or 30 s pass.
wait_ports() {
  local pid=$1 p i
  shift
  for i in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || return 1
    local all=1
    for p in "$@"; do port_open "$p" || all=0; done
    [ "$all" = 1 ] && return 0
    sleep 0.1
  done
  return 1
}

RESP_PORT=${LARDER_RESP_PORT:-$(free_port)}
MC_PORT=${LARDER_MC_PORT:-$(free_port)}
while [ "$MC_PORT" = "$RESP_PORT" ]; do MC_PORT=$(free_port); done

t=$SECONDS
# larder listens with SO_REUSEPORT: a second server on a busy port would not fail, it would
# share the connections. So check first.
for p in "$RESP_PORT" "$MC_PORT"; do
  if port_open "$p"; then
    echo "port $p is already in use" >&2
    row server FAIL 0 "port $p is already in use" 1
    summary
    exit 1
  fi
done
"$LARDER" server --bind 127.0.0.1 --port "$RESP_PORT" --memcache-port "$MC_PORT" \
  >"$CACHE/larder-server.log" 2>&1 &
SERVER_PID=$!
PIDS+=("$SERVER_PID")
if wait_ports "$SERVER_PID" "$RESP_PORT" "$MC_PORT"; then
  row server ok $((SECONDS - t)) "RESP 127.0.0.1:$RESP_PORT, memcached 127.0.0.1:$MC_PORT" 1
  SERVER_UP=1
else
  row server FAIL $((SECONDS - t)) "did not start: see $CACHE/larder-server.log" 1
  tail -n 20 "$CACHE/larder-server.log"
  SERVER_UP=0
fi

# The side-by-side references: real redis-server and memcached, when installed.
REF_ENV=()
if [ "$SERVER_UP" = 1 ] && [ "$LARDER_TEST_REFERENCE" = 1 ] && need redis-server && need memcached; then
  REF_RESP=${LARDER_REF_RESP_PORT:-$(free_port)}
  REF_MC=${LARDER_REF_MC_PORT:-$(free_port)}
  redis-server --bind 127.0.0.1 --port "$REF_RESP" --save '' --appendonly no --daemonize no \
    >"$CACHE/ref-redis.log" 2>&1 &
  PIDS+=($!)
  wait_ports $! "$REF_RESP" && REF_ENV+=(LARDER_REF_RESP_PORT="$REF_RESP")
  user=()
  [ "$(id -u)" = 0 ] && user=(-u nobody)  # memcached refuses to run as root without -u
  # No background LRU threads: they take item references for a moment, and an incr/decr only
  # rewrites an item in place (padded with spaces) when no one else holds it, so with them the
  # reference's replies would depend on timing (tests/python/test_differential_memcache.py).
  memcached -l 127.0.0.1 -p "$REF_MC" -U 0 -m 64 -o no_lru_maintainer,no_lru_crawler "${user[@]}" \
    >"$CACHE/ref-memcached.log" 2>&1 &
  PIDS+=($!)
  wait_ports $! "$REF_MC" && REF_ENV+=(LARDER_REF_MC_PORT="$REF_MC")
fi

# ---------------------------------------------------------------------------------------------
# pytest
t=$SECONDS
if [ "$SERVER_UP" != 1 ]; then
  row pytest "not run" 0 "no server" "$PYTEST_REQUIRED"
  [ "$PYTEST_REQUIRED" = 1 ] && FAILED_REQUIRED=1
elif ! .venv/bin/python -c 'import redis, pymemcache, pytest' 2>/dev/null; then
  row pytest FAIL 0 "no .venv (see $CACHE/setup.log)" "$PYTEST_REQUIRED"
else
  env LARDER_HOST=127.0.0.1 LARDER_RESP_PORT="$RESP_PORT" LARDER_MC_PORT="$MC_PORT" "${REF_ENV[@]}" \
    timeout -k 10 "$PYTEST_TIMEOUT" .venv/bin/python -m pytest tests/python -q --tb=line -rN \
    --junitxml="$CACHE/pytest.xml" 2>&1 | tee "$CACHE/pytest.log"
  rc=${PIPESTATUS[0]}
  last=$(grep -E '(passed|failed|error|no tests ran)' "$CACHE/pytest.log" | tail -n 1)
  p=$(grep -oE '[0-9]+ passed' <<<"$last" | cut -d' ' -f1)
  f=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$last" | awk '{s+=$1} END {print s+0}')
  s=$(grep -oE '[0-9]+ skipped' <<<"$last" | cut -d' ' -f1)
  detail="${p:-0} passed, $f failed, ${s:-0} skipped"
  if [ "$PYTEST_REQUIRED" = 1 ]; then
    PASSED_TESTS=$((PASSED_TESTS + ${p:-0})) FAILED_TESTS=$((FAILED_TESTS + f))
  fi
  case $rc in
    0) status=ok ;;
    5) status="no tests" ;;  # pytest's "collected nothing": say so, don't fail on it
    124 | 137) status=FAIL detail="timed out; $detail" ;;
    *) status=FAIL ;;
  esac
  [ "$status" = FAIL ] && [ "$PYTEST_REQUIRED" != 1 ] && status=failing
  row pytest "$status" $((SECONDS - t)) "$detail" "$PYTEST_REQUIRED"
fi

# ---------------------------------------------------------------------------------------------
# memccapable and Redis's test suite: each script reports its own counts and applies its
# *_REQUIRED policy to its exit code.
# suite NAME REQUIRED SUMMARY-FILE SCRIPT ARGS...: runs the script, reads its counts back.
suite() {
  local name=$1 required=$2 summary_file=$3 rc line p f unfinished status req= detail
  shift 3
  t=$SECONDS
  if [ "$SERVER_UP" != 1 ]; then
    row "$name" "not run" 0 "no server" "$required"
    [ "$required" = 1 ] && FAILED_REQUIRED=1
    return
  fi
  rm -f "$summary_file"
  "$@"
  rc=$?
  if [ "$name" = memccapable ]; then
    # "memccapable (ascii) against H:P: N passed, N failed, N skipped in Ns"
    line=$(head -n 1 "$summary_file" 2>/dev/null)
    p=$(grep -oE '[0-9]+ passed' <<<"$line" | cut -d' ' -f1)
    f=$(grep -oE '[0-9]+ failed' <<<"$line" | cut -d' ' -f1)
    unfinished=0
  else
    # "total  N ok  N err  N skipped  Ns  N unit(s) did not finish", then
    # "required  N ok  N err  N unit(s) did not finish  (units)"
    line=$(grep '^total' "$summary_file" 2>/dev/null | tr -s ' ')
    p=$(awk '{print $2}' <<<"$line")
    f=$(awk '{print $4}' <<<"$line")
    unfinished=$(grep -oE '[0-9]+ unit\(s\) did not finish' <<<"$line" | cut -d' ' -f1)
    req=$(grep '^required' "$summary_file" 2>/dev/null | tr -s ' ')
  fi
  p=${p:-0} f=${f:-0} unfinished=${unfinished:-0}
  if [ "$rc" != 0 ]; then
    status=FAIL
  elif [ -z "$line" ]; then
    status=FAIL line="no summary (rc $rc)"
  elif [ "$f" -gt 0 ] || [ "$unfinished" -gt 0 ]; then
    status=failing  # counts only: *_REQUIRED=0
  else
    status=ok
  fi
  detail="$p passed, $f failed$([ "$unfinished" -gt 0 ] && echo ", $unfinished unit(s) cut short")"
  if [ "$name" = redis-suite ] && [ "$REDIS_SUITE_REQUIRED" != 1 ] && [ -n "$req" ]; then
    # Only the required units count towards the run's totals.
    p=$(awk '{print $2}' <<<"$req") f=$(awk '{print $4}' <<<"$req")
    detail="$detail; required units: $p passed, $f failed"
  fi
  if [ "$required" = 1 ]; then
    PASSED_TESTS=$((PASSED_TESTS + ${p:-0})) FAILED_TESTS=$((FAILED_TESTS + ${f:-0}))
  fi
  row "$name" "$status" $((SECONDS - t)) "$detail" "$required"
}

echo
echo "---- memccapable ----"
suite memccapable "$MEMCCAPABLE_REQUIRED" "$CACHE/memccapable-summary.txt" scripts/memccapable.sh "$MC_PORT"
echo
echo "---- redis test suite ----"
if have_redis_src; then
  suite redis-suite "$REDIS_SUITE_PHASE_REQUIRED" "$CACHE/redis-suite-summary.txt" scripts/redis-suite.sh "$RESP_PORT"
else
  row redis-suite "not run" 0 "no redis source (see $CACHE/setup.log)" "$REDIS_SUITE_PHASE_REQUIRED"
  [ "$REDIS_SUITE_PHASE_REQUIRED" = 1 ] && FAILED_REQUIRED=1
fi

echo
echo "---- client libraries' test suites ----"
# A server of their own: the tests flush and change configuration.
if have_client_suites; then
  CL_RESP=$(free_port)
  CL_MC=$(free_port)
  while [ "$CL_MC" = "$CL_RESP" ]; do CL_MC=$(free_port); done
  "$LARDER" server --bind 127.0.0.1 --port "$CL_RESP" --memcache-port "$CL_MC" >"$CACHE/larder-clients.log" 2>&1 &
  PIDS+=($!)
  if wait_ports $! "$CL_RESP" "$CL_MC"; then
    suite redis-py "$CLIENT_SUITES_REQUIRED" "$CACHE/redis-py-summary.txt" scripts/client-suites.sh redis-py "$CL_RESP"
    suite pymemcache "$CLIENT_SUITES_REQUIRED" "$CACHE/pymemcache-summary.txt" \
      scripts/client-suites.sh pymemcache "$CL_MC"
  else
    row redis-py "not run" 0 "their server did not start: see $CACHE/larder-clients.log" "$CLIENT_SUITES_REQUIRED"
    [ "$CLIENT_SUITES_REQUIRED" = 1 ] && FAILED_REQUIRED=1
  fi
else
  row redis-py "not run" 0 "no client library tests (see $CACHE/setup.log)" "$CLIENT_SUITES_REQUIRED"
  [ "$CLIENT_SUITES_REQUIRED" = 1 ] && FAILED_REQUIRED=1
fi

# ---------------------------------------------------------------------------------------------
if [ "$SERVER_UP" = 1 ] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
  row server FAIL 0 "exited during the tests: see $CACHE/larder-server.log" 1
  tail -n 20 "$CACHE/larder-server.log"
fi
stop_all
summary
exit "$FAILED_REQUIRED"
