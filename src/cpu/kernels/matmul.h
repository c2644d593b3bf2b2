// Matrix multiplication C[t][n] = sum_k W[n][k] * X[t][k] for GGUF weight matrices read in place
// (row-major, weight row n = K/blocksize blocks contiguous at W + n*w_row_bytes).
//
// ============================== THE NUMERICS SPECIFICATION ==============================
// The scalar twin (matmul_scalar.cpp) defines the bits; the AVX2 (matmul_avx2.cpp) and AVX-512
// (matmul_avx512.cpp) versions reproduce them exactly (tests/cpu/test_matmul_kernels.cpp, memcmp).
// Every output element C[t][n] is ONE f32 chain `acc` (Q4_1 / Q5_1: the nine chains below, llama.cpp's
// order), starting at +0.0f, over the blocks of row n in order b = 0, 1, ...; SIMD lanes run over
// outputs (rows, tokens, and those nine chains), never along a chain. So the
// result does not depend on T, on the [n0, n1) range a call covers, on the thread, or on the ISA;
// GEMV (T = 1) and GEMM (T > 1) give the same bits per element. Integer sums are exact, so they are
// computed in any order (VNNI vpdpbusd, maddubs, ...). All f32 operations are written below; fma is
// one rounding (std::fma), every other operation rounds to f32; (float)i is int32->f32 round to
// nearest even (exact for |i| < 2^24).
//
// F32 / F16 / BF16 weights, f32 activations x (no quantization):
//   acc = fma(w[k], x[k], acc) for k = 0 .. K-1, w converted exactly to f32.
//
// Quantized weights meet activations quantized by quantize_act (quant_act.h): per 32-block
// {da, sa = da*(float)suma, suma = sum qa, qa[32]}, per 256-super-block {da, bsums[16], qa[256]}.
// Below, dw/mw/d/dmin are the block's f16 fields converted exactly to f32, q the weight's codes.
//   Q4_0  q in 0..15           isum = sum_i (q_i - 8) * qa_i
//                              acc = fma(dw*da, (float)isum, acc)
//   Q4_1  q in 0..15           8 lane sums  p_j = sum_{i = 4j..4j+3} q_i * qa_i   (j = 0..7)
//                              l_j = fma(dw*da, (float)p_j, l_j);  ms = fma(mw, sa, ms)
//         and at the end       acc = (((l_0 + l_4) + (l_2 + l_6)) + ((l_1 + l_5) + (l_3 + l_7))) + ms
//         (llama.cpp's x86 ggml_vec_dot_q4_1_q8_1: one 8-lane f32 register of per-4-element sums,
//         the min term summed apart, then its hsum_float_8; where the two parts cancel, a single
//         chain rounds visibly differently: greedy flips at llama.cpp margins up to 0.07)
//   Q5_0  q in 0..31           isum = sum_i (q_i - 16) * qa_i
//                              acc = fma(dw*da, (float)isum, acc)
//   Q5_1  q in 0..31           as Q4_1 (llama.cpp's ggml_vec_dot_q5_1_q8_1 has the same order)
//   Q8_0  q in -128..127       isum = sum_i q_i * qa_i
//                              acc = fma(dw*da, (float)isum, acc)
//   Q2_K  16 sub-blocks j of 16, q in 0..3, scale sc_j = scales[j] & 15, min m_j = scales[j] >> 4
//         isum = sum_j sc_j * sum_{i in j} q_i*qa_i;   msum = sum_j m_j * bsums[j]
//         acc = fma(d*da, (float)isum, acc);  acc = fma(-(dmin*da), (float)msum, acc)
//   Q3_K  16 sub-blocks of 16, q = low 2 bits + 4*hmask bit - 4 in -4..3, scale s_j = 6-bit - 32
//         isum = sum_j s_j * sum_{i in j} q_i*qa_i
//         acc = fma(d*da, (float)isum, acc)
//   Q4_K  8 sub-blocks j of 32, q in 0..15, 6-bit sc_j and m_j
//         isum = sum_j sc_j * sum_{i in j} q_i*qa_i;   msum = sum_j m_j * (bsums[2j] + bsums[2j+1])
//         acc = fma(d*da, (float)isum, acc);  acc = fma(-(dmin*da), (float)msum, acc)
//   Q5_K  as Q4_K with q in 0..31 (5th bit from qh)
//   Q6_K  16 sub-blocks j of 16, q in 0..63, int8 scale sc_j
//         isum = sum_j sc_j * sum_{i in j} (q_i - 32)*qa_i
//         acc = fma(d*da, (float)isum, acc)
// (dw*da, d*da, dmin*da: one f32 multiply each; -(x) is exact. The integer sums fit int32:
// the largest, Q6_K, is below 2^28.) Finally C[t][n] = acc.
//
// Accuracy against exact math (the f64 oracle of the tests): the f32 chain is accurate to a few
// ulp per block; what costs accuracy is int8 activations (relative error ~ 1/254 of the block's
// largest |x| per element, NMSE ~ 1e-5..1e-4 of the output for typical data; see the tests).
// NaN: finite inputs give identical bits everywhere; a non-finite input gives a non-finite output
// on every ISA, but a NaN's payload and sign are not part of the contract.
// ========================================================================================
//
// All of this assumes the default floating-point environment (round to nearest even, no FTZ/DAZ).
//
// Performance shape: rows are processed 16 (AVX-512) or 8 (AVX2) at a time, one output lane per
// row; tokens in tiles of up to 8, so each weight block is decoded once per tile and reused from
// registers (32-blocks) or an L1 buffer (K types). A row group's weights are contiguous; the next
// group is software-prefetched while this one computes. GEMV (T = 1) streams the weights once;
// GEMM keeps one row group in L1 while all token tiles pass over it. The SIMD files' comments
// describe the integer layouts (vpdpbusd on AVX-512, maddubs+madd on AVX2).
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/result.h"
#include "cpu/isa.h"
#include "cpu/kernels/quant_act.h"
#include "gguf/types.h"

namespace ggflow::cpu {

// True for the weight types matmul handles (the 13 above).
bool matmul_supports(gguf::GgmlType wtype);

// C[t*ldc + n] for t in [0, T), n in [n0, n1): rows n of W (row n at W + n*w_row_bytes) times
// activation rows t (row t at (const uint8_t*)X + t*x_row_bytes): quantized rows from
// quantize_act for quantized weight types, plain f32 rows for F32/F16/BF16 weights.
// Requirements (else an Error, nothing written): supported type and ISA, K > 0 and a multiple of
// the block size, w_row_bytes >= the row's bytes, x_row_bytes >= quant_act_row_bytes(wtype, K),
// 0 <= n0 <= n1, T >= 0, ldc >= n1 when T > 1. Thread-safe (threads take disjoint [n0, n1)),
// allocation-free, no alignment requirement on any pointer.
Status matmul(Isa isa, gguf::GgmlType wtype, const uint8_t* W, size_t w_row_bytes, int64_t K, const void* X,
              size_t x_row_bytes, int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);

namespace detail {
// Per-ISA bodies with validated arguments (matmul checks them). X as bytes.
void matmul_scalar(gguf::GgmlType wtype, const uint8_t* W, size_t w_row_bytes, int64_t K, const uint8_t* X,
                   size_t x_row_bytes, int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);
void matmul_avx2(gguf::GgmlType wtype, const uint8_t* W, size_t w_row_bytes, int64_t K, const uint8_t* X,
                 size_t x_row_bytes, int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);
void matmul_avx512(gguf::GgmlType wtype, const uint8_t* W, size_t w_row_bytes, int64_t K, const uint8_t* X,
                   size_t x_row_bytes, int64_t T, float* C, int64_t ldc, int64_t n0, int64_t n1);
}  // namespace detail

}  // namespace ggflow::cpu
