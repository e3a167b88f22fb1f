#!/usr/bin/env bash
# ncu_h200.sh: the 35B-A3B shape's decode kernels one by one under Nsight Compute (ncu, in the CUDA
# image; nsys is not): each kernel's GPU time (gpu__time_duration, clocks and caches left as they
# run), summed per kernel name over the decode steps of `strata bench -p 0 -n 4` (graph nodes
# profiled one by one). One device call; the summary table comes back as ncu-sum.csv.
#   run: bash bench/cuda/ncu_h200.sh      carry: .devbin/prefill (bench/cuda/pack_prefill.sh)
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
dev_a3b
stamp "ncu"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
timeout 400 $NCU --metrics gpu__time_duration.sum --cache-control none --clock-control none --graph-profiling node \
  --launch-count 4000 --csv --print-summary per-kernel \
  $S bench -m $W/models/a3b.gguf --device cuda -p 0 -n 4 -r 1 >$OUT/ncu-sum.csv 2>$OUT/ncu-err.txt
echo "ncu rc=$?"; tail -3 $OUT/ncu-err.txt
stamp done
