#!/usr/bin/env bash
# GPU check of libcoll's CUDA support, for a machine with a GPU, nvcc, meson and ninja (no
# Check library or network needed). Configures a release build without the Check tests,
# runs the GPU correctness tests (all-reduce and broadcast: every dtype x op on device
# buffers, 1, 2 and 4 ranks on the GPU through cuda_ipc, stream calls; reduce, all_gather,
# reduce_scatter and all_to_all the same way, and through pinned host staging with
# COLL_TRANSPORT=tcp), the device all-reduce benchmark for 2 and 4
# ranks from 8 B to 256 MiB next to the device's own D2D copy bandwidth, and, when the
# trainer was built (OpenBLAS, zlib), libtrain's CUDA backend against its CPU backend and,
# when data is found, one epoch of 2-rank training with --device cuda. Logs go to $OUT
# (or gpu-logs/); the summary table is printed last.
# Then the torch.distributed backend coll, built against the machine's PyTorch, on CUDA
# tensors (DDP and FSDP2, against PyTorch's nccl: tests/gpu/torch_coll_cuda.py).
# Last, libnccl.so.2 beside NVIDIA's NCCL: nccl-tests run on 2 ranks sharing the GPU with
# each library, and PyTorch's NCCL backend (DDP) over each (tests/gpu/nccl_check.sh).
# Usage: tests/gpu/run.sh            (from the repository root; about 8 minutes)
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@" # run as `sh script`: bash it is
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
logs=${OUT:-$root/gpu-logs}
build=${GPU_BUILD_DIR:-$root/build-gpu}
data=${GPU_DATA_DIR:-/usr/share/datasets/fashion-mnist}
mkdir -p "$logs"
declare -a names=() results=()
record() { names+=("$1"); results+=("$2"); }
summary() {
  echo
  echo "==================== GPU SUMMARY ===================="
  for i in "${!names[@]}"; do printf '%-34s %s\n' "${names[$i]}" "${results[$i]}"; done
  echo "logs: $logs"
}
trap summary EXIT

step() { # name, timeout seconds, log file, command...
  local name=$1 limit=$2 log=$3
  shift 3
  echo "---- $name"
  local rc=0
  timeout "$limit" "$@" >"$log" 2>&1 || rc=$?
  tail -n 40 "$log"
  if [ "$rc" -eq 0 ]; then record "$name" "PASS"
  elif [ "$rc" -eq 77 ]; then record "$name" "SKIP (no CUDA device)"
  elif [ "$rc" -eq 124 ]; then record "$name" "FAIL (timeout ${limit}s)"
  else record "$name" "FAIL (exit $rc)"; fi
  return 0
}

nvidia-smi -L >"$logs/gpus.log" 2>&1 || true
cat "$logs/gpus.log"
echo "---- configure + build ($build)"
# The machine's own PyTorch (python3 there holds it): torch_coll is built against it too.
torch_py=$(command -v python3 || true)
torch_args=()
if [ -n "$torch_py" ] && "$torch_py" -c 'import torch' 2>/dev/null; then
  torch_args=("-Dtorch2_python=$torch_py")
fi
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" --buildtype=release -Dtests=disabled -Dcuda=enabled \
    "${torch_args[@]}" \
    >"$logs/configure.log" 2>&1 || { tail -n 30 "$logs/configure.log"; record build "FAIL (configure)"; exit 1; }
fi
if ninja -C "$build" >"$logs/build.log" 2>&1; then record build PASS
else tail -n 30 "$logs/build.log"; record build "FAIL"; exit 1; fi

export COLL_TIMEOUT_MS=${COLL_TIMEOUT_MS:-60000}
step "correctness 1,2,4 ranks (cuda_ipc)" 240 "$logs/test_gpu_coll.log" \
  env COLL_DEBUG=INFO "$build/tests/gpu/test_gpu_coll" 1 2 4
grep -m1 "share GPU" "$logs/test_gpu_coll.log" || true
step "stream mode sync, 2 ranks" 120 "$logs/test_gpu_coll_sync.log" \
  env COLL_CUDA_STREAM_MODE=sync "$build/tests/gpu/test_gpu_coll" 2
step "pinned staging (tcp), 2 ranks" 120 "$logs/test_gpu_coll_tcp.log" \
  env COLL_TRANSPORT=tcp "$build/tests/gpu/test_gpu_coll" 2
# reduce, all_gather, reduce_scatter, all_to_all (and their _stream forms, send/recv refused)
step "more colls 1,2,4 ranks (cuda_ipc)" 240 "$logs/test_gpu_more.log" \
  "$build/tests/gpu/test_gpu_more" 1 2 4
step "more colls staged (tcp), 2,4 ranks" 180 "$logs/test_gpu_more_tcp.log" \
  env COLL_TRANSPORT=tcp "$build/tests/gpu/test_gpu_more" 2 4
step "more colls sync mode, 2 ranks" 120 "$logs/test_gpu_more_sync.log" \
  env COLL_CUDA_STREAM_MODE=sync "$build/tests/gpu/test_gpu_more" 2

for n in 2 4; do
  step "bench $n ranks 8B..256MiB" 150 "$logs/bench_$n.log" \
    env COLL_CHUNK_SIZE=${GPU_CHUNK_SIZE:-4194304} "$build/tests/gpu/gpu_bench" "$n" 8 268435456
  line=$(grep "SUMMARY" "$logs/bench_$n.log" || true)
  [ -n "$line" ] && record "  busbw n=$n" "${line#*SUMMARY }"
done

# libtrain's CUDA kernels against its CPU backend before the training run that uses them.
if [ -x "$build/tests/gpu/test_train_cuda" ]; then
  step "libtrain CUDA backend vs CPU" 120 "$logs/test_train_cuda.log" \
    "$build/tests/gpu/test_train_cuda"
fi
if [ -x "$build/tools/train" ] && [ -x "$build/tools/collrun" ] && [ -d "$data" ]; then
  step "train 2 ranks --device cuda 1 epoch" 180 "$logs/train.log" \
    "$build/tools/collrun" -n 2 "$build/tools/train" --device cuda --epochs 1 --data "$data" --quiet
else
  record "train 2 ranks --device cuda" "SKIP (train not built or no data at $data)"
fi

# The torch.distributed backend "coll" on CUDA tensors: DDP and FSDP2 through
# cpu:gloo,cuda:coll and through PyTorch's nccl, 2 ranks on GPU 0 (tests/gpu/torch_coll_cuda.py).
if [ ${#torch_args[@]} -gt 0 ] && [ -d "$build/torch_coll/torch2" ]; then
  step "torch_coll cuda:coll DDP+FSDP2" 600 "$logs/torch_coll_cuda.log" \
    env PYTHONPATH="$build/torch_coll/torch2" PYTHONUNBUFFERED=1 "$torch_py" \
    "$root/tests/gpu/torch_coll_cuda.py"
  while read -r what kind name verdict rest; do
    record "  torch_coll $kind $name" "$verdict $rest"
  done < <(grep -E "^TORCH-COLL-CUDA " "$logs/torch_coll_cuda.log")
else
  record "torch_coll cuda:coll" "SKIP (python3 here has no torch)"
fi

# libnccl.so.2: nccl-tests (built against NVIDIA's nccl.h) with results checked and PyTorch's
# NCCL backend (DDP) when this machine's PyTorch has CUDA, each on our library and on
# NVIDIA's, side by side (tests/gpu/nccl_check.sh).
step "libnccl.so.2: nccl-tests, torch" 900 "$logs/nccl_check.log" \
  env PYTHON="${torch_py:-python3}" bash "$root/tests/gpu/nccl_check.sh" "$build" "$logs"
while read -r what name verdict rest; do
  record "  $name" "$verdict $rest"
done < <(grep -E "^(NCCL-TESTS|TORCH-NCCL) " "$logs/nccl_check.log")
