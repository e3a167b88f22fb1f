#!/bin/sh
# corpus.sh: builds the demo model's corpus from Debian packages.
#   tools/train-demo/corpus.sh [DEB_DIR] [OUT_DIR]
# DEB_DIR holds (or receives, by `apt-get download`) wordnet-base, dict-jargon, dict-devil,
# bible-kjv-text and bible-kjv (whose `bible` program decodes the KJV's compressed text).
# OUT_DIR (default: .corpus/ in the repository root, ignored by git) receives train.jsonl.gz and
# heldout.jsonl.gz; see corpus.py for the recipe.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
debs=${1:-$root/.corpus/debs}
out=${2:-$root/.corpus}
mkdir -p "$debs" "$out"
for p in wordnet-base dict-jargon dict-devil bible-kjv-text bible-kjv; do
    ls "$debs"/${p}_*.deb >/dev/null 2>&1 || (cd "$debs" && apt-get download "$p")
done
ex=$(mktemp -d)
trap 'rm -rf "$ex"' EXIT
for f in "$debs"/wordnet-base_*.deb "$debs"/dict-jargon_*.deb "$debs"/dict-devil_*.deb \
         "$debs"/bible-kjv-text_*.deb "$debs"/bible-kjv_*.deb; do
    dpkg-deb -x "$f" "$ex"
done
"$ex/usr/bin/bible" -p "$ex/usr/lib" -f gen1:1-rev22:21 </dev/null >"$ex/kjv.txt"
python3 "$here/corpus.py" --root "$ex" --kjv "$ex/kjv.txt" --out "$out" --seed 1234
