#!/bin/sh
# `ggflow run --engine raw|sdpa|paged` gives the same ids and byte-identical --dump-logits files;
# `ggflow graph` prints every layout in both formats; docs/LAYOUTS.md holds the key-shape tables
# that `ggflow graph --key-shapes` prints today (regenerate the doc when this fails).
# usage: check_layouts_cli.sh GGFLOW ROOT SHARED
set -eu
G=$1; ROOT=$2; SHARED=$3
M=$SHARED/models/stories260K.gguf
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
IDS=1,403,9,22,71,301,12,88,5,67,2,90,33,41,17,8,120,6,55,200,13
for e in raw sdpa paged; do "$G" run --engine $e -m "$M" --tokens $IDS -n 16 --dump-logits "$T/$e.bin" > "$T/$e.ids"; done
for e in sdpa paged; do
  cmp "$T/raw.ids" "$T/$e.ids" || { echo "FAIL: $e ids differ from raw"; exit 1; }
  cmp "$T/raw.bin" "$T/$e.bin" || { echo "FAIL: $e logits differ from raw"; exit 1; }
done
test "$(stat -c %s "$T/raw.bin")" -eq $((16 * 512 * 4)) || { echo "FAIL: dump is not [16, 512] f32"; exit 1; }
for l in raw sdpa paged; do
  for f in text dot; do "$G" graph -m "$M" --layout $l --format $f > "$T/g.$l.$f"; test -s "$T/g.$l.$f"; done
done
grep -q "PagedAttention(" "$T/g.paged.text" || { echo "FAIL: no PagedAttention in the paged graph"; exit 1; }
grep -q "ScaledDotProductAttention(" "$T/g.sdpa.text" || { echo "FAIL: no SDPA in the sdpa graph"; exit 1; }
grep -q "^digraph" "$T/g.paged.dot" || { echo "FAIL: dot output"; exit 1; }
"$G" graph -m "$M" --key-shapes > "$T/keys.md"
while IFS= read -r line; do
  grep -qxF -- "$line" "$ROOT/docs/LAYOUTS.md" || { echo "FAIL: docs/LAYOUTS.md is stale, missing: $line"; exit 1; }
done < "$T/keys.md"
echo "layouts cli: ok"
