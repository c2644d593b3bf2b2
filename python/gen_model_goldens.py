#!/usr/bin/env python3
"""Golden logits from llama.cpp (llama-cpp-python) for ggflow's model conformance tests.

For each model: a fixed prompt (token ids, tokenized once by llama.cpp and then stored) is
prefilled with logits for every position (logits_all=True), then a few greedy decode steps feed
llama.cpp's own argmax back. The output JSON (tests/conformance/goldens/<name>.json) records:

  tokens          every token fed, prompt first then the decode tokens (teacher forcing input)
  n_prompt        how many of them are the prompt
  rows[i]         the logits after token i: top-k ids and values (k = 32), argmax, the margin
                  between the top two logits, and a summary of the full row (mean, std, an xxhash
                  of the f32 bytes: informational, the row itself is not committed)
  full[i]         the whole row, only for small vocabularies (stories260K, 512 tokens)
  greedy          (stories260K, the family models, the Qwen2.5-Coder files) the greedy
  greedy_margins  continuation after the prompt, with llama.cpp's top-2 margin at each step

llama.cpp settings: n_threads=2, n_ctx=256, f32 K/V cache (type_k = type_v = 0), flash attention
off, so that the only numeric difference to ggflow's reference evaluator is llama.cpp's own
kernels (it converts activations to 8 bits (Q8_0/Q8_1/Q8_K) before dot products with quantized
weights, and to f16 for f16 weights; the evaluator computes in f32).

Needs llama-cpp-python (not in .venv): run with /tmp/oracle-venv/bin/python or any venv that has
`pip install llama-cpp-python numpy`.

usage: gen_model_goldens.py [--only NAME] [--qwen2 PATH] [--families DIR]
  the synthetic qwen2 file is written first by python/make_synthetic_qwen2.py (default path
  build-fe/synthetic-qwen2.gguf).
  --families DIR: also the small per-family models that python/make_family_models.py wrote into
  DIR (goldens family-<name>-<type>.json, e.g. family-phi3-q8_0.json; 16 greedy tokens each).
"""
import argparse
import hashlib
import json
import os
import sys

import numpy as np
import llama_cpp

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SHARED = os.path.normpath(os.path.join(ROOT, "..", "shared"))
OUT_DIR = os.path.join(ROOT, "tests", "conformance", "goldens")
TOP_K = 32

# name -> (path, prompt text, add_bos, decode steps, greedy tokens)
MODELS = {
    "stories260K": (os.path.join(SHARED, "models", "stories260K.gguf"), "Once upon a time, there was a little", True, 3, 32),
    "smollm2": (os.path.join(ROOT, "models", "smollm2-135m-instruct-q4_1.gguf"), "The capital of France is Paris, and the capital of Italy is", False, 4, 0),
    "gemma3": (os.path.join(ROOT, "models", "gemma3-270m-q4_k_m.gguf"), "The quick brown fox jumps over the lazy dog because", True, 4, 0),
    "qwen2-synthetic": (os.path.join(ROOT, "build-fe", "synthetic-qwen2.gguf"), "Hello world, this is a test", False, 3, 0),
}
# The real-size models (python/link_models.py --real-models): a code prompt (~30 tokens), then 24
# greedy steps, both as teacher-forced rows (top-32 each, not the 151936-wide rows) and as the
# greedy continuation with its margins.
CODE_PROMPT = ('def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n'
               '    """Merge two sorted lists into one sorted list in O(len(a) + len(b))."""\n')
for _size in ("0.5b", "1.5b"):
    MODELS["qwen2.5-coder-" + _size] = (os.path.join(ROOT, "models", f"qwen2.5-coder-{_size}-instruct-q4_k_m.gguf"),
                                        CODE_PROMPT, False, 24, 24)


def row_summary(row):
    row = np.asarray(row, dtype=np.float32)
    order = np.argsort(-row, kind="stable")
    top = order[:TOP_K]
    return {
        "argmax": int(order[0]),
        "margin": float(row[order[0]] - row[order[1]]),
        "top_ids": [int(i) for i in top],
        "top_logits": [float(row[i]) for i in top],
        "mean": float(row.astype(np.float64).mean()),
        "std": float(row.astype(np.float64).std()),
        "sha256_f32": hashlib.sha256(row.tobytes()).hexdigest()[:16],
    }


def plain_buffers():
    """Model parameters with llama.cpp's extra buffer types off (the repacked / AMX weight layouts):
    with them, llama-cpp-python 0.3.36 crashed (SIGSEGV) on the family models' Q8_0 files on a host
    that reports AMX inside a VM (llama-bench showed the crash in ggml_backend_amx_mul_mat); the plain
    ggml-cpu kernels compute the same function. Used for the family models."""
    p = ORIG_DEFAULT_PARAMS()
    p.use_extra_bufts = False
    return p


ORIG_DEFAULT_PARAMS = llama_cpp.llama_model_default_params


def make_llm(path, plain=False):
    llama_cpp.llama_cpp.llama_model_default_params = plain_buffers if plain else ORIG_DEFAULT_PARAMS
    return llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, n_ubatch=256, n_threads=2,
                           n_threads_batch=2, logits_all=True, type_k=0, type_v=0,
                           flash_attn=False, seed=0, verbose=False)


def generate(name, path, text, add_bos, n_decode, n_greedy):
    llm = make_llm(path, plain=name.startswith("family-"))
    prompt = llm.tokenize(text.encode(), add_bos=add_bos, special=False)
    n_vocab = llm.n_vocab()
    llm.reset()
    llm.eval(prompt)
    rows = [np.array(llm.scores[i], dtype=np.float32) for i in range(len(prompt))]
    tokens = list(prompt)
    for _ in range(n_decode):
        nxt = int(np.argmax(rows[-1]))
        tokens.append(nxt)
        llm.eval([nxt])
        rows.append(np.array(llm.scores[len(tokens) - 1], dtype=np.float32))
    out = {
        "model": name,
        "file": ("<families>/" + os.path.basename(path)) if name.startswith("family-") else os.path.relpath(path, ROOT),
        "oracle": f"llama-cpp-python {llama_cpp.__version__}, n_threads=2, f32 KV cache, flash_attn off"
                  + (", extra buffer types off" if name.startswith("family-") else ""),
        "prompt_text": text,
        "n_vocab": n_vocab,
        "n_prompt": len(prompt),
        "tokens": tokens,
        "rows": [row_summary(r) for r in rows],
    }
    if n_vocab <= 1024:
        out["full"] = [[float(f"{v:.7g}") for v in r] for r in rows]
    if n_greedy:
        # a fresh context: prompt, then argmax one token at a time (what `ggflow run` does)
        llm.reset()
        llm.eval(prompt)
        greedy = []
        last = np.array(llm.scores[len(prompt) - 1], dtype=np.float32)
        margins = []
        for _ in range(n_greedy):
            nxt = int(np.argmax(last))
            top2 = np.sort(last)[-2:]
            margins.append(float(top2[1] - top2[0]))
            greedy.append(nxt)
            llm.eval([nxt])
            last = np.array(llm.scores[len(prompt) + len(greedy) - 1], dtype=np.float32)
        out["greedy"] = greedy
        out["greedy_margins"] = margins  # llama.cpp's top-2 margin at each greedy step
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append")
    ap.add_argument("--qwen2", help="path of the synthetic qwen2 gguf")
    ap.add_argument("--families", help="directory of python/make_family_models.py's models")
    a = ap.parse_args()
    if a.families:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import make_family_models
        for name in make_family_models.model_names():
            MODELS["family-" + name] = (os.path.join(a.families, name + ".gguf"),
                                        "Hello world, this is a test of the model family", True, 3, 16)
    if a.qwen2:
        MODELS["qwen2-synthetic"] = (a.qwen2,) + MODELS["qwen2-synthetic"][1:]
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, (path, text, bos, n_decode, n_greedy) in MODELS.items():
        if a.only and name not in a.only:
            continue
        if not os.path.exists(path):
            print(f"skip {name}: {path} is missing", file=sys.stderr)
            continue
        g = generate(name, path, text, bos, n_decode, n_greedy)
        dst = os.path.join(OUT_DIR, name + ".json")
        with open(dst, "w") as f:
            json.dump(g, f, separators=(",", ":"))
        margins = [r["margin"] for r in g["rows"]]
        print(f"{name}: {len(g['tokens'])} positions ({g['n_prompt']} prompt), min top-2 margin {min(margins):.4f} -> {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
