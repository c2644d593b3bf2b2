// A step whose logits row holds NaN or Inf: that request ends with FinishReason::Error and a
// message naming the step and position, no token is sampled from the row, its blocks are freed,
// and the other requests of the same steps go on with exactly the tokens they get alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "test_scheduler_harness.h"

using namespace ggflow::serving;
using namespace ggflow::serving::testing;

namespace {

// Poisons the row of request `victim` once its history holds `at_len` tokens, with `value` at
// vocabulary entry `at`: the rest of the row stays finite, so only the check can catch it.
void poison(Harness& h, RequestId victim, int64_t at_len, float value, int64_t at = 7) {
  h.runner.edit_logits = [&h, victim, at_len, value, at](const ggflow::runtime::ScheduledBatch& b, std::span<float> rows,
                                                        int64_t vocab) {
    for (size_t r = 0; r < b.sampled_seq.size(); ++r) {
      const RequestId id = b.seq_ids[size_t(b.sampled_seq[r])];
      if (id == victim && h.engine->sequence(id)->len() == at_len) rows[size_t(int64_t(r) * vocab + at)] = value;
    }
  };
}

void expect_error_end(Harness& h, RequestId id, const std::string& kind, size_t generated) {
  RequestOutput o = h.out(id);
  std::printf("[request %llu] %s\n", static_cast<unsigned long long>(id), o.error.c_str());
  EXPECT_EQ(o.end, ggflow::text::FinishReason::Error);
  EXPECT_EQ(o.tokens.size(), generated) << "no token may be sampled from the broken row";
  EXPECT_NE(o.error.find("the model produced " + kind + " logits at step "), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("(position " + std::to_string(20 + generated - 1) + ")"), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("the weights or the input are broken"), std::string::npos) << o.error;
}

TEST(SchedulerNaN, NaNRowEndsThatRequestOnly) {
  Harness h(config(32));
  RequestId a = h.add(tokens(20, 1), max_tokens(12));
  RequestId b = h.add(tokens(20, 2), max_tokens(12));
  poison(h, a, 20 + 3, std::numeric_limits<float>::quiet_NaN());  // a's 4th token would come from it
  h.run();
  expect_error_end(h, a, "NaN", 3);
  const std::vector<int32_t> alone = run_alone(tokens(20, 1), max_tokens(12));
  EXPECT_EQ(h.out(a).tokens, std::vector<int32_t>(alone.begin(), alone.begin() + 3));  // up to the broken row
  EXPECT_EQ(h.out(b).end, ggflow::text::FinishReason::Length);
  EXPECT_EQ(h.out(b).tokens, run_alone(tokens(20, 2), max_tokens(12)));
  EXPECT_TRUE(h.all_free());
}

TEST(SchedulerNaN, InfInThePromptRowEndsBeforeTheFirstToken) {
  Harness h(config(32));
  RequestId a = h.add(tokens(20, 3), max_tokens(5));
  RequestId b = h.add(tokens(20, 4), max_tokens(5));
  poison(h, b, 20, std::numeric_limits<float>::infinity(), kVocab - 1);
  h.run();
  expect_error_end(h, b, "Inf", 0);
  EXPECT_EQ(h.out(a).tokens, run_alone(tokens(20, 3), max_tokens(5)));
  EXPECT_TRUE(h.all_free());
}

TEST(SchedulerNaN, NegativeInfIsCaughtAndNoTokenIsStreamed) {
  Harness h(config(32));
  std::vector<int32_t> streamed;
  RequestParams p = max_tokens(6);
  p.on_token = [&](RequestId, int32_t t) {
    streamed.push_back(t);
    return true;
  };
  RequestId a = h.add(tokens(20, 5), p);
  poison(h, a, 20 + 2, -std::numeric_limits<float>::infinity(), 0);
  h.run();
  expect_error_end(h, a, "Inf", 2);
  EXPECT_EQ(streamed, h.out(a).tokens);
  EXPECT_TRUE(h.all_free());
}

}  // namespace
