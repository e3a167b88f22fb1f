#!/bin/sh
# engine_flags.sh STRATA_BIN: the flags the engine commands share, and `strata run` in the chat
# template, on the demo model (cmake/parts/cli.cmake).
#  - `strata run -p TEXT` answers as `strata chat` answers the same first message (greedy: the
#    same text), so the template, the reply opening and the folded reasoning are chat's; --raw
#    feeds TEXT as it is and gives another text; the README's example prints an answer;
#  - `strata serve` takes -t, -c/--ctx, --prefill and --kv-type (the context it reports is --ctx)
#    and answers a completion with them; a bad value is refused (exit 2) naming the flag.
# Exits 77 (skipped) when the demo model is missing.
. "$(dirname "$0")/common.sh"
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; cleanup' EXIT

q="What is a computer?"
"$bin" run -m "$model" -p "$q" -n 24 --temp 0 -t 1 >"$dir/run.out" 2>"$dir/run.err"
check '[ $? -eq 0 ] && [ -s "$dir/run.out" ] && grep -q "[a-z]" "$dir/run.out"' "run -p printed no answer: $(cat "$dir/run.err")"
printf '%s\n' "$q" | "$bin" chat -m "$model" -n 24 --temp 0 -t 1 >"$dir/chat.out" 2>"$dir/chat.err"
check 'cmp -s "$dir/run.out" "$dir/chat.out"' "run -p and chat differ: run '$(cat "$dir/run.out")', chat '$(cat "$dir/chat.out")'"
"$bin" run -m "$model" -p "$q" -n 24 --temp 0 -t 1 --raw >"$dir/raw.out" 2>"$dir/raw.err"
check '[ $? -eq 0 ] && ! cmp -s "$dir/raw.out" "$dir/run.out"' "run --raw gave the templated answer: $(cat "$dir/raw.out")"
# The README's first example, as written there (the demo model is the default).
STRATA_MODEL=$model "$bin" run -p "What is a computer?" -n 64 >"$dir/readme.out" 2>"$dir/readme.err"
check 'grep -q "[a-z]" "$dir/readme.out"' "the README's run example printed nothing: $(cat "$dir/readme.err")"

"$bin" serve -m "$model" --port 0 --kv-type f8 >"$dir/bad.out" 2>"$dir/bad.err"
check '[ $? -eq 2 ] && grep -q -- "--kv-type" "$dir/bad.err"' "serve --kv-type f8 not refused: $(cat "$dir/bad.err")"

# The listening line is read through a pipe: it comes once the server accepts requests.
mkfifo "$dir/serve.out"
"$bin" serve -m "$model" --port 0 -t 1 -c 300 --prefill 16 --kv-type f32 >"$dir/serve.out" 2>"$dir/serve.err" &
pid=$!
exec 3<"$dir/serve.out"
line=""
read -r line <&3
port=$(echo "$line" | sed -n 's/.*listening on http:\/\/127.0.0.1:\([0-9]*\)\/.*/\1/p')
check '[ -n "$port" ]' "serve did not start: $(cat "$dir/serve.err")"
if [ -n "$port" ]; then
  models=$(curl -s "http://127.0.0.1:$port/v1/models")
  check 'echo "$models" | grep -q "\"context_length\": *300"' "serve --ctx 300 reports: $models"
  code=$(curl -s -o "$dir/c.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    -d '{"prompt": "An ocean is", "max_tokens": 3, "temperature": 0}' "http://127.0.0.1:$port/v1/completions")
  check '[ "$code" = 200 ]' "a completion under -t 1 --prefill 16 --kv-type f32: $code $(cat "$dir/c.json")"
fi
kill $pid 2>/dev/null && wait $pid 2>/dev/null
pid=""
exec 3<&-
[ $fail -eq 0 ] && echo "engine_flags: all passed"
exit $fail
