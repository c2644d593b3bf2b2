#!/usr/bin/env bash
# Build the libFuzzer targets of fuzz/ with clang under ASan+UBSan (fuzz/fuzz.mk: every library
# source compiled once into build-fuzz/obj/, rebuilt only when it or a header it includes changed)
# and run each for a bounded time, one after the other, from its seeds:
#   fuzz_gguf       GGUF reader
#   fuzz_gguf_graph what opening a model does with a parsed file: builder, translation to the IR,
#                   verifier, tokenizer and chat template from its metadata
#   fuzz_tokenizer  encode/decode, round trips (BPE, SentencePiece, WordPiece, raw BPE)
#   fuzz_jinja      chat-template engine: template x conversation, under its sandbox limits
#   fuzz_chat       messages JSON -> parse_messages -> SmolLM2's template -> encode
#   fuzz_request    request bodies -> parse_body + parse_chat/completion_request + context check
#   fuzz_sampler    SamplingParams::validate, Sampler, step_logprobs, StopStrings
#   fuzz_grammar    GBNF / JSON schema -> grammar under limits, then masks vs accept over a small vocabulary
# Each file in fuzz/ says what its target checks.
#
# Environment:
#   FUZZ_SECONDS  seconds per target (default 60; `make test` passes FUZZ_TEST_SECONDS, 10)
#   FUZZ_TARGETS  targets to run, e.g. "jinja chat" (default: all of the above)
#   FUZZ_JOBS     parallel compile jobs (default 2)
#   FUZZ_TIMEOUT  seconds one input may take before it counts as a hang (default 20)
# Seeds: fuzz/seeds/<target>/ (committed), build-fuzz/seeds/<target>/ and build-fuzz/seeds/gguf/
# (written by write_seeds and the GGUF corpus tool), fuzz/regressions/<target>/ (the inputs of
# fixed crashes: every run replays them first). What a run finds is
# kept in build-fuzz/corpus/<target>/ and seeds the next run. Any crash, leak, sanitizer report,
# hang, out-of-memory or violated property fails the run and leaves the input in
# build-fuzz/artifacts/<target>/ (replay: build-fuzz/fuzz_<target> FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-60}
jobs=${FUZZ_JOBS:-2}
hang=${FUZZ_TIMEOUT:-20}
all="gguf gguf_graph tokenizer jinja chat request sampler grammar"
targets=""
for t in ${FUZZ_TARGETS:-$all}; do
  t=${t#fuzz_}
  case " $all " in *" $t "*) targets="$targets $t" ;; *) echo "fuzz: unknown target '$t' (targets: $all)" >&2; exit 2 ;; esac
done
out=build-fuzz
start=$(date +%s)

bins="$out/write_seeds"
for t in $targets; do bins="$bins $out/fuzz_$t"; done
make --no-print-directory -f fuzz/fuzz.mk OUT=$out -j"$jobs" $bins
built=$(date +%s)
echo "fuzz: build up to date ($((built - start)) s)" >&2

# Generated seeds, fresh each run (cheap): tiny models, tokenizer lines, shared templates, and
# the GGUF malformed corpus when the test build has its writer (both GGUF targets share them).
rm -rf $out/seeds
$out/write_seeds $out/seeds >&2
corpus_tool=${GGUF_CORPUS_TOOL:-build/tests/gguf/gguf_corpus}
if [ -x "$corpus_tool" ]; then "$corpus_tool" $out/seeds/gguf; fi
for f in ../shared/data/tokenizer/ggml-vocab-{gpt-2,llama-spm,phi-3}.gguf; do [ -f "$f" ] && cp "$f" $out/seeds/gguf/; done

failed=""
summary=""
for t in $targets; do
  name=fuzz_$t
  if [ "$t" = chat ] || [ "$t" = request ]; then
    if [ ! -f models/smollm2-135m-instruct-q4_1.gguf ]; then
      if [ "${GGFLOW_REQUIRE_MODELS:-}" = 1 ]; then
        echo "fuzz: $name needs models/smollm2-135m-instruct-q4_1.gguf (GGFLOW_REQUIRE_MODELS=1: scripts/setup.sh installs it)" >&2
        failed="$failed $name"
      else
        echo "fuzz: $name skipped: models/smollm2-135m-instruct-q4_1.gguf is missing (scripts/setup.sh installs it)" >&2
      fi
      continue
    fi
  fi
  # Per target: the longest input worth trying, the dictionary of its input language, and seeds.
  args=()
  dirs=("$out/corpus/$name")
  case $t in
    gguf | gguf_graph) args+=(-max_len=65536); dirs+=("$out/seeds/gguf") ;;
    tokenizer) args+=(-max_len=4096) ;;
    jinja) args+=(-max_len=32768 -dict=fuzz/dicts/jinja.dict) ;;
    chat | request) args+=(-max_len=8192 -dict=fuzz/dicts/json.dict) ;;
    sampler) args+=(-max_len=4096) ;;
    grammar) args+=(-max_len=8192 -dict=fuzz/dicts/json.dict) ;;
  esac
  for d in fuzz/seeds/$name $out/seeds/$name fuzz/regressions/$name; do [ -d "$d" ] && dirs+=("$d"); done
  mkdir -p "$out/corpus/$name" "$out/artifacts/$name" $out/logs
  log=$out/logs/$name.log
  echo "fuzz: running $name for ${secs}s under ASan+UBSan" >&2
  # -rss_limit_mb (and the malloc limit it implies): the targets bound their own memory far below.
  if ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 UBSAN_OPTIONS=print_stacktrace=1 \
    "$out/$name" "${dirs[@]}" "${args[@]}" -max_total_time="$secs" -timeout="$hang" -rss_limit_mb=2048 \
    -artifact_prefix="$out/artifacts/$name/" -print_final_stats=1 -print_funcs=0 > "$log" 2>&1; then
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
    cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+' || echo "cov: ?")
    line="$name: ${secs} s, $runs executions, $cov"
    echo "fuzz: $line" >&2
    summary="$summary\n  $line"
  else
    tail -50 "$log" >&2
    echo "fuzz: $name FAILED (crash, leak, hang, out-of-memory or sanitizer report above; input in $out/artifacts/$name/, log $log)" >&2
    failed="$failed $name"
  fi
done
echo -e "fuzz: done in $(($(date +%s) - start)) s (build $((built - start)) s)$summary" >&2
if [ -n "$failed" ]; then
  echo "fuzz: FAILED:$failed" >&2
  exit 1
fi
echo "fuzz: no crash, leak or sanitizer finding" >&2
