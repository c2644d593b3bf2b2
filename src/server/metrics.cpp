// Prometheus series of the server (see metrics.h).
#include "server/metrics.h"

#include <algorithm>
#include <ctime>

#include <fmt/format.h>

#include "pipeline/constrained_sampler.h"

namespace ggflow::server {

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, count_, name, sum_, name, count_);
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      tpot_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5}),
      e2e_({0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240}) {}

void Metrics::set_gauges(const void* engine, const EngineGauges& g) {
  std::lock_guard<std::mutex> l(m_);
  engines_[engine] = g;
}
void Metrics::add_waiting(const void* engine, int64_t n) {
  std::lock_guard<std::mutex> l(m_);
  engines_[engine].waiting += n;
}
void Metrics::forget(const void* engine) {
  std::lock_guard<std::mutex> l(m_);
  engines_.erase(engine);
  kv_memory_.erase(engine);
}
EngineGauges Metrics::sum_locked() const {
  EngineGauges s;
  for (const auto& [e, g] : engines_) {
    s.running += g.running, s.waiting += g.waiting;
    s.num_blocks += g.num_blocks, s.blocks_used += g.blocks_used;
    s.block_size = std::max(s.block_size, g.block_size);
    s.running_adapters.insert(g.running_adapters.begin(), g.running_adapters.end());
    s.waiting_adapters.insert(g.waiting_adapters.begin(), g.waiting_adapters.end());
  }
  return s;
}
EngineGauges Metrics::gauges() const {
  std::lock_guard<std::mutex> l(m_);
  return sum_locked();
}
void Metrics::add_speculation(int64_t verified_seqs, int64_t draft_tokens, int64_t accepted_tokens) {
  std::lock_guard<std::mutex> l(m_);
  spec_verified_ += verified_seqs, spec_drafts_ += draft_tokens, spec_accepted_ += accepted_tokens;
}

void Metrics::add_preemptions(int64_t n) {
  std::lock_guard<std::mutex> l(m_);
  preemptions_ += n;
}
void Metrics::add_prompt_tokens(int64_t n) {
  std::lock_guard<std::mutex> l(m_);
  prompt_tokens_ += n;
}
void Metrics::add_generation_tokens(int64_t n) {
  std::lock_guard<std::mutex> l(m_);
  generation_tokens_ += n;
}

void Metrics::on_finished(text::FinishReason why, const serving::RequestUsage& usage, const serving::RequestTiming& timing) {
  std::lock_guard<std::mutex> l(m_);
  ++finished_[text::to_string(why)];
  prefix_queries_ += usage.prompt_tokens;
  prefix_hits_ += usage.cached_tokens;
  if (usage.completion_tokens > 0) ttft_.observe(timing.time_to_first_token_s);
  if (usage.completion_tokens > 1) tpot_.observe(timing.time_per_output_token_s);
  e2e_.observe(timing.total_s);
}

void Metrics::on_response(int status) {
  std::lock_guard<std::mutex> l(m_);
  ++responses_[status];
}

void Metrics::set_kv_memory(const void* engine, std::function<std::pair<int64_t, int64_t>()> read) {
  std::lock_guard<std::mutex> l(m_);
  kv_memory_[engine] = std::move(read);
}

void Metrics::set_max_lora(int64_t n) {
  std::lock_guard<std::mutex> l(m_);
  max_lora_ = n;
}

void Metrics::set_model_name(std::string name) {
  std::lock_guard<std::mutex> l(m_);
  model_name_ = std::move(name);
}

namespace {
// A Prometheus label value: backslash, double quote and newline escaped.
std::string label_value(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}
}  // namespace

void Metrics::render_model_server_protocol(const EngineGauges& g, std::string& out) const {
  const std::string model = "model_name=\"" + label_value(model_name_) + "\"";
  auto one = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{}{{{}}} {}\n", name, help, name, type, name, model, value);
  };
  const double kv_usage = g.num_blocks > 0 ? double(g.blocks_used) / g.num_blocks : 0.0;
  one("vllm:num_requests_running", "gauge", "Requests running (ggflow:num_requests_running).", g.running);
  one("vllm:num_requests_waiting", "gauge", "Requests waiting (ggflow:num_requests_waiting).", g.waiting);
  one("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage, 1 = full (ggflow:kv_cache_usage_perc).", kv_usage);
  one("vllm:gpu_cache_usage_perc", "gauge", "The older name of vllm:kv_cache_usage_perc (this is the CPU's cache).", kv_usage);
  one("vllm:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.", prefix_queries_);
  one("vllm:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", prefix_hits_);
  one("vllm:prompt_tokens_total", "counter", "Prompt tokens of the requests admitted.", prompt_tokens_);
  one("vllm:generation_tokens_total", "counter", "Tokens generated.", generation_tokens_);
  // vLLM's value is the time of the report; the adapters are served names, comma-separated (the
  // inference gateway's LoRA affinity reads them).
  auto names = [](const std::set<std::string>& s) {
    std::string out;
    for (const auto& n : s) out += (out.empty() ? "" : ",") + n;
    return out;
  };
  out += fmt::format(
      "# HELP vllm:lora_requests_info LoRA adapters of the running and waiting requests.\n"
      "# TYPE vllm:lora_requests_info gauge\n"
      "vllm:lora_requests_info{{max_lora=\"{}\",running_lora_adapters=\"{}\",waiting_lora_adapters=\"{}\"}} {}\n",
      max_lora_, names(g.running_adapters), names(g.waiting_adapters), double(std::time(nullptr)));
  out += fmt::format(
      "# HELP vllm:cache_config_info KV-cache configuration.\n# TYPE vllm:cache_config_info gauge\n"
      "vllm:cache_config_info{{block_size=\"{}\",enable_prefix_caching=\"True\",num_gpu_blocks=\"{}\"}} 1\n",
      g.block_size, g.num_blocks);
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> l(m_);
  const EngineGauges g = sum_locked();
  std::string out;
  auto one = [&](const char* name, const char* type, const char* help, auto value) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
  };
  one("ggflow:num_requests_running", "gauge", "Requests in the scheduler's running set.", g.running);
  one("ggflow:num_requests_waiting", "gauge", "Requests waiting to run (the queue).", g.waiting);
  one("ggflow:kv_cache_usage_perc", "gauge", "Fraction of KV-cache blocks held by requests (1 = full).",
      g.num_blocks > 0 ? double(g.blocks_used) / g.num_blocks : 0.0);
  out += fmt::format(
      "# HELP ggflow:cache_config_info KV-cache configuration.\n# TYPE ggflow:cache_config_info gauge\n"
      "ggflow:cache_config_info{{block_size=\"{}\",num_gpu_blocks=\"{}\"}} 1\n",
      g.block_size, g.num_blocks);
  one("ggflow:kv_cache_blocks_used", "gauge", "KV-cache blocks held by requests.", g.blocks_used);
  if (!kv_memory_.empty()) {
    int64_t reserved = 0, resident = 0;
    for (const auto& [e, read] : kv_memory_) {
      const auto [r, m] = read();
      reserved += r, resident += m;
    }
    one("ggflow:kv_cache_reserved_bytes", "gauge", "Address space reserved for the KV pool (not memory until written).", reserved);
    one("ggflow:kv_cache_resident_bytes", "gauge", "Bytes of the KV pool in memory (pages written so far).", resident);
  }
  one("ggflow:prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.", prefix_queries_);
  one("ggflow:prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.", prefix_hits_);
  one("ggflow:prefix_cache_hit_ratio", "gauge", "Prefix-cache hits / queries (tokens).",
      prefix_queries_ > 0 ? double(prefix_hits_) / double(prefix_queries_) : 0.0);
  one("ggflow:num_preemptions_total", "counter", "Sequences preempted (recomputed later).", preemptions_);
  one("ggflow:spec_decode_num_verifications_total", "counter",
      "Speculative decoding: target passes over a sequence's pending token and its drafts.", spec_verified_);
  one("ggflow:spec_decode_num_draft_tokens_total", "counter", "Speculative decoding: draft tokens verified.", spec_drafts_);
  one("ggflow:spec_decode_num_accepted_tokens_total", "counter", "Speculative decoding: draft tokens accepted.",
      spec_accepted_);
  one("ggflow:spec_decode_acceptance_rate", "gauge", "Speculative decoding: accepted / verified draft tokens.",
      spec_drafts_ > 0 ? double(spec_accepted_) / double(spec_drafts_) : 0.0);
  one("ggflow:spec_decode_tokens_per_verification", "gauge",
      "Speculative decoding: tokens a sequence emits per verification pass (accepted drafts + 1).",
      spec_verified_ > 0 ? double(spec_accepted_ + spec_verified_) / double(spec_verified_) : 0.0);
  one("ggflow:prompt_tokens_total", "counter", "Prompt tokens of the requests admitted.", prompt_tokens_);
  one("ggflow:generation_tokens_total", "counter", "Tokens generated.", generation_tokens_);
  out += "# HELP ggflow:request_success_total Finished requests by finish reason.\n# TYPE ggflow:request_success_total counter\n";
  for (const char* r : {"stop", "length", "cancelled", "error"}) {
    auto it = finished_.find(r);
    out += fmt::format("ggflow:request_success_total{{finished_reason=\"{}\"}} {}\n", r, it == finished_.end() ? 0 : it->second);
  }
  if (auto t = pipeline::mask_times_snapshot().seconds; !t.empty()) {  // grammar-constrained requests
    std::sort(t.begin(), t.end());
    double sum = 0;
    for (double v : t) sum += v;
    out += "# HELP ggflow:grammar_mask_seconds Time to compute one step's allowed-token mask (the last 65536 masks).\n"
           "# TYPE ggflow:grammar_mask_seconds summary\n";
    for (double q : {0.5, 0.9, 0.99})
      out += fmt::format("ggflow:grammar_mask_seconds{{quantile=\"{}\"}} {:.9f}\n", q,
                         t[std::min(t.size() - 1, size_t(q * double(t.size())))]);
    out += fmt::format("ggflow:grammar_mask_seconds_sum {:.9f}\nggflow:grammar_mask_seconds_count {}\n", sum, t.size());
  }
  ttft_.render("ggflow:time_to_first_token_seconds", "Time to the first token.", out);
  tpot_.render("ggflow:time_per_output_token_seconds", "Time per output token after the first.", out);
  e2e_.render("ggflow:e2e_request_latency_seconds", "End-to-end request latency.", out);
  out += "# HELP ggflow:http_requests_total HTTP responses by status.\n# TYPE ggflow:http_requests_total counter\n";
  for (const auto& [code, n] : responses_) out += fmt::format("ggflow:http_requests_total{{code=\"{}\"}} {}\n", code, n);
  render_model_server_protocol(g, out);
  return out;
}

}  // namespace ggflow::server
