#!/usr/bin/env bash
# vs_llama_h200.sh: Strata against llama.cpp's CUDA build on the 35B-A3B shape (Q4_K, random blocks),
# one H200, one device call (issue 17 item 5): resident (pp512, tg128) and at the consumer budgets
# (--gpu-mem 8 and 16 against -ncmoe 32 and 13: both keep 8 and 27 of the 40 layers' experts on the
# GPU), with Strata's defaults (the CPU's share of the host experts chosen at load).
#   1. llama.cpp's CUDA build from the bundle's source (.devbin/prefill/llama-src.tar.xz, made by
#      tar of .peer/llama.cpp without its builds, tests, models and the other GPU backends), in the
#      background at once; meanwhile the op harness and the a3b file;
#   2. when it is built (or PEER_BY s): llama-bench, then strata bench, then llama-bench again.
#   R2=0: one round only.
#   run: bash bench/cuda/vs_llama_h200.sh      carry: .devbin/prefill
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
PEER_BY=${PEER_BY:-400}
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)"; free -g | head -2
setsid bash -c "mkdir -p $W/ll && tar -xJf .devbin/prefill/llama-src.tar.xz -C $W/ll &&
  cmake -S $W/ll -B $W/ll/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF -DLLAMA_BUILD_APP=OFF &&
  cmake --build $W/ll/build -j16 --target llama-bench" >$OUT/llama-build.log 2>&1 &
build_pid=$!
dev_a3b
timeout 120 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "harness rc=$? $(tail -1 $OUT/harness.txt)"
stamp "waiting for the llama.cpp build (until $PEER_BY s)"
while kill -0 $build_pid 2>/dev/null && [ "$(el)" -lt "$PEER_BY" ]; do sleep 2; done
if kill -0 $build_pid 2>/dev/null; then echo "llama.cpp build not done: stopped"; kill -- -$build_pid 2>/dev/null; fi
tail -n 2 $OUT/llama-build.log
LB=$W/ll/build/bin/llama-bench
peer() {
  [ -x $LB ] || return
  echo "== llama.cpp resident"; timeout 60 $LB -m $W/models/a3b.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"
  for n in 32 13; do
    echo "== llama.cpp -ncmoe $n"; timeout 60 $LB -m $W/models/a3b.gguf -ngl 99 -fa 1 -ncmoe $n -p 0 -n 128 -r 3 2>&1 | grep -E "^\|"
  done
}
ours() {
  echo "== strata resident"; timeout 90 $S bench -m $W/models/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
  for g in 8 16; do
    echo "== strata --gpu-mem $g"
    timeout 60 $S bench -m $W/models/a3b.gguf --device cuda --gpu-mem $g -p 0 -n 128 -r 3 2>&1 | grep -E "^(tg|tiers)" | sed 's/ (budget.*//'
  done
}
{ stamp "round 1"; peer; ours; [ "${R2:-1}" = 1 ] || { stamp done; exit 0; }; stamp "round 2"; [ "$(el)" -lt 470 ] && peer; [ "$(el)" -lt 500 ] && ours; } 2>&1 | tee $OUT/vs.txt
stamp done
