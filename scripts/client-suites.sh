#!/usr/bin/env bash
# Runs client libraries' own test suites against an already running server: redis-py's
# (its sdist on PyPI holds its tests), once over RESP2 and once over RESP3, and pymemcache's
# integration tests against the memcached port. The view of people who are not us.
#
#   scripts/client-suites.sh fetch [--check]          download both sdists into
#                                                     tests/.cache/clients, each with a venv
#                                                     of its own (pip reaches PyPI); --check
#                                                     only says whether that is done
#   scripts/client-suites.sh redis-py PORT [HOST]     redis-py's tests against HOST:PORT
#   scripts/client-suites.sh pymemcache PORT [HOST]   pymemcache's against a memcached port
#
# The tests FLUSHDB database 9 (flush_all for pymemcache) and change some configuration (and
# put it back): give them a server of their own. Knobs (environment):
#   REDIS_PY_VERSION=5.0.8     the redis-py release whose tests run, with its own library (the
#                              tests belong to their release). 5.0.8: the last release before
#                              the 5.1 line's Redis 7.2+/8 tests.
#   PYMEMCACHE_VERSION=4.0.0   likewise for pymemcache.
#   REDIS_PY_FILES="..."       test files (default below: the server-facing ones, not cluster,
#                              sentinel, SSL, or the module tests that need Redis Stack).
#   REDIS_PY_PROTOCOLS="2 3"   the protocols to run with (redis-py's --protocol).
#   REDIS_PY_SKIP, PYMEMCACHE_SKIP   node ids deselected, one per line (defaults below, each
#                              group with its reason).
#   CLIENT_SUITE_TIMEOUT=600   seconds for each run.
# Output: tests/.cache/clients/NAME-RUN.log, and the summary in
# tests/.cache/NAME-summary.txt ("total" line as scripts/redis-suite.sh writes it).
# Exit 1 if a test that is not deselected fails, or a run does not finish.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
CACHE=$ROOT/tests/.cache
DIR=$CACHE/clients
: "${REDIS_PY_VERSION:=5.0.8}"
: "${PYMEMCACHE_VERSION:=4.0.0}"
: "${CLIENT_SUITE_TIMEOUT:=600}"
PY=${PYTHON:-python3}

# The tests' own needs (their test requirements, less coverage, linters and event loops).
REDIS_PY_DEPS=('pytest>=9,<10' 'pytest-asyncio>=1,<2' 'pytest-timeout>=2,<3' 'mock>=5,<6' 'packaging>=20.4')
PYMEMCACHE_DEPS=('pytest>=9,<10' 'pytest-timeout>=2,<3' 'faker>=15')

# have NAME VERSION MODULES: whether NAME's tests and venv are there.
have() {
  [ -d "$DIR/$1-$2" ] && "$DIR/venv-$1-$2/bin/python" -c "import $3" 2>/dev/null
}
have_all() {
  have redis "$REDIS_PY_VERSION" 'redis, pytest, pytest_asyncio, pytest_timeout, mock' &&
    have pymemcache "$PYMEMCACHE_VERSION" 'pymemcache, pytest, pytest_timeout, faker'
}

# fetch NAME VERSION DEPS...: the sdist unpacked in $DIR/NAME-VERSION, and a venv with the
# library of that release and DEPS.
fetch() {
  local name=$1 version=$2 venv=$DIR/venv-$1-$2
  shift 2
  # The venv first: its pip fetches the sdist too (the system Python may have no pip).
  "$venv/bin/python" -m pip --version >/dev/null 2>&1 || { rm -rf "$venv" && "$PY" -m venv "$venv"; } || return 1
  if [ ! -d "$DIR/$name-$version" ]; then
    "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-binary :all: --no-deps \
      -d "$DIR" "$name==$version" || return 1
    tar -xzf "$DIR/$name-$version.tar.gz" -C "$DIR" || return 1
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$DIR/$name-$version.tar.gz" "$@"
}

if [ "${1:-}" = fetch ]; then
  [ "${2:-}" = --check ] && { have_all; exit; }
  have_all && exit 0
  mkdir -p "$DIR"
  fetch redis "$REDIS_PY_VERSION" "${REDIS_PY_DEPS[@]}" || exit 1
  fetch pymemcache "$PYMEMCACHE_VERSION" "${PYMEMCACHE_DEPS[@]}" || exit 1
  have_all
  exit
fi

NAME=${1:?usage: scripts/client-suites.sh fetch | redis-py PORT [HOST] | pymemcache PORT [HOST]}
PORT=${2:?usage: scripts/client-suites.sh NAME PORT [HOST]}
HOST=${3:-127.0.0.1}
if ! have_all; then
  echo "the client libraries' tests are not in $DIR: run scripts/client-suites.sh fetch" >&2
  exit 1
fi

: "${REDIS_PY_FILES:=tests/test_commands.py tests/test_pipeline.py tests/test_pubsub.py tests/test_encoding.py
tests/test_hash.py tests/test_monitor.py tests/test_connection.py tests/test_connection_pool.py
tests/test_command_parser.py tests/test_helpers.py tests/test_multiprocessing.py tests/test_retry.py
tests/test_lock.py tests/test_scripting.py tests/test_function.py}"
: "${REDIS_PY_PROTOCOLS:=2 3}"
# What Larder does not have yet:
#   streams (X*, and test_get_moveable_keys's XREAD), FUNCTION DUMP/RESTORE, BGSAVE (no
#   persistence), and COMMAND LIST's "more than 300 commands" (Larder has fewer while
#   streams are missing).
# What fails against redis-server 7.0.15 as well:
#   test_acl_getuser_setuser and test_acl_log expect Redis 7.2's ACL replies; test_module and
#   test_module_loadex need Redis Stack's modules at localhost:6379; test_psync a replica at
#   localhost:6380; the *_cluster and shardnumsub pub/sub tests a cluster client; and
#   test_retry_connect_on_timeout_error and test_create_single_connection_client_from_url a
#   server at localhost:6379; test_eval_crossslot and test_function_list_on_cluster a cluster.
: "${REDIS_PY_SKIP:=tests/test_commands.py::TestRedisCommands::test_xack
tests/test_commands.py::TestRedisCommands::test_xadd
tests/test_commands.py::TestRedisCommands::test_xadd_explicit_ms
tests/test_commands.py::TestRedisCommands::test_xadd_minlen_and_limit
tests/test_commands.py::TestRedisCommands::test_xadd_nomkstream
tests/test_commands.py::TestRedisCommands::test_xautoclaim
tests/test_commands.py::TestRedisCommands::test_xclaim
tests/test_commands.py::TestRedisCommands::test_xclaim_trimmed
tests/test_commands.py::TestRedisCommands::test_xdel
tests/test_commands.py::TestRedisCommands::test_xgroup_create
tests/test_commands.py::TestRedisCommands::test_xgroup_create_entriesread
tests/test_commands.py::TestRedisCommands::test_xgroup_create_mkstream
tests/test_commands.py::TestRedisCommands::test_xgroup_createconsumer
tests/test_commands.py::TestRedisCommands::test_xgroup_delconsumer
tests/test_commands.py::TestRedisCommands::test_xgroup_destroy
tests/test_commands.py::TestRedisCommands::test_xgroup_setid
tests/test_commands.py::TestRedisCommands::test_xinfo_stream
tests/test_commands.py::TestRedisCommands::test_xinfo_stream_full
tests/test_commands.py::TestRedisCommands::test_xlen
tests/test_commands.py::TestRedisCommands::test_xpending
tests/test_commands.py::TestRedisCommands::test_xpending_range
tests/test_commands.py::TestRedisCommands::test_xpending_range_idle
tests/test_commands.py::TestRedisCommands::test_xrange
tests/test_commands.py::TestRedisCommands::test_xread
tests/test_commands.py::TestRedisCommands::test_xreadgroup
tests/test_commands.py::TestRedisCommands::test_xrevrange
tests/test_commands.py::TestRedisCommands::test_xtrim
tests/test_commands.py::TestRedisCommands::test_xtrim_minlen_and_length_args
tests/test_command_parser.py::TestCommandsParser::test_get_moveable_keys
tests/test_function.py::TestFunction::test_function_dump_restore
tests/test_commands.py::TestRedisCommands::test_bgsave
tests/test_commands.py::TestRedisCommands::test_command_list
tests/test_commands.py::TestRedisCommands::test_acl_getuser_setuser
tests/test_commands.py::TestRedisCommands::test_acl_log
tests/test_commands.py::TestRedisCommands::test_module
tests/test_commands.py::TestRedisCommands::test_module_loadex
tests/test_commands.py::TestRedisCommands::test_psync
tests/test_pubsub.py::TestPubSubSubscribeUnsubscribe::test_shard_channel_subscribe_unsubscribe_cluster
tests/test_pubsub.py::TestPubSubSubscribeUnsubscribe::test_subscribe_property_with_shard_channels_cluster
tests/test_pubsub.py::TestPubSubSubcommands::test_pubsub_shardchannels_cluster
tests/test_pubsub.py::TestPubSubSubcommands::test_pubsub_shardnumsub
tests/test_connection.py::TestConnection::test_retry_connect_on_timeout_error
tests/test_connection.py::test_create_single_connection_client_from_url
tests/test_scripting.py::TestScripting::test_eval_crossslot
tests/test_function.py::TestFunction::test_function_list_on_cluster}"
# pymemcache: test_misc calls cache_memlimit, which Larder answers ERROR until it has
# eviction to apply a memory limit with (a limit it would not enforce is not set).
: "${PYMEMCACHE_SKIP:=pymemcache/test/test_integration.py::test_misc}"

summary=$CACHE/$NAME-summary.txt
: >"$summary"
total_ok=0 total_err=0 total_skip=0 unfinished=0 start=$SECONDS
# run LABEL SRC-DIR SKIP-LIST PYTEST-ARGS...: one pytest run, its counts into the totals.
run() {
  local label=$1 src=$2 skips=$3 t=$SECONDS log=$DIR/$NAME-$1.log id rc last ok err skip state
  shift 3
  local deselect=()
  while IFS= read -r id; do
    [ -n "$id" ] && deselect+=(--deselect "$id")
  done <<<"$skips"
  (cd "$src" && timeout -k 10 "$CLIENT_SUITE_TIMEOUT" "$VENV/bin/python" -m pytest -q -p no:cacheprovider \
    --timeout 60 --tb=short -rfE "${deselect[@]}" "$@") >"$log" 2>&1
  rc=$?
  last=$(grep -E '(passed|failed|error|no tests ran)' "$log" | tail -n 1)
  ok=$(grep -oE '[0-9]+ passed' <<<"$last" | cut -d' ' -f1)
  err=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$last" | awk '{s+=$1} END {print s+0}')
  skip=$(grep -oE '[0-9]+ (skipped|deselected)' <<<"$last" | awk '{s+=$1} END {print s+0}')
  ok=${ok:-0}
  state=done
  if [ "$rc" = 124 ] || [ "$rc" = 137 ] || [ -z "$last" ]; then
    state="did not finish (rc $rc)" unfinished=$((unfinished + 1))
  fi
  printf '%-20s %4d ok %4d err %4d skipped %5ds  %s\n' "$label" "$ok" "$err" "$skip" $((SECONDS - t)) "$state" |
    tee -a "$summary"
  grep -E '^(FAILED|ERROR) ' "$log" | sed 's/^/  /' | tee -a "$summary"
  total_ok=$((total_ok + ok)) total_err=$((total_err + err)) total_skip=$((total_skip + skip))
}

case $NAME in
  redis-py)
    VENV=$DIR/venv-redis-$REDIS_PY_VERSION
    echo "redis-py $REDIS_PY_VERSION's tests against $HOST:$PORT" | tee -a "$summary"
    for proto in $REDIS_PY_PROTOCOLS; do
      # shellcheck disable=SC2086  # the file list splits on white space on purpose
      run "resp$proto" "$DIR/redis-$REDIS_PY_VERSION" "$REDIS_PY_SKIP" --protocol="$proto" \
        --redis-url="redis://$HOST:$PORT/9" $REDIS_PY_FILES
    done
    ;;
  pymemcache)
    VENV=$DIR/venv-pymemcache-$PYMEMCACHE_VERSION
    echo "pymemcache $PYMEMCACHE_VERSION's integration tests against $HOST:$PORT" | tee -a "$summary"
    # Its setup.cfg asks for pytest-cov and unit tests only: not read (-c /dev/null).
    run integration "$DIR/pymemcache-$PYMEMCACHE_VERSION" "$PYMEMCACHE_SKIP" -c /dev/null --rootdir . \
      -m integration -o markers=integration --server "$HOST" --port "$PORT" pymemcache/test/test_integration.py
    ;;
  *)
    echo "unknown suite $NAME (redis-py, pymemcache)" >&2
    exit 2
    ;;
esac
printf '%-20s %4d ok %4d err %4d skipped %5ds  %d unit(s) did not finish\n' total "$total_ok" "$total_err" \
  "$total_skip" $((SECONDS - start)) "$unfinished" | tee -a "$summary"
echo "logs: $DIR/$NAME-*.log"
[ "$total_err" = 0 ] && [ "$unfinished" = 0 ]
