// Shared by the paged-pipeline tests: stories260K through the real PagedAttention model, a
// recording runner that keeps every logits row per request, and prompts of different lengths
// (some sharing a prefix longer than a 32-token block, so the prefix cache has something to hit).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "pipeline/continuous_batching.h"
#include "model_files.h"
#include "runtime/paged_runner.h"

namespace ggflow::testing {

inline const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";

// Records the logits row of every sampled token, per request, in generation order.
class RecordingRunner final : public runtime::BatchRunner {
 public:
  explicit RecordingRunner(runtime::BatchRunner& inner) : inner_(inner) {}
  Result<runtime::LogitsRows> forward(const runtime::ScheduledBatch& b) override {
    auto r = inner_.forward(b);
    if (!r) return r;
    for (int64_t i = 0; i < r->rows(); ++i) {
      auto row = r->row(i);
      rows[b.seq_ids[b.sampled_seq[i]]].emplace_back(row.begin(), row.end());
    }
    return r;
  }
  std::map<serving::RequestId, std::vector<std::vector<float>>> rows;

 private:
  runtime::BatchRunner& inner_;
};

inline text::SamplingParams greedy(int64_t n) {
  text::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = n;
  return p;
}

inline const std::vector<std::string>& eight_prompts() {
  static const std::string shared =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park with "
      "her friends. One day, she saw a big red ball under a tree and";
  static const std::vector<std::string> p = {
      "Once upon a time",
      shared + " she ran to get it.",
      "The dog",
      shared + " her mom said",
      "Tom and Sue went to the beach. They wanted to build a big sand castle, so they",
      shared,
      "One day",
      "The little bird sang a happy song in the tall green tree, and all the animals came to listen. The fox said"};
  return p;
}

}  // namespace ggflow::testing
