#!/usr/bin/env bash
# compare.sh: runs allreduce_bench and the reference all-reduces (Open MPI, Gloo) on the same
# cases, all timed the same way (median of separately timed iterations, max over ranks),
# and prints one table: case, ours, best reference, ratio, target, PASS/FAIL.
#
#   bench/compare/compare.sh [BUILD_DIR]    (default: build; configured and built if needed)
# Environment: ITERS (timed iterations, default 20; ITERS_LAT for the 8-byte cases, 500),
#   WARMUP (default 5), ROUNDS (default 3:
#   each case runs that many times, ours and the references taking turns, and the table
#   shows the median of the rounds: a 2-vCPU VM has noisy spells that one round can hit),
#   LOG_DIR (keep every program's output there; default a temporary directory, kept),
#   POINTS=0 (skip this table), SWEEP=0 (skip the size sweep, compare_sweep.sh beside this
#   script: 8 B - 4 MiB, shm 2 and 4 ranks and tcp 2 ranks, bound and unbound; its own variables are
#   listed there), QUICK=1 (the sweep only, 2 rounds of 5 iterations up to 8 KiB: what
#   tests/bench runs), NO_BUILD=1 (use BUILD_DIR as it is).
# Ranks are bound to cores (collrun's and mpirun's default) in this table; the sweep shows
# bound and unbound.
# Ratio: ours / reference for bandwidth, reference / ours for latency: > 1 means ours is
# better. Exit status 1 when a case with a target fails.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # run as `sh script`: bash it is
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
iters=${ITERS:-20}
lat_iters=${ITERS_LAT:-500} # the 8-byte cases: 20 samples of 2 us let one scheduler hiccup move the median
warmup=${WARMUP:-5}
rounds=${ROUNDS:-3}
logs=${LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/compare.XXXXXX")}
mkdir -p "$logs"

quick=${QUICK:-0}
run_points=${POINTS:-1}
[ "$quick" = 1 ] && run_points=${POINTS:-0}
run_sweep=${SWEEP:-1}

# ---- build ------------------------------------------------------------------------------
if [ "${NO_BUILD:-0}" = 1 ]; then
  : # the caller built it (tests/bench, inside meson test)
elif [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" >"$logs/meson-setup.log" 2>&1 || {
    tail -20 "$logs/meson-setup.log" >&2
    exit 2
  }
fi
targets=(bench/allreduce_bench bench/tcp_ceiling bench/line_ceiling tools/collrun)
for t in bench/ref_mpi bench/ref_gloo; do
  ninja -C "$build" -t targets all 2>/dev/null | grep -q "^$t:" && targets+=("$t")
done
if [ "${NO_BUILD:-0}" != 1 ]; then
  ninja -C "$build" "${targets[@]}" >"$logs/build.log" 2>&1 || {
    tail -30 "$logs/build.log" >&2
    exit 2
  }
fi
bench=$build/bench/allreduce_bench
collrun=$build/tools/collrun
ref_mpi=$build/bench/ref_mpi
ref_gloo=$build/bench/ref_gloo
have_mpi=0
[ -x "$ref_mpi" ] && command -v mpirun >/dev/null && have_mpi=1
have_gloo=0
[ -x "$ref_gloo" ] && have_gloo=1
# Open MPI as root, and more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export COLL_TIMEOUT_MS=${COLL_TIMEOUT_MS:-120000}

# ---- runners: each prints "time_us busbw" of the first data row of its program ---------
# Data rows have size in column 1, time in 6 and (out-of-place) busbw in 8 in every program.
first_row() {
  awk '{ sub(/^\[[0-9]+\] /, "") } /^#/ || NF < 8 { next } { print $6, $8; exit }' "$1"
}

# ours NAME NRANKS TRANSPORT BYTES [extra bench options]
# Blocking calls (-z 1), as the references make them (MPI_Allreduce, Gloo's run()). The
# bench's default, an asynchronous call and its wait, wakes the progress thread each time,
# and on 2 cores that wake-up sometimes lands on the peer's core: 8-byte latency then
# jumps from about 2 to 10-40 us in some runs (see docs/measurements.md, "Latency").
ours() {
  local name=$1 n=$2 transport=$3 bytes=$4
  shift 4
  local log=$logs/ours-$name.log
  timeout 600 "$collrun" -n "$n" "$bench" -b "$bytes" -e "$bytes" -n "$iters" -w "$warmup" \
    -c 1 -d float -o sum -z 1 -T "$transport" "$@" >"$log" 2>&1 || {
    echo "compare: allreduce_bench failed for $name (see $log)" >&2
    return 1
  }
  grep -q "Out of bounds values : 0 OK" "$log" || {
    echo "compare: allreduce_bench gave wrong results for $name (see $log)" >&2
    return 1
  }
  first_row "$log"
}

# mpi NAME NRANKS BTL BYTES
mpi() {
  [ "$have_mpi" -eq 1 ] || return 1
  local log=$logs/mpi-$1.log
  timeout 600 mpirun -np "$2" --oversubscribe --mca btl "$3" "$ref_mpi" -b "$4" -e "$4" \
    -n "$iters" -w "$warmup" -c 1 -d float -o sum >"$log" 2>&1 || {
    echo "compare: ref_mpi failed for $1 (see $log)" >&2
    return 1
  }
  first_row "$log"
}

# gloo NAME NRANKS ALGO BYTES
gloo() {
  [ "$have_gloo" -eq 1 ] || return 1
  local log=$logs/gloo-$1-$3.log store
  store=$(mktemp -d "$logs/gloo-store.XXXXXX")
  # One retry: Gloo's TCP rendezvous has been seen to drop a connection on a loaded machine.
  local attempt
  for attempt in 1 2; do
    rm -rf "${store:?}"/*
    if REF_GLOO_STORE_DIR=$store timeout 600 "$collrun" -n "$2" "$ref_gloo" -A "$3" \
      -b "$4" -e "$4" -n "$iters" -w "$warmup" -c 1 -d float -o sum >"$log" 2>&1; then
      rm -rf "$store"
      first_row "$log"
      return 0
    fi
    echo "compare: ref_gloo failed for $1 $3, attempt $attempt (see $log)" >&2
  done
  rm -rf "$store"
  return 1
}

# torch NAME NRANKS BYTES: PyTorch's gloo backend (optional: /usr/bin/python3 with torch)
torch_ref() {
  [ "$have_torch" -eq 1 ] || return 1
  local log=$logs/torch-$1.log
  REF_TORCH_STORE=$logs/torch-store-$1 timeout 600 "$collrun" -n "$2" /usr/bin/python3 \
    "$root/bench/references/ref_torch.py" -b "$3" -e "$3" -n "$iters" -w "$warmup" >"$log" 2>&1 || {
    echo "compare: ref_torch failed for $1 (see $log)" >&2
    return 1
  }
  first_row "$log"
}
have_torch=0
/usr/bin/python3 -c 'import torch.distributed' >/dev/null 2>&1 && have_torch=1

# sweep: the size sweep (bench/compare/compare_sweep.sh) into the same log directory; its
# status.
sweep() {
  [ "$run_sweep" = 1 ] || return 0
  echo
  echo "---- size sweep (bench/compare/compare_sweep.sh) ----"
  LOG_DIR=$logs/sweep "$root/bench/compare/compare_sweep.sh" "$build"
}
if [ "$run_points" != 1 ]; then
  sweep
  exit $?
fi

# ---- the table --------------------------------------------------------------------------
failures=0
table=()
details=() # every reference measured, where the table shows only the best
row_format='%-34s %9s %-5s  %9s %-5s %-22s %6s  %-16s %s'

# row CASE OURS REF REF_NAME KIND TARGET_OP TARGET_VALUE TARGET_TEXT
# KIND: bw (GB/s, target on the value), lat (us, target on the value), rel (GB/s, target on
# the ratio to a figure of our own) or bwr (GB/s, target on the ratio to the reference).
row() {
  local case=$1 ours=$2 ref=$3 ref_name=$4 kind=$5 op=$6 target=$7 target_text=$8
  local unit="GB/s" ratio="-" result="-"
  [ "$kind" = lat ] && unit="us"
  [ "$kind" = rel ] || [ "$kind" = bwr ] && unit="GB/s"
  if [ -n "$ours" ] && [ -n "$ref" ]; then
    if [ "$kind" = lat ]; then
      ratio=$(awk -v o="$ours" -v r="$ref" 'BEGIN { printf "%.2f", (o > 0 ? r / o : 0) }')
    else
      ratio=$(awk -v o="$ours" -v r="$ref" 'BEGIN { printf "%.2f", (r > 0 ? o / r : 0) }')
    fi
  fi
  # What the target is compared with: the value itself, or (rel) the ratio.
  local subject=$ours
  [ "$kind" = rel ] || [ "$kind" = bwr ] && subject=$ratio
  if [ "$op" = "-" ]; then
    result="info"
  elif [ -z "$subject" ] || [ "$subject" = "-" ]; then
    result="FAIL"
  else
    result=$(awk -v s="$subject" -v t="$target" -v op="$op" \
      'BEGIN { ok = (op == ">=") ? (s >= t) : (s <= t); print ok ? "PASS" : "FAIL" }')
  fi
  [ "$result" = FAIL ] && failures=$((failures + 1))
  table+=("$(printf "$row_format" "$case" "${ours:-n/a}" "$unit" \
    "${ref:-n/a}" "$unit" "(${ref_name})" "$ratio" "$target_text" "$result")")
}

best() { # best of "value name" lines, highest first (bandwidth)
  sort -k1,1 -g -r | head -1
}
lowest() { # best of "value name" lines, lowest first (latency)
  sort -k1,1 -g | head -1
}

# med "t1 b1" "t2 b2" ...: "median-time median-busbw" of the rounds that gave a result
# (each column's median on its own); nothing when none did.
med() {
  [ $# -gt 0 ] || return 1
  printf '%s\n' "$@" | awk '{ t[NR] = $1; b[NR] = $2 }
    function m(a, n,   i, j, x) {
      for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j >= 1 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    END { printf "%g %g\n", m(t, NR), m(b, NR) }'
}

# each COL "t1 b1" "t2 b2" ...: the rounds' values of column COL (1 time, 2 busbw), "a/b/c".
each() {
  local col=$1
  shift
  [ $# -gt 0 ] || { echo "-"; return; }
  printf '%s\n' "$@" | awk -v c="$col" '{ printf "%s%s", (NR > 1 ? "/" : ""), $c } END { print "" }'
}

# rounds VAR FN ARGS...: runs "FN NAME-rK ARGS..." for round K and appends its "time busbw"
# to the array VAR (the first of ARGS is the case name).
add_round() {
  local var=$1 fn=$2 name=$3 k=$4
  shift 4
  local out
  out=$("$fn" "$name-r$k" "$@") || return 0
  eval "$var+=(\"\$out\")"
}

echo "compare: logs in $logs (iters $iters, $lat_iters for 8 B, warm-up $warmup, $rounds rounds; median everywhere)" >&2
# Other work on the machine skews every number (2 cores here): say how busy it was.
load_before=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)

# 1-2. shared memory, 2 ranks, large messages, vs Open MPI's shared-memory BTL (vader).
for size in 16M 64M; do
  ro=() rm_=()
  for k in $(seq "$rounds"); do
    add_round ro ours "shm2-$size" "$k" 2 shm "$size"
    add_round rm_ mpi "shm2-$size" "$k" 2 self,vader "$size"
  done
  o=$(med "${ro[@]}") && o_bw=${o#* } || o_bw=""
  m=$(med "${rm_[@]}") && m_bw=${m#* } || m_bw=""
  details+=("shm 2 ranks ${size}iB busbw (GB/s) per round: ours $(each 2 "${ro[@]}"), Open MPI vader $(each 2 "${rm_[@]}")")
  [ "$size" = 16M ] && ours_shm2_16m=$o_bw
  row "shm 2 ranks ${size}iB busbw" "$o_bw" "$m_bw" "Open MPI vader" bwr ">=" 1.5 ">= 1.5x ref"
done

# 3-6. TCP loopback, 2 and 4 ranks, 16 and 64 MiB, vs the best of Gloo (ring,
# halving-doubling) and Open MPI. tcp_ceiling times the same ring exchange over plain
# sockets with no reduction: the most a ring all-reduce could reach here over loopback.
ceiling() { # ceiling NAME NRANKS BYTES: prints "0 busbw" of the ceiling, in GB/s
  [ -x "$build/bench/tcp_ceiling" ] || return 1
  timeout 300 "$build/bench/tcp_ceiling" -n "$2" -b "$3" -i "$iters" >"$logs/ceiling-$1.log" \
    2>&1 || return 1
  awk '{ for (i = 1; i < NF; i++) if ($i == "ceiling") print 0, $(i + 1) }' "$logs/ceiling-$1.log"
}
for n in 2 4; do
  for size in 16M 64M; do
    bytes=$((${size%M} * 1048576))
    ro=() rm_=() rg_ring=() rg_hd=() rc=()
    for k in $(seq "$rounds"); do
      add_round ro ours "tcp$n-$size" "$k" "$n" tcp "$size"
      add_round rm_ mpi "tcp$n-$size" "$k" "$n" self,tcp "$size"
      for algo in ring hd; do
        add_round "rg_$algo" gloo "tcp$n-$size" "$k" "$n" "$algo" "$size"
      done
      add_round rc ceiling "$n-$size" "$k" "$n" "$bytes"
    done
    o=$(med "${ro[@]}") && o_bw=${o#* } || o_bw=""
    refs=""
    m=$(med "${rm_[@]}") && refs+="${m#* } Open-MPI-tcp"$'\n'
    g=$(med "${rg_ring[@]}") && refs+="${g#* } Gloo-ring"$'\n'
    g=$(med "${rg_hd[@]}") && refs+="${g#* } Gloo-hd"$'\n'
    c=$(med "${rc[@]}") && c=${c#* } || c=""
    details+=("tcp $n ranks ${size}iB busbw (GB/s): $(printf '%s' "$refs" | tr '\n' ' ')| plain-socket ring ceiling ${c:-n/a}, ours ${o_bw:-n/a}")
    details+=("  per round: ours $(each 2 "${ro[@]}"), Open MPI $(each 2 "${rm_[@]}"), Gloo ring $(each 2 "${rg_ring[@]}"), Gloo hd $(each 2 "${rg_hd[@]}"), ceiling $(each 2 "${rc[@]}")")
    b=$(printf '%s' "$refs" | grep . | best)
    row "tcp loopback $n ranks ${size}iB busbw" "$o_bw" "${b%% *}" "${b#* }" bwr ">=" 1.5 ">= 1.5x ref"
  done
done

big_iters=$iters
iters=$lat_iters
# 5. latency: 8 bytes, 2 ranks, shared memory, vs Open MPI vader.
ro=() rm_=()
for k in $(seq "$rounds"); do
  add_round ro ours "lat8" "$k" 2 shm 8
  add_round rm_ mpi "lat8" "$k" 2 self,vader 8
done
o=$(med "${ro[@]}") && o_t=${o%% *} || o_t=""
m=$(med "${rm_[@]}") && m_t=${m%% *} || m_t=""
details+=("shm 2 ranks 8 B latency (us) per round: ours $(each 1 "${ro[@]}"), Open MPI vader $(each 1 "${rm_[@]}")")
row "shm 2 ranks 8 B latency" "$o_t" "$m_t" "Open MPI vader" lat "<=" 3 "<= 3 us"

# 6. latency over TCP loopback, 8 bytes, 2 ranks, vs Gloo, PyTorch's gloo backend, Open MPI.
o=$(ours "tcp-lat8" 2 tcp 8) && o_t=${o%% *} || o_t=""
refs=""
m=$(mpi "tcp-lat8" 2 self,tcp 8) && refs+="${m%% *} Open-MPI-tcp"$'\n'
for algo in ring hd; do
  g=$(gloo "tcp-lat8" 2 "$algo" 8) && refs+="${g%% *} Gloo-$algo"$'\n'
done
t=$(torch_ref "tcp-lat8" 2 8) && refs+="${t%% *} PyTorch-gloo"$'\n'
details+=("tcp 2 ranks 8 B latency (us): $(printf '%s' "$refs" | tr '\n' ' ')")
b=$(printf '%s' "$refs" | grep . | lowest)
row "tcp 2 ranks 8 B latency" "$o_t" "${b%% *}" "${b#* }" lat "-" 0 "(none)"

iters=$big_iters

# 7. oversubscription: 4 ranks on the cores 2 ranks had, 16 MiB, against our own 2 ranks.
# Both measured back to back, so that other load on the machine skews them alike.
ro2=() ro4=()
for k in $(seq "$rounds"); do
  add_round ro2 ours "shm2-16M-again" "$k" 2 shm 16M
  add_round ro4 ours "shm4-16M" "$k" 4 shm 16M
done
o=$(med "${ro2[@]}") && ours_shm2_16m=${o#* } || true
o=$(med "${ro4[@]}") && o_bw=${o#* } || o_bw=""
details+=("shm 16 MiB busbw (GB/s) per round: ours at 2 ranks $(each 2 "${ro2[@]}"), at 4 ranks $(each 2 "${ro4[@]}")")
row "shm 4 ranks (2 cores) 16MiB busbw" "$o_bw" "${ours_shm2_16m:-}" "ours, 2 ranks" rel ">=" 0.6 \
  ">= 0.6x 2 ranks"

echo
printf "$row_format\n" "case" "ours" "" "best ref" "" "(program)" "ratio" "target" "result"
for line in "${table[@]}"; do echo "$line"; done
echo
echo "references measured (value program), and every round's figure (the table shows medians):"
for line in "${details[@]}"; do echo "  $line"; done
echo "ratio: ours/reference for bandwidth, reference/ours for latency (> 1: ours is better)"
echo "load average before: ${load_before:-?}, after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
echo "logs: $logs"
sweep_status=0
sweep || sweep_status=$?
[ "$sweep_status" -le 1 ] || exit "$sweep_status"
[ "$failures" -eq 0 ] && [ "$sweep_status" -eq 0 ]
