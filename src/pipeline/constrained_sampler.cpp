#include "pipeline/constrained_sampler.h"

#include <chrono>
#include <cmath>
#include <limits>

namespace ggflow::pipeline {

MaskWorker::MaskWorker() : thread_([this] { run(); }) {}

MaskWorker::~MaskWorker() {
  {
    std::lock_guard<std::mutex> l(m_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskWorker::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> l(m_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void MaskWorker::run() {
  std::unique_lock<std::mutex> l(m_);
  while (true) {
    cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop_ and nothing left
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    l.unlock();
    job();
    l.lock();
  }
}

namespace {

constexpr size_t kMaxTimes = size_t{1} << 16;
std::mutex g_times_m;
std::vector<double> g_times;

void record_time(double s) {
  std::lock_guard<std::mutex> l(g_times_m);
  if (g_times.size() >= kMaxTimes) g_times.erase(g_times.begin(), g_times.begin() + kMaxTimes / 2);
  g_times.push_back(s);
}

}  // namespace

MaskTimes mask_times_snapshot() {
  std::lock_guard<std::mutex> l(g_times_m);
  return {g_times};
}

void mask_times_clear() {
  std::lock_guard<std::mutex> l(g_times_m);
  g_times.clear();
}

// Shared by the sampler and the worker's job for the next mask (which may outlive the sampler).
struct ConstrainedSampler::State {
  text::Sampler sampler;
  grammar::Matcher matcher;
  MaskWorker* worker = nullptr;
  std::vector<uint32_t> bits;  // u32 [mask_words]: the next step's mask
  std::vector<float> masked;   // f32 [n_vocab]: the logits row with disallowed tokens at -inf
  std::mutex m;                // guards the fields below (the worker writes them)
  std::condition_variable cv;
  bool pending = false;        // a mask is being computed on the worker
  Result<size_t> allowed = size_t{0};
  std::string error;

  State(text::Sampler s, grammar::Matcher mt) : sampler(std::move(s)), matcher(std::move(mt)) {}

  void compute_mask() {  // the matcher is not touched by anyone else meanwhile
    const auto t0 = std::chrono::steady_clock::now();
    auto r = matcher.fill_mask(bits);
    record_time(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    std::lock_guard<std::mutex> l(m);
    allowed = std::move(r);
    pending = false;
    cv.notify_all();
  }
};

Result<std::shared_ptr<ConstrainedSampler>> ConstrainedSampler::create(const text::SamplingParams& params,
                                                                       std::span<const int32_t> prompt,
                                                                       std::shared_ptr<const grammar::Grammar> grammar,
                                                                       std::shared_ptr<const grammar::TokenVocab> vocab,
                                                                       MaskWorker* worker) {
  auto matcher = grammar::Matcher::create(std::move(grammar), vocab);
  if (!matcher) return matcher.error();
  auto s = std::make_shared<State>(text::Sampler(params, prompt), std::move(*matcher));
  s->worker = worker;
  s->bits.assign(vocab->mask_words(), 0);
  s->masked.resize(static_cast<size_t>(vocab->n_vocab()));
  s->compute_mask();  // the first step's mask (before the prompt's forward pass ends)
  return std::shared_ptr<ConstrainedSampler>(new ConstrainedSampler(std::move(s)));
}

std::string ConstrainedSampler::error() const {
  std::lock_guard<std::mutex> l(s_->m);
  return s_->error;
}

int32_t ConstrainedSampler::sample(std::span<const float> logits) {
  State& s = *s_;
  const auto& vocab = s.matcher.vocab();
  const int32_t fallback = vocab.eog_ids().empty() ? 0 : vocab.eog_ids().front();
  if (s.matcher.is_ended()) return fallback;  // ended (ignore_eos asks for more): end tokens only
  Result<size_t> allowed = size_t{0};
  {
    std::unique_lock<std::mutex> l(s.m);
    s.cv.wait(l, [&] { return !s.pending; });
    if (!s.error.empty()) return fallback;
    allowed = s.allowed;
  }
  auto fail = [&](std::string why) {
    std::lock_guard<std::mutex> l(s.m);
    s.error = std::move(why);
    return fallback;
  };
  if (!allowed) return fail(allowed.error().str());
  if (*allowed == 0) return fail("the grammar allows no token of this vocabulary after the text so far");
  const size_t n = std::min(logits.size(), s.masked.size());
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t word = s.bits[w];
    const size_t end = std::min(n, w * 32 + 32);
    if (word == 0) {
      std::fill(s.masked.begin() + static_cast<std::ptrdiff_t>(w * 32), s.masked.begin() + static_cast<std::ptrdiff_t>(end), kNegInf);
      continue;
    }
    for (size_t i = w * 32; i < end; ++i) s.masked[i] = (word >> (i % 32)) & 1 ? logits[i] : kNegInf;
  }
  const int32_t tok = s.sampler.sample(std::span<const float>(s.masked.data(), n));
  if (auto st = s.matcher.accept_token(tok); !st) return fail(st.error().str());
  if (s.matcher.is_ended()) return tok;
  if (s.worker) {
    {
      std::lock_guard<std::mutex> l(s.m);
      s.pending = true;
    }
    s.worker->post([keep = s_] { keep->compute_mask(); });
  } else {
    s.compute_mask();
  }
  return tok;
}

}  // namespace ggflow::pipeline
