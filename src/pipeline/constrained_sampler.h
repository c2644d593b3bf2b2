// Grammar-constrained sampling: a request's text::Sampler restricted, step by step, to the tokens
// its grammar allows (grammar/matcher.h), so every answer is a sentence of the grammar (a JSON
// Schema's documents, a GBNF grammar's language, a tool call's format).
//
// Model of a step: the mask of allowed tokens (bits over the vocabulary) sets every other logit to
// -inf on a copy of the row, the sampler draws from what is left (its penalties, temperature,
// top-k/p and RNG unchanged), and the matcher accepts the token. End-of-generation tokens are
// allowed exactly when the grammar is complete. The next step's mask depends only on the tokens
// so far, so it is computed right after the token is accepted, on the MaskWorker's thread, while
// the model's next forward pass runs; the next sample() waits for it (usually long done: a
// cached mask costs microseconds, an uncached one well under a millisecond).
//
// Greedy decoding stays a pure function of the logits: the mask depends on the accepted tokens
// only, so a constrained greedy answer is the same on every layout, batch size and thread count
// whenever the logits are.
//
// Failure (the matcher over a run-time limit, or no token of the vocabulary can continue): the
// sampler returns an end-of-generation token and error() says why; the pipeline ends the request
// with that error.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/result.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_vocab.h"
#include "text/sampler.h"

namespace ggflow::pipeline {

// One background thread that runs queued jobs in order (the masks of the next step).
class MaskWorker {
 public:
  MaskWorker();
  ~MaskWorker();  // runs the queued jobs, then joins
  void post(std::function<void()> job);

 private:
  void run();
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;
};

// Mask times of every constrained sampler of the process (benchmarks and /metrics read them).
struct MaskTimes {
  std::vector<double> seconds;  // one per computed mask, in completion order (about the last 65536)
};
MaskTimes mask_times_snapshot();
void mask_times_clear();

// What a request's answer is held to; an empty grammar: free text.
struct Constraint {
  std::shared_ptr<const grammar::Grammar> grammar;
  explicit operator bool() const { return grammar != nullptr; }
};

class ConstrainedSampler {
 public:
  // `worker` may be null: masks are then computed inside sample(). Errors when the grammar
  // cannot start (matcher limits).
  static Result<std::shared_ptr<ConstrainedSampler>> create(const text::SamplingParams& params,
                                                            std::span<const int32_t> prompt,
                                                            std::shared_ptr<const grammar::Grammar> grammar,
                                                            std::shared_ptr<const grammar::TokenVocab> vocab,
                                                            MaskWorker* worker);

  // logits: f32 [n_vocab]. Never fails: see the model above.
  int32_t sample(std::span<const float> logits);
  // Why the grammar stopped the request (empty while it is fine).
  std::string error() const;

 private:
  struct State;
  explicit ConstrainedSampler(std::shared_ptr<State> s) : s_(std::move(s)) {}
  std::shared_ptr<State> s_;
};

}  // namespace ggflow::pipeline
