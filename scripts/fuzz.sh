#!/usr/bin/env bash
# Build the GGUF reader's libFuzzer target with clang under ASan+UBSan and run it for a bounded
# time (FUZZ_SECONDS, default 60) from the regression corpus (tests/gguf/corpus.cpp) plus small
# real files. Any crash, leak or sanitizer finding fails the run and leaves the input in
# build-fuzz/artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
out=build-fuzz
mkdir -p $out/seeds $out/work $out/artifacts
flags="-std=c++20 -O1 -g -fno-omit-frame-pointer -ffp-contract=off -Isrc -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
srcs="src/gguf/types.cpp src/gguf/value.cpp src/gguf/bytes.cpp src/gguf/file.cpp src/gguf/dequant.cpp src/gguf/writer.cpp"
bin=$out/fuzz_gguf
if [ ! -x $bin ] || [ -n "$(find src/base src/gguf fuzz -newer $bin -name '*.[ch]*' | head -1)" ]; then
  echo "fuzz: building $bin" >&2
  clang++ $flags $srcs fuzz/fuzz_gguf.cpp -lfmt -o $bin
fi
# Seeds: the malformed + valid corpus written by the test helper, and the tiny shared vocabularies.
corpus_tool=${GGUF_CORPUS_TOOL:-build/tests/gguf/gguf_corpus}
if [ -x "$corpus_tool" ]; then "$corpus_tool" $out/seeds; fi
for f in ../shared/data/tokenizer/ggml-vocab-{gpt-2,llama-spm,phi-3}.gguf; do [ -f "$f" ] && cp "$f" $out/seeds/; done
echo "fuzz: running the GGUF reader for ${secs}s under ASan+UBSan ($(ls $out/seeds | wc -l) seeds)" >&2
# -rss_limit_mb: a bounded reader never comes near it; -max_len keeps inputs small and fast.
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
  $bin $out/work $out/seeds -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 \
  -artifact_prefix=$out/artifacts/ -print_final_stats=1 2> $out/fuzz.log || {
    tail -40 $out/fuzz.log >&2
    echo "fuzz: FAILED (crash, leak or sanitizer report above; input in $out/artifacts/)" >&2
    exit 1
  }
grep -E "stat::number_of_executed_units|cov:" $out/fuzz.log | tail -2 >&2
echo "fuzz: no crash, leak or sanitizer finding" >&2
