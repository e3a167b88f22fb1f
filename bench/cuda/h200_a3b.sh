#!/usr/bin/env bash
# h200_a3b.sh: issue 5's side-by-side run on one H200, in one device call (bench/cuda/README.md):
#   1. builds llama.cpp's CUDA backend (the npm bundle's source, sm_90, flash attention) in the
#      background, while
#   2. `strata synth` writes the 35B-A3B-shaped qwen35moe in Q4_K (--random-blocks: the blocks are
#      drawn directly; quantizing 34 B normal deviates would take ~6 minutes of device time),
#   3. Strata: logits against its CPU path (tiny models of every architecture and the a3b), then
#      `strata bench` pp512/tg128 and pp4096, and a per-block profile (STRATA_CUDA_PROFILE=1),
#   4. llama.cpp: llama-bench -ngl 99 -fa 1 on the same file (pp512, pp4096, tg128), and its CUDA
#      logits against Strata's CUDA logits on the tiny models (conformance_compare).
# Inputs (carried, ignored by git): $BIN/{strata,model_check,model_check_leak,conformance_compare,
# cuda_op_harness} (built here with -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90), $BIN/lib (the
# libraries the image lacks), $BIN/llama-src.tar.xz. Outputs under $OUT.
set -uo pipefail
BIN=${BIN:-$PWD/.devbin}
OUT=${OUT:-/tmp/out}
SRC=$PWD
export LD_LIBRARY_PATH=$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/w; mkdir -p $W $OUT
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv,noheader

# 1. llama.cpp, in the background (NO_PEER=1: Strata alone, for a call too short for the build)
[ "${NO_PEER:-0}" = 1 ] || ( mkdir -p $W/ll && tar -xJf $BIN/llama-src.tar.xz -C $W/ll &&
  cmake -S $W/ll -B $W/ll/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF &&
  cmake --build $W/ll/build -j16 --target llama-bench llama ) >$OUT/llama-build.log 2>&1 &
build_pid=$!
[ "${NO_PEER:-0}" = 1 ] && build_pid=

# 2. the model
stamp "synth a3b"
$BIN/strata synth $W/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 6 2>&1 | tail -1
[ -x $BIN/cuda_op_harness ] && timeout 60 $BIN/cuda_op_harness 2>&1 | grep -E "FAIL|passed" | tee $OUT/harness.txt
stamp "synth done"

# 3. Strata
for arch in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for type in f32 q8_0 q4_k; do
    $BIN/strata synth $W/t_${arch}_$type.gguf --arch $arch --preset tiny --type $type --seed 42 >/dev/null 2>&1
    timeout 60 $BIN/model_check $W/t_${arch}_$type.gguf --prompt 100 --decode 32 2>&1 | tail -1
  done
done | tee $OUT/model_check.txt
timeout 60 $BIN/model_check $W/t_qwen35moe_q8_0.gguf --workspace 2>&1 | tail -2 | tee -a $OUT/model_check.txt
echo "negative control (the workspace built to leak; must FAIL):" | tee -a $OUT/model_check.txt
timeout 60 $BIN/model_check_leak $W/t_qwen35moe_q8_0.gguf --workspace 2>&1 | tail -2 | tee -a $OUT/model_check.txt
if [ -x $BIN/state_check ]; then
  echo "session state on the device (cut-back, checkpoints, save/load across devices):" | tee -a $OUT/model_check.txt
  timeout 120 $BIN/state_check $W/t_qwen35moe_q8_0.gguf 2>&1 | tail -12 | tee -a $OUT/model_check.txt
fi
STRATA_CUDA_FUSED=0 timeout 60 $BIN/model_check $W/t_qwen35moe_q4_k.gguf --prompt 100 --decode 32 2>&1 | tail -1 | sed 's/^/unfused: /' | tee -a $OUT/model_check.txt
stamp "strata bench"
echo "== default: fused norms and products, f16 expert copies when they fit" | tee $OUT/strata-bench.txt
timeout 150 $BIN/strata bench -m $W/a3b.gguf --device cuda -p 512 -n 128 -r 5 2>&1 | tee -a $OUT/strata-bench.txt
timeout 120 $BIN/strata bench -m $W/a3b.gguf --device cuda -p 4096 -n 0 --prefill 4096 -r 3 2>&1 | grep -E "^pp|^scratch" | tee -a $OUT/strata-bench.txt
if [ "${NO_PEER:-0}" != 1 ]; then
  echo "== STRATA_CUDA_FUSED=0 STRATA_CUDA_EXPERT_F16=0 (the previous version)" | tee -a $OUT/strata-bench.txt
  STRATA_CUDA_FUSED=0 STRATA_CUDA_EXPERT_F16=0 timeout 150 $BIN/strata bench -m $W/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg" | tee -a $OUT/strata-bench.txt
  echo "== STRATA_CUDA_EXPERT_F16=0 (no f16 expert copies)" | tee -a $OUT/strata-bench.txt
  STRATA_CUDA_EXPERT_F16=0 timeout 120 $BIN/strata bench -m $W/a3b.gguf --device cuda -p 4096 -n 0 --prefill 4096 -r 3 2>&1 | grep -E "^pp" | tee -a $OUT/strata-bench.txt
  STRATA_CUDA_PROFILE=1 timeout 120 $BIN/strata bench -m $W/a3b.gguf --device cuda -p 0 -n 16 -r 1 2>&1 | grep -E "profile|  |^tg" | tee $OUT/strata-profile.txt
fi
STRATA_CUDA_PROFILE=1 timeout 120 $BIN/strata bench -m $W/a3b.gguf --device cuda -p 4096 -n 0 --prefill 4096 -r 1 2>&1 | grep -E "profile|  |^pp" | tee -a $OUT/strata-profile.txt
stamp "a3b against the CPU path"
[ "${NO_PEER:-0}" = 1 ] || timeout 150 $BIN/model_check $W/a3b.gguf --prompt 8 --decode 2 --top1 0 --kl 100 2>&1 | tail -1 | tee -a $OUT/model_check.txt

# 4. llama.cpp
LB=$W/ll/build/bin
if [ -n "$build_pid" ]; then
  stamp "waiting for the llama.cpp build"
  wait $build_pid; echo "llama.cpp build rc=$?"; tail -3 $OUT/llama-build.log
fi
if [ -x $LB/llama-bench ]; then
  stamp "llama-bench"
  timeout 200 $LB/llama-bench -m $W/a3b.gguf -ngl 99 -fa 1 -p 512,4096 -n 128 -r 5 2>&1 | tee $OUT/llama-bench.txt
  gcc -O2 -I$W/ll/include -I$W/ll/ggml/include $SRC/tests/conformance/logits_peer.c -o $W/logits_peer -ldl
  lib=$(ls $LB/libllama.so* $W/ll/build/src/libllama.so* 2>/dev/null | head -1)
  for arch in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
    for type in f32 q4_k; do
      m=$W/t_${arch}_$type.gguf
      $W/logits_peer --lib $lib -m $m --tokens 0 --logits $W/probe.bin -t 4 --ngl 99 2>/dev/null
      V=$(( $(stat -c %s $W/probe.bin) / 4 ))
      T=$($BIN/conformance_compare tokens 100 $V 7)
      $W/logits_peer --lib $lib -m $m --tokens "$T" --logits $W/peer.bin -t 4 --ngl 99 2>$W/peer.log || tail -3 $W/peer.log
      $BIN/strata eval -m $m --device cuda --tokens "$T" --kv-f32 --logits $W/ours.bin >/dev/null 2>&1 || echo "strata eval failed"
      if [ $type = f32 ]; then lim="--min-top1 1 --max-rel 1e-3"; else lim="--min-top1 0.99 --max-kl 1e-3"; fi
      $BIN/conformance_compare $W/peer.bin $W/ours.bin $V $lim --label "$arch $type cuda: llama.cpp vs strata"
    done
  done 2>&1 | tee $OUT/peer-conformance.txt
fi
stamp "done"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader
