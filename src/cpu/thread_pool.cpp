#include "cpu/thread_pool.h"

#include <algorithm>

#include "cpu/host.h"

namespace ggflow::cpu {

ThreadPool::ThreadPool(int threads, void (*idle)())
    : n_(std::max(1, threads)),
      // More threads than cores: a spinning worker would hold the core another one needs to finish
      // its part; sleep at once instead (the caller yields while it waits, either way).
      spin_(n_ <= usable_cores()),
      idle_(idle) {
  for (int i = 1; i < n_; ++i) threads_.emplace_back([this, i] { worker(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::part_of(int64_t n, int64_t grain, int threads, int index, int64_t* b, int64_t* e) {
  const int64_t units = (n + grain - 1) / grain;  // grains, split as evenly as possible
  const int64_t base = units / threads, extra = units % threads;
  const int64_t u0 = index * base + std::min<int64_t>(index, extra), u1 = u0 + base + (index < extra ? 1 : 0);
  *b = std::min(n, u0 * grain);
  *e = std::min(n, u1 * grain);
}

void ThreadPool::part(int index, int64_t* b, int64_t* e) const { part_of(n_items_, grain_, n_, index, b, e); }

void ThreadPool::run(int64_t n, int64_t grain, Fn fn, void* ctx) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_ == 1 || n <= grain) {
    fn(ctx, 0, n, 0);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  n_items_ = n;
  grain_ = grain;
  pending_.store(n_ - 1, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lock(mu_);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  int64_t b, e;
  part(0, &b, &e);
  if (b < e) fn(ctx, b, e, 0);
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (idle_) idle_();
    std::this_thread::yield();
  }
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a while for the next job (steps follow each other closely), then sleep. Past kPauseTime
    // each turn yields the core: free, it comes straight back; wanted by another process (tests
    // run side by side, a server beside other work), that process runs instead of our spin.
    uint64_t g = generation_.load(std::memory_order_acquire);
    if (g == seen && spin_) {
      const auto start = std::chrono::steady_clock::now(), yield_from = start + kPauseTime, until = start + kSpinTime;
      bool yielding = false;
      for (int spin = 1; g == seen; ++spin) {
        if (idle_) idle_();
        if (yielding) {
          std::this_thread::yield();
        } else {
#if defined(__x86_64__)
          __builtin_ia32_pause();
#endif
        }
        g = generation_.load(std::memory_order_acquire);
        if (yielding || spin % 256 == 0) {
          const auto now = std::chrono::steady_clock::now();
          if (now >= until) break;
          yielding = now >= yield_from;
        }
      }
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_) return;
    int64_t b, e;
    part(index, &b, &e);
    if (b < e) fn_(ctx_, b, e, index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace ggflow::cpu
