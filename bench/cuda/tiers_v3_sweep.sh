#!/usr/bin/env bash
# tiers_v3_sweep.sh: decode at --gpu-mem 16 and 8 on the a3b shape for each CPU share (STRATA_CUDA_CPU_EXPERTS)
# and pool size (STRATA_CUDA_CPU_THREADS), v2 (no share, write-combined) between, one device call.
# Inputs: $BIN/{strata,lib/}. Outputs under $OUT.
set -uo pipefail
BIN=${BIN:-$PWD/.devbin}; OUT=${OUT:-/tmp/out}
export LD_LIBRARY_PATH=$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
W=/tmp/w; mkdir -p $W $OUT
$BIN/strata synth $W/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 8 2>&1 | tail -1
tg() { timeout 60 $BIN/strata bench -m $W/a3b.gguf --device cuda -p 0 -n 64 -r 2 "$@" 2>&1 | grep -E "^(tg|tiers)" | sed 's/ (budget.*//'; }
for g in 8 16; do
  echo "== --gpu-mem $g, v2"; STRATA_CUDA_CPU_EXPERTS=0 tg --gpu-mem $g
  echo "== --gpu-mem $g, v3 auto"; STRATA_CUDA_CPU_EXPERTS=auto tg --gpu-mem $g
  for th in 4 8; do
    for kc in 1 3; do
      echo "== --gpu-mem $g, $th threads, the CPU computing $kc of 8"; STRATA_CUDA_CPU_THREADS=$th STRATA_CUDA_CPU_EXPERTS=$kc tg --gpu-mem $g | grep "^tg"
    done
  done
done
uptime
