#!/bin/sh
# The price of train --elastic --bit-identical, and how fast an elastic job recovers.
# Each round runs, for 2, 3 and 4 ranks back to back, the elastic trainer in the default
# mode (each rank sums its shards, one all-reduce of P floats) and in --bit-identical
# mode (the S shards' rows summed exactly in int64 fixed point: an all-reduce MAX of one
# float pair, a reduce-scatter of P int64, an all-gather of P floats), alternating which
# goes first, and prints steps/s; then the medians with their range over the rounds, the
# ratio of the medians and the range of the rounds' own ratios. Then, per rank count,
# a run where the last rank is SIGKILLed in step 30 (TRAIN_TEST_DIE_AT): the time from
# the kill to the survivors' commit of that step, and the part after the failure was seen.
# Last, per rank count, a replacement (collrun --replace 1) for a rank killed in step 10:
# the survivors' stall when they take it in (grow + state broadcast), and the time from
# its coll_comm_join call to its first committed step.
# Each run trains 10 steps more than STEPS and leaves the first 10 out of its figure.
# Data: Fashion-MNIST (784-256-256-10) when installed, else stop.
#
#   bench/elastic/elastic_bitid.sh [BUILD_DIR] [STEPS] [ROUNDS]     defaults: build 100 5
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$(dirname "$(dirname "$here")")/build}
steps=${2:-100}
rounds=${3:-5}
train=$build/tools/train
collrun=$build/tools/collrun
data=/usr/share/datasets/fashion-mnist
for exe in "$train" "$collrun"; do
  [ -x "$exe" ] || { echo "elastic_bitid: $exe not built (ninja -C $build)" >&2; exit 1; }
done
[ -r "$data/train-images-idx3-ubyte.gz" ] || { echo "elastic_bitid: no $data" >&2; exit 1; }
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/elastic_bitid.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
args="--elastic --no-eval --quiet --batch 64 --shards 8 --epochs 100 --blas-threads 1"

# run NRANKS MODE: steps/s of one run (rank 0's "done:" line)
run() {
  mode=""
  [ "$2" = bitid ] && mode=--bit-identical
  "$collrun" -n "$1" --elastic "$train" $args --max-steps $((steps + 10)) --warmup-steps 10 $mode >"$tmp/out" 2>&1 ||
    { cat "$tmp/out" >&2; exit 1; }
  sed -n 's/.*done: [0-9]* steps on [0-9]* ranks (at the end), \([0-9.]*\) steps\/s.*/\1/p' "$tmp/out"
}

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
range() { sort -g | awk 'NR==1 {lo=$1} {hi=$1} END {print lo "-" hi}'; }

echo "steps/s (global batch 8 x 64 = 512 samples), $rounds rounds of $steps steps"
for r in $(seq "$rounds"); do
  for n in 2 3 4; do
    if [ $((r % 2)) -eq 1 ]; then
      a=$(run "$n" default); b=$(run "$n" bitid)
    else
      b=$(run "$n" bitid); a=$(run "$n" default)
    fi
    echo "$n $a" >>"$tmp/default"
    echo "$n $b" >>"$tmp/bitid"
    echo "round $r, $n ranks: default $a, bit-identical $b steps/s"
  done
done
echo
printf "%-6s %22s %22s %6s %18s\n" ranks "default st/s [range]" "bit-identical [range]" ratio "rounds' ratios"
for n in 2 3 4; do
  a=$(awk -v n="$n" '$1==n {print $2}' "$tmp/default" | median)
  b=$(awk -v n="$n" '$1==n {print $2}' "$tmp/bitid" | median)
  ra=$(awk -v n="$n" '$1==n {print $2}' "$tmp/default" | range)
  rb=$(awk -v n="$n" '$1==n {print $2}' "$tmp/bitid" | range)
  rr=$(paste "$tmp/default" "$tmp/bitid" | awk -v n="$n" '$1==n {printf "%.2f\n", $4 / $2}' | range)
  printf "%-6s %22s %22s %6s %18s\n" "$n" "$a [$ra]" "$b [$rb]" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", b / a}')" "$rr"
done

echo
echo "recovery: the last rank SIGKILLed in step 30 before its all-reduce, $rounds rounds"
printf "%-6s %28s %32s\n" ranks "kill -> step committed, ms" "failure seen -> committed, ms"
for n in 2 3 4; do
  : >"$tmp/kill" ; : >"$tmp/seen"
  for r in $(seq "$rounds"); do
    TRAIN_TEST_DIE_AT=$((n - 1)):30 "$collrun" -n "$n" --elastic "$train" $args \
      --max-steps 40 >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
    died=$(sed -n 's/.*dies in step 30 (TRAIN_TEST_DIE_AT) at unix time \([0-9.]*\).*/\1/p' "$tmp/out" | head -1)
    line=$(grep "step 30 committed on" "$tmp/out" | head -1)
    done_at=$(echo "$line" | sed -n 's/.*at unix time \([0-9.]*\).*/\1/p')
    echo "$line" | sed -n 's/.* \([0-9.]*\) ms after the failure was seen.*/\1/p' >>"$tmp/seen"
    awk -v a="$died" -v b="$done_at" 'BEGIN {printf "%.1f\n", (b - a) * 1000}' >>"$tmp/kill"
  done
  printf "%-6s %28s %32s\n" "$n" "$(median <"$tmp/kill")" "$(median <"$tmp/seen")"
done

echo
echo "replacement: rank 1 SIGKILLed in step 10, collrun --replace 1, $rounds rounds"
printf "%-6s %24s %34s\n" ranks "survivors' stall, ms" "join call -> first commit, ms"
for n in 2 3 4; do
  : >"$tmp/stall" ; : >"$tmp/first"
  for r in $(seq "$rounds"); do
    TRAIN_TEST_DIE_AT=1:10 "$collrun" -n "$n" --replace 1 "$train" $args \
      --max-steps 400 >"$tmp/out" 2>&1 || { cat "$tmp/out" >&2; exit 1; }
    sed -n 's/.*took in 1 replacement(s) at step [0-9]*: [0-9]* -> [0-9]* ranks; stall \([0-9.]*\) ms.*/\1/p' \
      "$tmp/out" >>"$tmp/stall"
    sed -n 's/.*committed its first step, [0-9]*, \([0-9.]*\) ms after it called coll_comm_join.*/\1/p' \
      "$tmp/out" >>"$tmp/first"
  done
  printf "%-6s %24s %34s\n" "$n" "$(median <"$tmp/stall") ($(wc -l <"$tmp/stall") of $rounds)" \
    "$(median <"$tmp/first")"
done
