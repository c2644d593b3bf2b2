// Request and sequence state for continuous batching.
//
// A request is one prompt to be continued; it lives as one Sequence (no beam search, no n > 1).
// Its tokens are the prompt followed by the generated tokens, and `num_computed` counts the leading
// tokens whose K/V are in the paged cache. Everything the scheduler does is expressed with that one
// number: a prefill chunk computes tokens [num_computed, num_computed + n); a decode step computes
// the single pending token (the one sampled last step); a prefix-cache hit starts num_computed at a
// block boundary > 0; a preemption drops it back to 0 (the prompt and every generated token are
// recomputed later). A token is sampled whenever a step leaves num_computed == tokens.size().
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "serving/draft_acceptance.h"
#include "text/logprobs.h"
#include "text/sampler.h"
#include "text/sampler_stop.h"

namespace ggflow::serving {

using RequestId = uint64_t;

using text::FinishReason;  // why a request ended (None while it is waiting or running)
using text::Sampler;
using text::SamplingParams;

// Turns one logits row (f32 [vocab]) into a token id. Empty: greedy (argmax, lowest id on ties).
using TokenSampleFn = std::function<int32_t(std::span<const float> logits)>;
// Sees the logits row (f32 [vocab]) each generated token was chosen from, in order (tests compare
// them with memcmp; --dump-logits).
using LogitsCallback = std::function<void(RequestId id, std::span<const float> logits)>;
// Called for every generated token, in order, during step(). Return false to stop the request
// there (FinishReason::Stop; e.g. the pipeline found a stop string). Must not call into the engine.
using TokenCallback = std::function<bool(RequestId id, int32_t token)>;

struct RequestParams {
  int64_t max_tokens = 16;               // >= 1: generated tokens at most (also capped by max_model_len)
  std::vector<int32_t> stop_token_ids;   // generation ends after emitting one of these (it is kept in the output)
  TokenSampleFn sample;                  // empty: greedy; see set_sampler() for text::Sampler
  // Speculative decoding samples a draft's position with `sample` and keeps the draft iff the
  // answer equals it (serving/speculative.h); false: never speculated (a grammar-constrained
  // request's sampler is left out).
  bool speculate = true;
  TokenCallback on_token;                // optional streaming callback
  LogitsCallback on_logits;              // optional
  int32_t logprobs = -1;                 // >= 0: record each generated token's StepLogprobs (that many top tokens)
  // >= 0: record the StepLogprobs of every prompt token after the first (that many top tokens),
  // from the logits row of the position before it; such a prompt is computed in full (the prefix
  // cache is not matched for it, so every row exists).
  int32_t prompt_logprobs = -1;
  // The LoRA adapters this request runs with: bit i = the model's adapter i (runtime/lora_inputs.h);
  // 0: the base model. Its K/V are cached apart from other adapter sets (PrefixCache::root_hash).
  uint64_t lora = 0;
};

// Sets `sample` of `rp` to a text::Sampler (its penalties and per-request RNG). The sampler is
// stateful: one per request. `params` must have passed validate().
void set_sampler(RequestParams& rp, const SamplingParams& params, std::span<const int32_t> prompt);

// What speculative decoding did for a request.
struct SpecUsage {
  int64_t steps = 0;            // verification steps (one target pass over 1 + k tokens each)
  int64_t draft_tokens = 0;     // tokens proposed and verified
  int64_t accepted_tokens = 0;  // of those, accepted
};

struct RequestUsage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;      // prompt tokens served by the prefix cache at first admission
  int64_t completion_tokens = 0;
  int32_t preemptions = 0;        // times the request was preempted and recomputed
  int64_t recomputed_tokens = 0;  // tokens computed again because of preemption
  SpecUsage spec;
};

struct RequestTiming {
  double time_to_first_token_s = 0;  // add_request -> first token sampled
  double time_per_output_token_s = 0;  // (last token - first token) / (completion_tokens - 1)
  double total_s = 0;                // add_request -> end
};

// What a caller gets back about a request (a snapshot).
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // generated tokens, in order
  FinishReason end = FinishReason::None;
  std::string error;            // set when end == Error
  RequestUsage usage;
  RequestTiming timing;
  bool finished() const { return end != FinishReason::None; }
};

struct Sequence {
  using Clock = std::chrono::steady_clock;
  enum class State { Waiting, Running, Finished };

  RequestId id = 0;
  RequestParams params;
  std::vector<int32_t> tokens;  // i32 [len]: prompt, then generated tokens
  std::vector<text::StepLogprobs> logprobs;  // one per generated token when params.logprobs >= 0
  // Prompt token p (1 <= p < prompt_len) at index p - 1, when params.prompt_logprobs >= 0.
  std::vector<text::StepLogprobs> prompt_logprobs;
  // Prompt positions whose logits row is still to be scored (params.prompt_logprobs >= 0).
  bool wants_prompt_rows() const {
    return params.prompt_logprobs >= 0 && int64_t(prompt_logprobs.size()) + 1 < prompt_len;
  }
  int64_t prompt_len = 0;
  int64_t max_len = 0;          // tokens.size() at which generation ends with Length
  int64_t num_computed = 0;     // leading tokens whose K/V are in cache
  // Speculative decoding: tokens proposed to follow `tokens` this step (verified with the pending
  // token in one pass; never in `tokens`, never committed unless accepted), and the request's
  // running estimate of how far its drafts stand (adaptive speculation length).
  std::vector<int32_t> draft;
  DraftAcceptance spec_accept;
  int32_t spec_idle_steps = 0;  // steps since the last speculation (a probe is due after a while)
  bool admitted_once = false;   // cached_tokens is recorded at the first admission only
  size_t num_polled = 0;        // generated tokens already returned by take_new_tokens()
  State state = State::Waiting;
  FinishReason end = FinishReason::None;
  std::string error;
  RequestUsage usage;
  Clock::time_point t_arrival, t_first_token, t_last_token, t_end;

  int64_t len() const { return int64_t(tokens.size()); }
  int64_t pending() const { return len() - num_computed; }  // tokens still to compute
  std::span<const int32_t> generated() const {
    return std::span<const int32_t>(tokens).subspan(size_t(prompt_len));
  }
  RequestOutput output() const;
};

}  // namespace ggflow::serving
