# common.sh: sourced by the CLI tests (tests/cli/*.sh) with the strata binary as $1: sets bin, the
# demo model's path (skipping, exit 77, when it is missing), a scratch folder $dir removed at exit,
# and check CONDITION MESSAGE, which records a failure in $fail instead of stopping.
set -u
bin=$1
src=${STRATA_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
model=$src/models/strata-demo-q8_0.gguf
[ -r "$model" ] || { echo "skipped: $model is missing"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/strata-cli-XXXXXX")
cleanup() { rm -rf "$dir"; }
trap cleanup EXIT
fail=0
check() { if eval "$1"; then :; else echo "FAILED: $2"; fail=1; fi; }
