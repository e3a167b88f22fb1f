#!/usr/bin/env bash
# pack_spec.sh: what spec_h200.sh runs on the device machine, made here (no GPU needed):
# .devbin/spec/bins.tar.xz with strata and model_check (pack_bins.sh). No models: the tracked tree
# holds the demo model, and spec_h200.sh makes the others there.
#   nice -n 19 bash bench/cuda/pack_spec.sh        (then: carry .devbin/spec, run spec_h200.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/cuda/pack_bins.sh
rm -rf .devbin/spec
pack_bins .devbin/spec strata model_check
