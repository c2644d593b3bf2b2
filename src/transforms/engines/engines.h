// Layout engines: one GGUF model run in the raw, SDPA or PagedAttention layout on the IR reference
// evaluator, so that the three layouts can be compared value for value (DESIGN.md section 6).
//
//   raw    builder::RawRunner (the translated GGML graph; the runner owns the KV cache)
//   sdpa   AdaptToGenAI + MakeStateful: input_ids [1,T], attention_mask [1,P+T] (ones),
//          position_ids [1,T] = P.., beam_idx {0}; the KV cache is evaluator state
//   paged  + SDPAToPagedAttention: input_ids / position_ids [T] of every scheduled chunk, one
//          block table per sequence that the engine fills itself (blocks of 32 rows handed out
//          in order; the caches [blocks, Hkv, 32, D] per layer grow by doubling), and
//          sampled_tokens_indices = the last row of each chunk
// Every engine returns, per step, the f32 logits row of the last token of each chunk.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/result.h"
#include "ir/evaluator.h"
#include "ir/model.h"
#include "transforms/layouts.h"

namespace ggflow::transforms {

struct EngineOptions {
  bool flash_attn = true;  // the raw graph's attention (SDPA/PA need it)
};

// Open, build (BuildOptions::flash_attn from `opt`), translate and convert to `layout`.
// `n_vocab` (optional) receives the vocabulary size, `log` the passes' logs.
Result<ir::Model> load_layout_model(const std::string& path, Layout layout, const EngineOptions& opt = {},
                                    int64_t* n_vocab = nullptr, std::vector<std::string>* log = nullptr);

// The shapes of the key tensors of each layout's graph as a Markdown section (docs/LAYOUTS.md):
// the inputs, the embedding, layer 0's Q/K, the attention op's inputs and output, the caches, the
// row selection before the LM head and the logits.
std::string key_shapes_markdown(const std::string& model_label, const std::vector<std::pair<Layout, ir::Model>>& models);

// One sequence at a time (all three layouts).
class SequenceEngine {
 public:
  virtual ~SequenceEngine() = default;
  // Feed `tokens` (a prompt or one decode token); the logits row of the last one, [n_vocab].
  virtual Result<std::vector<float>> step(std::span<const int32_t> tokens) = 0;
  virtual int64_t n_vocab() const = 0;
  virtual int64_t n_past() const = 0;
  virtual void reset() = 0;  // forget the sequence (paged: start a new one; old blocks are not reused)
};

// Open, build, translate and convert the model at `path` to `layout`.
Result<std::unique_ptr<SequenceEngine>> open_engine(const std::string& path, Layout layout, const EngineOptions& opt = {});

// Prompt, then `n` greedy tokens (argmax, lowest id on ties). `rows` (optional) receives the
// logits row each token was chosen from: [n, n_vocab] (the prompt's last row, then each decode step).
Result<std::vector<int32_t>> generate_greedy(SequenceEngine& engine, std::span<const int32_t> prompt, int n,
                                             std::vector<float>* rows = nullptr);

// The paged layout with many sequences per step (continuous batching in miniature).
class PagedEngine {
 public:
  static Result<std::unique_ptr<PagedEngine>> open(const std::string& path, const EngineOptions& opt = {});
  // A paged model and its vocabulary size (tests).
  static Result<std::unique_ptr<PagedEngine>> from_model(ir::Model model, int64_t n_vocab);

  int add_sequence();                           // a new empty sequence, its id
  int64_t past(int seq) const { return seqs_.at(seq).past; }
  struct Chunk {
    int seq;
    std::vector<int32_t> tokens;                // a prefill chunk or one decode token
  };
  // One call of the model over all chunks; the logits row of each chunk's last token, in order.
  // The engine fills the block tables itself (blocks handed out in order, never freed).
  Result<std::vector<std::vector<float>>> step(const std::vector<Chunk>& chunks);

  // The model call with block tables chosen by the caller (a scheduler's block manager): the
  // inputs of DESIGN.md section 4 by value; the caches grow to `num_blocks` blocks first. Returns
  // f32 [R, n_vocab], row r for sampled_tokens_indices[r]. step() is built on it.
  struct Inputs {
    std::vector<int64_t> input_ids, position_ids;             // [T]
    std::vector<int64_t> past_lens, subsequence_begins;       // [B], [B+1]
    std::vector<int64_t> block_indices, block_indices_begins; // [Σ], [B+1]
    int64_t max_context_len = 0;
    std::vector<int64_t> sampled_tokens_indices;              // [R]
  };
  Result<std::vector<float>> forward(const Inputs& in, int64_t num_blocks);
  int64_t n_vocab() const { return n_vocab_; }
  const ir::Model& model() const { return model_; }

 private:
  PagedEngine() = default;
  Status grow(int64_t blocks);
  struct Seq {
    int64_t past = 0;
    std::vector<int64_t> blocks;
  };
  ir::Model model_;
  int64_t n_vocab_ = 0, n_blocks_ = 0, next_block_ = 0;
  std::vector<ir::Tensor> kcache_, vcache_;     // per layer: f32 [blocks, Hkv, 32, D]
  std::vector<Seq> seqs_;
};

}  // namespace ggflow::transforms
