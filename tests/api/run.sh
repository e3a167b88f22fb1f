#!/usr/bin/env bash
# run.sh: ctest's entry to the node tests of `strata serve` (cmake/parts/server.cmake).
#   run.sh api STRATA_BIN   tests/api/*.test.mjs: the openai and @anthropic-ai/sdk clients
#   run.sh web STRATA_BIN   tests/web/*.test.mjs: the web app in headless chromium (playwright-core),
#                           on the echo engine and on the demo model; STRATA_UPDATE_SCREENSHOT=1
#                           writes docs/screenshot-chat.png (else it goes to the build directory)
# Exits 77 (ctest: skipped) when node, the npm packages (tests/api/node_modules, installed by
# tools/setup.sh from tests/api/package.json) or, for web, /usr/bin/chromium are missing.
set -uo pipefail
suite=$1
# Absolute, since the tests run from their own directory.
export STRATA_BIN=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
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
# Screenshots go beside the binary unless STRATA_UPDATE_SCREENSHOT=1 (then into docs/).
export STRATA_BUILD_DIR=${STRATA_BUILD_DIR:-$(dirname "$STRATA_BIN")}
# The web tests import the packages of tests/api/node_modules.
export NODE_PATH="$here/node_modules"
cd "$here/../$suite" && exec node --test --test-concurrency=1 ./*.test.mjs
