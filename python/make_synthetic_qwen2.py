#!/usr/bin/env python3
"""Write a synthetic qwen2 GGUF with Qwen2.5-0.5B shapes and random weights.

24 layers, 896 wide, 14 query heads and 2 KV heads of 64, Q/K/V biases, FFN 4864, tied
embeddings, RoPE base 1e6, the real qwen2 vocabulary (151936 tokens, copied from
../shared/data/tokenizer/ggml-vocab-qwen2.gguf). Weights are f16 (about 1 GB), norms f32.

Deterministic: the same seed gives the same bytes, so tests regenerate the file instead of
committing it. Scales are chosen so that activations stay O(1) and logits have a spread of a few
units (so top-1 is meaningful rather than a tie between near-zero logits):
  linear weights ~ N(0, 1/fan_in), biases ~ N(0, 0.5), norms ~ 1 + N(0, 0.1),
  embeddings ~ N(0, 0.1) (logits = E . normed_x have std ~ 0.1 * sqrt(896) ~ 3).

usage: make_synthetic_qwen2.py OUT.gguf [--vocab VOCAB.gguf] [--seed 1234] [--layers 24] [--if-missing]
"""
import argparse
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_VOCAB = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data", "tokenizer", "ggml-vocab-qwen2.gguf"))

N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 896, 14, 2, 64, 4864
ARCH = "qwen2"


def field_value(reader, key):
    f = reader.fields.get(key)
    return None if f is None else f.contents()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--vocab", default=DEFAULT_VOCAB)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--if-missing", action="store_true", help="do nothing when OUT exists")
    a = ap.parse_args()
    if a.if_missing and os.path.exists(a.out):
        print(f"{a.out} exists")
        return 0

    vr = gguf.GGUFReader(a.vocab)
    tokens = field_value(vr, "tokenizer.ggml.tokens")
    n_vocab = len(tokens)
    rng = np.random.default_rng(a.seed)

    def normal(shape, std, dtype=np.float16):
        # float32 draws, then the storage type: same bytes for the same seed on every machine
        return (rng.standard_normal(size=shape, dtype=np.float32) * np.float32(std)).astype(dtype)

    tmp = a.out + ".tmp"
    w = gguf.GGUFWriter(tmp, ARCH)
    w.add_name("synthetic-qwen2-0.5b-shapes")
    w.add_context_length(32768)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(a.layers)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_tokenizer_model(field_value(vr, "tokenizer.ggml.model"))
    w.add_tokenizer_pre(field_value(vr, "tokenizer.ggml.pre"))
    w.add_token_list(tokens)
    w.add_token_types(field_value(vr, "tokenizer.ggml.token_type"))
    w.add_token_merges(field_value(vr, "tokenizer.ggml.merges"))
    w.add_bos_token_id(int(field_value(vr, "tokenizer.ggml.bos_token_id")))
    w.add_eos_token_id(int(field_value(vr, "tokenizer.ggml.eos_token_id")))
    w.add_pad_token_id(int(field_value(vr, "tokenizer.ggml.padding_token_id")))
    tmpl = field_value(vr, "tokenizer.chat_template")
    if tmpl:
        w.add_chat_template(tmpl)

    # numpy shapes are outermost first: a GGML [in, out] weight is the numpy array [out, in].
    w.add_tensor("token_embd.weight", normal((n_vocab, N_EMBD), 0.1))
    for il in range(a.layers):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", (1 + normal((N_EMBD,), 0.1, np.float32)).astype(np.float32))
        w.add_tensor(p + "attn_q.weight", normal((N_HEAD * HEAD_DIM, N_EMBD), N_EMBD ** -0.5))
        w.add_tensor(p + "attn_q.bias", normal((N_HEAD * HEAD_DIM,), 0.5, np.float32))
        w.add_tensor(p + "attn_k.weight", normal((N_HEAD_KV * HEAD_DIM, N_EMBD), N_EMBD ** -0.5))
        w.add_tensor(p + "attn_k.bias", normal((N_HEAD_KV * HEAD_DIM,), 0.5, np.float32))
        w.add_tensor(p + "attn_v.weight", normal((N_HEAD_KV * HEAD_DIM, N_EMBD), N_EMBD ** -0.5))
        w.add_tensor(p + "attn_v.bias", normal((N_HEAD_KV * HEAD_DIM,), 0.5, np.float32))
        w.add_tensor(p + "attn_output.weight", normal((N_EMBD, N_HEAD * HEAD_DIM), (N_HEAD * HEAD_DIM) ** -0.5))
        w.add_tensor(p + "ffn_norm.weight", (1 + normal((N_EMBD,), 0.1, np.float32)).astype(np.float32))
        w.add_tensor(p + "ffn_gate.weight", normal((N_FF, N_EMBD), N_EMBD ** -0.5))
        w.add_tensor(p + "ffn_up.weight", normal((N_FF, N_EMBD), N_EMBD ** -0.5))
        w.add_tensor(p + "ffn_down.weight", normal((N_EMBD, N_FF), N_FF ** -0.5))
    w.add_tensor("output_norm.weight", (1 + normal((N_EMBD,), 0.1, np.float32)).astype(np.float32))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, a.out)
    print(f"wrote {a.out} ({os.path.getsize(a.out) / 2**20:.0f} MiB, {a.layers} layers, vocab {n_vocab}, seed {a.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
