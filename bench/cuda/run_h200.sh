#!/usr/bin/env bash
# run_h200.sh: the whole CUDA check for one device call, run from the repository root on the GPU
# machine: configure + build with CMake (falling back to build_direct.sh when the image lacks the
# configure-time dependencies or the host compiler trips -Werror), the op harness (correctness),
# its --perf mode, and compute-sanitizer's memcheck when any op failed. Everything lands in $OUT
# (log.txt, perf.txt, build.txt, sanitizer.txt). Usage (device tool):
#   set -o pipefail; bench/cuda/run_h200.sh 2>&1 | tee $OUT/console.txt
set -uo pipefail
out="${OUT:-/tmp/cuda-out}"
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
log="$out/log.txt"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
  nvcc --version | tail -2
  cmake --version | head -1
  gcc --version | head -1
} 2>&1 | tee "$log"
t0=$(date +%s)
h=""
if cmake -S . -B build-gpu -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >"$out/build.txt" 2>&1 &&
   cmake --build build-gpu -j"$(nproc)" --target cuda_op_harness test_cuda_host >>"$out/build.txt" 2>&1; then
  h=build-gpu/cuda_op_harness
  echo "build: cmake, $(( $(date +%s) - t0 )) s" | tee -a "$log"
  (cd build-gpu && ctest -L cuda 2>&1 | tail -5) | tee -a "$log"
else
  echo "cmake build failed; its tail:" | tee -a "$log"
  tail -15 "$out/build.txt" | tee -a "$log"
  if bench/cuda/build_direct.sh /tmp/cuda-direct 90 >>"$out/build.txt" 2>&1; then
    h=/tmp/cuda-direct/cuda_op_harness
    echo "build: direct, $(( $(date +%s) - t0 )) s" | tee -a "$log"
  else
    echo "direct build failed too" | tee -a "$log"; tail -15 "$out/build.txt"; exit 1
  fi
fi
timeout 150 "$h" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
echo "harness rc=$rc" | tee -a "$log"
timeout 240 "$h" --perf 2>&1 | tee "$out/perf.txt"
echo "perf rc=${PIPESTATUS[0]}" | tee -a "$out/perf.txt"
if [ "$rc" != 0 ] && [ "$rc" != 77 ]; then
  timeout 120 compute-sanitizer --tool memcheck "$h" >"$out/sanitizer.txt" 2>&1
  tail -40 "$out/sanitizer.txt"
fi
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a "$log"
