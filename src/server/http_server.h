// Server: the HTTP side of `ggflow serve` (cpp-httplib): routes, API key, OpenAI-shaped errors,
// access log, readiness and draining. The model is handed over once loaded (set_model); until
// then the model routes answer 503 while /health already answers (docs/SERVER.md).
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
#include "server/openai_request.h"

namespace ggflow::server {

struct ServeConfig {
  std::string host = "127.0.0.1";
  int port = 8080;                  // 0: any free port
  std::string api_key;              // empty: no key needed
  std::string served_name;          // the model name clients use
  bool webui = true;
  size_t max_body = size_t(8) << 20;
  int shutdown_timeout_s = 10;
  // Origins whose browser pages may call the API (--cors-origin; "*": any). Empty: no CORS
  // headers, so browsers keep other origins' pages out.
  std::vector<std::string> cors_origins;
  std::string model_path;           // /props
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
  // The loaded model: requests are served from now on. `chat_template`: the file's, for /props.
  void set_model(std::unique_ptr<pipeline::ContinuousBatchingPipeline> pipe, int64_t context, std::string chat_template = {});
  // SIGTERM: refuse new requests, let running ones finish for shutdown_timeout_s, cancel the rest,
  // give their streams a moment to write the final chunk, stop listening.
  void shutdown();

 private:
  void add_routes();
  bool admit_route(const httplib::Request& req, httplib::Response& res);  // pre-routing: key, readiness
  // Pre-routing: CORS headers for an allowed Origin; true when it answered a preflight (OPTIONS).
  bool cors(const httplib::Request& req, httplib::Response& res);
  void props(httplib::Response& res);
  void slots(httplib::Response& res);
  // POST routes get the body read by read_body() (bounded by max_body, chunked or not).
  using BodyHandler = void (Server::*)(const std::string& body, httplib::Response& res);
  void post(const char* path, BodyHandler handler);
  void generate(const std::string& body, httplib::Response& res, bool chat);
  void chat(const std::string& body, httplib::Response& res) { generate(body, res, true); }
  void completion(const std::string& body, httplib::Response& res) { generate(body, res, false); }
  void render(const std::string& body, httplib::Response& res, bool chat);
  void chat_render(const std::string& body, httplib::Response& res) { render(body, res, true); }
  void completion_render(const std::string& body, httplib::Response& res) { render(body, res, false); }
  void generate_blocking(const GenerationRequest& r, std::shared_ptr<RequestHandle> handle, httplib::Response& res);
  void generate_stream(std::shared_ptr<const GenerationRequest> r, std::shared_ptr<RequestHandle> handle,
                       httplib::Response& res);
  void tokenize(const std::string& body, httplib::Response& res);
  void detokenize(const std::string& body, httplib::Response& res);
  void apply_template(const std::string& body, httplib::Response& res);
  void models(const httplib::Request& req, httplib::Response& res);

  ServeConfig cfg_;
  std::unique_ptr<httplib::Server> http_;  // an httplib::SSLServer with ssl_cert / ssl_key
  Metrics metrics_;
  std::unique_ptr<pipeline::ContinuousBatchingPipeline> pipe_;
  std::unique_ptr<EngineLoop> loop_;
  ModelInfo model_;
  std::string chat_template_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> stopping_{false};
  std::thread listener_;
};

void send_error(httplib::Response& res, const ApiError& e);
void send_json(httplib::Response& res, const Json& body, int status = 200);

// The chat page (server/webui/index.html, built into the binary).
std::string_view webui_page();

}  // namespace ggflow::server
