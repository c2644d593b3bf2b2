// Metrics: the server's Prometheus series (docs/SERVER.md, Metrics). Thread-safe: the engine loop
// records steps and finished requests, the HTTP threads record responses, /metrics renders.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "serving/sequence.h"

namespace ggflow::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  std::vector<double> bounds_;    // upper bounds, ascending; +Inf is implicit
  std::vector<uint64_t> counts_;  // per bucket (not cumulative)
  double sum_ = 0;
  uint64_t count_ = 0;
};

// What the engine loop sets after every step.
struct EngineGauges {
  int64_t running = 0;     // requests in the scheduler's running set
  int64_t waiting = 0;     // queued: in the scheduler's waiting list or not yet handed to it
  int32_t num_blocks = 0;  // KV pool
  int32_t blocks_used = 0; // held by requests (cached-but-free blocks are not in use)
  int32_t block_size = 0;  // tokens per block
  std::set<std::string> running_adapters, waiting_adapters;  // LoRA adapters (served names) of those requests
};

// Several models (server/model_set.h) each run an engine: the gauges and the KV memory are kept
// per engine (keyed by its loop) and reported summed; the counters and histograms are shared.
class Metrics {
 public:
  Metrics();
  void set_gauges(const void* engine, const EngineGauges& g);
  void add_waiting(const void* engine, int64_t n);  // a request accepted between two set_gauges
  void forget(const void* engine);                  // an engine unloaded: its gauges and KV memory go

  void add_preemptions(int64_t n);
  // Speculative decoding in a step: verification chunks, draft tokens verified, accepted.
  void add_speculation(int64_t verified_seqs, int64_t draft_tokens, int64_t accepted_tokens);
  void add_prompt_tokens(int64_t n);
  void add_generation_tokens(int64_t n);
  void on_finished(text::FinishReason why, const serving::RequestUsage& usage, const serving::RequestTiming& timing);
  void on_response(int status);
  EngineGauges gauges() const;  // summed over the engines
  // An engine's KV pool memory, read when /metrics is rendered (not per step: counting resident
  // pages walks the pool's page table): address space reserved and bytes resident.
  void set_kv_memory(const void* engine, std::function<std::pair<int64_t, int64_t>()> read);
  // The served model name: the `model_name` label of the vLLM-named series.
  void set_model_name(std::string name);
  // The LoRA adapters served (--lora-modules): vllm:lora_requests_info's max_lora.
  void set_max_lora(int64_t n);
  std::string render() const;  // Prometheus text format 0.0.4

 private:
  mutable std::mutex m_;
  std::map<const void*, EngineGauges> engines_;
  int64_t preemptions_ = 0, prompt_tokens_ = 0, generation_tokens_ = 0;
  int64_t spec_verified_ = 0, spec_drafts_ = 0, spec_accepted_ = 0;
  int64_t prefix_queries_ = 0, prefix_hits_ = 0;
  std::map<std::string, int64_t> finished_;   // finished_reason -> count
  std::map<int, int64_t> responses_;          // HTTP status -> count
  Histogram ttft_, tpot_, e2e_;
  std::map<const void*, std::function<std::pair<int64_t, int64_t>()>> kv_memory_;
  std::string model_name_;
  int64_t max_lora_ = 0;

  // The series routers and the Gateway API Inference Extension's endpoint picker scrape, by
  // vLLM's names and types (its model-server protocol): queue, running, KV usage, LoRA, cache.
  void render_model_server_protocol(const EngineGauges& g, std::string& out) const;
  EngineGauges sum_locked() const;
};

}  // namespace ggflow::server
