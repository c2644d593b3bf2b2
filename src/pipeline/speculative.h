// Speculative decoding for the continuous-batching pipeline: which proposer, and the checks that
// make a draft model usable (serving/speculative.h has the mechanism).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/result.h"
#include "runtime/compiled_model.h"
#include "runtime/model_file.h"
#include "runtime/paged_batch.h"
#include "serving/speculative.h"

namespace ggflow::pipeline {

struct SpeculativeOptions {
  std::string draft_model;      // a .gguf with the target's vocabulary ("" = none)
  int32_t lookup = 0;           // > 0: prompt-lookup proposals, n-grams of 2 (1 if lookup == 1) up to this many tokens
  int32_t num_spec_tokens = 0;  // drafts per sequence and step at most; 0: the proposer's default
  // The draft model's LM head is cut to this many rows (BuildOptions::logit_rows): it proposes ids
  // below it, and prompt lookup the ids beyond where the text repeats; 0: the whole vocabulary.
  int64_t draft_vocab = 0;
  // "q4_0": the draft's matrices requantized at load (BuildOptions::requant): fewer bytes per
  // draft token, a few more rejected drafts; "": the file's types.
  std::string draft_quant;
  bool adaptive = true;         // false: always ask for num_spec_tokens (benchmarks of a fixed k)
  bool enabled() const { return !draft_model.empty() || lookup > 0; }
  // Errors: both proposers, or a k or n-gram length out of range.
  Status validate() const;
};

// The draft model's vocabulary must be the target's: the same token strings in the same order
// (token ids are exchanged as they are). Errors name the first difference.
Status check_draft_vocabulary(const runtime::ModelFile& target, const runtime::ModelFile& draft);

// What a pipeline keeps for speculative decoding: the proposer, and for a draft model its file
// and paged runner (with its own pool of `num_blocks` blocks, on the thread pool of `options`).
struct Speculation {
  std::shared_ptr<const runtime::ModelFile> draft_file;
  std::unique_ptr<runtime::BatchRunner> draft_runner;
  std::unique_ptr<serving::Proposer> proposer;
  serving::SpecConfig config;

  static Result<std::unique_ptr<Speculation>> create(const runtime::ModelFile& target, const SpeculativeOptions& spec,
                                                     int32_t num_blocks, const runtime::CompileOptions& options);
};

}  // namespace ggflow::pipeline
