#!/usr/bin/env bash
# pack_spec.sh: what spec_h200.sh runs on the device machine, made here (no GPU needed), under
# .devbin/spec/ (ignored by git; carry the folder): bins.tar.xz with strata and model_check
# (-DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, in build-cuda) and under lib/ the shared
# libraries they load that a plain CUDA 13 image lacks (ldd, less the C/C++ runtime and CUDA's
# own). No models: the tracked tree holds the demo model, and spec_h200.sh makes the others there.
#   nice -n 19 bash bench/cuda/pack_spec.sh        (then: carry .devbin/spec, run spec_h200.sh)
# Fails if bins.tar.xz exceeds 15 MB.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
B=${BUILD:-build-cuda}
OUTD=.devbin/spec
bins="strata model_check"
if [ ! -f $B/CMakeCache.txt ]; then
  nice -n 19 cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
fi
nice -n 19 cmake --build $B -j2 --target $bins
rm -rf $OUTD
mkdir -p $OUTD
stage=$(mktemp -d); trap 'rm -rf $stage' EXIT
chmod 755 $stage; mkdir -p $stage/lib
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
ls -l $OUTD
tar -tvJf $OUTD/bins.tar.xz
size=$(stat -c %s $OUTD/bins.tar.xz)
[ "$size" -le $((15 * 1024 * 1024)) ] || { echo "bins.tar.xz is $size bytes, more than 15 MB"; exit 1; }
