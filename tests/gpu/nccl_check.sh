#!/usr/bin/env bash
# GPU check of libnccl.so.2 (nccl/), ours beside NVIDIA's in the same script:
#  - nccl_premul_device (premul-sum ops with a device scalar, on cuda_ipc and staged over tcp);
#  - NVIDIA's nccl-tests 2.19.6, built against NVIDIA's nccl.h (the toolkit's) and run with
#    -c 1 (results checked) on 2 ranks sharing GPU 0 (Open MPI, NCCL_TESTS_DEVICE=0;
#    without mpirun, 2 threads of one process), once with our library and once with
#    NVIDIA's (LD_PRELOAD picks each): #wrong must be 0, the bus bandwidth of both and
#    their ratio are printed;
#  - PyTorch's backend="nccl": five DDP steps of 2 ranks on GPU 0 with ours (LD_PRELOAD) and
#    with the wheel's NVIDIA NCCL, each checked against one process, then against each other.
# NVIDIA's NCCL refuses two ranks on one GPU ("Duplicate GPU detected"): where it does, its
# lines say so (SKIP) and ours is checked on its own. With 2+ GPUs both run a rank per GPU.
# Without a GPU it prints what it would have run and exits 77. Not yet run on a GPU.
#   tests/gpu/nccl_check.sh BUILD_DIR LOG_DIR      (run.sh calls it)
# Environment: NVIDIA_NCCL (NVIDIA's libnccl.so.2 to compare with; default: the toolkit's,
# else the one in python3's torch wheel), PYTHON (default python3).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build-gpu}" && pwd)
logs=${2:-$root/gpu-logs}
mkdir -p "$logs"
lib=$(readlink -f "$build/nccl/libnccl.so.2")
py=${PYTHON:-python3}
cuda=${CUDA_HOME:-/usr/local/cuda}
perf_tests="all_reduce_perf all_gather_perf reduce_scatter_perf sendrecv_perf broadcast_perf"
args="-b 8 -e 64M -f 4 -g 1 -c 1 -n 20 -w 5"
ngpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
# One GPU: both ranks on GPU 0. More: nccl-tests' own rank-per-GPU mapping.
dev_env=""
[ "${ngpus:-0}" -lt 2 ] && dev_env="NCCL_TESTS_DEVICE=0"
our_version=$(sed -n 's/^#define NCCL_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' "$root/nccl/include/nccl.h" | paste -sd.)

# NVIDIA's library: the toolkit's (the header nccl-tests is built against), else the wheel's.
nvidia_lib=${NVIDIA_NCCL:-}
if [ -z "$nvidia_lib" ] && [ -f "$cuda/lib64/libnccl.so.2" ]; then nvidia_lib=$cuda/lib64/libnccl.so.2; fi
if [ -z "$nvidia_lib" ]; then
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null || true)
  [ -n "$site" ] && [ -f "$site/nvidia/nccl/lib/libnccl.so.2" ] && nvidia_lib=$site/nvidia/nccl/lib/libnccl.so.2
fi

bin=$build/nccl-tests/nccl-tests-2.19.6/build
# run_perf TEST LIBRARY LOG: one nccl-tests program on 2 ranks with LIBRARY preloaded.
run_perf() {
  local t=$1 preload=$2 log=$3
  if command -v mpirun >/dev/null; then
    # shellcheck disable=SC2086 # the argument lists are meant to split
    timeout 300 mpirun --allow-run-as-root --oversubscribe -np 2 ${dev_env:+-x $dev_env} \
      -x LD_PRELOAD="$preload" -x COLL_TIMEOUT_MS "$bin/$t" $args >"$log" 2>&1
  else
    # shellcheck disable=SC2086
    env $dev_env LD_PRELOAD="$preload" timeout 300 "$bin/$t" $args -t 2 >"$log" 2>&1
  fi
}
# perf_result LOG RC: "ok BW" when the run passed its checks, else "fail (why)".
perf_result() {
  local log=$1 rc=$2 wrong bw oob
  # nccl-tests' rows: size count type redop root time algbw busbw #wrong (out of place, in place).
  wrong=$(awk '/^ +[0-9]+ +[0-9]+ / { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+$/ && (i == 9 || i == NF)) s += $i } END { print s + 0 }' "$log")
  bw=$(sed -n 's/.*Avg bus bandwidth *: *//p' "$log" | tail -1)
  oob=$(grep -c "Out of bounds values : 0 OK" "$log")
  if grep -q "Duplicate GPU" "$log"; then echo "refused (Duplicate GPU detected: two ranks on one GPU)"
  elif [ "$rc" -eq 0 ] && [ "$wrong" = 0 ] && [ "$oob" -ge 1 ] && [ -n "$bw" ]; then echo "ok $bw"
  else echo "fail (exit $rc, #wrong $wrong)"; fi
}

if [ "${ngpus:-0}" -lt 1 ]; then
  echo "nccl_check: no GPU; with one it would run:"
  echo "  $build/tests/gpu/nccl_premul_device 2; COLL_TRANSPORT=tcp $build/tests/gpu/nccl_premul_device 2"
  echo "  tests/nccl/build_nccl_tests.sh $build $root $build/nccl-tests   (NVIDIA's nccl.h from $cuda/include)"
  for t in $perf_tests; do
    echo "  mpirun -np 2 -x NCCL_TESTS_DEVICE=0 -x LD_PRELOAD=$lib $bin/$t $args"
    echo "  mpirun -np 2 -x NCCL_TESTS_DEVICE=0 -x LD_PRELOAD=${nvidia_lib:-NONE_FOUND} $bin/$t $args"
  done
  echo "  LD_PRELOAD=$lib $py tests/gpu/torch_nccl_ddp.py OUT $our_version; $py tests/gpu/torch_nccl_ddp.py OUT"
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

echo "---- nccl-tests built against NVIDIA's nccl.h ($cuda/include), linked to $lib"
if ! NCCL_TESTS_MPI=auto NCCL_TESTS_JOBS=$(nproc) bash "$root/tests/nccl/build_nccl_tests.sh" \
  "$build" "$root" "$build/nccl-tests" >"$logs/nccl_tests_build.log" 2>&1; then
  tail -n 30 "$logs/nccl_tests_build.log"
  echo "NCCL-TESTS build FAIL"
  exit 1
fi
tail -n 1 "$logs/nccl_tests_build.log"
echo "NVIDIA's library for comparison: ${nvidia_lib:-none found}"
export COLL_TIMEOUT_MS=${COLL_TIMEOUT_MS:-60000}
for t in $perf_tests; do
  run_perf "$t" "$lib" "$logs/nccl_${t}_ours.log"
  rc=$?
  ours=$(perf_result "$logs/nccl_${t}_ours.log" $rc)
  theirs="not run (no NVIDIA library found)"
  if [ -n "$nvidia_lib" ]; then
    run_perf "$t" "$nvidia_lib" "$logs/nccl_${t}_nvidia.log"
    rc=$?
    theirs=$(perf_result "$logs/nccl_${t}_nvidia.log" $rc)
  fi
  if [ "${ours%% *}" = ok ]; then
    line="NCCL-TESTS $t PASS #wrong 0 busbw ours ${ours#ok } GB/s"
    if [ "${theirs%% *}" = ok ]; then
      ratio=$(awk -v a="${ours#ok }" -v b="${theirs#ok }" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }')
      line="$line, NVIDIA's ${theirs#ok } GB/s, ours/NVIDIA's $ratio"
    else
      line="$line; NVIDIA's: $theirs"
    fi
    echo "$line"
  else
    echo "NCCL-TESTS $t FAIL ours: $ours; NVIDIA's: $theirs"
    tail -n 25 "$logs/nccl_${t}_ours.log"
    fail=1
  fi
  if [ "${theirs%% *}" = fail ]; then tail -n 10 "$logs/nccl_${t}_nvidia.log"; fi
done

# The torch wheel's own CUDA runtime first (docs/nccl.md's recipe): our library's libcudart.so.13
# is then that one, and torch keeps the runtime it was built with.
torch_cudart=$("$py" -c 'import glob, os, sysconfig; c = sorted(glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "nvidia", "*", "lib", "libcudart.so.*"))); print(c[0] if c else "")' 2>/dev/null)
torch_preload=$lib
[ -n "$torch_cudart" ] && torch_preload=$torch_cudart:$lib
if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  LD_PRELOAD=$torch_preload timeout 300 "$py" "$root/tests/gpu/torch_nccl_ddp.py" "$logs/ddp_ours.pt" \
    "$our_version" >"$logs/torch_nccl_ours.log" 2>&1
  rc=$?
  tail -n 8 "$logs/torch_nccl_ours.log"
  if [ $rc -eq 0 ]; then echo "TORCH-NCCL ddp(ours) PASS $(tail -n 1 "$logs/torch_nccl_ours.log")"
  else echo "TORCH-NCCL ddp(ours) FAIL (exit $rc)"; fail=1; fi
  timeout 300 "$py" "$root/tests/gpu/torch_nccl_ddp.py" "$logs/ddp_nvidia.pt" \
    >"$logs/torch_nccl_nvidia.log" 2>&1
  rc_nv=$?
  tail -n 8 "$logs/torch_nccl_nvidia.log"
  if [ $rc_nv -eq 3 ]; then echo "TORCH-NCCL ddp(nvidia) SKIP: NVIDIA's NCCL refuses two ranks on one GPU"
  elif [ $rc_nv -eq 0 ]; then echo "TORCH-NCCL ddp(nvidia) PASS $(tail -n 1 "$logs/torch_nccl_nvidia.log")"
  else echo "TORCH-NCCL ddp(nvidia) FAIL (exit $rc_nv; NVIDIA's library, not ours)"; fi
  if [ $rc -eq 0 ] && [ $rc_nv -eq 0 ]; then
    if diff=$("$py" -c 'import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
worst = max((a[k] - b[k]).abs().max().item() for k in a)
print("%.2e" % worst); sys.exit(0 if worst <= 1e-5 else 1)' "$logs/ddp_ours.pt" "$logs/ddp_nvidia.pt"); then
      echo "TORCH-NCCL ddp(ours=nvidia) PASS max |diff| $diff between the libraries' parameters"
    else
      echo "TORCH-NCCL ddp(ours=nvidia) FAIL max |diff| $diff between the libraries' parameters"
      fail=1
    fi
  fi
else
  echo "TORCH-NCCL torch SKIP: $py's PyTorch has no CUDA"
fi
exit $fail
