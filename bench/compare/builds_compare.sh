#!/usr/bin/env bash
# builds_compare.sh: the same all-reduce cases on two builds of libcoll, in one run, to show
# what a change did to latency and bandwidth: a reference revision (or build folder)
# against this checkout's build. The two builds take turns, case by case, in every round
# (the order swapped each round), so a noisy spell of the shared machine hits both.
#
#   bench/compare/builds_compare.sh REF [BUILD]
#     REF    a git revision (checked out into a temporary worktree and built there with the
#            bench only) or the path of a build folder that has bench/allreduce_bench
#     BUILD  this checkout's build folder (default: build; the targets are built if needed)
# Environment: ROUNDS (default 5), ITERS (timed iterations, 20; ITERS_LAT for the 8-byte
#   cases, 500), WARMUP (5), CASES (default below: NAME:RANKS:TRANSPORT:BYTES:MODE, MODE
#   block = -z 1, async = -z 0), LOG_DIR (every run's output; default a temporary folder).
# Prints, per case, each build's median over the rounds with its min-max, and the ratio
# ref/new for time (latency cases) or new/ref for bus bandwidth (the others): above 1 the
# new build is faster. Exit status 2 when a run fails or gives wrong results.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
ref=${1:?usage: builds_compare.sh REF [BUILD]}
build=${2:-$root/build}
rounds=${ROUNDS:-5}
iters=${ITERS:-20}
lat_iters=${ITERS_LAT:-500}
warmup=${WARMUP:-5}
logs=${LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/builds_compare.XXXXXX")}
mkdir -p "$logs"
cases=${CASES:-"lat-shm2:2:shm:8:block lat-shm4:4:shm:8:block lat-tcp2:2:tcp:8:block \
lat-shm2-async:2:shm:8:async bw-shm2-1M:2:shm:1048576:block bw-shm2-64M:2:shm:67108864:block \
bw-shm4-64M:4:shm:67108864:block bw-tcp2-64M:2:tcp:67108864:block"}
export COLL_TIMEOUT_MS=${COLL_TIMEOUT_MS:-120000}

targets=(bench/allreduce_bench tools/collrun)
build_in() { # build_in DIR: the two targets, configured with everything optional off
  local dir=$1
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" -Dtests=disabled -Dtorch=disabled -Dcuda=disabled \
      -Dbench_references=disabled >"$logs/setup-$(basename "$dir").log" 2>&1 || return 1
  fi
  ninja -C "$dir" "${targets[@]}" >"$logs/build-$(basename "$dir").log" 2>&1
}

if [ -x "$ref/bench/allreduce_bench" ]; then
  ref_build=$(cd "$ref" && pwd)
  ref_name=$ref_build
else
  rev=$(git -C "$root" rev-parse --short "$ref") || exit 2
  tree=${TMPDIR:-/tmp}/builds_compare-$rev
  [ -d "$tree" ] || git -C "$root" worktree add -q --detach "$tree" "$rev" || exit 2
  ref_build=$tree/build-bench
  ref_name=$rev
  echo "builds_compare: building $rev in $tree"
  build_in "$ref_build" || { echo "builds_compare: $rev did not build (logs in $logs)" >&2; exit 2; }
fi
ninja -C "$build" "${targets[@]}" >"$logs/build-new.log" 2>&1 ||
  { echo "builds_compare: $build did not build (see $logs/build-new.log)" >&2; exit 2; }
new_name="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- libcoll || echo +changes)"

# run WHICH_BUILD NAME RANKS TRANSPORT BYTES MODE ROUND: prints "time_us busbw"
run() {
  local b=$1 name=$2 n=$3 transport=$4 bytes=$5 mode=$6 round=$7 it=$iters z=1
  [ "$bytes" -le 8 ] && it=$lat_iters
  [ "$mode" = async ] && z=0
  local log=$logs/$name-$(basename "$b")-r$round.log
  timeout 600 "$b/tools/collrun" -n "$n" "$b/bench/allreduce_bench" -b "$bytes" -e "$bytes" \
    -n "$it" -w "$warmup" -c 1 -d float -o sum -z "$z" -T "$transport" >"$log" 2>&1 &&
    grep -q "Out of bounds values : 0 OK" "$log" || {
    echo "builds_compare: $name on $b failed (see $log)" >&2
    return 1
  }
  awk '{ sub(/^\[[0-9]+\] /, "") } /^#/ || NF < 8 { next } { print $6, $8; exit }' "$log"
}

samples=$logs/samples.txt
: >"$samples"
for ((r = 1; r <= rounds; r++)); do
  for c in $cases; do
    IFS=: read -r name n transport bytes mode <<<"$c"
    order=("$ref_build" "$build")
    ((r % 2 == 0)) && order=("$build" "$ref_build")
    for b in "${order[@]}"; do
      which=new
      [ "$b" = "$ref_build" ] && which=ref
      out=$(run "$b" "$name" "$n" "$transport" "$bytes" "$mode" "$r") || exit 2
      echo "$name $which $bytes $out" >>"$samples"
    done
  done
  echo "builds_compare: round $r of $rounds done"
done

echo "# builds_compare: ref $ref_name against new $new_name, $rounds rounds, $(nproc) CPUs," \
  "load $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$samples" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, which, size, t, bw = line.split()
    rows.setdefault(name, {"size": int(size), "ref": [], "new": []})[which].append((float(t), float(bw)))
print(f"{'case':<16} {'metric':<9} {'ref median (min-max)':>24} {'new median (min-max)':>24} {'ratio':>6}")
for name, r in rows.items():
    lat = r["size"] <= 8
    k = 0 if lat else 1
    ref = [s[k] for s in r["ref"]]
    new = [s[k] for s in r["new"]]
    mr, mn = statistics.median(ref), statistics.median(new)
    ratio = (mr / mn if lat else mn / mr) if mr > 0 and mn > 0 else float("nan")
    fmt = lambda v, xs: f"{v:.2f} ({min(xs):.2f}-{max(xs):.2f})"
    print(f"{name:<16} {'us' if lat else 'busbw GB/s':<9} {fmt(mr, ref):>24} {fmt(mn, new):>24} {ratio:>6.2f}")
print("ratio > 1: the new build is faster (time ref/new for 8-byte cases, busbw new/ref otherwise)")
PY
echo "# every run's output: $logs"
