#!/usr/bin/env bash
# q4exp_h200.sh: qwen4exp on the GPU (the forward written once, the q4cuda kernels), against the CPU,
# on one H200 in one device call: the op harness's qwen4exp cases; model_check on tiny qwen4exp
# files (q8_0, q4_k; the QSA selection past its dense rows at --prompt 400), fused and unfused;
# greedy text on the GPU; then one more alternating speed round of oneforward_h200.sh's A/B
# (old = .devbin/old, the build before the one forward).
#   run: bash bench/cuda/q4exp_h200.sh      carry: .devbin/prefill .devbin/old
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
O=$W/old; mkdir -p $O; tar -xJf .devbin/old/bins.tar.xz -C $O || { echo "FAIL: no .devbin/old/bins.tar.xz"; exit 1; }
SO=$O/strata
dev_a3b &
for t in q8_0 q4_k; do
  $S synth $W/models/q4e_$t.gguf --arch qwen4exp --preset tiny --type $t --random-blocks --seed 42 -t 4 >/dev/null 2>&1 || echo "FAIL: synth qwen4exp $t"
done
stamp "1. qwen4exp"
timeout 150 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "op harness rc=$? $(tail -1 $OUT/harness.txt)"
{
for t in q8_0 q4_k; do
  for p in 100 400; do timeout 120 $MC $W/models/q4e_$t.gguf --prompt $p --decode 32 2>&1 | tail -1; done
  STRATA_CUDA_FUSED=0 timeout 120 $MC $W/models/q4e_$t.gguf --prompt 400 --decode 32 2>&1 | tail -1 | sed 's/^/FUSED=0 /'
done
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/q4e.txt
timeout 60 $S run -m $W/models/q4e_q8_0.gguf --device cuda --raw -p "hello there" -n 48 >$OUT/run-q4e-cuda.txt 2>$OUT/run-q4e-cuda.err
echo "run rc=$?"; tail -2 $OUT/run-q4e-cuda.err
timeout 60 $S run -m $W/models/q4e_q8_0.gguf --device cpu --raw -p "hello there" -n 48 >$OUT/run-q4e-cpu.txt 2>$OUT/run-q4e-cpu.err
cmp -s $OUT/run-q4e-cpu.txt $OUT/run-q4e-cuda.txt && echo "text q4e cpu = cuda" || echo "text q4e cpu != cuda (allowed: quantized limits)"
timeout 60 $S bench -m $W/models/q4e_q8_0.gguf --device cuda -p 512 -n 64 -r 2 2>&1 | grep -E "^pp|^tg|rror"
wait
[ "${SPEED:-1}" = 0 ] && { stamp done; exit 0; }
stamp "2. speed, new and old alternating (the second round)"
for v in new old; do
  b=$S; [ $v = old ] && b=$SO
  echo "== a3b $v round 2"
  timeout 150 $b bench -m $W/models/a3b.gguf --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
  echo "== a3b gpu-mem 8 $v round 2"
  timeout 150 $b bench -m $W/models/a3b.gguf --device cuda --gpu-mem 8 -p 0 -n 64 -r 2 2>&1 | grep -E "^pp|^tg"
  echo "== demo $v round 2"
  timeout 100 $b bench -m $DEMO --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
done 2>&1 | tee $OUT/speed.txt
stamp done
