// Tool calling, request side: `tools`, `tool_choice`, `parallel_tool_calls` and the tool parts of
// chat messages, validated with errors that name the field path; call ids.
#include <algorithm>
#include <random>
#include <set>

#include "pipeline/tool_calls.h"

namespace ggflow::pipeline {

namespace tool_request_detail {

constexpr size_t kMaxTools = 128;

std::string type_of(const ToolJson& j) { return j.type_name(); }

Error field_error(const std::string& path, const std::string& what, const std::string& hint = {}) {
  return make_error(path + ": " + what, hint);
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// Unknown keys of `obj` (an object) are errors, as for the request's top-level fields.
Status only_keys(const ToolJson& obj, const std::string& path, std::initializer_list<const char*> allowed) {
  for (const auto& [key, value] : obj.items()) {
    bool ok = false;
    for (const char* a : allowed) ok |= key == a;
    if (!ok) {
      std::string list;
      for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
      return field_error(path + "." + key, "unknown field", "the fields here are: " + list);
    }
  }
  return {};
}

Result<ToolDef> parse_tool(const ToolJson& t, const std::string& path) {
  const std::string shape = R"({"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}})";
  if (!t.is_object()) return field_error(path, "must be an object, not " + type_of(t), "a tool is " + shape);
  if (auto st = only_keys(t, path, {"type", "function"}); !st) return st.error();
  if (!t.contains("type")) return field_error(path + ".type", "missing (must be \"function\")", "a tool is " + shape);
  if (t["type"] != "function")
    return field_error(path + ".type", "must be \"function\" (got " + t["type"].dump() + ")",
                       "ggflow supports function tools only");
  if (!t.contains("function") || !t["function"].is_object())
    return field_error(path + ".function", t.contains("function") ? "must be an object, not " + type_of(t["function"]) : "missing",
                       "a tool is " + shape);
  const ToolJson& f = t["function"];
  const std::string fp = path + ".function";
  if (auto st = only_keys(f, fp, {"name", "description", "parameters", "strict"}); !st) return st.error();
  ToolDef d;
  if (!f.contains("name")) return field_error(fp + ".name", "missing", "every function needs a name");
  if (!f["name"].is_string()) return field_error(fp + ".name", "must be a string, not " + type_of(f["name"]));
  d.name = f["name"].get<std::string>();
  if (!valid_name(d.name))
    return field_error(fp + ".name", "must match ^[a-zA-Z0-9_-]{1,64}$ (got " + f["name"].dump() + ")",
                       "use letters, digits, '_' and '-', at most 64 characters");
  if (f.contains("description") && !f["description"].is_null()) {
    if (!f["description"].is_string())
      return field_error(fp + ".description", "must be a string, not " + type_of(f["description"]));
    d.description = f["description"].get<std::string>();
  }
  if (f.contains("parameters") && !f["parameters"].is_null()) {
    const ToolJson& p = f["parameters"];
    if (!p.is_object())
      return field_error(fp + ".parameters", "must be a JSON Schema object, not " + type_of(p),
                         R"(e.g. {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})");
    if (p.contains("type") && p["type"] != "object")
      return field_error(fp + ".parameters.type", "must be \"object\" (got " + p["type"].dump() + ")",
                         "a function's arguments are a JSON object");
    d.parameters = p;
  } else {
    d.parameters = ToolJson{{"type", "object"}, {"properties", ToolJson::object()}};
  }
  if (f.contains("strict") && !f["strict"].is_null()) {
    if (!f["strict"].is_boolean()) return field_error(fp + ".strict", "must be a boolean, not " + type_of(f["strict"]));
    d.strict = f["strict"].get<bool>();
  }
  return d;
}

Status parse_choice(const ToolJson& c, ToolRequest& r) {
  if (c.is_string()) {
    const std::string s = c.get<std::string>();
    if (s == "none") r.choice = ToolChoice::None;
    else if (s == "auto") r.choice = ToolChoice::Auto;
    else if (s == "required") r.choice = ToolChoice::Required;
    else
      return field_error("tool_choice", "must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}} (got " + c.dump() + ")");
    if (r.choice == ToolChoice::Required && r.tools.empty())
      return field_error("tool_choice", "\"required\" needs tools", "pass `tools`, or use tool_choice \"none\"");
    return {};
  }
  if (!c.is_object())
    return field_error("tool_choice", "must be a string or an object, not " + type_of(c),
                       R"(use "none", "auto", "required" or {"type": "function", "function": {"name": "..."}})");
  if (auto st = only_keys(c, "tool_choice", {"type", "function"}); !st) return st;
  if (!c.contains("type") || c["type"] != "function")
    return field_error("tool_choice.type", c.contains("type") ? "must be \"function\" (got " + c["type"].dump() + ")" : "missing (must be \"function\")");
  if (!c.contains("function") || !c["function"].is_object())
    return field_error("tool_choice.function", c.contains("function") ? "must be an object, not " + type_of(c["function"]) : "missing",
                       R"(e.g. {"type": "function", "function": {"name": "get_weather"}})");
  const ToolJson& f = c["function"];
  if (auto st = only_keys(f, "tool_choice.function", {"name"}); !st) return st;
  if (!f.contains("name") || !f["name"].is_string())
    return field_error("tool_choice.function.name", f.contains("name") ? "must be a string, not " + type_of(f["name"]) : "missing");
  r.named = f["name"].get<std::string>();
  r.choice = ToolChoice::Named;
  std::string names;
  for (const auto& t : r.tools) {
    if (t.name == r.named) return {};
    names += (names.empty() ? "" : ", ") + t.name;
  }
  return field_error("tool_choice.function.name", ToolJson(r.named).dump() + " is not one of the tools" + (names.empty() ? std::string(" (there are none)") : " (" + names + ")"),
                     "name one of the functions in `tools`");
}

// The text of a message's content: a string, or an array of {"type": "text", "text": ...} parts.
Status check_text_content(const ToolJson& content, const std::string& path) {
  if (content.is_string()) return {};
  if (!content.is_array()) return field_error(path, "must be a string or an array of text parts, not " + type_of(content));
  for (size_t i = 0; i < content.size(); ++i) {
    const ToolJson& p = content[i];
    const std::string pp = path + "[" + std::to_string(i) + "]";
    if (!p.is_object() || p.value("type", ToolJson()) != "text" || !p.contains("text") || !p["text"].is_string())
      return field_error(pp, "must be {\"type\": \"text\", \"text\": string}");
  }
  return {};
}

Status check_tool_call(const ToolJson& c, const std::string& path) {
  if (!c.is_object()) return field_error(path, "must be an object, not " + type_of(c));
  if (!c.contains("id") || !c["id"].is_string())
    return field_error(path + ".id", c.contains("id") ? "must be a string, not " + type_of(c["id"]) : "missing",
                       "pass back the id the call came with");
  if (c.contains("type") && !c["type"].is_null() && c["type"] != "function")
    return field_error(path + ".type", "must be \"function\" (got " + c["type"].dump() + ")");
  if (!c.contains("function") || !c["function"].is_object())
    return field_error(path + ".function", c.contains("function") ? "must be an object, not " + type_of(c["function"]) : "missing");
  const ToolJson& f = c["function"];
  if (!f.contains("name") || !f["name"].is_string())
    return field_error(path + ".function.name", f.contains("name") ? "must be a string, not " + type_of(f["name"]) : "missing");
  if (!f.contains("arguments")) return field_error(path + ".function.arguments", "missing", "pass the arguments JSON text (\"{}\" for none)");
  if (!f["arguments"].is_string() && !f["arguments"].is_object())
    return field_error(path + ".function.arguments", "must be a string (JSON text), not " + type_of(f["arguments"]));
  return {};
}

}  // namespace tool_request_detail

ToolJson ToolRequest::tools_json() const {
  ToolJson out = ToolJson::array();
  for (const ToolDef& t : tools) {
    ToolJson f = ToolJson::object();
    f["name"] = t.name;
    if (!t.description.empty()) f["description"] = t.description;
    f["parameters"] = t.parameters;
    out.push_back(ToolJson{{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

std::vector<std::string> ToolRequest::callable_names() const {
  if (choice == ToolChoice::Named) return {named};
  std::vector<std::string> out;
  for (const ToolDef& t : tools) out.push_back(t.name);
  return out;
}

Result<ToolRequest> parse_tool_request(const ToolJson* tools, const ToolJson* tool_choice,
                                       const ToolJson* parallel_tool_calls) {
  using namespace tool_request_detail;
  ToolRequest r;
  if (tools && !tools->is_null()) {
    if (!tools->is_array())
      return field_error("tools", "must be an array, not " + type_of(*tools),
                         R"(e.g. [{"type": "function", "function": {"name": "get_weather", "parameters": {...}}}])");
    if (tools->size() > kMaxTools)
      return field_error("tools", "has " + std::to_string(tools->size()) + " tools; at most " + std::to_string(kMaxTools) + " are allowed");
    for (size_t i = 0; i < tools->size(); ++i) {
      const std::string path = "tools[" + std::to_string(i) + "]";
      auto d = parse_tool((*tools)[i], path);
      if (!d) return d.error();
      for (size_t k = 0; k < r.tools.size(); ++k)
        if (r.tools[k].name == d->name)
          return field_error(path + ".function.name", ToolJson(d->name).dump() + " is already the name of tools[" + std::to_string(k) + "]",
                             "function names must be unique");
      r.tools.push_back(std::move(*d));
    }
  }
  if (tools && tools->is_array() && tools->empty())
    return field_error("tools", "is an empty array", "give at least one tool, or leave 'tools' out");
  r.choice = r.tools.empty() ? ToolChoice::None : ToolChoice::Auto;
  if (tool_choice && !tool_choice->is_null()) {
    if (r.tools.empty())  // as OpenAI: a choice among no tools is a mistake in the request
      return field_error("tool_choice", "is only allowed when 'tools' are given");
    if (auto st = parse_choice(*tool_choice, r); !st) return st.error();
  }
  if (parallel_tool_calls && !parallel_tool_calls->is_null()) {
    if (!parallel_tool_calls->is_boolean())
      return field_error("parallel_tool_calls", "must be a boolean, not " + type_of(*parallel_tool_calls));
    r.parallel = parallel_tool_calls->get<bool>();
  }
  return r;
}

Status validate_tool_messages(const ToolJson& messages) {
  using namespace tool_request_detail;
  if (!messages.is_array()) return field_error("messages", "must be an array, not " + type_of(messages));
  for (size_t i = 0; i < messages.size(); ++i) {
    const ToolJson& m = messages[i];
    const std::string path = "messages[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) continue;  // the server checks the basics
    const std::string role = m["role"].get<std::string>();
    if (role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      const ToolJson& calls = m["tool_calls"];
      if (!calls.is_array()) return field_error(path + ".tool_calls", "must be an array, not " + type_of(calls));
      for (size_t k = 0; k < calls.size(); ++k)
        if (auto st = check_tool_call(calls[k], path + ".tool_calls[" + std::to_string(k) + "]"); !st) return st;
    }
    if (role == "tool") {
      if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
        return field_error(path + ".tool_call_id", m.contains("tool_call_id") ? "must be a string, not " + type_of(m["tool_call_id"]) : "missing",
                           "a tool message answers the call with this id");
      if (!m.contains("content")) return field_error(path + ".content", "missing", "the tool's result as text");
      if (auto st = check_text_content(m["content"], path + ".content"); !st) return st;
    }
  }
  return {};
}

// --- call ids ---

ToolCallIds::ToolCallIds() : state_((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()) {}
ToolCallIds::ToolCallIds(uint64_t seed) : state_(seed) {}

ToolCallIds ToolCallIds::counter() {
  ToolCallIds ids(0);
  ids.counter_ = true;
  return ids;
}

std::string ToolCallIds::next(ToolFormat f) {
  static constexpr char kAlnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  const bool mistral = f == ToolFormat::Mistral || f == ToolFormat::MistralV11;
  if (counter_) {
    std::string n = std::to_string(state_++);
    return mistral ? std::string(9 - std::min<size_t>(9, n.size()), '0') + n : "call_" + n;
  }
  auto splitmix = [this] {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  std::string out = mistral ? "" : "call_";
  const size_t n = mistral ? 9 : 24;
  for (size_t i = 0; i < n; ++i) out += kAlnum[splitmix() % 62];
  return out;
}

}  // namespace ggflow::pipeline
