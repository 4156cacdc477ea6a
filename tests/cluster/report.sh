# Sourced by netns.sh and slurm.sh: how a cluster script skips, counts its checks and ends.
# skip REASON: "cluster: skipped: REASON", exit $CLUSTER_SKIP_EXIT (0 by hand, 77 in meson).
skip() { echo "cluster: skipped: $*"; exit "${CLUSTER_SKIP_EXIT:-0}"; }

passed=0
failed=0
# pass NAME; fail NAME [LOG...]: one check's result (a failure shows each log's last lines).
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() {
  echo "FAIL $1"
  for f in "${@:2}"; do [ -f "$f" ] && sed 's/^/  | /' "$f" | tail -25; done
  failed=$((failed + 1))
}

# fails_clearly NAME RC LOG PATTERN: a command that must fail (exit RC, not 0 and not
# timeout's 124) with PATTERN in its LOG.
fails_clearly() {
  if [ "$2" != 0 ] && [ "$2" != 124 ] && grep -q "$4" "$3"; then
    pass "$1"
  else
    fail "$1 (exit $2)" "$3"
  fi
}

# finish: the summary line; the script's status is 0 when nothing failed.
finish() {
  echo "cluster: $passed passed, $failed failed"
  [ "$failed" = 0 ]
}
