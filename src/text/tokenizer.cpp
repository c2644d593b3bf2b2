#include "text/tokenizer.h"

#include <optional>

#include "text/pretok.h"
#include "text/tokenizer_bpe.h"
#include "text/tokenizer_lookup.h"
#include "text/tokenizer_special.h"
#include "text/tokenizer_spm.h"
#include "text/tokenizer_wpm.h"
#include "text/unicode.h"

namespace ggflow::text {

namespace {
constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

std::string escape_spaces(std::string_view s, bool prefix) {
  std::string out;
  out.reserve(s.size() + 8);
  if (prefix) out += kSpaceMark;
  for (char c : s) {
    if (c == ' ') out += kSpaceMark;
    else out += c;
  }
  return out;
}

// The value of a hex digit, or -1.
int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::string unescape_spaces(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s.substr(i, 3) == kSpaceMark) {
      out += ' ';
      i += 3;
    } else {
      out += s[i++];
    }
  }
  return out;
}
}  // namespace

struct Tokenizer::Impl {
  VocabData v;
  VocabKind kind = VocabKind::Spm;
  TokenLookup lookup;
  SpecialMatcher special;
  std::optional<Pretokenizer> pretok;
  std::optional<BpeMerger> bpe;
  std::optional<SpmMerger> spm;
  std::optional<WpmSplitter> wpm;
  bool add_sep = false;  // WordPiece: [SEP] closes the sequence
  bool ignore_merges = false;
  bool add_bos = false, add_eos = false, add_space_prefix = false;
  // llama.cpp's flags for framing a reranker's pair: the file's keys over the type's defaults
  // (for WordPiece too, whose single texts are always framed [CLS] ... [SEP]).
  bool pair_bos = false, pair_eos = false, pair_sep = false;
  std::vector<uint8_t> eog;

  explicit Impl(VocabData data) : v(std::move(data)), lookup(v.tokens), special(v.tokens, v.types) {}

  TokenType type(int32_t id) const {
    return v.types.empty() ? TokenType::Normal : static_cast<TokenType>(v.types[id]);
  }

  Status encode_raw(std::string_view raw, bool prev_special, std::vector<int32_t>& out) const {
    switch (kind) {
      case VocabKind::Spm: {
        spm->encode(escape_spaces(raw, add_space_prefix && prev_special), lookup, out);
        return {};
      }
      case VocabKind::ByteBpe: {
        std::vector<std::string_view> words;
        if (auto st = pretok->split(raw, words); !st) return st;
        for (auto w : words) bpe->encode_word(w, lookup, ignore_merges, out);
        return {};
      }
      case VocabKind::Wpm: {
        wpm->encode(raw, lookup, out);
        return {};
      }
      case VocabKind::RawBpe: {
        const std::string text = escape_spaces(raw, false);
        std::vector<std::string_view> words;
        if (auto st = pretok->split(text, words); !st) return st;
        for (auto w : words) bpe->encode_word(w, lookup, ignore_merges, out);
        return {};
      }
    }
    return {};
  }
};

Result<Tokenizer> Tokenizer::from_file(const gguf::File& file) {
  auto v = read_vocab(file);
  if (!v) return v.error();
  return create(std::move(*v));
}

Result<Tokenizer> Tokenizer::create(VocabData vocab) {
  auto kind = vocab_kind(vocab.model);
  if (!kind) return kind.error();
  const size_t n = vocab.tokens.size();
  if (n == 0) return make_error("the vocabulary is empty", "tokenizer.ggml.tokens has no entries");
  if (!vocab.types.empty() && vocab.types.size() != n)
    return make_error("token_type and tokens differ in length", "re-convert the model");
  if (!vocab.scores.empty() && vocab.scores.size() != n)
    return make_error("scores and tokens differ in length", "re-convert the model");
  for (int32_t* id : {&vocab.bos, &vocab.eos, &vocab.eot, &vocab.eom, &vocab.pad, &vocab.unk,
                      &vocab.sep, &vocab.cls, &vocab.fim_pre, &vocab.fim_suf, &vocab.fim_mid}) {
    if (*id != kNoToken && (*id < 0 || static_cast<size_t>(*id) >= n))
      return make_error("special token id " + std::to_string(*id) + " is outside the vocabulary",
                        "the vocabulary has " + std::to_string(n) + " tokens");
  }
  auto impl = std::make_shared<Impl>(std::move(vocab));
  Impl& m = *impl;
  m.kind = *kind;
  if (m.kind == VocabKind::Spm) {
    m.spm.emplace(m.v.scores, m.lookup, m.v.unk);
    m.add_bos = true;
    m.add_space_prefix = true;
  } else if (m.kind == VocabKind::Wpm) {
    // BERT: [CLS] text [SEP]; pieces carry U+2581 where a word starts, like SPM's spaces.
    m.wpm.emplace(m.v.unk);
    if (m.v.bos == kNoToken) m.v.bos = m.v.cls;
    m.add_bos = true;
    m.add_sep = true;
    m.add_space_prefix = true;
  } else {
    PretokSpec spec;
    if (m.kind == VocabKind::ByteBpe) {
      auto s = pretok_spec_for(m.v.pre);
      if (!s) return s.error();
      spec = std::move(*s);
      m.add_bos = spec.ignore_merges;  // the llama-3 family adds BOS by default
    } else {
      spec = PretokSpec{"gemma4", {"[^\\n]+|[\\n]+"}, false};
      m.add_bos = true;
    }
    m.ignore_merges = spec.ignore_merges;
    auto p = Pretokenizer::create(spec);
    if (!p) return p.error();
    m.pretok.emplace(std::move(*p));
    auto b = BpeMerger::create(m.v.merges, m.lookup, m.kind == VocabKind::ByteBpe);
    if (!b) return b.error();
    m.bpe.emplace(std::move(*b));
  }
  // WordPiece always frames with [CLS] ... [SEP] (llama.cpp's rule): the file's add_bos/add_eos
  // (true in converted BERT files, where bos = CLS and eos = SEP) would add a second [SEP].
  if (m.v.add_bos && m.kind != VocabKind::Wpm) m.add_bos = *m.v.add_bos;
  if (m.v.add_eos && m.kind != VocabKind::Wpm) m.add_eos = *m.v.add_eos;
  if (m.v.add_space_prefix && m.kind == VocabKind::Spm) m.add_space_prefix = *m.v.add_space_prefix;
  m.pair_bos = m.v.add_bos.value_or(m.add_bos);
  m.pair_eos = m.v.add_eos.value_or(m.add_eos);
  m.pair_sep = m.v.add_sep.value_or(m.add_sep);

  // End-of-generation set: the file's ids, plus control tokens with the usual end-of-turn texts.
  m.eog.assign(n, 0);
  for (int32_t id : {m.v.eos, m.v.eot, m.v.eom})
    if (id != kNoToken) m.eog[id] = 1;
  for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|eom_id|>",
                        "<|END_OF_TURN_TOKEN|>", "<turn|>", "<|endoftext|>", "<EOT>"}) {
    const int32_t id = m.lookup.find(t);
    if (id < 0 || m.type(id) != TokenType::Control) continue;
    m.eog[id] = 1;
    if (m.v.eot == kNoToken && std::string_view(t) != "<|endoftext|>" && id != m.v.eos)
      m.v.eot = id;
  }
  // Fill-in-the-middle tokens the file does not name: found by their text, as llama.cpp's
  // vocabulary finds them (Qwen2.5-Coder, StarCoder, CodeLlama, DeepSeek-Coder).
  // (U+2581 is "\xe2\x96\x81", U+FF5C "\xef\xbd\x9c"; the literals are split where a hex
  // escape would swallow the next letter.)
  const std::pair<int32_t*, std::vector<const char*>> fim[] = {
      {&m.v.fim_pre, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<PRE>", "\xe2\x96\x81<PRE>",
                      "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>"}},
      {&m.v.fim_suf, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<SUF>", "\xe2\x96\x81<SUF>",
                      "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>"}},
      {&m.v.fim_mid, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<MID>", "\xe2\x96\x81<MID>",
                      "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>"}},
  };
  for (const auto& [id, texts] : fim)
    for (const char* t : texts)
      if (const int32_t found = m.lookup.find(t); *id == kNoToken && found >= 0) *id = found;
  Tokenizer tok;
  tok.impl_ = std::move(impl);
  return tok;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                               const EncodeOptions& opt) const {
  const Impl& m = *impl_;
  if (text.size() > kMaxInputBytes)
    return make_error("input of " + std::to_string(text.size()) + " bytes is too long to tokenize",
                      "the limit is 1 GiB; split the text");
  std::string fixed;
  const size_t bad = utf8_first_invalid(text);
  if (bad != text.size()) {
    if (opt.strict_utf8)
      return make_error("input is not valid UTF-8 (first bad byte at offset " +
                            std::to_string(bad) + ")",
                        "send UTF-8 text, or allow replacement of bad bytes by U+FFFD");
    fixed = utf8_sanitize(text);
    text = fixed;
  }
  std::vector<Fragment> frags;
  m.special.partition(text, opt.parse_special, frags);
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (opt.add_special && m.add_bos && m.v.bos != kNoToken) out.push_back(m.v.bos);
  bool prev_special = true;
  for (const Fragment& f : frags) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
      continue;
    }
    if (auto st = m.encode_raw(text.substr(f.start, f.len), prev_special, out); !st)
      return st.error();
    prev_special = false;
  }
  if (opt.add_special && m.add_sep && m.v.sep != kNoToken) out.push_back(m.v.sep);
  if (opt.add_special && m.add_eos && m.v.eos != kNoToken) out.push_back(m.v.eos);
  return out;
}

Result<std::vector<int32_t>> Tokenizer::encode_pair(std::string_view query, std::string_view document, const EncodeOptions& opt) const {
  const Impl& m = *impl_;
  EncodeOptions plain = opt;
  plain.add_special = false;
  auto q = encode(query, plain);
  if (!q) return q.error();
  auto d = encode(document, plain);
  if (!d) return d.error();
  const int32_t eos = m.v.eos != kNoToken ? m.v.eos : m.v.sep;
  std::vector<int32_t> out;
  out.reserve(q->size() + d->size() + 4);
  if (m.pair_bos && m.v.bos != kNoToken) out.push_back(m.v.bos);
  out.insert(out.end(), q->begin(), q->end());
  if (m.pair_eos && eos != kNoToken) out.push_back(eos);
  if (m.pair_sep && m.v.sep != kNoToken) out.push_back(m.v.sep);
  out.insert(out.end(), d->begin(), d->end());
  if (m.pair_eos && eos != kNoToken) out.push_back(eos);
  return out;
}

Result<std::string> Tokenizer::piece(int32_t id, bool render_special) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= n_vocab())
    return make_error("token id " + std::to_string(id) + " is outside the vocabulary",
                      "valid ids are 0.." + std::to_string(n_vocab() - 1));
  const std::string& text = m.v.tokens[id];
  switch (m.type(id)) {
    case TokenType::Control:
      return render_special ? text : std::string();
    case TokenType::Unknown:
      return render_special ? text : std::string(kReplacement);
    case TokenType::UserDefined:
      return text;
    case TokenType::Byte: {
      // "<0xNN>" is the byte NN; a byte token whose text is anything else (a damaged vocabulary:
      // "<0xZZ>") decodes to its text, like a normal token.
      if (text.size() == 6 && text.starts_with("<0x") && text.back() == '>' && hex(text[3]) >= 0 && hex(text[4]) >= 0)
        return std::string(1, static_cast<char>(hex(text[3]) * 16 + hex(text[4])));
      return text;
    }
    default:
      return m.kind == VocabKind::ByteBpe ? byte_level_decode(text) : unescape_spaces(text);
  }
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids,
                                      const DecodeOptions& opt) const {
  std::string out;
  bool strip = opt.strip_leading_space && impl_->add_space_prefix;
  for (int32_t id : ids) {
    auto p = piece(id, opt.render_special);
    if (!p) return p.error();
    if (strip && !p->empty()) {
      if ((*p)[0] == ' ') p->erase(0, 1);
      strip = false;
    }
    out += *p;
  }
  return out;
}

int32_t Tokenizer::n_vocab() const { return static_cast<int32_t>(impl_->v.tokens.size()); }
VocabKind Tokenizer::kind() const { return impl_->kind; }
const std::string& Tokenizer::pre() const { return impl_->v.pre; }
int32_t Tokenizer::bos() const { return impl_->v.bos; }
int32_t Tokenizer::eos() const { return impl_->v.eos; }
int32_t Tokenizer::eot() const { return impl_->v.eot; }
int32_t Tokenizer::fim_pre() const { return impl_->v.fim_pre; }
int32_t Tokenizer::fim_suf() const { return impl_->v.fim_suf; }
int32_t Tokenizer::fim_mid() const { return impl_->v.fim_mid; }
int32_t Tokenizer::pad() const { return impl_->v.pad; }
int32_t Tokenizer::unk() const { return impl_->v.unk; }
bool Tokenizer::add_bos() const { return impl_->add_bos; }
bool Tokenizer::add_eos() const { return impl_->add_eos; }
bool Tokenizer::add_space_prefix() const { return impl_->add_space_prefix; }
bool Tokenizer::is_eog(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->eog[id] != 0;
}
bool Tokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && impl_->type(id) == TokenType::Control;
}
const std::string& Tokenizer::token_text(int32_t id) const { return impl_->v.tokens.at(id); }
TokenType Tokenizer::token_type(int32_t id) const { return impl_->type(id); }
int32_t Tokenizer::find_token(std::string_view text) const { return impl_->lookup.find(text); }

}  // namespace ggflow::text
