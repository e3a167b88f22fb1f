#!/bin/sh
# qwen4exp_flash.sh: issue 11's speed test on the qwen4exp `flash` preset, Strata against
# llama.cpp on the same file, 2 threads: pp512 and tg128 at depth 0, tg128 at each depth of
# DEPTHS. The two programs alternate ROUNDS times (a drifting machine moves both); every run's
# output and the load average before it go to OUT/, and the medians and ratios are printed.
#
#   bench/qwen4exp_flash.sh                          # 3 rounds, depths 0 2048 16384
#   ROUNDS=5 DEPTHS=0 bench/qwen4exp_flash.sh        # pp512/tg128 only
#
# MODEL is made with `strata synth` if missing (8.1 GB, about 6 minutes; delete it afterwards).
# The peer's OpenMP threads spin at barriers by default; on a loaded machine that starves them,
# so PEER_ENV=OMP_WAIT_POLICY=PASSIVE runs it a second way (unset: the default only).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/build/strata}
PEER=${PEER:-$ROOT/.peer/llama.cpp/build/bin/llama-bench}
MODEL=${MODEL:-/tmp/qwen4exp-flash-q4_k.gguf}
ROUNDS=${ROUNDS:-3}
DEPTHS=${DEPTHS:-"0 2048 16384"}
OUT=${OUT:-/tmp/qwen4exp-flash-bench}
PEER_ENV=${PEER_ENV:-}
mkdir -p "$OUT"
[ -f "$MODEL" ] || "$STRATA" synth "$MODEL" --arch qwen4exp --preset flash --type q4_k --random-blocks
for d in $DEPTHS; do
    if [ "$d" = 0 ]; then tests="-p 512 -n 128"; else tests="-p 0 -n 128"; fi
    for i in $(seq "$ROUNDS"); do
        uptime >> "$OUT/strata-d$d.log"
        "$STRATA" bench -m "$MODEL" -t 2 -r 3 -d "$d" $tests >> "$OUT/strata-d$d.log" 2>&1
        uptime >> "$OUT/peer-d$d.log"
        "$PEER" -m "$MODEL" -t 2 -r 3 -d "$d" $tests >> "$OUT/peer-d$d.log" 2>&1
        if [ -n "$PEER_ENV" ]; then
            uptime >> "$OUT/peer-env-d$d.log"
            env "$PEER_ENV" "$PEER" -m "$MODEL" -t 2 -r 3 -d "$d" $tests >> "$OUT/peer-env-d$d.log" 2>&1
        fi
    done
done
# medians: Strata prints "pp512  X tok/s", llama-bench "| ... | pp512 | X ± Y |" (or "tg128 @ d2048")
median() { sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "-"}'; }
for d in $DEPTHS; do
    for t in pp512 tg128; do
        [ "$d" != 0 ] && [ "$t" = pp512 ] && continue
        s=$(awk -v t="$t" '$1 == t {print $2}' "$OUT/strata-d$d.log" | median)
        p=$(awk -F'|' -v t="$t" '$7 ~ t {split($8, a, " "); print a[1]}' "$OUT/peer-d$d.log" | median)
        line="depth $d $t: strata $s tok/s, llama.cpp $p tok/s"
        [ "$s" != - ] && [ "$p" != - ] && line="$line, ratio $(awk -v s="$s" -v p="$p" 'BEGIN {printf "%.2f", s / p}')"
        if [ -n "$PEER_ENV" ]; then
            e=$(awk -F'|' -v t="$t" '$7 ~ t {split($8, a, " "); print a[1]}' "$OUT/peer-env-d$d.log" | median)
            line="$line; llama.cpp with $PEER_ENV $e tok/s"
        fi
        echo "$line"
    done
done
grep -h "decode uses" "$OUT"/strata-d*.log | sed 's/^/strata: /'
