#include "pattern/pass_manager.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ir/printer.h"

namespace ggflow::pattern {

Status PassManager::dump(const ir::Model& model, size_t step, const std::string& label) const {
  DumpFormat fmt = options_.dump;
  std::string dir = options_.dump_dir;
  if (fmt == DumpFormat::none) {
    const char* env = std::getenv("GGFLOW_DUMP_GRAPHS");
    if (!env || !*env) return {};
    fmt = DumpFormat::text;
    dir = env;
  }
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  char prefix[8];
  std::snprintf(prefix, sizeof prefix, "%02zu_", step);
  std::string path = dir + "/" + prefix + label + (fmt == DumpFormat::dot ? ".dot" : ".txt");
  std::ofstream f(path);
  if (!f) return make_error("cannot write graph dump " + path, "check that the dump folder is writable");
  f << (fmt == DumpFormat::dot ? ir::to_dot(model) : ir::to_text(model));
  return {};
}

Result<bool> PassManager::run(ir::Model& model) {
  if (auto s = dump(model, 0, "input"); !s) return s.error();
  bool changed = false;
  for (size_t i = 0; i < passes_.size(); ++i) {
    Pass& p = *passes_[i];
    p.clear_log();
    auto r = p.run(model);
    log_.insert(log_.end(), p.log().begin(), p.log().end());
    if (!r) return make_error("pass " + p.name() + ": " + r.error().what, r.error().hint);
    changed = changed || *r;
    if (auto s = model.infer(); !s)
      return make_error("after pass " + p.name() + ": " + s.error().what, s.error().hint);
    if (options_.verify)
      if (auto s = ir::verify(model, options_.verify_options); !s)
        return make_error("after pass " + p.name() + ": " + s.error().what, s.error().hint);
    if (auto s = dump(model, i + 1, p.name()); !s) return s.error();
  }
  return changed;
}

}  // namespace ggflow::pattern
