#!/bin/sh
# types.sh: the per-type speed table of issue 12, every weight type Strata computes, against ggml
# on the same rows and the same threads, in two parts:
#
#   1. kernels: bench_matvec (bench/matvec/run.sh) on decode-sized products (experts, a 2048x8192
#      matrix, the 151,936-row head), ours and ggml's type_traits_cpu vec_dot in one process, GB/s
#      of weights read and the share of the read bandwidth probed in the same run, the CPU features
#      named in the table's header;
#   2. model decode (MODEL=1): for each type a `strata synth` small qwen35moe of that type, then
#      `strata bench -p 0 -n 64` against `llama-bench -p 0 -n 64` on the same file, alternated by
#      farm-bench --vs (medians of RUNS pairs, the load average recorded beside each).
#
#   bench/matvec/types.sh [TYPE,TYPE,...]      (default: every type below; types Strata cannot
#                                               compute yet are skipped by name)
# Environment: THREADS (2), REPEATS (21), MODEL (0), RUNS (5), BUILD (build-bench), WORK
# (/tmp/strata-types), RESULT (bench/results/<date>-matvec-types.md).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-21}
RUNS=${RUNS:-5}
WORK=${WORK:-/tmp/strata-types}
# every type llama-quantize writes, the grid i-quants included (skipped while not computable)
ALL=f16,bf16,q8_0,q4_0,q4_1,q5_0,q5_1,q2_K,q3_K,q4_K,q5_K,q6_K,iq4_nl,iq4_xs,q1_0,q2_0,tq1_0,tq2_0,mxfp4,nvfp4
ALL=$ALL,iq1_s,iq1_m,iq2_xxs,iq2_xs,iq2_s,iq3_xxs,iq3_s
TYPES=${1:-$ALL}
OUT=${RESULT:-"$ROOT/bench/results/$(date -u +%Y-%m-%d)-matvec-types.md"}

RESULT=$OUT THREADS=$THREADS REPEATS=$REPEATS BUILD=$BUILD "$ROOT/bench/matvec/run.sh" --types "$TYPES"

[ "${MODEL:-0}" = 1 ] || exit 0
PEER_BIN=${STRATA_LLAMA_BUILD:-$ROOT/.peer/llama.cpp/build}/bin
[ -x "$PEER_BIN/llama-bench" ] || { echo "types.sh: no $PEER_BIN/llama-bench (tools/peer-build.sh)" >&2; exit 1; }
command -v farm-bench >/dev/null || { echo "types.sh: farm-bench not found" >&2; exit 1; }
cmake --build "$BUILD" --target strata -j2 >/dev/null
mkdir -p "$WORK"
{
    echo
    echo "## Model decode, strata bench vs llama-bench, alternated (farm-bench --vs, $RUNS pairs)"
    echo
    echo "Each file: \`strata synth small-T.gguf --arch qwen35moe --preset small --type T --seed 1\`."
    echo "Commands: \`strata bench -m FILE -p 0 -n 64 -r 1 -t $THREADS\` against"
    echo "\`llama-bench -m FILE -p 0 -n 64 -r 1 -t $THREADS\`; wall seconds of the whole process (load"
    echo "and warm-up included), medians (min..max), A/B = strata / llama.cpp (below 1: Strata faster);"
    echo "each tool's own tokens/s are in $WORK/farm-T.txt's runs when kept."
    echo
    echo "| type | load before | strata s | llama.cpp s | A/B |"
    echo "|---|---|---|---|---|"
} >>"$OUT"
echo "$TYPES" | tr ',' '\n' | while read -r t; do
    f=$WORK/small-$t.gguf
    if [ ! -s "$f" ]; then
        "$BUILD/strata" synth "$f" --arch qwen35moe --preset small --type "$t" --seed 1 -t "$THREADS" >"$WORK/synth-$t.log" 2>&1 ||
            { echo "| $t | - | synth failed: $(tail -1 "$WORK/synth-$t.log") | | |" >>"$OUT"; continue; }
    fi
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    rep=$(farm-bench -n "$RUNS" --timeout 1800 --vs "$PEER_BIN/llama-bench -m $f -p 0 -n 64 -r 1 -t $THREADS" -- \
          "$BUILD/strata" bench -m "$f" -p 0 -n 64 -r 1 -t "$THREADS" 2>&1) || true
    echo "$rep" >"$WORK/farm-$t.txt"
    # farm-bench's rows: "A wall s  min median max", "A/B wall  min median max"
    a=$(echo "$rep" | awk '/^A wall s/ {print $5 " (" $4 ".." $6 ")"}')
    b=$(echo "$rep" | awk '/^B wall s/ {print $5 " (" $4 ".." $6 ")"}')
    r=$(echo "$rep" | awk '/^A\/B wall/ {print $4 " (" $3 ".." $5 ")"}')
    echo "| $t | $load | ${a:-see $WORK/farm-$t.txt} | ${b:-} | ${r:-} |" >>"$OUT"
done
echo "types.sh: wrote $OUT"
