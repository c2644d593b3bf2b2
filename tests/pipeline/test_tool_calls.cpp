// Tool calling (src/pipeline/tool_calls.h): request validation, format detection on real chat
// templates, prompts rendered with tools / history calls / tool results against jinja2
// (python/gen_tool_prompt_expected.py), output parsing per format, the incremental parser against
// the whole-text parser, and the grammars that force a call (compiled and run by the grammar
// engine over a byte vocabulary).
#include <gtest/gtest.h>

#include "require_file.h"

#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "pipeline/prompt.h"
#include "pipeline/tool_calls.h"

namespace fs = std::filesystem;
using namespace ggflow;
using namespace ggflow::pipeline;
using Json = nlohmann::ordered_json;

namespace {

const fs::path kData = fs::path(GGFLOW_ROOT) / "tests/pipeline/data/tool_calls";
const fs::path kShared = fs::path(GGFLOW_SHARED) / "data/chat-templates";

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The clock of python/gen_template_expected.py (FIXED_NOW): 2025-03-07 14:05:09.
std::string fixed_strftime(const std::string& fmt) {
  std::tm tm{};
  tm.tm_year = 2025 - 1900, tm.tm_mon = 2, tm.tm_mday = 7, tm.tm_hour = 14, tm.tm_min = 5, tm.tm_sec = 9;
  tm.tm_wday = 5, tm.tm_yday = 65;
  char buf[256];
  return std::string(buf, std::strftime(buf, sizeof buf, fmt.c_str(), &tm));
}

fs::path template_path(const std::string& ref) {
  const auto colon = ref.find(':');
  const std::string kind = ref.substr(0, colon), rest = ref.substr(colon + 1);
  return kind == "shared" ? kShared / rest : fs::path(GGFLOW_ROOT) / rest;
}

const Json& cases() {
  static const Json j = Json::parse(read(kData / "prompt_cases.json"));
  return j;
}

ToolRequest request_of(const Json& c) {
  const Json tools = c.value("with_tools", false) ? cases()["tools"] : Json();
  const Json choice = c.contains("tool_choice") ? c["tool_choice"] : Json();
  const Json parallel = c.contains("parallel_tool_calls") ? c["parallel_tool_calls"] : Json();
  auto r = parse_tool_request(&tools, &choice, &parallel);
  EXPECT_TRUE(r) << r.error().str();
  return r ? *r : ToolRequest{};
}

ToolRequest weather_tools(const char* choice = "\"auto\"", bool parallel = true) {
  const Json tools = cases()["tools"];
  const Json c = Json::parse(choice), p = parallel;
  auto r = parse_tool_request(&tools, &c, &p);
  EXPECT_TRUE(r) << r.error().str();
  return *r;
}

std::string error_of(const char* tools, const char* choice = "null", const char* parallel = "null") {
  const Json t = Json::parse(tools), c = Json::parse(choice), p = Json::parse(parallel);
  auto r = parse_tool_request(&t, &c, &p);
  return r ? std::string("(accepted)") : r.error().what;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Request validation

TEST(ToolRequest, ParsesAndDefaults) {
  ToolRequest r = weather_tools("null");
  ASSERT_EQ(r.tools.size(), 3u);
  EXPECT_EQ(r.choice, ToolChoice::Auto);
  EXPECT_TRUE(r.parallel);
  EXPECT_TRUE(r.active());
  EXPECT_EQ(r.tools[2].parameters.dump(), R"({"type":"object","properties":{}})");  // absent parameters
  EXPECT_EQ(r.callable_names(), (std::vector<std::string>{"get_weather", "search", "get_time"}));
  EXPECT_EQ(r.tools_json()[2].dump(), R"({"type":"function","function":{"name":"get_time","description":"The time now.","parameters":{"type":"object","properties":{}}}})");

  r = weather_tools(R"({"type": "function", "function": {"name": "search"}})", false);
  EXPECT_EQ(r.choice, ToolChoice::Named);
  EXPECT_EQ(r.named, "search");
  EXPECT_FALSE(r.parallel);
  EXPECT_EQ(r.callable_names(), std::vector<std::string>{"search"});

  auto none = parse_tool_request(nullptr, nullptr, nullptr);
  ASSERT_TRUE(none);
  EXPECT_EQ(none->choice, ToolChoice::None);
  EXPECT_FALSE(none->active());
  EXPECT_FALSE(weather_tools("\"none\"").active());
}

TEST(ToolRequest, ErrorsNameTheField) {
  const char* ok = R"([{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}}])";
  const std::string long_name(65, 'x');
  const std::vector<std::pair<std::string, std::string>> table = {
      {error_of("{}"), "tools: must be an array"},
      {error_of("[1]"), "tools[0]: must be an object"},
      {error_of(R"([{"function": {"name": "a"}}])"), "tools[0].type: missing"},
      {error_of(R"([{"type": "custom", "function": {"name": "a"}}])"), "tools[0].type: must be \"function\""},
      {error_of(R"([{"type": "function", "function": {"name": "a"}, "x": 1}])"), "tools[0].x: unknown field"},
      {error_of(R"([{"type": "function"}])"), "tools[0].function: missing"},
      {error_of(R"([{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {}}])"), "tools[1].function.name: missing"},
      {error_of(R"([{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "b"}},
                   {"type": "function", "function": {"name": "get weather"}}])"),
       "tools[2].function.name: must match ^[a-zA-Z0-9_-]{1,64}$ (got \"get weather\")"},
      {error_of(("[{\"type\": \"function\", \"function\": {\"name\": \"" + long_name + "\"}}]").c_str()), "tools[0].function.name: must match"},
      {error_of(R"([{"type": "function", "function": {"name": "a", "description": 3}}])"), "tools[0].function.description: must be a string"},
      {error_of(R"([{"type": "function", "function": {"name": "a", "parameters": []}}])"), "tools[0].function.parameters: must be a JSON Schema object"},
      {error_of(R"([{"type": "function", "function": {"name": "a", "parameters": {"type": "string"}}}])"), "tools[0].function.parameters.type: must be \"object\""},
      {error_of(R"([{"type": "function", "function": {"name": "a", "strict": "yes"}}])"), "tools[0].function.strict: must be a boolean"},
      {error_of(R"([{"type": "function", "function": {"name": "a", "extra": 1}}])"), "tools[0].function.extra: unknown field"},
      {error_of(R"([{"type": "function", "function": {"name": "a"}}, {"type": "function", "function": {"name": "a"}}])"),
       "tools[1].function.name: \"a\" is already the name of tools[0]"},
      {error_of(ok, R"("sometimes")"), "tool_choice: must be \"none\", \"auto\", \"required\""},
      {error_of(ok, "3"), "tool_choice: must be a string or an object"},
      {error_of("[]", R"("required")"), "tools: is an empty array"},
      {error_of(ok, R"({"type": "function", "function": {"name": "nope"}})"), "tool_choice.function.name: \"nope\" is not one of the tools (a, b)"},
      {error_of(ok, R"({"type": "tool", "function": {"name": "a"}})"), "tool_choice.type: must be \"function\""},
      {error_of(ok, R"({"type": "function"})"), "tool_choice.function: missing"},
      {error_of(ok, R"({"type": "function", "function": {"name": 1}})"), "tool_choice.function.name: must be a string"},
      {error_of(ok, "null", R"("yes")"), "parallel_tool_calls: must be a boolean"},
  };
  for (const auto& [got, want] : table) EXPECT_EQ(got.substr(0, want.size()), want) << got;

  Json many = Json::array();
  for (int i = 0; i < 129; ++i) many.push_back(Json{{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  auto r = parse_tool_request(&many, nullptr, nullptr);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().what.substr(0, 20), "tools: has 129 tools");
}

TEST(ToolRequest, ValidatesToolMessages) {
  auto check = [](const char* m) {
    auto st = validate_tool_messages(Json::parse(m));
    return st ? std::string("(ok)") : st.error().what;
  };
  EXPECT_EQ(check(R"([{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                      {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "ok"}]}])"),
            "(ok)");
  const std::vector<std::pair<std::string, std::string>> table = {
      {check(R"([{"role": "assistant", "tool_calls": {}}])"), "messages[0].tool_calls: must be an array"},
      {check(R"([{"role": "user"}, {"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": "{}"}}]}])"), "messages[1].tool_calls[0].id: missing"},
      {check(R"([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}])"), "messages[0].tool_calls[0].function.name: missing"},
      {check(R"([{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 3}}]}])"), "messages[0].tool_calls[0].function.arguments: must be a string"},
      {check(R"([{"role": "tool", "content": "x"}])"), "messages[0].tool_call_id: missing"},
      {check(R"([{"role": "tool", "tool_call_id": "c", "content": 5}])"), "messages[0].content: must be a string or an array"},
  };
  for (const auto& [got, want] : table) EXPECT_EQ(got.substr(0, want.size()), want) << got;
}

// ---------------------------------------------------------------------------------------------
// Formats and prompts

TEST(ToolFormats, DetectedOnRealTemplates) {
  for (const Json& t : cases()["templates"]) {
    const fs::path p = template_path(t["source"].get<std::string>());
    GGFLOW_REQUIRE_FILE(p, "chat templates (../shared/data/chat-templates)");
    const std::string src = read(p);
    auto tmpl = text::ChatTemplate::parse(src);
    ASSERT_TRUE(tmpl) << p << ": " << tmpl.error().str();
    const ToolTemplate info = ToolTemplate::analyze(*tmpl, src);
    EXPECT_EQ(tool_format_name(info.format), t["format"].get<std::string>()) << p;
  }
  // Every shared template analyzes (probes never fail the caller).
  if (fs::exists(kShared)) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(kShared)) {
      const std::string src = read(e.path());
      auto tmpl = text::ChatTemplate::parse(src);
      if (!tmpl) continue;
      const ToolTemplate info = ToolTemplate::analyze(*tmpl, src);
      if (src.find("[TOOL_CALLS]") != std::string::npos) {
        EXPECT_TRUE(info.format == ToolFormat::MistralV11 || info.format == ToolFormat::Mistral) << e.path();
      }
      ++n;
    }
    EXPECT_GE(n, 60);
  }
  EXPECT_EQ(detect_tool_format(""), ToolFormat::Generic);
  EXPECT_EQ(detect_tool_format("[TOOL_CALLS]{{ tools }}"), ToolFormat::Mistral);
  EXPECT_EQ(detect_tool_format("<tool_call>\n<function={{ name }}>"), ToolFormat::Generic);
}

// Each template x case rendered with tools, history calls and tool results equals jinja2's output
// of the same rules (or fails where jinja2 raised); the probed capabilities equal jinja2's too.
TEST(ToolPrompts, MatchJinja2) {
  const Json expected = Json::parse(read(kData / "prompt_expected.json"));
  int compared = 0;
  for (const Json& t : cases()["templates"]) {
    const std::string name = t["name"];
    const fs::path p = template_path(t["source"].get<std::string>());
    GGFLOW_REQUIRE_FILE(p, "chat templates (../shared/data/chat-templates)");
    const std::string src = read(p);
    auto tmpl = text::ChatTemplate::parse(src);
    ASSERT_TRUE(tmpl) << name;
    tmpl->strftime_now = fixed_strftime;
    const ToolTemplate info = ToolTemplate::analyze(*tmpl, src);
    const Json& exp = expected.at(name);
    const TemplateCaps& c = info.caps;
    const Json caps{{"system_role", c.system_role}, {"tools", c.tools}, {"tool_calls", c.tool_calls},
                    {"object_arguments", c.object_arguments}, {"string_arguments", c.string_arguments},
                    {"parallel_calls", c.parallel_calls}, {"tool_responses", c.tool_responses}, {"alternation", c.alternation}};
    EXPECT_EQ(caps.dump(), exp["caps"].dump()) << name;
    for (const Json& k : cases()["cases"]) {
      const std::string cname = k["name"];
      auto out = render_with_tools(*tmpl, info, k["messages"], request_of(k), k["add_generation_prompt"], "<s>", "</s>");
      const Json& e = exp.at(cname);
      if (e.contains("error")) {
        EXPECT_FALSE(out) << name << " / " << cname << ": jinja2 raised " << e["error"];
      } else {
        ASSERT_TRUE(out) << name << " / " << cname << ": " << out.error().str();
        EXPECT_EQ(*out, e["output"].get<std::string>()) << name << " / " << cname;
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 100);
}

// The same through PromptFormat on the real model file: its template is detected as Hermes, and
// its <tool_call> tags are ordinary (user-defined) tokens, so decoded text keeps them.
TEST(ToolPrompts, PromptFormatOnQwenFile) {
  const fs::path model = fs::path(GGFLOW_ROOT) / "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
  GGFLOW_REQUIRE_FILE(model, "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (make models)");
  auto file = gguf::File::open(model.string());
  ASSERT_TRUE(file) << file.error().str();
  auto fmt = PromptFormat::from_file(*file);
  ASSERT_TRUE(fmt) << fmt.error().str();
  EXPECT_EQ((*fmt)->tool_template().format, ToolFormat::Hermes);
  const Json expected = Json::parse(read(kData / "prompt_expected.json"));
  for (const Json& k : cases()["cases"]) {
    auto out = (*fmt)->apply_chat_template(k["messages"], request_of(k), k["add_generation_prompt"].get<bool>());
    ASSERT_TRUE(out) << out.error().str();
    EXPECT_EQ(*out, expected["qwen2.5-coder-0.5b"][k["name"].get<std::string>()]["output"].get<std::string>()) << k["name"];
  }
  const text::Tokenizer& tok = (*fmt)->tokenizer();
  for (const std::string& m : tool_call_markers(ToolFormat::Hermes)) {
    const int32_t id = tok.find_token(m);
    ASSERT_GE(id, 0) << m;
    EXPECT_FALSE(tok.is_control(id)) << m;
    auto piece = tok.piece(id);
    ASSERT_TRUE(piece);
    EXPECT_EQ(*piece, m);
  }
}

TEST(ToolPrompts, GenericTextAndMessages) {
  // SmolLM2's template has no tools: the Generic text goes into the system message.
  const ToolTemplate info{ToolFormat::Generic, TemplateCaps{true, false, false, false, false, false, true, false}};
  const Json msgs = Json::parse(R"([{"role": "user", "content": "hi"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"x\"}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "found"}])");
  auto in = prepare_tool_prompt(info, msgs, weather_tools("\"required\""), true);
  ASSERT_TRUE(in) << in.error().str();
  const Json& m = in->messages;
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_NE(m[0]["content"].get<std::string>().find("You must call a tool"), std::string::npos);
  EXPECT_EQ(m[2]["content"], R"({"tool_calls": [{"name": "search", "arguments": {"query": "x"}}]})");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_TRUE(in->tools.is_null());
  // tool_choice none: no tools text; the history still renders.
  in = prepare_tool_prompt(info, msgs, weather_tools("\"none\""), true);
  ASSERT_TRUE(in);
  EXPECT_EQ(in->messages.size(), 3u);
}

// ---------------------------------------------------------------------------------------------
// Output parsing

namespace {

struct ParseCase {
  ToolFormat format;
  std::string text;
  std::string content;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
};

const std::vector<std::string> kNames = {"get_weather", "search", "get_time"};

ToolParseOptions options(ToolFormat f, std::vector<std::string> names = kNames) {
  ToolParseOptions o;
  o.format = f;
  o.names = std::move(names);
  o.ids = ToolCallIds::counter();
  return o;
}

std::string describe(const ParsedToolCalls& r) {
  std::string s = "content=" + Json(r.content).dump(-1, ' ', false, Json::error_handler_t::replace);
  for (const auto& c : r.calls) s += " | " + c.id + " " + c.name + " " + c.arguments;
  return s;
}

// Feeds `text` in pieces cut at `cuts` (sorted offsets); checks that the events concatenate to
// the result and returns it.
ParsedToolCalls parse_in_pieces(ToolFormat f, const std::string& text, const std::vector<size_t>& cuts) {
  ToolCallParser p(options(f));
  std::string content;
  std::vector<ToolCall> calls;
  auto take = [&](const std::vector<ToolCallEvent>& evs) {
    for (const auto& e : evs) {
      if (e.kind == ToolCallEvent::Kind::Content) content += e.text;
      if (e.kind == ToolCallEvent::Kind::CallStart) {
        EXPECT_EQ(e.index, calls.size());
        calls.push_back(ToolCall{e.id, e.name, ""});
      }
      if (e.kind == ToolCallEvent::Kind::Arguments) {
        EXPECT_LT(e.index, calls.size());
        if (e.index < calls.size()) calls[e.index].arguments += e.text;
      }
    }
  };
  size_t at = 0;
  for (size_t c : cuts) {
    take(p.push(std::string_view(text).substr(at, c - at)));
    at = c;
  }
  take(p.push(std::string_view(text).substr(at)));
  take(p.finish());
  const ParsedToolCalls& r = p.result();
  EXPECT_EQ(content, r.content);
  EXPECT_EQ(calls.size(), r.calls.size());
  for (size_t i = 0; i < std::min(calls.size(), r.calls.size()); ++i) {
    EXPECT_EQ(calls[i].id, r.calls[i].id);
    EXPECT_EQ(calls[i].name, r.calls[i].name);
    EXPECT_EQ(calls[i].arguments, r.calls[i].arguments);
  }
  return r;
}

const std::string kW = R"({"location": "Paris"})";
const std::string kWc = R"({"location":"Paris"})";

std::vector<ParseCase> parse_cases() {
  using F = ToolFormat;
  return {
      // Hermes
      {F::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + kW + "}\n</tool_call>", "", {{"get_weather", kWc}}},
      {F::Hermes, "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + kW + "}\n</tool_call>\n<tool_call>\n"
                  "{\"name\": \"search\", \"arguments\": {\"query\": \"a  b\", \"limit\": [1, 2.5e3, -0, true, null]}}\n</tool_call>\nDone.",
       "Let me check.\nDone.", {{"get_weather", kWc}, {"search", R"({"query":"a  b","limit":[1,2.5e3,-0,true,null]})"}}},
      {F::Hermes, "<tool_call>[{\"name\": \"get_weather\", \"arguments\": " + kW + "}, {\"name\": \"get_time\", \"arguments\": {}}]</tool_call>",
       "", {{"get_weather", kWc}, {"get_time", "{}"}}},
      {F::Hermes, "<tool_call>\n{\"arguments\": {\"query\": \"x\"}, \"name\": \"search\"}\n</tool_call>", "", {{"search", R"({"query":"x"})"}}},
      {F::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"location\\\": \\\"Paris\\\"}\"}\n</tool_call>", "", {{"get_weather", kWc}}},
      {F::Hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": " + kW + "}", "", {{"get_weather", kWc}}},  // no closing tag
      {F::Hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Par", "", {{"get_weather", R"({"location":"Par)"}}},
      {F::Hermes, "<tool_call>{not json}</tool_call> ok", "<tool_call>{not json}</tool_call> ok", {}},
      {F::Hermes, "<tool_call>{\"name\": \"delete_all\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"delete_all\", \"arguments\": {}}</tool_call>", {}},
      {F::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"argu", "<tool_call>\n{\"name\": \"get_weather\", \"argu", {}},
      {F::Hermes, "if a < b and <tool then <tool_call", "if a < b and <tool then <tool_call", {}},
      {F::Hermes, "Plain answer.\n", "Plain answer.\n", {}},
      // Llama 3
      {F::Llama3, "{\"name\": \"get_weather\", \"parameters\": " + kW + "}", "", {{"get_weather", kWc}}},
      {F::Llama3, "  <|python_tag|>{\"type\": \"function\", \"name\": \"search\", \"parameters\": {\"query\": \"q\"}}", "", {{"search", R"({"query":"q"})"}}},
      {F::Llama3, "{\"name\": \"get_weather\", \"parameters\": " + kW + "}; {\"name\": \"get_time\", \"parameters\": {}}", "",
       {{"get_weather", kWc}, {"get_time", "{}"}}},
      {F::Llama3, "<|python_tag|>get_weather.call(location=\"Paris\")", "", {{"get_weather", kWc}}},
      {F::Llama3, "{\"name\": \"get_weather\", \"parameters\": " + kW + "}\nThe weather is nice.", "The weather is nice.", {{"get_weather", kWc}}},
      {F::Llama3, "{\"answer\": 42}", "{\"answer\": 42}", {}},
      {F::Llama3, "The capital is {Paris}.", "The capital is {Paris}.", {}},
      // Mistral
      {F::Mistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + kW + "}, {\"name\": \"search\", \"arguments\": {\"query\": \"x\"}, \"id\": \"abc\"}]",
       "", {{"get_weather", kWc}, {"search", R"({"query":"x"})"}}},
      {F::MistralV11, "Sure. [TOOL_CALLS]get_weather[ARGS]" + kW + "[TOOL_CALLS]search[CALL_ID]a1b2c3d4e[ARGS]{\"query\": \"x\"}", "Sure.",
       {{"get_weather", kWc}, {"search", R"({"query":"x"})"}}},
      {F::MistralV11, "[TOOL_CALLS]oops no", "[TOOL_CALLS]oops no", {}},
      // Phi-4-mini / Granite
      {F::Phi4Mini, "<|tool_call|>{\"name\": \"get_weather\", \"arguments\": " + kW + "}<|/tool_call|>", "", {{"get_weather", kWc}}},
      {F::Phi4Mini, "<|tool_call|>[{\"arguments\": " + kW + ", \"name\": \"get_weather\"}]", "", {{"get_weather", kWc}}},
      {F::Phi4Mini, "functools[{\"name\": \"search\", \"arguments\": {\"query\": \"x\"}}]", "", {{"search", R"({"query":"x"})"}}},
      {F::Phi4Mini, "I use functools[a lot].", "I use functools[a lot].", {}},
      // Gemma
      {F::Gemma, "```tool_code\n{\"name\": \"get_weather\", \"arguments\": " + kW + "}\n```", "", {{"get_weather", kWc}}},
      {F::Gemma, "Let me check.\n```tool_code\nget_weather(location=\"Paris\", unit='celsius')\nsearch(query=\"x\", limit=3, tags=[\"a\", 'b'], "
                 "opts={\"deep\": True, \"n\": None}, r=-1.5)\n```\n",
       "Let me check.", {{"get_weather", R"({"location":"Paris","unit":"celsius"})"}, {"search", R"({"query":"x","limit":3,"tags":["a","b"],"opts":{"deep":true,"n":null},"r":-1.5})"}}},
      {F::Gemma, "```python\nprint('hi')\n```", "```python\nprint('hi')\n```", {}},
      {F::Gemma, "```tool_code\nprint('hi')\n```", "```tool_code\nprint('hi')\n```", {}},
      // Generic
      {F::Generic, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": " + kW + "}]}", "", {{"get_weather", kWc}}},
      {F::Generic, "{\n  \"tool_calls\": [\n    {\"name\": \"get_weather\", \"arguments\": " + kW + "},\n    {\"name\": \"get_time\", \"arguments\": {}}\n  ]\n}\n",
       "", {{"get_weather", kWc}, {"get_time", "{}"}}},
      {F::Generic, R"({"response": "Hello \"world\"\n\u00e9 \ud83d\ude00 \/ ok"})", "Hello \"world\"\n\xc3\xa9 \xf0\x9f\x98\x80 / ok", {}},
      {F::Generic, "Just text.", "Just text.", {}},
      {F::Generic, "{\"foo\": 1}", "{\"foo\": 1}", {}},
  };
}

}  // namespace

TEST(ToolParse, EachFormat) {
  for (const ParseCase& c : parse_cases()) {
    const ParsedToolCalls r = parse_tool_calls(options(c.format), c.text);
    SCOPED_TRACE(std::string(tool_format_name(c.format)) + ": " + Json(c.text).dump() + " -> " + describe(r));
    EXPECT_EQ(r.content, c.content);
    ASSERT_EQ(r.calls.size(), c.calls.size());
    for (size_t i = 0; i < c.calls.size(); ++i) {
      EXPECT_EQ(r.calls[i].name, c.calls[i].first);
      EXPECT_EQ(r.calls[i].arguments, c.calls[i].second);
      EXPECT_EQ(r.calls[i].id, (c.format == ToolFormat::Mistral || c.format == ToolFormat::MistralV11 ? std::string(8, '0') : "call_") + std::to_string(i));
    }
  }
}

TEST(ToolParse, AnyNameWhenNoneGiven) {
  auto r = parse_tool_calls(ToolFormat::Hermes, "<tool_call>{\"name\": \"delete_all\", \"arguments\": {}}</tool_call>");
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "delete_all");
  r = parse_tool_calls(ToolFormat::Hermes, "<tool_call>{\"name\": \"bad name!\", \"arguments\": {}}</tool_call>");
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolParse, IncrementalMatchesWhole) {
  std::mt19937 rng(7);
  for (const ParseCase& c : parse_cases()) {
    SCOPED_TRACE(std::string(tool_format_name(c.format)) + ": " + Json(c.text).dump());
    const ParsedToolCalls whole = parse_in_pieces(c.format, c.text, {});
    std::vector<size_t> bytes;
    for (size_t i = 1; i < c.text.size(); ++i) bytes.push_back(i);
    const ParsedToolCalls one = parse_in_pieces(c.format, c.text, bytes);
    EXPECT_EQ(describe(one), describe(whole));
    for (int k = 0; k < 5; ++k) {  // random cuts
      std::vector<size_t> cuts;
      for (size_t i = 1; i < c.text.size(); ++i)
        if (rng() % 4 == 0) cuts.push_back(i);
      EXPECT_EQ(describe(parse_in_pieces(c.format, c.text, cuts)), describe(whole));
    }
  }
}

// Mutations of the cases above (pieces of markers, JSON and prose inserted, bytes deleted, the
// text cut short) and random mixes of such pieces: one byte at a time and whole always agree, and
// the parser never hangs or crashes.
TEST(ToolParse, RandomTextsAgree) {
  const std::vector<std::string> pieces = {
      "<tool_call>", "</tool_call>", "<tool", "{", "}", "[", "]", "\"name\"", ": ", "\"get_weather\"", ", ", "\"arguments\"",
      "\"parameters\"", "{\"location\": \"Paris\"}", "\n", " ", "text", "[TOOL_CALLS]", "[ARGS]", "get_weather", "<|python_tag|>",
      "<|tool_call|>", "<|/tool_call|>", "functools", "```tool_code\n", "```", "(location=\"x\")", "\"response\"", "\"tool_calls\"",
      "\\", "\\u00e9", "\"", "1", "-", ";", "\xc3\xa9"};
  const std::vector<ParseCase> base = parse_cases();
  std::mt19937 rng(42);
  int with_calls = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    ToolFormat f;
    std::string text;
    if (iter % 3 == 0) {
      f = static_cast<ToolFormat>(rng() % 7);
      for (int i = 0, n = 1 + int(rng() % 14); i < n; ++i) text += pieces[rng() % pieces.size()];
    } else {
      const ParseCase& c = base[rng() % base.size()];
      f = c.format, text = c.text;
      for (int i = 0, n = 1 + int(rng() % 3); i < n && !text.empty(); ++i) {
        const size_t at = rng() % (text.size() + 1);
        switch (rng() % 3) {
          case 0: text.insert(at, pieces[rng() % pieces.size()]); break;
          case 1: text.erase(at, 1 + rng() % 4); break;
          default: text.resize(at); break;
        }
      }
    }
    SCOPED_TRACE(std::string(tool_format_name(f)) + ": " + Json(text).dump(-1, ' ', false, Json::error_handler_t::replace));
    std::vector<size_t> bytes;
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    const ParsedToolCalls whole = parse_in_pieces(f, text, {});
    EXPECT_EQ(describe(parse_in_pieces(f, text, bytes)), describe(whole));
    with_calls += !whole.calls.empty();
  }
  EXPECT_GE(with_calls, 100);  // many mutations keep calls
}

TEST(ToolParse, StreamsEvents) {
  ToolCallParser p(options(ToolFormat::Hermes));
  auto ev = p.push("Hello <tool");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, ToolCallEvent::Kind::Content);
  EXPECT_EQ(ev[0].text, "Hello");  // the space and "<tool" are held back
  ev = p.push("_call>\n{\"name\": \"get_weather\", \"arguments\": {");
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, ToolCallEvent::Kind::CallStart);
  EXPECT_EQ(ev[0].index, 0u);
  EXPECT_EQ(ev[0].id, "call_0");
  EXPECT_EQ(ev[0].name, "get_weather");
  EXPECT_EQ(ev[1].kind, ToolCallEvent::Kind::Arguments);
  EXPECT_EQ(ev[1].text, "{");
  ev = p.push("\"location\": \"Pa");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].text, "\"location\":\"Pa");
  ev = p.push("ris\"}}\n</tool_call>");
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].text, "ris\"}");
  EXPECT_TRUE(p.finish().empty());
  EXPECT_EQ(p.result().content, "Hello");
  ASSERT_EQ(p.result().calls.size(), 1u);
  EXPECT_EQ(p.result().calls[0].arguments, kWc);
}

TEST(ToolParse, Ids) {
  ToolCallIds a(123), b(123), c(124);
  const std::string x = a.next(ToolFormat::Hermes);
  EXPECT_EQ(x.size(), 5u + 24u);
  EXPECT_EQ(x.substr(0, 5), "call_");
  EXPECT_EQ(x, b.next(ToolFormat::Hermes));
  EXPECT_NE(x, c.next(ToolFormat::Hermes));
  const std::string m = a.next(ToolFormat::MistralV11);
  EXPECT_EQ(m.size(), 9u);
  for (char ch : m) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)));
  ToolCallIds k = ToolCallIds::counter();
  EXPECT_EQ(k.next(ToolFormat::Generic), "call_0");
  EXPECT_EQ(k.next(ToolFormat::Mistral), "000000001");
  EXPECT_NE(ToolCallIds().next(ToolFormat::Hermes), ToolCallIds().next(ToolFormat::Hermes));
}

// ---------------------------------------------------------------------------------------------
// Grammars

namespace {

std::shared_ptr<const grammar::TokenVocab> byte_vocab() {
  static const auto v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, char(b)));
    pieces.push_back("<eos>");
    const std::vector<int32_t> eog = {256};
    auto r = grammar::TokenVocab::from_pieces(pieces, {}, eog);
    return r ? *r : nullptr;
  }();
  return v;
}

// The grammar accepts `text` as a complete answer.
bool accepts(const std::shared_ptr<const grammar::Grammar>& g, const std::string& text) {
  auto m = grammar::Matcher::create(g, byte_vocab());
  if (!m) return false;
  return m->accept_bytes(text).ok() && m->is_complete();
}

}  // namespace

TEST(ToolGrammar, PrefixRules) {
  auto r = prefix_gbnf_rules("root ::= a \"x{1} a\" [a-z\\]]{2,3} b-c # root a\na ::= \"q\\\"\"\nb-c ::= a* | ( a ) .\n", "t0-");
  ASSERT_TRUE(r) << r.error().str();
  EXPECT_EQ(*r, "t0-root ::= t0-a \"x{1} a\" [a-z\\]]{2,3} t0-b-c # root a\nt0-a ::= \"q\\\"\"\nt0-b-c ::= t0-a* | ( t0-a ) .\n");
  EXPECT_FALSE(prefix_gbnf_rules("root ::= \"open", "p-"));
  EXPECT_FALSE(prefix_gbnf_rules("root ::= [abc", "p-"));
}

TEST(ToolGrammar, Needed) {
  EXPECT_FALSE(tool_grammar_needed(ToolFormat::Hermes, weather_tools("\"auto\"")));
  EXPECT_TRUE(tool_grammar_needed(ToolFormat::Hermes, weather_tools("\"required\"")));
  EXPECT_TRUE(tool_grammar_needed(ToolFormat::Hermes, weather_tools(R"({"type": "function", "function": {"name": "search"}})")));
  EXPECT_TRUE(tool_grammar_needed(ToolFormat::Generic, weather_tools("\"auto\"")));
  EXPECT_FALSE(tool_grammar_needed(ToolFormat::Generic, weather_tools("\"none\"")));
  EXPECT_FALSE(tool_call_grammar(ToolFormat::Hermes, weather_tools("\"auto\"")));
}

// For each format: the grammar compiles, accepts a well-formed call (which the parser reads back
// as that call) and rejects a wrong name, arguments against the schema, and a wrong frame.
TEST(ToolGrammar, ForcesWellFormedCalls) {
  using F = ToolFormat;
  struct Case {
    F format;
    std::string good;  // a get_weather call with location Paris
    std::string two;   // two calls (parallel), or "" when the format has one call
  };
  const std::string a = R"({"location": "Paris", "unit": "celsius"})", q = R"({"query": "x"})";
  const std::vector<Case> table = {
      {F::Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + a + "}\n</tool_call>",
       "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": " + a + "}\n</tool_call>\n<tool_call>\n{\"name\": \"search\", \"arguments\": " + q + "}\n</tool_call>"},
      {F::Llama3, "{\"name\": \"get_weather\", \"parameters\": " + a + "}", ""},
      {F::Mistral, "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + a + "}]",
       "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": " + a + "}, {\"name\": \"search\", \"arguments\": " + q + "}]"},
      {F::MistralV11, "[TOOL_CALLS]get_weather[ARGS]" + a, "[TOOL_CALLS]get_weather[ARGS]" + a + "[TOOL_CALLS]search[ARGS]" + q},
      {F::Phi4Mini, "<|tool_call|>{\"name\": \"get_weather\", \"arguments\": " + a + "}<|/tool_call|>",
       "<|tool_call|>{\"name\": \"get_weather\", \"arguments\": " + a + "}<|/tool_call|><|tool_call|>{\"name\": \"search\", \"arguments\": " + q + "}<|/tool_call|>"},
      {F::Gemma, "```tool_code\n{\"name\": \"get_weather\", \"arguments\": " + a + "}\n```",
       "```tool_code\n{\"name\": \"get_weather\", \"arguments\": " + a + "}\n{\"name\": \"search\", \"arguments\": " + q + "}\n```"},
      {F::Generic, "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": " + a + "}]}",
       "{\"tool_calls\": [{\"name\": \"get_weather\", \"arguments\": " + a + "}, {\"name\": \"search\", \"arguments\": " + q + "}]}"},
  };
  auto replace = [](std::string s, const std::string& from, const std::string& to) {
    const size_t at = s.find(from);
    return at == std::string::npos ? s : s.replace(at, from.size(), to);
  };
  for (const Case& c : table) {
    SCOPED_TRACE(tool_format_name(c.format));
    auto gbnf = tool_call_grammar(c.format, weather_tools("\"required\""));
    ASSERT_TRUE(gbnf) << gbnf.error().str();
    auto g = grammar::parse_gbnf(*gbnf);
    ASSERT_TRUE(g) << g.error().str() << "\n" << *gbnf;
    EXPECT_TRUE(accepts(*g, c.good)) << *gbnf;
    const ParsedToolCalls back = parse_tool_calls(options(c.format), c.good);
    ASSERT_EQ(back.calls.size(), 1u) << describe(back);
    EXPECT_EQ(back.calls[0].name, "get_weather");
    EXPECT_EQ(back.calls[0].arguments, R"({"location":"Paris","unit":"celsius"})");
    EXPECT_EQ(back.content, "");
    if (!c.two.empty()) {
      EXPECT_TRUE(accepts(*g, c.two));
      EXPECT_EQ(parse_tool_calls(options(c.format), c.two).calls.size(), 2u);
    }
    EXPECT_FALSE(accepts(*g, replace(c.good, "get_weather", "get_wether")));                // unknown tool
    EXPECT_FALSE(accepts(*g, replace(c.good, "\"location\": \"Paris\", ", "")));            // required argument missing
    EXPECT_FALSE(accepts(*g, replace(c.good, "celsius", "kelvin")));                         // not in the enum
    EXPECT_FALSE(accepts(*g, "Sure! " + c.good));                                            // text before the call
    EXPECT_FALSE(accepts(*g, c.good.substr(0, c.good.size() - 1)));                          // cut short

    // A named function: only that one; not parallel: one call only.
    gbnf = tool_call_grammar(c.format, weather_tools(R"({"type": "function", "function": {"name": "get_weather"}})", false));
    ASSERT_TRUE(gbnf) << gbnf.error().str();
    g = grammar::parse_gbnf(*gbnf);
    ASSERT_TRUE(g) << g.error().str();
    EXPECT_TRUE(accepts(*g, c.good));
    if (!c.two.empty()) {
      EXPECT_FALSE(accepts(*g, c.two));
    }
  }
  // Generic under tool_choice auto may answer in text.
  auto gbnf = tool_call_grammar(ToolFormat::Generic, weather_tools("\"auto\""));
  ASSERT_TRUE(gbnf);
  auto g = grammar::parse_gbnf(*gbnf);
  ASSERT_TRUE(g) << g.error().str();
  const std::string resp = R"({"response": "It is \"sunny\"\n\u00e9 é"})";
  EXPECT_TRUE(accepts(*g, resp));
  EXPECT_EQ(parse_tool_calls(options(ToolFormat::Generic), resp).content, "It is \"sunny\"\n\xc3\xa9 é");
  EXPECT_TRUE(accepts(*g, table.back().good));
  EXPECT_FALSE(accepts(*g, "It is sunny."));
}

TEST(ToolGrammar, UnsupportedSchemas) {
  const Json tools = Json::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"x": {"type": "string"}}, "patternProperties": {"^a": {"type": "string"}}}}},
      {"type": "function", "function": {"name": "g", "strict": true, "parameters": {"type": "object", "properties": {"n": {"not": {}}}}}}])");
  const Json req = "required";
  auto r = parse_tool_request(&tools, &req, nullptr);
  ASSERT_TRUE(r);
  auto gbnf = tool_call_grammar(ToolFormat::Hermes, *r);
  ASSERT_FALSE(gbnf);  // g is strict: its schema's error, with the tool's path
  EXPECT_EQ(gbnf.error().what.substr(0, 43), "tools[1].function.parameters: json schema: ");
  r->tools.pop_back();  // f alone is not strict: any arguments object
  gbnf = tool_call_grammar(ToolFormat::Hermes, *r);
  ASSERT_TRUE(gbnf) << gbnf.error().str();
  auto g = grammar::parse_gbnf(*gbnf);
  ASSERT_TRUE(g) << g.error().str();
  EXPECT_TRUE(accepts(*g, "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"anything\": [1, {\"b\": null}]}}\n</tool_call>"));
}
