#include "runtime/model_file.h"

#include <cmath>
#include <cstdlib>

#include "transforms/fusion/fusion.h"

#include "frontend/translate.h"
#include "gguf/finite.h"

namespace ggflow::runtime {

namespace {

// Every weight the graph reads, checked for NaN and Inf before anything runs: float tensors
// element by element, quantized ones through their block scales (gguf/finite.h). One read of
// the weights, mostly page faults the first step would take anyway (measured on 2 loaded cores:
// SmolLM2-135M Q4_1 ~15-25 ms, Gemma3-270M Q4_K_M ~30-55 ms, a 1 GB F16 model ~170 ms; warm, a
// third of that); a broken file fails here, naming the tensor, instead of giving NaN logits later.
Status check_weights_finite(const frontend::GgmlGraph& g) {
  for (const auto& t : g.tensors()) {
    if (t.leaf != frontend::LeafKind::weight) continue;
    auto bad = gguf::find_non_finite(t.type, t.data);
    if (!bad) continue;
    const auto& tr = gguf::traits(t.type);
    const std::string value = bad->is_nan ? "NaN" : bad->negative ? "-Inf" : "+Inf";
    std::string where;
    if (bad->in_scale) {
      const uint64_t first = bad->index * tr.block_size;
      where = "a " + value + " scale in block " + std::to_string(bad->index) + " (elements " + std::to_string(first) + ".." +
              std::to_string(first + tr.block_size - 1) + ")";
    } else {
      where = value + " at element " + std::to_string(bad->index);
    }
    return make_error("tensor '" + t.name + "' (" + std::string(tr.name) + ") holds " + where +
                          "; the model would compute NaN from it",
                      "the file is damaged or was converted from broken weights; re-download or re-convert it");
  }
  return {};
}

}  // namespace

Result<LoraSpec> parse_lora_spec(std::string_view arg) {
  LoraSpec spec{std::string(arg), 1.0f};
  const size_t colon = arg.rfind(':');
  if (colon != std::string_view::npos) {
    const std::string tail(arg.substr(colon + 1));
    char* end = nullptr;
    const float scale = std::strtof(tail.c_str(), &end);
    if (!tail.empty() && end == tail.c_str() + tail.size()) {
      if (!std::isfinite(scale))
        return make_error("LoRA scale '" + tail + "' is not a finite number", "give FILE or FILE:SCALE, e.g. adapter.gguf:0.5");
      spec.path = std::string(arg.substr(0, colon)), spec.scale = scale;
    }
  }
  if (spec.path.empty()) return make_error("LoRA adapter '" + std::string(arg) + "' names no file", "give FILE or FILE:SCALE, e.g. adapter.gguf:0.5");
  return spec;
}

Result<std::shared_ptr<const ModelFile>> ModelFile::open(const std::string& path, const builder::BuildOptions& opt,
                                                         std::span<const LoraSpec> loras) {
  auto f = gguf::File::open(path);
  if (!f) return f.error();
  std::shared_ptr<ModelFile> m(new ModelFile(std::move(*f)));
  m->opt_ = opt;
  for (const LoraSpec& spec : loras) {
    auto a = builder::open_lora(spec.path, m->file_);
    if (!a) return a.error();
    m->lora_factors_.push_back((*a)->factor(spec.scale));
    m->opt_.loras.push_back(std::move(*a));
  }
  if (m->lora_factors_.size() != m->opt_.loras.size())
    return make_error("BuildOptions::loras is set; give adapters as LoraSpecs to ModelFile::open", "pass the adapter paths and scales");
  auto built = builder::build(m->file_, m->opt_);
  if (!built) return built.error();
  if (auto s = check_weights_finite(built->graph); !s) return s.error();
  auto raw = frontend::translate(built->graph);
  if (!raw) return raw.error();
  m->hp_ = built->hp;
  m->raw_ = std::move(*raw);
  return std::shared_ptr<const ModelFile>(std::move(m));
}

Result<ir::Model> ModelFile::layout_model(transforms::Layout layout, std::vector<std::string>* log) const {
  auto m = raw_.clone();
  if (!m) return m.error();
  if (layout != transforms::Layout::raw) {
    transforms::GenAIOptions g;
    g.sliding_window = hp_.n_swa;
    if (auto s = transforms::to_layout(*m, layout, g, {}, log); !s) return s.error();
  }
  if (auto s = transforms::fuse_for_execution(*m, log); !s) return s.error();
  return m;
}

}  // namespace ggflow::runtime
