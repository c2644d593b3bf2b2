// Per-step cost of grammar masks (a benchmark, not a test). Run from the repository root:
//   ./build/bench/grammar_mask [model.gguf [repeats]]   (default models/smollm2-135m-instruct-q4_1.gguf;
//   repeats: how many times the warm pass runs, for profiling; the last one is reported)
// A JSON schema is compiled, a JSON instance of it is tokenized with the model's tokenizer, and
// the instance is replayed token by token: fill_mask, then accept_token. Reported per step
// (p50 / p99 / max, microseconds), over the instance's tokens:
//   cold     a fresh matcher, no shared mask cache: what the first request with a schema pays
//            (its step automaton fills while it runs)
//   warm     the same matcher again from the start, no shared mask cache: the trie walk alone
//   cached   a fresh matcher on a vocabulary whose shared mask cache saw the same states
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "text/tokenizer.h"

namespace {

using namespace ggflow;
using Clock = std::chrono::steady_clock;

template <class T>
T must(Result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "grammar_mask: %s: %s\n", what, r.error().str().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

const char* kSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 64},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "role": {"enum": ["admin", "editor", "viewer"]},
    "active": {"type": "boolean"},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"}
      },
      "required": ["street", "city"],
      "additionalProperties": false
    },
    "scores": {"type": "array", "items": {"type": "number"}, "maxItems": 10},
    "notes": {"type": ["string", "null"]}
  },
  "required": ["name", "age", "role", "active", "address"],
  "additionalProperties": false
})";

const char* kInstance = R"({
  "name": "Ada Lovelace, Countess of Lovelace",
  "age": 36,
  "email": "ada@analytical-engine.org",
  "role": "editor",
  "active": true,
  "address": {"street": "12 St James's Square", "city": "London", "zip": "10001"},
  "scores": [98.5, 87.25, 100, 3.14159],
  "notes": "First published algorithm for a machine; notes on the Analytical Engine, 1843."
})";

struct Stats {
  std::vector<double> us;
  void report(const char* name) {
    std::sort(us.begin(), us.end());
    auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * us.size()))]; };
    double sum = 0;
    for (double u : us) sum += u;
    std::printf("  %-7s steps %4zu   p50 %8.2f us   p99 %8.2f us   max %8.2f us   mean %8.2f us\n", name, us.size(), at(0.5), at(0.99),
                us.back(), sum / us.size());
  }
};

// Replays `ids` through `m`, timing each fill_mask.
Stats replay(grammar::Matcher& m, const std::vector<int32_t>& ids, std::vector<uint32_t>& bits) {
  Stats s;
  for (int32_t id : ids) {
    const auto t0 = Clock::now();
    const size_t allowed = must(m.fill_mask(bits), "fill_mask");
    s.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    if (std::getenv("GRAMMAR_MASK_VERBOSE"))  // each step: time, allowed tokens, the token
      std::printf("    %9.2f us  %6zu allowed  token %6d %s\n", s.us.back(), allowed, id, m.vocab().piece(id).c_str());
    if (!(bits[id >> 5] >> (id & 31) & 1) || allowed == 0) {
      std::fprintf(stderr, "grammar_mask: token %d of the instance is not allowed by the mask\n", id);
      std::exit(1);
    }
    auto st = m.accept_token(id);
    if (!st) {
      std::fprintf(stderr, "grammar_mask: %s\n", st.error().str().c_str());
      std::exit(1);
    }
  }
  if (!m.is_complete()) {
    std::fprintf(stderr, "grammar_mask: the instance does not complete the grammar\n");
    std::exit(1);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : "models/smollm2-135m-instruct-q4_1.gguf";
  auto file = must(gguf::File::open(path), "open model");
  auto tok = must(text::Tokenizer::from_file(file), "tokenizer");

  auto t0 = Clock::now();
  auto vocab_nocache = must(grammar::TokenVocab::from_tokenizer(tok, {.mask_cache_bytes = 0}), "vocab");
  const double vocab_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  auto vocab_cache = must(grammar::TokenVocab::from_tokenizer(tok), "vocab");

  t0 = Clock::now();
  auto g = must(grammar::compile_json_schema(grammar::Json::parse(kSchema)), "schema");
  const double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();

  text::EncodeOptions opt;
  opt.add_special = false;
  opt.parse_special = false;
  const auto ids = must(tok.encode(kInstance, opt), "encode");
  std::printf("grammar_mask: %s, %d tokens, trie %zu nodes (vocab built in %.1f ms); schema: %zu rules, %zu elements (compiled in %.2f ms); "
              "instance: %zu tokens\n",
              path.c_str(), vocab_nocache->n_vocab(), vocab_nocache->trie().size(), vocab_ms, g->rules().size(), g->elements().size(), compile_ms,
              ids.size());

  std::vector<uint32_t> bits(vocab_nocache->mask_words());
  auto cold = must(grammar::Matcher::create(g, vocab_nocache), "matcher");
  const auto start = cold.snapshot();
  replay(cold, ids, bits).report("cold");
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 1;
  Stats warm;
  for (int r = 0; r < repeats; ++r) {
    cold.restore(start);
    warm = replay(cold, ids, bits);
  }
  warm.report("warm");

  auto fill = must(grammar::Matcher::create(g, vocab_cache), "matcher");
  replay(fill, ids, bits);
  auto cached = must(grammar::Matcher::create(g, vocab_cache), "matcher");
  replay(cached, ids, bits).report("cached");
  const auto cs = vocab_cache->cache_stats();
  std::printf("  mask cache: %zu entries, %.1f KiB, %llu hits, %llu misses\n", cs.entries, cs.bytes / 1024.0,
              static_cast<unsigned long long>(cs.hits), static_cast<unsigned long long>(cs.misses));
  return 0;
}
