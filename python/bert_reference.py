#!/usr/bin/env python3
"""A numpy forward pass of a BERT embedding model read from its GGUF file (gguf's GGUFReader),
independent of llama.cpp and of ggflow: the check that python/convert_bert.py laid the weights out
right, and a second opinion on llama.cpp's vectors.

  embeddings: token_embd[id] + token_types[0] + position_embd[pos], LayerNorm (token_embd_norm)
  each layer (post-norm, non-causal attention over all tokens):
      x = LayerNorm(x + attn_output(softmax(Q K^T / sqrt(D)) V))          (attn_output_norm)
      x = LayerNorm(x + ffn_down(GELU(ffn_up(x))))                        (layer_output_norm)
  mean pooling over the tokens, then L2 normalization.

The math is float64 over the stored weights (F16 widened exactly). --gelu picks the GELU:
  erf   0.5·x·(1 + erf(x/√2)), Hugging Face BERT's "gelu" (the model was trained with it);
  tanh  0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), the form llama.cpp's bert graph asks for
        (build_ffn with LLM_FFN_GELU -> ggml_gelu);
  ggml  the tanh form as GGML's CPU backend computes it: x rounded to f16, looked up in the f16
        table of tanh-GELU values (x <= -10 -> 0, x >= 10 -> x).
--act-f16 rounds each matmul's input activations to f16, as GGML's CPU matmul does for F16 weights.

    python/bert_reference.py MODEL.gguf --goldens tests/conformance/goldens/embedding-all-minilm-l6-v2.json
        per case: NMSE = sum((ref - llama.cpp)^2) / sum(llama.cpp^2), for the GELU choices
    python/bert_reference.py MODEL.gguf --ids 101,7592,102     one vector, printed
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

import gguf


def field(r: gguf.GGUFReader, key: str):
    f = r.fields.get(key)
    if f is None:
        raise KeyError(f"{key} is not in the file")
    return f.contents()


class Bert:
    def __init__(self, path: Path):
        r = gguf.GGUFReader(str(path))
        arch = field(r, "general.architecture")
        if arch != "bert":
            raise ValueError(f"{path}: architecture {arch}, not bert")
        self.n_layer = field(r, "bert.block_count")
        self.n_head = field(r, "bert.attention.head_count")
        self.eps = float(field(r, "bert.attention.layer_norm_epsilon"))
        self.w = {}
        for t in r.tensors:
            if t.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
                raise ValueError(f"{t.name}: {t.tensor_type.name}; this reference reads F32 and F16")
            # numpy shape is GGML's ne reversed: a matrix is [out, in], rows as stored.
            self.w[t.name] = np.asarray(t.data, dtype=np.float64).reshape([int(n) for n in reversed(t.shape)])

    def layer_norm(self, x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def linear(self, x, name, act_f16):
        if act_f16:
            x = x.astype(np.float16).astype(np.float64)
        y = x @ self.w[name + ".weight"].T
        return y + self.w[name + ".bias"] if name + ".bias" in self.w else y

    def forward(self, ids, gelu="erf", act_f16=False) -> np.ndarray:
        ids = np.asarray(ids)
        n = len(ids)
        x = self.w["token_embd.weight"][ids] + self.w["position_embd.weight"][:n]
        if "token_types.weight" in self.w:
            x = x + self.w["token_types.weight"][0]
        x = self.layer_norm(x, "token_embd_norm")
        act = GELU[gelu]
        for i in range(self.n_layer):
            b = f"blk.{i}."
            q, k, v = (self.linear(x, b + t, act_f16) for t in ("attn_q", "attn_k", "attn_v"))
            d = q.shape[-1] // self.n_head
            q, k, v = (a.reshape(n, self.n_head, d).transpose(1, 0, 2) for a in (q, k, v))
            s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            p = np.exp(s - s.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            ctx = (p @ v).transpose(1, 0, 2).reshape(n, self.n_head * d)
            x = self.layer_norm(x + self.linear(ctx, b + "attn_output", act_f16), b + "attn_output_norm")
            h = act(self.linear(x, b + "ffn_up", act_f16))
            x = self.layer_norm(x + self.linear(h, b + "ffn_down", act_f16), b + "layer_output_norm")
        e = x.mean(0)
        return e / np.linalg.norm(e)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu_erf(x):
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * x * (1.0 + 0.044715 * x * x)))


def _ggml_table() -> np.ndarray:
    """GGML's ggml_table_gelu_f16: for every f16 bit pattern, fp16(gelu_tanh_f32(x))."""
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.float32(0.5) * x * (np.float32(1) + np.tanh(np.float32(0.79788456080286535587989211986876) * x
                                                           * (np.float32(1) + np.float32(0.044715) * x * x)))
    return y.astype(np.float16).astype(np.float64)


_GGML_TABLE = None


def gelu_ggml(x):
    global _GGML_TABLE
    if _GGML_TABLE is None:
        _GGML_TABLE = _ggml_table()
    xf = x.astype(np.float32)
    y = _GGML_TABLE[xf.astype(np.float16).view(np.uint16)]
    y = np.where(xf <= -10.0, 0.0, y)
    return np.where(xf >= 10.0, xf.astype(np.float64), y)


GELU = {"erf": gelu_erf, "tanh": gelu_tanh, "ggml": gelu_ggml}


def nmse(a, ref) -> float:
    a, ref = np.asarray(a, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(((a - ref) ** 2).sum() / (ref ** 2).sum())


def compare(model: Bert, goldens: dict, variants: list) -> dict:
    rows = []
    for case in goldens["cases"]:
        want = np.asarray(case["embedding"])
        got = {f"{g}{'+f16act' if f16 else ''}": model.forward(case["tokens"], g, f16) for g, f16 in variants}
        row = {"text": case["text"][:40], "n_tokens": len(case["tokens"])}
        row.update({k: nmse(v, want) for k, v in got.items()})
        if "erf" in got and "tanh" in got:
            row["erf_vs_tanh"] = nmse(got["erf"], got["tanh"])
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", type=Path)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--goldens", type=Path, help="llama.cpp's vectors (python/make_embedding_goldens.py)")
    g.add_argument("--ids", help="comma-separated token ids: print the vector")
    ap.add_argument("--gelu", choices=sorted(GELU), default="erf", help="with --ids (default: erf)")
    ap.add_argument("--act-f16", action="store_true", help="with --ids: f16 matmul inputs")
    ap.add_argument("--json", type=Path, help="with --goldens: also write the table here")
    args = ap.parse_args()
    model = Bert(args.model)
    if args.ids:
        print(json.dumps(model.forward([int(t) for t in args.ids.split(",")], args.gelu, args.act_f16).tolist()))
        return 0
    goldens = json.loads(args.goldens.read_text(encoding="utf-8"))
    variants = [("erf", False), ("tanh", False), ("ggml", False), ("ggml", True)]
    rows = compare(model, goldens, variants)
    cols = [k for k in rows[0] if k not in ("text", "n_tokens")]
    print(f"{'case':42} {'tokens':>6} " + " ".join(f"{c:>12}" for c in cols))
    for r in rows:
        print(f"{r['text']!r:42} {r['n_tokens']:6d} " + " ".join(f"{r[c]:12.3e}" for c in cols))
    print(f"{'worst':42} {'':6} " + " ".join(f"{max(r[c] for r in rows):12.3e}" for c in cols))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
