// `ggflow serve`: the OpenAI-compatible server (docs/SERVER.md).
//
//   ggflow serve -m FILE [-m FILE ...] [--models-dir DIR] [--max-memory SIZE] [--host H] [--port P] [-t N] [--parallel N] [--kv-cache SIZE] [--kv-type f32|f16|q8_0]
//                [--max-batched-tokens N] [--ctx-size N] [--max-queue N] [--api-key KEY]
//                [--served-model-name NAME] [--no-webui] [--max-body SIZE] [--shutdown-timeout S]
//                [--draft-model F | --lookup N] [--spec-tokens K]
//                [--lora FILE[:SCALE] ...] [--lora-modules NAME=FILE[:SCALE] ...]
//
// LoRA adapters (one served model): --lora adapters are on for every request of the model;
// each --lora-modules adapter is a model name of its own (vLLM's convention) whose requests run
// the model with that adapter on as well, in the same engine and batches (server/model_set.h).
// Speculative decoding (--draft-model, --lookup) runs in the engine for every request that can
// verify drafts (not grammar-constrained ones): the answers are those of plain decoding, and
// speculation shrinks as the batch grows (serving/speculative.h).
// Listens first (so /health answers and the model routes say 503 while loading), then loads the
// default (first) model; the others load when a request names them, and the least recently used
// unload when --max-memory would be exceeded (server/model_set.h). SIGTERM or SIGINT drains
// (server/http_server.h) and exits 0.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <filesystem>
#include <span>

#include "cli/commands.h"
#include "pipeline/continuous_batching.h"
#include "serving/block_manager.h"
#include "runtime/embedding_runner.h"
#include "runtime/memory_budget.h"
#include "server/http_server.h"

namespace ggflow::cli {
namespace cmd_serve {

struct Opts {
  std::vector<std::string> models;
  std::string models_dir;
  std::string model, host = "127.0.0.1", kv_cache = "256MiB", api_key, name, max_body = "8MiB", executor = "cpu", max_memory;
  std::string kv_type = "f32";
  int port = 8080, threads = 0, parallel = 8, max_batched = 512, max_queue = 64, shutdown_timeout = 10;
  int64_t ctx = 0;
  bool no_webui = false;
  pipeline::SpeculativeOptions spec;
  std::vector<std::string> cors_origins;
  std::string ssl_cert, ssl_key;
  std::vector<std::string> loras, lora_modules;
};

// --kv-cache: "512" (blocks of 32 tokens) or a size ("256MiB"). Returns bytes, or -blocks.
Result<int64_t> parse_kv_cache(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos && s.size() < 10) return -std::stoll(s);
  auto bytes = runtime::parse_bytes("--kv-cache", s);
  if (!bytes) return make_error(bytes.error().what, "write a block count (512) or a size (256MiB, 1GiB)");
  return bytes;
}

std::string default_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  return stem;
}

// The model of o.model, its KV pool and context, as the pipeline wants them.
// `chat_template`: the file's tokenizer.chat_template ("" without one), for /props; `bytes`: the
// file and the KV pool.
Result<std::unique_ptr<pipeline::ContinuousBatchingPipeline>> load(const Opts& o, std::span<const runtime::LoraSpec> loras,
                                                                   int64_t& context, std::string& chat_template, int64_t& bytes) {
  if (auto s = runtime::check_memory_budget(o.model, 0, o.max_memory); !s) return s.error();  // before mapping
  auto kv_type = builder::kv_type_from_name(o.kv_type);
  if (!kv_type) return kv_type.error();
  auto file = runtime::ModelFile::open(o.model, builder::BuildOptions{.kv_type = *kv_type}, loras);
  if (!file) return file.error();
  const auto& hp = (*file)->hparams();
  if (auto t = (*file)->file().get<std::string>("tokenizer.chat_template")) chat_template = *t;
  auto kv = parse_kv_cache(o.kv_cache);
  if (!kv) return kv.error();
  const int64_t per_block = serving::BlockManager::kv_bytes_per_block(hp.kv_elems_per_token(), (*file)->kv_type());
  const int64_t blocks = *kv < 0 ? -*kv : *kv / per_block;
  if (blocks < 1 || blocks > INT32_MAX)
    return make_error("--kv-cache " + o.kv_cache + " holds " + std::to_string(blocks) + " blocks of 32 tokens (" +
                          std::to_string(per_block) + " bytes each for this model)",
                      "give the KV cache at least one block's worth");
  if (auto s = runtime::check_memory_budget(o.model, blocks * per_block, o.max_memory); !s) return s.error();
  std::error_code ec;
  bytes = int64_t(std::filesystem::file_size(o.model, ec)) + blocks * per_block;
  for (const auto& l : loras) bytes += int64_t(std::filesystem::file_size(l.path, ec));
  const int64_t capacity = blocks * serving::BlockManager::kBlockSize;
  context = o.ctx > 0 ? o.ctx : std::min<int64_t>({2048, (*file)->n_ctx_train(), capacity});
  if (context > capacity)
    return make_error("--ctx-size " + std::to_string(context) + " does not fit the KV cache: " + std::to_string(blocks) +
                          " blocks x 32 tokens = " + std::to_string(capacity) + " tokens",
                      "lower --ctx-size or raise --kv-cache");
  if (hp.arch.rope_long_short && context > hp.n_ctx_orig) {  // phi3 LongRoPE: the long factors (builder/build.h)
    file = runtime::ModelFile::open(o.model, builder::BuildOptions{.n_ctx = context, .kv_type = *kv_type}, loras);
    if (!file) return file.error();
  }
  serving::EngineConfig cfg;
  cfg.num_blocks = int32_t(blocks);
  cfg.max_num_seqs = o.parallel;
  cfg.max_num_batched_tokens = std::max(o.max_batched, o.parallel);
  cfg.max_model_len = context;
  runtime::CompileOptions co;
  co.executor = *runtime::executor_from_name(o.executor);
  co.threads = o.threads;
  std::fprintf(stderr, "ggflow serve: %s: KV cache %lld blocks x 32 tokens (%.1f MiB), context %lld tokens, %d sequences at once\n",
               o.model.c_str(), static_cast<long long>(blocks), double(blocks * per_block) / 1048576.0, static_cast<long long>(context), o.parallel);
  if (o.spec.enabled())
    std::fprintf(stderr, "ggflow serve: speculative decoding with %s\n",
                 o.spec.lookup > 0 ? ("prompt lookup (n-grams up to " + std::to_string(o.spec.lookup) + ")").c_str()
                                   : ("the draft model " + o.spec.draft_model).c_str());
  return pipeline::ContinuousBatchingPipeline::open(**file, cfg, co, o.spec);
}

// An embedding model (an encoder: BERT): its runner on the executor of --executor / -t, and its
// tokenizer through a PromptFormat (no chat template); the budget it takes is its file.
Result<server::LoadedModel> load_encoder(const Opts& o, const gguf::File& file) {
  if (auto s = runtime::check_memory_budget(o.model, 0, o.max_memory); !s) return s.error();
  runtime::CompileOptions co;
  co.executor = *runtime::executor_from_name(o.executor);
  co.threads = o.threads;
  server::LoadedModel m;
  auto runner = runtime::EmbeddingRunner::open(o.model, co);
  if (!runner) return runner.error();
  auto format = pipeline::PromptFormat::from_file(file);
  if (!format) return format.error();
  m.context = (*runner)->params().n_ctx_train;
  m.embedder = std::move(*runner);
  m.format = std::move(*format);
  std::error_code ec;
  m.bytes = int64_t(std::filesystem::file_size(o.model, ec));
  std::fprintf(stderr, "ggflow serve: %s: an embedding model (%lld dimensions, up to %lld tokens per input)\n", o.model.c_str(),
               static_cast<long long>(m.embedder->params().n_embd), static_cast<long long>(m.context));
  return m;
}

server::ModelSpec served(std::string name, std::string path) {
  server::ModelSpec m;
  m.name = std::move(name);
  m.path = std::move(path);
  return m;
}

// --lora and --lora-modules onto the one served model: adapter i of the model is --lora i, then
// module i; the model's requests run with every --lora, a module's with those and its own.
Status add_adapters(const Opts& o, std::vector<server::ModelSpec>& models) {
  if (o.loras.empty() && o.lora_modules.empty()) return {};
  if (models.size() > 1)
    return make_error("LoRA adapters attach to one model, and " + std::to_string(models.size()) + " are served",
                      "serve the adapters' base model alone (-m FILE) with --lora / --lora-modules");
  server::ModelSpec& base = models[0];
  const size_t n = o.loras.size() + o.lora_modules.size();
  if (n > 64) return make_error(std::to_string(n) + " LoRA adapters given", "serve at most 64 adapters per model");
  for (const auto& arg : o.loras) {
    auto spec = runtime::parse_lora_spec(arg);
    if (!spec) return make_error("--lora " + arg + ": " + spec.error().what, spec.error().hint);
    base.lora |= uint64_t(1) << base.loras.size();
    base.loras.push_back(*spec);
  }
  std::vector<server::ModelSpec> aliases;
  for (const auto& arg : o.lora_modules) {
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    if (eq == std::string::npos || name.empty())
      return make_error("--lora-modules " + arg + ": not NAME=FILE", "write each adapter as NAME=FILE or NAME=FILE:SCALE (e.g. sql=adapters/sql.gguf)");
    auto spec = runtime::parse_lora_spec(arg.substr(eq + 1));
    if (!spec) return make_error("--lora-modules " + arg + ": " + spec.error().what, spec.error().hint);
    for (const auto& m : models)
      if (m.name == name) return make_error("--lora-modules " + arg + ": the name '" + name + "' is taken by " + m.path, "give the adapter another name");
    for (const auto& a : aliases)
      if (a.name == name) return make_error("--lora-modules: two adapters are named '" + name + "'", "give each adapter a name of its own");
    server::ModelSpec alias = served(name, spec->path);
    alias.parent = base.name;
    alias.lora = base.lora | uint64_t(1) << base.loras.size();
    aliases.push_back(std::move(alias));
    base.loras.push_back(*spec);
  }
  models.insert(models.end(), aliases.begin(), aliases.end());
  return {};
}

// The served models: each -m (named by --served-model-name when it is the only one, else by its
// file name), then each .gguf file of --models-dir in name order.
Result<std::vector<server::ModelSpec>> model_specs(const Opts& o) {
  std::vector<server::ModelSpec> out;
  for (const auto& m : o.models) out.push_back(served(default_name(m), m));
  if (!o.models_dir.empty()) {
    std::error_code ec;
    std::vector<std::string> files;
    for (const auto& f : std::filesystem::directory_iterator(o.models_dir, ec))
      if (f.path().extension() == ".gguf" && std::filesystem::is_regular_file(f.path(), ec)) files.push_back(f.path().string());
    if (ec) return make_error("cannot read --models-dir " + o.models_dir + ": " + ec.message(), "give a directory of .gguf files");
    std::sort(files.begin(), files.end());
    if (files.empty()) return make_error("--models-dir " + o.models_dir + " holds no .gguf file", "put the models there, or use -m FILE");
    for (const auto& f : files) out.push_back(served(default_name(f), f));
  }
  if (out.empty()) return make_error("no model to serve", "give -m FILE (repeat for several) or --models-dir DIR");
  if (!o.name.empty()) {
    if (out.size() > 1)
      return make_error("--served-model-name names one model, and " + std::to_string(out.size()) + " are served",
                        "drop it: with several models each is named by its file name without .gguf");
    out[0].name = o.name;
  }
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[i].name == out[j].name)
        return make_error("two models are named '" + out[i].name + "': " + out[j].path + " and " + out[i].path,
                          "serve files with different names (a model is named by its file name without .gguf)");
  if (out.size() > 1 && !o.spec.draft_model.empty())
    return make_error("--draft-model drafts for one model, and " + std::to_string(out.size()) + " are served",
                      "serve the model it drafts for alone, or use --lookup (it needs no draft model)");
  if (auto s = add_adapters(o, out); !s) return s.error();
  return out;
}

// The budget of the loaded models together: --max-memory, else the memory available at start.
Result<int64_t> memory_budget(const Opts& o) {
  if (!o.max_memory.empty()) return runtime::parse_bytes("--max-memory", o.max_memory);
  return std::max<int64_t>(runtime::available_memory(), 0);
}

int serve(const Opts& o) {
  // Every thread started from here on inherits the blocked signals; main takes them with sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  server::ServeConfig cfg;
  cfg.host = o.host;
  cfg.port = o.port;
  cfg.api_key = o.api_key;
  if (cfg.api_key.empty())
    if (const char* env = std::getenv("GGFLOW_API_KEY")) cfg.api_key = env;
  auto specs = model_specs(o);
  if (!specs) return fail("serve", specs.error());
  auto budget = memory_budget(o);
  if (!budget) return fail("serve", budget.error());
  cfg.webui = !o.no_webui;
  auto body = runtime::parse_bytes("--max-body", o.max_body);
  if (!body) return fail("serve", body.error());
  cfg.max_body = size_t(*body);
  cfg.shutdown_timeout_s = o.shutdown_timeout;
  cfg.loop.max_num_seqs = o.parallel;
  cfg.loop.max_queue = o.max_queue;
  cfg.cors_origins = o.cors_origins;
  cfg.ssl_cert = o.ssl_cert;
  cfg.ssl_key = o.ssl_key;
  const char* scheme = o.ssl_cert.empty() ? "http" : "https";

  auto created = server::Server::create(cfg);
  if (!created) return fail("serve", created.error());
  server::Server& srv = **created;
  auto port = srv.bind();
  if (!port) return fail("serve", port.error());
  srv.start();
  std::fprintf(stderr, "ggflow serve: listening on %s://%s:%d, loading %s\n", scheme, o.host.c_str(), *port,
               (*specs)[0].path.c_str());
  auto loader = [o](const server::ModelSpec& spec) -> Result<server::LoadedModel> {
    Opts one = o;
    one.model = spec.path;
    auto file = gguf::File::open(spec.path);
    if (!file) return file.error();
    if (builder::is_encoder(*file)) {
      if (!spec.loras.empty())
        return make_error("LoRA adapters apply to generative models, and " + spec.path + " is an embedding model",
                          "drop --lora / --lora-modules, or serve the adapters' base model");
      return load_encoder(one, *file);
    }
    server::LoadedModel m;
    auto pipe = load(one, spec.loras, m.context, m.chat_template, m.bytes);
    if (!pipe) return pipe.error();
    m.pipe = std::move(*pipe);
    return m;
  };
  // Before a first load: the file and the KV pool when --kv-cache is a size (a block count is
  // sized once the file's KV width is known, after the load).
  auto sizer = [kv = parse_kv_cache(o.kv_cache)](const server::ModelSpec& spec) -> int64_t {
    auto size = [](const std::string& path) {
      std::error_code ec;
      const auto n = std::filesystem::file_size(path, ec);
      return ec ? int64_t(0) : int64_t(n);
    };
    int64_t n = size(spec.path) + (kv && *kv > 0 ? *kv : 0);
    for (const auto& l : spec.loras) n += size(l.path);
    return n;
  };
  const std::string default_model = (*specs)[0].name;
  const size_t num_models = size_t(std::count_if(specs->begin(), specs->end(), [](const auto& m) { return m.parent.empty(); }));
  for (const auto& m : *specs)
    if (!m.parent.empty()) std::fprintf(stderr, "ggflow serve: model '%s': '%s' with the adapter %s\n", m.name.c_str(), m.parent.c_str(), m.path.c_str());
  auto models = std::make_unique<server::ModelSet>(std::move(*specs), loader, sizer, *budget, cfg.loop, srv.metrics());
  if (auto s = srv.serve_models(std::move(models)); !s) {
    srv.shutdown();
    return fail("serve", s.error());
  }
  std::fprintf(stderr, "ggflow serve: ready: model '%s'%s at %s://%s:%d/v1 (chat page: %s)\n", default_model.c_str(),
               num_models > 1 ? (" and " + std::to_string(num_models - 1) + " more on demand").c_str() : "", scheme,
               o.host.c_str(), *port, cfg.webui ? "/" : "off");
  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::fprintf(stderr, "ggflow serve: %s: draining (up to %d s), then exiting\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
               o.shutdown_timeout);
  srv.shutdown();
  std::fprintf(stderr, "ggflow serve: stopped\n");
  return 0;
}

void add(CLI::App& app, int& rc) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API (docs/SERVER.md)");
  auto o = std::make_shared<Opts>();
  cmd->add_option("-m,--model", o->models, "a .gguf model (repeat for several: the first is the default)");
  cmd->add_option("--models-dir", o->models_dir, "serve every .gguf file of this directory, each loaded on first use");
  cmd->add_option("--host", o->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", o->port, "port (0: any free port, printed)")->capture_default_str()->check(CLI::Range(0, 65535));
  cmd->add_option("-t,--threads", o->threads, "executor threads (default: the machine's cores)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--parallel,--max-num-seqs", o->parallel, "sequences decoded together")->capture_default_str()->check(CLI::Range(1, 1024));
  cmd->add_option("--kv-cache", o->kv_cache, "KV pool: blocks of 32 tokens (512) or a size (256MiB)")->capture_default_str();
  cmd->add_option("--kv-type", o->kv_type, "KV cache element type: f32 | f16 (half the memory: twice the blocks) | q8_0 (34 bytes per 32 values)")->capture_default_str();
  cmd->add_option("--max-batched-tokens", o->max_batched, "tokens per engine step")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ctx-size", o->ctx, "tokens per request (default: min(2048, the model's, the pool))")->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  cmd->add_option("--max-queue", o->max_queue, "requests waiting beyond --parallel before 429")->capture_default_str()->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' (default: $GGFLOW_API_KEY)");
  cmd->add_option("--served-model-name", o->name, "the model name of the API (default: the file name)");
  cmd->add_flag("--no-webui", o->no_webui, "do not serve the chat page at /");
  cmd->add_option("--ssl-cert", o->ssl_cert, "serve HTTPS with this certificate (PEM; with --ssl-key)");
  cmd->add_option("--ssl-key", o->ssl_key, "the certificate's private key (PEM)");
  cmd->add_option("--cors-origin", o->cors_origins,
                  "an origin whose browser pages may call the API (repeat for several; '*': any); default: none");
  cmd->add_option("--max-body", o->max_body, "largest request body")->capture_default_str();
  cmd->add_option("--shutdown-timeout", o->shutdown_timeout, "seconds SIGTERM waits for running requests")->capture_default_str()->check(CLI::Range(0, 3600));
  cmd->add_option("--max-memory", o->max_memory, "memory for the loaded models and their KV caches together (e.g. 8GiB; default: the memory available); the least recently used unload to make room");
  cmd->add_option("--executor", o->executor, "cpu | ref")->check(CLI::IsMember({"cpu", "ref"}))->capture_default_str();
  cmd->add_option("--draft-model", o->spec.draft_model, "speculative decoding: a smaller model with the same vocabulary proposes tokens");
  cmd->add_option("--lookup", o->spec.lookup, "speculative decoding: prompt lookup with n-grams of 2 to N tokens (3 is typical)");
  cmd->add_option("--lora", o->loras, "a LoRA adapter (llama.cpp's GGUF adapter format) as FILE or FILE:SCALE, on for every request (repeatable)");
  cmd->add_option("--lora-modules", o->lora_modules,
                  "LoRA adapters served as models of their own: NAME=FILE or NAME=FILE:SCALE (several); a request's \"model\": NAME runs the model with that adapter");
  cmd->add_option("--spec-tokens", o->spec.num_spec_tokens, "speculative decoding: draft tokens per sequence and step at most (default: 8 draft model, 7 lookup)");
  cmd->add_option("--draft-vocab", o->spec.draft_vocab, "speculative decoding: the draft model's LM head cut to its first N rows (prompt lookup gives the ids beyond; default 0: all)");
  cmd->add_option("--draft-quant", o->spec.draft_quant, "speculative decoding: q4_0 requantizes the draft model's matrices at load (fewer bytes per draft token; answers unchanged; default: the file's types)");
  cmd->callback([o, &rc] {
    warn_threads("serve", o->threads);
    if (auto s = o->spec.validate(); !s) {
      rc = fail("serve", s.error());
      return;
    }
    rc = serve(*o);
  });
}

}  // namespace cmd_serve

GGFLOW_COMMAND(serve, cmd_serve::add);

}  // namespace ggflow::cli
