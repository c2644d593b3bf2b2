# Builds the libFuzzer targets of fuzz/ (scripts/fuzz.sh runs this file from the repository root;
# `make -f fuzz/fuzz.mk OUT=build-fuzz build-fuzz/fuzz_jinja` builds one).
#
# Every library source is compiled once, with the fuzzers' flags (clang, ASan + UBSan, coverage
# instrumentation), into $(OUT)/obj/; -MMD tracks the headers each includes, so an edit rebuilds
# only what depends on it, and every target links the same objects. Each fuzz_<name> links its own
# fuzz/fuzz_<name>.cpp with the layers it needs (only gguf + text for most: no runtime, no CPU
# kernels). write_seeds writes the generated seed corpora (tiny models, tokenizer lines, templates).
OUT ?= build-fuzz
ROOT := $(CURDIR)
CXX := clang++
SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
CXXFLAGS := -std=c++20 -O1 -g -fno-omit-frame-pointer -ffp-contract=off -Isrc $(SAN) -MMD -MP
LIBS := -lpcre2-8 -lfmt

gguf_src := $(sort $(wildcard src/gguf/*.cpp))
graph_src := $(sort $(wildcard src/ir/*.cpp src/ir/ops/*.cpp src/frontend/*.cpp src/frontend/translators/*.cpp src/builder/*.cpp))
text_src := $(sort $(wildcard src/text/*.cpp))
grammar_src := $(sort $(wildcard src/grammar/*.cpp))
# PromptFormat, with the tool-call formats it analyzes and the grammar vocabulary it builds
prompt_src := src/pipeline/prompt.cpp $(sort $(wildcard src/pipeline/tool_calls*.cpp)) $(grammar_src)
request_src := src/server/openai_request.cpp

obj = $(patsubst %.cpp,$(OUT)/obj/%.o,$(1))
TARGETS := gguf gguf_graph tokenizer jinja chat request sampler grammar

$(OUT)/fuzz_gguf: $(call obj,$(gguf_src))
$(OUT)/fuzz_gguf_graph: $(call obj,$(gguf_src) $(graph_src) $(text_src) $(prompt_src))
$(OUT)/fuzz_tokenizer: $(call obj,$(gguf_src) $(text_src))
$(OUT)/fuzz_jinja: $(call obj,$(gguf_src) $(text_src))
$(OUT)/fuzz_chat: $(call obj,$(gguf_src) $(text_src) $(prompt_src) $(request_src))
$(OUT)/fuzz_request: $(call obj,$(gguf_src) $(text_src) $(prompt_src) $(request_src))
$(OUT)/fuzz_sampler: $(call obj,$(gguf_src) $(text_src))
$(OUT)/fuzz_grammar: $(call obj,$(gguf_src) $(text_src) $(grammar_src))
$(OUT)/write_seeds: $(call obj,$(gguf_src) $(text_src))

all: $(addprefix $(OUT)/fuzz_,$(TARGETS)) $(OUT)/write_seeds
.PHONY: all
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SECONDARY:

# The flags are part of every object: a change of flags rebuilds everything.
$(shell mkdir -p $(OUT); echo '$(CXX) $(CXXFLAGS)' | cmp -s - $(OUT)/flags 2>/dev/null || echo '$(CXX) $(CXXFLAGS)' > $(OUT)/flags)

# Library code: coverage instrumentation without libFuzzer's main.
$(OUT)/obj/src/%.o: src/%.cpp $(OUT)/flags
	@mkdir -p $(dir $@)
	@echo "fuzz: compiling $<" >&2
	@$(CXX) $(CXXFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

# The targets' own files (GGFLOW_ROOT: where the vocabularies and models are found).
$(OUT)/obj/fuzz/%.o: fuzz/%.cpp $(OUT)/flags
	@mkdir -p $(dir $@)
	@echo "fuzz: compiling $<" >&2
	@$(CXX) $(CXXFLAGS) -fsanitize=fuzzer-no-link -DGGFLOW_ROOT='"$(ROOT)"' -Ifuzz -c $< -o $@

$(OUT)/fuzz_%: $(OUT)/obj/fuzz/fuzz_%.o
	@echo "fuzz: linking $@" >&2
	@$(CXX) $(SAN) -fsanitize=fuzzer $^ $(LIBS) -o $@

$(OUT)/write_seeds: $(OUT)/obj/fuzz/write_seeds.o
	@echo "fuzz: linking $@" >&2
	@$(CXX) $(SAN) $^ $(LIBS) -o $@

-include $(wildcard $(OUT)/obj/src/*/*.d $(OUT)/obj/src/*/*/*.d $(OUT)/obj/fuzz/*.d)
