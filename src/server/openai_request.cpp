// OpenAI request parsing and validation (see openai_request.h and docs/SERVER.md).
#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <set>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace ggflow::server {

const char* type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

namespace {

std::string num(double v) {
  std::string s = std::to_string(v);
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

// Reads the fields of one request object; the first error sticks. Every key read (or declared
// ignored) is known; check_unknown() refuses the rest.
class Fields {
 public:
  explicit Fields(const Json& body) : body_(body) {}

  std::optional<ApiError> error;

  // The value, or nullptr when absent or null (null means "default" in OpenAI's API).
  const Json* get(const std::string& key) {
    known_.insert(key);
    auto it = body_.find(key);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }
  bool fail(ApiError e) {
    if (!error) error = std::move(e);
    return false;
  }
  bool wrong_type(const std::string& key, const Json& v, const char* want) {
    return fail(invalid("invalid_type", key, "'" + key + "' must be " + want + ", got " + type_name(v)));
  }
  bool out_of_range(const std::string& key, const std::string& got, const std::string& range) {
    return fail(invalid("invalid_value", key, "'" + key + "' = " + got + " is out of range: it must be " + range));
  }

  // A number in [lo, hi] (open ends where asked). Returns whether it was present and valid.
  bool number(const std::string& key, double& out, double lo, double hi, bool lo_open = false) {
    const Json* v = get(key);
    if (!v) return false;
    if (!v->is_number()) return wrong_type(key, *v, "a number");
    const double x = v->get<double>();
    if (!std::isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi)
      return out_of_range(key, num(x), std::string(lo_open ? "in (" : "in [") + num(lo) + ", " + num(hi) + "]");
    out = x;
    return true;
  }
  bool integer(const std::string& key, int64_t& out, int64_t lo, int64_t hi) {
    const Json* v = get(key);
    if (!v) return false;
    if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      return out_of_range(key, std::to_string(v->get<uint64_t>()), "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    if (!v->is_number_integer()) return wrong_type(key, *v, "an integer");
    const int64_t x = v->get<int64_t>();
    if (x < lo || x > hi) return out_of_range(key, std::to_string(x), "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = x;
    return true;
  }
  bool boolean(const std::string& key, bool& out) {
    const Json* v = get(key);
    if (!v) return false;
    if (!v->is_boolean()) return wrong_type(key, *v, "a boolean");
    out = v->get<bool>();
    return true;
  }
  void ignore(std::initializer_list<const char*> keys) {
    for (const char* k : keys) known_.insert(k);
  }
  // OpenAI fields ggflow does not implement: refused when present (and not null).
  void unsupported(const std::string& key, const std::string& why) {
    if (get(key)) fail(invalid("unsupported", key, "'" + key + "' is not supported by ggflow: " + why));
  }
  void check_unknown() {
    for (auto it = body_.begin(); it != body_.end(); ++it)
      if (!known_.count(it.key()))
        fail(invalid("unknown_field", it.key(), "unknown field '" + it.key() + "'; see docs/SERVER.md for the fields ggflow reads"));
  }

 private:
  const Json& body_;
  std::set<std::string> known_;
};

constexpr int64_t kMaxChoices = 16;

// The sampling fields shared by both endpoints.
void read_sampling(Fields& f, const ModelInfo& model, text::SamplingParams& p) {
  f.number("temperature", p.temperature, 0, 2);
  f.number("top_p", p.top_p, 0, 1, /*lo_open=*/true);
  f.number("min_p", p.min_p, 0, 1);
  int64_t k = 0;
  if (f.integer("top_k", k, -1, std::numeric_limits<int32_t>::max())) p.top_k = int32_t(std::max<int64_t>(k, 0));
  f.number("presence_penalty", p.presence_penalty, -2, 2);
  f.number("frequency_penalty", p.frequency_penalty, -2, 2);
  f.number("repetition_penalty", p.repetition_penalty, 0, 2, /*lo_open=*/true);
  int64_t seed = 0;
  if (f.integer("seed", seed, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()))
    p.seed = uint64_t(seed);
  if (const Json* v = f.get("stop")) {
    if (v->is_string()) {
      p.stop = {v->get<std::string>()};
    } else if (v->is_array()) {
      if (v->size() > 4) f.out_of_range("stop", std::to_string(v->size()) + " strings", "at most 4 strings");
      for (const auto& s : *v) {
        if (!s.is_string()) {
          f.wrong_type("stop", s, "a string or an array of strings");
          break;
        }
        p.stop.push_back(s.get<std::string>());
      }
    } else {
      f.wrong_type("stop", *v, "a string or an array of strings");
    }
    for (const auto& s : p.stop)
      if (s.empty()) f.fail(invalid("invalid_value", "stop", "'stop' strings must not be empty"));
  }
  f.boolean("ignore_eos", p.ignore_eos);  // vLLM's and llama-server's extension
  if (const Json* v = f.get("logit_bias")) {
    if (!v->is_object()) {
      f.wrong_type("logit_bias", *v, "an object mapping token ids (as strings) to numbers in [-100, 100]");
    } else {
      const int64_t n_vocab = model.format->tokenizer().n_vocab();
      for (auto it = v->begin(); it != v->end(); ++it) {
        const std::string& key = it.key();
        char* end = nullptr;
        const long long id = key.empty() ? -1 : std::strtoll(key.c_str(), &end, 10);
        if (key.empty() || *end != '\0' || id < 0 || id >= n_vocab) {
          f.fail(invalid("invalid_value", "logit_bias", "logit_bias key '" + key + "' is not a token id in [0, " +
                                                            std::to_string(n_vocab) + ")"));
          break;
        }
        if (!it->is_number()) {
          f.wrong_type("logit_bias", *it, "an object whose values are numbers in [-100, 100]");
          break;
        }
        if (!std::isfinite(it->get<double>()) || std::fabs(it->get<double>()) > 100) {
          f.fail(invalid("invalid_value", "logit_bias", "logit_bias for token " + key + " must be a number in [-100, 100]"));
          break;
        }
        p.logit_bias.emplace_back(int32_t(id), it->get<double>());
      }
    }
  }
}

void read_stream(Fields& f, GenerationRequest& r) {
  f.boolean("stream", r.stream);
  if (const Json* v = f.get("stream_options")) {
    if (!v->is_object()) {
      f.wrong_type("stream_options", *v, "an object");
      return;
    }
    if (!r.stream) {
      f.fail(invalid("invalid_value", "stream_options", "'stream_options' is only allowed with 'stream': true"));
      return;
    }
    for (auto it = v->begin(); it != v->end(); ++it) {
      if (it.key() != "include_usage") {
        f.fail(invalid("unknown_field", "stream_options." + it.key(), "unknown field 'stream_options." + it.key() + "'"));
      } else if (!it->is_boolean()) {
        f.wrong_type("stream_options.include_usage", *it, "a boolean");
      } else {
        r.include_usage = it->get<bool>();
      }
    }
  }
}

// Extensions of other engines that routers add to every request they forward (vllm-router sends
// SGLang's and vLLM's, with their defaults). Each is accepted at the value that describes what
// ggflow does and refused with the reason at the other; the reasoning switches change nothing
// here (ggflow has no reasoning parser: a model's thinking stays in the content).
void read_engine_extensions(Fields& f) {
  struct Fixed {
    const char* key;
    bool ggflow;       // the value that says what ggflow does
    const char* why;   // why the other value cannot be honoured
  };
  static constexpr Fixed kFixed[] = {
      {"skip_special_tokens", true, "control tokens are never written into the answer's text"},
      {"no_stop_trim", false, "a matched stop string is always cut from the answer"},
      {"continue_final_message", false, "the chat template always opens a new assistant turn"},
      {"return_hidden_states", false, "ggflow returns text, token ids and log-probabilities, not hidden states"},
  };
  for (const Fixed& x : kFixed) {
    bool v = x.ggflow;
    if (f.boolean(x.key, v) && v != x.ggflow)
      f.fail(invalid("unsupported", x.key, std::string("'") + x.key + "': " + (x.ggflow ? "true" : "false") +
                                               " is the only value ggflow supports: " + x.why));
  }
  for (const char* k : {"separate_reasoning", "stream_reasoning", "include_reasoning"}) {
    bool ignored = false;
    f.boolean(k, ignored);
  }
}

// A tool-calling error ("tools[2].function.name: must match ...") as a 400 whose param is the
// path before the first ": ".
ApiError tool_error(const Error& e) {
  const std::string msg = e.str();
  const size_t colon = msg.find(": ");
  return invalid("invalid_value", colon == std::string::npos ? "tools" : msg.substr(0, colon), msg);
}

// What the answer is held to (both endpoints): OpenAI's response_format ({"type": "text"},
// {"type": "json_object"}, {"type": "json_schema", "json_schema": {"name", "schema", "strict"}})
// and llama-server's "grammar" (GBNF text) and "json_schema" (a schema). At most one of them; the
// grammar is compiled here, on the HTTP thread, within grammar::Limits (too large: 400).
void read_constraint(Fields& f, GenerationRequest& r) {
  std::vector<std::string> given;
  auto compiled = [&](const std::string& field, Result<std::shared_ptr<const grammar::Grammar>> g) {
    if (!g) return f.fail(invalid("invalid_value", field, "'" + field + "': " + g.error().str()));
    r.constraint.grammar = std::move(*g);
    return true;
  };
  if (const Json* v = f.get("response_format")) {
    const Json* type = v->is_object() && v->contains("type") ? &(*v)["type"] : nullptr;
    if (!type || !type->is_string()) {
      f.fail(invalid("invalid_type", "response_format",
                     "'response_format' must be an object with a string 'type': text, json_object or json_schema"));
    } else if (*type == "json_object") {
      given.push_back("response_format");
      r.constraint.grammar = grammar::json_object_grammar();
    } else if (*type == "json_schema") {
      given.push_back("response_format");
      const Json* js = v->contains("json_schema") ? &(*v)["json_schema"] : nullptr;
      if (!js || !js->is_object()) {
        f.fail(invalid("missing_field", "response_format.json_schema",
                       "'response_format' of type json_schema needs 'json_schema': {\"name\": ..., \"schema\": {...}}"));
      } else if (!js->contains("schema") || !(*js)["schema"].is_object()) {
        f.fail(invalid("missing_field", "response_format.json_schema.schema",
                       "'response_format.json_schema.schema' must be a JSON Schema object"));
      } else if (js->contains("name") && (!(*js)["name"].is_string() || (*js)["name"].get<std::string>().empty() ||
                                          (*js)["name"].get<std::string>().size() > 64)) {
        f.fail(invalid("invalid_value", "response_format.json_schema.name",
                       "'response_format.json_schema.name' must be a string of 1 to 64 characters"));
      } else if (js->contains("strict") && !(*js)["strict"].is_boolean() && !(*js)["strict"].is_null()) {
        f.fail(invalid("invalid_type", "response_format.json_schema.strict", "'response_format.json_schema.strict' must be a boolean"));
      } else {
        compiled("response_format.json_schema.schema", grammar::compile_json_schema((*js)["schema"]));
      }
    } else if (*type != "text") {
      f.fail(invalid("invalid_value", "response_format.type",
                     "'response_format.type' '" + type->get<std::string>() + "' is not one of text, json_object, json_schema"));
    }
  }
  if (const Json* v = f.get("json_schema")) {
    given.push_back("json_schema");
    if (!v->is_object()) f.wrong_type("json_schema", *v, "a JSON Schema object");
    else compiled("json_schema", grammar::compile_json_schema(*v));
  }
  if (const Json* v = f.get("grammar")) {
    given.push_back("grammar");
    if (!v->is_string()) f.wrong_type("grammar", *v, "a string of GBNF rules");
    else compiled("grammar", grammar::parse_gbnf(v->get<std::string>()));
  }
  if (given.size() > 1)
    f.fail(invalid("invalid_value", given[1], "'" + given[0] + "' and '" + given[1] + "' both constrain the answer; send one of them"));
  if (r.constraint && r.params.ignore_eos)
    f.fail(invalid("invalid_value", "ignore_eos", "'ignore_eos' cannot be combined with '" + given[0] +
                                                      "': a constrained answer ends where its grammar does"));
}

// The context check of every prompt: prompt + max_tokens must fit (before anything is queued).
std::optional<ApiError> check_context(const GenerationRequest& r, const ModelInfo& model) {
  for (const auto& p : r.prompts) {
    const int64_t len = int64_t(p.ids.size());
    const int64_t want = r.params.max_tokens > 0 ? r.params.max_tokens : 1;
    // Compared without forming len + want, which overflows for max_tokens near 2^63.
    if (len > model.context || want > model.context - len) {
      std::string msg = "this model's context holds " + std::to_string(model.context) + " tokens, but the request needs " +
                        std::to_string(uint64_t(len) + uint64_t(want)) + " (" + std::to_string(len) + " in the prompt + " + std::to_string(want) +
                        (r.params.max_tokens > 0 ? " requested by max_tokens)" : " to generate)") +
                        "; shorten the prompt or lower max_tokens";
      ApiError e = invalid("context_length_exceeded", r.chat ? "messages" : "prompt", msg);
      if (r.params.max_tokens > 0 && len < model.context) e.param = "max_tokens";
      return e;
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_body(const std::string& body, Json& out) {
  if (body.empty()) return invalid("invalid_json", "", "the request body is empty; send a JSON object");
  // Nesting depth first (a cheap scan that respects strings), so a hostile body never reaches the
  // parser's recursion.
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxJsonDepth)
        return invalid("invalid_json", "", "the request body nests JSON deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  // nlohmann reports a syntax error by exception, and a number out of double's range (1e400) by
  // out_of_range even when exceptions are off: both become one 400.
  try {
    out = Json::parse(body);
  } catch (const Json::exception& e) {
    return invalid("invalid_json", "", std::string("the request body is not valid JSON (UTF-8): ") + e.what());
  }
  if (!out.is_object()) return invalid("invalid_json", "", std::string("the request body must be a JSON object, got ") + type_name(out));
  return std::nullopt;
}

std::optional<ApiError> check_model(const Json& body, const ModelInfo& model) {
  auto it = body.find("model");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return invalid("invalid_type", "model", std::string("'model' must be a string, got ") + type_name(*it));
  if (it->get<std::string>() != model.name)
    return ApiError{404, "not_found_error", "model_not_found", "model",
                    "the model '" + it->get<std::string>() + "' does not exist; this server serves '" + model.name + "'"};
  return std::nullopt;
}

std::optional<ApiError> parse_messages(const Json* messages, Json& out) {
  if (!messages) return invalid("missing_field", "messages", "'messages' is required: an array of {role, content}");
  if (!messages->is_array()) return invalid("invalid_type", "messages", std::string("'messages' must be an array, got ") + type_name(*messages));
  if (messages->empty()) return invalid("invalid_value", "messages", "'messages' must hold at least one message");
  static const std::set<std::string> roles = {"system", "developer", "user", "assistant", "tool"};
  out = Json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return invalid("invalid_type", at, at + " must be an object, got " + type_name(m));
    auto role = m.find("role");
    if (role == m.end()) return invalid("missing_field", at + ".role", at + " has no 'role'");
    if (!role->is_string()) return invalid("invalid_type", at + ".role", at + ".role must be a string");
    const std::string r = role->get<std::string>();
    if (!roles.count(r))
      return invalid("invalid_value", at + ".role", at + ".role '" + r + "' is not one of system, developer, user, assistant, tool");
    for (auto it = m.begin(); it != m.end(); ++it) {
      const bool tool_field = (it.key() == "tool_calls" && r == "assistant") || (it.key() == "tool_call_id" && r == "tool");
      if (it.key() != "role" && it.key() != "content" && it.key() != "name" && !tool_field)
        return invalid("unknown_field", at + "." + it.key(), "field '" + it.key() + "' of " + at + " is not supported" +
                                                                 (it.key() == "tool_calls" ? " (tool_calls belong to assistant messages)" : "") +
                                                                 (it.key() == "tool_call_id" ? " (tool_call_id belongs to tool messages)" : ""));
    }
    auto content = m.find("content");
    const bool has_calls = m.contains("tool_calls") && !m["tool_calls"].is_null();
    if (content == m.end() && !(r == "assistant" && has_calls))
      return invalid("missing_field", at + ".content", at + " has no 'content'");
    std::string text;
    if (content == m.end()) {
    } else if (content->is_string()) {
      text = content->get<std::string>();
    } else if (content->is_null() && r == "assistant") {
    } else if (content->is_array()) {
      for (size_t j = 0; j < content->size(); ++j) {
        const Json& part = (*content)[j];
        const std::string pat = at + ".content[" + std::to_string(j) + "]";
        if (!part.is_object()) return invalid("invalid_type", pat, pat + " must be an object {type, text}");
        auto type = part.find("type");
        if (type == part.end() || !type->is_string()) return invalid("missing_field", pat + ".type", pat + " needs a string 'type'");
        if (*type != "text")
          return invalid("unsupported", pat + ".type", "content parts of type '" + type->get<std::string>() + "' are not supported (text only)");
        auto t = part.find("text");
        if (t == part.end()) return invalid("missing_field", pat + ".text", pat + " has no 'text'");
        if (!t->is_string()) return invalid("invalid_type", pat + ".text", pat + ".text must be a string");
        text += t->get<std::string>();
      }
    } else {
      return invalid("invalid_type", at + ".content", at + ".content must be a string or an array of text parts, got " + type_name(*content));
    }
    Json msg = {{"role", r == "developer" ? "system" : r}, {"content", text}};
    if (has_calls) msg["tool_calls"] = m["tool_calls"];
    if (r == "tool" && m.contains("tool_call_id")) msg["tool_call_id"] = m["tool_call_id"];
    out.push_back(std::move(msg));
  }
  if (auto s = pipeline::validate_tool_messages(out); !s) return tool_error(s.error());
  return std::nullopt;
}

std::optional<ApiError> parse_chat_request(const Json& body, const ModelInfo& model, GenerationRequest& out) {
  out = GenerationRequest{};
  out.chat = true;
  out.params.temperature = 1.0;
  if (auto e = check_model(body, model)) return e;
  Fields f(body);
  f.ignore({"model", "user", "store", "metadata", "service_tier"});
  Json messages;
  if (auto e = parse_messages(f.get("messages"), messages)) return e;
  int64_t max_tokens = 0;
  if (f.integer("max_completion_tokens", max_tokens, 1, std::numeric_limits<int64_t>::max()) ||
      f.integer("max_tokens", max_tokens, 1, std::numeric_limits<int64_t>::max()))
    out.params.max_tokens = max_tokens;
  read_sampling(f, model, out.params);
  int64_t n = 1;
  if (f.integer("n", n, 1, kMaxChoices)) out.n = int32_t(n);
  bool logprobs = false;
  f.boolean("logprobs", logprobs);
  int64_t top = 0;
  const bool has_top = f.integer("top_logprobs", top, 0, 20);
  if (has_top && !logprobs)
    f.fail(invalid("invalid_value", "top_logprobs", "'top_logprobs' needs 'logprobs': true"));
  if (logprobs) out.params.logprobs = int32_t(top);
  read_stream(f, out);
  if (out.stream && out.best_of > out.n)
    f.fail(invalid("invalid_value", "best_of", "'best_of' larger than 'n' cannot be streamed: the answer is chosen once every candidate is done"));
  f.boolean("return_token_ids", out.return_token_ids);
  read_engine_extensions(f);
  read_constraint(f, out);
  auto tools = pipeline::parse_tool_request(f.get("tools"), f.get("tool_choice"), f.get("parallel_tool_calls"));
  for (const char* k : {"functions", "function_call"}) f.unsupported(k, "use 'tools' and 'tool_choice'");
  for (const char* k : {"audio", "modalities", "prediction", "web_search_options", "reasoning_effort"})
    f.unsupported(k, "ggflow generates text");
  f.check_unknown();
  if (f.error) return f.error;
  if (!tools) return tool_error(tools.error());
  const pipeline::ToolFormat fmt = model.format->tool_template().format;
  if (tools->active()) {
    if (pipeline::tool_grammar_needed(fmt, *tools)) {
      if (out.constraint)
        return invalid("invalid_value", "tool_choice", "this tool_choice constrains the answer to a tool call (format " +
                                                           std::string(pipeline::tool_format_name(fmt)) +
                                                           "); it cannot be combined with response_format, json_schema or grammar");
      auto gbnf = pipeline::tool_call_grammar(fmt, *tools);
      if (!gbnf) return tool_error(gbnf.error());
      auto g = grammar::parse_gbnf(*gbnf);
      if (!g) return invalid("invalid_value", "tools", "the tools' grammar does not compile: " + g.error().str());
      out.constraint.grammar = *g;
    }
    out.tools = std::make_shared<const pipeline::ToolRequest>(std::move(*tools));
    out.tool_format = fmt;
  }
  bool tool_turns = false;
  for (const auto& m : messages) tool_turns |= m.contains("tool_calls") || m["role"] == "tool";
  auto rendered = out.tools || tool_turns ? model.format->apply_chat_template(messages, out.tools ? *out.tools : *tools, true)
                                          : model.format->apply_chat_template(messages, /*add_generation_prompt=*/true);
  if (!rendered) return invalid("invalid_value", "messages", "the model's chat template failed on these messages: " + rendered.error().str());
  auto ids = model.format->encode(*rendered);
  if (!ids) return invalid("invalid_value", "messages", "the rendered prompt cannot be tokenized: " + ids.error().str());
  out.prompts.push_back({std::move(*ids), std::move(*rendered)});
  return check_context(out, model);
}

std::optional<ApiError> parse_completion_request(const Json& body, const ModelInfo& model, GenerationRequest& out) {
  out = GenerationRequest{};
  out.chat = false;
  out.params.temperature = 1.0;
  out.params.max_tokens = 16;  // OpenAI's default for completions
  if (auto e = check_model(body, model)) return e;
  Fields f(body);
  f.ignore({"model", "user"});
  const int64_t n_vocab = model.format->tokenizer().n_vocab();
  // suffix: fill-in-the-middle. The prompt is the code before the gap, the suffix the code after
  // it (PromptFormat::encode_infill), and the completion is the middle.
  std::optional<std::string> suffix;
  if (const Json* v = f.get("suffix")) {
    if (!v->is_string() && !v->is_null()) {
      f.wrong_type("suffix", *v, "a string");
    } else if (v->is_string() && !v->get<std::string>().empty()) {
      suffix = v->get<std::string>();
      if (!model.format->has_infill())
        f.fail(invalid("invalid_value", "suffix",
                       "'suffix' (fill-in-the-middle) needs a model with fill-in-the-middle tokens (<|fim_prefix|>, "
                       "<|fim_suffix|>, <|fim_middle|>, or <PRE>, <SUF>, <MID>); this model has none: use a code model "
                       "such as Qwen2.5-Coder"));
    }
  }
  auto token_ids = [&](const Json& arr, const std::string& at, std::vector<int32_t>& ids) -> bool {
    if (arr.empty()) return f.fail(invalid("invalid_value", "prompt", at + " is an empty list of token ids"));
    if (suffix)
      return f.fail(invalid("invalid_value", "suffix", "'suffix' needs a text prompt (the code before the gap), not token ids"));
    for (const auto& t : arr) {
      if (!t.is_number_integer()) return f.wrong_type("prompt", t, "a token id (integer)");
      const int64_t id = t.get<int64_t>();
      if (id < 0 || id >= n_vocab)
        return f.fail(invalid("invalid_value", "prompt", at + " holds token id " + std::to_string(id) + ", outside the vocabulary [0, " +
                                                          std::to_string(n_vocab) + ")"));
      ids.push_back(int32_t(id));
    }
    return true;
  };
  auto text_prompt = [&](const std::string& s) -> bool {
    if (s.empty()) return f.fail(invalid("invalid_value", "prompt", "the prompt is empty"));
    auto ids = suffix ? model.format->encode_infill(s, *suffix) : model.format->encode(s);
    if (!ids) return f.fail(invalid("invalid_value", "prompt", "the prompt cannot be tokenized: " + ids.error().str()));
    out.prompts.push_back({std::move(*ids), s});
    return true;
  };
  const Json* prompt = f.get("prompt");
  if (!prompt) {
    f.fail(invalid("missing_field", "prompt", "'prompt' is required: a string, an array of strings, or token ids"));
  } else if (prompt->is_string()) {
    text_prompt(prompt->get<std::string>());
  } else if (prompt->is_array() && !prompt->empty() && (*prompt)[0].is_number()) {
    PromptInput p;
    if (token_ids(*prompt, "prompt", p.ids)) out.prompts.push_back(std::move(p));
  } else if (prompt->is_array() && !prompt->empty()) {
    for (size_t i = 0; i < prompt->size() && !f.error; ++i) {
      const Json& e = (*prompt)[i];
      if (e.is_string()) {
        text_prompt(e.get<std::string>());
      } else if (e.is_array()) {
        PromptInput p;
        if (token_ids(e, "prompt[" + std::to_string(i) + "]", p.ids)) out.prompts.push_back(std::move(p));
      } else {
        f.wrong_type("prompt", e, "a string or an array of token ids");
      }
    }
  } else {
    f.fail(prompt->is_array() ? invalid("invalid_value", "prompt", "'prompt' is an empty array")
                              : invalid("invalid_type", "prompt", std::string("'prompt' must be a string, an array of strings or token ids, got ") +
                                                                      type_name(*prompt)));
  }
  // Token-id prompts have no text of their own: echo decodes them.
  for (auto& p : out.prompts)
    if (p.text.empty() && !p.ids.empty()) {
      auto t = model.format->tokenizer().decode(p.ids, text::DecodeOptions{.render_special = true});
      if (t) p.text = *t;
    }
  int64_t max_tokens = 0;
  if (f.integer("max_tokens", max_tokens, 1, std::numeric_limits<int64_t>::max())) out.params.max_tokens = max_tokens;
  read_sampling(f, model, out.params);
  int64_t n = 1;
  if (f.integer("n", n, 1, kMaxChoices)) out.n = int32_t(n);
  int64_t best_of = 0;
  if (f.integer("best_of", best_of, 1, kMaxChoices)) {
    if (best_of < out.n)
      f.fail(invalid("invalid_value", "best_of", "'best_of' (" + std::to_string(best_of) + ") must be at least 'n' (" +
                                                     std::to_string(out.n) + "): the n most likely of best_of candidates are returned"));
    out.best_of = int32_t(best_of);
  }
  int64_t logprobs = 0;
  if (f.integer("logprobs", logprobs, 0, 5)) out.params.logprobs = int32_t(logprobs);
  f.boolean("echo", out.echo);
  // The echoed prompt's tokens get log-probabilities too (its first token: null).
  if (out.echo && out.params.logprobs >= 0) out.params.prompt_logprobs = out.params.logprobs;
  if (suffix && out.echo)
    f.fail(invalid("invalid_value", "echo", "'echo' with 'suffix' is not supported: the prompt is the code before the gap, the answer the middle"));
  read_stream(f, out);
  if (out.stream && out.best_of > out.n)
    f.fail(invalid("invalid_value", "best_of", "'best_of' larger than 'n' cannot be streamed: the answer is chosen once every candidate is done"));
  f.boolean("return_token_ids", out.return_token_ids);
  read_engine_extensions(f);
  read_constraint(f, out);
  f.check_unknown();
  if (f.error) return f.error;
  if (out.num_candidates() > kMaxChoices)
    return invalid("invalid_value", out.best_of > out.n ? "best_of" : "n",
                   std::to_string(out.prompts.size()) + " prompts x " + (out.best_of > out.n ? "best_of" : "n") + " = " +
                       std::to_string(out.candidates()) + " asks for " + std::to_string(out.num_candidates()) +
                       " completions; at most " + std::to_string(kMaxChoices) + " per request");
  return check_context(out, model);
}

}  // namespace ggflow::server
