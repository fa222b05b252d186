#!/usr/bin/env bash
# Regenerates plugins/bpe_tokenizer/unicode_tables.inc (the Unicode properties of the BPE pre-tokenizer's
# split rules) from this machine's ICU (libicu-dev). Run it after ICU's Unicode version changes; then
# test_pretokenizer checks the tables and the split rules against ICU again. The file is committed, so a
# build without ICU (the WebAssembly build) needs neither ICU nor this step.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
g++ -std=c++17 -O1 -o "$tmp/gen" "$root/tools/gen-unicode-tables.cpp" $(pkg-config --cflags --libs icu-uc)
"$tmp/gen" > "$tmp/unicode_tables.inc"
mv "$tmp/unicode_tables.inc" "$root/plugins/bpe_tokenizer/unicode_tables.inc"
head -n 1 "$root/plugins/bpe_tokenizer/unicode_tables.inc"
