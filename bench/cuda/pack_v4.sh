#!/usr/bin/env bash
# pack_v4.sh: builds the binaries tiers_v4.sh runs on the device machine, here (no GPU needed), and
# packs them into .devbin/v4/bins.tar.xz (pack_bins.sh): strata, model_check, state_check,
# conformance_compare and the libraries a plain CUDA 13 image lacks. Beside it, the llama.cpp
# source tarball (LLAMA_SRC, default /tmp/devbin3/llama-src.tar.xz) is copied to
# .devbin/v4/llama-src.tar.xz.
#   nice -n 19 bash bench/cuda/pack_v4.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/pack_bins.sh
LLAMA_SRC=${LLAMA_SRC:-/tmp/devbin3/llama-src.tar.xz}
mkdir -p .devbin/v4
[ -f "$LLAMA_SRC" ] && cp "$LLAMA_SRC" .devbin/v4/llama-src.tar.xz
pack_bins .devbin/v4 strata model_check state_check conformance_compare
