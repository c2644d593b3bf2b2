// libFuzzer target for chat messages -> prompt, the path of every chat request: the input as JSON
// (any value: what a client sends as `messages`), server::parse_messages (roles, content strings
// or text parts), then SmolLM2's PromptFormat: its chat template (ChatML, from the model file) and
// encode (special tokens parsed, as the server does).
// Checked: a refusal is a 400 ApiError with a code, a message and a `param` naming the messages
// field at fault; accepted messages are normalized ({role: system|user|assistant|tool, content:
// string}, plus an assistant's tool_calls or a tool message's tool_call_id; one per input
// message); SmolLM2's template renders every normalized conversation (through the tool-calling
// renderer when it has tool turns, as the server does), and without tool turns the rendering
// holds every message's content; encode succeeds with ids in the vocabulary, and
// decoding them with special tokens shown gives back the rendered text exactly (byte-level BPE,
// no BOS added by this vocabulary), except for the bytes SmolLM2's vocabulary has no token for
// (04 06 13 14 16 1D F1 F2 ...: dropped, as tokenizer.h documents).
// Needs models/smollm2-135m-instruct-q4_1.gguf (scripts/setup.sh); scripts/fuzz.sh skips the
// target without it (fails under GGFLOW_REQUIRE_MODELS=1).
#include <cstdint>
#include <string>

#include "fuzz_common.h"
#include "server/openai_request.h"
#include "text/unicode.h"

using namespace ggflow;
using Json = nlohmann::ordered_json;

namespace {

std::shared_ptr<const pipeline::PromptFormat> g_format;
bool g_missing[256];  // bytes without a token of their own in SmolLM2's byte-level vocabulary

// `s` without the bytes the vocabulary cannot write (tokenizer.h: dropped where no merged token
// covers them), so that the round trip can be compared exactly on everything else.
std::string without_missing_bytes(const std::string& s) {
  std::string out;
  for (unsigned char c : s)
    if (!g_missing[c]) out += char(c);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_format = fuzz::load_format(fuzz::smollm2_path());
  for (int b = 0; b < 256; ++b) g_missing[b] = g_format->tokenizer().find_token(text::byte_to_unicode()[b]) < 0;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Json in = Json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) return 0;
  Json messages;
  if (auto e = server::parse_messages(&in, messages)) {
    FUZZ_CHECK(e->status == 400 && !e->code.empty() && !e->message.empty(), "bad ApiError %d %s: %s", e->status,
               e->code.c_str(), e->message.c_str());
    FUZZ_CHECK(e->param.rfind("messages", 0) == 0, "param '%s' does not name the messages field", e->param.c_str());
    return 0;
  }
  FUZZ_CHECK(messages.is_array() && messages.size() == in.size(), "normalized %zu messages into %zu", in.size(),
             messages.size());
  bool tool_turns = false;
  for (const auto& m : messages) {
    const std::string role = m.is_object() && m.contains("role") ? m.at("role").get<std::string>() : "";
    const bool extra = (role == "assistant" && m.contains("tool_calls")) || (role == "tool" && m.contains("tool_call_id"));
    tool_turns |= extra;
    FUZZ_CHECK(m.is_object() && m.size() == (extra ? 3u : 2u) && m.at("content").is_string(), "not normalized: %s",
               m.dump().c_str());
    FUZZ_CHECK(role == "system" || role == "user" || role == "assistant" || role == "tool", "role '%s'", role.c_str());
  }
  // As the server renders them: a conversation with tool turns goes through the tool-calling
  // renderer (pipeline/tool_calls.h; SmolLM2's template has no tools: the Generic format).
  auto text = tool_turns ? g_format->apply_chat_template(messages, pipeline::ToolRequest{}, true)
                         : g_format->apply_chat_template(messages, /*add_generation_prompt=*/true);
  FUZZ_CHECK(text.ok(), "SmolLM2's template failed: %s", text.error().str().c_str());
  if (!tool_turns)  // the tool renderer may rewrite tool turns (calls and results as text)
    for (const auto& m : messages)
      FUZZ_CHECK(text->find(m.at("content").get<std::string>()) != std::string::npos, "content missing from the prompt");
  auto ids = g_format->encode(*text);
  FUZZ_CHECK(ids.ok(), "encode of the rendered prompt failed: %s", ids.error().str().c_str());
  const auto& tok = g_format->tokenizer();
  for (int32_t id : *ids) FUZZ_CHECK(id >= 0 && id < tok.n_vocab(), "id %d", id);
  auto back = tok.decode(*ids, {.render_special = true});
  FUZZ_CHECK(back.ok(), "decode failed: %s", back.error().str().c_str());
  FUZZ_CHECK(without_missing_bytes(*back) == without_missing_bytes(*text), "decode(encode(prompt)) differs from the prompt");
  return 0;
}
