// The engine loop (see engine_loop.h for the model).
#include "server/engine_loop.h"

#include <cstdio>

namespace ggflow::server {

std::vector<RequestEvent> RequestHandle::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(m_);
  cv_.wait_for(l, timeout, [&] { return !events_.empty(); });
  std::vector<RequestEvent> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void RequestHandle::push(RequestEvent e) {
  {
    std::lock_guard<std::mutex> l(m_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

EngineLoop::EngineLoop(pipeline::ContinuousBatchingPipeline& pipe, const LoopConfig& cfg, Metrics& metrics)
    : pipe_(pipe), cfg_(cfg), metrics_(metrics) {
  update_gauges();
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> l(m_);
    stop_ = true;
    cancel_all_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  metrics_.forget(this);
}

int64_t EngineLoop::live() const {
  std::lock_guard<std::mutex> l(m_);
  return live_;
}

EngineLoop::Admission EngineLoop::submit(std::vector<Submission> group) {
  {
    std::lock_guard<std::mutex> l(m_);
    if (draining_) return Admission::Draining;
    if (live_ + int64_t(group.size()) > int64_t(cfg_.max_num_seqs) + cfg_.max_queue) return Admission::QueueFull;
    live_ += int64_t(group.size());
    // Counted as waiting at once, under the same lock as update_gauges' inbox count: whoever
    // reads the metrics after a request was accepted sees it (never idle while it is queued).
    metrics_.add_waiting(this, int64_t(group.size()));
    Group g;
    g.members = std::move(group);
    inbox_.push_back(std::move(g));
  }
  cv_.notify_all();
  return Admission::Accepted;
}

void EngineLoop::cancel(const std::shared_ptr<RequestHandle>& handle) {
  {
    std::lock_guard<std::mutex> l(m_);
    cancels_.push_back(handle);
  }
  cv_.notify_all();
}

void EngineLoop::drain(std::chrono::milliseconds timeout) {
  draining_ = true;
  std::unique_lock<std::mutex> l(m_);
  if (!idle_cv_.wait_for(l, timeout, [&] { return live_ == 0; })) {
    cancel_all_ = true;
    cv_.notify_all();
    idle_cv_.wait(l, [&] { return live_ == 0; });
  }
}

void EngineLoop::end_unstarted(Submission s, text::FinishReason why, std::string error) {
  retire(1);
  RequestEvent e;
  e.index = s.index;
  e.done = true;
  e.finish = why;
  e.error = std::move(error);
  unstarted_.emplace_back(std::move(s.handle), std::move(e));
}

pipeline::RequestId EngineLoop::add_one(Submission& s) {
  const int64_t prompt_len = int64_t(s.prompt.size());
  auto handle = s.handle;  // s.prompt is moved below
  auto id = pipe_.add_request_tokens(std::move(s.prompt), s.params, [this](pipeline::RequestId rid, std::string_view piece) {
    auto it = active_.find(rid);
    if (it != active_.end()) it->second.text.append(piece);
    return true;
  }, s.constraint, s.lora);
  if (!id) {
    end_unstarted(std::move(s), text::FinishReason::Error, id.error().str());
    return 0;
  }
  metrics_.add_prompt_tokens(prompt_len);
  active_[*id] = Active{handle, s.index, s.adapter, {}, 0, false};
  return *id;
}

void EngineLoop::admit(Group& g) {
  if (g.next == 0 && !g.members.empty()) {
    g.leader = add_one(g.members[0]);  // 0: it failed, the siblings need not wait
    g.next = 1;
    if (g.members.size() == 1) return;
  }
  // Siblings start once the leader's prompt is in the cache (or the leader is gone).
  const serving::Sequence* leader = pipe_.engine().sequence(g.leader);
  const bool ready = !leader || leader->state == serving::Sequence::State::Finished || leader->num_computed >= leader->prompt_len;
  if (!ready) return;
  for (; g.next < g.members.size(); ++g.next) add_one(g.members[g.next]);
}

void EngineLoop::retire(int64_t n) {
  if (n == 0) return;
  std::lock_guard<std::mutex> l(m_);
  live_ -= n;
  if (live_ == 0) idle_cv_.notify_all();
}

void EngineLoop::publish() {
  auto& engine = pipe_.engine();
  std::vector<pipeline::RequestId> finished;
  std::vector<std::pair<RequestHandle*, RequestEvent>> events;  // pushed once the books are done
  for (auto& [id, a] : active_) {
    const serving::Sequence* s = engine.sequence(id);
    RequestEvent e;
    e.index = a.index;
    auto toks = engine.take_new_tokens(id);
    if (toks) e.tokens = std::move(*toks);
    if (s && a.logprobs_sent < s->logprobs.size()) {
      e.logprobs.assign(s->logprobs.begin() + std::ptrdiff_t(a.logprobs_sent), s->logprobs.end());
      a.logprobs_sent = s->logprobs.size();
    }
    if (s && s->params.prompt_logprobs >= 0 && !a.prompt_scored_sent && !s->wants_prompt_rows()) {
      e.prompt_scored = a.prompt_scored_sent = true;
      e.prompt_logprobs = s->prompt_logprobs;
    }
    e.text = std::move(a.text);
    a.text.clear();
    metrics_.add_generation_tokens(int64_t(e.tokens.size()));
    if (!s || s->state == serving::Sequence::State::Finished) {
      e.done = true;
      auto out = engine.output(id);
      auto r = pipe_.result(id);
      e.finish = r ? r->finish : text::FinishReason::Error;
      if (!r) e.error = r.error().str();
      if (out) {
        e.usage = out->usage;
        e.timing = out->timing;
      }
      metrics_.on_finished(e.finish, e.usage, e.timing);
      finished.push_back(id);
    }
    if (!e.text.empty() || !e.tokens.empty() || e.done || e.prompt_scored) events.emplace_back(a.handle.get(), std::move(e));
  }
  std::vector<std::shared_ptr<RequestHandle>> keep;  // alive until their events are pushed
  for (auto id : finished) {
    keep.push_back(active_[id].handle);
    active_.erase(id);
    pipe_.release(id);
  }
  retire(int64_t(finished.size()));
  // The gauges after the books and before the events: whoever sees the metrics idle can submit
  // at once, and a client that saw its last event sees its blocks freed.
  update_gauges();
  for (auto& [h, e] : events) h->push(std::move(e));
  for (auto& [h, e] : unstarted_) h->push(std::move(e));
  unstarted_.clear();
}

void EngineLoop::update_gauges() {
  const auto& engine = pipe_.engine();
  EngineGauges g;
  g.running = int64_t(engine.scheduler().running().size());
  g.waiting = int64_t(engine.scheduler().waiting().size());
  g.num_blocks = engine.num_blocks();
  g.blocks_used = engine.num_blocks() - engine.blocks().num_free();
  g.block_size = int32_t(serving::BlockManager::kBlockSize);
  std::vector<SlotInfo> slots;
  for (const auto& [id, a] : active_)
    if (const serving::Sequence* s = engine.sequence(id)) {
      const bool running = s->state == serving::Sequence::State::Running;
      slots.push_back({int64_t(id), a.index, running, s->prompt_len, s->len() - s->prompt_len, s->num_computed});
      if (!a.adapter.empty()) (running ? g.running_adapters : g.waiting_adapters).insert(a.adapter);
    }
  auto waiting = [&](const Group& grp) {
    g.waiting += int64_t(grp.members.size() - grp.next);
    for (size_t i = grp.next; i < grp.members.size(); ++i)
      if (!grp.members[i].adapter.empty()) g.waiting_adapters.insert(grp.members[i].adapter);
  };
  for (const auto& grp : groups_) waiting(grp);
  std::lock_guard<std::mutex> l(m_);  // the inbox and the gauges in one step with submit's add_waiting
  for (const auto& grp : inbox_) waiting(grp);
  metrics_.set_gauges(this, g);
  slots_ = std::move(slots);
}

std::vector<SlotInfo> EngineLoop::slots() const {
  std::lock_guard<std::mutex> l(m_);
  return slots_;
}

void EngineLoop::run() {
  for (;;) {
    std::vector<Group> incoming;
    std::vector<std::shared_ptr<RequestHandle>> cancels;
    bool cancel_all = false, stop = false;
    {
      std::unique_lock<std::mutex> l(m_);
      cv_.wait(l, [&] { return stop_ || cancel_all_ || !inbox_.empty() || !cancels_.empty() || pipe_.engine().has_unfinished() || !groups_.empty(); });
      incoming.swap(inbox_);
      cancels.swap(cancels_);
      cancel_all = cancel_all_;
      cancel_all_ = false;  // one sweep: nothing new is admitted while draining
      stop = stop_;
    }
    for (auto& g : incoming) groups_.push_back(std::move(g));
    if (cancel_all) {
      // Held members never started: they end here; running ones are cancelled in the engine.
      std::vector<Group> dropped;
      dropped.swap(groups_);
      for (auto& g : dropped)
        for (size_t i = g.next; i < g.members.size(); ++i) end_unstarted(std::move(g.members[i]), text::FinishReason::Cancelled, {});
      for (auto& [id, a] : active_) (void)pipe_.cancel(id);
    }
    for (const auto& h : cancels) {
      for (auto& [id, a] : active_)
        if (a.handle == h) (void)pipe_.cancel(id);
      for (auto& g : groups_)
        for (size_t i = g.next; i < g.members.size();)
          if (g.members[i].handle == h) {  // not started: drop it from the group
            Submission s = std::move(g.members[i]);
            g.members.erase(g.members.begin() + std::ptrdiff_t(i));
            end_unstarted(std::move(s), text::FinishReason::Cancelled, {});
          } else {
            ++i;
          }
    }
    for (auto& g : groups_) admit(g);
    std::erase_if(groups_, [](const Group& g) { return g.next >= g.members.size(); });

    if (pipe_.engine().has_unfinished()) {
      auto st = pipe_.step();
      if (st) {
        metrics_.add_preemptions(st->num_preempted);
        if (st->num_verified_seqs > 0)
          metrics_.add_speculation(st->num_verified_seqs, st->num_draft_tokens, st->num_accepted_tokens);
      } else {
        std::fprintf(stderr, "ggflow serve: engine step failed: %s\n", st.error().str().c_str());
      }
    }
    publish();
    if (stop && active_.empty() && groups_.empty()) return;
  }
}

}  // namespace ggflow::server
