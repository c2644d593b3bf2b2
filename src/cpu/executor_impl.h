// The executor's plan and state, shared by executor.cpp (compile, run loop, views, fallback) and
// executor_ops.cpp (the native kernels). Not part of the executor's interface.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "cpu/executor.h"
#include "cpu/executor_values.h"
#include "cpu/kernels/act.h"
#include "cpu/kernels/rope.h"
#include "cpu/packed_weights.h"
#include "cpu/thread_pool.h"
#include "gguf/types.h"
#include "ir/node.h"
#include "ir/op_registry.h"

namespace ggflow::cpu {

// The activation kernel of a Swish or Gelu node (Gelu's mode: erf, tanh, or GGML's f16 table).
inline Act activation_of(const ir::Node& n) {
  if (n.type() != ir::OpType::Gelu) return Act::silu;
  switch (n.attrs<ir::GeluAttrs>().mode) {
    case ir::GeluMode::erf: return Act::gelu_erf;
    case ir::GeluMode::tanh: return Act::gelu_tanh;
    case ir::GeluMode::tanh_f16: return Act::gelu_f16;
  }
  return Act::gelu_tanh;
}

using exec::Buffer;
using exec::Val;

// How a step runs.
enum class Kind {
  param, constant, result, read_value, assign,             // bookkeeping
  reshape, squeeze, unsqueeze, transpose, slice,            // views (reshape copies a strided input)
  shape_of, convert,                                        // small integer work of shape subgraphs
  matmul, rmsnorm, layernorm, binary, activation, rope,    // native kernels
  gather_rows,
  glu, fused,                                               // act(g) * u in one step; a step done by another
  paged_attention, sdpa, scatter,                           // attention and in-place cache writes
  fallback,                                                 // the IR reference kernel
};

struct Step {
  const ir::Node* node = nullptr;
  Kind kind = Kind::fallback;
  std::vector<uint32_t> in;  // value ids
  uint32_t out = 0;          // value id of output 0 (outputs are consecutive)
  int param = -1, variable = -1;
  int buf = -1;              // pool buffer for output 0 (-1: none)
  // matmul: the weight, read in place, or its packed copy when the ISA has a packed kernel for it
  gguf::GgmlType wtype = gguf::GgmlType::F32;
  const uint8_t* weight = nullptr;
  size_t w_row_bytes = 0;
  int64_t N = 0, K = 0;
  std::shared_ptr<const PackedWeight> packed;
  int group = -1;            // matmul: its MatmulGroup, if any
  int act = 0;               // glu: the cpu::Act of the fused activation
  int quant_for = -1;        // glu, rmsnorm: the matmul job (a step or a group's first) it quantizes its rows for
  uint64_t prequant_run = 0;  // matmul: the run in which its input's rows were quantized (in pqbuf)
  int add_in = -1;           // matmul: the value it adds to its output (a fused residual or bias Add), if any
  bool add_row = false;      // matmul: add_in is one row added to every token's (a bias)
  uint64_t added_run = 0;    // matmul: the run in which it did
  int add_by = -1;           // binary Add: the matmul step that computes it in its epilogue, if any
  int rope = -1;             // group matmul: the RoPE step it applies in its epilogue (Q or K), if any
  int rope_pos = -1;         // group matmul: the value holding that RoPE's positions (computed before it)
  uint64_t roped_run = 0;    // group matmul: the run in which it did
  int rope_by = -1;          // rope: the group matmul that rotates its input in its epilogue, if any
  int next_kv_params[2] = {-1, -1};  // paged_attention: the next one's K and V cache parameters, if any
  int next_job = -1;         // packed matmul job (alone or a group's first): the next such job, if any
  std::vector<int64_t> axes;  // slice: its axes, normalized for inputs of rank axes_rank
  int axes_rank = -1;
  uint64_t fallback_run = 0;  // the last run that used the reference kernel for it
  std::vector<ir::Tensor> memo_in;  // fallback: copies of its inputs in that run, when all are small
};

// RoPE tables of one run, shared by every RoPE step with the same parameters and positions (the
// layers' Q and K): rope_cache per token once per run instead of once per step. Same tables, so
// the same bits.
struct RopeTables {
  uint64_t run = 0;  // the run they were computed in (0: never)
  int64_t n_dims = 0, head_size = 0;
  int mode = 0;
  float freq_base = 0, freq_scale = 0, attn_factor = 0;
  const float* freq_factors = nullptr;
  std::vector<int32_t> pos;
  Buffer tables;  // [T][2 * n_dims]
};

// Matmuls of one input on packed weights of one type (a layer's Q/K/V, its gate/up), placed next
// to each other in the plan and run by the first as one job: the activations quantized once, one
// split of all their rows over the threads, one barrier. Each output is its own matmul's, bit for
// bit (the rows are computed by the same kernel; only who computes them changes).
struct MatmulGroup {
  static constexpr size_t kMaxSteps = 8;
  std::vector<uint32_t> steps;  // at most kMaxSteps
  uint64_t ran = 0;  // the run in which the first step computed them all
  int64_t grain = 16;  // rows per part of the split: a packed group (16), or whole heads when a member ropes
};

struct Executor::Impl {
  const ir::Model* model = nullptr;
  Isa isa = Isa::scalar;
  std::shared_ptr<ThreadPool> pool;  // maybe shared (ExecutorOptions::pool)
  std::vector<Step> steps;
  std::vector<Val> vals;
  std::vector<uint32_t> consumers;    // per value: how many step inputs read it
  std::vector<uint32_t> result_vals;  // per model result: its value
  std::vector<std::string> var_ids;
  std::vector<Buffer> buffers;
  std::vector<std::pair<int, ir::Tensor>> pending;  // Assign writes, committed at the end
  // scratch, grown as needed and kept
  Buffer qbuf, scratch, ibuf, kvbuf, attn_scratch, bounds_buf;
  Buffer pqbuf;  // activations a GLU or RMSNorm quantized for the matmul job after it (Step::quant_for)
  std::vector<RopeTables> rope_tables;
  std::vector<MatmulGroup> groups;
  uint64_t run_count = 0;
  std::span<const ir::Tensor> run_params;  // the parameters of the run in progress
  int64_t fallbacks = 0;
  std::vector<ir::Tensor> fallback_out;  // per value: the output of a reference step (Val::hold points here)
  std::vector<ir::Tensor> results;       // the last run's results (kept: the next one reuses unchanged views)
  // GGFLOW_PROFILE=1: seconds and calls per op (native or fallback), printed when the executor ends,
  // one table per token count of a run (the input_ids / inp_tokens parameter's elements: a decode
  // step and a prompt chunk apart); 2: matmuls by weight type and shape.
  bool profile = false, profile_detail = false;
  struct ProfileTable {
    std::map<std::string, std::pair<double, int64_t>> ops;  // key -> (seconds, calls)
    int64_t runs = 0;
  };
  std::map<int64_t, ProfileTable> profile_tables;  // by tokens per run (-1: no token parameter)
  int token_param = -1;                            // index of input_ids / inp_tokens, if any

  Status compile(const ir::Model& m);
  // Plan fusions (executor_fusions.cpp), after the matmul groups.
  void fuse_steps();
  void fuse_glus();
  void fuse_epilogue_adds();
  void fuse_ropes();
  void plan_prequant();
  Result<std::span<const ir::Tensor>> run(std::span<const ir::Tensor> params, std::vector<ir::Tensor>* state,
                                          std::span<const uint8_t> writable);
  Status exec(Step& s, std::span<const ir::Tensor> params, std::vector<ir::Tensor>* state,
              std::span<const uint8_t> writable);
  Status fallback(Step& s);
  std::string profile_key(const Step& s) const;

  // Native kernels (executor_ops.cpp). Each returns false in `*done` when the inputs at hand are
  // outside what it handles; the step then runs on the reference kernel.
  Status matmul(Step& s, bool* done);
  Status matmul_group(MatmulGroup& g, bool* done);
  // The value a matmul adds in its epilogue (Step::add_in) as rows of y's N columns, with its row
  // stride (0: one row for every token); nullptr when none, or when the value at hand does not fit.
  const float* epilogue_addend(const Step& s, const Val& y, int64_t* stride);
  void queue_next_weights(const Step& s, int thread);
  // The quantized activation rows of x [T, K] for wtype in qbuf (or x itself for f32 types).
  Status quantize_rows(const Step& s, const float* x, int64_t T, const void** X, size_t* xrb);
  Status rmsnorm(Step& s, bool* done);
  Status layernorm(Step& s, bool* done);
  Status binary(Step& s, bool* done);
  Status activation(Step& s, bool* done);
  Status glu(Step& s);
  // Rows [0, rows) of n floats at y written by kernel(b, e) over the pool (parts of `grain` rows);
  // with Step::quant_for, each part then quantizes the rows it wrote for that matmul job (pqbuf).
  template <class F>
  Status write_rows(const Step& s, int64_t rows, int64_t grain, int64_t n, float* y, F kernel);
  Status rope(Step& s, bool* done);
  // A RoPE step's parameters for heads of S (false: inputs the native kernel does not handle), and
  // this run's tables for them at positions p (T of them; computed by the first RoPE needing them).
  bool rope_params(const Step& s, int64_t S, RopeParams* rp);
  Result<const float*> find_rope_tables(const Step& s, const RopeParams& rp, int64_t S, const Val& p, int64_t T);
  Status gather_rows(Step& s, bool* done);
  Status paged_attention(Step& s, bool* done);
  Status sdpa(Step& s, bool* done);
  Status scatter(Step& s, bool* done);
  Status reshape(Step& s);

  Val& in(const Step& s, size_t i) { return vals[s.in[i]]; }
  Val& out(const Step& s, size_t i = 0) { return vals[s.out + i]; }
  // Output 0 as a dense f32 (or `type`) value of `shape` in the step's buffer.
  Val& alloc_out(const Step& s, std::span<const int64_t> shape, ir::ElementType type = ir::ElementType::f32);
  // A dense version of `v` (itself when already dense, else a copy in scratch buffer `b`).
  const Val& dense(const Val& v, Buffer& b, Val& tmp);
};

}  // namespace ggflow::cpu
