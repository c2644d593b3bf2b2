// The tokenizer routes: POST /tokenize and /detokenize in llama-server's shape ("content") and in
// vLLM's ("prompt" or "messages", with "model"; what vllm-router asks a replica for cache-aware
// routing), and llama-server's /apply-template.
#include "server/http_server.h"
#include "server/openai_response.h"

namespace ggflow::server {

namespace {

// Refuses fields other than `allowed` (the same rule as the OpenAI routes).
std::optional<ApiError> only_fields(const Json& body, std::initializer_list<const char*> allowed) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || it.key() == a;
    if (!ok) return invalid("unknown_field", it.key(), "unknown field '" + it.key() + "'");
  }
  return std::nullopt;
}

std::optional<ApiError> optional_bool(const Json& body, const char* key, bool& out) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) return invalid("invalid_type", key, std::string("'") + key + "' must be a boolean");
  out = it->get<bool>();
  return std::nullopt;
}

// vLLM's /tokenize: {"prompt": text, "add_special_tokens": true} or {"messages": [...],
// "add_generation_prompt": true}, both with an optional "model" and "return_token_strs"; answers
// {"count", "max_model_len", "tokens", "token_strs"}. The tokens of "messages" are exactly those
// /v1/chat/completions runs for them (same template, same encoding).
void vllm_tokenize(const Json& body, const ModelInfo& model, httplib::Response& res) {
  const bool chat = body.contains("messages");
  if (auto e = chat ? only_fields(body, {"model", "messages", "add_generation_prompt", "continue_final_message",
                                         "add_special_tokens", "return_token_strs"})
                    : only_fields(body, {"model", "prompt", "add_special_tokens", "return_token_strs"}))
    return send_error(res, *e);
  if (auto e = check_model(body, model)) return send_error(res, *e);
  bool add_special = !chat, add_generation_prompt = true, continue_final = false, token_strs = false;
  for (auto [key, out] : {std::pair<const char*, bool*>{"add_special_tokens", &add_special},
                          {"add_generation_prompt", &add_generation_prompt},
                          {"continue_final_message", &continue_final},
                          {"return_token_strs", &token_strs}})
    if (auto e = optional_bool(body, key, *out)) return send_error(res, *e);
  if (continue_final)
    return send_error(res, invalid("unsupported", "continue_final_message",
                                   "'continue_final_message': true is not supported: the chat template always opens a new assistant turn"));
  Result<std::vector<int32_t>> ids = std::vector<int32_t>{};
  if (chat) {
    Json messages;
    if (auto e = parse_messages(&body["messages"], messages)) return send_error(res, *e);
    auto rendered = model.format->apply_chat_template(messages, add_generation_prompt);
    if (!rendered) return send_error(res, invalid("invalid_value", "messages", "the chat template failed: " + rendered.error().str()));
    ids = model.format->encode(*rendered);
  } else {
    const Json& prompt = body["prompt"];
    if (!prompt.is_string()) return send_error(res, invalid("invalid_type", "prompt", "'prompt' must be a string"));
    if (!prompt.get<std::string>().empty())
      ids = model.format->tokenizer().encode(prompt.get<std::string>(), text::EncodeOptions{.add_special = add_special, .parse_special = true});
  }
  if (!ids) return send_error(res, invalid("invalid_value", chat ? "messages" : "prompt", "cannot tokenize: " + ids.error().str()));
  Json strs = nullptr;
  if (token_strs) {
    strs = Json::array();
    for (int32_t id : *ids) {
      auto piece = model.format->tokenizer().piece(id, true);
      strs.push_back(piece ? *piece : std::string());
    }
  }
  send_json(res, {{"count", ids->size()}, {"max_model_len", model.context}, {"tokens", *ids}, {"token_strs", strs}});
}

}  // namespace

void Server::tokenize(const std::string& raw, httplib::Response& res) {
  Json body;
  if (auto e = parse_body(raw, body)) return send_error(res, *e);
  auto model = lease(body, res);
  if (!model) return;
  if (body.contains("prompt") || body.contains("messages")) return vllm_tokenize(body, model->info(), res);
  if (auto e = only_fields(body, {"content", "add_special", "with_pieces", "parse_special"})) return send_error(res, *e);
  auto content = body.find("content");
  if (content == body.end()) return send_error(res, invalid("missing_field", "content", "'content' is required: the text to tokenize"));
  if (!content->is_string()) return send_error(res, invalid("invalid_type", "content", "'content' must be a string"));
  text::EncodeOptions opt;
  opt.add_special = false;  // llama-server's default
  opt.parse_special = true;
  bool with_pieces = false;
  for (auto [key, out] : {std::pair<const char*, bool*>{"add_special", &opt.add_special}, {"parse_special", &opt.parse_special},
                          {"with_pieces", &with_pieces}})
    if (auto e = optional_bool(body, key, *out)) return send_error(res, *e);
  const auto& tok = model->info().format->tokenizer();
  const std::string text = content->get<std::string>();
  if (text.empty()) return send_json(res, {{"tokens", Json::array()}});
  auto ids = tok.encode(text, opt);
  if (!ids) return send_error(res, invalid("invalid_value", "content", "cannot tokenize: " + ids.error().str()));
  Json tokens = Json::array();
  for (int32_t id : *ids) {
    if (!with_pieces) {
      tokens.push_back(id);
      continue;
    }
    auto piece = tok.piece(id, true);
    tokens.push_back({{"id", id}, {"piece", piece ? *piece : std::string()}});
  }
  send_json(res, {{"tokens", tokens}});
}

void Server::detokenize(const std::string& raw, httplib::Response& res) {
  Json body;
  if (auto e = parse_body(raw, body)) return send_error(res, *e);
  // llama-server's shape; vLLM's adds "model" and reads the text as "prompt": both are answered.
  if (auto e = only_fields(body, {"tokens", "model"})) return send_error(res, *e);
  auto model = lease(body, res);
  if (!model) return;
  if (auto e = check_model(body, model->info())) return send_error(res, *e);
  auto tokens = body.find("tokens");
  if (tokens == body.end()) return send_error(res, invalid("missing_field", "tokens", "'tokens' is required: an array of token ids"));
  if (!tokens->is_array()) return send_error(res, invalid("invalid_type", "tokens", "'tokens' must be an array of token ids"));
  const auto& tok = model->info().format->tokenizer();
  std::vector<int32_t> ids;
  for (const auto& t : *tokens) {
    if (!t.is_number_integer()) return send_error(res, invalid("invalid_type", "tokens", "'tokens' must hold integers, got " + dump(t)));
    if (t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.n_vocab())
      return send_error(res, invalid("invalid_value", "tokens", "'tokens' must hold token ids in [0, " + std::to_string(tok.n_vocab()) +
                                                                    "), got " + dump(t)));
    ids.push_back(int32_t(t.get<int64_t>()));
  }
  auto text = tok.decode(ids);
  if (!text) return send_error(res, invalid("invalid_value", "tokens", text.error().str()));
  send_json(res, {{"content", *text}, {"prompt", *text}});
}

void Server::apply_template(const std::string& raw, httplib::Response& res) {
  Json body;
  if (auto e = parse_body(raw, body)) return send_error(res, *e);
  if (auto e = only_fields(body, {"messages", "model"})) return send_error(res, *e);
  auto model = lease(body, res);
  if (!model) return;
  if (auto e = check_model(body, model->info())) return send_error(res, *e);
  Json messages;
  auto it = body.find("messages");
  if (auto e = parse_messages(it == body.end() || it->is_null() ? nullptr : &*it, messages)) return send_error(res, *e);
  auto prompt = model->info().format->apply_chat_template(messages, true);
  if (!prompt) return send_error(res, invalid("invalid_value", "messages", "the chat template failed: " + prompt.error().str()));
  send_json(res, {{"prompt", *prompt}});
}

}  // namespace ggflow::server
