#!/usr/bin/env python3
"""Write two synthetic LoRA adapters (llama.cpp's adapter GGUF format) for SmolLM2-135M-Instruct.

Base model: <models-dir>/smollm2-135m-instruct-q4_1.gguf (architecture llama, 30 layers, 576 wide,
FFN 1536, 3 KV heads of 64, tied output = token_embd). Its shapes are read from the file.

  smollm2-lora-a.gguf  rank 8, adapter.lora.alpha = 16, F32 tensors, on every layer's
                       attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down
  smollm2-lora-b.gguf  rank 4, no adapter.lora.alpha key (llama.cpp reads a missing key as 0),
                       F16 tensors, on every layer's attn_q and attn_v only

The format (llama.cpp src/llama-adapter.cpp, convert_lora_to_gguf.py):
  general.architecture = the base's ("llama"), general.type = "adapter", adapter.type = "lora",
  adapter.lora.alpha (f32, optional: missing reads as 0).
  For a base weight W named N with GGML ne = [n_in, n_out] (numpy shape (n_out, n_in)):
    N.lora_a  ne = [n_in, r]   numpy shape (r, n_in)     (PEFT lora_A.weight as is)
    N.lora_b  ne = [r, n_out]  numpy shape (n_out, r)    (PEFT lora_B.weight as is)
  llama.cpp checks W.ne0 == lora_a.ne0, W.ne1 == lora_b.ne1, lora_a.ne1 == lora_b.ne0, and computes
    y = W x + s * (B (A x)),  s = user_scale * alpha / r  if alpha != 0  else  user_scale
  with r = lora_b.ne0.
  Tensors are in GGUF (llama.cpp) layout, i.e. after convert_hf_to_gguf's Q/K row permutation:
  nothing is permuted here because the adapters are generated directly in that space.

Values (deterministic, numpy default_rng with fixed seeds, drawn in file order):
  A ~ N(0, 1) / sqrt(n_in)   (so each entry of A x has the rms of x)
  B ~ N(0, sigma)            sigma = 0.08, seed 17 (adapter a); sigma = 0.2, seed 45 (adapter b)
(A is drawn before B for each target, layer by layer, in the tensor order of the file; B in f32,
then rounded to f16 for adapter b). Sigma and seed were picked by a small search (sigma in
{0.06, 0.08} resp. {0.16, 0.2}, seeds 0..115) run against llama.cpp on the chat prompt of
python/make_lora_goldens.py: each adapter (a at scale 1 and 0.5, b at scale 1) changes SmolLM2's
16-token greedy continuation within its first 6 tokens, the text stays fluent, and llama.cpp's
top-2 margin stays >= 0.3 at every greedy step (so 8-bit activation noise cannot flip a token).

The script then re-reads each file and checks llama.cpp's rules (metadata and shapes) against the
base, and prints the sha256 of each file. Idempotent: the same arguments give the same bytes.

usage: make_lora_adapters.py [--models-dir models/]
"""
import argparse
import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from link_models import sha256  # noqa: E402  (python/, next to this script)

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BASE = "smollm2-135m-instruct-q4_1.gguf"
ALL_TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")

# name -> (rank, alpha or None (key omitted), numpy dtype, targets, B sigma, seed)
ADAPTERS = {
    "smollm2-lora-a.gguf": (8, 16.0, np.float32, ALL_TARGETS, 0.08, 17),
    "smollm2-lora-b.gguf": (4, None, np.float16, ("attn_q", "attn_v"), 0.2, 45),
}


def field_value(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def base_shapes(path):
    """{tensor name: GGML ne (n_in, n_out)} of the base's 2-D weights, and its architecture."""
    r = gguf.GGUFReader(path)
    arch = field_value(r, "general.architecture")
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in r.tensors if len(t.shape) == 2}
    n_layer = int(field_value(r, f"{arch}.block_count"))
    return arch, n_layer, shapes


def write_adapter(dst, arch, n_layer, shapes, rank, alpha, dtype, targets, sigma, seed):
    rng = np.random.default_rng(seed)
    tmp = dst + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)  # writes general.architecture
    w.add_type(gguf.GGUFType.ADAPTER)  # general.type = "adapter"
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    if alpha is not None:
        w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    w.add_string(gguf.Keys.General.NAME, os.path.splitext(os.path.basename(dst))[0])
    for il in range(n_layer):
        for t in targets:
            name = f"blk.{il}.{t}.weight"
            n_in, n_out = shapes[name]
            a = (rng.standard_normal((rank, n_in)) / np.sqrt(n_in)).astype(np.float32)
            b = (rng.standard_normal((n_out, rank)) * sigma).astype(np.float32)
            w.add_tensor(name + ".lora_a", a.astype(dtype))  # ne = [n_in, rank]
            w.add_tensor(name + ".lora_b", b.astype(dtype))  # ne = [rank, n_out]
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, dst)


def check_adapter(path, arch, shapes, rank, alpha, dtype, targets, n_layer):
    """llama.cpp's load-time rules (llama_adapter_lora_init_impl), plus what this script meant to write."""
    r = gguf.GGUFReader(path)
    assert field_value(r, "general.type") == "adapter"
    assert field_value(r, "general.architecture") == arch
    assert field_value(r, "adapter.type") == "lora"
    got_alpha = field_value(r, "adapter.lora.alpha")
    if alpha is None:
        assert got_alpha is None
    else:
        assert r.fields["adapter.lora.alpha"].types == [gguf.GGUFValueType.FLOAT32] and got_alpha == alpha
    want_type = gguf.GGMLQuantizationType.F32 if dtype == np.float32 else gguf.GGMLQuantizationType.F16
    pairs = {}
    for t in r.tensors:
        assert t.tensor_type == want_type, (t.name, t.tensor_type)
        for suf in (".lora_a", ".lora_b"):
            if t.name.endswith(suf):
                pairs.setdefault(t.name[: -len(suf)], {})[suf] = tuple(int(d) for d in t.shape)
                break
        else:
            raise AssertionError(f"LoRA tensor '{t.name}' has unexpected suffix")
    assert set(pairs) == {f"blk.{il}.{t}.weight" for il in range(n_layer) for t in targets}
    for name, p in pairs.items():
        assert set(p) == {".lora_a", ".lora_b"}, name
        a, b = p[".lora_a"], p[".lora_b"]
        wne = shapes[name]  # the base tensor exists
        assert not name.endswith("token_embd.weight")
        assert wne[0] == a[0], (name, wne, a)  # W.ne0 == lora_a.ne0 (n_in)
        assert wne[1] == b[1], (name, wne, b)  # W.ne1 == lora_b.ne1 (n_out)
        assert a[1] == b[0] == rank, (name, a, b)  # lora_a.ne1 == lora_b.ne0 (rank)
    return len(pairs)



def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "models"))
    a = ap.parse_args()
    base = os.path.join(a.models_dir, BASE)
    arch, n_layer, shapes = base_shapes(base)
    if arch != "llama":
        print(f"{base}: architecture {arch}, expected llama", file=sys.stderr)
        return 1
    for fname, (rank, alpha, dtype, targets, sigma, seed) in ADAPTERS.items():
        dst = os.path.join(a.models_dir, fname)
        write_adapter(dst, arch, n_layer, shapes, rank, alpha, dtype, targets, sigma, seed)
        n = check_adapter(dst, arch, shapes, rank, alpha, dtype, targets, n_layer)
        print(f"{sha256(dst)}  {dst}  (rank {rank}, alpha {alpha if alpha is not None else 'absent'}, "
              f"{np.dtype(dtype).name}, {n} pairs, B sigma {sigma})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
