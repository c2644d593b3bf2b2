// Passes. A Pass rewrites a Model in place and says whether it changed anything. A MatcherPass
// is a pattern plus a callback: for every value of the graph (in topological order) that matches
// the pattern, the callback gets the Match and a Rewriter and returns Applied or why it did not
// apply. Both the outcomes and the near misses (the root op matched, a sub-pattern did not) go to
// log(), which the PassManager collects:
//   FixEmbdAxis: node 'inp_embd_unsq': applied
//   FixEmbdAxis: node 'Unsqueeze_12': no match: Unsqueeze 'Unsqueeze_12' input 0: ... fails name == 'inp_tokens'
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/model.h"
#include "pattern/matcher.h"
#include "pattern/rewriter.h"

namespace ggflow::pattern {

class Pass {
 public:
  virtual ~Pass() = default;
  virtual std::string name() const = 0;
  // true when the graph changed.
  virtual Result<bool> run(ir::Model& model) = 0;
  const std::vector<std::string>& log() const { return log_; }
  void clear_log() { log_.clear(); }

 protected:
  std::vector<std::string> log_;
};

struct Outcome {
  bool applied = false;
  std::string why;  // why it did not apply
  static Outcome done() { return {true, {}}; }
  static Outcome skip(std::string why) { return {false, std::move(why)}; }
};

class MatcherPass : public Pass {
 public:
  using Callback = std::function<Outcome(const Match&, Rewriter&)>;
  MatcherPass(std::string name, P pattern, Callback callback)
      : name_(std::move(name)), pattern_(std::move(pattern)), callback_(std::move(callback)) {}
  std::string name() const override { return name_; }
  Result<bool> run(ir::Model& model) override;

 private:
  std::string name_;
  P pattern_;
  Callback callback_;
};

class FunctionPass : public Pass {
 public:
  FunctionPass(std::string name, std::function<Result<bool>(ir::Model&)> fn)
      : name_(std::move(name)), fn_(std::move(fn)) {}
  std::string name() const override { return name_; }
  Result<bool> run(ir::Model& model) override { return fn_(model); }

 private:
  std::string name_;
  std::function<Result<bool>(ir::Model&)> fn_;
};

}  // namespace ggflow::pattern
