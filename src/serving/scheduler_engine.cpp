// ContinuousBatchingEngine (see scheduler_engine.h for the model).
#include "serving/scheduler_engine.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "runtime/greedy.h"

namespace ggflow::serving {

namespace {

int32_t greedy(std::span<const float> logits) {  // argmax, lowest id on ties
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

Result<std::unique_ptr<ContinuousBatchingEngine>> ContinuousBatchingEngine::create(const EngineConfig& c, BatchRunner& runner) {
  int32_t num_blocks = c.num_blocks;
  if (num_blocks < 0) return make_error("num_blocks = " + str(num_blocks) + " must be >= 0", "0 sizes the pool from kv_cache_bytes");
  if (num_blocks == 0) {
    if (c.kv_cache_bytes <= 0)
      return make_error("the KV pool has no size", "set num_blocks, or kv_cache_bytes and kv_bytes_per_block");
    auto n = BlockManager::blocks_for_budget(c.kv_cache_bytes, c.kv_bytes_per_block);
    if (!n) return n.error();
    num_blocks = *n;
  }
  if (c.max_num_seqs < 1) return make_error("max_num_seqs = " + str(c.max_num_seqs) + " must be >= 1", "");
  if (c.max_num_batched_tokens < c.max_num_seqs)
    return make_error("max_num_batched_tokens = " + str(c.max_num_batched_tokens) + " is below max_num_seqs = " +
                          str(c.max_num_seqs),
                      "every running sequence needs one token of the step budget to decode");
  const int64_t capacity = int64_t(num_blocks) * BlockManager::kBlockSize;
  if (c.max_model_len < 0) return make_error("max_model_len must be >= 0", "0 uses the pool's capacity");
  if (c.max_model_len > capacity)
    return make_error("max_model_len = " + str(c.max_model_len) + " exceeds the KV pool (" + str(num_blocks) +
                          " blocks = " + str(capacity) + " tokens)",
                      "lower max_model_len or give the KV cache more memory");
  const int64_t max_len = c.max_model_len > 0 ? c.max_model_len : capacity;
  return std::unique_ptr<ContinuousBatchingEngine>(new ContinuousBatchingEngine(c, num_blocks, max_len, runner));
}

ContinuousBatchingEngine::ContinuousBatchingEngine(const EngineConfig& cfg, int32_t num_blocks, int64_t max_model_len,
                                                   BatchRunner& runner)
    : cfg_(cfg),
      max_model_len_(max_model_len),
      runner_(runner),
      sched_(SchedulerConfig{cfg.max_num_seqs, cfg.max_num_batched_tokens}, num_blocks, cfg.enable_prefix_caching),
      spec_cost_(std::max(1, cfg.spec.max_step_tokens), cfg.spec.prior_token_cost) {}

Result<RequestId> ContinuousBatchingEngine::add_request(std::vector<int32_t> prompt, RequestParams params) {
  auto bad = [](std::string what, std::string hint) { return make_error("request rejected: " + what, std::move(hint)); };
  if (prompt.empty()) return bad("the prompt is empty", "a request needs at least one prompt token (e.g. BOS)");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || (cfg_.vocab_size > 0 && prompt[i] >= cfg_.vocab_size))
      return bad("prompt token " + str(int64_t(i)) + " = " + str(prompt[i]) + " is outside the vocabulary (" +
                     str(cfg_.vocab_size) + " tokens)",
                 "tokenize with the model's tokenizer");
  if (params.max_tokens < 1) return bad("max_tokens = " + str(params.max_tokens) + " must be >= 1", "");
  if (cfg_.num_loras < 64 && (params.lora >> cfg_.num_loras) != 0)
    return bad("LoRA adapter mask " + std::to_string(params.lora) + " names an adapter the model does not have (it has " +
                   str(cfg_.num_loras) + ")",
               "pick among the loaded adapters");
  for (int32_t t : params.stop_token_ids)
    if (t < 0 || (cfg_.vocab_size > 0 && t >= cfg_.vocab_size))
      return bad("stop token id " + str(t) + " is outside the vocabulary", "use ids from the model's tokenizer");
  if (int64_t(prompt.size()) >= max_model_len_)
    return bad("the prompt has " + str(int64_t(prompt.size())) + " tokens; the context holds " + str(max_model_len_) +
                   " (prompt + at least one generated token)",
               "shorten the prompt, or raise max_model_len / the KV cache size");

  auto s = std::make_unique<Sequence>();
  s->id = next_id_++;
  s->prompt_len = int64_t(prompt.size());
  s->max_len = std::min(s->prompt_len + params.max_tokens, max_model_len_);
  s->tokens = std::move(prompt);
  s->params = std::move(params);
  s->t_arrival = Sequence::Clock::now();
  Sequence* raw = s.get();
  seqs_.emplace(raw->id, std::move(s));
  sched_.add(raw);
  return raw->id;
}

void ContinuousBatchingEngine::finish(Sequence* s, FinishReason why, std::string error) {
  sched_.remove(s);  // frees its blocks now
  s->draft.clear();
  if (proposer_) proposer_->forget(s->id);
  s->end = why;
  s->error = std::move(error);
  s->t_end = Sequence::Clock::now();
}

Status ContinuousBatchingEngine::cancel(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return make_error("cancel: unknown request id " + str(int64_t(id)), "use an id returned by add_request");
  Sequence* s = it->second.get();
  if (s->state == Sequence::State::Finished) return {};
  if (in_step_) {
    deferred_cancels_.push_back(id);
    return {};
  }
  finish(s, FinishReason::Cancelled);
  return {};
}

bool ContinuousBatchingEngine::accept_token(Sequence* s, int32_t token) {
  const auto now = Sequence::Clock::now();
  if (s->len() == s->prompt_len) s->t_first_token = now;
  s->t_last_token = now;
  s->tokens.push_back(token);
  bool go_on = true;
  if (s->params.on_token) go_on = s->params.on_token(s->id, token);
  const auto& stops = s->params.stop_token_ids;
  if (!go_on || std::find(stops.begin(), stops.end(), token) != stops.end()) {
    finish(s, FinishReason::Stop);
    return true;
  }
  if (s->len() >= s->max_len) {
    finish(s, FinishReason::Length);
    return true;
  }
  return false;
}

void ContinuousBatchingEngine::propose() {
  const SpecConfig& sc = cfg_.spec;
  int64_t decoding = 0;
  for (const Sequence* s : sched_.running()) decoding += s->pending() == 1 ? 1 : 0;
  int64_t planned = decoding;  // the step's tokens so far: every decode row, then the drafts given
  const double measured = proposer_->seconds_per_token();
  const double draft_pass = measured >= 0 ? measured : proposer_->cost_per_token() * spec_cost_.step_seconds(1);
  draft_requests_.clear();
  for (Sequence* s : sched_.running()) {
    s->draft.clear();
    const int64_t budget = int64_t(sc.max_step_tokens) - planned;
    if (s->pending() != 1 || budget <= 0) continue;
    if (!s->params.speculate) continue;
    int64_t k = sc.num_spec_tokens;
    if (sc.adaptive) {
      k = spec_cost_.best_length(s->spec_accept, int32_t(std::min<int64_t>(k, budget)), planned, decoding, draft_pass);
      if (k == 0 && ++s->spec_idle_steps >= 16) k = 1;  // a probe now and then: the text may change
    }
    k = std::min({k, s->max_len - s->len() - 1, budget});  // the accepted drafts + 1 fit max_len
    if (k <= 0) continue;
    s->spec_idle_steps = 0;
    planned += k;
    draft_requests_.push_back({s->id, s->tokens, int32_t(k), &s->draft});
  }
  if (draft_requests_.empty()) return;
  if (!proposer_->propose(draft_requests_)) {  // decoding goes on without drafts
    for (DraftRequest& r : draft_requests_) r.draft->clear();
    return;
  }
  for (DraftRequest& r : draft_requests_) {
    std::vector<int32_t>& d = *r.draft;
    if (int64_t(d.size()) > r.max_tokens) d.resize(size_t(r.max_tokens));
    auto bad = std::find_if(d.begin(), d.end(), [&](int32_t t) { return t < 0 || (cfg_.vocab_size > 0 && t >= cfg_.vocab_size); });
    d.erase(bad, d.end());  // a proposer's ids outside the vocabulary end its draft
  }
}

int32_t ContinuousBatchingEngine::choose(Sequence* s, std::span<const float> row) {
  return s->params.sample ? s->params.sample(row) : greedy(row);
}

bool ContinuousBatchingEngine::emit(Sequence* s, std::span<const float> row, int32_t tok, StepStats& st) {
  if (s->params.logprobs >= 0) s->logprobs.push_back(text::step_logprobs(row, tok, s->params.logprobs));
  if (s->params.on_logits) s->params.on_logits(s->id, row);
  if (!accept_token(s, tok)) return false;
  ++st.num_finished;
  return true;
}

void ContinuousBatchingEngine::sample_row(Sequence* s, std::span<const float> row, StepStats& st) {
  if (const char* bad = runtime::non_finite(row)) {  // a token sampled from it would be noise
    finish(s, FinishReason::Error,
           "the model produced " + std::string(bad) + " logits at step " + str(steps_) + " (position " +
               str(s->len() - 1) + "); the weights or the input are broken");
    ++st.num_finished;
    return;
  }
  emit(s, row, choose(s, row), st);
}

void ContinuousBatchingEngine::verify_chunk(const ScheduledChunk& c, const LogitsRows& logits, int64_t first_row,
                                            StepStats& st) {
  Sequence* s = c.seq;
  const std::vector<int32_t> draft = std::move(s->draft);  // [k]
  s->draft.clear();
  const auto k = int32_t(draft.size());
  GGFLOW_CHECK(k == c.num_draft, "a verification chunk's drafts changed after scheduling");
  // 1. The tokens plain decoding would emit: row i's token is sampled as plain decoding samples it
  //    (one draw of the request's generator per emitted token), and draft i stands iff it equals
  //    that token; the first that does not is replaced by it, and when all stand the last row
  //    gives one more.
  std::vector<int32_t> emitted;
  int32_t accepted = 0;
  bool broken = false;  // a row with NaN/Inf: plain decoding would have failed there
  for (int32_t i = 0; i <= k; ++i) {
    auto row = logits.row(first_row + i);  // f32 [vocab]
    if (runtime::non_finite(row)) {
      broken = true;
      break;
    }
    const int32_t tok = choose(s, row);
    emitted.push_back(tok);
    if (i == k || tok != draft[size_t(i)]) break;
    ++accepted;
  }
  // 2. Commit the K/V of the pending token and the accepted drafts; drop the rest.
  s->tokens.insert(s->tokens.end(), draft.begin(), draft.begin() + accepted);
  sched_.commit_verified(s, 1 + accepted);
  s->tokens.resize(s->tokens.size() - size_t(accepted));
  s->usage.spec.steps += 1;
  s->usage.spec.draft_tokens += k;
  s->usage.spec.accepted_tokens += accepted;
  s->spec_accept.observe(k, accepted);
  st.num_verified_seqs += 1;
  st.num_draft_tokens += k;
  st.num_accepted_tokens += accepted;
  // 3. Emit them in order, as plain decoding would, until the request ends.
  for (size_t i = 0; i < emitted.size(); ++i)
    if (emit(s, logits.row(first_row + int64_t(i)), emitted[i], st)) return;
  if (broken) {
    finish(s, FinishReason::Error,
           "the model produced NaN or Inf logits at step " + str(steps_) + " (position " + str(s->len() - 1) +
               "); the weights or the input are broken");
    ++st.num_finished;
  }
}

Result<StepStats> ContinuousBatchingEngine::step() {
  StepStats st;
  if (proposer_ && cfg_.spec.num_spec_tokens > 0) propose();
  SchedulerOutput out = sched_.schedule();
  st.num_preempted = int32_t(out.preempted.size());
  if (out.batch.empty()) return st;
  ++steps_;
  const ScheduledBatch& b = out.batch;
  st.num_tokens = b.num_tokens();
  st.num_seqs = b.num_seqs();
  st.num_decode_seqs = b.num_decode_seqs;
  st.num_sampled = int32_t(b.sampled_tokens_indices.size());

  const auto t0 = Sequence::Clock::now();
  Result<LogitsRows> logits = runner_.forward(b);
  // A step of decode rows and verification chunks only: what the cost model learns from.
  const bool decode_only = std::all_of(out.chunks.begin(), out.chunks.end(), [](const ScheduledChunk& c) {
    return c.num_draft > 0 || (c.sample && c.num_tokens == 1);
  });
  if (logits && decode_only && proposer_)
    spec_cost_.observe_step(b.num_tokens(), std::chrono::duration<double>(Sequence::Clock::now() - t0).count());
  if (logits && (logits->rows() != int64_t(st.num_sampled) || (st.num_sampled > 0 && logits->vocab <= 0)))
    logits = make_error("the model runner returned " + str(logits->rows()) + " logits rows for " + str(st.num_sampled) +
                            " sampled tokens",
                        "return one row per entry of batch.sampled_tokens_indices, in order");
  if (!logits) {
    for (const ScheduledChunk& c : out.chunks) finish(c.seq, FinishReason::Error, logits.error().str());
    return Error{"model step failed: " + logits.error().what, logits.error().hint};
  }

  sched_.commit(out);
  in_step_ = true;
  int64_t row = 0;  // sampled rows come in chunk order
  for (const ScheduledChunk& c : out.chunks) {
    for (int32_t k = 0; k < c.num_prompt_rows; ++k) {  // row of position p scores prompt token p + 1
      Sequence* s = c.seq;
      const int64_t p = c.prompt_row0 + k;
      auto r = logits->row(row++);
      if (p == int64_t(s->prompt_logprobs.size()))
        s->prompt_logprobs.push_back(text::step_logprobs(r, s->tokens[size_t(p + 1)], s->params.prompt_logprobs));
    }
    if (c.num_draft > 0) {
      verify_chunk(c, *logits, row, st);
      row += 1 + c.num_draft;
    } else if (c.sample) {
      auto r = logits->row(row++);  // f32 [vocab]
      if (c.seq->state != Sequence::State::Finished) sample_row(c.seq, r, st);
    }
  }
  in_step_ = false;
  for (RequestId id : deferred_cancels_) (void)cancel(id);
  deferred_cancels_.clear();
  return st;
}

Status ContinuousBatchingEngine::run_until_done(int64_t max_steps) {
  for (int64_t i = 0; has_unfinished() && (max_steps < 0 || i < max_steps); ++i) {
    auto st = step();
    if (!st) return st.error();
    if (st->idle()) return make_error("the scheduler made no progress with requests pending", "this is a bug");
  }
  return {};
}

Result<RequestOutput> ContinuousBatchingEngine::output(RequestId id) const {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return make_error("unknown request id " + str(int64_t(id)), "use an id returned by add_request");
  return it->second->output();
}

Result<std::vector<int32_t>> ContinuousBatchingEngine::take_new_tokens(RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return make_error("unknown request id " + str(int64_t(id)), "use an id returned by add_request");
  Sequence& s = *it->second;
  auto gen = s.generated().subspan(s.num_polled);
  s.num_polled += gen.size();
  return std::vector<int32_t>(gen.begin(), gen.end());
}

void ContinuousBatchingEngine::release(RequestId id) {
  auto it = seqs_.find(id);
  if (it != seqs_.end() && it->second->state == Sequence::State::Finished) seqs_.erase(it);
}

const Sequence* ContinuousBatchingEngine::sequence(RequestId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

}  // namespace ggflow::serving
