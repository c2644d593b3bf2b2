// ModelSet: the models one server serves (`ggflow serve -m A -m B`, `--models-dir DIR`), each
// loaded on first use and unloaded least-recently-used when the memory budget (--max-memory, or
// the memory available) would be exceeded.
//
// Model. A request takes a ModelLease on the model it names; while any lease on a model lives, the
// model stays loaded. acquire():
// - a ready model: the lease at once (a load of another model never delays it);
// - a model being loaded: waits for that load (and gets its error if it fails);
// - an unloaded model: this request loads it. First it makes room: while the loaded models plus
//   this one's size exceed the budget, the least recently used other model is marked leaving (new
//   requests for it wait), and once its leases are gone it is unloaded (its engine drained first:
//   every request on it has finished). Then the loader runs outside the lock, so requests to the
//   other models go on meanwhile.
// A model whose size alone exceeds the budget is refused with both sizes.
//
// Adapters. A model may be built with LoRA adapters (ModelSpec::loras); an adapter alias
// (`--lora-modules name=FILE`, vLLM's convention) is a name of its own that leases its parent
// model with a set of those adapters on: its requests run in the parent's engine, batched with
// the parent's, and answer under the alias's name.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"
#include "pipeline/continuous_batching.h"
#include "runtime/model_file.h"
#include "runtime/embedding_runner.h"
#include "server/api_error.h"
#include "server/engine_loop.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace ggflow::server {

struct ModelSpec {
  std::string name;  // what requests put in "model"
  std::string path;  // the .gguf file (an alias: its adapter's)
  std::vector<runtime::LoraSpec> loras;  // adapters built into the model (a model, not an alias)
  std::string parent;  // an adapter alias: the model it runs on; "" for a model
  uint64_t lora = 0;   // the adapters its requests run with: a mask over the parent's (or its own) loras
};

// What a loader hands over: the pipeline of a generative model, or the runner of an embedding
// model (an encoder) with its tokenizer's format; and what the routes need besides.
struct LoadedModel {
  std::unique_ptr<pipeline::ContinuousBatchingPipeline> pipe;
  std::unique_ptr<runtime::EmbeddingRunner> embedder;
  std::shared_ptr<const pipeline::PromptFormat> format;  // the embedder's (a pipeline has its own)
  int64_t context = 0;         // tokens per request
  std::string chat_template;   // the file's, for /props ("" without one)
  int64_t bytes = 0;           // what it holds of the budget: the file + its KV pool
};
using ModelLoader = std::function<Result<LoadedModel>(const ModelSpec&)>;
// The budget a model will take before it is loaded (the file and its KV pool as configured).
using ModelSizer = std::function<int64_t(const ModelSpec&)>;

class ModelSet;

// A request's hold on a loaded model (see the model above): released when the last copy goes.
class ModelLease {
 public:
  ~ModelLease();
  ModelLease(const ModelLease&) = delete;
  ModelLease& operator=(const ModelLease&) = delete;
  const ModelInfo& info() const { return *info_; }
  // A generative model's engine; null for an embedding model.
  EngineLoop* engine() const { return loop_; }
  EngineLoop& loop() const { return *loop_; }
  // An embedding model's runner, and the lock its calls take (one sequence at a time); null for
  // a generative model.
  runtime::EmbeddingRunner* embedder() const { return embedder_; }
  std::mutex& embed_mutex() const { return *embed_mutex_; }
  const std::string& chat_template() const { return *chat_template_; }
  const std::string& path() const { return *path_; }
  // The LoRA adapters its requests run with (serving::RequestParams::lora; 0: none).
  uint64_t lora() const { return lora_; }
  // An adapter alias's name ("" : the model itself).
  const std::string& adapter() const { return adapter_; }

 private:
  friend class ModelSet;
  ModelLease(ModelSet& set, size_t entry) : set_(set), entry_(entry) {}
  ModelSet& set_;
  size_t entry_;
  ModelInfo alias_info_;  // an alias's lease: the parent's info under the alias's name
  uint64_t lora_ = 0;
  std::string adapter_;
  const ModelInfo* info_ = nullptr;
  EngineLoop* loop_ = nullptr;
  runtime::EmbeddingRunner* embedder_ = nullptr;
  std::mutex* embed_mutex_ = nullptr;
  const std::string* chat_template_ = nullptr;
  const std::string* path_ = nullptr;
};

struct ModelStatus {
  std::string name, path;
  std::string parent;  // an adapter alias: its model (whose state and context it shows)
  enum class State { Unloaded, Loading, Loaded } state = State::Unloaded;
  int64_t context = 0;  // 0 until first loaded
  int64_t bytes = 0;    // the budget it holds or held when loaded (0 until first loaded)
};

class ModelSet {
 public:
  // `budget`: bytes for all loaded models together (<= 0: no limit). Names must be unique; an
  // alias's parent must be a model of `specs`.
  ModelSet(std::vector<ModelSpec> specs, ModelLoader loader, ModelSizer sizer, int64_t budget, LoopConfig loop,
           Metrics& metrics);
  ~ModelSet();  // stops every engine

  // The lease on `name` ("" : the first model), loading it if needed; or the error to answer:
  // 404 for a name not served, 503 once shutting down or for a model larger than the budget, 500
  // when its load failed.
  std::shared_ptr<ModelLease> acquire(const std::string& name, std::optional<ApiError>& error);
  const std::string& default_name() const { return entries_.front().spec.name; }
  size_t num_adapters() const { return aliases_.size(); }
  std::vector<ModelStatus> status() const;
  // Shutdown: no new leases; each loaded engine drains (all within `timeout`).
  void drain(std::chrono::milliseconds timeout);
  bool draining() const;
  // At exit: each loaded model's KV blocks held and the block manager's invariants, for the log.
  std::vector<std::string> exit_report() const;

 private:
  friend class ModelLease;
  struct Entry {
    ModelSpec spec;
    ModelStatus::State state = ModelStatus::State::Unloaded;
    std::unique_ptr<pipeline::ContinuousBatchingPipeline> pipe;
    std::unique_ptr<EngineLoop> loop;
    std::unique_ptr<runtime::EmbeddingRunner> embedder;
    std::unique_ptr<std::mutex> embed_mutex = std::make_unique<std::mutex>();
    ModelInfo info;
    std::string chat_template;
    int64_t bytes = 0;       // loaded: actual; else the sizer's estimate (or the last actual)
    int64_t leases = 0;
    uint64_t last_used = 0;
    bool leaving = false;    // chosen to be unloaded: no new leases
    uint64_t loads = 0;      // load attempts finished (waiters tell theirs from a later one)
    std::string load_error;  // of the last failed attempt
  };
  void release(size_t entry);
  int64_t held_locked() const;  // bytes of the loaded and loading models
  // Unloads least-recently-used models other than `keep` until `need` more bytes fit; false when
  // nothing more can be unloaded. Waits for a leaving model's requests (the lock is released).
  bool make_room(std::unique_lock<std::mutex>& l, size_t keep, int64_t need);

  ModelLoader loader_;
  ModelSizer sizer_;
  int64_t budget_;
  LoopConfig loop_cfg_;
  Metrics& metrics_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::vector<Entry> entries_;
  struct Alias {
    ModelSpec spec;
    size_t entry = 0;  // its parent's
  };
  std::vector<Alias> aliases_;
  uint64_t clock_ = 0;
  bool draining_ = false;
};

}  // namespace ggflow::server
