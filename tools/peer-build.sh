#!/usr/bin/env bash
# peer-build.sh: builds llama.cpp (the peer) from the source shipped in the npm bundle, for the
# conformance tests and side-by-side benchmarks: test-llama-archs (writes models no one here
# wrote), llama-bench, llama-completion, llama-tokenize, and llama-quantize with llama-imatrix
# (files in every type llama.cpp writes, tests/conformance/quantize_peer.sh).
#
#   source: .peer/node_modules/node-llama-cpp/llama/gitRelease.bundle (tools/setup.sh installs it),
#           cloned into .peer/llama.cpp if absent;
#   build:  .peer/llama.cpp/build: Release, CPU only, -march=native with AMX off (issue 3's peer
#           numbers were measured that way), no curl/OpenSSL, no server, no examples (`server`
#           below builds llama-server in a folder of its own).
#
# Safe to run again: when the binaries are there it only says so. To use a build made
# elsewhere, point STRATA_LLAMA_BUILD at it (a folder with bin/test-llama-archs ...); it is then
# linked as .peer/llama.cpp/build so the tests find it. STRATA_LLAMA_SRC likewise for the source.
# Measured: 650 s user + 95 s system CPU for a fresh clone and build (~6.5 min on 2 idle cores).
# JOBS sets the parallelism (default: all cores). Prints the time the build took; the compiler's
# output goes to .peer/llama-build.log.
#
#   tools/peer-build.sh avx2 [DIR]          llama-bench built for AVX2/FMA/F16C only (no AVX-512), in
#       DIR (default .peer/llama.cpp/build-avx2): the peer of STRATA_CPU_LEVEL=1 (issue 13's tables)
#   tools/peer-build.sh speculative [OUT]   llama-speculative-simple (examples/speculative-simple,
#       the driver of --spec-type draft-mtp), compiled on its own against the libraries above into
#       OUT (default build/peer), since the build is configured without examples and is shared:
#       this adds no target to it and changes nothing in it (bench/results/*-spec-*.md use it).
#
#   tools/peer-build.sh server [DIR]        llama-server (bench/parallel.sh's peer) in a build folder
#       of its own, DIR (default .peer/llama.cpp/build-server), configured as the shared build is
#       (Release, -march=native, AMX off, no curl/OpenSSL) but with the server and without the tests;
#       the shared build is neither reconfigured nor touched. Safe to run again.
#       Measured: 47 min on the 2 shared cores under load (2026-12-02, configured 02:31, done 03:18).
set -euo pipefail
cd "$(dirname "$0")/.."

# -march=native turns AMX on where the CPU has it; the -mno-amx-* flags turn it back off.
no_amx() {
  if echo 'int main(void){return 0;}' | ${CC:-cc} -x c -mno-amx-tile -mno-amx-int8 -mno-amx-bf16 -o /dev/null - 2>/dev/null; then
    echo "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  fi
}

# configure SRC DIR SERVER(ON|OFF) TESTS(ON|OFF): the peer's one configuration, into .peer/llama-build.log.
configure() {
  local flags
  flags=$(no_amx)
  cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER="$3" -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TESTS="$4" -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF >"$log" 2>&1 ||
    { tail -30 "$log"; exit 1; }
}
log=.peer/llama-build.log

if [ "${1:-}" = server ]; then
  src=.peer/llama.cpp
  out=${2:-$src/build-server}
  [ -f "$src/CMakeLists.txt" ] || { echo "peer-build: no llama.cpp source in $src (run tools/peer-build.sh first)" >&2; exit 1; }
  if [ -x "$out/bin/llama-server" ]; then
    echo "peer-build: up to date ($out/bin/llama-server)"
    exit 0
  fi
  log=.peer/llama-server-build.log
  start=$(date +%s)
  configure "$src" "$out" ON OFF
  cmake --build "$out" -j"${JOBS:-$(nproc)}" --target llama-server >>"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  echo "peer-build: built llama-server in $(($(date +%s) - start)) s ($out/bin/llama-server)"
  exit 0
fi

if [ "${1:-}" = avx2 ]; then
  # llama-bench capped at AVX2/FMA/F16C (no AVX-512 anywhere in libggml-cpu): the peer of
  # `STRATA_CPU_LEVEL=1` runs on an AVX-512 machine, the issue-13 AVX2 tables.
  src=.peer/llama.cpp
  out=${2:-$src/build-avx2}
  [ -f "$src/CMakeLists.txt" ] || { echo "peer-build: no llama.cpp source in $src (run tools/peer-build.sh first)" >&2; exit 1; }
  if [ -x "$out/bin/llama-bench" ]; then
    echo "peer-build: up to date ($out/bin/llama-bench)"
    exit 0
  fi
  log=.peer/llama-avx2-build.log
  start=$(date +%s)
  cmake -S "$src" -B "$out" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
    -DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF >"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  cmake --build "$out" -j"${JOBS:-$(nproc)}" --target llama-bench >>"$log" 2>&1 || { tail -30 "$log"; exit 1; }
  if objdump -d "$out"/bin/libggml-cpu*.so 2>/dev/null | grep -q zmm; then
    echo "peer-build: $out has AVX-512 instructions" >&2; exit 1
  fi
  echo "peer-build: built llama-bench (AVX2) in $(($(date +%s) - start)) s ($out/bin/llama-bench)"
  exit 0
fi

if [ "${1:-}" = speculative ]; then
  out=${2:-build/peer}
  src=.peer/llama.cpp
  [ -f "$src/build/bin/libllama-common.so" ] || { echo "peer-build: build the peer first (tools/peer-build.sh)" >&2; exit 1; }
  mkdir -p "$out"
  ${CXX:-g++} -O2 -std=c++17 "$src/examples/speculative-simple/speculative-simple.cpp" -I"$src/include" -I"$src/common" \
    -I"$src/ggml/include" -I"$src/vendor" -L"$src/build/bin" -Wl,-rpath,"$(realpath "$src/build/bin")" \
    -lllama-common -lllama -lggml -lggml-base -o "$out/llama-speculative-simple"
  echo "peer-build: $out/llama-speculative-simple"
  exit 0
fi

PEER=.peer
SRC=$PEER/llama.cpp
BUILD=$SRC/build
BUNDLE=$PEER/node_modules/node-llama-cpp/llama/gitRelease.bundle
TARGETS=(test-llama-archs llama-bench llama-completion llama-tokenize llama-quantize llama-imatrix)
JOBS=${JOBS:-$(nproc)}

have_all() {
  for t in "${TARGETS[@]}"; do [ -x "$1/bin/$t" ] || return 1; done
}

if [ -n "${STRATA_LLAMA_SRC:-}" ] && [ ! -e "$SRC" ]; then
  mkdir -p "$PEER"
  ln -s "$(realpath "$STRATA_LLAMA_SRC")" "$SRC"
fi
if [ -n "${STRATA_LLAMA_BUILD:-}" ] && have_all "$STRATA_LLAMA_BUILD"; then
  if [ ! -e "$BUILD" ]; then
    [ -d "$SRC" ] || { echo "peer-build: STRATA_LLAMA_BUILD needs the source too (STRATA_LLAMA_SRC or $SRC)" >&2; exit 1; }
    ln -s "$(realpath "$STRATA_LLAMA_BUILD")" "$BUILD"
  fi
fi
if have_all "$BUILD"; then
  echo "peer-build: up to date ($BUILD/bin)"
  exit 0
fi

if [ ! -d "$SRC/.git" ] && [ ! -f "$SRC/CMakeLists.txt" ]; then
  [ -f "$BUNDLE" ] || { echo "peer-build: $BUNDLE is missing; run tools/setup.sh first" >&2; exit 1; }
  echo "peer-build: cloning llama.cpp from $BUNDLE"
  git -c advice.detachedHead=false clone --quiet "$BUNDLE" "$SRC"
fi

start=$(date +%s)
configure "$SRC" "$BUILD" OFF ON
cmake --build "$BUILD" -j"$JOBS" --target "${TARGETS[@]}" >>"$log" 2>&1 ||
  { tail -30 "$log"; exit 1; }
end=$(date +%s)
have_all "$BUILD" || { echo "peer-build: the build finished without all of ${TARGETS[*]}" >&2; exit 1; }
echo "peer-build: built ${TARGETS[*]} in $((end - start)) s with $JOBS jobs ($BUILD/bin)"
