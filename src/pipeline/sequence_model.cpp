#include "pipeline/sequence_model.h"

#include "gguf/file.h"

namespace ggflow::pipeline {
namespace {

// A layout engine with the context limit the pipeline enforces.
class EngineModel final : public SequenceModel {
 public:
  EngineModel(std::unique_ptr<transforms::SequenceEngine> e, int64_t n_ctx) : e_(std::move(e)), n_ctx_(n_ctx) {}
  void reset() override { e_->reset(); }
  Result<std::vector<float>> step(std::span<const int32_t> tokens) override {
    if (e_->n_past() + static_cast<int64_t>(tokens.size()) > n_ctx_)
      return make_error("the context of " + std::to_string(n_ctx_) + " tokens is full",
                        "shorten the prompt or lower max_tokens");
    return e_->step(tokens);
  }
  int64_t n_past() const override { return e_->n_past(); }
  int64_t n_vocab() const override { return e_->n_vocab(); }
  int64_t n_ctx() const override { return n_ctx_; }

 private:
  std::unique_ptr<transforms::SequenceEngine> e_;
  int64_t n_ctx_;
};

}  // namespace

Result<std::unique_ptr<SequenceModel>> open_sequence_model(const std::string& path, transforms::Layout layout,
                                                           int64_t n_ctx) {
  if (n_ctx <= 0) {
    auto f = gguf::File::open(path);
    if (!f) return f.error();
    auto train = f->get<int64_t>(std::string(f->architecture()) + ".context_length");
    n_ctx = train ? *train : 4096;
  }
  auto e = transforms::open_engine(path, layout);
  if (!e) return e.error();
  return std::unique_ptr<SequenceModel>(new EngineModel(std::move(*e), n_ctx));
}

}  // namespace ggflow::pipeline
