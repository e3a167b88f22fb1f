#!/bin/sh
# run.sh: builds bench_matvec (Release) and writes bench/results/<date>-matvec-cpu.md with the
# command, the machine, the load average around the run, and the table.
#   bench/matvec/run.sh [extra bench_matvec arguments, e.g. --types q4_K,q6_K,q8_0]
# Environment: THREADS (2), REPEATS (31), BUILD (build-bench), STRATA_PEER_DIR (the npm prefix
# holding node_modules/@node-llama-cpp/linux-x64; default .peer, then /work/peer), BENCH_BIN (an
# already built bench_matvec: no build), RESULT (the output file; default
# bench/results/<date>-matvec-cpu.md).
set -eu
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${BUILD:-$ROOT/build-bench}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-31}
LIBS=""
for prefix in "${STRATA_PEER_DIR:-}" "$ROOT/.peer" /work/peer; do
    [ -n "$prefix" ] || continue
    d="$prefix/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
    if [ -f "$d/libggml-base.so" ]; then LIBS=$d; break; fi
done
[ -n "$LIBS" ] || echo "run.sh: peer libraries not found; the ggml column will be empty" >&2

BIN=${BENCH_BIN:-}
if [ -z "$BIN" ]; then
    cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$BUILD" --target bench_matvec -j2 >/dev/null
    BIN="$BUILD/bench_matvec"
fi

OUT=${RESULT:-"$ROOT/bench/results/$(date -u +%Y-%m-%d)-matvec-cpu.md"}
mkdir -p "$(dirname "$OUT")"
CMD="bench_matvec --threads $THREADS --repeats $REPEATS${LIBS:+ --peer $LIBS} $*"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
# shellcheck disable=SC2086
TABLE=$("$BIN" --threads "$THREADS" --repeats "$REPEATS" ${LIBS:+--peer "$LIBS"} "$@")
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
MODEL=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
CPUS=$(nproc)
MEM=$(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
L2=$(lscpu | sed -n 's/^L2 cache: *//p' | head -1)
L3=$(lscpu | sed -n 's/^L3 cache: *//p' | head -1)
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)

{
    echo "# Matrix-vector products on the CPU: $START"
    echo
    echo "Command (from bench/matvec/run.sh, commit $COMMIT):"
    echo
    echo '```'
    echo "$CMD"
    echo '```'
    echo
    echo "Machine: $MODEL, $CPUS CPUs online, $MEM RAM${L2:+, L2 $L2}${L3:+, L3 $L3}."
    echo "Load average (1/5/15 min) before: $LOAD_BEFORE; after: $LOAD_AFTER (the machine is shared;"
    echo "a load above the core count means other processes took time from the measured threads)."
    echo
    echo "GB/s = bytes of weights read per second (the whole matrix per product). ggml = the peer's"
    echo "type_traits_cpu vec_dot (after its from_float) run row by row on the same pool, split and"
    echo "weights. % of bw = ours against the streaming-read probe of the same run."
    echo
    echo "$TABLE"
} > "$OUT"
echo "wrote $OUT" >&2
cat "$OUT"
