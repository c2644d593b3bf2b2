// ToolCallParser: the generated text split into content and calls, incrementally.
//
// Model: the text accumulates in a buffer; a state machine walks it and stops where the text so
// far cannot decide (a possible marker prefix, an unfinished call header, an unfinished object).
// Text state: content up to the earliest call marker of the format (or, at the very start of the
// answer, a start trigger such as Llama 3's `{`), holding back a tail that may begin a marker.
// A marker opens a block whose body is one call object or a [list] (Hermes, Phi-4-mini), a
// sequence of calls (Llama 3, Gemma), Mistral's list or name[ARGS]{...}, or the Generic answer
// object. A call whose header (`{"name": "f", "arguments": {`) is complete is committed
// (CallStart) and its arguments stream through a JSON scanner, without whitespace outside strings;
// other call shapes are read whole, then committed. A block that fails before its first call is
// content (its marker text included) and scanning goes on after the marker; a later failure ends
// the block there. Whitespace next to calls is dropped, except what separates content before a
// call from content after it. Every decision depends on the text only, never on how the text was
// cut into pieces.
#include "pipeline/tool_calls_impl.h"

namespace ggflow::pipeline {

namespace tool_parser_detail {

using namespace tool_scan;

enum class State : uint8_t { Text, BlockOpen, ListItem, ListAfter, SeqItem, Call, BlockClose, GenericOpen, GenericResponse, GenericTail };
enum class Body : uint8_t { Single, List, Sequence, Mistral, Generic };
enum class Mode : uint8_t { Header, MistralHeader, Args, Tail, Buffered, Python };

struct Syntax {
  std::vector<std::string> markers;  // open a block anywhere
  std::vector<std::string> closes;   // per marker: its own close (empty entry or none: `close`)
  std::string start;                 // opens a block at the start of the answer only ("{": the call itself)
  std::string close;                 // ends a block (optional in the text)
  Body body = Body::Single, start_body = Body::Single;
  std::string seps;                  // Sequence: separators besides whitespace
  bool python = false;               // Sequence items may be Python calls
};

Syntax syntax_of(ToolFormat f) {
  Syntax s;
  switch (f) {
    // Hermes: small Qwen2.5 models often answer the bare call object without the tags (llama.cpp's
    // parser accepts it too): at the very start of the answer, `{` opens one call.
    // and Qwen2.5-Coder 1.5B writes it as a ```json block: both are calls too.
    case ToolFormat::Hermes:
      s.markers = {"<tool_call>", "```json"}, s.closes = {"", "```"}, s.close = "</tool_call>", s.start = "{";
      break;
    case ToolFormat::Llama3:
      s.markers = {"<|python_tag|>"}, s.start = "{", s.body = s.start_body = Body::Sequence, s.seps = ";", s.python = true;
      break;
    case ToolFormat::Mistral:
    case ToolFormat::MistralV11: s.markers = {"[TOOL_CALLS]"}, s.body = Body::Mistral; break;
    case ToolFormat::Phi4Mini:
      s.markers = {"<|tool_call|>"}, s.close = "<|/tool_call|>", s.start = "functools", s.start_body = Body::List;
      break;
    case ToolFormat::Gemma:
      s.markers = {"```tool_code"}, s.close = "```", s.body = Body::Sequence, s.seps = ",;", s.python = true;
      break;
    case ToolFormat::Generic: s.start = "{", s.start_body = Body::Generic; break;
  }
  return s;
}

bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) out += char(cp);
  else if (cp < 0x800) out += {char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
  else if (cp < 0x10000) out += {char(0xE0 | (cp >> 12)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
  else out += {char(0xF0 | (cp >> 18)), char(0x80 | ((cp >> 12) & 0x3F)), char(0x80 | ((cp >> 6) & 0x3F)), char(0x80 | (cp & 0x3F))};
}

// \uXXXX at s[at] (at on the backslash): the value, or -1 when not one.
int32_t hex4(std::string_view s, size_t at) {
  if (at + 6 > s.size() || s[at] != '\\' || s[at + 1] != 'u') return -1;
  int32_t v = 0;
  for (size_t i = at + 2; i < at + 6; ++i) {
    const char c = s[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

struct ParserImpl {
  ToolParseOptions opt;
  Syntax syn;
  std::string buf;
  size_t pos = 0;
  bool eof = false;
  std::vector<ToolCallEvent> ev;
  ParsedToolCalls res;

  // content whitespace: held at the end of content (dropped if a call follows); after a call,
  // dropped unless content follows (and content came before)
  std::string pending_ws;
  bool after_call = false;  // no content since the last call
  bool started = false;  // content or a call seen (start triggers apply before)

  State st = State::Text;
  // the open block
  size_t block_start = 0, marker_end = 0, block_calls = 0;
  std::string block_close_text;  // what ends the open block (its marker's close, or the format's)
  Body body = Body::Single;
  bool in_list = false;
  // the call being read
  Mode mode = Mode::Header;
  size_t call_start = 0, cur = 0;
  bool bare = false;  // Mistral v11: the call ends with its arguments
  JsonScanner obj, args;
  std::string delta;

  explicit ParserImpl(ToolParseOptions o) : opt(std::move(o)), syn(syntax_of(opt.format)) {}

  // --- output ---
  void emit_content(std::string_view s) {
    if (s.empty()) return;
    if (after_call) {  // whitespace after a call: kept only between content before and after calls
      size_t b = 0;
      while (b < s.size() && is_json_ws(s[b])) ++b;
      if (b == s.size()) {
        if (!res.content.empty()) pending_ws += s;
        return;
      }
      if (res.content.empty()) s.remove_prefix(b);
      after_call = false;
    }
    size_t e = s.size();
    while (e > 0 && is_json_ws(s[e - 1])) --e;
    if (e == 0) {
      pending_ws += s;
      return;
    }
    std::string text = pending_ws + std::string(s.substr(0, e));
    pending_ws = std::string(s.substr(e));
    started = true;
    push_content(text);
  }
  void push_content(const std::string& text) {
    res.content += text;
    if (!ev.empty() && ev.back().kind == ToolCallEvent::Kind::Content) ev.back().text += text;
    else ev.push_back(ToolCallEvent{ToolCallEvent::Kind::Content, text, 0, {}, {}});
  }
  void commit(const std::string& name) {
    const size_t index = res.calls.size();
    ToolCall c{opt.ids.next(opt.format), name, ""};
    ev.push_back(ToolCallEvent{ToolCallEvent::Kind::CallStart, "", index, c.id, c.name});
    res.calls.push_back(std::move(c));
    ++block_calls;
    pending_ws.clear();
    started = true;
  }
  void arguments(const std::string& piece) {
    if (piece.empty()) return;
    res.calls.back().arguments += piece;
    ev.push_back(ToolCallEvent{ToolCallEvent::Kind::Arguments, piece, res.calls.size() - 1, {}, {}});
  }

  // --- blocks ---
  void open_block(size_t start, size_t mend, Body b, const std::string* close = nullptr) {
    block_start = start, marker_end = mend, block_calls = 0, body = b, in_list = false;
    block_close_text = close && !close->empty() ? *close : syn.close;
    pos = mend;
    st = b == Body::Generic ? State::GenericOpen : State::BlockOpen;
  }
  void end_block(size_t at) {
    pos = at;
    st = State::Text;
    if (block_calls > 0) after_call = true;
  }
  // The item at `at` is not a call: before any call of the block, the marker is content.
  void fail_item(size_t at) {
    if (block_calls > 0) return end_block(at);
    emit_content(std::string_view(buf).substr(block_start, marker_end - block_start));
    pos = marker_end;
    st = State::Text;
  }
  void start_call(size_t at, Mode m) {
    call_start = cur = at, mode = m, bare = false;
    obj = JsonScanner{}, args = JsonScanner{};
    st = State::Call;
  }
  void call_done(size_t at) {
    pos = at;
    if (in_list) st = State::ListAfter;
    else if (body == Body::Sequence) st = State::SeqItem;
    else if (body == Body::Mistral) end_block(at);
    else st = State::BlockClose;
  }
  // Skips whitespace (and `seps`) from pos; false when the text ends there.
  bool skip(size_t* p, std::string_view seps = {}) {
    *p = pos;
    while (*p < buf.size() && (is_json_ws(buf[*p]) || seps.find(buf[*p]) != std::string_view::npos)) ++*p;
    return *p < buf.size();
  }

  // --- states: each returns false to wait for more text ---
  bool text() {
    if (!started && !syn.start.empty()) {
      size_t p = pos;
      while (p < buf.size() && is_json_ws(buf[p])) ++p;
      emit_content(std::string_view(buf).substr(pos, p - pos));
      pos = p;
      if (p == buf.size() && !eof) return false;
      const Match m = match_literal(buf, p, syn.start, eof);
      if (m == Match::NeedMore) return false;
      started = true;
      if (m == Match::Yes) {
        open_block(p, syn.start == "{" ? p : p + syn.start.size(), syn.start_body);
        return true;
      }
    }
    size_t best = std::string::npos, len = 0, which = 0;
    for (size_t k = 0; k < syn.markers.size(); ++k)
      if (size_t i = buf.find(syn.markers[k], pos); i < best) best = i, len = syn.markers[k].size(), which = k;
    if (best != std::string::npos) {
      emit_content(std::string_view(buf).substr(pos, best - pos));
      open_block(best, best + len, syn.body, which < syn.closes.size() ? &syn.closes[which] : nullptr);
      return true;
    }
    size_t hold = 0;
    if (!eof)
      for (const auto& m : syn.markers)
        for (size_t k = std::min(m.size() - 1, buf.size() - pos); k > hold; --k)
          if (buf.compare(buf.size() - k, k, m, 0, k) == 0) {
            hold = k;
            break;
          }
    emit_content(std::string_view(buf).substr(pos, buf.size() - hold - pos));
    pos = buf.size() - hold;
    if (pos > 4096) {  // only the text state may drop consumed text
      buf.erase(0, pos);
      pos = 0;
    }
    return false;
  }

  bool block_open() {
    size_t p;
    if (!skip(&p)) return eof ? (fail_item(p), true) : false;
    const char c = buf[p];
    if (body == Body::Sequence) {
      st = State::SeqItem;
    } else if (c == '[') {
      in_list = true;
      pos = p + 1;
      st = State::ListItem;
    } else if (c == '{' && body == Body::Single) {
      start_call(p, Mode::Header);
    } else if (body == Body::Mistral && c != '{') {
      start_call(p, Mode::MistralHeader);
    } else {
      fail_item(p);
    }
    return true;
  }

  bool list_item() {
    size_t p;
    if (!skip(&p)) return eof ? (fail_item(p), true) : false;
    if (buf[p] == '{') start_call(p, Mode::Header);
    else if (buf[p] == ']') pos = p, st = State::ListAfter;
    else fail_item(p);
    return true;
  }

  bool list_after() {
    size_t p;
    if (!skip(&p)) return eof ? (end_block(p), true) : false;
    if (buf[p] == ',') pos = p + 1, st = State::ListItem;
    else if (buf[p] == ']') pos = p + 1, st = body == Body::Generic ? State::GenericTail : State::BlockClose;
    else end_block(p);
    return true;
  }

  bool seq_item() {
    size_t p;
    if (!skip(&p, syn.seps)) return eof ? (fail_item(p), true) : false;
    if (!block_close_text.empty()) {
      const Match m = match_literal(buf, p, block_close_text, eof);
      if (m == Match::NeedMore) return false;
      if (m == Match::Yes) return end_block(p + block_close_text.size()), true;
    }
    if (buf[p] == '{') start_call(p, Mode::Header);
    else if (syn.python && ident_start(buf[p])) start_call(p, Mode::Python);
    else fail_item(p);
    return true;
  }

  bool block_close() {
    if (block_close_text.empty()) return end_block(pos), true;
    size_t p;
    if (!skip(&p)) return eof ? (end_block(p), true) : false;
    const Match m = match_literal(buf, p, block_close_text, eof);
    if (m == Match::NeedMore) return false;
    end_block(m == Match::Yes ? p + block_close_text.size() : p);
    return true;
  }

  bool call() {
    const std::string_view text = std::string_view(buf).substr(call_start);
    bool sig = false;
    switch (mode) {
      case Mode::Header:
      case Mode::MistralHeader: {
        CallHeader h;
        const Match m = mode == Mode::Header ? match_call_header(text, eof, opt.names, &h)
                                             : match_mistral_header(text, eof, opt.names, &h);
        if (m == Match::NeedMore) return false;
        if (m == Match::No) {
          if (mode == Mode::MistralHeader) return fail_item(call_start), true;
          mode = Mode::Buffered;
          return true;
        }
        commit(h.name);
        bare = mode == Mode::MistralHeader;
        if (!bare)
          for (size_t i = 0; i < h.args_at; ++i) obj.feed(text[i], &sig);
        cur = call_start + h.args_at;
        mode = Mode::Args;
        return true;
      }
      case Mode::Args:
        for (; cur < buf.size(); ++cur) {
          const char c = buf[cur];
          const JsonScanner::Step s = args.feed(c, &sig);
          if (s == JsonScanner::Step::Error) {  // committed: the call keeps what was written
            arguments(delta), delta.clear();
            return end_block(cur), true;
          }
          bool obj_sig = false;
          if (!bare) obj.feed(c, &obj_sig);
          if (sig || s == JsonScanner::Step::Done) delta += c;
          if (s == JsonScanner::Step::Done) {
            arguments(delta), delta.clear();
            ++cur;
            if (bare) call_done(cur);
            else mode = Mode::Tail;
            return true;
          }
        }
        arguments(delta), delta.clear();
        if (eof) return call_done(cur), true;
        return false;
      case Mode::Tail:
        for (; cur < buf.size(); ++cur) {
          const JsonScanner::Step s = obj.feed(buf[cur], &sig);
          if (s == JsonScanner::Step::Error) return call_done(cur), true;
          if (s == JsonScanner::Step::Done) return call_done(cur + 1), true;
        }
        if (eof) return call_done(cur), true;
        return false;
      case Mode::Buffered:
        for (; cur < buf.size(); ++cur) {
          const JsonScanner::Step s = obj.feed(buf[cur], &sig);
          if (s == JsonScanner::Step::Error) return fail_item(call_start), true;
          if (s == JsonScanner::Step::Done) {
            ++cur;
            std::string name, a;
            const ToolJson j = ToolJson::parse(buf.begin() + long(call_start), buf.begin() + long(cur), nullptr, false);
            if (j.is_discarded() || !call_from_json(j, opt.names, &name, &a)) return fail_item(call_start), true;
            commit(name);
            arguments(a);
            return call_done(cur), true;
          }
        }
        if (eof) return fail_item(call_start), true;
        return false;
      case Mode::Python: {
        PyCall pc;
        const Match m = match_python_call(text, eof, opt.names, &pc);
        if (m == Match::NeedMore) return false;
        if (m == Match::No) return fail_item(call_start), true;
        commit(pc.name);
        arguments(pc.arguments);
        return call_done(call_start + pc.end), true;
      }
    }
    return false;
  }

  bool generic_open() {
    bool calls = false;
    size_t end = 0;
    const Match m = match_generic_open(std::string_view(buf).substr(block_start), eof, &calls, &end);
    if (m == Match::NeedMore) return false;
    if (m == Match::No) return fail_item(block_start), true;
    pos = block_start + end;
    if (calls) {
      in_list = true;
      st = State::ListItem;
    } else {
      pending_ws.clear();  // the wrapper's whitespace is not content
      started = true;
      st = State::GenericResponse;
    }
    return true;
  }

  // The response string's characters, decoded, as content.
  bool generic_response() {
    std::string out;
    while (pos < buf.size()) {
      const char c = buf[pos];
      if (c == '"') {
        ++pos;
        st = State::GenericTail;
        break;
      }
      if (c != '\\') {
        out += c, ++pos;
        continue;
      }
      if (pos + 1 >= buf.size() || (buf[pos + 1] == 'u' && pos + 6 > buf.size())) {
        if (!eof) break;
        out += buf.substr(pos), pos = buf.size();
        break;
      }
      const char e = buf[pos + 1];
      static constexpr std::string_view from = "\"\\/bfnrt", to = "\"\\/\b\f\n\r\t";
      if (e != 'u') {
        const size_t k = from.find(e);
        if (k == std::string_view::npos) {  // not JSON after all: the rest is content as written
          emit_content(out);
          return end_block(pos), true;
        }
        out += to[k], pos += 2;
        continue;
      }
      int32_t v = hex4(buf, pos);
      if (v < 0) {
        emit_content(out);
        return end_block(pos), true;
      }
      size_t used = 6;
      if (v >= 0xD800 && v <= 0xDBFF) {  // a surrogate pair needs the low half
        if (pos + 12 > buf.size() && !eof) break;
        const int32_t lo = hex4(buf, pos + 6);
        if (lo >= 0xDC00 && lo <= 0xDFFF) v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00), used = 12;
        else v = 0xFFFD;
      } else if (v >= 0xDC00 && v <= 0xDFFF) {
        v = 0xFFFD;
      }
      utf8_append(out, uint32_t(v));
      pos += used;
    }
    emit_content(out);
    if (st == State::GenericResponse && eof && pos >= buf.size()) return end_block(pos), true;
    return st != State::GenericResponse;
  }

  bool generic_tail() {
    size_t p;
    if (!skip(&p)) return eof ? (end_block(p), after_call = true, true) : false;
    end_block(buf[p] == '}' ? p + 1 : p);
    after_call = true;
    return true;
  }

  bool step() {
    switch (st) {
      case State::Text: return text();
      case State::BlockOpen: return block_open();
      case State::ListItem: return list_item();
      case State::ListAfter: return list_after();
      case State::SeqItem: return seq_item();
      case State::Call: return call();
      case State::BlockClose: return block_close();
      case State::GenericOpen: return generic_open();
      case State::GenericResponse: return generic_response();
      case State::GenericTail: return generic_tail();
    }
    return false;
  }

  void run() {
    while (step()) {
    }
  }
};

}  // namespace tool_parser_detail

struct ToolCallParser::Impl : tool_parser_detail::ParserImpl {
  using ParserImpl::ParserImpl;
};

ToolCallParser::ToolCallParser(ToolParseOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}
ToolCallParser::~ToolCallParser() = default;
ToolCallParser::ToolCallParser(ToolCallParser&&) noexcept = default;
ToolCallParser& ToolCallParser::operator=(ToolCallParser&&) noexcept = default;

std::vector<ToolCallEvent> ToolCallParser::push(std::string_view text) {
  Impl& p = *impl_;
  p.ev.clear();
  if (p.eof) return {};
  p.buf.append(text);
  p.run();
  return std::move(p.ev);
}

std::vector<ToolCallEvent> ToolCallParser::finish() {
  Impl& p = *impl_;
  p.ev.clear();
  if (p.eof) return {};
  p.eof = true;
  p.run();
  if (!p.pending_ws.empty() && !p.after_call) {  // whitespace that ended the content (no call came after it)
    p.push_content(p.pending_ws);
    p.pending_ws.clear();
  }
  return std::move(p.ev);
}

const ParsedToolCalls& ToolCallParser::result() const { return impl_->res; }

ParsedToolCalls parse_tool_calls(ToolParseOptions options, std::string_view text) {
  ToolCallParser p(std::move(options));
  p.push(text);
  p.finish();
  return p.result();
}

ParsedToolCalls parse_tool_calls(ToolFormat format, std::string_view text) {
  ToolParseOptions o;
  o.format = format;
  o.ids = ToolCallIds::counter();
  return parse_tool_calls(std::move(o), text);
}

}  // namespace ggflow::pipeline
