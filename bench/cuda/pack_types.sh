#!/usr/bin/env bash
# pack_types.sh: what types_h200.sh runs on the device machine, made here (no GPU needed):
# .devbin/types/bins.tar.xz with strata, model_check and cuda_op_harness (pack_bins.sh). The tiny
# models, one per low-bit type and architecture, are made on the device by types_h200.sh: carried,
# they and the tracked tree pass the device tool's 64 MiB.
#   nice -n 19 bash bench/cuda/pack_types.sh        (then: carry .devbin/types, run types_h200.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/pack_bins.sh
rm -rf .devbin/types
pack_bins .devbin/types strata model_check cuda_op_harness
