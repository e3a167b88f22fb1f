#!/bin/sh
# check_info.sh STRATA GGUF_SEEDS: `strata info` on good files prints what they hold and exits 0;
# on a file truncated in its header or its tensor data, an empty or missing file, or a directory,
# it exits 1 with "strata: <file>: <what>" on stderr, never a signal. A qwen4exp file (`strata
# synth`) shows its PLE table apart: rows, width, type and bytes, and the weights' bytes without
# it, the two adding up to the file's tensor bytes; other files show no PLE line.
set -u
strata=$1 seeds=$2
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "check_info: $*" >&2; exit 1; }

"$seeds" "$d" || fail "gguf_seeds failed"
"$strata" info --help >"$d/help" || fail "--help exits non-zero"
grep -q "usage: strata info" "$d/help" || fail "--help prints no usage"

"$strata" info "$d/qwen35moe.gguf" >"$d/out" 2>"$d/err" || fail "info on a good file: $(cat "$d/err")"
for want in "version 3" "architecture: *qwen35moe" "Tiny Qwen3.5 MoE" "block_count  *8" \
            "head_count_kv  *\[0, 0, 0, 2\] x 2" "expert_used_count  *2" "full_attention_interval  *4" \
            "ssm.state_size  *32" "tokens  *300" "count  *13" "q4_K  *1 " "q6_K  *2 " "f32  *4 "; do
  grep -q "$want" "$d/out" || { cat "$d/out" >&2; fail "output lacks '$want'"; }
done
grep -q "PLE table" "$d/out" && fail "a qwen35moe file shows a PLE table"

"$strata" synth "$d/q4.gguf" --arch qwen4exp --preset tiny --type q8_0 -t 1 >/dev/null || fail "synth qwen4exp failed"
"$strata" info "$d/q4.gguf" >"$d/out" 2>"$d/err" || fail "info on qwen4exp: $(cat "$d/err")"
grep -q "PLE table  *4062 rows x 64, q8_0, .* 276216 bytes" "$d/out" || { cat "$d/out" >&2; fail "no PLE table line"; }
total=$(awk '$1 == "bytes" { print $2 }' "$d/out")
rest=$(awk '/weights without the PLE table/ { print $6 }' "$d/out")
[ -n "$total" ] && [ -n "$rest" ] && [ $((rest + 276216)) = "$total" ] || { cat "$d/out" >&2; fail "the PLE table and the rest do not add up"; }

for f in qwen3 values empty vocab_only aligned256; do
  "$strata" info "$d/$f.gguf" >/dev/null 2>"$d/err" || fail "info on $f.gguf: $(cat "$d/err")"
done

check_bad() { # FILE WHAT
  "$strata" info "$1" >/dev/null 2>"$d/err"
  rc=$?
  [ "$rc" = 1 ] || fail "info on $2 exited $rc, expected 1"
  grep -q "^strata: $1: " "$d/err" || fail "info on $2 printed: $(cat "$d/err")"
}
head -c 1000 "$d/qwen35moe.gguf" >"$d/truncated.gguf"
check_bad "$d/truncated.gguf" "a truncated file"
size=$(wc -c <"$d/qwen35moe.gguf")
head -c $((size - 40)) "$d/qwen35moe.gguf" >"$d/short_data.gguf"
check_bad "$d/short_data.gguf" "a file missing its last bytes of tensor data"
grep -q "output.weight" "$d/err" || fail "the message does not name the cut tensor: $(cat "$d/err")"
: >"$d/zero.gguf"
check_bad "$d/zero.gguf" "an empty file"
check_bad "$d/missing.gguf" "a missing file"
check_bad "$d" "a directory"
echo "check_info: ok"
