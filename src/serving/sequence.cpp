// Request/sequence helpers (see sequence.h).
#include "serving/sequence.h"

namespace ggflow::serving {

void set_sampler(RequestParams& rp, const SamplingParams& params, std::span<const int32_t> prompt) {
  auto sampler = std::make_shared<Sampler>(params, prompt);
  rp.sample = [sampler](std::span<const float> logits) { return sampler->sample(logits); };
}

RequestOutput Sequence::output() const {
  RequestOutput out;
  out.id = id;
  auto gen = generated();
  out.tokens.assign(gen.begin(), gen.end());
  out.end = end;
  out.error = error;
  out.usage = usage;
  out.usage.prompt_tokens = prompt_len;
  out.usage.completion_tokens = int64_t(gen.size());
  using secs = std::chrono::duration<double>;
  if (!gen.empty()) {
    out.timing.time_to_first_token_s = secs(t_first_token - t_arrival).count();
    if (gen.size() > 1)
      out.timing.time_per_output_token_s = secs(t_last_token - t_first_token).count() / double(gen.size() - 1);
  }
  if (end != FinishReason::None) out.timing.total_s = secs(t_end - t_arrival).count();
  return out;
}

}  // namespace ggflow::serving
