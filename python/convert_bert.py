#!/usr/bin/env python3
"""Convert a sentence-transformers BERT model directory to a GGUF file of architecture `bert`,
laid out as llama.cpp's converter lays it out (convert_hf_to_gguf.py, class BertModel, in the
llama.cpp that llama-cpp-python 0.3.36 vendors), so that llama.cpp and ggflow read the same file.

Input: a directory with config.json, model.safetensors, vocab.txt and/or tokenizer.json,
tokenizer_config.json, and for the pooling modules.json + <Pooling path>/config.json (as
sentence-transformers saves a model). Only the `gguf` and `numpy` packages are needed: the
safetensors file is parsed here, and the tokenizer facts the converter needs (the
pre-tokenizer fingerprint) come from a WordPiece implementation below, not from `transformers`.

What llama.cpp writes, and so this script:
  - general.architecture = bert, general.type, the model-card fields (gguf.Metadata, as llama.cpp),
    bert.{block_count, context_length, embedding_length, feed_forward_length}, bert.attention.
    {head_count, layer_norm_epsilon, causal = false}, bert.pooling_type (from modules.json),
    general.file_type, general.quantization_version;
  - tokenizer.ggml.model = bert, .pre (the fingerprint of the tokenizer on llama.cpp's check
    text: bert-bge for the uncased BERT vocabulary), .token_type_count (type_vocab_size), the
    tokens with the "phantom space" rule (a control token as it is, `##x` -> `x`, any other
    token gets U+2581 in front, `[unused0]` included), their types (special added tokens
    CONTROL, the rest NORMAL), the special token ids (bos = cls, eos = sep, unk, sep, pad, mask;
    no cls_token_id, which llama.cpp's gguf-py no longer writes), add_bos/add_eos/add_sep from
    tokenizer.json's post-processor, and tokenizer.ggml.normalizer.lowercase from its normalizer;
  - tensors in the sorted order of their safetensors names, renamed (token_embd, token_types,
    position_embd, token_embd_norm, blk.N.attn_q/k/v/output, attn_output_norm, ffn_up, ffn_down,
    layer_output_norm); the pooler and the masked-LM / NSP heads are left out. --outtype f16
    stores the 2-D weight matrices in F16 and keeps 1-D tensors, norms, biases, position_embd and
    token_types in F32.

Refused, with the reason: classification heads (id2label), tokenizers other than WordPiece with
BertNormalizer (RoBERTa, XLM-R), architectures other than BertModel / BertForMaskedLM, sharded or
.bin checkpoints, a tokenizer whose fingerprint llama.cpp does not know (unless --tokenizer-pre).
Not replicated: llama.cpp re-spells an added token that is neither special nor normalized through
the HF tokenizer (encode, then decode); BERT's added tokens are all special. Without modules.json
llama.cpp writes no pooling type; this script then reads 1_Pooling/config.json if it is there.
The output is deterministic (same input, same gguf and numpy: the same bytes).

    python/convert_bert.py MODEL_DIR OUT.gguf [--outtype f16|f32] [--model-name NAME]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import unicodedata
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover
    sys.exit("convert_bert: the gguf package is missing; run scripts/setup.sh (it installs gguf into .venv) "
             "and use .venv/bin/python")

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED = 1, 2, 3, 4, 5  # gguf.TokenType

# The text llama.cpp's converter tokenizes to fingerprint a tokenizer (convert_hf_to_gguf_update.py's
# check text), and the fingerprints of the WordPiece tokenizers it knows: sha256 of str(ids).
CHECK_TEXT = (
    '\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n\U0001f680 (normal) \U0001f636\u200d\U0001f32b\ufe0f '
    '(multiple emojis concatenated) \u2705 \U0001f999\U0001f999 3 33 333 3333 33333 333333 3333333 '
    '33333333 3.3 3..3 3...3 \u1780\u17b6\u1793\u17cb\u178f\u17c2\u1796\u17b7\u179f\u17c1\u179f\u17a2'
    '\u17b6\u1785\U0001f601 ?\u6211\u60f3\u5728apple\u5de5\u4f5c1314151\u5929\uff5e ------======= '
    '\u043d\u0435\u0449\u043e \u043d\u0430 \u0411\u044a\u043b\u0433\u0430\u0440\u0441\u043a\u0438 '
    "''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure "
    "I'll make it, 'D you like some tea? We'Ve a'lL")
KNOWN_PRE = {
    "0876d13b50744004aa9aeae05e7b0647eac9d801b5ba4668afc01e709c15e19f": "bert-bge",  # BAAI/bge-small-en-v1.5
}

# HF BERT tensor names (after the `bert.` prefix is dropped) -> GGUF names.
GLOBAL_TENSORS = {
    "embeddings.word_embeddings": "token_embd",
    "embeddings.token_type_embeddings": "token_types",
    "embeddings.position_embeddings": "position_embd",
    "embeddings.LayerNorm": "token_embd_norm",
}
LAYER_TENSORS = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "attention.output.LayerNorm": "attn_output_norm",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
    "output.LayerNorm": "layer_output_norm",
}
# Tensors the embedding model does not use (llama.cpp drops them too).
SKIPPED = re.compile(r"^(embeddings\.position_ids|pooler\..*|cls\.predictions\..*|cls\.seq_relationship\..*)$")
# Kept in F32 whatever --outtype says (llama.cpp: 1-D tensors, norms, biases, and these two tables).
ALWAYS_F32 = ("position_embd.weight", "token_types.weight")


class ConvertError(Exception):
    pass


# ---- safetensors --------------------------------------------------------------------------------

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16}


def read_safetensors(path: Path) -> dict:
    """name -> loader of its float32 array, from the file's own header (8-byte little-endian
    length, JSON {name: {dtype, shape, data_offsets}}, then the data); BF16 is widened to F32. A
    tensor of another dtype (the I64 `position_ids`) fails only when it is loaded."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        size = path.stat().st_size
        if n <= 0 or 8 + n > size:
            raise ConvertError(f"{path}: not a safetensors file (header length {n}, file size {size})")
        header = json.loads(f.read(n).decode("utf-8"))
    base = 8 + n
    raw = np.memmap(path, dtype=np.uint8, mode="r")

    def loader(name: str, meta: dict):
        def load() -> np.ndarray:
            dtype = ST_DTYPES.get(meta["dtype"])
            if dtype is None:
                raise ConvertError(f"{path}: tensor {name} has dtype {meta['dtype']}; F32, F16 and BF16 are read")
            begin, end = meta["data_offsets"]
            if not 0 <= begin <= end <= size - base:
                raise ConvertError(f"{path}: tensor {name} lies outside the file")
            a = raw[base + begin:base + end].view(dtype).reshape(meta["shape"])
            if meta["dtype"] == "BF16":
                a = (a.astype(np.uint32) << 16).view(np.float32)
            return a.astype(np.float32)
        return load

    return {name: loader(name, meta) for name, meta in header.items() if name != "__metadata__"}


def gguf_tensor_name(hf_name: str, n_layer: int) -> str | None:
    """The GGUF name of an HF BERT tensor, None for one the model does not use."""
    name = hf_name[len("bert."):] if hf_name.startswith("bert.") else hf_name
    if name.endswith(".gamma"):
        name = name[:-len(".gamma")] + ".weight"
    elif name.endswith(".beta"):
        name = name[:-len(".beta")] + ".bias"
    if SKIPPED.match(name):
        return None
    stem, _, suffix = name.rpartition(".")
    if suffix not in ("weight", "bias"):
        raise ConvertError(f"tensor {hf_name}: cannot map it (no .weight/.bias suffix)")
    if stem in GLOBAL_TENSORS:
        return f"{GLOBAL_TENSORS[stem]}.{suffix}"
    m = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)", stem)
    if m and m.group(2) in LAYER_TENSORS and int(m.group(1)) < n_layer:
        return f"blk.{int(m.group(1))}.{LAYER_TENSORS[m.group(2)]}.{suffix}"
    raise ConvertError(f"tensor {hf_name}: not a BERT tensor this converter knows "
                       f"(hint: classification heads and other BERT variants are not supported)")


def stored_type(name: str, ndim: int, outtype: str) -> int:
    if outtype == "f32" or ndim <= 1 or name.endswith("_norm.weight") or name in ALWAYS_F32 \
            or not name.endswith(".weight"):
        return gguf.GGMLQuantizationType.F32
    return gguf.GGMLQuantizationType.F16


# ---- tokenizer ----------------------------------------------------------------------------------

def _is_control(c: str) -> bool:
    return c not in "\t\n\r" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn")


def _is_whitespace(c: str) -> bool:
    return c in "\t\n\r " or (c.isspace() and unicodedata.category(c) in ("Zs", "Zl", "Zp", "Cc"))


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _is_punct(c: str) -> bool:
    return (c.isascii() and not c.isalnum() and c.isprintable() and c != " ") \
        or unicodedata.category(c).startswith("P")


class WordPiece:
    """HF tokenizers' BERT pipeline (BertNormalizer, BertPreTokenizer, WordPiece), enough to
    fingerprint a vocabulary the way llama.cpp's converter does."""

    def __init__(self, vocab: dict, unk: str, lowercase: bool, strip_accents, chinese: bool,
                 max_chars: int = 100, prefix: str = "##"):
        self.vocab, self.unk, self.lowercase = vocab, unk, lowercase
        self.strip_accents = lowercase if strip_accents is None else strip_accents
        self.chinese, self.max_chars, self.prefix = chinese, max_chars, prefix

    def normalize(self, text: str) -> str:
        text = "".join(" " if _is_whitespace(c) else c for c in text
                       if c not in ("\0", "\ufffd") and not _is_control(c))
        if self.chinese:
            text = "".join(f" {c} " if _is_cjk(ord(c)) else c for c in text)
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        return text.lower() if self.lowercase else text

    def words(self, text: str) -> list:
        out, cur = [], ""
        for c in text:
            if _is_whitespace(c) or _is_punct(c):
                if cur:
                    out.append(cur)
                cur = ""
                if not _is_whitespace(c):
                    out.append(c)
            else:
                cur += c
        return out + ([cur] if cur else [])

    def encode(self, text: str) -> list:
        ids = []
        for w in self.words(self.normalize(text)):
            if len(w) > self.max_chars:
                ids.append(self.vocab[self.unk])
                continue
            pieces, start = [], 0
            while start < len(w):
                end = len(w)
                while end > start:
                    piece = (self.prefix if start else "") + w[start:end]
                    if piece in self.vocab:
                        break
                    end -= 1
                if end == start:
                    pieces = [self.vocab[self.unk]]
                    break
                pieces.append(self.vocab[piece])
                start = end
            ids += pieces
        return ids


def load_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def read_vocab(model_dir: Path, tok_json) -> dict:
    if tok_json is not None:
        model = tok_json.get("model", {})
        if model.get("type") != "WordPiece":
            raise ConvertError(f"tokenizer.json has a {model.get('type')} model; this converter handles "
                               "WordPiece (BERT) vocabularies")
        vocab = dict(model["vocab"])
        for t in tok_json.get("added_tokens", []):
            vocab.setdefault(t["content"], t["id"])
        return vocab
    path = model_dir / "vocab.txt"
    if not path.is_file():
        raise ConvertError(f"{model_dir}: neither tokenizer.json nor vocab.txt")
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return {tok: i for i, tok in enumerate(lines)}


def added_tokens(tok_json, tok_cfg) -> dict:
    """content -> special? for the tokenizer's added tokens (tokenizer.json, or the special
    tokens of tokenizer_config.json for a model that has only vocab.txt)."""
    if tok_json is not None:
        return {t["content"]: bool(t.get("special")) for t in tok_json.get("added_tokens", [])}
    return {v: True for k, v in (tok_cfg or {}).items() if k.endswith("_token") and isinstance(v, str)}


def looks_special(tok: str) -> bool:
    return tok in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (tok.startswith("<|") and tok.endswith("|>")) \
        or (tok.startswith("<\uff5c") and tok.endswith("\uff5c>")) or (tok.startswith("<unused") and tok.endswith(">"))


def phantom(tok: str, toktype: int) -> str:
    """llama.cpp's WordPiece spelling: word-initial pieces carry U+2581, continuations lose `##`."""
    if toktype == CONTROL:
        return tok
    if tok.startswith("##"):
        return tok[2:]
    return "\u2581" + tok


def special_tokens(tok_json, tok_cfg, config: dict, vocab: dict) -> tuple:
    """(ids by type, add flags by type), as gguf-py's SpecialVocab derives them for a BERT
    tokenizer: cls stands in for bos and sep for eos, the post-processor's template says which
    are added."""
    cfg = dict(tok_cfg or {})

    def content(v):
        return v.get("content") if isinstance(v, dict) else v

    bos, cls, eos, sep = (content(cfg.get(k)) for k in ("bos_token", "cls_token", "eos_token", "sep_token"))
    bos = bos or cls
    eos = eos or sep
    cfg["bos_token"], cfg["eos_token"] = bos, eos
    add = {}
    post = (tok_json or {}).get("post_processor") or {}
    for proc in post.get("processors", [post]) if post else []:
        kind = proc.get("type")
        if kind == "ByteLevel":
            add.setdefault("bos", False)
            add.setdefault("eos", False)
        elif kind == "RobertaProcessing":
            add.update(bos=True, eos=True, sep=True)
        elif kind == "TemplateProcessing":
            single = proc.get("single", [])
            pair = proc.get("pair", [])
            first = single[0].get("SpecialToken", {}).get("id") if len(single) > 1 else None
            last = single[-1].get("SpecialToken", {}).get("id") if len(single) > 1 else None
            if first is not None:
                add["bos"] = first in (bos, cls)
            if last is not None:
                add["eos"] = last == eos
            if pair:
                lo = 1 if first and pair[0].get("SpecialToken", {}).get("id") == first else 0
                hi = len(pair) - 1 if last and pair[-1].get("SpecialToken", {}).get("id") == last else len(pair)
                mid = pair[lo:hi]
                if len(mid) >= 2 and mid[0].get("Sequence", {}).get("id") == "A" \
                        and mid[-1].get("Sequence", {}).get("id") == "B" and mid[1:-1]:
                    between = [m.get("SpecialToken", {}).get("id") for m in mid[1:-1]]
                    add_sep = (between[0] in (sep, eos) and not last) or \
                              (len(between) == 2 and between[1] in (sep, eos))
                    add["sep"] = add_sep
    ids = {}
    # gguf-py looks the names up among tokenizer.json's added tokens only.
    added = {t["content"]: t["id"] for t in (tok_json or {}).get("added_tokens", [])}
    for typ in ("bos", "eos", "unk", "sep", "pad", "cls", "mask"):
        flag = cfg.get(f"add_{typ}_token")
        if isinstance(flag, bool) and typ not in add:
            add[typ] = flag
        tid = added.get(content(cfg.get(f"{typ}_token")))
        if isinstance(tid, int) and tid < len(vocab):
            ids.setdefault(typ, tid)
    for typ in ("bos", "eos", "unk", "sep", "pad", "cls", "mask"):
        tid = config.get(f"{typ}_token_id")
        if isinstance(tid, int) and 0 <= tid < len(vocab):
            ids.setdefault(typ, tid)
    return ids, add


def fingerprint(vocab: dict, tok_json, tok_cfg) -> str:
    norm = (tok_json or {}).get("normalizer") or {}
    model = (tok_json or {}).get("model") or {}
    if tok_json is not None and norm.get("type") not in (None, "BertNormalizer"):
        raise ConvertError(f"tokenizer.json normalizer {norm.get('type')}: only BertNormalizer is implemented")
    lower = norm.get("lowercase", (tok_cfg or {}).get("do_lower_case", True))
    strip = norm.get("strip_accents", (tok_cfg or {}).get("strip_accents"))
    chinese = norm.get("handle_chinese_chars", (tok_cfg or {}).get("tokenize_chinese_chars", True))
    unk = model.get("unk_token", (tok_cfg or {}).get("unk_token", "[UNK]"))
    wp = WordPiece(vocab, unk, lower, strip, chinese, model.get("max_input_chars_per_word", 100),
                   model.get("continuing_subword_prefix", "##"))
    cls_tok, sep_tok = (tok_cfg or {}).get("cls_token", "[CLS]"), (tok_cfg or {}).get("sep_token", "[SEP]")
    ids = [vocab[cls_tok]] + wp.encode(CHECK_TEXT) + [vocab[sep_tok]]
    return hashlib.sha256(str(ids).encode()).hexdigest()


# ---- pooling ------------------------------------------------------------------------------------

def pooling_type(model_dir: Path):
    """MEAN/CLS/LAST from the sentence-transformers Pooling module (modules.json names its
    folder, as llama.cpp reads it); without modules.json, 1_Pooling/config.json if present."""
    modules = load_json(model_dir / "modules.json")
    if modules is not None:
        path = next((m["path"] for m in modules if m["type"].endswith("Pooling")), None)
        if path is None:
            return None
    elif (model_dir / "1_Pooling" / "config.json").is_file():
        path = "1_Pooling"
        print("convert_bert: no modules.json; pooling read from 1_Pooling/config.json "
              "(llama.cpp's converter would write no pooling type)", file=sys.stderr)
    else:
        return None
    cfg = load_json(model_dir / path / "config.json") or {}
    modes = {"mean": gguf.PoolingType.MEAN, "cls": gguf.PoolingType.CLS, "lasttoken": gguf.PoolingType.LAST}
    if cfg.get("pooling_mode_mean_tokens"):
        return gguf.PoolingType.MEAN
    if cfg.get("pooling_mode_cls_token"):
        return gguf.PoolingType.CLS
    if cfg.get("pooling_mode_lasttoken"):
        return gguf.PoolingType.LAST
    if cfg.get("pooling_mode") in modes:
        return modes[cfg["pooling_mode"]]
    raise ConvertError(f"{model_dir / path / 'config.json'}: pooling mode is none of mean, cls, lasttoken")


# ---- the file -----------------------------------------------------------------------------------

def convert(model_dir: Path, out: Path, outtype: str, model_name: str | None = None,
            tokenizer_pre: str | None = None) -> None:
    config = load_json(model_dir / "config.json")
    if config is None:
        raise ConvertError(f"{model_dir}: no config.json (hint: pass the folder of a sentence-transformers "
                           "or Hugging Face BERT model)")
    archs = config.get("architectures") or ["BertModel"]
    if archs[0] not in ("BertModel", "BertForMaskedLM"):
        raise ConvertError(f"architecture {archs[0]}: only BertModel / BertForMaskedLM are converted")
    labels = config.get("id2label")
    if labels and not (len(labels) == 2 and labels.get("0", labels.get(0)) == "LABEL_0"):
        raise ConvertError("config.json has id2label: classification heads are not supported")
    n_layer = config["num_hidden_layers"]

    st_path = model_dir / "model.safetensors"
    if not st_path.is_file():
        raise ConvertError(f"{model_dir}: no model.safetensors (sharded or .bin checkpoints are not read)")
    weights = read_safetensors(st_path)

    w = gguf.GGUFWriter(path=None, arch="bert")
    seen = set()
    for hf_name in sorted(weights):
        name = gguf_tensor_name(hf_name, n_layer)
        if name is None:
            continue
        if name in seen:
            raise ConvertError(f"tensor {hf_name}: {name} appears twice")
        seen.add(name)
        data = weights[hf_name]()
        qtype = stored_type(name, data.ndim, outtype)
        data = data.astype(np.float16) if qtype == gguf.GGMLQuantizationType.F16 else np.ascontiguousarray(data)
        w.add_tensor(name, data, raw_dtype=qtype)
    needed = {"token_embd.weight", "position_embd.weight", "token_embd_norm.weight"} | {
        f"blk.{i}.{t}.weight" for i in range(n_layer) for t in LAYER_TENSORS.values()}
    if needed - seen:
        raise ConvertError(f"{st_path}: missing tensors {sorted(needed - seen)[:5]}")

    ftype = gguf.LlamaFileType.ALL_F32 if outtype == "f32" else gguf.LlamaFileType.MOSTLY_F16

    # General metadata from the model card and config, as llama.cpp's converter gathers it.
    total, shared, expert, n_expert = w.get_total_parameter_count()
    meta = gguf.Metadata.load(None, model_dir, model_name, total)
    if meta.name is None:
        meta.name = model_dir.name
    if meta.size_label is None and total > 0:
        meta.size_label = gguf.size_label(total, shared, expert, n_expert)
    w.add_type(gguf.GGUFType.MODEL)
    meta.set_gguf_meta_model(w)

    w.add_block_count(n_layer)
    w.add_context_length(config["max_position_embeddings"])
    w.add_embedding_length(config["hidden_size"])
    w.add_feed_forward_length(config["intermediate_size"])
    w.add_head_count(config["num_attention_heads"])
    w.add_layer_norm_eps(config.get("layer_norm_eps", 1e-12))
    w.add_file_type(ftype)
    w.add_causal_attention(False)
    pooling = pooling_type(model_dir)
    if pooling is not None:
        w.add_pooling_type(pooling)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)

    # Vocabulary.
    tok_json = load_json(model_dir / "tokenizer.json")
    tok_cfg = load_json(model_dir / "tokenizer_config.json")
    vocab = read_vocab(model_dir, tok_json)
    n_vocab = config.get("vocab_size", len(vocab))
    if max(vocab.values()) >= n_vocab:
        raise ConvertError(f"the vocabulary has ids up to {max(vocab.values())}, config.json vocab_size {n_vocab}")
    added = added_tokens(tok_json, tok_cfg)
    by_id = {i: t for t, i in vocab.items()}
    tokens, types = [], []
    for i in range(n_vocab):
        tok = by_id.get(i)
        if tok is None:
            tokens.append(f"[PAD{i}]")
            types.append(UNUSED)
            continue
        types.append((CONTROL if added[tok] or looks_special(tok) else USER_DEFINED) if tok in added else NORMAL)
        tokens.append(tok)
    tokens = [phantom(t, k) for t, k in zip(tokens, types)]

    if tokenizer_pre is None:
        hsh = fingerprint(vocab, tok_json, tok_cfg)
        tokenizer_pre = KNOWN_PRE.get(hsh)
        if tokenizer_pre is None:
            raise ConvertError(f"the tokenizer's fingerprint {hsh} is not one llama.cpp knows "
                               f"(hint: --tokenizer-pre NAME writes tokenizer.ggml.pre as given)")
    w.add_token_type_count(config.get("type_vocab_size", 1))
    w.add_tokenizer_model("bert")
    w.add_tokenizer_pre(tokenizer_pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    ids, add = special_tokens(tok_json, tok_cfg, config, vocab)
    # llama.cpp's gguf-py has no setter for the cls id any more (deprecated: bos is the CLS
    # token), so its converter skips it; so does this one.
    keys = dict(bos="bos_token_id", eos="eos_token_id", unk="unknown_token_id", sep="seperator_token_id",
                pad="padding_token_id", mask="mask_token_id")
    for typ, tid in ids.items():
        if typ in keys:
            w.add_uint32(f"tokenizer.ggml.{keys[typ]}", tid)
    for typ, flag in add.items():
        w.add_bool(f"tokenizer.ggml.add_{typ}_token", flag)
    norm = (tok_json or {}).get("normalizer") or {}
    if norm.get("type") == "BertNormalizer":
        if "lowercase" in norm:
            w.add_bool("tokenizer.ggml.normalizer.lowercase", bool(norm["lowercase"]))
        if norm.get("strip_accents") is not None:
            w.add_bool("tokenizer.ggml.normalizer.strip_accents", bool(norm["strip_accents"]))

    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    w.write_header_to_file(path=partial)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    partial.replace(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--outtype", choices=("f32", "f16"), default="f16")
    ap.add_argument("--model-name", help="general.name (default: from the model card / config, as llama.cpp)")
    ap.add_argument("--tokenizer-pre", help="tokenizer.ggml.pre for a tokenizer whose fingerprint is not known")
    args = ap.parse_args()
    try:
        convert(args.model_dir, args.out, args.outtype, args.model_name, args.tokenizer_pre)
    except (ConvertError, OSError, KeyError, ValueError) as e:
        print(f"convert_bert: {e}", file=sys.stderr)
        return 1
    print(f"convert_bert: wrote {args.out} ({args.out.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
