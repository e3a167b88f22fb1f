#!/usr/bin/env bash
# q4exp_review_h200.sh: after the review commit (the PLE window built by st_state_ple_window for
# the forward and the session): tiny qwen4exp GPU against CPU with graphs, state_check, and the
# flash file's decode with and without graphs.   run: bash bench/cuda/q4exp_review_h200.sh   carry: .devbin/prefill
set -uo pipefail
. bench/cuda/dev_lib.sh
dev_setup
FL=$W/models/flash.gguf
$S synth $FL --arch qwen4exp --preset flash --type q4_k --random-blocks -t 14 >$OUT/synth-flash.txt 2>&1 &
$S synth $W/models/q4e_q4_k.gguf --arch qwen4exp --preset tiny --type q4_k --random-blocks --seed 42 -t 1 >/dev/null 2>&1
{
timeout 60 $MC $W/models/q4e_q4_k.gguf --prompt 400 --decode 48 2>&1 | tail -1 | sed "s/^/graphs: /"
timeout 60 $W/bin/state_check $W/models/q4e_q4_k.gguf 2>&1 | grep -E "state_check: (PASS|FAIL)"
while pgrep -f "synth $FL" >/dev/null; do sleep 1; done   # (a pipeline's subshell cannot wait for it)
timeout 40 $S bench -m $FL --device cuda -p 512 -n 128 -r 3 2>&1 | grep -E "^pp|^tg"
STRATA_CUDA_GRAPHS=0 timeout 30 $S bench -m $FL --device cuda -p 0 -n 128 -r 3 2>&1 | grep -E "^tg" | sed 's/^/eager /'
stamp done
} 2>&1 | sed -E 's/ on NVIDIA[^:]*:/:/' | tee $OUT/checks.txt
