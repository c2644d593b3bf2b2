// libFuzzer target for the grammar layer (src/grammar/): the first input byte picks the language
// of what follows (even: GBNF text, odd: a JSON schema), which is compiled under small limits;
// the remaining bytes choose tokens while a matcher runs up to 48 steps over a small synthetic
// vocabulary (single bytes, multi-byte pieces, UTF-8 characters split across tokens, an end and a
// control token). Checked:
//   - compiling returns a grammar or an error, within the limits (no crash, hang or blow-up);
//   - the mask is exactly the set of tokens accept_token takes (brute force, every 6th step);
//   - a token the mask allows is accepted; a refused one leaves the state unchanged;
//   - restoring a snapshot gives back the same mask; a copy gives the same mask;
//   - a grammar printed with to_gbnf parses back to an equal grammar (same fingerprint).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

using namespace ggflow;
using namespace ggflow::grammar;

namespace {

Limits fuzz_limits() {
  Limits l;
  l.max_text_bytes = 1 << 16;
  l.max_rules = 2000;
  l.max_elements = 20000;
  l.max_repeat = 200;
  l.max_nesting = 32;
  l.max_stacks = 64;
  l.max_stack_depth = 256;
  l.max_closure_steps = 4096;
  l.max_mask_work = 1 << 18;
  l.max_step_rows = 32;  // rows dropped and refilled during walks
  return l;
}

const std::shared_ptr<const TokenVocab>& vocab() {
  static const std::shared_ptr<const TokenVocab> v = [] {
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    for (const char* p : {"{\"", "\":", "\", \"", "\"}", "true", "false", "null", "[]", "{}", " \"", "\n  ", "12", "-3.5", "e+5",
                          "\\n", "\\\"", "\\u00", "ab", "abc", "aa", "\xC3\xA9", "caf\xC3", "\xA9!", "\xE6\x97", "\xE6\x97\xA5",
                          "\xF0\x9F", "\x98\x80", "\xED\xA0\x80", "\xC0\x80", "- ", "1. ", "O-O", "int", "()"})
      pieces.push_back(p);
    pieces.push_back("<|ctrl|>");
    pieces.push_back("<|eos|>");
    const std::vector<int32_t> special = {static_cast<int32_t>(pieces.size() - 2)}, eog = {static_cast<int32_t>(pieces.size() - 1)};
    TokenVocab::Options o;
    o.mask_cache_bytes = 1 << 20;  // small, so eviction runs too
    auto r = TokenVocab::from_pieces(pieces, special, eog, o);
    if (!r) fuzz::setup_failed(r.error().str());
    return *r;
  }();
  return v;
}

std::vector<uint32_t> mask_of(const Matcher& m, bool* ok) {
  std::vector<uint32_t> bits(m.vocab().mask_words());
  *ok = m.fill_mask(bits).ok();
  return bits;
}

bool bit(const std::vector<uint32_t>& b, int32_t id) { return (b[id >> 5] >> (id & 31)) & 1; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool schema = in.ConsumeIntegral<uint8_t>() & 1;
  const std::string text = in.ConsumeRandomLengthString(8192);
  const Limits limits = fuzz_limits();

  std::shared_ptr<const Grammar> g;
  if (schema) {
    const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    auto r = compile_json_schema(j, limits);
    if (!r) return 0;
    g = *r;
  } else {
    auto r = parse_gbnf(text, "root", limits);
    if (!r) return 0;
    g = *r;
    Limits print = limits;  // the printed text may be longer than the source
    print.max_text_bytes = 1 << 24;
    auto again = parse_gbnf(g->to_gbnf(), g->rules()[g->root()].name, print);
    FUZZ_CHECK(again.ok(), "printed grammar does not parse: %s\n%s", again.ok() ? "" : again.error().str().c_str(), g->to_gbnf().c_str());
    FUZZ_CHECK((*again)->fingerprint() == g->fingerprint(), "printed grammar differs:\n%s", g->to_gbnf().c_str());
  }

  auto created = Matcher::create(g, vocab());
  if (!created) return 0;
  Matcher m = std::move(*created);
  const int32_t n_vocab = vocab()->n_vocab();
  for (int step = 0; step < 48 && in.remaining_bytes() > 0; ++step) {
    bool ok;
    const auto bits = mask_of(m, &ok);
    if (!ok) break;  // over max_mask_work: an error, fine
    const auto snap = m.snapshot();
    if (step % 6 == 0) {
      for (int32_t id = 0; id < n_vocab; ++id) {
        const bool took = m.accept_token(id).ok();
        FUZZ_CHECK(took == bit(bits, id), "mask says %d, accept says %d for token %d at step %d", bit(bits, id), took, id, step);
        m.restore(snap);
      }
      Matcher copy = m;
      bool copy_ok;
      FUZZ_CHECK(mask_of(copy, &copy_ok) == bits && copy_ok, "a copy's mask differs at step %d", step);
    }
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < n_vocab; ++id)
      if (bit(bits, id)) allowed.push_back(id);
    if (allowed.empty()) break;
    const int32_t id = allowed[in.ConsumeIntegralInRange<size_t>(0, allowed.size() - 1)];
    auto st = m.accept_token(id);
    FUZZ_CHECK(st.ok(), "an allowed token %d was refused at step %d: %s", id, step, st.ok() ? "" : st.error().str().c_str());
    if (in.ConsumeBool()) {  // back and forth: the same mask after restore
      m.restore(snap);
      bool again_ok;
      FUZZ_CHECK(mask_of(m, &again_ok) == bits, "mask after restore differs at step %d", step);
      FUZZ_CHECK(m.accept_token(id).ok(), "token %d refused after restore", id);
    }
    if (m.is_ended()) break;
  }
  return 0;
}
