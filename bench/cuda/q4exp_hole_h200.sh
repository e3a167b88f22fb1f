#!/usr/bin/env bash
# q4exp_hole_h200.sh: the check after q4exp_tiers_h200.sh's call found the PLE table's hole in the
# device blob misaligning the tensors after it (a q5_0 table of 178,728 bytes): the hole now moves
# them down by whole 256-byte steps. Tiny qwen4exp q4_k and q8_0 GPU against CPU, --device auto
# on qwen4exp, the flash file resident (with --floor) and tiered by force.
#   run: bash bench/cuda/q4exp_hole_h200.sh      carry: .devbin/prefill
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
  for p in 100 400; do timeout 120 $MC $W/models/q4e_$t.gguf --prompt $p --decode 32 2>&1 | tail -1; done
done
timeout 60 $S run -m $W/models/q4e_q4_k.gguf --raw -p "hello there" -n 32 >$OUT/run-auto.txt 2>$OUT/run-auto.err
echo "run --device auto on qwen4exp q4_k: rc=$?"; tail -2 $OUT/run-auto.err
while kill -0 $synth_pid 2>/dev/null; do sleep 1; done   # (a pipeline's subshell cannot wait for it)
timeout 200 $MC $FL --prompt 100 --decode 16 --floor 2>&1 | tail -2 | sed 's/^/flash resident: /'
STRATA_CUDA_HOST_LAYERS=1 timeout 150 $MC $FL --prompt 100 --decode 16 --floor 2>&1 | tail -2 | sed 's/^/flash tiered (1 layer on the GPU): /'
for g in 5 4; do
  echo "== strata flash --gpu-mem $g"
  timeout 60 $S bench -m $FL --device cuda --gpu-mem $g -p 0 -n 64 -r 2 2>&1 | grep -E "^(tg|tiers)|rror" | sed 's/ (budget.*//'
done
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/checks.txt
stamp done
