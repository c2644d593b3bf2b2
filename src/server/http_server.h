// Server: the HTTP side of `ggflow serve` (cpp-httplib): routes, API key, OpenAI-shaped errors,
// access log, readiness and draining. The models are handed over as a ModelSet (serve_models),
// which loads the default one; until then the model routes answer 503 while /health already
// answers (docs/SERVER.md). Each request takes a lease on the model its "model" field names.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "base/result.h"
#include "pipeline/continuous_batching.h"
#include "server/api_error.h"
#include "server/engine_loop.h"
#include "server/metrics.h"
#include "server/model_set.h"
#include "server/openai_request.h"

namespace ggflow::server {

struct ServeConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port
  std::string api_key;              // empty: no key needed
  bool webui = true;
  size_t max_body = size_t(8) << 20;
  int shutdown_timeout_s = 10;
  // Origins whose browser pages may call the API (--cors-origin; "*": any). Empty: no CORS
  // headers, so browsers keep other origins' pages out.
  std::vector<std::string> cors_origins;
  std::string ssl_cert, ssl_key;    // PEM files: serve HTTPS (OpenSSL through cpp-httplib); empty: HTTP
  LoopConfig loop;
};

class Server {
 public:
  explicit Server(ServeConfig cfg);
  // Errors: a certificate or key that OpenSSL cannot load (or only one of the two given).
  static Result<std::unique_ptr<Server>> create(ServeConfig cfg);
  ~Server();

  // Binds host:port; returns the port (the chosen one for port 0).
  Result<int> bind();
  // Serves on a background thread.
  void start();
  // The models to serve; loads the default (first) one, then requests are served. Errors: its load's.
  Status serve_models(std::unique_ptr<ModelSet> models);
  Metrics& metrics() { return metrics_; }
  // SIGTERM: refuse new requests, let running ones finish for shutdown_timeout_s, cancel the rest,
  // give their streams a moment to write the final chunk, stop listening.
  void shutdown();

 private:
  void add_routes();
  bool admit_route(const httplib::Request& req, httplib::Response& res);  // pre-routing: key, readiness
  // Pre-routing: CORS headers for an allowed Origin; true when it answered a preflight (OPTIONS).
  bool cors(const httplib::Request& req, httplib::Response& res);
  void props(const httplib::Request& req, httplib::Response& res);
  void slots(const httplib::Request& req, httplib::Response& res);
  // The lease on the model a request names (its "model" field, or ?model= on GET routes; none: the
  // default one); null after answering the error.
  std::shared_ptr<ModelLease> lease(const std::string& name, httplib::Response& res);
  std::shared_ptr<ModelLease> lease(const Json& body, httplib::Response& res);
  // A lease on a generative model (an embedding model is refused with 400); null after answering.
  std::shared_ptr<ModelLease> generative(const Json& body, httplib::Response& res);
  // POST routes get the body read by read_body() (bounded by max_body, chunked or not).
  using BodyHandler = void (Server::*)(const std::string& body, httplib::Response& res);
  void post(const char* path, BodyHandler handler);
  void generate(const std::string& body, httplib::Response& res, bool chat);
  void chat(const std::string& body, httplib::Response& res) { generate(body, res, true); }
  void completion(const std::string& body, httplib::Response& res) { generate(body, res, false); }
  void render(const std::string& body, httplib::Response& res, bool chat);
  void chat_render(const std::string& body, httplib::Response& res) { render(body, res, true); }
  void completion_render(const std::string& body, httplib::Response& res) { render(body, res, false); }
  void generate_blocking(const GenerationRequest& r, const ModelLease& model, std::shared_ptr<RequestHandle> handle,
                         httplib::Response& res);
  void generate_stream(std::shared_ptr<const GenerationRequest> r, std::shared_ptr<ModelLease> model,
                       std::shared_ptr<RequestHandle> handle, httplib::Response& res);
  void embeddings(const std::string& body, httplib::Response& res);
  void rerank(const std::string& body, httplib::Response& res);
  void tokenize(const std::string& body, httplib::Response& res);
  void detokenize(const std::string& body, httplib::Response& res);
  void apply_template(const std::string& body, httplib::Response& res);
  void models(const httplib::Request& req, httplib::Response& res);

  ServeConfig cfg_;
  std::unique_ptr<httplib::Server> http_;  // an httplib::SSLServer with ssl_cert / ssl_key
  Metrics metrics_;
  std::unique_ptr<ModelSet> models_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::thread listener_;
};

void send_error(httplib::Response& res, const ApiError& e);
void send_json(httplib::Response& res, const Json& body, int status = 200);

// The chat page (server/webui/index.html, built into the binary).
std::string_view webui_page();

}  // namespace ggflow::server
