#!/usr/bin/env bash
# run.sh: the README's first command. Installs what is missing, builds, and runs strata.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
exec build/strata "$@"
