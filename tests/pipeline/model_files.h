// The model files of the pipeline tests, each opened once per test process (as `ggflow run`
// opens its file once), and LLMPipeline over a layout.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "pipeline/llm_pipeline.h"
#include "runtime/model_file.h"

namespace ggflow::testing {

inline Result<std::shared_ptr<const runtime::ModelFile>> model_file(const std::string& path) {
  static std::map<std::string, std::shared_ptr<const runtime::ModelFile>> files;
  if (auto it = files.find(path); it != files.end()) return it->second;
  auto f = runtime::ModelFile::open(path);
  if (!f) return f.error();
  return files[path] = *f;
}

inline Result<std::unique_ptr<pipeline::LLMPipeline>> open_llm(const std::string& path, transforms::Layout layout,
                                                               int64_t n_ctx = 0) {
  auto f = model_file(path);
  if (!f) return f.error();
  runtime::RunnerOptions o;
  o.n_ctx = n_ctx;
  return pipeline::LLMPipeline::open(**f, layout, o);
}

}  // namespace ggflow::testing
