#!/usr/bin/env bash
# run.sh: ctest's entry to the node tests of `strata serve` (cmake/parts/server.cmake).
#   run.sh api STRATA_BIN   tests/api/*.test.mjs: the openai and @anthropic-ai/sdk clients
#   run.sh web STRATA_BIN   tests/web/*.test.mjs: the web app in headless chromium (playwright-core)
# Exits 77 (ctest: skipped) when node, the npm packages (tests/api/node_modules, installed by
# tools/setup.sh from tests/api/package.json) or, for web, /usr/bin/chromium are missing.
set -uo pipefail
suite=$1
export STRATA_BIN=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "skipped: node is not installed"; exit 77; }
for m in openai @anthropic-ai/sdk playwright-core; do
  [ -d "$here/node_modules/$m" ] || { echo "skipped: tests/api/node_modules/$m is missing (run tools/setup.sh)"; exit 77; }
done
if [ "$suite" = web ]; then
  chrome=${STRATA_CHROMIUM:-/usr/bin/chromium}
  [ -x "$chrome" ] || { echo "skipped: $chrome is missing (apt-get install chromium)"; exit 77; }
  export STRATA_CHROMIUM=$chrome
fi
# The web tests import the packages of tests/api/node_modules.
export NODE_PATH="$here/node_modules"
cd "$here/../$suite" && exec node --test --test-concurrency=1 ./*.test.mjs
