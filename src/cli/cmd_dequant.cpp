// `ggflow dequant FILE [--tensor NAME]`: write tensors as raw little-endian f32 to stdout, in
// file order, with the reference dequantizer. Test tooling: python/check_dequant.py compares the
// stream with the gguf package's dequantization.
#include <cstdio>
#include <vector>

#include "cli/commands.h"
#include "gguf/dequant.h"
#include "gguf/file.h"

namespace ggflow::cli {
namespace cmd_dequant {

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("dequant", "Write tensors dequantized to f32 (raw, file order) to stdout");
  auto path = std::make_shared<std::string>();
  auto only = std::make_shared<std::string>();
  cmd->add_option("file", *path, "the .gguf file")->required();
  cmd->add_option("--tensor", *only, "only this tensor");
  cmd->callback([path, only, &rc] {
    auto f = gguf::File::open(*path);
    if (!f) { rc = fail("dequant", f.error()); return; }
    std::vector<float> buf;
    bool found = only->empty();
    for (const auto& t : f->tensors()) {
      if (!only->empty() && t.name != *only) continue;
      found = true;
      if (!gguf::can_dequantize(t.type)) continue;  // the checker skips the same types
      buf.resize(t.n_elements);
      if (auto s = gguf::dequantize(t.type, f->tensor_data(t), t.n_elements, buf.data()); !s) {
        rc = fail("dequant", s.error());
        return;
      }
      if (std::fwrite(buf.data(), sizeof(float), buf.size(), stdout) != buf.size()) {
        rc = fail("dequant", make_error("short write to stdout"));
        return;
      }
    }
    if (!found) rc = fail("dequant", make_error("no tensor named '" + *only + "'", "see `ggflow inspect --tensors`"));
  });
}

}  // namespace cmd_dequant

GGFLOW_COMMAND(dequant, cmd_dequant::add);

}  // namespace ggflow::cli
