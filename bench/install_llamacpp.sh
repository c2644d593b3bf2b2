#!/usr/bin/env bash
# Builds llama.cpp's own benchmark tools (llama-bench, llama-batched-bench, llama-speculative), its quantizer
# (llama-quantize, for bench/requantize.sh), its OpenAI-compatible server (llama-server) and its embedding
# tool (llama-embedding, the oracle of python/make_embedding_goldens.py) from the source that the llama-cpp-python package on PyPI vendors, outside
# the repository, for the side-by-side comparisons in bench/ (never part of the build or the tests).
# Nothing is downloaded besides that sdist: no libcurl, and the server is built without its web UI
# (LLAMA_USE_PREBUILT_UI=OFF: otherwise its build fetches the UI from a Hugging Face bucket).
#   bench/install_llamacpp.sh [DIR]      default DIR: ~/.cache/ggflow/llama.cpp
#   LLAMA_ISA=avx2 bench/install_llamacpp.sh [DIR]
# The second builds llama-bench and llama-batched-bench in DIR/build-avx2 for x86-64 with AVX2,
# FMA and F16C and no AVX-512 or AVX-VNNI (GGML_NATIVE=OFF): on an AVX-512 host it stands in for an
# AVX2-only host beside GGFLOW_ISA=avx2 (bench/compare_llamacpp.py --isa avx2, make bench-avx2).
# Prints the directory holding the binaries. Idempotent.
set -euo pipefail
VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
DIR=${1:-$HOME/.cache/ggflow/llama.cpp-$VERSION}
ISA=${LLAMA_ISA:-native}
if [ "$ISA" != native ] && [ "$ISA" != avx2 ]; then
  echo "LLAMA_ISA=$ISA: not a build this script makes (native or avx2)" >&2; exit 2
fi
if [ "$ISA" = avx2 ] && [ -x "$DIR/build-avx2/bin/llama-bench" ]; then
  echo "$DIR/build-avx2/bin"; exit 0
fi
if [ "$ISA" = native ] && grep -q -- "-mno-amx-int8" "$DIR/build/CMakeCache.txt" 2>/dev/null && [ -x "$DIR/build/bin/llama-bench" ] && [ -x "$DIR/build/bin/llama-batched-bench" ] \
   && [ -x "$DIR/build/bin/llama-server" ] && [ -x "$DIR/build/bin/llama-quantize" ] && [ -x "$DIR/build/bin/llama-speculative" ] \
   && [ -x "$DIR/build/bin/llama-embedding" ]; then
  echo "$DIR/build/bin"; exit 0
fi
mkdir -p "$DIR"
cd "$DIR"
if [ ! -d src ]; then
  python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d dl >&2
  mkdir -p src && tar -xzf dl/llama_cpp_python-"$VERSION".tar.gz -C src --strip-components=1
fi
if [ "$ISA" = avx2 ]; then
  cmake -S src/vendor/llama.cpp -B build-avx2 -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DGGML_AVX=ON \
    -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
  cmake --build build-avx2 -j"${JOBS:-2}" --target llama-bench llama-batched-bench >&2
  echo "$DIR/build-avx2/bin"; exit 0
fi
# AMX off: on a host that reports AMX but runs in a VM that does not grant the tile state, llama.cpp's
# AMX matmul crashes (SIGSEGV in ggml_backend_amx_mul_mat, seen 2026-12-01); its AVX-512 / AVX2
# paths (repacked Q4_0 included) stay on. Explicit -mno-* flags win over -march=native in GCC.
cmake -S src/vendor/llama.cpp -B build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >&2
cmake --build build -j"${JOBS:-2}" --target llama-bench llama-batched-bench llama-server llama-quantize llama-speculative \
  llama-embedding >&2
echo "$DIR/build/bin"
