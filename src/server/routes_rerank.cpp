// POST /v1/rerank (also /rerank and /v1/reranking, as llama-server) on a reranker (a BERT
// cross-encoder with pooling rank): llama-server's and Jina's shape. `query` a string;
// `documents` an array of strings (or Cohere's {"text": ...} objects); `top_n` the number of
// results (default: all); `return_documents` adds each document's text. Each pair is framed as
// llama.cpp frames it (text::Tokenizer::encode_pair, special tokens in the texts not parsed), the
// pairs run packed (EmbeddingRunner::score_many), and the results come sorted by relevance_score,
// the head's first output as llama-server reports it (not normalized), highest first (ties: in
// document order).
#include <algorithm>
#include <numeric>

#include "server/http_server.h"

namespace ggflow::server {

namespace {

constexpr size_t kMaxDocuments = 1000;  // Cohere's and Jina's limit per request

// The documents' texts; the first problem as the error.
std::optional<ApiError> read_documents(const Json* docs, std::vector<std::string>& out) {
  if (!docs) return invalid("missing_field", "documents", "'documents' is required: the texts to rank against the query");
  if (!docs->is_array() || docs->empty())
    return invalid(docs->is_array() ? "invalid_value" : "invalid_type", "documents", "'documents' must be a non-empty array of strings");
  if (docs->size() > kMaxDocuments)
    return invalid("invalid_value", "documents", std::to_string(docs->size()) + " documents are more than " + std::to_string(kMaxDocuments) +
                                                     " per request; split the request");
  for (size_t i = 0; i < docs->size(); ++i) {
    const Json& d = (*docs)[i];
    const Json* text = d.is_string() ? &d : d.is_object() && d.contains("text") ? &d["text"] : nullptr;
    if (!text || !text->is_string())
      return invalid("invalid_type", "documents", "document " + std::to_string(i) + " must be a string (or an object with a string 'text')");
    out.push_back(text->get<std::string>());
  }
  return std::nullopt;
}

}  // namespace

void Server::rerank(const std::string& raw, httplib::Response& res) {
  Json body;
  if (auto e = parse_body(raw, body)) return send_error(res, *e);
  for (auto it = body.begin(); it != body.end(); ++it)
    if (it.key() != "model" && it.key() != "query" && it.key() != "documents" && it.key() != "top_n" && it.key() != "return_documents")
      return send_error(res, invalid("unknown_field", it.key(), "unknown field '" + it.key() + "'"));
  auto model = lease(body, res);
  if (!model) return;
  if (auto e = check_model(body, model->info())) return send_error(res, *e);
  runtime::EmbeddingRunner* runner = model->embedder();
  if (!runner || !runner->is_reranker())
    return send_error(res, invalid("model_not_reranker", "model", "the model '" + model->info().name + "' is not a reranker (" +
                                                                     (runner ? "an embedding model: POST /v1/embeddings" : "a text generation model") +
                                                                     "); serve a reranker (a BERT cross-encoder GGUF with pooling rank) and name it"));
  auto query = body.find("query");
  if (query == body.end() || query->is_null())
    return send_error(res, invalid("missing_field", "query", "'query' is required: the text to rank the documents against"));
  if (!query->is_string()) return send_error(res, invalid("invalid_type", "query", std::string("'query' must be a string, got ") + type_name(*query)));
  std::vector<std::string> docs;
  const auto docs_it = body.find("documents");
  if (auto e = read_documents(docs_it == body.end() || docs_it->is_null() ? nullptr : &*docs_it, docs)) return send_error(res, *e);
  size_t top_n = docs.size();
  if (auto it = body.find("top_n"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1)
      return send_error(res, invalid("invalid_value", "top_n", "'top_n' must be an integer of at least 1"));
    top_n = std::min(top_n, size_t(it->get<int64_t>()));
  }
  bool return_documents = false;
  if (auto it = body.find("return_documents"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return send_error(res, invalid("invalid_type", "return_documents", "'return_documents' must be true or false"));
    return_documents = it->get<bool>();
  }

  const text::Tokenizer& tok = model->info().format->tokenizer();
  const text::EncodeOptions plain{.add_special = false, .parse_special = false};
  std::vector<std::vector<int32_t>> pairs;
  int64_t tokens = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    auto ids = tok.encode_pair(query->get<std::string>(), docs[i], plain);
    if (!ids) return send_error(res, invalid("invalid_value", "documents", "document " + std::to_string(i) + " cannot be tokenized: " + ids.error().str()));
    if (static_cast<int64_t>(ids->size()) > model->info().context)
      return send_error(res, invalid("invalid_value", "documents", "the query with document " + std::to_string(i) + " is " +
                                                                       std::to_string(ids->size()) + " tokens, more than the model's " +
                                                                       std::to_string(model->info().context) + "; shorten them"));
    tokens += static_cast<int64_t>(ids->size());
    pairs.push_back(std::move(*ids));
  }
  std::vector<std::span<const int32_t>> seqs(pairs.begin(), pairs.end());
  Result<std::vector<std::vector<float>>> scores = [&] {
    std::lock_guard<std::mutex> l(model->embed_mutex());
    return runner->score_many(seqs);
  }();
  if (!scores) return send_error(res, {500, "server_error", "rerank_failed", "", "the reranking failed: " + scores.error().str()});
  std::vector<size_t> order(docs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return (*scores)[a][0] > (*scores)[b][0]; });
  Json results = Json::array();
  for (size_t k = 0; k < top_n; ++k) {
    const size_t i = order[k];
    Json r = {{"index", i}, {"relevance_score", (*scores)[i][0]}};
    if (return_documents) r["document"] = {{"text", docs[i]}};
    results.push_back(std::move(r));
  }
  send_json(res, {{"model", model->info().name}, {"object", "list"}, {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}},
                  {"results", std::move(results)}});
}

}  // namespace ggflow::server
