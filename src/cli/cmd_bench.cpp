// `ggflow bench`: prompt-processing and generation speed, in the manner of llama-bench.
//
//   ggflow bench -m FILE [-p 512] [-n 128] [-t 2] [-r 3] [--engine paged|sdpa|raw]
//                [--executor cpu|ref] [--batch 1,2,4,8] [--kv-type f32|f16|q8_0] [-d 4096] [--json]
//   ggflow bench -m FILE (--draft-model F | --lookup N) [--spec-tokens K] --prompts FILE [-n 128]
//                single-stream greedy decode on a prompt set, plain and speculative alternating
//                (cmd_bench_spec.cpp)
//
// Tests (each repeated -r times after one warm-up run, on a fresh sequence each time):
//   pp<P>      one step of P prompt tokens (prefill); tokens/s = P / time
//   tg<N>      N steps of one token each from an empty context (llama-bench feeds the BOS token
//              every step; so does this); tokens/s = N / time
//   ... @ d<D> with -d D: pp and tg after D tokens of context (prefilled untimed, in steps of 512
//              tokens), as llama-bench's -d (n_depth): attention over a long cache
//   tg<N> xB   the paged engine only: B sequences decoding together, one token each per step, N
//              steps after a one-token prompt each; aggregate tokens/s = B * N / time. The batch
//              sizes run on one runner and alternate repetition by repetition
// The table has llama-bench's columns; --json prints one record per test with llama-bench's
// field names (n_prompt, n_gen, n_threads, avg_ts, stddev_ts, samples_ts) plus n_seq. Progress on
// stderr.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/bench_spec.h"
#include "cpu/host.h"
#include "cli/commands.h"
#include "runtime/paged_runner.h"
#include "runtime/sequence_runner.h"

namespace ggflow::cli {
namespace cmd_bench {

using Clock = std::chrono::steady_clock;

struct Opts {
  std::string model, engine = "paged", executor = "cpu", batch, kv_type = "f32";
  int p = 512, n = 128, threads = 0, reps = 3, depth = 0;
  bool json = false;
  std::string prompts;
  pipeline::SpeculativeOptions spec;
};

struct Record {
  std::string test;
  int64_t n_prompt = 0, n_gen = 0, n_seq = 1;
  std::vector<double> ts;  // tokens/s per repetition
  double avg() const {
    double s = 0;
    for (double x : ts) s += x;
    return ts.empty() ? 0 : s / static_cast<double>(ts.size());
  }
  double stddev() const {
    if (ts.size() < 2) return 0;
    double m = avg(), s = 0;
    for (double x : ts) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(ts.size() - 1));
  }
};

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Prompt tokens: a fixed pseudo-random sequence inside the vocabulary (content does not change the work).
std::vector<int32_t> prompt_tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (auto& v : t) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    v = static_cast<int32_t>(x % static_cast<uint64_t>(vocab));
  }
  return t;
}

Result<std::vector<int64_t>> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long long x = std::stoll(item, &used);
      if (used != item.size() || x < 1 || x > 256) throw std::invalid_argument(item);
      v.push_back(x);
    } catch (const std::exception&) {
      return make_error("--batch: '" + item + "' is not a sequence count in [1, 256]", "write counts as 1,2,4,8");
    }
  }
  return v;
}

Status bench(const Opts& o) {
  auto executor = runtime::executor_from_name(o.executor);
  if (!executor) return executor.error();
  auto layout = transforms::layout_from_name(o.engine);
  if (!layout) return make_error("--engine '" + o.engine + "' is not a layout", "use paged, sdpa or raw");
  if (o.p < 0 || o.n < 0 || o.reps < 1 || o.depth < 0) return make_error("-p, -n and -d must be >= 0 and -r >= 1");
  if (o.depth > 0 && !o.batch.empty())
    return make_error("--batch with -d is not supported", "run the batched decode without -d");
  std::vector<int64_t> batches;
  if (!o.batch.empty()) {
    auto b = parse_list(o.batch);
    if (!b) return b.error();
    batches = *b;
    if (*layout != transforms::Layout::paged) return make_error("--batch needs the paged engine", "drop --engine or use paged");
  }
  auto kv_type = builder::kv_type_from_name(o.kv_type);
  if (!kv_type) return kv_type.error();
  auto file = runtime::ModelFile::open(o.model, builder::BuildOptions{.kv_type = *kv_type});
  if (!file) return file.error();
  const runtime::ModelFile& mf = **file;
  runtime::RunnerOptions ro;
  ro.compile.executor = *executor;
  ro.compile.threads = o.threads;
  ro.n_ctx = std::max<int64_t>(mf.n_ctx_train(), int64_t{o.depth} + o.p + o.n + 1);
  auto runner = runtime::open_sequence_runner(mf, *layout, ro);
  if (!runner) return runner.error();
  runtime::SequenceRunner& r = **runner;
  const std::string backend = r.compiled().describe();
  const int threads = o.threads > 0 ? o.threads : cpu::usable_cores();
  std::vector<Record> records;
  const int32_t bos = [&] {
    auto b = mf.file().get<int64_t>("tokenizer.ggml.bos_token_id");
    return b && *b >= 0 && *b < mf.n_vocab() ? static_cast<int32_t>(*b) : 0;
  }();

  // A fresh sequence holding the -d context tokens (not timed).
  const auto context = prompt_tokens(o.depth, mf.n_vocab());
  const std::string at = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
  auto fresh = [&]() -> Status {
    r.reset();
    for (int64_t i = 0; i < o.depth; i += 512) {
      auto l = r.step(std::span<const int32_t>(context.data() + i, static_cast<size_t>(std::min<int64_t>(512, o.depth - i))));
      if (!l) return l.error();
    }
    return {};
  };
  // Repetition k of a test (k == 0: the warm-up, not recorded); once() returns its seconds.
  auto repetition = [&](Record& rec, int k, auto&& once) -> Status {
    std::fprintf(stderr, "ggflow bench: %s %s %d/%d\n", rec.test.c_str(), k ? "run" : "warm-up", k, o.reps);
    auto t = once();
    if (!t) return t.error();
    if (k) rec.ts.push_back(static_cast<double>(rec.n_seq * (rec.n_prompt + rec.n_gen)) / *t);
    return {};
  };
  auto timed = [&](Record& rec, auto&& once) -> Status {
    for (int k = 0; k <= o.reps; ++k)
      if (auto s = repetition(rec, k, once); !s) return s;
    return {};
  };
  if (o.p > 0) {
    Record rec{"pp" + std::to_string(o.p) + at, o.p, 0, 1, {}};
    const auto tokens = prompt_tokens(o.p, mf.n_vocab());
    auto s = timed(rec, [&]() -> Result<double> {
      if (auto f = fresh(); !f) return f.error();
      auto t0 = Clock::now();
      auto l = r.step(tokens);
      if (!l) return l.error();
      return seconds_since(t0);
    });
    if (!s) return s;
    records.push_back(rec);
  }
  if (o.n > 0) {
    Record rec{"tg" + std::to_string(o.n) + at, 0, o.n, 1, {}};
    auto s = timed(rec, [&]() -> Result<double> {
      if (auto f = fresh(); !f) return f.error();
      auto t0 = Clock::now();
      for (int i = 0; i < o.n; ++i) {
        auto l = r.step(std::span<const int32_t>(&bos, 1));
        if (!l) return l.error();
      }
      return seconds_since(t0);
    });
    if (!s) return s;
    records.push_back(rec);
  }
  // The batch sizes share one runner and alternate, repetition by repetition (a warm-up of each,
  // then x1, x2, ..., x1, x2, ...): their ratios see the same moments of a noisy host.
  if (!batches.empty()) {
    int64_t blocks = 8;
    for (int64_t B : batches) blocks += B * ((o.n + 1 + 31) / 32) * (o.reps + 1);
    auto paged = runtime::PagedRunner::create(mf, static_cast<int32_t>(blocks), ro.compile);
    if (!paged) return paged.error();
    const size_t first = records.size();
    for (int64_t B : batches) records.push_back({"tg" + std::to_string(o.n) + " x" + std::to_string(B), 0, o.n, B, {}});
    for (int k = 0; k <= o.reps; ++k)
      for (size_t j = 0; j < batches.size(); ++j) {
        const int64_t B = batches[j];
        auto s = repetition(records[first + j], k, [&]() -> Result<double> {
          std::vector<runtime::PagedRunner::Chunk> chunks;
          for (int64_t b = 0; b < B; ++b) chunks.push_back({(*paged)->add_sequence(), {bos}});
          auto l = (*paged)->step(chunks);  // the one-token prompts, not timed
          if (!l) return l.error();
          const auto t0 = Clock::now();
          for (int i = 0; i < o.n; ++i) {
            l = (*paged)->step(chunks);
            if (!l) return l.error();
          }
          return seconds_since(t0);
        });
        if (!s) return s;
      }
  }

  const std::string name = o.model.substr(o.model.find_last_of('/') + 1);
  if (o.json) {
    auto arr = nlohmann::ordered_json::array();
    for (const Record& rec : records)
      arr.push_back({{"model_filename", o.model}, {"model_type", name}, {"backends", backend}, {"n_threads", threads},
                     {"engine", o.engine}, {"test", rec.test}, {"n_prompt", rec.n_prompt}, {"n_gen", rec.n_gen},
                     {"n_seq", rec.n_seq}, {"n_depth", o.depth}, {"avg_ts", rec.avg()}, {"stddev_ts", rec.stddev()}, {"samples_ts", rec.ts}});
    std::printf("%s\n", arr.dump(2).c_str());
    return {};
  }
  std::printf("| model | backend | engine | threads | test | t/s |\n|---|---|---|---:|---:|---:|\n");
  for (const Record& rec : records)
    std::printf("| %s | %s | %s | %d | %s | %.2f ± %.2f |\n", name.c_str(), backend.c_str(), o.engine.c_str(), threads,
                rec.test.c_str(), rec.avg(), rec.stddev());
  return {};
}

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("bench", "Prompt and generation speed, in the manner of llama-bench");
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->model, "the .gguf model")->required();
  cmd->add_option("-p,--n-prompt", o->p, "prompt tokens of the pp test (0: none)")->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n, "generated tokens of the tg tests (0: none)")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "threads (default: the machine's cores)");
  cmd->add_option("-r,--repetitions", o->reps, "timed repetitions of each test")->capture_default_str();
  cmd->add_option("--engine", o->engine, "layout: paged | sdpa | raw")->capture_default_str();
  cmd->add_option("--executor", o->executor, "cpu | ref")->capture_default_str();
  cmd->add_option("-d,--n-depth", o->depth, "context tokens before each pp / tg test (llama-bench's -d)")->capture_default_str();
  cmd->add_option("--batch", o->batch, "paged: aggregate decode with B sequences together, e.g. 1,2,4,8");
  cmd->add_option("--kv-type", o->kv_type, "KV cache element type: f32 | f16 | q8_0")->capture_default_str();
  cmd->add_flag("--json", o->json, "one JSON record per test (llama-bench's field names)");
  cmd->add_option("--draft-model", o->spec.draft_model, "speculative decoding with this draft model on --prompts (plain vs speculative)");
  cmd->add_option("--lookup", o->spec.lookup, "speculative decoding with prompt lookup (n-grams of 2 to N tokens) on --prompts");
  cmd->add_option("--spec-tokens", o->spec.num_spec_tokens, "draft tokens per step at most (default: 8 draft model, 7 lookup)");
  cmd->add_option("--draft-vocab", o->spec.draft_vocab, "speculative decoding: the draft model's LM head cut to its first N rows (prompt lookup gives the ids beyond; default 0: all)");
  cmd->add_option("--draft-quant", o->spec.draft_quant, "speculative decoding: q4_0 requantizes the draft model's matrices at load (fewer bytes per draft token; answers unchanged; default: the file's types)");
  cmd->add_flag("--no-adaptive", [o](int64_t) { o->spec.adaptive = false; }, "always ask for --spec-tokens drafts");
  cmd->add_option("--prompts", o->prompts, "speculative: a JSON array of {name, content} chat prompts");
  cmd->callback([o, &rc] {
    warn_threads("bench", o->threads);
    if (o->spec.enabled()) {
      SpecBenchOptions so{o->model, o->prompts, o->kv_type, o->spec, o->n, o->threads, o->reps, o->json};
      if (auto s = bench_speculative(so); !s) rc = fail("bench", s.error());
      return;
    }
    if (auto s = bench(*o); !s) rc = fail("bench", s.error());
  });
}

}  // namespace cmd_bench

GGFLOW_COMMAND(bench, cmd_bench::add);

}  // namespace ggflow::cli
