// Matcher: one request's position in a grammar, over one model's tokens.
//
// Model: the matcher holds the set of parses alive after the text accepted so far (engine.h: a
// pushdown recognizer over code points, every parse of an ambiguous grammar at once) plus the
// bytes of a UTF-8 character a token left unfinished. Per step the sampler asks fill_mask for the
// tokens allowed next, samples one of them, and reports it with accept_token. A token is allowed
// when all its bytes can follow the text so far (a token may end inside a UTF-8 character); an
// end-of-generation token is allowed exactly when is_complete(); other special tokens never.
//
// fill_mask walks the vocabulary's byte trie from the current parse state, stepping a cached
// byte automaton once per trie node and skipping every subtree the grammar rules out; its result
// is also cached across requests in the TokenVocab, keyed by the grammar's fingerprint and the
// parse state, so a state seen before costs a lookup and a copy.
//
// Errors, never aborts: a token the grammar does not allow, or a step over a run-time limit
// (Limits: more than max_stacks parses, nesting deeper than max_stack_depth, a step or an
// uncached mask doing more than max_closure_steps / max_mask_work), returns an Error that says
// which, with the end of the text so far and what the grammar expected. A failed accept leaves
// the matcher unchanged.
//
// Memory: a matcher's step caches are bounded (its 256-entry step rows are dropped past 4 MiB and
// everything is rebuilt from the current state past 64 MiB); the shared mask cache is bounded by
// TokenVocab::Options::mask_cache_bytes.
//
// Not thread-safe: one matcher per request (the Grammar and TokenVocab it uses are shared).
// Copying is cheap (proportional to the parse state's depth): the copy starts with empty step
// caches. snapshot()/restore() save and return to a state (speculative decoding).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"
#include "grammar/grammar.h"
#include "grammar/token_vocab.h"

namespace ggflow::grammar {

namespace detail {
class Engine;
}

class Matcher {
 public:
  // Errors when the grammar cannot even start within its limits (e.g. more than max_stacks
  // parses before the first character).
  static Result<Matcher> create(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab);

  Matcher(const Matcher& other);
  Matcher& operator=(const Matcher& other);
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;
  ~Matcher();

  // Accepts token `id` (its bytes, or an end-of-generation token when is_complete()). After an
  // end-of-generation token nothing more is accepted.
  Status accept_token(int32_t id);
  // Accepts raw bytes (text the model did not sample, e.g. a forced prefix).
  Status accept_bytes(std::string_view bytes);
  // The text so far is a complete sentence of the grammar (an EOS token is allowed now).
  bool is_complete() const;
  // An end-of-generation token was accepted.
  bool is_ended() const { return ended_; }

  // Writes the allowed next tokens: bit i of bits[i / 32] set = token i allowed; bits past
  // n_vocab cleared. `bits` holds at least vocab->mask_words() words. Returns how many tokens are
  // allowed: 0 means no token of this vocabulary can continue the grammar (end the request with
  // an error). Errors when the mask needs more than Limits::max_mask_work.
  Result<size_t> fill_mask(std::span<uint32_t> bits) const;

  struct Snapshot {
    std::vector<uint32_t> state;  // Engine::signature of the parse state
    std::string tail;
    bool ended = false;
    std::pair<uint64_t, uint64_t> grammar{0, 0};
  };
  Snapshot snapshot() const;
  void restore(const Snapshot& s);  // s from a matcher of the same grammar

  const Grammar& grammar() const { return *grammar_; }
  const TokenVocab& vocab() const { return *vocab_; }

 private:
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab);
  Status step_bytes(std::string_view bytes, int32_t token);
  Status fail(int32_t code, std::string_view bytes, size_t at, int32_t token) const;
  void compact_if_large() const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenVocab> vocab_;
  mutable std::unique_ptr<detail::Engine> engine_;  // step caches: filled by const fill_mask too
  mutable int32_t cfg_ = 0;                         // the current config in engine_
  bool ended_ = false;
  std::string tail_;  // the last bytes accepted, for error messages
};

}  // namespace ggflow::grammar
