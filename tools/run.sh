#!/usr/bin/env bash
# run.sh: the README's first command. Installs what is missing, builds, and runs strata: with no
# arguments, a chat with the demo model (models/strata-demo-q8_0.gguf); otherwise the arguments
# are strata's (`tools/run.sh serve`, `tools/run.sh run -p "..."`).
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" >/dev/null
if [ $# -eq 0 ]; then set -- chat; fi
exec build/strata "$@"
