#!/usr/bin/env bash
# GPU check of libnccl.so.2 (nccl/, issue 16): nccl_premul_device (premul-sum ops with a
# device scalar, on cuda_ipc and staged over tcp); NVIDIA's nccl-tests 2.19.6 built against
# our nccl.h and library, run with -c 1 (results checked) on 2 ranks sharing GPU 0 (Open MPI,
# NCCL_TESTS_DEVICE=0; without mpirun, 2 threads of one process), #wrong must be 0 and the
# bus bandwidth is printed; then PyTorch's ProcessGroupNCCL over our library (LD_PRELOAD)
# running a 2-rank DDP step, when the machine's PyTorch has CUDA. Without a GPU it prints
# what it would have run and exits 77.
#   tests/gpu/nccl_check.sh BUILD_DIR LOG_DIR      (run.sh calls it)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build-gpu}" && pwd)
logs=${2:-$root/gpu-logs}
mkdir -p "$logs"
lib=$build/nccl/libnccl.so.2
perf_tests="all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf sendrecv_perf"
args="-b 8 -e 64M -f 4 -g 1 -c 1 -n 20 -w 5"
mpi_line="mpirun --allow-run-as-root --oversubscribe -np 2 -x NCCL_TESTS_DEVICE=0 -x LD_LIBRARY_PATH"

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo "nccl_check: no GPU; with one it would run:"
  echo "  $build/tests/gpu/nccl_premul_device 2; COLL_TRANSPORT=tcp $build/tests/gpu/nccl_premul_device 2"
  echo "  tests/nccl/build_nccl_tests.sh $build $root $build/nccl-tests"
  for t in $perf_tests; do echo "  $mpi_line $build/nccl-tests/nccl-tests-2.19.6/build/$t $args"; done
  echo "  LD_PRELOAD=$lib torchrun-like 2 ranks: /usr/bin/python3 tests/gpu/torch_nccl_ddp.py"
  exit 77
fi

fail=0
for transport in auto tcp; do
  log=$logs/nccl_premul_device_$transport.log
  if COLL_TRANSPORT=$transport timeout 300 "$build/tests/gpu/nccl_premul_device" 2 >"$log" 2>&1; then
    echo "NCCL-TESTS premul_device($transport) PASS"
  else
    echo "NCCL-TESTS premul_device($transport) FAIL"
    tail -n 15 "$log"
    fail=1
  fi
done

echo "---- nccl-tests build against $lib"
if ! NCCL_TESTS_MPI=auto NCCL_TESTS_JOBS=$(nproc) bash "$root/tests/nccl/build_nccl_tests.sh" \
  "$build" "$root" "$build/nccl-tests" \
  >"$logs/nccl_tests_build.log" 2>&1; then
  tail -n 30 "$logs/nccl_tests_build.log"
  echo "NCCL-TESTS build FAIL"
  exit 1
fi
bin=$build/nccl-tests/nccl-tests-2.19.6/build
export LD_LIBRARY_PATH="$build/nccl-tests/nccl-home/lib:${LD_LIBRARY_PATH:-}"
export COLL_TIMEOUT_MS=${COLL_TIMEOUT_MS:-60000}
for t in $perf_tests; do
  log=$logs/nccl_$t.log
  if command -v mpirun >/dev/null; then
    # shellcheck disable=SC2086 # the argument lists are meant to split
    timeout 300 $mpi_line "$bin/$t" $args >"$log" 2>&1
  else
    # shellcheck disable=SC2086
    NCCL_TESTS_DEVICE=0 timeout 300 "$bin/$t" $args -t 2 >"$log" 2>&1
  fi
  rc=$?
  # nccl-tests' rows: size count type redop root time algbw busbw #wrong (out of place, in place).
  wrong=$(awk '/^ +[0-9]+ +[0-9]+ / { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/ && (i == 9 || i == NF)) s += $i } END { print s + 0 }' "$log")
  bw=$(sed -n 's/.*Avg bus bandwidth *: *//p' "$log" | tail -1)
  oob=$(grep -c "Out of bounds values : 0 OK" "$log")
  if [ $rc -eq 0 ] && [ "$wrong" = 0 ] && [ "$oob" -ge 1 ]; then
    echo "NCCL-TESTS $t PASS  #wrong 0  avg busbw ${bw:-?} GB/s"
  else
    echo "NCCL-TESTS $t FAIL (exit $rc, #wrong $wrong)"
    tail -n 25 "$log"
    fail=1
  fi
done

if /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  LD_PRELOAD=$lib timeout 300 /usr/bin/python3 "$root/tests/gpu/torch_nccl_ddp.py" \
    >"$logs/torch_nccl.log" 2>&1
  rc=$?
  tail -n 10 "$logs/torch_nccl.log"
  if [ $rc -eq 0 ]; then echo "TORCH-NCCL PASS"; else echo "TORCH-NCCL FAIL (exit $rc)"; fail=1; fi
else
  echo "TORCH-NCCL SKIP: this machine's PyTorch has no CUDA (Debian's python3-torch is CPU-only)"
fi
exit $fail
