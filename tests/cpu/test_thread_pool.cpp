// ThreadPool: every index of a job is visited exactly once, by the part its thread owns, for many
// job sizes, grains and thread counts, back to back (the spin-then-sleep hand-over between jobs is
// where a race would hide; the ThreadSanitizer build runs this test). With more threads than
// cores (3 and 5 on a 2-core machine) the workers sleep at once instead of spinning.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "cpu/thread_pool.h"

using ggflow::cpu::ThreadPool;

TEST(ThreadPool, EachIndexOnceInContiguousGrainAlignedParts) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1000}) {
      for (int64_t grain : {1, 4, 32}) {
        std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
        std::vector<int> owner(static_cast<size_t>(n), -1);
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int t) {
          ASSERT_LE(b, e);
          ASSERT_GE(t, 0);
          ASSERT_LT(t, threads);
          if (e < n) {
            EXPECT_EQ((e - b) % grain, 0) << "a part that is not the last is a multiple of the grain";
          }
          for (int64_t i = b; i < e; ++i) {
            seen[size_t(i)].fetch_add(1, std::memory_order_relaxed);
            owner[size_t(i)] = t;  // each index written by one thread only
          }
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[size_t(i)].load(), 1) << "n=" << n << " grain=" << grain << " i=" << i;
        for (int64_t i = 1; i < n; ++i) ASSERT_LE(owner[size_t(i - 1)], owner[size_t(i)]) << "parts are contiguous, in thread order";
      }
    }
  }
}

// part_of says which part a thread will get (the executor prefetches a thread's part of the next
// job by it): the same [b, e) parallel_for hands that thread, for every size, grain and count.
TEST(ThreadPool, PartOfIsThePartEachThreadGets) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 17, 64, 1000, 3072}) {
      for (int64_t grain : {1, 4, 16}) {
        if (n <= grain || threads == 1) continue;  // run inline as one part (0, n)
        std::vector<std::pair<int64_t, int64_t>> got(static_cast<size_t>(threads), {-1, -1});
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e, int t) { got[size_t(t)] = {b, e}; });
        for (int t = 0; t < threads; ++t) {
          int64_t b = -2, e = -2;
          ThreadPool::part_of(n, grain, threads, t, &b, &e);
          if (b == e) continue;  // an empty part is not run
          EXPECT_EQ(got[size_t(t)], std::make_pair(b, e)) << "n=" << n << " grain=" << grain << " thread " << t;
        }
      }
    }
  }
}

// The idle function runs on threads that wait (a worker between jobs, the caller for the other
// parts), never inside a part, and the jobs' results are unaffected.
thread_local bool g_in_part = false;
std::atomic<int64_t> g_idle_calls{0}, g_idle_in_part{0};
void count_idle() {
  g_idle_calls.fetch_add(1, std::memory_order_relaxed);
  if (g_in_part) g_idle_in_part.fetch_add(1, std::memory_order_relaxed);
}

TEST(ThreadPool, IdleFunctionRunsWhileThreadsWait) {
  ThreadPool pool(2, &count_idle);
  std::vector<int64_t> data(1024, 0);
  for (int job = 0; job < 200; ++job) {
    pool.parallel_for(int64_t(data.size()), 16, [&](int64_t b, int64_t e, int t) {
      g_in_part = true;
      if (t == 0 && job % 10 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));  // the worker waits
      for (int64_t i = b; i < e; ++i) data[size_t(i)] += i;
      g_in_part = false;
    });
  }
  for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], int64_t(i) * 200);
  EXPECT_GT(g_idle_calls.load(), 0);
  EXPECT_EQ(g_idle_in_part.load(), 0);
}

TEST(ThreadPool, ManyJobsBackToBackWithResultsVisibleAfterReturn) {
  for (int threads : {2, 3}) {  // on 2 cores: workers that spin (5 ms) before sleeping, and ones that sleep at once
    ThreadPool pool(threads);
    std::vector<int64_t> data(4096, 0);
    for (int job = 0; job < 2000; ++job) {
      pool.parallel_for(int64_t(data.size()), 16, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) data[size_t(i)] += i;
      });
      if (job % 500 == 499) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // past the spin: workers sleep
    }
    for (size_t i = 0; i < data.size(); ++i) ASSERT_EQ(data[i], int64_t(i) * 2000) << threads << " threads";
  }
}

TEST(ThreadPool, CreatedAndDestroyedRepeatedly) {
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool(1 + i % 4);
    std::atomic<int64_t> sum{0};
    pool.parallel_for(100, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t k = b; k < e; ++k) sum += k;
    });
    ASSERT_EQ(sum.load(), 4950);
  }
}
