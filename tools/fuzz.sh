#!/usr/bin/env bash
# fuzz.sh: fuzzes the GGUF reader with libFuzzer for a bounded time and fails if it finds a crash.
#   FUZZ_SECONDS  how long to run (default 120)
#   FUZZ_JOBS     parallel fuzzing processes (default 1)
#   FUZZ_SEEDS_FROM  directories of real .gguf files (colon-separated, optional): the first 64 KiB
#                 of each becomes a seed, so real key layouts and vocabularies are in the corpus
# Builds only the fuzzer (and the seed writer) in build-fuzz with clang, seeds the corpus with small
# valid files from tests/fuzz/gguf_seeds.c plus any small .gguf in the repository, and keeps the
# corpus between runs (build-fuzz/corpus). A crashing input is left in build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-120}
jobs=${FUZZ_JOBS:-1}
b=build-fuzz

command -v clang >/dev/null || { echo "fuzz.sh: clang is not installed" >&2; exit 1; }
CC=clang cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Debug -DSTRATA_FUZZ=ON -DSTRATA_BUILD_TESTS=OFF >/dev/null
cmake --build "$b" --target fuzz_gguf gguf_seeds -j"$(nproc)"

mkdir -p "$b/seeds" "$b/corpus" "$b/artifacts"
rm -f "$b"/seeds/*
"$b/gguf_seeds" "$b/seeds"
find . -path ./.git -prune -o -path './build*' -prune -o -path ./.peer -prune -o \
     -name '*.gguf' -size -1M -type f -print0 | xargs -0 -r cp -t "$b/seeds"
IFS=: read -r -a from <<<"${FUZZ_SEEDS_FROM:-}"
for d in "${from[@]}"; do
  for f in "$d"/*.gguf; do
    [ -f "$f" ] && head -c 65536 "$f" >"$b/seeds/real-$(basename "$f")"
  done
done

echo "== fuzzing the GGUF reader for ${seconds}s ($(ls "$b/seeds" | wc -l) seeds, $(ls "$b/corpus" | wc -l) in the corpus)"
# libFuzzer exits non-zero on a crash, a leak, a timeout (an input over 10 s) or running out of memory.
# With FUZZ_JOBS > 1 it forks workers (-fork), which log into the build directory.
parallel=()
[ "$jobs" -gt 1 ] && parallel=(-fork="$jobs")
cd "$b"
./fuzz_gguf "${parallel[@]}" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=artifacts/ corpus seeds
