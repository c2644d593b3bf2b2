#include "runtime/model_file.h"

#include "frontend/translate.h"

namespace ggflow::runtime {

Result<std::shared_ptr<const ModelFile>> ModelFile::open(const std::string& path, const builder::BuildOptions& opt) {
  auto f = gguf::File::open(path);
  if (!f) return f.error();
  std::shared_ptr<ModelFile> m(new ModelFile(std::move(*f)));
  m->opt_ = opt;
  auto built = builder::build(m->file_, opt);
  if (!built) return built.error();
  auto raw = frontend::translate(built->graph);
  if (!raw) return raw.error();
  m->hp_ = built->hp;
  m->raw_ = std::move(*raw);
  return std::shared_ptr<const ModelFile>(std::move(m));
}

Result<ir::Model> ModelFile::layout_model(transforms::Layout layout, std::vector<std::string>* log) const {
  auto m = raw_.clone();
  if (!m) return m.error();
  if (layout == transforms::Layout::raw) return m;
  transforms::GenAIOptions g;
  g.sliding_window = hp_.n_swa;
  if (auto s = transforms::to_layout(*m, layout, g, {}, log); !s) return s.error();
  return m;
}

}  // namespace ggflow::runtime
