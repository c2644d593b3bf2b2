#!/bin/sh
# A .gguf requantized with llama.cpp's own llama-quantize (built outside the repository by
# bench/install_llamacpp.sh) to each TYPE, into ~/.cache/ggflow/requantized/<stem>-<TYPE>.gguf
# (made once, kept); prints the files' paths, one a line, for bench/compare_llamacpp.py.
# Requantizing a Q4_K_M file to a wider type adds no quality, only the type: this is for speed.
#
#   bench/requantize.sh models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf Q8_0 Q6_K Q5_K_M
set -eu
[ $# -ge 2 ] || { echo "usage: $0 MODEL.gguf TYPE..." >&2; exit 2; }
model=$1
shift
[ -f "$model" ] || { echo "$0: $model does not exist (make models fetches the real files)" >&2; exit 1; }
bin=$(JOBS="${JOBS:-2}" "$(dirname "$0")/install_llamacpp.sh")
out="${GGFLOW_CACHE:-$HOME/.cache/ggflow}/requantized"
mkdir -p "$out"
stem=$(basename "$model" .gguf)
for t in "$@"; do
  f="$out/$stem-$t.gguf"
  if [ ! -s "$f" ]; then
    LD_LIBRARY_PATH="$bin" "$bin/llama-quantize" --allow-requantize "$model" "$f.tmp" "$t" 2 >/dev/null 2>&1 ||
      { echo "$0: llama-quantize $model -> $t failed" >&2; rm -f "$f.tmp"; exit 1; }
    mv "$f.tmp" "$f"
  fi
  echo "$f"
done
