// Tool calling, prompt side: the format of a chat template, what the template renders (probed),
// and the conversation rewritten so that tools, history calls and tool results reach the model in
// the format's own way (python/gen_tool_prompt_expected.py is the jinja2 oracle of these rules).
#include <algorithm>

#include "pipeline/tool_calls.h"
#include "text/jinja_value.h"

namespace ggflow::pipeline {

namespace tool_template_detail {

bool has(std::string_view s, std::string_view needle) { return s.find(needle) != std::string_view::npos; }

// j[key] when it is a string, else "" (never throws on odd input).
std::string get_str(const ToolJson& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// json.dumps(j) as Python writes it (", " and ": " separators, non-ASCII as is): what templates'
// tojson writes, so history calls rendered as text look like the template's own.
std::string py_dumps(const ToolJson& j) {
  try {
    jinja::JsonOptions o;
    o.item_sep = ", ";
    o.key_sep = ": ";
    return jinja::to_json(jinja::Value::from_json(j, jinja::Limits::kMaxNesting), o);
  } catch (const std::exception&) {
    return j.dump(-1, ' ', false, ToolJson::error_handler_t::replace);
  }
}

// A message content as text: a string, or text parts concatenated (as the server does).
std::string content_text(const ToolJson& c) {
  if (c.is_string()) return c.get<std::string>();
  if (c.is_null()) return "";
  std::string out;
  if (c.is_array())
    for (const auto& p : c)
      if (p.is_object() && p.contains("text") && p["text"].is_string()) out += p["text"].get<std::string>();
  return out;
}

// Mistral templates refuse call ids other than 9 alphanumerics: others map to 9 (FNV-1a, base 62).
std::string mistral_id(const std::string& id) {
  const bool ok = id.size() == 9 && std::all_of(id.begin(), id.end(), [](char c) {
                    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
                  });
  if (ok) return id;
  static constexpr char kAlnum[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : id) h = (h ^ c) * 0x100000001b3ull;
  std::string out;
  for (int i = 0; i < 9; ++i, h /= 62) out += kAlnum[h % 62];
  return out;
}

// A call's arguments as a JSON value: objects as they are, JSON text parsed, other text kept as a string.
ToolJson arguments_value(const ToolJson& args) {
  if (!args.is_string()) return args;
  ToolJson v = ToolJson::parse(args.get<std::string>(), nullptr, false);
  return v.is_discarded() ? args : v;
}

// History calls as the text the format's model writes (for templates that cannot render them).
std::string calls_as_text(ToolFormat f, const ToolJson& calls) {
  std::string out;
  ToolJson list = ToolJson::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    const ToolJson& fn = calls[i]["function"];
    const std::string name = get_str(fn, "name");
    const ToolJson args = arguments_value(fn.contains("arguments") ? fn["arguments"] : ToolJson::object());
    const ToolJson call{{"name", name}, {"arguments", args}};
    switch (f) {
      case ToolFormat::Hermes: out += (i ? "\n" : "") + std::string("<tool_call>\n") + py_dumps(call) + "\n</tool_call>"; break;
      case ToolFormat::Llama3: out += (i ? "; " : "") + py_dumps(ToolJson{{"name", name}, {"parameters", args}}); break;
      case ToolFormat::MistralV11: out += "[TOOL_CALLS]" + name + "[ARGS]" + py_dumps(args); break;
      case ToolFormat::Phi4Mini: out += "<|tool_call|>" + py_dumps(call) + "<|/tool_call|>"; break;
      case ToolFormat::Gemma: out += (i ? "\n" : "") + py_dumps(call); break;
      case ToolFormat::Mistral:
      case ToolFormat::Generic: list.push_back(call); break;
    }
  }
  if (f == ToolFormat::Mistral) return "[TOOL_CALLS]" + py_dumps(list);
  if (f == ToolFormat::Generic) return py_dumps(ToolJson{{"tool_calls", list}});
  if (f == ToolFormat::Gemma) return "```tool_code\n" + out + "\n```";
  return out;
}

std::string tool_list(const ToolRequest& r) {
  std::string s;
  for (const ToolJson& t : r.tools_json()) s += py_dumps(t["function"]) + "\n";
  return s;
}

// --- probing: render small conversations and look for needles ---

const ToolJson& probe_tools() {
  static const ToolJson t = ToolJson::parse(R"([{"type": "function", "function": {"name": "ggflow_tool_needle",
    "description": "ggflow tool description", "parameters": {"type": "object",
    "properties": {"ggflow_param": {"type": "string", "description": "a parameter"}}, "required": ["ggflow_param"]}}}])");
  return t;
}

ToolJson probe_call(const std::string& name, const ToolJson& args) {
  return ToolJson{{"id", "call00001"}, {"type", "function"}, {"function", {{"name", name}, {"arguments", args}}}};
}

ToolJson user_msg(const std::string& text) { return ToolJson{{"role", "user"}, {"content", text}}; }

std::string try_render(const text::ChatTemplate& tmpl, const ToolJson& messages, bool with_tools) {
  text::ChatInputs in;
  in.messages = messages;
  if (with_tools) in.tools = probe_tools();
  in.bos_token = "<s>";
  in.eos_token = "</s>";
  auto r = tmpl.render(in);
  return r ? *r : std::string();
}

}  // namespace tool_template_detail

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::Generic: return "generic";
    case ToolFormat::Hermes: return "hermes";
    case ToolFormat::Llama3: return "llama3";
    case ToolFormat::Mistral: return "mistral";
    case ToolFormat::MistralV11: return "mistral-v11";
    case ToolFormat::Phi4Mini: return "phi4-mini";
    case ToolFormat::Gemma: return "gemma";
  }
  return "generic";
}

ToolFormat detect_tool_format(std::string_view src) {
  using tool_template_detail::has;
  // Syntaxes ggflow does not parse, though some use the same tags (Qwen3.5's <function=...>, GLM's <arg_key>).
  const bool foreign = has(src, "<function=") || has(src, "<arg_key>") || has(src, "functools");
  if (has(src, "[TOOL_CALLS]")) return has(src, "[ARGS]") ? ToolFormat::MistralV11 : ToolFormat::Mistral;
  if (foreign) return ToolFormat::Generic;
  // Phi-4-mini (tools in the system message's `tools`), Granite 3.x (<|tool_call|>[...]).
  if ((has(src, "<|tool|>") && has(src, "<|/tool|>")) || has(src, "<|tool_call|>")) return ToolFormat::Phi4Mini;
  if (has(src, "<tool_call>") && (has(src, "{\"name\"") || has(src, "{\\\"name\\\""))) return ToolFormat::Hermes;
  if (has(src, "<|start_header_id|>") && (has(src, "<|python_tag|>") || has(src, "\"parameters\"")))
    return ToolFormat::Llama3;
  if (has(src, "<start_of_turn>")) return ToolFormat::Gemma;
  return ToolFormat::Generic;
}

std::vector<std::string> tool_call_markers(ToolFormat f) {
  switch (f) {
    case ToolFormat::Hermes: return {"<tool_call>", "</tool_call>"};
    case ToolFormat::Llama3: return {"<|python_tag|>"};
    case ToolFormat::Mistral: return {"[TOOL_CALLS]"};
    case ToolFormat::MistralV11: return {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"};
    case ToolFormat::Phi4Mini: return {"<|tool_call|>", "<|/tool_call|>"};
    case ToolFormat::Gemma:
    case ToolFormat::Generic: return {};
  }
  return {};
}

TemplateCaps probe_template_caps(const text::ChatTemplate& tmpl) {
  using namespace tool_template_detail;
  TemplateCaps c;
  const ToolJson user = user_msg("ggflow_user_needle");
  std::string out = try_render(tmpl, ToolJson::array({{{"role", "system"}, {"content", "ggflow_system_needle"}}, user}), false);
  c.system_role = has(out, "ggflow_system_needle");
  c.tools = has(try_render(tmpl, ToolJson::array({user}), true), "ggflow_tool_needle");

  auto assistant = [](ToolJson calls) { return ToolJson{{"role", "assistant"}, {"content", ""}, {"tool_calls", std::move(calls)}}; };
  const ToolJson obj_args{{"ggflow_arg", "ggflow_value"}};
  const ToolJson str_args = std::string(R"({"ggflow_arg": "ggflow_value"})");
  out = try_render(tmpl, ToolJson::array({user, assistant(ToolJson::array({probe_call("ggflow_call_needle", obj_args)}))}), true);
  c.tool_calls = has(out, "ggflow_call_needle");
  c.object_arguments = has(out, "ggflow_arg") && !has(out, "\\\"ggflow_arg");
  out = try_render(tmpl, ToolJson::array({user, assistant(ToolJson::array({probe_call("ggflow_call_needle", str_args)}))}), true);
  c.string_arguments = has(out, "ggflow_arg") && !has(out, "\\\"ggflow_arg");

  const ToolJson& args = c.object_arguments || !c.string_arguments ? obj_args : str_args;
  out = try_render(tmpl, ToolJson::array({user, assistant(ToolJson::array({probe_call("ggflow_call_a", args), probe_call("ggflow_call_b", args)}))}), true);
  c.parallel_calls = has(out, "ggflow_call_a") && has(out, "ggflow_call_b");

  const ToolJson answer = c.tool_calls ? assistant(ToolJson::array({probe_call("ggflow_call_needle", args)}))
                                       : ToolJson{{"role", "assistant"}, {"content", "ggflow_assistant"}};
  const ToolJson tool{{"role", "tool"}, {"tool_call_id", "call00001"}, {"name", "ggflow_call_needle"}, {"content", "ggflow_response_needle"}};
  c.tool_responses = has(try_render(tmpl, ToolJson::array({user, answer, tool}), true), "ggflow_response_needle");

  out = try_render(tmpl, ToolJson::array({user_msg("ggflow_first"), user_msg("ggflow_second")}), false);
  c.alternation = !(has(out, "ggflow_first") && has(out, "ggflow_second"));
  return c;
}

ToolTemplate ToolTemplate::analyze(const text::ChatTemplate& tmpl, std::string_view source) {
  ToolTemplate t{detect_tool_format(source), probe_template_caps(tmpl)};
  const bool native = t.format == ToolFormat::Hermes || t.format == ToolFormat::Llama3 ||
                      t.format == ToolFormat::Mistral || t.format == ToolFormat::MistralV11;
  if (native && !t.caps.tools) t.format = ToolFormat::Generic;
  return t;
}

std::string generic_tools_prompt(const ToolRequest& r) {
  const std::string call = R"({"name": "<tool name>", "arguments": {<arguments>}})";
  std::string s = "You can call these tools (\"parameters\" is the JSON Schema of a tool's arguments):\n" +
                  tool_template_detail::tool_list(r) + "\nAnswer with one JSON object and nothing else.";
  if (r.choice == ToolChoice::Named)
    s += "\nYou must call the tool \"" + r.named + "\": {\"tool_calls\": [{\"name\": \"" + r.named + "\", \"arguments\": {<arguments>}}]}";
  else if (r.choice == ToolChoice::Required)
    s += "\nYou must call a tool: {\"tool_calls\": [" + call + "]}";
  else
    s += "\nTo call tools: {\"tool_calls\": [" + call + "]}\nTo answer the user directly: {\"response\": \"<your answer>\"}";
  if (!r.parallel) s += "\nCall at most one tool per answer.";
  return s;
}

std::string gemma_tools_prompt(const ToolRequest& r) {
  std::string s = "You can call these functions (\"parameters\" is the JSON Schema of a function's arguments):\n" +
                  tool_template_detail::tool_list(r) +
                  "\nTo call functions, answer with a tool_code block that holds one JSON object per call, and nothing else:\n"
                  "```tool_code\n{\"name\": \"<function name>\", \"arguments\": {<arguments>}}\n```\n"
                  "The results come back in a tool_output block.";
  if (r.choice == ToolChoice::Named) s += "\nYou must call the function \"" + r.named + "\".";
  else if (r.choice == ToolChoice::Required) s += "\nYou must call a function.";
  else s += "\nIf no function is needed, answer normally.";
  if (!r.parallel) s += "\nCall at most one function per answer.";
  return s;
}

Result<text::ChatInputs> prepare_tool_prompt(const ToolTemplate& info, const ToolJson& messages,
                                             const ToolRequest& tools, bool add_generation_prompt) {
  using namespace tool_template_detail;
  if (!messages.is_array()) return make_error("messages: must be an array");
  const ToolFormat f = info.format;
  const TemplateCaps& caps = info.caps;
  const bool mistral = f == ToolFormat::Mistral || f == ToolFormat::MistralV11;
  const bool native_calls = caps.tool_calls && f != ToolFormat::Generic && f != ToolFormat::Gemma;
  ToolJson out = ToolJson::array();
  std::vector<std::pair<std::string, std::string>> call_names;  // id -> name, for tool results

  for (const ToolJson& in : messages) {
    ToolJson m = in;
    if (!m.is_object()) return make_error("messages: every message must be an object");
    const std::string role = get_str(m, "role");
    if (m.contains("content") && m["content"].is_null()) m["content"] = "";
    if (role == "assistant" && m.contains("tool_calls") && m["tool_calls"].is_array() && !m["tool_calls"].empty()) {
      ToolJson& calls = m["tool_calls"];
      for (ToolJson& c : calls) {
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object())
          return make_error("messages: a tool call has no function object", "validate_tool_messages first");
        if (c.contains("id") && c["id"].is_string()) {
          if (mistral) c["id"] = mistral_id(c["id"].get<std::string>());
          call_names.emplace_back(c["id"].get<std::string>(), get_str(c["function"], "name"));
        }
        ToolJson& args = c["function"]["arguments"];
        if (args.is_string() && caps.object_arguments && !caps.string_arguments) {
          ToolJson v = arguments_value(args);
          if (v.is_object()) args = v;
        } else if (args.is_object() && caps.string_arguments && !caps.object_arguments) {
          args = py_dumps(args);
        }
      }
      if (native_calls) {
        if (caps.parallel_calls || calls.size() == 1) {
          out.push_back(m);
        } else {  // one call per assistant turn
          for (size_t i = 0; i < calls.size(); ++i) {
            ToolJson one = i == 0 ? m : ToolJson{{"role", "assistant"}, {"content", ""}};
            one["tool_calls"] = ToolJson::array({calls[i]});
            out.push_back(std::move(one));
          }
        }
      } else {
        const std::string text = content_text(m.value("content", ToolJson()));
        out.push_back(ToolJson{{"role", "assistant"}, {"content", text + (text.empty() ? "" : "\n") + calls_as_text(f, calls)}});
      }
      continue;
    }
    if (role == "tool") {
      std::string id = get_str(m, "tool_call_id");
      if (mistral && m.contains("tool_call_id")) m["tool_call_id"] = id = mistral_id(id);
      const std::string text = content_text(m.value("content", ToolJson()));
      if (f == ToolFormat::Gemma) {
        out.push_back(user_msg("```tool_output\n" + text + "\n```"));
      } else if (!caps.tool_responses) {
        ToolJson r = ToolJson::object();
        r["tool_call_id"] = id;
        std::string name = m.contains("name") && m["name"].is_string() ? m["name"].get<std::string>() : "";
        for (const auto& [cid, cname] : call_names)
          if (name.empty() && cid == id) name = cname;
        if (!name.empty()) r["name"] = name;
        r["content"] = text;
        out.push_back(user_msg(py_dumps(ToolJson{{"tool_response", r}})));
      } else {
        m["content"] = text;  // text parts joined: templates concatenate content as a string
        out.push_back(m);
      }
      continue;
    }
    out.push_back(m);
  }

  text::ChatInputs ci;
  ci.add_generation_prompt = add_generation_prompt;
  if (tools.active()) {
    auto add_system = [&](const std::string& text) {
      if (!out.empty() && get_str(out[0], "role") == "system") {
        const std::string old = content_text(out[0].value("content", ToolJson()));
        out[0]["content"] = old + (old.empty() ? "" : "\n\n") + text;
      } else {
        out.insert(out.begin(), ToolJson{{"role", "system"}, {"content", text}});
      }
    };
    if (f == ToolFormat::Generic) {
      add_system(generic_tools_prompt(tools));
    } else if (f == ToolFormat::Gemma) {
      add_system(gemma_tools_prompt(tools));
    } else if (f == ToolFormat::Phi4Mini && !caps.tools) {
      ToolJson fns = ToolJson::array();
      for (const ToolJson& t : tools.tools_json()) fns.push_back(t["function"]);
      if (out.empty() || get_str(out[0], "role") != "system")
        out.insert(out.begin(), ToolJson{{"role", "system"}, {"content", "You are a helpful assistant with some tools."}});
      out[0]["tools"] = py_dumps(fns);
    } else {
      ci.tools = tools.tools_json();
    }
  }
  // A system message the template cannot show goes at the top of the first user turn.
  if (!caps.system_role && !out.empty() && get_str(out[0], "role") == "system") {
    const std::string text = content_text(out[0].value("content", ToolJson()));
    out.erase(out.begin());
    if (!out.empty() && get_str(out[0], "role") == "user")
      out[0]["content"] = text + "\n\n" + content_text(out[0].value("content", ToolJson()));
    else
      out.insert(out.begin(), user_msg(text));
  }
  if (caps.alternation) {  // user (or assistant) turns in a row become one; tool results stay apart
    ToolJson merged = ToolJson::array();
    for (ToolJson& m : out) {
      const std::string role = get_str(m, "role");
      if (!merged.empty() && (role == "user" || role == "assistant") && get_str(merged.back(), "role") == role &&
          !m.contains("tool_calls") && !merged.back().contains("tool_calls")) {
        merged.back()["content"] = content_text(merged.back()["content"]) + "\n\n" + content_text(m.value("content", ToolJson()));
        continue;
      }
      merged.push_back(std::move(m));
    }
    out = std::move(merged);
  }
  ci.messages = std::move(out);
  return ci;
}

Result<std::string> render_with_tools(const text::ChatTemplate& tmpl, const ToolTemplate& info,
                                      const ToolJson& messages, const ToolRequest& tools,
                                      bool add_generation_prompt, const std::string& bos_token,
                                      const std::string& eos_token) {
  auto in = prepare_tool_prompt(info, messages, tools, add_generation_prompt);
  if (!in) return in.error();
  in->bos_token = bos_token;
  in->eos_token = eos_token;
  return tmpl.render(*in);
}

}  // namespace ggflow::pipeline
