// `ggflow bench` with --draft-model / --lookup: speculative decoding on a prompt set.
//
// The prompt file is a JSON array of {"name": ..., "content": ...} user messages (the model's chat
// template wraps each). One pipeline serves both modes: each repetition runs every prompt
// greedily for -n tokens without speculation, then with it (alternating, so both see the same
// moments of a noisy host), and checks that the two texts are identical. Reported per mode:
// decode tokens/s (generated tokens after the first / their time, summed over the prompts), and for
// speculation the acceptance rate and the tokens per target step.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/bench_spec.h"
#include "cpu/host.h"
#include "pipeline/continuous_batching.h"

namespace ggflow::cli {

namespace cmd_bench_spec {

struct Prompt {
  std::string name, content;
};

Result<std::vector<Prompt>> read_prompts(const std::string& path) {
  const std::string hint = "a JSON array of {\"name\": ..., \"content\": ...} (bench/spec_prompts.json)";
  if (path.empty()) return make_error("speculative benchmarks need a prompt set", "pass --prompts FILE: " + hint);
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read '" + path + "'", "check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (!j.is_array() || j.empty()) return make_error(path + " is not a non-empty JSON array", hint);
  std::vector<Prompt> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("content") || !e["content"].is_string())
      return make_error(path + ": an entry has no string \"content\"", hint);
    out.push_back({e.value("name", "prompt " + std::to_string(out.size())), e["content"].get<std::string>()});
  }
  return out;
}

struct Mode {
  std::string name;
  double tokens = 0, seconds = 0;  // decode: generated tokens after the first, and their time
  int64_t drafts = 0, accepted = 0, steps = 0, generated = 0;
  std::vector<double> ts;          // per repetition
};

}  // namespace cmd_bench_spec

Status bench_speculative(const SpecBenchOptions& o) {
  using namespace cmd_bench_spec;
  auto prompts = read_prompts(o.prompts);
  if (!prompts) return prompts.error();
  if (o.n < 2 || o.reps < 1) return make_error("-n must be >= 2 and -r >= 1 for a speculative benchmark");
  auto kv_type = builder::kv_type_from_name(o.kv_type);
  if (!kv_type) return kv_type.error();
  auto file = runtime::ModelFile::open(o.model, builder::BuildOptions{.kv_type = *kv_type});
  if (!file) return file.error();
  serving::EngineConfig cfg;
  cfg.num_blocks = 256;  // 8192 tokens: every prompt and its answer
  runtime::CompileOptions co;
  co.threads = o.threads;
  auto pipe = pipeline::ContinuousBatchingPipeline::open(**file, cfg, co, o.spec);
  if (!pipe) return pipe.error();
  pipeline::ContinuousBatchingPipeline& p = **pipe;
  const std::string proposer = p.proposer()->name();
  std::vector<Mode> modes = {{"plain"}, {proposer}};
  text::SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = o.n;
  std::vector<std::string> first_text(prompts->size());
  for (int k = 0; k <= o.reps; ++k) {  // k == 0: warm-up
    for (Mode& m : modes) m.tokens = m.seconds = 0;
    for (size_t i = 0; i < prompts->size(); ++i)
      for (size_t mi = 0; mi < modes.size(); ++mi) {
        Mode& m = modes[mi];
        p.set_speculation(mi == 1);
        std::fprintf(stderr, "ggflow bench: %s, %s %s %d/%d\n", (*prompts)[i].name.c_str(), m.name.c_str(),
                     k ? "run" : "warm-up", k, o.reps);
        auto msgs = nlohmann::ordered_json::array({{{"role", "user"}, {"content", (*prompts)[i].content}}});
        const int64_t steps0 = p.engine().num_steps();
        auto id = p.add_chat_request(msgs, sp);
        if (!id) return id.error();
        if (auto s = p.run_until_done(); !s) return s;
        auto r = p.result(*id);
        if (!r) return r.error();
        auto out = p.engine().output(*id);
        p.release(*id);
        if (first_text[i].empty()) first_text[i] = r->text;
        if (r->text != first_text[i])
          return make_error("'" + (*prompts)[i].name + "': the " + m.name + " answer differs from the plain one",
                            "speculative decoding must not change greedy output: this is a bug");
        const double gen = double(r->usage.completion_tokens);
        if (gen < 2) continue;
        m.tokens += gen - 1;
        m.seconds += r->timing.time_per_output_token_s * (gen - 1);
        if (k) {
          m.drafts += out->usage.spec.draft_tokens, m.accepted += out->usage.spec.accepted_tokens;
          m.generated += int64_t(gen);
          m.steps += p.engine().num_steps() - steps0;
        }
      }
    if (k)
      for (Mode& m : modes) m.ts.push_back(m.seconds > 0 ? m.tokens / m.seconds : 0);
  }
  p.set_speculation(true);
  auto avg = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / double(v.size());
  };
  auto sd = [&](const std::vector<double>& v) {
    if (v.size() < 2) return 0.0;
    const double m = avg(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / double(v.size() - 1));
  };
  const int threads = o.threads > 0 ? o.threads : cpu::usable_cores();
  const std::string name = o.model.substr(o.model.find_last_of('/') + 1);
  const std::string test = "tg" + std::to_string(o.n) + " x" + std::to_string(prompts->size()) + " prompts";
  if (o.json) {
    auto arr = nlohmann::ordered_json::array();
    for (const Mode& m : modes)
      arr.push_back({{"model_filename", o.model}, {"n_threads", threads}, {"test", test}, {"mode", m.name},
                     {"draft_model", o.spec.draft_model}, {"avg_ts", avg(m.ts)}, {"stddev_ts", sd(m.ts)},
                     {"samples_ts", m.ts}, {"draft_tokens", m.drafts}, {"accepted_tokens", m.accepted},
                     {"tokens_per_step", m.steps ? double(m.generated) / double(m.steps) : 0.0}});
    std::printf("%s\n", arr.dump(2).c_str());
    return {};
  }
  std::printf("| model | threads | test | mode | t/s | accepted | tokens/step |\n|---|---:|---|---|---:|---:|---:|\n");
  for (const Mode& m : modes)
    std::printf("| %s | %d | %s | %s | %.2f ± %.2f | %s | %.2f |\n", name.c_str(), threads, test.c_str(), m.name.c_str(),
                avg(m.ts), sd(m.ts),
                m.drafts ? (std::to_string(int(std::lround(100.0 * double(m.accepted) / double(m.drafts)))) + "%").c_str() : "-",
                m.steps ? double(m.generated) / double(m.steps) : 0.0);
  std::printf("speedup %s / plain: %.2fx\n", proposer.c_str(), avg(modes[1].ts) / std::max(1e-9, avg(modes[0].ts)));
  return {};
}

}  // namespace ggflow::cli
