// libFuzzer target for the server's request parsing and validation (server/openai_request.h):
// server::parse_body, then parse_chat_request or parse_completion_request with SmolLM2's
// PromptFormat, including the context check (prompt + max_tokens within the model's context).
//
// Input: byte 0 = s: bit 0 picks the endpoint (0 chat, 1 completions), bits 1-2 the served
// context (16, 256, 2048 or 8192 tokens); the rest is the HTTP body as the server receives it.
// Checked: never a crash; every refusal is an ApiError with a non-empty code and message, a status
// in {400, 404, 413} and the type that status implies; an accepted request is one the engine can
// run: chat has exactly one prompt, every prompt has ids in the vocabulary, n in [1, 16] and at
// most 16 choices in all, sampling parameters that pass SamplingParams::validate(n_vocab), and
// prompt + max_tokens (at least 1) within the context.
// Needs models/smollm2-135m-instruct-q4_1.gguf (scripts/setup.sh); scripts/fuzz.sh skips the
// target without it (fails under GGFLOW_REQUIRE_MODELS=1).
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "server/openai_request.h"

using namespace ggflow;
using namespace ggflow::server;

namespace {

std::shared_ptr<const pipeline::PromptFormat> g_format;

void check_error(const ApiError& e) {
  FUZZ_CHECK(e.status == 400 || e.status == 404 || e.status == 413, "status %d (%s: %s)", e.status, e.code.c_str(),
             e.message.c_str());
  FUZZ_CHECK(!e.code.empty() && !e.message.empty(), "ApiError without code or message (%d)", e.status);
  FUZZ_CHECK(e.type == (e.status == 404 ? "not_found_error" : "invalid_request_error"), "status %d with type %s",
             e.status, e.type.c_str());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_format = fuzz::load_format(fuzz::smollm2_path());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = !(data[0] & 1);
  static const int64_t kContexts[] = {16, 256, 2048, 8192};
  const ModelInfo model{"smol", kContexts[(data[0] >> 1) & 3], g_format};
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  Json j;
  if (auto e = parse_body(body, j)) {
    check_error(*e);
    return 0;
  }
  GenerationRequest r;
  if (auto e = chat ? parse_chat_request(j, model, r) : parse_completion_request(j, model, r)) {
    check_error(*e);
    return 0;
  }
  const int32_t n_vocab = g_format->tokenizer().n_vocab();
  FUZZ_CHECK(r.chat == chat, "endpoint");
  FUZZ_CHECK(!r.prompts.empty() && (!chat || r.prompts.size() == 1), "%zu prompts", r.prompts.size());
  FUZZ_CHECK(r.n >= 1 && r.n <= 16 && r.num_choices() <= 16, "n = %d, %lld choices", r.n, (long long)r.num_choices());
  auto st = r.params.validate(n_vocab);
  FUZZ_CHECK(st.ok(), "accepted parameters fail validation: %s", st.error().str().c_str());
  FUZZ_CHECK(!r.include_usage || r.stream, "include_usage without stream");
  for (const auto& p : r.prompts) {
    FUZZ_CHECK(!p.ids.empty(), "empty prompt accepted");
    for (int32_t id : p.ids) FUZZ_CHECK(id >= 0 && id < n_vocab, "prompt id %d", id);
    const int64_t want = r.params.max_tokens > 0 ? r.params.max_tokens : 1;
    FUZZ_CHECK(int64_t(p.ids.size()) <= model.context - want, "%zu prompt tokens + %lld over the %lld context",
               p.ids.size(), (long long)want, (long long)model.context);
  }
  return 0;
}
