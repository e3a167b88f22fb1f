#!/usr/bin/env bash
# bucket_h200.sh: decode across the 256-position boundary of the decode graphs' attention buckets,
# against the CPU, on one H200 in one device call: the op harness; a tiny qwen35moe and qwen3 file
# and the demo (with its CPU floor) at --prompt 250 --decode 16 (positions 250-265), with the
# graphs and eagerly (STRATA_CUDA_GRAPHS=0), which must agree; --verify across it.
#   run: bash bench/cuda/bucket_h200.sh      carry: .devbin/prefill
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
for a in qwen35moe qwen3; do
  $S synth $W/models/t_$a.gguf --arch $a --preset tiny --type q4_k --random-blocks --seed 42 -t 4 >/dev/null 2>&1
done
timeout 120 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "harness rc=$? $(tail -1 $OUT/harness.txt)"
for g in 1 0; do
  for a in qwen35moe qwen3; do
    STRATA_CUDA_GRAPHS=$g timeout 60 $MC $W/models/t_$a.gguf --prompt 250 --decode 16 2>&1 | tail -1 | sed "s/^/graphs=$g /"
  done
  STRATA_CUDA_GRAPHS=$g timeout 100 $MC $DEMO --prompt 250 --decode 16 --floor 2>&1 | tail -1 | sed "s/^/graphs=$g /"
done 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/bucket.txt
timeout 100 $MC $W/models/t_qwen3.gguf --verify --prompt 200 --decode 120 2>&1 | tail -1 | tee -a $OUT/bucket.txt
stamp done
