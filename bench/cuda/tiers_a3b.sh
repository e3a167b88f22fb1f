#!/usr/bin/env bash
# tiers_a3b.sh: issue 17's memory tiers on one H200, in one device call: the 35B-A3B-shaped
# qwen35moe (Q4_K, 18 GiB) under device budgets that mimic consumer cards (--gpu-mem 16 and 8),
# against the same file resident, and against llama.cpp's CUDA build at the same VRAM
# (-ngl 99 -ncmoe N, N = the layers whose experts Strata leaves in host memory).
#   1. llama.cpp's CUDA build from the npm bundle's source, in the background (NO_PEER=1: skip);
#   2. strata synth a3b (--random-blocks), and tiny models for a regression check of the device
#      forward (model_check, state_check);
#   3. logits: the tiered model against the resident one (the same kernels: identical logits are
#      expected), prompt chunks and token by token;
#   4. strata bench resident and under each budget, with the device memory in use sampled by
#      nvidia-smi meanwhile, the bus probe (kernels reading pinned host memory, copies), and the
#      host's read bandwidth (the CPU path's probe, 16 threads);
#   5. llama-bench at the same budgets.
# Inputs (carried, ignored by git): $BIN/{strata,model_check,state_check,conformance_compare}
# built here with -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, $BIN/lib (the libraries the image
# lacks), $BIN/llama-src.tar.xz. Outputs under $OUT.
set -uo pipefail
BIN=${BIN:-$PWD/.devbin}
OUT=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/w; mkdir -p $W $OUT
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)" ; grep -o -w -E "avx512f|avx512_vnni|avx512bw|amx_tile" /proc/cpuinfo | sort -u | tr '\n' ' '; echo
free -g | head -2

# 1. llama.cpp, in the background
build_pid=
if [ "${NO_PEER:-0}" != 1 ]; then
  ( mkdir -p $W/ll && tar -xJf $BIN/llama-src.tar.xz -C $W/ll &&
    cmake -S $W/ll -B $W/ll/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF &&
    nice cmake --build $W/ll/build -j14 --target llama-bench ) >$OUT/llama-build.log 2>&1 &
  build_pid=$!
fi

# 2. the models
stamp "synth"
$BIN/strata synth $W/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 2 2>&1 | tail -1
for arch in qwen35moe qwen3next qwen35 qwen3moe qwen3; do
  $BIN/strata synth $W/t_$arch.gguf --arch $arch --preset tiny --type q4_k --seed 42 >/dev/null 2>&1
  timeout 60 $BIN/model_check $W/t_$arch.gguf --prompt 100 --decode 32 2>&1 | tail -1
done | tee $OUT/checks.txt
timeout 120 $BIN/state_check $W/t_qwen35moe.gguf 2>&1 | tail -3 | tee -a $OUT/checks.txt
stamp "models done"

# 3. the tiered logits against the resident ones (STRATA_CUDA_EXPERT_F16=0: the resident run then
#    dequantizes its experts per prompt chunk as the tiered one must, so the kernels are the same)
$BIN/strata eval -m $W/a3b.gguf --device cuda --tokens 1 --logits $W/probe.bin >/dev/null 2>&1
V=$(( $(stat -c %s $W/probe.bin) / 4 ))
T=$($BIN/conformance_compare tokens 40 $V 7)
{
  for pf in 40 1; do
    STRATA_CUDA_EXPERT_F16=0 $BIN/strata eval -m $W/a3b.gguf --device cuda --tokens "$T" --prefill $pf --logits $W/res.bin >/dev/null 2>&1 || echo "resident eval failed"
    for g in 16 8; do
      $BIN/strata eval -m $W/a3b.gguf --device cuda --gpu-mem $g --tokens "$T" --prefill $pf --logits $W/tier.bin 2>&1 | grep -E "budget|strata:" | head -2
      cmp -s $W/res.bin $W/tier.bin && echo "gpu-mem $g, prefill $pf: logits identical to the resident run" ||
        $BIN/conformance_compare $W/res.bin $W/tier.bin $V --min-top1 1 --max-rel 1e-5 --label "gpu-mem $g prefill $pf: tiered vs resident"
    done
  done
} 2>&1 | tee $OUT/tier-logits.txt
stamp "logits done"

# 4. strata bench
mem_watch() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > $W/mem.$1 & echo $!; }
mem_peak() { sort -n $W/mem.$1 | tail -1; }
{
  for g in 0 16 8; do
    gm=""; [ $g != 0 ] && gm="--gpu-mem $g"
    echo "== --gpu-mem ${g} (0: resident, the default)"
    pid=$(mem_watch $g)
    timeout 150 $BIN/strata bench -m $W/a3b.gguf --device cuda $gm -p 512 -n 128 -r 3 2>&1 | grep -vE "^\s*$"
    timeout 120 $BIN/strata bench -m $W/a3b.gguf --device cuda $gm -p 4096 -n 0 -r 2 2>&1 | grep -E "^pp" | sed 's/$/ (chunks of 512)/'
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
    echo "peak device memory in use, default chunks: $(mem_peak $g) MiB"
    pid=$(mem_watch ${g}b)
    timeout 120 $BIN/strata bench -m $W/a3b.gguf --device cuda $gm -p 4096 -n 0 --prefill 4096 -r 2 2>&1 | grep -E "^pp" | sed 's/$/ (chunks of 4096)/'
    kill $pid 2>/dev/null; wait $pid 2>/dev/null
    echo "peak device memory in use, chunks of 4096: $(mem_peak ${g}b) MiB"
  done
  echo "== host read bandwidth (the CPU path's probe, 16 threads, tiny model)"
  timeout 60 $BIN/strata bench -m $W/t_qwen35moe.gguf --device cpu -t 16 -p 0 -n 16 -r 1 2>&1 | grep -E "bandwidth"
} 2>&1 | tee $OUT/strata-bench.txt
stamp "strata bench done"

# 5. llama.cpp at the same budgets
LB=$W/ll/build/bin
if [ -n "$build_pid" ]; then
  stamp "waiting for the llama.cpp build"
  wait $build_pid; echo "llama.cpp build rc=$?"; tail -2 $OUT/llama-build.log
fi
if [ -x $LB/llama-bench ]; then
  {
    # N = MoE layers minus those Strata keeps on the GPU, from the plan lines
    grep -oE "experts of [0-9]+ of [0-9]+ MoE layers" $OUT/strata-bench.txt | sort -u | while read -r _ _ dev _ all _; do
      n=$(( all - dev ))
      echo "== llama.cpp -ncmoe $n (Strata keeps $dev of $all layers' experts on the GPU)"
      pid=$(mem_watch ll$n)
      timeout 200 $LB/llama-bench -m $W/a3b.gguf -ngl 99 -fa 1 -ncmoe $n -p 512,4096 -n 128 -r 3 2>&1 | grep -E "^\|"
      kill $pid 2>/dev/null; wait $pid 2>/dev/null
      echo "peak device memory in use: $(mem_peak ll$n) MiB"
    done
  } 2>&1 | tee $OUT/llama-bench.txt
fi
stamp "done"
