#!/usr/bin/env bash
# The sanitizer builds (make test-asan, make test-tsan, and make test): a build of the test
# executables below with the sanitizer in GGFLOW_SANITIZE, each run once; any report fails.
#   scripts/sanitize.sh address   AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/)
#   scripts/sanitize.sh thread    ThreadSanitizer (build-tsan/)
# The subsets (chosen to keep CI under 30 minutes on 2 cores; the full suite runs unsanitized):
#   address: the GGUF reader and its malformed corpus, IR, patterns and passes, tokenizers,
#            templates (engine, conformance, sandbox), sampler, block manager and scheduler, the
#            batching pipeline and the server's request parser and engine loop on small models,
#            the grammar engine and JSON Schema converter, the tool-call formats
#   thread:  the thread pool, the scheduler, the batching pipeline, the engine loop with
#            concurrent submitters and cancellers, the grammar mask cache shared by threads
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: scripts/sanitize.sh address|thread}
case "$mode" in
  address)
    dir=build-asan
    tests=(test_gguf_file test_gguf_malformed test_ir test_pattern test_transforms
           text_test_tokenizer_unit text_test_tokenizer_conformance text_test_template_engine
           text_test_template_conformance text_test_template_sandbox text_test_sampler
           serving_test_block_manager serving_test_scheduler serving_test_scheduler_requests serving_test_speculative
           test_continuous_batching test_openai_request test_engine_loop
           grammar_test_gbnf_parser grammar_test_grammars grammar_test_json_schema grammar_test_matcher
           test_tool_calls)
    # Whole real models are minutes under ASan: the small ones (stories260K) cover the same code.
    filter='-*SmolLM2*:*Smol*:*Gemma*:*gemma*:*RealModel*'
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=0
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    ;;
  thread)
    dir=build-tsan
    tests=(test_thread_pool serving_test_scheduler serving_test_scheduler_requests
           test_continuous_batching test_engine_loop grammar_test_matcher)
    filter='-*SmolLM2*:*Smol*:*Gemma*:*gemma*'
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    ;;
  *) echo "sanitize: unknown mode '$mode' (address or thread)" >&2; exit 2 ;;
esac

[ -f $dir/build.ninja ] || cmake -S . -B $dir -G Ninja -DGGFLOW_SANITIZE=$mode -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -g1" >/dev/null  # -O1 -g1: half the compile time of -O2 -g, still symbolized
# Every listed executable must exist as a target (a renamed test must be renamed here too).
known=$(ninja -C $dir -t targets all 2>/dev/null | cut -d: -f1)
targets=()
for t in "${tests[@]}"; do
  grep -qx "$t" <<<"$known" || { echo "sanitize[$mode]: no test executable '$t' (renamed? update scripts/sanitize.sh)" >&2; exit 1; }
  targets+=("$t")
done
echo "sanitize[$mode]: building ${#targets[@]} test executables in $dir/" >&2
cmake --build $dir -j"${JOBS:-2}" --target "${targets[@]}" >$dir/build.log 2>&1 || { tail -30 $dir/build.log >&2; exit 1; }

failed=()
for t in "${targets[@]}"; do
  exe=$(find $dir/tests -name "$t" -type f -executable | head -1)
  [ -n "$exe" ] || { echo "sanitize[$mode]: $t was not built" >&2; failed+=("$t"); continue; }
  start=$SECONDS
  if "$exe" --gtest_filter="$filter" --gtest_brief=1 >$dir/$t.log 2>&1; then
    echo "sanitize[$mode]: $t ok ($((SECONDS - start)) s)" >&2
  else
    echo "sanitize[$mode]: $t FAILED ($((SECONDS - start)) s); last lines of $dir/$t.log:" >&2
    tail -40 $dir/$t.log >&2
    failed+=("$t")
  fi
done
if ((${#failed[@]})); then
  echo "sanitize[$mode]: FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "sanitize[$mode]: no sanitizer report in ${#targets[@]} test executables" >&2
