#!/usr/bin/env python3
"""Golden logits from llama.cpp (llama-cpp-python) for ggflow's LoRA adapter conformance tests.

Base model models/smollm2-135m-instruct-q4_1.gguf with the synthetic adapters that
python/make_lora_adapters.py writes (models/smollm2-lora-a.gguf, models/smollm2-lora-b.gguf):

  lora-smollm2-a.json       adapter a (rank 8, alpha 16, F32), scale 1.0  -> effective 1.0 * 16 / 8 = 2.0
  lora-smollm2-b.json       adapter b (rank 4, no alpha key, F16), scale 1.0 -> effective 1.0
  lora-smollm2-a-half.json  adapter a, scale 0.5                           -> effective 0.5 * 16 / 8 = 1.0

Same conventions as python/gen_model_goldens.py (a short chat prompt, no BOS, see PROMPT): the
prompt is prefilled with logits for every position (logits_all=True), then a few greedy decode
steps feed llama.cpp's own argmax back (teacher forcing input). Each JSON records:

  model, file, adapter, adapter_sha256, scale, alpha (null: key absent), rank, effective_scale
  tokens / n_prompt / rows[i]   as in gen_model_goldens.py (top-32 ids and logits, argmax, top-2
                                margin, mean, std, a hash of the f32 row)
  greedy, greedy_margins        16 greedy tokens after the prompt (fresh context) with llama.cpp's
                                top-2 margin at each step; greedy_text their decoded text
  base_greedy, base_greedy_text the same 16 greedy tokens of the base model without the adapter
  first_diff                    first greedy step where adapter and base differ (null: none)

llama.cpp settings: n_threads=2, n_ctx=256, f32 K/V cache, flash attention off (as gen_model_goldens.py).
llama.cpp applies an adapter as y = W x + s * (B (A x)), s = scale * alpha / rank when alpha != 0,
else s = scale (llama-adapter.h, llama_adapter_lora_weight::get_scale); the LoRA matmuls run in
the adapter's own type (F16 adapters: activations rounded to f16 first).

Needs llama-cpp-python (not in .venv), e.g. the sdist that bench/install_llamacpp.sh unpacks, with
the libllama.so it builds:
  PYTHONPATH=~/.cache/ggflow/llama.cpp-0.3.36/src LLAMA_CPP_LIB_PATH=~/.cache/ggflow/llama.cpp-0.3.36/build/bin \
    /tmp/oracle-venv/bin/python python/make_lora_goldens.py

usage: make_lora_goldens.py [--models-dir models/] [--only a|b|a-half]
"""
import argparse
import json
import os
import sys

import numpy as np
import llama_cpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_model_goldens import row_summary  # noqa: E402
from link_models import sha256  # noqa: E402  (python/, next to this script)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT_DIR = os.path.join(ROOT, "tests", "conformance", "goldens")
TOP_K = 32
BASE = "smollm2-135m-instruct-q4_1.gguf"
# a short chat turn in SmolLM2's template (no system turn), tokenized with special tokens parsed: the
# greedy continuation of gen_model_goldens.py's smollm2 prompt has top-2 margins down to 0.09, this
# one's stay >= 0.49 for the base model
PROMPT = "<|im_start|>user\nTell me a fun fact about cats.<|im_end|>\n<|im_start|>assistant\n"
ADD_BOS = False
SPECIAL = True
N_DECODE = 4
N_GREEDY = 16

# golden name -> (adapter file, user scale, rank, alpha (None: key absent))
CASES = {
    "a": ("smollm2-lora-a.gguf", 1.0, 8, 16.0),
    "b": ("smollm2-lora-b.gguf", 1.0, 4, None),
    "a-half": ("smollm2-lora-a.gguf", 0.5, 8, 16.0),
}




def make_llm(path, lora=None, scale=1.0):
    kw = {}
    if lora:
        kw = {"lora_path": lora, "lora_scale": scale}
    return llama_cpp.Llama(model_path=path, n_ctx=256, n_batch=256, n_ubatch=256, n_threads=2,
                           n_threads_batch=2, logits_all=True, type_k=0, type_v=0,
                           flash_attn=False, seed=0, verbose=False, **kw)


def greedy(llm, prompt, n):
    """A fresh context: prompt, then argmax one token at a time (what `ggflow run` does)."""
    llm.reset()
    llm.eval(prompt)
    out, margins = [], []
    last = np.array(llm.scores[len(prompt) - 1], dtype=np.float32)
    for _ in range(n):
        nxt = int(np.argmax(last))
        top2 = np.sort(last)[-2:]
        margins.append(float(top2[1] - top2[0]))
        out.append(nxt)
        llm.eval([nxt])
        last = np.array(llm.scores[len(prompt) + len(out) - 1], dtype=np.float32)
    return out, margins


def detok(llm, ids):
    return llm.detokenize(ids).decode("utf-8", errors="replace")


def generate(name, base, adapter, scale, rank, alpha, base_greedy):
    llm = make_llm(base, adapter, scale)
    prompt = llm.tokenize(PROMPT.encode(), add_bos=ADD_BOS, special=SPECIAL)
    llm.reset()
    llm.eval(prompt)
    rows = [np.array(llm.scores[i], dtype=np.float32) for i in range(len(prompt))]
    tokens = list(prompt)
    for _ in range(N_DECODE):
        nxt = int(np.argmax(rows[-1]))
        tokens.append(nxt)
        llm.eval([nxt])
        rows.append(np.array(llm.scores[len(tokens) - 1], dtype=np.float32))
    for r in rows:
        if not np.all(np.isfinite(r)):
            raise RuntimeError(f"{name}: non-finite logits")
    g, gm = greedy(llm, prompt, N_GREEDY)
    diff = next((i for i, (x, y) in enumerate(zip(g, base_greedy)) if x != y), None)
    out = {
        "model": "lora-smollm2-" + name,
        "file": os.path.relpath(base, ROOT) if base.startswith(ROOT) else "models/" + BASE,
        "adapter": "models/" + os.path.basename(adapter),
        "adapter_sha256": sha256(adapter),
        "scale": scale,
        "rank": rank,
        "alpha": alpha,
        "effective_scale": scale * alpha / rank if alpha else scale,
        "oracle": f"llama-cpp-python {llama_cpp.__version__}, n_threads=2, f32 KV cache, flash_attn off, "
                  f"Llama(lora_path=..., lora_scale={scale})",
        "prompt_text": PROMPT,
        "add_bos": ADD_BOS,
        "parse_special": SPECIAL,
        "n_vocab": llm.n_vocab(),
        "n_prompt": len(prompt),
        "tokens": tokens,
        "rows": [row_summary(r) for r in rows],
        "greedy": g,
        "greedy_margins": gm,
        "greedy_text": detok(llm, g),
        "base_greedy": base_greedy,
        "base_greedy_text": detok(llm, base_greedy),
        "first_diff": diff,
    }
    llm.close()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    ap.add_argument("--only", action="append", choices=sorted(CASES))
    a = ap.parse_args()
    base = os.path.join(a.models_dir, BASE)
    llm = make_llm(base)
    prompt = llm.tokenize(PROMPT.encode(), add_bos=ADD_BOS, special=SPECIAL)
    base_greedy, base_margins = greedy(llm, prompt, N_GREEDY)
    print(f"base: {detok(llm, base_greedy)!r} (min margin {min(base_margins):.4f})")
    llm.close()
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, (fname, scale, rank, alpha) in CASES.items():
        if a.only and name not in a.only:
            continue
        adapter = os.path.join(a.models_dir, fname)
        g = generate(name, base, adapter, scale, rank, alpha, base_greedy)
        dst = os.path.join(OUT_DIR, f"lora-smollm2-{name}.json")
        with open(dst, "w") as f:
            json.dump(g, f, separators=(",", ":"))
        margins = [r["margin"] for r in g["rows"]]
        print(f"{name}: scale {scale} (effective {g['effective_scale']}), first diff at greedy step {g['first_diff']}, "
              f"min row margin {min(margins):.4f}, min greedy margin {min(g['greedy_margins']):.4f}: "
              f"{g['greedy_text']!r} -> {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
