#!/usr/bin/env bash
# algo_compare.sh: runs the real allreduce_bench (under collrun) for every algorithm
# (ring, tree, hd, master) and rank count over a range of sizes, writes one CSV and a PNG
# of bus bandwidth against size per algorithm (gnuplot, algo_compare.gp beside this
# script), with the cost model's prediction for the same cases (coll-sim) as dashed lines,
# and prints the largest size's busbw per algorithm. Master's rank-0 bottleneck is the line that falls
# behind as ranks are added, in the model always, in the measurement when every rank has
# a core of its own (with more ranks than cores the CPU, not rank 0's link, is the limit).
#
#   bench/algorithms/algo_compare.sh [BUILD_DIR]
#     (default: build; configured and built if needed)
# Environment: RANKS (default "2 3 4"), ALGOS (default "ring tree hd master"),
#   MINBYTES (default 1K), MAXBYTES (default 16M), FACTOR (default 4), ITERS (default 10),
#   WARMUP (default 3), TRANSPORT (shm or tcp; default: libcoll's choice),
#   REPLOT=1: no runs; redo the model and the plot from OUT_DIR's algo_compare.csv.
#   OUT_DIR (default BUILD_DIR/algo_compare): algo_compare.csv, algo_model.csv (the cost
#   model's time and busbw per measured case), algo_compare.png, logs.
# Exit status: 0 success, 1 a run failed (its log is named), 2 build or setup failure.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # run as `sh script`: bash it is
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ranks=${RANKS:-2 3 4}
algos=${ALGOS:-ring tree hd master}
minbytes=${MINBYTES:-1K}
maxbytes=${MAXBYTES:-16M}
factor=${FACTOR:-4}
iters=${ITERS:-10}
warmup=${WARMUP:-3}
out=${OUT_DIR:-$build/algo_compare}
mkdir -p "$out" || exit 2

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" >"$out/meson-setup.log" 2>&1 || {
    tail -20 "$out/meson-setup.log" >&2
    exit 2
  }
fi
ninja -C "$build" bench/allreduce_bench tools/collrun tools/coll-sim >"$out/build.log" 2>&1 || {
  tail -30 "$out/build.log" >&2
  exit 2
}
bench=$build/bench/allreduce_bench
collrun=$build/tools/collrun
collsim=$build/tools/coll-sim
export COLL_TIMEOUT_MS=${COLL_TIMEOUT_MS:-120000}
extra=()
[ -n "${TRANSPORT:-}" ] && extra=(-T "$TRANSPORT")

csv=$out/algo_compare.csv
status=0
[ "${REPLOT:-0}" = 1 ] && ranks_run="" || { ranks_run=$ranks; rm -f "$csv"; }
for n in $ranks_run; do
  for a in $algos; do
    part=$out/run-n$n-$a.csv
    log=$out/run-n$n-$a.log
    printf 'algo_compare: %d ranks, %-6s ... ' "$n" "$a"
    if "$collrun" -n "$n" --timeout 300 "$bench" -b "$minbytes" -e "$maxbytes" -f "$factor" \
        -n "$iters" -w "$warmup" -A "$a" "${extra[@]}" --csv "$part" >"$log" 2>&1; then
      echo ok
    else
      echo "FAILED (see $log)"
      status=1
      continue
    fi
    # One header for the whole file; every row names its nranks and algo.
    if [ ! -f "$csv" ]; then cat "$part" >"$csv"; else tail -n +2 "$part" >>"$csv"; fi
  done
done
[ -f "$csv" ] || { echo "algo_compare: no run succeeded" >&2; exit 1; }

# The cost model's prediction for every measured (size, ranks, algo), same busbw formula,
# in the measured CSV's order (grouped by ranks and algo, so gnuplot draws unbroken lines).
model=$out/algo_model.csv
echo "size,nranks,algo,model_time_us,model_busbw" >"$model"
tail -n +2 "$csv" | cut -d, -f1,14,15 | while IFS=, read -r size n a; do
  t=$("$collsim" "$a" -n "$n" --bytes "$size" --transport "${TRANSPORT:-shm}" --json \
      | grep -o '"predicted_s": [0-9.e+-]*' | cut -d' ' -f2)
  [ -n "$t" ] && awk -v s="$size" -v n="$n" -v a="$a" -v t="$t" 'BEGIN {
      printf "%s,%s,%s,%.3f,%.4f\n", s, n, a, t * 1e6, s / t * 2 * (n - 1) / n / 1e9 }' >>"$model"
done

# Largest size per rank count: busbw of each algorithm side by side.
echo
echo "busbw (GB/s, out-of-place) at the largest size; master / ring shows the bottleneck"
awk -F, -v algos="$algos" '
  NR == 1 { next }
  { if ($1 + 0 >= big[$14] + 0) big[$14] = $1; bw[$14 "," $15 "," $1] = $8 }
  END {
    na = split(algos, al, " ")
    printf "%-7s %-10s", "ranks", "bytes"
    for (i = 1; i <= na; i++) printf " %8s", al[i]
    printf " %14s\n", "master/ring"
    for (n in big) {
      printf "%-7s %-10s", n, big[n]
      for (i = 1; i <= na; i++) {
        k = n "," al[i] "," big[n]
        printf " %8s", (k in bw) ? bw[k] : "-"
      }
      r = n "," "ring" "," big[n]; m = n "," "master" "," big[n]
      if ((r in bw) && (m in bw) && bw[r] > 0) printf " %14.2f", bw[m] / bw[r]
      printf "\n"
    }
  }' "$csv" | sort -n

if command -v gnuplot >/dev/null; then
  # The load average goes in the title: on a shared machine it says how far to trust it.
  load=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo '?')
  title="all-reduce busbw by algorithm ($(nproc) cores, load $load, $(date +%Y-%m-%d))"
  if gnuplot -e "csv='$csv'; model='$model'; png='$out/algo_compare.png'; ranks='$ranks'; \
                 algos='$algos'; title='$title'" "$root/bench/algorithms/algo_compare.gp" \
      2>"$out/gnuplot.log"; then
    echo "plot: $out/algo_compare.png"
  else
    echo "algo_compare: gnuplot failed: $(tail -3 "$out/gnuplot.log")" >&2
    status=1
  fi
else
  echo "algo_compare: gnuplot missing (Debian gnuplot-nox): no plot, CSV only" >&2
fi
echo "csv: $csv"
exit $status
