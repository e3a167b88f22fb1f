#!/bin/sh
# side_by_side.sh: Strata's `strata bench` against llama.cpp's `llama-bench` on the same files,
# alternating, and a markdown table of the medians (issue 13's table, issue 11's flash rows).
#
#   bench/side_by_side.sh CASES [ROUNDS]
#
# CASES is a file of lines `label | model | bench arguments | strata env | peer env`, the same
# arguments given to both programs (-t, -p, -n, -d, -r mean the same in both); `#` starts a
# comment. Each round runs every case once on each side, Strata first, the load average logged
# before each run. Per case the median over the rounds of each side's figure is printed, with the
# ratio and the load range. Every output goes to OUT (default /tmp/side-by-side).
#
#   PEER=path/to/llama-bench   the peer (default .peer/llama.cpp/build/bin/llama-bench)
#   STRATA=path/to/strata      (default build/strata)
#
# Example line:  q4_k pp512/tg128 | /tmp/small-q4k.gguf | -t 2 -r 3 -p 512 -n 128 | |
# A strata env of STRATA_CPU_LEVEL=1 caps Strata at its AVX2 kernels (run it against an AVX2
# build of the peer); it keeps AVX-VNNI, which the peer's AVX2 build and an AVX2-only CPU lack, so
# add STRATA_CPU_OFF=avxvnni for that class (the Q8_0 and Q6_K prompt tiles use it).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STRATA=${STRATA:-$ROOT/build/strata}
PEER=${PEER:-$ROOT/.peer/llama.cpp/build/bin/llama-bench}
OUT=${OUT:-/tmp/side-by-side}
CASES=${1:?usage: side_by_side.sh CASES [ROUNDS]}
ROUNDS=${2:-3}
mkdir -p "$OUT"
# Each call starts its logs afresh: the medians are over this call's rounds only (the logs were
# appended to, so a second call in the same OUT mixed in the first one's rounds).
rm -f "$OUT"/case*.strata.log "$OUT"/case*.peer.log
trim() { sed 's/^ *//; s/ *$//'; }
field() { echo "$1" | cut -d'|' -f"$2" | trim; }

n=0
grep -v '^ *#' "$CASES" | grep -v '^ *$' > "$OUT/cases"
for r in $(seq "$ROUNDS"); do
    n=0
    while IFS= read -r line; do
        n=$((n + 1))
        model=$(field "$line" 2); args=$(field "$line" 3)
        senv=$(field "$line" 4); penv=$(field "$line" 5)
        echo "round $r case $n: $(field "$line" 1)" >&2
        { echo "load $(cut -d' ' -f1 /proc/loadavg)"; env $senv "$STRATA" bench -m "$model" $args 2>&1; } \
            >> "$OUT/case$n.strata.log" < /dev/null || echo "strata failed: case $n" >&2
        { echo "load $(cut -d' ' -f1 /proc/loadavg)"; env $penv "$PEER" -m "$model" $args 2>&1; } \
            >> "$OUT/case$n.peer.log" < /dev/null || echo "peer failed: case $n" >&2
    done < "$OUT/cases"
done

median() { sort -g | awk '{v[NR] = $1} END {if (NR) printf "%.2f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else printf "-"}'; }
echo "| case | test | Strata | llama.cpp | ratio | load (1 min) | Strata's decode share of the read bandwidth |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
n=0
while IFS= read -r line; do
    n=$((n + 1))
    s="$OUT/case$n.strata.log"; p="$OUT/case$n.peer.log"
    load=$(cat "$s" "$p" | awk '$1 == "load" {print $2}' | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "-" hi}')
    share=$(grep -o 'decode uses [0-9.]*% of it' "$s" | awk '{print $3}' | tr -d % | median)
    # Strata prints "pp512  X tok/s" or "pp512 @ depth X tok/s"; llama-bench "| ... | pp512 @ d4096 | X ± Y |"
    for t in $(awk '$1 ~ /^(pp|tg)[0-9]+$/ {print $1}' "$s" | sort -u); do
        sv=$(awk -v t="$t" '$1 == t {for (i = 2; i <= NF; i++) if ($(i + 1) == "tok/s") {print $i; break}}' "$s" | median)
        pv=$(awk -F'|' -v t="$t" 'NF >= 4 {c = $(NF - 2); gsub(/^ +| +$/, "", c); split(c, w, " "); if (w[1] == t) {split($(NF - 1), a, " "); print a[1]}}' "$p" | median)
        ratio=-
        [ "$sv" != - ] && [ "$pv" != - ] && ratio=$(awk -v s="$sv" -v p="$pv" 'BEGIN {printf "%.2f", s / p}')
        sh=-; case $t in tg*) [ -n "$share" ] && sh="$share%";; esac
        echo "| $(field "$line" 1) | $t | $sv | $pv | $ratio | $load | $sh |"
    done
done < "$OUT/cases"
