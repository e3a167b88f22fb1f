# pack_bins.sh: sourced by the pack_*.sh scripts. pack_bins OUTD TARGET... builds the targets in
# build-cuda (BUILD; configured with -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 if it is not
# yet), and writes OUTD/bins.tar.xz: the stripped binaries and, under lib/, the shared libraries
# they load that a plain CUDA 13 image lacks (ldd, less the C/C++ runtime and CUDA's own: pcre2,
# jansson, libmicrohttpd and theirs). Fails past 15 MB, so the tracked tree (the 45 MB demo model)
# plus the carry stays under the device tool's 64 MiB.
pack_bins() {
  local outd=$1; shift
  local b=${BUILD:-build-cuda} stage t lib size
  if [ ! -f "$b/CMakeCache.txt" ]; then
    nice -n 19 cmake -S . -B "$b" -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache >/dev/null
  fi
  nice -n 19 cmake --build "$b" -j2 --target "$@"
  mkdir -p "$outd"
  stage=$(mktemp -d)
  chmod 755 "$stage"; mkdir -p "$stage/lib"
  for t in "$@"; do
    cp "$b/$t" "$stage/"
    strip "$stage/$t"
  done
  for t in "$@"; do
    ldd "$b/$t" | awk '/=> \// { print $3 }'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*|libcublas*|libcudart*|libcuda.so*) ;;
      *) cp -L "$lib" "$stage/lib/" ;;
    esac
  done
  tar -C "$stage" -cJf "$outd/bins.tar.xz" .
  rm -rf "$stage"
  ls -l "$outd"
  tar -tvJf "$outd/bins.tar.xz"
  size=$(stat -c %s "$outd/bins.tar.xz")
  [ "$size" -le $((15 * 1024 * 1024)) ] || { echo "$outd/bins.tar.xz is $size bytes, more than 15 MB"; return 1; }
}
