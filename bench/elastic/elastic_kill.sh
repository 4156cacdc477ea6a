#!/bin/sh
# The elastic proof at scale: 200 seeded kill trials of `collrun --elastic [--replace]
# train --elastic --bit-identical` at 2, 4 and 8 ranks on this host (tests/elastic/
# kill_trials.py: random kills, kills at chosen points of libcoll, two ranks at once, a
# stopped rank fenced, replacements killed during the grow and the state transfer), every
# result printed as a JSON line, then p50/p99 of detect, agree, shrink, resume (kill ->
# next committed step) and grow with state transfer per rank count, and the usual recovery
# for comparison: the whole job restarted from its last checkpoint; and 10 trials at 4 ranks
# on two network-namespace hosts (needs root; skipped otherwise).
#   bench/elastic/elastic_kill.sh [BUILD] [extra kill_trials.py options, e.g. --trials 20]
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build}
[ $# -gt 0 ] && shift
mkdir -p "$here/bench/results"
exec /usr/bin/python3 "$here/tests/elastic/kill_trials.py" \
  --collrun "$build/tools/collrun" --worker "$build/tests/elastic/elastic_worker" \
  --train "$build/tools/train" --trials 200 --ranks 2,4,8 --restart-compare 5 \
  --seed 2026 --deadline 90 --netns 10 "$@"
