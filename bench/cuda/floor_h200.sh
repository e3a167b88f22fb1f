#!/usr/bin/env bash
# floor_h200.sh: GPU against CPU with the CPU's own noise floor (model_check --floor), in one
# device call: the demo model (16 and 100 prompt rows), the small preset in Q8_0 and Q4_K (random
# blocks), the verify chunk bit for bit on the demo model and a tiny file, and the tiny files of
# every architecture (q8_0, q4_k) as the regression check. Binaries: bench/cuda/pack_prefill.sh.
#   run: bash bench/cuda/floor_h200.sh      carry: .devbin/prefill
set -uo pipefail
W=/tmp/w; mkdir -p $W/bin $W/models
tar -xJf .devbin/prefill/bins.tar.xz -C $W/bin || { echo "FAIL: no .devbin/prefill/bins.tar.xz"; exit 1; }
export LD_LIBRARY_PATH=$W/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
S=$W/bin/strata; MC=$W/bin/model_check; DEMO=$PWD/models/strata-demo-q8_0.gguf
$S synth $W/models/small.gguf --arch qwen35moe --preset small --type q8_0 --random-blocks -t 8 >/dev/null 2>&1 &
$S synth $W/models/small4.gguf --arch qwen35moe --preset small --type q4_k --random-blocks -t 8 >/dev/null 2>&1 &
for a in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for t in q8_0 q4_k; do
    $S synth $W/models/t_${a}_$t.gguf --arch $a --preset tiny --type $t --random-blocks --seed 42 -t 4 >/dev/null 2>&1
  done
done
for p in 16 100; do timeout 100 $MC $DEMO --prompt $p --decode 16 --floor 2>&1 | tail -1; done
timeout 100 $MC $DEMO --verify --prompt 40 --decode 40 2>&1 | tail -1
timeout 100 $MC $W/models/t_qwen35moe_q4_k.gguf --verify --prompt 40 --decode 40 2>&1 | tail -1
for a in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
  for t in q8_0 q4_k; do timeout 60 $MC $W/models/t_${a}_$t.gguf --prompt 100 --decode 16 2>&1 | tail -1; done
done
wait
timeout 200 $MC $W/models/small.gguf --prompt 100 --decode 8 --floor 2>&1 | tail -1
timeout 200 $MC $W/models/small4.gguf --prompt 100 --decode 8 --floor 2>&1 | tail -1
