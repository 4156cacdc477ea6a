#!/bin/sh
# Data-parallel training speed: our trainer (collrun + tools/train on libcoll) against
# PyTorch DDP (CPU) on the same model (784-256-256-10 MLP), optimizer (SGD, momentum
# 0.9), per-rank batch (64) and number of steps, one BLAS/OpenMP thread per rank, for 1,
# 2 and 4 ranks. PyTorch runs the same script twice, over its gloo backend and over
# libcoll's `coll` backend (torch_coll, when built): samples/s of all three, coll against
# gloo (what the backend buys a PyTorch program) and ours against gloo (what PyTorch
# itself costs).
#
#   bench/training/ddp_compare.sh [BUILD_DIR] [STEPS] [RANKS...]   defaults: build 1000 "1 2 4"
#
# Each figure is the median of REPEAT rounds (default 3; the runs are printed too, and
# the host's steal time, which a busy host shows in a VM). A round runs every rank
# count, PyTorch (gloo, then coll) then ours, so that a noisy spell hits all, and the
# 2-rank against 1-rank figure is the median of the rounds' own ratios. TORCH=0 measures
# ours only; COLL=0 leaves the coll backend out.
#
# Needs Debian's python3-torch (apt-get install -y python3-torch), run with
# /usr/bin/python3. Targets: ours >= 1.5x PyTorch at 1 rank, >= 2x at 2 and 4 ranks,
# and our 2 ranks >= 1.6x our 1 rank; PyTorch over coll >= 1.2x PyTorch over gloo at 2
# ranks (issue 15).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$(dirname "$here")")
build=${1:-$root/build}
steps=${2:-1000}
shift 2 2>/dev/null || shift $# 2>/dev/null || true
ranks=${*:-1 2 4}
data=${DATA:-/usr/share/datasets/fashion-mnist}
repeat=${REPEAT:-3}
batch=64
# Both sides run this many steps first and leave them out of the figure (the first steps
# fault in pages and wait for the slowest rank's start).
warmup=${WARMUP:-10}

case $build in /*) ;; *) build=$(pwd)/$build ;; esac
train=$build/tools/train
collrun=$build/tools/collrun
for exe in "$train" "$collrun"; do
  [ -x "$exe" ] || { echo "ddp_compare: $exe not built (ninja -C $build)" >&2; exit 1; }
done
if [ "${TORCH:-1}" != 0 ]; then
  /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null || {
    echo "ddp_compare: PyTorch missing: apt-get install -y python3-torch (or TORCH=0: ours only)" >&2
    exit 1
  }
fi

with_coll=0
if [ "${TORCH:-1}" != 0 ] && [ "${COLL:-1}" != 0 ]; then
  if ls "$build"/torch_coll/torch_coll*.so >/dev/null 2>&1; then
    with_coll=1
  else
    echo "ddp_compare: $build/torch_coll not built (needs libtorch-dev): PyTorch over coll left out" >&2
  fi
fi

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# The samples/s figure of one run of ours: the trainer's final "done:" line (time spent
# in the training steps after the warm-up, all ranks' samples).
ours() {
  "$collrun" -n "$1" "$train" --data "$data" --batch $batch --epochs 1000 \
    --max-steps $((steps + warmup)) --warmup-steps $warmup --no-eval --quiet --blas-threads 1 |
    sed -n 's/.*done: .* \([0-9][0-9]*\) samples\/s.*/\1/p'
}

# theirs RANKS BACKEND: samples/s of PyTorch DDP over gloo or coll.
theirs() {
  /usr/bin/python3 "$here/ddp_torch.py" --nproc "$1" --steps "$steps" --warmup $warmup --batch $batch \
    --data "$data" --backend "$2" --build "$build" | sed -n 's/.*samples_per_s=\([0-9][0-9]*\).*/\1/p'
}

# median VALUES...: "MEDIAN [v1 v2 ...]" of the numbers given (nothing if none).
median() {
  [ $# -gt 0 ] || return 0
  printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1; all = all sep $1; sep = " " }
    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%d [%s]\n", m, all }'
}

# Steal ticks of all CPUs so far (the 8th field of /proc/stat's cpu line).
steal() { awk '/^cpu / { print $9 + 0 }' /proc/stat 2>/dev/null || echo 0; }

printf '%-6s %16s %16s %10s %16s %9s   %s\n' ranks "torch+gloo s/s" "torch+coll s/s" "coll/gloo" \
  "ours s/s" "ours/gloo" "runs (ours; torch+gloo; torch+coll)"
s0=$(steal)
t0=$(date +%s)
# Rounds outermost: round i runs every rank count back to back (PyTorch, then ours), so
# that the 1- and 2-rank runs of a round share the machine's spell; this VM's speed drifts
# by tens of percent over minutes.
ratios=""
i=0
while [ $i -lt "$repeat" ]; do
  o1="" o2=""
  for n in $ranks; do
    if [ "${TORCH:-1}" != 0 ]; then eval "tv_$n=\"\${tv_$n:-} $(theirs "$n" gloo)\""; fi
    if [ $with_coll = 1 ]; then eval "cv_$n=\"\${cv_$n:-} $(theirs "$n" coll)\""; fi
    o=$(ours "$n")
    eval "ov_$n=\"\${ov_$n:-} $o\""
    [ "$n" = 1 ] && o1=$o
    [ "$n" = 2 ] && o2=$o
  done
  if [ -n "$o1" ] && [ -n "$o2" ]; then
    ratios="$ratios $(awk -v a="$o2" -v b="$o1" 'BEGIN { printf "%.2f", a / b }')"
  fi
  i=$((i + 1))
done
for n in $ranks; do
  eval "tv=\${tv_$n:-} ov=\${ov_$n:-} cv=\${cv_$n:-}"
  # shellcheck disable=SC2086 # word splitting of the lists is wanted
  t=$(median $tv)
  # shellcheck disable=SC2086
  o=$(median $ov)
  # shellcheck disable=SC2086
  c=$(median $cv)
  if [ "${TORCH:-1}" != 0 ] && [ -z "$t" ]; then
    echo "ddp_compare: every PyTorch run at $n ranks failed" >&2
    exit 1
  fi
  if [ $with_coll = 1 ] && [ -z "$c" ]; then
    echo "ddp_compare: every PyTorch run over coll at $n ranks failed" >&2
    exit 1
  fi
  [ -n "$o" ] || { echo "ddp_compare: every run at $n ranks failed" >&2; exit 1; }
  awk -v n="$n" -v t="${t%% *}" -v o="${o%% *}" -v c="${c%% *}" -v ro="${o#* }" \
    -v rt="${t#* }" -v rc="${c#* }" 'BEGIN {
    cg = (c != "" && t != "") ? sprintf("%9.2fx", c / t) : sprintf("%10s", "-")
    og = (t != "") ? sprintf("%8.2fx", o / t) : sprintf("%9s", "-")
    printf "%-6s %16s %16s %s %16s %s   %s; %s; %s\n", n, t == "" ? "-" : t, c == "" ? "-" : c,
      cg, o, og, ro, rt == "" ? "-" : rt, rc == "" ? "-" : rc }'
done
if [ -n "$ratios" ]; then
  # shellcheck disable=SC2086
  printf '%s\n' $ratios | sort -g | awk '{ v[NR] = $1; all = all sep $1 "x"; sep = " " }
    END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
          printf "ours, 2 ranks vs 1 rank in the same round: %.2fx (median; rounds %s)\n", m, all }'
fi
# USER_HZ ticks per CPU per second: 100 on Linux.
awk -v s="$(($(steal) - s0))" -v t="$(($(date +%s) - t0))" -v c="$(nproc)" 'BEGIN {
  if (t > 0) printf "host steal time during the runs: %.0f%% of CPU time\n", 100 * s / (100 * t * c) }'
