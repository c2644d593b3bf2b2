// The served models, loaded on use and unloaded least-recently-used (see model_set.h).
#include "server/model_set.h"

#include <cstdio>

#include "base/check.h"
#include "runtime/memory_budget.h"

namespace ggflow::server {

using runtime::format_bytes;

ModelLease::~ModelLease() { set_.release(entry_); }

ModelSet::ModelSet(std::vector<ModelSpec> specs, ModelLoader loader, ModelSizer sizer, int64_t budget, LoopConfig loop,
                   Metrics& metrics)
    : loader_(std::move(loader)), sizer_(std::move(sizer)), budget_(budget), loop_cfg_(loop), metrics_(metrics) {
  for (auto& s : specs) {
    if (!s.parent.empty()) continue;
    Entry e;
    e.spec = std::move(s);
    entries_.push_back(std::move(e));
  }
  for (auto& s : specs) {
    if (s.parent.empty()) continue;
    size_t parent = 0;
    while (parent < entries_.size() && entries_[parent].spec.name != s.parent) ++parent;
    GGFLOW_CHECK(parent < entries_.size(), "an adapter alias names a model that is not served");
    aliases_.push_back({std::move(s), parent});
  }
}

ModelSet::~ModelSet() {
  for (auto& e : entries_) e.loop.reset();  // each loop's thread stops before its pipeline goes
}

int64_t ModelSet::held_locked() const {
  int64_t n = 0;
  for (const auto& e : entries_)
    if (e.state != ModelStatus::State::Unloaded) n += e.bytes;
  return n;
}

bool ModelSet::make_room(std::unique_lock<std::mutex>& l, size_t keep, int64_t need) {
  while (budget_ > 0 && held_locked() + need > budget_) {
    Entry* victim = nullptr;
    for (size_t i = 0; i < entries_.size(); ++i) {
      Entry& e = entries_[i];
      if (i == keep || e.state != ModelStatus::State::Loaded) continue;
      if (e.leaving) {  // another load already waits for it: share the wait
        victim = &e;
        break;
      }
      if (!victim || e.last_used < victim->last_used) victim = &e;
    }
    if (!victim) return false;
    victim->leaving = true;
    cv_.wait(l, [&] { return victim->leases == 0 || victim->state != ModelStatus::State::Loaded; });
    if (victim->state != ModelStatus::State::Loaded) continue;  // another thread unloaded it
    std::fprintf(stderr, "ggflow serve: unloading model '%s' (%s) to make room\n", victim->spec.name.c_str(),
                 format_bytes(victim->bytes).c_str());
    auto loop = std::move(victim->loop);
    auto pipe = std::move(victim->pipe);
    auto embedder = std::move(victim->embedder);
    victim->state = ModelStatus::State::Unloaded;
    victim->leaving = false;
    victim->info.format.reset();
    l.unlock();  // the engine's thread joins and its memory goes without holding up the others
    loop.reset();
    pipe.reset();
    embedder.reset();
    l.lock();
    cv_.notify_all();
  }
  return true;
}

std::shared_ptr<ModelLease> ModelSet::acquire(const std::string& name, std::optional<ApiError>& error) {
  size_t i = 0;
  const Alias* alias = nullptr;
  if (!name.empty()) {
    while (i < entries_.size() && entries_[i].spec.name != name) ++i;
    for (size_t k = 0; i == entries_.size() && k < aliases_.size(); ++k)
      if (aliases_[k].spec.name == name) {
        alias = &aliases_[k];
        i = alias->entry;
      }
    if (i == entries_.size()) {
      std::string names;
      for (const auto& e : entries_) names += (names.empty() ? "'" : ", '") + e.spec.name + "'";
      for (const auto& a : aliases_) names += ", '" + a.spec.name + "' (an adapter on '" + a.spec.parent + "')";
      error = ApiError{404, "not_found_error", "model_not_found", "model",
                       "the model '" + name + "' does not exist; this server serves " + names + " (GET /v1/models lists them)"};
      return nullptr;
    }
  }
  std::unique_lock<std::mutex> l(m_);
  Entry& e = entries_[i];
  for (;;) {
    if (draining_) {
      error = ApiError{503, "server_error", "shutting_down", "", "the server is shutting down; retry on another replica"};
      return nullptr;
    }
    if (e.state == ModelStatus::State::Loaded && !e.leaving) {
      ++e.leases;
      e.last_used = ++clock_;
      auto lease = std::shared_ptr<ModelLease>(new ModelLease(*this, i));
      lease->info_ = &e.info;
      lease->lora_ = e.spec.lora;
      if (alias) {
        lease->alias_info_ = e.info;
        lease->alias_info_.name = alias->spec.name;
        lease->info_ = &lease->alias_info_;
        lease->lora_ = alias->spec.lora;
        lease->adapter_ = alias->spec.name;
      }
      lease->loop_ = e.loop.get();
      lease->embedder_ = e.embedder.get();
      lease->embed_mutex_ = e.embed_mutex.get();
      lease->chat_template_ = &e.chat_template;
      lease->path_ = &e.spec.path;
      return lease;
    }
    if (e.state == ModelStatus::State::Loading) {  // wait for that load; its failure is ours too
      const uint64_t attempt = e.loads;
      cv_.wait(l, [&] { return e.state != ModelStatus::State::Loading || draining_; });
      if (e.state == ModelStatus::State::Unloaded && e.loads == attempt + 1 && !e.load_error.empty()) {
        error = ApiError{500, "server_error", "model_load_failed", "model", e.load_error};
        return nullptr;
      }
      continue;
    }
    if (e.leaving) {  // being unloaded to make room: load it again once it is gone
      cv_.wait(l, [&] { return !e.leaving || draining_; });
      continue;
    }
    // Unloaded: this request loads it.
    if (!e.bytes) e.bytes = sizer_(e.spec);
    if (budget_ > 0 && e.bytes > budget_) {
      error = ApiError{503, "server_error", "model_too_large", "model",
                       "the model '" + e.spec.name + "' needs " + format_bytes(e.bytes) + " (file and KV cache), more than the server's memory budget of " +
                           format_bytes(budget_) + "; start the server with a larger --max-memory or a smaller --kv-cache"};
      return nullptr;
    }
    // Loading from now on: requests for it wait for this load, and its size counts toward the
    // budget. When nothing more can be unloaded (the other models are loading too, their sizes
    // still estimates), it loads anyway rather than fail a request.
    e.state = ModelStatus::State::Loading;
    e.load_error.clear();
    make_room(l, i, 0);
    if (draining_) {
      e.state = ModelStatus::State::Unloaded;
      cv_.notify_all();
      continue;
    }
    std::fprintf(stderr, "ggflow serve: loading model '%s' from %s\n", e.spec.name.c_str(), e.spec.path.c_str());
    l.unlock();
    Result<LoadedModel> loaded = loader_(e.spec);
    std::unique_ptr<EngineLoop> loop;
    if (loaded && loaded->pipe) {
      loop = std::make_unique<EngineLoop>(*loaded->pipe, loop_cfg_, metrics_);
      if (const runtime::CompiledModel* cm = loaded->pipe->compiled_model())
        metrics_.set_kv_memory(loop.get(), [cm] {
          const auto m = cm->cache_memory();
          return std::pair{m.reserved_bytes, m.resident_bytes};
        });
    }
    l.lock();
    ++e.loads;
    if (!loaded) {
      e.state = ModelStatus::State::Unloaded;
      e.load_error = "cannot load the model '" + e.spec.name + "': " + loaded.error().str();
      cv_.notify_all();
      error = ApiError{500, "server_error", "model_load_failed", "model", e.load_error};
      return nullptr;
    }
    e.pipe = std::move(loaded->pipe);
    e.loop = std::move(loop);
    e.embedder = std::move(loaded->embedder);
    e.info = ModelInfo{e.spec.name, loaded->context, e.pipe ? e.pipe->format() : loaded->format};
    e.chat_template = std::move(loaded->chat_template);
    e.bytes = loaded->bytes;
    e.state = ModelStatus::State::Loaded;
    cv_.notify_all();
    std::fprintf(stderr, "ggflow serve: model '%s' loaded (%s of the budget)\n", e.spec.name.c_str(), format_bytes(e.bytes).c_str());
  }
}

void ModelSet::release(size_t entry) {
  {
    std::lock_guard<std::mutex> l(m_);
    --entries_[entry].leases;
  }
  cv_.notify_all();
}

std::vector<ModelStatus> ModelSet::status() const {
  std::lock_guard<std::mutex> l(m_);
  std::vector<ModelStatus> out;
  for (const auto& e : entries_)
    out.push_back({e.spec.name, e.spec.path, "", e.state, e.info.context, e.state == ModelStatus::State::Loaded ? e.bytes : 0});
  for (const auto& a : aliases_) {
    const Entry& e = entries_[a.entry];
    out.push_back({a.spec.name, a.spec.path, a.spec.parent, e.state, e.info.context, 0});
  }
  return out;
}

void ModelSet::drain(std::chrono::milliseconds timeout) {
  std::vector<EngineLoop*> loops;
  {
    std::lock_guard<std::mutex> l(m_);
    draining_ = true;
    for (auto& e : entries_)
      if (e.loop) loops.push_back(e.loop.get());
  }
  cv_.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (EngineLoop* loop : loops)  // the loops stay: a model is not unloaded once draining
    loop->drain(std::max(std::chrono::milliseconds(0),
                         std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())));
}

bool ModelSet::draining() const {
  std::lock_guard<std::mutex> l(m_);
  return draining_;
}

std::vector<std::string> ModelSet::exit_report() const {
  std::lock_guard<std::mutex> l(m_);
  std::vector<std::string> out;
  for (const auto& e : entries_) {
    if (!e.pipe) continue;
    const auto& blocks = e.pipe->engine().blocks();
    auto ok = blocks.check_invariants();
    out.push_back("model '" + e.spec.name + "': KV blocks at exit: " + std::to_string(blocks.num_blocks() - blocks.num_free()) + " of " +
                  std::to_string(blocks.num_blocks()) + " held by requests; invariants " + (ok ? "hold" : ok.error().str()));
  }
  return out;
}

}  // namespace ggflow::server
