#!/usr/bin/env python3
"""Independent oracle for ggflow's GGML op conformance test (tests/conformance/test_ops.cpp).

The test writes DIR/cases.json and DIR/data.bin; this script computes every case's expected
output with numpy (float64) straight from GGML's op definitions (ggml.c / ggml-cpu ops.cpp),
dequantizing block-quantized weights with the `gguf` package, and writes DIR/expected.bin: the
f32 outputs of the cases, in order, each case's output the last node of its chain.

cases.json: [{"name": ..., "nodes": [node, ...]}], node = {"op": "NONE" | GGML op name,
"type": GGML type name, "ne": [4 ints], "src": [node indices], "params": {...}} and for leaves
"offset"/"nbytes" into data.bin. Arrays here are numpy arrays of shape ne[::-1]
(GGML's memory order: ne[0] is the last, contiguous numpy axis).

usage: op_oracle.py DIR
"""
import json
import math
import os
import sys

import numpy as np
import gguf
from gguf import quants

PLAIN = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64}


def load_leaf(n, blob):
    raw = blob[n["offset"]:n["offset"] + n["nbytes"]]
    shape = tuple(n["ne"][::-1])
    t = n["type"]
    if t in PLAIN:
        a = np.frombuffer(raw, dtype=PLAIN[t]).reshape(shape)
        return a.astype(np.float64) if t in ("F32", "F16") else a.astype(np.int64)
    qt = gguf.GGMLQuantizationType[t]
    block, size = gguf.GGML_QUANT_SIZES[qt]
    rows = int(np.prod(shape[:-1]))
    q = np.frombuffer(raw, dtype=np.uint8).reshape(rows, shape[-1] // block * size)
    return quants.dequantize(q, qt).astype(np.float64).reshape(shape)


def as_ne(x):  # numpy [i3, i2, i1, i0] -> indexable as [i0, i1, i2, i3]
    return x.transpose(3, 2, 1, 0)


def from_ne(x):
    return x.transpose(3, 2, 1, 0)


def repeat_to(b, shape):
    reps = [s // t for s, t in zip(shape, b.shape)]
    return np.tile(b, reps)


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * x * (1.0 + 0.044715 * x * x)))


def gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


ACT = {"SILU": silu, "GELU": gelu_tanh, "GELU_ERF": gelu_erf, "TANH": np.tanh,
       "SWIGLU": silu, "GEGLU": gelu_tanh, "GEGLU_ERF": gelu_erf}


def softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.where(np.isneginf(x), 0.0, np.exp(x - np.where(np.isneginf(m), 0.0, m)))
    s = np.sum(e, axis=-1, keepdims=True)
    return np.where(s > 0, e / np.where(s > 0, s, 1.0), 0.0)


def rope(x, pos, ff, p):
    # x: [B, T, H, D] (ne [D, H, T, B]); GGML rope_f32 with ext_factor 0
    y = x.copy()
    nd, D = p["n_dims"], x.shape[-1]
    neox = p["mode"] == 2
    for t in range(x.shape[1]):
        for i0 in range(0, nd, 2):
            theta = pos[t] * p["freq_base"] ** (-i0 / nd)
            if ff is not None:
                theta /= ff[i0 // 2]
            theta *= p["freq_scale"]
            c, s = math.cos(theta) * p["attn_factor"], math.sin(theta) * p["attn_factor"]
            j0, j1 = (i0 // 2, i0 // 2 + nd // 2) if neox else (i0, i0 + 1)
            a, b = x[:, t, :, j0], x[:, t, :, j1]
            y[:, t, :, j0] = a * c - b * s
            y[:, t, :, j1] = a * s + b * c
    assert nd <= D
    return y


def run_node(n, srcs, nodes):
    op, p = n["op"], n.get("params", {})
    a = srcs[0] if srcs else None
    shape = tuple(n["ne"][::-1])
    if op == "GET_ROWS":
        b = srcs[1]  # [1, b2, b1, b0] indices; a [a3, a2, a1, a0]
        out = np.zeros(shape)
        for i12 in range(b.shape[1]):
            for i11 in range(b.shape[2]):
                for i10 in range(b.shape[3]):
                    out[i12, i11, i10, :] = a[i12, i11, int(b[0, i12, i11, i10]), :]
        return out
    if op == "MUL_MAT":
        b = srcs[1]
        out = np.zeros(shape)
        r2, r3 = b.shape[1] // a.shape[1], b.shape[0] // a.shape[0]
        for i3 in range(b.shape[0]):
            for i2 in range(b.shape[1]):
                out[i3, i2] = b[i3, i2] @ a[i3 // r3, i2 // r2].T
        return out
    if op == "ADD":
        return a + repeat_to(srcs[1], a.shape)
    if op == "MUL":
        return a * repeat_to(srcs[1], a.shape)
    if op == "SCALE":
        return a * p["s"] + p["b"]
    if op == "RMS_NORM":
        return a / np.sqrt(np.mean(a * a, axis=-1, keepdims=True) + p["eps"])
    if op == "NORM":
        d = a - np.mean(a, axis=-1, keepdims=True)
        return d / np.sqrt(np.mean(d * d, axis=-1, keepdims=True) + p["eps"])
    if op == "ROPE":
        ff = srcs[2].reshape(-1) if len(srcs) > 2 else None
        return rope(a, srcs[1].reshape(-1), ff, p)
    if op == "SOFT_MAX":
        x = a * p["scale"]
        if len(srcs) > 1:
            x = x + repeat_to(srcs[1], a.shape)
        return softmax(x)
    if op == "VIEW":
        src = nodes[n["src"][0]]
        es = {"F32": 4, "F16": 2, "I32": 4, "I64": 8}[src["type"]]
        flat = a.reshape(-1)
        strides = [s // es for s in p["nb"]]  # element strides, ne order
        out = np.zeros(shape)
        o = as_ne(out)
        for i3 in range(o.shape[3]):
            for i2 in range(o.shape[2]):
                for i1 in range(o.shape[1]):
                    for i0 in range(o.shape[0]):
                        o[i0, i1, i2, i3] = flat[p["offset"] // es + i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3]]
        return out
    if op in ("RESHAPE",):
        return a.reshape(shape)
    if op in ("PERMUTE", "TRANSPOSE"):
        axes = p["axes"] if op == "PERMUTE" else [1, 0, 2, 3]
        x = as_ne(a)
        src_of = [0] * 4
        for i in range(4):
            src_of[axes[i]] = i  # result dim axes[i] is source dim i
        return from_ne(np.transpose(x, src_of))
    if op == "CONT":
        return a
    if op == "CPY":
        y = a.reshape(shape)
        return y.astype(np.float16).astype(np.float64) if n["type"] == "F16" else y
    if op == "SET_ROWS":
        out = a.copy()
        rows, idx = srcs[1], srcs[2].reshape(-1)
        if n["type"] == "F16":
            rows = rows.astype(np.float16).astype(np.float64)
        for i, r in enumerate(idx):
            out[:, :, int(r), :] = rows[:, :, i, :]
        return out
    if op == "GLU":
        act = ACT[p["op"]]
        if len(srcs) == 2:
            return act(a) * srcs[1]
        h = a.shape[-1] // 2
        x0, x1 = a[..., :h], a[..., h:]
        return act(x1) * x0 if p["swapped"] else act(x0) * x1
    if op == "UNARY":
        return ACT[p["op"]](a)
    if op == "FLASH_ATTN_EXT":
        q, k, v = srcs[0], srcs[1], srcs[2]  # [B, H, T, D], [B, Hkv, KV, D], [B, Hkv, KV, Dv]
        B, H, T, _ = q.shape
        g = H // k.shape[1]
        out = np.zeros((B, T, H, v.shape[-1]))
        for bb in range(B):
            for h in range(H):
                s = q[bb, h] @ k[bb, h // g].T * p["scale"]
                if len(srcs) > 3:
                    s = s + srcs[3][0, 0]
                out[bb, :, h, :] = softmax(s) @ v[bb, h // g]
        return out
    if op == "CONCAT":
        return np.concatenate([a, srcs[1]], axis=3 - p["dim"])
    raise ValueError("no oracle for " + op)


def main():
    d = sys.argv[1]
    with open(os.path.join(d, "cases.json")) as f:
        cases = json.load(f)
    with open(os.path.join(d, "data.bin"), "rb") as f:
        blob = f.read()
    out = []
    for c in cases:
        vals = []
        for n in c["nodes"]:
            if n["op"] == "NONE":
                vals.append(load_leaf(n, blob))
            else:
                y = run_node(n, [vals[i] for i in n["src"]], c["nodes"])
                assert y.shape == tuple(n["ne"][::-1]), (c["name"], y.shape, n["ne"])
                vals.append(y)
        out.append(np.asarray(vals[-1], dtype=np.float32).reshape(-1))
    with open(os.path.join(d, "expected.bin"), "wb") as f:
        for o in out:
            f.write(o.tobytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
