// Prefetches one step queues for a later step to issue a few cache lines at a time beside its own
// work. A decode batch's attention is bound by its core's misses into the KV cache while the
// matmuls between two attention steps are bound by their int8 arithmetic: the attention step of
// layer l queues the rows the same thread will read in layer l+1, and the packed matmul kernels
// issue a few of those lines per weight block (towards L2). Prefetches never fault and change no
// value: a stale or dropped range costs time only.
#pragma once

#include <cstdint>

namespace ggflow::cpu {

struct SidePrefetch {
  static constexpr int kMaxRanges = 1024;  // more are dropped
  struct Range {
    const char* p;
    int64_t bytes;
  };
  Range ranges[kMaxRanges];
  int count = 0, next = 0;
  int64_t offset = 0;  // into ranges[next]

  void clear() { count = next = 0, offset = 0; }
  void add(const void* p, int64_t bytes) {
    if (count < kMaxRanges && bytes > 0) ranges[count++] = {static_cast<const char*>(p), bytes};
  }
  bool empty() const { return next == count; }
};

// This thread's queue.
SidePrefetch& side_prefetch();
// This thread's part of the next matmul job's weights (the executor queues it when the thread's
// part of a job is done), issued by idle_prefetch while the thread waits: for the other part, for
// the next job while the calling thread runs the serial steps in between (norms, adds, the
// activation quantization), or between two runs. A decode step's matmuls are bound by how many
// weight lines a core has in flight; a waiting core's lines are free.
SidePrefetch& weight_prefetch();
// Issues up to kIdleLines lines of weight_prefetch(): the executor's ThreadPool idle function (1-64
// lines measured, 16 kept).
constexpr int kIdleLines = 16;
void idle_prefetch();

// Issues up to `lines` queued cache lines (prefetcht1: L2). `static`: the SIMD files each keep their own copy.
static inline void side_prefetch_step(SidePrefetch& q, int lines) {
  while (lines-- > 0 && q.next < q.count) {
    const SidePrefetch::Range& r = q.ranges[q.next];
    __builtin_prefetch(r.p + q.offset, 0, 2);
    q.offset += 64;
    if (q.offset >= r.bytes) ++q.next, q.offset = 0;
  }
}

}  // namespace ggflow::cpu
