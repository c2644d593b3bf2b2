#include "cpu/kernels/side_prefetch.h"

namespace ggflow::cpu {

SidePrefetch& side_prefetch() {
  thread_local SidePrefetch q;
  return q;
}

}  // namespace ggflow::cpu
