#!/usr/bin/env bash
# Runs the real allreduce_bench as users do (under collrun, under Open MPI's mpirun, with
# bad options) and asserts on its exit status and output. Called by meson with a mode:
#   bench_launch_test.sh MODE BENCH COLLRUN
# Modes: check2, check3-tcp, algos, min-busbw, files, bad-options, mpirun.
# Exit 0 pass, 1 fail, 77 skip (meson's skip code).
set -u
mode=$1
bench=$2
collrun=${3:-}
# A dead peer must fail a test long before meson's timeout does.
export COLL_TIMEOUT_MS=${COLL_TIMEOUT_MS:-60000}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL ($mode): $*" >&2
  for f in "$tmp"/out "$tmp"/err; do
    [ -s "$f" ] && { echo "--- $(basename "$f") (last 40 lines)" >&2; tail -n 40 "$f" >&2; }
  done
  exit 1
}

# Run a command with stdout/stderr captured; sets $rc.
run() {
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# Every data row (not starting with '#') of the bench output: 13 columns, #wrong in
# columns 9 and 13 must be 0. Prints the row count.
rows_all_correct() {
  awk '
    /^\[[0-9]+\] / { sub(/^\[[0-9]+\] /, "") }
    /^#/ || NF == 0 { next }
    NF != 13 { print "bad row: " $0 > "/dev/stderr"; bad = 1; next }
    $9 != "0" || $13 != "0" { print "wrong elements: " $0 > "/dev/stderr"; bad = 1 }
    { n++ }
    END { if (bad) exit 1; print n + 0 }' "$tmp/out"
}

expect_clean_check() {
  local want_rows=$1
  [ "$rc" -eq 0 ] || fail "exit status $rc, expected 0"
  grep -q "# Out of bounds values : 0 OK" "$tmp/out" || fail "no '0 OK' closing line"
  grep -q "# Avg bus bandwidth" "$tmp/out" || fail "no 'Avg bus bandwidth' line"
  grep -q "MEDIAN" "$tmp/out" || fail "header does not say the time is a median"
  grep -q "libcoll staging" "$tmp/out" || fail "header lacks the staging memory"
  grep -q "VmHWM" "$tmp/out" || fail "header lacks the peak RSS"
  local n
  n=$(rows_all_correct) || fail "rows with wrong elements or bad layout"
  [ "$n" -eq "$want_rows" ] || fail "$n result rows, expected $want_rows"
}

need_collrun() {
  [ -n "$collrun" ] && [ -x "$collrun" ] || { echo "SKIP: collrun not built" >&2; exit 77; }
}

# Sizes 12, 480, 19200, 768000 bytes: odd element counts for 8-byte types, one size large
# enough to be cut into pipelined segments.
sizes=(-b 12 -e 1M -f 40)
ntypes=12   # float8_e4m3 and float8_e5m2 included, as nccl-tests' -d all has them
nops=5
nints=6     # band, bor and bxor run on the integer types only
npairs=$((ntypes * nops + nints * 3))

case "$mode" in
  check2)
    need_collrun
    run "$collrun" -n 2 --timeout 240 "$bench" "${sizes[@]}" -n 2 -w 1 -c 1 -d all -o all
    expect_clean_check $((npairs * 4))
    grep -q "nRanks 2" "$tmp/out" || fail "header does not say nRanks 2"
    ;;
  check3-tcp)
    need_collrun
    run "$collrun" -n 3 --timeout 240 "$bench" "${sizes[@]}" -n 2 -w 1 -c 1 -d all -o all \
      -T tcp -z 1
    expect_clean_check $((npairs * 4))
    grep -q "transport: tcp" "$tmp/out" || fail "header does not name the tcp transport"
    ;;
  algos)
    need_collrun
    for algo in ring tree hd master auto; do
      for n in 3 4; do
        run "$collrun" -n $n --timeout 120 "$bench" "${sizes[@]}" -n 2 -w 1 -c 1 -d float \
          -o all -A $algo
        expect_clean_check $((nops * 4))
        grep -q "algorithm: $algo" "$tmp/out" || fail "header does not name algorithm $algo"
      done
    done
    ;;
  min-busbw)
    need_collrun
    # Positive control first: the same run with a threshold of 0 passes.
    run "$collrun" -n 2 --timeout 120 "$bench" -b 1M -e 1M -n 3 -w 1 --min-busbw 0
    [ "$rc" -eq 0 ] || fail "--min-busbw 0 exited $rc"
    grep -q "required >= 0: OK" "$tmp/out" || fail "no OK line for --min-busbw 0"
    run "$collrun" -n 2 --timeout 120 "$bench" -b 1M -e 1M -n 3 -w 1 --min-busbw 1000000
    [ "$rc" -ne 0 ] || fail "an absurd --min-busbw still exited 0"
    grep -q "required >= 1e+06: FAILED" "$tmp/out" || fail "no FAILED line for --min-busbw"
    ;;
  files)
    need_collrun
    run "$collrun" -n 2 --timeout 120 "$bench" -b 8 -e 8K -f 32 -n 2 -w 1 \
      --csv "$tmp/r.csv" --json "$tmp/r.json"
    [ "$rc" -eq 0 ] || fail "exit status $rc"
    [ "$(grep -c '^[0-9]' "$tmp/r.csv")" -eq 3 ] || fail "CSV does not hold 3 rows"
    grep -q '"nranks": 2' "$tmp/r.json" || fail "JSON lacks nranks"
    if command -v python3 >/dev/null; then
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["results"])==3, d' \
        "$tmp/r.json" || fail "JSON does not parse or lacks rows"
    fi
    ;;
  bad-options)
    # Options are checked before any rank looks for a launcher: no collrun needed.
    check_bad() {
      local needle=$1
      shift
      run "$bench" "$@"
      [ "$rc" -eq 2 ] || fail "'$*' exited $rc, expected 2"
      grep -q -- "$needle" "$tmp/err" || fail "'$*': message lacks '$needle'"
    }
    check_bad "unknown type 'float128'" -d float128
    check_bad "minbytes" -b 2M -e 1M
    check_bad "unknown option '--frobnicate'" --frobnicate
    check_bad "invalid size '12Q'" -e 12Q
    check_bad "expected ring, tree, hd, master, arena or auto" -A star
    check_bad "needs a value" -n
    run "$bench" --help
    [ "$rc" -eq 0 ] || fail "--help exited $rc"
    grep -q -- "--min-busbw" "$tmp/out" || fail "--help does not document --min-busbw"
    # Without any launcher variables the bench fails with the library's message, not a crash.
    run env -u RANK -u WORLD_SIZE -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID "$bench" -b 8 -e 8
    [ "$rc" -eq 1 ] || fail "no launcher environment: exited $rc, expected 1"
    grep -q "coll_comm_init_env failed" "$tmp/err" || fail "no init failure message"
    ;;
  mpirun)
    command -v mpirun >/dev/null || { echo "SKIP: mpirun not found" >&2; exit 77; }
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) \
      || port=$((20000 + RANDOM % 30000))
    # Open MPI refuses root without these; --oversubscribe lets 3 ranks share 2 cores.
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    # Only the rank numbering comes from Open MPI; the bench's store lives at
    # MASTER_ADDR:MASTER_PORT (hosted by rank 0), passed to every rank with -x.
    run env MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" timeout 240 mpirun -np 3 --oversubscribe \
      --mca btl self,tcp -x MASTER_ADDR -x MASTER_PORT -x COLL_TIMEOUT_MS \
      "$bench" "${sizes[@]}" -n 2 -w 1 -c 1 -d all -o sum
    expect_clean_check $((ntypes * 4))
    grep -q "nRanks 3" "$tmp/out" || fail "header does not say nRanks 3"
    ;;
  *)
    echo "unknown mode '$mode'" >&2
    exit 2
    ;;
esac
echo "PASS ($mode)"
exit 0
