"""Minimal numpy quantizers for GGML's K-quant types Q4_K and Q6_K.

Used by make_family_models.py to write test-fixture GGUF tensors: gguf-py
(0.19.0) can dequantize Q4_K/Q6_K but not quantize them. The quantizer is a
simple deterministic one (not llama.cpp's bit-for-bit search), but the bytes
follow GGML's block layouts exactly (ggml-common.h block_q4_K / block_q6_K,
decoded by dequantize_row_q4_K / dequantize_row_q6_K in ggml-quants.c), so
llama.cpp and gguf.quants.dequantize read back what was intended.

    quantize_q4_k(w)   float32 [..., n] -> uint8 [..., n//256*144]
    quantize_q6_k(w)   float32 [..., n] -> uint8 [..., n//256*210]
    quantize(w, qtype) dispatch on gguf.GGMLQuantizationType.Q4_K / Q6_K
"""

from __future__ import annotations

import numpy as np

QK_K = 256
Q4_K_BYTES = 144  # f16 d, f16 dmin, u8 scales[12], u8 qs[128]
Q6_K_BYTES = 210  # u8 ql[128], u8 qh[64], i8 scales[16], f16 d


def _blocks(w: np.ndarray, name: str) -> tuple[np.ndarray, tuple[int, ...]]:
    """Return w as float32 [n_blocks, 256] plus the leading shape."""
    w = np.asarray(w, dtype=np.float32)
    if w.ndim < 1 or w.shape[-1] % QK_K != 0:
        raise ValueError(f"{name}: last dimension must be a multiple of {QK_K}, got shape {w.shape}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name}: input contains NaN or Inf")
    return w.reshape(-1, QK_K), w.shape[:-1]


def _f16(x: np.ndarray, name: str) -> np.ndarray:
    """Round to float16 (as the block stores it); refuse overflow."""
    h = x.astype(np.float16)
    if not np.all(np.isfinite(h)):
        raise ValueError(f"{name}: super-block scale overflows float16 (weights too large)")
    return h


def _safe_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b, with 0 where b == 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b != 0, a / np.where(b != 0, b, 1), 0).astype(np.float32)


def quantize_q4_k(w: np.ndarray) -> np.ndarray:
    """Quantize to Q4_K: y = d*sc_j*q - dmin*m_j, 8 sub-blocks of 32, q in 0..15."""
    x, lead = _blocks(w, "quantize_q4_k")
    nb = x.shape[0]
    xs = x.reshape(nb, 8, 32)

    mn = np.minimum(xs.min(axis=-1), 0.0)                 # [nb, 8], <= 0
    scale = (xs.max(axis=-1) - mn) / 15.0                 # [nb, 8], >= 0
    d = _f16(scale.max(axis=-1) / 63.0, "quantize_q4_k")  # [nb]
    dmin = _f16((-mn).max(axis=-1) / 63.0, "quantize_q4_k")
    df, dminf = d.astype(np.float32), dmin.astype(np.float32)

    sc = np.clip(np.rint(_safe_div(scale, df[:, None])), 0, 63)
    sc = np.where((sc == 0) & (scale > 0), 1, sc)         # keep tiny sub-blocks alive
    m = np.clip(np.rint(_safe_div(-mn, dminf[:, None])), 0, 63)
    sc, m = sc.astype(np.uint8), m.astype(np.uint8)

    # Codes against the scales as the decoder will see them (f32 products).
    step = (df[:, None] * sc.astype(np.float32))[..., None]  # [nb, 8, 1]
    off = (dminf[:, None] * m.astype(np.float32))[..., None]
    q = np.clip(np.rint(_safe_div(xs + off, step)), 0, 15).astype(np.uint8)

    # scales[12], inverse of get_scale_min_k4.
    lo_sc, hi_sc, lo_m, hi_m = sc[:, :4], sc[:, 4:], m[:, :4], m[:, 4:]
    scales = np.concatenate([
        (lo_sc & 63) | ((hi_sc >> 4) << 6),
        (lo_m & 63) | ((hi_m >> 4) << 6),
        (hi_sc & 0xF) | ((hi_m & 0xF) << 4),
    ], axis=-1)

    # qs[32c+l] = q[64c+l] | q[64c+32+l] << 4
    q = q.reshape(nb, 4, 2, 32)
    qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(nb, 128)

    out = np.concatenate([
        d.astype("<f2").view(np.uint8).reshape(nb, 2),
        dmin.astype("<f2").view(np.uint8).reshape(nb, 2),
        scales, qs,
    ], axis=-1)
    return out.reshape(*lead, -1)


def quantize_q6_k(w: np.ndarray) -> np.ndarray:
    """Quantize to Q6_K: y = d*sc_s*(q-32), 16 sub-blocks of 16, int8 sc, q in 0..63."""
    x, lead = _blocks(w, "quantize_q6_k")
    nb = x.shape[0]
    xs = x.reshape(nb, 16, 16)

    # llama.cpp's signed-max trick: the largest-|x| value maps exactly to -32,
    # so the asymmetric range -32..31 is used fully. Same trick for the scales
    # (largest-|scale| maps to -128).
    idx = np.abs(xs).argmax(axis=-1)[..., None]
    scale = np.take_along_axis(xs, idx, axis=-1)[..., 0] / -32.0   # [nb, 16], signed
    sidx = np.abs(scale).argmax(axis=-1)[:, None]
    d = _f16(np.take_along_axis(scale, sidx, axis=-1)[:, 0] / -128.0, "quantize_q6_k")
    df = d.astype(np.float32)

    sc = np.clip(np.rint(_safe_div(scale, df[:, None])), -128, 127).astype(np.int8)
    step = (df[:, None] * sc.astype(np.float32))[..., None]  # [nb, 16, 1]
    q = (np.clip(np.rint(_safe_div(xs, step)), -32, 31) + 32).astype(np.uint8)

    # Two halves of 128; within a half, element l+32k (l<32, k<4) is:
    # low nibble in ql[l + 32*(k&1)] (bits 4*(k>>1)), high 2 bits in qh[l] (bits 2k).
    q = q.reshape(nb, 2, 4, 32)
    lo, hi = q & 0xF, q >> 4
    ql = np.concatenate([lo[:, :, 0] | (lo[:, :, 2] << 4),
                         lo[:, :, 1] | (lo[:, :, 3] << 4)], axis=-1)       # [nb, 2, 64]
    qh = hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)  # [nb, 2, 32]

    out = np.concatenate([
        ql.reshape(nb, 128),
        qh.reshape(nb, 64),
        sc.view(np.uint8),
        d.astype("<f2").view(np.uint8).reshape(nb, 2),
    ], axis=-1)
    return out.reshape(*lead, -1)


def quantize(w: np.ndarray, qtype) -> np.ndarray:
    """Quantize w to qtype (gguf.GGMLQuantizationType.Q4_K or Q6_K)."""
    from gguf import GGMLQuantizationType as T
    if qtype == T.Q4_K:
        return quantize_q4_k(w)
    if qtype == T.Q6_K:
        return quantize_q6_k(w)
    name = getattr(qtype, "name", repr(qtype))
    raise ValueError(f"kquants.quantize: unsupported qtype {name}; only Q4_K and Q6_K are implemented")


# ---------------------------------------------------------------------------
# Self-test: python python/kquants.py

def _ref_decode_q4_k(row: np.ndarray) -> np.ndarray:
    """Per-element decoder written from dequantize_row_q4_K / get_scale_min_k4."""
    f32 = np.float32
    out = []
    for b in range(len(row) // Q4_K_BYTES):
        blk = row[b * Q4_K_BYTES:(b + 1) * Q4_K_BYTES]
        d = f32(blk[0:2].view("<f2")[0])
        dmin = f32(blk[2:4].view("<f2")[0])
        s, qs = [int(v) for v in blk[4:16]], [int(v) for v in blk[16:144]]
        for j in range(8):
            if j < 4:
                sc, m = s[j] & 63, s[j + 4] & 63
            else:
                sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4)
                m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4)
            d1, m1 = d * f32(sc), dmin * f32(m)
            c, shift = j // 2, 4 * (j % 2)
            for l in range(32):
                out.append(d1 * f32((qs[32 * c + l] >> shift) & 0xF) - m1)
    return np.array(out, dtype=np.float32)


def _ref_decode_q6_k(row: np.ndarray) -> np.ndarray:
    """Per-element decoder written from dequantize_row_q6_K."""
    f32 = np.float32
    out = np.zeros(len(row) // Q6_K_BYTES * QK_K, dtype=np.float32)
    for b in range(len(row) // Q6_K_BYTES):
        blk = row[b * Q6_K_BYTES:(b + 1) * Q6_K_BYTES]
        ql, qh = [int(v) for v in blk[0:128]], [int(v) for v in blk[128:192]]
        sc = [int(v) for v in blk[192:208].view(np.int8)]
        d = f32(blk[208:210].view("<f2")[0])
        for n in range(2):
            y0, L, H, S = b * QK_K + 128 * n, 64 * n, 32 * n, 8 * n
            for l in range(32):
                i = l // 16
                q1 = ((ql[L + l] & 0xF) | (((qh[H + l] >> 0) & 3) << 4)) - 32
                q2 = ((ql[L + l + 32] & 0xF) | (((qh[H + l] >> 2) & 3) << 4)) - 32
                q3 = ((ql[L + l] >> 4) | (((qh[H + l] >> 4) & 3) << 4)) - 32
                q4 = ((ql[L + l + 32] >> 4) | (((qh[H + l] >> 6) & 3) << 4)) - 32
                out[y0 + l] = d * f32(sc[S + i]) * f32(q1)
                out[y0 + l + 32] = d * f32(sc[S + i + 2]) * f32(q2)
                out[y0 + l + 64] = d * f32(sc[S + i + 4]) * f32(q3)
                out[y0 + l + 96] = d * f32(sc[S + i + 6]) * f32(q4)
    return out


def _self_test() -> None:
    from gguf import GGMLQuantizationType as T
    from gguf.quants import dequantize

    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 512)).astype(np.float32)
    w[1, 7] = 40.0                     # positive outlier
    w[2, 300] = -55.0                  # negative outlier
    w[3] = 0.0                         # all-zero row
    w[4] = -np.abs(w[4]) - 1.0         # all-negative row
    w[5] = 3.25                        # constant row
    w[6] *= 1e-3                       # tiny magnitudes
    normal = [r for r in range(64) if r not in (1, 2, 3, 4, 5, 6)]

    def rel_rms(a, b):
        return float(np.sqrt(np.mean((a - b) ** 2) / np.mean(b ** 2)))

    for qtype, fn, nbytes, ref, limit in [
        (T.Q4_K, quantize_q4_k, Q4_K_BYTES, _ref_decode_q4_k, 0.12),
        (T.Q6_K, quantize_q6_k, Q6_K_BYTES, _ref_decode_q6_k, 0.03),
    ]:
        data = quantize(w, qtype)
        assert data.dtype == np.uint8 and data.shape == (64, 512 // QK_K * nbytes), data.shape
        assert np.array_equal(data, fn(w)), "not deterministic"
        y = dequantize(data, qtype)
        assert y.shape == w.shape, y.shape
        y_ref = np.stack([ref(r) for r in data])
        assert np.array_equal(y, y_ref), f"{qtype.name}: gguf decode != reference decode"
        assert np.all(y[3] == 0), f"{qtype.name}: zero row not zero"
        err_all = rel_rms(y, w)
        err_norm = rel_rms(y[normal], w[normal])
        err_rows = {r: rel_rms(y[r], w[r]) for r in (1, 2, 4, 5, 6)}
        print(f"{qtype.name}: rel RMS all={err_all:.4f} normal rows={err_norm:.4f} "
              + " ".join(f"row{r}={e:.4f}" for r, e in err_rows.items()))
        assert err_all < limit and err_norm < limit, f"{qtype.name}: error too large"

    for bad in (np.zeros((2, 100), np.float32), np.array([[np.nan] * 256], np.float32)):
        try:
            quantize_q4_k(bad)
            raise AssertionError("expected ValueError")
        except ValueError as e:
            print("ok, rejected:", e)
    try:
        quantize(w, T.Q8_0)
        raise AssertionError("expected ValueError")
    except ValueError as e:
        print("ok, rejected:", e)
    print("kquants self-test passed")


if __name__ == "__main__":
    _self_test()
