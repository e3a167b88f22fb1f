# dev_lib.sh: sourced by the device scripts of bench/cuda (outs_h200.sh, norm_h200.sh, ncu_h200.sh,
# profile_h200.sh). dev_setup unpacks .devbin/prefill/bins.tar.xz (bench/cuda/pack_prefill.sh)
# into $W/bin and sets OUT, W, S (strata), MC (model_check), DEMO and stamp; dev_a3b writes the
# 35B-A3B shape (Q4_K, random blocks) to $W/models/a3b.gguf; dev_tiny writes the tiny files of
# every architecture (q8_0, q4_k) to $W/models/t_ARCH_TYPE.gguf.
dev_setup() {
  OUT=${OUT:-/tmp/out}
  W=/tmp/w; mkdir -p $W/bin $W/models $OUT
  tar -xJf .devbin/prefill/bins.tar.xz -C $W/bin || { echo "FAIL: no .devbin/prefill/bins.tar.xz"; exit 1; }
  export LD_LIBRARY_PATH=$W/bin/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  S=$W/bin/strata; MC=$W/bin/model_check; DEMO=$PWD/models/strata-demo-q8_0.gguf
  t0=$(date +%s)
}
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
dev_a3b() { $S synth $W/models/a3b.gguf --arch qwen35moe --preset a3b --type q4_k --random-blocks -t 12 >$OUT/synth-a3b.txt 2>&1; }
dev_tiny() {
  local a t
  for a in qwen35moe qwen35 qwen3next qwen3moe qwen3; do
    for t in q8_0 q4_k; do
      $S synth $W/models/t_${a}_$t.gguf --arch $a --preset tiny --type $t --random-blocks --seed 42 -t 2 >/dev/null 2>&1
    done
  done
}
