#!/usr/bin/env bash
# parallel.sh: parallel slots against llama-server on the same file (issue 15, item 6).
#
#   bench/parallel.sh MODEL.gguf [TOKENS] [THREADS] [RUNS] [STREAMS]
#
# For each N of STREAMS (default "1 2 4 8"): `strata serve --parallel N` and `llama-server -np N`
# (LLAMA_SERVER, default the peer's .peer/llama.cpp/build-server, which `tools/peer-build.sh
# server` builds) on MODEL, both up at once, each sent N concurrent streaming chat requests of
# TOKENS tokens (default 128) at temperature 0 with ignore_eos (every stream decodes exactly TOKENS
# tokens) by bench/parallel_client.mjs, the two servers in turn (A B A B ..., RUNS pairs, default
# 5); prints each run with `uptime`'s load average after it, then the table: the median aggregate
# decode rate (completion tokens of all streams over the wall time, the short prompts' reading
# included) of each and their ratio. Then, on strata with 4 slots (SERIAL=0 skips it), the same
# four requests one after the other against all four at once, alternated: the issue asks that
# four at once take at most half the time.
# Each server gets THREADS threads (default: all cores) and 1024 tokens of context per slot.
# Both servers run alone on the machine: measure in a quiet window and quote the load beside it.
set -euo pipefail
model=$1
tokens=${2:-128}
threads=${3:-$(nproc)}
runs=${4:-5}
streams=${5:-1 2 4 8}
here=$(cd "$(dirname "$0")/.." && pwd)
strata=${STRATA_BIN:-$here/build/strata}
llama=${LLAMA_SERVER:-$here/.peer/llama.cpp/build-server/bin/llama-server}
client="node $here/bench/parallel_client.mjs"
port_a=18461
port_b=18462
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap stop EXIT
[ -x "$strata" ] || { echo "parallel.sh: no $strata (STRATA_BIN)" >&2; exit 1; }
[ -x "$llama" ] || { echo "parallel.sh: no $llama (tools/peer-build.sh server, or LLAMA_SERVER)" >&2; exit 1; }

wait_up() { for _ in $(seq 600); do curl -sf "http://127.0.0.1:$1/health" >/dev/null && return 0; sleep 0.5; done; return 1; }
load() { uptime | sed 's/.*load average: //; s/,.*//'; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
# rate PORT N [--serial]: "tok/s wall tokens" of one round
rate() {
  $client --url "http://127.0.0.1:$1" -n "$2" --tokens "$tokens" --json ${3:-} |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const o=JSON.parse(s);console.log(o.tok_s.toFixed(2), o.wall.toFixed(3), o.tokens)})'
}

echo "# $(date -u '+%F %H:%M') UTC $(uname -n), $(nproc) cores; model $model; $tokens tokens a stream (ignore_eos); $threads threads; $runs pairs; load at start: $(uptime | sed 's/.*load average: //')"
table=()
for n in $streams; do
  "$strata" serve -m "$model" --port $port_a --parallel "$n" -t "$threads" --ctx 1024 --cache-ram 0 --spec none >/dev/null 2>&1 &
  pids+=($!)
  "$llama" -m "$model" --port $port_b -np "$n" -t "$threads" -c $((1024 * n)) --cache-ram 0 --no-webui >/dev/null 2>&1 &
  pids+=($!)
  wait_up $port_a && wait_up $port_b
  # one round each to warm the page cache and the servers
  rate $port_a "$n" >/dev/null
  rate $port_b "$n" >/dev/null
  a=(); b=()
  for i in $(seq "$runs"); do
    ra=$(rate $port_a "$n"); la=$(load)
    rb=$(rate $port_b "$n"); lb=$(load)
    echo "N=$n pair $i: strata $ra (load $la), llama-server $rb (load $lb)   [tok/s wall_s tokens]"
    a+=("${ra%% *}"); b+=("${rb%% *}")
  done
  ma=$(printf '%s\n' "${a[@]}" | median)
  mb=$(printf '%s\n' "${b[@]}" | median)
  table+=("| $n | $ma | $mb | $(awk -v a="$ma" -v b="$mb" 'BEGIN {printf "%.2f", a / b}') | $(load) |")
  stop
done
echo
echo "| streams | strata tok/s | llama-server tok/s | strata / llama | load after |"
echo "|---|---|---|---|---|"
printf '%s\n' "${table[@]}"

[ "${SERIAL:-1}" = 0 ] && exit 0
"$strata" serve -m "$model" --port $port_a --parallel 4 -t "$threads" --ctx 1024 --cache-ram 0 --spec none >/dev/null 2>&1 &
pids+=($!)
wait_up $port_a
rate $port_a 4 >/dev/null
s=(); c=()
for i in $(seq "$runs"); do
  rs=$(rate $port_a 4 --serial); rc=$(rate $port_a 4)
  echo "four streams, pair $i: one after the other $rs, at once $rc (load $(load))   [tok/s wall_s tokens]"
  s+=("$(echo "$rs" | cut -d' ' -f2)"); c+=("$(echo "$rc" | cut -d' ' -f2)")
done
ms=$(printf '%s\n' "${s[@]}" | median)
mc=$(printf '%s\n' "${c[@]}" | median)
echo "four streams on 4 slots: one after the other $ms s, all at once $mc s (ratio $(awk -v a="$mc" -v b="$ms" 'BEGIN {printf "%.2f", a / b}'); the issue asks <= 0.50)"
