// Incremental detokenizer for streaming generation: feed ids one at a time, get text that never
// ends in half a UTF-8 character.
//
// Model: each token's bytes (Tokenizer::piece) are appended to a pending buffer; everything up to
// an incomplete UTF-8 sequence at the end is emitted, the incomplete tail waits for the next
// token. Bytes that can never become valid UTF-8 are emitted as U+FFFD (one per byte), so the
// stream never stalls. finish() flushes a dangling tail (as U+FFFD). The concatenation of all
// outputs equals Tokenizer::decode of the same ids whenever that decode is valid UTF-8.
#pragma once

#include <cstdint>
#include <string>

#include "text/tokenizer.h"
#include "base/result.h"

namespace ggflow::text {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok, DecodeOptions opt = {}) : tok_(&tok), opt_(opt) {}

  // Text that became complete with this token (often empty or a whole word). Errors: id outside
  // the vocabulary (the decoder state is unchanged).
  Result<std::string> push(int32_t id);
  // Whatever is still held back, with incomplete bytes replaced by U+FFFD; resets the stream.
  std::string finish();
  // Bytes currently held back (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  const Tokenizer* tok_;
  DecodeOptions opt_;
  std::string pending_;
  bool strip_ = true;  // still before the first text-producing token
};

}  // namespace ggflow::text
