// POST /v1/embeddings (OpenAI's shape) on an embedding model: `input` as a string, an array of
// strings, an array of token ids or an array of such arrays; `encoding_format` "float" (default)
// or "base64" (the little-endian f32 bytes, as OpenAI sends them); `dimensions` only as the
// model's own width (its vectors are not trained to be shortened); `user` ignored. Each input is
// tokenized as llama.cpp's embedding tool does ([CLS] ... [SEP], special tokens parsed); the
// inputs run packed several to a run (EmbeddingRunner::embed_many), each whole, pooled as the
// file says and L2-normalized (runtime/embedding_runner.h).
#include <openssl/evp.h>

#include <cstring>

#include "server/http_server.h"

namespace ggflow::server {

namespace {

constexpr size_t kMaxInputs = 2048;  // OpenAI's limit on the array

std::string base64_f32(const std::vector<float>& v) {
  std::string raw(v.size() * sizeof(float), '\0');
  std::memcpy(raw.data(), v.data(), raw.size());  // x86-64 and aarch64: little-endian, as OpenAI's
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(raw.data()),
                                static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

bool is_id_array(const Json& v) {
  if (!v.is_array() || v.empty()) return false;
  for (const auto& x : v)
    if (!x.is_number_integer()) return false;
  return true;
}

// The inputs as token ids; the first problem as the error.
std::optional<ApiError> read_inputs(const Json& input, const text::Tokenizer& tok, int64_t context,
                                    std::vector<std::vector<int32_t>>& out) {
  auto one_text = [&](const Json& s, size_t i) -> std::optional<ApiError> {
    const std::string text = s.get<std::string>();
    if (text.empty()) return invalid("invalid_value", "input", "input " + std::to_string(i) + " is an empty string; give text to embed");
    auto ids = tok.encode(text, text::EncodeOptions{.add_special = true, .parse_special = true});
    if (!ids) return invalid("invalid_value", "input", "input " + std::to_string(i) + " cannot be tokenized: " + ids.error().str());
    out.push_back(std::move(*ids));
    return std::nullopt;
  };
  auto one_ids = [&](const Json& a, size_t i) -> std::optional<ApiError> {
    std::vector<int32_t> ids;
    for (const auto& x : a) {
      const int64_t id = x.get<int64_t>();
      if (id < 0 || id >= tok.n_vocab())
        return invalid("invalid_value", "input", "input " + std::to_string(i) + " holds the token id " + std::to_string(id) +
                                                     ", outside the vocabulary [0, " + std::to_string(tok.n_vocab()) + ")");
      ids.push_back(static_cast<int32_t>(id));
    }
    out.push_back(std::move(ids));
    return std::nullopt;
  };
  if (input.is_string()) {
    if (auto e = one_text(input, 0)) return e;
  } else if (is_id_array(input)) {
    if (auto e = one_ids(input, 0)) return e;
  } else if (input.is_array() && !input.empty()) {
    if (input.size() > kMaxInputs)
      return invalid("invalid_value", "input", std::to_string(input.size()) + " inputs are more than " + std::to_string(kMaxInputs) +
                                                   " per request; split the request");
    for (size_t i = 0; i < input.size(); ++i) {
      const Json& x = input[i];
      std::optional<ApiError> e;
      if (x.is_string()) e = one_text(x, i);
      else if (is_id_array(x)) e = one_ids(x, i);
      else e = invalid("invalid_type", "input", "input " + std::to_string(i) + " must be a string or a non-empty array of token ids");
      if (e) return e;
    }
  } else {
    return invalid(input.is_array() ? "invalid_value" : "invalid_type", "input",
                   "'input' must be a string, an array of strings, an array of token ids or an array of such arrays (not empty)");
  }
  for (size_t i = 0; i < out.size(); ++i)
    if (static_cast<int64_t>(out[i].size()) > context)
      return invalid("invalid_value", "input", "input " + std::to_string(i) + " has " + std::to_string(out[i].size()) +
                                                   " tokens, more than the model's " + std::to_string(context) + "; shorten or split it");
  return std::nullopt;
}

}  // namespace

void Server::embeddings(const std::string& raw, httplib::Response& res) {
  Json body;
  if (auto e = parse_body(raw, body)) return send_error(res, *e);
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "model" && it.key() != "input" && it.key() != "encoding_format" && it.key() != "dimensions" && it.key() != "user")
      return send_error(res, invalid("unknown_field", it.key(), "unknown field '" + it.key() + "'"));
  auto model = lease(body, res);
  if (!model) return;
  if (auto e = check_model(body, model->info())) return send_error(res, *e);
  runtime::EmbeddingRunner* runner = model->embedder();
  if (!runner)
    return send_error(res, invalid("model_not_embedding", "model", "the model '" + model->info().name +
                                                                      "' generates text and has no embedding output; serve an embedding model (BERT, e.g. all-MiniLM) and name it"));
  if (runner->is_reranker())
    return send_error(res, invalid("model_not_embedding", "model", "the model '" + model->info().name +
                                                                      "' is a reranker: it scores documents against a query (POST /v1/rerank) and gives no embeddings"));
  const int64_t width = runner->params().n_embd;
  bool base64 = false;
  if (auto it = body.find("encoding_format"); it != body.end() && !it->is_null()) {
    if (!it->is_string() || (*it != "float" && *it != "base64"))
      return send_error(res, invalid("invalid_value", "encoding_format", "'encoding_format' must be \"float\" or \"base64\""));
    base64 = *it == "base64";
  }
  if (auto it = body.find("dimensions"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) return send_error(res, invalid("invalid_type", "dimensions", "'dimensions' must be an integer"));
    if (it->get<int64_t>() != width)
      return send_error(res, invalid("invalid_value", "dimensions", "the model '" + model->info().name + "' gives " + std::to_string(width) +
                                                                       "-dimensional vectors and cannot shorten them; drop 'dimensions' or give " +
                                                                       std::to_string(width)));
  }
  if (auto it = body.find("user"); it != body.end() && !it->is_null() && !it->is_string())
    return send_error(res, invalid("invalid_type", "user", "'user' must be a string"));
  auto input = body.find("input");
  if (input == body.end() || input->is_null())
    return send_error(res, invalid("missing_field", "input", "'input' is required: the text (or texts) to embed"));
  std::vector<std::vector<int32_t>> inputs;
  if (auto e = read_inputs(*input, model->info().format->tokenizer(), model->info().context, inputs)) return send_error(res, *e);

  std::vector<std::span<const int32_t>> seqs(inputs.begin(), inputs.end());
  Result<std::vector<std::vector<float>>> vectors = [&] {
    std::lock_guard<std::mutex> l(model->embed_mutex());
    return runner->embed_many(seqs);
  }();
  if (!vectors) return send_error(res, {500, "server_error", "embedding_failed", "", "the embedding failed: " + vectors.error().str()});
  Json data = Json::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    tokens += static_cast<int64_t>(inputs[i].size());
    const std::vector<float>& v = (*vectors)[i];
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", base64 ? Json(base64_f32(v)) : Json(v)}});
  }
  send_json(res, {{"object", "list"}, {"data", std::move(data)}, {"model", model->info().name},
                  {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace ggflow::server
