#!/usr/bin/env bash
# tiers_v3.sh: memory tiers v3 on one H200, in one device call (issue 17): in a decode step the
# host CPU computes a share of each host layer's selected experts beside the GPU
# (model/cuda/host_experts.c; opt-in, STRATA_CUDA_CPU_EXPERTS=N|auto, since it measured slower:
# bench/cuda/NOTES.md, v3; runs/2026-12-02-h200-tiers-v3a/b ran it when auto was the default and
# the host memory of v2 was asked for with STRATA_CUDA_HOST_WC=1).
#   1. llama.cpp's CUDA build from the npm bundle's source, in the background;
#   2. correctness on tiny models (the GPU against the CPU path, model_check): tiered by force
#      (STRATA_CUDA_HOST_LAYERS=1) with the CPU's share forced on (STRATA_CUDA_CPU_EXPERTS=2), for
#      qwen35moe and qwen3next (shared experts) and qwen3moe (none), q4_k and f32; and resident, as
#      the regression check;
#   3. the a3b logits: tiered without the CPU's share against resident (identical expected), and
#      with it (the CPU's activation grid: within the quantized limits, not bitwise);
#   4. strata bench at --gpu-mem 16 and 8: v3 (the CPU's share as chosen at load) and v2 (no
#      share, write-combined host memory) alternating, and other shares at 8;
#   5. llama-bench at the same VRAM (-ncmoe N).
# Inputs (carried): $BIN/{strata,model_check,state_check,conformance_compare,lib/}, built here with
# -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, and $BIN/llama-src.tar.xz. Outputs under $OUT.
set -uo pipefail
BIN=${BIN:-$PWD/.devbin}
OUT=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/w; mkdir -p $W $OUT
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)"; nproc; free -g | head -2

build_pid=
if [ "${NO_PEER:-0}" != 1 ]; then
  ( mkdir -p $W/ll && tar -xJf $BIN/llama-src.tar.xz -C $W/ll &&
    cmake -S $W/ll -B $W/ll/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF &&
    nice cmake --build $W/ll/build -j12 --target llama-bench ) >$OUT/llama-build.log 2>&1 &
  build_pid=$!
fi

stamp "synth"
( $BIN/strata synth $W/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 4 >$W/synth.log 2>&1 ) &
synth_pid=$!
{
  for arch in qwen35moe qwen3next qwen3moe; do
    for type in q4_k $([ $arch = qwen35moe ] && echo f32); do
      $BIN/strata synth $W/t_${arch}_$type.gguf --arch $arch --preset tiny --type $type --seed 42 >/dev/null 2>&1
      echo "-- $arch $type resident"
      timeout 60 $BIN/model_check $W/t_${arch}_$type.gguf --prompt 100 --decode 32 2>&1 | tail -1
      echo "-- $arch $type tiered (1 layer's experts on the GPU), the CPU computing 2 of each token's experts"
      STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 timeout 60 $BIN/model_check $W/t_${arch}_$type.gguf --prompt 100 --decode 32 2>&1 | tail -1
      echo "-- $arch $type tiered, no CPU share"
      STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=0 timeout 60 $BIN/model_check $W/t_${arch}_$type.gguf --prompt 100 --decode 32 2>&1 | tail -1
    done
  done
  STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 timeout 120 $BIN/state_check $W/t_qwen35moe_q4_k.gguf 2>&1 | tail -3
} 2>&1 | tee $OUT/checks.txt
wait $synth_pid; tail -1 $W/synth.log
stamp "checks done"

{
  $BIN/strata eval -m $W/a3b.gguf --device cuda --tokens 1 --logits $W/probe.bin >/dev/null 2>&1
  V=$(( $(stat -c %s $W/probe.bin) / 4 ))
  T=$($BIN/conformance_compare tokens 40 $V 7)
  STRATA_CUDA_EXPERT_F16=0 $BIN/strata eval -m $W/a3b.gguf --device cuda --tokens "$T" --prefill 1 --logits $W/res.bin >/dev/null 2>&1 || echo "resident eval failed"
  for g in 8; do
    STRATA_CUDA_CPU_EXPERTS=0 $BIN/strata eval -m $W/a3b.gguf --device cuda --gpu-mem $g --tokens "$T" --prefill 1 --logits $W/tier.bin 2>&1 | grep -E "strata:" | head -2
    cmp -s $W/res.bin $W/tier.bin && echo "gpu-mem $g, token by token, no CPU share: logits identical to the resident run" ||
      $BIN/conformance_compare $W/res.bin $W/tier.bin $V --min-top1 1 --max-rel 1e-5 --label "gpu-mem $g no CPU share vs resident"
    STRATA_CUDA_CPU_EXPERTS=auto $BIN/strata eval -m $W/a3b.gguf --device cuda --gpu-mem $g --tokens "$T" --prefill 1 --logits $W/tier3.bin 2>&1 | grep -E "budget|strata:|CPU" | head -3
    $BIN/conformance_compare $W/res.bin $W/tier3.bin $V --min-top1 0 --max-rel 1 --label "gpu-mem $g with the CPU share vs resident (random-block weights amplify rounding)"
  done
} 2>&1 | tee $OUT/tier-logits.txt
stamp "logits done"

{
  for g in 16 8; do
    for v in 3 2 3; do
      echo "== --gpu-mem $g, v$v"
      if [ $v = 3 ]; then
        STRATA_CUDA_CPU_EXPERTS=auto timeout 100 $BIN/strata bench -m $W/a3b.gguf --device cuda --gpu-mem $g -p 512 -n 128 -r 3 2>&1 | grep -E "^(pp|tg|decode|tiers|bus)"
      else # no CPU share, write-combined host memory, as v2 had it
        STRATA_CUDA_CPU_EXPERTS=0 timeout 100 $BIN/strata bench -m $W/a3b.gguf --device cuda --gpu-mem $g -p 0 -n 128 -r 3 2>&1 | grep -E "^(tg|tiers)"
      fi
    done
  done
  for kc in 1 2 4; do
    echo "== --gpu-mem 8, the CPU computing $kc of 8"
    STRATA_CUDA_CPU_EXPERTS=$kc timeout 60 $BIN/strata bench -m $W/a3b.gguf --device cuda --gpu-mem 8 -p 0 -n 64 -r 1 2>&1 | grep -E "^tg"
  done
  echo "== host read bandwidth (the CPU path's probe, $(nproc) threads, tiny model)"
  timeout 60 $BIN/strata bench -m $W/t_qwen35moe_q4_k.gguf --device cpu -t $(nproc) -p 0 -n 16 -r 1 2>&1 | grep -E "bandwidth"
} 2>&1 | tee $OUT/strata-bench.txt
stamp "strata bench done"

LB=$W/ll/build/bin
if [ -n "$build_pid" ]; then
  stamp "waiting for the llama.cpp build"
  wait $build_pid; echo "llama.cpp build rc=$?"; tail -2 $OUT/llama-build.log
fi
if [ -x $LB/llama-bench ]; then
  {
    grep -oE "experts of [0-9]+ of [0-9]+ MoE layers" $OUT/strata-bench.txt | sort -u | while read -r _ _ dev _ all _; do
      n=$(( all - dev ))
      echo "== llama.cpp -ncmoe $n (Strata keeps $dev of $all layers' experts on the GPU)"
      timeout 200 $LB/llama-bench -m $W/a3b.gguf -ngl 99 -fa 1 -ncmoe $n -p 512 -n 128 -r 3 2>&1 | grep -E "^\|"
    done
  } 2>&1 | tee $OUT/llama-bench.txt
fi
stamp "done"
