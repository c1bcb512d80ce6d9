#!/usr/bin/env bash
# Runs libmemcached's protocol conformance checker (memccapable, from Debian's
# libmemcached-tools) in ascii mode against a running server, and reports pass/fail counts.
# memccapable FLUSHES the server.
#
#   scripts/memccapable.sh PORT [HOST]
#
# Policy and knobs (environment):
#   MEMCCAPABLE_REQUIRED=1     1: exit 1 if any check fails (or none passes). 0: report the
#                              counts and exit 0 whatever they are.
#   MEMCCAPABLE_TIMEOUT=60     seconds the whole run may take (it takes ~3 s against memcached).
#   MEMCCAPABLE_IO_TIMEOUT=5   memccapable's own timeout for each read or write (-t).
#
# memccapable keeps going after a failed check, so one run normally reports every check. Should
# it die or hang (a crash, the server closing on it), the checks it did not reach are run one
# by one with -T; run alone, "ascii quit" fails even against memcached itself, so a full run
# stays the first choice. Output: tests/.cache/memccapable.log and
# tests/.cache/memccapable-summary.txt (also printed).
set -uo pipefail
cd "$(dirname "$0")/.."
CACHE=$PWD/tests/.cache

: "${MEMCCAPABLE_REQUIRED:=1}"
: "${MEMCCAPABLE_TIMEOUT:=60}"
: "${MEMCCAPABLE_IO_TIMEOUT:=5}"

PORT=${1:-${MEMCCAPABLE_PORT:-}}
HOST=${2:-127.0.0.1}
if [ -z "$PORT" ]; then
  echo "usage: scripts/memccapable.sh PORT [HOST]" >&2
  exit 2
fi
command -v memccapable >/dev/null || { echo "memccapable: not installed (apt-get install libmemcached-tools)" >&2; exit 2; }
mkdir -p "$CACHE"
LOG=$CACHE/memccapable.log
SUMMARY=$CACHE/memccapable-summary.txt

# The ascii checks of libmemcached 1.1.x, in the order memccapable runs them.
CHECKS=(
  "ascii version" "ascii quit" "ascii verbosity" "ascii set" "ascii set noreply" "ascii get"
  "ascii gets" "ascii mget" "ascii flush" "ascii flush noreply" "ascii add" "ascii add noreply"
  "ascii replace" "ascii replace noreply" "ascii cas" "ascii cas noreply" "ascii delete"
  "ascii delete noreply" "ascii incr" "ascii incr noreply" "ascii decr" "ascii decr noreply"
  "ascii append" "ascii append noreply" "ascii prepend" "ascii prepend noreply" "ascii stat"
)

# Reads memccapable's output: a check's name starts a line, its [pass]/[FAIL]/[skip] follows,
# possibly after what the server sent back (memccapable prints unexpected replies inline).
# Prints "pass|FAIL|skip<TAB>name"; a name with no status (memccapable died) as FAIL.
parse() {
  awk '
    match($0, /^(ascii|binary) [a-z ]*[a-z]/) { if (cur != "") print "FAIL\t" cur; cur = substr($0, RSTART, RLENGTH) }
    cur != "" && /\[pass\]/ { print "pass\t" cur; cur = ""; next }
    cur != "" && /\[FAIL\]/ { print "FAIL\t" cur; cur = ""; next }
    cur != "" && /\[skip\]/ { print "skip\t" cur; cur = ""; next }
    END { if (cur != "") print "FAIL\t" cur }
  '
}

t0=$(date +%s)
timeout -k 5 "$MEMCCAPABLE_TIMEOUT" memccapable -h "$HOST" -p "$PORT" -a -t "$MEMCCAPABLE_IO_TIMEOUT" </dev/null >"$LOG" 2>&1
rc=$?
results=$(parse <"$LOG")
finished=0
grep -qE '^All tests passed|tests failed' "$LOG" && finished=1
if [ "$finished" = 0 ] && grep -q '^Failed to connect' "$LOG"; then
  echo "memccapable could not connect" >>"$LOG"
  for c in "${CHECKS[@]}"; do results+=$'\n'"$(printf 'FAIL\t%s' "$c")"; done
elif [ "$finished" = 0 ]; then
  echo "memccapable ended early (rc $rc); running the remaining checks one by one" >>"$LOG"
  for c in "${CHECKS[@]}"; do
    grep -qP "\t\Q$c\E$" <<<"$results" && continue
    # Bounded in all: past twice the time limit, the rest count as failed without running.
    if [ $(( $(date +%s) - t0 )) -ge $(( 2 * MEMCCAPABLE_TIMEOUT )) ]; then
      results+=$'\n'"$(printf 'FAIL\t%s' "$c")"
      continue
    fi
    out=$(timeout -k 5 30 memccapable -h "$HOST" -p "$PORT" -a -t "$MEMCCAPABLE_IO_TIMEOUT" -T "$c" </dev/null 2>&1)
    printf '%s\n' "$out" >>"$LOG"
    r=$(parse <<<"$out")
    [ -n "$r" ] || r=$(printf 'FAIL\t%s' "$c")
    results+=$'\n'"$r"
  done
fi
results=$(grep -v '^$' <<<"$results")
pass=$(grep -c '^pass' <<<"$results")
fail=$(grep -c '^FAIL' <<<"$results")
skip=$(grep -c '^skip' <<<"$results")
{
  echo "memccapable (ascii) against $HOST:$PORT: $pass passed, $fail failed, $skip skipped in $(( $(date +%s) - t0 ))s"
  grep '^FAIL' <<<"$results" | cut -f2 | sed 's/^/  failed: /'
  echo "log: $LOG"
} | tee "$SUMMARY"

if [ "$MEMCCAPABLE_REQUIRED" = 1 ] && { [ "$fail" -gt 0 ] || [ "$pass" -eq 0 ]; }; then
  exit 1
fi
exit 0
