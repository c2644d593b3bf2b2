// Stopping a generation: stop token ids, stop strings and max_tokens.
//
// StopStrings holds back the longest tail of the generated text that could still become a stop
// string, so a stop string split across token boundaries is found and never emitted; text before
// it is emitted, text after it is dropped. StopCondition puts the three rules together: a stop
// token ends the generation without emitting its text, max_tokens ends it after that many tokens
// (releasing the held-back text).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/sampler.h"

namespace ggflow::text {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends `piece`; returns the text that is now safe to emit. After a match, stopped() is true
  // and every later call returns "".
  std::string push(const std::string& piece);
  // The held-back text (at the end of a generation that did not stop on a string).
  std::string flush();
  bool stopped() const { return stopped_; }
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  std::string matched_;
  bool stopped_ = false;
};

// Why a generation ended; None while it runs. The one end reason of ggflow: the stop rules set
// Stop/Length, the batching engine Cancelled/Error, the pipelines and the server report it.
enum class FinishReason { None, Stop, Length, Cancelled, Error };
const char* to_string(FinishReason r);

class StopCondition {
 public:
  explicit StopCondition(const SamplingParams& p) : strings_(p.stop), ids_(p.stop_token_ids), max_tokens_(p.max_tokens) {}
  // Feeds one generated token and its detokenized text; returns the text to emit now.
  std::string push(int32_t token, const std::string& piece);
  bool done() const { return reason_ != FinishReason::None; }
  FinishReason reason() const { return reason_; }
  int64_t tokens() const { return count_; }

 private:
  StopStrings strings_;
  std::vector<int32_t> ids_;
  int64_t max_tokens_;
  int64_t count_ = 0;
  FinishReason reason_ = FinishReason::None;
};

}  // namespace ggflow::text
