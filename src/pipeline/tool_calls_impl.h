// Internals of the tool-call parser (tool_calls_parser.cpp): the scanners it runs over text that
// may still be incomplete. Each matcher answers NeedMore when the text ends before it can decide
// (and `eof` is false), so a decision never depends on where the text was cut into pieces.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipeline/tool_calls.h"

namespace ggflow::pipeline::tool_scan {

enum class Match : uint8_t { NeedMore, No, Yes };

// ^[a-zA-Z0-9_-]{1,64}$, and one of `names` when that is not empty.
bool callable_name(std::string_view name, const std::vector<std::string>& names);

// Incremental JSON syntax check of one value whose top is an object, an array or a string (any
// value inside), fed a byte at a time. Nesting deeper than kMaxDepth is an error.
class JsonScanner {
 public:
  static constexpr size_t kMaxDepth = 128;
  enum class Step : uint8_t { More, Done, Error };
  // `significant` is set false for whitespace outside strings (left out of compact text).
  Step feed(char c, bool* significant);

 private:
  enum class Phase : uint8_t { KeyOrEnd, Key, Colon, Value, CommaOrEnd, ValueOrEnd };
  struct Frame {
    bool object;
    Phase phase;
  };
  Step value_start(char c);
  Step value_done();
  Step container(char c);

  std::vector<Frame> stack_;
  bool done_ = false;
  // token in progress
  bool in_string_ = false, key_ = false, escape_ = false;
  uint8_t hex_ = 0;
  const char* literal_ = nullptr;  // rest of true/false/null to match
  uint8_t number_ = 0;             // 0: none, else a NumberState
};

// `{"name": "f", "arguments": ` (or "parameters"; `"type": "function", ` may come first) up to
// the `{` that starts the arguments: Yes with the name and the offset of that `{`. No: not this
// shape (another key order, string arguments, an unknown name, not JSON): read the object whole.
struct CallHeader {
  std::string name;
  size_t args_at = 0;
};
Match match_call_header(std::string_view text, bool eof, const std::vector<std::string>& names, CallHeader* out);

// Mistral v11: `name[ARGS]` or `name[CALL_ID]id[ARGS]`, whitespace, then `{`: Yes with the name and
// the offset of the `{`.
Match match_mistral_header(std::string_view text, bool eof, const std::vector<std::string>& names, CallHeader* out);

// A complete call object (parsed): {"name", "arguments"|"parameters"} (or those inside a
// "function" object); arguments an object, or a string holding one; absent: {}. Returns false
// when it is not a call to a callable name.
bool call_from_json(const ToolJson& obj, const std::vector<std::string>& names, std::string* name, std::string* arguments);

// A Python call `name(key=value, ...)` (also `name.call(...)`, Llama 3.1's builtin tools) with
// literal values (strings, numbers, True/False/None, lists, tuples, dicts): Yes with the name,
// the arguments as compact JSON and the offset just after `)`.
struct PyCall {
  std::string name, arguments;
  size_t end = 0;
};
Match match_python_call(std::string_view text, bool eof, const std::vector<std::string>& names, PyCall* out);

// The Generic answer's opening: `{"tool_calls": [` (Yes, *calls = true) or `{"response": "`
// (*calls = false), whitespace allowed between tokens; *end is the offset after `[` or `"`.
Match match_generic_open(std::string_view text, bool eof, bool* calls, size_t* end);

// `lit` at text[at...]: Yes, No, or NeedMore when the text ends inside it.
Match match_literal(std::string_view text, size_t at, std::string_view lit, bool eof);

inline bool is_json_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace ggflow::pipeline::tool_scan
