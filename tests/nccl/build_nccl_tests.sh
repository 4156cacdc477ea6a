#!/usr/bin/env bash
# nccl-tests 2.19.6 (NVIDIA's source, unchanged, from ../shared/nccl-tests) built with nvcc
# and Open MPI against NVIDIA's own headers, the CUDA toolkit's nccl.h and nccl_device.h
# (2.28.9 on CI's machine; NCCL_TESTS_HEADERS names another folder), and linked to our
# libnccl.so.2: proof that a real NCCL client built as its users build it links to and
# loads this library (running it needs a GPU: tests/gpu/run.sh). Since 2.28 nccl-tests
# includes nccl_device.h, which our nccl.h leaves out, so it is not built against ours.
#   build_nccl_tests.sh BUILD_DIR SOURCE_ROOT [OUT_DIR]
# NCCL_TESTS_MPI=1 (default) builds with Open MPI and fails without it; auto builds
# without MPI where Open MPI's headers are missing (the GPU machine may lack them).
# Exit 77 (meson's skip) only when nvcc or the archive is missing, saying which.
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(cd "$2" && pwd)
out=${3:-$build/nccl-tests}
archive=${NCCL_TESTS_ARCHIVE:-$root/../shared/nccl-tests/nccl-tests-2.19.6.tar.gz}
cuda=${CUDA_HOME:-/usr/local/cuda}
headers=${NCCL_TESTS_HEADERS:-$cuda/include}
mpi=${MPI_HOME:-/usr/lib/x86_64-linux-gnu/openmpi}
[ -x "$cuda/bin/nvcc" ] || { echo "skipped: no nvcc in $cuda/bin"; exit 77; }
[ -f "$archive" ] || { echo "skipped: $archive not found"; exit 77; }
[ -f "$headers/nccl.h" ] && [ -f "$headers/nccl_device.h" ] || {
  echo "NVIDIA's nccl.h and nccl_device.h not found in $headers"; exit 1; }
use_mpi=1
if [ ! -f "$mpi/include/mpi.h" ]; then
  [ "${NCCL_TESTS_MPI:-1}" = auto ] || { echo "Open MPI headers missing in $mpi/include (libopenmpi-dev)"; exit 1; }
  use_mpi=0
fi

# NCCL_HOME as nccl-tests expects it: include/nccl.h and lib/libnccl.so.
home=$out/nccl-home
rm -rf "$out"
mkdir -p "$home/include" "$home/lib"
cp -r "$headers/nccl.h" "$headers/nccl_device.h" "$headers/nccl_device" "$home/include/"
lib=$(readlink -f "$build/nccl/libnccl.so.2")
cp "$lib" "$home/lib/"
ln -s "$(basename "$lib")" "$home/lib/libnccl.so.2"
ln -s libnccl.so.2 "$home/lib/libnccl.so"
header_version=$(sed -n 's/^#define NCCL_VERSION_CODE *//p' "$headers/nccl.h")
tar xzf "$archive" -C "$out"
src=$out/nccl-tests-2.19.6
# One GPU architecture (sm_90, the H200 of the GPU check) keeps the build to minutes.
make -C "$src" -j"${NCCL_TESTS_JOBS:-2}" MPI=$use_mpi MPI_HOME="$mpi" CUDA_HOME="$cuda" NCCL_HOME="$home" \
  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$out/make.log" 2>&1 || {
  tail -40 "$out/make.log"
  exit 1
}
n=0
for t in all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf sendrecv_perf \
  alltoall_perf gather_perf scatter_perf reduce_perf; do
  exe=$src/build/$t
  [ -x "$exe" ] || { echo "$t was not built"; exit 1; }
  # It must load our library (nothing else called libnccl) and find every symbol.
  LD_LIBRARY_PATH="$home/lib:${LD_LIBRARY_PATH:-}" ldd -r "$exe" >"$out/$t.ldd" 2>&1
  if grep -q "undefined symbol" "$out/$t.ldd"; then grep "undefined symbol" "$out/$t.ldd"; exit 1; fi
  grep -q "libnccl.so.2 => $home/lib/libnccl.so.2" "$out/$t.ldd" || {
    echo "$t does not load $home/lib/libnccl.so.2:"; cat "$out/$t.ldd"; exit 1; }
  n=$((n + 1))
done
echo "nccl-tests: $n programs built (MPI=$use_mpi) against NVIDIA's nccl.h $header_version ($headers) and linked to libcoll's $(basename "$lib") ($src/build)"
