#!/usr/bin/env bash
# tiers_v4_default.sh: the short check that v4 works as the default (issue 17), one device call of
# at most ~280 s: with no STRATA_CUDA_CPU_EXPERTS set, a tiered model takes the CPU share chosen at
# load (poll form, host_experts.c). Correctness on tiny models tiered by force, with the default
# environment (model_check, state_check); then the a3b shape at --gpu-mem 8 and 16, the default
# against v2 (STRATA_CUDA_CPU_EXPERTS=0) alternating. The peer's figures are run 2's, same machine
# kind, same call as Strata's v4 in run 2 (bench/cuda/NOTES.md).
# Inputs: $BIN/{strata,model_check,state_check,lib/} (bench/cuda/pack_v4.sh). Outputs under $OUT.
set -uo pipefail
BIN=${BIN:-$PWD/.devbin/v4}
OUT=${OUT:-/tmp/out}
BUDGET=${BUDGET:-280}
export LD_LIBRARY_PATH=$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
unset STRATA_CUDA_CPU_EXPERTS STRATA_CUDA_CPU_EXPERTS_MODE STRATA_CUDA_CPU_THREADS
W=/tmp/w; mkdir -p $W $OUT
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "[$(el) s] $*"; }
uptime
( $BIN/strata synth $W/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 8 >$W/synth.log 2>&1 ) &
synth_pid=$!
{
  for arch in qwen35moe qwen3next qwen3moe; do
    f=$W/t_${arch}_q4_k.gguf
    $BIN/strata synth $f --arch $arch --preset tiny --type q4_k --seed 42 >/dev/null 2>&1
    echo "-- $arch q4_k tiered (1 layer's experts on the GPU), default environment"
    STRATA_CUDA_HOST_LAYERS=1 timeout 60 $BIN/model_check $f --prompt 100 --decode 32 2>&1 | tail -n 1
  done
  echo "-- state_check, qwen35moe q4_k tiered, default environment"
  STRATA_CUDA_HOST_LAYERS=1 timeout 120 $BIN/state_check $W/t_qwen35moe_q4_k.gguf 2>&1 | tail -n 2
  echo "-- the load plan of a tiered tiny model, default environment"
  STRATA_CUDA_HOST_LAYERS=1 timeout 60 $BIN/strata eval -m $W/t_qwen35moe_q4_k.gguf --device cuda --tokens 1,2,3 --logits $W/x.bin 2>&1 | grep -E "CPU|error" | head -n 2
} 2>&1 | tee $OUT/checks.txt
wait $synth_pid; tail -n 1 $W/synth.log
stamp "checks done"
uptime
bench() { # label, gpu-mem, then env assignments
  local label=$1 g=$2; shift 2
  if [ "$(el)" -gt $(( BUDGET - 30 )) ]; then echo "== --gpu-mem $g, $label: skipped (time budget)"; return; fi
  echo "== --gpu-mem $g, $label"
  env "$@" timeout 60 $BIN/strata bench -m $W/a3b.gguf --device cuda --gpu-mem $g -p 0 -n 128 -r 3 2>&1 |
    grep -E "^(tg|tiers)" | sed 's/ (budget.*//'
}
{
  for g in 8 16; do
    for rep in 1 2; do
      bench "default (v4)" $g X=1
      bench "v2 (STRATA_CUDA_CPU_EXPERTS=0)" $g STRATA_CUDA_CPU_EXPERTS=0
    done
  done
} 2>&1 | tee $OUT/strata-bench.txt
uptime
stamp "done"
