// The tokenizer's inputs, as a GGUF file's `tokenizer.*` metadata states them.
//
// `tokenizer.ggml.model` picks the algorithm: "llama" (SentencePiece: scores + byte fallback),
// "gpt2" (byte-level BPE: merges + a pre-tokenizer chosen by `tokenizer.ggml.pre`), "gemma4"
// (BPE over raw UTF-8 characters with spaces written as U+2581 and `<0xNN>` byte fallback),
// "bert" (WordPiece: lowercased, accents stripped, greedy longest pieces).
// Token types follow llama.cpp/gguf: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused,
// 6 byte. VocabData can also be built by hand (unit tests) and passed to Tokenizer::create.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "base/result.h"

namespace ggflow::text {

enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

enum class VocabKind { Spm, ByteBpe, RawBpe, Wpm };

constexpr int32_t kNoToken = -1;

struct VocabData {
  std::string model;                // tokenizer.ggml.model
  std::string pre;                  // tokenizer.ggml.pre ("" when absent)
  std::vector<std::string> tokens;  // tokenizer.ggml.tokens
  std::vector<float> scores;        // tokenizer.ggml.scores (SPM; may be empty for BPE)
  std::vector<int32_t> types;       // tokenizer.ggml.token_type (empty: all normal)
  std::vector<std::string> merges;  // tokenizer.ggml.merges ("left right", rank = index)
  int32_t bos = kNoToken, eos = kNoToken, eot = kNoToken, eom = kNoToken, pad = kNoToken,
          unk = kNoToken, sep = kNoToken, cls = kNoToken;
  int32_t fim_pre = kNoToken, fim_suf = kNoToken, fim_mid = kNoToken;  // fill-in-the-middle
  std::optional<bool> add_bos, add_eos, add_sep, add_space_prefix;
};

// Read the `tokenizer.*` keys of `file`. Errors: no tokenizer in the file, arrays of mismatched
// lengths, special-token ids out of range, an unknown tokenizer model.
Result<VocabData> read_vocab(const gguf::File& file);

// The algorithm for a `tokenizer.ggml.model` value. Errors: unsupported model (t5/UGM, rwkv, ...)
// with a hint.
Result<VocabKind> vocab_kind(const std::string& model);

}  // namespace ggflow::text
