// Packed weights (layout in matmul_packed.h): packing, unpacking, argument checks, dispatch, and the
// scalar path, which unpacks a row and runs matmul's scalar twin on it (so it is the twin).
#include "cpu/kernels/matmul_packed.h"

#include <cstring>
#include <string>
#include <vector>

#include "cpu/kernels/matmul.h"
#include "cpu/kernels/quant_act.h"

namespace ggflow::cpu {

using gguf::GgmlType;

namespace {

// Where a block's parts sit in the GGUF block and in the packed group block (32-blocks).
struct Parts {
  int fields;  // bytes of f16 fields before the codes in a GGUF block (2: d, 4: d and m)
  int chunks;  // dword chunks of codes (4: 16 bytes of nibbles, 8: 32 bytes of int8)
  bool qh;     // a u32 of fifth bits after the fields (Q5_0, Q5_1)
};

bool parts_of(GgmlType t, Parts* p) {
  switch (t) {
    case GgmlType::Q4_0: *p = {2, 4, false}; return true;
    case GgmlType::Q4_1: *p = {4, 4, false}; return true;
    case GgmlType::Q5_0: *p = {2, 4, true}; return true;
    case GgmlType::Q5_1: *p = {4, 4, true}; return true;
    case GgmlType::Q8_0: *p = {2, 8, false}; return true;
    default: return false;
  }
}

// Super-blocks (Q4_K, Q6_K): the GGUF block as runs of `count` chunks of `width` bytes at
// `gguf_off`; chunk c of row r goes to packed_off + (16c + r) * width (matmul_packed.h).
struct Run {
  int gguf_off, width, count, packed_off;
};
struct SuperParts {
  int nruns;
  Run runs[4];
};

bool super_parts_of(GgmlType t, SuperParts* p) {
  switch (t) {
    case GgmlType::Q4_K: *p = {4, {{0, 2, 1, 0}, {2, 2, 1, 32}, {4, 4, 3, 64}, {16, 4, 32, 256}}}; return true;
    case GgmlType::Q6_K: *p = {4, {{208, 2, 1, 0}, {192, 2, 8, 32}, {0, 4, 32, 288}, {128, 4, 16, 2336}}}; return true;
    default: return false;
  }
}

// GGUF's qh (bit e = fifth bit of element e) <-> the packed order (byte i = the bits of elements
// 4i..4i+3 in its low nibble and of 16+4i..16+4i+3 in its high nibble: chunk i's bits).
uint32_t qh_to_packed(uint32_t qh) {
  uint32_t o = 0;
  for (int i = 0; i < 4; ++i) o |= (((qh >> (4 * i)) & 0xF) | (((qh >> (16 + 4 * i)) & 0xF) << 4)) << (8 * i);
  return o;
}
uint32_t qh_from_packed(uint32_t o) {
  uint32_t qh = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t b = (o >> (8 * i)) & 0xFF;
    qh |= ((b & 0xF) << (4 * i)) | ((b >> 4) << (16 + 4 * i));
  }
  return qh;
}

// Copies between one GGUF block of row r and its place in a packed group block; to_packed picks
// the direction.
void move_block(GgmlType t, uint8_t* gguf_block, uint8_t* group_block, int r, bool to_packed) {
  auto mv = [&](uint8_t* g, uint8_t* p, size_t n) { to_packed ? std::memcpy(p, g, n) : std::memcpy(g, p, n); };
  SuperParts sp;
  if (super_parts_of(t, &sp)) {
    for (int k = 0; k < sp.nruns; ++k) {
      const Run& run = sp.runs[k];
      for (int c = 0; c < run.count; ++c)
        mv(gguf_block + run.gguf_off + c * run.width, group_block + run.packed_off + (16 * c + r) * run.width,
           static_cast<size_t>(run.width));
    }
    return;
  }
  Parts pt;
  if (!parts_of(t, &pt)) return;
  for (int f = 0; f < pt.fields / 2; ++f) mv(gguf_block + 2 * f, group_block + 32 * f + 2 * r, 2);
  uint8_t* q = group_block + 16 * pt.fields;
  const uint8_t* codes = gguf_block + pt.fields;
  if (pt.qh) {
    uint32_t v;
    if (to_packed) {
      std::memcpy(&v, gguf_block + pt.fields, 4);
      v = qh_to_packed(v);
      std::memcpy(q + 4 * r, &v, 4);
    } else {
      std::memcpy(&v, q + 4 * r, 4);
      v = qh_from_packed(v);
      std::memcpy(gguf_block + pt.fields, &v, 4);
    }
    q += 64;
    codes += 4;
  }
  for (int i = 0; i < pt.chunks; ++i) mv(const_cast<uint8_t*>(codes) + 4 * i, q + 64 * i + 4 * r, 4);
}

// Elements per block of a packed type: 32 or 256 (super-blocks).
int64_t block_elems(GgmlType t) {
  SuperParts sp;
  return super_parts_of(t, &sp) ? 256 : 32;
}

}  // namespace

bool packed_layout(GgmlType t) {
  Parts p;
  SuperParts sp;
  return parts_of(t, &p) || super_parts_of(t, &sp);
}

bool packed_supports(Isa isa, GgmlType t) {
  Parts p;
  return (isa == Isa::avx512 && packed_layout(t)) || (isa == Isa::avx2 && (parts_of(t, &p) || t == GgmlType::Q4_K || t == GgmlType::Q6_K));
}

size_t packed_bytes(GgmlType t, int64_t N, int64_t K) {
  if (!packed_layout(t) || K <= 0 || K % block_elems(t) != 0 || N <= 0) return 0;
  const int64_t groups = (N + kPackRows - 1) / kPackRows;
  return static_cast<size_t>(groups * kPackRows * (K / block_elems(t))) * gguf::traits(t).type_size;
}

void pack_groups(GgmlType t, const uint8_t* W, size_t wrb, int64_t N, int64_t K, uint8_t* P, int64_t g0, int64_t g1) {
  if (!packed_layout(t)) return;
  const int64_t nb = K / block_elems(t);
  const size_t bs = gguf::traits(t).type_size, gbs = kPackRows * bs;
  for (int64_t g = g0; g < g1; ++g)
    for (int r = 0; r < kPackRows; ++r) {
      const int64_t n = std::min(g * kPackRows + r, N - 1);
      for (int64_t b = 0; b < nb; ++b)
        move_block(t, const_cast<uint8_t*>(W + n * wrb + b * bs), P + (g * nb + b) * gbs, r, true);
    }
}

void unpack_row(GgmlType t, const uint8_t* P, int64_t K, int64_t n, uint8_t* row) {
  if (!packed_layout(t)) return;
  const int64_t nb = K / block_elems(t), g = n / kPackRows;
  const int r = static_cast<int>(n % kPackRows);
  const size_t bs = gguf::traits(t).type_size, gbs = kPackRows * bs;
  for (int64_t b = 0; b < nb; ++b)
    move_block(t, row + b * bs, const_cast<uint8_t*>(P + (g * nb + b) * gbs), r, false);
}

Status matmul_packed(Isa isa, GgmlType t, const uint8_t* P, int64_t N, int64_t K, const void* X, size_t xrb,
                     int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1) {
  if (!packed_layout(t))
    return make_error("matmul_packed: no packed layout for " + std::string(gguf::traits(t).name) + " weights",
                      "packed types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q6_K; use matmul on the GGUF layout");
  const int64_t be = block_elems(t);
  if (K <= 0 || K % be != 0)
    return make_error("matmul_packed: K=" + std::to_string(K) + " is not a positive multiple of " + std::to_string(be));
  if (T > 0 && xrb < quant_act_row_bytes(t, K))
    return make_error("matmul_packed: x_row_bytes=" + std::to_string(xrb) + " is less than one activation row",
                      "quantize activations with quantize_act for this weight type");
  if (T < 0 || n0 < 0 || n1 < n0 || n1 > N || n0 % kPackRows != 0 || (n1 % kPackRows != 0 && n1 != N))
    return make_error("matmul_packed: bad range (T=" + std::to_string(T) + ", rows [" + std::to_string(n0) + ", " +
                          std::to_string(n1) + ") of " + std::to_string(N) + ")",
                      "row ranges start on a multiple of 16 and end on one or at N");
  if (T > 1 && ldc < n1) return make_error("matmul_packed: ldc=" + std::to_string(ldc) + " is less than n1=" + std::to_string(n1));
  if (T == 0 || n0 == n1) return {};
  if (!P || !X || !C) return make_error("matmul_packed: null pointer");
  if (!isa_supported(isa)) return make_error("matmul_packed: ISA " + std::string(to_string(isa)) + " not supported here");
  const auto* x = static_cast<const uint8_t*>(X);
  if (isa == Isa::avx512) {
    detail::matmul_packed_avx512(t, P, N, K, x, xrb, T, C, ldc, n0, n1);
    return {};
  }
  if (isa == Isa::avx2 && detail::matmul_packed_avx2(t, P, K, x, xrb, T, C, ldc, n0, n1)) return {};
  // Any other ISA or type: the twin, one unpacked row at a time (the same bits by definition).
  const size_t wrb = static_cast<size_t>(K / be) * gguf::traits(t).type_size;
  thread_local std::vector<uint8_t> row;
  row.resize(wrb);
  for (int64_t n = n0; n < n1; ++n) {
    unpack_row(t, P, K, n, row.data());
    detail::matmul_scalar(t, row.data(), wrb, K, x, xrb, T, C + n, ldc, 0, 1);
  }
  return {};
}

}  // namespace ggflow::cpu
