#!/bin/sh
# spec_exact.sh STRATA_BIN: speculative decoding changes no text (cmake/parts/spec.cmake), on the
# demo model and its trained MTP head:
#  - `strata run` with --spec mtp (1 and 3 drafts) and --spec ngram prints what --spec none prints,
#    greedy and at temperature 0.8 with a seed; the default (the file has a head) is mtp, and it
#    reports drafts made and accepted;
#  - `strata chat` through a pipe, two turns (the second reusing the first's state), the same;
#  - `strata bench --spec mtp` checks the texts itself and says so.
# Exits 77 (skipped) when the demo model is missing.
set -u
bin=$1
src=${STRATA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
model=$src/models/strata-demo-q8_0.gguf
[ -r "$model" ] || { echo "skipped: $model is missing"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-spec-XXXXXX")
trap 'rm -rf "$dir"' EXIT
fail=0
check() { if eval "$1"; then :; else echo "FAILED: $2"; fail=1; fi; }
prompt='<|im_start|>user
What does ocean mean?<|im_end|>
<|im_start|>assistant
'
for samp in "--temp 0" "--temp 0.8 --seed 7"; do
  "$bin" run -m "$model" -p "$prompt" -n 48 -t 2 $samp --spec none >"$dir/none.out" 2>"$dir/none.err"
  for s in "mtp --spec-draft 1" "mtp --spec-draft 3" "ngram --spec-draft 4"; do
    "$bin" run -m "$model" -p "$prompt" -n 48 -t 2 $samp --spec $s >"$dir/s.out" 2>"$dir/s.err"
    check 'cmp -s "$dir/none.out" "$dir/s.out"' "run $samp --spec $s differs: $(cat "$dir/none.out") / $(cat "$dir/s.out")"
  done
  "$bin" run -m "$model" -p "$prompt" -n 48 -t 2 $samp >"$dir/d.out" 2>"$dir/d.err"
  check 'cmp -s "$dir/none.out" "$dir/d.out"' "run $samp (default spec) differs"
  check 'grep -q "spec mtp: [0-9]* of [0-9]* drafts accepted" "$dir/d.err"' "the default is mtp on a file with a head: $(cat "$dir/d.err")"
done
printf 'Define happy.\nWhat is an ocean?\n' | "$bin" chat -m "$model" --temp 0 -n 32 -t 2 --spec none >"$dir/c0.out" 2>/dev/null
printf 'Define happy.\nWhat is an ocean?\n' | "$bin" chat -m "$model" --temp 0 -n 32 -t 2 --spec mtp >"$dir/c1.out" 2>/dev/null
printf 'Define happy.\nWhat is an ocean?\n' | "$bin" chat -m "$model" --temp 0.8 --seed 3 -n 32 -t 2 --spec none >"$dir/c2.out" 2>/dev/null
printf 'Define happy.\nWhat is an ocean?\n' | "$bin" chat -m "$model" --temp 0.8 --seed 3 -n 32 -t 2 --spec ngram >"$dir/c3.out" 2>/dev/null
check '[ -s "$dir/c0.out" ] && cmp -s "$dir/c0.out" "$dir/c1.out"' "chat --spec mtp differs: $(cat "$dir/c0.out") / $(cat "$dir/c1.out")"
check '[ -s "$dir/c2.out" ] && cmp -s "$dir/c2.out" "$dir/c3.out"' "chat --spec ngram at 0.8 differs"
"$bin" bench -m "$model" --spec mtp -n 24 -r 1 -t 2 >"$dir/b.out" 2>&1
check 'grep -q "^text     identical" "$dir/b.out"' "bench --spec mtp: $(cat "$dir/b.out")"
"$bin" bench -m "$model" --spec ngram -n 24 -r 1 -t 2 --json >"$dir/j.out" 2>&1
check 'grep -q "\"text_identical\": true" "$dir/j.out" && grep -q "\"accepted_at\": \[" "$dir/j.out"' "bench --json: $(cat "$dir/j.out")"
check '! "$bin" run -m "$model" -p x --spec bogus 2>/dev/null' "--spec bogus refused"
[ $fail -eq 0 ] && echo "spec_exact: all checks passed"
exit $fail
