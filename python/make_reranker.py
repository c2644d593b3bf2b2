#!/usr/bin/env python3
"""Write a synthetic BERT reranker (a cross-encoder as llama.cpp's convert_hf_to_gguf lays one out)
from all-MiniLM-L6-v2: <models-dir>/minilm-reranker-f16.gguf.

No reranker GGUF is published on PyPI, so this one is made for the tests: the encoder of
all-minilm-l6-v2-f16.gguf as it is (every key and tensor copied), with
  bert.pooling_type = 4 (llama.cpp's LLAMA_POOLING_TYPE_RANK)
and the classification head of a BERT / RoBERTa cross-encoder (llama.cpp src/models/bert.cpp,
build_pooling's RANK case):
  cls.weight         ne = [E, E]  F16      cls.bias         ne = [E]  F32
  cls.output.weight  ne = [E, 1]  F16      cls.output.bias  ne = [1]  F32
  score = cls.output.weight · tanh(cls.weight · h_CLS + cls.bias) + cls.output.bias
The head is random (numpy default_rng(seed 23): cls.weight ~ N(0, 1/sqrt(E)) so tanh stays in its
curved range, cls.output.weight ~ N(0, 1/sqrt(E)), biases N(0, 0.1)), so the scores rank nothing
in particular: the file checks that ggflow computes what llama.cpp computes (the pair's framing,
the CLS row, the head), not relevance. Idempotent: the same input gives the same bytes; prints
the output's sha256.

usage: make_reranker.py [--models-dir models/]
"""
import argparse
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from link_models import sha256  # noqa: E402  (python/, next to this script)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BASE = "all-minilm-l6-v2-f16.gguf"
OUT = "minilm-reranker-f16.gguf"
POOLING_RANK = 4


def copy_fields(reader, w):
    """Every key of `reader` but the ones the writer makes (GGUF.*, general.architecture)."""
    for key, f in reader.fields.items():
        if key.startswith("GGUF.") or key == "general.architecture":
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY and len(f.types) > 1 else None
        value = f.contents()
        if key == "bert.pooling_type":
            value = POOLING_RANK
        elif key == "general.name":
            value = "MiniLM L6 H384 synthetic reranker"
        w.add_key_value(key, value, vtype, sub_type=sub)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    args = ap.parse_args()
    src = os.path.join(args.models_dir, BASE)
    if not os.path.exists(src):
        print(f"make_reranker: {src} is missing (run python/link_models.py first)", file=sys.stderr)
        return 1
    reader = gguf.GGUFReader(src)
    E = int(reader.fields["bert.embedding_length"].contents())
    out = os.path.join(args.models_dir, OUT)
    tmp = out + ".tmp"
    w = gguf.GGUFWriter(tmp, "bert")
    copy_fields(reader, w)
    for t in reader.tensors:
        w.add_tensor(t.name, np.array(t.data), raw_shape=[int(x) for x in reversed(t.shape)], raw_dtype=t.tensor_type)
    rng = np.random.default_rng(23)
    head = {
        "cls.weight": (rng.normal(0.0, 1.0 / np.sqrt(E), (E, E)), np.float16),
        "cls.bias": (rng.normal(0.0, 0.1, (E,)), np.float32),
        "cls.output.weight": (rng.normal(0.0, 1.0 / np.sqrt(E), (1, E)), np.float16),
        "cls.output.bias": (rng.normal(0.0, 0.1, (1,)), np.float32),
    }
    for name, (value, dtype) in head.items():
        w.add_tensor(name, value.astype(dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, out)
    print(f"{out} {sha256(out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
