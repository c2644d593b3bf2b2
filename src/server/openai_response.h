// OpenAI response bodies: completions, chat completions and their stream chunks, log-probabilities
// and usage, built from the engine loop's events (docs/SERVER.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "server/engine_loop.h"
#include "server/openai_request.h"
#include "text/tokenizer.h"

namespace ggflow::server {

// The envelope every response and chunk of one request shares.
struct ResponseHead {
  std::string id;       // chatcmpl-… / cmpl-…
  int64_t created = 0;  // unix seconds
  std::string model;
};
ResponseHead new_head(const GenerationRequest& r, const std::string& model);

const char* finish_reason_name(text::FinishReason r);

// One choice's state while its events come in.
struct ChoiceState {
  std::string text;                          // completions: starts with the echoed prompt
  std::vector<int32_t> tokens;
  std::vector<text::StepLogprobs> logprobs;
  std::vector<text::StepLogprobs> prompt_logprobs;  // echo + logprobs: prompt tokens 1..
  size_t text_offset = 0;                    // completions' logprobs.text_offset of the next token
  bool done = false;
  text::FinishReason finish = text::FinishReason::None;
  std::string error;
  serving::RequestUsage usage;
  std::shared_ptr<pipeline::ToolCallParser> tools;  // chat with tools: the answer's calls, as they stream
};

// A choice's state for `r` (a tool-call parser when the request has tools).
ChoiceState new_choice(const GenerationRequest& r);
// The finish reason OpenAI gives: "tool_calls" when the answer stopped after calls (`tools`: the
// choice's parser, null without tools).
Json finish_reason_json(text::FinishReason finish, const pipeline::ToolCallParser* tools);

// Usage of the whole request: each prompt counted once, completions summed, cached tokens of the
// best choice per prompt.
Json usage_json(const GenerationRequest& r, const std::vector<ChoiceState>& choices);

// Log-probabilities in the chat shape ({"content": [...]}) or the completions shape.
Json chat_logprobs_json(const text::Tokenizer& tok, const std::vector<text::StepLogprobs>& lp);
Json completion_logprobs_json(const text::Tokenizer& tok, const std::vector<text::StepLogprobs>& lp, size_t& text_offset);
// The echoed prompt's part of the completions shape: `ids` (the prompt), the first token with
// null log-probabilities, token i >= 1 with lp[i - 1]; text offsets from 0.
Json prompt_logprobs_json(const text::Tokenizer& tok, const std::vector<int32_t>& ids,
                          const std::vector<text::StepLogprobs>& lp);
// `a` then `b` (two completions-shaped logprobs objects).
Json concat_logprobs_json(Json a, const Json& b);

// The full (non-streaming) response.
Json response_json(const ResponseHead& head, const GenerationRequest& r, const std::vector<ChoiceState>& choices,
                   const text::Tokenizer& tok);

// Stream chunks: the opening chunk of a chat choice, a chunk for one event, the usage chunk.
Json chunk_json(const ResponseHead& head, const GenerationRequest& r, Json choices);
Json chunk_choice(const GenerationRequest& r, const RequestEvent& e, const text::Tokenizer& tok, ChoiceState& st);

// JSON text that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string dump(const Json& j);

}  // namespace ggflow::server
