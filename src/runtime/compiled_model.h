// The compile-once model interface: the seam between a layout's graph and whatever executes it.
//
//   compile(model, options) -> CompiledModel      once per model and process
//   input("input_ids") -> index                   once, at set-up (names never appear on the step path)
//   resize_caches(rows)                           at set-up (and when a growing context needs it):
//                                                 the caches live inside the compiled model
//   run(inputs, visible_rows)                     every step: the step's tensors, in input order
//   output(index)                                 the step's results, by index
//
// What is an input, an output, a cache or a variable is read from the graph once (signature()):
//   inputs     the Parameters that are not caches, in model order
//   outputs    the Results that are not cache outputs, in model order
//   caches     Parameters that an op writes in place (an output aliasing an input, op_list.h:
//              SET_ROWS's destination cache_k_lN in the raw layout, PagedAttention's
//              key_cache.N / value_cache.N in the paged layout) and whose written value reaches a
//              Result. Each has at most one dynamic axis (raw: context rows, paged: blocks); the
//              compiled model allocates it and the ops update it in place. A step sees its
//              leading `visible_rows` along that axis (raw: past + new tokens) or all of it.
//   variables  ReadValue/Assign pairs (the SDPA layout's KV): owned by the compiled model,
//              updated by the Assigns, forgotten by reset_state().
// No step copies a cache: cache_copies() counts the steps where an executor could not write a
// cache in place (and had to copy it back); tests assert it stays 0.
//
// Executors: `cpu` (cpu/executor.h: SIMD kernels with scalar twins, a thread pool; the default)
// and `ref` (the IR reference evaluator, the math oracle).
#pragma once

#include <initializer_list>
#include <memory>
#include <utility>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "ir/model.h"
#include "ir/tensor.h"

namespace ggflow::cpu {
class ThreadPool;
}

namespace ggflow::runtime {

enum class Executor { cpu, ref };
Result<Executor> executor_from_name(std::string_view name);  // "cpu" | "ref"
const char* to_string(Executor e);

// A cpu thread pool to share between compiled models (CompileOptions::pool); threads <= 0: the
// machine's cores.
std::shared_ptr<cpu::ThreadPool> make_thread_pool(int threads);

struct CompileOptions {
  Executor executor = Executor::cpu;
  int threads = 0;  // cpu: 0 = the machine's cores
  // cpu: a thread pool shared with models that run one after the other on one thread (a draft
  // model and its target; cpu::make_thread_pool). Null: the model's own pool of `threads`.
  std::shared_ptr<cpu::ThreadPool> pool;
};

struct Signature {
  struct Cache {
    std::string name;
    size_t param = 0, result = 0;     // model parameter and result indices
    ir::ElementType type = ir::ElementType::f32;
    std::vector<int64_t> shape;       // the dynamic axis holds 0
    int dynamic_axis = -1;            // -1: a static cache
  };
  std::vector<size_t> inputs;         // input i = model parameter inputs[i]
  std::vector<size_t> outputs;        // output i = model result outputs[i]
  std::vector<Cache> caches;

  // Set-up lookups by friendly name; errors name what exists.
  Result<size_t> input(const ir::Model& m, std::string_view name) const;
  Result<size_t> output(const ir::Model& m, std::string_view name) const;
};
// Errors: a cache with more than one dynamic axis or a dynamic axis after a non-1 axis.
Result<Signature> read_signature(const ir::Model& model);

class CompiledModel {
 public:
  virtual ~CompiledModel() = default;

  const ir::Model& model() const { return *model_; }
  const Signature& signature() const { return sig_; }
  Result<size_t> input(std::string_view name) const { return sig_.input(*model_, name); }
  Result<size_t> output(std::string_view name) const { return sig_.output(*model_, name); }
  size_t n_inputs() const { return sig_.inputs.size(); }
  // Set-up: each named input's index into its slot; the first missing name is the error.
  Status bind_inputs(std::initializer_list<std::pair<size_t*, std::string_view>> inputs) const;

  // Every cache gets `rows` along its dynamic axis, zero-filled the first time; what is written
  // in the leading rows is kept. The one place caches are allocated or grown: the paged pool
  // once, a single sequence's context by doubling. The caches are reserved, not touched
  // (ir::Tensor::reserve): a row costs memory when a step first writes it, so a large pool is
  // free until used. Within reserve_caches(max_rows) a resize neither copies nor moves a byte.
  virtual Status resize_caches(int64_t rows) = 0;
  // Address space for up to `max_rows` rows (nothing is committed); a no-op below what is reserved.
  virtual Status reserve_caches(int64_t max_rows) = 0;
  int64_t cache_rows() const { return cache_rows_; }
  // Debug (kv_poison_enabled): rows [first, first + n) of every cache set to all-ones bytes (NaN in
  // f32 and f16), so a step that read a slot before writing it would change the logits.
  virtual void poison_cache_rows(int64_t first, int64_t n) = 0;
  // The caches' memory: address space reserved and bytes resident (pages written so far).
  struct CacheMemory {
    int64_t reserved_bytes = 0, resident_bytes = 0;
  };
  virtual CacheMemory cache_memory() const = 0;
  // One step. `inputs`: one tensor per input, in order. `visible_rows`: how much of each cache's
  // dynamic axis the step sees (-1: all). On error the caches may be partly written.
  virtual Status run(std::span<const ir::Tensor> inputs, int64_t visible_rows = -1) = 0;
  virtual const ir::Tensor& output(size_t i) const = 0;
  virtual void reset_state() = 0;  // forget the variables (caches are overwritten before read)
  int64_t cache_copies() const { return cache_copies_; }
  virtual Executor executor() const = 0;
  // Nodes of the last step that ran on the reference kernel instead of the executor's own, and
  // which ("Slice x60, ..."): what `ggflow run --verbose` prints.
  virtual int64_t fallbacks() const { return 0; }
  virtual std::string fallback_summary() const { return "none"; }
  virtual std::string describe() const = 0;  // "cpu (avx512, 2 threads)"
  // The executor's plan in a line (packed weights, fusions): also printed by `--verbose`.
  virtual std::string plan_summary() const { return "reference kernels"; }

 protected:
  std::unique_ptr<ir::Model> model_;
  Signature sig_;
  int64_t cache_rows_ = 0;
  int64_t cache_copies_ = 0;
};

// GGFLOW_KV_POISON=1: cache rows are poisoned when resize_caches makes them visible and where a
// block is handed out again (PagedRunner), to prove that no step reads a slot before writing it.
bool kv_poison_enabled();

// Takes the model (it lives as long as the compiled model). Errors: the signature, the executor's.
Result<std::unique_ptr<CompiledModel>> compile(ir::Model model, const CompileOptions& options = {});

}  // namespace ggflow::runtime
