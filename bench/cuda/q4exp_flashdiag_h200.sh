#!/usr/bin/env bash
# q4exp_flashdiag_h200.sh: q4exp_graphs_h200.sh's call saw the flash file's model_check and bench
# give no output within their timeouts (tiny qwen4exp passed with graphs). This call watches one
# bench on flash with graphs and one without: elapsed time, the main thread's kernel wait channel
# and the GPU's load every 3 s, and the bench's own output; then the op harness's qwen4exp cases.
#   run: bash bench/cuda/q4exp_flashdiag_h200.sh      carry: .devbin/prefill
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
FL=$W/models/flash.gguf
$S synth $FL --arch qwen4exp --preset flash --type q4_k --random-blocks -t 14 >$OUT/synth-flash.txt 2>&1
stamp "synth: $(tail -1 $OUT/synth-flash.txt)"
watch_run() {   # NAME ENV... -- CMD...
  local name=$1; shift
  ( "$@" ) >$OUT/$name.txt 2>&1 &
  local pid=$! i=0
  while kill -0 $pid 2>/dev/null && [ $i -lt 30 ]; do
    sleep 3; i=$((i + 1))
    local ch=$(pgrep -P $pid | head -1); ch=${ch:-$pid}
    echo "[$name $((i * 3)) s] state $(awk '/^State/ {print $2}' /proc/$ch/status 2>/dev/null) wchan $(cat /proc/$ch/wchan 2>/dev/null) rss $(awk '/^VmRSS/ {print $2 $3}' /proc/$ch/status 2>/dev/null) gpu $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
  done
  kill -- $pid 2>/dev/null; pkill -P $pid 2>/dev/null
  echo "[$name] output:"; tail -12 $OUT/$name.txt
}
{
watch_run graphs timeout 85 $S bench -m $FL --device cuda -p 64 -n 32 -r 1
watch_run eager env STRATA_CUDA_GRAPHS=0 timeout 85 $S bench -m $FL --device cuda -p 64 -n 32 -r 1
timeout 120 $W/bin/cuda_op_harness >$OUT/harness.txt 2>&1; echo "op harness rc=$? $(tail -1 $OUT/harness.txt)"
grep -E "qsa_blocks|ple_hash|ple rows|FAIL" $OUT/harness.txt
stamp done
} 2>&1 | tee $OUT/diag.txt
