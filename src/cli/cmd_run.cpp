// `ggflow run`: generate from a model.
//
//   ggflow run -m FILE -p TEXT [--chat] [-n N] [--temperature T] [--top-k K] [--top-p P] [--min-p P]
//              [--repeat-penalty R] [--presence-penalty P] [--frequency-penalty F] [--seed S]
//              [--stop STR]... [--grammar F.gbnf | --json-schema F.json]
//              [--draft-model F | --lookup N] [--spec-tokens K]
//                                   text in, text streamed to stdout, statistics on stderr; the
//                                   grammar (GBNF) or JSON Schema holds the answer to its language;
//                                   speculative decoding with a draft model or prompt lookup (the
//                                   same text as without: serving/speculative.h)
//   ggflow run -m FILE (--tokens 1,2,3 | -p TEXT [--chat]) --dump-logits FILE [-n N] [--no-flash-attn]
//   ggflow run -m FILE --tokens 1,2,3 [-n N]
//              greedy on one layout, the layout-equivalence runner: ids out (comma-separated, one
//              line) for --tokens, text for -p. --dump-logits writes the logits each generated token was chosen from as raw
//              little-endian f32, [n, n_vocab].
// --engine selects the layout that runs the graph (raw: the translated GGML graph; sdpa:
// AdaptToGenAI + MakeStateful; paged: + SDPAToPagedAttention; see docs/LAYOUTS.md), --executor
// what executes it (ref: the IR reference evaluator). With -p, paged (the default) runs the
// ContinuousBatchingPipeline (scheduler, block manager, prefix cache; --kv-blocks blocks of 32
// tokens), sdpa and raw run LLMPipeline. With --tokens the three give the same ids and
// bit-identical --dump-logits files (runtime/logits_dump.h: headerless f32 [n, n_vocab], row i =
// the logits token i was chosen from; paged fills its block table itself).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "pipeline/continuous_batching.h"
#include "pipeline/llm_pipeline.h"
#include "runtime/greedy.h"
#include "runtime/logits_dump.h"
#include "runtime/memory_budget.h"
#include "serving/block_manager.h"

namespace ggflow::cli {
namespace cmd_run {

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return make_error("--tokens: '" + item + "' is not a token id", "write ids as 1,2,3");
    }
  }
  if (ids.empty()) return make_error("--tokens is empty", "write ids as 1,2,3");
  return ids;
}

struct Opts {
  std::string engine = "paged", executor = "cpu", model, tokens, prompt, dump, max_memory, kv_type = "f32";
  std::string grammar_file, schema_file;
  pipeline::Constraint constraint;  // compiled from grammar_file / schema_file
  int n = -1;
  int32_t kv_blocks = 64;
  int threads = 0;
  bool verbose = false;
  bool chat = false, no_fa = false, timing = false;
  text::SamplingParams sp;
  int64_t seed = -1;
  pipeline::SpeculativeOptions spec;
  std::vector<std::string> loras;  // --lora FILE[:SCALE], all applied
};

// Every adapter the file was opened with (ggflow run applies them all, as llama.cpp's --lora).
uint64_t all_loras(const runtime::ModelFile& file) {
  return file.n_loras() >= 64 ? ~uint64_t(0) : (uint64_t(1) << file.n_loras()) - 1;
}

// --verbose: the executor, its plan, and what ran on the reference kernel in the last step.
void report(const Opts& o, const runtime::CompiledModel* m) {
  if (!o.verbose || !m) return;
  std::fprintf(stderr, "ggflow run: executor %s; plan: %s; last step: %lld nodes on the reference kernel (%s)\n",
               m->describe().c_str(), m->plan_summary().c_str(), static_cast<long long>(m->fallbacks()),
               m->fallback_summary().c_str());
  const auto kv = m->cache_memory();
  if (kv.reserved_bytes > 0)  // the paged pool or the raw caches (sdpa's are variables)
    std::fprintf(stderr, "ggflow run: KV cache: %.1f MiB reserved, %.1f MiB resident\n", double(kv.reserved_bytes) / (1 << 20),
                 double(kv.resident_bytes) / (1 << 20));
  auto t = pipeline::mask_times_snapshot().seconds;
  if (!t.empty()) {
    std::sort(t.begin(), t.end());
    std::fprintf(stderr, "ggflow run: grammar masks: %zu, p50 %.1f us, p99 %.1f us, max %.1f us\n", t.size(),
                 t[t.size() / 2] * 1e6, t[std::min(t.size() - 1, t.size() * 99 / 100)] * 1e6, t.back() * 1e6);
  }
}

runtime::RunnerOptions runner_options(const Opts& o) {
  runtime::RunnerOptions ro;
  ro.compile.executor = *runtime::executor_from_name(o.executor);
  ro.compile.threads = o.threads;
  return ro;
}

// Greedy ids from ids on one layout. With `text_out`, the prompt came from -p: the ids are decoded
// and printed as text instead.
Status run_tokens(const Opts& o, const runtime::ModelFile& file, Result<std::vector<int32_t>> ids,
                  const text::Tokenizer* text_out = nullptr) {
  if (!ids) return ids.error();
  auto t0 = std::chrono::steady_clock::now();
  auto runner = runtime::open_sequence_runner(file, *transforms::layout_from_name(o.engine), runner_options(o));
  if (!runner) return runner.error();
  if (auto s = (*runner)->set_lora(all_loras(file)); !s) return s;
  std::vector<float> logits;
  auto out = runtime::generate_greedy(**runner, *ids, o.n < 0 ? 16 : o.n, o.dump.empty() ? nullptr : &logits);
  report(o, &(*runner)->compiled());
  if (!out) return out.error();
  std::string line;
  if (text_out) {
    auto text = text_out->decode(*out);
    if (!text) return text.error();
    line = *text;
  } else {
    for (size_t i = 0; i < out->size(); ++i) line += (i ? "," : "") + std::to_string((*out)[i]);
  }
  std::printf("%s\n", line.c_str());
  if (!o.dump.empty())
    if (auto s = runtime::write_logits_dump(o.dump, logits); !s) return s;
  if (o.timing)
    std::fprintf(stderr, "ggflow run: %.2f s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return {};
}

bool print_text(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  return true;
}

// One request through the continuous-batching pipeline over the paged model.
// `note`: a statistics line about speculative decoding, printed after the answer.
Result<pipeline::GenerationResult> run_paged(const Opts& o, const runtime::ModelFile& file,
                                            const nlohmann::ordered_json& messages, std::string& note) {
  const auto& hp = file.hparams();
  const int64_t kv = int64_t(o.kv_blocks) * serving::BlockManager::kv_bytes_per_block(hp.kv_elems_per_token(), file.kv_type());
  if (auto s = runtime::check_memory_budget(file.path(), kv, o.max_memory); !s) return s.error();
  serving::EngineConfig cfg;
  cfg.num_blocks = o.kv_blocks;
  auto pipe = pipeline::ContinuousBatchingPipeline::open(file, cfg, runner_options(o).compile, o.spec);
  if (!pipe) return pipe.error();
  auto stream = [](pipeline::RequestId, std::string_view t) { return print_text(t); };
  auto id = o.chat ? (*pipe)->add_chat_request(messages, o.sp, stream, o.constraint, all_loras(file))
                   : (*pipe)->add_request(o.prompt, o.sp, stream, o.constraint, all_loras(file));
  if (!id) return id.error();
  if (auto s = (*pipe)->run_until_done(); !s) return s.error();
  report(o, (*pipe)->compiled_model());
  if (const auto* proposer = (*pipe)->proposer(); proposer && (*pipe)->engine().output(*id)) {
    const auto u = (*pipe)->engine().output(*id)->usage;
    char line[256];
    std::snprintf(line, sizeof line, "ggflow run: speculative (%s): %lld of %lld draft tokens accepted (%.0f%%), %.2f tokens per target step\n",
                  proposer->name().c_str(), static_cast<long long>(u.spec.accepted_tokens),
                  static_cast<long long>(u.spec.draft_tokens),
                  u.spec.draft_tokens ? 100.0 * double(u.spec.accepted_tokens) / double(u.spec.draft_tokens) : 0.0,
                  double(u.completion_tokens) / double(std::max<int64_t>(1, (*pipe)->engine().num_steps())));
    note = line;
  }
  return (*pipe)->result(*id);
}

Result<pipeline::GenerationResult> run_single(const Opts& o, const runtime::ModelFile& file,
                                             const nlohmann::ordered_json& messages) {
  auto pipe = pipeline::LLMPipeline::open(file, *transforms::layout_from_name(o.engine), runner_options(o));
  if (!pipe) return pipe.error();
  if (auto s = (*pipe)->runner().set_lora(all_loras(file)); !s) return s.error();
  auto r = o.chat ? (*pipe)->chat(messages, o.sp, print_text, o.constraint)
                  : (*pipe)->generate(o.prompt, o.sp, print_text, o.constraint);
  report(o, &(*pipe)->runner().compiled());
  return r;
}

// --grammar / --json-schema: the file read and compiled (errors name the file).
Result<pipeline::Constraint> load_constraint(const Opts& o) {
  pipeline::Constraint c;
  const std::string& path = o.grammar_file.empty() ? o.schema_file : o.grammar_file;
  if (path.empty()) return c;
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot read '" + path + "'", "check the path");
  std::stringstream ss;
  ss << in.rdbuf();
  if (!o.grammar_file.empty()) {
    auto g = grammar::parse_gbnf(ss.str());
    if (!g) return make_error(path + ": " + g.error().str(), g.error().hint);
    c.grammar = *g;
    return c;
  }
  auto schema = grammar::Json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return make_error(path + " is not valid JSON", "write a JSON Schema object");
  auto g = grammar::compile_json_schema(schema);
  if (!g) return make_error(path + ": " + g.error().str(), g.error().hint);
  c.grammar = *g;
  return c;
}

Status run_text(Opts o, const runtime::ModelFile& file) {
  o.sp.max_tokens = o.n < 0 ? 256 : o.n;
  if (o.seed >= 0) o.sp.seed = static_cast<uint64_t>(o.seed);
  const auto messages = nlohmann::ordered_json::array({{{"role", "user"}, {"content", o.prompt}}});
  std::string note;
  auto res = o.engine == "paged" ? run_paged(o, file, messages, note) : run_single(o, file, messages);
  if (!res) return res.error();
  // On a terminal the statistics start on a line of their own; in a pipe stdout is exactly the
  // answer. Flushed before stderr is written, so `2>&1` keeps the order too.
  if (isatty(fileno(stdout))) std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fputs(note.c_str(), stderr);
  const auto& u = res->usage;
  const auto& t = res->timing;
  std::fprintf(stderr, "ggflow run: %lld prompt tokens, %lld generated (%s); time to first token %.2f s, %.2f tokens/s\n",
               static_cast<long long>(u.prompt_tokens), static_cast<long long>(u.completion_tokens),
               text::to_string(res->finish), t.time_to_first_token_s,
               t.time_per_output_token_s > 0 ? 1.0 / t.time_per_output_token_s : 0.0);
  return {};
}

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("run", "Generate text (or token ids) from a model");
  auto o = std::make_shared<Opts>();
  cmd->add_option("--engine", o->engine, "layout that runs the graph: paged (continuous batching) | sdpa | raw")
      ->check(CLI::IsMember({"raw", "sdpa", "paged"}))
      ->capture_default_str();
  cmd->add_option("--executor", o->executor, "what executes the graph: cpu (SIMD kernels, threads) | ref (the IR reference evaluator)")
      ->check(CLI::IsMember({"cpu", "ref"}))
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "cpu executor threads (default: the machine's cores)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--verbose", o->verbose, "print the executor and what ran on the reference kernel (fallbacks) on stderr");
  cmd->add_option("--max-memory", o->max_memory, "refuse a model (+ paged KV cache) that needs more (e.g. 8GiB; default: the memory available)");
  cmd->add_option("--kv-blocks", o->kv_blocks, "paged: KV cache blocks of 32 tokens")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--kv-type", o->kv_type, "KV cache element type: f32 | f16 (half the memory) | q8_0 (about a quarter)")->capture_default_str();
  cmd->add_option("-m,--model", o->model, "the .gguf model")->required();
  cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  cmd->add_flag("--chat", o->chat, "wrap the prompt in the model's chat template as a user message");
  cmd->add_option("--tokens", o->tokens, "prompt token ids, comma-separated (greedy ids out)");
  cmd->add_option("-n,--max-tokens", o->n, "tokens to generate (default: 256 for text, 16 for --tokens)");
  cmd->add_option("--temperature", o->sp.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("--top-k", o->sp.top_k, "0 = off");
  cmd->add_option("--top-p", o->sp.top_p, "1 = off");
  cmd->add_option("--min-p", o->sp.min_p, "0 = off");
  cmd->add_option("--repeat-penalty", o->sp.repetition_penalty, "1 = off");
  cmd->add_option("--presence-penalty", o->sp.presence_penalty, "0 = off");
  cmd->add_option("--frequency-penalty", o->sp.frequency_penalty, "0 = off");
  cmd->add_option("--seed", o->seed, "random seed (default: random)");
  cmd->add_option("--stop", o->sp.stop, "stop string (repeatable); never printed");
  auto* gopt = cmd->add_option("--grammar", o->grammar_file, "a GBNF grammar file (llama.cpp's syntax): the answer is a sentence of it");
  cmd->add_option("--json-schema", o->schema_file, "a JSON Schema file: the answer is a JSON document it validates")->excludes(gopt);
  cmd->add_option("--draft-model", o->spec.draft_model, "speculative decoding: a smaller model with the same vocabulary proposes tokens (paged)");
  cmd->add_option("--lookup", o->spec.lookup, "speculative decoding: prompt lookup with n-grams of 2 to N tokens (paged; 3 is typical)");
  cmd->add_option("--spec-tokens", o->spec.num_spec_tokens, "speculative decoding: draft tokens per step at most (default: 8 draft model, 7 lookup)");
  cmd->add_option("--draft-vocab", o->spec.draft_vocab, "speculative decoding: the draft model's LM head cut to its first N rows (prompt lookup gives the ids beyond; default 0: all)");
  cmd->add_option("--draft-quant", o->spec.draft_quant, "speculative decoding: q4_0 requantizes the draft model's matrices at load (fewer bytes per draft token; answers unchanged; default: the file's types)");
  cmd->add_option("--dump-logits", o->dump, "greedy: write the logits of each generated token (raw f32 [n, n_vocab])");
  cmd->add_flag("--no-flash-attn", o->no_fa, "with --tokens: attention as MUL_MAT + SOFT_MAX instead of FLASH_ATTN_EXT");
  cmd->add_flag("--timing", o->timing, "with --tokens: print the time taken on stderr");
  cmd->add_option("--lora", o->loras, "a LoRA adapter (llama.cpp's GGUF adapter format) as FILE or FILE:SCALE (default scale 1); repeatable, all applied unmerged");
  cmd->callback([o, &rc] {
    warn_threads("run", o->threads);
    if (o->prompt.empty() == o->tokens.empty()) {
      rc = fail("run", make_error(o->prompt.empty() ? "no prompt" : "both -p and --tokens given",
                                  "pass either -p TEXT or --tokens 1,2,3"));
      return;
    }
    if (auto s = runtime::check_memory_budget(o->model, 0, o->max_memory); !s) {
      rc = fail("run", s.error());
      return;
    }
    // The file is opened once: the tokenizer and every layout's model come from this mapping.
    // n_ctx: the paged pool's tokens, the longest context a request can reach (phi3 LongRoPE's factors)
    auto kv_type = builder::kv_type_from_name(o->kv_type);
    if (!kv_type) {
      rc = fail("run", kv_type.error());
      return;
    }
    std::vector<runtime::LoraSpec> loras;
    for (const auto& arg : o->loras) {
      auto spec = runtime::parse_lora_spec(arg);
      if (!spec) {
        rc = fail("run", spec.error());
        return;
      }
      loras.push_back(*spec);
    }
    auto file = runtime::ModelFile::open(o->model, builder::BuildOptions{.flash_attn = !o->no_fa,
                                                                        .n_ctx = int64_t(o->kv_blocks) * 32,
                                                                        .kv_type = *kv_type},
                                         loras);
    if (!file) {
      rc = fail("run", file.error());
      return;
    }
    auto constraint = load_constraint(*o);
    if (!constraint) {
      rc = fail("run", constraint.error());
      return;
    }
    o->constraint = *constraint;
    if (auto sv = o->spec.validate(); !sv) {
      rc = fail("run", sv.error());
      return;
    }
    if (o->spec.enabled() && (o->engine != "paged" || !o->tokens.empty() || !o->dump.empty())) {
      rc = fail("run", make_error("speculative decoding runs in the continuous-batching pipeline",
                                  "use -p TEXT with --engine paged (the default), without --tokens / --dump-logits"));
      return;
    }
    if (o->constraint && (!o->tokens.empty() || !o->dump.empty())) {
      rc = fail("run", make_error("--grammar / --json-schema apply to text generation", "drop --tokens / --dump-logits"));
      return;
    }
    Status s;
    if (!o->tokens.empty()) {
      s = run_tokens(*o, **file, parse_ids(o->tokens));
    } else if (!o->dump.empty()) {  // -p with --dump-logits: the greedy layout runner on the prompt's ids
      auto format = pipeline::PromptFormat::from_file((*file)->file());
      if (!format) {
        rc = fail("run", format.error());
        return;
      }
      auto prompt = o->chat ? (*format)->apply_chat_template(
                                  nlohmann::ordered_json::array({{{"role", "user"}, {"content", o->prompt}}}))
                            : Result<std::string>(o->prompt);
      s = prompt ? run_tokens(*o, **file, (*format)->encode(*prompt), &(*format)->tokenizer()) : Status(prompt.error());
    } else {
      s = run_text(*o, **file);
    }
    if (!s) rc = fail("run", s.error());
  });
}

}  // namespace cmd_run

GGFLOW_COMMAND(run, cmd_run::add);

}  // namespace ggflow::cli
