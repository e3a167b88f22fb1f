#!/usr/bin/env bash
# types_h200.sh: the low-bit weight types on CUDA (iq4_xs, iq3_xxs, iq3_s, iq2_xs, iq4_nl, q2_0,
# q2_K, q3_K: src/backend/cuda/quant_lowbit.cuh) checked and timed on one H200, in one device call:
#   1. the op harness per type (`cuda_op_harness --lowbit TYPE`: decode matvec, matvec_q8_multi /
#      _id / _swiglu_q8 on prepared rows, the expert products, the prompt GEMM, the MoE prefill
#      and get_rows, each against the CPU backend), then the whole harness once (every other op
#      and type: the regression check), then compute-sanitizer's memcheck over the low-bit cases;
#   2. model_check on each tiny model (made here) (the whole forward on the GPU against the CPU:
#      prompt, decode through the CUDA graph, chunks of 7);
#   3. a short decode per type (`strata bench` on the tiny qwen35moe: launch-bound, it shows the
#      graph runs, not bandwidth), then `cuda_op_harness --perf-lowbit`: each type's matvec GB/s at
#      the model's shapes over copies larger than the L2 (HBM: ~4.3 TB/s practical, 4.8 by the
#      datasheet) and the 35B-A3B FFN decode stack per type, Q4_K's beside them.
# Prints one PASS/FAIL line per check and a summary; everything also lands in $OUT.
# Input (bench/cuda/pack_types.sh, carried): $BIN/bins.tar.xz.
#   run: bash bench/cuda/types_h200.sh     carry: .devbin/types     (BUDGET s, default 540)
set -uo pipefail
BIN=${BIN:-$PWD/.devbin/types}
OUT=${OUT:-/tmp/out}
BUDGET=${BUDGET:-540}
TYPES="iq4_xs iq3_xxs iq3_s iq2_xs iq4_nl q2_0 q2_K q3_K"
W=/tmp/w; mkdir -p $W/bin $OUT
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "[$(el) s] $*"; }
left() { echo $(( BUDGET - $(el) )); }
tar -xJf $BIN/bins.tar.xz -C $W/bin || { echo "FAIL: no $BIN/bins.tar.xz (bench/cuda/pack_types.sh)"; exit 1; }
export LD_LIBRARY_PATH=$W/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
H=$W/bin/cuda_op_harness
# the tiny models, made here (seed 42): carried, they and the tracked tree pass the 64 MiB
MODELS=$W/models; mkdir -p $MODELS
for t in $TYPES; do
  archs="qwen35moe qwen3"
  case $t in iq4_xs|iq3_xxs) archs="$archs qwen3moe" ;; esac
  for a in $archs; do
    $W/bin/strata synth $MODELS/${a}_$t.gguf --arch $a --preset tiny --type $t --random-blocks --seed 42 -t 4 >/dev/null ||
      echo "FAIL: strata synth ${a}_$t"
  done
done
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
SUM=$OUT/summary.txt; : >$SUM
verdict() { echo "$1" | tee -a $SUM; }

stamp "op harness per type"
for t in $TYPES; do
  timeout 120 $H --lowbit $t >$OUT/harness-$t.txt 2>&1; rc=$?
  grep -E "FAIL" $OUT/harness-$t.txt
  verdict "harness $t: $([ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)") $(tail -1 $OUT/harness-$t.txt)"
done
stamp "whole harness (regression)"
timeout 180 $H >$OUT/harness-all.txt 2>&1; rc=$?
grep -E "FAIL" $OUT/harness-all.txt
verdict "harness all: $([ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)") $(tail -1 $OUT/harness-all.txt)"
if command -v compute-sanitizer >/dev/null && [ "$(left)" -gt 300 ]; then
  stamp "memcheck over the low-bit cases"
  timeout 150 compute-sanitizer --tool memcheck $H --lowbit >$OUT/memcheck.txt 2>&1; rc=$?
  verdict "memcheck lowbit: $(grep -q 'ERROR SUMMARY: 0 errors' $OUT/memcheck.txt && [ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)") $(grep 'ERROR SUMMARY' $OUT/memcheck.txt | tail -1)"
else
  verdict "memcheck lowbit: skipped (no compute-sanitizer, or past the budget)"
fi

stamp "model_check"
for f in $MODELS/*.gguf; do
  m=$(basename $f .gguf)
  timeout 90 $W/bin/model_check $f --prompt 100 --decode 32 >$OUT/model_check-$m.txt 2>&1; rc=$?
  tail -1 $OUT/model_check-$m.txt
  verdict "model_check $m: $([ $rc = 0 ] && echo PASS || echo "FAIL (rc $rc)")"
done

stamp "decode per type (tiny qwen35moe: launch-bound)"
for t in $TYPES; do
  [ "$(left)" -gt 200 ] || { echo "bench $t: skipped (budget)"; continue; }
  timeout 60 $W/bin/strata bench -m $MODELS/qwen35moe_$t.gguf --device cuda -p 64 -n 64 -r 2 >$OUT/bench-$t.txt 2>&1
  echo "bench $t: $(grep -E '^tg' $OUT/bench-$t.txt | tail -1)"
done | tee -a $SUM

stamp "perf, low-bit types"
if [ "$(left)" -gt 60 ]; then
  timeout $(( $(left) - 10 )) $H --perf-lowbit 2>&1 | tee $OUT/perf-lowbit.txt | grep -E "^perf"
else
  echo "perf-lowbit: skipped (budget)"
fi
stamp "done"
echo "== summary"; cat $SUM
echo "$(grep -c ': PASS' $SUM) PASS, $(grep -c ': FAIL' $SUM) FAIL"
