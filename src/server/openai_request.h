// OpenAI request bodies -> what the engine runs. Every field of docs/SERVER.md is read with its
// type and range checked; the first problem becomes an ApiError naming the field and the limit.
// Runs on the HTTP threads: it only uses the immutable PromptFormat (tokenizer, chat template).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pipeline/constrained_sampler.h"
#include "pipeline/prompt.h"
#include "pipeline/tool_calls.h"
#include "server/api_error.h"
#include "text/sampler.h"

namespace ggflow::server {

using Json = nlohmann::ordered_json;

// What the request parser needs to know about the served model.
struct ModelInfo {
  std::string name;                                  // the served model name
  int64_t context = 0;                               // tokens per request (prompt + completion)
  std::shared_ptr<const pipeline::PromptFormat> format;
};

struct PromptInput {
  std::vector<int32_t> ids;  // i32 [prompt_len]: what the engine runs
  std::string text;          // the prompt as text (completions' echo)
};

struct GenerationRequest {
  bool chat = true;                  // /v1/chat/completions, else /v1/completions
  std::vector<PromptInput> prompts;  // chat: exactly one
  int32_t n = 1;                     // choices per prompt
  int32_t best_of = 0;               // completions: candidates per prompt, the n most likely answered (0: n)
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  bool echo = false;                 // completions
  bool return_token_ids = false;     // extension: prompt_token_ids / token_ids in the response
  text::SamplingParams params;       // max_tokens -1: the rest of the context
  pipeline::Constraint constraint;   // response_format json_object / json_schema, grammar, json_schema,
                                     // or the tool-call grammar (tool_choice required / named, Generic)
  std::shared_ptr<const pipeline::ToolRequest> tools;  // chat with active tools: answers parsed into tool_calls
  pipeline::ToolFormat tool_format = pipeline::ToolFormat::Generic;
  int64_t num_choices() const { return int64_t(prompts.size()) * n; }
  int32_t candidates() const { return best_of > n ? best_of : n; }  // generated per prompt
  int64_t num_candidates() const { return int64_t(prompts.size()) * candidates(); }
};

// Parses a request body: valid UTF-8 JSON, an object, nested at most kMaxJsonDepth deep.
inline constexpr int kMaxJsonDepth = 64;
std::optional<ApiError> parse_body(const std::string& body, Json& out);

std::optional<ApiError> parse_chat_request(const Json& body, const ModelInfo& model, GenerationRequest& out);
std::optional<ApiError> parse_completion_request(const Json& body, const ModelInfo& model, GenerationRequest& out);

// The chat messages of a request, checked (roles, content as a string or text parts, assistant
// tool_calls, tool results with tool_call_id) and normalized for the chat template (content
// joined into one string; tool_calls and tool_call_id kept).
std::optional<ApiError> parse_messages(const Json* messages, Json& out);

// "a string", "an integer", ...: a JSON value's type for an error message.
const char* type_name(const Json& v);

// `model`, when present, must be the served name (404 model_not_found otherwise).
std::optional<ApiError> check_model(const Json& body, const ModelInfo& model);

}  // namespace ggflow::server
