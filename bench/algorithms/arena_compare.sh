#!/usr/bin/env bash
# arena_compare.sh: the measurement behind the arena all-reduce's automatic choice
# (libcoll/src/algo/cost.c, algo_arena_preferred): busbw of ring, of the cost model's
# choice without the arena (COLL_ARENA=0, -A auto) and of the arena, at 2, 3 and 4 ranks,
# each case REPS times, interleaved, then the median per case and the ratios.
#
#   bench/algorithms/arena_compare.sh [BUILD_DIR]     (default: build; must be built)
# Environment: RANKS ("2 3 4"), MINB (64K), MAXB (64M), REPS (3), ITERS (10).
# busbw is the mean of the bench's out-of-place and in-place columns. With other jobs on
# the machine, run it when it is quiet (the load average is printed before and after).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # run as `sh script`: bash it is
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
ranks=${RANKS:-2 3 4}
reps=${REPS:-3}
out=$(mktemp "${TMPDIR:-/tmp}/arena_compare.XXXXXX")
for t in bench/allreduce_bench tools/collrun; do
  [ -x "$build/$t" ] || { echo "arena_compare.sh: $build/$t is not built" >&2; exit 2; }
done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq "$reps"); do
  for n in $ranks; do
    for algo in ring auto arena; do
      arena=1
      [ "$algo" = auto ] && arena=0
      COLL_ARENA=$arena timeout 300 "$build/tools/collrun" -n "$n" "$build/bench/allreduce_bench" \
        -A "$algo" -b "${MINB:-64K}" -e "${MAXB:-64M}" -f 4 -c 0 -n "${ITERS:-10}" -w 2 -z 1 2>&1 |
        awk -v n="$n" -v a="$algo" '$1 == "[0]" && $2 ~ /^[0-9]+$/ {print n, a, $2, ($9 + $13) / 2}' \
          >>"$out"
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    n, a, size, busbw = line.split()
    d[(int(n), int(size), a)].append(float(busbw))
print("busbw GB/s, median of the runs; auto = the cost model's choice without the arena")
print(f"{'ranks':>5} {'bytes':>10} {'ring':>6} {'auto':>6} {'arena':>6} {'arena/auto':>10}")
for (n, size) in sorted({(k[0], k[1]) for k in d}):
    m = {a: statistics.median(d[(n, size, a)]) for a in ("ring", "auto", "arena") if d[(n, size, a)]}
    ratio = m["arena"] / m["auto"] if m.get("auto") else float("nan")
    print(f"{n:>5} {size:>10} {m.get('ring', 0):6.2f} {m.get('auto', 0):6.2f} "
          f"{m.get('arena', 0):6.2f} {ratio:10.2f}")
PY
rm -f "$out"
