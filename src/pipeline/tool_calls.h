// Tool calling (OpenAI `tools`): how tools go into the prompt and how calls come out of the text.
//
// Model: a chat template belongs to one tool-call *format* (the syntax its model was trained to
// write calls in), detected once from the template's source (detect_tool_format); what the
// template can render (a system role, `tools`, assistant `tool_calls`, `tool` messages, ...) is
// probed once by rendering small conversations (probe_template_caps). A request's tools
// (parse_tool_request) then go into the prompt the way the format wants (render_with_tools): the
// template's own `tools` variable where it has one, else a system text ggflow writes (the Generic
// format: answer a JSON object {"tool_calls": [...]} or {"response": "..."}). What the template
// cannot render is rewritten first (history calls as text in the format's syntax, tool results
// as user text, a system message folded into the first user turn, same-role turns merged).
// The generated text goes through a ToolCallParser, which splits it into content and calls, also
// incrementally for streaming (content that may still turn into a call marker is held back).
// For tool_choice `required` or a named function, and always for the Generic format, the request
// also gets a GBNF grammar (tool_call_grammar) that forces a well-formed call in the format, with
// each tool's arguments constrained by its `parameters` schema.
//
// Formats (the text a model writes; all JSON is parsed leniently about whitespace):
//   Hermes     <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>  (Qwen2.5, Qwen3, Hermes 2/3, ...;
//              also a JSON array inside one tag, the bare call object at the start of the answer, and
//              a ```json block holding the call)
//   Llama3     {"name": "f", "parameters": {...}} at the start of the answer (";"-separated for
//              several), or after <|python_tag|> (also Llama 3.1's builtin `name.call(k="v")`)
//   Mistral    [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]          (Mistral Nemo / 7B v0.3)
//   MistralV11 [TOOL_CALLS]f[ARGS]{...}  (optionally f[CALL_ID]id[ARGS]{...}) (Mistral Small 3.2, Devstral, ...)
//              Both Mistral variants parse both syntaxes; they differ in the grammar they force.
//   Phi4Mini   <|tool_call|>{"name": "f", "arguments": {...}}<|/tool_call|> (or a JSON array inside;
//              also vLLM's functools[{...}] at the start). Tools go in the system message's
//              `tools` field, as the Phi-4-mini template reads them.
//   Gemma      ```tool_code\n{"name": "f", "arguments": {...}}\n```  (one call per line; Python calls
//              such as f(city="Paris") are parsed too). Gemma 2/3 templates have no tools: ggflow
//              describes them in the first user turn and returns results as ```tool_output``` blocks.
//   Generic    {"tool_calls": [{"name": "f", "arguments": {...}}]} or {"response": "text"}: the whole
//              answer is one JSON object (always under a grammar). For templates without tool
//              support (SmolLM2, Phi-3.5, ...) and for tool syntaxes ggflow does not parse (Qwen3.5's
//              <function=...> XML, GLM's <arg_key>, Gemma 4's call:f{...}, Command R, DeepSeek, ...).
//
// Markers that are control tokens in a model's vocabulary (<|python_tag|>, [TOOL_CALLS], [ARGS],
// <|tool_call|>) are hidden by the default detokenizer: the text given to the parser must render
// them (tool_call_markers lists them). Under a grammar, a marker is spelled with ordinary tokens
// (the grammar matcher never allows control tokens), which decodes to the same text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "grammar/grammar.h"
#include "text/template.h"

namespace ggflow::pipeline {

using ToolJson = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// Request side: tools, tool_choice, parallel_tool_calls.

struct ToolDef {
  std::string name;         // ^[a-zA-Z0-9_-]{1,64}$, unique in the request
  std::string description;  // may be empty
  ToolJson parameters;      // a JSON Schema object; {"type": "object", "properties": {}} when absent
  bool strict = false;      // true: a schema the grammar converter refuses is an error, not "any object"
};

enum class ToolChoice : uint8_t { None, Auto, Required, Named };

struct ToolRequest {
  std::vector<ToolDef> tools;
  ToolChoice choice = ToolChoice::None;  // Auto when tools are given and tool_choice is absent
  std::string named;                     // the function of ToolChoice::Named
  bool parallel = true;                  // parallel_tool_calls

  // Tools are shown to the model (and calls parsed from its answer): some tools and a choice other than none.
  bool active() const { return !tools.empty() && choice != ToolChoice::None; }
  // The tools array as templates receive it: [{"type": "function", "function": {name, description?, parameters}}].
  ToolJson tools_json() const;
  // The names calls may use: every tool's, or only the named one.
  std::vector<std::string> callable_names() const;
};

// Validates the request fields `tools`, `tool_choice` and `parallel_tool_calls` (each may be null:
// absent). Errors start with the exact field path, e.g.
// "tools[2].function.name: must match ^[a-zA-Z0-9_-]{1,64}$ (got \"get weather\")": the server
// answers 400 with `param` = the text before the first ": ".
Result<ToolRequest> parse_tool_request(const ToolJson* tools, const ToolJson* tool_choice,
                                       const ToolJson* parallel_tool_calls);

// Validates the tool parts of chat messages: assistant `tool_calls` ([{id, type: "function",
// function: {name, arguments: string or object}}], content may be null) and `tool` messages
// (tool_call_id: string, content: string or text parts). Errors name the path
// ("messages[3].tool_calls[0].function.name: ..."). Other roles and fields are not checked here.
Status validate_tool_messages(const ToolJson& messages);

// ---------------------------------------------------------------------------------------------
// Formats and templates.

enum class ToolFormat : uint8_t { Generic, Hermes, Llama3, Mistral, MistralV11, Phi4Mini, Gemma };

const char* tool_format_name(ToolFormat f);  // "generic", "hermes", "llama3", "mistral", "mistral-v11", "phi4-mini", "gemma"

// The format a chat template's model writes calls in, from the template's source text.
ToolFormat detect_tool_format(std::string_view template_source);

// Marker strings of the format that must appear in the text given to the parser (render these
// tokens even when the vocabulary marks them as control tokens).
std::vector<std::string> tool_call_markers(ToolFormat f);

// What a template renders, found by rendering small conversations and looking for needles.
struct TemplateCaps {
  bool system_role = false;        // a system message's text appears
  bool tools = false;              // the `tools` variable is rendered
  bool tool_calls = false;         // an assistant message's tool_calls are rendered
  bool object_arguments = false;   // tool_call.function.arguments rendered right when a JSON object
  bool string_arguments = false;   // ... when a JSON string
  bool parallel_calls = false;     // two calls in one assistant message both appear
  bool tool_responses = false;     // a `tool` message's content appears
  bool alternation = false;        // two user messages in a row fail: same-role turns must be merged
};
TemplateCaps probe_template_caps(const text::ChatTemplate& tmpl);

// What the tool layer knows about one chat template (computed once per model): the detected
// format, except that Hermes, Llama3 and Mistral fall back to Generic when the template does not
// render `tools` after all.
struct ToolTemplate {
  ToolFormat format = ToolFormat::Generic;
  TemplateCaps caps;
  static ToolTemplate analyze(const text::ChatTemplate& tmpl, std::string_view source);
};

// The messages and variables the template is rendered with: the request's messages rewritten for
// what the template can render (see the top of this file) and the tools where the format puts
// them. `messages` is OpenAI's chat shape (assistant `tool_calls` with string or object arguments,
// `tool` messages with tool_call_id); validate_tool_messages first. Tools are shown only when
// tools.active().
Result<text::ChatInputs> prepare_tool_prompt(const ToolTemplate& info, const ToolJson& messages,
                                             const ToolRequest& tools, bool add_generation_prompt);
// prepare_tool_prompt + render (bos/eos as text).
Result<std::string> render_with_tools(const text::ChatTemplate& tmpl, const ToolTemplate& info,
                                      const ToolJson& messages, const ToolRequest& tools,
                                      bool add_generation_prompt, const std::string& bos_token,
                                      const std::string& eos_token);

// The system text ggflow writes for the Generic and Gemma formats (tools, how to call them).
std::string generic_tools_prompt(const ToolRequest& tools);
std::string gemma_tools_prompt(const ToolRequest& tools);

// ---------------------------------------------------------------------------------------------
// Output side: parsing the generated text.

struct ToolCall {
  std::string id;         // call_<24 alphanumerics> (Mistral: 9 alphanumerics, as its templates require)
  std::string name;
  std::string arguments;  // JSON text, without whitespace outside strings (streamed arguments concatenated)
};

struct ParsedToolCalls {
  std::string content;          // the text outside calls (whitespace next to calls dropped, except between
                                // content before and after them); may be empty
  std::vector<ToolCall> calls;  // in order; non-empty: finish_reason "tool_calls" (instead of "stop")
};

// Call ids: random from a seed, or a counter (tests).
class ToolCallIds {
 public:
  ToolCallIds();  // seeded from std::random_device
  explicit ToolCallIds(uint64_t seed);
  static ToolCallIds counter();  // call_0, call_1, ... (Mistral: 000000000, 000000001, ...)
  std::string next(ToolFormat f);

 private:
  bool counter_ = false;
  uint64_t state_ = 0;
};

struct ToolParseOptions {
  ToolFormat format = ToolFormat::Generic;
  // Names a call may use (ToolRequest::callable_names()): a "call" to another name is content.
  // Empty: any valid name.
  std::vector<std::string> names;
  ToolCallIds ids;
};

struct ToolCallEvent {
  enum class Kind : uint8_t {
    Content,    // text: content that is certainly not part of a call
    CallStart,  // index, id, name: a call begins (OpenAI's first delta.tool_calls chunk, arguments "")
    Arguments,  // index, text: the next piece of the call's arguments JSON
  };
  Kind kind = Kind::Content;
  std::string text;
  size_t index = 0;
  std::string id, name;
};

// Incremental parser: push() the generated text piece by piece, then finish() once at the end.
// The events of all pushes and finish() concatenate to result(); pieces of any size (one byte at a
// time or the whole text) give the same result. Never fails: text that does not form a call is
// content. A call is committed once its marker, name and the start of its arguments object are
// seen; its arguments then stream as they arrive (if the text ends or breaks inside them, the
// call keeps what was written: finish_reason "length" tells the client why).
class ToolCallParser {
 public:
  explicit ToolCallParser(ToolParseOptions options);
  ~ToolCallParser();
  ToolCallParser(ToolCallParser&&) noexcept;
  ToolCallParser& operator=(ToolCallParser&&) noexcept;

  std::vector<ToolCallEvent> push(std::string_view text);
  std::vector<ToolCallEvent> finish();
  const ParsedToolCalls& result() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The whole text at once (a ToolCallParser fed one piece).
ParsedToolCalls parse_tool_calls(ToolParseOptions options, std::string_view text);
// Short form: any name, ids call_0, call_1, ...
ParsedToolCalls parse_tool_calls(ToolFormat format, std::string_view text);

// ---------------------------------------------------------------------------------------------
// Grammar for constrained calls.

// A grammar applies for tool_choice `required` or a named function, and for the Generic format
// whenever tools are active (there `auto` allows {"response": ...} too). Otherwise: free text.
bool tool_grammar_needed(ToolFormat format, const ToolRequest& tools);
// The GBNF (start rule `root`) forcing one call (several when tools.parallel, except Llama3's
// single-call format) of the callable tools in the format's syntax, each call's arguments
// constrained by its `parameters` (grammar::json_schema_to_gbnf). A schema the converter refuses
// becomes "any JSON object" for that tool, unless the tool is `strict`: then the error, prefixed
// with "tools[i].function.parameters: ". Errors when no grammar is needed too.
Result<std::string> tool_call_grammar(ToolFormat format, const ToolRequest& tools,
                                      const grammar::Limits& limits = {});
// Prefixes every rule name of GBNF text (definitions and references; literals, classes, repetition
// counts and comments untouched), so several grammars can live in one: root -> <prefix>root.
// Errors on unterminated literals or classes.
Result<std::string> prefix_gbnf_rules(std::string_view gbnf, std::string_view prefix);

}  // namespace ggflow::pipeline
