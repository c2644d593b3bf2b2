// Speculative decoding set-up (see speculative.h).
#include "pipeline/speculative.h"

#include <algorithm>

#include "runtime/paged_runner.h"
#include "serving/draft_proposer.h"

namespace ggflow::pipeline {

namespace {
constexpr int32_t kMaxSpecTokens = serving::DraftAcceptance::kMaxDepth;
constexpr int32_t kLookupDefaultK = 7;  // with the pending token, one 8-token matmul tile
constexpr int32_t kDraftDefaultK = 8;
constexpr int32_t kLookupBeyondHead = 3;  // n-grams for the ids a cut draft head cannot propose
}  // namespace

Status SpeculativeOptions::validate() const {
  if (!draft_model.empty() && lookup > 0)
    return make_error("speculative decoding takes one proposer: a draft model or prompt lookup, not both",
                      "drop --lookup or --draft-model");
  if (lookup < 0 || lookup > 16)
    return make_error("--lookup " + std::to_string(lookup) + " is out of range", "n-grams of 1 to 16 tokens (3 is typical)");
  if (num_spec_tokens < 0 || num_spec_tokens > kMaxSpecTokens)
    return make_error("--spec-tokens " + std::to_string(num_spec_tokens) + " is out of range",
                      "draft tokens per step: 1 to " + std::to_string(kMaxSpecTokens) + " (0: the proposer's default)");
  if (draft_vocab < 0)
    return make_error("--draft-vocab " + std::to_string(draft_vocab) + " is negative",
                      "the draft proposes token ids below N (e.g. 32768); 0 keeps the whole vocabulary");
  if (draft_vocab > 0 && draft_model.empty())
    return make_error("--draft-vocab needs a draft model", "add --draft-model FILE, or drop --draft-vocab");
  if (!draft_quant.empty() && draft_quant != "q4_0")
    return make_error("--draft-quant " + draft_quant + " is not a type ggflow requantizes a draft to",
                      "use --draft-quant q4_0, or leave it out to keep the file's types");
  if (!draft_quant.empty() && draft_model.empty())
    return make_error("--draft-quant needs a draft model", "add --draft-model FILE, or drop --draft-quant");
  if (num_spec_tokens > 0 && !enabled())
    return make_error("--spec-tokens needs a proposer", "add --draft-model FILE or --lookup N");
  return {};
}

Status check_draft_vocabulary(const runtime::ModelFile& target, const runtime::ModelFile& draft) {
  const std::string hint = "use a draft model of the same family and tokenizer (e.g. Qwen2.5-Coder 0.5B for 1.5B)";
  auto t = target.file().get<std::vector<std::string>>("tokenizer.ggml.tokens");
  auto d = draft.file().get<std::vector<std::string>>("tokenizer.ggml.tokens");
  if (!t) return t.error();
  if (!d) return make_error("the draft model " + draft.path() + " has no vocabulary: " + d.error().what, hint);
  if (t->size() != d->size() || target.n_vocab() != draft.n_vocab())
    return make_error("the draft model's vocabulary has " + std::to_string(d->size()) + " tokens (" +
                          std::to_string(draft.n_vocab()) + " logits), the target's " + std::to_string(t->size()) +
                          " (" + std::to_string(target.n_vocab()) + ")",
                      hint);
  auto diff = std::mismatch(t->begin(), t->end(), d->begin());
  if (diff.first != t->end())
    return make_error("the draft model's token " + std::to_string(diff.first - t->begin()) + " is '" + *diff.second +
                          "', the target's is '" + *diff.first + "'",
                      hint);
  return {};
}

Result<std::unique_ptr<Speculation>> Speculation::create(const runtime::ModelFile& target, const SpeculativeOptions& spec,
                                                         int32_t num_blocks, const runtime::CompileOptions& options) {
  if (auto s = spec.validate(); !s) return s.error();
  auto sp = std::make_unique<Speculation>();
  sp->config.adaptive = spec.adaptive;
  if (spec.lookup > 0) {
    // One-token matches are weak evidence: on the code-editing set they cost more than they gave.
    sp->proposer = std::make_unique<serving::NgramProposer>(spec.lookup, std::min(2, spec.lookup));
    sp->config.num_spec_tokens = spec.num_spec_tokens > 0 ? spec.num_spec_tokens : kLookupDefaultK;
    return sp;
  }
  builder::BuildOptions bo{.logit_rows = spec.draft_vocab};
  if (spec.draft_quant == "q4_0") bo.requant = gguf::GgmlType::Q4_0;
  auto draft = runtime::ModelFile::open(spec.draft_model, bo);
  if (!draft) return make_error("cannot open the draft model: " + draft.error().what, draft.error().hint);
  if (auto s = check_draft_vocabulary(target, **draft); !s) return s.error();
  auto runner = runtime::PagedRunner::create(**draft, num_blocks, options);
  if (!runner) return make_error("cannot compile the draft model: " + runner.error().what, runner.error().hint);
  // The adaptive k's cost model: a decode step reads the weights, so the files' sizes.
  const double cost = std::clamp(double((*draft)->file().file_size()) / double(target.file().file_size()), 0.01, 1.0);
  auto proposer = std::make_unique<serving::DraftModelProposer>(**runner, num_blocks, cost);
  if (spec.draft_vocab > 0) proposer->set_lookup_beyond_head(kLookupBeyondHead);
  sp->proposer = std::move(proposer);
  sp->draft_runner = std::move(*runner);
  sp->draft_file = std::move(*draft);
  sp->config.num_spec_tokens = spec.num_spec_tokens > 0 ? spec.num_spec_tokens : kDraftDefaultK;
  return sp;
}

}  // namespace ggflow::pipeline
