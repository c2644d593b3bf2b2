// `ggflow inspect FILE [--json] [--tensors]`: what a GGUF file holds, without loading weights.
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "builder/hparams.h"
#include "gguf/file.h"

namespace ggflow::cli {
namespace cmd_inspect {

using gguf::File;
using gguf::Value;
using gguf::ValueType;
using nlohmann::json;

json to_json(const Value& v, size_t max_items) {
  switch (v.type) {
    case ValueType::BOOL: return v.u != 0;
    case ValueType::FLOAT32: return static_cast<float>(v.f);
    case ValueType::FLOAT64: return v.f;
    case ValueType::STRING: return std::string(v.s);
    case ValueType::INT8: case ValueType::INT16: case ValueType::INT32: case ValueType::INT64: return v.i;
    case ValueType::ARRAY: return json{{"type", gguf::value_type_name(v.arr->elem)}, {"length", v.arr->size},
                                       {"preview", v.to_string(max_items)}};
    default: return v.u;
  }
}

std::string shape_str(const std::vector<uint64_t>& ne) {
  std::string s = "[";
  for (size_t k = 0; k < ne.size(); ++k) s += (k ? ", " : "") + std::to_string(ne[k]);
  return s + "]";
}

struct Summary {
  nlohmann::ordered_json tokenizer = nlohmann::ordered_json::object();
  std::map<std::string, std::pair<uint64_t, uint64_t>> by_type;  // type -> (tensors, bytes)
  uint64_t total_bytes = 0;
};

Summary summarize(const File& f) {
  Summary s;
  auto str = [&](const char* k) -> json { auto r = f.get<std::string>(k); return r ? json(*r) : json(nullptr); };
  auto u = [&](const char* k) -> json { auto r = f.get<int64_t>(k); return r ? json(*r) : json(nullptr); };
  s.tokenizer["model"] = str("tokenizer.ggml.model");
  s.tokenizer["pre"] = str("tokenizer.ggml.pre");
  const Value* toks = f.find("tokenizer.ggml.tokens");
  s.tokenizer["vocab_size"] = toks && toks->type == ValueType::ARRAY ? json(toks->arr->size) : json(nullptr);
  const Value* merges = f.find("tokenizer.ggml.merges");
  s.tokenizer["merges"] = merges && merges->type == ValueType::ARRAY ? json(merges->arr->size) : json(nullptr);
  for (const char* id : {"bos", "eos", "eot", "eom", "unknown", "padding", "sep", "mask"})
    s.tokenizer[std::string(id) + "_id"] = u(fmt::format("tokenizer.ggml.{}_token_id", id).c_str());
  s.tokenizer["chat_template"] = f.has("tokenizer.chat_template");
  for (const auto& t : f.tensors()) {
    auto& [n, b] = s.by_type[std::string(gguf::traits(t.type).name)];
    ++n;
    b += t.n_bytes;
    s.total_bytes += t.n_bytes;
  }
  return s;
}

std::string human_bytes(uint64_t b) {
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", b / double(1ull << 30));
  if (b >= (1ull << 20)) return fmt::format("{:.2f} MiB", b / double(1ull << 20));
  if (b >= (1ull << 10)) return fmt::format("{:.2f} KiB", b / double(1ull << 10));
  return fmt::format("{} B", b);
}

void print_text(const File& f, bool tensors) {
  const Summary s = summarize(f);
  const std::string arch(f.architecture());
  fmt::print("file:          {}\n", f.path());
  fmt::print("gguf version:  {}\n", f.version());
  fmt::print("architecture:  {}\n", arch.empty() ? "(none)" : arch);
  if (auto name = f.get<std::string>("general.name")) fmt::print("name:          {}\n", *name);
  fmt::print("metadata keys: {}\n", f.metadata().size());
  fmt::print("alignment:     {}\n", f.alignment());
  fmt::print("data offset:   {}\n", f.data_offset());
  if (!arch.empty()) {
    fmt::print("\nhyper-parameters ({}.*):\n", arch);
    for (const auto& kv : f.metadata())
      if (kv.key.starts_with(arch + "."))
        fmt::print("  {:<44} {}\n", kv.key.substr(arch.size() + 1), kv.value.to_string(6));
  }
  fmt::print("\ntokenizer:\n");
  for (const auto& [k, v] : s.tokenizer.items())
    if (!v.is_null()) fmt::print("  {:<14} {}\n", k, v.is_string() ? v.get<std::string>() : v.dump());
  fmt::print("\ntensors: {} ({})\n", f.tensors().size(), human_bytes(s.total_bytes));
  for (const auto& [type, nb] : s.by_type)
    fmt::print("  {:<8} {:>5} tensors  {:>12}\n", type, nb.first, human_bytes(nb.second));
  if (tensors) {
    fmt::print("\n{:<48} {:<8} {:<28} {}\n", "name", "type", "ne (GGML order)", "offset");
    for (const auto& t : f.tensors())
      fmt::print("{:<48} {:<8} {:<28} {}\n", t.name, gguf::traits(t.type).name, shape_str(t.ne), t.offset);
  }
}

void print_json(const File& f, bool tensors) {
  const Summary s = summarize(f);
  json j;
  j["file"] = f.path();
  j["version"] = f.version();
  j["architecture"] = std::string(f.architecture());
  j["alignment"] = f.alignment();
  j["data_offset"] = f.data_offset();
  json meta = json::object();
  for (const auto& kv : f.metadata()) meta[std::string(kv.key)] = to_json(kv.value, 8);
  j["metadata"] = meta;
  j["tokenizer"] = s.tokenizer;
  j["tensor_count"] = f.tensors().size();
  j["total_bytes"] = s.total_bytes;
  for (const auto& [type, nb] : s.by_type) j["by_type"][type] = {{"tensors", nb.first}, {"bytes", nb.second}};
  if (tensors) {
    j["tensors"] = json::array();
    for (const auto& t : f.tensors())
      j["tensors"].push_back({{"name", std::string(t.name)}, {"type", std::string(gguf::traits(t.type).name)},
                              {"ne", t.ne}, {"offset", t.offset}, {"bytes", t.n_bytes}});
  }
  fmt::print("{}\n", j.dump(2, ' ', false, json::error_handler_t::replace));
}

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("inspect", "Describe a GGUF file: metadata, hyper-parameters, tokenizer, tensors");
  auto path = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false);
  auto tensors = std::make_shared<bool>(false);
  auto archs = std::make_shared<bool>(false);
  cmd->add_option("file", *path, "the .gguf file");
  cmd->add_flag("--architectures", *archs, "print the supported architectures (the README's table) instead");
  cmd->add_flag("--json", *as_json, "print JSON instead of text");
  cmd->add_flag("--tensors", *tensors, "list every tensor (name, type, shape, offset)");
  cmd->callback([path, as_json, tensors, archs, &rc] {
    if (*archs) {
      fmt::print("{}", builder::architectures_markdown());
      return;
    }
    if (path->empty()) {
      rc = fail("inspect", make_error("no file given", "ggflow inspect FILE.gguf, or ggflow inspect --architectures"));
      return;
    }
    auto f = File::open(*path);
    if (!f) { rc = fail("inspect", f.error()); return; }
    if (*as_json) print_json(*f, *tensors);
    else print_text(*f, *tensors);
  });
}

}  // namespace cmd_inspect

GGFLOW_COMMAND(inspect, cmd_inspect::add);

}  // namespace ggflow::cli
