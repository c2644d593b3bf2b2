// A fixed pool of threads for the CPU executor: created once (n - 1 workers; the calling thread is
// the n-th), no thread is created per step. Between jobs a worker spins (kSpinTime: pausing, then
// yielding the core on each turn), then sleeps on a condition variable. A job is a range [0, n)
// split statically into one contiguous part per thread; kernels split only over outputs (rows,
// heads, tokens), so a part's results do not depend on the split and the thread count never
// changes a bit.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace ggflow::cpu {

class ThreadPool {
 public:
  // threads >= 1 (clamped). `idle`, if any, is called over and over by a thread waiting for a job
  // or for the other parts of its job (keep it to a few instructions: prefetches).
  explicit ThreadPool(int threads, void (*idle)() = nullptr);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_; }
  // The part [*b, *e) thread `index` of `threads` takes of a job of n items in grains of `grain`.
  static void part_of(int64_t n, int64_t grain, int threads, int index, int64_t* b, int64_t* e);
  // Calls f(begin, end, thread) on disjoint parts covering [0, n), one per thread (thread in
  // [0, size())); each part a multiple of `grain` (but the last). Returns when all parts are
  // done. Not reentrant.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& f) {
    using Fd = std::remove_reference_t<F>;
    auto call = [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<Fd*>(ctx))(b, e, t); };
    run(n, grain, call, const_cast<void*>(static_cast<const void*>(&f)));
  }

 private:
  using Fn = void (*)(void*, int64_t, int64_t, int);
  void run(int64_t n, int64_t grain, Fn fn, void* ctx);
  void worker(int index);
  void part(int index, int64_t* b, int64_t* e) const;

  int n_;
  // How long a worker spins for the next job before it sleeps. Long enough to span the serial work
  // between two decode steps (sampling, scheduling: up to ~2.5 ms at 8 sequences): waking a sleeping
  // worker costs far more than the spin on a VM (about 0.8 ms per step at 8 sequences here, where
  // 20000 pauses, 0.24 ms, let the worker sleep once per step; docs/BENCHMARKS.md, seventh session).
  static constexpr std::chrono::microseconds kSpinTime{5000};
  // The first part of the spin only pauses; the rest yields the core on each turn.
  static constexpr std::chrono::microseconds kPauseTime{200};
  bool spin_;  // false with more threads than cores: sleep at once
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  Fn fn_ = nullptr;
  void (*const idle_)();
  void* ctx_ = nullptr;
  int64_t n_items_ = 0, grain_ = 1;
};

}  // namespace ggflow::cpu
