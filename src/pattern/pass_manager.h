// The PassManager runs passes in order. After each pass it re-infers shapes (Model::infer) and
// runs the verifier, so a pass that breaks the graph is named at once. It can dump the graph
// before the first pass and after each one (text or DOT) into a folder, as
// `00_input.txt`, `01_<pass>.txt`, ...; the environment variable GGFLOW_DUMP_GRAPHS=<dir> turns
// text dumps on without code changes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/result.h"
#include "ir/verifier.h"
#include "pattern/pass.h"

namespace ggflow::pattern {

enum class DumpFormat { none, text, dot };

struct PassManagerOptions {
  bool verify = true;
  ir::VerifyOptions verify_options;
  DumpFormat dump = DumpFormat::none;
  std::string dump_dir;
};

class PassManager {
 public:
  explicit PassManager(PassManagerOptions options = {}) : options_(std::move(options)) {}
  template <class T, class... A>
  T& add(A&&... args) {
    auto p = std::make_unique<T>(std::forward<A>(args)...);
    T& ref = *p;
    passes_.push_back(std::move(p));
    return ref;
  }
  void add(std::unique_ptr<Pass> pass) { passes_.push_back(std::move(pass)); }
  // Runs every pass; true when any changed the graph.
  Result<bool> run(ir::Model& model);
  const std::vector<std::string>& log() const { return log_; }

 private:
  Status dump(const ir::Model& model, size_t step, const std::string& label) const;
  PassManagerOptions options_;
  std::vector<std::unique_ptr<Pass>> passes_;
  std::vector<std::string> log_;
};

}  // namespace ggflow::pattern
