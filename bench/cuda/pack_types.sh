#!/usr/bin/env bash
# pack_types.sh: what types_h200.sh runs on the device machine, made here (no GPU needed), under
# .devbin/types/ (ignored by git; carry the folder):
#   bins.tar.xz   strata, model_check, cuda_op_harness (-DSTRATA_CUDA=ON, build-cuda) and under
#                 lib/ the shared libraries they load that a plain CUDA 13 image lacks (pcre2,
#                 jansson, libmicrohttpd: ldd, less the C/C++ runtime and CUDA's own)
#   models/       tiny synthetic models (`strata synth --preset tiny --random-blocks`, seed 42) for
#                 each low-bit weight type: qwen35moe (GDN + attention + MoE experts) and qwen3
#                 (dense attention and FFN), and qwen3moe for the two types of most value (iq4_xs,
#                 iq3_xxs); every matrix, the embedding and the head included, is in that type
#   nice -n 19 bash bench/cuda/pack_types.sh        (then: carry .devbin/types, run types_h200.sh)
# Fails if the folder exceeds 60 MiB (the device tool carries 64 MiB in all).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
B=${BUILD:-build-cuda}
OUTD=.devbin/types
TYPES="iq4_xs iq3_xxs iq3_s iq2_xs iq4_nl q2_0 q2_K q3_K"
if [ ! -f $B/CMakeCache.txt ]; then
  nice -n 19 cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
fi
nice -n 19 cmake --build $B -j2 --target strata model_check cuda_op_harness
rm -rf $OUTD
mkdir -p $OUTD/models
stage=$(mktemp -d); trap 'rm -rf $stage' EXIT
chmod 755 $stage; mkdir -p $stage/lib
bins="strata model_check cuda_op_harness"
for t in $bins; do
  cp $B/$t $stage/
  strip $stage/$t
done
for t in $bins; do
  ldd $B/$t | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcublas*|libcudart*|libcuda.so*) ;;
    *) cp -L "$lib" $stage/lib/ ;;
  esac
done
tar -C $stage -cJf $OUTD/bins.tar.xz .
for t in $TYPES; do
  archs="qwen35moe qwen3"
  case $t in iq4_xs|iq3_xxs) archs="$archs qwen3moe" ;; esac
  for a in $archs; do
    $B/strata synth $OUTD/models/${a}_$t.gguf --arch $a --preset tiny --type $t --random-blocks --seed 42 -t 2 >/dev/null
  done
done
ls -l $OUTD $OUTD/models
tar -tvJf $OUTD/bins.tar.xz
size=$(du -sb $OUTD | cut -f1)
echo "$OUTD: $size bytes"
[ "$size" -le $((60 * 1024 * 1024)) ] || { echo "$OUTD is $size bytes, more than 60 MiB"; exit 1; }
