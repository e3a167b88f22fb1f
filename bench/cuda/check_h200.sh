#!/usr/bin/env bash
# check_h200.sh: one device call that re-checks the tree after changes made off the GPU:
#   1. the CUDA op harness, model_check on tiny models of every architecture in f32, q8_0 and q4_k
#      (the GPU against the CPU path), state_check;
#   2. the device workspace through cudaMemGetInfo, and its negative control through
#      tests/negative_control.sh (carried as $BIN/negative_control.sh);
#   3. the 35B-A3B shape resident (pp512, tg128) and under --gpu-mem 8 with the device memory in use
#      sampled by nvidia-smi, to see the budget hold.
# Inputs (carried, ignored by git): $BIN/{strata,model_check,model_check_leak,state_check,
# cuda_op_harness} built with -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, $BIN/lib (the
# libraries the image lacks), $BIN/negative_control.sh. Outputs under $OUT.
set -uo pipefail
BIN=${BIN:-$PWD/.devbin}
OUT=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
W=/tmp/w; mkdir -p $W $OUT
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
grep -o -w -E "avx512f|avx512bw|avx512_vnni|avx512_bf16|amx_tile|amx_int8" /proc/cpuinfo | sort -u | tr '\n' ' '; echo

# the big model in the background while the small checks run
( $BIN/strata synth $W/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 4 >$W/synth.log 2>&1 ) &
synth_pid=$!

stamp "cuda op harness"
[ -x $BIN/cuda_op_harness ] && timeout 90 $BIN/cuda_op_harness 2>&1 | grep -E "FAIL|passed" | tee $OUT/harness.txt
stamp "model_check"
for arch in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for type in f32 q8_0 q4_k; do
    $BIN/strata synth $W/t_${arch}_$type.gguf --arch $arch --preset tiny --type $type --seed 42 >/dev/null 2>&1
    timeout 60 $BIN/model_check $W/t_${arch}_$type.gguf --prompt 100 --decode 32 2>&1 | tail -1
  done
done 2>&1 | tee $OUT/model_check.txt
timeout 120 $BIN/state_check $W/t_qwen35moe_q8_0.gguf 2>&1 | tail -3 | tee -a $OUT/model_check.txt

stamp "workspace through cudaMemGetInfo, and its negative control (must fail for its own reason)"
{
  timeout 60 $BIN/model_check $W/t_qwen35moe_q8_0.gguf --workspace 2>&1 | tail -2
  sh $BIN/negative_control.sh --status 1 --expect '^workspace: FAIL' --forbid '^model_check: |changed free memory' -- \
    timeout 60 $BIN/model_check_leak $W/t_qwen35moe_q8_0.gguf --workspace >$W/leak.log 2>&1; echo "negative control rc=$? (0: it failed for its own reason)"
  tail -2 $W/leak.log
} 2>&1 | tee -a $OUT/model_check.txt

stamp "a3b"
wait $synth_pid; tail -1 $W/synth.log
mem_watch() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $W/mem.$1 & echo $!; }
{
  timeout 150 $BIN/strata bench -m $W/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg|weights on"
  pid=$(mem_watch 8)
  timeout 150 $BIN/strata bench -m $W/a3b.gguf --device cuda --gpu-mem 8 -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg|^bus|weights on"
  kill $pid 2>/dev/null; wait $pid 2>/dev/null
  echo "peak device memory in use at --gpu-mem 8: $(sort -n $W/mem.8 | tail -1) MiB"
} 2>&1 | tee $OUT/a3b.txt
stamp "done"
