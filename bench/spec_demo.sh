#!/usr/bin/env bash
# spec_demo.sh [BUILD]: speculative decoding on the demo model, Strata and llama.cpp in one run
# (bench/results/2026-12-01-cpu-spec-demo.md). BUILD is Strata's build folder (default build);
# llama.cpp's driver is BUILD/peer/llama-speculative-simple (tools/peer-build.sh speculative) and
# its plain decode .peer/llama.cpp/build/bin/llama-bench. 2 threads throughout.
#
#  1. strata bench --spec mtp on the held-out chat prompts (bench/prompts/heldout-chat.txt, 16
#     questions about words the model never saw), greedy, up to 256 tokens each, 3 rounds
#     alternating plain and speculative: tok/s of both, the speed-up, tokens per trunk forward,
#     acceptance per draft position;
#  2. the same with --spec ngram on the repeat-with-one-change prompts (bench/prompts/repeat-edit.txt);
#  3. llama.cpp: --spec-type draft-mtp --spec-draft-n-max 3 on each held-out prompt (tokens and
#     seconds as it prints them, summed), and llama-bench tg128 for its plain decode;
#  4. bench_verify (when built): what a step costs, the verify chunk of 1..8 rows and the head's
#     draft and catch-up rows, in one-row decodes.
# The load average is printed before each part.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
model=models/strata-demo-q8_0.gguf
load() { echo "== $1: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"; }
load "strata --spec mtp"
"$build/strata" bench -m "$model" --spec mtp --prompts bench/prompts/heldout-chat.txt -n 256 -r 3 -t 2
load "strata --spec ngram"
"$build/strata" bench -m "$model" --spec ngram --prompts bench/prompts/repeat-edit.txt -n 256 -r 3 -t 2
load "llama.cpp"
spec=$build/peer/llama-speculative-simple
if [ -x "$spec" ]; then
  tok=0 sec=0 drafted=0 accepted=0
  while IFS= read -r line; do
    prompt=$(printf '%b' "$line")
    out=$("$spec" -m "$model" --spec-type draft-mtp --spec-draft-n-max 3 -p "$prompt" -n 256 --temp 0 -t 2 -c 1024 2>&1)
    read -r n s < <(echo "$out" | sed -n 's/.*decoded *\([0-9]*\) tokens in *\([0-9.]*\) seconds.*/\1 \2/p' | tail -1)
    d=$(echo "$out" | sed -n 's/.*n_drafted = *\([0-9]*\).*/\1/p' | tail -1)
    a=$(echo "$out" | sed -n 's/.*n_accept  *= *\([0-9]*\).*/\1/p' | tail -1)
    tok=$((tok + ${n:-0})); drafted=$((drafted + ${d:-0})); accepted=$((accepted + ${a:-0}))
    sec=$(echo "$sec + ${s:-0}" | bc -l)
  done < bench/prompts/heldout-chat.txt
  echo "llama.cpp draft-mtp: $tok tokens in $sec s ($(echo "$tok / $sec" | bc -l | cut -c1-6) tok/s), $accepted of $drafted drafts accepted"
fi
[ -x .peer/llama.cpp/build/bin/llama-bench ] && .peer/llama.cpp/build/bin/llama-bench -m "$model" -p 0 -n 128 -t 2 -r 3 2>/dev/null | grep -E "tg128|model"
if [ -x "$build/bench_verify" ]; then
  load "bench_verify"
  "$build/bench_verify" "$model" 48 5 2 8
fi
load "end"
