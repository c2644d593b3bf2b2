#!/usr/bin/env python3
"""Golden outputs for ggflow's reference evaluator (tests/ir/test_goldens.cpp).

An independent oracle: numpy in float64 (and the `gguf` package's dequantizers for block
weights) computes RoPE (normal, NeoX, freq factors), SDPA (causal, GQA, additive mask), RMSNorm,
Softmax, Gelu (erf, tanh), Swish and MatMul over Q4_K / Q5_0 weights from seeded random inputs.
Rerun: .venv/bin/python python/gen_ir_goldens.py  (writes tests/ir/golden/ir_ops.json)
"""
import json
import math
import os

import numpy as np
import gguf
from gguf import quants

rng = np.random.default_rng(1234)
cases = []


def t(a, dtype="f32"):
    a = np.asarray(a)
    return {"shape": list(a.shape), "dtype": dtype, "data": [float(v) if dtype == "f32" else int(v) for v in a.ravel()]}


def rope_ref(x, pos, n_dims, base, freq_scale, attn_factor, neox, ff=None):
    # x [..., T, H, S], pos [T]
    y = x.astype(np.float64).copy()
    T, H, S = x.shape[-3:]
    for ti in range(T):
        for i in range(n_dims // 2):
            theta = pos[ti] * base ** (-2.0 * i / n_dims)
            if ff is not None:
                theta /= ff[i]
            theta *= freq_scale
            c, s = math.cos(theta) * attn_factor, math.sin(theta) * attn_factor
            j0, j1 = (2 * i, 2 * i + 1) if not neox else (i, i + n_dims // 2)
            x0 = x[..., ti, :, j0].astype(np.float64)
            x1 = x[..., ti, :, j1].astype(np.float64)
            y[..., ti, :, j0] = x0 * c - x1 * s
            y[..., ti, :, j1] = x0 * s + x1 * c
    return y


x = rng.uniform(-1, 1, size=(1, 5, 2, 8)).astype(np.float32)
pos = np.array([0, 3, 7, 42, 100])
cases.append({"name": "rope_normal", "x": t(x), "pos": t(pos, "i32"),
              "attrs": {"mode": "normal", "n_dims": 8, "freq_base": 10000.0, "freq_scale": 1.0, "attn_factor": 1.0},
              "expected": t(rope_ref(x, pos, 8, 10000.0, 1.0, 1.0, False)), "atol": 1e-5})
ff = np.array([1.0, 2.0, 8.0], dtype=np.float32)
cases.append({"name": "rope_neox_factors", "x": t(x), "pos": t(pos, "i32"), "freq_factors": t(ff),
              "attrs": {"mode": "neox", "n_dims": 6, "freq_base": 500000.0, "freq_scale": 0.5, "attn_factor": 1.25},
              "expected": t(rope_ref(x, pos, 6, 500000.0, 0.5, 1.25, True, ff)), "atol": 1e-5})


def sdpa_ref(q, k, v, mask, causal, scale):
    B, Hq, Tq, S = q.shape
    Hk, Tk = k.shape[1], k.shape[2]
    out = np.zeros((B, Hq, Tq, v.shape[3]))
    for b in range(B):
        for h in range(Hq):
            kh = h // (Hq // Hk)
            s = q[b, h].astype(np.float64) @ k[b, kh].astype(np.float64).T * scale
            if mask is not None:
                s = s + np.broadcast_to(mask, (B, Hq, Tq, Tk))[b, h]
            if causal:
                for i in range(Tq):
                    s[i, i + (Tk - Tq) + 1:] = -np.inf
            s = s - s.max(axis=-1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=-1, keepdims=True)
            out[b, h] = p @ v[b, kh].astype(np.float64)
    return out


q = rng.uniform(-1, 1, size=(1, 4, 3, 8)).astype(np.float32)
k = rng.uniform(-1, 1, size=(1, 2, 5, 8)).astype(np.float32)
v = rng.uniform(-1, 1, size=(1, 2, 5, 8)).astype(np.float32)
cases.append({"name": "sdpa_causal_gqa", "q": t(q), "k": t(k), "v": t(v), "attrs": {"causal": True, "scale": 0.0},
              "expected": t(sdpa_ref(q, k, v, None, True, 1 / math.sqrt(8))), "atol": 1e-5})
mask = rng.uniform(-2, 0, size=(1, 1, 3, 5)).astype(np.float32)
mask[0, 0, 0, 4] = -np.inf
cases.append({"name": "sdpa_mask", "q": t(q), "k": t(k), "v": t(v), "mask": t(np.where(np.isinf(mask), -1e30, mask)),
              "attrs": {"causal": False, "scale": 0.3},
              "expected": t(sdpa_ref(q, k, v, mask, False, 0.3)), "atol": 1e-5})

xr = rng.uniform(-2, 2, size=(3, 16)).astype(np.float32)
g = rng.uniform(0.5, 1.5, size=(16,)).astype(np.float32)
xd = xr.astype(np.float64)
rms = xd / np.sqrt((xd * xd).mean(axis=-1, keepdims=True) + 1e-5) * g
cases.append({"name": "rms_norm", "x": t(xr), "gamma": t(g), "attrs": {"eps": 1e-5}, "expected": t(rms), "atol": 1e-5})
e = np.exp(xd[:, :7] - xd[:, :7].max(axis=-1, keepdims=True))
cases.append({"name": "softmax", "x": t(xr[:, :7]), "expected": t(e / e.sum(axis=-1, keepdims=True)), "atol": 1e-6})
xs = np.linspace(-5, 5, 41).astype(np.float32)
xsd = xs.astype(np.float64)
cases.append({"name": "gelu_erf", "x": t(xs), "expected": t([0.5 * a * (1 + math.erf(a / math.sqrt(2))) for a in xsd]), "atol": 1e-5})
cases.append({"name": "gelu_tanh", "x": t(xs),
              "expected": t(0.5 * xsd * (1 + np.tanh(math.sqrt(2 / math.pi) * (xsd + 0.044715 * xsd ** 3)))), "atol": 1e-5})
cases.append({"name": "swish", "x": t(xs), "expected": t(xsd / (1 + np.exp(-xsd))), "atol": 1e-5})


def block_weight(qtype, n_rows, k, scale_fields):
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_rows, (k // bs) * ts), dtype=np.uint8)
    blocks = raw.reshape(n_rows, k // bs, ts)
    for off, val in scale_fields:  # plausible f16 scales instead of random bits
        blocks[:, :, off:off + 2] = np.frombuffer(np.float16(val).tobytes(), dtype=np.uint8)
    deq = quants.dequantize(raw, qtype).astype(np.float64)
    return raw, deq


for qname, qtype, fields in [("q4_k", gguf.GGMLQuantizationType.Q4_K, [(0, 0.01), (2, 0.005)]),
                             ("q5_0", gguf.GGMLQuantizationType.Q5_0, [(0, 0.02)])]:
    raw, deq = block_weight(qtype, 3, 256, fields)
    xa = rng.uniform(-1, 1, size=(2, 256)).astype(np.float32)
    cases.append({"name": "matmul_" + qname, "x": t(xa), "w_type": qname, "w_shape": [3, 256],
                  "w_hex": raw.tobytes().hex(), "expected": t(xa.astype(np.float64) @ deq.T), "atol": 1e-4})

out = os.path.join(os.path.dirname(__file__), "..", "tests", "ir", "golden", "ir_ops.json")
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    json.dump({"generator": "python/gen_ir_goldens.py", "cases": cases}, f, indent=None)
print(f"wrote {len(cases)} cases to {os.path.normpath(out)}")
