// OpenAI response bodies (see openai_response.h).
#include "server/openai_response.h"

#include <algorithm>
#include <ctime>
#include <random>

namespace ggflow::server {

namespace {

std::string random_hex(size_t n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* digits = "0123456789abcdef";
  std::string s(n, '0');
  for (auto& c : s) c = digits[rng() & 15];
  return s;
}

std::string piece(const text::Tokenizer& tok, int32_t id) {
  auto p = tok.piece(id, /*render_special=*/true);
  return p ? *p : std::string();
}

Json bytes_of(const std::string& s) {
  Json b = Json::array();
  for (unsigned char c : s) b.push_back(int(c));
  return b;
}

}  // namespace

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

ResponseHead new_head(const GenerationRequest& r, const std::string& model) {
  return {(r.chat ? "chatcmpl-" : "cmpl-") + random_hex(24), int64_t(std::time(nullptr)), model};
}

const char* finish_reason_name(text::FinishReason r) {
  return r == text::FinishReason::None ? nullptr : text::to_string(r);
}

ChoiceState new_choice(const GenerationRequest& r) {
  ChoiceState c;
  if (r.chat && r.tools)
    c.tools = std::make_shared<pipeline::ToolCallParser>(
        pipeline::ToolParseOptions{r.tool_format, r.tools->callable_names(), pipeline::ToolCallIds()});
  return c;
}

Json finish_reason_json(text::FinishReason finish, const pipeline::ToolCallParser* tools) {
  if (finish == text::FinishReason::None) return nullptr;
  if (finish == text::FinishReason::Stop && tools && !tools->result().calls.empty()) return "tool_calls";
  return finish_reason_name(finish);
}

namespace {

Json tool_calls_json(const std::vector<pipeline::ToolCall>& calls) {
  Json out = Json::array();
  for (const auto& call : calls)
    out.push_back({{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
  return out;
}

// The delta of a chat chunk: content, and the tool-call pieces the parser released (OpenAI's
// shape: a call's first piece has id, type, name and empty arguments, later ones arguments only).
Json tool_delta(const std::vector<pipeline::ToolCallEvent>& events) {
  Json delta = Json::object();
  std::string content;
  Json calls = Json::array();
  for (const auto& e : events) {
    using K = pipeline::ToolCallEvent::Kind;
    if (e.kind == K::Content) {
      content += e.text;
    } else if (e.kind == K::CallStart) {
      calls.push_back({{"index", e.index}, {"id", e.id}, {"type", "function"}, {"function", {{"name", e.name}, {"arguments", ""}}}});
    } else if (!calls.empty() && calls.back()["index"] == e.index) {
      calls.back()["function"]["arguments"] = calls.back()["function"]["arguments"].get<std::string>() + e.text;
    } else {
      calls.push_back({{"index", e.index}, {"function", {{"arguments", e.text}}}});
    }
  }
  if (!content.empty()) delta["content"] = content;
  if (!calls.empty()) delta["tool_calls"] = calls;
  return delta;
}

}  // namespace

Json usage_json(const GenerationRequest& r, const std::vector<ChoiceState>& choices) {
  int64_t prompt = 0, completion = 0, cached = 0;
  for (size_t p = 0; p < r.prompts.size(); ++p) {
    prompt += int64_t(r.prompts[p].ids.size());
    int64_t best = 0;
    for (int32_t i = 0; i < r.n; ++i) {
      const ChoiceState& c = choices[p * size_t(r.n) + size_t(i)];
      completion += int64_t(c.tokens.size());
      best = std::max(best, c.usage.cached_tokens);
    }
    cached += best;
  }
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion},
          {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

Json chat_logprobs_json(const text::Tokenizer& tok, const std::vector<text::StepLogprobs>& lp) {
  Json content = Json::array();
  for (const auto& step : lp) {
    const std::string t = piece(tok, step.chosen.token);
    Json top = Json::array();
    for (const auto& alt : step.top) {
      const std::string a = piece(tok, alt.token);
      top.push_back({{"token", a}, {"logprob", alt.logprob}, {"bytes", bytes_of(a)}});
    }
    content.push_back({{"token", t}, {"logprob", step.chosen.logprob}, {"bytes", bytes_of(t)}, {"top_logprobs", top}});
  }
  return {{"content", content}, {"refusal", nullptr}};
}

Json completion_logprobs_json(const text::Tokenizer& tok, const std::vector<text::StepLogprobs>& lp, size_t& text_offset) {
  Json tokens = Json::array(), token_lp = Json::array(), top = Json::array(), offsets = Json::array();
  for (const auto& step : lp) {
    const std::string t = piece(tok, step.chosen.token);
    tokens.push_back(t);
    token_lp.push_back(step.chosen.logprob);
    Json alts = Json::object();
    for (const auto& alt : step.top) alts[piece(tok, alt.token)] = alt.logprob;
    top.push_back(alts);
    offsets.push_back(text_offset);
    text_offset += t.size();
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lp}, {"top_logprobs", top}, {"text_offset", offsets}};
}

Json prompt_logprobs_json(const text::Tokenizer& tok, const std::vector<int32_t>& ids,
                          const std::vector<text::StepLogprobs>& lp) {
  Json tokens = Json::array(), token_lp = Json::array(), top = Json::array(), offsets = Json::array();
  size_t offset = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string t = piece(tok, ids[i]);
    tokens.push_back(t);
    offsets.push_back(offset);
    offset += t.size();
    if (i == 0 || i - 1 >= lp.size()) {  // nothing before the first token (or the prompt failed)
      token_lp.push_back(nullptr);
      top.push_back(nullptr);
      continue;
    }
    const text::StepLogprobs& step = lp[i - 1];
    token_lp.push_back(step.chosen.logprob);
    Json alts = Json::object();
    for (const auto& alt : step.top) alts[piece(tok, alt.token)] = alt.logprob;
    top.push_back(alts);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_lp}, {"top_logprobs", top}, {"text_offset", offsets}};
}

Json concat_logprobs_json(Json a, const Json& b) {
  for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    for (const Json& v : b[k]) a[k].push_back(v);
  return a;
}

Json response_json(const ResponseHead& head, const GenerationRequest& r, const std::vector<ChoiceState>& choices,
                   const text::Tokenizer& tok) {
  Json out = {{"id", head.id},
              {"object", r.chat ? "chat.completion" : "text_completion"},
              {"created", head.created},
              {"model", head.model},
              {"system_fingerprint", "ggflow"}};
  Json list = Json::array();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ChoiceState& c = choices[i];
    Json ch = {{"index", i}};
    const bool with_lp = r.params.logprobs >= 0;
    if (r.chat && c.tools) {
      const auto& parsed = c.tools->result();
      ch["message"] = {{"role", "assistant"}, {"content", parsed.calls.empty() || !parsed.content.empty() ? Json(parsed.content) : Json(nullptr)}};
      if (!parsed.calls.empty()) ch["message"]["tool_calls"] = tool_calls_json(parsed.calls);
      ch["logprobs"] = with_lp ? chat_logprobs_json(tok, c.logprobs) : Json(nullptr);
    } else if (r.chat) {
      ch["message"] = {{"role", "assistant"}, {"content", c.text}};
      ch["logprobs"] = with_lp ? chat_logprobs_json(tok, c.logprobs) : Json(nullptr);
    } else {
      ch["text"] = c.text;
      const PromptInput& prompt = r.prompts[i / size_t(r.n)];
      size_t offset = r.echo ? prompt.text.size() : 0;
      ch["logprobs"] = with_lp ? completion_logprobs_json(tok, c.logprobs, offset) : Json(nullptr);
      if (with_lp && r.echo)
        ch["logprobs"] = concat_logprobs_json(prompt_logprobs_json(tok, prompt.ids, c.prompt_logprobs), ch["logprobs"]);
    }
    ch["finish_reason"] = finish_reason_json(c.finish, c.tools.get());
    if (r.return_token_ids) ch["token_ids"] = c.tokens;
    list.push_back(ch);
  }
  out["choices"] = list;
  out["usage"] = usage_json(r, choices);
  if (r.return_token_ids) {
    Json ids = Json::array();
    for (const auto& p : r.prompts) ids.push_back(p.ids);
    out["prompt_token_ids"] = r.prompts.size() == 1 ? ids[0] : ids;
  }
  return out;
}

Json chunk_json(const ResponseHead& head, const GenerationRequest& r, Json choices) {
  Json out = {{"id", head.id},
              {"object", r.chat ? "chat.completion.chunk" : "text_completion"},
              {"created", head.created},
              {"model", head.model},
              {"system_fingerprint", "ggflow"},
              {"choices", std::move(choices)}};
  if (r.include_usage) out["usage"] = nullptr;
  return out;
}

Json chunk_choice(const GenerationRequest& r, const RequestEvent& e, const text::Tokenizer& tok, ChoiceState& st) {
  Json ch = {{"index", e.index}};
  const bool with_lp = r.params.logprobs >= 0 && !e.logprobs.empty();
  if (r.chat && st.tools) {
    auto events = st.tools->push(e.text);
    if (e.done)
      for (auto& ev : st.tools->finish()) events.push_back(std::move(ev));
    ch["delta"] = tool_delta(events);
    ch["logprobs"] = with_lp ? chat_logprobs_json(tok, e.logprobs) : Json(nullptr);
  } else if (r.chat) {
    ch["delta"] = e.text.empty() ? Json::object() : Json{{"content", e.text}};
    ch["logprobs"] = with_lp ? chat_logprobs_json(tok, e.logprobs) : Json(nullptr);
  } else {
    ch["text"] = e.text;
    ch["logprobs"] = with_lp ? completion_logprobs_json(tok, e.logprobs, st.text_offset) : Json(nullptr);
  }
  ch["finish_reason"] = e.done ? finish_reason_json(e.finish, st.tools.get()) : Json(nullptr);
  if (r.return_token_ids) ch["token_ids"] = e.tokens;
  return ch;
}

}  // namespace ggflow::server
