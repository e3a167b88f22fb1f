#!/usr/bin/env bash
# prefill_h200.sh: find the GPU-against-CPU gap of prompt chunks (issue 17; bench/cuda/NOTES.md,
# "the FAIL is model_check GPU-against-CPU on the demo model") in one device call:
#   1. the op harness (now with the demo model's and the small preset's attention and MoE shapes);
#   2. model_check on the demo model at 8, 16, 32 and 100 prompt rows;
#   3. the same at 100 rows with each prompt-chunk path left for the decode kernels
#      (STRATA_CUDA_PLAIN=attn|moe|gemm|gdn|all, forward_cuda.c), and the CPU side at
#      STRATA_CPU_LEVEL=1 (AVX2) and 0 (scalar), to see which side and which path moves;
#   4. the same on a tiny and a small qwen35moe Q8_0 file made here;
#   5. model_check on tiny files of every architecture in q8_0 and q4_k (the regression check);
#   6. with OLD (a second bins.tar.xz, the binaries before a change): `strata bench --device cuda`
#      pp512 / tg128 / pp4096 on the 35B-A3B shape, old and new alternating.
# Inputs: $BIN/bins.tar.xz (strata, model_check, cuda_op_harness; bench/cuda/pack_prefill.sh),
# optionally $OLD/bins.tar.xz.
#   run: BIN=$PWD/.devbin/prefill [OLD=...] bash bench/cuda/prefill_h200.sh      carry: .devbin/prefill
set -uo pipefail
BIN=${BIN:-$PWD/.devbin/prefill}
OUT=${OUT:-/tmp/out}
DEMO=$PWD/models/strata-demo-q8_0.gguf
W=${WDIR:-/tmp/w}; mkdir -p $W/bin $W/models $OUT
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
tar -xJf $BIN/bins.tar.xz -C $W/bin || { echo "FAIL: no $BIN/bins.tar.xz"; exit 1; }
export LD_LIBRARY_PATH=$W/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
S=$W/bin/strata
MC=$W/bin/model_check
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
( $S synth $W/models/small.gguf --arch qwen35moe --preset small --type q8_0 --random-blocks -t 8 >$OUT/synth-small.txt 2>&1 ) &
$S synth $W/models/tiny.gguf --arch qwen35moe --preset tiny --type q8_0 --random-blocks --seed 42 -t 4 >/dev/null 2>&1
mc() { # label, env..., model, args
  local label=$1; shift
  echo "== $label: $*"
  timeout 120 env "$@" 2>&1 | tail -2
}
stamp "1. op harness"
timeout 150 $W/bin/cuda_op_harness >$OUT/harness-all.txt 2>&1; echo "harness rc=$?"
grep -E "FAIL|passed|attention_prefill|moe_ffn_prefill" $OUT/harness-all.txt | tail -30
stamp "2. demo model by prompt length"
for p in 8 12 16 32 100; do mc "demo P=$p" $MC $DEMO --prompt $p --decode 8; done 2>&1 | tee $OUT/demo-len.txt
stamp "3. demo model, paths and CPU levels"
for plain in attn moe gemm gdn attn,moe all; do
  mc "demo plain=$plain" STRATA_CUDA_PLAIN=$plain $MC $DEMO --prompt 100 --decode 8
done 2>&1 | tee $OUT/demo-paths.txt
for lv in 1 0; do
  mc "demo cpu level $lv" STRATA_CPU_LEVEL=$lv $MC $DEMO --prompt 100 --decode 8
  mc "demo cpu level $lv plain=all" STRATA_CPU_LEVEL=$lv STRATA_CUDA_PLAIN=all $MC $DEMO --prompt 100 --decode 8
done 2>&1 | tee -a $OUT/demo-paths.txt
stamp "4. tiny and small"
mc "tiny" $MC $W/models/tiny.gguf --prompt 100 --decode 8 | tee $OUT/synth.txt
wait
cat $OUT/synth-small.txt | tail -1
for plain in none attn moe gemm all; do
  mc "small plain=$plain" STRATA_CUDA_PLAIN=$plain $MC $W/models/small.gguf --prompt 100 --decode 8
done 2>&1 | tee -a $OUT/synth.txt
stamp "5. tiny files of every architecture"
for a in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for t in q8_0 q4_k; do
    $S synth $W/models/t_${a}_$t.gguf --arch $a --preset tiny --type $t --random-blocks --seed 42 -t 4 >/dev/null 2>&1
    timeout 60 $MC $W/models/t_${a}_$t.gguf --prompt 100 --decode 16 2>&1 | tail -1
  done
done 2>&1 | tee $OUT/tiny-all.txt
if [ -n "${OLD:-}" ]; then
  stamp "6. speed, old and new alternating"
  mkdir -p $W/old && tar -xJf $OLD/bins.tar.xz -C $W/old
  $S synth $W/models/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 12 >$OUT/synth-a3b.txt 2>&1
  for r in 1 2; do
    for v in old new; do
      b=$S; [ $v = old ] && b=$W/old/strata
      echo "== $v round $r"
      timeout 150 $b bench -m $W/models/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
      timeout 150 $b bench -m $W/models/a3b.gguf --device cuda -p 4096 -n 0 -r 3 2>&1 | grep -E "^pp|^tg"
    done
  done 2>&1 | tee $OUT/speed.txt
fi
stamp "done"
