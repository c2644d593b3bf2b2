// Weights repacked at load for the packed matmul kernels (cpu/kernels/matmul_packed.h): one copy per
// weight per process, shared by every executor that multiplies by it (the pipelines of one server,
// the layouts of one test), freed with the last of them.
//
// Memory: a packed copy has the size of the GGUF rows (plus at most 15 padding rows), in memory
// aligned to 2 MiB and advised for transparent huge pages. Once a weight is packed, the pages of
// its GGUF bytes are released when they belong to the model file's mapping
// (gguf::release_file_pages), so the resident size stays about one copy of the weights; anything
// else that reads those bytes later (a tied embedding's row lookup) faults in just what it reads.
// GGFLOW_REPACK=0 turns packing off (the GGUF layout and matmul.h's kernels; same bits).
#pragma once

#include <cstdint>
#include <memory>

#include "cpu/isa.h"
#include "cpu/thread_pool.h"
#include "gguf/types.h"

namespace ggflow::cpu {

struct PackedWeight {
  gguf::GgmlType type;
  int64_t N = 0, K = 0;
  uint8_t* data = nullptr;
  size_t bytes = 0;
  ~PackedWeight();
};

// True unless GGFLOW_REPACK=0.
bool repack_enabled();

// The packed copy of the [N, K] weight W (rows of w_row_bytes) for `isa`, packed now on `pool`'s
// threads or found from an earlier call with the same weight; nullptr when packing does not apply
// (type or ISA without a packed kernel, GGFLOW_REPACK=0) or memory is short (the GGUF layout is
// used then: slower, the same bits).
std::shared_ptr<const PackedWeight> packed_weight(Isa isa, gguf::GgmlType type, const uint8_t* W, size_t w_row_bytes,
                                                  int64_t N, int64_t K, ThreadPool* pool);

}  // namespace ggflow::cpu
