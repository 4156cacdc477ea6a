#!/usr/bin/env bash
# Runs bench/compare/compare.sh in its quick mode (the sweep, 2 short rounds) on the built tree
# and checks what it prints: every case and size has a cell, ours measured in each, ratios
# and verdicts, the targets summary, and the plot when gnuplot is there; then that a bad
# SIZES is refused, and that SWEEP_LOAD's busy loops run and stop. Real programs (collrun,
# allreduce_bench, mpirun, Gloo), nothing faked.
#   compare_quick_test.sh COMPARE_SH BUILD_DIR
set -u
compare=$1
build=$2
tmp=$(mktemp -d "${TMPDIR:-/tmp}/compare_quick.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "FAIL: $*" >&2
  tail -n 60 "$tmp/out" >&2
  exit 1
}

QUICK=1 NO_BUILD=1 LOG_DIR="$tmp/logs" timeout 600 "$compare" "$build" >"$tmp/out" 2>&1
rc=$?
# 0: every target met; 1: some missed (expected on a busy 2-core machine). Others: broken.
[ "$rc" -le 1 ] || fail "compare.sh exited $rc"
if grep -q "failed for" "$tmp/out"; then
  # The failed programs' own logs go before the logs directory is removed.
  for log in $(grep -o "see [^)]*" "$tmp/out" | cut -c5-); do
    echo "--- $log" >&2
    tail -n 30 "$log" >&2
  done
  fail "a program failed"
fi
for title in "shm, 2 ranks, bound" "shm, 2 ranks, unbound" \
  "shm, 4 ranks on 2 cores (oversubscribed), bound" \
  "shm, 4 ranks on 2 cores (oversubscribed), unbound" \
  "tcp loopback, 2 ranks, bound" "tcp loopback, 2 ranks, unbound"; do
  grep -q "^$title " "$tmp/out" || fail "no table for '$title'"
done
# The data rows: size, ours "median (min-max, spread%)", ..., ratio, the ratio's range
# per round, async/blk, verdict.
rows=$(awk '$1 ~ /^(8|64|1Ki|8Ki)$/ && / (PASS|FAIL)/' "$tmp/out")
[ "$(echo "$rows" | grep -c .)" -eq 24 ] || fail "expected 24 cells (6 cases x 4 sizes)"
echo "$rows" | awk '
  $2 !~ /^[0-9.]+$/ || $3 !~ /^\([0-9.]+-[0-9.]+,$/ { print "ours not measured: " $0; bad = 1 }
  END { exit bad }' || fail "a cell without our time"
if [ -x "$build/bench/ref_mpi" ] && command -v mpirun >/dev/null; then
  echo "$rows" | grep -q "Open MPI: " || fail "no ratio against Open MPI"
  echo "$rows" | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^>=/) { r = $(i - 3); pr = $(i - 2); break }
    if (r !~ /^[0-9.]+$/) { print "no ratio: " $0; bad = 1 }
    if (pr !~ /^[0-9.]+-[0-9.]+$/) { print "no ratio per round: " $0; bad = 1 } } END { exit bad }' ||
    fail "a cell without a ratio"
fi
grep -Eq "^targets met in [0-9]+ of 24 cells" "$tmp/out" || fail "no targets summary"
# The machine's state before each of the 2 rounds: the cache line's trip between two CPUs.
[ "$(grep -Ec "^  round [12]: cpus [0-9]+,[0-9]+  exchange [1-9][0-9]* ns" "$tmp/out")" -eq 2 ] ||
  fail "no cache-line figure before each round"
[ "$(grep -c "^  [a-z0-9]* bind=[a-z]*: meet: " "$tmp/out")" -eq 6 ] || fail "no per-case verdicts"
# A missed target must show in the status, and a met one must not.
if grep -q "FAIL:" "$tmp/out"; then [ "$rc" -eq 1 ] || fail "targets missed but status $rc"; fi
if command -v gnuplot >/dev/null; then
  png=$tmp/logs/sweep/compare_sweep.png
  [ -s "$png" ] || fail "no plot"
  [ "$(head -c 4 "$png" | od -An -c | tr -d ' ')" = "211PNG" ] || fail "the plot is not a PNG"
fi
SIZES="8 24" QUICK=1 NO_BUILD=1 LOG_DIR="$tmp/bad" "$compare" "$build" >"$tmp/out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "SIZES '8 24' exited $rc, expected 2"
grep -q "size 24 is not 8 times a power of 2" "$tmp/out" || fail "no message for a bad size"
# SWEEP_LOAD: a bad count is refused; one busy loop runs beside a tiny sweep, the output
# names it, and the loop is gone once the sweep has ended.
sweep=$(dirname "$compare")/compare_sweep.sh
SWEEP_LOAD=lots QUICK=1 LOG_DIR="$tmp/bad" "$sweep" "$build" >"$tmp/out" 2>&1
rc=$?
[ "$rc" -eq 2 ] || fail "SWEEP_LOAD 'lots' exited $rc, expected 2"
grep -q "SWEEP_LOAD is 'lots', not a number of busy loops from 0 to 64" "$tmp/out" ||
  fail "no message for a bad SWEEP_LOAD"
SWEEP_LOAD=1 SWEEP_CONFIGS=shm2 SWEEP_BINDS=core SIZES=8 QUICK=1 LOG_DIR="$tmp/load" \
  timeout 300 "$sweep" "$build" >"$tmp/out" 2>&1
rc=$?
[ "$rc" -le 1 ] || fail "the sweep with SWEEP_LOAD=1 exited $rc"
grep -q "busy loops beside the programs: 1 (SWEEP_LOAD)" "$tmp/out" || fail "the load is not named"
pids=$(sed -n 's/.*(SWEEP_LOAD), pids //p' "$tmp/out")
[ "$(echo "$pids" | wc -w)" -eq 1 ] || fail "no pid listed for the busy loop"
for pid in $pids; do
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    fail "busy loop $pid still runs after the sweep"
  fi
done
echo "PASS"
