#!/usr/bin/env bash
# pack_prefill.sh: .devbin/prefill/bins.tar.xz for prefill_h200.sh (pack_bins.sh).
#   nice -n 19 bash bench/cuda/pack_prefill.sh        (then: carry .devbin/prefill, run prefill_h200.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/pack_bins.sh
rm -rf .devbin/prefill
pack_bins .devbin/prefill strata model_check cuda_op_harness cuda_table_harness
