#!/bin/sh
# chat_sessions.sh STRATA_BIN: `strata chat` on the demo model through a pipe (cmake/parts/chat.cmake).
#  - /save then /load in a new process continues exactly: the reply after /load equals the reply
#    the saving process gave to the same message (greedy), so ids, KV, recurrent state and the
#    conversation all came back;
#  - the file is the server's (magic STRATASS), written with no temporary file left behind;
#  - a truncated, altered or foreign file, a name that leaves the folder and a missing name are
#    refused with the server's messages, and the session is untouched: the conversation goes on
#    exactly as if no /load had been typed;
#  - the reasoning block is folded (no raw <think> on stdout); /help and --help list /save, /load.
# Exits 77 (skipped) when the demo model is missing.
. "$(dirname "$0")/common.sh"
# Each chat runs in a pipeline (a subshell): a failed exit is noted in a file.
chat() { "$bin" chat -m "$model" --temp 0 -n 24 -t 1 --state-dir "$dir/state" "$@" || echo "strata chat exited $?" >>"$dir/exits"; }

printf 'Define happy.\n/save good\nWhat is an ocean?\n' | chat >"$dir/a.out" 2>"$dir/a.err"
check '[ $(wc -l <"$dir/a.out") -eq 2 ]' "two replies from the saving run: $(cat "$dir/a.out" "$dir/a.err")"
check 'grep -q "(saved .good.: [0-9]* tokens" "$dir/a.err"' "/save says what it saved: $(cat "$dir/a.err")"
check '! grep -q "<think>\|</think>" "$dir/a.out"' "reasoning tags printed raw: $(cat "$dir/a.out")"
check '[ "$(head -c 8 "$dir/state/good.session")" = STRATASS ]' "the file is the server's format"
check '[ "$(ls -A "$dir/state")" = good.session ]' "only the saved file in the folder: $(ls -A "$dir/state")"

printf '/load good\nWhat is an ocean?\n' | chat >"$dir/b.out" 2>"$dir/b.err"
check 'grep -q "(loaded .good.: [0-9]* tokens, 2 messages)" "$dir/b.err"' "/load says what it loaded: $(cat "$dir/b.err")"
check '[ "$(cat "$dir/b.out")" = "$(tail -n 1 "$dir/a.out")" ]' "the loaded session answers as the saved one: $(cat "$dir/b.out") / $(tail -n 1 "$dir/a.out")"

good=$dir/state/good.session
size=$(wc -c <"$good")
head -c $((size - 20)) "$good" >"$dir/state/truncated.session"
cp "$good" "$dir/state/altered.session"
printf '\001' | dd of="$dir/state/altered.session" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
cp "$good" "$dir/state/foreign.session"
printf 'ffffffffffffffff' | dd of="$dir/state/foreign.session" bs=1 seek=16 conv=notrunc 2>/dev/null
printf 'Define happy.\n/load truncated\n/load altered\n/load foreign\n/load ../state/good\n/load .hidden\n/load never-saved\nWhat is an ocean?\n' |
    chat >"$dir/c.out" 2>"$dir/c.err"
for m in "'truncated' is truncated or padded" "'altered' has been altered" "'foreign' was saved for another model" \
         "/load '../state/good': a name must be" "/load '.hidden': a name must be" "no saved session 'never-saved'"; do
    check 'grep -qF "$m" "$dir/c.err"' "refusal \"$m\": $(cat "$dir/c.err")"
done
check '! grep -q "(loaded" "$dir/c.err"' "nothing was loaded"
check '[ "$(cat "$dir/c.out")" = "$(cat "$dir/a.out")" ]' "refused loads leave the conversation as it was: $(cat "$dir/c.out") / $(cat "$dir/a.out")"

printf '/help\n' | chat >/dev/null 2>"$dir/d.err"
check 'grep -q "/save NAME" "$dir/d.err" && grep -q "/load NAME" "$dir/d.err"' "/help lists /save and /load"
"$bin" chat --help >"$dir/help.txt"
check 'grep -q "/save NAME" "$dir/help.txt" && grep -q -- "--show-thinking" "$dir/help.txt"' "--help lists /save and --show-thinking"
check '[ ! -e "$dir/exits" ]' "every chat exits 0: $(cat "$dir/exits" 2>/dev/null)"
exit $fail
