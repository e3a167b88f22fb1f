#!/usr/bin/env bash
# q4exp_tiers_h200.sh: session 12's device call (issue 17): the legacy block types on the GPU,
# qwen4exp's device state and its PLE table kept on the host, and the qwen4exp `flash` file at
# consumer budgets against llama.cpp's CUDA build, beside the 35B-A3B shape's table again.
#   1. llama.cpp's CUDA build from the bundle's source (.devbin/llsrc/llama-src.tar.xz: a tar of
#      .peer/llama.cpp without its builds, tests, models, docs and the other GPU backends), in the
#      background at once; the a3b and flash files written meanwhile;
#   2. checks: the op harness (q4_0, q4_1, q5_0, q5_1 on every weight path), the table harness,
#      tiny qwen4exp q8_0 and q4_k (q5_0 mixers) GPU against CPU at prompt 100 and 400, state_check
#      on tiny qwen4exp and qwen35moe, the flash file resident (its PLE table on the host) and
#      tiered by force (STRATA_CUDA_HOST_LAYERS=1) against the CPU;
#   3. speed, once the build is done (nothing else running): llama.cpp, Strata, llama.cpp again
#      while time is left: the flash file resident
#      and at --gpu-mem 5 and 4 (llama.cpp: -ncmoe for the same count of host layers, read off
#      Strata's plan), the a3b file resident and at --gpu-mem 8 and 16 (-ncmoe 32, 13).
#   run: bash bench/cuda/q4exp_tiers_h200.sh      carry: .devbin/prefill .devbin/llsrc
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)"; free -g | head -2
setsid bash -c "mkdir -p $W/ll && tar -xJf .devbin/llsrc/llama-src.tar.xz -C $W/ll &&
  cmake -S $W/ll/llama.cpp -B $W/ll/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF -DLLAMA_BUILD_APP=OFF &&
  cmake --build $W/ll/build -j14 --target llama-bench" >$OUT/llama-build.log 2>&1 &
build_pid=$!
FL=$W/models/flash.gguf
( dev_a3b; $S synth $FL --arch qwen4exp --preset flash --type q4_k --random-blocks -t 8 >$OUT/synth-flash.txt 2>&1 ) &
files_pid=$!
for t in q8_0 q4_k; do
  $S synth $W/models/q4e_$t.gguf --arch qwen4exp --preset tiny --type $t --random-blocks --seed 42 -t 2 >/dev/null 2>&1 || echo "FAIL: synth qwen4exp $t"
done
$S synth $W/models/t_qwen35moe_q8_0.gguf --arch qwen35moe --preset tiny --type q8_0 --random-blocks --seed 42 -t 2 >/dev/null 2>&1
stamp "2. checks"
{
timeout 150 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "op harness rc=$? $(tail -1 $OUT/harness.txt)"
grep -E "q4_0|q4_1|q5_0|q5_1" $OUT/harness.txt | grep -c PASS | sed 's/^/legacy-type cases PASS: /'
grep FAIL $OUT/harness.txt | head -5
timeout 60 $W/bin/cuda_table_harness 2>&1 | tail -1 | sed 's/^/table harness: /'
for t in q8_0 q4_k; do
  for p in 100 400; do timeout 120 $MC $W/models/q4e_$t.gguf --prompt $p --decode 32 2>&1 | tail -1; done
done
for f in q4e_q8_0 t_qwen35moe_q8_0; do
  timeout 120 $W/bin/state_check $W/models/$f.gguf 2>&1 | grep -E "PASS|FAIL" | sed "s/^/$f: /"
done
timeout 60 $S run -m $W/models/q4e_q4_k.gguf --raw -p "hello there" -n 32 >$OUT/run-auto.txt 2>$OUT/run-auto.err
echo "run --device auto on qwen4exp: rc=$? $(grep -o 'strata: [^:]*' $OUT/run-auto.err | head -1)"
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/checks.txt
wait $files_pid
stamp "files: $(tail -1 $OUT/synth-flash.txt)"
{
timeout 150 $MC $FL --prompt 100 --decode 16 2>&1 | tail -1 | sed 's/^/flash resident: /'
STRATA_CUDA_HOST_LAYERS=1 timeout 150 $MC $FL --prompt 100 --decode 16 2>&1 | tail -1 | sed 's/^/flash tiered (1 layer on the GPU): /'
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee -a $OUT/checks.txt
LB=$W/ll/build/bin/llama-bench
declare -A NCM   # --gpu-mem G -> llama.cpp's -ncmoe, from Strata's plan (plan() below)
plan() {
  local g
  for g in 5 4; do
    timeout 60 $S bench -m $FL --device cuda --gpu-mem $g -p 0 -n 1 -r 1 >$W/b.txt 2>&1
    # "the experts of N of M MoE layers": llama.cpp keeps M - N layers' experts on the CPU
    NCM[$g]=$(grep -o "experts of [0-9]* of [0-9]*" $W/b.txt | head -1 | awk '{print $5 - $3}')
    echo "flash --gpu-mem $g: $(grep -E '^tiers' $W/b.txt | sed 's/ (budget.*//') -> -ncmoe ${NCM[$g]:-?}"
  done
}
ours() {
  echo "== strata flash resident"
  timeout 60 $S bench -m $FL --device cuda -p 512 -n 64 -r 2 2>&1 | grep -E "^pp|^tg|^device"
  for g in 5 4; do
    echo "== strata flash --gpu-mem $g"
    timeout 60 $S bench -m $FL --device cuda --gpu-mem $g -p 0 -n 64 -r 2 2>&1 | grep -E "^(tg|tiers|bus)" | sed 's/ (budget.*//'
  done
  echo "== strata a3b resident"; timeout 90 $S bench -m $W/models/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
  for g in 8 16; do
    echo "== strata a3b --gpu-mem $g"
    timeout 60 $S bench -m $W/models/a3b.gguf --device cuda --gpu-mem $g -p 0 -n 128 -r 3 2>&1 | grep -E "^(tg|tiers)" | sed 's/ (budget.*//'
  done
}
peer() {
  [ -x $LB ] || { echo "== llama.cpp not built"; return; }
  echo "== llama.cpp flash resident"; timeout 60 $LB -m $FL -ngl 99 -fa 1 -p 512 -n 64 -r 2 2>&1 | grep -E "^\||rror"
  for g in 5 4; do
    [ -n "${NCM[$g]:-}" ] || continue
    echo "== llama.cpp flash -ncmoe ${NCM[$g]} (as --gpu-mem $g)"
    timeout 60 $LB -m $FL -ngl 99 -fa 1 -ncmoe ${NCM[$g]} -p 0 -n 64 -r 2 2>&1 | grep -E "^\||rror"
  done
  echo "== llama.cpp a3b resident"; timeout 60 $LB -m $W/models/a3b.gguf -ngl 99 -fa 1 -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"
  for n in 32 13; do
    echo "== llama.cpp a3b -ncmoe $n"; timeout 60 $LB -m $W/models/a3b.gguf -ngl 99 -fa 1 -ncmoe $n -p 0 -n 128 -r 3 2>&1 | grep -E "^\|"
  done
}
plan 2>&1 | tee $OUT/speed.txt
stamp "waiting for the llama.cpp build (until 380 s)"
while kill -0 $build_pid 2>/dev/null && [ "$(el)" -lt 380 ]; do sleep 2; done
if kill -0 $build_pid 2>/dev/null; then echo "llama.cpp build not done: stopped"; kill -- -$build_pid 2>/dev/null; fi
tail -n 1 $OUT/llama-build.log
{ stamp "3. speed: llama.cpp"; peer; stamp "strata"; ours
  [ "$(el)" -lt 420 ] && { stamp "llama.cpp again"; peer; }
  stamp done; } 2>&1 | tee -a $OUT/speed.txt
