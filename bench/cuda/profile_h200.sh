#!/usr/bin/env bash
# profile_h200.sh: where a decode step's time goes on the 35B-A3B shape, one device call:
#   1. STRATA_CUDA_PROFILE=1 (per block kind, eager, a wait after each block), all fusions and
#      STRATA_CUDA_FUSED=1, so the fused outputs' share shows per block;
#   2. where nsys is installed: the graph's kernels one by one (--cuda-graph-trace=node), summed
#      per kernel name (cuda_gpu_kern_sum), for decode only (-p 0).
#   run: bash bench/cuda/profile_h200.sh      carry: .devbin/prefill (bench/cuda/pack_prefill.sh)
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
dev_a3b
stamp "1. block profile"
for fu in 2 1; do
  echo "== a3b fused=$fu"
  STRATA_CUDA_FUSED=$fu STRATA_CUDA_PROFILE=1 timeout 120 $S bench -m $W/models/a3b.gguf --device cuda -p 0 -n 32 -r 1 2>&1 | grep -E "profile|  |^tg"
done 2>&1 | tee $OUT/blocks.txt
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}; ncu: $(command -v ncu || echo none)"
if [ -n "$NSYS" ]; then
  stamp "2. nsys"
  timeout 200 $NSYS profile --cuda-graph-trace=node -t cuda -o $W/dec --force-overwrite true \
    $S bench -m $W/models/a3b.gguf --device cuda -p 0 -n 64 -r 1 >$OUT/nsys-run.txt 2>&1
  timeout 120 $NSYS stats --report cuda_gpu_kern_sum --format csv -o $OUT/kern $W/dec.nsys-rep >$OUT/nsys-stats.txt 2>&1
  ls $OUT; head -40 $OUT/kern*.csv
fi
stamp done
