// Weights repacked at load for the packed matmul kernels (cpu/kernels/matmul_packed.h): one copy per
// weight per process, shared by every executor that multiplies by it (the pipelines of one server,
// the layouts of one test), freed with the last of them.
//
// Memory: the weights an executor packs are carved from one arena, aligned to 2 MiB and advised
// for transparent huge pages (so a decode step's weight stream crosses few TLB entries and the
// hardware prefetcher is not stopped at every 4 KiB); a packed copy has the size of the GGUF rows
// (plus at most 15 padding rows). Once a weight is packed, the pages of its GGUF bytes are released
// when they belong to the model file's mapping (gguf::release_file_pages), so the resident size
// stays about one copy of the weights; anything that reads those bytes later (a tied embedding's
// row lookup) faults in just what it reads. GGFLOW_REPACK=0 turns packing off (the GGUF layout and
// matmul.h's kernels; the same bits).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "cpu/isa.h"
#include "cpu/thread_pool.h"
#include "gguf/types.h"

namespace ggflow::cpu {

struct PackedArena;

struct PackedWeight {
  gguf::GgmlType type;
  int64_t N = 0, K = 0;
  const uint8_t* data = nullptr;
  size_t bytes = 0;
  std::shared_ptr<PackedArena> arena;  // owns `data`
};

// One [N, K] weight W (rows of w_row_bytes) to pack; `packed` receives its copy, or stays null when
// packing does not apply (type or ISA without a packed kernel, GGFLOW_REPACK=0) or memory is short
// (the GGUF layout is used then: slower, the same bits).
struct PackRequest {
  gguf::GgmlType type;
  const uint8_t* W = nullptr;
  size_t w_row_bytes = 0;
  int64_t N = 0, K = 0;
  std::shared_ptr<const PackedWeight> packed;
};

// True unless GGFLOW_REPACK=0.
bool repack_enabled();

// Fills every request's `packed`: weights packed earlier in this process are shared, the others are
// packed now into one new arena on `pool`'s threads.
void pack_weights(Isa isa, std::span<PackRequest> requests, ThreadPool* pool);

}  // namespace ggflow::cpu
