#!/usr/bin/env bash
# route_h200.sh: add_rms_norm_q8 split over several blocks a decode row, moe_route in registers,
# and the router's product fused with the routing (router_route), checked and timed on one H200 in
# one device call. One build is its own A/B through the environment:
#   old    STRATA_CUDA_NORM=reg STRATA_CUDA_ROUTE=smem   (the kernels before this change)
#   norm   STRATA_CUDA_ROUTE=smem                        (the split norm alone)
#   reg    STRATA_CUDA_ROUTE=reg                         (split norm + register routing, product apart)
#   new    (nothing set)                                 (all three)
#   1. the op harness in the new and the old settings (the split norm against ADD + rms_norm + the
#      product's quantization, tolerance 0; the register routing against its rule; router_route
#      against the product + routing it fuses); model_check on tiny files of every architecture;
#      the demo with --floor; --verify bit for bit on the demo and a tiny file; tiered by force;
#   2. decode and prompt, the four settings alternating, ROUNDS (2) rounds, 35B-A3B shape and demo;
#   3. ncu's per-kernel time of the new build's decode, the kernels changed (NCU=0: skip).
#   run: bash bench/cuda/route_h200.sh      carry: .devbin/prefill
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
dev_a3b &
dev_tiny
stamp "1. correctness"
timeout 120 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "harness rc=$? $(tail -1 $OUT/harness.txt)"
grep -E "FAIL|exact" $OUT/harness.txt | head -30
STRATA_CUDA_NORM=reg STRATA_CUDA_ROUTE=smem timeout 120 $W/bin/cuda_op_harness >$OUT/harness-old.txt 2>&1
echo "harness (old settings) rc=$? $(tail -1 $OUT/harness-old.txt)"; grep FAIL $OUT/harness-old.txt | head
for a in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for t in q8_0 q4_k; do timeout 60 $MC $W/models/t_${a}_$t.gguf --prompt 100 --decode 16 2>&1 | tail -1; done
done 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/tiny.txt | grep -o "^[^ ]*\|| [A-Z]*$" | paste - -
timeout 100 $MC $DEMO --prompt 100 --decode 16 --floor 2>&1 | tail -1 | tee $OUT/demo.txt
STRATA_CUDA_NORM=reg STRATA_CUDA_ROUTE=smem timeout 100 $MC $DEMO --prompt 100 --decode 16 --floor 2>&1 | tail -1 | tee -a $OUT/demo.txt
timeout 100 $MC $DEMO --verify --prompt 40 --decode 300 2>&1 | tail -1 | tee -a $OUT/demo.txt
timeout 100 $MC $W/models/t_qwen35moe_q4_k.gguf --verify --prompt 40 --decode 300 2>&1 | tail -1 | tee -a $OUT/demo.txt
STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 STRATA_CUDA_CPU_EXPERTS_MODE=poll timeout 100 $MC \
  $W/models/t_qwen35moe_q4_k.gguf --prompt 100 --decode 16 2>&1 | tail -1 | tee -a $OUT/demo.txt
wait
stamp "2. speed, the four settings alternating"
setting() {
  case $1 in
    old) echo "STRATA_CUDA_NORM=reg STRATA_CUDA_ROUTE=smem" ;;
    norm) echo "STRATA_CUDA_ROUTE=smem" ;;
    reg) echo "STRATA_CUDA_ROUTE=reg" ;;
    new) echo "" ;;
  esac
}
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in old norm reg new; do
    echo "== a3b $v round $r"
    env $(setting $v) timeout 150 $S bench -m $W/models/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
    echo "== demo $v round $r"
    env $(setting $v) timeout 100 $S bench -m $DEMO --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
  done
done 2>&1 | tee $OUT/speed.txt
[ "${NCU:-1}" = 0 ] && { stamp done; exit 0; }
stamp "3. ncu"
for v in old new; do
  env $(setting $v) timeout 120 /usr/local/cuda/bin/ncu --metrics gpu__time_duration.sum --cache-control none \
    --clock-control none --graph-profiling node --launch-count 4000 --csv --print-summary per-kernel \
    $S bench -m $W/models/a3b.gguf --device cuda -p 0 -n 4 -r 1 >$OUT/ncu-$v.csv 2>$OUT/ncu-$v-err.txt
  echo "ncu $v rc=$?"
done
stamp done
