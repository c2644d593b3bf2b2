// Grammars that force a well-formed tool call: the format's call syntax around each callable
// tool's arguments grammar (grammar::json_schema_to_gbnf of its `parameters`, rules renamed with a
// per-tool prefix so the schemas' rules cannot collide).
//
//   root   ::= <the format's frame around call (several when parallel)>
//   call   ::= call0 | call1 | ...
//   call<i> ::= "<prefix with the name of tool i>" tool<i>-root "<suffix>"
//   tool<i>-root ::= ... (tool i's schema; its other rules also start with tool<i>-)
#include "grammar/json_schema.h"
#include "pipeline/tool_calls.h"

namespace ggflow::pipeline {

namespace tool_grammar_detail {

bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// A GBNF string literal of `s`.
std::string lit(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else out += c;
  }
  return out + "\"";
}

// The text around each call: prefix + arguments + suffix, and the frame around the calls.
struct Frame {
  std::string open, sep, close;  // root ::= open call (sep call)* close
  std::string prefix, suffix;    // call<i> ::= prefix(name) args suffix
};

Frame frame_of(ToolFormat f, const std::string& name) {
  const std::string json_call = "{\"name\": \"" + name + "\", \"arguments\": ";
  switch (f) {
    case ToolFormat::Hermes: return {"", "\n", "", "<tool_call>\n" + json_call, "}\n</tool_call>"};
    case ToolFormat::Llama3: return {"", "", "", "{\"name\": \"" + name + "\", \"parameters\": ", "}"};
    case ToolFormat::Mistral: return {"[TOOL_CALLS][", ", ", "]", json_call, "}"};
    case ToolFormat::MistralV11: return {"", "", "", "[TOOL_CALLS]" + name + "[ARGS]", ""};
    case ToolFormat::Phi4Mini: return {"", "", "", "<|tool_call|>" + json_call, "}<|/tool_call|>"};
    case ToolFormat::Gemma: return {"```tool_code\n", "\n", "\n```", json_call, "}"};
    case ToolFormat::Generic: return {"{\"tool_calls\": [", ", ", "]}", json_call, "}"};
  }
  return {};
}

}  // namespace tool_grammar_detail

Result<std::string> prefix_gbnf_rules(std::string_view g, std::string_view prefix) {
  std::string out;
  out.reserve(g.size() + g.size() / 8);
  size_t i = 0;
  auto copy_until = [&](char close, const char* what) -> Status {
    const size_t start = i;
    out += g[i++];
    while (i < g.size() && g[i] != close) {
      if (g[i] == '\\' && i + 1 < g.size()) out += g[i++];
      out += g[i++];
    }
    if (i >= g.size())
      return make_error(std::string("gbnf: unterminated ") + what + " starting at byte " + std::to_string(start));
    out += g[i++];
    return {};
  };
  while (i < g.size()) {
    const char c = g[i];
    if (c == '#') {
      while (i < g.size() && g[i] != '\n') out += g[i++];
    } else if (c == '"') {
      if (auto st = copy_until('"', "literal"); !st) return st.error();
    } else if (c == '[') {
      if (auto st = copy_until(']', "character class"); !st) return st.error();
    } else if (c == '{') {
      if (auto st = copy_until('}', "repetition count"); !st) return st.error();
    } else if (tool_grammar_detail::name_char(c)) {
      out += prefix;
      while (i < g.size() && tool_grammar_detail::name_char(g[i])) out += g[i++];
    } else {
      out += g[i++];
    }
  }
  return out;
}

bool tool_grammar_needed(ToolFormat format, const ToolRequest& tools) {
  return tools.active() &&
         (format == ToolFormat::Generic || tools.choice == ToolChoice::Required || tools.choice == ToolChoice::Named);
}

Result<std::string> tool_call_grammar(ToolFormat format, const ToolRequest& tools, const grammar::Limits& limits) {
  using namespace tool_grammar_detail;
  if (!tool_grammar_needed(format, tools))
    return make_error("tool call grammar: not needed for this request (tool_choice " +
                          std::string(tools.choice == ToolChoice::Auto ? "auto" : "none") + ", format " + tool_format_name(format) + ")",
                      "ask tool_grammar_needed() first");
  std::string calls, rules;
  size_t n = 0;
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const ToolDef& t = tools.tools[i];
    if (tools.choice == ToolChoice::Named && t.name != tools.named) continue;
    auto schema = grammar::json_schema_to_gbnf(t.parameters, limits);
    std::string gbnf;
    if (schema) gbnf = std::move(*schema);
    else if (t.strict)
      return make_error("tools[" + std::to_string(i) + "].function.parameters: " + schema.error().what, schema.error().hint);
    else
      gbnf = grammar::json_object_gbnf();  // not strict: any arguments object
    const std::string pre = "tool" + std::to_string(i) + "-";
    auto renamed = prefix_gbnf_rules(gbnf, pre);
    if (!renamed) return renamed.error();
    const Frame fr = frame_of(format, t.name);
    const std::string call = "call" + std::to_string(i);
    calls += std::string(n++ ? " | " : "") + call;
    rules += call + " ::= " + lit(fr.prefix) + " " + pre + "root" + (fr.suffix.empty() ? "" : " " + lit(fr.suffix)) + "\n";
    rules += *renamed;
  }
  const Frame fr = frame_of(format, "");
  // Llama 3's format has one call per answer.
  const bool several = tools.parallel && format != ToolFormat::Llama3;
  std::string root;
  if (!fr.open.empty()) root += lit(fr.open) + " ";
  root += "call";
  if (several) root += " ( " + (fr.sep.empty() ? std::string() : lit(fr.sep) + " ") + "call )*";
  if (!fr.close.empty()) root += " " + lit(fr.close);
  std::string out;
  if (format == ToolFormat::Generic && tools.choice == ToolChoice::Auto) {
    out += "root ::= ( " + root + " ) | \"{\\\"response\\\": \" response-string \"}\"\n";
    out += "response-string ::= \"\\\"\" response-char* \"\\\"\"\n";
    out += "response-char ::= [^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n";
  } else {
    out += "root ::= " + root + "\n";
  }
  out += "call ::= " + calls + "\n" + rules;
  if (out.size() > limits.max_text_bytes)
    return make_error("tool call grammar: " + std::to_string(out.size()) + " bytes, over Limits::max_text_bytes = " +
                          std::to_string(limits.max_text_bytes),
                      "use fewer or simpler tools");
  return out;
}

}  // namespace ggflow::pipeline
