// `ggflow dequant FILE [--tensor NAME] [--to q4_0]`: write tensors as raw little-endian f32
// to stdout, in file order, with the reference dequantizer; with --to, each tensor whose rows are
// whole 32-value blocks requantized to that type instead (gguf/quantize.h: the bytes of a draft
// model's matrices under --draft-quant). Test tooling: python/check_dequant.py compares the
// stream with the gguf package's dequantization (and quantization).
#include <cstdio>
#include <optional>
#include <vector>

#include "cli/commands.h"
#include "gguf/dequant.h"
#include "gguf/file.h"
#include "gguf/quantize.h"

namespace ggflow::cli {
namespace cmd_dequant {

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("dequant", "Write tensors dequantized to f32 (raw, file order) to stdout");
  auto path = std::make_shared<std::string>();
  auto only = std::make_shared<std::string>();
  cmd->add_option("file", *path, "the .gguf file")->required();
  auto to = std::make_shared<std::string>();
  cmd->add_option("--tensor", *only, "only this tensor");
  cmd->add_option("--to", *to, "requantize to this type (q4_0) instead; tensors whose rows are not whole 32-value blocks are skipped");
  cmd->callback([path, only, to, &rc] {
    auto f = gguf::File::open(*path);
    if (!f) { rc = fail("dequant", f.error()); return; }
    std::optional<gguf::GgmlType> to_type;
    if (!to->empty()) {
      if (*to != "q4_0") { rc = fail("dequant", make_error("--to " + *to + " is not a type ggflow requantizes to", "use q4_0")); return; }
      to_type = gguf::GgmlType::Q4_0;
    }
    std::vector<float> buf;
    bool found = only->empty();
    for (const auto& t : f->tensors()) {
      if (!only->empty() && t.name != *only) continue;
      found = true;
      if (!gguf::can_dequantize(t.type)) continue;  // the checker skips the same types
      if (to_type) {
        if (t.ne.empty() || t.ne[0] % 32 != 0) continue;  // the checker skips the same tensors
        auto q = gguf::requantize(t.type, f->tensor_data(t), t.n_elements, *to_type);
        if (!q) { rc = fail("dequant", q.error()); return; }
        if (std::fwrite(q->data(), 1, q->size(), stdout) != q->size()) {
          rc = fail("dequant", make_error("short write to stdout"));
          return;
        }
        continue;
      }
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
