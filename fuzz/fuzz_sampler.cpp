// libFuzzer target for the sampler (text/sampler.h), the log-probabilities (text/logprobs.h) and
// the stop strings (text/sampler_stop.h), with parameters and logits made from the input bytes
// (FuzzedDataProvider): every double may be NaN, +-Inf, +-0, huge, tiny or arbitrary bits.
// Checked:
//   - SamplingParams::validate(n_vocab) either refuses with a message or accepts; accepted values
//     are in their documented ranges (a NaN or Inf never passes);
//   - when accepted, Sampler::sample on adversarial logits rows (-inf, +inf, +-FLT_MAX, ties,
//     NaN when the input asks for them) returns an id in [0, n_vocab), the same one for the same
//     seed; with greedy decoding (temperature 0, or top_k = 1) and no bias or penalty it is the
//     first maximum of a finite row;
//   - step_logprobs: the chosen token as given, min(top_n, n_vocab) top tokens in descending
//     order (lowest id first on ties, NaN as -inf), every log-probability <= 0 on finite rows;
//   - StopStrings over the generated text cut into pieces: what it emits is a prefix of the text
//     without a stop string in it; when it stops, the matched stop string follows the emitted
//     text; when it does not, everything was emitted.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "text/logprobs.h"
#include "text/sampler.h"
#include "text/sampler_stop.h"

using namespace ggflow;
using namespace ggflow::text;

namespace {

double any_double(FuzzedDataProvider& in) {
  static const double kSpecial[] = {std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, 0.0, -0.0, 1.0,
                                    2.0, -2.0, 100.0, -100.0, 1e308, -1e308, 1e-310, 0.5, 1e-300, 0.999999999};
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return in.PickValueInArray(kSpecial);
    case 1: return in.ConsumeFloatingPointInRange<double>(-3.0, 3.0);
    default: {
      const uint64_t bits = in.ConsumeIntegral<uint64_t>();
      double d;
      std::memcpy(&d, &bits, sizeof d);
      return d;
    }
  }
}

float any_logit(FuzzedDataProvider& in, bool allow_nan, float tie) {
  static const float kSpecial[] = {-INFINITY, INFINITY, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                                   0.0f, -0.0f, 1e-40f, 30.0f, -30.0f, 88.0f, 700.0f};
  switch (in.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return in.PickValueInArray(kSpecial);
    case 1: return tie;
    case 2: {
      const float f = std::bit_cast<float>(in.ConsumeIntegral<uint32_t>());
      return std::isnan(f) && !allow_nan ? 0.0f : f;
    }
    default: return in.ConsumeFloatingPointInRange<float>(-20.0f, 20.0f);
  }
}

// The order of the sampler and the log-probabilities: NaN counts as -inf.
float key(float x) { return std::isnan(x) ? -INFINITY : x; }

bool finite_row(const std::vector<float>& l) {
  for (float x : l)
    if (!std::isfinite(x)) return false;
  return true;
}

int32_t first_max(const std::vector<float>& l) {
  int32_t best = 0;
  for (size_t k = 1; k < l.size(); ++k)
    if (l[k] > l[size_t(best)]) best = int32_t(k);
  return best;
}

void check_params(const SamplingParams& p) {
  FUZZ_CHECK(std::isfinite(p.temperature) && p.temperature >= 0, "temperature %g", p.temperature);
  FUZZ_CHECK(p.top_k >= 0, "top_k %d", p.top_k);
  FUZZ_CHECK(p.top_p > 0 && p.top_p <= 1, "top_p %g", p.top_p);
  FUZZ_CHECK(p.min_p >= 0 && p.min_p <= 1, "min_p %g", p.min_p);
  FUZZ_CHECK(std::isfinite(p.repetition_penalty) && p.repetition_penalty > 0, "repetition_penalty %g", p.repetition_penalty);
  FUZZ_CHECK(std::fabs(p.presence_penalty) <= 2 && std::fabs(p.frequency_penalty) <= 2, "penalties");
  for (const auto& [id, b] : p.logit_bias) FUZZ_CHECK(std::fabs(b) <= 100, "bias %g", b);
  FUZZ_CHECK(p.logprobs >= -1 && p.logprobs <= 20, "logprobs %d", p.logprobs);
}

void check_logprobs(const std::vector<float>& logits, int32_t chosen, int32_t top_n) {
  StepLogprobs lp = step_logprobs(logits, chosen, top_n);
  const size_t n = logits.size();
  FUZZ_CHECK(lp.chosen.token == chosen, "chosen %d != %d", lp.chosen.token, chosen);
  FUZZ_CHECK(lp.top.size() == std::min(n, size_t(std::max(top_n, 0))), "%zu top tokens for top_n %d", lp.top.size(), top_n);
  for (size_t i = 0; i < lp.top.size(); ++i) {
    const int32_t t = lp.top[i].token;
    FUZZ_CHECK(t >= 0 && size_t(t) < n, "top token %d", t);
    if (i > 0) {
      const float a = key(logits[size_t(lp.top[i - 1].token)]), b = key(logits[size_t(t)]);
      FUZZ_CHECK(a > b || (a == b && lp.top[i - 1].token < t), "top tokens out of order at %zu: %d (%g), %d (%g)", i,
                   lp.top[i - 1].token, a, t, b);
    }
  }
  if (finite_row(logits)) {
    FUZZ_CHECK(lp.chosen.logprob <= 0 && std::isfinite(lp.chosen.logprob), "chosen logprob %g", lp.chosen.logprob);
    for (const auto& t : lp.top) FUZZ_CHECK(t.logprob <= 0 && std::isfinite(t.logprob), "logprob %g", t.logprob);
  }
}

void check_stop_strings(const std::vector<std::string>& stops, FuzzedDataProvider& in) {
  if (stops.empty()) return;
  const std::string text = in.ConsumeRandomLengthString(256);
  StopStrings ss(stops);
  std::string emitted;
  for (size_t i = 0; i < text.size();) {
    const size_t len = std::min(text.size() - i, size_t(in.ConsumeIntegralInRange<int>(1, 8)));
    emitted += ss.push(text.substr(i, len));
    i += len;
  }
  if (!ss.stopped()) emitted += ss.flush();
  FUZZ_CHECK(text.compare(0, emitted.size(), emitted) == 0, "emitted text is not a prefix of the generated text");
  for (const auto& s : stops) FUZZ_CHECK(emitted.find(s) == std::string::npos, "a stop string was emitted");
  if (ss.stopped()) {
    FUZZ_CHECK(text.compare(emitted.size(), ss.matched().size(), ss.matched()) == 0, "matched stop is not next");
  } else {
    FUZZ_CHECK(emitted == text, "text lost without a stop");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int32_t n_vocab = in.ConsumeIntegralInRange<int32_t>(1, 300);
  const uint8_t flags = in.ConsumeIntegral<uint8_t>();
  SamplingParams p;
  p.temperature = flags & 1 ? 0.0 : any_double(in);
  p.top_k = flags & 2 ? in.ConsumeIntegralInRange<int32_t>(-1, n_vocab + 1) : in.ConsumeIntegral<int32_t>();
  p.top_p = flags & 4 ? 1.0 : any_double(in);
  p.min_p = flags & 8 ? 0.0 : any_double(in);
  const bool plain = flags & 16;  // no bias, no penalties
  if (!plain) {
    p.repetition_penalty = any_double(in);
    p.presence_penalty = any_double(in);
    p.frequency_penalty = any_double(in);
    for (int i = in.ConsumeIntegralInRange<int>(0, 4); i > 0; --i)
      p.logit_bias.emplace_back(in.ConsumeIntegralInRange<int32_t>(-2, n_vocab + 1), any_double(in));
  }
  p.seed = in.ConsumeIntegral<uint64_t>();
  for (int i = in.ConsumeIntegralInRange<int>(0, 2); i > 0; --i)
    p.stop_token_ids.push_back(in.ConsumeIntegralInRange<int32_t>(-1, n_vocab));
  for (int i = in.ConsumeIntegralInRange<int>(0, 3); i > 0; --i) p.stop.push_back(in.ConsumeRandomLengthString(6));
  p.max_tokens = in.ConsumeIntegralInRange<int64_t>(-2, 100);
  p.logprobs = in.ConsumeIntegralInRange<int32_t>(-2, 22);
  auto st = p.validate(n_vocab);
  if (!st) {
    FUZZ_CHECK(!st.error().what.empty(), "validate error without a message");
    return 0;
  }
  check_params(p);

  std::vector<int32_t> prompt;
  for (int i = in.ConsumeIntegralInRange<int>(0, 8); i > 0; --i) prompt.push_back(in.ConsumeIntegralInRange<int32_t>(0, n_vocab - 1));
  Sampler a(p, prompt), b(p, prompt);
  const bool allow_nan = flags & 32;
  const bool greedy = plain && (p.temperature == 0 || p.top_k == 1);
  for (int step = in.ConsumeIntegralInRange<int>(1, 4); step > 0 && in.remaining_bytes() > 0; --step) {
    const float tie = any_logit(in, false, 1.0f);
    std::vector<float> logits(static_cast<size_t>(n_vocab));
    for (float& x : logits) x = any_logit(in, allow_nan, tie);
    const int32_t ta = a.sample(logits), tb = b.sample(logits);
    FUZZ_CHECK(ta >= 0 && ta < n_vocab, "sampled id %d outside [0, %d)", ta, n_vocab);
    FUZZ_CHECK(ta == tb, "same seed, same logits, different tokens %d %d", ta, tb);
    if (greedy && finite_row(logits))
      FUZZ_CHECK(ta == first_max(logits), "greedy picked %d, the first maximum is %d", ta, first_max(logits));
    check_logprobs(logits, ta, p.logprobs < 0 ? 5 : p.logprobs);
  }
  check_stop_strings(p.stop, in);
  return 0;
}
