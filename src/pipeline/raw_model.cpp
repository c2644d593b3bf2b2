#include "builder/raw_runner.h"
#include "pipeline/sequence_model.h"

namespace ggflow::pipeline {
namespace {

class RawModel final : public SequenceModel {
 public:
  RawModel(std::unique_ptr<builder::RawRunner> r, int64_t n_ctx) : r_(std::move(r)), n_ctx_(n_ctx) {}
  void reset() override { r_->reset(); }
  Result<std::vector<float>> step(std::span<const int32_t> tokens) override {
    if (r_->n_past() + static_cast<int64_t>(tokens.size()) > n_ctx_)
      return make_error("the context of " + std::to_string(n_ctx_) + " tokens is full",
                        "shorten the prompt or lower max_tokens");
    return r_->step(tokens);
  }
  int64_t n_past() const override { return r_->n_past(); }
  int64_t n_vocab() const override { return r_->hparams().n_vocab; }
  int64_t n_ctx() const override { return n_ctx_; }

 private:
  std::unique_ptr<builder::RawRunner> r_;
  int64_t n_ctx_;
};

}  // namespace

Result<std::unique_ptr<SequenceModel>> open_raw_model(const std::string& path, int64_t n_ctx) {
  auto r = builder::RawRunner::open(path);
  if (!r) return r.error();
  const int64_t train = (*r)->hparams().n_ctx_train;
  if (n_ctx <= 0) n_ctx = train > 0 ? train : 4096;
  return std::unique_ptr<SequenceModel>(new RawModel(std::move(*r), n_ctx));
}

}  // namespace ggflow::pipeline
