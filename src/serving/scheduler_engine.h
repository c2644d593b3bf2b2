// ContinuousBatchingEngine: requests in, tokens out, one Scheduler step at a time.
//
// Model. The engine owns the requests, a Scheduler (which owns the BlockManager) and borrows a
// BatchRunner. step() = schedule a batch -> runner.forward(batch) -> mark the chunks computed ->
// sample one token per sampled row -> stream it -> finish requests that hit a stop token,
// max_tokens, max_model_len, or whose callback returned false (their blocks are freed at once).
// A sampled row that holds NaN or Inf is not sampled: its request ends with FinishReason::Error
// ("the model produced NaN logits at step N (position P); ..."), the others go on.
// Bad requests are rejected by add_request() with an Error and never reach the scheduler.
// Everything runs on the caller's thread; callbacks must not call into the engine (cancel() from a
// callback is deferred to the end of the step).
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "runtime/paged_batch.h"
#include "serving/scheduler.h"
#include "serving/sequence.h"
#include "serving/speculative.h"
#include "base/result.h"

namespace ggflow::serving {

struct EngineConfig {
  // KV pool: `num_blocks`, or (when 0) kv_cache_bytes / kv_bytes_per_block.
  int32_t num_blocks = 0;
  int64_t kv_cache_bytes = 0;
  int64_t kv_bytes_per_block = 0;  // BlockManager::kv_bytes_per_block(kv_elems_per_token, kv_type)
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 512;
  int64_t max_model_len = 0;       // context limit; 0: the pool's capacity. Never above it.
  bool enable_prefix_caching = true;
  int64_t vocab_size = 0;          // > 0: token ids are checked against it
  int32_t num_loras = 0;           // LoRA adapters of the model (RequestParams::lora is checked against it)
  SpecConfig spec;                 // speculative decoding (with set_proposer)
};

struct StepStats {
  int64_t num_tokens = 0;      // T
  int32_t num_seqs = 0;        // B
  int32_t num_decode_seqs = 0;
  int32_t num_sampled = 0;     // R
  int32_t num_preempted = 0;
  int32_t num_finished = 0;
  int32_t num_verified_seqs = 0;    // speculative decoding: verification chunks this step
  int32_t num_draft_tokens = 0;     // drafts verified this step
  int32_t num_accepted_tokens = 0;  // of those, accepted
  bool idle() const { return num_seqs == 0; }
};

class ContinuousBatchingEngine {
 public:
  static Result<std::unique_ptr<ContinuousBatchingEngine>> create(const EngineConfig& config, BatchRunner& runner);

  // Queues a request. Errors: empty prompt, token id out of range, max_tokens < 1, prompt that
  // leaves no room for one generated token in max_model_len.
  Result<RequestId> add_request(std::vector<int32_t> prompt, RequestParams params = {});
  // Ends a waiting or running request (FinishReason::Cancelled) and frees its blocks at once.
  // No-op for a finished request; Error for an unknown id.
  Status cancel(RequestId id);
  // One scheduler step. An Error means the runner failed: the batch's requests end with
  // FinishReason::Error, the others go on.
  Result<StepStats> step();
  // Speculative decoding with `proposer` (which must outlive the engine; nullptr: off), up to
  // config.spec.num_spec_tokens drafts per sequence and step.
  void set_proposer(Proposer* proposer) { proposer_ = proposer; }
  const Proposer* proposer() const { return proposer_; }
  const SpecCostModel& spec_costs() const { return spec_cost_; }
  // Steps until no request is waiting or running (or `max_steps` steps, if >= 0).
  Status run_until_done(int64_t max_steps = -1);

  Result<RequestOutput> output(RequestId id) const;
  // Pull-style streaming (instead of, or with, RequestParams::on_token): the tokens generated
  // since the last call, in order.
  Result<std::vector<int32_t>> take_new_tokens(RequestId id);
  void release(RequestId id);  // forgets a finished request
  bool has_unfinished() const { return !sched_.running().empty() || !sched_.waiting().empty(); }
  const Sequence* sequence(RequestId id) const;  // nullptr if unknown

  const Scheduler& scheduler() const { return sched_; }
  const BlockManager& blocks() const { return sched_.blocks(); }
  int32_t num_blocks() const { return sched_.blocks().num_blocks(); }
  int64_t max_model_len() const { return max_model_len_; }
  int64_t num_steps() const { return steps_; }

 private:
  ContinuousBatchingEngine(const EngineConfig& cfg, int32_t num_blocks, int64_t max_model_len, BatchRunner& runner);
  void finish(Sequence* s, FinishReason why, std::string error = {});
  // Appends a sampled token, streams it, finishes the request if it must stop. True if finished.
  bool accept_token(Sequence* s, int32_t token);
  // Asks the proposer for the drafts of this step's decoding sequences (speculative.h).
  void propose();
  // The token plain decoding chooses from `row`: the request's sampler, or the argmax.
  static int32_t choose(Sequence* s, std::span<const float> row);
  // Records `tok` (chosen from `row`: log-probabilities, the logits observer) and appends it. True:
  // the request ended.
  bool emit(Sequence* s, std::span<const float> row, int32_t tok, StepStats& st);
  // A sampled row's token (or an error end for a row with NaN/Inf).
  void sample_row(Sequence* s, std::span<const float> row, StepStats& st);
  // Verifies a verification chunk's drafts against its rows, commits the accepted ones, emits.
  void verify_chunk(const ScheduledChunk& c, const LogitsRows& logits, int64_t first_row, StepStats& st);

  EngineConfig cfg_;
  int64_t max_model_len_;
  BatchRunner& runner_;
  Scheduler sched_;
  std::unordered_map<RequestId, std::unique_ptr<Sequence>> seqs_;
  RequestId next_id_ = 1;
  int64_t steps_ = 0;
  bool in_step_ = false;
  std::vector<RequestId> deferred_cancels_;
  Proposer* proposer_ = nullptr;
  std::vector<DraftRequest> draft_requests_;  // reused by propose()
  SpecCostModel spec_cost_;
};

}  // namespace ggflow::serving
