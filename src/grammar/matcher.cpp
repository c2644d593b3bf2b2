#include "grammar/matcher.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "base/check.h"
#include "grammar/engine.h"

namespace ggflow::grammar {

namespace {

constexpr size_t kTailBytes = 32;                       // text kept for error messages
constexpr size_t kCompactBytes = size_t{64} << 20;      // engine caches above this are rebuilt

// Bytes as a quoted, printable string (at most `max` bytes shown).
std::string printable(std::string_view s, size_t max = 40) {
  std::string out = "\"";
  if (s.size() > max) {
    out += "...";
    s = s.substr(s.size() - max);
  }
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else if (c >= 0x80) {
      out += static_cast<char>(c);  // UTF-8 as is
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  return out + "\"";
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), engine_(std::make_unique<detail::Engine>(*grammar_)) {}

Result<Matcher> Matcher::create(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab) {
  if (!grammar || !vocab) return make_error("grammar: a matcher needs a grammar and a token vocabulary", "pass both");
  Matcher m(std::move(grammar), std::move(vocab));
  const int32_t c = m.engine_->start();
  if (c < 0) return make_error("grammar: cannot start: " + m.engine_->reason(c), "simplify the start rule or raise the limit");
  m.cfg_ = c;
  return m;
}

Matcher::Matcher(const Matcher& o)
    : grammar_(o.grammar_), vocab_(o.vocab_), engine_(std::make_unique<detail::Engine>(*grammar_)), ended_(o.ended_), tail_(o.tail_) {
  std::vector<uint32_t> sig;
  o.engine_->signature(o.cfg_, &sig);
  cfg_ = engine_->from_signature(sig);
  GGFLOW_CHECK(cfg_ >= 0, "a matcher's own state always restores");
}

Matcher& Matcher::operator=(const Matcher& o) {
  if (this != &o) *this = Matcher(o);
  return *this;
}

Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;
Matcher::~Matcher() = default;

void Matcher::compact_if_large() const {
  if (engine_->memory_bytes() <= kCompactBytes) return;
  std::vector<uint32_t> sig;
  engine_->signature(cfg_, &sig);
  engine_ = std::make_unique<detail::Engine>(*grammar_);
  cfg_ = engine_->from_signature(sig);
  GGFLOW_CHECK(cfg_ >= 0, "a matcher's own state always restores");
}

bool Matcher::is_complete() const { return engine_->accepting(cfg_); }

Status Matcher::fail(int32_t code, std::string_view bytes, size_t at, int32_t token) const {
  std::string what = "grammar: ";
  what += token >= 0 ? "token " + std::to_string(token) + " " + printable(bytes) : "text " + printable(bytes);
  if (bytes.size() > 1) what += " (byte " + std::to_string(at) + ")";
  what += " does not fit after " + printable(tail_ + std::string(bytes.substr(0, at))) + ": " + engine_->reason(code);
  std::string hint;
  if (code == detail::kDead) {
    int32_t c = cfg_;  // the state before the failing byte, for what the grammar expected there
    for (size_t i = 0; i < at && c >= 0; ++i) c = engine_->step(c, static_cast<uint8_t>(bytes[i]));
    if (c >= 0) what += "; the grammar expects " + engine_->expected(c);
    hint = token >= 0 ? "sample only tokens that fill_mask allows" : "";
  } else {
    hint = "simplify the grammar (or the JSON schema), or raise the limit";
  }
  return make_error(std::move(what), std::move(hint));
}

// Steps through `bytes` (the piece of `token`, or -1 for raw text); all or nothing.
Status Matcher::step_bytes(std::string_view bytes, int32_t token) {
  compact_if_large();
  int32_t c = cfg_;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int32_t next = engine_->step(c, static_cast<uint8_t>(bytes[i]));
    if (next < 0) return fail(next, bytes, i, token);
    c = next;
  }
  cfg_ = c;
  tail_ += bytes;
  if (tail_.size() > kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
  return {};
}

Status Matcher::accept_bytes(std::string_view bytes) {
  if (ended_) return make_error("grammar: text after the end of generation", "nothing is accepted after an end-of-generation token");
  return step_bytes(bytes, -1);
}

Status Matcher::accept_token(int32_t id) {
  if (id < 0 || id >= vocab_->n_vocab())
    return make_error("grammar: token id " + std::to_string(id) + " is outside the vocabulary", "ids are 0.." + std::to_string(vocab_->n_vocab() - 1));
  if (ended_) return make_error("grammar: token " + std::to_string(id) + " after the end of generation", "nothing is accepted after an end-of-generation token");
  if (vocab_->is_eog(id)) {
    if (!is_complete())
      return make_error("grammar: end-of-generation token " + std::to_string(id) + " before the grammar is complete (after " + printable(tail_) +
                            "; the grammar expects " + engine_->expected(cfg_) + ")",
                        "sample only tokens that fill_mask allows");
    ended_ = true;
    return {};
  }
  if (vocab_->is_special(id))
    return make_error("grammar: token " + std::to_string(id) + " is a special token, which no grammar allows", "sample only tokens that fill_mask allows");
  const std::string& piece = vocab_->piece(id);
  if (piece.empty()) return make_error("grammar: token " + std::to_string(id) + " has no bytes, which no grammar allows", "sample only tokens that fill_mask allows");
  return step_bytes(piece, id);
}

Result<size_t> Matcher::fill_mask(std::span<uint32_t> bits) const {
  const TokenVocab& v = *vocab_;
  GGFLOW_CHECK(bits.size() >= v.mask_words(), "fill_mask: the span holds fewer than mask_words() words");
  std::fill(bits.begin(), bits.end(), 0u);
  if (ended_) return size_t{0};
  compact_if_large();

  // The shared cache: key = grammar fingerprint + canonical parse state.
  std::vector<uint32_t> sig;
  engine_->signature(cfg_, &sig);
  const auto fp = grammar_->fingerprint();
  std::string key(16 + 4 * sig.size(), '\0');
  std::memcpy(key.data(), &fp.first, 8);
  std::memcpy(key.data() + 8, &fp.second, 8);
  std::memcpy(key.data() + 16, sig.data(), 4 * sig.size());
  if (auto hit = v.cache_find(key)) {
    std::copy(hit->bits.begin(), hit->bits.end(), bits.begin());
    return size_t{hit->allowed};
  }

  // The trie walk: the config (and its step row) after each node's bytes, by depth; a dead step
  // skips the subtree. The inner loop reads the engine's step rows directly (one load per node
  // when cached) and re-reads them after a slow step, which may grow them. A large subtree is
  // allowed whole, without visiting it, when character by character everything below leads to
  // the same live config (string contents, x{0,64}, free text): Engine::ascii_major.
  struct Frame {
    int32_t cfg, row;
  };
  constexpr uint32_t kSkipCheckNodes = 16;  // subtrees smaller than this are walked
  const auto& trie = v.trie();
  const int32_t* toks = v.trie_tokens().data();
  std::vector<Frame> at_depth(v.max_token_bytes() + 1);
  detail::Engine& e = *engine_;
  const uint64_t budget = e.work() + grammar_->limits().max_mask_work;
  const int32_t* row_of = e.row_of();
  const int32_t* rows = e.rows();
  uint64_t epoch = e.row_epoch();
  at_depth[0] = {cfg_, row_of[cfg_]};
  // After a slow step: re-read the row pointers, and the rows of the open frames if the engine
  // dropped its rows meanwhile.
  auto refresh = [&](int open_depth) {
    row_of = e.row_of();
    rows = e.rows();
    if (e.row_epoch() == epoch) return;
    epoch = e.row_epoch();
    for (int d = 0; d < open_depth; ++d) at_depth[d].row = row_of[at_depth[d].cfg];
  };
  uint32_t* out = bits.data();
  size_t allowed = 0;
  auto allow = [&](uint32_t from, uint32_t to) {  // tokens [from, to) of the trie order
    for (uint32_t t = from; t < to; ++t) out[toks[t] >> 5] |= 1u << (toks[t] & 31);
    allowed += to - from;
  };
  auto over_budget = [&] {
    return make_error("grammar: the allowed tokens after " + printable(tail_) + " took more than Limits::max_mask_work = " +
                          std::to_string(grammar_->limits().max_mask_work) + " steps to compute",
                      "simplify the grammar (or the JSON schema), or raise the limit");
  };
  // Every path below node i, from config c at a character boundary, stays alive: for as many
  // characters as there can be below, each of them leads to the next config of one chain.
  auto whole_subtree = [&](size_t i, int32_t c) {
    const uint64_t* below = v.below_bytes(i);
    const bool ascii = trie[i].flags & TokenVocab::kAsciiBelow;
    for (int level = 0; level < trie[i].height; ++level) {
      const detail::Engine::Major& m = e.ascii_major(c);
      if (m.next < 0 || (below[0] & ~m.bytes[0]) || (below[1] & ~m.bytes[1]) || (!ascii && !m.non_ascii)) return false;
      c = m.next;
    }
    return true;
  };
  const size_t n_nodes = v.trie_size();
  for (size_t i = 0; i < n_nodes;) {
    const TokenVocab::TrieNode& n = trie[i];
    const Frame f = at_depth[n.depth - 1];
    int32_t c = f.row >= 0 ? rows[static_cast<size_t>(f.row) * 256 + n.byte] : detail::kUnknown;
    if (c == detail::kUnknown) {
      c = e.step_slow(f.cfg, n.byte);  // gives f.cfg a row
      refresh(n.depth - 1);
      at_depth[n.depth - 1].row = row_of[f.cfg];
      if (e.work() > budget) return over_budget();
    }
    if (c < 0) {
      i = n.subtree_end;
      continue;
    }
    const uint32_t end = n.subtree_end;
    constexpr uint8_t kSkippable = TokenVocab::kBoundary | TokenVocab::kValidBelow;
    if (end - i >= kSkipCheckNodes && (n.flags & kSkippable) == kSkippable && n.height < 255) {
      const bool whole = whole_subtree(i, c);
      refresh(n.depth);
      if (e.work() > budget) return over_budget();
      if (whole) {
        allow(n.tok_begin, trie[end].tok_begin);
        i = end;
        continue;
      }
    }
    allow(n.tok_begin, trie[i + 1].tok_begin);
    ++i;
    if (end != i) at_depth[n.depth] = {c, row_of[c]};
  }
  if (engine_->accepting(cfg_))
    for (int32_t id : v.eog_ids()) {
      bits[id >> 5] |= 1u << (id & 31);
      ++allowed;
    }

  auto entry = std::make_shared<TokenVocab::CachedMask>();
  entry->bits.assign(bits.begin(), bits.begin() + v.mask_words());
  entry->allowed = static_cast<uint32_t>(allowed);
  v.cache_put(key, std::move(entry));
  return allowed;
}

Matcher::Snapshot Matcher::snapshot() const {
  Snapshot s;
  engine_->signature(cfg_, &s.state);
  s.tail = tail_;
  s.ended = ended_;
  s.grammar = grammar_->fingerprint();
  return s;
}

void Matcher::restore(const Snapshot& s) {
  GGFLOW_CHECK(s.grammar == grammar_->fingerprint(), "Matcher::restore: the snapshot is of another grammar");
  const int32_t c = engine_->from_signature(s.state);
  GGFLOW_CHECK(c >= 0, "Matcher::restore: malformed snapshot");
  cfg_ = c;
  tail_ = s.tail;
  ended_ = s.ended;
}

}  // namespace ggflow::grammar
