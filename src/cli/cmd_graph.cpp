// `ggflow graph`: a model's graph in one of its three layouts (DESIGN.md section 3).
//
//   ggflow graph -m FILE [--layout raw|sdpa|paged] [--format text|dot] [--passes]
//       the whole graph (text: one line per node; dot: Graphviz), after the layout's passes;
//       --passes prints the passes' logs on stderr
//   ggflow graph -m FILE --key-shapes [--label NAME]
//       the shapes of the key tensors in every layout, as a Markdown table (docs/LAYOUTS.md)
#include <cstdio>

#include "builder/build.h"
#include "cli/commands.h"
#include "ir/printer.h"
#include "runtime/model_file.h"

namespace ggflow::cli {
namespace cmd_graph {

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("graph", "Print a model's graph in the raw, SDPA or PagedAttention layout");
  struct Opts {
    std::string model, layout = "raw", format = "text", label;
    bool passes = false, key_shapes = false, no_fa = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "the .gguf file")->required();
  cmd->add_option("--layout", o->layout, "raw | sdpa | paged")->check(CLI::IsMember({"raw", "sdpa", "paged"}));
  cmd->add_option("--format", o->format, "text | dot")->check(CLI::IsMember({"text", "dot"}));
  cmd->add_flag("--passes", o->passes, "print the passes' logs on stderr");
  cmd->add_flag("--key-shapes", o->key_shapes, "a Markdown table of the key tensors' shapes in every layout");
  cmd->add_option("--label", o->label, "the table's title (default: the file name)");
  cmd->add_flag("--no-flash-attn", o->no_fa, "raw layout with MUL_MAT + SOFT_MAX attention (no SDPA/paged)");
  cmd->callback([o, &rc] {
    auto file = runtime::ModelFile::open(o->model, builder::BuildOptions{.flash_attn = !o->no_fa});
    if (!file) { rc = fail("graph", file.error()); return; }
    if (o->key_shapes) {
      std::vector<std::pair<transforms::Layout, ir::Model>> models;
      for (auto l : {transforms::Layout::raw, transforms::Layout::sdpa, transforms::Layout::paged}) {
        auto m = (*file)->layout_model(l);
        if (!m) { rc = fail("graph", m.error()); return; }
        models.emplace_back(l, std::move(*m));
      }
      std::string label = o->label.empty() ? o->model.substr(o->model.find_last_of('/') + 1) : o->label;
      std::printf("%s", transforms::key_shapes_markdown(label, models).c_str());
      return;
    }
    std::vector<std::string> log;
    auto m = (*file)->layout_model(*transforms::layout_from_name(o->layout), &log);
    if (o->passes)
      for (const auto& l : log) std::fprintf(stderr, "%s\n", l.c_str());
    if (!m) { rc = fail("graph", m.error()); return; }
    ir::PrintOptions po;
    po.constants_values = false;
    std::string s = o->format == "dot" ? ir::to_dot(*m, po) : ir::to_text(*m, po);
    std::fwrite(s.data(), 1, s.size(), stdout);
  });
}

}  // namespace cmd_graph

GGFLOW_COMMAND(graph, cmd_graph::add);

}  // namespace ggflow::cli
