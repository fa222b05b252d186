#!/usr/bin/env bash
# Reproduce glassbox's toy model: corpus -> tokenizer -> train -> export -> check.
#
#   models/toy/recipe.sh [OUT_DIR]
#
# OUT_DIR defaults to models/toy, i.e. it overwrites the committed toy.bin,
# toy-tok.bin, check.json and SHA256SUMS.  Intermediate files (corpus,
# sentencepiece model, legacy-format model, logs) go to models/toy/build/
# (git-ignored; override with BUILD=...).
#
# Recipe-only dependencies (Debian 12 packages): python3-torch, python3-numpy,
# sentencepiece, python3-sentencepiece; optional libopenblas0-pthread (see below).
# All seeds are fixed; see README.md for what is and is not bit-reproducible.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$(mkdir -p "${1:-$HERE}" && cd "${1:-$HERE}" && pwd)"
BUILD="${BUILD:-$HERE/build}"
PY=/usr/bin/python3          # Debian's python, where python3-torch lives
mkdir -p "$BUILD"
cd "$HERE"

# Debian's python3-torch calls the system libblas.so.3, which is the slow
# reference (netlib) BLAS unless an optimised one is selected.  If Debian's
# OpenBLAS is installed, use it for this recipe only (training ~5x faster),
# without changing the system-wide alternative.
OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread
if [ -e "$OPENBLAS/libblas.so.3" ]; then
  export LD_LIBRARY_PATH="$OPENBLAS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OPENBLAS_NUM_THREADS=1
else
  echo "recipe: note: libopenblas0-pthread not installed; training with the reference BLAS will be slow" >&2
fi

start=$(date +%s)

echo "== 1/4 corpus"
# corpus.txt: all four kinds (training); corpus-tok.txt: the first three only,
# drawn exactly as before conversations were added (the tokenizer's input).
$PY grammar.py --seed 1234 --weather 24000 --taglines 4000 --stories 10000 \
  --conversations 12000 --summaries 5000 "$BUILD/corpus.txt" "$BUILD/corpus-tok.txt"

echo "== 2/4 tokenizer"
$PY tokenizer.py --vocab 1024 "$BUILD/corpus-tok.txt" "$BUILD/toy-spm" "$OUT/toy-tok.bin"

echo "== 3/4 train + export"
$PY train.py "$BUILD/corpus.txt" "$BUILD/toy-spm.model" "$OUT/toy.bin" \
  --legacy "$BUILD/toy-legacy.bin" \
  --dim 64 --hidden_dim 176 --n_layers 4 --n_heads 4 --n_kv_heads 2 --seq_len 128 \
  --batch 32 --steps 2000 --lr 3e-3 --min_lr 3e-5 --warmup 100 \
  --weight_decay 0.1 --grad_clip 1.0 --seed 1337 --threads 1 \
  2>&1 | tee "$BUILD/train.log"

echo "== 4/4 check (numpy forward of the exported files)"
$PY check.py "$OUT/toy.bin" "$OUT/toy-tok.bin" --legacy "$BUILD/toy-legacy.bin" \
  --spm "$BUILD/toy-spm.model" --corpus "$BUILD/corpus.txt" --seed 42 \
  --json "$OUT/check.json" 2>&1 | tee "$BUILD/check.log"

(cd "$OUT" && sha256sum toy.bin toy-tok.bin > SHA256SUMS && cat SHA256SUMS)
echo "recipe: done in $(( $(date +%s) - start ))s -> $OUT"
