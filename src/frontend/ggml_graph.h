// GgmlGraph: a model as GGML sees it, before translation. Tensors in creation order (a source
// always precedes its consumers), each with an op, GGML shape `ne` (innermost first, ggml_op.h),
// GGML element type, sources and typed parameters.
//
// Leaves (op NONE) are either graph inputs (named; the runner binds them) or weights that point
// into the memory-mapped .gguf file: the graph keeps the file's bytes alive (shared owner), so a
// weight is never copied or converted. Outputs are named tensors (`logits`, updated caches).
//
// The op methods mirror ggml.h (`mul_mat(a, b)` is ggml_mul_mat) and compute the result's `ne`
// with GGML's rules. A shape that GGML would assert on is recorded as the graph's first error
// (naming the op and both shapes) instead of aborting, so a malformed model fails at build()
// with a message; the method still returns a tensor so that building can continue.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "frontend/ggml_op.h"
#include "gguf/file.h"
#include "base/result.h"
#include "gguf/types.h"

namespace ggflow::frontend {

using gguf::GgmlType;

enum class LeafKind : uint8_t { none, input, weight };

struct GgmlTensor {
  int id = -1;
  std::string name;
  GgmlOp op = GgmlOp::NONE;
  GgmlType type = GgmlType::F32;
  Ne ne{};
  int n_dims = 4;                    // IR rank: 4 for activations and inputs, the file's for weights
  std::vector<int> src;              // ids of the sources, GGML's src[0], src[1], ...
  GgmlParams params;
  LeafKind leaf = LeafKind::none;
  std::span<const uint8_t> data;     // weights: the bytes in the mapped file

  template <class P>
  const P& p() const { return std::get<P>(params); }
};

struct GgmlOutput {
  std::string name;
  int id;
};

class GgmlGraph {
 public:
  // ---- symbols (run-time lengths) ----
  Ext symbol(const std::string& name);             // the symbol of that name, made on first use
  const std::vector<std::string>& symbol_names() const { return symbols_; }  // id i+1 -> name
  std::string ext_str(const Ext& e) const;         // "64" or "T"
  std::string ne_str(const Ne& ne) const;          // "[64, T, 1, 1]"

  // ---- leaves ----
  int input(const std::string& name, GgmlType type, Ne ne);
  // A weight from the mapped file (GGUF shape and type), kept alive through `owner`.
  int weight(const gguf::TensorInfo& info, std::span<const uint8_t> data);
  // A weight held in memory (tests): `owner` keeps `data` alive.
  int weight(const std::string& name, GgmlType type, Ne ne, int n_dims, std::span<const uint8_t> data,
             std::shared_ptr<const void> owner);
  void keep_alive(std::shared_ptr<const void> owner) { owners_.push_back(std::move(owner)); }
  // One handle that keeps every weight's bytes alive (for zero-copy IR constants).
  std::shared_ptr<const void> owner() const {
    return std::make_shared<const std::vector<std::shared_ptr<const void>>>(owners_);
  }

  // ---- ops (ggml.h semantics) ----
  int get_rows(int a, int b);                       // rows b of a: [a0, b0, b1, b2]
  int mul_mat(int a, int b);                        // [a1, b1, b2, b3] = b . a^T, a broadcast over b2, b3
  int add(int a, int b);                            // b repeats to a
  int mul(int a, int b);
  int scale(int a, float s, float b = 0.0f);
  int rms_norm(int a, float eps);
  int norm(int a, float eps);
  int rope(int a, int pos, std::optional<int> freq_factors, const RopeParams& p);
  int soft_max(int a, std::optional<int> mask, float scale, float max_bias = 0.0f);
  int view(int a, Ne ne, std::array<int64_t, 4> nb, int64_t offset);
  int reshape(int a, Ne ne);
  int permute(int a, int ax0, int ax1, int ax2, int ax3);
  int transpose(int a);
  int cont(int a);
  int cpy(int a, int b);                            // a converted into b's type and shape
  int cast(int a, GgmlType t);                      // a converted to type t (ggml_cast: a CPY)
  int set_rows(int dst, int rows, int indices);     // dst with rows[:, i] written at row indices[i]
  int glu_split(GgmlGlu op, int gate, int up);      // act(gate) * up
  int glu(GgmlGlu op, int a, bool swapped);         // halves of a along ne0
  int unary(GgmlUnary op, int a);
  int flash_attn_ext(int q, int k, int v, std::optional<int> mask, float scale,
                     float max_bias = 0.0f, float logit_softcap = 0.0f);  // [Dv, H, T, B]
  int concat(int a, int b, int dim);

  void set_name(int id, std::string name) { tensors_[id].name = std::move(name); }
  void add_output(const std::string& name, int id) { outputs_.push_back({name, id}); }

  // ---- reading ----
  const std::vector<GgmlTensor>& tensors() const { return tensors_; }
  const GgmlTensor& tensor(int id) const { return tensors_[id]; }
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<GgmlOutput>& outputs() const { return outputs_; }
  const GgmlTensor* find(std::string_view name) const;   // by name, first match
  // The first shape error met while building, with the op named; ok when none.
  const Status& status() const { return status_; }
  // One line per tensor: "#12 MUL_MAT attn_q-0 f32 [64, T, 1, 1] <- #3, #11".
  std::string dump() const;

 private:
  int push(GgmlTensor t);
  int op(GgmlOp op, GgmlType type, Ne ne, std::vector<int> src, GgmlParams p = NoParams{});
  void fail(GgmlOp op, const std::string& what);
  bool can_repeat(const Ne& small, const Ne& big) const;
  bool same_numel(const Ne& a, const Ne& b) const;

  std::vector<GgmlTensor> tensors_;
  std::vector<int> inputs_;
  std::vector<GgmlOutput> outputs_;
  std::vector<std::string> symbols_;
  std::vector<std::shared_ptr<const void>> owners_;
  Status status_;
};

}  // namespace ggflow::frontend
