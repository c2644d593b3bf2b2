#include "cpu/kernels/side_prefetch.h"

namespace ggflow::cpu {

SidePrefetch& side_prefetch() {
  thread_local SidePrefetch q;
  return q;
}

SidePrefetch& weight_prefetch() {
  thread_local SidePrefetch q;
  return q;
}

void idle_prefetch() {
  SidePrefetch& q = weight_prefetch();
  if (!q.empty()) side_prefetch_step(q, kIdleLines);
}

}  // namespace ggflow::cpu
