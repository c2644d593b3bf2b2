// EngineLoop: the one thread that owns the ContinuousBatchingPipeline and steps it; the HTTP
// threads talk to it through submit() / cancel() and read each request's events from its
// RequestHandle.
//
// Model. submit() queues a group of requests (the n choices of one prompt) under a mutex and
// wakes the loop; the loop adds them to the pipeline, steps it while anything is unfinished, and
// after each step hands every request the text, tokens and log-probabilities it produced, and a
// final event (finish reason, usage, timing) when it ends; then the request is released (its
// blocks were freed by the engine when it ended). The group's leader runs first; its siblings are
// added once the leader's prompt is computed, so they find the prompt's blocks in the prefix cache.
// Bounded: at most max_num_seqs + max_queue requests are live; more are refused (429).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "pipeline/continuous_batching.h"
#include "server/metrics.h"
#include "text/logprobs.h"

namespace ggflow::server {

struct RequestEvent {
  int32_t index = 0;                         // the choice (Submission::index) it belongs to
  std::string text;                          // text released since the last event
  std::vector<int32_t> tokens;               // tokens generated since the last event
  std::vector<text::StepLogprobs> logprobs;  // one per token, when asked
  // Once, when the prompt is computed (prompt_logprobs >= 0): prompt tokens 1.. scored.
  bool prompt_scored = false;
  std::vector<text::StepLogprobs> prompt_logprobs;
  bool done = false;                         // the last event of the request
  text::FinishReason finish = text::FinishReason::None;
  std::string error;                         // finish == Error
  serving::RequestUsage usage;               // when done
  serving::RequestTiming timing;             // when done

};

// One HTTP request as its thread sees it: the events of all its choices come in from the loop.
class RequestHandle {
 public:
  // Waits up to `timeout` for events; returns those pending, in order (empty on timeout).
  std::vector<RequestEvent> wait(std::chrono::milliseconds timeout);
  void push(RequestEvent e);  // the loop

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<RequestEvent> events_;
};

struct Submission {
  int32_t index = 0;                   // the choice, echoed in its events
  std::vector<int32_t> prompt;         // i32 [prompt_len]
  text::SamplingParams params;
  pipeline::Constraint constraint;     // empty: free text
  uint64_t lora = 0;                   // the LoRA adapters it runs with (ModelLease::lora)
  std::string adapter;                 // the adapter's served name, for the metrics ("" : none)
  std::shared_ptr<RequestHandle> handle;
};

// A live request as llama-server's /slots shows a slot: the loop refreshes these after every step.
struct SlotInfo {
  int64_t id_task = 0;       // the engine's request id
  int32_t index = 0;         // its choice
  bool running = false;      // scheduled (false: waiting for room)
  int64_t n_prompt = 0;      // prompt tokens
  int64_t n_decoded = 0;     // generated so far
  int64_t n_computed = 0;    // tokens whose K/V are in the cache
};

struct LoopConfig {
  int32_t max_num_seqs = 8;
  int32_t max_queue = 64;
};

class EngineLoop {
 public:
  EngineLoop(pipeline::ContinuousBatchingPipeline& pipe, const LoopConfig& cfg, Metrics& metrics);
  ~EngineLoop();  // stops and joins the thread

  enum class Admission { Accepted, QueueFull, Draining };
  // Queues a group (all or nothing). The first is the leader (see the model above).
  Admission submit(std::vector<Submission> group);
  // Cancels every request of `handle` (e.g. its client went away); each gets a final event.
  void cancel(const std::shared_ptr<RequestHandle>& handle);

  // Stops accepting; waits up to `timeout` for live requests to finish, cancels the rest, and
  // returns once every request has had its final event.
  void drain(std::chrono::milliseconds timeout);
  bool draining() const { return draining_; }
  int64_t live() const;
  // The requests in the engine after the last step (oldest first).
  std::vector<SlotInfo> slots() const;

 private:
  struct Group {
    std::vector<Submission> members;
    size_t next = 0;                       // members[next..] are not yet in the pipeline
    pipeline::RequestId leader = 0;
  };
  struct Active {
    std::shared_ptr<RequestHandle> handle;
    int32_t index = 0;
    std::string adapter;                    // Submission::adapter
    std::string text;                       // released by the pipeline since the last publish
    size_t logprobs_sent = 0;
    bool prompt_scored_sent = false;
  };

  void run();
  void admit(Group& g);  // adds members[next..] that may start now
  pipeline::RequestId add_one(Submission& s);  // 0 when the pipeline refused it (final event sent)
  void publish();        // after a step: events to every active request, finished ones released
  void update_gauges();
  void retire(int64_t n);  // n requests ended: live_ -= n
  // A request that never reached the engine (rejected by the pipeline, or cancelled while held):
  // retired now, its final event pushed by the next publish, after the gauges.
  void end_unstarted(Submission s, text::FinishReason why, std::string error);

  pipeline::ContinuousBatchingPipeline& pipe_;
  LoopConfig cfg_;
  Metrics& metrics_;

  mutable std::mutex m_;                    // guards inbox_, cancels_, live_, stop_
  std::condition_variable cv_;
  std::vector<Group> inbox_;
  std::vector<std::shared_ptr<RequestHandle>> cancels_;
  int64_t live_ = 0;                        // submitted and not yet finished
  bool stop_ = false;
  bool cancel_all_ = false;
  std::atomic<bool> draining_{false};
  std::condition_variable idle_cv_;         // live_ reached 0
  std::vector<SlotInfo> slots_;             // update_gauges' snapshot of active_

  // Loop thread only.
  std::vector<Group> groups_;               // groups with members still to add
  std::map<pipeline::RequestId, Active> active_;
  std::vector<std::pair<std::shared_ptr<RequestHandle>, RequestEvent>> unstarted_;  // end_unstarted's events
  std::thread thread_;
};

}  // namespace ggflow::server
