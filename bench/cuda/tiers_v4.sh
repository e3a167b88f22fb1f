#!/usr/bin/env bash
# tiers_v4.sh: memory tiers v4 on one H200, in one device call (issue 17): the host CPU's share of
# each host layer's selected experts without the driver in the branch (model/cuda/host_experts.c,
# STRATA_CUDA_CPU_EXPERTS_MODE=poll: kernels post requests into mapped host memory, a polling CPU
# thread answers, a one-block kernel waits; model/expert_mailbox.h), against v2 (no share, the
# default) and v3 (host nodes) in the same call.
#   1. llama.cpp's CUDA build from the npm bundle's source, in the background at once (-j16), while
#      the correctness checks run; nothing is measured until it is done (or stopped at PEER_BY s):
#      run 1 built it beside the benches, which both slowed them and left it unfinished;
#   2. correctness on tiny models (model_check: the GPU against the CPU path; state_check):
#      tiered by force (STRATA_CUDA_HOST_LAYERS=1) with the CPU computing 2 of each token's
#      experts in poll mode, and in host-node mode once; tiered without a share and resident as
#      the regression checks; qwen35moe (q4_k, f32), qwen3next, qwen3moe;
#   3. the a3b logits token by token: v4 at --gpu-mem 8 against resident (within the quantized
#      limits, not bitwise), and v2 (identical expected);
#   4. llama-bench at the same VRAM (-ncmoe 32 and 13: Strata's plans keep 8 and 27 of the 40
#      layers' experts on the GPU at 8 and 16 GiB), if its build is done in time;
#   5. strata bench at --gpu-mem 8 and 16: v2 and v4 (share chosen at load) alternating, then v4
#      at other shares and pool sizes; every point skipped past the time budget.
# Inputs: $BIN/{strata,model_check,state_check,conformance_compare,lib/} (bench/cuda/pack_v4.sh)
# and $BIN/llama-src.tar.xz. Outputs under $OUT. BUDGET (s, default 540) bounds the whole call.
set -uo pipefail
BIN=${BIN:-$PWD/.devbin/v4}
OUT=${OUT:-/tmp/out}
BUDGET=${BUDGET:-540}
PEER_BY=${PEER_BY:-330}
export LD_LIBRARY_PATH=$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
W=/tmp/w; mkdir -p $W $OUT
t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
stamp() { echo "[$(el) s] $*"; }
left() { echo $(( BUDGET - $(el) )); }
nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)|^Socket|^NUMA node\(s\)"; nproc; free -g | head -2

build_pid=
if [ "${NO_PEER:-0}" != 1 ]; then
  # its own process group (setsid), so that a build past the budget can be stopped whole
  setsid bash -c "mkdir -p $W/ll && tar -xJf $BIN/llama-src.tar.xz -C $W/ll &&
    cmake -S $W/ll -B $W/ll/build -DCMAKE_BUILD_TYPE=Release -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_MTMD=OFF &&
    cmake --build $W/ll/build -j16 --target llama-bench" >$OUT/llama-build.log 2>&1 &
  build_pid=$!
fi
building() { [ -n "$build_pid" ] && kill -0 $build_pid 2>/dev/null && echo "(llama.cpp build still running)"; }

stamp "synth"
( $BIN/strata synth $W/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 4 >$W/synth.log 2>&1 ) &
synth_pid=$!
MC() { timeout 60 $BIN/model_check "$@" --prompt 100 --decode 32 2>&1 | tail -1; }
{
  for arch in qwen35moe qwen3next qwen3moe; do
    for type in q4_k $([ $arch = qwen35moe ] && echo f32); do
      f=$W/t_${arch}_$type.gguf
      $BIN/strata synth $f --arch $arch --preset tiny --type $type --seed 42 >/dev/null 2>&1
      echo "-- $arch $type resident"; MC $f
      echo "-- $arch $type tiered (1 layer's experts on the GPU), the CPU computing 2 of each token's experts, poll (v4)"
      STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 STRATA_CUDA_CPU_EXPERTS_MODE=poll MC $f
      echo "-- $arch $type tiered, no CPU share (v2)"
      STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=0 MC $f
    done
  done
  f=$W/t_qwen35moe_q4_k.gguf
  echo "-- qwen35moe q4_k tiered, the CPU computing 3, host node (v3)"
  STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=3 STRATA_CUDA_CPU_EXPERTS_MODE=host-node MC $f
  echo "-- qwen35moe q4_k tiered, the CPU computing 7 of 8, poll, 2 threads"
  STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=7 STRATA_CUDA_CPU_THREADS=2 STRATA_CUDA_CPU_EXPERTS_MODE=poll MC $f
  echo "-- state_check, tiered, poll share 2"
  STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 STRATA_CUDA_CPU_EXPERTS_MODE=poll timeout 120 $BIN/state_check $f 2>&1 | tail -3
  echo "-- state_check, tiered, no share"
  STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=0 timeout 120 $BIN/state_check $f 2>&1 | tail -3
  echo "-- the wait's bound: with a 1 us bound the CPU cannot answer in time; the step must fail naming a layer, not hang (a failure is the pass)"
  STRATA_CUDA_HOST_LAYERS=1 STRATA_CUDA_CPU_EXPERTS=2 STRATA_CUDA_CPU_EXPERTS_MODE=poll STRATA_CUDA_CPU_WAIT_MS=0.001 \
    timeout 60 $BIN/strata eval -m $f --device cuda --tokens 1,2,3,4,5 --prefill 1 --logits $W/x.bin >$W/bound.log 2>&1
  echo "exit status $? (124: it hung)"; grep -iE "layer|error|fail" $W/bound.log | head -2
} 2>&1 | tee $OUT/checks.txt
wait $synth_pid; tail -1 $W/synth.log
stamp "checks done"

{
  $BIN/strata eval -m $W/a3b.gguf --device cuda --tokens 1 --logits $W/probe.bin >/dev/null 2>&1
  V=$(( $(stat -c %s $W/probe.bin) / 4 ))
  T=$($BIN/conformance_compare tokens 40 $V 7)
  STRATA_CUDA_EXPERT_F16=0 $BIN/strata eval -m $W/a3b.gguf --device cuda --tokens "$T" --prefill 1 --logits $W/res.bin >/dev/null 2>&1 || echo "resident eval failed"
  STRATA_CUDA_CPU_EXPERTS=auto STRATA_CUDA_CPU_EXPERTS_MODE=poll $BIN/strata eval -m $W/a3b.gguf --device cuda --gpu-mem 8 --tokens "$T" --prefill 1 --logits $W/tier4.bin 2>&1 | grep -E "budget|strata:|CPU|layer" | head -3
  $BIN/conformance_compare $W/res.bin $W/tier4.bin $V --min-top1 0 --max-rel 1 --label "gpu-mem 8, v4 share vs resident (random-block weights amplify rounding)"
} 2>&1 | tee $OUT/tier-logits.txt
stamp "logits done"

LB=$W/ll/build/bin
if [ -n "$build_pid" ]; then
  stamp "waiting for the llama.cpp build (until $PEER_BY s at most)"
  while kill -0 $build_pid 2>/dev/null && [ "$(el)" -lt "$PEER_BY" ]; do sleep 2; done
  if kill -0 $build_pid 2>/dev/null; then echo "llama.cpp build not done by $PEER_BY s: stopped"; kill -- -$build_pid 2>/dev/null; sleep 2
  else wait $build_pid; echo "llama.cpp build rc=$?"; fi
  tail -n 2 $OUT/llama-build.log
fi
uptime
if [ -x $LB/llama-bench ]; then
  {
    for n in 32 13; do
      echo "== llama.cpp -ncmoe $n"
      timeout 60 $LB/llama-bench -m $W/a3b.gguf -ngl 99 -fa 1 -ncmoe $n -p 0 -n 128 -r 3 2>&1 | grep -E "^\|"
    done
  } 2>&1 | tee $OUT/llama-bench.txt
fi
stamp "llama-bench done"
uptime
stamp "strata bench"
bench() { # label, gpu-mem, n, then env assignments
  local label=$1 g=$2 n=$3; shift 3
  if [ "$(left)" -lt 30 ]; then echo "== --gpu-mem $g, $label: skipped (time budget)"; return; fi
  echo "== --gpu-mem $g, $label $(building)"
  env "$@" timeout 60 $BIN/strata bench -m $W/a3b.gguf --device cuda --gpu-mem $g -p 0 -n $n -r 3 2>&1 |
    grep -E "^(tg|tiers)" | sed 's/ (budget.*//'
}
{
  echo "== host read bandwidth (the CPU path's probe, $(nproc) threads, tiny model)"
  timeout 30 $BIN/strata bench -m $W/t_qwen35moe_q4_k.gguf --device cpu -t $(nproc) -p 0 -n 16 -r 1 2>&1 | grep -E "bandwidth"
  for g in 8 16; do
    for rep in 1 2; do
      bench "v2 (no share)" $g 128 STRATA_CUDA_CPU_EXPERTS=0
      bench "v4 (poll, share chosen at load)" $g 128 STRATA_CUDA_CPU_EXPERTS=auto STRATA_CUDA_CPU_EXPERTS_MODE=poll
    done
  done
  for p in "3 8" "4 12" "3 12" "2 8"; do
    set -- $p
    bench "v4, the CPU computing $1 of 8, $2 threads" 8 64 STRATA_CUDA_CPU_EXPERTS=$1 STRATA_CUDA_CPU_THREADS=$2 STRATA_CUDA_CPU_EXPERTS_MODE=poll
  done
  bench "v4, the CPU computing 3 of 8, 8 threads" 16 64 STRATA_CUDA_CPU_EXPERTS=3 STRATA_CUDA_CPU_THREADS=8 STRATA_CUDA_CPU_EXPERTS_MODE=poll
} 2>&1 | tee $OUT/strata-bench.txt
stamp "strata bench done"
uptime
stamp "done"
