// The tokenizer of a GGUF model, built from the file's `tokenizer.*` metadata and nothing else.
//
// Model: encode = (1) check the text is UTF-8 (bad bytes become U+FFFD, or an error in strict
// mode), (2) cut out special tokens written in the text (tokenizer_special.h), (3) tokenize each
// raw fragment with the vocabulary's algorithm: SentencePiece merges by score ("llama"),
// pre-tokenizer regexes + byte-level BPE merges by rank ("gpt2", pretok.h / tokenizer_bpe.h),
// raw-character BPE ("gemma4") or WordPiece ("bert", tokenizer_wpm.h), (4) add BOS/EOS as `tokenizer.ggml.add_bos_token` /
// `add_eos_token` say (defaults as llama.cpp: SPM and llama-3 style vocabularies add BOS).
// decode = concatenate each token's bytes (byte-level alphabet undone, U+2581 back to a space,
// `<0xNN>` to its byte, control tokens hidden unless asked for). StreamDecoder
// (tokenizer_stream.h) does the same token by token without splitting a UTF-8 character.
//
// Documented replacements: invalid UTF-8 input bytes -> U+FFFD each (EncodeOptions::strict_utf8
// turns this into an error); an unknown token decodes to U+FFFD; decoding an id outside the
// vocabulary is an error. A byte-level BPE vocabulary without a token for some byte (SmolLM2's has
// none for 04 06 13 14 16 1D F1 F2, nor for bytes that never occur in UTF-8) drops that byte where
// no merged token covers it, as llama.cpp does: such text does not round-trip. Inputs above kMaxInputBytes (1 GiB) are refused.
// Cost: ~linear in the input (BPE/SPM merges are O(n log n) per word or fragment); a 10 MB text
// takes ~1-3 s, the worst case (one 10 MB word, e.g. only spaces, through byte-level BPE) ~9 s.
// Not implemented: per-token lstrip/rstrip (GGUF does not store them), clean_up_tokenization_spaces.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer_vocab.h"
#include "gguf/file.h"
#include "base/result.h"

namespace ggflow::text {

constexpr size_t kMaxInputBytes = size_t{1} << 30;

struct EncodeOptions {
  bool add_special = true;     // add BOS/EOS where the vocabulary says so
  bool parse_special = true;   // control tokens written in the text become their ids; turn off
                               // for untrusted input (then they are tokenized as plain text)
  bool strict_utf8 = false;    // invalid UTF-8: error instead of U+FFFD replacement
};

struct DecodeOptions {
  bool render_special = false;       // write control tokens (BOS, <|im_end|>, ...) as their text
  bool strip_leading_space = true;   // drop the space an SPM vocabulary's add_space_prefix adds
};

class Tokenizer {
 public:
  static Result<Tokenizer> from_file(const gguf::File& file);
  static Result<Tokenizer> create(VocabData vocab);

  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& opt = {}) const;
  // A reranker's input, a query and a document framed as llama.cpp's format_prompt_rerank: BOS,
  // the query, EOS (SEP when the vocabulary has none), SEP, the document, EOS, each special token
  // where the file's tokenizer.ggml.add_{bos,eos,sep}_token say (else the vocabulary type's
  // defaults); the texts themselves are encoded as by encode() without add_special. For a
  // converted BERT cross-encoder: [CLS] query [SEP] document [SEP].
  Result<std::vector<int32_t>> encode_pair(std::string_view query, std::string_view document, const EncodeOptions& opt = {}) const;
  // The bytes of the ids; may end in half a UTF-8 character when the ids stop mid-character
  // (streams use StreamDecoder). Errors: an id outside [0, n_vocab).
  Result<std::string> decode(std::span<const int32_t> ids, const DecodeOptions& opt = {}) const;
  // The bytes of one token (possibly half a UTF-8 character). Errors: id out of range.
  Result<std::string> piece(int32_t id, bool render_special = false) const;

  int32_t n_vocab() const;
  VocabKind kind() const;
  const std::string& pre() const;  // tokenizer.ggml.pre
  int32_t bos() const;
  int32_t eos() const;
  int32_t eot() const;  // end of turn: the file's id, else found by text (<|im_end|>, ...)
  // Fill-in-the-middle: prefix, suffix, middle; the file's ids, else found by text
  // (<|fim_prefix|>, <PRE>, ...); kNoToken when the vocabulary has none.
  int32_t fim_pre() const;
  int32_t fim_suf() const;
  int32_t fim_mid() const;
  int32_t pad() const;
  int32_t unk() const;
  bool add_bos() const;
  bool add_eos() const;
  bool add_space_prefix() const;
  bool is_eog(int32_t id) const;  // ends generation: EOS, EOT, EOM and their known aliases
  bool is_control(int32_t id) const;
  const std::string& token_text(int32_t id) const;  // as stored in the file; id must be valid
  TokenType token_type(int32_t id) const;
  int32_t find_token(std::string_view text) const;  // exact stored text, or kNoToken

  struct Impl;

 private:
  Tokenizer() = default;  // only create()/from_file() make one: a Tokenizer is never empty
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ggflow::text
