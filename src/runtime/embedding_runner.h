// EmbeddingRunner: an encoder model (builder/encoder.cpp: BERT as llama.cpp converts it) compiled
// once, turning token ids into one embedding vector: the last layer's hidden states pooled as the
// file says (mean, CLS or last token) and L2-normalized, as llama.cpp's embedding tool returns
// them with --embd-normalize 2 (the caller tokenizes: text::Tokenizer::from_file on the same file).
// No KV cache: each run computes whole sequences (attention over all of a sequence's tokens in both
// directions). embed_many packs several sequences into one run (up to kPackTokens tokens) under a
// block-diagonal mask: a sequence's keys are one run of the packed tokens, which the attention
// kernel reads as a key range, and every other op computes a token's row from that row alone, so a
// sequence's vector has the same bits packed or alone (EmbeddingRunner tests check by memcmp).
// A reranker (pooling rank: a cross-encoder with a classification head) gives scores instead:
// score_many on sequences framed as query-document pairs (text::Tokenizer::encode_pair).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "builder/build.h"
#include "runtime/compiled_model.h"

namespace ggflow::runtime {

class EmbeddingRunner {
 public:
  // Errors: the file's, not an encoder, the compiler's.
  static Result<std::unique_ptr<EmbeddingRunner>> open(const std::string& path, const CompileOptions& options = {});

  // One sequence's vector, f32 [n_embd]. Errors: no tokens, more than the model's context, an id
  // outside the vocabulary.
  Result<std::vector<float>> embed(std::span<const int32_t> ids);
  // Each sequence's vector, in order; the sequences packed into runs of at most kPackTokens tokens
  // (a longer sequence runs alone). Errors: embed's, naming the sequence; a reranker.
  Result<std::vector<std::vector<float>>> embed_many(std::span<const std::span<const int32_t>> seqs);
  // A reranker's scores f32 [n_cls_out] per sequence (its head on the sequence's first token, not
  // normalized: llama-server's relevance_score is the first), packed as embed_many. Errors:
  // embed_many's; not a reranker.
  Result<std::vector<std::vector<float>>> score_many(std::span<const std::span<const int32_t>> seqs);
  bool is_reranker() const { return params_.pooling == builder::Pooling::rank; }
  // Measured on all-MiniLM (256 texts of ~12 tokens, 2 threads): 128 tokens per run ~0.33 s, 64
  // ~0.55 s (the F16 products want long token tiles), 512 slower again (the attention step scans
  // the T x T mask for its key ranges and grows with T^2).
  static constexpr int64_t kPackTokens = 128;
  const builder::EncoderParams& params() const { return params_; }
  const CompiledModel& compiled() const { return *cm_; }

 private:
  EmbeddingRunner() = default;
  std::shared_ptr<const void> file_;  // the mapped file the weights point into
  builder::EncoderParams params_;
  std::unique_ptr<CompiledModel> cm_;
  // Checks the sequences and runs them in packs: their vectors, or a reranker's scores.
  Result<std::vector<std::vector<float>>> run_all(std::span<const std::span<const int32_t>> seqs);
  // Runs seqs [b, e) packed, appending their vectors (scores) to out.
  Status run_pack(std::span<const std::span<const int32_t>> seqs, std::vector<std::vector<float>>& out);
  size_t in_tokens_ = 0, in_pos_ = 0, in_mask_ = 0, in_cls_ = 0, out_embd_ = 0, out_score_ = 0;
  std::vector<ir::Tensor> inputs_;
};

// Pools hidden states f32 [T, E] (row-major: token t's E values at t·E) into one vector: the mean
// of the rows (summed in token order), the first row or the last; then divides by its L2 norm
// (summed in double, as llama.cpp's common_embd_normalize). A zero vector stays zero.
std::vector<float> pool_and_normalize(std::span<const float> hidden, int64_t T, int64_t E, builder::Pooling pooling);

}  // namespace ggflow::runtime
