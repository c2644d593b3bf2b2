#!/bin/sh
# `ggflow inspect` and `ggflow graph --layout raw|sdpa|paged` on the synthetic model of every
# family (python/make_family_models.py, written by the family_models fixture); `ggflow run` on each
# layout gives the same ids.
# usage: check_families_cli.sh GGFLOW FAMILY_DIR
set -eu
G=$1; DIR=$2
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
n=0
for M in "$DIR"/*.gguf; do
  name=$(basename "$M" .gguf)
  arch=$("$G" inspect "$M" | sed -n 's/^architecture: *//p')
  [ -n "$arch" ] || { echo "FAIL: $name: inspect printed no architecture"; exit 1; }
  "$G" inspect "$M" --tensors --json > "$T/i.json"
  grep -q '"tensors"' "$T/i.json" || { echo "FAIL: $name: inspect --json --tensors"; exit 1; }
  for l in raw sdpa paged; do
    "$G" graph -m "$M" --layout $l --format text > "$T/g.$l" || { echo "FAIL: $name: graph --layout $l"; exit 1; }
    "$G" run --engine $l -m "$M" --tokens 1,22,333,4444,55,6,777 -n 6 > "$T/ids.$l" || { echo "FAIL: $name: run --engine $l"; exit 1; }
  done
  grep -q "PagedAttention(" "$T/g.paged" || { echo "FAIL: $name: no PagedAttention in the paged graph"; exit 1; }
  grep -q "ScaledDotProductAttention(" "$T/g.sdpa" || { echo "FAIL: $name: no SDPA in the sdpa graph"; exit 1; }
  cmp -s "$T/ids.raw" "$T/ids.sdpa" && cmp -s "$T/ids.raw" "$T/ids.paged" || { echo "FAIL: $name: the layouts gave different ids"; exit 1; }
  echo "$name ($arch): inspect, graph and run in 3 layouts ok"
  n=$((n + 1))
done
[ "$n" -ge 28 ] || { echo "FAIL: $n family models in $DIR, expected 28 (7 families x F16, Q8_0, Q4_0, Q4_1)"; exit 1; }
echo "families cli: ok ($n models)"
