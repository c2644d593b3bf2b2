// EngineLoop over the paged pipeline on stories260K (cpu executor): the events of a request add up
// to what the pipeline gives alone; the siblings of a group find the leader's prompt in the prefix
// cache; cancelling frees every block; the queue is bounded; draining cancels what is left.
#include <gtest/gtest.h>

#include "require_file.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "runtime/model_file.h"
#include "server/engine_loop.h"

using namespace ggflow;
using namespace ggflow::server;
using namespace std::chrono_literals;

namespace {

const std::string kStories = std::string(GGFLOW_SHARED) + "/models/stories260K.gguf";
constexpr int32_t kBlocks = 32;

struct Collected {
  std::vector<std::string> text;
  std::vector<std::vector<int32_t>> tokens;
  std::vector<RequestEvent> last;
};

// Reads events until every one of `n` choices is done (or 60 s pass), after `first` (events the
// caller already took from the handle).
Collected collect(RequestHandle& h, size_t n, std::vector<RequestEvent> first = {}) {
  Collected c;
  c.text.resize(n);
  c.tokens.resize(n);
  c.last.resize(n);
  size_t done = 0;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  for (bool initial = true; done < n && std::chrono::steady_clock::now() < deadline; initial = false)
    for (auto& e : initial ? first : h.wait(100ms)) {
      c.text[size_t(e.index)] += e.text;
      c.tokens[size_t(e.index)].insert(c.tokens[size_t(e.index)].end(), e.tokens.begin(), e.tokens.end());
      if (e.done) {
        ++done;
        c.last[size_t(e.index)] = e;
      }
    }
  EXPECT_EQ(done, n) << "timed out";
  return c;
}

class Loop : public ::testing::Test {
 protected:
  void SetUp() override {
    GGFLOW_REQUIRE_FILE(kStories, ::ggflow::testing::cat(kStories, " not found"));
    static std::shared_ptr<const runtime::ModelFile> file = *runtime::ModelFile::open(kStories);
    serving::EngineConfig cfg;
    cfg.num_blocks = kBlocks;
    cfg.max_num_seqs = 4;
    cfg.max_num_batched_tokens = 64;
    runtime::CompileOptions co;
    co.threads = 1;
    auto p = pipeline::ContinuousBatchingPipeline::open(*file, cfg, co);
    ASSERT_TRUE(p.ok()) << p.error().str();
    pipe = std::move(*p);
  }
  Submission sub(const std::vector<int32_t>& prompt, int64_t max_tokens, int32_t index,
                 const std::shared_ptr<RequestHandle>& h, double temperature = 0) {
    Submission s;
    s.index = index;
    s.prompt = prompt;
    s.params.temperature = temperature;
    s.params.max_tokens = max_tokens;
    s.params.seed = 7 + uint64_t(index);
    s.handle = h;
    return s;
  }
  std::vector<int32_t> prompt(const std::string& text) { return *pipe->format()->encode(text); }
  std::unique_ptr<pipeline::ContinuousBatchingPipeline> pipe;
  Metrics metrics;
};

TEST_F(Loop, EventsAddUpToTheRequestRunAlone) {
  const auto ids = prompt("Once upon a time, there was a little girl");
  text::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 24;
  auto id = pipe->add_request_tokens(ids, p);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(pipe->run_until_done().ok());
  auto alone = *pipe->result(*id);
  pipe->release(*id);

  EngineLoop loop(*pipe, LoopConfig{4, 4}, metrics);
  auto h = std::make_shared<RequestHandle>();
  std::vector<Submission> group;
  group.push_back(sub(ids, 24, 0, h));
  ASSERT_EQ(loop.submit(std::move(group)), EngineLoop::Admission::Accepted);
  Collected c = collect(*h, 1);
  EXPECT_EQ(c.text[0], alone.text);
  EXPECT_EQ(c.tokens[0], alone.tokens);
  EXPECT_EQ(c.last[0].finish, alone.finish);
  EXPECT_EQ(c.last[0].usage.completion_tokens, int64_t(alone.tokens.size()));
  EXPECT_EQ(loop.live(), 0);
}

TEST_F(Loop, SiblingsShareTheLeadersPromptBlocks) {
  std::string text = "Once upon a time, there was a little girl named Lily. She liked to play in the park with her dog";
  text += text + text;  // > 2 blocks of 32 tokens
  const auto ids = prompt(text);
  ASSERT_GT(ids.size(), 64u);
  EngineLoop loop(*pipe, LoopConfig{4, 4}, metrics);
  auto h = std::make_shared<RequestHandle>();
  std::vector<Submission> group;
  for (int32_t i = 0; i < 3; ++i) group.push_back(sub(ids, 8, i, h, 1.0));
  ASSERT_EQ(loop.submit(std::move(group)), EngineLoop::Admission::Accepted);
  Collected c = collect(*h, 3);
  EXPECT_EQ(c.last[0].usage.cached_tokens, 0);
  for (int i = 1; i < 3; ++i) EXPECT_GE(c.last[size_t(i)].usage.cached_tokens, 64) << i;
  EXPECT_EQ(metrics.gauges().blocks_used, 0);
}

TEST_F(Loop, CancelFreesTheBlocksAndEndsTheRequest) {
  EngineLoop loop(*pipe, LoopConfig{4, 4}, metrics);
  auto h = std::make_shared<RequestHandle>();
  std::vector<Submission> group;
  group.push_back(sub(prompt("The dog"), 400, 0, h));
  ASSERT_EQ(loop.submit(std::move(group)), EngineLoop::Admission::Accepted);
  // Wait for the first tokens, then cancel.
  std::vector<RequestEvent> first;
  for (int i = 0; i < 100 && first.empty(); ++i) first = h->wait(100ms);
  ASSERT_FALSE(first.empty());
  loop.cancel(h);
  Collected c = collect(*h, 1, first);
  EXPECT_EQ(c.last[0].finish, text::FinishReason::Cancelled);
  EXPECT_EQ(loop.live(), 0);
  EXPECT_EQ(metrics.gauges().blocks_used, 0);
  EXPECT_EQ(metrics.gauges().running, 0);
}

// The metrics never read idle while an accepted request is queued: a client that saw them idle
// may submit up to --max-queue more (the server_openai drain check flaked on exactly that).
TEST_F(Loop, AnAcceptedRequestIsInTheGaugesAtOnce) {
  EngineLoop loop(*pipe, LoopConfig{1, 1}, metrics);
  for (int round = 0; round < 20; ++round) {
    auto h = std::make_shared<RequestHandle>();
    std::vector<Submission> g;
    g.push_back(sub(prompt("Lily and Tom went to the park"), 400, 0, h));
    ASSERT_EQ(loop.submit(std::move(g)), EngineLoop::Admission::Accepted);
    const EngineGauges now = metrics.gauges();
    EXPECT_EQ(now.running + now.waiting, 1) << "round " << round;
    loop.cancel(h);
    Collected got = collect(*h, 1);
    EXPECT_TRUE(got.last[0].done);
    // The books and the gauges are done before the last event is pushed.
    EXPECT_EQ(metrics.gauges().running + metrics.gauges().waiting, 0) << "round " << round;
    EXPECT_EQ(loop.live(), 0);
  }
}

TEST_F(Loop, TheQueueIsBoundedAndDrainCancelsTheRest) {
  EngineLoop loop(*pipe, LoopConfig{1, 1}, metrics);
  auto a = std::make_shared<RequestHandle>(), b = std::make_shared<RequestHandle>(), c = std::make_shared<RequestHandle>();
  auto one = [&](const std::shared_ptr<RequestHandle>& h) {
    std::vector<Submission> g;
    g.push_back(sub(prompt("Lily and Tom went to the park"), 400, 0, h));
    return g;
  };
  EXPECT_EQ(loop.submit(one(a)), EngineLoop::Admission::Accepted);
  EXPECT_EQ(loop.submit(one(b)), EngineLoop::Admission::Accepted);
  EXPECT_EQ(loop.submit(one(c)), EngineLoop::Admission::QueueFull);
  loop.drain(0ms);
  EXPECT_EQ(loop.submit(one(c)), EngineLoop::Admission::Draining);
  for (auto* h : {&a, &b}) {
    Collected got = collect(**h, 1);
    EXPECT_TRUE(got.last[0].done);
    // 400 tokens do not fit in no time: the drain ended them (or, at worst, they finished).
    EXPECT_NE(got.last[0].finish, text::FinishReason::Error);
  }
  EXPECT_EQ(loop.live(), 0);
  EXPECT_EQ(metrics.gauges().blocks_used, 0);
}

}  // namespace

namespace {

// Many HTTP-like threads at once: each submits requests, some cancel theirs mid-way; every
// request ends, the loop is idle after, no block is held. (The ThreadSanitizer build runs this.)
TEST_F(Loop, ConcurrentSubmittersAndCancellers) {
  EngineLoop loop(*pipe, LoopConfig{4, 64}, metrics);
  const std::vector<std::string> texts = {"Once upon a time", "The dog", "Lily and Tom went to the park", "The sun"};
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& t : texts) prompts.push_back(prompt(t));
  std::atomic<int> ended{0}, cancelled{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 6; ++c)
    clients.emplace_back([&, c] {
      for (int r = 0; r < 3; ++r) {
        auto h = std::make_shared<RequestHandle>();
        std::vector<Submission> g;
        g.push_back(sub(prompts[size_t(c + r) % prompts.size()], 16 + 8 * r, 0, h, c % 2 ? 0.8 : 0.0));
        if (loop.submit(std::move(g)) != EngineLoop::Admission::Accepted) continue;
        std::vector<RequestEvent> first;
        if ((c + r) % 3 == 0) {
          first = h->wait(5ms);  // maybe already its last event: cancel is then a no-op
          loop.cancel(h);
        }
        Collected got = collect(*h, 1, std::move(first));
        ended += got.last[0].done;
        cancelled += got.last[0].finish == text::FinishReason::Cancelled;
      }
    });
  for (auto& t : clients) t.join();
  EXPECT_EQ(ended.load(), 18);
  EXPECT_EQ(loop.live(), 0);
  EXPECT_EQ(metrics.gauges().blocks_used, 0);
  EXPECT_EQ(metrics.gauges().running, 0);
}

}  // namespace
