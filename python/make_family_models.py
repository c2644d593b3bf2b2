#!/usr/bin/env python3
"""Write small synthetic GGUF models, one per supported model family and weight type.

Each family keeps its real architecture's shape features (GQA, head size apart from the width,
biases, Q/K norms, fused tensors, partial rotary, RoPE frequency factors, sliding windows,
soft-caps, sandwich norms) at small widths (64 wide, 3 layers), with random weights and a real
tokenizer from ../shared/data/tokenizer where one is at hand (the model is then exactly as
llama.cpp would load a converted checkpoint of that family). Weight types: F16, Q8_0, Q4_0 and
Q4_1 (matrices and the embedding; norms, biases and RoPE factors f32, as the converters write
them); every type holds the same drawn weights. The K-quant types Q4_K and Q6_K need rows of
whole 256-value super-blocks, so their models are 256 wide (other draws): a matrix whose rows are
not whole super-blocks falls back as llama.cpp's quantizer does (Q4_K -> Q5_0, Q6_K -> Q8_0).

Deterministic: the same seed gives the same bytes (numpy's generator, float32 draws), so tests
regenerate the files into the build directory instead of committing them; the goldens in
tests/conformance/goldens/family-*.json come from llama.cpp through python/gen_model_goldens.py
--families DIR.

Scales keep activations O(1) and logits spread over a few units (so top-1 is a clear choice):
linear weights ~ N(0, 1/fan_in), biases ~ N(0, 0.5), norms ~ 1 + N(0, 0.1), embeddings ~ N(0, 0.4).

usage: make_family_models.py OUT_DIR [--only NAME] [--if-missing] [--list]
"""
import argparse
import math
import os
import sys

import numpy as np
import gguf

import kquants

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZERS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data", "tokenizer"))
LAYERS = 3

# name -> the family's features. Common: E 64, 4 query heads, 2 KV heads, FFN 128.
FAMILIES = {
    "qwen2": dict(arch="qwen2", vocab="qwen2", head_dim=16, qkv_bias=True, rope_base=1e6, tied=True),
    "qwen3": dict(arch="qwen3", vocab="qwen2", head_dim=32, key_length=True, qk_norm=True, rope_base=1e6, tied=True),
    "llama3": dict(arch="llama", vocab="llama-bpe", head_dim=16, rope_base=5e5, rope_freqs=True, tied=False),
    "mistral": dict(arch="llama", vocab="llama-spm", head_dim=16, rope_base=1e4, tied=False, sliding_window=4096),
    "phi3": dict(arch="phi3", vocab="phi-3", head_dim=16, n_rot=12, rope_base=1e4, fused=True, longrope=True,
                 tied=False, sliding_window=2047),
    "gemma2": dict(arch="gemma2", vocab="llama-spm", head_dim=16, key_length=True, rope_base=1e4, tied=True,
                   sandwich=True, sliding_window=8, softcap=(50.0, 30.0)),
    # the dense Gemma 4 with per-layer token embeddings (the second token table), layers 0-1 sliding
    "gemma4": dict(arch="gemma4", vocab="llama-spm", head_dim=16, key_length=True, qk_norm=True, rope_base=1e6,
                   tied=True, sandwich=True, sliding_window=8, swa_list=[True, True, False], n_rot_swa=8,
                   per_layer=32, rope_freqs_global=True, out_scale=True, final_softcap=30.0),
}
TYPES = {"f16": gguf.GGMLQuantizationType.F16, "q8_0": gguf.GGMLQuantizationType.Q8_0,
         "q4_0": gguf.GGMLQuantizationType.Q4_0, "q4_1": gguf.GGMLQuantizationType.Q4_1}
FILE_TYPES = {"f16": gguf.LlamaFileType.MOSTLY_F16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
              "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q4_1": gguf.LlamaFileType.MOSTLY_Q4_1}
# Variants: name -> (base family, what changes, weight types, golden). Without a golden (llama.cpp
# does not apply what it changes): the Mistral model with an 8-token window, which ggflow applies
# and llama.cpp's llama graph ignores (docs/MODELS.md).
# And Gemma 4 as its real files lay it out (llama.cpp's gemma4 loader): per-layer arrays of FFN
# widths and KV head counts, a head size of the sliding layers apart from the full layers', full
# layers without attn_v (V is K's projection), and the last 2 layers sharing the KV cache of the
# last sliding (2) and full (3) layer with one (attention.shared_kv_layers), with double-wide FFNs.
VARIANTS = {
    "mistral-window8": ("mistral", dict(sliding_window=8), ["f16"], False),
    "gemma4-shared": ("gemma4", dict(layers=6, swa_list=[True, True, True, False, True, False], head_dim=32,
                                     head_dim_swa=16, n_kv_heads=[2, 2, 2, 1, 2, 1], ff=[128, 128, 128, 128, 256, 256],
                                     shared_kv=2, v_absent_full=True), ["f16", "q8_0"], True),
}
N_EMBD, N_HEAD, N_HEAD_KV, N_FF = 64, 4, 2, 128
K_TYPES = {"q4_k": (gguf.GGMLQuantizationType.Q4_K, gguf.GGMLQuantizationType.Q5_0, gguf.LlamaFileType.MOSTLY_Q4_K_M),
           "q6_k": (gguf.GGMLQuantizationType.Q6_K, gguf.GGMLQuantizationType.Q8_0, gguf.LlamaFileType.MOSTLY_Q6_K)}
K_WIDTH = 256  # N_EMBD and N_FF of the K-quant models (with 16 query heads)


def field(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def llama3_rope_freqs(n_rot, base, factor=8.0, low=1.0, high=4.0, orig=8192):
    """The Llama 3 frequency factors as convert_hf_to_gguf.py computes rope_freqs.weight."""
    low_wavelen, high_wavelen = orig / low, orig / high
    out = []
    for i in range(0, n_rot, 2):
        freq = 1.0 / (base ** (i / n_rot))
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(1.0)
        elif wavelen > low_wavelen:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def write(name, spec, wtype, path, seed):
    vr = gguf.GGUFReader(os.path.join(TOKENIZERS, f"ggml-vocab-{spec['vocab']}.gguf"))
    tokens = field(vr, "tokenizer.ggml.tokens")
    n_vocab = len(tokens)
    rng = np.random.default_rng(seed)
    L = spec.get("layers", LAYERS)
    E = K_WIDTH if wtype in K_TYPES else N_EMBD
    H = E // 16 if wtype in K_TYPES else N_HEAD  # head size 16 = E / H where the file has no key_length
    per_layer = lambda v, dflt: list(v) if isinstance(v, list) else [v if v is not None else dflt] * L
    FF = per_layer(spec.get("ff"), K_WIDTH if wtype in K_TYPES else N_FF)
    KVH = per_layer(spec.get("n_kv_heads"), N_HEAD_KV)
    swa = spec.get("swa_list", [False] * L)
    D_full = spec["head_dim"]
    dims = [spec.get("head_dim_swa", D_full) if swa[il] else D_full for il in range(L)]
    n_kv_layers = L - spec.get("shared_kv", 0)

    def normal(shape, std):
        return rng.standard_normal(size=shape, dtype=np.float32) * np.float32(std)

    def matrix(w):  # numpy [out, in]: the GGML [in, out] weight in the chosen type
        if wtype in K_TYPES:
            ktype, fallback, _ = K_TYPES[wtype]
            if w.shape[1] % 256 == 0:
                return kquants.quantize(w, ktype), ktype
            return gguf.quants.quantize(w, fallback), fallback
        return gguf.quants.quantize(w, TYPES[wtype]), TYPES[wtype]

    def norm(n):
        return (1 + normal((n,), 0.1)).astype(np.float32)

    arch = spec["arch"]
    tmp = path + ".tmp"
    w = gguf.GGUFWriter(tmp, arch)
    w.add_name(f"synthetic-{name}")
    w.add_context_length(131072 if spec.get("longrope") else 8192)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(FF if len(set(FF)) > 1 else FF[0])
    w.add_head_count(H)
    w.add_head_count_kv(KVH if len(set(KVH)) > 1 else KVH[0])
    if spec.get("key_length"):
        w.add_key_length(D_full)
        w.add_value_length(D_full)
    if spec.get("n_rot"):
        w.add_rope_dimension_count(spec["n_rot"])
    w.add_rope_freq_base(spec["rope_base"])
    w.add_layer_norm_rms_eps(1e-6)
    if spec.get("sliding_window"):
        w.add_sliding_window(spec["sliding_window"])
    if spec.get("softcap"):
        w.add_attn_logit_softcapping(spec["softcap"][0])
        w.add_final_logit_softcapping(spec["softcap"][1])
    if spec.get("final_softcap"):
        w.add_final_logit_softcapping(spec["final_softcap"])
    if spec.get("swa_list"):
        w.add_array(f"{arch}.attention.sliding_window_pattern", spec["swa_list"])
        w.add_uint32(f"{arch}.attention.key_length_swa", spec.get("head_dim_swa", D_full))
        w.add_uint32(f"{arch}.attention.value_length_swa", spec.get("head_dim_swa", D_full))
        w.add_float32(f"{arch}.rope.freq_base_swa", 1e4)
        w.add_uint32(f"{arch}.rope.dimension_count", D_full)
        w.add_uint32(f"{arch}.rope.dimension_count_swa", spec["n_rot_swa"])
    if spec.get("shared_kv"):
        w.add_uint32(f"{arch}.attention.shared_kv_layers", spec["shared_kv"])
    if spec.get("per_layer"):
        w.add_uint32(f"{arch}.embedding_length_per_layer_input", spec["per_layer"])
    if spec.get("longrope"):
        w.add_rope_scaling_orig_ctx_len(4096)
        w.add_rope_scaling_attn_factors(1.19)
    w.add_file_type(K_TYPES[wtype][2] if wtype in K_TYPES else FILE_TYPES[wtype])
    w.add_tokenizer_model(field(vr, "tokenizer.ggml.model"))
    if field(vr, "tokenizer.ggml.pre") is not None:
        w.add_tokenizer_pre(field(vr, "tokenizer.ggml.pre"))
    w.add_token_list(tokens)
    if field(vr, "tokenizer.ggml.scores") is not None:
        w.add_token_scores(field(vr, "tokenizer.ggml.scores"))
    w.add_token_types(field(vr, "tokenizer.ggml.token_type"))
    if field(vr, "tokenizer.ggml.merges") is not None:
        w.add_token_merges(field(vr, "tokenizer.ggml.merges"))
    for key, add in (("bos_token_id", w.add_bos_token_id), ("eos_token_id", w.add_eos_token_id),
                     ("padding_token_id", w.add_pad_token_id), ("unknown_token_id", w.add_unk_token_id)):
        v = field(vr, "tokenizer.ggml." + key)
        if v is not None:
            add(int(v))

    def tensor(tname, arr_type):
        arr, ty = arr_type if isinstance(arr_type, tuple) else (arr_type, None)
        if ty is None:
            w.add_tensor(tname, arr)
        else:  # quantized rows: the raw bytes with the float shape
            w.add_tensor(tname, arr, raw_dtype=ty)

    tensor("token_embd.weight", matrix(normal((n_vocab, E), 0.4)))
    EPL = spec.get("per_layer", 0)
    if EPL:  # the per-layer token table [Epl·L, V], its projection from the embeddings, their norm
        tensor("per_layer_token_embd.weight", matrix(normal((n_vocab, EPL * L), 0.4)))
        tensor("per_layer_model_proj.weight", matrix(normal((EPL * L, E), E ** -0.5)))
        tensor("per_layer_proj_norm.weight", norm(EPL))
    if spec.get("rope_freqs_global"):  # proportional RoPE on the full-attention layers
        tensor("rope_freqs.weight", (1 + rng.random(D_full // 2, dtype=np.float32) * 3).astype(np.float32))
    if spec.get("rope_freqs"):
        tensor("rope_freqs.weight", llama3_rope_freqs(D_full, spec["rope_base"]))
    if spec.get("longrope"):
        n_rot = spec["n_rot"]
        tensor("rope_factors_long.weight", (1 + rng.random(n_rot // 2, dtype=np.float32) * 20).astype(np.float32))
        tensor("rope_factors_short.weight", (1 + rng.random(n_rot // 2, dtype=np.float32) * 0.5).astype(np.float32))
    for il in range(L):
        p = f"blk.{il}."
        D, F = dims[il], FF[il]
        HD, KD = H * D, KVH[il] * D
        own_kv = il < n_kv_layers  # a shared layer has no K/V weights: it reads an earlier layer's cache
        v_absent = spec.get("v_absent_full") and not swa[il]
        tensor(p + "attn_norm.weight", norm(E))
        q, k, v = normal((HD, E), E ** -0.5), normal((KD, E), E ** -0.5), normal((KD, E), E ** -0.5)
        if spec.get("fused"):
            tensor(p + "attn_qkv.weight", matrix(np.concatenate([q, k, v], axis=0)))
        else:
            tensor(p + "attn_q.weight", matrix(q))
            if own_kv:
                tensor(p + "attn_k.weight", matrix(k))
            if own_kv and not v_absent:
                tensor(p + "attn_v.weight", matrix(v))
        if spec.get("qkv_bias"):
            tensor(p + "attn_q.bias", normal((HD,), 0.5))
            tensor(p + "attn_k.bias", normal((KD,), 0.5))
            tensor(p + "attn_v.bias", normal((KD,), 0.5))
        if spec.get("qk_norm"):
            tensor(p + "attn_q_norm.weight", norm(D))
            if own_kv:
                tensor(p + "attn_k_norm.weight", norm(D))
        tensor(p + "attn_output.weight", matrix(normal((E, HD), HD ** -0.5)))
        tensor(p + "ffn_norm.weight", norm(E))
        gate, up = normal((F, E), E ** -0.5), normal((F, E), E ** -0.5)
        if spec.get("fused"):
            tensor(p + "ffn_up.weight", matrix(np.concatenate([gate, up], axis=0)))
        else:
            tensor(p + "ffn_gate.weight", matrix(gate))
            tensor(p + "ffn_up.weight", matrix(up))
        tensor(p + "ffn_down.weight", matrix(normal((E, F), F ** -0.5)))
        if spec.get("sandwich"):
            tensor(p + "post_attention_norm.weight", norm(E))
            tensor(p + "post_ffw_norm.weight", norm(E))
        if EPL:
            tensor(p + "inp_gate.weight", matrix(normal((EPL, E), E ** -0.5)))
            tensor(p + "proj.weight", matrix(normal((E, EPL), EPL ** -0.5)))
            tensor(p + "post_norm.weight", norm(E))
        if spec.get("out_scale"):
            tensor(p + "layer_output_scale.weight", np.array([0.5 + 0.25 * il], dtype=np.float32))
    tensor("output_norm.weight", norm(E))
    if not spec["tied"]:
        tensor("output.weight", matrix(normal((n_vocab, E), 0.4)))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, path)
    return n_vocab


def model_names():
    """The models with a llama.cpp golden."""
    names = [f"{name}-{t}" for name in FAMILIES for t in list(TYPES) + list(K_TYPES)]
    return names + [f"{v}-{t}" for v, (_, _, types, golden) in VARIANTS.items() if golden for t in types]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir", nargs="?")
    ap.add_argument("--only", action="append", help="NAME or NAME-TYPE (e.g. phi3, gemma2-q8_0)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--if-missing", action="store_true", help="keep files that exist")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    a = ap.parse_args()
    if a.list:
        print("\n".join(model_names()))
        return 0
    if not a.out_dir:
        ap.error("OUT_DIR is required")
    os.makedirs(a.out_dir, exist_ok=True)
    for variant, (base, change, types, _) in VARIANTS.items():
        for wtype in types:
            full = f"{variant}-{wtype}"
            if a.only and variant not in a.only and full not in a.only:
                continue
            path = os.path.join(a.out_dir, full + ".gguf")
            if not (a.if_missing and os.path.exists(path)):
                fi = list(FAMILIES).index(base)  # the base family's seed: the same weights where the shapes agree
                write(full, dict(FAMILIES[base], **change), wtype, path, a.seed + 100 * fi)
                print(f"wrote {path} (variant of {base}-{wtype}: {change})")
    for fi, (name, spec) in enumerate(FAMILIES.items()):
        for wtype in list(TYPES) + list(K_TYPES):
            full = f"{name}-{wtype}"
            if a.only and name not in a.only and full not in a.only:
                continue
            path = os.path.join(a.out_dir, full + ".gguf")
            if a.if_missing and os.path.exists(path):
                continue
            # every type: the same weights (the K-quant types: the same seed, at their own width)
            n_vocab = write(full, spec, wtype, path, a.seed + 100 * fi)
            print(f"wrote {path} ({os.path.getsize(path) / 2**20:.1f} MiB, {spec['arch']}, vocab {n_vocab})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
