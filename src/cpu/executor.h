// The CPU executor: an IR model compiled once into a plan of steps, each bound to a kernel.
//
// Plan (compile): the topological order; every node input resolved to a value slot; per node a
// kernel chosen by (op, element types, constant operands): the SIMD kernels of cpu/kernels (their
// ISA picked once: GGFLOW_ISA or the CPU's best), views for Reshape/Squeeze/Unsqueeze/Transpose
// (strides, no copy), in-place writes for the caches (ScatterUpdate's destination,
// PagedAttention's key/value caches), and the IR reference kernel as the fallback for anything
// else (counted: fallbacks()). Memory: each computed value takes a buffer from a pool assigned by
// liveness at compile time (a buffer is reused once every value that may view it is dead); the
// buffers grow to the largest step seen and are then reused, so after warm-up the native path
// allocates nothing. Weights are read in place from the file's mapping.
//
// Plan fusions (same bits, fewer steps; GGFLOW_PLAN_FUSION=0 turns them off): matmuls of one input
// on packed weights run as one job (MatmulGroup: a layer's Q/K/V, its gate/up), and
// Multiply(Swish|Gelu(g), u) runs as one GLU step.
//
// Numerics: the kernels' scalar twins define the bits (cpu/kernels/*.h); every kernel computes
// each output element on one thread in a fixed order and splits work only over outputs, so
// results do not depend on the thread count, the batch or the layout.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "cpu/isa.h"
#include "ir/model.h"
#include "ir/tensor.h"

namespace ggflow::cpu {

class ThreadPool;

struct ExecutorOptions {
  int threads = 0;  // 0: the machine's cores
  // A pool shared with other executors that run one after the other on the same thread (a draft
  // model and its target): one set of threads, so the idle one never spins beside the busy one.
  // Null: the executor makes its own of `threads` threads.
  std::shared_ptr<ThreadPool> pool;
};

// A thread pool for ExecutorOptions::pool (threads <= 0: the machine's cores).
std::shared_ptr<ThreadPool> make_thread_pool(int threads);

class Executor {
 public:
  ~Executor();
  // The model must outlive the executor. Errors: a cycle, a failed shape inference, GGFLOW_ISA.
  static Result<std::unique_ptr<Executor>> create(const ir::Model& model, const ExecutorOptions& options = {});

  // As ir::Evaluator::run: `parameters` in model order; `state` one tensor per variable
  // (variable_ids()); `writable` flags the parameters whose buffers the caller lets the model
  // update in place (its caches). The returned tensors stay valid until the next run. After the
  // first run of a shape, a run allocates nothing (test_step_allocations).
  Result<std::span<const ir::Tensor>> run(std::span<const ir::Tensor> parameters, std::vector<ir::Tensor>* state,
                                          std::span<const uint8_t> writable);
  const std::vector<std::string>& variable_ids() const;

  Isa isa() const;
  int threads() const;
  // Nodes that ran on the IR reference kernel in the last run, and by op ("Slice x60, ...").
  int64_t fallbacks() const;
  std::string fallback_summary() const;
  // What the plan holds: matmuls, how many read packed weights (and their size) and run in groups
  // sharing an input, RMSNorms with the norm weight fused (transforms/fusion).
  std::string plan_summary() const;

  struct Impl;

 private:
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ggflow::cpu
