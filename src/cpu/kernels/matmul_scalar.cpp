// The matmul scalar twin: the definition of every bit (spec in matmul.h). Plain C++, compiled
// without SIMD flags; integer sums are exact, the f32 operations are exactly the ones in matmul.h.
#include <cmath>
#include <cstring>

#include "cpu/kernels/matmul.h"
#include "gguf/dequant.h"

namespace ggflow::cpu::detail {
namespace {

using gguf::GgmlType;

constexpr int kTile = 8;  // tokens per tile (any value gives the same bits)

float f16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return gguf::f16_to_f32(v);
}

// ---- 32-blocks: signed integer codes w[i] (offset included) and the f32 fields ----
struct Dec32 {
  int8_t w[32];
  float d, m;
};

void dec_q4_0(const uint8_t* b, Dec32& o) {
  o.d = f16(b);
  for (int l = 0; l < 16; ++l) {
    o.w[l] = static_cast<int8_t>((b[2 + l] & 0xF) - 8);
    o.w[l + 16] = static_cast<int8_t>((b[2 + l] >> 4) - 8);
  }
}
void dec_q4_1(const uint8_t* b, Dec32& o) {
  o.d = f16(b);
  o.m = f16(b + 2);
  for (int l = 0; l < 16; ++l) {
    o.w[l] = static_cast<int8_t>(b[4 + l] & 0xF);
    o.w[l + 16] = static_cast<int8_t>(b[4 + l] >> 4);
  }
}
void dec_q5_0(const uint8_t* b, Dec32& o) {
  o.d = f16(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  for (int l = 0; l < 16; ++l) {
    o.w[l] = static_cast<int8_t>(((b[6 + l] & 0xF) | (((qh >> l) & 1) << 4)) - 16);
    o.w[l + 16] = static_cast<int8_t>(((b[6 + l] >> 4) | (((qh >> (l + 16)) & 1) << 4)) - 16);
  }
}
void dec_q5_1(const uint8_t* b, Dec32& o) {
  o.d = f16(b);
  o.m = f16(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  for (int l = 0; l < 16; ++l) {
    o.w[l] = static_cast<int8_t>((b[8 + l] & 0xF) | (((qh >> l) & 1) << 4));
    o.w[l + 16] = static_cast<int8_t>((b[8 + l] >> 4) | (((qh >> (l + 16)) & 1) << 4));
  }
}
void dec_q8_0(const uint8_t* b, Dec32& o) {
  o.d = f16(b);
  std::memcpy(o.w, b + 2, 32);
}

// The 8 lane chains of Q4_1 / Q5_1 summed as matmul.h says (a 256-bit register's halves, then
// pairs, then the last two).
float lane_sum(const float* l) {
  const float r0 = l[4] + l[0], r1 = l[5] + l[1], r2 = l[6] + l[2], r3 = l[7] + l[3];
  return (r0 + r2) + (r1 + r3);
}

template <void (*Dec)(const uint8_t*, Dec32&), bool kMin>
void gemm_q32(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C,
              int64_t ldc, int64_t n0, int64_t n1, int bsize) {
  const int64_t nb = K / 32;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = W + n * wrb;
    for (int64_t t0 = 0; t0 < T; t0 += kTile) {
      const int tt = static_cast<int>(T - t0 < kTile ? T - t0 : kTile);
      float acc[kTile] = {};
      float lane[kTile][8] = {}, ms[kTile] = {};  // kMin: the 8 lane chains and the min chain
      for (int64_t b = 0; b < nb; ++b) {
        Dec32 w;
        Dec(row + b * bsize, w);
        for (int t = 0; t < tt; ++t) {
          BlockQA32 a;
          std::memcpy(&a, X + (t0 + t) * xrb + b * sizeof(BlockQA32), sizeof a);
          if constexpr (kMin) {
            const float dd = w.d * a.d;
            for (int j = 0; j < 8; ++j) {
              int32_t p = 0;
              for (int i = 4 * j; i < 4 * j + 4; ++i) p += w.w[i] * a.q[i];
              lane[t][j] = std::fma(dd, static_cast<float>(p), lane[t][j]);
            }
            ms[t] = std::fma(w.m, a.s, ms[t]);
          } else {
            int32_t isum = 0;
            for (int i = 0; i < 32; ++i) isum += w.w[i] * a.q[i];
            acc[t] = std::fma(w.d * a.d, static_cast<float>(isum), acc[t]);
          }
        }
      }
      if constexpr (kMin)
        for (int t = 0; t < tt; ++t) acc[t] = lane_sum(lane[t]) + ms[t];
      for (int t = 0; t < tt; ++t) C[(t0 + t) * ldc + n] = acc[t];
    }
  }
}

// ---- 256-super-blocks: codes w[256], integer sub-block scales and mins, f32 d and dmin ----
struct DecK {
  int8_t w[256];
  int32_t sc[16];  // per sub-block (8 of 32 for Q4_K/Q5_K, 16 of 16 otherwise)
  int32_t m[16];
  float d, dmin;
};

void dec_q2_k(const uint8_t* b, DecK& o) {
  const uint8_t* qs = b + 16;
  o.d = f16(b + 80);
  o.dmin = f16(b + 82);
  for (int j = 0; j < 16; ++j) {
    o.sc[j] = b[j] & 0xF;
    o.m[j] = b[j] >> 4;
  }
  for (int e = 0; e < 256; ++e) {
    const int g = e / 128, j = (e % 128) / 32, l = e % 32;
    o.w[e] = static_cast<int8_t>((qs[g * 32 + l] >> (2 * j)) & 3);
  }
}
void dec_q3_k(const uint8_t* b, DecK& o) {
  const uint8_t* hm = b;
  const uint8_t* qs = b + 32;
  const uint8_t* s = b + 96;
  o.d = f16(b + 108);
  for (int k = 0; k < 16; ++k) {
    const int lo = (k < 8 ? s[k] : s[k - 8] >> 4) & 0xF;
    const int hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
    o.sc[k] = (lo | (hi << 4)) - 32;
  }
  for (int e = 0; e < 256; ++e) {
    const int g = e / 128, j = (e % 128) / 32, l = e % 32;
    const int ql = (qs[g * 32 + l] >> (2 * j)) & 3;
    const int hb = (hm[l] >> (e / 32)) & 1;
    o.w[e] = static_cast<int8_t>(ql + 4 * hb - 4);
  }
}
void scale_min_k4(const uint8_t* s, int j, int32_t* sc, int32_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
    *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}
void dec_q4_k(const uint8_t* b, DecK& o) {
  o.d = f16(b);
  o.dmin = f16(b + 2);
  const uint8_t* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    scale_min_k4(b + 4, j, &o.sc[j], &o.m[j]);
    for (int l = 0; l < 32; ++l) o.w[32 * j + l] = static_cast<int8_t>((qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0xF);
  }
}
void dec_q5_k(const uint8_t* b, DecK& o) {
  o.d = f16(b);
  o.dmin = f16(b + 2);
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    scale_min_k4(b + 4, j, &o.sc[j], &o.m[j]);
    for (int l = 0; l < 32; ++l)
      o.w[32 * j + l] =
          static_cast<int8_t>(((qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0xF) | (((qh[l] >> j) & 1) << 4));
  }
}
void dec_q6_k(const uint8_t* b, DecK& o) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  o.d = f16(b + 208);
  for (int j = 0; j < 16; ++j) o.sc[j] = static_cast<int8_t>(b[192 + j]);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 128, r = e % 128;
    const int lo = (ql[g * 64 + r % 64] >> (4 * (r / 64))) & 0xF;
    const int hi = (qh[g * 32 + r % 32] >> (2 * (r / 32))) & 3;
    o.w[e] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

// kSub: elements per sub-block (32 for Q4_K/Q5_K, 16 otherwise); kMin: the dmin/msum term.
template <void (*Dec)(const uint8_t*, DecK&), int kSub, bool kMin>
void gemm_qk(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C,
             int64_t ldc, int64_t n0, int64_t n1, int bsize) {
  const int64_t nb = K / 256;
  constexpr int nsub = 256 / kSub;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = W + n * wrb;
    for (int64_t t0 = 0; t0 < T; t0 += kTile) {
      const int tt = static_cast<int>(T - t0 < kTile ? T - t0 : kTile);
      float acc[kTile] = {};
      for (int64_t b = 0; b < nb; ++b) {
        DecK w;
        Dec(row + b * bsize, w);
        for (int t = 0; t < tt; ++t) {
          const uint8_t* ab = X + (t0 + t) * xrb + b * sizeof(BlockQA256);
          float da;
          int16_t bsums[16];
          int8_t q[256];
          std::memcpy(&da, ab + offsetof(BlockQA256, d), 4);
          std::memcpy(bsums, ab + offsetof(BlockQA256, bsums), sizeof bsums);
          std::memcpy(q, ab + offsetof(BlockQA256, q), sizeof q);
          int32_t isum = 0, msum = 0;
          for (int j = 0; j < nsub; ++j) {
            int32_t s = 0;
            for (int i = 0; i < kSub; ++i) s += w.w[j * kSub + i] * q[j * kSub + i];
            isum += w.sc[j] * s;
            if constexpr (kMin) {
              const int32_t bs = kSub == 32 ? bsums[2 * j] + bsums[2 * j + 1] : bsums[j];
              msum += w.m[j] * bs;
            }
          }
          acc[t] = std::fma(w.d * da, static_cast<float>(isum), acc[t]);
          if constexpr (kMin) acc[t] = std::fma(-(w.dmin * da), static_cast<float>(msum), acc[t]);
        }
      }
      for (int t = 0; t < tt; ++t) C[(t0 + t) * ldc + n] = acc[t];
    }
  }
}

// ---- F32 / F16 / BF16: one fma chain over k ----
float wf32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
float wf16(const uint8_t* p) { return f16(p); }
float wbf16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return gguf::bf16_to_f32(v);
}

template <float (*Load)(const uint8_t*), int kBytes>
void gemm_f(const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T, float* C, int64_t ldc,
            int64_t n0, int64_t n1) {
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = W + n * wrb;
    for (int64_t t = 0; t < T; ++t) {
      const uint8_t* x = X + t * xrb;
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc = std::fma(Load(row + k * kBytes), wf32(x + 4 * k), acc);
      C[t * ldc + n] = acc;
    }
  }
}

}  // namespace

void matmul_scalar(GgmlType wtype, const uint8_t* W, size_t wrb, int64_t K, const uint8_t* X, size_t xrb, int64_t T,
                   float* C, int64_t ldc, int64_t n0, int64_t n1) {
  const int bs = static_cast<int>(gguf::traits(wtype).type_size);
  switch (wtype) {
    case GgmlType::F32: return gemm_f<wf32, 4>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::F16: return gemm_f<wf16, 2>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::BF16: return gemm_f<wbf16, 2>(W, wrb, K, X, xrb, T, C, ldc, n0, n1);
    case GgmlType::Q4_0: return gemm_q32<dec_q4_0, false>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q4_1: return gemm_q32<dec_q4_1, true>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q5_0: return gemm_q32<dec_q5_0, false>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q5_1: return gemm_q32<dec_q5_1, true>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q8_0: return gemm_q32<dec_q8_0, false>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q2_K: return gemm_qk<dec_q2_k, 16, true>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q3_K: return gemm_qk<dec_q3_k, 16, false>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q4_K: return gemm_qk<dec_q4_k, 32, true>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q5_K: return gemm_qk<dec_q5_k, 32, true>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    case GgmlType::Q6_K: return gemm_qk<dec_q6_k, 16, false>(W, wrb, K, X, xrb, T, C, ldc, n0, n1, bs);
    default: return;
  }
}

}  // namespace ggflow::cpu::detail
