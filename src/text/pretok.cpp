#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/pretok.h"

#include <pcre2.h>

#include <algorithm>
#include <memory>

#include "text/unicode.h"

namespace ggflow::text {

// The regex lists, as the reference tokenizers (Hugging Face tokenizer.json, restated by
// llama.cpp per `tokenizer.ggml.pre`) define them. `(?i:'s|...)` is spelled out as
// `'[sS]|...` so the case-insensitive group cannot leak into the rest of the pattern.
namespace {

const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kQwen35 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* kDeepseekLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-"
    "\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1"
    "\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-"
    "\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a\u1e00-\u1f15"
    "\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
    "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb"
    "\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124"
    "\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184"
    "\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-"
    "\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
    "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-"
    "\U00010cb2\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+";
const char* kDeepseekPunct = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+";
const char* kCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";

struct Family {
  std::vector<const char*> names;
  std::vector<std::string> patterns;
  bool ignore_merges;
};

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {{"gpt-2", "mpt", "olmo", "jais", "trillion", "granite-docling"}, {kGpt2}, false},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3}, true},
      {{"dbrx", "smaug-bpe"}, {kLlama3}, false},
      {{"qwen2", "stablelm2", "hunyuan", "megrez", "deepseek-r1-qwen"}, {kQwen2}, false},
      {{"qwen35"}, {kQwen35}, false},
      {{"deepseek-llm"},
       {"[\r\n]", kDeepseekLetters, kDeepseekPunct, "\\s+$", kCjk, "\\p{N}+"}, false},
      {{"deepseek-coder"}, {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"}, false},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}, false},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"},
       {"\\p{N}", kGpt2}, false},
      {{"default", ""}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"}, false},
  };
  return f;
}

}  // namespace

Result<PretokSpec> pretok_spec_for(std::string_view pre) {
  for (const auto& fam : families()) {
    for (const char* n : fam.names) {
      if (pre == n) return PretokSpec{std::string(pre), fam.patterns, fam.ignore_merges};
    }
  }
  std::string known;
  for (const auto& n : pretok_known_names()) known += (known.empty() ? "" : ", ") + n;
  return make_error("unknown pre-tokenizer '" + std::string(pre) + "' (tokenizer.ggml.pre)",
                    "ggflow knows: " + known);
}

std::vector<std::string> pretok_known_names() {
  std::vector<std::string> out;
  for (const auto& fam : families())
    for (const char* n : fam.names)
      if (*n) out.emplace_back(n);
  return out;
}

struct Pretokenizer::Compiled {
  pcre2_code* code = nullptr;
  std::string pattern;
  ~Compiled() { pcre2_code_free(code); }
};

Result<Pretokenizer> Pretokenizer::create(const PretokSpec& spec) {
  Pretokenizer p;
  p.spec_ = spec;
  for (const auto& pat : spec.patterns) {
    int err = 0;
    PCRE2_SIZE erroff = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &erroff, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return make_error("pre-tokenizer regex does not compile at offset " +
                            std::to_string(erroff) + ": " + reinterpret_cast<char*>(msg),
                        "pattern: " + pat);
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // best effort: the interpreter is the fallback
    auto c = std::make_shared<Compiled>();
    c->code = code;
    c->pattern = pat;
    p.regexes_.push_back(std::move(c));
  }
  return p;
}

Status Pretokenizer::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return {};
  std::vector<std::string_view> cur{text}, next;
  using MatchData = std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)>;
  for (const auto& re : regexes_) {
    MatchData owner(pcre2_match_data_create_from_pattern(re->code, nullptr),
                    &pcre2_match_data_free);
    pcre2_match_data* md = owner.get();
    if (!md) return make_error("pre-tokenizer: out of memory for regex match data");
    next.clear();
    for (std::string_view piece : cur) {
      const auto* subj = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t pos = 0, last = 0;
      while (pos < piece.size()) {
        // The input was validated once up front, so each call skips PCRE2's own UTF check
        // (which would otherwise rescan the subject and make splitting quadratic).
        int rc = pcre2_match(re->code, subj, piece.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
          rc = pcre2_match(re->code, subj, piece.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                           md, nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          PCRE2_UCHAR msg[256];
          pcre2_get_error_message(rc, msg, sizeof(msg));
          return make_error(std::string("pre-tokenizer regex failed: ") +
                                reinterpret_cast<char*>(msg) + " (piece of " +
                                std::to_string(piece.size()) + " bytes)",
                            "split the input into smaller parts");
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        size_t b = ov[0], e = ov[1];
        if (e == b) {  // empty match: step over one character
          pos = b + std::min(piece.size() - b, utf8_len(static_cast<unsigned char>(piece[b])));
          continue;
        }
        if (b > last) next.push_back(piece.substr(last, b - last));
        next.push_back(piece.substr(b, e - b));
        last = pos = e;
      }
      if (last < piece.size()) next.push_back(piece.substr(last));
    }
    cur.swap(next);
  }
  out.insert(out.end(), cur.begin(), cur.end());
  return {};
}

}  // namespace ggflow::text
