#!/bin/sh
# How well our data-parallel training scales from 1 to 2 ranks on this machine, against
# the ceiling the machine itself sets: each round runs, back to back,
#   - 1 rank alone,
#   - two independent 1-rank trainers at once (no communication: what two ranks could
#     reach if the all-reduce and the waiting were free),
#   - 2-rank DDP with the gradients in registered memory (the zero-copy window, default),
#   - 2-rank DDP with COLL_WINDOW=0 (heap gradients: the arena or the ring),
# and prints samples/s and each figure's ratio to the 1-rank run of the same round, then
# the medians over the rounds. Each run trains 10 steps more than STEPS and leaves its
# first 10 out of the figure (page faults, the wait for the slowest rank's start).
#
#   bench/training/ddp_scaling.sh [BUILD_DIR] [STEPS] [ROUNDS]     defaults: build 400 5
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "$(dirname "$here")")/build}
steps=${2:-400}
rounds=${3:-5}
train=$build/tools/train
collrun=$build/tools/collrun
for exe in "$train" "$collrun"; do
  [ -x "$exe" ] || { echo "ddp_scaling: $exe not built (ninja -C $build)" >&2; exit 1; }
done
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ddp_scaling.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# run NRANKS: samples/s of one run (the trainer's final "done:" line)
run() {
  "$collrun" -n "$1" "$train" --batch 64 --epochs 1000 --max-steps $((steps + 10)) \
    --warmup-steps 10 --no-eval \
    --quiet --blas-threads 1 | sed -n 's/.*done: .* \([0-9][0-9]*\) samples\/s.*/\1/p'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

printf '%-6s %10s %22s %22s %22s\n' round "1 rank" "2 independent" "2-rank DDP" "2-rank DDP, no window"
r_pair="" r_ddp="" r_heap=""
i=1
while [ "$i" -le "$rounds" ]; do
  one=$(run 1)
  run 1 >"$tmp/a" &
  run 1 >"$tmp/b"
  wait
  pair=$(($(cat "$tmp/a") + $(cat "$tmp/b")))
  ddp=$(run 2)
  heap=$(COLL_WINDOW=0 run 2)
  printf '%-6s %10s %14s (%5sx) %14s (%5sx) %14s (%5sx)\n' "$i" "$one" "$pair" "$(ratio "$pair" "$one")" \
    "$ddp" "$(ratio "$ddp" "$one")" "$heap" "$(ratio "$heap" "$one")"
  r_pair="$r_pair $(ratio "$pair" "$one")"
  r_ddp="$r_ddp $(ratio "$ddp" "$one")"
  r_heap="$r_heap $(ratio "$heap" "$one")"
  i=$((i + 1))
done
# shellcheck disable=SC2086
echo "median ratio to 1 rank: 2 independent $(median $r_pair)x, 2-rank DDP $(median $r_ddp)x, without the window $(median $r_heap)x"
