#include "text/tokenizer_stream.h"

#include "text/unicode.h"

namespace ggflow::text {

Result<std::string> StreamDecoder::push(int32_t id) {
  auto piece = tok_->piece(id, opt_.render_special);
  if (!piece) return piece.error();
  if (strip_ && !piece->empty()) {
    if (opt_.strip_leading_space && tok_->add_space_prefix() && (*piece)[0] == ' ')
      piece->erase(0, 1);
    strip_ = false;
  }
  pending_ += *piece;
  const size_t keep = utf8_incomplete_tail(pending_);
  std::string out = utf8_sanitize(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StreamDecoder::finish() {
  std::string out = utf8_sanitize(pending_);
  pending_.clear();
  strip_ = true;
  return out;
}

}  // namespace ggflow::text
