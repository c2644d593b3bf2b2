// `ggflow chat -m FILE [--system TEXT] [-n N] [--temperature T] [--seed S]`: an interactive
// multi-turn chat in the terminal. Each line on stdin is a user turn; the answer streams to
// stdout; the conversation is rendered with the model's chat template every turn. An empty line
// is skipped; `/reset` starts over; `/exit` or end of input leaves. LLMPipeline over the SDPA model.
#include <cstdio>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "pipeline/llm_pipeline.h"
#include "runtime/memory_budget.h"

namespace ggflow::cli {
namespace cmd_chat {

struct Opts {
  std::string model, system, executor = "cpu", max_memory, kv_type = "f32";
  int threads = 0;
  int n = 256;
  double temperature = 0.7;
  int64_t seed = -1;
};

Status chat(const Opts& o) {
  auto executor = runtime::executor_from_name(o.executor);
  if (!executor) return executor.error();
  if (auto s = runtime::check_memory_budget(o.model, 0, o.max_memory); !s) return s;
  auto kv_type = builder::kv_type_from_name(o.kv_type);
  if (!kv_type) return kv_type.error();
  auto file = runtime::ModelFile::open(o.model, builder::BuildOptions{.kv_type = *kv_type});
  if (!file) return file.error();
  runtime::RunnerOptions ro;
  ro.compile.executor = *executor;
  ro.compile.threads = o.threads;
  auto pipe = pipeline::LLMPipeline::open(**file, transforms::Layout::sdpa, ro);
  if (!pipe) return pipe.error();
  text::SamplingParams sp;
  sp.temperature = o.temperature;
  sp.max_tokens = o.n;
  if (o.seed >= 0) sp.seed = static_cast<uint64_t>(o.seed);
  if (auto s = sp.validate(); !s) return s.error();
  auto fresh = [&] {
    auto m = nlohmann::ordered_json::array();
    if (!o.system.empty()) m.push_back({{"role", "system"}, {"content", o.system}});
    return m;
  };
  auto messages = fresh();
  std::string line;
  std::fprintf(stderr, "ggflow chat: type a message, /reset to start over, /exit to leave\n");
  while (std::fprintf(stderr, "> "), std::getline(std::cin, line)) {
    if (line == "/exit") break;
    if (line == "/reset") { messages = fresh(); continue; }
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    auto r = (*pipe)->chat(messages, sp, [](std::string_view t) {
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    if (!r) {
      messages.erase(messages.end() - 1);  // the turn failed: forget it, keep chatting
      std::fprintf(stderr, "ggflow chat: %s\n", r.error().str().c_str());
      continue;
    }
    std::printf("\n");
    messages.push_back({{"role", "assistant"}, {"content", r->text}});
  }
  return {};
}

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("chat", "Interactive multi-turn chat in the terminal");
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "the .gguf model")->required();
  cmd->add_option("--system", o->system, "system prompt");
  cmd->add_option("--executor", o->executor, "what runs the graph: cpu | ref (the IR reference evaluator)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "cpu executor threads (default: the machine's cores)");
  cmd->add_option("-n,--max-tokens", o->n, "tokens per answer at most")->capture_default_str();
  cmd->add_option("--temperature", o->temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--seed", o->seed, "random seed (default: random)");
  cmd->add_option("--kv-type", o->kv_type, "KV cache element type: f32 | f16 (half the memory) | q8_0 (about a quarter)")->capture_default_str();
  cmd->add_option("--max-memory", o->max_memory, "refuse a model that needs more (e.g. 8GiB; default: the memory available)");
  cmd->callback([o, &rc] {
    warn_threads("chat", o->threads);
    if (auto s = chat(*o); !s) rc = fail("chat", s.error());
  });
}

}  // namespace cmd_chat

GGFLOW_COMMAND(chat, cmd_chat::add);

}  // namespace ggflow::cli
