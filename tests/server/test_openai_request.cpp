// The OpenAI request parser on SmolLM2's tokenizer and chat template: what a valid request becomes
// (the prompt ids are the template's rendering, encoded), and the field, code and status of each
// kind of invalid request. The HTTP suites (check_bad_requests.py) cover the same through sockets.
#include <gtest/gtest.h>

#include "require_file.h"

#include "gguf/file.h"
#include "server/openai_request.h"

using namespace ggflow;
using namespace ggflow::server;

namespace {

const std::string kSmol = std::string(GGFLOW_ROOT) + "/models/smollm2-135m-instruct-q4_1.gguf";

class Parse : public ::testing::Test {
 protected:
  void SetUp() override {
    GGFLOW_REQUIRE_FILE(kSmol, "run scripts/setup.sh to install the models");
    static std::shared_ptr<const pipeline::PromptFormat> format = [] {
      auto f = gguf::File::open(kSmol);
      EXPECT_TRUE(f.ok());
      auto p = pipeline::PromptFormat::from_file(*f);
      EXPECT_TRUE(p.ok());
      return *p;
    }();
    model = ModelInfo{"smol", 256, format};
  }
  std::optional<ApiError> chat(const std::string& body, GenerationRequest& r) {
    Json j;
    if (auto e = parse_body(body, j)) return e;
    return parse_chat_request(j, model, r);
  }
  std::optional<ApiError> completion(const std::string& body, GenerationRequest& r) {
    Json j;
    if (auto e = parse_body(body, j)) return e;
    return parse_completion_request(j, model, r);
  }
  // The error of a chat request with `extra` fields added to a valid one.
  ApiError chat_error(const std::string& extra) {
    GenerationRequest r;
    auto e = chat(R"({"messages": [{"role": "user", "content": "hi"}])" + (extra.empty() ? "" : ", " + extra) + "}", r);
    EXPECT_TRUE(e.has_value()) << extra;
    return e.value_or(ApiError{});
  }
  ModelInfo model;
};

TEST_F(Parse, ChatRequestBecomesTheTemplatedPromptAndItsParameters) {
  GenerationRequest r;
  auto e = chat(R"({"model": "smol", "messages": [{"role": "developer", "content": "Be brief."},
                   {"role": "user", "content": [{"type": "text", "text": "What is "}, {"type": "text", "text": "2+2?"}]}],
                   "max_completion_tokens": 12, "temperature": 0.5, "top_p": 0.9, "top_k": -1, "seed": -3,
                   "stop": "\n", "n": 2, "logprobs": true, "top_logprobs": 3, "stream": true,
                   "stream_options": {"include_usage": true}, "logit_bias": {"42": -100}, "user": "u1"})",
                r);
  ASSERT_FALSE(e) << e->message;
  Json messages = Json::array({{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "What is 2+2?"}}});
  auto text = model.format->apply_chat_template(messages, true);
  ASSERT_TRUE(text.ok());
  auto ids = model.format->encode(*text);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, *ids);
  EXPECT_EQ(r.params.max_tokens, 12);
  EXPECT_EQ(r.params.temperature, 0.5);
  EXPECT_EQ(r.params.top_k, 0);
  EXPECT_EQ(r.params.seed.value(), uint64_t(int64_t(-3)));
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"\n"});
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.params.logprobs, 3);
  EXPECT_TRUE(r.stream && r.include_usage);
  ASSERT_EQ(r.params.logit_bias.size(), 1u);
  EXPECT_EQ(r.params.logit_bias[0].first, 42);
}

TEST_F(Parse, ChatDefaultsToTheRestOfTheContext) {
  GenerationRequest r;
  ASSERT_FALSE(chat(R"({"messages": [{"role": "user", "content": "hi"}]})", r));
  EXPECT_EQ(r.params.max_tokens, -1);
  EXPECT_EQ(r.params.logprobs, -1);
  EXPECT_EQ(r.params.temperature, 1.0);
}

TEST_F(Parse, EachInvalidFieldIsNamedWithItsCode) {
  struct Case {
    std::string extra, param, code;
  };
  const std::vector<Case> cases = {
      {R"("temperature": 2.5)", "temperature", "invalid_value"},
      {R"("temperature": "hot")", "temperature", "invalid_type"},
      {R"("top_p": 0)", "top_p", "invalid_value"},
      {R"("min_p": -0.1)", "min_p", "invalid_value"},
      {R"("top_k": -2)", "top_k", "invalid_value"},
      {R"("presence_penalty": 3)", "presence_penalty", "invalid_value"},
      {R"("repetition_penalty": 0)", "repetition_penalty", "invalid_value"},
      {R"("max_tokens": 1.5)", "max_tokens", "invalid_type"},
      {R"("max_tokens": 0)", "max_tokens", "invalid_value"},
      {R"("max_tokens": 9223372036854775808)", "max_tokens", "invalid_value"},
      {R"("max_tokens": 100000)", "max_tokens", "context_length_exceeded"},
      // prompt + max_tokens overflowed int64 in the context check (fuzz/regressions/fuzz_request/)
      {R"("max_tokens": 9223372036854775807)", "max_tokens", "context_length_exceeded"},
      {R"("max_completion_tokens": 9223372036854775800)", "max_tokens", "context_length_exceeded"},
      {R"("n": 17)", "n", "invalid_value"},
      {R"("stream": "yes")", "stream", "invalid_type"},
      {R"("stream_options": {"include_usage": true})", "stream_options", "invalid_value"},
      {R"("stop": ["a", "b", "c", "d", "e"])", "stop", "invalid_value"},
      {R"("stop": [1])", "stop", "invalid_type"},
      {R"("stop": "")", "stop", "invalid_value"},
      {R"("top_logprobs": 2)", "top_logprobs", "invalid_value"},
      {R"("logprobs": true, "top_logprobs": 21)", "top_logprobs", "invalid_value"},
      {R"("logit_bias": {"x": 1})", "logit_bias", "invalid_value"},
      {R"("logit_bias": {"1": 1000})", "logit_bias", "invalid_value"},
      {R"("logit_bias": [1])", "logit_bias", "invalid_type"},
      {R"("seed": "1")", "seed", "invalid_type"},
      {R"("tools": [])", "tools", "invalid_value"},
      {R"("tools": [{"type": "function", "function": {"name": "get weather"}}])", "tools[0].function.name", "invalid_value"},
      {R"("tool_choice": "auto")", "tool_choice", "invalid_value"},
      {R"("functions": [{"name": "f"}])", "functions", "unsupported"},
      {R"("response_format": {"type": "xml"})", "response_format.type", "invalid_value"},
      {R"("response_format": {"type": "json_schema", "json_schema": {"schema": {"not": {}}}})", "response_format.json_schema.schema", "invalid_value"},
      {R"("grammar": "root ::= undefined")", "grammar", "invalid_value"},
      {R"("grammar": "root ::= [a-z]", "json_schema": {"type": "object"})", "grammar", "invalid_value"},
      {R"("frobnicate": 1)", "frobnicate", "unknown_field"},
      // Other engines' extensions: refused at the values ggflow cannot honour.
      {R"("skip_special_tokens": false)", "skip_special_tokens", "unsupported"},
      {R"("no_stop_trim": true)", "no_stop_trim", "unsupported"},
      {R"("continue_final_message": true)", "continue_final_message", "unsupported"},
      {R"("return_hidden_states": true)", "return_hidden_states", "unsupported"},
      {R"("include_reasoning": "yes")", "include_reasoning", "invalid_type"},
  };
  for (const auto& c : cases) {
    ApiError e = chat_error(c.extra);
    EXPECT_EQ(e.status, 400) << c.extra;
    EXPECT_EQ(e.param, c.param) << c.extra << ": " << e.message;
    EXPECT_EQ(e.code, c.code) << c.extra << ": " << e.message;
    EXPECT_FALSE(e.message.empty());
  }
}

// What vllm-router adds to every request it forwards (SGLang's and vLLM's extensions at their
// defaults) is accepted, on both endpoints, and changes nothing.
TEST_F(Parse, RouterExtensionsAtTheirDefaultsAreAccepted) {
  const std::string ext = R"("no_stop_trim": false, "ignore_eos": false, "continue_final_message": false,
      "skip_special_tokens": true, "separate_reasoning": true, "stream_reasoning": true,
      "return_hidden_states": false, "include_reasoning": true)";
  GenerationRequest plain, routed;
  ASSERT_FALSE(chat(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4})", plain));
  auto e = chat(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, )" + ext + "}", routed);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(routed.prompts[0].ids, plain.prompts[0].ids);
  EXPECT_EQ(routed.params.max_tokens, plain.params.max_tokens);
  EXPECT_FALSE(routed.params.ignore_eos);
  GenerationRequest comp;
  e = completion(R"({"prompt": "hi", )" + ext + "}", comp);
  ASSERT_FALSE(e) << e->message;
}

TEST_F(Parse, MessagesAreChecked) {
  struct Case {
    std::string messages, param, code;
  };
  const std::vector<Case> cases = {
      {"[]", "messages", "invalid_value"},
      {R"("hi")", "messages", "invalid_type"},
      {R"([{"content": "hi"}])", "messages[0].role", "missing_field"},
      {R"([{"role": "wizard", "content": "hi"}])", "messages[0].role", "invalid_value"},
      {R"([{"role": "user"}])", "messages[0].content", "missing_field"},
      {R"([{"role": "user", "content": 3}])", "messages[0].content", "invalid_type"},
      {R"([{"role": "user", "content": null}])", "messages[0].content", "invalid_type"},
      {R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])", "messages[0].content[0].type", "unsupported"},
  };
  for (const auto& c : cases) {
    GenerationRequest r;
    auto e = chat(R"({"messages": )" + c.messages + "}", r);
    ASSERT_TRUE(e) << c.messages;
    EXPECT_EQ(e->param, c.param) << c.messages;
    EXPECT_EQ(e->code, c.code) << c.messages;
  }
}

TEST_F(Parse, BodiesThatAreNotAJsonObject) {
  Json j;
  for (const std::string body : {"", "{", "[]", "\"x\"", "null", "{\"a\": 1} trailing", "{\"a\": \"\xff\"}"}) {
    auto e = parse_body(body, j);
    ASSERT_TRUE(e) << body;
    EXPECT_EQ(e->code, "invalid_json") << body;
  }
  auto deep = parse_body(std::string(100000, '[') + std::string(100000, ']'), j);
  ASSERT_TRUE(deep);
  EXPECT_NE(deep->message.find("deeper"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_FALSE(parse_body("{\"a\": \"" + std::string(1000, '[') + "\"}", j));
}

TEST_F(Parse, UnknownModelIs404) {
  GenerationRequest r;
  auto e = chat(R"({"model": "gpt-9", "messages": [{"role": "user", "content": "hi"}]})", r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->status, 404);
  EXPECT_EQ(e->code, "model_not_found");
}

TEST_F(Parse, CompletionPromptForms) {
  GenerationRequest r;
  ASSERT_FALSE(completion(R"({"prompt": "Once upon a time"})", r));
  EXPECT_EQ(r.params.max_tokens, 16);  // OpenAI's completions default
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].ids, *model.format->encode("Once upon a time"));
  ASSERT_FALSE(completion(R"({"prompt": ["a", "b c"], "n": 2})", r));
  EXPECT_EQ(r.num_choices(), 4);
  ASSERT_FALSE(completion(R"({"prompt": [504, 3458, 314], "echo": true})", r));
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{504, 3458, 314}));
  EXPECT_FALSE(r.prompts[0].text.empty());  // echo decodes token prompts
  ASSERT_FALSE(completion(R"({"prompt": [[1, 2], [3]]})", r));
  EXPECT_EQ(r.prompts.size(), 2u);
  // echo + logprobs: the prompt's tokens are scored with as many top tokens.
  ASSERT_FALSE(completion(R"({"prompt": "x", "logprobs": 2, "echo": true})", r));
  EXPECT_EQ(r.params.prompt_logprobs, 2);
  ASSERT_FALSE(completion(R"({"prompt": "x", "logprobs": 2})", r));
  EXPECT_EQ(r.params.prompt_logprobs, -1);

  struct Case {
    std::string body, param, code;
  };
  const std::vector<Case> bad = {
      {R"({})", "prompt", "missing_field"},
      {R"({"prompt": ""})", "prompt", "invalid_value"},
      {R"({"prompt": []})", "prompt", "invalid_value"},
      {R"({"prompt": 3})", "prompt", "invalid_type"},
      {R"({"prompt": [1, -1]})", "prompt", "invalid_value"},
      {R"({"prompt": [99999999]})", "prompt", "invalid_value"},
      {R"({"prompt": "x", "logprobs": 6})", "logprobs", "invalid_value"},
      {R"({"prompt": "x", "suffix": "y"})", "suffix", "invalid_value"},  // the test vocabulary has no FIM tokens
      {R"({"prompt": "x", "suffix": 3})", "suffix", "invalid_type"},
      {R"({"prompt": "x", "best_of": 1, "n": 2})", "best_of", "invalid_value"},
      {R"({"prompt": "x", "best_of": 3, "stream": true})", "best_of", "invalid_value"},
      {R"({"prompt": ["a", "b"], "best_of": 9})", "best_of", "invalid_value"},
      {R"({"prompt": "x", "messages": []})", "messages", "unknown_field"},
      {R"({"prompt": ["a", "b", "c", "d", "e"], "n": 4})", "n", "invalid_value"},
  };
  for (const auto& c : bad) {
    auto e = completion(c.body, r);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body << ": " << e->message;
    EXPECT_EQ(e->code, c.code) << c.body << ": " << e->message;
  }
}

TEST_F(Parse, PromptOverTheContextIsRefusedWithTheArithmetic) {
  GenerationRequest r;
  std::string words;
  for (int i = 0; i < 300; ++i) words += " word";
  auto e = completion(R"({"prompt": ")" + words + R"("})", r);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->code, "context_length_exceeded");
  EXPECT_NE(e->message.find("256"), std::string::npos) << e->message;  // the context size
}

}  // namespace
