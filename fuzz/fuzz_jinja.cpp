// libFuzzer target for the chat-template engine (text/template.h, jinja_*): parse a template and
// render it with a conversation, both from the input, under the engine's own sandbox limits
// (jinja::Limits defaults, as the server runs them).
//
// Input: the template source, a NUL byte, then the render inputs (write_seeds.cpp writes each
// shared chat template this way). The inputs are JSON when they parse as such: an object gives
// `messages`, `tools`, `add_generation_prompt` and any other key as an extra variable (so the
// template may see messages of any type and shape); an array is the messages. Anything else
// becomes the content of one user message (raw bytes, possibly not UTF-8). Without a NUL the
// whole input is the template and the conversation is one short user message.
// Checked: parse and render never crash, leak or overflow the stack, failures are Errors with a
// message, and the text of a successful render respects the output limit. Time and memory are
// bounded by the engine's own limits (jinja::Limits: source size, nesting, loop iterations,
// recursion, evaluation steps, bytes built, string and list sizes, output), run here at a tenth
// of the step/byte/iteration budgets: libFuzzer's -timeout and -rss_limit_mb (scripts/fuzz.sh)
// report any input that escapes them.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_common.h"
#include "text/template.h"

using namespace ggflow;
using Json = nlohmann::ordered_json;

namespace {

text::ChatInputs read_inputs(std::string_view s) {
  text::ChatInputs in;
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  Json j = Json::parse(s.begin(), s.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {  // moved, not copied (a copy recurses)
      if (it.key() == "messages") in.messages = std::move(*it);
      else if (it.key() == "tools") in.tools = std::move(*it);
      else if (it.key() == "add_generation_prompt") in.add_generation_prompt = it->is_boolean() && it->get<bool>();
      else in.extra[it.key()] = std::move(*it);
    }
  } else if (j.is_array()) {
    in.messages = std::move(j);
  } else {
    in.messages = Json::array({{{"role", "user"}, {"content", std::string(s)}}});
    in.add_generation_prompt = true;
  }
  return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string source(all.substr(0, nul));
  auto tmpl = text::ChatTemplate::parse(source);
  if (!tmpl) {
    FUZZ_CHECK(!tmpl.error().what.empty(), "parse error without a message");
    return 0;
  }
  // A tenth of the server's step, byte and iteration budgets: the same limit checks run, hostile
  // templates end ten times sooner, and any work the engine does not charge to its budgets stands
  // out against libFuzzer's -timeout (scripts/fuzz.sh) instead of hiding under a large budget.
  tmpl->limits.max_steps /= 10;
  tmpl->limits.max_bytes /= 10;
  tmpl->limits.max_iterations /= 10;
  text::ChatInputs in = nul == std::string_view::npos
                            ? read_inputs(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}])")
                            : read_inputs(all.substr(nul + 1));
  auto out = tmpl->render(in);
  if (!out) {
    FUZZ_CHECK(!out.error().what.empty(), "render error without a message");
    return 0;
  }
  FUZZ_CHECK(out->size() <= tmpl->limits.max_output, "rendered %zu bytes, over the %zu-byte limit", out->size(),
             tmpl->limits.max_output);
  return 0;
}
