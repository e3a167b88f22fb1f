#!/usr/bin/env bash
# q4exp_graphs_h200.sh: issue 17's device call for qwen4exp's decode as CUDA graphs (the PLE hash
# on the device from a window of ids, its rows read over the bus from a pinned mapped copy of the
# table (a first version registered the file mapping itself: the flash file hung there, see
# q4exp_flashdiag_h200.sh);
# QSA's block keys in one op that reads the step's position) and the tiered qwen4exp fix.
#   1. llama.cpp's CUDA build from the bundle's source in the background (.devbin/llsrc);
#   2. checks: the op harness (qsa_blocks bit for bit against the GPU's own pool, norm and rope
#      kernels; the PLE hash exact; rows from a registered host table), tiny qwen4exp q8_0 and q4_k
#      GPU against CPU with graphs (the default) and without, and tiered by force; state_check on
#      tiny qwen4exp; the flash file resident and tiered against its CPU floor;
#   3. speed: Strata, then (once the build is done) llama.cpp, then Strata again: flash resident
#      (Strata with and without graphs) and at --gpu-mem 5 (llama.cpp -ncmoe 4: Strata's plan
#      keeps 0 of 4 expert layers on the GPU there).
#   run: bash bench/cuda/q4exp_graphs_h200.sh      carry: .devbin/prefill .devbin/llsrc
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)"
setsid bash -c "mkdir -p $W/ll && tar -xJf .devbin/llsrc/llama-src.tar.xz -C $W/ll &&
  cmake -S $W/ll/llama.cpp -B $W/ll/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF -DLLAMA_BUILD_APP=OFF &&
  cmake --build $W/ll/build -j13 --target llama-bench" >$OUT/llama-build.log 2>&1 &
build_pid=$!
FL=$W/models/flash.gguf
$S synth $FL --arch qwen4exp --preset flash --type q4_k --random-blocks -t 4 >$OUT/synth-flash.txt 2>&1 &
files_pid=$!
for t in q8_0 q4_k; do
  $S synth $W/models/q4e_$t.gguf --arch qwen4exp --preset tiny --type $t --random-blocks --seed 42 -t 1 >/dev/null 2>&1 || echo "FAIL: synth qwen4exp $t"
done
stamp "2. checks"
{
timeout 150 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "op harness rc=$? $(tail -1 $OUT/harness.txt)"
grep -E "qsa_blocks|ple_hash|ple rows" $OUT/harness.txt
grep FAIL $OUT/harness.txt | head -5
timeout 120 $MC $W/models/q4e_q4_k.gguf --prompt 400 --decode 48 2>&1 | tail -1 | sed "s/^/graphs: /"
STRATA_CUDA_HOST_LAYERS=1 timeout 120 $MC $W/models/q4e_q8_0.gguf --prompt 100 --decode 48 2>&1 | tail -1 | sed "s/^/tiered, graphs: /"
timeout 120 $W/bin/state_check $W/models/q4e_q8_0.gguf 2>&1 | grep -E "PASS|FAIL" | sed "s/^/state_check q4e_q8_0: /"
timeout 60 $S run -m $W/models/q4e_q4_k.gguf --raw -p "hello there" -n 300 >$OUT/run-auto.txt 2>$OUT/run-auto.err
echo "run on qwen4exp q4_k (300 tokens, past a graph bucket): rc=$?"; grep -E "^strata" $OUT/run-auto.err | tail -2
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/checks.txt
while kill -0 $files_pid 2>/dev/null; do sleep 1; done
stamp "flash: $(tail -1 $OUT/synth-flash.txt)"
{
timeout 120 $MC $FL --prompt 100 --decode 16 --floor 2>&1 | tail -1 | sed 's/^/flash resident: /'
STRATA_CUDA_HOST_LAYERS=1 timeout 120 $MC $FL --prompt 100 --decode 16 --floor 2>&1 | tail -1 | sed 's/^/flash tiered (1 layer on the GPU): /'
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee -a $OUT/checks.txt
LB=$W/ll/build/bin/llama-bench
ours() {
  echo "== strata flash resident"
  timeout 60 $S bench -m $FL --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg|^decode|^tiers"
  echo "== strata flash resident, STRATA_CUDA_GRAPHS=0"
  STRATA_CUDA_GRAPHS=0 timeout 60 $S bench -m $FL --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "^tg"
  echo "== strata flash --gpu-mem 5"
  timeout 60 $S bench -m $FL --device cuda --gpu-mem 5 -p 512 -n 128 -r 3 2>&1 | grep -E "^(pp|tg|tiers|bus)" | sed 's/ (budget.*//'
}
peer() {
  [ -x $LB ] || { echo "== llama.cpp not built"; return; }
  echo "== llama.cpp flash resident"; timeout 60 $LB -m $FL -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\| q|rror"
  echo "== llama.cpp flash -ncmoe 4 (as --gpu-mem 5)"
  timeout 90 $LB -m $FL -ngl 99 -fa 1 -ncmoe 4 -p 512 -n 128 -r 3 2>&1 | grep -E "^\| q|rror"
}
{ stamp "3. speed: strata"; ours; } 2>&1 | tee $OUT/speed.txt
stamp "waiting for the llama.cpp build (until 400 s)"
while kill -0 $build_pid 2>/dev/null && [ "$(el)" -lt 400 ]; do sleep 2; done
if kill -0 $build_pid 2>/dev/null; then echo "llama.cpp build not done: stopped"; kill -- -$build_pid 2>/dev/null; fi
tail -n 1 $OUT/llama-build.log
{ stamp "llama.cpp"; peer
  [ "$(el)" -lt 470 ] && { stamp "strata again"; ours; }
  stamp done; } 2>&1 | tee -a $OUT/speed.txt
