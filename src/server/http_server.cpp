// The HTTP side of `ggflow serve` (see http_server.h): set-up, key and readiness checks, errors,
// access log and the small routes. The generation routes are in routes_generate.cpp, the
// tokenizer routes in routes_tokens.cpp.
#include "server/http_server.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "server/openai_response.h"

namespace ggflow::server {

namespace {

using Clock = std::chrono::steady_clock;

// The request on this HTTP thread, for the access log (httplib calls the pre-routing handler,
// the route and the logger on the connection's thread).
thread_local Clock::time_point t_start;

bool needs_model(const std::string& path) {
  return path.rfind("/v1/", 0) == 0 || path == "/tokenize" || path == "/detokenize" || path == "/apply-template" || path == "/rerank" ||
         path == "/props" || path == "/slots";
}

// A status httplib answered by itself (no route, body too large, malformed HTTP): its OpenAI error.
ApiError error_for_status(int status, const httplib::Request& req) {
  switch (status) {
    case 404: return {404, "not_found_error", "not_found", "", "no route " + req.method + " " + req.path + "; see docs/SERVER.md for the routes"};
    case 405: return {405, "invalid_request_error", "method_not_allowed", "", req.method + " is not allowed on " + req.path};
    case 413: return {413, "invalid_request_error", "request_too_large", "", "the request body is larger than the server's --max-body limit"};
    case 414: return {414, "invalid_request_error", "uri_too_long", "", "the request URI is too long"};
    case 400: return {400, "invalid_request_error", "invalid_http", "", "the HTTP request is malformed (request line, headers or chunked body)"};
    default: return {status, status >= 500 ? "server_error" : "invalid_request_error", "http_" + std::to_string(status), "",
                     "the HTTP request was refused (status " + std::to_string(status) + ")"};
  }
}

}  // namespace

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(e.to_json()), "application/json");
}

void send_json(httplib::Response& res, const Json& body, int status) {
  res.status = status;
  res.set_content(dump(body), "application/json");
}

Result<std::unique_ptr<Server>> Server::create(ServeConfig cfg) {
  if (cfg.ssl_cert.empty() != cfg.ssl_key.empty())
    return make_error(std::string("--ssl-") + (cfg.ssl_cert.empty() ? "key" : "cert") + " given without --ssl-" +
                          (cfg.ssl_cert.empty() ? "cert" : "key"),
                      "HTTPS needs both: the certificate (PEM) and its private key (PEM)");
  auto srv = std::make_unique<Server>(std::move(cfg));
  if (!srv->http_->is_valid())
    return make_error("cannot load the TLS certificate '" + srv->cfg_.ssl_cert + "' with the key '" + srv->cfg_.ssl_key + "'",
                      "give PEM files that exist and belong together (openssl x509 -in CERT -noout -text checks one)");
  return srv;
}

Server::Server(ServeConfig cfg)
    : cfg_(std::move(cfg)),
      http_(cfg_.ssl_cert.empty() ? std::make_unique<httplib::Server>()
                                  : std::make_unique<httplib::SSLServer>(cfg_.ssl_cert.c_str(), cfg_.ssl_key.c_str())) {
  // One thread per connection: a streaming client holds one for its whole answer, so the pool
  // covers every request that may be live plus some for /metrics, /health and refusals.
  // Threads are cheap while they wait: twice that, so stalled clients (each dropped after the
  // read timeout) do not starve /health.
  const size_t threads = 2 * size_t(cfg_.loop.max_num_seqs + cfg_.loop.max_queue) + 64;
  http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http_->set_payload_max_length(cfg_.max_body);
  http_->set_keep_alive_timeout(5);
  http_->set_read_timeout(10, 0);   // a client that stalls mid-request loses its connection
  http_->set_write_timeout(30, 0);
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    t_start = Clock::now();
    if (cors(req, res)) return httplib::Server::HandlerResponse::Handled;
    return admit_route(req, res) ? httplib::Server::HandlerResponse::Unhandled : httplib::Server::HandlerResponse::Handled;
  });
  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.body.empty() && !res.content_provider_) send_error(res, error_for_status(res.status, req));
  });
  http_->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, {500, "server_error", "internal_error", "", "internal error: " + what + " (this is a bug; the server goes on)"});
  });
  http_->set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics_.on_response(res.status);
    const double secs = std::chrono::duration<double>(Clock::now() - t_start).count();
    const auto tokens = res.get_header_value("X-Ggflow-Completion-Tokens");
    std::fprintf(stderr, "ggflow serve: %s \"%s %s\" %d%s%s %.3fs\n", req.remote_addr.c_str(), req.method.c_str(),
                 req.path.c_str(), res.status, tokens.empty() ? "" : " tokens=", tokens.c_str(), secs);
  });
  add_routes();
}

Server::~Server() {
  http_->stop();
  if (listener_.joinable()) listener_.join();
  models_.reset();
}

Result<int> Server::bind() {
  int port = cfg_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(cfg_.host);
    if (port < 0) return make_error("cannot listen on " + cfg_.host, "check --host");
  } else if (!http_->bind_to_port(cfg_.host, port)) {
    return make_error("cannot listen on " + cfg_.host + ":" + std::to_string(port),
                      "the port is in use or the address is not this machine's; pick another --port or --host");
  }
  cfg_.port = port;
  return port;
}

void Server::start() {
  listener_ = std::thread([this] { http_->listen_after_bind(); });
  // httplib's stop() does nothing until the listener runs: a shutdown right after start (a model
  // refused at once) would otherwise leave the listener, and the process, running.
  for (int i = 0; i < 5000 && !http_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

Status Server::serve_models(std::unique_ptr<ModelSet> models) {
  models_ = std::move(models);
  metrics_.set_model_name(models_->default_name());
  metrics_.set_max_lora(int64_t(models_->num_adapters()));
  std::optional<ApiError> error;
  if (!models_->acquire("", error))  // the message carries the loader's hint when it has one
    return make_error(error->message, error->message.find("(hint:") == std::string::npos ? "check the file with `ggflow inspect`" : "");
  ready_ = true;
  return {};
}

std::shared_ptr<ModelLease> Server::lease(const std::string& name, httplib::Response& res) {
  std::optional<ApiError> error;
  auto l = models_->acquire(name, error);
  if (!l) send_error(res, *error);
  return l;
}

// The body's "model" when it is a string; anything else is the parser's to refuse.
std::shared_ptr<ModelLease> Server::lease(const Json& body, httplib::Response& res) {
  auto it = body.find("model");
  return lease(it != body.end() && it->is_string() ? it->get<std::string>() : std::string(), res);
}

std::shared_ptr<ModelLease> Server::generative(const Json& body, httplib::Response& res) {
  auto l = lease(body, res);
  if (l && !l->engine()) {
    send_error(res, invalid("model_not_generative", "model", "the model '" + l->info().name +
                                                                 "' is an embedding model: it answers POST /v1/embeddings, not text generation"));
    return nullptr;
  }
  return l;
}

void Server::shutdown() {
  stopping_ = true;
  if (models_) {
    models_->drain(std::chrono::seconds(cfg_.shutdown_timeout_s));
    // The streams write their final chunks on their own threads: give them a moment.
    for (int i = 0; i < 50 && http_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  http_->stop();
  if (listener_.joinable()) listener_.join();
  if (models_)
    for (const auto& line : models_->exit_report()) std::fprintf(stderr, "ggflow serve: %s\n", line.c_str());
  models_.reset();
}

bool Server::cors(const httplib::Request& req, httplib::Response& res) {
  const std::string origin = req.get_header_value("Origin");
  if (cfg_.cors_origins.empty() || origin.empty()) return false;
  const bool any = std::find(cfg_.cors_origins.begin(), cfg_.cors_origins.end(), "*") != cfg_.cors_origins.end();
  const bool allowed = any || std::find(cfg_.cors_origins.begin(), cfg_.cors_origins.end(), origin) != cfg_.cors_origins.end();
  if (allowed) {
    res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
    if (!any) res.set_header("Vary", "Origin");
  }
  if (req.method != "OPTIONS" || !req.has_header("Access-Control-Request-Method")) return false;
  // A preflight: it carries no API key by design, so it is answered before the key check.
  if (!allowed) {
    send_error(res, {403, "invalid_request_error", "cors_origin_not_allowed", "",
                     "the origin '" + origin + "' may not call this server; start it with --cors-origin " + origin + " (or '*')"});
    return true;
  }
  const std::string headers = req.get_header_value("Access-Control-Request-Headers");
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  res.set_header("Access-Control-Allow-Headers", headers.empty() ? "Authorization, Content-Type" : headers);
  res.set_header("Access-Control-Max-Age", "600");
  return true;
}

bool Server::admit_route(const httplib::Request& req, httplib::Response& res) {
  if (!needs_model(req.path)) return true;
  if (!cfg_.api_key.empty()) {
    const std::string auth = req.get_header_value("Authorization");
    if (auth != "Bearer " + cfg_.api_key) {
      send_error(res, {401, "authentication_error", "invalid_api_key", "",
                       auth.empty() ? "no API key: send the header 'Authorization: Bearer <key>'"
                                    : "the API key is not valid: send 'Authorization: Bearer <key>' with the server's key"});
      return false;
    }
  }
  if (stopping_) {
    send_error(res, {503, "server_error", "shutting_down", "", "the server is shutting down; retry on another replica"});
    return false;
  }
  if (!ready_) {
    res.set_header("Retry-After", "1");
    send_error(res, {503, "server_error", "model_loading", "", "the model is still loading; retry in a moment"});
    return false;
  }
  return true;
}

void Server::models(const httplib::Request& req, httplib::Response& res) {
  const auto created = int64_t(std::time(nullptr));
  Json list = Json::array();
  for (const ModelStatus& m : models_->status()) {
    const char* state = m.state == ModelStatus::State::Loaded ? "loaded" : m.state == ModelStatus::State::Loading ? "loading" : "unloaded";
    // vLLM's fields: root is the file (an adapter's for an alias), parent the model an adapter runs on.
    Json one = {{"id", m.name}, {"object", "model"}, {"created", created}, {"owned_by", "ggflow"}, {"status", {{"value", state}}},
                {"root", m.path}, {"parent", m.parent.empty() ? Json(nullptr) : Json(m.parent)}};
    if (m.context > 0) one["max_model_len"] = m.context;  // known once loaded
    if (req.matches.size() > 1 && req.matches[1] == m.name) return send_json(res, one);
    list.push_back(std::move(one));
  }
  if (req.matches.size() > 1) {
    std::optional<ApiError> error;
    models_->acquire(req.matches[1], error);  // not served: its 404, which names those that are
    return send_error(res, *error);
  }
  send_json(res, {{"object", "list"}, {"data", list}});
}

// llama-server's /props (?model= picks one of several): the defaults a request starts from, the
// slots, the model and its template.
void Server::props(const httplib::Request& req, httplib::Response& res) {
  auto model = lease(req.get_param_value("model"), res);
  if (!model) return;
  const text::SamplingParams d;
  send_json(res, {{"default_generation_settings",
                   {{"n_ctx", model->info().context},
                    {"params", {{"temperature", d.temperature}, {"top_k", d.top_k}, {"top_p", d.top_p}, {"min_p", d.min_p},
                                {"repeat_penalty", d.repetition_penalty}, {"presence_penalty", d.presence_penalty},
                                {"frequency_penalty", d.frequency_penalty}, {"n_predict", d.max_tokens}}}}},
                  {"total_slots", cfg_.loop.max_num_seqs},
                  {"model_path", model->path()},
                  {"model_alias", model->info().name},
                  {"chat_template", model->chat_template()},
                  {"modalities", {{"vision", false}, {"audio", false}}},
                  {"build_info", "ggflow"}});
}

// llama-server's /slots over continuous batching (?model= picks one of several): a slot is one of
// the --parallel sequences the engine runs at once; the live requests fill them oldest first, the
// rest are idle.
void Server::slots(const httplib::Request& req, httplib::Response& res) {
  auto model = lease(req.get_param_value("model"), res);
  if (!model) return;
  const std::vector<SlotInfo> live = model->engine() ? model->engine()->slots() : std::vector<SlotInfo>{};
  Json out = Json::array();
  for (int32_t i = 0; i < cfg_.loop.max_num_seqs; ++i) {
    const SlotInfo* s = size_t(i) < live.size() ? &live[size_t(i)] : nullptr;
    out.push_back({{"id", i},
                   {"id_task", s ? s->id_task : -1},
                   {"n_ctx", model->info().context},
                   {"is_processing", s != nullptr},
                   {"state", !s ? "idle" : s->running ? "running" : "waiting"},
                   {"n_prompt_tokens", s ? s->n_prompt : 0},
                   {"n_decoded", s ? s->n_decoded : 0},
                   {"n_cached", s ? s->n_computed : 0}});
  }
  send_json(res, out);
}

void Server::post(const char* path, BodyHandler handler) {
  // The body is read here rather than by httplib, which bounds Content-Length bodies by
  // set_payload_max_length but reads chunked ones whole: both stop at max_body.
  http_->Post(path, [this, handler](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader) {
    std::string body;
    const std::string length = req.get_header_value("Content-Length");
    bool too_large = !length.empty() && (length.size() > 18 || std::stoull("0" + length.substr(0, length.find_first_not_of("0123456789"))) > cfg_.max_body);
    const bool read = too_large || reader([&](const char* data, size_t len) {
      if (body.size() + len > cfg_.max_body) {
        too_large = true;
        return false;
      }
      body.append(data, len);
      return true;
    });
    if (too_large) {
      res.set_header("Connection", "close");
      return send_error(res, {413, "invalid_request_error", "request_too_large", "",
                              "the request body is larger than the server's limit of " + std::to_string(cfg_.max_body) +
                                  " bytes (--max-body)"});
    }
    if (!read) return send_error(res, {400, "invalid_request_error", "invalid_http", "", "the request body could not be read (a malformed chunked body, or the client stopped sending)"});
    (this->*handler)(body, res);
  });
}

void Server::add_routes() {
  using Req = const httplib::Request&;
  using Res = httplib::Response&;
  http_->Get("/health", [](Req, Res res) { send_json(res, {{"status", "ok"}}); });
  http_->Get("/ready", [this](Req, Res res) {
    if (stopping_) return send_error(res, {503, "server_error", "shutting_down", "", "the server is shutting down"});
    if (!ready_) return send_error(res, {503, "server_error", "model_loading", "", "the model is still loading"});
    send_json(res, {{"status", "ready"}, {"model", models_->default_name()}});
  });
  http_->Get("/metrics", [this](Req, Res res) { res.set_content(metrics_.render(), "text/plain; version=0.0.4"); });
  // SGLang's load report, which vllm-router polls for its power_of_two policy: "load" is the
  // requests the replica holds (running + waiting).
  http_->Get("/get_load", [this](Req, Res res) {
    const EngineGauges g = metrics_.gauges();
    send_json(res, {{"load", g.running + g.waiting},
                    {"num_requests_running", g.running},
                    {"num_requests_waiting", g.waiting},
                    {"kv_cache_usage_perc", g.num_blocks > 0 ? double(g.blocks_used) / g.num_blocks : 0.0}});
  });
  if (cfg_.webui)
    http_->Get("/", [](Req, Res res) {
      const auto page = webui_page();
      res.set_header("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
      res.set_header("X-Content-Type-Options", "nosniff");
      res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
    });
  http_->Get("/props", [this](Req req, Res res) { props(req, res); });
  http_->Get("/slots", [this](Req req, Res res) { slots(req, res); });
  http_->Get("/v1/models", [this](Req req, Res res) { models(req, res); });
  http_->Get(R"(/v1/models/(.+))", [this](Req req, Res res) { models(req, res); });
  post("/v1/chat/completions", &Server::chat);
  post("/v1/completions", &Server::completion);
  post("/v1/embeddings", &Server::embeddings);
  for (const char* path : {"/v1/rerank", "/rerank", "/v1/reranking"}) post(path, &Server::rerank);
  post("/v1/chat/completions/render", &Server::chat_render);
  post("/v1/completions/render", &Server::completion_render);
  post("/tokenize", &Server::tokenize);
  post("/detokenize", &Server::detokenize);
  post("/apply-template", &Server::apply_template);

  // Known routes with another method: 405 with Allow, not 404.
  auto not_allowed = [](const char* allow) {
    return [allow](Req req, Res res) {
      res.set_header("Allow", allow);
      send_error(res, {405, "invalid_request_error", "method_not_allowed", "", req.method + " is not allowed on " + req.path + "; use " + allow});
    };
  };
  for (const char* path : {"/v1/chat/completions", "/v1/completions", "/v1/embeddings", "/v1/rerank", "/rerank", "/v1/reranking", "/v1/chat/completions/render",
                           "/v1/completions/render", "/tokenize", "/detokenize", "/apply-template"}) {
    http_->Get(path, not_allowed("POST"));
    http_->Put(path, not_allowed("POST"));
    http_->Patch(path, not_allowed("POST"));
    http_->Delete(path, not_allowed("POST"));
    http_->Options(path, not_allowed("POST"));
  }
  for (const char* path : {"/v1/models", R"(/v1/models/(.+))", "/health", "/ready", "/metrics", "/get_load", "/props", "/slots"}) {
    http_->Post(path, not_allowed("GET"));
    http_->Put(path, not_allowed("GET"));
    http_->Patch(path, not_allowed("GET"));
    http_->Delete(path, not_allowed("GET"));
    http_->Options(path, not_allowed("GET"));
  }
}

}  // namespace ggflow::server
