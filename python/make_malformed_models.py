#!/usr/bin/env python3
"""Write a corpus of GGUF files that parse but are not usable models, one broken thing each.

Every file is stories260K.gguf (a 5-layer llama, 64 wide, 8 heads, 4 KV heads, vocab 512) read
with gguf.GGUFReader and written again with gguf.GGUFWriter, with one change: a tensor left out or
reshaped, a metadata key changed, removed or stored with another type, a NaN/Inf written into a
weight or into the scale of a quantized block. The container stays valid in every case, so what
each file tests is the model check after parsing (runtime::ModelFile::open: the builder's
hyper-parameters and tensor shapes, the vocabulary, the weights' values), never the parser.

OUT_DIR/manifest.tsv lists the cases, one a line: `name<TAB>expected`, where `expected` is a
substring of the error ModelFile::open must return for OUT_DIR/name.gguf, or empty for a file
that must open (the unchanged base, and the base with quantized weights and no broken value).

usage: make_malformed_models.py OUT_DIR [--base stories260K.gguf]
"""
import argparse
import os
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BASE = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "models", "stories260K.gguf"))

VT = gguf.GGUFValueType
QT = gguf.GGMLQuantizationType
F16_NAN, F16_POS_INF, F16_NEG_INF = 0x7E00, 0x7C00, 0xFC00


class Model:
    """The base file as editable lists: metadata (key -> [value, type, sub_type], in file order)
    and tensors (name -> numpy array in numpy order: float arrays, or uint8 block bytes with the
    GGML type in `qtype`)."""

    def __init__(self, path):
        r = gguf.GGUFReader(path)
        self.kv = {}
        for f in r.fields.values():
            if f.name.startswith("GGUF."):
                continue
            vtype = f.types[0]
            sub = f.types[-1] if vtype == VT.ARRAY else None
            self.kv[f.name] = [f.contents(), vtype, sub]
        self.tensors = {}
        self.qtype = {}
        for t in r.tensors:
            shape = tuple(int(n) for n in reversed(t.shape))  # numpy order
            if t.tensor_type == QT.F32:
                self.tensors[t.name] = np.array(t.data, dtype=np.float32).reshape(shape)
            elif t.tensor_type == QT.F16:
                self.tensors[t.name] = np.array(t.data, dtype=np.float16).reshape(shape)
            else:
                sys.exit(f"base model tensor {t.name} has type {t.tensor_type.name}; expected an f32/f16 model")

    def set(self, key, value, vtype=None, sub=None):
        if vtype is None:
            vtype, sub = self.kv[key][1], self.kv[key][2]
        self.kv[key] = [value, vtype, sub]

    def quantize(self, name, qtype):
        self.tensors[name] = gguf.quants.quantize(self.tensors[name].astype(np.float32), qtype)
        self.qtype[name] = qtype

    def set_block_f16(self, name, block, byte_offset, bits):
        """Overwrite an f16 field (a scale) at `byte_offset` of block `block` of a quantized tensor."""
        q = self.tensors[name]
        block_bytes = gguf.GGML_QUANT_SIZES[self.qtype[name]][1]
        flat = q.reshape(-1)
        at = block * block_bytes + byte_offset
        flat[at:at + 2] = np.frombuffer(np.uint16(bits).tobytes(), dtype=np.uint8)

    def write(self, path):
        w = gguf.GGUFWriter(path, "llama")
        w.kv_data = [{}]  # drop the architecture key the constructor adds: ours, in file order
        for key, (value, vtype, sub) in self.kv.items():
            w.add_key_value(key, value, vtype, sub)
        for name, data in self.tensors.items():
            if name in self.qtype:
                w.add_tensor(name, data, raw_dtype=self.qtype[name])
            else:
                w.add_tensor(name, data)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()


def cases():
    """(name, edit(model), expected substring of the error; "" = the file must open)."""
    A = "llama."
    c = []

    def case(name, expected):
        def deco(fn):
            c.append((name, fn, expected))
            return fn
        return deco

    @case("valid", "")
    def _(m):
        pass

    @case("valid_quantized", "")
    def _(m):  # quantized weights with finite scales open: the scale check has no false positive
        m.quantize("token_embd.weight", QT.Q8_0)
        m.quantize("output.weight", QT.Q4_1)
        m.tensors["blk.0.attn_q.weight"] = m.tensors["blk.0.attn_q.weight"].astype(np.float16)

    # ---- missing tensors ----
    @case("missing_output_norm", "model is missing required tensor 'output_norm.weight'")
    def _(m):
        del m.tensors["output_norm.weight"]

    @case("missing_layer_attn_q", "model is missing required tensor 'blk.2.attn_q.weight'")
    def _(m):
        del m.tensors["blk.2.attn_q.weight"]

    @case("missing_token_embd", "model is missing required tensor 'token_embd.weight'")
    def _(m):
        del m.tensors["token_embd.weight"]

    # ---- wrong shapes ----
    @case("token_embd_wrong_width", "tensor 'token_embd.weight' has shape [48, 512]")
    def _(m):
        m.tensors["token_embd.weight"] = np.ascontiguousarray(m.tensors["token_embd.weight"][:, :48])

    @case("ffn_up_wrong_width", "tensor 'blk.1.ffn_up.weight' has shape [64, 160]")
    def _(m):
        m.tensors["blk.1.ffn_up.weight"] = np.ascontiguousarray(m.tensors["blk.1.ffn_up.weight"][:160, :])

    @case("ffn_down_transposed", "tensor 'blk.3.ffn_down.weight' has shape [64, 172]")
    def _(m):  # 172 rows of 64 (GGML order [64, 172]) instead of 64 rows of 172 ([172, 64])
        m.tensors["blk.3.ffn_down.weight"] = np.ascontiguousarray(m.tensors["blk.3.ffn_down.weight"].T)

    @case("attn_k_wrong_rows", "tensor 'blk.0.attn_k.weight' has shape [64, 64]")
    def _(m):  # 8 KV heads' worth of rows for 4 KV heads
        m.tensors["blk.0.attn_k.weight"] = m.tensors["blk.0.attn_q.weight"].copy()

    # ---- types the kernels do not compute with ----
    @case("norm_f16", "tensor 'output_norm.weight' has type F16; norm weights and biases must be F32")
    def _(m):
        m.tensors["output_norm.weight"] = m.tensors["output_norm.weight"].astype(np.float16)

    @case("embedding_iq4_nl", "tensor 'token_embd.weight' has type IQ4_NL, which ggflow cannot compute with")
    def _(m):  # 512 rows of 2 IQ4_NL blocks (18 bytes each), all zero
        m.tensors["token_embd.weight"] = np.zeros((512, 2 * 18), dtype=np.uint8)
        m.qtype["token_embd.weight"] = QT.IQ4_NL

    @case("matrix_i8", "tensor 'blk.0.attn_q.weight' has type I8, which ggflow cannot compute with")
    def _(m):
        m.tensors["blk.0.attn_q.weight"] = np.ones((64, 64), dtype=np.int8)

    # ---- head counts ----
    @case("n_embd_not_divisible_by_heads", "'llama.embedding_length' = 64 is not divisible by 'llama.attention.head_count' = 6")
    def _(m):
        m.set(A + "attention.head_count", 6)
        m.set(A + "attention.head_count_kv", 3)

    @case("heads_not_multiple_of_kv_heads", "'llama.attention.head_count' = 8 is not a multiple of 'llama.attention.head_count_kv' = 3")
    def _(m):
        m.set(A + "attention.head_count_kv", 3)

    @case("head_count_0", "metadata key 'llama.attention.head_count' = 0")
    def _(m):
        m.set(A + "attention.head_count", 0)

    @case("head_count_kv_0", "metadata key 'llama.attention.head_count_kv' = 0")
    def _(m):
        m.set(A + "attention.head_count_kv", 0)

    @case("key_length_0", "metadata key 'llama.attention.key_length' = 0")
    def _(m):
        m.set(A + "attention.key_length", 0, VT.UINT32)

    @case("rope_dimension_count_odd", "metadata key 'llama.rope.dimension_count' = 7")
    def _(m):
        m.set(A + "rope.dimension_count", 7)

    @case("rope_dimension_count_above_head_size", "metadata key 'llama.rope.dimension_count' = 16")
    def _(m):
        m.set(A + "rope.dimension_count", 16)

    # ---- vocabulary ----
    def resize_vocab(m, n):
        toks, scores, types = (m.kv["tokenizer.ggml." + k][0] for k in ("tokens", "scores", "token_type"))
        extra = max(0, n - len(toks))
        m.set("tokenizer.ggml.tokens", (list(toks) + [f"<extra_{i}>" for i in range(extra)])[:n])
        m.set("tokenizer.ggml.scores", (list(scores) + [0.0] * extra)[:n])
        m.set("tokenizer.ggml.token_type", (list(types) + [1] * extra)[:n])

    @case("vocab_more_tokens_than_embedding_rows", "tensor 'token_embd.weight' has 512 rows, fewer than the 520 tokens")
    def _(m):
        resize_vocab(m, 520)

    @case("vocab_fewer_tokens_than_embedding_rows", "the vocabulary (tokenizer.ggml.tokens) has 500 tokens but tensor 'token_embd.weight' has 512 rows")
    def _(m):
        resize_vocab(m, 500)

    @case("embedding_fewer_rows_than_vocab", "tensor 'token_embd.weight' has 500 rows, fewer than the 512 tokens")
    def _(m):
        m.tensors["token_embd.weight"] = np.ascontiguousarray(m.tensors["token_embd.weight"][:500])

    @case("output_head_rows_not_vocab", "tensor 'output.weight' (the output head) has 500 rows")
    def _(m):
        m.tensors["output.weight"] = np.ascontiguousarray(m.tensors["output.weight"][:500])

    @case("vocab_size_key_mismatch", "metadata key 'llama.vocab_size' = 500 but tensor 'token_embd.weight' has 512 rows")
    def _(m):
        m.set(A + "vocab_size", 500, VT.UINT32)

    @case("tokens_wrong_type", "metadata key 'tokenizer.ggml.tokens' has type array of i32, expected an array of strings")
    def _(m):
        m.set("tokenizer.ggml.tokens", list(range(512)), VT.ARRAY, VT.INT32)

    # ---- NaN / Inf in the weights ----
    @case("nan_in_output_norm", "tensor 'output_norm.weight' (F32) holds NaN at element 3")
    def _(m):
        m.tensors["output_norm.weight"][3] = np.nan

    @case("inf_in_layer_attn_norm", "tensor 'blk.4.attn_norm.weight' (F32) holds +Inf at element 10")
    def _(m):
        m.tensors["blk.4.attn_norm.weight"][10] = np.inf

    @case("nan_in_f32_matrix", "tensor 'blk.3.ffn_down.weight' (F32) holds NaN at element 1000")
    def _(m):
        m.tensors["blk.3.ffn_down.weight"].reshape(-1)[1000] = np.nan

    @case("inf_in_f16_matrix", "tensor 'blk.0.attn_q.weight' (F16) holds -Inf at element 5")
    def _(m):
        t = m.tensors["blk.0.attn_q.weight"].astype(np.float16)
        t.reshape(-1)[5] = -np.inf
        m.tensors["blk.0.attn_q.weight"] = t

    @case("nan_scale_q8_0_token_embd", "tensor 'token_embd.weight' (Q8_0) holds a NaN scale in block 37 (elements 1184..1215)")
    def _(m):
        m.quantize("token_embd.weight", QT.Q8_0)
        m.set_block_f16("token_embd.weight", 37, 0, F16_NAN)          # block_q8_0.d

    @case("inf_min_q4_1_output", "tensor 'output.weight' (Q4_1) holds a -Inf scale in block 100")
    def _(m):
        m.quantize("output.weight", QT.Q4_1)
        m.set_block_f16("output.weight", 100, 2, F16_NEG_INF)        # block_q4_1.m

    @case("inf_scale_q4_0_layer", "tensor 'blk.2.attn_v.weight' (Q4_0) holds a +Inf scale in block 0")
    def _(m):
        m.quantize("blk.2.attn_v.weight", QT.Q4_0)
        m.set_block_f16("blk.2.attn_v.weight", 0, 0, F16_POS_INF)     # block_q4_0.d

    # ---- architecture, RoPE ----
    @case("unknown_architecture", "unsupported architecture 'mamba' (general.architecture); supported: llama, qwen2, qwen3, phi3, gemma2, gemma3, gemma4")
    def _(m):
        m.set("general.architecture", "mamba")

    @case("missing_architecture", "model is missing required key 'general.architecture'")
    def _(m):
        del m.kv["general.architecture"]

    @case("architecture_wrong_type", "metadata key 'general.architecture' has type u32, expected string")
    def _(m):
        m.set("general.architecture", 1, VT.UINT32)

    @case("unknown_arch_key", "metadata key 'llama.expert_count' is not one ggflow reads for architecture 'llama'")
    def _(m):  # a mixture of experts would be run as a dense model: refused instead
        m.set(A + "expert_count", 8, VT.UINT32)

    @case("unused_tensor", "tensor 'blk.0.attn_q.bias' is in the file but architecture 'llama' does not use it")
    def _(m):  # never silently dropped: the logits would differ from what the file means
        m.tensors["blk.0.attn_q.bias"] = np.zeros(64, dtype=np.float32)

    @case("valid_rope_freqs", "")
    def _(m):  # Llama 3's frequency factors, one per rotated pair (head size 8: 4)
        m.tensors["rope_freqs.weight"] = np.array([1.0, 1.5, 2.0, 8.0], dtype=np.float32)

    @case("rope_freqs_wrong_length", "tensor 'rope_freqs.weight' has shape [3], architecture 'llama' needs [4]")
    def _(m):
        m.tensors["rope_freqs.weight"] = np.array([1.0, 1.5, 2.0], dtype=np.float32)

    @case("valid_sliding_window", "")
    def _(m):  # mistral: a window on every layer
        m.set(A + "attention.sliding_window", 4, VT.UINT32)

    @case("unknown_rope_scaling_type", "unknown RoPE scaling type 'bogus' (metadata key 'llama.rope.scaling.type')")
    def _(m):
        m.set(A + "rope.scaling.type", "bogus", VT.STRING)

    @case("unsupported_rope_scaling_yarn", "RoPE scaling 'yarn' (metadata key 'llama.rope.scaling.type') is not supported")
    def _(m):
        m.set(A + "rope.scaling.type", "yarn", VT.STRING)
        m.set(A + "rope.scaling.factor", 4.0, VT.FLOAT32)

    @case("rope_scaling_type_wrong_type", "metadata key 'llama.rope.scaling.type' has type u32, expected string")
    def _(m):
        m.set(A + "rope.scaling.type", 1, VT.UINT32)

    @case("rope_scaling_factor_negative", "metadata key 'llama.rope.scaling.factor' = -2")
    def _(m):
        m.set(A + "rope.scaling.type", "linear", VT.STRING)
        m.set(A + "rope.scaling.factor", -2.0, VT.FLOAT32)

    @case("rope_freq_base_negative", "metadata key 'llama.rope.freq_base' = -1")
    def _(m):
        m.set(A + "rope.freq_base", -1.0, VT.FLOAT32)

    # ---- counts and sizes ----
    @case("context_length_0", "metadata key 'llama.context_length' = 0")
    def _(m):
        m.set(A + "context_length", 0)

    @case("block_count_0", "metadata key 'llama.block_count' = 0")
    def _(m):
        m.set(A + "block_count", 0)

    @case("block_count_above_layers", "metadata key 'llama.block_count' = 6 but the file's tensors describe 5 layers")
    def _(m):
        m.set(A + "block_count", 6)

    @case("block_count_below_layers", "metadata key 'llama.block_count' = 4 but the file's tensors describe 5 layers")
    def _(m):
        m.set(A + "block_count", 4)

    @case("missing_block_count", "model is missing required key 'llama.block_count'")
    def _(m):
        del m.kv[A + "block_count"]

    @case("embedding_length_0", "metadata key 'llama.embedding_length' = 0")
    def _(m):
        m.set(A + "embedding_length", 0)

    @case("feed_forward_length_0", "metadata key 'llama.feed_forward_length' = 0")
    def _(m):
        m.set(A + "feed_forward_length", 0)

    # feed_forward_length, head_count and head_count_kv: one number or an array of one per layer
    @case("valid_per_layer_arrays", "")
    def _(m):
        m.set(A + "feed_forward_length", [172] * 5, VT.ARRAY, VT.UINT32)
        m.set(A + "attention.head_count_kv", [4] * 5, VT.ARRAY, VT.INT32)

    @case("feed_forward_length_array_short", "metadata key 'llama.feed_forward_length' must be an integer or an array of 5 integers (one per layer)")
    def _(m):
        m.set(A + "feed_forward_length", [172] * 4, VT.ARRAY, VT.UINT32)

    @case("feed_forward_length_array_of_floats", "metadata key 'llama.feed_forward_length' must be an integer or an array of 5 integers")
    def _(m):
        m.set(A + "feed_forward_length", [172.0] * 5, VT.ARRAY, VT.FLOAT32)

    @case("feed_forward_length_array_0", "metadata key 'llama.feed_forward_length' = 0 at layer 2")
    def _(m):
        m.set(A + "feed_forward_length", [172, 172, 0, 172, 172], VT.ARRAY, VT.UINT32)

    @case("head_count_kv_array_not_dividing", "'llama.attention.head_count' = 8 is not a multiple of 'llama.attention.head_count_kv' = 3 (layer 3)")
    def _(m):
        m.set(A + "attention.head_count_kv", [4, 4, 4, 3, 4], VT.ARRAY, VT.UINT32)

    @case("rms_epsilon_nan", "metadata key 'llama.attention.layer_norm_rms_epsilon' = nan")
    def _(m):
        m.set(A + "attention.layer_norm_rms_epsilon", float("nan"))

    # ---- keys with the wrong type ----
    @case("block_count_wrong_type", "metadata key 'llama.block_count' has type string, expected an integer")
    def _(m):
        m.set(A + "block_count", "5", VT.STRING)

    @case("head_count_negative_i32", "metadata key 'llama.attention.head_count' = -8 does not fit the expected unsigned type")
    def _(m):
        m.set(A + "attention.head_count", -8, VT.INT32)

    @case("rms_epsilon_wrong_type", "metadata key 'llama.attention.layer_norm_rms_epsilon' has type string, expected a float")
    def _(m):
        m.set(A + "attention.layer_norm_rms_epsilon", "1e-5", VT.STRING)

    @case("context_length_wrong_type", "metadata key 'llama.context_length' has type f32, expected an integer")
    def _(m):
        m.set(A + "context_length", 2048.0, VT.FLOAT32)

    return c


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--base", default=DEFAULT_BASE)
    a = ap.parse_args()
    if not os.path.exists(a.base):
        sys.exit(f"{a.base} is missing: the base model of the corpus (../shared/models)")
    os.makedirs(a.out_dir, exist_ok=True)
    lines = []
    for name, edit, expected in cases():
        m = Model(a.base)
        edit(m)
        m.write(os.path.join(a.out_dir, name + ".gguf"))
        assert "\t" not in expected and "\n" not in expected
        lines.append(f"{name}\t{expected}\n")
    with open(os.path.join(a.out_dir, "manifest.tsv"), "w") as f:
        f.writelines(lines)
    print(f"wrote {len(lines)} models into {a.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
