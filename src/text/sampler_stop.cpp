// Stop strings, stop tokens and max_tokens (see sampler_stop.h).
#include "text/sampler_stop.h"

#include <algorithm>

namespace ggflow::text {

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "none";
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "?";
}


std::string StopStrings::push(const std::string& piece) {
  if (stopped_) return {};
  pending_ += piece;
  // Earliest full match of any stop string (the longest one wins at the same position).
  size_t best = std::string::npos, best_len = 0;
  for (const auto& s : stops_) {
    size_t k = pending_.find(s);
    if (k != std::string::npos && (k < best || (k == best && s.size() > best_len))) {
      best = k;
      best_len = s.size();
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    matched_ = pending_.substr(best, best_len);
    std::string out = pending_.substr(0, best);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStrings::flush() {
  if (stopped_) return {};
  std::string out;
  out.swap(pending_);
  return out;
}

std::string StopCondition::push(int32_t token, const std::string& piece) {
  if (done()) return {};
  ++count_;
  std::string out;
  if (std::find(ids_.begin(), ids_.end(), token) != ids_.end()) {
    reason_ = FinishReason::Stop;
    return strings_.flush();  // the stop token's own text is never emitted
  }
  out = strings_.push(piece);
  if (strings_.stopped()) {
    reason_ = FinishReason::Stop;
    return out;
  }
  if (max_tokens_ > 0 && count_ >= max_tokens_) {
    reason_ = FinishReason::Length;
    out += strings_.flush();
  }
  return out;
}

}  // namespace ggflow::text
