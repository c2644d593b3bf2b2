// Scheduler: continuous batching with chunked prefill, prefix caching and preemption by recompute.
//
// Model. Requests wait in a queue in arrival order (request id order) and, once admitted, run in
// arrival order too. Each step spends a budget of max_num_batched_tokens tokens:
//   1. decode rows first: every running sequence with exactly one pending token gets one row, and
//      with draft tokens (speculative decoding) a verification chunk: the pending token and its
//      drafts, every row sampled. Drafts are cut so that every decode row still fits the budget;
//      the engine commits a verification chunk after it knows how many drafts were accepted;
//   2. then prefill chunks of running sequences that are still prefilling, oldest first, each as
//      much of its remaining tokens as the budget allows (chunked prefill);
//   3. then admission, front of the queue first and never skipping one (FCFS): a request is admitted
//      while running < max_num_seqs, budget is left, and the block pool can hold its first chunk;
//      its prompt starts at the longest prefix-cache hit (full blocks only, >= 1 token left).
//      A step that preempted admits nobody (memory is short; it would only thrash).
// A sequence that needs a block when none is free takes a smaller chunk if some room is left;
// with no room at all, the newest running request (highest id; the sequence itself if it is the
// newest) is preempted: its blocks are freed, its num_computed drops to 0, and it goes back to the
// queue ahead of every request that arrived after it. When it is admitted again its prompt and
// every token it had generated are prefilled again, and sampling resumes where it stopped, so with
// a batch-invariant model its output is the same as without preemption.
// The batch lists decode rows first, then verification chunks, then prefill chunks, each in the
// order above.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "serving/block_manager.h"
#include "runtime/paged_batch.h"
#include "serving/sequence.h"

namespace ggflow::serving {

// The paged step contract is the runtime's; the scheduler fills it.
using runtime::BatchRunner;
using runtime::LogitsRows;
using runtime::ScheduledBatch;

struct SchedulerConfig {
  int32_t max_num_seqs = 64;             // running sequences at most
  int32_t max_num_batched_tokens = 512;  // tokens per step (>= max_num_seqs, so decodes always fit)
};

// One subsequence of a step: `num_tokens` tokens of `seq` from seq->num_computed on.
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;
  bool sample = false;  // the chunk ends at the last token: its last row is sampled
  int32_t num_draft = 0;  // > 0: a verification chunk (its last num_draft tokens are seq->draft;
                          // all its rows are sampled)
  // RequestParams::prompt_logprobs: rows of positions [prompt_row0, prompt_row0 + num_prompt_rows)
  // also return logits (before the sampled row), each scoring the prompt token after it.
  int64_t prompt_row0 = 0;
  int32_t num_prompt_rows = 0;
};

struct SchedulerOutput {
  ScheduledBatch batch;
  std::vector<ScheduledChunk> chunks;  // [B], in batch order
  std::vector<RequestId> preempted;    // preempted during this step, in order
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, int32_t num_blocks, bool enable_prefix_caching);

  void add(Sequence* seq);     // queues a new request (state Waiting)
  void remove(Sequence* seq);  // finished or cancelled: leaves the queues, frees its blocks at once
  SchedulerOutput schedule();
  // After the model ran the batch: the chunks' tokens are computed (and full blocks cached).
  // Verification chunks are left to commit_verified().
  void commit(const SchedulerOutput& out);
  // A verification chunk's first `num_tokens` tokens are computed (the pending token and the
  // accepted drafts, already appended to seq->tokens); the K/V of the rejected ones is dropped
  // (their blocks go back to the pool).
  void commit_verified(Sequence* seq, int64_t num_tokens);

  const SchedulerConfig& config() const { return cfg_; }
  const BlockManager& blocks() const { return blocks_; }
  const std::vector<Sequence*>& running() const { return running_; }
  const std::deque<Sequence*>& waiting() const { return waiting_; }

 private:
  struct Plan {
    std::vector<ScheduledChunk> decode, verify, prefill;
    int64_t budget = 0;
    std::vector<RequestId> preempted;
  };
  void preempt(Sequence* victim, Plan& plan);
  // Schedules as many of running `s`'s pending tokens as budget and blocks allow, preempting newer
  // sequences if no block is left. False if `s` itself was preempted.
  bool schedule_running(Sequence* s, std::vector<ScheduledChunk>& into, Plan& plan);
  void admit(Plan& plan);
  ScheduledBatch build_batch(const std::vector<ScheduledChunk>& chunks, int32_t num_decode) const;

  SchedulerConfig cfg_;
  BlockManager blocks_;
  std::deque<Sequence*> waiting_;   // id order
  std::vector<Sequence*> running_;  // id order
};

}  // namespace ggflow::serving
