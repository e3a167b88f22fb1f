#!/usr/bin/env bash
# pack_v4.sh: builds the binaries tiers_v4.sh runs on the device machine, here (no GPU needed), and
# packs them into .devbin/v4/bins.tar.xz: strata, model_check, state_check, conformance_compare
# (-DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90, in build-cuda), and under lib/ the shared
# libraries they load that a plain CUDA 13 image lacks (ldd, less the C/C++ runtime and CUDA's own,
# as .devbin/v3 had them). Beside it, the llama.cpp source tarball (LLAMA_SRC, default
# /tmp/devbin3/llama-src.tar.xz) is copied to .devbin/v4/llama-src.tar.xz.
#   nice -n 19 bash bench/cuda/pack_v4.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
B=${BUILD:-build-cuda}
OUTD=.devbin/v4
LLAMA_SRC=${LLAMA_SRC:-/tmp/devbin3/llama-src.tar.xz}
if [ ! -f $B/CMakeCache.txt ]; then
  nice -n 19 cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
fi
nice -n 19 cmake --build $B -j2 --target strata model_check state_check conformance_compare
stage=$(mktemp -d); trap 'rm -rf $stage' EXIT
chmod 755 $stage; mkdir -p $stage/lib $OUTD
for t in strata model_check state_check conformance_compare; do
  cp $B/$t $stage/
  strip $stage/$t
done
for t in strata model_check state_check conformance_compare; do
  ldd $B/$t | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcublas*|libcudart*|libcuda.so*) ;;
    *) cp -L "$lib" $stage/lib/ ;;
  esac
done
tar -C $stage -cJf $OUTD/bins.tar.xz .
[ -f "$LLAMA_SRC" ] && cp "$LLAMA_SRC" $OUTD/llama-src.tar.xz
ls -l $OUTD
tar -tvJf $OUTD/bins.tar.xz
size=$(stat -c %s $OUTD/bins.tar.xz)
[ "$size" -le $((15 * 1024 * 1024)) ] || { echo "bins.tar.xz is $size bytes, more than 15 MB"; exit 1; }
