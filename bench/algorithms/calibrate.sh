#!/usr/bin/env bash
# calibrate.sh: runs bench/calibrate RUNS times per transport (each run after waiting for
# a mostly idle machine, the machine being shared), prints every run and the median of
# each constant over the runs: the values to put in libcoll/src/algo/cost.c.
#
#   bench/algorithms/calibrate.sh [BUILD_DIR]   (default: build; must hold bench/calibrate)
# Environment: RUNS (default 3), NRANKS (default 2), TRANSPORTS (default "shm tcp"),
#   ROUNDS (calibrate's rounds per size, default 9), IDLE_PCT (how idle the CPUs must be
#   over half a second before a run, default 75; waits at most 60 s, then runs anyway),
#   HOSTS (default 1; K > 1: calibrate -H K, the ranks on K made-up hosts round-robin, so
#   the constants measured are those between nodes: cost.c's inter_alpha and inter_beta,
#   and the node-aware all-reduces are timed; NRANKS should then be a multiple of K).
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # run as `sh script`: bash it is
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
runs=${RUNS:-3}
nranks=${NRANKS:-2}
rounds=${ROUNDS:-9}
idle_pct=${IDLE_PCT:-75}
for f in "$build/bench/calibrate" "$build/tools/collrun"; do
  [ -x "$f" ] || { echo "calibrate.sh: $f missing (ninja -C $build bench/calibrate tools/collrun)" >&2; exit 2; }
done

# Idle share of all CPUs over half a second, from /proc/stat (idle + iowait columns).
idle_now() {
  local a b t=0 k
  read -r -a a </proc/stat
  sleep 0.5
  read -r -a b </proc/stat
  for k in 1 2 3 4 5 6 7 8; do t=$((t + b[k] - a[k])); done
  echo $((t > 0 ? 100 * (b[4] - a[4] + b[5] - a[5]) / t : 100))
}
wait_quiet() {
  local i
  for i in $(seq 120); do
    [ "$(idle_now)" -ge "$idle_pct" ] && return 0
  done
  echo "# (machine never got quiet; measuring anyway)"
}

# on made-up hosts the transports are chosen per pair (shm inside a host, tcp between)
[ "${HOSTS:-1}" -gt 1 ] && default_tp=auto || default_tp="shm tcp"
for tp in ${TRANSPORTS:-$default_tp}; do
  out=$(mktemp)
  for r in $(seq "$runs"); do
    wait_quiet
    "$build/tools/collrun" -n "$nranks" --no-prefix "$build/bench/calibrate" -T "$tp" \
      -r "$rounds" -H "${HOSTS:-1}" | tee -a "$out"
  done
  # "alpha A s (..)  beta B s/B (..)  gamma G s/B (..)": median of each over the runs.
  awk -v tp="$tp" '
    function med(v, n,   i, j, t) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
      return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
    }
    $1 == "alpha" || $1 == "inter_alpha" { n++; a[n] = $2; b[n] = $7; g[n] = $12; pre = $1 == "alpha" ? "" : "inter_" }
    END {
      if (n == 0) exit 1
      printf "median of %d runs (%s): .%salpha = %.3g, .%sbeta = %.3g (1/%.2f GB/s), .gamma = %.3g (1/%.2f GB/s)\n",
        n, tp, pre, med(a, n), pre, med(b, n), 1e-9 / med(b, n), med(g, n), 1e-9 / med(g, n)
    }' "$out"
  rm -f "$out"
done
