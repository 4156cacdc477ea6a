#!/bin/sh
# bench/algorithms/sim_scale.sh: coll-sim's timing mode at scale (docs/coll_sim_scale.md).
# Times the simulation of every all_reduce algorithm at 16,384 ranks (8 per node), shows
# what uplink sharing changes, and sweeps ranks x sizes x algorithms: a table (predicted
# time, bus bandwidth, busiest link bytes, seconds the simulation took), the crossover
# sizes, and the plot. Everything it prints goes to bench/results/sim_scale.txt as well.
#
# Run it from the repository root (BUILD_DIR and OUT are taken from the current directory):
#   bench/algorithms/sim_scale.sh [BUILD_DIR]      (default: build; ~5 min on 2 cores)
#   RANKS=8,64,512 SIZES=8,1M ALGOS=ring,tree bench/algorithms/sim_scale.sh   (a quick one)
set -eu
BUILD=${1:-build}
SIM=$BUILD/tools/coll-sim
OUT=${OUT:-bench/results}
RANKS=${RANKS:-8,64,512,4096,16384}
SIZES=${SIZES:-8,64K,1M,16M,256M}
BIG=${BIG:-16384}
[ -x "$SIM" ] || { echo "sim_scale.sh: no $SIM (build first: meson setup $BUILD && ninja -C $BUILD)" >&2; exit 2; }
mkdir -p "$OUT"
LOG=$OUT/sim_scale.txt

# The node-aware all_reduce algorithms, when this build has them (coll-sim takes any name
# libcoll gives an algorithm).
EXTRA=
for a in two_level ring_nodes leaders; do
  if "$SIM" "$a" -n 16 --ranks-per-node 4 --bytes 1K >/dev/null 2>&1; then EXTRA="$EXTRA $a"; fi
done
# The sweep leaves ring_nodes out: on nodes of consecutive ranks it is the ring.
ALGOS=${ALGOS:-ring,tree$(for a in $EXTRA; do [ "$a" = ring_nodes ] || printf ',%s' "$a"; done)}

{
  echo "# bench/algorithms/sim_scale.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  echo "## 1. $BIG ranks, 8 per node: how long the simulation takes, per algorithm"
  echo
  printf '%-11s %8s %14s %12s %18s %10s\n' algo bytes predicted "busbw GB/s" "busiest link" "sim wall"
  for a in ring tree hd master $EXTRA; do
    for b in 8 64M; do
      "$SIM" "$a" -n "$BIG" --ranks-per-node 8 --bytes "$b" --json >"$OUT/.sim_scale.json"
      python3 - "$OUT/.sim_scale.json" "$a" "$b" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
link = "%s %d" % (j["busiest_link"]["kind"], j["busiest_link"]["index"])
b = j["busiest_link"]["bytes"]
size = "%d B" % b if b < 2**20 else "%.1f MiB" % (b / 2**20)
print("%-11s %8s %12.4g s %12.3f %14s %9.2fs" % (sys.argv[2], sys.argv[3], j["predicted_s"],
      j["busbw"] / 1e9, size, j["wall_s"]))
EOF
    done
  done
  rm -f "$OUT/.sim_scale.json"
  echo
  echo "## 2. Uplink sharing: a ring of 64 ranks, 16 MiB, nodes of 8"
  echo
  for place in "" "--round-robin"; do
    for share in "" "--no-sharing"; do
      t=$("$SIM" ring -n 64 --ranks-per-node 8 $place $share --bytes 16M | sed -n 's/^predicted time: \([^(]*\).*/\1/p')
      f=$("$SIM" ring -n 64 --ranks-per-node 8 $place $share --bytes 16M | sed -n 's/^most flows sharing one uplink direction in a round: \([0-9]*\).*/\1/p')
      printf '%-14s %-13s predicted %-12s (at most %s flows on one uplink direction at once)\n' \
        "${place:-blocks}" "${share:-shared}" "$t" "$f"
    done
  done
  echo
  echo "## 3. Sweep: ranks $RANKS x sizes $SIZES x $ALGOS (nodes of 8)"
  echo
  "$SIM" ring --ranks-per-node 8 --sweep-ranks "$RANKS" --sweep-sizes "$SIZES" \
    --sweep-algos "$ALGOS" --plot "$OUT/sim_scale.svg"
  echo
  echo "plot: $OUT/sim_scale.svg"
} 2>&1 | tee "$LOG"
