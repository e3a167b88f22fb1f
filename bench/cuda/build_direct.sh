#!/usr/bin/env bash
# build_direct.sh OUTDIR [ARCH]: builds tests/cuda/op_harness without CMake, for a GPU machine whose
# image lacks the project's configure-time dependencies (pkg-config, pcre2, jansson). The harness
# needs only the CPU reference (src/base, src/quant, src/backend/cpu: no third-party headers) and
# src/backend/cuda. ARCH defaults to 90 (sm_90 machine code).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:?usage: build_direct.sh OUTDIR [ARCH]}"
arch="${2:-90}"
nvcc="${NVCC:-/usr/local/cuda/bin/nvcc}"
mkdir -p "$out/obj"
cflags=(-std=c11 -O2 -DNDEBUG -D_GNU_SOURCE -fPIC -Wall -Wextra -Wno-unused-parameter
        -I"$root/include" -I"$root/src")
compile_c() {
  local src="$1" extra=()
  case "$src" in
    *_avx2.c) extra=(-mavx2 -mfma -mf16c) ;;
    *_avx512.c) extra=(-mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx512bf16) ;;
  esac
  gcc "${cflags[@]}" "${extra[@]}" -c "$src" -o "$out/obj/$(echo "${src#$root/}" | tr / _).o"
}
export -f compile_c
export root out
export cflags_str="${cflags[*]}"
jobs=$(nproc)
pids=()
for src in "$root"/src/base/*.c "$root"/src/quant/*.c "$root"/src/backend/cpu/*.c "$root"/tests/cuda/op_harness.c; do
  compile_c "$src" & pids+=($!)
  if [ "${#pids[@]}" -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for src in "$root"/src/backend/cuda/*.cu; do
  "$nvcc" -std=c++17 -O3 -gencode "arch=compute_$arch,code=sm_$arch" -D_GNU_SOURCE \
    -I"$root/include" -I"$root/src" -Xcompiler=-fPIC -c "$src" \
    -o "$out/obj/$(basename "$src").o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
"$nvcc" -o "$out/cuda_op_harness" "$out"/obj/*.o -lcublas -lpthread -lm -ldl
echo "built $out/cuda_op_harness"
