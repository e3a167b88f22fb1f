#!/usr/bin/env bash
# q4exp_tierfix_h200.sh: the check of the tiered qwen4exp fix (device_tiers.c placed only tensors
# with data, so the widened PLE conv, an f32 view alone, kept its host pointer and the GDN layer's
# conv read host memory: the illegal address of bench/cuda/runs/2026-12-04-h200-q4exp-hole). Tiny
# qwen4exp q4_k and q8_0 tiered by force against the CPU, the flash file tiered (with --floor, with
# and without the CPU's share), and flash's decode and prompt at --gpu-mem 5 and 4.
#   run: bash bench/cuda/q4exp_tierfix_h200.sh      carry: .devbin/prefill
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
FL=$W/models/flash.gguf
$S synth $FL --arch qwen4exp --preset flash --type q4_k --random-blocks -t 12 >$OUT/synth-flash.txt 2>&1 &
synth_pid=$!
for t in q8_0 q4_k; do
  $S synth $W/models/q4e_$t.gguf --arch qwen4exp --preset tiny --type $t --random-blocks --seed 42 -t 2 >/dev/null 2>&1
done
{
for t in q4_k q8_0; do
  for hl in 0 1; do
    for p in 100 400; do
      STRATA_CUDA_HOST_LAYERS=$hl timeout 120 $MC $W/models/q4e_$t.gguf --prompt $p --decode 32 2>&1 | tail -1 | sed "s/^/host layers $hl: /"
    done
  done
done
STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 timeout 120 $MC $W/models/q4e_q4_k.gguf --prompt 100 --decode 32 2>&1 | tail -1 | sed "s/^/host layers 1, cpu share 2: /"
while kill -0 $synth_pid 2>/dev/null; do sleep 1; done   # (a pipeline's subshell cannot wait for it)
stamp synth
STRATA_CUDA_HOST_LAYERS=1 timeout 200 $MC $FL --prompt 100 --decode 16 --floor 2>&1 | tail -2 | sed 's/^/flash tiered (1 layer on the GPU): /'
STRATA_CUDA_HOST_LAYERS=0 STRATA_CUDA_CPU_EXPERTS=0 timeout 200 $MC $FL --prompt 100 --decode 16 2>&1 | tail -1 | sed 's/^/flash tiered (none, no CPU share): /'
for g in 0 5 4; do
  echo "== strata flash --gpu-mem $g"
  if [ $g = 0 ]; then gm=""; else gm="--gpu-mem $g"; fi
  timeout 120 $S bench -m $FL --device cuda $gm -p 512 -n 64 -r 3 2>&1 | grep -vE "^\s*$" | tail -6 | sed 's/ (budget.*//'
done
stamp done
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/checks.txt
