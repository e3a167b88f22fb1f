#!/usr/bin/env bash
# oneforward_h200.sh: the forward written once against the op table (backend.h), on one H200 in one
# device call, against the build before it (7800169, two forwards) as its A/B:
#   1. correctness: cuda_op_harness (the qwen4exp ops included) and cuda_table_harness (the table
#      on both backends); model_check on tiny files of every architecture (q8_0, q4_k), the demo with
#      --floor, the unfused and outs-unfused switches, across the 256-cell graph bucket, --verify
#      bit for bit, tiered by force; the greedy text of `strata run` (demo: plain, --spec mtp,
#      --spec ngram; a3b) old against new, which must be equal;
#   2. speed: the 35B-A3B shape (pp512, tg128, --gpu-mem 8 tg64) and the demo (tg128), old and new
#      alternating, ROUNDS (2) rounds.
#   pack: nice -n 19 bash bench/cuda/pack_prefill.sh; BUILD=/path/to/old/build-cuda pack_bins .devbin/old strata model_check
#   run: bash bench/cuda/oneforward_h200.sh      carry: .devbin/prefill .devbin/old
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
O=$W/old; mkdir -p $O; tar -xJf .devbin/old/bins.tar.xz -C $O || { echo "FAIL: no .devbin/old/bins.tar.xz"; exit 1; }
SO=$O/strata; MCO=$O/model_check
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
dev_a3b &
dev_tiny
stamp "1. correctness"
timeout 150 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "op harness rc=$? $(tail -1 $OUT/harness.txt)"
grep -E "FAIL" $OUT/harness.txt | head -20
timeout 60 $W/bin/cuda_table_harness >$OUT/table.txt 2>&1; echo "table harness rc=$? $(tail -1 $OUT/table.txt)"
grep FAIL $OUT/table.txt | head -20
for a in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for t in q8_0 q4_k; do timeout 60 $MC $W/models/t_${a}_$t.gguf --prompt 100 --decode 16 2>&1 | tail -1; done
done 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/tiny.txt | grep -o "^[^ ]*\|| [A-Z]*$" | paste - -
for a in qwen35moe qwen3next; do   # the same rows on the old build: the figures must match
  timeout 60 $MCO $W/models/t_${a}_q4_k.gguf --prompt 100 --decode 16 2>&1 | tail -1 | sed 's/^/old /'
  grep "t_${a}_q4_k" $OUT/tiny.txt | sed 's/^/new /'
done 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/tiny-old.txt
{
timeout 100 $MC $DEMO --prompt 100 --decode 16 --floor 2>&1 | tail -1 | sed 's/^/new /'
timeout 100 $MCO $DEMO --prompt 100 --decode 16 --floor 2>&1 | tail -1 | sed 's/^/old /'
STRATA_CUDA_FUSED=0 timeout 100 $MC $DEMO --prompt 100 --decode 16 --floor 2>&1 | tail -1 | sed 's/^/new FUSED=0 /'
STRATA_CUDA_FUSED=1 timeout 100 $MC $DEMO --prompt 100 --decode 16 --floor 2>&1 | tail -1 | sed 's/^/new FUSED=1 /'
for g in 1 0; do
  STRATA_CUDA_GRAPHS=$g timeout 60 $MC $W/models/t_qwen35moe_q4_k.gguf --prompt 250 --decode 16 2>&1 | tail -1 | sed "s/^/bucket graphs=$g /"
  STRATA_CUDA_GRAPHS=$g timeout 60 $MC $W/models/t_qwen3_q4_k.gguf --prompt 250 --decode 16 2>&1 | tail -1 | sed "s/^/bucket graphs=$g /"
done
timeout 100 $MC $DEMO --verify --prompt 40 --decode 300 2>&1 | tail -1
timeout 100 $MC $W/models/t_qwen35moe_q4_k.gguf --verify --prompt 40 --decode 300 2>&1 | tail -1
timeout 100 $MC $W/models/t_qwen3_q4_k.gguf --verify --prompt 200 --decode 120 2>&1 | tail -1
STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 STRATA_CUDA_CPU_EXPERTS_MODE=poll timeout 100 $MC \
  $W/models/t_qwen35moe_q4_k.gguf --prompt 100 --decode 16 2>&1 | tail -1 | sed 's/^/tiered /'
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/demo.txt
RAW="The history of the printing press begins"
for sp in none mtp ngram; do
  for v in old new; do
    b=$S; [ $v = old ] && b=$SO
    timeout 120 $b run -m $DEMO --device cuda --raw -p "$RAW" -n 160 -c 2048 --spec $sp >$OUT/run-$sp-$v.txt 2>$OUT/run-$sp-$v.err
  done
  cmp -s $OUT/run-$sp-old.txt $OUT/run-$sp-new.txt && echo "text demo --spec $sp: old = new PASS" || echo "text demo --spec $sp: old != new FAIL"
done
cmp -s $OUT/run-none-new.txt $OUT/run-mtp-new.txt && echo "text demo new: mtp = none PASS" || echo "text demo new: mtp != none FAIL"
wait
for v in old new; do
  b=$S; [ $v = old ] && b=$SO
  timeout 150 $b run -m $W/models/a3b.gguf --device cuda --raw -p "$RAW" -n 64 -c 2048 >$OUT/run-a3b-$v.txt 2>$OUT/run-a3b-$v.err
done
cmp -s $OUT/run-a3b-old.txt $OUT/run-a3b-new.txt && echo "text a3b: old = new PASS" || echo "text a3b: old != new FAIL"
stamp "2. speed, old and new alternating"
for r in $(seq 1 ${ROUNDS:-2}); do
  for v in old new; do
    b=$S; [ $v = old ] && b=$SO
    echo "== a3b $v round $r"
    timeout 150 $b bench -m $W/models/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
    echo "== a3b gpu-mem 8 $v round $r"
    timeout 150 $b bench -m $W/models/a3b.gguf --device cuda --gpu-mem 8 -p 0 -n 64 -r 2 2>&1 | grep -E "^pp|^tg"
    echo "== demo $v round $r"
    timeout 100 $b bench -m $DEMO --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
  done
done 2>&1 | tee $OUT/speed.txt
stamp done
