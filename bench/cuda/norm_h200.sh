#!/usr/bin/env bash
# norm_h200.sh: add_rms_norm_q8 with the row in registers and moe_route with the probabilities in
# registers (ops.cu), checked and timed on one H200 in one device call, against the build before
# them (.devbin/old/strata.xz, carried beside .devbin/prefill):
#   1. the op harness (both bit for bit: the norm against ADD + rms_norm + the product's own
#      quantization, the routing against its rule on the GPU's softmax); model_check on tiny files
#      of every architecture; the demo model with --floor; --verify bit for bit on the demo and a
#      tiny file; tiered by force with the CPU's share;
#   2. decode and prompt, new / old alternating, 3 rounds, on the 35B-A3B shape and the demo;
#   3. ncu's per-kernel GPU time of the new build's decode (as ncu_h200.sh).
#   QUICK=1: the harness, the demo's --floor and --verify, 2 rounds of speed, no ncu.
#   run: bash bench/cuda/norm_h200.sh      carry: .devbin/prefill .devbin/old
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
xz -dc .devbin/old/strata.xz > $W/bin/strata-old && chmod +x $W/bin/strata-old
dev_a3b &
[ -n "${QUICK:-}" ] || dev_tiny
stamp "1. correctness"
timeout 150 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "harness rc=$? $(tail -1 $OUT/harness.txt)"
grep -E "FAIL|exact" $OUT/harness.txt | head -20
[ -n "${QUICK:-}" ] || for a in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for t in q8_0 q4_k; do timeout 60 $MC $W/models/t_${a}_$t.gguf --prompt 100 --decode 16 2>&1 | tail -1; done
done 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/tiny.txt | grep -o "^[^ ]*\|| [A-Z]*$" | paste - - 
timeout 100 $MC $DEMO --prompt 100 --decode 16 --floor 2>&1 | tail -1 | tee $OUT/demo.txt
timeout 100 $MC $DEMO --verify --prompt 40 --decode 300 2>&1 | tail -1 | tee -a $OUT/demo.txt
[ -n "${QUICK:-}" ] || timeout 100 $MC $W/models/t_qwen35moe_q4_k.gguf --verify --prompt 40 --decode 300 2>&1 | tail -1 | tee -a $OUT/demo.txt
[ -n "${QUICK:-}" ] || STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 STRATA_CUDA_CPU_EXPERTS_MODE=poll timeout 100 $MC \
  $W/models/t_qwen35moe_q4_k.gguf --prompt 100 --decode 16 2>&1 | tail -1 | tee -a $OUT/demo.txt
wait
stamp "2. speed, new / old alternating"
for r in $(seq 1 ${ROUNDS:-3}); do
  for b in strata strata-old; do
    echo "== a3b $b round $r"
    timeout 150 $W/bin/$b bench -m $W/models/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
    echo "== demo $b round $r"
    timeout 100 $W/bin/$b bench -m $DEMO --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
  done
done 2>&1 | tee $OUT/speed.txt
[ -n "${QUICK:-}" ] && { stamp done; exit 0; }
stamp "3. ncu"
timeout 200 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --cache-control none --clock-control none \
  --graph-profiling node --launch-count 4000 --csv --print-summary per-kernel \
  $S bench -m $W/models/a3b.gguf --device cuda -p 0 -n 4 -r 1 >$OUT/ncu-sum.csv 2>$OUT/ncu-err.txt
echo "ncu rc=$?"
stamp done
