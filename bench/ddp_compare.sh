#!/bin/sh
# Data-parallel training speed: our trainer (collrun + tools/train on libcoll) against
# PyTorch DDP (gloo, CPU) on the same model (784-256-256-10 MLP), optimizer (SGD,
# momentum 0.9), per-rank batch (64) and number of steps, one BLAS/OpenMP thread per
# rank, for 1, 2 and 4 ranks. Prints samples/s of both and the ratio.
#
#   bench/ddp_compare.sh [BUILD_DIR] [STEPS] [RANKS...]     defaults: build 300 "1 2 4"
#
# Each figure is the best of REPEAT runs (default 3): on a shared machine the slow runs
# measure the neighbours, not the trainer.
#
# Needs Debian's python3-torch (apt-get install -y python3-torch), run with
# /usr/bin/python3. Targets: ours >= 1.5x PyTorch at 1 rank, >= 2x at 2 and 4 ranks,
# and our 2 ranks >= 1.6x our 1 rank.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=${1:-$root/build}
steps=${2:-300}
shift 2 2>/dev/null || shift $# 2>/dev/null || true
ranks=${*:-1 2 4}
data=${DATA:-/usr/share/datasets/fashion-mnist}
repeat=${REPEAT:-3}
batch=64

case $build in /*) ;; *) build=$(pwd)/$build ;; esac
train=$build/tools/train
collrun=$build/tools/collrun
for exe in "$train" "$collrun"; do
  [ -x "$exe" ] || { echo "ddp_compare: $exe not built (ninja -C $build)" >&2; exit 1; }
done
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || {
  echo "ddp_compare: PyTorch missing: apt-get install -y python3-torch" >&2; exit 1; }

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# The samples/s figure of one run of ours: the trainer's final "done:" line (time spent
# in training steps, all ranks' samples).
ours() {
  "$collrun" -n "$1" "$train" --data "$data" --batch $batch --epochs 1000 \
    --max-steps "$steps" --no-eval --quiet --blas-threads 1 |
    sed -n 's/.*done: .* \([0-9][0-9]*\) samples\/s.*/\1/p'
}

theirs() {
  /usr/bin/python3 "$here/ddp_torch.py" --nproc "$1" --steps "$steps" --batch $batch \
    --data "$data" | sed -n 's/.*samples_per_s=\([0-9][0-9]*\).*/\1/p'
}

# best FUNCTION RANKS: the largest figure of $repeat runs (empty if every run failed).
best() {
  b=""
  i=0
  while [ $i -lt "$repeat" ]; do
    v=$("$1" "$2")
    if [ -n "$v" ] && { [ -z "$b" ] || [ "$v" -gt "$b" ]; }; then b=$v; fi
    i=$((i + 1))
  done
  echo "$b"
}

printf '%-6s %14s %14s %8s\n' ranks "torch samples/s" "ours samples/s" ratio
one=""
for n in $ranks; do
  t=$(best theirs "$n")
  o=$(best ours "$n")
  [ -n "$t" ] && [ -n "$o" ] || { echo "ddp_compare: a run at $n ranks failed" >&2; exit 1; }
  awk -v n="$n" -v t="$t" -v o="$o" 'BEGIN { printf "%-6s %14s %14s %7.2fx\n", n, t, o, o / t }'
  [ "$n" = 1 ] && one=$o
  if [ "$n" = 2 ] && [ -n "$one" ]; then two=$o; fi
done
if [ -n "$one" ] && [ -n "${two:-}" ]; then
  awk -v a="$two" -v b="$one" 'BEGIN { printf "ours, 2 ranks vs 1 rank: %.2fx\n", a / b }'
fi
