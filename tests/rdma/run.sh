#!/bin/bash
# tests/rdma/run.sh [BUILD_DIR]: the ib transport's tests on a real (software) RDMA device.
# Boots ONE qemu guest with soft-RoCE rxe0 (../shared/rdma-vm/run-in-rxe-vm.sh beside the
# clone, or $RXE_VM_SCRIPT) and runs there, with COLL_TRANSPORT=ib: coll-info --ib, the
# rdma suites (transport rings, reductions, credits, length mismatch, killed peers, every
# algorithm x types x ops x 2-5 ranks, broadcast, zero-copy), the elastic test (kill, agree,
# shrink, grow) and allreduce_bench on 2 and
# 4 ranks (then, not counted, the same bench over tcp and over ib without zero-copy).
# Prints "rdma: skipped: <reason>" and exits 0 when ibverbs support was not built, the VM
# script is missing or qemu cannot run; otherwise ends with "rdma: N passed, M failed"
# and exits non-zero when anything failed. Takes a few minutes (the guest CPU is emulated).
set -u

skip() {
  echo "rdma: skipped: $*"
  exit 0
}

here=$(cd "$(dirname "$0")" && pwd -P)
root=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null) || root=$(cd "$here/../.." && pwd -P)
build=${1:-$root/build}
[ -d "$build" ] || skip "no build directory $build (build first: meson setup $build && ninja -C $build)"
build=$(cd "$build" && pwd -P)

grep -q '#define COLL_HAVE_IBVERBS 1' "$build/coll_config.h" 2>/dev/null ||
  skip "libibverbs support was not built in $build (install libibverbs-dev, meson -Dibverbs=enabled)"
vm=${RXE_VM_SCRIPT:-$root/../shared/rdma-vm/run-in-rxe-vm.sh}
[ -f "$vm" ] || skip "the soft-RoCE VM script $vm is missing"
if ! command -v qemu-system-x86_64 >/dev/null 2>&1 && [ "$(id -u)" != 0 ]; then
  skip "qemu-system-x86_64 is not installed and only root can install it"
fi
for t in tests/rdma/test_rdma_ib tests/rdma/test_rdma_host tests/coll/test_coll_elastic \
  tools/coll-info tools/collrun bench/allreduce_bench; do
  [ -x "$build/$t" ] || {
    echo "rdma: $build/$t is missing: build first (ninja -C $build)"
    echo "rdma: 0 passed, 1 failed"
    exit 1
  }
done

# The guest runs this script in $build (mounted read-write at the same path).
guest=$build/rdma-guest.sh
cat >"$guest" <<'EOF'
#!/bin/bash
# Runs inside the soft-RoCE guest (written by tests/rdma/run.sh).
set -u
build=$1
passed=0
failed=0
log=$(mktemp)
# One step: its name, then the command; Check binaries count their checks.
step() {
  local name=$1
  shift
  local t0=$(date +%s.%N)
  "$@" >"$log" 2>&1
  local rc=$?
  local secs=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")
  cat "$log"
  local checks=$(sed -n 's/^[0-9]*%: Checks: \([0-9]*\), Failures: \([0-9]*\), Errors: \([0-9]*\).*/\1 \2 \3/p' "$log" | tail -1)
  if [ -n "$checks" ]; then
    set -- $checks
    local bad=$(($2 + $3))
    passed=$((passed + $1 - bad))
    failed=$((failed + bad))
    [ $rc = 0 ] || [ $bad -gt 0 ] || failed=$((failed + 1))
  elif [ $rc = 0 ]; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
  if [ $rc = 0 ]; then echo "rdma: PASS $name (${secs}s)"; else echo "rdma: FAIL $name (exit $rc, ${secs}s)"; fi
}
# allreduce_bench over ib: exit 0, transport ib, no wrong element, a positive busbw.
bench() {
  local n=$1
  COLL_TRANSPORT=${BENCH_TRANSPORT:-ib} timeout 300 "$build/tools/collrun" -n "$n" --timeout 280 \
    "$build/bench/allreduce_bench" -b 8 -e 4M -f 8 -n 5 -w 2 -c 1 || return 1
}
bench_check() {
  local n=$1 out
  out=$(bench "$n" 2>&1)
  local rc=$?
  echo "$out"
  [ $rc = 0 ] || return 1
  echo "$out" | grep -q 'transport: ib' || { echo "bench: transport is not ib"; return 1; }
  echo "$out" | grep -q 'Out of bounds values : 0 OK' || { echo "bench: wrong results"; return 1; }
  # Sane numbers: every row has a positive time and no wrong element; the busbw of the
  # largest size is printed in MB/s (the table's GB/s rounds the emulated guest to 0.00).
  echo "$out" | awk -v n="$n" '$2 ~ /^[0-9]+$/ && $3 ~ /^[0-9]+$/ && NF >= 14 {
      rows++; if (!($7 > 0 && $11 > 0) || $10 != 0 || $14 != 0) bad++; size = $2; t = $7 }
    END { if (rows == 0 || bad > 0) { print "bench: " rows " rows, " bad " bad"; exit 1 }
          printf "rdma: bench %d ranks over ib, %d bytes: %.0f us, algbw %.2f MB/s, busbw %.2f MB/s\n",
                 n, size, t, size / t, size / t * 2 * (n - 1) / n }' || return 1
}
export CK_FORK=yes CK_DEFAULT_TIMEOUT=300 COLL_INFO_BIN=$build/tools/coll-info
step "coll-info --ib" "$build/tools/coll-info" --ib
step "rdma_host (device present: ib used)" "$build/tests/rdma/test_rdma_host"
step "rdma_ib (transport and collectives over ib)" timeout 900 "$build/tests/rdma/test_rdma_ib"
step "coll_elastic over ib (revoke, kill + agree + shrink, fencing, shrink/grow cycles)" \
  env COLL_TEST_TRANSPORT=ib timeout 600 "$build/tests/coll/test_coll_elastic"
step "allreduce_bench, 2 ranks over ib" bench_check 2
step "allreduce_bench, 4 ranks over ib" bench_check 4
# Not counted: the same bench over tcp in the same guest, to read the ib numbers against.
echo "rdma: reference (not counted): allreduce_bench, 2 ranks over tcp in this guest"
BENCH_TRANSPORT=tcp bench 2 2>&1 | grep -E '^\[0\] +[0-9]|transport:'
echo "rdma: reference (not counted): allreduce_bench, 2 ranks over ib without zero-copy"
COLL_IB_ZCOPY_BYTES=0 bench 2 2>&1 | grep -E '^\[0\] +[0-9]|transport:'
rm -f "$log"
echo "rdma: $passed passed, $failed failed"
[ $failed = 0 ]
EOF
chmod +x "$guest"

cd "$build" || exit 1
out=$(mktemp)
# The guest's summary line is held back and printed last, after anything the VM prints.
RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-1500} bash "$vm" "bash $guest $build" 2>&1 | tee "$out" |
  grep --line-buffered -vE '^rdma: [0-9]+ passed, [0-9]+ failed$'
rc=${PIPESTATUS[0]}
summary=$(grep -E '^rdma: [0-9]+ passed, [0-9]+ failed$' "$out" | tail -1)
rm -f "$out" "$guest"
if [ -z "$summary" ]; then
  case $rc in
    125) skip "the qemu guest did not start (see the console log above)" ;;
    124) echo "rdma: the guest timed out"; echo "rdma: 0 passed, 1 failed"; exit 1 ;;
    *) echo "rdma: the guest gave no summary (exit $rc)"; echo "rdma: 0 passed, 1 failed"; exit 1 ;;
  esac
fi
echo "$summary"
exit "$rc"
