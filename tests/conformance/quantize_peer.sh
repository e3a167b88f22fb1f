#!/usr/bin/env bash
# quantize_peer.sh: a file in one of llama.cpp's quantization types, written by llama.cpp's own
# llama-quantize with an importance matrix from llama-imatrix, for the conformance tests
# (conformance.sh --source quantize).
#
#   quantize_peer.sh --type T --bin DIR --out FILE
#
#   T      a type or mix as llama-quantize names it (Q4_K_M, IQ2_M, MXFP4_MOE, TQ1_0, ...)
#   base   `strata synth` tiny qwen35moe in f32, seed 42 (every row a multiple of 256, as the
#          K and IQ types need), and its importance matrix from 20 chunks of 128 tokens of a
#          fixed text; both made once per build folder ($DIR/conformance/quantize-base, under a
#          lock so parallel tests share them).
#
# Exit 0 with FILE written, 77 when llama-quantize or llama-imatrix is missing (tools/peer-build.sh
# builds them), 1 on failure.
set -uo pipefail

type="" bin="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --type) type=$2; shift 2 ;;
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "quantize_peer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
src_dir=${STRATA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
peer_bin=${STRATA_LLAMA_BUILD:-$src_dir/.peer/llama.cpp/build}/bin
for t in llama-quantize llama-imatrix; do
  [ -x "$peer_bin/$t" ] || { echo "skipped: no $peer_bin/$t (tools/peer-build.sh builds it)"; exit 77; }
done

base=$bin/conformance/quantize-base
mkdir -p "$base"
(
  flock 9
  if [ ! -s "$base/imatrix.gguf" ]; then
    "$bin/strata" synth "$base/base-f32.gguf" --arch qwen35moe --preset tiny --type f32 --seed 42 >"$base/synth.log" 2>&1 ||
      { cat "$base/synth.log"; exit 1; }
    # a fixed text of common English words: the built-in vocabulary tokenizes it to byte pairs
    awk 'BEGIN { srand(1); split("the of and to in is was for on that with as by at from his her it an are were which " \
         "this be or has had not but they their one first new two after also who its more other time some than people " \
         "into only year world city state during most over such many these made can then three used may between would " \
         "school about part known war later since while where both under well", w, " ");
         for (i = 0; i < 6000; i++) printf "%s ", w[int(rand() * length(w)) + 1]; print "" }' >"$base/text.txt"
    "$peer_bin/llama-imatrix" -m "$base/base-f32.gguf" -f "$base/text.txt" -o "$base/imatrix.gguf" -c 128 --chunks 20 -t 2 \
      >"$base/imatrix.log" 2>&1 || { tail -5 "$base/imatrix.log"; rm -f "$base/imatrix.gguf"; exit 1; }
  fi
) 9>"$base/lock" || exit 1

"$peer_bin/llama-quantize" --imatrix "$base/imatrix.gguf" "$base/base-f32.gguf" "$out" "$type" 2 >"$out.log" 2>&1 ||
  { tail -5 "$out.log"; exit 1; }
