#!/usr/bin/env bash
# parallel.sh: parallel slots against llama-server on the same file (issue 15, item 6).
#
#   bench/parallel.sh MODEL.gguf [TOKENS] [THREADS] [RUNS]
#
# For N = 1, 2, 4 and 8: `strata serve --parallel N` and `llama-server -np N` (LLAMA_SERVER, default
# the peer's build folder; tools/peer-build.sh configures it without the server, so build one with
# -DLLAMA_BUILD_SERVER=ON in a folder of its own and point LLAMA_SERVER at it) on MODEL, each sent N concurrent streaming chat requests of TOKENS tokens
# (default 128) at temperature 0 by bench/parallel_client.mjs, the two servers in turn (A B A B ...,
# RUNS pairs, default 5); prints the median aggregate decode rate (completion tokens of all streams
# over the wall time) of each. Then, on strata with 4 slots, the same four requests one after the
# other against all four at once: the issue asks that four at once take at most half the time.
# Each server gets THREADS threads (default: all cores) and 1024 tokens of context per slot.
# Both servers run alone on the machine: measure in a quiet window and quote `uptime` beside it.
set -euo pipefail
model=$1
tokens=${2:-128}
threads=${3:-$(nproc)}
runs=${4:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
strata=${STRATA_BIN:-$here/build/strata}
llama=${LLAMA_SERVER:-$here/.peer/llama.cpp/build/bin/llama-server}
client="node $here/bench/parallel_client.mjs"
port_a=18461
port_b=18462
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap stop EXIT

wait_up() { for _ in $(seq 600); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 0.5; done; return 1; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
rate() { $client --url "http://127.0.0.1:$1" -n "$2" --tokens "$tokens" --json ${3:-} | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const o=JSON.parse(s);console.log(o.tok_s, o.wall)})'; }

echo "# $(date -u +%F) $(uname -n), $(nproc) cores; model $model; $tokens tokens a stream; $threads threads; load: $(uptime | sed 's/.*load average: //')"
echo "| streams | strata tok/s | llama-server tok/s | strata / llama |"
echo "|---|---|---|---|"
for n in 1 2 4 8; do
  "$strata" serve -m "$model" --port $port_a --parallel "$n" -t "$threads" --ctx 1024 --cache-ram 0 >/dev/null 2>&1 &
  pids+=($!)
  "$llama" -m "$model" --port $port_b -np "$n" -t "$threads" -c $((1024 * n)) --no-webui >/dev/null 2>&1 &
  pids+=($!)
  wait_up $port_a && wait_up $port_b
  a=(); b=()
  for _ in $(seq "$runs"); do
    a+=("$(rate $port_a "$n" | cut -d' ' -f1)")
    b+=("$(rate $port_b "$n" | cut -d' ' -f1)")
  done
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  echo "| $n | $ma | $mb | $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.2f", a / b}') |"
  stop
done

"$strata" serve -m "$model" --port $port_a --parallel 4 -t "$threads" --ctx 1024 --cache-ram 0 >/dev/null 2>&1 &
pids+=($!)
wait_up $port_a
s=(); c=()
for _ in $(seq "$runs"); do
  s+=("$(rate $port_a 4 --serial | cut -d' ' -f2)")
  c+=("$(rate $port_a 4 | cut -d' ' -f2)")
done
ms=$(printf '%s\n' "${s[@]}" | median)
mc=$(printf '%s\n' "${c[@]}" | median)
echo
echo "four streams on 4 slots: one after the other $ms s, all at once $mc s (ratio $(awk -v a="$mc" -v b="$ms" 'BEGIN {printf "%.2f", a / b}'); the issue asks <= 0.50)"
