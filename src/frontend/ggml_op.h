// The GGML op vocabulary that ggflow reads: the op list (defined once, X-macro), the typed
// parameters each op carries, and the extents (`Ext`) of GGML shapes.
//
// GGML shapes are written `ne` and are innermost first: ne[0] is the contiguous dimension
// (the hidden size of an activation row), ne[1] the tokens, ne[2] the heads... Every tensor has
// four extents (unused ones are 1). An extent is a literal length or a run-time length named by
// a symbol of the graph (the token count T, the cache length KV, the number of output rows O):
// the builder makes one graph for every sequence length, like a GGML graph built at T = ?.
// The conversion to the IR's outermost-first order happens in one place: frontend/layout.h.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

namespace ggflow::frontend {

// X(name): one line per GGML op ggflow understands. NONE marks a leaf (input or weight).
#define GGFLOW_GGML_OPS(X) \
  X(NONE)                  \
  X(GET_ROWS)              \
  X(MUL_MAT)               \
  X(ADD)                   \
  X(MUL)                   \
  X(SCALE)                 \
  X(RMS_NORM)              \
  X(NORM)                  \
  X(ROPE)                  \
  X(SOFT_MAX)              \
  X(VIEW)                  \
  X(RESHAPE)               \
  X(PERMUTE)               \
  X(TRANSPOSE)             \
  X(CONT)                  \
  X(CPY)                   \
  X(SET_ROWS)              \
  X(GLU)                   \
  X(UNARY)                 \
  X(FLASH_ATTN_EXT)        \
  X(CONCAT)

enum class GgmlOp : uint8_t {
#define X(n) n,
  GGFLOW_GGML_OPS(X)
#undef X
};
constexpr int kGgmlOpCount = 0
#define X(n) +1
    GGFLOW_GGML_OPS(X)
#undef X
    ;
std::string_view to_string(GgmlOp op);

enum class GgmlUnary : uint8_t { SILU, GELU, GELU_ERF, TANH };  // GELU is GGML's tanh form
enum class GgmlGlu : uint8_t { SWIGLU, GEGLU, GEGLU_ERF };        // act(gate) * up
std::string_view to_string(GgmlUnary op);
std::string_view to_string(GgmlGlu op);

// One extent of a GGML shape: a literal (sym == 0) or the run-time length of symbol `sym`
// (ids and names are kept by the GgmlGraph).
struct Ext {
  int64_t n = 1;   // the length when static; -1 when symbolic
  int sym = 0;
  Ext() = default;
  Ext(int64_t v) : n(v) {}  // NOLINT(implicit): literals read naturally, `{64, T, 1, 1}`
  Ext(int v) : n(v) {}      // NOLINT(implicit)
  static Ext symbol(int id) { Ext e; e.n = -1; e.sym = id; return e; }
  bool is_static() const { return sym == 0; }
  bool is(int64_t v) const { return sym == 0 && n == v; }
  friend bool operator==(const Ext& a, const Ext& b) { return a.n == b.n && a.sym == b.sym; }
};
using Ne = std::array<Ext, 4>;

// ---- typed parameters, one struct per op family ----
struct NoParams {};
struct ScaleParams { float s = 1.0f; float b = 0.0f; };   // y = x * s + b
struct NormParams { float eps = 1e-5f; };                 // RMS_NORM, NORM (no weights)
struct RopeParams {                                       // ggml_rope_ext
  int n_dims = 0;        // rotated dims of each head
  int mode = 0;          // 0: normal (pairs 2i, 2i+1); 2: neox (pairs i, i + n_dims/2)
  int n_ctx_orig = 0;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  float ext_factor = 0.0f;  // YaRN; ggflow supports 0 only
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
};
constexpr int kRopeNeox = 2;
struct SoftMaxParams { float scale = 1.0f; float max_bias = 0.0f; };   // softmax(x*scale + mask)
struct ViewParams {            // ggml_view_4d: ne, byte strides nb[1..3], byte offset into src
  std::array<int64_t, 4> nb{};  // nb[0] is the element size; 0 for an extent-1 dim = unused
  int64_t offset = 0;
};
struct PermuteParams { std::array<int, 4> axes{0, 1, 2, 3}; };  // src dim i becomes dim axes[i]
struct GluParams { GgmlGlu op = GgmlGlu::SWIGLU; bool swapped = false; };
struct UnaryParams { GgmlUnary op = GgmlUnary::SILU; };
struct FlashAttnParams { float scale = 1.0f; float max_bias = 0.0f; float logit_softcap = 0.0f; };
struct ConcatParams { int dim = 0; };

using GgmlParams = std::variant<NoParams, ScaleParams, NormParams, RopeParams, SoftMaxParams,
                                ViewParams, PermuteParams, GluParams, UnaryParams,
                                FlashAttnParams, ConcatParams>;

}  // namespace ggflow::frontend
