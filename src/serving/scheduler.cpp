// Scheduler (see scheduler.h for the model).
#include "serving/scheduler.h"

#include <algorithm>

namespace ggflow::serving {

namespace {
bool by_id(const Sequence* a, const Sequence* b) { return a->id < b->id; }
}  // namespace

Scheduler::Scheduler(SchedulerConfig config, int32_t num_blocks, bool enable_prefix_caching)
    : cfg_(config), blocks_(num_blocks, enable_prefix_caching) {}

void Scheduler::add(Sequence* seq) {
  seq->state = Sequence::State::Waiting;
  waiting_.insert(std::upper_bound(waiting_.begin(), waiting_.end(), seq, by_id), seq);
}

void Scheduler::remove(Sequence* seq) {
  std::erase(running_, seq);
  std::erase(waiting_, seq);
  blocks_.free(seq->id);  // invariant: a request that leaves holds no block
  seq->state = Sequence::State::Finished;
}

void Scheduler::preempt(Sequence* v, Plan& plan) {
  for (auto* list : {&plan.decode, &plan.verify, &plan.prefill}) {
    auto it = std::find_if(list->begin(), list->end(), [&](const ScheduledChunk& c) { return c.seq == v; });
    if (it != list->end()) {  // it was scheduled earlier in this step: unschedule it
      plan.budget += it->num_tokens;
      list->erase(it);
    }
  }
  blocks_.free(v->id);
  v->usage.recomputed_tokens += v->num_computed;
  v->usage.preemptions += 1;
  v->num_computed = 0;
  v->draft.clear();
  std::erase(running_, v);
  add(v);  // back to the queue, ahead of every later arrival
  plan.preempted.push_back(v->id);
}

bool Scheduler::schedule_running(Sequence* s, std::vector<ScheduledChunk>& into, Plan& plan) {
  constexpr int64_t bs = BlockManager::kBlockSize;
  int64_t n = std::min<int64_t>(s->pending() + int64_t(s->draft.size()), plan.budget);
  if (n <= 0) return true;
  for (;;) {
    if (blocks_.allocate(s->id, s->num_computed + n)) break;
    // Tokens s could still take with the blocks it holds plus every free block.
    const int64_t room = (int64_t(blocks_.table(s->id).size()) + blocks_.num_free()) * bs - s->num_computed;
    if (room > 0) {
      n = std::min(n, room);
      continue;
    }
    Sequence* victim = running_.back();  // the newest running request
    preempt(victim, plan);
    if (victim == s) return false;
  }
  // The drafts that budget and blocks left (a chunk cut to its pending token is sampled as usual).
  if (!s->draft.empty()) s->draft.resize(size_t(std::max<int64_t>(0, n - s->pending())));
  into.push_back({s, n, s->num_computed + n >= s->len(), int32_t(s->draft.size())});
  plan.budget -= n;
  return true;
}

void Scheduler::admit(Plan& plan) {
  while (!waiting_.empty() && plan.budget > 0 && int64_t(running_.size()) < cfg_.max_num_seqs) {
    Sequence* s = waiting_.front();
    // Prompt log-probabilities need every prompt row computed: no prefix match for them.
    const PrefixMatch match = s->wants_prompt_rows() ? PrefixMatch{} : blocks_.match_prefix(s->tokens, s->params.lora);
    const int64_t start = match.num_tokens();
    const int64_t n = std::min<int64_t>(s->len() - start, plan.budget);
    if (!blocks_.allocate(s->id, start + n, &match)) break;  // FCFS: later requests wait behind it
    waiting_.pop_front();
    s->num_computed = start;
    if (!s->admitted_once) s->usage.cached_tokens = start;
    s->admitted_once = true;
    s->state = Sequence::State::Running;
    running_.insert(std::upper_bound(running_.begin(), running_.end(), s, by_id), s);
    plan.prefill.push_back({s, n, start + n == s->len()});
    plan.budget -= n;
  }
}

SchedulerOutput Scheduler::schedule() {
  Plan plan;
  plan.budget = cfg_.max_num_batched_tokens;
  // 1. Decode rows and verification chunks, oldest first; drafts take only the budget that every
  //    decode row leaves. Index loop: preemption only removes entries at or after i.
  int64_t spare = plan.budget;
  for (const Sequence* s : running_) spare -= s->pending() == 1 ? 1 : 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* s = running_[i];
    if (s->pending() != 1) continue;
    s->draft.resize(size_t(std::clamp<int64_t>(spare, 0, int64_t(s->draft.size()))));
    spare -= int64_t(s->draft.size());
    if (!schedule_running(s, s->draft.empty() ? plan.decode : plan.verify, plan)) break;
  }
  // 2. Prefill chunks of running sequences, oldest first.
  for (size_t i = 0; i < running_.size() && plan.budget > 0; ++i)
    if (running_[i]->pending() > 1 && !schedule_running(running_[i], plan.prefill, plan)) break;
  // 3. Admission, unless this step had to preempt: memory is short, and a request admitted now
  //    would only be preempted again by the next block a running sequence needs.
  if (plan.preempted.empty()) admit(plan);

  SchedulerOutput out;
  out.chunks = std::move(plan.decode);
  const auto num_decode = int32_t(out.chunks.size());
  out.chunks.insert(out.chunks.end(), plan.verify.begin(), plan.verify.end());
  out.chunks.insert(out.chunks.end(), plan.prefill.begin(), plan.prefill.end());
  for (ScheduledChunk& c : out.chunks) {
    const Sequence& s = *c.seq;
    if (c.num_draft > 0 || !s.wants_prompt_rows()) continue;
    // Positions in this chunk before the last prompt token, from the first one not yet scored.
    const int64_t lo = std::max<int64_t>(s.num_computed, int64_t(s.prompt_logprobs.size()));
    const int64_t hi = std::min<int64_t>(s.num_computed + c.num_tokens, s.prompt_len - 1);
    c.prompt_row0 = lo;
    c.num_prompt_rows = int32_t(std::max<int64_t>(0, hi - lo));
  }
  out.batch = build_batch(out.chunks, num_decode);
  out.batch.fresh_blocks = blocks_.drain_fresh_blocks();
  out.preempted = std::move(plan.preempted);
  return out;
}

ScheduledBatch Scheduler::build_batch(const std::vector<ScheduledChunk>& chunks, int32_t num_decode) const {
  ScheduledBatch b;
  b.num_decode_seqs = num_decode;
  b.subsequence_begins.push_back(0);
  b.block_indices_begins.push_back(0);
  for (const ScheduledChunk& c : chunks) {
    const Sequence& s = *c.seq;
    const int64_t past = s.num_computed, end = past + c.num_tokens;
    for (int64_t p = past; p < end; ++p) {
      // [T]: the sequence's tokens, then a verification chunk's drafts
      b.input_ids.push_back(p < s.len() ? s.tokens[size_t(p)] : s.draft[size_t(p - s.len())]);
      b.position_ids.push_back(int32_t(p));        // [T]
      const bool prompt_row = p >= c.prompt_row0 && p < c.prompt_row0 + c.num_prompt_rows;
      if (c.num_draft > 0 || prompt_row) {  // every row of a verification chunk is sampled
        b.sampled_tokens_indices.push_back(int32_t(b.input_ids.size()) - 1);
        b.sampled_seq.push_back(int32_t(b.seq_ids.size()));
      }
    }
    const std::vector<int32_t>& table = blocks_.table(s.id);
    // Invariant: a scheduled sequence's table covers exactly its cached + new tokens.
    GGFLOW_CHECK(int64_t(table.size()) == BlockManager::blocks_for_tokens(end), "block table does not cover the chunk");
    b.block_indices.insert(b.block_indices.end(), table.begin(), table.end());
    b.past_lens.push_back(int32_t(past));
    b.lora.push_back(s.params.lora);
    b.subsequence_begins.push_back(int32_t(b.input_ids.size()));
    b.block_indices_begins.push_back(int32_t(b.block_indices.size()));
    b.max_context_len = std::max(b.max_context_len, int32_t(end));
    b.seq_ids.push_back(s.id);
    if (c.sample && c.num_draft == 0) {
      b.sampled_tokens_indices.push_back(int32_t(b.input_ids.size()) - 1);
      b.sampled_seq.push_back(int32_t(b.seq_ids.size()) - 1);
    }
  }
  return b;
}

void Scheduler::commit(const SchedulerOutput& out) {
  for (const ScheduledChunk& c : out.chunks) {
    if (c.num_draft > 0) continue;  // commit_verified, once the engine knows what was accepted
    c.seq->num_computed += c.num_tokens;
    blocks_.commit(c.seq->id, c.seq->tokens, c.seq->num_computed, c.seq->params.lora);
  }
}

void Scheduler::commit_verified(Sequence* seq, int64_t num_tokens) {
  seq->num_computed += num_tokens;
  blocks_.commit(seq->id, seq->tokens, seq->num_computed, seq->params.lora);
  blocks_.truncate(seq->id, seq->num_computed);
}

}  // namespace ggflow::serving
