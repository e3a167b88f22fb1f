#!/usr/bin/env bash
# outs_h200.sh: the fused block outputs of decode (forward_cuda.c out_q8 and the one-pass routed +
# shared combine) checked and timed on one H200 in one device call. The same binaries run with
# STRATA_CUDA_FUSED unset (all fusions) and =1 (without the fused outputs), so the A/B is one build:
#   1. the op harness (the new ops bit for bit against the sequences they replace); model_check on
#      tiny files of every architecture (q8_0, q4_k); the demo model with --floor; --verify (verify
#      chunks bit for bit the decode steps') on the demo and a tiny file; the old path's model_check
#      on the demo for the same figures; tiered by force with the CPU's share on a tiny file;
#   2. decode and prompt, new / old alternating, 3 rounds: `strata bench --device cuda -p 512
#      -n 128` on the 35B-A3B shape (resident) and on the demo model.
#   run: bash bench/cuda/outs_h200.sh      carry: .devbin/prefill (bench/cuda/pack_prefill.sh)
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
dev_a3b &
dev_tiny
stamp "1. correctness (all fusions)"
timeout 150 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "harness rc=$? $(tail -1 $OUT/harness.txt)"
grep -E "FAIL|_q8 |combine_shared" $OUT/harness.txt | head -20
for a in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for t in q8_0 q4_k; do timeout 60 $MC $W/models/t_${a}_$t.gguf --prompt 100 --decode 16 2>&1 | tail -1; done
done 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/tiny.txt | cut -c1-60,400-
timeout 100 $MC $DEMO --prompt 100 --decode 16 --floor 2>&1 | tail -1 | tee $OUT/demo.txt
STRATA_CUDA_FUSED=1 timeout 100 $MC $DEMO --prompt 100 --decode 16 2>&1 | tail -1 | tee -a $OUT/demo.txt
timeout 100 $MC $DEMO --verify --prompt 40 --decode 300 2>&1 | tail -1 | tee -a $OUT/demo.txt
timeout 100 $MC $W/models/t_qwen35moe_q4_k.gguf --verify --prompt 40 --decode 300 2>&1 | tail -1 | tee -a $OUT/demo.txt
STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 STRATA_CUDA_CPU_EXPERTS_MODE=poll timeout 100 $MC \
  $W/models/t_qwen35moe_q4_k.gguf --prompt 100 --decode 16 2>&1 | tail -1 | tee -a $OUT/demo.txt
wait
stamp "2. speed, fused outputs on / off alternating"
for r in 1 2 3; do
  for fu in 2 1; do
    echo "== a3b fused=$fu round $r"
    STRATA_CUDA_FUSED=$fu timeout 150 $S bench -m $W/models/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
    echo "== demo fused=$fu round $r"
    STRATA_CUDA_FUSED=$fu timeout 100 $S bench -m $DEMO --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
  done
done 2>&1 | tee $OUT/speed.txt
stamp done
