#!/usr/bin/env bash
# The default model requantized by llama.cpp's own llama-quantize (bench/install_llamacpp.sh) to
# the types llama.cpp has its best x86 paths for, for the comparisons of docs/BENCHMARKS.md:
#   bench/requantize.sh [OUT_DIR]     default OUT_DIR: ~/.cache/ggflow/requantized
# writes OUT_DIR/smollm2-135m-instruct-{q4_0,q8_0}.gguf (outside the repository) and prints their
# paths. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-$HOME/.cache/ggflow/requantized}
SRC=models/smollm2-135m-instruct-q4_1.gguf
[ -f "$SRC" ] || { echo "requantize: $SRC is missing (run scripts/setup.sh)" >&2; exit 1; }
BIN=$(bench/install_llamacpp.sh | tail -1)
mkdir -p "$OUT"
for t in q4_0 q8_0; do
  dst="$OUT/smollm2-135m-instruct-$t.gguf"
  T=$(echo "$t" | tr a-z A-Z)
  [ -f "$dst" ] || "$BIN/llama-quantize" --allow-requantize "$SRC" "$dst" "$T" >&2
  echo "$dst"
done
